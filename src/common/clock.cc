#include "hots3/common/clock.h"

#include <chrono>
#include <time.h>

namespace hots3 {
namespace {

std::int64_t read_ns(clockid_t clock) noexcept {
  timespec ts{};
  ::clock_gettime(clock, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace

std::int64_t now_ms() noexcept {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::int64_t coarse_now_ms() noexcept { return read_ns(CLOCK_REALTIME_COARSE) / 1'000'000; }

CoarseSteadyClock::time_point CoarseSteadyClock::now() noexcept {
  return time_point(duration(read_ns(CLOCK_MONOTONIC_COARSE)));
}

}  // namespace hots3
