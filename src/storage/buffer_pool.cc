#include "storage/buffer_pool.h"

#include "hots3/common/assert.h"
#include "hots3/common/text.h"

#include <boost/asio/async_result.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <sys/mman.h>

namespace hots3::storage {

namespace asio = boost::asio;

namespace {

// Owns a worker's BufferPool as an Asio service, so the pool lives exactly as long as the
// io_context and is destroyed after the ring service has drained (services shut down and are
// destroyed in reverse order of creation; the pool is created first).
class PoolService final : public asio::execution_context::service {
 public:
  using key_type = PoolService;
  static inline asio::execution_context::id id;  // NOLINT: Asio's service identification

  PoolService(asio::execution_context& context, const BufferPoolOptions& options)
      : service(context), pool(options) {}
  explicit PoolService(asio::execution_context& context)
      : service(context), pool(BufferPoolOptions{}) {}
  // Before the scheduler destroys the handlers it still holds (they may own IoBuffers): from
  // now on returned buffers go to the free list, and waiters are dropped.
  void shutdown() override { pool.shut_down(); }

  BufferPool pool;
};

}  // namespace

IoBuffer& IoBuffer::operator=(IoBuffer&& other) noexcept {
  if (this != &other) {
    release();
    pool_ = other.pool_;
    bytes_ = other.bytes_;
    other.pool_ = nullptr;
  }
  return *this;
}

void IoBuffer::release() noexcept {
  if (pool_ != nullptr) {
    BufferPool* pool = pool_;
    pool_ = nullptr;
    pool->give_back(bytes_);
  }
}

BufferPool::BufferPool(const BufferPoolOptions& options)
    : buffer_bytes_(options.buffer_bytes), count_(options.count) {
  H3_ASSERT(buffer_bytes_ % options.alignment_bytes == 0 && count_ > 0);
  region_bytes_ = buffer_bytes_ * count_;
  // mmap gives page alignment (4 KiB, the direct-I/O alignment here); MAP_POPULATE faults the
  // pages in now rather than on the first I/O.
  H3_ASSERT(options.alignment_bytes <= 4096);
  void* memory = ::mmap(nullptr, region_bytes_, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (memory == MAP_FAILED) {
    throw std::runtime_error(std::string("buffer pool: mmap failed: ") + errno_text(errno));
  }
  base_ = static_cast<std::byte*>(memory);
  free_.reserve(count_);
  for (std::size_t i = count_; i-- > 0;) free_.push_back(base_ + i * buffer_bytes_);
}

BufferPool::~BufferPool() {
  H3_ASSERT(free_.size() == count_, "buffer pool destroyed with buffers in use");
  ::munmap(base_, region_bytes_);
}

BufferPool* BufferPool::of(asio::io_context& context) noexcept {
  if (!asio::has_service<PoolService>(context)) return nullptr;
  return &asio::use_service<PoolService>(context).pool;
}

BufferPool& BufferPool::install(asio::io_context& context, const BufferPoolOptions& options) {
  H3_ASSERT(!asio::has_service<PoolService>(context), "buffer pool installed twice");
  BufferPool& pool = asio::make_service<PoolService>(context, options).pool;
  pool.context_ = &context;
  return pool;
}

std::optional<IoBuffer> BufferPool::try_acquire() {
  if (free_.empty()) return std::nullopt;
  std::byte* p = free_.back();
  free_.pop_back();
  return IoBuffer(this, {p, buffer_bytes_});
}

asio::awaitable<IoBuffer> BufferPool::acquire() {
  if (auto buffer = try_acquire()) co_return std::move(*buffer);
  co_return co_await asio::async_initiate<decltype(asio::use_awaitable), void(IoBuffer)>(
      [this](auto handler) {
        waiters_.emplace_back([h = std::make_shared<decltype(handler)>(std::move(handler))](
                                  IoBuffer buffer) mutable { (*h)(std::move(buffer)); });
      },
      asio::use_awaitable);
}

void BufferPool::shut_down() noexcept {
  context_ = nullptr;
  auto waiters = std::move(waiters_);
  waiters_.clear();
  waiters.clear();  // destroys the waiting coroutines' handlers
}

void BufferPool::give_back(std::span<std::byte> bytes) noexcept {
  if (!waiters_.empty() && context_ != nullptr) {
    // Hand the buffer straight to the longest waiter, resumed from the event loop rather than
    // from inside the code that released it (often a destructor).
    asio::post(*context_,
               [waiter = std::move(waiters_.front()), buffer = IoBuffer(this, bytes)]() mutable {
                 waiter(std::move(buffer));
               });
    waiters_.pop_front();
    return;
  }
  free_.push_back(bytes.data());
}

}  // namespace hots3::storage
