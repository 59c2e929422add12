#pragma once

// Private to src/storage: object records by (bucket, key) in front of the catalog.

#include "storage/catalog/catalog.h"

#include <boost/unordered/unordered_flat_map.hpp>

#include <array>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <variant>

namespace hots3::storage::detail {

// Object metadata (with inline data) by (bucket, key), so that HEAD and GET of hot objects
// need no SQLite read transaction (each costs file-lock system calls and a shared-memory mutex
// that every worker contends for). Exact, not eventually consistent: every change goes
// through this store, which invalidates as the change becomes durable (Catalog::write's
// on_durable), before the writes of its flush resume; a lookup that raced a change does not insert
// what it read (the shard's generation moved on meanwhile). Bounded by bytes, LRU per shard.
class MetadataCache {
  struct Entry {
    std::string key;  // bucket id + '/' + object key
    std::size_t hash;
    std::shared_ptr<const ObjectRecord> record;
    std::uint64_t bytes;
  };
  using Lru = std::list<Entry>;

 public:
  explicit MetadataCache(std::uint64_t capacity_bytes);

  struct Miss {
    std::uint64_t generation;  // pass back to insert()
  };
  // The cached record, or what insert() needs after the caller read the catalog. With
  // `with_data`, an inline object cached without its bytes is a miss.
  std::variant<std::shared_ptr<const ObjectRecord>, Miss> find(std::int64_t bucket_id,
                                                               std::string_view key,
                                                               bool with_data);
  // Caches `record` (nullptr: "no such key") unless the key changed since find(); replaces a
  // record cached without its inline bytes by one with them.
  void insert(std::int64_t bucket_id, std::string_view key,
              std::shared_ptr<const ObjectRecord> record, Miss miss);

  // A write-through, made ready by the writer's own thread (the cache key, its hash, the
  // entry's memory) so that put(), on the catalog's syncer, only links it in. put() leaves what
  // it displaced (the key's older record, entries evicted for room) in the Update: they are
  // freed where the Update is destroyed, the writer's thread again.
  class Update {
    friend class MetadataCache;
    Lru entries_;  // before put(): the new entry; after: what it displaced
  };
  // The record may still change (its version id is set in the catalog transaction) until put().
  [[nodiscard]] static Update prepare(std::int64_t bucket_id, std::string_view key,
                                      std::shared_ptr<const ObjectRecord> record);
  // Write-through of a durable new version. Only in commit order (Catalog::write's
  // on_durable): a later call must never carry an older version.
  void put(Update& update);

  // As a change of the key becomes durable (Catalog::write's on_durable, like put()): a write of
  // the same commit that read the new row must not then find the old record here.
  void invalidate(std::int64_t bucket_id, std::string_view key);

  struct Stats {
    std::uint64_t capacity_bytes = 0;
    std::uint64_t used_bytes = 0;
    std::uint64_t entries = 0;
    std::uint64_t hits = 0;
    std::uint64_t misses = 0;
  };
  Stats stats();

 private:
  // The index's key: a view of the entry's own key string, with its hash computed once. An
  // open-addressing table: a lookup costs one or two cache misses where std::unordered_map's
  // chained nodes cost three or four (with 64 writers of 4 KiB objects the syncer spent a
  // fifth of its time finding and erasing nodes).
  struct Key {
    std::string_view id;
    std::size_t hash;
  };
  struct KeyHash {
    std::size_t operator()(const Key& k) const noexcept { return k.hash; }
  };
  struct KeyEq {
    bool operator()(const Key& a, const Key& b) const noexcept {
      return a.hash == b.hash && a.id == b.id;
    }
  };
  using Index = boost::unordered_flat_map<Key, Lru::iterator, KeyHash, KeyEq>;
  struct Shard {
    std::mutex mutex;
    Lru lru;  // most recent first
    Index index;
    std::uint64_t bytes = 0;
    std::uint64_t generation = 0;
    std::uint64_t hits = 0;
    std::uint64_t misses = 0;
  };
  static constexpr std::size_t kShards = 16;
  static std::string id_of(std::int64_t bucket_id, std::string_view key);
  static std::size_t hash_of(std::string_view id) noexcept;
  static std::uint64_t bytes_of(const std::string& id,
                                const std::shared_ptr<const ObjectRecord>& record);
  // A list of one entry, ready to be spliced into a shard.
  static Lru entry_of(std::int64_t bucket_id, std::string_view key,
                      std::shared_ptr<const ObjectRecord> record);
  Shard& shard_of(std::size_t hash) noexcept { return shards_[hash % kShards]; }
  // With the shard's mutex held. unlink: moves `entry` out of the shard to the end of `into`.
  // store: links the one entry of `incoming` in as the most recent, in place of `existing`
  // (the key's index slot, or end()), and moves what it displaced into `incoming`.
  static void unlink(Shard& s, Lru::iterator entry, Lru& into);
  void store(Shard& s, Lru& incoming, Index::iterator existing);

  std::uint64_t capacity_bytes_per_shard_;
  std::array<Shard, kShards> shards_;
};

}  // namespace hots3::storage::detail
