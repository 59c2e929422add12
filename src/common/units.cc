#include "hots3/common/units.h"

#include "hots3/common/text.h"

#include <fmt/format.h>

#include <array>
#include <charconv>
#include <limits>

namespace hots3 {
namespace {

struct Unit {
  std::string_view suffix;
  std::uint64_t factor;
};

// Checked in order; the first exact match wins.
constexpr std::array kSizeUnits = {
    Unit{"", 1},
    Unit{"B", 1},
    Unit{"k", kKiB},
    Unit{"K", kKiB},
    Unit{"KiB", kKiB},
    Unit{"kB", 1000},
    Unit{"KB", 1000},
    Unit{"M", kMiB},
    Unit{"MiB", kMiB},
    Unit{"MB", 1000ULL * 1000},
    Unit{"G", kGiB},
    Unit{"GiB", kGiB},
    Unit{"GB", 1000ULL * 1000 * 1000},
    Unit{"T", kTiB},
    Unit{"TiB", kTiB},
    Unit{"TB", 1000ULL * 1000 * 1000 * 1000},
};

// Splits "123unit" into the number and the unit; the number must be present.
Result<std::pair<std::uint64_t, std::string_view>> split_number(std::string_view text) {
  text = trim(text);
  std::uint64_t value = 0;
  const auto* const first = text.data();
  const auto* const last = text.data() + text.size();
  auto [end, ec] = std::from_chars(first, last, value);
  if (ec == std::errc::result_out_of_range) return errc::kTooLarge;
  if (ec != std::errc{} || end == first) return errc::kInvalidArgument;
  return std::pair{value, trim(std::string_view(end, static_cast<std::size_t>(last - end)))};
}

}  // namespace

Result<std::uint64_t> parse_size_bytes(std::string_view text) {
  H3_TRY(auto parts, split_number(text));
  auto [value, suffix] = parts;
  for (const Unit& unit : kSizeUnits) {
    if (unit.suffix != suffix) continue;
    if (value > std::numeric_limits<std::uint64_t>::max() / unit.factor) return errc::kTooLarge;
    return value * unit.factor;
  }
  return errc::kInvalidArgument;
}

Result<std::chrono::milliseconds> parse_duration(std::string_view text) {
  H3_TRY(auto parts, split_number(text));
  auto [value, suffix] = parts;
  std::uint64_t factor_ms = 0;
  if (suffix.empty() || suffix == "s") {
    factor_ms = 1000;
  } else if (suffix == "ms") {
    factor_ms = 1;
  } else if (suffix == "m" || suffix == "min") {
    factor_ms = 60ULL * 1000;
  } else if (suffix == "h") {
    factor_ms = 3600ULL * 1000;
  } else if (suffix == "d") {
    factor_ms = 24ULL * 3600ULL * 1000;
  } else {
    return errc::kInvalidArgument;
  }
  constexpr auto kMax = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  if (value > kMax / factor_ms) return errc::kTooLarge;
  return std::chrono::milliseconds(static_cast<std::int64_t>(value * factor_ms));
}

std::string format_size(std::uint64_t size_bytes) {
  constexpr std::array<std::pair<std::uint64_t, const char*>, 4> kUnits = {
      std::pair{kTiB, "TiB"}, std::pair{kGiB, "GiB"}, std::pair{kMiB, "MiB"},
      std::pair{kKiB, "KiB"}};
  for (const auto& [factor, name] : kUnits) {
    if (size_bytes >= factor) {
      // Three significant digits, and never an exponent: 1000 to 1023 of a unit are whole.
      const double value = static_cast<double>(size_bytes) / static_cast<double>(factor);
      return value >= 100 ? fmt::format("{:.0f} {}", value, name)
                          : fmt::format("{:.3g} {}", value, name);
    }
  }
  return fmt::format("{} B", size_bytes);
}

}  // namespace hots3
