#pragma once

#include <cstdint>

namespace hots3 {

// Wall-clock time in milliseconds since the Unix epoch: what object timestamps and signature
// times are measured in.
std::int64_t now_ms() noexcept;

}  // namespace hots3
