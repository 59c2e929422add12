#include "fill_flights.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <mutex>
#include <vector>

namespace hots3::s3 {

namespace asio = boost::asio;

struct FillFlights::Flight {
  std::mutex mutex;  // guards what follows
  bool landed = false;
  bool kept = false;
  bool asked = false;  // by a RestoreObject while it flew
  // Each waiter's timer, on its own worker: landing makes it expire at once.
  std::vector<std::shared_ptr<asio::steady_timer>> waiters;
};

FillFlights::Lead::~Lead() {
  if (flight_) flights_->land(key_, flight_, kept_);
}

bool FillFlights::Lead::asked() const {
  std::lock_guard lock(flight_->mutex);
  return flight_->asked;
}

FillFlights::Lead FillFlights::take_off(Key key) {
  auto flight = std::make_shared<Flight>();
  flying_.emplace(key, flight);
  return Lead(*this, key, std::move(flight));
}

std::variant<FillFlights::Lead, FillFlights::Seat> FillFlights::join_key(Key key) {
  std::lock_guard lock(mutex_);
  if (auto at = flying_.find(key); at != flying_.end()) return Seat(at->second);
  return take_off(key);
}

std::variant<FillFlights::Lead, FillFlights::Seat> FillFlights::join(std::int64_t version_id) {
  return join_key({version_id, -1});
}

std::variant<FillFlights::Lead, FillFlights::Seat> FillFlights::join_chunk(std::int64_t version_id,
                                                                           std::uint32_t index) {
  return join_key({version_id, index});
}

bool FillFlights::chunk_flying(std::int64_t version_id, std::uint32_t index) {
  std::lock_guard lock(mutex_);
  return flying_.contains({version_id, index});
}

bool FillFlights::sequential(std::int64_t version_id, std::uint64_t begin, std::uint64_t end) {
  std::lock_guard lock(mutex_);
  if (read_ends_.size() >= kReadsRemembered) read_ends_.clear();
  auto [at, added] = read_ends_.try_emplace(version_id, end);
  const bool follows = !added && at->second == begin;
  at->second = end;
  return follows;
}

std::variant<FillFlights::Run, FillFlights::Asked> FillFlights::ask_restore(Restore restore) {
  std::lock_guard lock(mutex_);
  const std::int64_t id = restore.object.id;
  if (already_asked(restore)) return Asked::kAlready;
  if (restore_runners_ < kRestoresMax) {
    ++restore_runners_;
    return Run{std::move(restore), take_off({id, -1})};
  }
  if (restores_.size() >= kRestoreQueueMax) return Asked::kFull;
  queued_.insert(id);
  restores_.push_back(std::move(restore));
  return Asked::kQueued;
}

std::optional<FillFlights::Run> FillFlights::next_restore() {
  std::lock_guard lock(mutex_);
  while (!restores_.empty()) {
    Restore next = std::move(restores_.front());
    restores_.pop_front();
    const std::int64_t id = next.object.id;
    queued_.erase(id);
    // One under way already (a client's GET) does the same, and keeps it if this was asked for.
    if (already_asked(next)) continue;
    return Run{std::move(next), take_off({id, -1})};
  }
  --restore_runners_;
  return std::nullopt;
}

bool FillFlights::already_asked(const Restore& restore) {
  const std::int64_t id = restore.object.id;
  if (auto flying = flying_.find({id, -1}); flying != flying_.end()) {
    if (restore.asked) {
      std::lock_guard lock(flying->second->mutex);
      flying->second->asked = true;
    }
    return true;
  }
  if (!queued_.contains(id)) return false;
  if (restore.asked) {
    for (Restore& waiting : restores_) {
      if (waiting.object.id == id) waiting.asked = true;
    }
  }
  return true;
}

bool FillFlights::requeue_restore(Restore restore) {
  std::lock_guard lock(mutex_);
  if (already_asked(restore)) return true;
  if (restores_.size() >= kRestoreQueueMax) return false;
  queued_.insert(restore.object.id);
  restores_.push_back(std::move(restore));
  return true;
}

bool FillFlights::restoring(std::int64_t version_id) {
  std::lock_guard lock(mutex_);
  return flying_.contains({version_id, -1}) || queued_.contains(version_id);
}

void FillFlights::land(Key key, const std::shared_ptr<Flight>& flight, bool kept) {
  std::vector<std::shared_ptr<asio::steady_timer>> waiters;
  {
    std::lock_guard lock(mutex_);
    auto at = flying_.find(key);
    if (at != flying_.end() && at->second == flight) flying_.erase(at);
  }
  {
    std::lock_guard lock(flight->mutex);
    flight->landed = true;
    flight->kept = kept;
    waiters.swap(flight->waiters);
  }
  // Each timer is touched only on its own executor. An expiry in the past ends a wait under way
  // and one not yet begun alike.
  for (auto& timer : waiters) {
    auto executor = timer->get_executor();
    asio::post(executor, [timer = std::move(timer)] {
      timer->expires_at(asio::steady_timer::time_point::min());
    });
  }
}

namespace {

// Takes a waiter's timer out of its flight when the wait ends, however it ends: a wait cut off
// with its worker (at shutdown) leaves no timer whose io_context is gone for a landing to touch.
class Leave {
 public:
  Leave(std::mutex& mutex, std::vector<std::shared_ptr<asio::steady_timer>>& waiters,
        std::shared_ptr<asio::steady_timer> timer)
      : mutex_(mutex), waiters_(waiters), timer_(std::move(timer)) {}
  ~Leave() {
    std::lock_guard lock(mutex_);
    std::erase(waiters_, timer_);
  }
  Leave(const Leave&) = delete;
  Leave& operator=(const Leave&) = delete;
  Leave(Leave&&) = delete;
  Leave& operator=(Leave&&) = delete;

 private:
  std::mutex& mutex_;
  std::vector<std::shared_ptr<asio::steady_timer>>& waiters_;
  std::shared_ptr<asio::steady_timer> timer_;
};

}  // namespace

asio::awaitable<bool> FillFlights::Seat::landed_kept(std::chrono::milliseconds patience) {
  auto executor = co_await asio::this_coro::executor;
  auto timer = std::make_shared<asio::steady_timer>(executor, patience);
  {
    std::lock_guard lock(flight_->mutex);
    if (flight_->landed) co_return flight_->kept;
    flight_->waiters.push_back(timer);
  }
  const Leave leave(flight_->mutex, flight_->waiters, timer);
  auto waiting = timer->async_wait(asio::as_tuple(asio::use_awaitable));
  co_await std::move(waiting);
  std::lock_guard lock(flight_->mutex);
  co_return flight_->landed && flight_->kept;
}

std::chrono::milliseconds FillFlights::patience(std::uint64_t size_bytes) {
  constexpr std::uint64_t kSlowBytesPerMs = 32ULL * 1024 * 1024 / 1000;  // 32 MiB/s
  // The leader's own wait for the upstream's first byte comes first (5 s at most), then its body.
  return std::chrono::milliseconds(10'000) +
         std::chrono::milliseconds(size_bytes / kSlowBytesPerMs);
}

}  // namespace hots3::s3
