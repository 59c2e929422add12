#pragma once

// Private to src/storage: when versions the upstream also holds were last read. A read must
// cost no catalog write, so the times are kept here and written in batches (take()), at most
// once a second however often the evictor chooses by them (it asks read_since_taken() of what
// it has not saved); a time lost in a crash only makes a version look colder.

#include <array>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

namespace hots3::storage::detail {

class AccessTimes {
 public:
  // Called by every read of such a version, from any worker: one short lock of one shard.
  void touch(std::int64_t object_id, std::int64_t now_ms) {
    Shard& s = shards_[static_cast<std::uint64_t>(object_id) % kShards];
    const std::lock_guard lock(s.mutex);
    s.times[object_id] = now_ms;
  }

  // Whether the version was read since the last take().
  [[nodiscard]] bool read_since_taken(std::int64_t object_id) {
    Shard& s = shards_[static_cast<std::uint64_t>(object_id) % kShards];
    const std::lock_guard lock(s.mutex);
    return s.times.contains(object_id);
  }

  // The times noted since the last call, by version id.
  std::vector<std::pair<std::int64_t, std::int64_t>> take() {
    std::vector<std::pair<std::int64_t, std::int64_t>> all;
    for (Shard& s : shards_) {
      std::unordered_map<std::int64_t, std::int64_t> times;
      {
        const std::lock_guard lock(s.mutex);
        times.swap(s.times);
      }
      all.insert(all.end(), times.begin(), times.end());
    }
    return all;
  }

 private:
  static constexpr std::size_t kShards = 16;
  struct Shard {
    std::mutex mutex;
    std::unordered_map<std::int64_t, std::int64_t> times;
  };
  std::array<Shard, kShards> shards_;
};

}  // namespace hots3::storage::detail
