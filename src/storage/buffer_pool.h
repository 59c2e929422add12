#pragma once

// Aligned I/O buffers, allocated once per worker at start (and pre-faulted: first-touching
// fresh memory costs more than the I/O on these machines) and reused. A worker's io_uring
// registers the pool's memory, so reads and writes into these buffers skip page pinning.
//
// A pool belongs to one worker (an io_context run by one thread). Buffers are taken and
// returned on that thread; when all are in use, acquire() waits in FIFO order. That wait is
// the back-pressure that bounds the memory of many concurrent streams.

#include "hots3/common/units.h"

#include <boost/asio/awaitable.hpp>

#include <cstddef>
#include <deque>
#include <functional>
#include <optional>
#include <span>
#include <vector>

namespace boost::asio {
class io_context;
}

namespace hots3::storage {

class BufferPool;

// A buffer from a pool; returns itself on destruction. Move-only.
class IoBuffer {
 public:
  IoBuffer() = default;
  IoBuffer(BufferPool* pool, std::span<std::byte> bytes) : pool_(pool), bytes_(bytes) {}
  ~IoBuffer() { release(); }
  IoBuffer(IoBuffer&& other) noexcept : pool_(other.pool_), bytes_(other.bytes_) {
    other.pool_ = nullptr;
  }
  IoBuffer& operator=(IoBuffer&& other) noexcept;
  IoBuffer(const IoBuffer&) = delete;
  IoBuffer& operator=(const IoBuffer&) = delete;

  [[nodiscard]] std::span<std::byte> bytes() const noexcept { return bytes_; }
  [[nodiscard]] std::byte* data() const noexcept { return bytes_.data(); }
  [[nodiscard]] std::size_t size() const noexcept { return bytes_.size(); }
  [[nodiscard]] explicit operator bool() const noexcept { return pool_ != nullptr; }
  void release() noexcept;

 private:
  BufferPool* pool_ = nullptr;
  std::span<std::byte> bytes_;
};

struct BufferPoolOptions {
  std::size_t buffer_bytes = kMiB;
  std::size_t count = 32;
  std::size_t alignment_bytes = 4096;
};

class BufferPool {
 public:
  explicit BufferPool(const BufferPoolOptions& options);
  ~BufferPool();
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;
  BufferPool(BufferPool&&) = delete;
  BufferPool& operator=(BufferPool&&) = delete;

  // The pool of the worker `context` (created by install()); nullptr if none.
  static BufferPool* of(boost::asio::io_context& context) noexcept;
  // Creates `context`'s pool. REQUIRES: none installed yet.
  static BufferPool& install(boost::asio::io_context& context, const BufferPoolOptions& options);

  // A buffer, waiting for one if all are in use. Call on the owning worker.
  boost::asio::awaitable<IoBuffer> acquire();
  // A buffer if one is free now.
  std::optional<IoBuffer> try_acquire();

  [[nodiscard]] std::size_t buffer_bytes() const noexcept { return buffer_bytes_; }
  [[nodiscard]] std::size_t available() const noexcept { return free_.size(); }
  [[nodiscard]] std::size_t capacity() const noexcept { return count_; }
  // Called when the worker's io_context shuts down, before it destroys the handlers it holds:
  // waiters are dropped and returned buffers go to the free list from then on.
  void shut_down() noexcept;

  // The whole pool's memory (registered with the worker's ring).
  [[nodiscard]] std::span<std::byte> region() const noexcept { return {base_, region_bytes_}; }

 private:
  friend class IoBuffer;
  void give_back(std::span<std::byte> bytes) noexcept;

  boost::asio::io_context* context_ = nullptr;  // set by install(); waiters resume there
  std::size_t buffer_bytes_;
  std::size_t count_;
  std::byte* base_ = nullptr;
  std::size_t region_bytes_ = 0;
  std::vector<std::byte*> free_;
  std::deque<std::function<void(IoBuffer)>> waiters_;
};

}  // namespace hots3::storage
