#include "upload_sweeper.h"

#include "hots3/common/assert.h"
#include "hots3/common/logging.h"
#include "hots3/storage/object_store.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <future>

namespace hots3::app {

namespace asio = boost::asio;

// Shared by the sweeper and its loop; every member but `finished` is used on the worker only.
struct UploadSweeper::State {
  State(storage::ObjectStore& s, asio::io_context& w, std::chrono::milliseconds age,
        std::chrono::milliseconds every)
      : store(s), worker(w), abort_after(age), interval(every), timer(w) {}
  storage::ObjectStore& store;
  asio::io_context& worker;
  std::chrono::milliseconds abort_after;
  std::chrono::milliseconds interval;
  asio::steady_timer timer;
  bool stopping = false;
  std::promise<void> finished;
};

namespace {

// abort_uploads_older_than() takes at most this many per call.
constexpr std::size_t kStoreBatch = 1000;

asio::awaitable<void> sweep_loop(std::shared_ptr<UploadSweeper::State> st) {
  while (!st->stopping) {
    st->timer.expires_after(st->interval);
    // Cancelled by stop(); the flag says which wake-up this was.
    co_await st->timer.async_wait(asio::as_tuple(asio::use_awaitable));
    if (st->stopping) break;
    std::size_t total = 0;
    for (;;) {
      auto aborted = co_await st->store.abort_uploads_older_than(st->abort_after);
      if (!aborted) {
        log::warn("multipart: removing abandoned uploads failed: {} (retried in {} ms)",
                  aborted.error().message(), st->interval.count());
        break;
      }
      total += *aborted;
      if (*aborted < kStoreBatch || st->stopping) break;
    }
    if (total > 0) {
      const auto stats = st->store.stats();
      log::info(
          "multipart: aborted {} uploads older than {} ms; device space in use now: {} bytes ({} "
          "waiting for "
          "readers to finish)",
          total, st->abort_after.count(), stats.used_bytes, stats.pending_free_bytes);
    }
  }
}

}  // namespace

UploadSweeper::UploadSweeper(storage::ObjectStore& store, asio::io_context& worker,
                             std::chrono::milliseconds abort_after,
                             std::chrono::milliseconds interval)
    : state_(std::make_shared<State>(store, worker, abort_after, interval)) {
  H3_ASSERT(abort_after.count() > 0 && interval.count() > 0);
}

UploadSweeper::~UploadSweeper() { stop(); }

void UploadSweeper::start() {
  H3_ASSERT(!running_);
  running_ = true;
  asio::co_spawn(state_->worker, sweep_loop(state_), [st = state_](const std::exception_ptr& e) {
    if (e) {
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& ex) {
        log::error("multipart: the abandoned-upload sweeper stopped: {}", ex.what());
      }
    }
    st->finished.set_value();
  });
}

void UploadSweeper::stop() {
  if (!running_) return;
  running_ = false;
  asio::post(state_->worker, [st = state_] {
    st->stopping = true;
    st->timer.cancel();
  });
  state_->finished.get_future().wait();
}

}  // namespace hots3::app
