#include "storage/device/device.h"

#include "hots3/common/assert.h"
#include "hots3/common/logging.h"
#include "hots3/common/text.h"
#include "hots3/common/units.h"

#include <liburing.h>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <linux/fs.h>
#include <stdexcept>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#ifndef STATX_DIOALIGN
#define STATX_DIOALIGN 0x00002000U
#endif

namespace hots3::storage {
namespace {

std::runtime_error system_failure(const std::string& what, const std::string& path) {
  return std::runtime_error(what + " " + path + ": " + errno_text(errno));
}

// Direct-I/O alignment of an open file: statx STATX_DIOALIGN (Linux 6.1+), and for a block
// device also its logical sector size (BLKSSZGET), the stricter of the two; before 6.1 the
// sector size alone. Our I/O unit is at least 4 KiB whatever the device accepts: checksums
// are per 4 KiB.
void read_dio_alignment(int fd, DeviceGeometry& geometry) {
  std::uint32_t offset_align = 0;
  std::uint32_t memory_align = 0;
  struct statx st {};
  if (::statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &st) == 0 &&
      (st.stx_mask & STATX_DIOALIGN) != 0 && st.stx_dio_mem_align != 0 &&
      st.stx_dio_offset_align != 0) {
    offset_align = st.stx_dio_offset_align;
    memory_align = st.stx_dio_mem_align;
  }
  if (geometry.block_device) {
    int logical = 0;
    if (::ioctl(fd, BLKSSZGET, &logical) == 0 && logical > 0) {
      offset_align = std::max(offset_align, static_cast<std::uint32_t>(logical));
      if (memory_align == 0) memory_align = static_cast<std::uint32_t>(logical);
    }
  }
  // Neither known: page alignment for both (conservative).
  geometry.memory_alignment_bytes = memory_align != 0 ? memory_align : 4096;
  geometry.block_size_bytes = std::max<std::uint32_t>(offset_align, 4096);
}

// A size for a new device file: 64 GiB, or half of the file system's free space if less.
std::uint64_t automatic_size(const std::string& path) {
  struct statvfs fs {};
  const auto dir = std::filesystem::path(path).parent_path();
  std::uint64_t size = 64 * kGiB;
  if (::statvfs(dir.empty() ? "." : dir.c_str(), &fs) == 0) {
    size = std::min<std::uint64_t>(size, std::uint64_t{fs.f_bavail} * fs.f_frsize / 2);
  }
  size -= size % kMiB;
  return std::max<std::uint64_t>(size, 256 * kMiB);
}

}  // namespace

bool Device::is_valid_io(std::uint64_t offset_bytes, std::uint64_t length_bytes,
                         const void* address) const noexcept {
  const auto block = geometry_.block_size_bytes;
  return length_bytes > 0 && offset_bytes % block == 0 && length_bytes % block == 0 &&
         reinterpret_cast<std::uintptr_t>(address) % geometry_.memory_alignment_bytes == 0 &&
         offset_bytes <= geometry_.size_bytes &&
         length_bytes <= geometry_.size_bytes - offset_bytes;
}

DeviceIoStats Device::io_stats() const noexcept {
  DeviceIoStats stats;
  // Ended first: an operation ending between the two reads is never counted as in flight twice.
  const std::uint64_t ended = io_ended_.value();
  const std::uint64_t begun = io_begun_.value();
  stats.in_flight = begun > ended ? begun - ended : 0;
  for (std::size_t k = 0; k < kIoKinds; ++k) stats.seconds[k] = io_seconds_[k].snapshot();
  return stats;
}

void Device::check_io(std::uint64_t offset_bytes, std::uint64_t length_bytes,
                      const void* address) const {
  H3_ASSERT(is_valid_io(offset_bytes, length_bytes, address),
            "device I/O outside the device or not aligned to its geometry");
}

bool uring_available() noexcept {
  io_uring ring{};
  if (io_uring_queue_init(2, &ring, 0) != 0) return false;
  io_uring_queue_exit(&ring);
  return true;
}

std::unique_ptr<Device> open_device(const DeviceOptions& options) {
  DeviceGeometry geometry;
  geometry.path = options.path;
  struct stat st {};
  const bool exists = ::stat(options.path.c_str(), &st) == 0;
  geometry.block_device = exists && S_ISBLK(st.st_mode);
  if (exists && !geometry.block_device && !S_ISREG(st.st_mode)) {
    throw std::runtime_error("device " + options.path +
                             " is neither a block device nor a regular file");
  }
  int flags = O_RDWR | O_DIRECT | O_CLOEXEC;
  if (!exists) flags |= O_CREAT | O_EXCL;
  const int fd = ::open(options.path.c_str(), flags, 0600);
  if (fd < 0) {
    if (errno == EINVAL) {
      throw std::runtime_error("device " + options.path +
                               ": the file system does not support O_DIRECT (tmpfs?); put the "
                               "device on a disk file system or use a block device");
    }
    throw system_failure("cannot open device", options.path);
  }
  try {
    if (geometry.block_device) {
      std::uint64_t size = 0;
      if (::ioctl(fd, BLKGETSIZE64, &size) != 0)
        throw system_failure("BLKGETSIZE64 on", options.path);
      geometry.size_bytes = size;
    } else if (!exists || st.st_size == 0) {
      const std::uint64_t size =
          options.create_size_bytes != 0 ? options.create_size_bytes : automatic_size(options.path);
      // Sparse: blocks are allocated as data is written.
      if (::ftruncate(fd, static_cast<off_t>(size)) != 0)
        throw system_failure("cannot size device file", options.path);
      geometry.size_bytes = size;
      log::info("created device file {} ({}, sparse)", options.path, format_size(size));
    } else {
      geometry.size_bytes = static_cast<std::uint64_t>(st.st_size);
    }
    read_dio_alignment(fd, geometry);
    geometry.size_bytes -= geometry.size_bytes % geometry.block_size_bytes;
  } catch (...) {
    ::close(fd);
    throw;
  }

  using Engine = DeviceOptions::Engine;
  if (options.engine == Engine::kPosix) return make_posix_device(fd, std::move(geometry));
  if (uring_available()) return make_uring_device(fd, std::move(geometry));
  if (options.engine == Engine::kUring) {
    ::close(fd);
    throw std::runtime_error(
        "io_uring is not available here (io_uring_setup refused) and "
        "storage.io_engine = \"io_uring\" was asked for");
  }
  log::warn(
      "io_uring is not available here (io_uring_setup refused, e.g. by a container's "
      "seccomp profile); using the thread-pool pread/pwrite device instead");
  return make_posix_device(fd, std::move(geometry));
}

}  // namespace hots3::storage
