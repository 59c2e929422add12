// Conditional requests: entity tags and dates on reads (RFC 9110's order) and on writes.

#include "conditions.h"

#include "time_format.h"

#include "hots3/common/text.h"

namespace hots3::s3 {

std::string quoted(std::string_view etag) {
  std::string out;  // (one allocation: an ETag is longer than a short string's room)
  out.reserve(etag.size() + 2);
  out.append(1, '"').append(etag).append(1, '"');
  return out;
}

std::string unquoted(std::string_view etag) {
  std::string_view e = etag;
  while (!e.empty() && (e.front() == ' ' || e.front() == '\t')) e.remove_prefix(1);
  while (!e.empty() && (e.back() == ' ' || e.back() == '\t')) e.remove_suffix(1);
  if (e.starts_with("W/")) e.remove_prefix(2);
  if (e.size() >= 2 && e.front() == '"' && e.back() == '"') e = e.substr(1, e.size() - 2);
  return std::string(e);
}

bool etag_matches(std::string_view list, std::string_view etag) {
  std::size_t at = 0;
  while (at <= list.size()) {
    const auto comma = list.find(',', at);
    const std::string item = unquoted(
        list.substr(at, comma == std::string_view::npos ? std::string_view::npos : comma - at));
    if (item == "*" || item == etag) return true;
    if (comma == std::string_view::npos) break;
    at = comma + 1;
  }
  return false;
}

std::variant<storage::WriteCondition, Error> write_condition(const Request& r) {
  storage::WriteCondition c;
  if (auto none = r.header("if-none-match")) {
    if (unquoted(*none) != "*")
      return Error(Code::kNotImplemented, "If-None-Match on writes supports only \"*\".");
    c.if_none_match_any = true;
  }
  if (auto match = r.header("if-match")) c.if_match = unquoted(*match);
  return c;
}

std::variant<storage::DeleteCondition, Error> delete_condition(const Request& r) {
  storage::DeleteCondition c;
  if (auto match = r.header("if-match")) c.if_match = unquoted(*match);
  if (auto modified = r.header("x-amz-if-match-last-modified-time")) {
    auto ms = parse_http_date(*modified);
    if (!ms) {
      return Error(Code::kInvalidArgument, "Invalid x-amz-if-match-last-modified-time")
          .with("ArgumentName", "x-amz-if-match-last-modified-time");
    }
    c.last_modified_s = *ms / 1000;
  }
  if (auto size = r.header("x-amz-if-match-size")) {
    c.size_bytes = parse_decimal<std::uint64_t>(*size);
    if (!c.size_bytes) {
      return Error(Code::kInvalidArgument, "Invalid x-amz-if-match-size")
          .with("ArgumentName", "x-amz-if-match-size");
    }
  }
  return c;
}

std::optional<Error> read_conditions(const Request& r, const storage::ObjectRecord& object,
                                     bool copy_source) {
  // The headers' names as constants: every GET and HEAD looks all four up.
  struct Names {
    std::string_view if_match, if_none_match, if_unmodified, if_modified;
  };
  static constexpr Names kObject{"if-match", "if-none-match", "if-unmodified-since",
                                 "if-modified-since"};
  static constexpr Names kCopySource{
      "x-amz-copy-source-if-match", "x-amz-copy-source-if-none-match",
      "x-amz-copy-source-if-unmodified-since", "x-amz-copy-source-if-modified-since"};
  const Names& names = copy_source ? kCopySource : kObject;
  const std::int64_t modified_s = object.created_ms / 1000;
  const auto if_match = r.header(names.if_match);
  const auto if_none_match = r.header(names.if_none_match);
  const auto if_unmodified = r.header(names.if_unmodified);
  const auto if_modified = r.header(names.if_modified);
  const std::string condition_prefix = copy_source ? "x-amz-copy-source-" : "";
  if (if_match) {
    if (!etag_matches(*if_match, object.etag))
      return Error(Code::kPreconditionFailed).with("Condition", condition_prefix + "If-Match");
  } else if (if_unmodified) {
    if (auto t = parse_http_date(*if_unmodified); t && modified_s > *t / 1000) {
      return Error(Code::kPreconditionFailed)
          .with("Condition", condition_prefix + "If-Unmodified-Since");
    }
  }
  if (if_none_match) {
    if (etag_matches(*if_none_match, object.etag)) {
      if (copy_source)
        return Error(Code::kPreconditionFailed)
            .with("Condition", "x-amz-copy-source-If-None-Match");
      return Error(Code::kNotModified);
    }
  } else if (if_modified) {
    if (auto t = parse_http_date(*if_modified); t && modified_s <= *t / 1000) {
      if (copy_source)
        return Error(Code::kPreconditionFailed)
            .with("Condition", "x-amz-copy-source-If-Modified-Since");
      return Error(Code::kNotModified);
    }
  }
  return std::nullopt;
}

}  // namespace hots3::s3
