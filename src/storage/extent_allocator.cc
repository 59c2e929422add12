#include "storage/extent_allocator.h"

#include "hots3/common/assert.h"

#include <algorithm>

namespace hots3::storage {

ExtentAllocator::ExtentAllocator(std::uint64_t start_bytes, std::uint64_t end_bytes,
                                 std::uint32_t unit_bytes)
    : start_bytes_(start_bytes), end_bytes_(end_bytes), unit_bytes_(unit_bytes) {
  H3_ASSERT(unit_bytes_ > 0 && start_bytes_ % unit_bytes_ == 0 && end_bytes_ % unit_bytes_ == 0 &&
            start_bytes_ <= end_bytes_);
  if (end_bytes_ > start_bytes_) insert_free(start_bytes_, end_bytes_ - start_bytes_);
}

void ExtentAllocator::erase_free(std::map<std::uint64_t, std::uint64_t>::iterator it) {
  by_length_.erase({it->second, it->first});
  free_bytes_ -= it->second;
  by_offset_.erase(it);
}

void ExtentAllocator::insert_free(std::uint64_t offset, std::uint64_t length) {
  std::uint64_t begin = offset;
  std::uint64_t end = offset + length;
  auto next = by_offset_.lower_bound(begin);
  H3_ASSERT(next == by_offset_.end() || next->first >= end, "release of free space (double free)");
  if (next != by_offset_.begin()) {
    auto prev = std::prev(next);
    H3_ASSERT(prev->first + prev->second <= begin, "release of free space (double free)");
    if (prev->first + prev->second == begin) {
      begin = prev->first;
      erase_free(prev);
    }
  }
  if (next != by_offset_.end() && next->first == end) {
    end = next->first + next->second;
    erase_free(next);
  }
  by_offset_.emplace(begin, end - begin);
  by_length_.emplace(end - begin, begin);
  free_bytes_ += end - begin;
}

void ExtentAllocator::take(std::map<std::uint64_t, std::uint64_t>::iterator it,
                           std::uint64_t length, ExtentList& out) {
  const std::uint64_t offset = it->first;
  const std::uint64_t have = it->second;
  H3_ASSERT(length <= have);
  erase_free(it);
  if (have > length) {
    by_offset_.emplace(offset + length, have - length);
    by_length_.emplace(have - length, offset + length);
    free_bytes_ += have - length;
  }
  out.push_back({offset, length});
}

Result<ExtentList> ExtentAllocator::allocate(std::uint64_t length_bytes, Placement placement) {
  H3_ASSERT(length_bytes > 0);
  const std::uint64_t length = (length_bytes + unit_bytes_ - 1) / unit_bytes_ * unit_bytes_;
  std::lock_guard lock(mutex_);
  if (length > free_bytes_) return errc::kNoSpace;
  ExtentList out;
  if (!by_length_.empty()) {
    auto candidate = placement == Placement::kLargest ? std::prev(by_length_.end())
                                                      : by_length_.lower_bound({length, 0});
    if (candidate != by_length_.end() && candidate->first >= length) {
      take(by_offset_.find(candidate->second), length, out);
      return out;
    }
  }
  // Fragmented: the largest extents first, so the object gets the fewest pieces.
  std::uint64_t left = length;
  while (left > 0) {
    H3_ASSERT(!by_length_.empty());
    auto largest = std::prev(by_length_.end());
    const std::uint64_t n = std::min(left, largest->first);
    take(by_offset_.find(largest->second), n, out);
    left -= n;
  }
  std::sort(out.begin(), out.end(),
            [](const Extent& a, const Extent& b) { return a.offset_bytes < b.offset_bytes; });
  return out;
}

bool ExtentAllocator::allocate_at(std::uint64_t offset_bytes, std::uint64_t length_bytes) {
  const std::uint64_t length = (length_bytes + unit_bytes_ - 1) / unit_bytes_ * unit_bytes_;
  H3_ASSERT(offset_bytes % unit_bytes_ == 0 && length > 0);
  std::lock_guard lock(mutex_);
  auto it = by_offset_.upper_bound(offset_bytes);
  if (it == by_offset_.begin()) return false;
  --it;
  const std::uint64_t begin = it->first;
  const std::uint64_t end = it->first + it->second;
  if (offset_bytes + length > end) return false;
  erase_free(it);
  if (begin < offset_bytes) insert_free(begin, offset_bytes - begin);
  if (offset_bytes + length < end) insert_free(offset_bytes + length, end - offset_bytes - length);
  return true;
}

void ExtentAllocator::release(std::span<const Extent> extents) {
  std::lock_guard lock(mutex_);
  for (const Extent& e : extents) {
    H3_ASSERT(e.length_bytes > 0 && e.offset_bytes % unit_bytes_ == 0 &&
                  e.length_bytes % unit_bytes_ == 0 && e.offset_bytes >= start_bytes_ &&
                  e.end_bytes() <= end_bytes_,
              "release of an extent the allocator does not manage");
    insert_free(e.offset_bytes, e.length_bytes);
  }
}

Result<void> ExtentAllocator::build_from_used(std::vector<Extent> used) {
  std::sort(used.begin(), used.end(),
            [](const Extent& a, const Extent& b) { return a.offset_bytes < b.offset_bytes; });
  std::lock_guard lock(mutex_);
  by_offset_.clear();
  by_length_.clear();
  free_bytes_ = 0;
  std::uint64_t cursor = start_bytes_;
  for (const Extent& e : used) {
    if (e.offset_bytes < cursor || e.end_bytes() > end_bytes_ || e.length_bytes == 0)
      return errc::kCorrupt;
    if (e.offset_bytes > cursor) insert_free(cursor, e.offset_bytes - cursor);
    cursor = e.end_bytes();
  }
  if (cursor < end_bytes_) insert_free(cursor, end_bytes_ - cursor);
  return {};
}

std::uint64_t ExtentAllocator::free_bytes() const {
  std::lock_guard lock(mutex_);
  return free_bytes_;
}

std::uint64_t ExtentAllocator::largest_free_bytes() const {
  std::lock_guard lock(mutex_);
  return by_length_.empty() ? 0 : std::prev(by_length_.end())->first;
}

std::size_t ExtentAllocator::free_extent_count() const {
  std::lock_guard lock(mutex_);
  return by_offset_.size();
}

ExtentList ExtentAllocator::free_extents() const {
  std::lock_guard lock(mutex_);
  ExtentList out;
  for (const auto& [offset, length] : by_offset_) out.push_back({offset, length});
  return out;
}

}  // namespace hots3::storage
