#pragma once

// Private to src/storage: how often each key of a tiered bucket was read lately (the store keeps
// one for reads from the device, hits, and one for reads through, misses), for eviction that a
// scan does not flush and epochs over more than the device do not defeat, and for admission on
// a second miss. A count-min sketch of 4-bit counters keyed by (bucket, key): it outlives
// versions, evictions and re-fetches (a key often read, evicted and fetched again is known as
// often read), costs a few atomic increments per read and a fixed 1 MiB, and halves every
// counter after a sample of reads so that what was read often long ago gives way to what is
// read now.

#include <xxhash.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string_view>

namespace hots3::storage::detail {

class ReadFrequency {
 public:
  ReadFrequency() : counters_(std::make_unique<std::atomic<std::uint8_t>[]>(kRows * kWidth)) {}

  void add(std::int64_t bucket_id, std::string_view key) {
    const std::uint64_t h = hash(bucket_id, key);
    for (std::size_t row = 0; row < kRows; ++row) {
      std::atomic<std::uint8_t>& c = counter(row, h);
      std::uint8_t v = c.load(std::memory_order_relaxed);
      while (v < kMax && !c.compare_exchange_weak(v, static_cast<std::uint8_t>(v + 1),
                                                  std::memory_order_relaxed)) {
      }
    }
    if (reads_.fetch_add(1, std::memory_order_relaxed) + 1 == kSample) age();
  }

  // The estimate: the least of the key's counters (at least the key's reads since the last
  // halving, up to 15, but for an increment lost to a halving under way).
  [[nodiscard]] unsigned estimate(std::int64_t bucket_id, std::string_view key) const {
    const std::uint64_t h = hash(bucket_id, key);
    unsigned least = kMax;
    for (std::size_t row = 0; row < kRows; ++row) {
      const unsigned v = counter(row, h).load(std::memory_order_relaxed);
      if (v < least) least = v;
    }
    return least;
  }

 private:
  static constexpr std::size_t kRows = 4;
  static constexpr std::size_t kWidth = std::size_t{1} << 18;  // per row: 1 MiB in all
  static constexpr std::uint8_t kMax = 15;
  static constexpr std::uint64_t kSample = 10 * kWidth;  // reads between two halvings

  static std::uint64_t hash(std::int64_t bucket_id, std::string_view key) {
    return XXH3_64bits_withSeed(key.data(), key.size(), static_cast<std::uint64_t>(bucket_id));
  }
  [[nodiscard]] std::atomic<std::uint8_t>& counter(std::size_t row, std::uint64_t h) const {
    // Row r's slot is h1 + r * h2 (two halves of the hash; h2 odd): keys that share a slot in
    // one row rarely share it in another.
    const std::uint64_t h1 = h & 0xffff'ffffU;
    const std::uint64_t h2 = (h >> 32) | 1U;
    const std::uint64_t slot = (h1 + row * h2) & (kWidth - 1);
    return counters_[row * kWidth + slot];
  }
  // Halves every counter. Reads that race with it may lose an increment: a count is an estimate.
  void age() {
    reads_.store(0, std::memory_order_relaxed);
    for (std::size_t i = 0; i < kRows * kWidth; ++i) {
      counters_[i].store(
          static_cast<std::uint8_t>(counters_[i].load(std::memory_order_relaxed) / 2),
          std::memory_order_relaxed);
    }
  }

  std::unique_ptr<std::atomic<std::uint8_t>[]> counters_;  // NOLINT(*-avoid-c-arrays)
  std::atomic<std::uint64_t> reads_{0};
};

}  // namespace hots3::storage::detail
