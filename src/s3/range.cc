#include "range.h"

#include "hots3/common/text.h"

#include <charconv>

namespace hots3::s3 {
namespace {

bool number(std::string_view text, std::uint64_t& out) {
  if (text.empty()) return false;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc{} && p == text.data() + text.size();
}

}  // namespace

std::optional<ByteRange> parse_byte_range(std::string_view header) {
  header = trim(header);
  if (!header.starts_with("bytes=")) return std::nullopt;
  const std::string_view spec = trim(header.substr(6));
  if (spec.find(',') != std::string_view::npos) return std::nullopt;  // several ranges
  const auto dash = spec.find('-');
  if (dash == std::string_view::npos) return std::nullopt;
  const std::string_view first = trim(spec.substr(0, dash));
  const std::string_view last = trim(spec.substr(dash + 1));
  ByteRange range;
  std::uint64_t value = 0;
  if (!first.empty()) {
    if (!number(first, value)) return std::nullopt;
    range.first = value;
  }
  if (!last.empty()) {
    if (!number(last, value)) return std::nullopt;
    range.last = value;
  }
  if (!range.last && !range.first) return std::nullopt;                              // "bytes=-"
  if (range.first && range.last && *range.last < *range.first) return std::nullopt;  // "bytes=5-2"
  return range;
}

RangeResult parse_range(std::string_view header, std::uint64_t size) {
  // Like S3, a range that does not parse is ignored: the whole object is sent.
  const auto range = parse_byte_range(header);
  if (!range) return {};
  if (!range->first) {
    // Suffix: the last n bytes.
    const std::uint64_t n = std::min(*range->last, size);
    if (n == 0) return {RangeResult::Kind::kUnsatisfiable, 0, 0};
    return {RangeResult::Kind::kRange, size - n, n};
  }
  const std::uint64_t a = *range->first;
  if (a >= size) return {RangeResult::Kind::kUnsatisfiable, 0, 0};
  const std::uint64_t b = std::min(range->last.value_or(size - 1), size - 1);
  return {RangeResult::Kind::kRange, a, b - a + 1};
}

}  // namespace hots3::s3
