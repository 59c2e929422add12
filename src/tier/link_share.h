#pragma once

// An upstream's link, shared under its bytes_per_s by the classes of traffic to it (traffic.h):
// the bytes of every upload and read-through to it take their turn here, on the uploader's
// thread. While more than one class waits, the highest goes first, except that write-back goes
// first while it is behind its guaranteed share (min_share of what crosses), so that dirty data
// keeps draining under any read load; what a class leaves unused goes to the others. A class
// with waiters gets a turn at least every kLongestWait, whatever waits above it: a request whose
// bytes stop for long is closed by the upstream as idle.

#include "hots3/tier/traffic.h"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>

namespace hots3::tier {

class LinkShare {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::milliseconds kLongestWait{1000};

  // `bytes_per_s` 0: no cap, nothing waits (the bytes are counted). `writeback_min_share`: the
  // part, from 0 to 1, of what crosses that write-back gets while it waits, whatever else waits.
  LinkShare(boost::asio::io_context& io, std::uint64_t bytes_per_s, double writeback_min_share);

  // Waits until `bytes` of `traffic` may cross: the link is taken for them until they would
  // have at its rate, and the next ones go after. Bytes sent take their turn before they go;
  // bytes received after they came, before the next are read (the upstream then waits in TCP).
  boost::asio::awaitable<void> take(Traffic traffic, std::uint64_t bytes);
  // Counts bytes that never wait (small answers): the next ones go after them.
  void charge(Traffic traffic, std::uint64_t bytes);
  // Lets every waiter go, and every later one at once: the uploader is stopping.
  void release_all();
  // A new bytes_per_s (0: no cap; a reload), for the turns handed out from now on. What was
  // reserved at the old rate is not held against the new one.
  void set_rate(std::uint64_t bytes_per_s);

  [[nodiscard]] bool released() const { return released_; }
  // Whether take() may wait at all (a bytes_per_s is set).
  [[nodiscard]] bool capped() const { return ns_per_byte_ != 0; }
  // Bytes let across since start, by class.
  [[nodiscard]] const std::array<std::uint64_t, kTrafficClasses>& bytes() const { return bytes_; }

 private:
  struct Waiter {
    std::uint64_t bytes = 0;
    // Expired when its turn comes (a wait on it then ends at once, begun before or after).
    std::shared_ptr<boost::asio::steady_timer> turn;
  };
  // Counts `bytes` of `traffic`, credits write-back its share of them, and takes the link for
  // them from when it is free (or from `now`, less a little a late turn may make up for).
  void reserve(Traffic traffic, std::uint64_t bytes, Clock::time_point now);
  // The class whose first waiter goes next: one whose last turn is kLongestWait ago, else
  // write-back while it has credit and a higher class waits (spending it), else the highest.
  [[nodiscard]] Traffic pick(Clock::time_point now);
  // Hands out turns while anyone waits.
  boost::asio::awaitable<void> dispatch();

  boost::asio::io_context& io_;
  double ns_per_byte_;
  // Write-back's credit: bytes it may take ahead of higher classes. Every byte that crosses adds
  // write-back's share of it (and a twentieth more, so that a busy link carries at least the
  // share), up to a quarter second's worth of the share; what write-back takes ahead of a higher
  // class is spent.
  double credit_ = 0;
  double writeback_min_share_;
  double credit_per_byte_;
  double credit_max_;
  Clock::time_point free_at_{};  // when the bytes reserved so far have crossed
  std::array<std::deque<Waiter>, kTrafficClasses> waiting_;
  std::shared_ptr<boost::asio::steady_timer> timer_;  // the dispatcher's, until the link is free
  bool dispatching_ = false;
  bool released_ = false;
  std::array<std::uint64_t, kTrafficClasses> bytes_{};
  std::array<Clock::time_point, kTrafficClasses> last_turn_{};  // when each last got one
};

}  // namespace hots3::tier
