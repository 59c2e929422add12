// LayoutCache (src/storage/layout_cache.h): sharded, bounded by the bytes of all shards together.

#include "storage/layout_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace hots3::storage::detail {
namespace {

// A layout of one row with `checksums` checksums, tagged with `version` so that a lookup can
// tell whose layout it got.
std::shared_ptr<const LayoutCache::Layout> layout_of(std::int64_t version, std::size_t checksums) {
  ExtentRecord row;
  row.row_id = version;
  row.checksums.assign(checksums, 0);
  return std::make_shared<const LayoutCache::Layout>(LayoutCache::Layout{row});
}

TEST(LayoutCache, KeepsTheMostRecentWithinItsBudgetAcrossShards) {
  const std::uint64_t each = LayoutCache::cost(*layout_of(0, 250));
  LayoutCache cache(100 * each);
  for (std::int64_t v = 1; v <= 1000; ++v) {
    cache.insert(v, layout_of(v, 250));
    ASSERT_LE(cache.bytes(), 100 * each);
  }
  EXPECT_GE(cache.bytes(), 90 * each) << "evicted far more than the budget needs";
  // The last ones are all there (each eviction took its shard's oldest, then others' oldest).
  for (std::int64_t v = 991; v <= 1000; ++v) {
    auto found = cache.find(v);
    ASSERT_TRUE(found) << v;
    EXPECT_EQ(found->front().row_id, v);
  }
  EXPECT_FALSE(cache.find(1));
}

TEST(LayoutCache, AHitKeepsALayoutAndAHugeOneIsNotCached) {
  const std::uint64_t each = LayoutCache::cost(*layout_of(0, 250));
  LayoutCache cache(400 * each);
  cache.insert(1, layout_of(1, 250));
  for (std::int64_t v = 2; v <= 4000; ++v) {
    ASSERT_TRUE(cache.find(1)) << "evicted while in use, at " << v;
    cache.insert(v, layout_of(v, 250));
  }
  cache.insert(5000, layout_of(5000, 200 * 250));  // more than a quarter of the budget
  EXPECT_FALSE(cache.find(5000));
}

TEST(LayoutCache, ConcurrentInsertsAndFindsStayWithinTheBudget) {
  const std::uint64_t each = LayoutCache::cost(*layout_of(0, 100));
  LayoutCache cache(64 * each);
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (std::int64_t i = 0; i < 5000; ++i) {
        const std::int64_t v = i * 4 + t + 1;
        cache.insert(v, layout_of(v, 100));
        const std::int64_t probe = (i % 50) * 4 + (t + 1) % 4 + 1;
        if (auto found = cache.find(probe); found && found->front().row_id != probe) ++wrong;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  // Concurrent inserts may overshoot by one layout each for a moment, never after.
  EXPECT_LE(cache.bytes(), 64 * each);
}

}  // namespace
}  // namespace hots3::storage::detail
