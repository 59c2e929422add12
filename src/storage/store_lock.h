#pragma once

// Private to src/storage: the lock that keeps two processes off one store. A server holds
// DATA/lock exclusively for its lifetime, `hots3 check` holds it shared; flock(2) locks die with
// the process (kill -9 too), so a crash never leaves a stale lock behind.

#include <string>

namespace hots3::storage::detail {

class StoreLock {
 public:
  enum class Kind { kExclusive, kShared };
  // Creates DATA/lock if needed. Throws std::runtime_error naming the directory when another
  // process (or another StoreLock of this one) holds it in a conflicting way.
  StoreLock(const std::string& data_dir, Kind kind);
  ~StoreLock();
  StoreLock(const StoreLock&) = delete;
  StoreLock& operator=(const StoreLock&) = delete;
  StoreLock(StoreLock&&) = delete;
  StoreLock& operator=(StoreLock&&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace hots3::storage::detail
