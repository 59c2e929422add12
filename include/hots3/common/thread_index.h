#pragma once

// A number for the calling thread, given out in turn as threads first ask (0, 1, 2, ...): what
// counters kept in slots (one cache line each, so that threads do not take lines from each
// other) pick their slot by, as `thread_index() % slots`. Up to that many threads (workers,
// catalog readers, the uploader) each get a slot of their own.

#include <atomic>
#include <cstddef>

namespace hots3 {

inline std::size_t thread_index() noexcept {
  static std::atomic<std::size_t> next{0};
  thread_local const std::size_t index = next.fetch_add(1, std::memory_order_relaxed);
  return index;
}

}  // namespace hots3
