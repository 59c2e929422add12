#pragma once

// Private to src/s3: keys of bound buckets whose upstream was lately found not to hold them, for
// bindings with a negative_ttl: until it passes, a GET or HEAD of such a key answers 404 without
// asking the upstream again (a job that probes for files that do not exist asks once, not at
// every step). In memory only, bounded: past kMaxKeys every entry is forgotten (each key is then
// asked about once more), rather than growing with the number of keys probed.

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

namespace hots3::s3 {

class MissingKeys {
 public:
  static constexpr std::size_t kMaxKeys = std::size_t{1} << 16;

  void note(std::int64_t bucket_id, std::string_view key, std::int64_t until_ms) {
    const std::lock_guard lock(mutex_);
    if (until_.size() >= kMaxKeys) until_.clear();
    until_[name(bucket_id, key)] = until_ms;
  }

  // Whether `key` was noted missing and its time has not passed at `now_ms`.
  [[nodiscard]] bool missing(std::int64_t bucket_id, std::string_view key, std::int64_t now_ms) {
    const std::lock_guard lock(mutex_);
    const auto it = until_.find(name(bucket_id, key));
    if (it == until_.end()) return false;
    if (it->second > now_ms) return true;
    until_.erase(it);
    return false;
  }

 private:
  static std::string name(std::int64_t bucket_id, std::string_view key) {
    std::string out = std::to_string(bucket_id);
    out += '/';
    out += key;
    return out;
  }

  std::mutex mutex_;
  std::unordered_map<std::string, std::int64_t> until_;
};

}  // namespace hots3::s3
