#pragma once

#include <chrono>
#include <cstdint>

namespace hots3 {

// Wall-clock time in milliseconds since the Unix epoch: what object timestamps and signature
// times are measured in.
std::int64_t now_ms() noexcept;

// The same, as of the kernel's last clock tick (a few milliseconds behind): read without the time
// counter, for checks measured in seconds (a signature's age) on every request.
std::int64_t coarse_now_ms() noexcept;

// CLOCK_MONOTONIC as of the kernel's last clock tick (a few milliseconds behind, on the same
// scale as std::chrono::steady_clock). Connection deadlines, measured in seconds and set several
// times per request, are read from it at a fraction of steady_clock's cost.
struct CoarseSteadyClock {
  using duration = std::chrono::nanoseconds;
  using rep = duration::rep;
  using period = duration::period;
  using time_point = std::chrono::time_point<CoarseSteadyClock>;
  // NOLINTNEXTLINE(readability-identifier-naming): the name the standard's clocks use
  static constexpr bool is_steady = true;
  static time_point now() noexcept;
};

}  // namespace hots3
