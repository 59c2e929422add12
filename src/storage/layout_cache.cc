// LayoutCache: object layouts by version, sharded (see layout_cache.h).

#include "storage/layout_cache.h"

namespace hots3::storage::detail {

std::uint64_t LayoutCache::cost(const Layout& layout) {
  std::uint64_t bytes = 64;
  for (const ExtentRecord& e : layout) {
    bytes += sizeof(ExtentRecord) + e.checksums.size() * sizeof(std::uint32_t);
  }
  return bytes;
}

std::size_t LayoutCache::shard_index(std::int64_t version) noexcept {
  // Versions come from one counter, but objects and parts share it: Fibonacci hashing (the
  // top bits of the product) spreads consecutive versions and strides of them evenly.
  static_assert(kShards == 16);
  const std::uint64_t mixed = static_cast<std::uint64_t>(version) * 0x9E3779B97F4A7C15ULL;
  return static_cast<std::size_t>(mixed >> 60);
}

std::shared_ptr<const LayoutCache::Layout> LayoutCache::find(std::int64_t version) {
  Shard& shard = shards_[shard_index(version)];
  std::lock_guard lock(shard.mutex);
  auto it = shard.index.find(version);
  if (it == shard.index.end()) return nullptr;
  shard.lru.splice(shard.lru.begin(), shard.lru, it->second);
  return it->second->layout;
}

void LayoutCache::insert(std::int64_t version, std::shared_ptr<const Layout> layout) {
  const std::uint64_t bytes = cost(*layout);
  if (bytes > capacity_bytes_ / 4) return;  // one huge object must not flush all the others
  // Evicts from the back of `shard`'s LRU while over the budget, keeping its `keep` most recent.
  // REQUIRES: shard.mutex held.
  auto evict = [this](Shard& shard, std::size_t keep) {
    while (bytes_.load() > capacity_bytes_ && shard.lru.size() > keep) {
      bytes_ -= shard.lru.back().bytes;
      shard.index.erase(shard.lru.back().version);
      shard.lru.pop_back();
    }
  };
  const std::size_t home = shard_index(version);
  {
    Shard& shard = shards_[home];
    std::lock_guard lock(shard.mutex);
    if (shard.index.count(version) != 0) return;
    shard.lru.push_front({version, std::move(layout), bytes});
    shard.index.emplace(version, shard.lru.begin());
    bytes_ += bytes;
    evict(shard, 1);  // never the layout just inserted
  }
  // Still over (this shard holds little): the other shards, one lock at a time, so that there
  // is no lock order to keep. Concurrent inserts may overshoot the budget by their own layouts
  // for a moment; each evicts until the total is back under it.
  for (std::size_t i = 1; i < kShards && bytes_.load() > capacity_bytes_; ++i) {
    Shard& other = shards_[(home + i) % kShards];
    std::lock_guard lock(other.mutex);
    evict(other, 0);
  }
}

}  // namespace hots3::storage::detail
