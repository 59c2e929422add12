// Prefetch jobs: the evicted versions of every key under a prefix of a bound bucket, or of a list
// of its keys, are fetched back ahead of the reads that will want them (a dataset before an
// epoch). A job is a catalog row: it is run a batch of keys at a time, each batch as restores
// (whole fetches in parallel ranged GETs, kept whatever the admission rule says), and records how
// far it got after each batch, so that a job cut off by a restart goes on from there.
//
// POST /bucket?x-hots3-prefetch[&prefix=P] starts one (a body of keys, one per line: those only);
// GET /bucket?x-hots3-prefetch[&id=N] tells how the bucket's jobs stand.

#include "body.h"
#include "names.h"
#include "read_through.h"
#include "s3_xml.h"
#include "service.h"

#include "hots3/common/clock.h"
#include "hots3/common/logging.h"
#include "hots3/common/text.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace hots3::s3 {

namespace {

// Versions asked for at a time: enough to keep every restore runner busy, few enough that a
// restart redoes little.
constexpr std::size_t kBatch = 32;
// Keys of a list looked at per batch, evicted or not (a list of keys that are mostly here).
constexpr std::size_t kListLook = 1024;
// How often a batch's restores are looked at, and the wait after a failure of the catalog's or a
// full restore queue.
constexpr auto kPoll = std::chrono::milliseconds(100);
constexpr auto kRetry = std::chrono::seconds(1);
// The largest list of keys a job takes, and the jobs a bucket may run at once.
constexpr std::size_t kListMaxBytes = 16 * kMiB;
constexpr std::size_t kListMaxKeys = 100'000;
constexpr std::size_t kRunningMax = 16;
// How long a fetch waits for eviction to make room near full (else it is not kept: given up),
// and how many failed readings of the catalog in a row end a job.
constexpr auto kRoomWait = std::chrono::seconds(30);
constexpr int kFailuresMax = 60;

asio::awaitable<void> sleep_for(asio::steady_timer& timer, std::chrono::milliseconds d) {
  timer.expires_after(d);
  auto waiting = timer.async_wait(asio::as_tuple(asio::use_awaitable));
  co_await std::move(waiting);
}

// The next batch of `job`: the evicted versions of its keys after job.after, and the last key
// looked at ("" when none is left).
struct Batch {
  std::vector<storage::ObjectRecord> versions;
  std::string last;
};
asio::awaitable<Result<Batch>> next_batch(Service& s, const storage::PrefetchRecord& job) {
  Batch batch;
  if (job.keys.empty()) {
    auto listing =
        s.store().versions_in_state(job.bucket_id, {job.prefix, false},
                                    storage::TierState::kUpstreamOnly, job.after, kBatch, false);
    H3_CO_TRY(batch.versions, co_await std::move(listing));
    if (!batch.versions.empty()) batch.last = batch.versions.back().key;
    co_return batch;
  }
  auto key = std::upper_bound(job.keys.begin(), job.keys.end(), job.after);
  for (std::size_t looked = 0;
       key != job.keys.end() && looked < kListLook && batch.versions.size() < kBatch;
       ++key, ++looked) {
    batch.last = *key;
    H3_CO_TRY(auto here, s.store().head(job.bucket_id, *key));
    if (here && here->tier_state == storage::TierState::kUpstreamOnly) {
      batch.versions.push_back(*here);
    }
  }
  co_return batch;
}

// Asks for the restores of `versions` (of `bucket`) and waits until none is being fetched any
// more; how many are still evicted then (given up).
asio::awaitable<std::uint64_t> fetch_batch(Service& s, const std::string& bucket,
                                           const std::vector<storage::ObjectRecord>& versions,
                                           asio::steady_timer& timer) {
  for (const storage::ObjectRecord& version : versions) {
    // Near full a fetch is not kept: eviction runs ahead, so a moment may be enough.
    const auto room_deadline = std::chrono::steady_clock::now() + kRoomWait;
    while (!s.store().tier_fill_allows(version.size_bytes) &&
           std::chrono::steady_clock::now() < room_deadline) {
      co_await sleep_for(timer, kRetry);
    }
    for (;;) {
      auto asking = ask_restore(s, {version, bucket, true, 0});
      if (co_await std::move(asking) != FillFlights::Asked::kFull) break;
      co_await sleep_for(timer, kRetry);
    }
  }
  std::uint64_t failed = 0;
  for (const storage::ObjectRecord& version : versions) {
    while (s.fill_flights().restoring(version.id)) co_await sleep_for(timer, kPoll);
    auto now = s.store().head(version.bucket_id, version.key);
    if (now && *now && (*now)->id == version.id &&
        (*now)->tier_state == storage::TierState::kUpstreamOnly) {
      ++failed;
    }
  }
  co_return failed;
}

// Runs `job` (of bucket `bucket`) to its end: until no key is left, or until the catalog failed
// kFailuresMax times in a row (or something unexpected happened), which ends it too, so that
// nothing waits on it forever.
asio::awaitable<void> run_prefetch(Service& s, storage::PrefetchRecord job, std::string bucket) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  int failures = 0;
  try {
    while (failures < kFailuresMax) {
      auto reading = next_batch(s, job);
      auto read = co_await std::move(reading);
      if (!read) {
        log::warn("tier: prefetch {} of {}: {}", job.id, bucket, read.error().message());
        ++failures;
        co_await sleep_for(timer, kRetry);
        continue;
      }
      if (read->last.empty()) break;
      auto fetching = fetch_batch(s, bucket, read->versions, timer);
      job.failed += co_await std::move(fetching);
      job.after = std::move(read->last);
      auto saving = s.store().advance_prefetch(job.id, job.after, job.failed, 0);
      failures = co_await std::move(saving) ? 0 : failures + 1;
    }
  } catch (const std::exception& e) {
    log::error("tier: prefetch {} of {} stopped: {}", job.id, bucket, e.what());
  }
  if (failures >= kFailuresMax) {
    log::error("tier: prefetch {} of {} ended: the catalog failed {} times in a row", job.id,
               bucket, failures);
  }
  for (int attempt = 0; attempt < kFailuresMax; ++attempt) {
    auto ending = s.store().advance_prefetch(job.id, job.after, job.failed, now_ms());
    if (co_await std::move(ending)) break;
    co_await sleep_for(timer, kRetry);
  }
  log::info("tier: prefetch {} of {}/{} ended: {} versions ({} bytes) to fetch, {} given up",
            job.id, bucket, log::escaped(job.prefix), job.objects, job.bytes, job.failed);
}

void spawn(Service& s, const asio::any_io_executor& executor, storage::PrefetchRecord job,
           std::string bucket) {
  asio::co_spawn(executor, run_prefetch(s, std::move(job), std::move(bucket)), asio::detached);
}

// What is left to fetch of `job`: its keys' evicted versions now (how many, their bytes). Of a
// list, those after the last key done and those given up; of an ended job, those given up (their
// bytes not counted).
asio::awaitable<Result<std::pair<std::uint64_t, std::uint64_t>>> left_of(
    Service& s, const storage::PrefetchRecord& job) {
  if (job.ended_ms != 0) co_return std::pair<std::uint64_t, std::uint64_t>{job.failed, 0};
  if (job.keys.empty()) {
    auto counting = s.store().evicted_totals(job.bucket_id, {job.prefix, false});
    co_return co_await std::move(counting);
  }
  std::pair<std::uint64_t, std::uint64_t> left{job.failed, 0};
  for (auto key = std::upper_bound(job.keys.begin(), job.keys.end(), job.after);
       key != job.keys.end(); ++key) {
    H3_CO_TRY(auto here, s.store().head(job.bucket_id, *key));
    if (here && here->tier_state == storage::TierState::kUpstreamOnly) {
      ++left.first;
      left.second += here->size_bytes;
    }
  }
  co_return left;
}

// The keys of a list body: one per line (a "\r\n" ending too), sorted, each once; an Error for a
// key S3 would refuse.
std::variant<std::vector<std::string>, Error> list_keys(std::string_view body) {
  std::vector<std::string> keys;
  while (!body.empty()) {
    const std::size_t end = std::min(body.find('\n'), body.size());
    std::string_view key = body.substr(0, end);
    body.remove_prefix(std::min(end + 1, body.size()));
    if (key.ends_with('\r')) key.remove_suffix(1);
    if (key.empty()) continue;
    if (auto e = validate_key(key)) return std::move(*e);
    if (keys.size() == kListMaxKeys) {
      return Error(Code::kInvalidRequest,
                   fmt::format("A prefetch lists at most {} keys: start several.", kListMaxKeys));
    }
    keys.emplace_back(key);
  }
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  return keys;
}

}  // namespace

asio::awaitable<void> resume_prefetches(Service& s, std::int64_t started_ms) {
  auto reading = s.store().prefetches(0, true);
  auto jobs = co_await std::move(reading);
  auto buckets = s.store().list_buckets();
  if (!jobs || !buckets) co_return;
  const auto executor = co_await asio::this_coro::executor;
  for (storage::PrefetchRecord& job : *jobs) {
    // (A job begun since the start runs already.)
    if (job.created_ms >= started_ms) continue;
    const auto bucket = std::find_if(buckets->begin(), buckets->end(),
                                     [&job](const auto& b) { return b.id == job.bucket_id; });
    if (bucket == buckets->end()) continue;
    log::info("tier: prefetch {} of {}/{} goes on after {}", job.id, bucket->name,
              log::escaped(job.prefix), log::escaped(job.after));
    spawn(s, executor, std::move(job), bucket->name);
  }
}

// POST /bucket?x-hots3-prefetch[&prefix=P], with a body of keys or none: refused (409
// PrefetchTooLarge) when the versions to fetch would not fit in the device's free space and what
// eviction may take; else the job starts, and the answer says what it will fetch.
asio::awaitable<void> start_prefetch(Service& s, Request& r) {
  auto finding = served_for_write(s, r);
  auto bucket = co_await std::move(finding);
  if (!bucket) co_return;
  storage::PrefetchRecord job;
  job.bucket_id = bucket->id;
  job.prefix = r.param("prefix") ? *r.param("prefix") : std::string();
  auto receiving = read_small_body(r, kListMaxBytes);
  auto received = co_await std::move(receiving);
  if (auto* e = std::get_if<Error>(&received)) co_return co_await s.send_error(r, std::move(*e));
  const std::string& body = std::get<std::string>(received);
  auto listed = list_keys(body);
  if (auto* e = std::get_if<Error>(&listed)) co_return co_await s.send_error(r, std::move(*e));
  job.keys = std::get<std::vector<std::string>>(std::move(listed));
  std::erase_if(job.keys, [&job](const std::string& k) { return !k.starts_with(job.prefix); });
  if (!body.empty() && job.keys.empty()) {
    co_return co_await s.send_error(
        r, Error(Code::kInvalidRequest, "The list of keys names none under the prefix."));
  }
  auto counting = left_of(s, job);
  auto counted = co_await std::move(counting);
  if (!counted) co_return co_await s.send_error(r, from_errc(counted.error()));
  std::tie(job.objects, job.bytes) = *counted;

  // Room: what is free and what eviction may take of the bound buckets, less what the jobs
  // running already were to fetch.
  auto reading = s.store().prefetches(0, true);
  auto running = co_await std::move(reading);
  if (!running) co_return co_await s.send_error(r, from_errc(running.error()));
  std::uint64_t promised = 0;
  std::size_t here = 0;
  for (const storage::PrefetchRecord& other : *running) {
    promised += other.bytes;
    if (other.bucket_id == job.bucket_id) ++here;
  }
  if (here >= kRunningMax) {
    co_return co_await s.send_error(
        r, Error(Code::kSlowDown,
                 fmt::format("The bucket runs {} prefetch jobs, the most it may.", kRunningMax)));
  }
  const std::uint64_t available =
      s.store().stats().free_bytes + s.read_through()->evictable_bytes();
  const std::uint64_t room = available > promised ? available - promised : 0;
  if (job.bytes > room) {
    co_return co_await s.send_error(
        r, Error(Code::kPrefetchTooLarge,
                 fmt::format("The {} evicted objects to fetch hold {} bytes; the device has {} "
                             "bytes free or evictable, less what running prefetches fetch.",
                             job.objects, job.bytes, room))
               .with("Objects", std::to_string(job.objects))
               .with("Bytes", std::to_string(job.bytes)));
  }
  job.created_ms = now_ms();
  auto beginning = s.store().begin_prefetch(job);
  auto begun = co_await std::move(beginning);
  if (!begun) co_return co_await s.send_error(r, from_errc(begun.error()));
  job.id = *begun;
  XmlWriter xml("PrefetchResult");
  xml.element("Bucket", bucket->name);
  xml.element("Id", std::to_string(job.id));
  xml.element("Prefix", job.prefix);
  xml.element("Keys", std::to_string(job.keys.size()));
  xml.element("Objects", std::to_string(job.objects));
  xml.element("Bytes", std::to_string(job.bytes));
  spawn(s, co_await asio::this_coro::executor, std::move(job), bucket->name);
  co_await s.send_xml(r, 200, xml.finish());
}

// GET /bucket?x-hots3-prefetch[&id=N]: the bucket's jobs (or job N), oldest first: what each
// was to fetch, what is left of it now, how many fetches were given up, and whether it ended.
asio::awaitable<void> prefetch_status(Service& s, Request& r) {
  auto bucket = co_await s.bucket_for(r, Access::kRead);
  if (!bucket) co_return;
  std::optional<std::int64_t> only;
  if (const std::string* id = r.param("id")) {
    only = parse_decimal<std::int64_t>(*id);
    if (!only) {
      co_return co_await s.send_error(r, Error(Code::kInvalidArgument, "id is a job's number.")
                                             .with("ArgumentName", "id")
                                             .with("ArgumentValue", *id));
    }
  }
  auto reading = s.store().prefetches(bucket->id, false);
  auto jobs = co_await std::move(reading);
  if (!jobs) co_return co_await s.send_error(r, from_errc(jobs.error()));
  XmlWriter xml("PrefetchJobs");
  xml.element("Bucket", bucket->name);
  bool found = false;
  for (const storage::PrefetchRecord& job : *jobs) {
    if (only && job.id != *only) continue;
    found = true;
    auto counting = left_of(s, job);
    auto left = co_await std::move(counting);
    if (!left) co_return co_await s.send_error(r, from_errc(left.error()));
    xml.open("Job");
    xml.element("Id", std::to_string(job.id));
    xml.element("Prefix", job.prefix);
    xml.element("Keys", std::to_string(job.keys.size()));
    xml.element("Objects", std::to_string(job.objects));
    xml.element("Bytes", std::to_string(job.bytes));
    xml.element("LeftObjects", std::to_string(left->first));
    xml.element("LeftBytes", std::to_string(left->second));
    xml.element("Failed", std::to_string(job.failed));
    xml.element("StartedMs", std::to_string(job.created_ms));
    xml.element("ElapsedMs",
                std::to_string((job.ended_ms != 0 ? job.ended_ms : now_ms()) - job.created_ms));
    xml.element("Ended", job.ended_ms != 0);
    xml.close();
  }
  if (only && !found) {
    co_return co_await s.send_error(
        r, Error(Code::kInvalidArgument, "The bucket has no prefetch job of that number.")
               .with("ArgumentName", "id")
               .with("ArgumentValue", std::to_string(*only)));
  }
  co_await s.send_xml(r, 200, xml.finish());
}

}  // namespace hots3::s3
