#include "hots3/common/hex.h"

#include <cstring>

namespace hots3 {

std::string to_hex(std::span<const std::uint8_t> bytes) {
  std::string out;
  append_hex(out, bytes);
  return out;
}

namespace {

// The two digits of every byte value, side by side: a byte is one look-up (a signed request
// writes 64 of them).
constexpr std::array<char, 512> kDigitPairs = [] {
  constexpr std::string_view kDigits = "0123456789abcdef";
  std::array<char, 512> t{};
  for (std::size_t b = 0; b < 256; ++b) {
    t[2 * b] = kDigits[b >> 4];
    t[2 * b + 1] = kDigits[b & 15];
  }
  return t;
}();

}  // namespace

void append_hex(std::string& out, std::span<const std::uint8_t> bytes) {
  const std::size_t from = out.size();
  out.resize(from + bytes.size() * 2);
  char* p = out.data() + from;
  for (const std::uint8_t b : bytes) {
    std::memcpy(p, &kDigitPairs[2 * std::size_t{b}], 2);
    p += 2;
  }
}

std::optional<std::string> from_hex(std::string_view hex) {
  if (hex.size() % 2 != 0) return std::nullopt;
  std::string out(hex.size() / 2, '\0');
  for (std::size_t i = 0; i < out.size(); ++i) {
    const int high = hex_value(hex[2 * i]);
    const int low = hex_value(hex[2 * i + 1]);
    if (high < 0 || low < 0) return std::nullopt;
    out[i] = static_cast<char>(high * 16 + low);
  }
  return out;
}

}  // namespace hots3
