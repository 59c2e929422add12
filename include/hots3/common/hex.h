#pragma once

// Hexadecimal, as digests are written in ETags, payload hashes and logs.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace hots3 {

// Lower-case hex of the bytes.
std::string to_hex(std::span<const std::uint8_t> bytes);
// The value of one hex digit (either case); -1 for anything else.
constexpr int hex_value(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
// The bytes of an even number of hex digits; nullopt for anything else.
std::optional<std::string> from_hex(std::string_view hex);

}  // namespace hots3
