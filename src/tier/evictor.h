#pragma once

// Private to src/tier: eviction by watermark. The uploader runs it on its thread for the bound
// buckets: above evict.high of the device allocated (less what readers still hold and will give
// back), versions the upstream holds give their space back, in evict.policy's order
// (storage::EvictionOrder), until allocation is at evict.low. It looks often enough to stay ahead
// of the inflow: between high and full (where fetched data stops being kept and write-back writes
// get SlowDown) a device has room for several looks' worth of any inflow it can take. Versions
// uploaded less than evict.min_resident ago (a job's latest checkpoint, however late its upload)
// go only when nothing else can; that is logged.

#include "hots3/config/config.h"

#include <boost/asio/awaitable.hpp>

#include <atomic>
#include <cstdint>
#include <vector>

namespace hots3::storage {
class ObjectStore;
}

namespace hots3::tier {

struct EvictionCounters {
  std::atomic<std::uint64_t> objects{0};
  std::atomic<std::uint64_t> bytes{0};
  std::atomic<std::uint64_t> young{0};  // uploaded less than min_resident before they went
  // Device allocation at the last look, and the most any look saw (readers' space included).
  std::atomic<std::uint64_t> device_bytes{0};
  std::atomic<std::uint64_t> allocated_bytes{0};
  std::atomic<std::uint64_t> peak_allocated_bytes{0};
};

// Runs until `stopping` is set; reads it on its own executor, which must be the one that sets
// it.
boost::asio::awaitable<void> evict_by_watermark(storage::ObjectStore& store,
                                                config::EvictConfig config,
                                                std::vector<std::int64_t> bucket_ids,
                                                const bool& stopping, EvictionCounters& counters);

}  // namespace hots3::tier
