#include "hots3/common/text.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <system_error>

namespace hots3 {

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = to_lower(c);
  return out;
}

std::string_view trim(std::string_view text) noexcept {
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
  return text;
}

namespace {

// The eight bytes of `w` with A-Z made a-z. For a byte below 128, adding 128 - 'A' sets its top
// bit when it is 'A' or more, adding 128 - 'Z' - 1 when it is more than 'Z'; neither sum carries
// into the next byte.
std::uint64_t lower_eight(std::uint64_t w) noexcept {
  using detail::kOnes;
  using detail::kTops;
  const std::uint64_t low7 = w & ~kTops;
  const std::uint64_t from_a = low7 + kOnes * (0x80 - 'A');
  const std::uint64_t past_z = low7 + kOnes * (0x80 - 'Z' - 1);
  const std::uint64_t upper = from_a & ~past_z & ~w & kTops;
  return w | (upper >> 2);  // 0x80 >> 2 is the case bit, 0x20
}

}  // namespace

bool iequals_bytes(const char* a, const char* b, std::size_t size) noexcept {
  // Header look-ups call this for every header of every request: eight bytes at a time (the
  // last eight overlapping those before them), equal words (names sent in the case they are
  // looked up in) taken without folding.
  if (size < 8) {
    for (std::size_t i = 0; i < size; ++i) {
      if (a[i] != b[i] && to_lower(a[i]) != to_lower(b[i])) return false;
    }
    return true;
  }
  const auto same = [](std::uint64_t x, std::uint64_t y) {
    return x == y || lower_eight(x) == lower_eight(y);
  };
  for (std::size_t i = 0; i + 8 < size; i += 8) {
    if (!same(detail::load_eight(a + i), detail::load_eight(b + i))) return false;
  }
  return same(detail::load_eight(a + size - 8), detail::load_eight(b + size - 8));
}

bool istarts_with(std::string_view text, std::string_view prefix) noexcept {
  return text.size() >= prefix.size() && iequals(text.substr(0, prefix.size()), prefix);
}

std::size_t utf8_sequence_length(std::string_view text, std::size_t at) noexcept {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(at);
  if (lead < 0x80) return 1;
  std::size_t length = 0;
  std::uint32_t code = 0;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2, code = lead & 0x1Fu;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3, code = lead & 0x0Fu;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4, code = lead & 0x07u;
  } else {
    return 0;
  }
  if (at + length > text.size()) return 0;
  for (std::size_t k = 1; k < length; ++k) {
    if ((byte(at + k) & 0xC0u) != 0x80u) return 0;
    code = (code << 6) | (byte(at + k) & 0x3Fu);
  }
  const std::uint32_t smallest = length == 2 ? 0x80 : length == 3 ? 0x800 : 0x10000;
  if (code < smallest || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return 0;
  return length;
}

bool valid_utf8(std::string_view text) noexcept {
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t length = utf8_sequence_length(text, at);
    if (length == 0) return false;
    at += length;
  }
  return true;
}

std::string errno_text(int error) { return std::generic_category().message(error); }

}  // namespace hots3
