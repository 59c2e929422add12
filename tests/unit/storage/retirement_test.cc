// Retirement (src/storage/retirement.h): space retired while readers may use it is freed once
// they have left, and only then; readers that came later do not hold it back.

#include "storage/retirement.h"

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

namespace hots3::storage::detail {
namespace {

constexpr std::uint64_t kUnit = 4096;

class RetirementTest : public ::testing::Test {
 protected:
  ExtentList take(std::uint64_t units) { return allocator_.allocate(units * kUnit).value(); }

  ExtentAllocator allocator_{0, 256 * kUnit, kUnit};
  BlockCache cache_{0};
  Retirement retirement_{allocator_, cache_};
};

TEST_F(RetirementTest, WithoutReadersSpaceIsFreedAtOnce) {
  retirement_.retire(take(3), 7);
  EXPECT_EQ(allocator_.used_bytes(), 0U);
  EXPECT_EQ(retirement_.pending_bytes(), 0U);
  EXPECT_FALSE(retirement_.is_retired(7));
}

TEST_F(RetirementTest, SpaceRetiredWhileAReaderIsInIsFreedWhenItLeaves) {
  const auto reader = retirement_.enter();
  retirement_.retire(take(3), 7);
  retirement_.retire(take(2), 8);
  EXPECT_EQ(allocator_.used_bytes(), 5 * kUnit);
  EXPECT_EQ(retirement_.pending_bytes(), 5 * kUnit);
  EXPECT_TRUE(retirement_.is_retired(7));
  EXPECT_TRUE(retirement_.is_retired(8));
  EXPECT_FALSE(retirement_.is_retired(9));
  retirement_.leave(reader);
  EXPECT_EQ(allocator_.used_bytes(), 0U);
  EXPECT_EQ(retirement_.pending_bytes(), 0U);
  EXPECT_FALSE(retirement_.is_retired(7));
  EXPECT_FALSE(retirement_.is_retired(8));
}

TEST_F(RetirementTest, EveryReaderFromBeforeTheRetireHoldsIt) {
  const auto first = retirement_.enter();
  const auto second = retirement_.enter();
  retirement_.retire(take(4), 7);
  retirement_.leave(first);
  EXPECT_EQ(retirement_.pending_bytes(), 4 * kUnit);
  EXPECT_EQ(allocator_.used_bytes(), 4 * kUnit);
  retirement_.leave(second);
  EXPECT_EQ(retirement_.pending_bytes(), 0U);
  EXPECT_EQ(allocator_.used_bytes(), 0U);
}

// There is always a reader in: each leaves only after the next has entered. Space retired while
// a reader is in comes back as soon as that reader (and those before it) have left.
TEST_F(RetirementTest, ReadersThatEnterAfterARetireDoNotHoldItBack) {
  auto in = retirement_.enter();
  for (std::int64_t version = 1; version <= 20; ++version) {
    retirement_.retire(take(static_cast<std::uint64_t>(version % 3 + 1)), version);
    EXPECT_GT(retirement_.pending_bytes(), 0U);
    const auto next = retirement_.enter();
    retirement_.leave(in);
    EXPECT_EQ(retirement_.pending_bytes(), 0U) << "version " << version;
    EXPECT_EQ(allocator_.used_bytes(), 0U) << "version " << version;
    EXPECT_FALSE(retirement_.is_retired(version));
    in = next;
  }
  retirement_.leave(in);
}

// Two retirements with a reader in between: each waits for exactly the readers before it.
TEST_F(RetirementTest, EachRetirementWaitsForItsOwnReaders) {
  const auto before_x = retirement_.enter();
  retirement_.retire(take(1), 1);
  const auto before_y = retirement_.enter();
  retirement_.retire(take(2), 2);
  EXPECT_EQ(retirement_.pending_bytes(), 3 * kUnit);
  retirement_.leave(before_x);
  EXPECT_FALSE(retirement_.is_retired(1));
  EXPECT_TRUE(retirement_.is_retired(2));
  EXPECT_EQ(retirement_.pending_bytes(), 2 * kUnit);
  EXPECT_EQ(allocator_.used_bytes(), 2 * kUnit);
  retirement_.leave(before_y);
  EXPECT_EQ(retirement_.pending_bytes(), 0U);
  EXPECT_EQ(allocator_.used_bytes(), 0U);
}

TEST_F(RetirementTest, AReaderMayLeaveOnAnotherThread) {
  Retirement::Ticket ticket{};
  std::thread([&] { ticket = retirement_.enter(); }).join();
  retirement_.retire(take(2), 5);
  EXPECT_EQ(retirement_.pending_bytes(), 2 * kUnit);
  retirement_.leave(ticket);
  EXPECT_EQ(retirement_.pending_bytes(), 0U);
  EXPECT_EQ(allocator_.used_bytes(), 0U);
}

TEST_F(RetirementTest, ReleaseNowFreesAtOnceWhateverTheReaders) {
  const auto reader = retirement_.enter();
  retirement_.release_now(take(3));
  EXPECT_EQ(allocator_.used_bytes(), 0U);
  EXPECT_EQ(retirement_.pending_bytes(), 0U);
  retirement_.leave(reader);
}

TEST(RetirementCache, CachedBlocksOfTheVersionAreDroppedAtRetireAndAgainWhenFreed) {
  constexpr std::uint64_t kBlock = BlockCache::kBlockBytes;
  ExtentAllocator allocator(0, 64 * kBlock, kUnit);
  BlockCache cache(16 * kBlock);
  cache.prefault_all();
  Retirement retirement(allocator, cache);
  const ExtentList extents = allocator.allocate(2 * kBlock).value();
  ASSERT_EQ(extents.size(), 1U);
  const std::vector<std::byte> block(kBlock, std::byte{1});
  const std::uint64_t at = extents[0].offset_bytes;
  ASSERT_TRUE(cache.insert({5, at}, block));
  ASSERT_TRUE(cache.insert({5, at + kBlock}, block));
  const auto reader = retirement.enter();
  retirement.retire(extents, 5);
  EXPECT_FALSE(cache.lookup({5, at}));
  EXPECT_FALSE(cache.lookup({5, at + kBlock}));
  // A reader of version 5 that checked is_retired() just before the retire caches a block after.
  ASSERT_TRUE(cache.insert({5, at + kBlock}, block));
  retirement.leave(reader);
  EXPECT_FALSE(cache.lookup({5, at + kBlock})) << "a freed version's block stayed cached";
  EXPECT_EQ(allocator.used_bytes(), 0U);
}

// Readers on several threads find the current version and check, for a while, that its space
// still belongs to it, while writers replace it with new versions on a device so small that
// every unit is reused again and again. Writers wait for space (as none comes back until
// readers drain): if reclamation were starved by readers that keep coming, they would never
// get it. At the end everything is free.
TEST(RetirementStress, ReadersNeverSeeTheirSpaceReusedAndAllOfItComesBack) {
  constexpr std::uint64_t kUnits = 48;
  ExtentAllocator allocator(0, kUnits * kUnit, kUnit);
  BlockCache cache(0);
  Retirement retirement(allocator, cache);
  std::array<std::atomic<std::int64_t>, kUnits> owner{};  // the version each unit was last given to
  std::mutex catalog_mutex;  // the test's "catalog": the current version and its extents
  std::int64_t current_version = 0;
  ExtentList current_extents;
  std::atomic<std::int64_t> next_version{1};
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> checks{0}, wrong{0};
  std::atomic<int> starved{0};
  constexpr std::uint64_t kMinChecks = 10000;

  auto reader = [&] {
    while (!stop) {
      EpochGuard guard(retirement);
      std::int64_t version = 0;
      ExtentList extents;
      {
        std::lock_guard lock(catalog_mutex);
        version = current_version;
        extents = current_extents;
      }
      for (int pass = 0; pass < 16 && version != 0; ++pass) {
        for (const Extent& e : extents) {
          for (std::uint64_t unit = e.offset_bytes / kUnit; unit < e.end_bytes() / kUnit; ++unit) {
            if (owner[unit].load() != version) ++wrong;
            ++checks;
          }
        }
        std::this_thread::yield();
      }
    }
  };
  auto writer = [&](unsigned seed) {
    std::mt19937 random(seed);
    // On a loaded machine the writers may run their rounds before any reader is scheduled: they
    // go on until the readers have checked some space too, or the test would prove nothing.
    for (int i = 0; (i < 3000 || checks.load() < kMinChecks) && starved == 0; ++i) {
      const std::uint64_t units = std::uniform_int_distribution<std::uint64_t>(1, 6)(random);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      Result<ExtentList> got = errc::kNoSpace;
      while (!(got = allocator.allocate(units * kUnit))) {
        if (std::chrono::steady_clock::now() > deadline) {
          ++starved;
          return;
        }
        std::this_thread::yield();
      }
      const std::int64_t version = next_version++;
      for (const Extent& e : *got) {
        for (std::uint64_t unit = e.offset_bytes / kUnit; unit < e.end_bytes() / kUnit; ++unit) {
          owner[unit] = version;
        }
      }
      std::int64_t old_version = 0;
      ExtentList old_extents;
      {
        std::lock_guard lock(catalog_mutex);  // the "commit"
        old_version = std::exchange(current_version, version);
        old_extents = std::exchange(current_extents, *got);
      }
      if (old_version != 0) retirement.retire(std::move(old_extents), old_version);
    }
  };
  std::vector<std::thread> readers;
  for (int i = 0; i < 4; ++i) readers.emplace_back(reader);
  std::vector<std::thread> writers;
  for (unsigned i = 0; i < 2; ++i) writers.emplace_back(writer, i + 1);
  for (auto& t : writers) t.join();
  stop = true;
  for (auto& t : readers) t.join();

  EXPECT_EQ(starved.load(), 0) << "retired space did not come back while readers kept coming";
  EXPECT_EQ(wrong.load(), 0U) << "a reader's space was given to another version while it read";
  EXPECT_GE(checks.load(), kMinChecks);
  EXPECT_GT(next_version.load(), static_cast<std::int64_t>(kUnits)) << "space was not reused";
  // Only the current version holds space; once it is retired too, everything is free.
  EXPECT_EQ(retirement.pending_bytes(), 0U);
  retirement.retire(std::move(current_extents), current_version);
  EXPECT_EQ(retirement.pending_bytes(), 0U);
  EXPECT_EQ(allocator.used_bytes(), 0U);
  EXPECT_FALSE(retirement.is_retired(current_version));
}

}  // namespace
}  // namespace hots3::storage::detail
