#pragma once

// Free space of the device, in memory. Nothing of it is persisted: at
// start-up it is rebuilt from the extents the catalog references (build_from_used), so space
// written by a transaction that never committed is free again after a crash.
//
// Thread-safe: one mutex, taken once per allocation or release of a whole extent (never per
// block), so concurrent writers do not serialise on it in the data path.

#include "hots3/common/result.h"
#include "hots3/storage/extent.h"

#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <span>

namespace hots3::storage {

class ExtentAllocator {
 public:
  enum class Placement {
    kBestFit,  // the smallest free extent that holds the whole length (size known in advance)
    kLargest,  // the start of the largest free extent, leaving room to grow in place
  };

  // Manages [start_bytes, end_bytes), all free. REQUIRES: both multiples of unit_bytes.
  ExtentAllocator(std::uint64_t start_bytes, std::uint64_t end_bytes, std::uint32_t unit_bytes);

  // Allocates `length_bytes` rounded up to the unit: one extent if a free extent is large
  // enough, otherwise several, largest first (when space is fragmented). Errors: kNoSpace when
  // the free space is smaller (nothing is allocated then).
  Result<ExtentList> allocate(std::uint64_t length_bytes,
                              Placement placement = Placement::kBestFit);

  // Grows an allocation in place: takes [offset_bytes, offset_bytes + length_bytes) if all of
  // it is free. Returns false, taking nothing, otherwise.
  bool allocate_at(std::uint64_t offset_bytes, std::uint64_t length_bytes);

  // Returns extents to the free space, merging neighbours.
  // REQUIRES: every byte is allocated (a double free is a programmer error and asserts).
  void release(std::span<const Extent> extents);

  // Start-up: marks `used` (in any order, not overlapping) as allocated, everything else free.
  // Errors: kCorrupt if extents overlap or lie outside the managed range.
  Result<void> build_from_used(std::vector<Extent> used);

  [[nodiscard]] std::uint64_t unit_bytes() const noexcept { return unit_bytes_; }
  [[nodiscard]] std::uint64_t size_bytes() const noexcept { return end_bytes_ - start_bytes_; }
  [[nodiscard]] std::uint64_t free_bytes() const;
  [[nodiscard]] std::uint64_t used_bytes() const { return size_bytes() - free_bytes(); }
  [[nodiscard]] std::uint64_t largest_free_bytes() const;
  [[nodiscard]] std::size_t free_extent_count() const;
  // The free extents in offset order (tests, `hots3 check`).
  [[nodiscard]] ExtentList free_extents() const;

 private:
  void insert_free(std::uint64_t offset, std::uint64_t length);  // merges; REQUIRES mutex_
  void erase_free(std::map<std::uint64_t, std::uint64_t>::iterator it);
  void take(std::map<std::uint64_t, std::uint64_t>::iterator it, std::uint64_t length,
            ExtentList& out);

  const std::uint64_t start_bytes_;
  const std::uint64_t end_bytes_;
  const std::uint32_t unit_bytes_;
  mutable std::mutex mutex_;
  std::map<std::uint64_t, std::uint64_t> by_offset_;             // offset → length
  std::set<std::pair<std::uint64_t, std::uint64_t>> by_length_;  // (length, offset)
  std::uint64_t free_bytes_ = 0;
};

}  // namespace hots3::storage
