#include "storage/device/fault_device.h"

#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <cstring>

namespace hots3::storage {

namespace asio = boost::asio;
namespace {
constexpr std::uint64_t kSector = 4096;
}

FaultDevice::FaultDevice(std::uint64_t size_bytes, std::uint32_t block_size_bytes)
    : Device(DeviceGeometry{"fault:", size_bytes, block_size_bytes, block_size_bytes, false}) {}

bool FaultDevice::failing(std::uint64_t offset, std::uint64_t length) const {
  return std::any_of(failing_.begin(), failing_.end(), [&](const auto& range) {
    return offset < range.first + range.second && range.first < offset + length;
  });
}

void FaultDevice::apply(std::uint64_t offset, std::span<const std::byte> data) {
  for (std::uint64_t at = 0; at < data.size(); at += kSector) {
    auto& sector = sectors_[(offset + at) / kSector];
    sector.assign(data.begin() + static_cast<std::ptrdiff_t>(at),
                  data.begin() + static_cast<std::ptrdiff_t>(
                                     std::min<std::uint64_t>(at + kSector, data.size())));
    sector.resize(kSector);
  }
}

asio::awaitable<Result<void>> FaultDevice::read(std::uint64_t offset, std::span<std::byte> buffer) {
  check_io(offset, buffer.size(), buffer.data());
  co_await asio::post(asio::use_awaitable);  // complete asynchronously, as real devices do
  std::lock_guard lock(mutex_);
  if (failing(offset, buffer.size())) co_return errc::kIoError;
  for (std::uint64_t at = 0; at < buffer.size(); at += kSector) {
    auto it = sectors_.find((offset + at) / kSector);
    if (it == sectors_.end()) {
      std::memset(buffer.data() + at, 0, kSector);
    } else {
      std::memcpy(buffer.data() + at, it->second.data(), kSector);
    }
  }
  // Unflushed writes are visible to reads (they sit in the device's cache).
  for (const PendingWrite& w : pending_) {
    const std::uint64_t begin = std::max(offset, w.offset);
    const std::uint64_t end = std::min(offset + buffer.size(), w.offset + w.data.size());
    if (begin < end)
      std::memcpy(buffer.data() + (begin - offset), w.data.data() + (begin - w.offset),
                  end - begin);
  }
  co_return Result<void>{};
}

asio::awaitable<Result<void>> FaultDevice::write(std::uint64_t offset,
                                                 std::span<const std::byte> data) {
  check_io(offset, data.size(), data.data());
  std::vector<std::byte> copy(data.begin(), data.end());  // the caller may reuse its buffer
  co_await asio::post(asio::use_awaitable);
  std::lock_guard lock(mutex_);
  if (failing(offset, data.size())) co_return errc::kIoError;
  pending_.push_back({offset, std::move(copy)});
  ++writes_;
  co_return Result<void>{};
}

asio::awaitable<Result<void>> FaultDevice::flush() {
  co_await asio::post(asio::use_awaitable);
  std::lock_guard lock(mutex_);
  if (fail_flushes_) co_return errc::kIoError;
  ++flushes_;
  if (ignore_flushes_) co_return Result<void>{};
  for (const PendingWrite& w : pending_) apply(w.offset, w.data);
  pending_.clear();
  co_return Result<void>{};
}

void FaultDevice::crash(Crash mode, std::uint32_t seed) {
  std::lock_guard lock(mutex_);
  std::mt19937 random(seed);
  for (const PendingWrite& w : pending_) {
    switch (mode) {
      case Crash::kLoseUnflushed:
        break;
      case Crash::kKeepUnflushed:
        apply(w.offset, w.data);
        break;
      case Crash::kTearUnflushed: {
        const std::uint64_t sectors = w.data.size() / kSector;
        const std::uint64_t kept = std::uniform_int_distribution<std::uint64_t>(0, sectors)(random);
        apply(w.offset, std::span(w.data).first(kept * kSector));
        break;
      }
      case Crash::kScatterUnflushed: {
        for (std::uint64_t at = 0; at < w.data.size(); at += kSector) {
          if (std::bernoulli_distribution(0.5)(random)) {
            apply(w.offset + at, std::span(w.data).subspan(
                                     at, std::min<std::uint64_t>(kSector, w.data.size() - at)));
          }
        }
        break;
      }
    }
  }
  pending_.clear();
}

void FaultDevice::fail_range(std::uint64_t offset, std::uint64_t length) {
  std::lock_guard lock(mutex_);
  failing_.emplace_back(offset, length);
}

void FaultDevice::fail_flushes(bool fail) {
  std::lock_guard lock(mutex_);
  fail_flushes_ = fail;
}

void FaultDevice::ignore_flushes(bool ignore) {
  std::lock_guard lock(mutex_);
  ignore_flushes_ = ignore;
}

void FaultDevice::flip_bit(std::uint64_t offset, unsigned bit) {
  std::lock_guard lock(mutex_);
  const auto mask = static_cast<std::byte>(1U << (bit % 8));
  auto& sector = sectors_[offset / kSector];
  sector.resize(kSector);
  sector[offset % kSector] ^= mask;
  for (PendingWrite& w : pending_) {
    if (offset >= w.offset && offset < w.offset + w.data.size()) w.data[offset - w.offset] ^= mask;
  }
}

void FaultDevice::clear_faults() {
  std::lock_guard lock(mutex_);
  failing_.clear();
  fail_flushes_ = false;
  ignore_flushes_ = false;
}

std::uint64_t FaultDevice::writes() const {
  std::lock_guard lock(mutex_);
  return writes_;
}

std::uint64_t FaultDevice::flushes() const {
  std::lock_guard lock(mutex_);
  return flushes_;
}

std::size_t FaultDevice::unflushed_writes() const {
  std::lock_guard lock(mutex_);
  return pending_.size();
}

}  // namespace hots3::storage
