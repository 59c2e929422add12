#pragma once

// The MD5 of every stream an event loop's coroutines hash (the objects a worker writes, the
// parts the uploader sends), hashed several streams at a time (hots3::Md5::update_many) off the
// streams' own path.
//
// A stream hands each buffer to its event loop's HashLanes and goes on (a writer receiving its
// next buffer while the hashing and the device write are in flight). The lanes run from the
// event loop once the handlers ready before them have run, and wait a few turns more while some
// of its streams have nothing queued, so the buffers that its other streams fill meanwhile are
// hashed in the same pass. One stream's buffers are hashed in order, one per pass.

#include "hots3/common/md5.h"

#include <boost/asio/io_context.hpp>

#include <deque>
#include <functional>
#include <memory>
#include <span>

namespace hots3 {

class HashLanes {
 public:
  // The lanes of the event loop `context` (created on first use).
  static HashLanes& of(boost::asio::io_context& context);

  explicit HashLanes(boost::asio::io_context& context) : context_(context) {}

  // Hashes `data` into `*stream` after everything submitted for it before, then calls `done`
  // on the event loop. `keep` owns the bytes (and `stream`) until then.
  void submit(std::shared_ptr<Md5> stream, std::span<const std::byte> data,
              std::shared_ptr<const void> keep, std::function<void()> done);

  // A stream that will submit joins before its first buffer and leaves when it is done; a pass
  // waits (a few turns of the event loop at most) for the buffers of streams that have joined.
  void join() noexcept { ++streams_; }
  void leave() noexcept { --streams_; }

  // The event loop's end: pending jobs are dropped without their `done`.
  void shut_down() noexcept;

  struct Stats {
    std::uint64_t passes = 0;
    std::uint64_t jobs = 0;  // jobs / passes: how many streams shared a pass on average
  };
  [[nodiscard]] const Stats& stats() const noexcept { return stats_; }

 private:
  struct Job {
    std::shared_ptr<Md5> stream;
    std::span<const std::byte> data;
    std::shared_ptr<const void> keep;
    std::function<void()> done;
  };
  void schedule();
  void pass();

  boost::asio::io_context& context_;
  std::deque<Job> jobs_;
  bool scheduled_ = false;
  unsigned streams_ = 0;
  unsigned deferrals_ = 0;
  bool shut_down_ = false;
  Stats stats_;
};

}  // namespace hots3
