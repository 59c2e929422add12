#pragma once

// ASCII text helpers for protocol fields (header names, tokens, hex): locale-free, so that a
// header compares the same whatever the process's locale.

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace hots3 {

constexpr char to_lower(char c) noexcept {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

// Space, tab, CR, LF, form feed and vertical tab.
constexpr bool is_space(char c) noexcept {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

// Hash for maps keyed by std::string that are looked up by std::string_view (with
// std::equal_to<>): a look-up makes no key string.
struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view text) const noexcept {
    return std::hash<std::string_view>{}(text);
  }
};

std::string lower(std::string_view text);
// `text` without the is_space characters at either end.
std::string_view trim(std::string_view text) noexcept;
namespace detail {
// Word-at-a-time tests on eight bytes: kOnes times a byte value is that value in every byte;
// kTops is the top bit of every byte.
inline constexpr std::uint64_t kOnes = 0x0101010101010101ULL;
inline constexpr std::uint64_t kTops = kOnes * 0x80;
inline std::uint64_t load_eight(const char* p) noexcept {
  std::uint64_t w = 0;
  std::memcpy(&w, p, 8);
  return w;
}
}  // namespace detail

// Whether any byte of `text` is below `limit` (at most 128), eight bytes at a time (the last
// eight overlapping those before them): what a hot path asks of text it copies (CR, LF or NUL
// in a response header), inline there. For a byte below `limit`, subtracting `limit` borrows
// into its top bit, which no byte of 128 or more (the one other way to set it) can then clear.
inline bool has_byte_below(std::string_view text, unsigned char limit) noexcept {
  if (text.size() < 8) {
    bool found = false;
    for (const char c : text) found |= static_cast<unsigned char>(c) < limit;
    return found;
  }
  const auto below = [&](std::size_t at) {
    const std::uint64_t w = detail::load_eight(text.data() + at);
    return (w - detail::kOnes * std::uint64_t{limit}) & ~w & detail::kTops;
  };
  std::uint64_t found = 0;
  for (std::size_t i = 0; i + 8 < text.size(); i += 8) found |= below(i);
  return (found | below(text.size() - 8)) != 0;
}
// The bytes of a and b, both `size` long, equal but for the case of ASCII letters.
bool iequals_bytes(const char* a, const char* b, std::size_t size) noexcept;
// Case-insensitive ASCII comparison, as HTTP header names compare. (Inline for its first test:
// most header look-ups are decided by the lengths alone.)
inline bool iequals(std::string_view a, std::string_view b) noexcept {
  return a.size() == b.size() && iequals_bytes(a.data(), b.data(), a.size());
}
// The text of an errno value ("No such file or directory"); unlike strerror, safe from any
// thread.
std::string errno_text(int error);
bool istarts_with(std::string_view text, std::string_view prefix) noexcept;

// The length of the UTF-8 sequence at text[at] if it is well-formed (shortest form, no
// surrogates, at most U+10FFFF), else 0. REQUIRES: at < text.size().
std::size_t utf8_sequence_length(std::string_view text, std::size_t at) noexcept;
bool valid_utf8(std::string_view text) noexcept;

// `text` as an unsigned decimal number when all of it is one that fits T: no sign, no spaces,
// nothing after it (the spelling of S3's numeric headers and XML fields).
template <class T>
std::optional<T> parse_decimal(std::string_view text) noexcept {
  T n{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc{} || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return n;
}

}  // namespace hots3
