#include "hots3/common/clock.h"

#include <chrono>

namespace hots3 {

std::int64_t now_ms() noexcept {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace hots3
