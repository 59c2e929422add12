#include "tier/evictor.h"

#include "hots3/common/clock.h"
#include "hots3/common/logging.h"
#include "hots3/storage/object_store.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <chrono>
#include <limits>

namespace hots3::tier {

namespace asio = boost::asio;

namespace {

// How often allocation is looked at: cheap (counters in memory), and at a device's full write
// speed the gap between high and full takes many looks to cross.
constexpr auto kLook = std::chrono::milliseconds(50);
// After a look that could free nothing (all of it dirty, queued or inline), the next eviction
// waits this long: each attempt is a catalog transaction.
constexpr auto kNothingToFree = std::chrono::seconds(1);
// Read times kept in memory are saved at least this often, so that a restart keeps most of the
// order.
constexpr std::int64_t kSaveEveryMs = 10'000;
// The same warning at most this often.
constexpr std::int64_t kWarnEveryMs = 60'000;

}  // namespace

asio::awaitable<void> evict_by_watermark(storage::ObjectStore& store, config::EvictConfig config,
                                         std::vector<std::int64_t> bucket_ids, const bool& stopping,
                                         EvictionCounters& counters) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  std::int64_t next_save_ms = now_ms() + kSaveEveryMs;
  std::int64_t warned_young_ms = 0;
  std::int64_t warned_stuck_ms = 0;
  std::int64_t warned_failed_ms = 0;
  const storage::EvictionOrder order = config.policy == config::EvictConfig::Policy::kLru
                                           ? storage::EvictionOrder::kLeastRecentlyRead
                                           : storage::EvictionOrder::kLeastOftenRead;
  auto wait = kLook;
  while (!stopping) {
    timer.expires_after(wait);
    co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    if (stopping) break;
    wait = kLook;
    const storage::StoreStats st = store.stats();
    counters.device_bytes = st.device_bytes;
    counters.allocated_bytes = st.used_bytes;
    if (st.used_bytes > counters.peak_allocated_bytes)
      counters.peak_allocated_bytes = st.used_bytes;
    const std::uint64_t allocated = st.used_bytes - std::min(st.pending_free_bytes, st.used_bytes);
    const std::uint64_t high = st.device_bytes / 100 * config.high_percent;
    if (allocated <= high) {
      if (now_ms() >= next_save_ms) {
        next_save_ms = now_ms() + kSaveEveryMs;
        auto saving = store.save_access_times();
        const auto saved = co_await std::move(saving);
        if (!saved) log::warn("tier: saving read times failed: {}", saved.error().message());
      }
      continue;
    }
    const std::uint64_t wanted = allocated - st.device_bytes / 100 * config.low_percent;
    const std::int64_t now = now_ms();
    next_save_ms = now + kSaveEveryMs;  // evict_coldest saves them (at most once a second)
    auto evicting =
        store.evict_coldest(bucket_ids, wanted, now - config.min_resident.count(), order);
    auto evicted = co_await std::move(evicting);
    if (!evicted) {
      if (now - warned_failed_ms >= kWarnEveryMs) {
        warned_failed_ms = now;
        log::warn("tier: eviction failed: {}", evicted.error().message());
      }
      wait = kNothingToFree;
      continue;
    }
    storage::Evicted freed = *evicted;
    if (freed.bytes < wanted) {
      // Nothing older is left to free: the young go too, rather than the device filling up.
      auto more = store.evict_coldest(bucket_ids, wanted - freed.bytes,
                                      std::numeric_limits<std::int64_t>::max(), order);
      auto young = co_await std::move(more);
      if (young && young->bytes > 0) {
        counters.young += young->objects;
        freed.objects += young->objects;
        freed.bytes += young->bytes;
        if (now - warned_young_ms >= kWarnEveryMs) {
          warned_young_ms = now;
          log::warn(
              "tier: the device is {}% allocated and versions uploaded more than {} s ago did "
              "not free enough: {} recent versions went too",
              allocated * 100 / std::max<std::uint64_t>(st.device_bytes, 1),
              config.min_resident.count() / 1000, young->objects);
        }
      }
    }
    counters.objects += freed.objects;
    counters.bytes += freed.bytes;
    if (freed.bytes == 0) {
      wait = kNothingToFree;
      if (now - warned_stuck_ms >= kWarnEveryMs) {
        warned_stuck_ms = now;
        log::warn(
            "tier: the device is {}% allocated and nothing can be evicted (not yet upstream, "
            "queued, or small enough to live in the catalog)",
            allocated * 100 / std::max<std::uint64_t>(st.device_bytes, 1));
      }
    } else {
      log::debug("tier: evicted {} versions ({} bytes) at {}% allocated", freed.objects,
                 freed.bytes, allocated * 100 / std::max<std::uint64_t>(st.device_bytes, 1));
    }
  }
}

}  // namespace hots3::tier
