#include <functional>

#include "store_impl.h"

namespace hots3::storage::detail {

MetadataCache::MetadataCache(std::uint64_t capacity_bytes) : capacity_bytes_per_shard_(capacity_bytes / kShards) {}

std::string MetadataCache::id_of(std::int64_t bucket_id, std::string_view key) {
  std::string id = std::to_string(bucket_id);
  id += '/';
  id += key;
  return id;
}

MetadataCache::Shard& MetadataCache::shard_of(const std::string& id) {
  return shards_[std::hash<std::string>{}(id) % kShards];
}

namespace {
// False for an inline object read without its bytes (by HEAD).
bool complete(const std::shared_ptr<const ObjectRecord>& record) {
  return !record || !record->inline_data || record->inline_data->size() == record->size_bytes;
}
}  // namespace

std::variant<std::shared_ptr<const ObjectRecord>, MetadataCache::Miss> MetadataCache::find(std::int64_t bucket_id,
                                                                                         std::string_view key,
                                                                                         bool with_data) {
  const std::string id = id_of(bucket_id, key);
  Shard& s = shard_of(id);
  std::lock_guard lock(s.mutex);
  auto it = s.index.find(id);
  if (it == s.index.end() || (with_data && !complete(it->second->record))) {
    ++s.misses;
    return Miss{s.generation};
  }
  ++s.hits;
  s.lru.splice(s.lru.begin(), s.lru, it->second);
  return it->second->record;
}

std::uint64_t MetadataCache::bytes_of(const std::string& id, const std::shared_ptr<const ObjectRecord>& record) {
  std::uint64_t bytes = 128 + id.size();
  if (record) {
    bytes += sizeof(ObjectRecord) + record->key.size() + record->etag.size() +
             (record->inline_data ? record->inline_data->size() : 0);
    for (const auto& [name, value] : record->user_metadata) bytes += name.size() + value.size() + 64;
  }
  return bytes;
}

void MetadataCache::drop(Shard& s, const std::string& id) {
  if (auto it = s.index.find(id); it != s.index.end()) {
    s.bytes -= it->second->bytes;
    auto entry = it->second;
    s.index.erase(it);
    s.lru.erase(entry);
  }
}

void MetadataCache::store(Shard& s, std::string id, std::shared_ptr<const ObjectRecord> record) {
  const std::uint64_t bytes = bytes_of(id, record);
  drop(s, id);
  s.lru.push_front({std::move(id), std::move(record), bytes});
  s.index.emplace(s.lru.front().key, s.lru.begin());
  s.bytes += bytes;
  while (s.bytes > capacity_bytes_per_shard_ && !s.lru.empty()) {
    s.bytes -= s.lru.back().bytes;
    s.index.erase(s.lru.back().key);
    s.lru.pop_back();
  }
}

void MetadataCache::insert(std::int64_t bucket_id, std::string_view key, std::shared_ptr<const ObjectRecord> record,
                           Miss miss) {
  if (capacity_bytes_per_shard_ == 0) return;
  std::string id = id_of(bucket_id, key);
  Shard& s = shard_of(id);
  std::lock_guard lock(s.mutex);
  // A change of any key of this shard since find(): what was read may be stale; do not keep it.
  if (s.generation != miss.generation) return;
  if (auto it = s.index.find(id); it != s.index.end() && (complete(it->second->record) || !complete(record))) return;
  store(s, std::move(id), std::move(record));
}

void MetadataCache::put(std::int64_t bucket_id, std::string_view key, std::shared_ptr<const ObjectRecord> record) {
  std::string id = id_of(bucket_id, key);
  Shard& s = shard_of(id);
  std::lock_guard lock(s.mutex);
  ++s.generation;  // a reader's catalog row from before this commit is stale
  if (capacity_bytes_per_shard_ == 0) return;
  store(s, std::move(id), std::move(record));
}

void MetadataCache::invalidate(std::int64_t bucket_id, std::string_view key) {
  const std::string id = id_of(bucket_id, key);
  Shard& s = shard_of(id);
  std::lock_guard lock(s.mutex);
  ++s.generation;
  drop(s, id);
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
