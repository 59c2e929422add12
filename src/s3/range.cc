#include "range.h"

#include <charconv>

namespace hots3::s3 {
namespace {

bool number(std::string_view text, std::uint64_t& out) {
  if (text.empty()) return false;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc{} && p == text.data() + text.size();
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

RangeResult parse_range(std::string_view header, std::uint64_t size) {
  RangeResult whole;
  header = trim(header);
  if (!header.starts_with("bytes=")) return whole;
  const std::string_view spec = trim(header.substr(6));
  if (spec.find(',') != std::string_view::npos) return whole;  // several ranges: S3 sends it all
  const auto dash = spec.find('-');
  if (dash == std::string_view::npos) return whole;
  const std::string_view first = trim(spec.substr(0, dash));
  const std::string_view last = trim(spec.substr(dash + 1));
  RangeResult r;
  if (first.empty()) {
    // Suffix: the last n bytes.
    std::uint64_t n = 0;
    if (!number(last, n)) return whole;
    if (n == 0 || size == 0) return {RangeResult::Kind::kUnsatisfiable, 0, 0};
    n = std::min(n, size);
    return {RangeResult::Kind::kRange, size - n, n};
  }
  std::uint64_t a = 0;
  if (!number(first, a)) return whole;
  std::uint64_t b = 0;
  if (last.empty()) {
    b = size == 0 ? 0 : size - 1;
  } else if (!number(last, b) || b < a) {
    return whole;  // "bytes=5-2" is syntactically invalid: ignored
  }
  if (a >= size) return {RangeResult::Kind::kUnsatisfiable, 0, 0};
  b = std::min(b, size - 1);
  r.kind = RangeResult::Kind::kRange;
  r.offset = a;
  r.length = b - a + 1;
  return r;
}

}  // namespace hots3::s3
