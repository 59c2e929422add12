#pragma once

// A device for tests, in memory, that fails the ways real devices fail: writes are volatile until
// flushed and a crash() decides what became of them (lost, torn at a 4 KiB boundary, or kept); bits
// flip; chosen ranges fail with EIO; flushes fail. Operations complete asynchronously on the
// caller's executor, as the real devices do.

#include "storage/device/device.h"

#include <cstdint>
#include <map>
#include <mutex>
#include <random>
#include <vector>

namespace hots3::storage {

class FaultDevice final : public Device {
 public:
  explicit FaultDevice(std::uint64_t size_bytes, std::uint32_t block_size_bytes = 4096);

  std::string_view engine() const noexcept override { return "fault"; }
  void attach(boost::asio::io_context& /*context*/) override {}
  boost::asio::awaitable<Result<void>> read(std::uint64_t offset_bytes,
                                            std::span<std::byte> buffer) override;
  boost::asio::awaitable<Result<void>> write(std::uint64_t offset_bytes,
                                             std::span<const std::byte> data) override;
  boost::asio::awaitable<Result<void>> flush() override;

  enum class Crash {
    kLoseUnflushed,     // every write since the last flush is gone
    kTearUnflushed,     // each unflushed write keeps a random prefix of whole 4 KiB sectors
    kScatterUnflushed,  // each sector of each unflushed write independently made it or not:
                        // later sectors of a write may be on the medium and earlier ones not
    kKeepUnflushed,     // the write cache happened to reach the medium
  };
  // What the medium holds after a power cut now; the device stays usable (as after a reboot).
  void crash(Crash mode, std::uint32_t seed = 1);

  // Reads and writes touching [offset, offset + length) fail with EIO from now on.
  void fail_range(std::uint64_t offset_bytes, std::uint64_t length_bytes);
  void fail_flushes(bool fail);
  // A write cache that ignores flushes (or a device that lies about them): flush() succeeds
  // but makes nothing durable, so a crash() can take data the store was told is stable.
  void ignore_flushes(bool ignore);
  // Flips one bit of the stored data (durable and pending copies alike).
  void flip_bit(std::uint64_t offset_bytes, unsigned bit);
  void clear_faults();

  [[nodiscard]] std::uint64_t writes() const;
  [[nodiscard]] std::uint64_t flushes() const;
  [[nodiscard]] std::size_t unflushed_writes() const;

 private:
  struct PendingWrite {
    std::uint64_t offset;
    std::vector<std::byte> data;
  };
  void apply(std::uint64_t offset, std::span<const std::byte> data);  // to the durable image
  bool failing(std::uint64_t offset, std::uint64_t length) const;

  mutable std::mutex mutex_;  // tests may drive it from several workers
  std::map<std::uint64_t, std::vector<std::byte>> sectors_;  // durable, 4 KiB sectors, sparse
  std::vector<PendingWrite> pending_;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> failing_;
  bool fail_flushes_ = false;
  bool ignore_flushes_ = false;
  std::uint64_t writes_ = 0;
  std::uint64_t flushes_ = 0;
};

}  // namespace hots3::storage
