#pragma once

// errno → hots3::errc for the storage module, in one place.

#include "hots3/common/result.h"

#include <cerrno>

namespace hots3::storage::detail {

inline error_code device_error(int errno_value) noexcept {
  switch (errno_value) {
    case ENOSPC:
    case EDQUOT:
      return errc::kNoSpace;
    case EINVAL:
      return errc::kMisalignedIo;  // O_DIRECT rejects misaligned offsets/lengths
    case ECANCELED:
      return errc::kCancelled;
    default:
      return errc::kIoError;  // EIO, ENXIO, EBADF, ...: the device failed
  }
}

}  // namespace hots3::storage::detail
