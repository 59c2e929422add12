#pragma once

// Hexadecimal, as digests are written in ETags, payload hashes and logs.

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace hots3 {

// Lower-case hex of the bytes.
std::string to_hex(std::span<const std::uint8_t> bytes);
// The same, appended to `out`.
void append_hex(std::string& out, std::span<const std::uint8_t> bytes);
// The value of one hex digit (either case); -1 for anything else.
namespace detail {
// By table rather than by ranges: the branches of the ranges mispredict on random digits, and a
// SigV4 request checks 64 of them.
inline constexpr std::array<std::int8_t, 256> kHexValues = [] {
  std::array<std::int8_t, 256> t{};
  t.fill(-1);
  for (std::size_t c = 0; c < 10; ++c) t['0' + c] = static_cast<std::int8_t>(c);
  for (std::size_t c = 0; c < 6; ++c) {
    t['a' + c] = static_cast<std::int8_t>(10 + c);
    t['A' + c] = static_cast<std::int8_t>(10 + c);
  }
  return t;
}();
}  // namespace detail
constexpr int hex_value(char c) noexcept {
  return detail::kHexValues[static_cast<unsigned char>(c)];
}
// The bytes of an even number of hex digits; nullopt for anything else.
std::optional<std::string> from_hex(std::string_view hex);

}  // namespace hots3
