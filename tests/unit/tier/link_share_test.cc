#include "tier/link_share.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <numeric>

namespace hots3::tier {
namespace {

namespace asio = boost::asio;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr std::uint64_t kMiB = 1024 * 1024;
constexpr std::uint64_t kPiece = 64 * 1024;

std::uint64_t total(const LinkShare& link) {
  const auto& b = link.bytes();
  return std::accumulate(b.begin(), b.end(), std::uint64_t{0});
}

std::uint64_t of(const LinkShare& link, Traffic t) {
  return link.bytes()[static_cast<std::size_t>(t)];
}

// Takes pieces of `traffic` one after the other until the link has let `until` bytes across
// in all, this class `mine` bytes, or the link was released; then counts itself in `done`.
asio::awaitable<void> taker(LinkShare& link, Traffic traffic, std::uint64_t until, int& done,
                            std::uint64_t mine = UINT64_MAX) {
  while (total(link) < until && of(link, traffic) < mine && !link.released()) {
    auto taking = link.take(traffic, kPiece);
    co_await std::move(taking);
  }
  ++done;
}

// After `after`, or once the link has let `until` bytes across, lets the takers still waiting
// go, as a stop does.
asio::awaitable<void> release(LinkShare& link, std::uint64_t until, milliseconds after) {
  asio::steady_timer tick(co_await asio::this_coro::executor);
  const auto end = std::chrono::steady_clock::now() + after;
  while (total(link) < until && std::chrono::steady_clock::now() < end) {
    tick.expires_after(milliseconds(1));
    auto waiting = tick.async_wait(asio::use_awaitable);
    co_await std::move(waiting);
  }
  link.release_all();
}

// Runs `io` until its work ends, for a minute at most (a taker left waiting fails the test
// rather than hang it).
void run(asio::io_context& io) {
  io.run_for(seconds(60));
  EXPECT_TRUE(io.stopped()) << "a taker was never let go";
}

TEST(LinkShare, WithoutACapNothingWaits) {
  asio::io_context io;
  LinkShare link(io, 0, 0.2);
  int done = 0;
  asio::co_spawn(io, taker(link, Traffic::kForeground, 4 * 1024 * kMiB, done), asio::detached);
  asio::co_spawn(io, taker(link, Traffic::kWriteback, 4 * 1024 * kMiB, done), asio::detached);
  const auto started = std::chrono::steady_clock::now();
  run(io);
  // 4 GiB in 64 KiB pieces: no piece waits for a turn (a timer each).
  EXPECT_LT(std::chrono::steady_clock::now() - started, seconds(20));
  EXPECT_EQ(done, 2);
  EXPECT_GE(total(link), 4 * 1024 * kMiB);
}

// One taker alone, piece after piece at the cap: each gets its turn (none is lost between the
// dispatcher's start and the taker's wait).
TEST(LinkShare, ALoneTakerGetsEveryTurn) {
  asio::io_context io;
  LinkShare link(io, 256 * kMiB, 0.2);
  int done = 0;
  asio::co_spawn(io, taker(link, Traffic::kWriteback, 32 * kMiB, done), asio::detached);
  run(io);
  EXPECT_EQ(done, 1);
  EXPECT_EQ(of(link, Traffic::kWriteback), 32 * kMiB);
}

// Every class busy at once: the highest goes first, but write-back keeps its share of what
// crosses, and the cap holds for them all together.
TEST(LinkShare, TheHighestClassGoesFirstAndWritebackKeepsItsShare) {
  asio::io_context io;
  constexpr std::uint64_t kRate = 256 * kMiB;
  LinkShare link(io, kRate, 0.2);
  constexpr std::uint64_t kUntil = 96 * kMiB;
  int done = 0;
  for (int i = 0; i < 3; ++i) {
    asio::co_spawn(io, taker(link, Traffic::kForeground, kUntil, done), asio::detached);
  }
  for (int i = 0; i < 2; ++i) {
    asio::co_spawn(io, taker(link, Traffic::kWriteback, kUntil, done), asio::detached);
  }
  asio::co_spawn(io, taker(link, Traffic::kPrefetch, kUntil, done), asio::detached);
  asio::co_spawn(io, taker(link, Traffic::kRevalidation, kUntil, done), asio::detached);
  asio::co_spawn(io, release(link, kUntil, seconds(60)), asio::detached);
  const auto started = std::chrono::steady_clock::now();
  run(io);
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_EQ(done, 7);
  const std::uint64_t foreground = of(link, Traffic::kForeground);
  const std::uint64_t writeback = of(link, Traffic::kWriteback);
  // The lower classes only as their waits grow old (a turn per second at most), and their
  // last pieces, let go at the end.
  const std::uint64_t aged = kPiece * (2 + static_cast<std::uint64_t>(elapsed));
  EXPECT_LE(of(link, Traffic::kPrefetch), aged);
  EXPECT_LE(of(link, Traffic::kRevalidation), aged);
  EXPECT_GE(writeback, total(link) / 5) << foreground << " of the foreground";
  EXPECT_LE(writeback, total(link) / 4);
  // Never more than the cap lets across (a busy machine only makes it less), but for what a late
  // turn makes up for (5 ms) and the pieces let go at the end.
  EXPECT_LE(static_cast<double>(total(link)),
            static_cast<double>(kRate) * (elapsed + 0.005) + static_cast<double>(16 * kPiece))
      << elapsed << " s";
}

// What the foreground leaves goes to prefetch before write-back, which still keeps its share.
TEST(LinkShare, WhatAClassLeavesGoesToTheNext) {
  asio::io_context io;
  LinkShare link(io, 256 * kMiB, 0.2);
  constexpr std::uint64_t kUntil = 64 * kMiB;
  int done = 0;
  asio::co_spawn(io, taker(link, Traffic::kForeground, kUntil, done, 8 * kMiB), asio::detached);
  asio::co_spawn(io, taker(link, Traffic::kPrefetch, kUntil, done), asio::detached);
  asio::co_spawn(io, taker(link, Traffic::kWriteback, kUntil, done), asio::detached);
  run(io);
  EXPECT_EQ(done, 3);
  EXPECT_EQ(of(link, Traffic::kForeground), 8 * kMiB);
  EXPECT_GT(of(link, Traffic::kPrefetch), of(link, Traffic::kWriteback));
  EXPECT_GE(of(link, Traffic::kWriteback), total(link) / 5);
}

// Under a foreground that never lets up, a lower class still gets a turn a second: a request
// whose bytes stopped for long would be closed by the upstream as idle.
TEST(LinkShare, EveryWaitingClassGetsATurnASecond) {
  asio::io_context io;
  LinkShare link(io, 64 * kMiB, 0);
  int done = 0;
  for (int i = 0; i < 2; ++i) {
    asio::co_spawn(io, taker(link, Traffic::kForeground, UINT64_MAX, done), asio::detached);
  }
  asio::co_spawn(io, taker(link, Traffic::kWriteback, UINT64_MAX, done), asio::detached);
  asio::co_spawn(io, release(link, UINT64_MAX, milliseconds(2500)), asio::detached);
  run(io);
  EXPECT_EQ(done, 3);
  // A piece a second (two in 2.5 s; a busy machine may leave time for one only), and the one
  // waiting at the end, let go: without a share, no more.
  EXPECT_GE(of(link, Traffic::kWriteback), 2 * kPiece);
  EXPECT_LE(of(link, Traffic::kWriteback), 3 * kPiece);
  EXPECT_GT(of(link, Traffic::kForeground), 64 * kMiB);
}

// A stop lets every waiter go at once, however long its turn would be in coming.
TEST(LinkShare, ReleaseLetsEveryWaiterGo) {
  asio::io_context io;
  LinkShare link(io, 64 * 1024, 0.2);  // a piece a second
  int done = 0;
  for (const Traffic t : {Traffic::kForeground, Traffic::kPrefetch, Traffic::kWriteback}) {
    asio::co_spawn(io, taker(link, t, 100 * kPiece, done), asio::detached);
  }
  asio::co_spawn(io, release(link, UINT64_MAX, milliseconds(100)), asio::detached);
  const auto started = std::chrono::steady_clock::now();
  run(io);
  EXPECT_EQ(done, 3);
  EXPECT_LT(std::chrono::steady_clock::now() - started, milliseconds(900));  // not a turn more
  // The first went at once; the next of its taker and the two others' waited for their turns (a
  // second each) until let go.
  EXPECT_EQ(total(link), 4 * kPiece);
}

}  // namespace
}  // namespace hots3::tier
