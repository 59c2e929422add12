#include "storage/metadata_cache.h"

#include "storage/store_core.h"

#include "hots3/common/assert.h"

#include <functional>

namespace hots3::storage::detail {

MetadataCache::MetadataCache(std::uint64_t capacity_bytes)
    : capacity_bytes_per_shard_(capacity_bytes / kShards) {}

std::string MetadataCache::id_of(std::int64_t bucket_id, std::string_view key) {
  std::string id = std::to_string(bucket_id);
  id += '/';
  id += key;
  return id;
}

std::size_t MetadataCache::hash_of(std::string_view id) noexcept {
  return std::hash<std::string_view>{}(id);
}

namespace {
// False for an inline object read without its bytes (by HEAD).
bool complete(const std::shared_ptr<const ObjectRecord>& record) {
  return !record || !record->inline_data || record->inline_data->size() == record->size_bytes;
}
}  // namespace

std::variant<std::shared_ptr<const ObjectRecord>, MetadataCache::Miss> MetadataCache::find(
    std::int64_t bucket_id, std::string_view key, bool with_data) {
  const std::string id = id_of(bucket_id, key);
  const std::size_t hash = hash_of(id);
  Shard& s = shard_of(hash);
  std::lock_guard lock(s.mutex);
  auto it = s.index.find(Key{id, hash});
  if (it == s.index.end() || (with_data && !complete(it->second->record))) {
    ++s.misses;
    return Miss{s.generation};
  }
  ++s.hits;
  s.lru.splice(s.lru.begin(), s.lru, it->second);
  return it->second->record;
}

std::uint64_t MetadataCache::bytes_of(const std::string& id,
                                      const std::shared_ptr<const ObjectRecord>& record) {
  std::uint64_t bytes = 128 + id.size();
  if (record) {
    bytes += sizeof(ObjectRecord) + record->key.size() + record->etag.size() +
             (record->inline_data ? record->inline_data->size() : 0);
    for (const auto& [name, value] : record->user_metadata)
      bytes += name.size() + value.size() + 64;
  }
  return bytes;
}

MetadataCache::Lru MetadataCache::entry_of(std::int64_t bucket_id, std::string_view key,
                                           std::shared_ptr<const ObjectRecord> record) {
  std::string id = id_of(bucket_id, key);
  const std::size_t hash = hash_of(id);
  const std::uint64_t bytes = bytes_of(id, record);
  Lru entry;
  entry.push_back({std::move(id), hash, std::move(record), bytes});
  return entry;
}

void MetadataCache::unlink(Shard& s, Lru::iterator entry, Lru& into) {
  s.bytes -= entry->bytes;
  s.index.erase(Key{entry->key, entry->hash});
  into.splice(into.end(), s.lru, entry);
}

void MetadataCache::store(Shard& s, Lru& incoming, Index::iterator existing) {
  if (existing != s.index.end()) unlink(s, existing->second, incoming);
  s.lru.splice(s.lru.begin(), incoming, incoming.begin());
  s.index.emplace(Key{s.lru.front().key, s.lru.front().hash}, s.lru.begin());
  s.bytes += s.lru.front().bytes;
  while (s.bytes > capacity_bytes_per_shard_ && !s.lru.empty())
    unlink(s, std::prev(s.lru.end()), incoming);
}

void MetadataCache::insert(std::int64_t bucket_id, std::string_view key,
                           std::shared_ptr<const ObjectRecord> record, Miss miss) {
  if (capacity_bytes_per_shard_ == 0) return;
  // Declared before the lock: what it displaces is freed after the unlock.
  Lru incoming = entry_of(bucket_id, key, std::move(record));
  const Entry& fresh = incoming.front();
  Shard& s = shard_of(fresh.hash);
  std::lock_guard lock(s.mutex);
  // A change of any key of this shard since find(): what was read may be stale; do not keep it.
  if (s.generation != miss.generation) return;
  const auto it = s.index.find(Key{fresh.key, fresh.hash});
  if (it != s.index.end() && (complete(it->second->record) || !complete(fresh.record))) return;
  store(s, incoming, it);
}

MetadataCache::Update MetadataCache::prepare(std::int64_t bucket_id, std::string_view key,
                                             std::shared_ptr<const ObjectRecord> record) {
  Update update;
  update.entries_ = entry_of(bucket_id, key, std::move(record));
  return update;
}

void MetadataCache::put(Update& update) {
  H3_ASSERT(update.entries_.size() == 1,
            "MetadataCache::put of an Update not fresh from prepare()");
  const Entry& fresh = update.entries_.front();
  Shard& s = shard_of(fresh.hash);
  std::lock_guard lock(s.mutex);
  ++s.generation;  // a reader's catalog row from before this commit is stale
  if (capacity_bytes_per_shard_ == 0) return;
  store(s, update.entries_, s.index.find(Key{fresh.key, fresh.hash}));
}

void MetadataCache::invalidate(std::int64_t bucket_id, std::string_view key) {
  Lru dropped;  // declared before the lock: freed after the unlock
  const std::string id = id_of(bucket_id, key);
  const std::size_t hash = hash_of(id);
  Shard& s = shard_of(hash);
  std::lock_guard lock(s.mutex);
  ++s.generation;
  if (const auto it = s.index.find(Key{id, hash}); it != s.index.end())
    unlink(s, it->second, dropped);
}

MetadataCache::Stats MetadataCache::stats() {
  Stats total;
  for (Shard& s : shards_) {
    std::lock_guard lock(s.mutex);
    total.used_bytes += s.bytes;
    total.entries += s.index.size();
    total.hits += s.hits;
    total.misses += s.misses;
  }
  total.capacity_bytes = capacity_bytes_per_shard_ * kShards;
  return total;
}

}  // namespace hots3::storage::detail

namespace hots3::storage::detail {

Result<std::shared_ptr<const ObjectRecord>> lookup_object(StoreCore& core, std::int64_t bucket_id,
                                                          std::string_view key, bool with_data) {
  auto found = core.metadata->find(bucket_id, key, with_data);
  if (auto* hit = std::get_if<std::shared_ptr<const ObjectRecord>>(&found)) return std::move(*hit);
  H3_TRY(auto row, with_data ? core.catalog->find_object_with_data(bucket_id, key)
                             : core.catalog->find_object(bucket_id, key));
  std::shared_ptr<const ObjectRecord> record;
  if (row) record = std::make_shared<const ObjectRecord>(std::move(*row));
  core.metadata->insert(bucket_id, key, record, std::get<MetadataCache::Miss>(found));
  return record;
}

}  // namespace hots3::storage::detail
