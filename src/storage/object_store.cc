#include "hots3/storage/object_store.h"

#include "storage/checksum.h"
#include "storage/device/device.h"
#include "storage/device/format.h"
#include "storage/metadata_cache.h"
#include "storage/pins.h"
#include "storage/store_core.h"
#include "storage/store_lock.h"

#include "hots3/common/assert.h"
#include "hots3/common/clock.h"
#include "hots3/common/hex.h"
#include "hots3/common/logging.h"
#include "hots3/common/random.h"
#include "hots3/common/units.h"

#include <boost/asio/async_result.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <limits>
#include <mutex>
#include <random>
#include <shared_mutex>
#include <unordered_map>
#include <unordered_set>

namespace hots3::storage {

namespace asio = boost::asio;
using detail::StoreCore;

namespace {

Result<void> check_condition(const WriteCondition& c, const std::optional<ObjectRecord>& current) {
  if (c.if_none_match_any && current) return errc::kPreconditionFailed;
  if (c.if_match) {
    if (!current) return errc::kNotFound;
    if (*c.if_match != "*" && *c.if_match != current->etag) return errc::kPreconditionFailed;
  }
  return {};
}

bool meets(const ObjectRecord& current, const DeleteCondition& c) {
  if (c.if_match && *c.if_match != "*" && *c.if_match != current.etag) return false;
  if (c.last_modified_s && *c.last_modified_s != current.created_ms / 1000) return false;
  return !c.size_bytes || *c.size_bytes == current.size_bytes;
}

std::string random_upload_id() {
  std::array<std::uint8_t, 24> bytes{};
  random_bytes(std::as_writable_bytes(std::span(bytes)));
  return to_hex(bytes);
}

asio::io_context& context_of(const asio::any_io_executor& executor) {
  return static_cast<asio::io_context&>(asio::query(executor, asio::execution::context));
}

// Runs a device operation to completion from a thread that is not a worker (start-up).
template <class Op>
Result<void> run_blocking(Device& device, Op op) {
  asio::io_context context(1);
  device.attach(context);
  Result<void> result = errc::kInternal;
  asio::co_spawn(context, op(), [&](const std::exception_ptr& e, Result<void> r) {
    if (e) std::rethrow_exception(e);
    result = r;
  });
  context.run();
  return result;
}

// An aligned block of memory for start-up I/O.
struct AlignedBlock {
  explicit AlignedBlock(std::size_t n)
      : data(static_cast<std::byte*>(std::aligned_alloc(4096, n))), size(n) {
    std::memset(data, 0, n);
  }
  ~AlignedBlock() { std::free(data); }
  AlignedBlock(const AlignedBlock&) = delete;
  AlignedBlock& operator=(const AlignedBlock&) = delete;
  AlignedBlock(AlignedBlock&&) = delete;
  AlignedBlock& operator=(AlignedBlock&&) = delete;
  [[nodiscard]] std::span<std::byte> span() const { return {data, size}; }
  std::byte* data;
  std::size_t size;
};

class StoreImpl final : public ObjectStore {
 public:
  explicit StoreImpl(StoreCore core) : core_(std::move(core)), reader_pool_(2) {
    core_.catalog_readers = &reader_pool_;
  }
  ~StoreImpl() override { shutdown(); }
  StoreImpl(const StoreImpl&) = delete;
  StoreImpl& operator=(const StoreImpl&) = delete;
  StoreImpl(StoreImpl&&) = delete;
  StoreImpl& operator=(StoreImpl&&) = delete;

  StoreCore& core() { return core_; }
  std::chrono::milliseconds rebuild_time{0};
  // Held until the store is destroyed (declared first: released last).
  std::unique_ptr<detail::StoreLock> store_lock;

  void attach(asio::io_context& worker) override {
    BufferPool::install(worker, {core_.options.io_buffer_bytes, core_.options.io_buffers_per_worker,
                                 core_.device->geometry().memory_alignment_bytes});
    core_.device->attach(worker);
  }

  void shutdown() override {
    if (shut_down_) return;
    shut_down_ = true;
    reader_pool_.join();
    // The read times in memory: a restart keeps the order eviction goes by.
    auto times = core_.access->take();
    for (std::size_t from = 0; from < times.size(); from += kSaveBatch) {
      auto saved = core_.catalog->write_blocking(
          [&](WriteTxn& t) -> Result<void> { return save_times(t, times, from); });
      if (!saved) {
        log::warn("read times not saved at shutdown: {}", saved.error().message());
        break;
      }
    }
    core_.catalog->stop();
  }

  // Buckets live in memory too: every request looks its bucket up, and buckets change only
  // through this store, which updates the map after each durable change (so the map is never
  // ahead of the catalog, and a lookup costs no SQLite read transaction).
  Result<void> load_buckets() {
    H3_TRY(auto all, core_.catalog->list_buckets());
    std::unique_lock lock(buckets_mutex_);
    for (auto& b : all) {
      tiers_[b.id] = b.tier;
      buckets_.emplace(b.name, std::move(b));
    }
    return {};
  }

  // Whether changes in the bucket leave jobs for its upstream: write-back, and write-through
  // (whose PUTs reach the upstream before their commit, and whose other changes are sent as
  // write-back ones, the request waiting for them).
  bool writes_back(std::int64_t bucket_id) const {
    std::shared_lock lock(buckets_mutex_);
    const auto it = tiers_.find(bucket_id);
    return it != tiers_.end() && sends_up(it->second);
  }
  static bool sends_up(BucketTier tier) { return tier != BucketTier::kNone; }
  BucketTier tier_of(std::int64_t bucket_id) const {
    std::shared_lock lock(buckets_mutex_);
    const auto it = tiers_.find(bucket_id);
    return it != tiers_.end() ? it->second : BucketTier::kNone;
  }
  // Whether a bucket fronts an upstream bucket others write (cache mode): the upstream may hold
  // keys this store never saw.
  bool fronts(std::int64_t bucket_id) const {
    std::shared_lock lock(buckets_mutex_);
    const auto it = tiers_.find(bucket_id);
    return it != tiers_.end() && it->second == BucketTier::kCache;
  }

  // Queues the upload (object_id) or upstream delete (none) of `key`'s new state in the
  // transaction that makes the change, after the coalescing delay.
  // `source_key`: the key of the bucket the version was renamed or copied from. A new
  // version's upload in a write-back bucket may be left to its row: REQUIRES that row is
  // inserted after this (by WriteTxn::insert_object).
  Result<void> queue_change(WriteTxn& t, std::int64_t bucket_id, std::string_view key,
                            std::optional<std::int64_t> object_id, std::uint64_t size_bytes,
                            std::string_view source_key = {}) {
    const std::int64_t now = now_ms();
    const std::int64_t due = now + core_.options.tier_delay.count();
    if (object_id && source_key.empty() && tier_of(bucket_id) == BucketTier::kWriteback) {
      return t.imply_tier_job(bucket_id, key, *object_id, size_bytes, now, due);
    }
    return t.queue_tier_job(bucket_id, key, object_id, size_bytes, now, due, source_key);
  }

  // Queues the upload of the key's `current` version, or its upstream delete without one.
  static Result<void> queue_state(WriteTxn& t, std::int64_t bucket_id, std::string_view key,
                                  const std::optional<ObjectRecord>& current, std::int64_t due_ms) {
    return t.queue_tier_job(bucket_id, key,
                            current ? std::optional<std::int64_t>(current->id) : std::nullopt,
                            current ? current->size_bytes : 0, now_ms(), due_ms, {});
  }

  Result<std::optional<BucketRecord>> find_bucket(std::string_view name) override {
    std::shared_lock lock(buckets_mutex_);
    auto it = buckets_.find(std::string(name));
    if (it == buckets_.end()) return std::optional<BucketRecord>{};
    return std::optional<BucketRecord>(it->second);
  }

  Result<std::vector<BucketRecord>> list_buckets() override {
    std::vector<BucketRecord> out;
    std::shared_lock lock(buckets_mutex_);
    for (const auto& [name, b] : buckets_) out.push_back(b);
    std::sort(out.begin(), out.end(),
              [](const BucketRecord& a, const BucketRecord& b) { return a.name < b.name; });
    return out;
  }

  asio::awaitable<Result<BucketRecord>> create_bucket(std::string name,
                                                      std::string owner) override {
    BucketRecord created;
    H3_CO_TRY(co_await core_.catalog->write([&](WriteTxn& t) -> Result<void> {
      H3_TRY(created, t.create_bucket(name, owner, now_ms()));
      return {};
    }));
    std::unique_lock lock(buckets_mutex_);
    tiers_[created.id] = created.tier;
    buckets_.insert_or_assign(created.name, created);
    co_return created;
  }

  asio::awaitable<Result<void>> delete_bucket(std::string name) override {
    std::int64_t id = 0;
    H3_CO_TRY(co_await core_.catalog->write([&](WriteTxn& t) -> Result<void> {
      H3_TRY(auto bucket, t.find_bucket(name));
      if (!bucket) return errc::kNotFound;
      id = bucket->id;
      return t.delete_bucket(bucket->id);
    }));
    core_.pins->forget_bucket(id);
    std::unique_lock lock(buckets_mutex_);
    pin_caps_.erase(id);
    pin_counts_.erase(id);
    buckets_.erase(name);
    tiers_.erase(id);
    co_return Result<void>{};
  }

  asio::awaitable<Result<void>> set_bucket_tier(std::string name, BucketTier tier,
                                                std::string upstream) override {
    BucketRecord bound;
    H3_CO_TRY(co_await core_.catalog->write([&](WriteTxn& t) -> Result<void> {
      H3_TRY(auto bucket, t.find_bucket(name));
      if (!bucket) return errc::kNotFound;
      H3_TRY(t.set_bucket_tier(bucket->id, tier, upstream));
      // What the bucket already holds goes up too: the upstream becomes a complete copy.
      if (sends_up(tier) && !sends_up(bucket->tier)) {
        H3_TRY(t.queue_local_objects(bucket->id, now_ms()));
      }
      bound = std::move(*bucket);
      bound.tier = tier;
      bound.upstream = upstream;
      return {};
    }));
    std::unique_lock lock(buckets_mutex_);
    tiers_[bound.id] = tier;
    buckets_.insert_or_assign(bound.name, bound);
    co_return Result<void>{};
  }

  asio::awaitable<Result<std::vector<TierJob>>> due_tier_jobs(std::int64_t now,
                                                              std::size_t max) override {
    auto read = detail::on_catalog_reader(
        core_, [c = core_.catalog.get(), now, max] { return c->due_tier_jobs(now, max); });
    co_return co_await std::move(read);
  }

  asio::awaitable<Result<std::vector<TierJob>>> tier_jobs(std::int64_t bucket_id,
                                                          bool with_implied) override {
    auto read =
        detail::on_catalog_reader(core_, [c = core_.catalog.get(), bucket_id, with_implied] {
          return c->tier_jobs(bucket_id, with_implied);
        });
    co_return co_await std::move(read);
  }

  asio::awaitable<Result<std::vector<TierJob>>> parked_tier_jobs(std::int64_t bucket_id,
                                                                 std::size_t max) override {
    auto read = detail::on_catalog_reader(core_, [c = core_.catalog.get(), bucket_id, max] {
      return c->parked_tier_jobs(bucket_id, max);
    });
    co_return co_await std::move(read);
  }

  asio::awaitable<Result<std::optional<TierJob>>> tier_job(std::int64_t bucket_id,
                                                           std::string key) override {
    auto read =
        detail::on_catalog_reader(core_, [c = core_.catalog.get(), bucket_id, k = std::move(key)] {
          return c->tier_job(bucket_id, k);
        });
    co_return co_await std::move(read);
  }

  asio::awaitable<Result<bool>> tier_jobs_before(const TierJob& job, std::string prefix) override {
    auto read = detail::on_catalog_reader(
        core_, [c = core_.catalog.get(), bucket_id = job.bucket_id, seq = job.seq,
                p = std::move(prefix)] { return c->tier_jobs_before(bucket_id, p, seq); });
    co_return co_await std::move(read);
  }

  std::uint64_t tier_owed_bytes() const noexcept override {
    return core_.catalog->tier_owed_bytes();
  }

  std::uint64_t tier_owed_max_bytes() const noexcept override {
    return core_.options.tier_owed_max_bytes != 0 ? core_.options.tier_owed_max_bytes
                                                  : core_.allocator->size_bytes() / 2;
  }

  bool tier_budget_allows(std::uint64_t incoming) const noexcept override {
    const std::uint64_t owed = core_.catalog->tier_owed_bytes();
    const std::uint64_t max = tier_owed_max_bytes();
    return (owed == 0 || (owed < max && incoming <= max - owed)) && tier_fill_allows(incoming);
  }

  unsigned reads_lately(std::int64_t bucket_id, std::string_view key) const noexcept override {
    return core_.frequency->estimate(bucket_id, key) + core_.misses->estimate(bucket_id, key);
  }

  bool tier_fill_allows(std::uint64_t incoming) const noexcept override {
    const unsigned full = core_.options.tier_full_percent;
    if (full == 0 || incoming == 0) return true;  // (completing an upload allocates nothing)
    const std::uint64_t size = core_.allocator->size_bytes();
    const std::uint64_t used = size - core_.allocator->free_bytes();
    return used <= size / 100 * full && incoming <= size / 100 * full - used;
  }

  asio::awaitable<Result<std::vector<TierBacklog>>> tier_backlog() override {
    auto read =
        detail::on_catalog_reader(core_, [c = core_.catalog.get()] { return c->tier_backlog(); });
    co_return co_await std::move(read);
  }

  asio::awaitable<Result<std::vector<TierSpace>>> tier_space(
      std::vector<std::int64_t> bucket_ids, std::int64_t clean_before_ms) override {
    auto read = detail::on_catalog_reader(
        core_, [c = core_.catalog.get(), ids = fmt::format("[{}]", fmt::join(bucket_ids, ",")),
                clean_before_ms] { return c->tier_space(ids, clean_before_ms); });
    co_return co_await std::move(read);
  }

  asio::awaitable<Result<bool>> finish_tier_job(TierJob job,
                                                std::optional<TierSeen> seen) override {
    bool finished = false;
    const bool uploaded = job.object_id && seen && !seen->ours.empty();
    H3_CO_TRY(co_await core_.catalog->write(
        [&](WriteTxn& t) -> Result<void> {
          // What the upstream holds now, even when a newer change replaced the job meanwhile: that
          // change's upload is conditional on it.
          H3_TRY(t.set_tier_seen(job.bucket_id, job.key, seen ? &*seen : nullptr));
          H3_TRY(finished, t.finish_tier_job(job));
          if (!finished || !uploaded) return {};
          return t.set_object_uploaded(
              *job.object_id,
              seen->etag != seen->ours ? std::optional<std::string_view>(seen->etag) : std::nullopt,
              now_ms());
        },
        [&] {
          if (finished && uploaded) core_.metadata->invalidate(job.bucket_id, job.key);
        }));
    co_return finished;
  }

  asio::awaitable<Result<std::optional<TierSeen>>> tier_seen(std::int64_t bucket_id,
                                                             std::string key) override {
    auto read =
        detail::on_catalog_reader(core_, [c = core_.catalog.get(), bucket_id, k = std::move(key)] {
          return c->tier_seen(bucket_id, k);
        });
    co_return co_await std::move(read);
  }

  asio::awaitable<Result<void>> set_tier_seen(std::int64_t bucket_id, std::string key,
                                              std::optional<TierSeen> seen) override {
    co_return co_await core_.catalog->write([&](WriteTxn& t) -> Result<void> {
      return t.set_tier_seen(bucket_id, key, seen ? &*seen : nullptr);
    });
  }

  asio::awaitable<Result<std::optional<TierJob>>> hold_tier_key(std::int64_t bucket_id,
                                                                std::string key,
                                                                std::string attempted) override {
    std::optional<TierJob> queued;
    H3_CO_TRY(co_await core_.catalog->write([&](WriteTxn& t) -> Result<void> {
      H3_TRY(auto existing, t.find_tier_job(bucket_id, key));
      if (!existing) {
        H3_TRY(auto current, t.find_object(bucket_id, key));
        H3_TRY(
            queue_state(t, bucket_id, key, current, now_ms() + core_.options.tier_delay.count()));
      }
      H3_TRY(t.add_prior_etag(bucket_id, key, attempted));
      if (!existing) {
        H3_TRY(queued, t.find_tier_job(bucket_id, key));
      }
      return {};
    }));
    co_return queued;
  }

  asio::awaitable<Result<void>> resend_tier_key(std::int64_t bucket_id, std::string key,
                                                std::string attempted) override {
    co_return co_await core_.catalog->write([&](WriteTxn& t) -> Result<void> {
      H3_TRY(auto current, t.find_object(bucket_id, key));
      H3_TRY(queue_state(t, bucket_id, key, current, now_ms()));
      return t.add_prior_etag(bucket_id, key, attempted);
    });
  }

  asio::awaitable<Result<void>> cancel_tier_job(TierJob job) override {
    co_return co_await core_.catalog->write([&](WriteTxn& t) -> Result<void> {
      H3_TRY(t.finish_tier_job(job));
      return {};
    });
  }

  asio::awaitable<Result<bool>> tier_copy_pending(std::int64_t bucket_id,
                                                  std::string key) override {
    auto read =
        detail::on_catalog_reader(core_, [c = core_.catalog.get(), bucket_id, k = std::move(key)] {
          return c->tier_copy_pending(bucket_id, k);
        });
    co_return co_await std::move(read);
  }

  asio::awaitable<Result<bool>> set_tier_upload(TierJob job, std::string upload_id) override {
    bool set = false;
    H3_CO_TRY(co_await core_.catalog->write([&](WriteTxn& t) -> Result<void> {
      H3_TRY(set, t.set_tier_upload(job, upload_id));
      return {};
    }));
    co_return set;
  }

  asio::awaitable<Result<bool>> add_tier_part(TierJob job, TierPart part) override {
    bool added = false;
    H3_CO_TRY(co_await core_.catalog->write([&](WriteTxn& t) -> Result<void> {
      H3_TRY(added, t.add_tier_part(job, part));
      return {};
    }));
    co_return added;
  }

  asio::awaitable<Result<std::vector<TierPart>>> tier_parts(std::int64_t seq) override {
    auto read = detail::on_catalog_reader(
        core_, [c = core_.catalog.get(), seq] { return c->tier_parts(seq); });
    co_return co_await std::move(read);
  }

  asio::awaitable<Result<std::vector<std::string>>> tier_upload_ids() override {
    auto read = detail::on_catalog_reader(
        core_, [c = core_.catalog.get()] { return c->tier_upload_ids(); });
    co_return co_await std::move(read);
  }

  asio::awaitable<Result<std::int64_t>> expedite_tier_jobs(std::int64_t bucket_id,
                                                           KeySpan span) override {
    std::int64_t last = 0;
    H3_CO_TRY(co_await core_.catalog->write([&](WriteTxn& t) -> Result<void> {
      H3_TRY(last, t.expedite_tier_jobs(bucket_id, span, now_ms()));
      return {};
    }));
    if (last != 0 && tier_wake_) tier_wake_();
    co_return last;
  }

  asio::awaitable<Result<TierOwed>> tier_owed(std::int64_t bucket_id, KeySpan span,
                                              std::int64_t up_to_seq) override {
    auto read = detail::on_catalog_reader(
        core_, [c = core_.catalog.get(), bucket_id, s = std::move(span), up_to_seq] {
          return c->tier_owed(bucket_id, s, up_to_seq);
        });
    co_return co_await std::move(read);
  }

  void set_tier_wake(std::function<void()> wake) override { tier_wake_ = std::move(wake); }

  asio::awaitable<Result<std::uint64_t>> unpark_tier_jobs() override {
    std::uint64_t unparked = 0;
    H3_CO_TRY(co_await core_.catalog->write([&](WriteTxn& t) -> Result<void> {
      H3_TRY(unparked, t.unpark_tier_jobs(now_ms()));
      return {};
    }));
    co_return unparked;
  }

  asio::awaitable<Result<bool>> defer_tier_job(TierJob job, std::int64_t due_ms, std::string error,
                                               bool park) override {
    bool deferred = false;
    H3_CO_TRY(co_await core_.catalog->write([&](WriteTxn& t) -> Result<void> {
      H3_TRY(deferred, t.defer_tier_job(job, due_ms, error, park));
      return {};
    }));
    co_return deferred;
  }

  asio::awaitable<Result<void>> postpone_tier_jobs(std::vector<TierJob> jobs,
                                                   std::int64_t due_ms) override {
    co_return co_await core_.catalog->write(
        [&](WriteTxn& t) -> Result<void> { return t.postpone_tier_jobs(jobs, due_ms); });
  }

  asio::awaitable<Result<Evicted>> evict_objects(std::int64_t bucket_id, KeySpan span) override {
    Evicted evicted;
    std::string after;  // each batch goes on after the last key of the one before
    for (;;) {
      std::vector<std::pair<ObjectRecord, ExtentList>> batch;
      auto writing = core_.catalog->write(
          [&](WriteTxn& t) -> Result<void> {
            batch.clear();
            H3_TRY(auto found, t.evictable_objects(bucket_id, span, after, kEvictBatch));
            for (ObjectRecord& o : found) {
              H3_TRY(auto freed, t.evict_object(o.id));
              batch.emplace_back(std::move(o), std::move(freed));
            }
            return {};
          },
          [&] {
            for (const auto& evicted_one : batch)
              core_.metadata->invalidate(bucket_id, evicted_one.first.key);
          });
      H3_CO_TRY(co_await std::move(writing));
      for (auto& [o, freed] : batch) {
        retire_evicted(o.id, o.size_bytes, std::move(freed), evicted);
      }
      if (batch.size() < kEvictBatch) break;
      after = batch.back().first.key;
    }
    // And the kept chunks of the span's evicted versions.
    auto dropping = evict_chunks(
        [bucket_id, &span](WriteTxn& t) { return t.span_chunks(bucket_id, span, kEvictBatch); },
        std::numeric_limits<std::uint64_t>::max());
    H3_CO_TRY(const Evicted chunks, co_await std::move(dropping));
    evicted.bytes += chunks.bytes;
    co_return evicted;
  }

  asio::awaitable<Result<Evicted>> evict_coldest(std::vector<std::int64_t> bucket_ids,
                                                 std::uint64_t bytes, std::int64_t clean_before_ms,
                                                 EvictionOrder order) override {
    // Kept chunks go first, the oldest first (but for those a whole fetch under way holds): a
    // partial object is what ranged reads scattered over large objects and interrupted whole
    // fetches leave, and a whole version is worth more than a piece of one.
    const std::string ids = fmt::format("[{}]", fmt::join(bucket_ids, ","));
    auto dropping = evict_chunks(
        [this, &ids, clean_before_ms](WriteTxn& t) {
          return t.oldest_chunks(ids, held_chunks(), clean_before_ms, kEvictBatch);
        },
        bytes);
    H3_CO_TRY(Evicted evicted, co_await std::move(dropping));
    if (evicted.bytes >= bytes) co_return evicted;
    // The read times go to the catalog at most once a second, however often eviction runs: the
    // reads since then rank below every other candidate instead (each was just read).
    if (now_ms() - saved_ms_.load(std::memory_order_relaxed) >= kSaveEveryMs) {
      auto saving = save_access_times();
      H3_CO_TRY(co_await std::move(saving));
    }
    // The candidates at both ends of the read order (where a loop's just-read, a shuffle's
    // just-fetched and a scan's stale keys are), on a catalog reader, most recently read first:
    // a bounded set however large the catalog; what one call leaves, the evictor's next look
    // takes.
    auto reading =
        detail::on_catalog_reader(core_, [c = core_.catalog.get(), ids, clean_before_ms] {
          return c->eviction_candidates(ids, clean_before_ms, kEvictWindow);
        });
    H3_CO_TRY(std::vector<EvictionCandidate> candidates, co_await std::move(reading));
    std::vector<std::pair<unsigned, std::size_t>> ranked;  // (rank, index), taken in order
    ranked.reserve(candidates.size());
    for (std::size_t i = 0; i < candidates.size(); ++i) {
      // Least recently read: from the end, but for those read since the times were saved, which
      // go last (the order among them matters little: each was read within the second). Least
      // often read: never read from the device lately,
      // then once, then more often (hits: see open_reader), and among equals the version that
      // came to the device last (written or fetched: the highest id) first.
      // - Counts beyond twice do not rank: in epochs every key is read once an epoch, so in the
      //   middle of one a key already read is one read ahead of a key not read yet, and finer
      //   counts would evict what is kept but not read yet in favour of what was just read.
      // - Not the most recently read first: in a shuffled order the keys just read include the
      //   hits. The last to come is what a loop just read and a shuffle just fetched, so a fixed
      //   part of the dataset stays and hits in every order.
      const std::size_t index =
          order == EvictionOrder::kLeastRecentlyRead ? candidates.size() - 1 - i : i;
      const EvictionCandidate& c = candidates[index];
      ranked.emplace_back(order == EvictionOrder::kLeastRecentlyRead
                              ? (core_.access->read_since_taken(c.id) ? 1U : 0U)
                              : std::min(core_.frequency->estimate(c.bucket_id, c.key), 2U),
                          index);
    }
    if (order == EvictionOrder::kLeastOftenRead) {
      std::sort(ranked.begin(), ranked.end(), [&](const auto& a, const auto& b) {
        return a.first != b.first ? a.first < b.first
                                  : candidates[a.second].id > candidates[b.second].id;
      });
    } else {
      std::stable_sort(ranked.begin(), ranked.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
    }
    for (std::size_t next = 0; next < ranked.size() && evicted.bytes < bytes;) {
      const std::size_t end = std::min(next + kEvictBatch, ranked.size());
      std::vector<std::pair<std::size_t, EvictedVersion>> batch;
      // (A candidate may have changed since it was read: each is taken only if it still may go.)
      auto writing = core_.catalog->write(
          [&](WriteTxn& t) -> Result<void> {
            batch.clear();
            std::uint64_t freeing = evicted.bytes;
            for (std::size_t i = next; i < end && freeing < bytes; ++i) {
              const EvictionCandidate& c = candidates[ranked[i].second];
              H3_TRY(auto taken, t.evict_if_evictable(c.id));
              if (!taken) continue;
              freeing += c.size_bytes;
              batch.emplace_back(ranked[i].second, std::move(*taken));
            }
            return {};
          },
          [&] {
            for (const auto& [i, taken] : batch)
              core_.metadata->invalidate(candidates[i].bucket_id, taken.key);
          });
      H3_CO_TRY(co_await std::move(writing));
      next = end;
      for (auto& [i, taken] : batch) {
        const EvictionCandidate& c = candidates[i];
        retire_evicted(c.id, c.size_bytes, std::move(taken.freed), evicted);
      }
    }
    co_return evicted;
  }

  void set_pins(std::int64_t bucket_id, std::vector<std::string> globs,
                std::optional<std::uint64_t> max_bytes) override {
    core_.pins->set_globs(bucket_id, std::move(globs));
    const std::unique_lock lock(buckets_mutex_);
    if (max_bytes) {
      pin_caps_[bucket_id] = *max_bytes;
    } else {
      pin_caps_.erase(bucket_id);
    }
  }

  bool pinned(std::int64_t bucket_id, std::string_view key) const override {
    return core_.pins->pinned(bucket_id, key);
  }

  std::uint64_t pin_max_bytes(std::int64_t bucket_id) const override {
    const std::shared_lock lock(buckets_mutex_);
    const auto cap = pin_caps_.find(bucket_id);
    return cap != pin_caps_.end() ? cap->second : core_.device->geometry().size_bytes / 4;
  }

  std::vector<KeySpan> pin_spans(std::int64_t bucket_id) const override {
    return core_.pins->spans(bucket_id);
  }

  asio::awaitable<Result<PinOutcome>> pin(std::int64_t bucket_id, KeySpan span,
                                          std::optional<std::uint64_t> writing) override {
    PinOutcome outcome;
    outcome.max_bytes = pin_max_bytes(bucket_id);
    std::optional<std::uint64_t> counted;  // the bucket's pinned bytes, if counted lately
    {
      const std::shared_lock lock(buckets_mutex_);
      const auto count = pin_counts_.find(bucket_id);
      if (count != pin_counts_.end() && now_ms() - count->second.second < kPinCountMs) {
        counted = count->second.first;
      }
    }
    if (core_.pins->covered(bucket_id, span)) {
      outcome.pinned = true;
      co_return outcome;
    }
    // (A prefix adds at most one rule, and takes those under it.)
    if (span.exact && core_.pins->rule_count(bucket_id) >= kMaxPinRules) {
      outcome.too_many_rules = true;
      co_return outcome;
    }
    auto counting = detail::on_catalog_reader(
        core_,
        [this, bucket_id, span, counted,
         writing]() -> Result<std::pair<std::uint64_t, std::uint64_t>> {
          std::uint64_t before = counted.value_or(0);
          if (!counted) {
            for (const KeySpan& pinned_span : core_.pins->spans(bucket_id)) {
              H3_TRY(std::uint64_t bytes, core_.catalog->span_bytes(bucket_id, pinned_span, true));
              before += bytes;
            }
          }
          std::uint64_t adding = writing.value_or(0);
          if (!writing) {
            H3_TRY(adding, core_.catalog->span_bytes(bucket_id, span, false));
          }
          return std::pair(before, adding);
        });
    H3_CO_TRY(auto count, co_await std::move(counting));
    outcome.pinned_bytes = count.first;
    outcome.adding_bytes = count.second;
    if (!counted) {
      const std::unique_lock lock(buckets_mutex_);
      pin_counts_[bucket_id] = {count.first, now_ms()};
    }
    if (outcome.pinned_bytes + outcome.adding_bytes > outcome.max_bytes) co_return outcome;
    outcome.pinned = true;
    // Pending until its transaction ends: an eviction between the commit and on_durable would
    // take a version pinned already.
    core_.pins->add_pending(bucket_id, span);
    auto committing = core_.catalog->write(
        [&span, bucket_id](WriteTxn& t) -> Result<void> { return t.add_pin(bucket_id, span); },
        [this, &span, bucket_id] { core_.pins->add(bucket_id, span); });
    auto written = co_await std::move(committing);
    core_.pins->drop_pending(bucket_id, span);
    if (!written) co_return written.error();
    {
      const std::unique_lock lock(buckets_mutex_);
      pin_counts_[bucket_id].first += outcome.adding_bytes;
    }
    co_return outcome;
  }

  asio::awaitable<Result<std::uint64_t>> unpin(std::int64_t bucket_id, KeySpan span) override {
    std::uint64_t removed = 0;
    auto writing = core_.catalog->write(
        [&](WriteTxn& t) -> Result<void> {
          H3_TRY(removed, t.remove_pins(bucket_id, span));
          return {};
        },
        [this, &span, bucket_id] { core_.pins->remove(bucket_id, span); });
    H3_CO_TRY(co_await std::move(writing));
    const std::unique_lock lock(buckets_mutex_);
    pin_counts_.erase(bucket_id);  // counted afresh by the next pin
    co_return removed;
  }

  asio::awaitable<Result<std::vector<ObjectRecord>>> versions_in_state(
      std::int64_t bucket_id, KeySpan span, TierState state, std::string after, std::size_t limit,
      bool pinned_only) override {
    auto reading =
        detail::on_catalog_reader(core_, [c = core_.catalog.get(), bucket_id, s = std::move(span),
                                          state, a = std::move(after), limit, pinned_only] {
          return c->versions_in_state(bucket_id, s, state, a, limit, pinned_only);
        });
    co_return co_await std::move(reading);
  }

  asio::awaitable<Result<std::pair<std::uint64_t, std::uint64_t>>> evicted_totals(
      std::int64_t bucket_id, KeySpan span) override {
    auto reading =
        detail::on_catalog_reader(core_, [c = core_.catalog.get(), bucket_id, s = std::move(span)] {
          return c->evicted_totals(bucket_id, s);
        });
    co_return co_await std::move(reading);
  }

  asio::awaitable<Result<std::int64_t>> begin_prefetch(PrefetchRecord job) override {
    std::int64_t id = 0;
    H3_CO_TRY(co_await core_.catalog->write([&](WriteTxn& t) -> Result<void> {
      H3_TRY(id, t.insert_prefetch(job));
      return {};
    }));
    co_return id;
  }

  asio::awaitable<Result<void>> advance_prefetch(std::int64_t id, std::string after,
                                                 std::uint64_t failed,
                                                 std::int64_t ended_ms) override {
    co_return co_await core_.catalog->write([&](WriteTxn& t) -> Result<void> {
      return t.advance_prefetch(id, after, failed, ended_ms);
    });
  }

  asio::awaitable<Result<std::vector<PrefetchRecord>>> prefetches(std::int64_t bucket_id,
                                                                  bool running) override {
    auto reading = detail::on_catalog_reader(core_, [c = core_.catalog.get(), bucket_id, running] {
      return c->prefetches(bucket_id, running);
    });
    co_return co_await std::move(reading);
  }

  asio::awaitable<Result<void>> save_access_times() override {
    saved_ms_.store(now_ms(), std::memory_order_relaxed);
    auto times = core_.access->take();
    for (std::size_t from = 0; from < times.size(); from += kSaveBatch) {
      auto saving = core_.catalog->write(
          [&](WriteTxn& t) -> Result<void> { return save_times(t, times, from); });
      H3_CO_TRY(co_await std::move(saving));
    }
    co_return Result<void>{};
  }

  asio::awaitable<Result<ObjectRecord>> fill_object(std::unique_ptr<ObjectWriter> writer,
                                                    ObjectRecord stub) override {
    detail::WrittenData data = detail::written_data(*writer);
    if (data.inline_data || data.size_bytes != stub.size_bytes) co_return errc::kInvalidArgument;
    ObjectRecord filled = std::move(stub);
    const std::int64_t stub_id = filled.id;
    filled.tier_state = TierState::kLocalAndUpstream;
    bool refilled = false;
    ExtentList chunks;  // the stub's kept chunks: the whole version replaces them
    // A new version id: caches keyed by version (layouts, blocks) never see the stub's id with
    // data, and a reader of the stub was refused before it looked for any.
    H3_CO_TRY(co_await core_.catalog->write(
        [&](WriteTxn& t) -> Result<void> {
          filled.id = t.next_id();
          H3_TRY(refilled, t.refill_object(stub_id, filled.id, data.extents, now_ms()));
          chunks = {};
          if (refilled) {
            H3_TRY(chunks, t.delete_chunks(stub_id));
          }
          return {};
        },
        [&] { core_.metadata->invalidate(filled.bucket_id, filled.key); }));
    if (!refilled) co_return errc::kPreconditionFailed;
    detail::mark_committed(*writer);
    if (!chunks.empty()) core_.retirement->retire(std::move(chunks), stub_id);
    co_return filled;
  }

  Result<std::vector<ChunkRecord>> object_chunks(std::int64_t object_id, std::uint32_t first,
                                                 std::uint32_t last, std::size_t limit) override {
    return core_.catalog->object_chunks(object_id, first, last, limit);
  }

  asio::awaitable<Result<std::unique_ptr<ObjectReader>>> open_chunk_reader(
      ObjectRecord version, std::uint32_t index) override {
    BufferPool* pool = co_await worker_pool();
    auto executor = co_await asio::this_coro::executor;
    co_return detail::open_chunk_reader(core_, *pool, version, index, std::move(executor));
  }

  asio::awaitable<Result<void>> forget_chunks(ObjectRecord version, std::uint32_t first,
                                              std::uint32_t last) override {
    ExtentList freed;
    H3_CO_TRY(co_await core_.catalog->write([&](WriteTxn& t) -> Result<void> {
      freed = {};
      for (std::uint32_t index = first; index <= last && index >= first; ++index) {
        H3_TRY(auto id, t.find_chunk(version.id, index));
        if (!id) continue;
        H3_TRY(ExtentList gone, t.delete_chunk(*id));
        freed.insert(freed.end(), gone.begin(), gone.end());
      }
      return {};
    }));
    if (!freed.empty()) core_.retirement->retire(std::move(freed), version.id);
    co_return Result<void>{};
  }

  asio::awaitable<Result<ObjectRecord>> fill_from_chunks(ObjectRecord stub) override {
    ObjectRecord filled = std::move(stub);
    const std::int64_t stub_id = filled.id;
    filled.tier_state = TierState::kLocalAndUpstream;
    bool refilled = false;
    // A new version id, as for fill_object: the chunks' extents become the version's, moved
    // within the transaction (none is freed, none written again).
    H3_CO_TRY(co_await core_.catalog->write(
        [&](WriteTxn& t) -> Result<void> {
          filled.id = t.next_id();
          H3_TRY(refilled, t.adopt_chunks(stub_id, filled.id, filled.size_bytes));
          if (!refilled) return {};
          H3_TRY(refilled, t.refill_object(stub_id, filled.id, {}, now_ms()));
          // (Not expected: a version that is no longer evicted has no chunks. The moves are
          // undone.)
          if (!refilled) return errc::kPreconditionFailed;
          return {};
        },
        [&] { core_.metadata->invalidate(filled.bucket_id, filled.key); }));
    if (!refilled) co_return errc::kPreconditionFailed;
    co_return filled;
  }

  std::shared_ptr<void> hold_chunks(std::int64_t version_id) override {
    {
      const std::lock_guard lock(held_mutex_);
      held_.insert(version_id);
    }
    return {nullptr, [this, version_id](void*) {
              const std::lock_guard lock(held_mutex_);
              held_.erase(held_.find(version_id));
            }};
  }

  asio::awaitable<Result<bool>> keep_chunk(std::unique_ptr<ObjectWriter> writer,
                                           ObjectRecord version, std::uint32_t index) override {
    detail::WrittenData data = detail::written_data(*writer);
    const std::uint64_t size = tier_chunk_bytes(version.size_bytes, index);
    if (data.inline_data || size == 0 || data.size_bytes != size) co_return errc::kInvalidArgument;
    bool kept = false;
    H3_CO_TRY(co_await core_.catalog->write([&](WriteTxn& t) -> Result<void> {
      const ChunkRecord chunk{t.next_id(), version.id, index, data.size_bytes};
      H3_TRY(kept, t.insert_chunk(chunk, data.extents, now_ms()));
      return {};
    }));
    if (kept) detail::mark_committed(*writer);
    co_return kept;
  }

  // Makes `stub` (learnt from the upstream) an evicted version of `key`.
  static void make_stub(std::optional<ObjectRecord>& stub, const BucketRecord& bucket,
                        const std::string& key) {
    if (!stub) return;
    stub->bucket_id = bucket.id;
    stub->key = key;
    stub->tier_state = TierState::kUpstreamOnly;
    stub->accessed_ms = now_ms();
    stub->inline_data.reset();
    stub->upstream_etag.reset();
  }

  // Records `stub` (made by make_stub; none: no version) as the key's state, and as what the
  // upstream holds: writes of the key replace it there knowingly, as any version seen there.
  static Result<void> record_upstream_state(WriteTxn& t, const BucketRecord& bucket,
                                            const std::string& key,
                                            std::optional<ObjectRecord>& stub,
                                            const std::vector<ObjectPartRecord>& parts) {
    if (!stub) return t.set_tier_seen(bucket.id, key, nullptr);
    stub->id = t.next_id();
    H3_TRY(t.insert_object(*stub, {}));
    H3_TRY(t.insert_object_parts(stub->id, parts));
    const TierSeen seen{stub->etag, stub->etag};
    return t.set_tier_seen(bucket.id, key, &seen);
  }

  asio::awaitable<Result<std::optional<ObjectRecord>>> settle_lost(
      const BucketRecord& bucket, std::string key, std::int64_t lost,
      std::optional<ObjectRecord> stub, std::vector<ObjectPartRecord> parts) override {
    make_stub(stub, bucket, key);
    H3_CO_TRY(co_await core_.catalog->write(
        [&](WriteTxn& t) -> Result<void> {
          H3_TRY(auto b, t.find_bucket(bucket.name));
          if (!b || b->id != bucket.id) return errc::kNotFound;
          H3_TRY(auto current, t.find_object(bucket.id, key));
          if (!current || current->id != lost || current->tier_state != TierState::kLost)
            return errc::kPreconditionFailed;
          H3_TRY(t.drop_tier_job(bucket.id, key));
          H3_TRY(t.delete_object(lost));  // (no data to free)
          // (Forgotten: what the uploader last saw upstream stays what a write of the key
          // replaces there.)
          if (!stub) return {};
          return record_upstream_state(t, bucket, key, stub, parts);
        },
        [&] { core_.metadata->invalidate(bucket.id, key); }));
    co_return stub;
  }

  asio::awaitable<Result<std::optional<ObjectRecord>>> take_upstream_state(
      const BucketRecord& bucket, std::string key, std::int64_t replacing,
      std::optional<ObjectRecord> stub, std::vector<ObjectPartRecord> parts,
      std::optional<std::string> seen_before) override {
    make_stub(stub, bucket, key);
    bool taken = false;
    ExtentList freed;
    H3_CO_TRY(co_await core_.catalog->write(
        [&](WriteTxn& t) -> Result<void> {
          taken = false;
          freed = {};
          H3_TRY(auto b, t.find_bucket(bucket.name));
          if (!b || b->id != bucket.id) return errc::kNotFound;
          H3_TRY(auto owed, t.find_tier_job(bucket.id, key));
          if (owed) return {};
          if (seen_before) {
            H3_TRY(auto seen, t.find_tier_seen(bucket.id, key));
            if ((seen ? seen->etag : std::string()) != *seen_before) return {};
          }
          H3_TRY(auto current, t.find_object(bucket.id, key));
          if ((current ? current->id : 0) != replacing) return {};
          if (current) {
            // (A lost one is the operator's to settle: settle_lost.)
            if (current->tier_state == TierState::kLocal || current->tier_state == TierState::kLost)
              return {};
            H3_TRY(freed, t.delete_object(current->id));
          }
          taken = true;
          return record_upstream_state(t, bucket, key, stub, parts);
        },
        [&] { core_.metadata->invalidate(bucket.id, key); }));
    if (!taken) co_return errc::kPreconditionFailed;
    if (replacing != 0) core_.retirement->retire(std::move(freed), replacing);
    co_return stub;
  }

  Result<std::shared_ptr<const ObjectRecord>> head(std::int64_t bucket_id,
                                                   std::string_view key) override {
    return detail::lookup_object(core_, bucket_id, key, /*with_data=*/false);
  }

  asio::awaitable<Result<std::unique_ptr<ObjectReader>>> open_reader(std::int64_t bucket_id,
                                                                     std::string key) override {
    BufferPool* pool = co_await worker_pool();
    co_return co_await detail::open_reader(core_, *pool, bucket_id, std::move(key));
  }

  asio::awaitable<Result<std::unique_ptr<ObjectWriter>>> create_writer(
      std::optional<std::uint64_t> size, bool for_part) override {
    BufferPool* pool = co_await worker_pool();
    auto executor = co_await asio::this_coro::executor;
    // Parts never live in the catalog: completing an upload moves extents, not rows of data.
    co_return detail::make_writer(core_, *pool, executor, size, !for_part);
  }

  asio::awaitable<Result<ObjectRecord>> commit_object(std::unique_ptr<ObjectWriter> writer,
                                                      const BucketRecord& bucket, std::string key,
                                                      ObjectSpec spec,
                                                      WriteCondition condition) override {
    detail::WrittenData data = detail::written_data(*writer);
    ObjectRecord object;
    object.bucket_id = bucket.id;
    object.key = std::move(key);
    object.size_bytes = data.size_bytes;
    H3_ASSERT(!spec.etag.empty(), "a commit without an ETag");
    object.etag = std::move(spec.etag);
    object.created_ms = object.accessed_ms = now_ms();
    object.headers = std::move(spec.headers);
    object.user_metadata = std::move(spec.user_metadata);
    object.checksums = std::move(spec.checksums);
    if (spec.upstream_etag) {
      object.tier_state = TierState::kLocalAndUpstream;
      if (*spec.upstream_etag != object.etag) object.upstream_etag = *spec.upstream_etag;
    }
    // Write-through of the record once it is durable: HEADs after a PUT need no catalog read.
    // Not of a small object's data (the record says "inline, bytes not loaded"; its first GET
    // reads them): copying every small PUT's bytes into a growing cache cost a third of the
    // 4 KiB PUT rate on 2 cores, most of it the kernel clearing fresh pages. The record and its
    // cache entry are made here, on the worker, and what the entry displaces is freed here: the
    // syncer, which answers a flush's writes only after their write-throughs, just links it in
    // (its CPU per write for them 3.0 -> 1.1 µs, 64 writers of 4 KiB objects).
    const auto cached = std::make_shared<ObjectRecord>(object);
    if (data.inline_data) cached->inline_data.emplace();
    auto cache_update = detail::MetadataCache::prepare(bucket.id, object.key, cached);
    object.inline_data = std::move(data.inline_data);
    ExtentList freed;
    std::int64_t replaced = 0;
    // The version goes in, replacing the key's current one if the write's condition allows.
    const auto insert = [&](WriteTxn& t) -> Result<void> {
      if (!condition.if_match) {
        // A new key (checkpoints, datasets) is inserted without a lookup first; the insert's
        // own uniqueness check finds an object already there. 64 writers of 4 KiB objects: the
        // catalog writer's CPU per put 17.0 -> 16.3 µs.
        H3_TRY(const bool inserted, t.insert_object_if_absent(object, data.extents));
        if (inserted) return {};
        if (condition.if_none_match_any) return errc::kPreconditionFailed;
      }
      H3_TRY(auto current, t.find_object(bucket.id, object.key));
      H3_TRY(check_condition(condition, current));
      if (current) {
        H3_TRY(freed, t.delete_object(current->id));
        replaced = current->id;
      }
      return t.insert_object(object, data.extents);
    };
    const bool tracked = writes_back(bucket.id);
    H3_CO_TRY(co_await core_.catalog->write(
        [&](WriteTxn& t) -> Result<void> {
          H3_TRY(auto b, t.find_bucket(bucket.name));
          if (!b || b->id != bucket.id) return errc::kNotFound;
          object.id = cached->id = t.next_id();
          if (spec.upstream_etag) {
            H3_TRY(t.drop_tier_job(bucket.id, object.key));
            const TierSeen seen{*spec.upstream_etag, object.etag};
            H3_TRY(t.set_tier_seen(bucket.id, object.key, &seen));
          } else if (tracked) {
            H3_TRY(queue_change(t, bucket.id, object.key, object.id, object.size_bytes,
                                spec.copied_from));
          }
          return insert(t);
        },
        [&] { core_.metadata->put(cache_update); }));
    detail::mark_committed(*writer);
    if (replaced != 0) core_.retirement->retire(std::move(freed), replaced);
    object.inline_data.reset();
    co_return object;
  }

  asio::awaitable<Result<ObjectRecord>> append_object(
      std::unique_ptr<ObjectWriter> writer, const BucketRecord& bucket, std::string key,
      std::int64_t base_version, bool writer_has_base, ObjectSpec spec,
      std::vector<ObjectPartRecord> new_parts) override {
    detail::WrittenData data = detail::written_data(*writer);
    ObjectRecord object;
    object.bucket_id = bucket.id;
    object.key = std::move(key);
    H3_ASSERT(!spec.etag.empty(), "a commit without an ETag");
    object.etag = std::move(spec.etag);
    object.created_ms = object.accessed_ms = now_ms();
    object.headers = std::move(spec.headers);
    object.user_metadata = std::move(spec.user_metadata);
    object.checksums = std::move(spec.checksums);
    object.inline_data = data.inline_data;
    ExtentList freed;
    const bool tracked = writes_back(bucket.id);
    H3_CO_TRY(co_await core_.catalog->write(
        [&](WriteTxn& t) -> Result<void> {
          H3_TRY(auto b, t.find_bucket(bucket.name));
          if (!b || b->id != bucket.id) return errc::kNotFound;
          H3_TRY(auto current, t.find_object(bucket.id, object.key));
          if ((current ? current->id : 0) != base_version) return errc::kPreconditionFailed;
          // An evicted base has no data here to keep.
          if (current && current->tier_state == TierState::kUpstreamOnly) return errc::kUnavailable;
          if (current && current->tier_state == TierState::kLost) return errc::kLost;
          object.id = t.next_id();
          std::uint64_t kept_bytes = 0;
          object.parts_count = static_cast<std::uint32_t>(new_parts.size());
          if (current) {
            // An inline base has no extents, and its data is in the writer; it keeps its part
            // table.
            H3_ASSERT(writer_has_base == current->inline_data.has_value(),
                      "append: base data both kept and rewritten");
            if (!writer_has_base) kept_bytes = current->size_bytes;
            H3_TRY(t.move_object_data(current->id, object.id));
            object.parts_count += current->parts_count;
          }
          object.size_bytes = kept_bytes + data.size_bytes;
          // Queued while the version it replaces is still there (its ETag goes with the job).
          if (tracked) H3_TRY(queue_change(t, bucket.id, object.key, object.id, object.size_bytes));
          if (current) {
            H3_TRY(freed, t.delete_object(current->id));
          }
          std::vector<ExtentRecord> extents = data.extents;
          H3_ASSERT(!object.inline_data || kept_bytes == 0, "inline data after extents");
          for (ExtentRecord& e : extents) e.logical_offset_bytes += kept_bytes;
          H3_TRY(t.insert_object(object, extents));
          return t.insert_object_parts(object.id, new_parts);
        },
        [&] { core_.metadata->invalidate(bucket.id, object.key); }));
    detail::mark_committed(*writer);
    // Whatever the base version still held (nothing, but for its inline row) goes the usual way.
    if (!freed.empty()) core_.retirement->retire(std::move(freed), base_version);
    object.inline_data.reset();
    co_return object;
  }

  using ObjectStore::delete_object;
  asio::awaitable<Result<std::optional<ObjectRecord>>> delete_object(
      std::int64_t bucket_id, std::string key, DeleteCondition condition) override {
    std::optional<ObjectRecord> deleted;
    ExtentList freed;
    const bool tracked = writes_back(bucket_id);
    const bool fronting = fronts(bucket_id);
    H3_CO_TRY(co_await core_.catalog->write(
        [&](WriteTxn& t) -> Result<void> {
          H3_TRY(deleted, t.find_object(bucket_id, key));
          if (!deleted && condition.if_match) return errc::kNotFound;
          // The upstream of a bucket in cache mode may hold the key all the same: its delete goes
          // up.
          if (!deleted)
            return fronting ? queue_change(t, bucket_id, key, std::nullopt, 0) : Result<void>{};
          if (!meets(*deleted, condition)) return errc::kPreconditionFailed;
          if (tracked) H3_TRY(queue_change(t, bucket_id, key, std::nullopt, 0));
          H3_TRY(freed, t.delete_object(deleted->id));
          return {};
        },
        [&] { core_.metadata->invalidate(bucket_id, key); }));
    if (deleted) core_.retirement->retire(std::move(freed), deleted->id);
    co_return deleted;
  }

  asio::awaitable<Result<ObjectRecord>> replace_metadata(std::int64_t bucket_id, std::string key,
                                                         std::string etag,
                                                         ObjectSpec spec) override {
    ObjectRecord updated;
    const bool tracked = writes_back(bucket_id);
    H3_CO_TRY(co_await core_.catalog->write(
        [&](WriteTxn& t) -> Result<void> {
          H3_TRY(auto current, t.find_object(bucket_id, key));
          if (!current) return errc::kNotFound;
          if (current->etag != etag) return errc::kPreconditionFailed;
          // Its job may have to send the data (an upstream copy refused), which an evicted version
          // has not here.
          if (current->tier_state == TierState::kUpstreamOnly) return errc::kUnavailable;
          if (current->tier_state == TierState::kLost) return errc::kLost;
          updated = std::move(*current);
          updated.headers = spec.headers;
          updated.user_metadata = spec.user_metadata;
          updated.created_ms = now_ms();
          H3_TRY(t.update_object_metadata(updated));
          if (!tracked) return {};
          return queue_change(t, bucket_id, key, updated.id, updated.size_bytes, key);
        },
        [&] { core_.metadata->invalidate(bucket_id, key); }));
    updated.inline_data.reset();
    co_return updated;
  }

  asio::awaitable<Result<ObjectRecord>> rename_object(std::int64_t bucket_id, std::string from,
                                                      std::string to, RenameCheck check) override {
    ObjectRecord moved;
    ExtentList freed;
    std::int64_t replaced = 0;
    const bool tracked = writes_back(bucket_id);
    H3_CO_TRY(co_await core_.catalog->write(
        [&](WriteTxn& t) -> Result<void> {
          H3_TRY(auto source, t.find_object(bucket_id, from));
          if (!source) return errc::kNotFound;
          if (from == to) {
            if (check) H3_TRY(check(*source, source));
            moved = std::move(*source);
            return {};
          }
          // Under a new name a version is uploaded again, from data an evicted one has not here.
          if (source->tier_state == TierState::kUpstreamOnly) return errc::kUnavailable;
          if (source->tier_state == TierState::kLost) return errc::kLost;
          H3_TRY(auto target, t.find_object(bucket_id, to));
          if (check) H3_TRY(check(*source, target));
          if (tracked) {
            // Queued while the versions they replace are still there (their ETags go with them).
            H3_TRY(queue_change(t, bucket_id, from, std::nullopt, 0));
            H3_TRY(queue_change(t, bucket_id, to, source->id, source->size_bytes, from));
          }
          if (target) {
            H3_TRY(freed, t.delete_object(target->id));
            replaced = target->id;
          }
          H3_TRY(t.move_object(source->id, bucket_id, to));
          moved = std::move(*source);
          moved.key = to;
          moved.tier_state = TierState::kLocal;
          return {};
        },
        [&] {
          core_.metadata->invalidate(bucket_id, from);
          core_.metadata->invalidate(bucket_id, to);
        }));
    if (replaced != 0) core_.retirement->retire(std::move(freed), replaced);
    co_return moved;
  }

  asio::awaitable<Result<ListPage>> list_objects(std::int64_t bucket_id, ListQuery query) override {
    auto read = detail::on_catalog_reader(
        core_, [c = core_.catalog.get(), bucket_id, q = std::move(query)] {
          return c->list_objects(bucket_id, q);
        });
    co_return co_await std::move(read);
  }

  // ---- multipart ----
  asio::awaitable<Result<UploadRecord>> create_upload(const BucketRecord& bucket, std::string key,
                                                      std::string owner, ObjectSpec spec,
                                                      std::optional<std::string> algorithm,
                                                      std::optional<std::string> type) override {
    UploadRecord upload;
    upload.upload_id = random_upload_id();
    upload.bucket_id = bucket.id;
    upload.key = std::move(key);
    upload.created_ms = now_ms();
    upload.owner = std::move(owner);
    upload.headers = std::move(spec.headers);
    upload.user_metadata = std::move(spec.user_metadata);
    upload.checksum_algorithm = std::move(algorithm);
    upload.checksum_type = std::move(type);
    H3_CO_TRY(co_await core_.catalog->write([&](WriteTxn& t) -> Result<void> {
      H3_TRY(auto b, t.find_bucket(bucket.name));
      if (!b || b->id != bucket.id) return errc::kNotFound;
      upload.id = t.next_id();
      return t.insert_upload(upload);
    }));
    co_return upload;
  }

  Result<std::optional<UploadRecord>> find_upload(std::string_view upload_id) override {
    return core_.catalog->find_upload(upload_id);
  }

  Result<std::optional<EndedUpload>> ended_upload(std::string_view upload_id) override {
    return core_.catalog->ended_upload(upload_id);
  }

  asio::awaitable<Result<UploadCounts>> count_uploads(std::int64_t bucket_id, std::string owner,
                                                      std::uint64_t limit) override {
    auto read =
        detail::on_catalog_reader(core_, [c = core_.catalog.get(), bucket_id, o = std::move(owner),
                                          limit] { return c->count_uploads(bucket_id, o, limit); });
    co_return co_await std::move(read);
  }

  asio::awaitable<Result<PartRecord>> commit_part(std::unique_ptr<ObjectWriter> writer,
                                                  std::string upload_id, std::uint32_t part_number,
                                                  ChecksumSet checksums, std::string etag,
                                                  TeedPart teed) override {
    detail::WrittenData data = detail::written_data(*writer);
    H3_ASSERT(!data.inline_data, "a part was written inline");
    PartRecord part;
    part.part_number = part_number;
    part.size_bytes = data.size_bytes;
    part.etag = std::move(etag);
    part.created_ms = now_ms();
    part.checksums = std::move(checksums);
    if (!teed.upload_id.empty()) part.tier_etag = std::move(teed.etag);
    ExtentList freed;
    H3_CO_TRY(co_await core_.catalog->write([&](WriteTxn& t) -> Result<void> {
      H3_TRY(auto upload, t.find_upload(upload_id));
      if (!upload) return errc::kNotFound;
      part.id = t.next_id();
      H3_TRY(freed, t.put_part(*upload, part, data.extents, teed.upload_id));
      return {};
    }));
    detail::mark_committed(*writer);
    // A replaced part is free at once: no reader ever reads a part (readers open objects, and a
    // completion moves parts' extents to the object in the same transaction that removes the
    // parts), so no epoch can still need it; a long GET elsewhere must not hold a checkpoint's
    // space back.
    if (!freed.empty()) core_.retirement->release_now(freed);
    co_return part;
  }

  asio::awaitable<Result<ObjectRecord>> complete_upload(std::string upload_id, PlanFn plan,
                                                        WriteCondition condition) override {
    ObjectRecord object;
    ExtentList replaced_extents;
    ExtentList dropped;
    std::int64_t replaced = 0;
    H3_CO_TRY(co_await core_.catalog->write(
        [&](WriteTxn& t) -> Result<void> {
          H3_TRY(auto upload, t.find_upload(upload_id));
          if (!upload) return errc::kNotFound;
          H3_TRY(auto parts, t.parts(upload->id));
          H3_TRY(CompletionPlan chosen, plan(*upload, parts));
          H3_ASSERT(!chosen.spec.etag.empty(), "a completion plan without an ETag");
          H3_TRY(auto current, t.find_object(upload->bucket_id, upload->key));
          H3_TRY(check_condition(condition, current));
          std::vector<std::pair<PartRecord, std::uint64_t>> placed;
          std::vector<ObjectPartRecord> table;
          std::uint64_t offset = 0;
          for (const PartRecord& p : chosen.parts) {
            placed.emplace_back(p, offset);
            std::optional<std::string> checksum;
            const auto& alg = upload->checksum_algorithm;
            if (alg == "CRC32") checksum = p.checksums.crc32;
            if (alg == "CRC32C") checksum = p.checksums.crc32c;
            // An upload without an algorithm has S3's default: each part's CRC64NVME.
            if (!alg || alg == "CRC64NVME") checksum = p.checksums.crc64nvme;
            if (alg == "SHA1") checksum = p.checksums.sha1;
            if (alg == "SHA256") checksum = p.checksums.sha256;
            table.push_back({p.part_number, offset, p.size_bytes, checksum});
            offset += p.size_bytes;
          }
          object.id = t.next_id();
          object.bucket_id = upload->bucket_id;
          object.key = upload->key;
          object.size_bytes = offset;
          object.etag = chosen.spec.etag;
          object.parts_count = static_cast<std::uint32_t>(chosen.parts.size());
          object.created_ms = object.accessed_ms = now_ms();
          object.headers = chosen.spec.headers;
          object.user_metadata = chosen.spec.user_metadata;
          object.checksums = chosen.spec.checksums;
          // Queued while the version it replaces is still there (its ETag goes with the job).
          if (writes_back(object.bucket_id)) {
            H3_TRY(queue_change(t, object.bucket_id, object.key, object.id, object.size_bytes));
          }
          if (current) {
            H3_TRY(replaced_extents, t.delete_object(current->id));
            replaced = current->id;
          }
          H3_TRY(dropped, t.complete_upload(upload->id, object, placed, table));
          return {};
        },
        [&] { core_.metadata->invalidate(object.bucket_id, object.key); }));
    if (replaced != 0) core_.retirement->retire(std::move(replaced_extents), replaced);
    if (!dropped.empty()) core_.retirement->release_now(dropped);  // parts: see commit_part
    co_return object;
  }

  asio::awaitable<Result<void>> abort_upload(std::string upload_id) override {
    ExtentList freed;
    H3_CO_TRY(co_await core_.catalog->write([&](WriteTxn& t) -> Result<void> {
      H3_TRY(auto upload, t.find_upload(upload_id));
      if (!upload) return errc::kNotFound;
      H3_TRY(t.record_abort(upload->id, now_ms()));
      H3_TRY(freed, t.delete_upload(upload->id));
      return {};
    }));
    if (!freed.empty()) core_.retirement->release_now(freed);  // parts: see commit_part
    co_return Result<void>{};
  }

  asio::awaitable<Result<std::vector<PartRecord>>> list_parts(std::int64_t upload_row,
                                                              std::uint32_t after,
                                                              std::uint32_t max) override {
    auto read = detail::on_catalog_reader(core_, [c = core_.catalog.get(), upload_row, after, max] {
      return c->list_parts(upload_row, after, max);
    });
    co_return co_await std::move(read);
  }

  asio::awaitable<Result<UploadListPage>> list_uploads(std::int64_t bucket_id,
                                                       UploadListQuery query) override {
    auto read = detail::on_catalog_reader(
        core_, [c = core_.catalog.get(), bucket_id, q = std::move(query)] {
          return c->list_uploads(bucket_id, q);
        });
    co_return co_await std::move(read);
  }

  asio::awaitable<Result<std::vector<ObjectPartRecord>>> object_parts(
      std::int64_t object_id) override {
    auto read = detail::on_catalog_reader(
        core_, [c = core_.catalog.get(), object_id] { return c->object_parts(object_id); });
    co_return co_await std::move(read);
  }

  Result<std::optional<ObjectPartRecord>> object_part(std::int64_t object_id,
                                                      std::uint32_t part_number) override {
    return core_.catalog->object_part(object_id, part_number);
  }

  asio::awaitable<Result<std::size_t>> abort_uploads_older_than(
      std::chrono::milliseconds age) override {
    // Up to 1000 rows: more than an index lookup, so on a catalog reader, not on this worker.
    auto read = detail::on_catalog_reader(
        core_,
        [c = core_.catalog.get(), before = now_ms() - static_cast<std::int64_t>(age.count())] {
          return c->uploads_older_than(before, 1000);
        });
    H3_CO_TRY(auto old, co_await std::move(read));
    std::size_t aborted = 0;
    for (const UploadRecord& u : old) {
      auto r = co_await abort_upload(u.upload_id);
      if (r) ++aborted;
    }
    co_return aborted;
  }

  bool digest_is_md5() const noexcept override { return core_.options.compute_md5; }

  StoreStats stats() const override {
    StoreStats s;
    s.device_bytes = core_.allocator->size_bytes();
    s.free_bytes = core_.allocator->free_bytes();
    s.used_bytes = s.device_bytes - s.free_bytes;
    s.pending_free_bytes = core_.retirement->pending_bytes();
    s.free_extents = core_.allocator->free_extent_count();
    s.largest_free_bytes = core_.allocator->largest_free_bytes();
    s.io_engine = std::string(core_.device->engine());
    const auto cache = core_.cache->stats();
    s.cache_capacity_bytes = cache.capacity_bytes;
    s.cache_prefaulted_bytes = cache.prefaulted_bytes;
    s.cache_used_bytes = cache.used_bytes;
    s.cache_hits = cache.hits;
    s.cache_misses = cache.misses;
    s.cache_evictions = cache.evictions;
    s.checksum_failures = checksum_failures();
    const auto metadata = core_.metadata->stats();
    s.metadata_cache_capacity_bytes = metadata.capacity_bytes;
    s.metadata_cache_used_bytes = metadata.used_bytes;
    s.metadata_cache_entries = metadata.entries;
    s.metadata_cache_hits = metadata.hits;
    s.metadata_cache_misses = metadata.misses;
    s.catalog_writer = core_.catalog->writer_stats();
    s.startup_rebuild = rebuild_time;
    const DeviceIoStats io = core_.device->io_stats();
    s.device_io_in_flight = io.in_flight;
    s.device_io_seconds = io.seconds;
    return s;
  }

 private:
  // Versions evicted per transaction: a large prefix is not one transaction that holds every
  // other write back.
  static constexpr std::size_t kEvictBatch = 256;

  // Frees the kept chunks `find` picks, batch after batch, until `bytes` are freed or it finds
  // none. Counted in bytes, not objects: their versions were evicted already.
  using ChunkFinder = std::function<Result<std::vector<ChunkRecord>>(WriteTxn&)>;
  asio::awaitable<Result<Evicted>> evict_chunks(ChunkFinder find, std::uint64_t bytes) {
    Evicted evicted;
    for (bool more = true; more && evicted.bytes < bytes;) {
      std::vector<std::pair<ChunkRecord, ExtentList>> batch;
      auto writing = core_.catalog->write([&](WriteTxn& t) -> Result<void> {
        batch.clear();
        H3_TRY(const std::vector<ChunkRecord> found, find(t));
        more = found.size() == kEvictBatch;
        std::uint64_t freeing = evicted.bytes;
        for (const ChunkRecord& c : found) {
          if (freeing >= bytes) break;
          H3_TRY(ExtentList freed, t.delete_chunk(c.id));
          freeing += c.size_bytes;
          batch.emplace_back(c, std::move(freed));
        }
        return {};
      });
      H3_CO_TRY(co_await std::move(writing));
      for (auto& [c, freed] : batch) {
        core_.retirement->retire(std::move(freed), c.object_id);
        evicted.bytes += c.size_bytes;
      }
    }
    co_return evicted;
  }

  // After the transaction that evicted a version (whose on_durable dropped its record from the
  // cache): its extents return once its readers have left.
  void retire_evicted(std::int64_t id, std::uint64_t size_bytes, ExtentList freed,
                      Evicted& evicted) {
    core_.retirement->retire(std::move(freed), id);
    ++evicted.objects;
    evicted.bytes += size_bytes;
  }

  // Read times saved per transaction, so that a burst of reads does not hold writes back.
  static constexpr std::size_t kSaveBatch = 4096;
  // Eviction saves them at most this often.
  static constexpr std::int64_t kSaveEveryMs = 1000;
  // Candidates read from each end of the read order per eviction (frequency order).
  static constexpr std::size_t kEvictWindow = 4096;

  // Saves times[from, from + kSaveBatch).
  static Result<void> save_times(WriteTxn& t,
                                 const std::vector<std::pair<std::int64_t, std::int64_t>>& times,
                                 std::size_t from) {
    const std::size_t end = std::min(times.size(), from + kSaveBatch);
    for (std::size_t i = from; i < end; ++i)
      H3_TRY(t.set_accessed(times[i].first, times[i].second));
    return {};
  }

  // The versions whose chunks eviction by watermark leaves alone (hold_chunks), as a JSON array.
  std::string held_chunks() {
    const std::lock_guard lock(held_mutex_);
    return fmt::format("[{}]", fmt::join(held_, ","));
  }

  // The calling worker's buffer pool.
  static asio::awaitable<BufferPool*> worker_pool() {
    auto executor = co_await asio::this_coro::executor;
    BufferPool* pool = BufferPool::of(context_of(executor));
    H3_ASSERT(pool != nullptr, "store used from a thread that is not one of its workers");
    co_return pool;
  }

  StoreCore core_;
  std::mutex held_mutex_;
  std::unordered_multiset<std::int64_t> held_;
  asio::thread_pool reader_pool_;
  bool shut_down_ = false;
  std::atomic<std::int64_t> saved_ms_{0};  // when the read times were last saved (or taken)
  std::function<void()> tier_wake_;        // set before serving, read by any thread after
  mutable std::shared_mutex buckets_mutex_;
  std::unordered_map<std::string, BucketRecord> buckets_;
  std::unordered_map<std::int64_t, BucketTier> tiers_;        // by bucket id
  std::unordered_map<std::int64_t, std::uint64_t> pin_caps_;  // by bucket id (set_pins)
  // The bucket's pinned bytes as last counted, and when (ms).
  std::unordered_map<std::int64_t, std::pair<std::uint64_t, std::int64_t>> pin_counts_;
};

// The superblock of `device` read; whether it is blank (all zeros) in `blank`.
Result<Superblock> read_superblock(Device& device, bool& blank) {
  AlignedBlock block(kSuperblockBytes);
  if (auto r = run_blocking(device,
                            [&]() -> asio::awaitable<Result<void>> {
                              co_return co_await device.read(0, block.span());
                            });
      !r) {
    throw std::runtime_error("cannot read the superblock of " + device.geometry().path + ": " +
                             r.error().message());
  }
  blank = std::all_of(block.data, block.data + block.size,
                      [](std::byte b) { return b == std::byte{0}; });
  return decode_superblock(block.span());
}

// Writes a superblock giving `device` the identity `uuid`, durably.
Superblock format_device(Device& device, const DeviceUuid& uuid) {
  Superblock sb;
  sb.block_size_bytes = device.geometry().block_size_bytes;
  sb.size_bytes = device.geometry().size_bytes;
  sb.created_ms = static_cast<std::uint64_t>(now_ms());
  sb.uuid = uuid;
  AlignedBlock block(kSuperblockBytes);
  encode_superblock(sb, block.span());
  auto written = run_blocking(device, [&]() -> asio::awaitable<Result<void>> {
    H3_CO_TRY(co_await device.write(0, block.span()));
    co_return co_await device.flush();
  });
  if (!written)
    throw std::runtime_error("cannot format device " + device.geometry().path + ": " +
                             written.error().message());
  return sb;
}

// Reads or writes the superblock and checks that device and catalog belong together.
void check_identity(Device& device, Catalog& catalog, const std::string& catalog_path,
                    bool force_format) {
  bool blank = false;
  auto superblock = read_superblock(device, blank);
  auto catalog_uuid = catalog.device_uuid();
  if (!catalog_uuid)
    throw std::runtime_error("catalog: cannot read the device UUID: " +
                             catalog_uuid.error().message());
  const bool take_over = !blank && superblock && !*catalog_uuid;
  if (take_over && !force_format) {
    throw std::runtime_error(
        "device " + device.geometry().path + " belongs to another hots3 store (device UUID " +
        format_uuid(superblock->uuid) + ") and catalog " + catalog_path +
        " is new (device UUID: none): refusing to take it over; `hots3 serve --force-format` "
        "formats it anew, and that store's data is lost");
  }
  if (blank || take_over) {
    if (*catalog_uuid) {
      throw std::runtime_error(
          "device " + device.geometry().path + " is empty, but the catalog belongs to device " +
          format_uuid(**catalog_uuid) +
          ": refusing to start (wrong --device? A lost device replaced by this one: `hots3 tier "
          "recover`)");
    }
    DeviceUuid uuid;
    random_bytes(std::as_writable_bytes(std::span(uuid)));
    uuid[6] = static_cast<std::uint8_t>((uuid[6] & 0x0f) | 0x40);  // version 4
    uuid[8] = static_cast<std::uint8_t>((uuid[8] & 0x3f) | 0x80);  // variant 1
    const Superblock sb = format_device(device, uuid);
    if (auto recorded =
            catalog.write_blocking([&](WriteTxn& t) { return t.set_device_uuid(sb.uuid); });
        !recorded) {
      throw std::runtime_error("catalog: cannot record the device UUID: " +
                               recorded.error().message());
    }
    if (take_over) {
      log::warn(
          "--force-format: device {} belonged to another store (device UUID {}); formatted anew as "
          "UUID {}, "
          "its old data is gone",
          device.geometry().path, format_uuid(superblock->uuid), format_uuid(sb.uuid));
    }
    log::info("formatted device {} ({}, block size {}, UUID {})", device.geometry().path,
              format_size(sb.size_bytes), sb.block_size_bytes, format_uuid(sb.uuid));
    return;
  }
  if (!superblock) {
    throw std::runtime_error("device " + device.geometry().path + " is not a hots3 device (" +
                             (superblock.error() == errc::kNotSupported
                                  ? "unsupported format version"
                                  : "no valid superblock") +
                             "): refusing to overwrite it");
  }
  if (**catalog_uuid != superblock->uuid) {
    throw std::runtime_error("device " + device.geometry().path + " has UUID " +
                             format_uuid(superblock->uuid) + " but the catalog belongs to device " +
                             format_uuid(**catalog_uuid) +
                             ": refusing to start (wrong --device or --data?)");
  }
  if (superblock->block_size_bytes != device.geometry().block_size_bytes) {
    throw std::runtime_error("device " + device.geometry().path +
                             " was formatted with block size " +
                             std::to_string(superblock->block_size_bytes) + " but now reports " +
                             std::to_string(device.geometry().block_size_bytes));
  }
  if (superblock->size_bytes > device.geometry().size_bytes) {
    throw std::runtime_error("device " + device.geometry().path + " is smaller (" +
                             format_size(device.geometry().size_bytes) +
                             ") than when it was formatted (" +
                             format_size(superblock->size_bytes) + ")");
  }
}

}  // namespace

std::string StoreOptions::device_file() const {
  return device_path.empty() ? (std::filesystem::path(data_dir) / "device.img").string()
                             : device_path;
}

std::string StoreOptions::catalog_path() const {
  return (std::filesystem::path(data_dir) / "catalog.db").string();
}

namespace {

// The store's device, created at its configured size when it does not exist.
std::shared_ptr<Device> open_store_device(const StoreOptions& options) {
  DeviceOptions device_options;
  device_options.path = options.device_file();
  device_options.create_size_bytes = options.device_size_bytes;
  device_options.engine = options.engine;
  return open_device(device_options);
}

}  // namespace

std::unique_ptr<ObjectStore> ObjectStore::open(const StoreOptions& options) {
  std::filesystem::create_directories(options.data_dir);
  return open(options, open_store_device(options));
}

DeviceLoss recover_store(const StoreOptions& options) {
  const std::string catalog_path = options.catalog_path();
  if (!std::filesystem::exists(catalog_path))
    throw std::runtime_error("no catalog at " + catalog_path + ": nothing to recover");
  const detail::StoreLock lock(options.data_dir, detail::StoreLock::Kind::kExclusive);
  // Never made here: a blank file where the device was not (recover run without the store's
  // --device or configuration) would pass for the new device, and every dirty version be lost.
  if (!std::filesystem::exists(options.device_file())) {
    throw std::runtime_error("no device at " + options.device_file() +
                             ": put the new blank device there first (or name it with --device, "
                             "or --config as the store is served)");
  }
  auto device = open_store_device(options);
  const std::string& path = device->geometry().path;
  CatalogOptions catalog_options;
  catalog_options.path = catalog_path;
  catalog_options.pinned = [](std::int64_t, std::string_view) { return false; };
  auto catalog = Catalog::open(catalog_options);
  auto uuid = catalog->device_uuid();
  if (!uuid)
    throw std::runtime_error("catalog: cannot read the device UUID: " + uuid.error().message());
  if (!*uuid) {
    throw std::runtime_error("catalog " + catalog_path +
                             " belongs to no device yet: nothing to recover");
  }
  bool blank = false;
  auto superblock = read_superblock(*device, blank);
  if (!blank) {
    if (superblock && superblock->uuid == **uuid) {
      throw std::runtime_error("device " + path + " is the catalog's own (UUID " +
                               format_uuid(**uuid) + "): nothing was lost; `hots3 serve` it");
    }
    throw std::runtime_error("device " + path +
                             " is not blank: recover takes a new device, all zeros (a new sparse "
                             "file, or a drive cleared with blkdiscard)");
  }
  const auto& geometry = device->geometry();
  if (geometry.size_bytes - geometry.size_bytes % geometry.block_size_bytes <= kDataStartBytes)
    throw std::runtime_error("device " + path + " is too small");
  // The catalog first: killed before the superblock is written, the device is still blank and
  // recover runs again; the other way round, a server would start on extents the device lacks.
  DeviceLoss loss;
  if (auto lost = catalog->write_blocking([&](WriteTxn& t) -> Result<void> {
        H3_TRY(loss, t.lose_device_data());
        return {};
      });
      !lost) {
    throw std::runtime_error("catalog: cannot record the lost device: " + lost.error().message());
  }
  format_device(*device, **uuid);
  catalog->stop();
  log::info(
      "device {} ({}) takes the place of lost device {}: {} versions read through from "
      "upstreams, {} lost before upload",
      path, format_size(geometry.size_bytes), format_uuid(**uuid), loss.evicted,
      std::count_if(loss.lost.begin(), loss.lost.end(),
                    [](const LostVersion& v) { return v.upstream_source.empty(); }));
  return loss;
}

std::unique_ptr<ObjectStore> ObjectStore::open(const StoreOptions& options,
                                               std::shared_ptr<Device> device) {
  namespace fs = std::filesystem;
  fs::create_directories(options.data_dir);
  // Before anything touches the catalog or the device: a second server would corrupt both.
  auto lock =
      std::make_unique<detail::StoreLock>(options.data_dir, detail::StoreLock::Kind::kExclusive);
  StoreCore core;
  core.options = options;
  core.device = std::move(device);
  const std::string catalog_path = options.catalog_path();
  core.pins = std::make_unique<detail::Pins>();
  CatalogOptions catalog_options;
  catalog_options.path = catalog_path;
  catalog_options.pinned = [pins = core.pins.get()](std::int64_t bucket_id, std::string_view key) {
    return pins->pinned(bucket_id, key);
  };
  catalog_options.tier_delay_ms = options.tier_delay.count();
  core.catalog = Catalog::open(catalog_options);
  if (auto rules = core.catalog->pin_rules(); rules) {
    for (const auto& [bucket_id, span] : *rules) core.pins->add(bucket_id, span);
  } else {
    throw std::runtime_error("catalog: cannot read pins: " + rules.error().message());
  }
  check_identity(*core.device, *core.catalog, catalog_path, options.force_format);

  const auto& geometry = core.device->geometry();
  const std::uint64_t end = geometry.size_bytes - geometry.size_bytes % geometry.block_size_bytes;
  if (end <= kDataStartBytes) throw std::runtime_error("device " + geometry.path + " is too small");
  core.allocator =
      std::make_unique<ExtentAllocator>(kDataStartBytes, end, geometry.block_size_bytes);
  const auto started = std::chrono::steady_clock::now();
  auto used = core.catalog->all_extents();
  if (!used) throw std::runtime_error("catalog: cannot read extents: " + used.error().message());
  if (auto built = core.allocator->build_from_used(std::move(*used)); !built) {
    throw std::runtime_error(
        "catalog references overlapping or out-of-range extents: run `hots3 check`");
  }
  const auto rebuild = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - started);
  // The exact figure too: crash tests compare it with what the objects they know are live need.
  log::info(
      "device {}: {} ({} engine), {} used ({} bytes), free space rebuilt from the catalog in {} ms",
      geometry.path, format_size(geometry.size_bytes), core.device->engine(),
      format_size(core.allocator->used_bytes()), core.allocator->used_bytes(), rebuild.count());

  core.cache = std::make_unique<BlockCache>(options.cache_bytes);
  core.retirement = std::make_unique<detail::Retirement>(*core.allocator, *core.cache);
  core.layouts = std::make_unique<detail::LayoutCache>(64 * kMiB);
  core.access = std::make_unique<detail::AccessTimes>();
  core.frequency = std::make_unique<detail::ReadFrequency>();
  core.misses = std::make_unique<detail::ReadFrequency>();
  core.metadata = std::make_unique<detail::MetadataCache>(options.metadata_cache_bytes);
  auto store = std::make_unique<StoreImpl>(std::move(core));
  store->rebuild_time = rebuild;
  store->store_lock = std::move(lock);
  if (auto loaded = store->load_buckets(); !loaded) {
    throw std::runtime_error("catalog: cannot read buckets: " + loaded.error().message());
  }
  return store;
}

}  // namespace hots3::storage
