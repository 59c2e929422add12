#pragma once

// Private to src/s3: misses of one evicted version share one upstream fetch. The first whole-
// object GET of it leads (fetches, serves its client and keeps the bytes); GETs that come while it
// runs wait for it to land and then read the version from the device, as a hit. None waits on a
// lock or is refused: a flight that did not keep the version, or that takes longer than a slow
// fetch would, lets its waiters go to the upstream themselves.

#include "hots3/storage/records.h"

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <variant>

namespace hots3::s3 {

class FillFlights {
  struct Flight;
  // What a flight fetches: a whole version (chunk -1), or one chunk of it (a partial object).
  using Key = std::pair<std::int64_t, std::int64_t>;

 public:
  FillFlights() = default;
  ~FillFlights() = default;
  FillFlights(const FillFlights&) = delete;
  FillFlights& operator=(const FillFlights&) = delete;
  FillFlights(FillFlights&&) = delete;
  FillFlights& operator=(FillFlights&&) = delete;

  // The lead of the flight of one version: it lands when this ends, kept or not (a leader whose
  // client went away lands unkept, and its waiters fetch for themselves).
  class Lead {
   public:
    Lead(FillFlights& flights, Key key, std::shared_ptr<Flight> flight)
        : flights_(&flights), key_(key), flight_(std::move(flight)) {}
    ~Lead();
    Lead(const Lead&) = delete;
    Lead& operator=(const Lead&) = delete;
    Lead(Lead&& other) noexcept = default;
    Lead& operator=(Lead&&) = delete;

    // The version (the chunk) is local again: waiters read it from the device.
    void kept() { kept_ = true; }
    // Whether a RestoreObject asked for the version while this flight ran: it is kept whatever
    // the admission rule says.
    [[nodiscard]] bool asked() const;

   private:
    FillFlights* flights_;
    Key key_;
    std::shared_ptr<Flight> flight_;
    bool kept_ = false;
  };

  // A place in the flight another GET leads.
  class Seat {
   public:
    explicit Seat(std::shared_ptr<Flight> flight) : flight_(std::move(flight)) {}

    // Waits for the flight to land, at most `patience`; true when it kept the version.
    boost::asio::awaitable<bool> landed_kept(std::chrono::milliseconds patience);

   private:
    std::shared_ptr<Flight> flight_;
  };

  // The lead of the flight of `version_id`, or a seat in the one under way.
  std::variant<Lead, Seat> join(std::int64_t version_id);
  // The same for chunk `index` of it: ranged reads that miss one chunk at once share its fetch.
  std::variant<Lead, Seat> join_chunk(std::int64_t version_id, std::uint32_t index);
  // Whether a fetch of chunk `index` of `version_id` is under way.
  bool chunk_flying(std::int64_t version_id, std::uint32_t index);
  // Whether a ranged read of `version_id` from `begin` to `end` follows the last one of it (a
  // sequential reader, worth reading ahead for); it is the last one from now on.
  bool sequential(std::int64_t version_id, std::uint64_t begin, std::uint64_t end);

  // Restores: whole fetches into the device that no client waits on (RestoreObject, and what a
  // download in ranges leaves behind it), run kRestoresMax at a time in the order asked, each by
  // a runner that takes the next one when it ends.
  struct Restore {
    storage::ObjectRecord object;
    std::string bucket;
    bool asked = false;     // by RestoreObject: kept whatever the bucket's admission rule says
    unsigned attempts = 0;  // failed fetches so far
  };
  // One to run now: the caller leads its flight, and then runs what next_restore() gives it.
  struct Run {
    Restore restore;
    Lead lead;
  };
  enum class Asked : std::uint8_t {
    kQueued,   // a runner will run it
    kAlready,  // queued or being fetched already (and now asked for, if this one was)
    kFull,     // kRestoreQueueMax are waiting
  };
  std::variant<Run, Asked> ask_restore(Restore restore);
  // The next restore for a runner whose last one ended; none: the runner ends.
  std::optional<Run> next_restore();
  // Queues again, at the back, one whose fetch failed; false when the queue is full (one queued
  // meanwhile is the same restore: it becomes asked if either was).
  bool requeue_restore(Restore restore);
  // Whether a fetch of `version_id` is under way or queued: what HEAD calls an ongoing restore.
  bool restoring(std::int64_t version_id);
  static constexpr unsigned kRestoresMax = 4;
  static constexpr std::size_t kRestoreQueueMax = 100'000;

  // How long a waiter waits for a flight of `size_bytes`: the leader's wait for the upstream's
  // answer, then as long as the body would take at a slow pace, so a leader whose client reads
  // slowly holds the others up only that long.
  static std::chrono::milliseconds patience(std::uint64_t size_bytes);

 private:
  // Whether a restore of its version is under way or queued (under mutex_); if so, and it was
  // asked for, that one now is.
  bool already_asked(const Restore& restore);
  std::variant<Lead, Seat> join_key(Key key);
  // The lead of a new flight of `key`, none being under way (under mutex_).
  Lead take_off(Key key);
  void land(Key key, const std::shared_ptr<Flight>& flight, bool kept);

  std::mutex mutex_;
  std::map<Key, std::shared_ptr<Flight>> flying_;
  // Where the last ranged read of each version ended (sequential); forgotten in bulk past
  // kReadsRemembered.
  std::unordered_map<std::int64_t, std::uint64_t> read_ends_;
  static constexpr std::size_t kReadsRemembered = 65'536;
  std::deque<Restore> restores_;             // waiting for a runner
  std::unordered_set<std::int64_t> queued_;  // their versions
  unsigned restore_runners_ = 0;
};

}  // namespace hots3::s3
