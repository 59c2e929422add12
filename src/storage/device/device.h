#pragma once

// The device seam: every byte of object data goes
// through a Device. Implementations: UringDevice (io_uring, the default), PosixDevice
// (pread/pwrite on a small thread pool, when io_uring_setup is refused) and FaultDevice (tests:
// lost unflushed writes, torn writes, bit flips, EIO).
//
// All I/O is direct (O_DIRECT for the real devices): offsets, lengths and buffer addresses
// must be aligned to the device's geometry; is_valid_io() checks it and every implementation
// asserts it (alignment errors are programmer errors: the kernel does not reliably reject a
// misaligned buffer address).
//
// Executors: read/write/flush are called on a worker thread (an io_context run by one thread)
// to which the device has been attached, and complete on that thread. A buffer passed to an
// operation must stay alive until the operation completes; the implementations never complete
// an operation while the kernel may still touch its buffer, even on shutdown.

#include "hots3/common/metrics.h"
#include "hots3/common/result.h"
#include "hots3/storage/io_engine.h"

#include <boost/asio/awaitable.hpp>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace boost::asio {
class io_context;
}

namespace hots3::storage {

struct DeviceGeometry {
  std::string path;
  std::uint64_t size_bytes = 0;
  std::uint32_t block_size_bytes = 4096;        // offset and length alignment
  std::uint32_t memory_alignment_bytes = 4096;  // buffer address alignment
  bool block_device = false;
};

// Device operations as the metrics show them: how many are in flight now (the queue depth),
// and their times by kind, from submission to completion.
enum class IoKind : std::uint8_t { kRead, kWrite, kFlush };
inline constexpr std::size_t kIoKinds = 3;
struct DeviceIoStats {
  std::uint64_t in_flight = 0;
  std::array<metrics::Histogram::Snapshot, kIoKinds> seconds;  // by IoKind
};

class Device {
 public:
  explicit Device(DeviceGeometry geometry) : geometry_(std::move(geometry)) {}
  virtual ~Device() = default;
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
  Device(Device&&) = delete;
  Device& operator=(Device&&) = delete;

  [[nodiscard]] const DeviceGeometry& geometry() const noexcept { return geometry_; }
  [[nodiscard]] virtual std::string_view engine() const noexcept = 0;

  // Makes the device usable from `context`'s thread (creates that worker's ring, for io_uring).
  // Call once per worker before its first operation, before the worker runs.
  virtual void attach(boost::asio::io_context& context) = 0;

  // Reads exactly `buffer.size()` bytes at `offset_bytes` (short transfers are retried).
  // REQUIRES: is_valid_io(offset_bytes, buffer.size(), buffer.data()).
  // Errors: kIoError (the device failed), kShortIo (end of device), kCancelled (shutdown).
  virtual boost::asio::awaitable<Result<void>> read(std::uint64_t offset_bytes,
                                                    std::span<std::byte> buffer) = 0;

  // Writes exactly `data.size()` bytes at `offset_bytes`. Not durable until flush().
  // REQUIRES: is_valid_io(offset_bytes, data.size(), data.data()).
  virtual boost::asio::awaitable<Result<void>> write(std::uint64_t offset_bytes,
                                                     std::span<const std::byte> data) = 0;

  // Makes every write that completed before this call durable (fdatasync). Each call is a flush
  // of its own: a writer's finish() issues one.
  virtual boost::asio::awaitable<Result<void>> flush() = 0;

  [[nodiscard]] bool is_valid_io(std::uint64_t offset_bytes, std::uint64_t length_bytes,
                                 const void* address) const noexcept;

  // What the implementation's operations did since the device was opened (IoTimer counts them).
  [[nodiscard]] DeviceIoStats io_stats() const noexcept;

 protected:
  // Asserts is_valid_io: a misaligned I/O stops here, at the device boundary.
  void check_io(std::uint64_t offset_bytes, std::uint64_t length_bytes, const void* address) const;

  // Counts one operation in flight from its making to its end, and then observes its time.
  // (Per-thread slots: a worker's I/O does not share a cache line with another's.)
  class IoTimer {
   public:
    IoTimer(Device& device, IoKind kind) : device_(device), kind_(kind) { device_.io_begun_.add(); }
    ~IoTimer() {
      device_.io_seconds_[static_cast<std::size_t>(kind_)].observe_us(
          static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                         std::chrono::steady_clock::now() - began_)
                                         .count()));
      device_.io_ended_.add();
    }
    IoTimer(const IoTimer&) = delete;
    IoTimer& operator=(const IoTimer&) = delete;
    IoTimer(IoTimer&&) = delete;
    IoTimer& operator=(IoTimer&&) = delete;

   private:
    Device& device_;
    IoKind kind_;
    std::chrono::steady_clock::time_point began_ = std::chrono::steady_clock::now();
  };

 private:
  DeviceGeometry geometry_;
  metrics::Counter io_begun_;
  metrics::Counter io_ended_;
  std::array<metrics::Histogram, kIoKinds> io_seconds_;
};

struct DeviceOptions {
  std::string path;
  std::uint64_t create_size_bytes = 0;  // a missing regular file is created sparse at this size
  using Engine = IoEngine;
  Engine engine = Engine::kAuto;
};

// Opens (or creates, for a file) the device with O_DIRECT, reads its alignment (statx
// STATX_DIOALIGN; BLKSSZGET for block devices) and size (BLKGETSIZE64 for block devices).
// Engine kAuto uses io_uring and falls back to the thread-pool device, with a log line, when
// io_uring_setup is refused. Throws std::runtime_error (start-up only).
std::unique_ptr<Device> open_device(const DeviceOptions& options);

// The io_uring and posix implementations over an open O_DIRECT descriptor (tests use these
// directly to run one conformance suite over both). The device takes ownership of `fd`.
std::unique_ptr<Device> make_uring_device(int fd, DeviceGeometry geometry);
std::unique_ptr<Device> make_posix_device(int fd, DeviceGeometry geometry);

// True if this process may create io_uring instances (some containers forbid it).
bool uring_available() noexcept;

}  // namespace hots3::storage
