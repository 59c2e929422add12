#pragma once

// A RAM cache of object data blocks in front of the O_DIRECT reads (O_DIRECT bypasses the
// kernel's page cache, so hots3 keeps its own). Training reads the same
// dataset every epoch: the second read must come at memory speed.
//
// - Bounded: a fixed arena of capacity_bytes, in 64 KiB slots. Slots are prefaulted ahead of
//   use by an idle-priority thread (first-touching fresh memory costs several µs per 4 KiB page
//   here, more than the I/O); a block is cached only into a prefaulted slot, so the read path
//   never pays for a page fault.
// - Scan-resistant (2Q): while the cache has room everything is kept; once full, new blocks
//   enter a probation FIFO (a quarter of the capacity) and only blocks read again while on
//   probation or soon after leaving it (a ghost list) move to the main set, which is evicted
//   with CLOCK. One pass over a dataset larger than the cache cycles through probation and
//   leaves the hot set alone.
// - Exact invalidation: entries are keyed by (object version, device offset); the store erases
//   a version's entries when it is overwritten or deleted.
// - Shared by all workers without a global lock on the hit path: the key space is split into
//   shards with a mutex each; a hit takes one shard's mutex for a hash lookup and a reference
//   count increment.
//
// Handed-out blocks are reference-counted: an entry evicted while a reader still sends it
// stays valid until that reader lets go.

#include "hots3/common/units.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

namespace hots3::storage {

class BlockCache;

struct CacheKey {
  std::int64_t version = 0;
  std::uint64_t device_offset = 0;
  friend bool operator==(const CacheKey&, const CacheKey&) = default;
};

// A reference to a cached block; the bytes stay valid while it lives. Move-only.
class CacheRef {
 public:
  CacheRef() = default;
  ~CacheRef();
  CacheRef(CacheRef&& other) noexcept : entry_(other.entry_) { other.entry_ = nullptr; }
  CacheRef& operator=(CacheRef&& other) noexcept;
  CacheRef(const CacheRef&) = delete;
  CacheRef& operator=(const CacheRef&) = delete;

  [[nodiscard]] explicit operator bool() const noexcept { return entry_ != nullptr; }
  [[nodiscard]] std::span<const std::byte> bytes() const noexcept;

  struct Entry;  // implementation detail (block_cache.cc)

 private:
  friend class BlockCache;
  explicit CacheRef(Entry* entry) : entry_(entry) {}
  Entry* entry_ = nullptr;
};

class BlockCache {
 public:
  static constexpr std::size_t kBlockBytes = 64 * kKiB;

  // capacity_bytes 0 disables the cache (every lookup misses, nothing is kept).
  explicit BlockCache(std::uint64_t capacity_bytes);
  ~BlockCache();
  BlockCache(const BlockCache&) = delete;
  BlockCache& operator=(const BlockCache&) = delete;
  BlockCache(BlockCache&&) = delete;
  BlockCache& operator=(BlockCache&&) = delete;

  CacheRef lookup(const CacheKey& key);

  // Copies `data` (at most kBlockBytes) in, unless the key is present or no prefaulted slot
  // is free. Returns whether it was inserted.
  bool insert(const CacheKey& key, std::span<const std::byte> data);

  // Drops the entry (if present); readers holding it keep their bytes.
  void erase(const CacheKey& key);

  struct Stats {
    std::uint64_t capacity_bytes = 0;
    std::uint64_t prefaulted_bytes = 0;
    std::uint64_t used_bytes = 0;
    std::uint64_t hits = 0;
    std::uint64_t misses = 0;
    std::uint64_t inserts = 0;
    std::uint64_t evictions = 0;
  };
  [[nodiscard]] Stats stats() const;
  [[nodiscard]] bool enabled() const noexcept { return capacity_bytes_ > 0; }

  // Tests: prefault the whole arena now instead of in the background.
  void prefault_all();

  struct Arena;  // implementation detail (block_cache.cc)

 private:
  struct Shard;
  [[nodiscard]] Shard& shard_of(const CacheKey& key) const noexcept;

  std::uint64_t capacity_bytes_;
  std::unique_ptr<Arena> arena_;
  std::unique_ptr<Shard[]> shards_;
  std::size_t shard_count_ = 0;
};

}  // namespace hots3::storage
