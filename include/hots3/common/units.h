#pragma once

// Sizes and durations as configuration and logs spell them: "64GiB", "512k", "30s", "250ms".

#include "hots3/common/result.h"

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace hots3 {

inline constexpr std::uint64_t kKiB = 1024;
inline constexpr std::uint64_t kMiB = 1024 * kKiB;
inline constexpr std::uint64_t kGiB = 1024 * kMiB;
inline constexpr std::uint64_t kTiB = 1024 * kGiB;

// Parses a byte size: a whole number followed by an optional unit. Binary units: k, K, KiB,
// M, MiB, G, GiB, T, TiB (also "KB"-less short forms, as fio and dd use them); decimal units:
// kB, KB, MB, GB, TB; "B" or nothing for bytes. Case of the unit is significant only for the
// binary/decimal distinction described above. Errors: errc::kInvalidArgument on a malformed
// string, errc::kTooLarge when the value does not fit in 64 bits.
Result<std::uint64_t> parse_size_bytes(std::string_view text);

// Parses a duration: a whole number followed by ms, s, m, h or d (no unit = seconds).
Result<std::chrono::milliseconds> parse_duration(std::string_view text);

// "1.5 GiB", "512 KiB", "17 B": for logs and messages.
std::string format_size(std::uint64_t size_bytes);

}  // namespace hots3
