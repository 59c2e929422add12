#pragma once

// Private to src/storage: the cache of object layouts.

#include "hots3/storage/records.h"

#include <array>
#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace hots3::storage::detail {

// Object layouts (extents with their checksums) by version, so that repeated ranged reads of an
// object (training reads shards in 8 MiB ranges) do not reload them from the catalog. Layouts
// are immutable once built; versions are never reused, so nothing needs invalidating — old
// ones simply age out. Bounded by the bytes of checksums held (all shards together).
//
// Split into shards by version, each with its own mutex and LRU, so that workers reading
// different objects never contend; a hit locks one shard. An insertion over the budget evicts
// the least recently used layouts of its own shard first, then of the others.
class LayoutCache {
 public:
  using Layout = std::vector<ExtentRecord>;
  explicit LayoutCache(std::uint64_t capacity_bytes) : capacity_bytes_(capacity_bytes) {}

  std::shared_ptr<const Layout> find(std::int64_t version);
  void insert(std::int64_t version, std::shared_ptr<const Layout> layout);
  static std::uint64_t cost(const Layout& layout);
  [[nodiscard]] std::uint64_t bytes() const noexcept { return bytes_.load(); }

 private:
  struct Item {
    std::int64_t version;
    std::shared_ptr<const Layout> layout;
    std::uint64_t bytes;
  };
  struct alignas(64) Shard {
    std::mutex mutex;
    std::list<Item> lru;  // most recent first
    std::unordered_map<std::int64_t, std::list<Item>::iterator> index;
  };
  static constexpr std::size_t kShards = 16;
  static std::size_t shard_index(std::int64_t version) noexcept;

  const std::uint64_t capacity_bytes_;
  std::atomic<std::uint64_t> bytes_{0};
  std::array<Shard, kShards> shards_;
};

}  // namespace hots3::storage::detail
