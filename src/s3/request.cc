#include "request.h"

#include "names.h"

#include "hots3/common/text.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <span>

namespace hots3::s3 {
namespace {

// The name of a query parameter given more than once, if any.
std::optional<std::string> repeated_parameter(const std::vector<aws::QueryParameter>& query) {
  if (query.size() < 2) return std::nullopt;
  std::vector<std::string_view> names;
  names.reserve(query.size());
  for (const auto& p : query) names.emplace_back(p.name);
  std::sort(names.begin(), names.end());
  const auto twice = std::adjacent_find(names.begin(), names.end());
  if (twice == names.end()) return std::nullopt;
  return std::string(*twice);
}

// The name of a header given more than once among those S3 reads as one value (Authorization,
// Host, Range, Expect, Content-*, If-*, X-Amz-*), if any. Others (Via, Accept, ...) may repeat.
std::optional<std::string_view> repeated_header(std::span<const http::HeaderView> headers) {
  auto starts = [](std::string_view name, std::string_view prefix) {
    return name.size() >= prefix.size() && iequals(name.substr(0, prefix.size()), prefix);
  };
  std::array<std::string_view, 32> small{};
  std::vector<std::string_view> large;
  std::size_t count = 0;
  for (const auto& h : headers) {
    const std::string_view name = h.name;
    if (!(starts(name, "x-amz-") || starts(name, "content-") || starts(name, "if-") ||
          iequals(name, "authorization") || iequals(name, "host") || iequals(name, "range") ||
          iequals(name, "expect"))) {
      continue;
    }
    if (count < small.size()) {
      small[count] = name;
    } else {
      if (large.empty()) large.assign(small.begin(), small.end());
      large.push_back(name);
    }
    ++count;
  }
  std::span<std::string_view> names =
      large.empty() ? std::span(small.data(), count) : std::span(large);
  auto less = [](std::string_view a, std::string_view b) {
    return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
      return static_cast<unsigned char>(to_lower(x)) < static_cast<unsigned char>(to_lower(y));
    });
  };
  std::sort(names.begin(), names.end(), less);
  const auto twice = std::adjacent_find(names.begin(), names.end(), iequals);
  if (twice == names.end()) return std::nullopt;
  return *twice;
}

}  // namespace

std::string Request::resource() const {
  if (bucket.empty()) return "/";
  return key.empty() ? "/" + bucket : "/" + bucket + "/" + key;
}

std::optional<Error> locate(Request& r, const config::S3Config& config) {
  const std::string_view target = r.head.target;
  if (target.empty() || target.front() != '/') return Error(Code::kInvalidURI);
  const auto question = target.find('?');
  r.raw_path = target.substr(0, question);
  r.raw_query =
      question == std::string_view::npos ? std::string_view{} : target.substr(question + 1);
  auto path = aws::percent_decode(r.raw_path);
  auto query = aws::parse_query(r.raw_query);
  if (!path || !query) return Error(Code::kInvalidURI);
  r.path = std::move(*path);
  r.query = std::move(*query);
  if (auto repeated = repeated_header(r.head.headers)) {
    // The same for headers: SigV4 signs a repeated header's values joined, an operation reads
    // the first (and two Authorization headers could be read differently by a proxy in front).
    return Error(Code::kInvalidArgument,
                 "The header " + std::string(repeated->substr(0, 256)) + " appears more than once.")
        .with("ArgumentName", std::string(repeated->substr(0, 256)));
  }
  if (auto repeated = repeated_parameter(r.query)) {
    // SigV4 signs every value of a repeated parameter, sorted; an operation reads the first. The
    // same signature would then cover both orders, and a reordering would change what it does.
    return Error(Code::kInvalidArgument,
                 "The query parameter " + repeated->substr(0, 256) + " appears more than once.")
        .with("ArgumentName", repeated->substr(0, 256));
  }

  // Virtual-hosted style: "<bucket>.<domain>[:port]".
  if (!config.domain.empty()) {
    if (auto host = r.header("host")) {
      std::string_view h = *host;
      if (const auto colon = h.rfind(':');
          colon != std::string_view::npos && h.find(']') == std::string_view::npos)
        h = h.substr(0, colon);
      const std::string suffix = "." + config.domain;
      if (h.size() > suffix.size() && lower(h.substr(h.size() - suffix.size())) == lower(suffix)) {
        r.bucket = std::string(h.substr(0, h.size() - suffix.size()));
        r.key = r.path.substr(1);
        r.virtual_host = true;
        return std::nullopt;
      }
    }
  }
  // Path style: "/bucket/key" (the key keeps every further '/', leading ones included).
  const std::string_view rest = std::string_view(r.path).substr(1);
  const auto slash = rest.find('/');
  r.bucket = std::string(rest.substr(0, slash));
  std::string_view key =
      slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
  // The JavaScript SDK addresses a directory bucket path-style (an IP endpoint) as
  // "/bucket//key": its endpoint's path "/" and then the key's. A directory's name is never
  // empty, so in a directory bucket the first '/' after the bucket's is that separator.
  if (key.starts_with('/') && directory_bucket_zone(r.bucket)) key.remove_prefix(1);
  r.key = std::string(key);
  return std::nullopt;
}

}  // namespace hots3::s3
