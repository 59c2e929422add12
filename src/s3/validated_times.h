#pragma once

// Private to src/s3: when each version of a bound bucket was last known to be the one its
// upstream holds (its data fetched with If-Match on its ETag, or a revalidation answered 304),
// by version id, or that it is known not to be (a read of its data was refused because the
// upstream holds another version, or none, under its key): such a version is asked about before
// it is served again, whatever the bucket's revalidation rule, so that the next read finds what
// the upstream holds now rather than failing the same way. In memory only: after a restart (or
// past the bound) the catalog's time of the version's fetch is what revalidation counts from
// (ObjectRecord::validated_ms), so a version confirmed since then by a revalidation may ask once
// more. Bounded: past kMaxVersions every time is forgotten, rather than growing with the number
// of keys read.

#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <unordered_map>

namespace hots3::s3 {

class ValidatedTimes {
 public:
  static constexpr std::size_t kMaxVersions = std::size_t{1} << 20;

  void mark(std::int64_t version_id, std::int64_t ms) {
    Shard& shard = shard_of(version_id);
    const std::lock_guard lock(shard.mutex);
    if (shard.times.size() >= kMaxVersions / kShards) shard.times.clear();
    shard.times[version_id] = ms;
  }

  void mark_changed(std::int64_t version_id) { mark(version_id, kChanged); }

  // When it was last known current; nullopt when never since the start, or known changed since.
  [[nodiscard]] std::optional<std::int64_t> at(std::int64_t version_id) const {
    const std::optional<std::int64_t> t = find(version_id);
    if (t == kChanged) return std::nullopt;
    return t;
  }

  [[nodiscard]] bool changed(std::int64_t version_id) const { return find(version_id) == kChanged; }

 private:
  static constexpr std::int64_t kChanged = -1;  // (times are ms since the epoch)

  [[nodiscard]] std::optional<std::int64_t> find(std::int64_t version_id) const {
    const Shard& shard = shard_of(version_id);
    const std::lock_guard lock(shard.mutex);
    const auto it = shard.times.find(version_id);
    if (it == shard.times.end()) return std::nullopt;
    return it->second;
  }

  static constexpr std::size_t kShards = 16;
  struct Shard {
    mutable std::mutex mutex;
    std::unordered_map<std::int64_t, std::int64_t> times;
  };
  Shard& shard_of(std::int64_t id) { return shards_[static_cast<std::size_t>(id) % kShards]; }
  [[nodiscard]] const Shard& shard_of(std::int64_t id) const {
    return shards_[static_cast<std::size_t>(id) % kShards];
  }
  std::array<Shard, kShards> shards_;
};

}  // namespace hots3::s3
