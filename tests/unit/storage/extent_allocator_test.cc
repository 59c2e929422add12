#include "storage/extent_allocator.h"

#include <gtest/gtest.h>

#include <random>

namespace hots3::storage {
namespace {

constexpr std::uint64_t kMiB = 1024 * 1024;

std::uint64_t total(const ExtentList& list) {
  std::uint64_t n = 0;
  for (const auto& e : list) n += e.length_bytes;
  return n;
}

TEST(ExtentAllocator, AllocatesRoundedContiguousExtents) {
  ExtentAllocator a(kMiB, 101 * kMiB, 4096);
  EXPECT_EQ(a.size_bytes(), 100 * kMiB);
  EXPECT_EQ(a.free_bytes(), 100 * kMiB);
  auto x = a.allocate(1).value();
  ASSERT_EQ(x.size(), 1U);
  EXPECT_EQ(x[0], (Extent{kMiB, 4096}));
  auto y = a.allocate(10 * kMiB + 1).value();
  ASSERT_EQ(y.size(), 1U);
  EXPECT_EQ(y[0].length_bytes, 10 * kMiB + 4096);
  EXPECT_EQ(a.used_bytes(), 10 * kMiB + 8192);
}

TEST(ExtentAllocator, ReleaseMergesNeighbours) {
  ExtentAllocator a(0, 64 * kMiB, 4096);
  auto p = a.allocate(kMiB).value();
  auto q = a.allocate(kMiB).value();
  auto r = a.allocate(kMiB).value();
  a.release(q);
  EXPECT_EQ(a.free_extent_count(), 2U);
  a.release(p);
  a.release(r);
  EXPECT_EQ(a.free_extent_count(), 1U);
  EXPECT_EQ(a.largest_free_bytes(), 64 * kMiB);
}

TEST(ExtentAllocator, BestFitKeepsLargeHolesForLargeObjects) {
  ExtentAllocator a(0, 100 * kMiB, 4096);
  auto parts = a.allocate(100 * kMiB).value();
  // Free a 2 MiB hole and a 50 MiB hole.
  a.release(std::vector<Extent>{{10 * kMiB, 2 * kMiB}, {40 * kMiB, 50 * kMiB}});
  auto small = a.allocate(kMiB).value();
  EXPECT_EQ(small[0].offset_bytes, 10 * kMiB);  // the small hole, not the big one
  auto big = a.allocate(50 * kMiB).value();
  ASSERT_EQ(big.size(), 1U);
  EXPECT_EQ(big[0].offset_bytes, 40 * kMiB);
}

TEST(ExtentAllocator, LargestPlacementLeavesRoomToGrow) {
  ExtentAllocator a(0, 100 * kMiB, 4096);
  a.allocate(100 * kMiB).value();
  a.release(std::vector<Extent>{{0, kMiB}, {20 * kMiB, 60 * kMiB}});
  auto e = a.allocate(kMiB, ExtentAllocator::Placement::kLargest).value();
  EXPECT_EQ(e[0].offset_bytes, 20 * kMiB);
  EXPECT_TRUE(a.allocate_at(21 * kMiB, 10 * kMiB));
  EXPECT_FALSE(a.allocate_at(21 * kMiB, kMiB));       // taken now
  EXPECT_FALSE(a.allocate_at(75 * kMiB, 10 * kMiB));  // runs past the free extent
}

TEST(ExtentAllocator, FragmentedSpaceGivesSeveralExtentsLargestFirst) {
  ExtentAllocator a(0, 10 * kMiB, 4096);
  a.allocate(10 * kMiB).value();
  a.release(std::vector<Extent>{{0, kMiB}, {3 * kMiB, 2 * kMiB}, {8 * kMiB, kMiB}});
  auto e = a.allocate(3 * kMiB + 4096).value();
  EXPECT_EQ(total(e), 3 * kMiB + 4096);
  ASSERT_EQ(e.size(), 3U);
  EXPECT_EQ(e[1], (Extent{3 * kMiB, 2 * kMiB}));  // sorted by offset; the 2 MiB one was used whole
}

TEST(ExtentAllocator, NoSpaceAllocatesNothing) {
  ExtentAllocator a(0, 4 * kMiB, 4096);
  a.allocate(3 * kMiB).value();
  EXPECT_EQ(a.allocate(2 * kMiB).error(), errc::kNoSpace);
  EXPECT_EQ(a.free_bytes(), kMiB);
}

TEST(ExtentAllocator, RebuildFromUsedExtents) {
  ExtentAllocator a(kMiB, 20 * kMiB, 4096);
  ASSERT_TRUE(a.build_from_used({{5 * kMiB, kMiB}, {kMiB, 4096}, {19 * kMiB, kMiB}}).has_value());
  EXPECT_EQ(a.used_bytes(), 2 * kMiB + 4096);
  const auto free = a.free_extents();
  ASSERT_EQ(free.size(), 2U);
  EXPECT_EQ(free[0], (Extent{kMiB + 4096, 4 * kMiB - 4096}));
  EXPECT_EQ(free[1], (Extent{6 * kMiB, 13 * kMiB}));
  EXPECT_EQ(a.build_from_used({{2 * kMiB, kMiB}, {2 * kMiB + 4096, 4096}}).error(), errc::kCorrupt);
  EXPECT_EQ(a.build_from_used({{19 * kMiB, 2 * kMiB}}).error(), errc::kCorrupt);
}

TEST(ExtentAllocatorDeathTest, DoubleFreeAsserts) {
  ExtentAllocator a(0, 4 * kMiB, 4096);
  auto e = a.allocate(kMiB).value();
  a.release(e);
  EXPECT_DEATH(a.release(e), "double free");
}

TEST(ExtentAllocator, RandomisedAllocateReleaseKeepsAccounting) {
  ExtentAllocator a(0, 256 * kMiB, 4096);
  std::mt19937 random(7);
  std::vector<ExtentList> live;
  for (int i = 0; i < 5000; ++i) {
    if (live.empty() || random() % 3 != 0) {
      auto e = a.allocate(std::uniform_int_distribution<std::uint64_t>(1, 4 * kMiB)(random));
      if (e) live.push_back(std::move(*e));
    } else {
      const std::size_t k = random() % live.size();
      a.release(live[k]);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
    }
    std::uint64_t used = 0;
    for (const auto& l : live) used += total(l);
    ASSERT_EQ(a.used_bytes(), used);
  }
  for (const auto& l : live) a.release(l);
  EXPECT_EQ(a.free_extent_count(), 1U);
}

}  // namespace
}  // namespace hots3::storage
