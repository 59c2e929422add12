// The catalog's reads, each on the calling thread's own read-only connection: records by key,
// layouts, parts, and the listings of objects and uploads (each page costs what it returns).

#include "storage/catalog/catalog_impl.h"
#include "storage/catalog/rows.h"
#include "storage/catalog/schema.h"
#include "storage/catalog/sqlite.h"
#include "storage/catalog/wal_vfs.h"
#include "storage/checksum.h"

#include "hots3/common/assert.h"
#include "hots3/common/logging.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <fcntl.h>
#include <future>
#include <limits>
#include <mutex>
#include <pthread.h>
#include <set>
#include <sys/resource.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <unordered_map>
#include <unordered_set>

namespace hots3::storage {

using detail::Connection;
using namespace detail;  // the row mapping (rows.h)

Result<std::optional<DeviceUuid>> Catalog::device_uuid() {
  auto q = impl_->reader().query("SELECT value FROM meta WHERE key = 'device_uuid'");
  H3_TRY(bool row, q.step());
  if (!row) return std::optional<DeviceUuid>{};
  const auto blob = q.blob(0);
  if (blob.size() != sizeof(DeviceUuid)) return errc::kCorrupt;
  DeviceUuid uuid{};
  std::memcpy(uuid.data(), blob.data(), uuid.size());
  return std::optional<DeviceUuid>(uuid);
}

Result<std::optional<BucketRecord>> Catalog::find_bucket(std::string_view name) {
  return find_bucket_on(impl_->reader(), name);
}

Result<std::vector<BucketRecord>> Catalog::list_buckets() {
  auto q = impl_->reader().query("SELECT " H3_BUCKET_COLUMNS " FROM buckets ORDER BY name");
  std::vector<BucketRecord> out;
  for (;;) {
    H3_TRY(bool row, q.step());
    if (!row) break;
    out.push_back(read_bucket(q));
  }
  return out;
}

namespace {
// Jobs with rows and implied ones together, in acknowledgement order.
void sort_by_seq(std::vector<TierJob>& jobs) {
  std::sort(jobs.begin(), jobs.end(),
            [](const TierJob& a, const TierJob& b) { return a.seq < b.seq; });
}

// Appends the implied jobs `q` yields, in its order, up to `max` of them and while due by
// `due_by_ms`.
Result<void> append_implied_jobs(Query& q, std::int64_t delay_ms, std::size_t max,
                                 std::int64_t due_by_ms, std::vector<TierJob>& out) {
  for (std::size_t n = 0; n < max; ++n) {
    H3_TRY(bool row, q.step());
    if (!row) break;
    TierJob job = read_implied_job(q, delay_ms);
    if (job.due_ms > due_by_ms) break;
    out.push_back(std::move(job));
  }
  return {};
}

Result<std::vector<TierJob>> read_tier_jobs(Query& q) {
  std::vector<TierJob> out;
  for (;;) {
    H3_TRY(bool row, q.step());
    if (!row) break;
    out.push_back(read_tier_job(q));
  }
  return out;
}
}  // namespace

Result<std::vector<TierJob>> Catalog::due_tier_jobs(std::int64_t now_ms, std::size_t max) {
  // The due index gives the candidates; the order of acknowledgement is what the upstream sees.
  auto q = impl_->reader().query(
      "SELECT * FROM (SELECT " H3_TIER_JOB_COLUMNS
      " FROM tier_jobs WHERE state = 0 AND due_ms <= ?1 ORDER BY due_ms LIMIT ?2) ORDER BY seq");
  q.bind(1, now_ms).bind(2, static_cast<std::int64_t>(max));
  H3_TRY(auto due, read_tier_jobs(q));
  // Implied jobs come by their index in acknowledgement order, which is (to the clocks of
  // concurrent writes) the order of their writes: the first not yet due ends the look.
  auto implied = impl_->reader().query(
      "SELECT " H3_IMPLIED_JOB_COLUMNS_O
      " FROM objects o INDEXED BY objects_implied WHERE " H3_IMPLIED_JOB_WHERE_O " ORDER BY o.id");
  H3_TRY(append_implied_jobs(implied, impl_->options.tier_delay_ms, max, now_ms, due));
  sort_by_seq(due);
  if (due.size() > max) due.resize(max);
  return due;
}

Result<std::vector<TierJob>> Catalog::parked_tier_jobs(std::int64_t bucket_id, std::size_t max) {
  // By the index on (state, due_ms): parking sets due_ms once, so the longest parked come first.
  auto q = impl_->reader().query("SELECT " H3_TIER_JOB_COLUMNS
                                 " FROM tier_jobs WHERE state = 1 AND bucket_id = ?1 ORDER BY "
                                 "due_ms LIMIT ?2");
  q.bind(1, bucket_id).bind(2, static_cast<std::int64_t>(max));
  return read_tier_jobs(q);
}

Result<std::vector<TierJob>> Catalog::tier_jobs(std::int64_t bucket_id, bool with_implied) {
  auto q = impl_->reader().query("SELECT " H3_TIER_JOB_COLUMNS
                                 " FROM tier_jobs WHERE bucket_id = ?1 ORDER BY seq");
  q.bind(1, bucket_id);
  H3_TRY(auto jobs, read_tier_jobs(q));
  if (!with_implied) return jobs;
  auto implied = impl_->reader().query(
      "SELECT " H3_IMPLIED_JOB_COLUMNS_O
      " FROM objects o INDEXED BY objects_implied WHERE " H3_IMPLIED_JOB_WHERE_O
      " AND o.bucket_id = ?1");
  implied.bind(1, bucket_id);
  H3_TRY(append_implied_jobs(implied, impl_->options.tier_delay_ms,
                             std::numeric_limits<std::size_t>::max(),
                             std::numeric_limits<std::int64_t>::max(), jobs));
  sort_by_seq(jobs);
  return jobs;
}

Result<std::optional<TierJob>> Catalog::tier_job(std::int64_t bucket_id, std::string_view key) {
  return find_tier_job_on(impl_->reader(), bucket_id, key, impl_->options.tier_delay_ms);
}

Result<std::vector<TierBacklog>> Catalog::tier_backlog() {
  // Jobs with rows, and implied ones (every one an upload).
  auto q = impl_->reader().query(
      "SELECT bucket_id, sum(n), sum(bytes), sum(parked), min(first), sum(uploads), sum(copies), "
      "sum(deletes) FROM (SELECT bucket_id, count(*) AS n, sum(size) AS bytes, sum(state = 1) AS "
      "parked, min(first_ms) AS first, sum(object_id IS NOT NULL AND source_key IS NULL) AS "
      "uploads, sum(object_id IS NOT NULL AND source_key IS NOT NULL) AS copies, sum(object_id IS "
      "NULL) AS deletes FROM tier_jobs GROUP BY bucket_id UNION ALL SELECT o.bucket_id, count(*), "
      "sum(o.size), 0, min(o.created_ms), count(*), 0, 0 FROM objects o INDEXED BY "
      "objects_implied WHERE " H3_IMPLIED_JOB_WHERE_O
      " GROUP BY o.bucket_id) GROUP BY bucket_id "
      "ORDER BY bucket_id");
  std::vector<TierBacklog> out;
  const auto count = [&q](int column) { return static_cast<std::uint64_t>(q.int64(column)); };
  for (;;) {
    H3_TRY(bool row, q.step());
    if (!row) break;
    TierBacklog b;
    b.bucket_id = q.int64(0);
    b.jobs = count(1);
    b.bytes = count(2);
    b.parked = count(3);
    b.oldest_first_ms = q.int64(4);
    b.uploads = count(5);
    b.copies = count(6);
    b.deletes = count(7);
    out.push_back(b);
  }
  return out;
}

Result<std::vector<TierSpace>> Catalog::tier_space(std::string_view bucket_ids,
                                                   std::int64_t clean_before_ms) {
  // One pass over the bound buckets' rows (their primary key's prefix); evictable as eviction
  // itself decides it.
  auto q = impl_->reader().query(
      "SELECT o.bucket_id, count(*), coalesce(sum(o.size), 0), sum(o.tier_state = 0), "
      "coalesce(sum(CASE WHEN o.tier_state = 0 THEN o.size END), 0), sum(o.tier_state = 1), "
      "coalesce(sum(CASE WHEN o.tier_state = 1 THEN o.size END), 0), sum(o.tier_state = 2), "
      "coalesce(sum(CASE WHEN o.tier_state = 2 THEN o.size END), 0), coalesce(sum(CASE WHEN "
      "o.tier_state IN (0, 1) AND h3_pinned(o.bucket_id, o.key) THEN o.size END), 0), "
      "coalesce(sum(CASE WHEN " H3_EVICTABLE_VERSIONS
      " THEN o.size END), 0), sum(o.tier_state = 3), coalesce(sum(CASE WHEN o.tier_state = 3 "
      "THEN o.size END), 0) FROM objects o WHERE o.bucket_id IN (SELECT value FROM "
      "json_each(?1)) GROUP BY o.bucket_id ORDER BY o.bucket_id");
  q.bind(1, bucket_ids).bind(2, clean_before_ms);
  std::vector<TierSpace> out;
  const auto count = [&q](int column) { return static_cast<std::uint64_t>(q.int64(column)); };
  for (;;) {
    H3_TRY(bool row, q.step());
    if (!row) break;
    out.push_back({q.int64(0), count(1), count(2), count(3), count(4), count(5), count(6), count(7),
                   count(8), count(9), count(10), count(11), count(12)});
  }
  return out;
}

Result<std::vector<EvictionCandidate>> Catalog::eviction_candidates(std::string_view bucket_ids,
                                                                    std::int64_t clean_before_ms,
                                                                    std::size_t each) {
  auto newest = impl_->reader().query(
      "SELECT o.id, o.bucket_id, o.key, o.size FROM objects o WHERE " H3_EVICTABLE_VERSIONS
      " ORDER BY o.accessed_ms DESC LIMIT ?3");
  auto oldest = impl_->reader().query(
      "SELECT o.id, o.bucket_id, o.key, o.size FROM objects o WHERE " H3_EVICTABLE_VERSIONS
      " ORDER BY o.accessed_ms LIMIT ?3");
  std::vector<EvictionCandidate> out;
  std::vector<EvictionCandidate> tail;
  for (auto* q : {&newest, &oldest}) {
    q->bind(1, bucket_ids).bind(2, clean_before_ms).bind(3, static_cast<std::int64_t>(each));
    for (;;) {
      H3_TRY(bool row, q->step());
      if (!row) break;
      (q == &newest ? out : tail)
          .push_back({q->int64(0), q->int64(1), std::string(q->text(2)),
                      static_cast<std::uint64_t>(q->int64(3))});
    }
  }
  // Both ends meet when there are fewer than 2 × `each`.
  std::unordered_set<std::int64_t> listed;
  for (const EvictionCandidate& c : out) listed.insert(c.id);
  for (auto it = tail.rbegin(); it != tail.rend(); ++it) {
    if (!listed.contains(it->id)) out.push_back(std::move(*it));
  }
  return out;
}

Result<std::vector<std::pair<std::int64_t, KeySpan>>> Catalog::pin_rules() {
  auto q = impl_->reader().query("SELECT bucket_id, key, prefix FROM tier_pins");
  std::vector<std::pair<std::int64_t, KeySpan>> out;
  for (;;) {
    H3_TRY(bool row, q.step());
    if (!row) break;
    out.emplace_back(q.int64(0), KeySpan{std::string(q.text(1)), q.int64(2) == 0});
  }
  return out;
}

Result<std::uint64_t> Catalog::span_bytes(std::int64_t bucket_id, const KeySpan& span,
                                          bool pinned) {
  auto q = impl_->reader().query(
      "SELECT coalesce(sum(size), 0) FROM objects WHERE bucket_id = ?1 AND key >= ?2 AND key < ?3 "
      "AND h3_pinned(?1, key) = ?4");
  q.bind(1, bucket_id);
  bind_key_span(q, span, 2);
  q.bind(4, pinned ? 1 : 0);
  H3_TRY(q.step());
  return q.uint64(0);
}

Result<std::vector<ObjectRecord>> Catalog::versions_in_state(std::int64_t bucket_id,
                                                             const KeySpan& span, TierState state,
                                                             std::string_view after,
                                                             std::size_t limit, bool pinned_only) {
  auto q = impl_->reader().query(
      "SELECT " H3_OBJECT_COLUMNS_O
      " FROM objects o WHERE o.bucket_id = ?1 AND o.key >= ?2 AND o.key < ?3 AND o.key > ?5 AND "
      "o.tier_state = ?7 AND (?6 = 0 OR h3_pinned(?1, o.key)) ORDER BY o.key LIMIT ?4");
  q.bind(1, bucket_id);
  bind_key_span(q, span, 2);
  q.bind(4, static_cast<std::int64_t>(limit)).bind(5, after).bind(6, pinned_only ? 1 : 0);
  q.bind(7, static_cast<std::int64_t>(state));
  return read_objects(q);
}

Result<std::pair<std::uint64_t, std::uint64_t>> Catalog::evicted_totals(std::int64_t bucket_id,
                                                                        const KeySpan& span) {
  auto q = impl_->reader().query(
      "SELECT count(*), coalesce(sum(size), 0) FROM objects WHERE bucket_id = ?1 AND key >= ?2 "
      "AND key < ?3 AND tier_state = 2");
  q.bind(1, bucket_id);
  bind_key_span(q, span, 2);
  H3_TRY(q.step());
  return std::pair{static_cast<std::uint64_t>(q.int64(0)), static_cast<std::uint64_t>(q.int64(1))};
}

Result<std::vector<PrefetchRecord>> Catalog::prefetches(std::int64_t bucket_id, bool running) {
  auto q = impl_->reader().query(
      "SELECT id, bucket_id, prefix, coalesce(keys, ''), after, objects, bytes, failed, "
      "created_ms, coalesce(ended_ms, 0) FROM prefetches WHERE (?1 = 0 OR bucket_id = ?1) AND "
      "(?2 = 0 OR ended_ms IS NULL) ORDER BY id");
  q.bind(1, bucket_id).bind(2, running ? 1 : 0);
  std::vector<PrefetchRecord> out;
  for (;;) {
    H3_TRY(bool row, q.step());
    if (!row) break;
    PrefetchRecord p;
    p.id = q.int64(0);
    p.bucket_id = q.int64(1);
    p.prefix = q.text(2);
    for (std::string_view keys = q.text(3); !keys.empty();) {
      const std::size_t end = std::min(keys.find('\n'), keys.size());
      p.keys.emplace_back(keys.substr(0, end));
      keys.remove_prefix(std::min(end + 1, keys.size()));
    }
    p.after = q.text(4);
    p.objects = static_cast<std::uint64_t>(q.int64(5));
    p.bytes = static_cast<std::uint64_t>(q.int64(6));
    p.failed = static_cast<std::uint64_t>(q.int64(7));
    p.created_ms = q.int64(8);
    p.ended_ms = q.int64(9);
    out.push_back(std::move(p));
  }
  return out;
}

Result<std::optional<TierSeen>> Catalog::tier_seen(std::int64_t bucket_id, std::string_view key) {
  return find_tier_seen_on(impl_->reader(), bucket_id, key);
}

Result<bool> Catalog::tier_copy_pending(std::int64_t bucket_id, std::string_view key) {
  auto q = impl_->reader().query(
      "SELECT EXISTS(SELECT 1 FROM tier_jobs j WHERE j.bucket_id = ?1 AND j.source_key = ?2 AND "
      "(j.state = 0 OR EXISTS (SELECT 1 FROM objects o JOIN tier_seen s ON s.bucket_id = "
      "j.bucket_id AND s.key = j.source_key AND s.ours = o.etag AND s.ours != '' WHERE o.id = "
      "j.object_id AND o.tier_state = 3)))");
  q.bind(1, bucket_id).bind(2, key);
  H3_TRY(q.step());
  return q.int64(0) != 0;
}

Result<bool> Catalog::tier_jobs_before(std::int64_t bucket_id, std::string_view prefix,
                                       std::int64_t seq) {
  auto q = impl_->reader().query(
      "SELECT EXISTS(SELECT 1 FROM tier_jobs WHERE bucket_id = ?1 AND key >= ?2 AND key < ?3 "
      "AND seq < ?4) OR EXISTS(SELECT 1 FROM objects o INDEXED BY objects_key WHERE o.bucket_id "
      "= ?1 AND o.key >= ?2 AND o.key < ?3 AND o.id < ?4 AND " H3_IMPLIED_JOB_WHERE_O ")");
  const std::string upper = upper_bound_of(std::string(prefix));
  q.bind(1, bucket_id).bind(2, prefix).bind(3, std::string_view(upper)).bind(4, seq);
  H3_TRY(q.step());
  return q.int64(0) != 0;
}

Result<bool> Catalog::bucket_empty(std::int64_t bucket_id) {
  auto q = impl_->reader().query(
      "SELECT NOT (EXISTS(SELECT 1 FROM objects WHERE bucket_id = ?1) OR "
      "EXISTS(SELECT 1 FROM uploads WHERE bucket_id = ?1))");
  q.bind(1, bucket_id);
  H3_TRY(q.step());
  return q.int64(0) != 0;
}

Result<std::optional<ObjectRecord>> Catalog::find_object(std::int64_t bucket_id,
                                                         std::string_view key) {
  return find_object_on(impl_->reader(), bucket_id, key);
}

namespace {
Result<std::optional<ObjectRecord>> find_object_with_data_on(Connection& c, std::int64_t bucket_id,
                                                             std::string_view key) {
  auto q = c.query("SELECT " H3_OBJECT_COLUMNS_O
                   ", i.data, i.checksum FROM objects o LEFT JOIN inline_data i "
                   "ON i.object_id = o.id WHERE o.bucket_id = ?1 AND o.key = ?2");
  q.bind(1, bucket_id).bind(2, key);
  H3_TRY(bool row, q.step());
  if (!row) return std::optional<ObjectRecord>{};
  ObjectRecord o = read_object(q);
  if (o.inline_data) {
    if (q.is_null(kObjectColumns)) return errc::kCorrupt;
    H3_TRY(*o.inline_data, verified_inline_data(q, kObjectColumns, o.id));
  }
  return std::optional<ObjectRecord>(std::move(o));
}
}  // namespace

Result<std::optional<ObjectRecord>> Catalog::find_object_with_data(std::int64_t bucket_id,
                                                                   std::string_view key) {
  return find_object_with_data_on(impl_->reader(), bucket_id, key);
}

Result<std::optional<Catalog::ObjectLayout>> Catalog::find_object_layout(
    std::int64_t bucket_id, std::string_view key, std::uint64_t checksums_size_max) {
  Connection& c = impl_->reader();
  // One read transaction: both statements see the same snapshot of the WAL.
  H3_TRY(c.exec("BEGIN"));
  auto read = [&]() -> Result<std::optional<ObjectLayout>> {
    H3_TRY(auto object, find_object_with_data_on(c, bucket_id, key));
    if (!object) return std::optional<ObjectLayout>{};
    ObjectLayout layout;
    if (!object->inline_data) {
      H3_TRY(layout.extents, read_extents(c, object->id, object->size_bytes <= checksums_size_max));
    }
    layout.object = std::move(*object);
    return std::optional<ObjectLayout>(std::move(layout));
  };
  auto result = read();
  // A read transaction changes nothing: ending it cannot lose anything, whatever the result.
  if (auto ended = c.exec(result ? "COMMIT" : "ROLLBACK"); !ended && result) return ended.error();
  return result;
}

Result<std::vector<ExtentRecord>> Catalog::object_extents(std::int64_t object_id,
                                                          bool with_checksums) {
  return read_extents(impl_->reader(), object_id, with_checksums);
}

Result<std::vector<ExtentRecord>> Catalog::part_extents(std::int64_t part_id, bool with_checksums) {
  return read_extents(impl_->reader(), part_id, with_checksums);
}

Result<std::vector<std::uint32_t>> Catalog::extent_checksums(std::int64_t row_id) {
  auto q = impl_->reader().query("SELECT checksums FROM extents WHERE id = ?1");
  q.bind(1, row_id);
  H3_TRY(bool row, q.step());
  if (!row) return errc::kNotFound;
  return decode_checksums(q.blob(0));
}

Result<std::optional<std::string>> Catalog::inline_data(std::int64_t object_id) {
  auto q = impl_->reader().query("SELECT data, checksum FROM inline_data WHERE object_id = ?1");
  q.bind(1, object_id);
  H3_TRY(bool row, q.step());
  if (!row) return std::optional<std::string>{};
  H3_TRY(auto data, verified_inline_data(q, 0, object_id));
  return std::optional<std::string>(std::move(data));
}

Result<std::vector<ObjectPartRecord>> Catalog::object_parts(std::int64_t object_id) {
  auto q = impl_->reader().query("SELECT " H3_OBJECT_PART_COLUMNS
                                 " FROM object_parts WHERE object_id = ?1 ORDER BY part_number");
  q.bind(1, object_id);
  std::vector<ObjectPartRecord> out;
  for (;;) {
    H3_TRY(bool row, q.step());
    if (!row) break;
    out.push_back(read_object_part(q));
  }
  return out;
}

Result<std::vector<ChunkRecord>> Catalog::object_chunks(std::int64_t object_id, std::uint32_t first,
                                                        std::uint32_t last, std::size_t limit) {
  auto q = impl_->reader().query(
      "SELECT id, object_id, chunk, size FROM tier_chunks WHERE object_id = ?1 AND chunk "
      "BETWEEN ?2 AND ?3 ORDER BY chunk LIMIT ?4");
  q.bind(1, object_id)
      .bind(2, static_cast<std::int64_t>(first))
      .bind(3, static_cast<std::int64_t>(last))
      .bind(4, static_cast<std::int64_t>(std::min<std::size_t>(limit, INT64_MAX)));
  return read_chunks(q);
}

Result<std::optional<ObjectPartRecord>> Catalog::object_part(std::int64_t object_id,
                                                             std::uint32_t part_number) {
  auto q = impl_->reader().query("SELECT " H3_OBJECT_PART_COLUMNS
                                 " FROM object_parts WHERE object_id = ?1 AND part_number = ?2");
  q.bind(1, object_id).bind(2, static_cast<std::int64_t>(part_number));
  H3_TRY(bool row, q.step());
  if (!row) return std::optional<ObjectPartRecord>{};
  return std::optional<ObjectPartRecord>(read_object_part(q));
}

namespace {

// A key under a common prefix (the listing's prefix, then anything, then the delimiter) shows
// as that prefix, once, in its place; the scan then seeks past the prefix: one index search
// however many keys it holds, so that a page costs what it returns.
struct Grouping {
  enum class Kind {
    kNone,         // no delimiter after the prefix: the row is listed as itself
    kEarlierPage,  // a common prefix at or before the marker: listed on an earlier page
    kNoRoom,       // a common prefix, but the page is full: the listing is truncated
    kListed,       // a common prefix, appended to the page's
  } kind = Kind::kNone;
  std::string common;
};

Grouping group_key(std::string_view key, const std::string& prefix, const std::string& delimiter,
                   const std::string& marker, bool page_full,
                   std::vector<std::string>& common_prefixes) {
  if (delimiter.empty()) return {};
  const auto pos = key.find(delimiter, prefix.size());
  if (pos == std::string_view::npos) return {};
  Grouping g{Grouping::Kind::kListed, std::string(key.substr(0, pos + delimiter.size()))};
  if (!marker.empty() && g.common <= marker) {
    g.kind = Grouping::Kind::kEarlierPage;
  } else if (page_full) {
    g.kind = Grouping::Kind::kNoRoom;
  } else {
    common_prefixes.push_back(g.common);
  }
  return g;
}

// Where a ListMultipartUploads page resumes within its key marker's uploads: after the upload-id
// marker's row, or after all of them (no upload-id marker). An upload-id marker that is gone
// (completed or aborted since): that key's uploads are listed again rather than lost.
Result<std::int64_t> upload_marker_id(Connection& c, std::int64_t bucket_id,
                                      const UploadListQuery& query) {
  if (query.upload_id_marker.empty()) return std::numeric_limits<std::int64_t>::max();
  H3_TRY(auto marker, find_upload_on(c, query.upload_id_marker));
  if (marker && marker->bucket_id == bucket_id && marker->key == query.key_marker)
    return marker->id;
  return 0;
}

}  // namespace

Result<ListPage> Catalog::list_objects(std::int64_t bucket_id, const ListQuery& query) {
  Connection& c = impl_->reader();
  ListPage page;
  const std::string upper = upper_bound_of(query.prefix);
  // The scan position: keys >= `from` (inclusive) or > `from` (exclusive).
  std::string from = query.prefix;
  bool exclusive = false;
  if (query.start_after >= from) {
    from = query.start_after;
    exclusive = true;
  }
  const std::size_t want = query.max_keys;
  auto emitted = [&] { return page.objects.size() + page.common_prefixes.size(); };
  // max-keys=0 still reads one row: the empty page is truncated when there is one.
  for (bool more = true; more && !page.truncated;) {
    // Rows are fetched in runs; a common prefix ends the run with a seek past it.
    auto q = c.query(exclusive ? "SELECT " H3_LIST_ENTRY_COLUMNS
                                 " FROM objects WHERE bucket_id = ?1 AND key > ?2 AND key < ?3 "
                                 "ORDER BY key LIMIT ?4"
                               : "SELECT " H3_LIST_ENTRY_COLUMNS
                                 " FROM objects WHERE bucket_id = ?1 AND key >= ?2 AND key < ?3 "
                                 "ORDER BY key LIMIT ?4");
    q.bind(1, bucket_id).bind(2, std::string_view(from)).bind(3, std::string_view(upper));
    q.bind(4, static_cast<std::int64_t>(want - emitted() + 1));
    more = false;
    for (;;) {
      H3_TRY(bool row, q.step());
      if (!row) break;
      ++page.rows_read;
      const Grouping g = group_key(q.text(0), query.prefix, query.delimiter, query.start_after,
                                   emitted() == want, page.common_prefixes);
      if (g.kind == Grouping::Kind::kListed) page.last = g.common;
      if (g.kind != Grouping::Kind::kNone) {
        page.truncated = g.kind == Grouping::Kind::kNoRoom;
        from = upper_bound_of(g.common);
        exclusive = false;
        more = true;
        break;
      }
      if (emitted() == want) {
        page.truncated = true;
        break;
      }
      page.objects.push_back(read_list_entry(q));
      page.last = from = page.objects.back().key;
      exclusive = true;
      more = true;  // the run may have ended at LIMIT: fetch the next run
    }
    if (want == 0) break;
  }
  return page;
}

Result<std::optional<UploadRecord>> Catalog::find_upload(std::string_view upload_id) {
  return find_upload_on(impl_->reader(), upload_id);
}

Result<std::optional<EndedUpload>> Catalog::ended_upload(std::string_view upload_id) {
  auto q =
      impl_->reader().query("SELECT object_id, ended_ms FROM ended_uploads WHERE upload_id = ?1");
  q.bind(1, upload_id);
  H3_TRY(bool row, q.step());
  if (!row) return std::optional<EndedUpload>();
  EndedUpload ended;
  if (!q.is_null(0)) ended.object_id = q.int64(0);
  ended.ended_ms = q.int64(1);
  return std::optional<EndedUpload>(ended);
}

Result<std::vector<PartRecord>> Catalog::list_parts(std::int64_t upload_row,
                                                    std::uint32_t after_part,
                                                    std::uint32_t max_parts) {
  auto q = impl_->reader().query(
      "SELECT " H3_PART_COLUMNS
      " FROM parts WHERE upload = ?1 AND part_number > ?2 ORDER BY part_number LIMIT ?3");
  q.bind(1, upload_row)
      .bind(2, static_cast<std::int64_t>(after_part))
      .bind(3, static_cast<std::int64_t>(max_parts));
  std::vector<PartRecord> out;
  for (;;) {
    H3_TRY(bool row, q.step());
    if (!row) break;
    out.push_back(read_part(q));
  }
  return out;
}

Result<UploadListPage> Catalog::list_uploads(std::int64_t bucket_id, const UploadListQuery& query) {
  Connection& c = impl_->reader();
  UploadListPage page;
  const std::string upper = upper_bound_of(query.prefix);
  // One key's uploads in the order they were initiated (S3's order): by row id, which grows
  // with each CreateMultipartUpload. The scan starts after (key, id) = (from, after_id).
  std::string from = query.prefix;
  std::int64_t after_id = -1;  // -1: from `from` inclusive; else after this id of `from`
  if (!query.key_marker.empty() && query.key_marker >= from) {
    from = query.key_marker;
    H3_TRY(after_id, upload_marker_id(c, bucket_id, query));
  }
  const std::size_t want = query.max_uploads;
  auto emitted = [&] { return page.uploads.size() + page.common_prefixes.size(); };
  for (bool more = true; more && !page.truncated && want > 0;) {
    auto q = c.query("SELECT " H3_UPLOAD_COLUMNS
                     " FROM uploads WHERE bucket_id = ?1 AND key < ?3 AND "
                     "(key > ?2 OR (key = ?2 AND id > ?4)) ORDER BY key, id LIMIT ?5");
    q.bind(1, bucket_id)
        .bind(2, std::string_view(from))
        .bind(3, std::string_view(upper))
        .bind(4, after_id);
    q.bind(5, static_cast<std::int64_t>(want - emitted() + 1));
    more = false;
    for (;;) {
      H3_TRY(bool row, q.step());
      if (!row) break;
      ++page.rows_read;
      const Grouping g = group_key(q.text(3), query.prefix, query.delimiter, query.key_marker,
                                   emitted() == want, page.common_prefixes);
      if (g.kind == Grouping::Kind::kListed) {
        page.next_key_marker = g.common;
        page.next_upload_id_marker.clear();
      }
      if (g.kind != Grouping::Kind::kNone) {
        page.truncated = g.kind == Grouping::Kind::kNoRoom;
        from = upper_bound_of(g.common);
        after_id = -1;
        more = true;
        break;
      }
      if (emitted() == want) {
        page.truncated = true;
        break;
      }
      UploadRecord& u = page.uploads.emplace_back(read_upload(q));
      page.next_key_marker = from = u.key;
      page.next_upload_id_marker = u.upload_id;
      after_id = u.id;
      more = true;  // the run may have ended at LIMIT: fetch the next run
    }
  }
  return page;
}

Result<UploadCounts> Catalog::count_uploads(std::int64_t bucket_id, std::string_view owner,
                                            std::uint64_t limit) {
  auto q = impl_->reader().query(
      "SELECT (SELECT count(*) FROM (SELECT 1 FROM uploads WHERE bucket_id = ?1 LIMIT ?3)), "
      "(SELECT count(*) FROM (SELECT 1 FROM uploads WHERE owner = ?2 LIMIT ?3))");
  q.bind(1, bucket_id).bind(2, owner).bind(3, static_cast<std::int64_t>(limit));
  H3_TRY(q.step());
  return UploadCounts{q.uint64(0), q.uint64(1)};
}

Result<std::vector<UploadRecord>> Catalog::uploads_older_than(std::int64_t created_before_ms,
                                                              std::size_t limit) {
  auto q =
      impl_->reader().query("SELECT " H3_UPLOAD_COLUMNS
                            " FROM uploads WHERE created_ms < ?1 ORDER BY created_ms LIMIT ?2");
  q.bind(1, created_before_ms).bind(2, static_cast<std::int64_t>(limit));
  std::vector<UploadRecord> out;
  for (;;) {
    H3_TRY(bool row, q.step());
    if (!row) break;
    out.push_back(read_upload(q));
  }
  return out;
}

Result<ExtentList> Catalog::all_extents() {
  auto q = impl_->reader().query("SELECT device_offset, device_length FROM extents");
  ExtentList out;
  for (;;) {
    H3_TRY(bool row, q.step());
    if (!row) break;
    out.push_back({q.uint64(0), q.uint64(1)});
  }
  return out;
}

Result<Catalog::Counts> Catalog::counts() {
  Connection& c = impl_->reader();
  auto q = c.query(
      "SELECT (SELECT count(*) FROM buckets), (SELECT count(*) FROM objects), (SELECT count(*) "
      "FROM uploads), "
      "(SELECT count(*) FROM parts), (SELECT count(*) FROM extents)");
  H3_TRY(q.step());
  return Counts{q.uint64(0), q.uint64(1), q.uint64(2), q.uint64(3), q.uint64(4)};
}

Result<std::vector<TierPart>> Catalog::tier_parts(std::int64_t seq) {
  auto q = impl_->reader().query(
      "SELECT part_number, size, etag FROM tier_parts WHERE seq = ?1 ORDER BY part_number");
  q.bind(1, seq);
  std::vector<TierPart> out;
  for (;;) {
    H3_TRY(bool row, q.step());
    if (!row) break;
    out.push_back({static_cast<std::uint32_t>(q.int64(0)), q.uint64(1), std::string(q.text(2))});
  }
  return out;
}

Result<std::vector<std::string>> Catalog::tier_upload_ids() {
  auto q = impl_->reader().query(
      "SELECT upload_id FROM tier_jobs WHERE upload_id IS NOT NULL UNION ALL "
      "SELECT tier_upload_id FROM uploads WHERE tier_upload_id IS NOT NULL");
  std::vector<std::string> out;
  for (;;) {
    H3_TRY(bool row, q.step());
    if (!row) break;
    out.emplace_back(q.text(0));
  }
  return out;
}

Result<TierOwed> Catalog::tier_owed(std::int64_t bucket_id, const KeySpan& span,
                                    std::int64_t up_to_seq) {
  auto q = impl_->reader().query(
      "SELECT count(*) + (SELECT count(*) FROM objects o INDEXED BY objects_key WHERE "
      "o.bucket_id = ?1 AND o.key >= ?2 AND o.key < ?3 AND o.id <= ?4 AND " H3_IMPLIED_JOB_WHERE_O
      "), coalesce(sum(state = 1), 0), max(CASE WHEN state = 1 THEN last_error END) FROM "
      "tier_jobs WHERE bucket_id = ?1 AND key >= ?2 AND key < ?3 AND seq <= ?4");
  q.bind(1, bucket_id).bind(4, up_to_seq);
  bind_key_span(q, span, 2);
  H3_TRY(q.step());
  return TierOwed{static_cast<std::uint64_t>(q.int64(0)), static_cast<std::uint64_t>(q.int64(1)),
                  q.optional_text(2).value_or(std::string())};
}

}  // namespace hots3::storage
