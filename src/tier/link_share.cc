#include "tier/link_share.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <cstddef>

namespace hots3::tier {

namespace asio = boost::asio;

namespace {

constexpr std::size_t index(Traffic t) { return static_cast<std::size_t>(t); }

// How far behind `now` a turn may start: what a late timer took from the link is made up for,
// and an idle link lets no more than this through at once.
constexpr auto kMakeUp = std::chrono::milliseconds(5);

}  // namespace

LinkShare::LinkShare(asio::io_context& io, std::uint64_t bytes_per_s, double writeback_min_share)
    : io_(io),
      ns_per_byte_(bytes_per_s == 0 ? 0 : 1e9 / static_cast<double>(bytes_per_s)),
      writeback_min_share_(writeback_min_share),
      credit_per_byte_(1.05 * writeback_min_share),
      credit_max_(0.25 * writeback_min_share * static_cast<double>(bytes_per_s)),
      timer_(std::make_shared<asio::steady_timer>(io)) {
  last_turn_.fill(Clock::now());
}

asio::awaitable<void> LinkShare::take(Traffic traffic, std::uint64_t bytes) {
  const auto now = Clock::now();
  // Nothing paces, or nobody waits and the link is free: they go now.
  if (ns_per_byte_ == 0 || released_ || (!dispatching_ && now >= free_at_)) {
    reserve(traffic, bytes, now);
    co_return;
  }
  auto turn = std::make_shared<asio::steady_timer>(io_, Clock::time_point::max());
  waiting_[index(traffic)].push_back({bytes, turn});
  if (!dispatching_) {
    dispatching_ = true;
    asio::co_spawn(io_, dispatch(), asio::detached);
  }
  auto waiting = turn->async_wait(asio::as_tuple(asio::use_awaitable));
  co_await std::move(waiting);
}

void LinkShare::charge(Traffic traffic, std::uint64_t bytes) {
  reserve(traffic, bytes, Clock::now());
}

void LinkShare::release_all() {
  released_ = true;
  for (std::size_t c = 0; c < kTrafficClasses; ++c) {
    for (Waiter& w : waiting_[c]) {
      bytes_[c] += w.bytes;
      w.turn->expires_at(Clock::time_point::min());
    }
    waiting_[c].clear();
  }
  timer_->cancel();  // the dispatcher ends now
}

void LinkShare::set_rate(std::uint64_t bytes_per_s) {
  ns_per_byte_ = bytes_per_s == 0 ? 0 : 1e9 / static_cast<double>(bytes_per_s);
  credit_max_ = 0.25 * writeback_min_share_ * static_cast<double>(bytes_per_s);
  credit_ = std::min(credit_, credit_max_);
  free_at_ = std::min(free_at_, Clock::now());
  timer_->cancel();  // a dispatcher waiting for the old free_at_ looks again
}

void LinkShare::reserve(Traffic traffic, std::uint64_t bytes, Clock::time_point now) {
  bytes_[index(traffic)] += bytes;
  last_turn_[index(traffic)] = now;
  credit_ = std::min(credit_max_, credit_ + credit_per_byte_ * static_cast<double>(bytes));
  if (ns_per_byte_ == 0) return;
  free_at_ = std::max(now - kMakeUp, free_at_) + std::chrono::nanoseconds(static_cast<std::int64_t>(
                                                     static_cast<double>(bytes) * ns_per_byte_));
}

Traffic LinkShare::pick(Clock::time_point now) {
  Traffic highest = Traffic::kRevalidation;
  Traffic longest = Traffic::kRevalidation;
  Clock::time_point oldest = Clock::time_point::max();
  for (std::size_t c = kTrafficClasses; c-- > 0;) {
    if (waiting_[c].empty()) continue;
    highest = static_cast<Traffic>(c);
    if (last_turn_[c] <= oldest) {
      oldest = last_turn_[c];
      longest = static_cast<Traffic>(c);
    }
  }
  if (now - oldest > kLongestWait) return longest;
  if (highest < Traffic::kWriteback && !waiting_[index(Traffic::kWriteback)].empty() &&
      credit_ > 0) {
    credit_ -= static_cast<double>(waiting_[index(Traffic::kWriteback)].front().bytes);
    return Traffic::kWriteback;
  }
  return highest;
}

asio::awaitable<void> LinkShare::dispatch() {
  // After take() is waiting: co_spawn runs this at once on the io thread.
  auto later = asio::post(io_, asio::use_awaitable);
  co_await std::move(later);
  const std::shared_ptr<asio::steady_timer> timer = timer_;
  while (!released_ && std::any_of(waiting_.begin(), waiting_.end(),
                                   [](const std::deque<Waiter>& w) { return !w.empty(); })) {
    const auto now = Clock::now();
    if (now < free_at_) {
      timer->expires_at(free_at_);
      auto waiting = timer->async_wait(asio::as_tuple(asio::use_awaitable));
      co_await std::move(waiting);
      continue;
    }
    const Traffic next = pick(now);
    Waiter w = std::move(waiting_[index(next)].front());
    waiting_[index(next)].pop_front();
    reserve(next, w.bytes, now);
    w.turn->expires_at(Clock::time_point::min());
    // The taker let go takes its next turn before the next pick, or a class would look idle
    // while a late turn is made up for.
    auto yielding = asio::post(io_, asio::use_awaitable);
    co_await std::move(yielding);
  }
  dispatching_ = false;
}

}  // namespace hots3::tier
