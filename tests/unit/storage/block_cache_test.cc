#include "storage/block_cache.h"

#include "test_support.h"

#include <gtest/gtest.h>

#include <thread>

namespace hots3::storage {
namespace {

constexpr std::size_t kBlock = BlockCache::kBlockBytes;

std::vector<std::byte> block_of(std::uint8_t value, std::size_t n = kBlock) {
  return std::vector<std::byte>(n, std::byte{value});
}

TEST(BlockCache, InsertLookupErase) {
  BlockCache cache(64 * kBlock);
  cache.prefault_all();
  EXPECT_FALSE(cache.lookup({1, 0}));
  EXPECT_TRUE(cache.insert({1, 0}, block_of(7)));
  EXPECT_FALSE(cache.insert({1, 0}, block_of(8)));  // present already
  auto ref = cache.lookup({1, 0});
  ASSERT_TRUE(ref);
  EXPECT_EQ(ref.bytes().size(), kBlock);
  EXPECT_EQ(ref.bytes()[100], std::byte{7});
  EXPECT_FALSE(cache.lookup({2, 0}));  // another version of the same device block
  cache.erase({1, 0});
  EXPECT_FALSE(cache.lookup({1, 0}));
  EXPECT_EQ(ref.bytes()[100], std::byte{7});  // the holder keeps its bytes
}

TEST(BlockCache, StaysWithinCapacity) {
  BlockCache cache(64 * kBlock);
  cache.prefault_all();
  for (std::uint64_t i = 0; i < 1000; ++i) cache.insert({1, i * kBlock}, block_of(1));
  EXPECT_LE(cache.stats().used_bytes, 64 * kBlock);
  EXPECT_GT(cache.stats().evictions, 900U);
}

TEST(BlockCache, AScanLargerThanTheCacheDoesNotFlushTheHotSet) {
  BlockCache cache(256 * kBlock);
  cache.prefault_all();
  // The hot set: 128 blocks, read several times (as every epoch does).
  for (int round = 0; round < 3; ++round) {
    for (std::uint64_t i = 0; i < 128; ++i) {
      if (!cache.lookup({1, i * kBlock})) cache.insert({1, i * kBlock}, block_of(1));
    }
  }
  // One pass over 4x the cache of other data.
  const BlockCache::Stats before_scan = cache.stats();
  for (std::uint64_t i = 0; i < 1024; ++i) {
    if (!cache.lookup({2, i * kBlock})) cache.insert({2, i * kBlock}, block_of(2));
  }
  const BlockCache::Stats after_scan = cache.stats();
  EXPECT_EQ(after_scan.misses - before_scan.misses, 1024U);
  EXPECT_GT(after_scan.evictions, before_scan.evictions) << "the scan did not fill the cache";
  int hits = 0;
  for (std::uint64_t i = 0; i < 128; ++i) hits += cache.lookup({1, i * kBlock}) ? 1 : 0;
  EXPECT_GE(hits, 120) << "the scan flushed the hot set";
  // The counters (what the metrics report) agree.
  EXPECT_EQ(cache.stats().hits - after_scan.hits, static_cast<std::uint64_t>(hits));
}

TEST(BlockCache, BlocksReadAgainAfterProbationArePromoted) {
  BlockCache cache(64 * kBlock);
  cache.prefault_all();
  for (std::uint64_t i = 0; i < 64; ++i) cache.insert({1, i * kBlock}, block_of(1));  // fills it
  // New data goes on probation; re-reading it soon after it left probation promotes it.
  for (std::uint64_t i = 0; i < 40; ++i) cache.insert({2, i * kBlock}, block_of(2));
  for (std::uint64_t i = 0; i < 40; ++i) {
    if (!cache.lookup({2, i * kBlock})) cache.insert({2, i * kBlock}, block_of(2));
  }
  int hits = 0;
  for (std::uint64_t i = 0; i < 40; ++i) hits += cache.lookup({2, i * kBlock}) ? 1 : 0;
  EXPECT_GE(hits, 30);
}

TEST(BlockCache, DisabledCacheKeepsNothing) {
  BlockCache cache(0);
  EXPECT_FALSE(cache.enabled());
  EXPECT_FALSE(cache.insert({1, 0}, block_of(1)));
  EXPECT_FALSE(cache.lookup({1, 0}));
}

TEST(BlockCache, ConcurrentReadersAndWriters) {
  BlockCache cache(512 * kBlock);
  cache.prefault_all();
  std::vector<std::thread> threads;
  std::atomic<std::uint64_t> wrong{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (std::uint64_t i = 0; i < 20000; ++i) {
        const CacheKey key{t % 2, (i % 700) * kBlock};
        if (auto ref = cache.lookup(key)) {
          if (ref.bytes()[0] != std::byte(static_cast<std::uint8_t>(key.version + 1))) ++wrong;
        } else {
          cache.insert(key, block_of(static_cast<std::uint8_t>(key.version + 1)));
        }
        if (i % 97 == 0) cache.erase(key);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0U);
  EXPECT_LE(cache.stats().used_bytes, 512 * kBlock);
}

TEST(BlockCache, PrefaultsInTheBackground) {
  BlockCache cache(128 * kBlock);
  // The prefaulter runs at idle priority: on a busy machine it may wait a while for a core.
  EXPECT_TRUE(test::wait_until([&] { return cache.stats().prefaulted_bytes >= 128 * kBlock; }));
  EXPECT_EQ(cache.stats().prefaulted_bytes, 128 * kBlock);
}

}  // namespace
}  // namespace hots3::storage
