#include "read_through.h"

#include "fetch_check.h"

#include "hots3/common/clock.h"
#include "hots3/common/logging.h"
#include "hots3/common/units.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <chrono>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace hots3::s3 {

namespace {

// A range from byte 0 at least this long (or half the object) asks for the whole object to be
// restored: SDKs download in parts of 8 MiB; shorter ones are mostly a look at a file's header.
constexpr std::uint64_t kRangeToRestore = kMiB;

// Whether a read of a version's data was refused because the upstream no longer holds it:
// someone else changed the key there.
bool changed_upstream(const boost::system::error_code& e) {
  return e == errc::kPreconditionFailed || e == errc::kNotFound;
}

// The next read of a version the upstream no longer holds asks it what it holds instead (and
// serves that), rather than being refused the same way until its revalidation is due.
void note_read_refused(Service& s, std::int64_t version_id, const boost::system::error_code& e) {
  if (changed_upstream(e)) s.validated().mark_changed(version_id);
}

Error upstream_error(const boost::system::error_code& e) {
  if (changed_upstream(e)) {
    return Error(Code::kServiceUnavailable,
                 "The object's data is kept upstream, which no longer holds this version of it.");
  }
  return Error(Code::kServiceUnavailable,
               "The object's data is kept upstream, which cannot be reached now.");
}

// The check the fetched bytes of `object` go through (its part table read for it).
asio::awaitable<FetchCheck> fetch_check(Service& s, const storage::ObjectRecord& object) {
  std::vector<storage::ObjectPartRecord> parts;
  if (object.parts_count > 0) {
    auto listing = s.store().object_parts(object.id);
    auto listed = co_await std::move(listing);
    if (listed) parts = std::move(*listed);
  }
  co_return FetchCheck(object, std::move(parts), s.store().digest_is_md5());
}

// Writes the bytes of a fetched version to the device as they come, and makes the version local
// again once every byte is there and verified.
class Keeper {
 public:
  // Checks the bytes (and writes them) only when the version is vouched for, the binding's rule
  // `admitted` it and the device has room: near full, a miss is served without being kept, since
  // eviction could not keep up with it. `made`: the version's check, when the caller made it.
  asio::awaitable<void> open(Service& s, const storage::ObjectRecord& object, bool admitted,
                             std::optional<FetchCheck> made) {
    if (made) {
      check_ = std::move(made);
    } else {
      auto checking = fetch_check(s, object);
      check_.emplace(co_await std::move(checking));
    }
    if (!check_->possible() || !admitted || !s.store().tier_fill_allows(object.size_bytes)) {
      check_.reset();
      co_return;
    }
    auto creating = s.store().create_writer(object.size_bytes, /*for_part=*/true);
    auto created = co_await std::move(creating);
    if (created) writer_ = std::move(*created);
  }

  // Whether the bytes are checked: the last one may go out only once they passed.
  [[nodiscard]] bool checking() const { return check_.has_value(); }
  // Whether they are still being written (a device error ends that: served, not kept).
  [[nodiscard]] bool writing() const { return writer_ != nullptr; }

  asio::awaitable<void> take(std::span<const std::byte> piece) {
    if (!check_) co_return;
    check_->update(piece);
    if (!writer_) co_return;
    auto writing = writer_->write(piece);
    const auto written = co_await std::move(writing);
    if (!written) writer_.reset();
  }

  // After every byte: whether they are the version's.
  [[nodiscard]] bool passed() { return check_ && check_->passed(); }

  // After they passed: the version is local again, unless it could not be written or the key
  // changed meanwhile (the later change wins; these bytes are still the version asked for).
  asio::awaitable<bool> keep(Service& s, const storage::ObjectRecord& object,
                             std::string_view what) {
    if (!writer_) co_return false;
    auto finishing = writer_->finish();
    auto finished = co_await std::move(finishing);
    if (!finished) co_return false;
    auto filling = s.store().fill_object(std::move(writer_), object);
    auto filled = co_await std::move(filling);
    if (!filled && filled.error() != errc::kPreconditionFailed) {
      log::warn("{}: the fetched data was not kept: {}", what, filled.error().message());
    }
    // Its GETs named its ETag (If-Match): the upstream held this version just now.
    if (filled) s.validated().mark(filled->id, now_ms());
    co_return filled.has_value();
  }

 private:
  std::optional<FetchCheck> check_;
  std::unique_ptr<storage::ObjectWriter> writer_;
};

}  // namespace

asio::awaitable<void> send_local(Request& r, storage::ObjectReader& reader,
                                 const BodySelection& selection, http::Response head) {
  reader.set_range(selection.offset_bytes, selection.length_bytes);
  auto starting = r.exchange.write_head(std::move(head));
  const auto started = co_await std::move(starting);
  if (!started) co_return;
  std::uint64_t sent = 0;
  for (;;) {
    auto reading = reader.next();
    auto piece = co_await std::move(reading);
    if (!piece) {
      // The head is out: all that is left is to cut the body short (the client sees an
      // incomplete response, never wrong bytes).
      log::error("request {}: GET {}/{} failed after {} bytes: {}", r.head.request_id, r.bucket,
                 log::escaped(r.key), sent, piece.error().message());
      break;
    }
    if (piece->empty()) break;
    auto sending = r.exchange.write_body(*piece);
    const auto written = co_await std::move(sending);
    if (!written) co_return;
    sent += piece->size();
  }
  auto ending = r.exchange.finish();
  co_await std::move(ending);
}

namespace {

// After waiting in another GET's flight: a reader of the version that flight kept, if it is the
// one that missed (the head was made from its record: only its bytes may follow).
asio::awaitable<std::unique_ptr<storage::ObjectReader>> kept_by_flight(
    Service& s, const storage::ObjectRecord& object, FillFlights::Seat seat) {
  auto waiting = seat.landed_kept(FillFlights::patience(object.size_bytes));
  const bool kept = co_await std::move(waiting);
  if (!kept) co_return nullptr;
  auto opening = s.store().open_reader(object.bucket_id, object.key);
  auto opened = co_await std::move(opening);
  if (!opened || (*opened)->object().etag != object.etag ||
      (*opened)->object().size_bytes != object.size_bytes) {
    co_return nullptr;
  }
  co_return std::move(*opened);
}

// Whether a range of `object` asks for a restore of all of it: a download in ranges (what SDKs
// make of a large GET) starts at 0, a peek at a file's head is short. Any other range of an
// object of one chunk covers that chunk, which is the object: it is kept as a range of a larger
// object keeps the chunks it covers (a footer read first, a block of an array file).
bool asks_restore(Service& s, const storage::ObjectRecord& object, const BodySelection& selection) {
  const bool peek = selection.length_bytes < std::min(kRangeToRestore, object.size_bytes / 2);
  const bool download = selection.offset_bytes == 0 && !peek;
  const bool covers_all =
      selection.offset_bytes > 0 && object.size_bytes <= storage::kTierChunkBytes;
  return (download || covers_all) && s.store().tier_fill_allows(object.size_bytes);
}

// What a whole fetch by chunks kept itself, shared with the chunk commits it runs apart (which
// outlive it when its client leaves): only chunks whose kept bytes went through its check may
// make up the version.
struct ChunkTally {
  ChunkTally(const asio::any_io_executor& executor, std::size_t chunks)
      : vouched(chunks, false), settled(executor) {}

  std::vector<bool> vouched;   // by chunk index: kept by this fetch, or read from the device by it
  unsigned pending = 0;        // commits under way
  asio::steady_timer settled;  // cancelled when the last of them ends

  // Until none is under way.
  asio::awaitable<void> wait() {
    while (pending > 0) {
      settled.expires_at(asio::steady_timer::time_point::max());
      auto waiting = settled.async_wait(asio::as_tuple(asio::use_awaitable));
      co_await std::move(waiting);
    }
  }
};

// One chunk commit of a whole fetch by chunks, under way while this lives (none for other
// fetches).
class ChunkCommit {
 public:
  ChunkCommit() = default;
  explicit ChunkCommit(std::shared_ptr<ChunkTally> tally) : tally_(std::move(tally)) {
    if (tally_) ++tally_->pending;
  }
  ~ChunkCommit() {
    if (tally_ && --tally_->pending == 0) tally_->settled.cancel();
  }
  ChunkCommit(const ChunkCommit&) = delete;
  ChunkCommit& operator=(const ChunkCommit&) = delete;
  ChunkCommit(ChunkCommit&& other) noexcept : tally_(std::exchange(other.tally_, {})) {}
  ChunkCommit& operator=(ChunkCommit&&) = delete;

  // Chunk `index` is kept with this fetch's bytes.
  void kept(std::uint32_t index) {
    if (tally_) tally_->vouched[index] = true;
  }

 private:
  std::shared_ptr<ChunkTally> tally_;
};

// Sends a ranged GET's bytes as they come, in order, from wherever they come: the response head
// goes out with the first of them, and bytes outside the range are skipped. With a check (a whole
// version fetched to be kept), the bytes go through it, and the last of them are held back until
// release(): a client never completes a body the check refused.
class RangeSender {
 public:
  // `r`: the client's request; none for a fetch that no client waits on (a restore), whose bytes
  // are only checked.
  RangeSender(Request* r, const BodySelection& selection, http::Response head)
      : r_(r),
        at_(selection.offset_bytes),
        end_(selection.offset_bytes + selection.length_bytes),
        head_(std::move(head)) {}

  // The bytes go through `check`; `tally` records which chunks of them are kept.
  void check(FetchCheck check, std::shared_ptr<ChunkTally> tally) {
    check_.emplace(std::move(check));
    tally_ = std::move(tally);
  }
  // Before the first byte: what the response head says in `x-hots3-cache`.
  void say_cache(std::string_view answer) { head_.add("x-hots3-cache", std::string(answer)); }
  // Of a read that asks the upstream: its time to first byte, from the sender's making to its
  // head, goes to `read_through`'s metrics of `bucket_id`.
  void time_first_byte(tier::ReadThrough* read_through, std::int64_t bucket_id) {
    timed_ = read_through;
    bucket_id_ = bucket_id;
  }
  // A commit of a chunk of this range's bytes, about to be run.
  [[nodiscard]] ChunkCommit commit() const { return ChunkCommit(tally_); }
  // Chunk `index` was read from the device into this range.
  void read_kept(std::uint32_t index) {
    if (tally_) tally_->vouched[index] = true;
  }
  [[nodiscard]] bool serving() const { return r_ != nullptr; }
  // Whether every byte of the range went out (the response is then finished, unless it is
  // checked: see release()).
  [[nodiscard]] bool done() const { return at_ == end_; }
  // The upstream's error the response ended in, if it did.
  [[nodiscard]] boost::system::error_code failure() const { return failure_; }
  // Once done(), of a checked range: whether its bytes are the version's.
  [[nodiscard]] bool passed() { return check_ && done() && check_->passed(); }
  // Where the next byte the client wants is, and where the range ends.
  [[nodiscard]] std::uint64_t at() const { return at_; }
  [[nodiscard]] std::uint64_t end() const { return end_; }

  // Sends what the range holds of `piece`, the version's bytes from `offset`; the response
  // ends with its last byte. false: the client went away.
  asio::awaitable<bool> send(std::uint64_t offset, std::span<const std::byte> piece) {
    const std::uint64_t from = std::max(offset, at_);
    const std::uint64_t to = std::min(offset + piece.size(), end_);
    if (from >= to) co_return true;
    const std::span<const std::byte> part = piece.subspan(from - offset, to - from);
    if (check_) check_->update(part);
    if (r_ == nullptr || (check_ && to == end_)) {
      if (r_ != nullptr) held_.assign(part.begin(), part.end());
      at_ = to;
      co_return true;
    }
    auto starting = start();
    const bool started = co_await std::move(starting);
    if (!started) co_return false;
    auto sending = r_->exchange.write_body(part);
    const auto sent = co_await std::move(sending);
    if (!sent) co_return false;
    at_ = to;
    if (at_ == end_) {
      auto ending = r_->exchange.finish();
      co_await std::move(ending);
    }
    co_return true;
  }

  // Ends a checked response once done(): with the bytes held back when `send_last` (they
  // passed), else cut short.
  asio::awaitable<void> release(bool send_last) {
    if (r_ == nullptr) co_return;
    if (send_last) {
      auto starting = start();
      const bool started = co_await std::move(starting);
      if (!started) co_return;
      auto sending = r_->exchange.write_body(held_);
      const auto sent = co_await std::move(sending);
      if (!sent) co_return;
    }
    auto ending = r_->exchange.finish();
    co_await std::move(ending);
  }

  // Ends a response that could not be completed: an error before the head, else a body cut
  // short (the client sees an incomplete response, never wrong bytes).
  asio::awaitable<void> fail(Service& s, boost::system::error_code e) {
    if (done()) co_return;
    failure_ = e;
    if (r_ == nullptr) co_return;
    if (!started_) {
      started_ = true;
      auto refusing = s.send_error(*r_, upstream_error(e));
      co_await std::move(refusing);
      co_return;
    }
    auto cutting = r_->exchange.finish();
    co_await std::move(cutting);
  }

 private:
  // The response head goes out with the first bytes. false: the client went away.
  asio::awaitable<bool> start() {
    if (started_) co_return true;
    started_ = true;
    if (timed_ != nullptr) {
      timed_->observe_cold_ttfb(bucket_id_, std::chrono::duration_cast<std::chrono::microseconds>(
                                                std::chrono::steady_clock::now() - began_));
    }
    auto starting = r_->exchange.write_head(std::move(head_));
    const auto started = co_await std::move(starting);
    co_return started.has_value();
  }

  Request* r_;
  std::uint64_t at_;
  std::uint64_t end_;
  http::Response head_;
  bool started_ = false;
  boost::system::error_code failure_;
  std::optional<FetchCheck> check_;
  std::shared_ptr<ChunkTally> tally_;
  std::vector<std::byte> held_;
  const std::chrono::steady_clock::time_point began_ = std::chrono::steady_clock::now();
  tier::ReadThrough* timed_ = nullptr;
  std::int64_t bucket_id_ = 0;
};

// Chunk `index` of `object`: where it starts and its size.
std::pair<std::uint64_t, std::uint64_t> chunk_span(const storage::ObjectRecord& object,
                                                   std::uint32_t index) {
  return {std::uint64_t{index} * storage::kTierChunkBytes,
          storage::tier_chunk_bytes(object.size_bytes, index)};
}

// The lead of each chunk of a fetch of chunks, by position in it: none for one whose flight
// another read leads (a read that waited for it in vain fetches it for itself).
using ChunkLeads = std::vector<std::optional<FillFlights::Lead>>;

// The index of the last chunk of `object` (not empty).
std::uint32_t last_chunk(const storage::ObjectRecord& object) {
  return static_cast<std::uint32_t>((object.size_bytes - 1) / storage::kTierChunkBytes);
}

// Whether chunk `index` of `object` is kept now (an index lookup).
bool chunk_kept(Service& s, const storage::ObjectRecord& object, std::uint32_t index) {
  auto chunks = s.store().object_chunks(object.id, index, index, 1);
  return chunks && !chunks->empty();
}

// Finishes `writer`, which holds chunk `index` of `object`, and keeps it; its flight (`lead`)
// lands then, and `commit` ends. Run apart from the request: its client need not wait for the
// commit.
asio::awaitable<void> keep_written(Service& s, storage::ObjectRecord object, std::uint32_t index,
                                   std::unique_ptr<storage::ObjectWriter> writer,
                                   std::optional<FillFlights::Lead> lead, ChunkCommit commit,
                                   std::string what) {
  auto finishing = writer->finish();
  const auto finished = co_await std::move(finishing);
  if (!finished) co_return;
  auto keeping = s.store().keep_chunk(std::move(writer), object, index);
  const auto kept = co_await std::move(keeping);
  if (!kept) {
    log::warn("{}: chunk {} of version {} was not kept: {}", what, index, object.id,
              kept.error().message());
  } else {
    if (*kept) commit.kept(index);
    if (lead && (*kept || chunk_kept(s, object, index)))
      lead->kept();  // (by this fetch, or by another read that fetched it too)
  }
}

// Writes the rest of chunk `index` (from `at`) into `writer` as `upstream` gives it, and keeps
// it: what a range that ended inside a chunk being kept leaves. Run apart, so that the client's
// connection goes on to its next request at once.
asio::awaitable<void> keep_rest(Service& s, storage::ObjectRecord object, std::uint32_t index,
                                std::uint64_t at, std::unique_ptr<tier::UpstreamRead> upstream,
                                std::unique_ptr<storage::ObjectWriter> writer,
                                std::optional<FillFlights::Lead> lead, std::string what) {
  const auto [begin, size] = chunk_span(object, index);
  while (at < begin + size) {
    auto reading = upstream->next();
    auto next = co_await std::move(reading);
    if (!next || next->empty()) {
      log::info("{}: chunk {} not kept: the upstream's data stopped at byte {}", what, index, at);
      co_return;
    }
    const std::span<const std::byte> part = next->first(
        static_cast<std::size_t>(std::min<std::uint64_t>(next->size(), begin + size - at)));
    auto writing = writer->write(part);
    const auto written = co_await std::move(writing);
    if (!written) co_return;
    at += part.size();
  }
  upstream.reset();  // its stream is free before the commit
  auto keeping = keep_written(s, std::move(object), index, std::move(writer), std::move(lead),
                              ChunkCommit(), std::move(what));
  co_await std::move(keeping);
}

// Sends what the range holds of kept chunk `index` from the device. false: the chunk is not
// there (any more), or its stored bytes are damaged, before any of them went out: fetch it (a
// damaged one is dropped first, so that the fetch keeps it anew). Otherwise true, with `gone`
// set when the client went away or the response was cut short.
asio::awaitable<bool> send_kept_chunk(Service& s, const storage::ObjectRecord& object,
                                      std::uint32_t index, RangeSender& out, bool& gone,
                                      const std::string& what) {
  const auto [begin, size] = chunk_span(object, index);
  auto opening = s.store().open_chunk_reader(object, index);
  auto opened = co_await std::move(opening);
  boost::system::error_code failed;
  bool first = true;
  if (!opened) {
    failed = opened.error();
  } else {
    storage::ObjectReader& reader = **opened;
    const std::uint64_t from = out.at() - begin;
    const std::uint64_t to = std::min(size, out.end() - begin);
    reader.set_range(from, to - from);
    std::uint64_t at = begin + from;
    for (;; first = false) {
      auto reading = reader.next();
      auto piece = co_await std::move(reading);
      if (!piece) {
        failed = piece.error();
        break;
      }
      if (piece->empty()) co_return true;
      auto sending = out.send(at, *piece);
      const bool sent = co_await std::move(sending);
      if (!sent) {
        gone = true;
        co_return true;
      }
      at += piece->size();
    }
  }
  if (failed == errc::kNotFound)
    co_return false;  // gone meanwhile, with its version or by eviction
  log::error("{}: kept chunk {} of version {} failed: {}: dropped", what, index, object.id,
             failed.message());
  auto forgetting = s.store().forget_chunks(object, index, index);
  co_await std::move(forgetting);
  if (first) co_return false;
  gone = true;
  auto cutting = out.fail(s, failed);
  co_await std::move(cutting);
  co_return true;
}

// Fetches chunks [first, last] of `object` from the upstream as one read (several chunks: in
// parallel ranges), sends what the range (`out`) holds of them, and keeps each whole chunk while
// the bucket's admission rule (unless `asked`) and the device allow (each kept apart from the
// request, see keep_written and keep_rest), landing its flight (`leads`) once it is kept, or at
// once when it will not be. A chunk after the first whose lead is not given is led from when the
// fetch reaches it (with `join`), so that reads waiting for it wait only while it comes; one kept
// meanwhile by another read is passed on and not kept again. With a client's range, a chunk that
// is not kept is read only as far as the range needs; without one (a read ahead, a restore), the
// fetch ends at the first chunk that cannot be kept. false: the client went away, the response
// ended in an error, or a chunk that no client waits for could not be kept.
asio::awaitable<bool> fetch_chunks(Service& s, storage::ObjectRecord object, std::uint32_t first,
                                   std::uint32_t last, RangeSender* out, ChunkLeads leads,
                                   bool join, bool asked, std::string what) {
  const std::uint64_t from = chunk_span(object, first).first;
  const auto [last_begin, last_size] = chunk_span(object, last);
  const std::uint64_t to = last_begin + last_size;
  const std::string etag = object.upstream_etag.value_or(object.etag);
  const tier::Traffic traffic =
      out != nullptr && out->serving() ? tier::Traffic::kForeground : tier::Traffic::kPrefetch;
  auto upstream = s.read_through()->read(object.bucket_id, object.key, etag, from, to - from, false,
                                         object.size_bytes, traffic);
  std::unique_ptr<storage::ObjectWriter> writer;
  bool keeping = true;  // until the rule, the device or a write says otherwise
  std::uint64_t at = from;
  auto executor = co_await asio::this_coro::executor;
  while (at < to) {
    auto reading = upstream->next();
    auto next = co_await std::move(reading);
    if (!next || next->empty()) {
      const auto e = next ? make_error_code(errc::kUnavailable) : next.error();
      log::warn("{}: the upstream's data stopped at byte {}: {}", what, at, e.message());
      note_read_refused(s, object.id, e);
      if (out != nullptr) {
        auto failing = out->fail(s, e);
        co_await std::move(failing);
      }
      co_return false;
    }
    keeping = keeping && (asked || upstream->admitted());
    std::span<const std::byte> piece = *next;
    while (!piece.empty()) {
      // Past the range, nothing is being kept (else keep_rest took over): no more is read.
      if (out != nullptr && out->done()) co_return true;
      const auto index = static_cast<std::uint32_t>(at / storage::kTierChunkBytes);
      const auto [begin, size] = chunk_span(object, index);
      const std::span<const std::byte> part = piece.first(
          static_cast<std::size_t>(std::min<std::uint64_t>(piece.size(), begin + size - at)));
      std::optional<FillFlights::Lead>& lead = leads[index - first];
      if (at == begin) {
        if (join && !lead && index != first && keeping) {
          auto joined = s.fill_flights().join_chunk(object.id, index);
          if (auto* mine = std::get_if<FillFlights::Lead>(&joined)) lead.emplace(std::move(*mine));
        }
        bool kept_meanwhile = false;
        if (lead && chunk_kept(s, object, index)) {
          lead->kept();  // kept meanwhile by another read: its bytes only pass on
          lead.reset();
          kept_meanwhile = true;
        } else if (keeping && s.store().tier_fill_allows(size)) {
          auto creating = s.store().create_writer(size, /*for_part=*/true);
          auto created = co_await std::move(creating);
          if (created) writer = std::move(*created);
        }
        if (!writer) lead.reset();  // not kept: its waiters go on at once
        if (!writer && (out == nullptr || (!out->serving() && !kept_meanwhile))) co_return false;
      }
      if (writer) {
        auto writing = writer->write(part);
        const auto written = co_await std::move(writing);
        if (!written) {
          writer.reset();
          lead.reset();
          if (out == nullptr || !out->serving()) co_return false;  // nothing more to keep
        }
      }
      if (out != nullptr) {
        auto sending = out->send(at, part);
        const bool sent = co_await std::move(sending);
        if (!sent) co_return false;
      }
      at += part.size();
      piece = piece.subspan(part.size());
      if (at == begin + size) {
        if (writer) {
          asio::co_spawn(executor,
                         keep_written(s, object, index, std::exchange(writer, {}),
                                      std::exchange(lead, std::nullopt),
                                      out != nullptr ? out->commit() : ChunkCommit(), what),
                         asio::detached);
        }
        lead.reset();  // (not kept: its waiters fetch it for themselves)
      } else if (writer && out != nullptr && out->done()) {
        // (The piece is used up: the rest of the chunk is still to come.)
        asio::co_spawn(executor,
                       keep_rest(s, object, index, at, std::move(upstream), std::move(writer),
                                 std::move(lead), what),
                       asio::detached);
        co_return true;
      }
    }
    if (out != nullptr && out->done()) co_return true;
  }
  co_return true;
}

// After a sequential range ending in chunk `last`: up to kReadAhead chunks after it, those not
// kept and not being fetched, are fetched and kept apart from the request, so that the reader's
// next ranges find them here or on their way.
constexpr std::uint32_t kReadAhead = 2;
void read_ahead(Service& s, const storage::ObjectRecord& object, std::uint32_t last,
                const std::string& what, const asio::any_io_executor& executor) {
  if (s.fill_flights().restoring(object.id) ||
      !s.store().tier_fill_allows(storage::kTierChunkBytes)) {
    return;  // a whole fetch brings it all, or there is no room
  }
  ChunkLeads leads;
  std::uint32_t first = last + 1;
  for (std::uint32_t index = last + 1;
       index <= last + kReadAhead && storage::tier_chunk_bytes(object.size_bytes, index) != 0;
       ++index) {
    std::optional<FillFlights::Lead> lead;
    if (!chunk_kept(s, object, index)) {
      auto joined = s.fill_flights().join_chunk(object.id, index);
      if (auto* mine = std::get_if<FillFlights::Lead>(&joined)) lead.emplace(std::move(*mine));
    }
    if (lead) {
      leads.push_back(std::move(lead));
    } else if (leads.empty()) {
      first = index + 1;  // here or on its way: what comes after it may still be fetched
    } else {
      break;
    }
  }
  if (leads.empty()) return;
  const auto end = static_cast<std::uint32_t>(first + leads.size() - 1);
  asio::co_spawn(executor,
                 fetch_chunks(s, object, first, end, nullptr, std::move(leads), false, false, what),
                 asio::detached);
}

// Whether a ranged GET of `object` goes by chunks: an object of more than one, whose misses the
// binding's admission rule keeps, while the device has room for a chunk and no whole fetch of it
// runs or waits (that one brings it all). Otherwise the range passes through exactly.
bool by_chunks(Service& s, const storage::ObjectRecord& object, const BodySelection& selection) {
  return object.size_bytes > storage::kTierChunkBytes && selection.length_bytes > 0 &&
         s.store().tier_fill_allows(storage::kTierChunkBytes) &&
         !s.fill_flights().restoring(object.id) &&
         s.read_through()->admits(object.bucket_id, object.key, object.size_bytes);
}

// Which chunks of `object` in [first, last] are kept now (by position from `first`).
std::vector<bool> kept_chunks(Service& s, const storage::ObjectRecord& object, std::uint32_t first,
                              std::uint32_t last) {
  std::vector<bool> kept(last - first + 1, false);
  if (auto chunks = s.store().object_chunks(object.id, first, last, kept.size())) {
    for (const storage::ChunkRecord& c : *chunks) kept[c.index - first] = true;
  }
  return kept;
}

// What a read of the chunks `kept` is answered from: every one kept (hit), none (miss) or some
// (partial).
tier::CacheAnswer cache_answer(const std::vector<bool>& kept) {
  const auto count = static_cast<std::size_t>(std::count(kept.begin(), kept.end(), true));
  return count == 0             ? tier::CacheAnswer::kMiss
         : count == kept.size() ? tier::CacheAnswer::kHit
                                : tier::CacheAnswer::kPartial;
}

// Sends chunks [first, last] of `object` into `out`: those that were `kept` (as the read began)
// from the device, runs of the others fetched whole and kept (fetch_chunks). Ends when the range
// is done, its response ended (see RangeSender::done, failure), or, with no client, a chunk could
// not be kept.
asio::awaitable<void> send_chunks(Service& s, const storage::ObjectRecord& object,
                                  std::uint32_t first, std::uint32_t last, std::vector<bool> kept,
                                  RangeSender& out, bool asked, const std::string& what) {
  // Some of it to fetch (not here, nor on its way for another read) from an upstream known not
  // to answer: refused before the head, not a 200 cut short after the chunks that are here.
  // (The upstream's state first: it is almost always reachable, and the flights take a lock.)
  bool to_fetch = false;
  if (!s.read_through()->reachable(object.bucket_id)) {
    for (std::uint32_t index = first; index <= last && !to_fetch; ++index) {
      to_fetch = !kept[index - first] && !s.fill_flights().chunk_flying(object.id, index);
    }
  }
  if (to_fetch) {
    auto failing = out.fail(s, make_error_code(errc::kUnavailable));
    co_await std::move(failing);
    co_return;
  }
  bool patient = true;  // until a wait for another read's fetch was in vain
  for (std::uint32_t index = first; index <= last && !out.done();) {
    // Not kept (as the read began): the first read that misses it leads its fetch; the others
    // wait for it and then read it here, or, when it keeps nothing (in time), fetch it for
    // themselves, and from then on wait for no other.
    std::optional<FillFlights::Lead> lead;
    bool here = kept[index - first];
    if (!here) {
      auto joined = s.fill_flights().join_chunk(object.id, index);
      if (auto* seat = std::get_if<FillFlights::Seat>(&joined); seat != nullptr && patient) {
        s.read_through()->count_coalesced(object.bucket_id);
        auto waiting = seat->landed_kept(FillFlights::patience(chunk_span(object, index).second));
        here = co_await std::move(waiting);
        patient = here;
      } else if (auto* mine = std::get_if<FillFlights::Lead>(&joined)) {
        lead.emplace(std::move(*mine));
        here = chunk_kept(s, object, index);  // kept since the read began
        if (here) lead.reset();
      }
    }
    if (here) {
      bool gone = false;
      auto sending = send_kept_chunk(s, object, index, out, gone, what);
      const bool sent = co_await std::move(sending);
      if (gone) co_return;
      if (sent) {
        out.read_kept(index);
        ++index;
        continue;
      }
      // Gone after all: fetched here, leading its flight if no other read does.
      auto joined = s.fill_flights().join_chunk(object.id, index);
      if (auto* mine = std::get_if<FillFlights::Lead>(&joined)) lead.emplace(std::move(*mine));
    }
    // A run of chunks not kept (this one and those after it that no other read fetches), fetched
    // as one read; each after the first is led from when the fetch reaches it.
    std::uint32_t end = index;
    while (end < last && !kept[end + 1 - first] &&
           !s.fill_flights().chunk_flying(object.id, end + 1)) {
      ++end;
    }
    ChunkLeads leads(end - index + 1);
    if (lead) leads[0].emplace(std::move(*lead));
    auto fetching = fetch_chunks(s, object, index, end, &out, std::move(leads), true, asked, what);
    const bool fetched = co_await std::move(fetching);
    if (!fetched) co_return;
    index = end + 1;
  }
}

// A ranged GET of an evicted version by chunks (a partial object), see send_chunks; a
// sequential reader's next chunks are read ahead.
asio::awaitable<void> read_chunks(Service& s, Request& r, const storage::ObjectRecord& object,
                                  const BodySelection& selection, http::Response head) {
  const auto first = static_cast<std::uint32_t>(selection.offset_bytes / storage::kTierChunkBytes);
  const auto last = static_cast<std::uint32_t>(
      (selection.offset_bytes + selection.length_bytes - 1) / storage::kTierChunkBytes);
  std::vector<bool> kept = kept_chunks(s, object, first, last);
  const tier::CacheAnswer answer = cache_answer(kept);
  s.read_through()->count_read(object.bucket_id, answer, selection.length_bytes);
  head.add("x-hots3-cache", std::string(tier::cache_answer_name(answer)));
  const bool sequential = s.fill_flights().sequential(
      object.id, selection.offset_bytes, selection.offset_bytes + selection.length_bytes);
  RangeSender out(&r, selection, std::move(head));
  if (answer != tier::CacheAnswer::kHit) out.time_first_byte(s.read_through(), object.bucket_id);
  const std::string what =
      fmt::format("request {}: GET {}/{}", r.head.request_id, r.bucket, log::escaped(r.key));
  auto sending = send_chunks(s, object, first, last, std::move(kept), out, false, what);
  co_await std::move(sending);
  if (sequential && out.done()) {
    auto executor = co_await asio::this_coro::executor;
    read_ahead(s, object, last, what, executor);
  }
}

// Whether a whole fetch of `object` goes by chunks, each kept as it comes (a restart keeps what
// came, and the next fetch reads it here and fetches only the rest): an object of more than one,
// whose bytes `check` can vouch for, that the binding's admission rule keeps (or that was
// `asked` for), while the device has room for all of it.
bool whole_by_chunks(Service& s, const storage::ObjectRecord& object, const FetchCheck& check,
                     bool asked) {
  return object.size_bytes > storage::kTierChunkBytes && check.possible() &&
         s.store().tier_fill_allows(object.size_bytes) &&
         (asked || s.read_through()->admits(object.bucket_id, object.key, object.size_bytes));
}

// Sends the whole of `object` into `out` by chunks, those kept already from the device (its head
// says which: `x-hots3-cache`), the bytes checked on their way (`check`). Once every byte passed
// and the chunk commits of the fetch have ended, the version is made local from its chunks (when
// each went through the check here: kept by this fetch, or read by it) and its flight (`lead`)
// lands kept; bytes the check refused are dropped with their chunks. The response ends then
// (RangeSender::release). false: the bytes passed, but the version was not made whole (another
// read kept a chunk meanwhile, or one went): a fetch again would read every chunk here.
asio::awaitable<bool> fetch_by_chunks(Service& s, const storage::ObjectRecord& object,
                                      RangeSender& out, FetchCheck check,
                                      std::optional<FillFlights::Lead>& lead, bool asked,
                                      const std::string& what) {
  // Eviction leaves the chunks kept so far alone until the version is whole (taken before they
  // are looked up, so that none goes between).
  const std::shared_ptr<void> hold = s.store().hold_chunks(object.id);
  std::vector<bool> kept = kept_chunks(s, object, 0, last_chunk(object));
  const tier::CacheAnswer answer = cache_answer(kept);
  out.say_cache(tier::cache_answer_name(answer));
  if (out.serving()) {
    s.read_through()->count_read(object.bucket_id, answer, object.size_bytes);
    if (answer != tier::CacheAnswer::kHit) out.time_first_byte(s.read_through(), object.bucket_id);
  }
  const auto last = static_cast<std::uint32_t>(kept.size() - 1);
  const auto executor = co_await asio::this_coro::executor;
  auto tally = std::make_shared<ChunkTally>(executor, kept.size());
  out.check(std::move(check), tally);
  auto sending = send_chunks(s, object, 0, last, std::move(kept), out, asked, what);
  co_await std::move(sending);
  if (!out.done()) co_return true;  // (its response ended)
  auto settling = tally->wait();
  co_await std::move(settling);
  const bool passed = out.passed();
  bool made_whole = !passed;  // (a refused fetch is not tried again)
  if (!passed) {
    log::error("{}: the upstream's bytes are not those of version {} (ETag {}): cut off, not kept",
               what, object.id, object.etag);
    auto forgetting = s.store().forget_chunks(object, 0, last);
    co_await std::move(forgetting);
  } else if (std::all_of(tally->vouched.begin(), tally->vouched.end(), [](bool v) { return v; })) {
    auto filling = s.store().fill_from_chunks(object);
    auto filled = co_await std::move(filling);
    made_whole = filled.has_value();
    if (filled) {
      // Unless every chunk was here already, its GETs named its ETag (If-Match): the upstream
      // held this version just now.
      if (answer != tier::CacheAnswer::kHit) s.validated().mark(filled->id, now_ms());
      if (lead) lead->kept();
    } else if (filled.error() != errc::kPreconditionFailed) {
      log::warn("{}: the fetched data was not kept: {}", what, filled.error().message());
    } else {
      log::info("{}: version {} was not made whole: it changed, or a chunk went", what, object.id);
    }
  }
  lead.reset();  // its waiters go on while the last piece goes out
  auto releasing = out.release(passed);
  co_await std::move(releasing);
  co_return made_whole;
}

// Fetches the whole of `object` (of `bucket`) into the device with no client to serve, leading
// its flight: whole GETs that come meanwhile wait for it, ranged ones pass through. `asked`: kept
// whatever the admission rule says. false when a fetch again may keep it: the upstream did not
// give the data (down, or the server stopping), a kept chunk failed its read, or its chunks were
// not made whole.
asio::awaitable<bool> fetch_whole(Service& s, storage::ObjectRecord object, std::string bucket,
                                  FillFlights::Lead lead, bool asked) {
  const std::string what = fmt::format("restore of {}/{}", bucket, log::escaped(object.key));
  std::optional<FetchCheck> check;  // (made once: the keeper below takes it when not by chunks)
  if (object.size_bytes > storage::kTierChunkBytes) {
    auto checking = fetch_check(s, object);
    check.emplace(co_await std::move(checking));
    asked = asked || lead.asked();
    if (whole_by_chunks(s, object, *check, asked)) {
      BodySelection all;
      all.length_bytes = object.size_bytes;
      RangeSender out(nullptr, all, {});
      std::optional<FillFlights::Lead> led;
      led.emplace(std::move(lead));
      auto fetching = fetch_by_chunks(s, object, out, std::move(*check), led, asked, what);
      const bool made_whole = co_await std::move(fetching);
      // Tried again unless the upstream no longer holds the version.
      const boost::system::error_code failure = out.failure();
      if (failure) co_return changed_upstream(failure);
      co_return made_whole;
    }
  }
  const std::string etag = object.upstream_etag.value_or(object.etag);
  auto upstream = s.read_through()->read(object.bucket_id, object.key, etag, 0, object.size_bytes,
                                         true, object.size_bytes, tier::Traffic::kPrefetch);
  auto reading = upstream->next();
  auto piece = co_await std::move(reading);
  if (!piece) {
    log::info("{}: the upstream's data did not come: {}", what, piece.error().message());
    note_read_refused(s, object.id, piece.error());
    co_return piece.error() != errc::kUnavailable;
  }
  Keeper keeper;
  // (Asked for by RestoreObject perhaps only meanwhile.)
  auto opening =
      keeper.open(s, object, asked || lead.asked() || upstream->admitted(), std::move(check));
  co_await std::move(opening);
  std::uint64_t passed = 0;
  while (keeper.writing() && !piece->empty()) {
    auto taking = keeper.take(*piece);
    co_await std::move(taking);
    passed += piece->size();
    auto more = upstream->next();
    piece = co_await std::move(more);
    if (!piece) {
      log::info("{}: the upstream's data stopped after {} bytes: {}", what, passed,
                piece.error().message());
      co_return false;
    }
  }
  if (!keeper.writing()) co_return true;  // not kept: not admitted, no room, or a device error
  if (!keeper.passed()) {
    log::error("{}: the upstream's bytes are not those of version {} (ETag {}): not kept", what,
               object.id, object.etag);
    co_return true;
  }
  auto keeping = keeper.keep(s, object, what);
  const bool kept = co_await std::move(keeping);
  if (kept) lead.kept();
  co_return true;
}

// Runs a restore: a version still current and still evicted when its turn comes is fetched.
// false when its fetch failed.
asio::awaitable<bool> restore_one(Service& s, FillFlights::Run run) {
  const storage::ObjectRecord& asked = run.restore.object;
  auto found = s.store().head(asked.bucket_id, asked.key);
  if (!found || !*found || (*found)->id != asked.id ||
      (*found)->tier_state != storage::TierState::kUpstreamOnly) {
    co_return true;
  }
  auto filling = fetch_whole(s, std::move(run.restore.object), std::move(run.restore.bucket),
                             std::move(run.lead), run.restore.asked);
  const bool fetched = co_await std::move(filling);
  co_return fetched;
}

// A restore whose fetch failed is tried again, at the back of the queue, this many times in all;
// its runner waits kRestoreBackOff before the next, so that a failing upstream is not asked
// again at once for everything queued.
constexpr unsigned kRestoreAttempts = 3;
constexpr auto kRestoreBackOff = std::chrono::seconds(2);

// Runs `first` and then the restores queued behind it, until none is left.
asio::awaitable<void> run_restores(Service& s, FillFlights::Run first) {
  std::optional<FillFlights::Run> run;
  run.emplace(std::move(first));
  asio::steady_timer back_off(co_await asio::this_coro::executor);
  for (;;) {
    FillFlights::Restore again = run->restore;
    bool fetched = true;
    try {
      auto restoring = restore_one(s, std::move(*run));
      fetched = co_await std::move(restoring);
    } catch (const std::exception& e) {
      // Not expected (memory running out): the runner goes on, or its slot would be lost.
      log::error("tier: restore of {}/{} failed: {}", again.bucket, log::escaped(again.object.key),
                 e.what());
    }
    run.reset();
    if (!fetched) {
      const std::string what =
          fmt::format("tier: restore of {}/{}", again.bucket, log::escaped(again.object.key));
      if (++again.attempts >= kRestoreAttempts) {
        log::warn("{} given up after {} attempts", what, kRestoreAttempts);
      } else if (!s.fill_flights().requeue_restore(std::move(again))) {
        log::warn("{} given up: the queue is full", what);
      }
      back_off.expires_after(kRestoreBackOff);
      auto waiting = back_off.async_wait(asio::as_tuple(asio::use_awaitable));
      co_await std::move(waiting);
    }
    auto next = s.fill_flights().next_restore();
    if (!next) co_return;
    run.emplace(std::move(*next));
  }
}

}  // namespace

asio::awaitable<FillFlights::Asked> ask_restore(Service& s, FillFlights::Restore restore) {
  auto asked = s.fill_flights().ask_restore(std::move(restore));
  auto* run = std::get_if<FillFlights::Run>(&asked);
  if (run == nullptr) co_return std::get<FillFlights::Asked>(asked);
  auto executor = co_await asio::this_coro::executor;
  asio::co_spawn(executor, run_restores(s, std::move(*run)), asio::detached);
  co_return FillFlights::Asked::kQueued;
}

asio::awaitable<void> read_through(Service& s, Request& r, storage::ObjectRecord object,
                                   BodySelection selection, http::Response head) {
  const auto began = std::chrono::steady_clock::now();
  const bool whole = selection.offset_bytes == 0 && selection.length_bytes == object.size_bytes;
  if (!whole && by_chunks(s, object, selection)) {
    if (asks_restore(s, object, selection)) {
      auto asking = ask_restore(s, {object, r.bucket, false, 0});
      co_await std::move(asking);
    }
    auto reading = read_chunks(s, r, object, selection, std::move(head));
    co_await std::move(reading);
    co_return;
  }
  // Counted once it is known where the bytes come from (see count_read).
  const auto count_miss = [&] {
    s.read_through()->count_read(object.bucket_id, tier::CacheAnswer::kMiss,
                                 selection.length_bytes);
  };
  std::optional<FillFlights::Lead> lead;
  if (whole && object.size_bytes > 0) {
    auto joined = s.fill_flights().join(object.id);
    if (auto* seat = std::get_if<FillFlights::Seat>(&joined)) {
      auto waiting = kept_by_flight(s, object, std::move(*seat));
      auto reader = co_await std::move(waiting);
      s.read_through()->count_coalesced(object.bucket_id);
      if (reader) {
        count_miss();  // (it waited for the read-through)
        head.add("x-hots3-cache", "hit");
        auto sending = send_local(r, *reader, selection, std::move(head));
        co_await std::move(sending);
        co_return;
      }
      // Not kept (or not in time): one more flight may keep it; else this GET only passes through.
      auto rejoined = s.fill_flights().join(object.id);
      if (auto* mine = std::get_if<FillFlights::Lead>(&rejoined)) lead.emplace(std::move(*mine));
    } else {
      lead.emplace(std::move(std::get<FillFlights::Lead>(joined)));
    }
  }
  const std::string what =
      fmt::format("request {}: GET {}/{}", r.head.request_id, r.bucket, log::escaped(r.key));
  std::optional<FetchCheck> check;  // (made once: the keeper below takes it when not by chunks)
  if (lead && object.size_bytes > storage::kTierChunkBytes) {
    auto checking = fetch_check(s, object);
    check.emplace(co_await std::move(checking));
    const bool asked = lead->asked();
    if (whole_by_chunks(s, object, *check, asked)) {
      RangeSender out(&r, selection, std::move(head));
      auto fetching = fetch_by_chunks(s, object, out, std::move(*check), lead, asked, what);
      co_await std::move(fetching);
      co_return;
    }
  }
  count_miss();
  const std::string etag = object.upstream_etag.value_or(object.etag);
  auto upstream = s.read_through()->read(object.bucket_id, object.key, etag, selection.offset_bytes,
                                         selection.length_bytes, whole,
                                         whole ? object.size_bytes : 0, tier::Traffic::kForeground);
  // The first piece before the head: an upstream that refuses gets the client an error, not a
  // body cut short.
  auto first_read = upstream->next();
  auto first = co_await std::move(first_read);
  if (!first) {
    log::warn("{}: the upstream's data did not come: {}", what, first.error().message());
    note_read_refused(s, object.id, first.error());
    auto refusing = s.send_error(r, upstream_error(first.error()));
    co_await std::move(refusing);
    co_return;
  }

  // Kept only when it is all of it (and no other GET is keeping it).
  Keeper keeper;
  if (lead) {
    auto opening = keeper.open(s, object, lead->asked() || upstream->admitted(), std::move(check));
    co_await std::move(opening);
    // What is not kept here is not worth waiting for.
    if (!keeper.writing()) lead.reset();
  } else if (asks_restore(s, object, selection)) {
    // The whole version is restored behind it, so that the next read is local.
    auto asking = ask_restore(s, {object, r.bucket, false, 0});
    co_await std::move(asking);
  }

  head.add("x-hots3-cache", "miss");
  s.read_through()->observe_cold_ttfb(object.bucket_id,
                                      std::chrono::duration_cast<std::chrono::microseconds>(
                                          std::chrono::steady_clock::now() - began));
  auto starting = r.exchange.write_head(std::move(head));
  const auto started = co_await std::move(starting);
  if (!started) co_return;
  std::uint64_t passed = 0;
  std::vector<std::byte> last;  // held back until the bytes are verified and kept
  std::span<const std::byte> piece = *first;
  for (;;) {
    if (piece.empty()) break;
    auto taking = keeper.take(piece);
    co_await std::move(taking);
    passed += piece.size();
    if (keeper.checking() && passed == selection.length_bytes) {
      last.assign(piece.begin(), piece.end());
    } else {
      auto sending = r.exchange.write_body(piece);
      const auto sent = co_await std::move(sending);
      if (!sent) co_return;
    }
    auto reading = upstream->next();
    auto next = co_await std::move(reading);
    if (!next) {
      log::error("{}: the upstream's data stopped after {} bytes: {}", what, passed,
                 next.error().message());
      auto cutting = r.exchange.finish();  // cut short: the client sees an incomplete body
      co_await std::move(cutting);
      co_return;
    }
    piece = *next;
  }
  if (!last.empty()) {
    if (!keeper.passed()) {
      log::error(
          "{}: the upstream's bytes are not those of version {} (ETag {}): cut off, not kept", what,
          object.id, object.etag);
      auto cutting = r.exchange.finish();
      co_await std::move(cutting);
      co_return;
    }
    auto keeping = keeper.keep(s, object, what);
    const bool kept = co_await std::move(keeping);
    if (kept && lead) lead->kept();
    lead.reset();  // the waiters go on while the last piece goes out
    auto sending = r.exchange.write_body(last);
    const auto sent = co_await std::move(sending);
    if (!sent) co_return;
  }
  auto ending = r.exchange.finish();
  co_await std::move(ending);
}

}  // namespace hots3::s3
