#pragma once

#include <cstdint>

namespace hots3::storage {

// How a device does its I/O: io_uring (one ring per worker), a small pool of threads doing
// pread/pwrite (where io_uring_setup is refused), or whichever works, io_uring first.
enum class IoEngine : std::uint8_t { kAuto, kUring, kPosix };

}  // namespace hots3::storage
