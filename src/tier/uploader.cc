#include "hots3/tier/uploader.h"

#include "tier/commit_markers.h"
#include "tier/evictor.h"
#include "tier/link_share.h"

#include "hots3/aws/checksum.h"
#include "hots3/aws/etag.h"
#include "hots3/common/assert.h"
#include "hots3/common/clock.h"
#include "hots3/common/glob.h"
#include "hots3/common/hash_lanes.h"
#include "hots3/common/hex.h"
#include "hots3/common/logging.h"
#include "hots3/common/md5.h"
#include "hots3/common/metrics.h"
#include "hots3/common/random.h"
#include "hots3/common/text.h"
#include "hots3/common/thread_index.h"
#include "hots3/common/units.h"
#include "hots3/s3client/s3_client.h"
#include "hots3/storage/object_store.h"
#include "hots3/xml/xml.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/experimental/concurrent_channel.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <pthread.h>
#include <set>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

namespace hots3::tier {

namespace asio = boost::asio;
using storage::ObjectRecord;
using storage::TierJob;

namespace {

// How often the queue is looked at when nothing wakes the loop (a finished job does).
constexpr std::chrono::milliseconds kPollInterval{200};
// How long a due job that waits for others (a delete for a copy of its data, a commit marker for
// its prefix) is moved on at a time.
constexpr std::int64_t kWaitingHold = 1000;
// S3's multipart rules: every part but the last at least 5 MiB, at most 10,000 parts.
constexpr std::uint64_t kPartMin = 5 * kMiB;
constexpr std::uint64_t kPartsMax = 10'000;
// How long stop() waits for the attempts under way to notice it.
constexpr std::chrono::seconds kStopGrace{2};
// A response body the uploader reads: S3's answers to PUT, Complete and errors are small.
constexpr std::size_t kAnswerBytesMax = 64 * kKiB;

// How often the health report (Uploader::health) is brought up to date, and how often each
// binding's upstream bucket is asked for (HEAD) whether or not uploads are under way.
constexpr std::chrono::seconds kReportInterval{1};
constexpr std::chrono::seconds kProbeInterval{30};
// The pause between two readings of where the bound buckets' data is (a pass over their catalog
// rows).
constexpr std::chrono::seconds kSpaceInterval{5};
// Both readings are passes over rows that grow with the catalog (the queue of un-uploaded
// changes, the bound buckets' versions): the pause after a long one is this many times the
// pass's own time, so that they take at most a few percent of a catalog reader thread, and
// leave the CPU to the writes (a few hundred thousand rows took a second a pass, back to back).
constexpr int kPassShare = 100;
// Up to this many rows a reading keeps its own pace, so that the status of a small queue stays
// within a second of the writes (a pass over them takes up to some 50 ms; held to kPassShare
// times its pass instead, a report lagged a write by seconds in a sanitizer build).
constexpr std::uint64_t kFewRows = 50'000;
// The pause a pass over `rows` rows that took `pass` calls for beyond its reading's own pace.
std::chrono::steady_clock::duration pass_pause(std::chrono::steady_clock::duration pass,
                                               std::uint64_t rows) {
  return rows > kFewRows ? pass * kPassShare : std::chrono::steady_clock::duration::zero();
}
// The log hears that an upstream fails (or answers again) at most this often.
constexpr std::chrono::seconds kWarnInterval{10};
// After a cut of an upstream's window, the refusals of attempts already under way do not cut it
// again for this long.
constexpr std::chrono::seconds kSlowDownHold{1};
// A read-through's client is waiting: its upstream GET gives up on an answer this much sooner
// than an upload does. While nothing answers the upstream, misses fail at once (503) but for
// one that tries it again, kReadTrialInterval after the last failure and twice as long after
// each failed trial (up to kReadTrialMax): a client waits out a timeout only when the last one
// may have passed, and clients one after another do not each wait out one.
constexpr std::chrono::seconds kReadFirstByteTimeout{5};
constexpr std::chrono::seconds kReadTrialInterval{2};
constexpr std::chrono::seconds kReadTrialMax{8};
// How long a listing asked for a client (cache mode) waits for its answer to start.
constexpr std::chrono::seconds kListTimeout{30};
// How often upstream uploads no job uses are looked for (and at start).
constexpr std::chrono::hours kSweepInterval{1};
// How soon the sweep looks again at an upload it spared because another of its key was being
// begun.
constexpr std::chrono::seconds kSweepRetry{2};
// A write-through PUT: pieces of its body buffered between the request and the upstream, and how
// long it waits for an earlier change of its key to reach the upstream first.
constexpr std::size_t kPassagePieces = 4;
constexpr std::chrono::seconds kPassageTurnMax{30};
// A teed upload's entry in memory not ended by then goes (an upload here that expired ends
// without a word to the uploader): while the upload here lives the catalog names its upstream
// upload, and the next part finds it there; once it does not, the sweep aborts that upload.
constexpr std::chrono::hours kTeedMax{24};
// A read-through: pieces of the upstream's answer in flight to the request's worker, and their
// size. The upstream is read no faster than the client takes the bytes.
constexpr std::size_t kFetchPieces = 8;
constexpr std::size_t kFetchPieceBytes = 256 * kKiB;
// A read-through of several chunks: their size, and what a chunk's channel holds (all of its
// pieces and its end).
constexpr std::uint64_t kFetchChunkBytes = 8 * kMiB;
constexpr std::size_t kChunkPieces = kFetchChunkBytes / kFetchPieceBytes + 1;

// What a request to an upstream is, for its metrics (by the S3 operation it makes).
constexpr std::string_view kUpstreamOps[] = {"HeadObject",
                                             "GetObject",
                                             "PutObject",
                                             "CopyObject",
                                             "DeleteObject",
                                             "DeleteObjects",
                                             "CreateMultipartUpload",
                                             "UploadPart",
                                             "UploadPartCopy",
                                             "CompleteMultipartUpload",
                                             "AbortMultipartUpload",
                                             "ListParts",
                                             "HeadBucket",
                                             "ListObjectsV2",
                                             "ListObjects",
                                             "ListMultipartUploads",
                                             "other"};
// The answers counted apart; the rest are "other", and no answer at all is "error".
constexpr unsigned kUpstreamStatuses[] = {200, 204, 206, 304, 400, 403, 404,
                                          409, 412, 416, 429, 500, 501, 503};
constexpr std::size_t kUpstreamAnswers = std::size(kUpstreamStatuses) + 2;  // + other, error

std::size_t upstream_op(const s3client::Request& r) {
  const auto has = [&r](std::string_view name) {
    return std::any_of(r.query.begin(), r.query.end(),
                       [name](const aws::QueryParameter& p) { return p.name == name; });
  };
  const bool copy = std::any_of(r.headers.begin(), r.headers.end(), [](const http::Header& h) {
    return h.name == "x-amz-copy-source";
  });
  std::string_view op = "other";
  if (r.method == "HEAD") {
    op = r.key.empty() ? "HeadBucket" : "HeadObject";
  } else if (r.method == "GET") {
    op = !r.key.empty()     ? (has("uploadId") ? "ListParts" : "GetObject")
         : has("uploads")   ? "ListMultipartUploads"
         : has("list-type") ? "ListObjectsV2"
                            : "ListObjects";
  } else if (r.method == "PUT") {
    op = has("partNumber") ? (copy ? "UploadPartCopy" : "UploadPart")
         : copy            ? "CopyObject"
                           : "PutObject";
  } else if (r.method == "POST") {
    op = has("uploads")    ? "CreateMultipartUpload"
         : has("uploadId") ? "CompleteMultipartUpload"
         : has("delete")   ? "DeleteObjects"
                           : "other";
  } else if (r.method == "DELETE") {
    op = has("uploadId") ? "AbortMultipartUpload" : "DeleteObject";
  }
  return static_cast<std::size_t>(std::find(std::begin(kUpstreamOps), std::end(kUpstreamOps), op) -
                                  std::begin(kUpstreamOps));
}

// The limits a request or its bytes wait for: requests_per_s, write_bytes_per_s,
// read_bytes_per_s, and the link's turn under bytes_per_s.
enum class Limit : std::uint8_t { kRequests, kWrite, kRead, kLink };
constexpr std::string_view kLimitNames[] = {"requests", "write_bytes", "read_bytes", "link"};

struct Upstream {
  config::UpstreamConfig config;
  std::unique_ptr<s3client::Client> client;  // on the uploader's io_context
  // What the last exchanges with it said (the uploader's thread only): the cause of the last
  // failure since the last success ("" when there was none), whether nothing answered, and since
  // when it fails.
  std::string cause;
  bool unreachable = false;
  std::int64_t failing_since_ms = 0;
  bool heard = false;   // an exchange with it has ended: until then its state is unknown
  bool warned = false;  // this failure streak was logged (so is its end)
  std::int64_t last_warn_ms = 0;
  // Whether uploads to it carry If-Match / If-None-Match: * (until it answers 501 to one, or
  // refuses an If-Match of the ETag it holds in both forms below).
  bool conditional = true;
  // Whether If-Match carries the ETag quoted, as HTTP has it: until the upstream refuses a
  // quoted one that names what it holds (some compare the header's text with their ETag).
  bool if_match_quoted = true;
  // Whether an answer of it carried an x-amz-checksum-* header: under checksums = "auto",
  // uploads carry theirs from then on.
  bool checksums_echoed = false;
  // write_bytes_per_s, read_bytes_per_s and requests_per_s: when the next byte sent, the next
  // byte read and the next request may go.
  std::chrono::steady_clock::time_point next_send{};
  std::chrono::steady_clock::time_point next_receive{};
  std::chrono::steady_clock::time_point next_request{};
  // bytes_per_s: every byte of a body to or from it takes its turn here, by class.
  std::unique_ptr<LinkShare> link;
  // While unreachable: when a read-through may next try it, and how long after a failure.
  std::chrono::steady_clock::time_point next_read_trial{};
  std::chrono::steady_clock::duration read_trial_interval = kReadTrialInterval;
  // The same for other threads (ReadThrough::reachable): until when a read would fail at once,
  // in steady-clock nanoseconds; 0 while it is not unreachable.
  std::atomic<std::int64_t> reads_refused_until{0};
  // The ranged GETs of read-throughs in chunks under way (Impl::fetch_through).
  std::uint64_t fetch_streams = 0;
  // Requests to it by operation and answer (RequestTally), and the time spent waiting for its
  // limits, by limit: counted on the uploader's thread, read by scrapes. The request counts are
  // shared with the tallies: an attempt abandoned at stop ends when the io_context destroys it,
  // after the upstreams.
  using RequestCounts =
      std::array<std::array<std::atomic<std::uint64_t>, kUpstreamAnswers>, std::size(kUpstreamOps)>;
  std::shared_ptr<RequestCounts> requests = std::make_shared<RequestCounts>();
  std::array<std::atomic<std::uint64_t>, std::size(kLimitNames)> waited_us{};
  // How many attempts it takes at once (AIMD): halved when it answers 429 or 503 (at most once
  // per kSlowDownHold, as one burst of refusals is one signal), then one more per window of
  // successes, up to the uploader's parallelism. Attempts under way: `running`.
  double window = 1;
  std::size_t running = 0;
  std::chrono::steady_clock::time_point last_cut{};
};

// Counts one request to an upstream by operation and answer when it ends, however it ends: with
// the status answered(), or "error" when none came.
class RequestTally {
 public:
  RequestTally(const Upstream& u, const s3client::Request& r)
      : counts_(u.requests), op_(upstream_op(r)) {}
  ~RequestTally() {
    const auto* known =
        std::find(std::begin(kUpstreamStatuses), std::end(kUpstreamStatuses), status_);
    const std::size_t answer =
        status_ == 0 ? kUpstreamAnswers - 1
                     : static_cast<std::size_t>(known - std::begin(kUpstreamStatuses));
    (*counts_)[op_][answer].fetch_add(1, std::memory_order_relaxed);
  }
  RequestTally(const RequestTally&) = delete;
  RequestTally& operator=(const RequestTally&) = delete;
  RequestTally(RequestTally&&) = delete;
  RequestTally& operator=(RequestTally&&) = delete;
  void answered(unsigned status) { status_ = status; }

 private:
  std::shared_ptr<Upstream::RequestCounts> counts_;
  std::size_t op_;
  unsigned status_ = 0;
};

// A bound bucket's GETs since start (HEADs read nothing), by what answered them (its
// x-hots3-cache): counted by every worker on every GET, in slots by thread, each on a cache line
// of its own, so that workers do not take one line from each other. Beside them what only reads
// that ask the upstream do (rarer, one counter each): reads that waited for another's fetch,
// revalidations by result, and the time to first byte of misses.
struct ReadCounts {
  struct Totals {
    std::array<std::uint64_t, kCacheAnswers> count{}, bytes{};
    // From here (hit, revalidated, stale) or not (miss, partial): the health report's hit ratio.
    std::uint64_t hits = 0, misses = 0, hit_bytes = 0, miss_bytes = 0;
    std::uint64_t coalesced = 0;
    std::array<std::uint64_t, kRevalidationResults> revalidations{};
  };
  struct alignas(64) Slot {
    std::array<std::atomic<std::uint64_t>, kCacheAnswers> count{}, bytes{};
  };
  static constexpr std::size_t kSlots = 16;
  std::array<Slot, kSlots> slots;
  std::atomic<std::uint64_t> coalesced{0};
  std::array<std::atomic<std::uint64_t>, kRevalidationResults> revalidations{};
  metrics::Histogram cold_ttfb;

  void count(CacheAnswer answer, std::uint64_t bytes) {
    Slot& s = slots[thread_index() % kSlots];
    const auto a = static_cast<std::size_t>(answer);
    s.count[a].fetch_add(1, std::memory_order_relaxed);
    s.bytes[a].fetch_add(bytes, std::memory_order_relaxed);
  }
  [[nodiscard]] Totals totals() const {
    Totals t;
    for (const Slot& s : slots) {
      for (std::size_t a = 0; a < kCacheAnswers; ++a) {
        t.count[a] += s.count[a].load(std::memory_order_relaxed);
        t.bytes[a] += s.bytes[a].load(std::memory_order_relaxed);
      }
    }
    for (const CacheAnswer a :
         {CacheAnswer::kHit, CacheAnswer::kRevalidated, CacheAnswer::kStale}) {
      t.hits += t.count[static_cast<std::size_t>(a)];
      t.hit_bytes += t.bytes[static_cast<std::size_t>(a)];
    }
    for (const CacheAnswer a : {CacheAnswer::kMiss, CacheAnswer::kPartial}) {
      t.misses += t.count[static_cast<std::size_t>(a)];
      t.miss_bytes += t.bytes[static_cast<std::size_t>(a)];
    }
    t.coalesced = coalesced.load(std::memory_order_relaxed);
    for (std::size_t r = 0; r < kRevalidationResults; ++r)
      t.revalidations[r] = revalidations[r].load(std::memory_order_relaxed);
    return t;
  }
};

struct Binding {
  std::int64_t bucket_id = 0;
  config::TierBucketConfig config;
  Upstream* upstream = nullptr;
  std::string probe_cause;  // why the last HEAD of its upstream bucket failed; "" when it did not
  std::uint64_t conflicts = 0;  // keys another writer changed upstream, since start
  std::shared_ptr<ReadCounts> reads = std::make_shared<ReadCounts>();
  // Whether writes are conditional on what the upstream was last seen to hold. Not in cache
  // mode: others write that bucket as a matter of course, and the last write wins as in S3.
  [[nodiscard]] bool conditional() const {
    return upstream->conditional && config.mode != config::TierMode::kCache;
  }
};

// A write-through PUT's answer when the upstream never got the body.
UpstreamAnswer failed_answer(std::string cause) {
  UpstreamAnswer answer;
  answer.kind = UpstreamAnswer::Kind::kFailed;
  answer.cause = std::move(cause);
  return answer;
}

// What became of one attempt at a job.
struct Outcome {
  enum class Kind {
    kDone,        // the upstream confirmed
    kSuperseded,  // a newer change of the key replaced the job: nothing to record
    kRetry,       // the upstream (or the way to it) may get over it
    kPark,        // no retry changes the answer
  } kind = Kind::kDone;
  // Where a failure came from: the upstream's answer, the way to it (nothing answered), or the
  // local copy. Only the first two say something about the upstream's health.
  enum class Source { kAnswer, kTransport, kLocal } source = Source::kAnswer;
  std::string error;  // for kRetry and kPark: what failed, and why
  std::string cause;  // why alone (no key: status output shows it)
  // kDone: what the upstream holds under the key now (none after a delete).
  std::optional<storage::TierSeen> seen;
  std::uint64_t bytes = 0;
  unsigned status = 0;  // the upstream's HTTP status, when it answered
  std::string code;     // the S3 error code it answered with
  // The ETag the upstream gives our version, once its bytes were sent (a 412 may answer an
  // attempt of ours whose confirmation was lost).
  std::string expected;

  static Outcome failure(Kind kind, Source source, std::string_view what, std::string cause) {
    Outcome out;
    out.kind = kind;
    out.source = source;
    out.error = fmt::format("{}: {}", what, cause);
    out.cause = std::move(cause);
    return out;
  }
  static Outcome superseded() {
    Outcome out;
    out.kind = Kind::kSuperseded;
    return out;
  }
};

// Where an upload may copy its data from upstream instead of sending it: the key (upstream
// name) that holds it, with the ETag it had there.
struct CopyFrom {
  std::string key;
  std::string etag;
};

storage::BucketTier bucket_tier(config::TierMode mode) {
  switch (mode) {
    case config::TierMode::kWriteback:
      return storage::BucketTier::kWriteback;
    case config::TierMode::kWritethrough:
      return storage::BucketTier::kWritethrough;
    case config::TierMode::kCache:
      return storage::BucketTier::kCache;
  }
  return storage::BucketTier::kNone;
}

// The object's content headers and user metadata, as the upstream keeps them.
std::vector<http::Header> object_headers(const storage::ContentHeaders& headers,
                                         const storage::Metadata& metadata) {
  std::vector<http::Header> out;
  const auto add = [&out](std::string name, const std::optional<std::string>& value) {
    if (value) out.push_back({std::move(name), *value});
  };
  add("Content-Type", headers.content_type);
  add("Content-Encoding", headers.content_encoding);
  add("Content-Disposition", headers.content_disposition);
  add("Content-Language", headers.content_language);
  add("Cache-Control", headers.cache_control);
  add("Expires", headers.expires);
  for (const auto& [name, value] : metadata) out.push_back({"x-amz-meta-" + name, value});
  return out;
}
std::vector<http::Header> object_headers(const ObjectRecord& o) {
  return object_headers(o.headers, o.user_metadata);
}

std::string unquoted(std::string_view etag) {
  if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"') {
    etag = etag.substr(1, etag.size() - 2);
  }
  return std::string(etag);
}

// The upstream's answer to a request that was sent whole: kDone for 2xx; a retry for what the
// upstream may get over (408, 429, 5xx); a park for every other refusal.
Outcome judge(std::string_view what, unsigned status, std::string_view body) {
  if (status / 100 == 2) return {};
  std::string cause = fmt::format("HTTP {}", status);
  const auto e = s3client::parse_error(body);
  if (e) cause += fmt::format(" {}: {}", e->code, e->message);
  // A conditional write that met another one under way: S3 asks for it to be sent again. A
  // body that does not match its Content-MD5 or checksum there was damaged on the way.
  const bool transient =
      status == 408 || status == 429 || status / 100 == 5 ||
      (status == 409 && e && e->code == "ConditionalRequestConflict") ||
      (status == 400 && e && (e->code == "BadDigest" || e->code == "XAmzContentChecksumMismatch"));
  Outcome out = Outcome::failure(transient ? Outcome::Kind::kRetry : Outcome::Kind::kPark,
                                 Outcome::Source::kAnswer, what, std::move(cause));
  out.status = status;
  if (e) out.code = e->code;
  return out;
}

// The status an answer stands for: S3 can fail a copy or a completion after its 200, and then
// sends an Error document in the body.
unsigned answered(unsigned status, std::string_view body) {
  return status == 200 && s3client::parse_error(body) ? 500 : status;
}

// Whether `word` is one of the space-separated words of `list`.
bool listed_in(std::string_view list, std::string_view word) {
  while (!list.empty()) {
    const std::size_t end = std::min(list.find(' '), list.size());
    if (list.substr(0, end) == word) return true;
    list.remove_prefix(std::min(end + 1, list.size()));
  }
  return false;
}

// The x-amz-checksum-* header a version's whole-object checksum goes up with (S3 takes one per
// request): an algorithm the client chose before the default CRC64NVME. nullopt: none.
std::optional<http::Header> object_checksum(const ObjectRecord& o) {
  const storage::ChecksumSet& c = o.checksums;
  if (c.type && *c.type != "FULL_OBJECT") return std::nullopt;
  using enum aws::ChecksumAlgorithm;
  const std::pair<aws::ChecksumAlgorithm, const std::optional<std::string>*> order[] = {
      {kSha256, &c.sha256},
      {kSha1, &c.sha1},
      {kCrc32c, &c.crc32c},
      {kCrc32, &c.crc32},
      {kCrc64Nvme, &c.crc64nvme}};
  for (const auto& [algorithm, value] : order) {
    if (*value) return http::Header{std::string(aws::checksum_header(algorithm)), **value};
  }
  return std::nullopt;
}

// The headers that make an upload to `u` conditional on what it holds as last seen there: the
// same ETag, or nothing at all.
std::vector<http::Header> condition_headers(const Upstream& u,
                                            const std::optional<storage::TierSeen>& seen) {
  if (!seen) return {{"If-None-Match", "*"}};
  return {{"If-Match", u.if_match_quoted ? "\"" + seen->etag + "\"" : seen->etag}};
}

// The If-Match value a write carried, from its conditions ("" for none).
std::string if_match_sent(const std::vector<http::Header>& conditions) {
  for (const http::Header& h : conditions) {
    if (h.name == "If-Match") return h.value;
  }
  return {};
}

// A 412 to If-Match `sent` (the header's value: the ETag last seen, quoted or not) while the key
// holds just that ETag (`theirs`): the upstream reads the header otherwise than S3 does. Its ETag
// goes unquoted from then on; refused that way too, uploads to it stop being conditional. true:
// the write goes again (also when another write already made the switch after this one left).
bool misread_if_match(Upstream& u, std::string_view sent, std::string_view theirs) {
  const bool quoted = sent.size() >= 2 && sent.front() == '"' && sent.back() == '"';
  if (theirs.empty() || unquoted(sent) != theirs || !u.conditional) return false;
  if (quoted) {
    if (u.if_match_quoted) {
      u.if_match_quoted = false;
      log::warn("tier: upstream {} refused an If-Match of the ETag it holds; it is sent unquoted",
                u.config.name);
    }
  } else {
    u.conditional = false;
    log::warn(
        "tier: upstream {} refuses If-Match of the ETag it holds, quoted or not; writes to it "
        "are no longer checked for conflicts",
        u.config.name);
  }
  return true;
}

// The ETag in a CopyObjectResult or CopyPartResult; "" without one.
std::string copy_result_etag(std::string_view body) {
  if (auto doc = xml::XmlDocument::parse(body)) {
    if (auto etag = doc->root().child("ETag")) return unquoted(etag->text());
  }
  return {};
}

// An answer that lacks what S3 always sends (an UploadId, an ETag): retried.
Outcome malformed(std::string_view what, std::string cause) {
  return Outcome::failure(Outcome::Kind::kRetry, Outcome::Source::kAnswer, what, std::move(cause));
}

// An attempt that failed before the upstream answered: retried, unless the local copy itself is
// damaged (a block checksum mismatch), which no retry mends.
Outcome failed(std::string_view what, const boost::system::error_code& e) {
  const bool local = e == errc::kChecksumMismatch || e == errc::kIoError || e == errc::kLost;
  return Outcome::failure(e == errc::kChecksumMismatch || e == errc::kLost ? Outcome::Kind::kPark
                                                                           : Outcome::Kind::kRetry,
                          local ? Outcome::Source::kLocal : Outcome::Source::kTransport, what,
                          e.message());
}

// The health of an upstream or a binding, from good to bad.
enum class Health { kOk, kDegraded, kBehind };

std::string_view health_name(Health h) {
  switch (h) {
    case Health::kOk:
      return "ok";
    case Health::kDegraded:
      return "degraded";
    case Health::kBehind:
      return "behind";
  }
  return "?";
}

std::string_view upstream_state(const Upstream& u) {
  if (!u.heard) return "unknown";
  if (u.cause.empty()) return "ok";
  return u.unreachable ? "unreachable" : "failing";
}

// A write-through PUT between the request's worker and the uploader's thread: the body's pieces
// one way (an empty piece: the body is whole and verified, complete it), the upstream's answer
// the other. The request closes `pieces` to cut the PUT off, and `done` when it lets the key go.
// Once it has answered, the uploader takes and drops the pieces still sent until the request lets
// go: closing the channel would leave a send that waits for room waiting for ever (a close ends
// the receives waiting on a channel, not the sends); the request stops at the answer, after at
// most one more piece.
struct Passage {
  using Pieces = asio::experimental::concurrent_channel<void(boost::system::error_code,
                                                             std::vector<std::byte>)>;
  using Answers =
      asio::experimental::concurrent_channel<void(boost::system::error_code, UpstreamAnswer)>;
  using Done = asio::experimental::concurrent_channel<void(boost::system::error_code)>;
  explicit Passage(asio::io_context& io) : pieces(io, kPassagePieces), answer(io, 1), done(io) {}
  Pieces pieces;
  Answers answer;
  Done done;
  // The ETag the upstream gives the body, when the request knows it, and the seq of the job it
  // queued for the key (UpstreamPut::finish): set before the empty piece (the channel orders
  // the two).
  std::string expected_etag;
  std::int64_t own_job = 0;
};

// A read-through between the uploader's thread and the request's worker: the pieces of the
// upstream's answer (an empty one: the end), or the error that ended it. The request lets go of
// `pieces` (let_go_of, on the uploader's thread) to cut the GET off.
struct Fetch {
  // A piece's buffer is made for overwriting (a vector's would be zeroed first, 256 KiB a
  // piece), and moved along, never copied.
  struct Piece {
    std::unique_ptr<std::byte[]> data;  // NOLINT(*-avoid-c-arrays): a buffer of `size`
    std::size_t size = 0;
  };
  using Pieces =
      asio::experimental::concurrent_channel<void(boost::system::error_code, Fetch::Piece)>;
  Fetch(asio::io_context& io, std::atomic<std::uint64_t>& live)
      : pieces(io, kFetchPieces), live_(live) {
    live_.fetch_add(1, std::memory_order_relaxed);
  }
  ~Fetch() { live_.fetch_sub(1, std::memory_order_relaxed); }
  Fetch(const Fetch&) = delete;
  Fetch& operator=(const Fetch&) = delete;
  Fetch(Fetch&&) = delete;
  Fetch& operator=(Fetch&&) = delete;
  Pieces pieces;
  // Set before the first piece is sent: whether the binding's admission rule keeps the version.
  std::atomic<bool> admitted{false};
  // Set by the reader once it is done with its first piece (it asks for the next): until then
  // a read in chunks asks for its first chunk only (see fetch_into).
  std::atomic<bool> first_passed{false};

 private:
  std::atomic<std::uint64_t>& live_;  // the uploader's count of fetches not yet ended
};

// Lets go of the receiving end of `pieces`, on the thread that sends into it: a send waiting for
// room ends with an error, as does every later one. A close alone would leave that send waiting
// for ever (it ends the waiting receives only), and a cancel after the close would take the
// waiting send for a receive: hence both, in this order, with no send between them. A channel
// already closed has no send waiting: its sender closed it, or it was let go of.
void let_go_of(Fetch::Pieces& pieces) {
  if (!pieces.is_open()) return;
  pieces.cancel();
  pieces.close();
}

// What every GET of one read-through shares: the request (If-Match on `etag`), the object's size
// when the whole of it is read, and how the log names the read.
struct ReadSpec {
  s3client::Request get;
  std::string etag;
  std::optional<std::uint64_t> size;
  std::string what;
  Traffic traffic = Traffic::kForeground;  // its bytes' class on the upstream's link
};

}  // namespace

struct Uploader::Impl {
  Impl(storage::ObjectStore& s, const config::TierConfig& t, std::string o, bool r)
      : store(s), tier(t), owner(std::move(o)), rebind(r), wake(io) {}

  storage::ObjectStore& store;
  config::TierConfig tier;
  std::string owner;
  bool rebind;
  // Read-throughs not yet ended (Fetch objects): their reader or their upstream side is under way.
  // Before `io`, whose end may end the last of them.
  std::atomic<std::uint64_t> fetches{0};
  // The upstream multipart uploads attempts of this run are using (see `creating`). Before `io`:
  // an attempt abandoned at stop lets go of its id (LiveUpload) when `io` ends its frame.
  std::multiset<std::string> live_uploads;
  asio::io_context io;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  std::thread thread;
  std::vector<std::unique_ptr<Upstream>> upstreams;
  std::unordered_map<std::int64_t, Binding> bindings;  // by bucket id
  // Keys with an attempt under way: a key is sent by one attempt at a time, so that its changes
  // reach the upstream in the order they were acknowledged.
  std::set<std::pair<std::int64_t, std::string>> in_flight;
  // Keys a write-through PUT holds, from its start until its request has committed it or given
  // up: no job of the key starts meanwhile, nor another write-through PUT of it.
  std::set<std::pair<std::int64_t, std::string>> through;
  // Jobs (by seq) whose attempt ended while the queue was being read and started from: that
  // reading may have been taken before the attempt recorded its end, and would start the job
  // again (the same DELETE or upload sent twice, or a retry before its time).
  bool reading_queue = false;
  std::set<std::int64_t> ended_during_reading;
  asio::steady_timer wake;
  bool stopping = false;
  bool started = false;
  // Whether a write-through PUT can be served (between start and stop; read by the workers).
  std::atomic<bool> running{false};
  // A write-through multipart upload's upstream side, by the client's upload id: the upstream
  // upload its first part began, or the one the catalog recorded for it before a restart (the
  // parts the upstream holds are recorded with the parts).
  struct Teed {
    std::int64_t begun_ms = 0;
    std::string upstream_id;  // "" until begun
    bool beginning = false;   // a part is beginning it; the others wait
  };
  std::map<std::string, std::shared_ptr<Teed>> teed;
  // What the orphan sweep must spare besides the catalog's uploads: the upstream keys whose
  // CreateMultipartUpload is unanswered, and the uploads an attempt of this run is using
  // (it may not have recorded its id yet, or does not keep it: a conflict's side copy).
  std::multiset<std::string> creating;
  // Holds an id in live_uploads for as long as it lives (in an attempt's coroutine frame).
  class LiveUpload {
   public:
    LiveUpload(std::multiset<std::string>& set, const std::string& id)
        : set_(set), at_(set.insert(id)) {}
    LiveUpload(const LiveUpload&) = delete;
    LiveUpload& operator=(const LiveUpload&) = delete;
    LiveUpload(LiveUpload&&) = delete;
    LiveUpload& operator=(LiveUpload&&) = delete;
    ~LiveUpload() { set_.erase(at_); }

   private:
    std::multiset<std::string>& set_;
    std::multiset<std::string>::iterator at_;
  };
  std::promise<void> drained;
  // The read-throughs being read (each registered by its FetchRead, on a worker's thread): once
  // this thread has stopped none of them gets another piece, and closing them ends their
  // readers' waits.
  std::mutex being_read_mutex;
  std::unordered_map<const Fetch*, std::weak_ptr<Fetch>> being_read;
  std::condition_variable being_read_ended;

  std::atomic<std::uint64_t> n_uploaded{0}, n_deleted{0}, n_bytes{0}, n_retried{0}, n_parked{0},
      n_sent{0}, n_slowdowns{0}, n_conflicts{0};
  EvictionCounters evictions;

  // The read counts of a bound bucket, for any thread; none when it is not bound (or the
  // uploader has not started).
  ReadCounts* read_counts(std::int64_t bucket_id);

  // Holds back what costs `units` of an upstream's `per_s` (bytes under write_bytes_per_s,
  // requests under requests_per_s; 0: no cap) until its turn, `next` being when the next may
  // go. Each takes its slot before it waits, so concurrent uploads share the rate in turn.
  asio::awaitable<void> wait_turn(std::chrono::steady_clock::time_point& next, double units,
                                  std::uint64_t per_s, std::atomic<std::uint64_t>& waited_us) {
    if (per_s == 0) co_return;
    const auto now = std::chrono::steady_clock::now();
    const auto start = std::max(now, next);
    next = start + std::chrono::nanoseconds(
                       static_cast<std::int64_t>(units * 1e9 / static_cast<double>(per_s)));
    if (start <= now) co_return;
    waited_us.fetch_add(
        static_cast<std::uint64_t>(
            std::chrono::duration_cast<std::chrono::microseconds>(start - now).count()),
        std::memory_order_relaxed);
    asio::steady_timer timer(io);
    timer.expires_at(start);
    co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
  }
  // Bytes of `traffic` to send, or read (`received`), under write_bytes_per_s or
  // read_bytes_per_s and the link's share.
  asio::awaitable<void> pace(Upstream& u, std::size_t bytes, Traffic traffic,
                             bool received = false) {
    auto turn =
        received ? wait_turn(u.next_receive, static_cast<double>(bytes), u.config.read_bytes_per_s,
                             u.waited_us[static_cast<std::size_t>(Limit::kRead)])
                 : wait_turn(u.next_send, static_cast<double>(bytes), u.config.write_bytes_per_s,
                             u.waited_us[static_cast<std::size_t>(Limit::kWrite)]);
    co_await std::move(turn);
    const auto before = std::chrono::steady_clock::now();
    auto share = u.link->take(traffic, bytes);
    co_await std::move(share);
    if (!u.link->capped()) co_return;
    u.waited_us[static_cast<std::size_t>(Limit::kLink)].fetch_add(
        static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                       std::chrono::steady_clock::now() - before)
                                       .count()),
        std::memory_order_relaxed);
  }
  asio::awaitable<void> admitted(Upstream& u) {
    auto turn = wait_turn(u.next_request, 1, u.config.requests_per_s,
                          u.waited_us[static_cast<std::size_t>(Limit::kRequests)]);
    co_await std::move(turn);
  }

  // A request with its whole body to the upstream, within its requests_per_s.
  asio::awaitable<Result<http::Client::Reply>> call(Upstream& u, s3client::Request request,
                                                    std::string body) {
    auto admit = admitted(u);
    co_await std::move(admit);
    RequestTally tally(u, request);
    auto sending = u.client->request(std::move(request), std::move(body));
    auto reply = co_await std::move(sending);
    if (reply) tally.answered(reply->head.status);
    co_return reply;
  }

  // The health report, rebuilt every kReportInterval by report(): its pieces as JSON and as
  // text, put together by health() for all buckets or one.
  struct BucketReport {
    std::string name;
    Health health = Health::kOk;
    std::string json, text;
    // The same as numbers, for the metrics.
    storage::TierBacklog owed;
    storage::TierSpace held;
    std::int64_t oldest_s = 0;
    ReadCounts::Totals reads;
  };
  struct UpstreamReport {
    std::string name;
    std::string_view state;  // upstream_state's
    std::int64_t failing_s = 0;
    std::array<std::uint64_t, kTrafficClasses> bytes{};
  };
  struct Report {
    bool made = false;
    Health overall = Health::kOk;
    std::string upstreams_json, upstreams_text;
    std::vector<UpstreamReport> upstreams;
    std::vector<BucketReport> buckets;
    std::string totals_json, totals_text;  // what is owed in all, and the device
  };
  std::int64_t next_probe_ms = 0;  // when watch() next probes the bindings
  mutable std::mutex report_mutex;
  Report last_report;
  // Where the bound buckets' data is (a pass over their catalog rows, so not every report).
  std::vector<storage::TierSpace> space;
  std::int64_t space_ms = 0;                      // when it was read; 0: not yet
  std::atomic<std::uint64_t> evictable_total{0};  // their evictable bytes, for any thread

  // What an exchange with an upstream says about it: a success ends a failure streak, a failure
  // (not one of the local copy's) starts or continues one. The log hears of a change at most
  // once per kWarnInterval: an upstream refusing some requests would otherwise fill it with
  // every turn of the streak (each failed job says why once anyway).
  void note(Upstream& u, const Outcome& out) {
    if (out.kind == Outcome::Kind::kSuperseded || out.source == Outcome::Source::kLocal) return;
    u.heard = true;
    // A refusal of one request for what it carries (400 bad metadata, 409, 412, 413) is that
    // key's, parked with it; it says nothing about the upstream.
    if (out.kind != Outcome::Kind::kDone && out.source == Outcome::Source::kAnswer &&
        (out.status == 400 || out.status == 409 || out.status == 412 || out.status == 413)) {
      return;
    }
    const std::int64_t now = now_ms();
    if (out.kind == Outcome::Kind::kDone) {
      if (u.warned) log::info("tier: upstream {} answers again", u.config.name);
      u.cause.clear();
      u.unreachable = false;
      u.read_trial_interval = kReadTrialInterval;
      u.reads_refused_until.store(0, std::memory_order_relaxed);
      u.failing_since_ms = 0;
      u.warned = false;
      return;
    }
    const bool unreachable = out.source == Outcome::Source::kTransport;
    if ((u.cause.empty() || u.unreachable != unreachable) &&
        now - u.last_warn_ms >= std::chrono::milliseconds(kWarnInterval).count()) {
      log::warn("tier: upstream {} ({}) is {}: {}", u.config.name, u.config.endpoint,
                unreachable ? "unreachable" : "failing", out.cause);
      u.warned = true;
      u.last_warn_ms = now;
    }
    if (u.cause.empty()) u.failing_since_ms = now;
    u.cause = out.cause;
    // The first trial comes a full interval after the upstream fell silent. A failure since (a
    // trial's, which may come a timeout after it began, or an upload's) brings the next one to
    // an interval after it, never later than it was: failing uploads must not keep every read
    // from trying.
    const auto steady_now = std::chrono::steady_clock::now();
    if (unreachable && !u.unreachable) {
      u.read_trial_interval = kReadTrialInterval;
      next_trial(u, steady_now + kReadTrialInterval);
    } else if (unreachable) {
      next_trial(u, std::min(u.next_read_trial, steady_now + u.read_trial_interval));
    } else {
      u.reads_refused_until.store(0, std::memory_order_relaxed);
    }
    u.unreachable = unreachable;
  }

  // HEAD of the binding's upstream bucket: whether the binding can work at all, asked before
  // any upload needs it (nothing listening, no such bucket, no access).
  asio::awaitable<void> probe(Binding& b) {
    s3client::Request head;
    head.method = "HEAD";
    head.bucket = b.config.upstream_bucket;
    const std::string what = fmt::format("HEAD {}", head.bucket);
    auto asking = call(*b.upstream, std::move(head), std::string());
    auto answer = co_await std::move(asking);
    Outcome out;
    if (!answer) {
      out = failed(what, answer.error());
    } else if (answer->head.status == 404) {
      out = Outcome::failure(Outcome::Kind::kPark, Outcome::Source::kAnswer, what,
                             fmt::format("no bucket {} upstream", b.config.upstream_bucket));
    } else if (answer->head.status == 403) {
      out = Outcome::failure(
          Outcome::Kind::kPark, Outcome::Source::kAnswer, what,
          fmt::format("access to bucket {} denied (HTTP 403)", b.config.upstream_bucket));
    } else {
      out = judge(what, answer->head.status, answer->body);
    }
    if (out.kind != Outcome::Kind::kDone && b.probe_cause != out.cause) {
      log::warn("tier: bucket {}: the upstream bucket cannot be used: {}", b.config.bucket,
                out.error);
    }
    b.probe_cause = out.kind == Outcome::Kind::kDone ? std::string() : out.cause;
    note(*b.upstream, out);
  }

  // Rebuilds the health report from the upstreams' state, the queue and the space.
  void publish(const std::vector<storage::TierBacklog>& backlog) {
    const std::int64_t now = now_ms();
    Report r;
    r.made = true;
    for (std::size_t i = 0; i < upstreams.size(); ++i) {
      const Upstream& u = *upstreams[i];
      // Not known to answer is not known to be well.
      if (!u.heard || !u.cause.empty()) r.overall = std::max(r.overall, Health::kDegraded);
      const std::int64_t failing_s = u.cause.empty() ? 0 : (now - u.failing_since_ms) / 1000;
      // The bytes of bodies to and from it since start, by class of traffic.
      std::string by_class;
      std::string by_class_text;
      for (std::size_t c = 0; c < kTrafficClasses; ++c) {
        const std::string_view name = traffic_name(static_cast<Traffic>(c));
        by_class += fmt::format("{}\"{}\":{}", c == 0 ? "" : ",", name, u.link->bytes()[c]);
        by_class_text +=
            fmt::format("{}{} {}", c == 0 ? "" : ", ", name, format_size(u.link->bytes()[c]));
      }
      r.upstreams_json += fmt::format(
          "{}{{\"name\":{},\"endpoint\":{},\"state\":\"{}\",\"error\":{},\"failing_for_s\":{},"
          "\"concurrency\":{},\"bytes_per_s\":{},\"bytes\":{{{}}}}}",
          i == 0 ? "" : ",", log::json_quoted(u.config.name), log::json_quoted(u.config.endpoint),
          upstream_state(u), log::json_quoted(u.cause), failing_s, static_cast<int>(u.window),
          u.config.bytes_per_s, by_class);
      r.upstreams.push_back({u.config.name, upstream_state(u), failing_s, u.link->bytes()});
      r.upstreams_text +=
          fmt::format("upstream {} {}: {}", u.config.name, u.config.endpoint, upstream_state(u));
      if (!u.cause.empty()) r.upstreams_text += fmt::format(": {} (for {} s)", u.cause, failing_s);
      r.upstreams_text += fmt::format("\n  bytes since start: {}", by_class_text);
      if (u.config.bytes_per_s != 0) {
        r.upstreams_text += fmt::format(" (link cap {}/s)", format_size(u.config.bytes_per_s));
      }
      r.upstreams_text += '\n';
    }
    const std::int64_t space_age_s = (now - space_ms) / 1000;
    for (const config::TierBucketConfig& c : tier.buckets) {
      const auto bound = std::find_if(bindings.begin(), bindings.end(), [&c](const auto& e) {
        return e.second.config.bucket == c.bucket;
      });
      if (bound == bindings.end()) continue;
      const Binding& b = bound->second;
      storage::TierBacklog owed;
      for (const auto& candidate : backlog) {
        if (candidate.bucket_id == b.bucket_id) owed = candidate;
      }
      storage::TierSpace held;
      for (const auto& candidate : space) {
        if (candidate.bucket_id == b.bucket_id) held = candidate;
      }
      const std::int64_t oldest_s = owed.jobs == 0 ? 0 : (now - owed.oldest_first_ms) / 1000;
      Health h = Health::kOk;
      if (!b.probe_cause.empty() || owed.parked > 0 || !b.upstream->heard ||
          !b.upstream->cause.empty() || held.lost_objects > 0) {
        h = Health::kDegraded;
      }
      if (owed.jobs > 0 && now - owed.oldest_first_ms > tier.writeback.max_dirty_age.count()) {
        h = Health::kBehind;
      }
      r.overall = std::max(r.overall, h);
      const ReadCounts::Totals reads = b.reads->totals();
      const std::uint64_t hits = reads.hits;
      const std::uint64_t misses = reads.misses;
      const std::string ratio = hits + misses == 0
                                    ? std::string()
                                    : fmt::format("{:.3f}", static_cast<double>(hits) /
                                                                static_cast<double>(hits + misses));
      BucketReport out{c.bucket, h, {}, {}, owed, held, oldest_s, reads};
      out.json = fmt::format(
          "{{\"bucket\":{},\"upstream\":{},\"upstream_bucket\":{},\"upstream_prefix\":{},"
          "\"mode\":\"{}\",\"state\":\"{}\",\"error\":{},\"queued\":{},\"queued_bytes\":{},"
          "\"uploads\":{},\"copies\":{},\"deletes\":{},\"parked\":{},\"oldest_owed_age_s\":{},"
          "\"conflicts\":{},\"space\":{{\"objects\":{},\"bytes\":{},\"dirty_objects\":{},"
          "\"dirty_bytes\":{},\"clean_objects\":{},\"clean_bytes\":{},\"evicted_objects\":{},"
          "\"evicted_bytes\":{},\"pinned_bytes\":{},\"evictable_bytes\":{},\"lost_objects\":{},"
          "\"lost_bytes\":{},\"age_s\":{}}},"
          "\"reads\":{{\"hits\":{},\"misses\":{},\"hit_bytes\":{},\"miss_bytes\":{},"
          "\"hit_ratio\":{}}}}}",
          log::json_quoted(c.bucket), log::json_quoted(c.upstream),
          log::json_quoted(c.upstream_bucket), log::json_quoted(c.upstream_prefix),
          config::tier_mode_name(c.mode), health_name(h), log::json_quoted(b.probe_cause),
          owed.jobs, owed.bytes, owed.uploads, owed.copies, owed.deletes, owed.parked, oldest_s,
          b.conflicts, held.objects, held.bytes, held.dirty_objects, held.dirty_bytes,
          held.clean_objects, held.clean_bytes, held.remote_objects, held.remote_bytes,
          held.pinned_bytes, held.evictable_bytes, held.lost_objects, held.lost_bytes,
          space_ms == 0 ? -1 : space_age_s, hits, misses, reads.hit_bytes, reads.miss_bytes,
          ratio.empty() ? "null" : ratio);
      out.text = fmt::format(
          "bucket {} -> {}:{}/{} ({}): {}; queued {} ({}), parked {}, oldest {} s, conflicts {}\n",
          c.bucket, c.upstream, c.upstream_bucket, c.upstream_prefix,
          config::tier_mode_name(c.mode), health_name(h), owed.jobs, format_size(owed.bytes),
          owed.parked, oldest_s, b.conflicts);
      if (!b.probe_cause.empty()) out.text += fmt::format("  {}\n", b.probe_cause);
      if (owed.jobs > 0) {
        out.text += fmt::format("  queued: {} uploads, {} copies, {} deletes\n", owed.uploads,
                                owed.copies, owed.deletes);
      }
      if (space_ms != 0) {
        out.text += fmt::format(
            "  data: {} versions ({}): {} dirty ({}), {} clean ({}), {} evicted ({}); pinned {}, "
            "evictable {}\n",
            held.objects, format_size(held.bytes), held.dirty_objects,
            format_size(held.dirty_bytes), held.clean_objects, format_size(held.clean_bytes),
            held.remote_objects, format_size(held.remote_bytes), format_size(held.pinned_bytes),
            format_size(held.evictable_bytes));
        if (held.lost_objects > 0) {
          out.text += fmt::format(
              "  lost before upload: {} versions ({}): hots3 tier recover --accept-older or "
              "--forget\n",
              held.lost_objects, format_size(held.lost_bytes));
        }
      }
      out.text += fmt::format("  reads: {} hits ({}), {} misses ({}); hit ratio {}\n", hits,
                              format_size(reads.hit_bytes), misses, format_size(reads.miss_bytes),
                              ratio.empty() ? "-" : ratio);
      r.buckets.push_back(std::move(out));
    }
    const std::uint64_t owed_bytes = store.tier_owed_bytes();
    const std::uint64_t owed_max = store.tier_owed_max_bytes();
    const config::EvictConfig& ev = tier.evict;
    const std::uint64_t device = evictions.device_bytes.load();
    const std::uint64_t allocated = evictions.allocated_bytes.load();
    const std::uint64_t free = device > allocated ? device - allocated : 0;
    const std::uint64_t reading = fetches.load(std::memory_order_relaxed);
    r.totals_json = fmt::format(
        "\"owed_bytes\":{},\"owed_max_bytes\":{},\"reads_under_way\":{},\"device\":{{\"bytes\":{},"
        "\"allocated_bytes\":{},\"free_bytes\":{},\"peak_allocated_bytes\":{},"
        "\"evict_high_percent\":{},\"evict_low_percent\":{},\"full_percent\":{},\"evicted\":{},"
        "\"evicted_bytes\":{},\"evicted_recent\":{}}}",
        owed_bytes, owed_max, reading, device, allocated, free,
        evictions.peak_allocated_bytes.load(), ev.high_percent, ev.low_percent, ev.full_percent,
        evictions.objects.load(), evictions.bytes.load(), evictions.young.load());
    r.totals_text = fmt::format(
        "owed to upstreams: {} of {} allowed\nreads from upstreams under way: {}\ndevice: {} of {} "
        "allocated, {} free (peak {}; "
        "eviction from {}% ({}) to {}% ({}), full at {}%); evicted {} versions ({}), {} of them "
        "recent\n",
        format_size(owed_bytes), format_size(owed_max), reading, format_size(allocated),
        format_size(device), format_size(free), format_size(evictions.peak_allocated_bytes.load()),
        ev.high_percent, format_size(device / 100 * ev.high_percent), ev.low_percent,
        format_size(device / 100 * ev.low_percent), ev.full_percent, evictions.objects.load(),
        format_size(evictions.bytes.load()), evictions.young.load());
    const std::lock_guard lock(report_mutex);
    last_report = std::move(r);
  }

  // The last report's figures as Prometheus families (see Uploader::write_metrics).
  void write_metrics(metrics::Writer& w) const {
    const std::lock_guard lock(report_mutex);
    const Report& r = last_report;
    if (!r.made) return;
    auto n = [](auto v) { return static_cast<double>(v); };
    w.family("hots3_tier_upstream_state", "gauge",
             "1 for each upstream's state: ok, failing, unreachable or unknown (not heard yet)");
    for (const UpstreamReport& u : r.upstreams)
      w.sample("hots3_tier_upstream_state", {{"upstream", u.name}, {"state", u.state}}, 1);
    w.family("hots3_tier_upstream_failing_seconds", "gauge",
             "How long each upstream has been failing (0 when it is not)");
    for (const UpstreamReport& u : r.upstreams)
      w.sample("hots3_tier_upstream_failing_seconds", {{"upstream", u.name}}, n(u.failing_s));
    w.family("hots3_tier_upstream_bytes_total", "counter",
             "Body bytes to and from each upstream since start, by class of traffic");
    for (const UpstreamReport& u : r.upstreams) {
      for (std::size_t c = 0; c < kTrafficClasses; ++c) {
        w.sample("hots3_tier_upstream_bytes_total",
                 {{"upstream", u.name}, {"class", traffic_name(static_cast<Traffic>(c))}},
                 n(u.bytes[c]));
      }
    }
    w.family("hots3_tier_bucket_state", "gauge",
             "1 for each bound bucket's state: ok, degraded or behind");
    for (const BucketReport& b : r.buckets)
      w.sample("hots3_tier_bucket_state", {{"bucket", b.name}, {"state", health_name(b.health)}},
               1);
    w.family("hots3_tier_queued_jobs", "gauge",
             "Changes waiting for an upstream, by bucket and action (parked ones included)");
    for (const BucketReport& b : r.buckets) {
      w.sample("hots3_tier_queued_jobs", {{"bucket", b.name}, {"action", "upload"}},
               n(b.owed.uploads));
      w.sample("hots3_tier_queued_jobs", {{"bucket", b.name}, {"action", "copy"}},
               n(b.owed.copies));
      w.sample("hots3_tier_queued_jobs", {{"bucket", b.name}, {"action", "delete"}},
               n(b.owed.deletes));
    }
    w.family("hots3_tier_queued_bytes", "gauge", "Bytes of the changes waiting, by bucket");
    for (const BucketReport& b : r.buckets)
      w.sample("hots3_tier_queued_bytes", {{"bucket", b.name}}, n(b.owed.bytes));
    w.family("hots3_tier_parked_jobs", "gauge",
             "Changes no retry will send (hots3 tier status names them), by bucket");
    for (const BucketReport& b : r.buckets)
      w.sample("hots3_tier_parked_jobs", {{"bucket", b.name}}, n(b.owed.parked));
    w.family("hots3_tier_oldest_owed_age_seconds", "gauge",
             "Age of the oldest change not yet upstream, by bucket (0: none)");
    for (const BucketReport& b : r.buckets)
      w.sample("hots3_tier_oldest_owed_age_seconds", {{"bucket", b.name}}, n(b.oldest_s));
    w.family("hots3_tier_data_bytes", "gauge",
             "Where a bound bucket's data is: dirty (not yet upstream), clean, evicted (upstream "
             "only), pinned, evictable, lost (before upload)");
    for (const BucketReport& b : r.buckets) {
      const std::pair<std::string_view, std::uint64_t> kinds[] = {
          {"dirty", b.held.dirty_bytes},         {"clean", b.held.clean_bytes},
          {"evicted", b.held.remote_bytes},      {"pinned", b.held.pinned_bytes},
          {"evictable", b.held.evictable_bytes}, {"lost", b.held.lost_bytes}};
      for (const auto& [kind, bytes] : kinds)
        w.sample("hots3_tier_data_bytes", {{"bucket", b.name}, {"kind", kind}}, n(bytes));
    }
    // Reads and their bytes, by what answered them (x-hots3-cache).
    for (const auto& [name, help, totals] :
         {std::tuple{"hots3_tier_reads_total",
                     "GETs of a bound bucket's objects by what answered them (x-hots3-cache): hit "
                     "(the device), miss (the upstream), partial (both), revalidated (the device, "
                     "the upstream asked), stale (the device, the upstream not answering)",
                     &ReadCounts::Totals::count},
          std::tuple{"hots3_tier_read_bytes_total",
                     "Bytes those GETs asked for, by what answered them",
                     &ReadCounts::Totals::bytes}}) {
      w.family(name, "counter", help);
      for (const BucketReport& b : r.buckets) {
        for (std::size_t a = 0; a < kCacheAnswers; ++a) {
          w.sample(name,
                   {{"bucket", b.name}, {"result", cache_answer_name(static_cast<CacheAnswer>(a))}},
                   n((b.reads.*totals)[a]));
        }
      }
    }
    w.family("hots3_tier_coalesced_reads_total", "counter",
             "Reads that waited for another read's fetch of the same object or chunk instead of "
             "asking the upstream, by bucket");
    for (const BucketReport& b : r.buckets)
      w.sample("hots3_tier_coalesced_reads_total", {{"bucket", b.name}}, n(b.reads.coalesced));
    w.family("hots3_tier_revalidations_total", "counter",
             "Versions kept here checked with the upstream, by bucket and result");
    for (const BucketReport& b : r.buckets) {
      for (std::size_t v = 0; v < kRevalidationResults; ++v) {
        w.sample("hots3_tier_revalidations_total",
                 {{"bucket", b.name},
                  {"result", revalidation_result_name(static_cast<RevalidationResult>(v))}},
                 n(b.reads.revalidations[v]));
      }
    }
    // The rest is read as it is now: the bindings and upstreams do not change once running.
    if (!running.load(std::memory_order_acquire)) return;
    w.family("hots3_tier_cold_ttfb_seconds", "histogram",
             "Misses: from the read's start to its answer's head, sent once the upstream's first "
             "bytes are in, by bucket");
    for (const auto& [id, binding] : bindings) {
      w.histogram("hots3_tier_cold_ttfb_seconds", {{"bucket", binding.config.bucket}},
                  binding.reads->cold_ttfb.snapshot());
    }
    w.family("hots3_tier_upstream_requests_total", "counter",
             "Requests to each upstream by S3 operation and answer (\"error\": none came)");
    for (const auto& u : upstreams) {
      for (std::size_t op = 0; op < std::size(kUpstreamOps); ++op) {
        for (std::size_t a = 0; a < kUpstreamAnswers; ++a) {
          const std::uint64_t count = (*u->requests)[op][a].load(std::memory_order_relaxed);
          if (count == 0) continue;  // most pairs never happen
          const std::string status = a < std::size(kUpstreamStatuses)
                                         ? std::to_string(kUpstreamStatuses[a])
                                     : a == kUpstreamAnswers - 1 ? std::string("error")
                                                                 : std::string("other");
          w.sample("hots3_tier_upstream_requests_total",
                   {{"upstream", u->config.name}, {"op", kUpstreamOps[op]}, {"status", status}},
                   n(count));
        }
      }
    }
    w.family("hots3_tier_limiter_wait_seconds_total", "counter",
             "Time requests and their bytes waited for each upstream's limits: requests_per_s, "
             "write_bytes_per_s, read_bytes_per_s and the link's turn under bytes_per_s");
    for (const auto& u : upstreams) {
      for (std::size_t l = 0; l < std::size(kLimitNames); ++l) {
        w.sample("hots3_tier_limiter_wait_seconds_total",
                 {{"upstream", u->config.name}, {"limit", kLimitNames[l]}},
                 n(u->waited_us[l].load(std::memory_order_relaxed)) / 1e6);
      }
    }
    const config::EvictConfig& ev = tier.evict;
    w.family("hots3_tier_watermark_ratio", "gauge",
             "Device fullness marks: eviction starts above high and stops at low; above full, "
             "misses stream through uncached and write-back PUTs get SlowDown");
    w.sample("hots3_tier_watermark_ratio", {{"mark", "high"}}, ev.high_percent / 100.0);
    w.sample("hots3_tier_watermark_ratio", {{"mark", "low"}}, ev.low_percent / 100.0);
    w.sample("hots3_tier_watermark_ratio", {{"mark", "full"}}, ev.full_percent / 100.0);
  }

  // The last report, of every bound bucket or only of `bucket` (its state is then the bucket's).
  http::Probe health(bool text, std::string_view bucket) const {
    const std::lock_guard lock(report_mutex);
    const Report& r = last_report;
    if (!r.made) {
      return text ? http::Probe{503, "text/plain", "status: starting\n"}
                  : http::Probe{503, "application/json", "{\"status\":\"starting\"}\n"};
    }
    Health h = r.overall;
    std::string buckets_json;
    std::string buckets_text;
    bool found = false;
    for (const BucketReport& b : r.buckets) {
      if (!bucket.empty() && b.name != bucket) continue;
      found = true;
      if (!bucket.empty()) h = b.health;
      buckets_json += (buckets_json.empty() ? "" : ",") + b.json;
      buckets_text += b.text;
    }
    if (!bucket.empty() && !found) {
      const std::string why = fmt::format("no bucket named {} is bound to an upstream", bucket);
      return text ? http::Probe{404, "text/plain", why + "\n"}
                  : http::Probe{404, "application/json",
                                fmt::format("{{\"error\":{}}}\n", log::json_quoted(why))};
    }
    const unsigned status = h == Health::kOk ? 200 : 503;
    if (text) {
      return {status, "text/plain",
              fmt::format("status: {}\n{}{}{}", health_name(h), r.upstreams_text, buckets_text,
                          r.totals_text)};
    }
    return {status, "application/json",
            fmt::format("{{\"upstreams\":[{}],\"buckets\":[{}],{},\"status\":\"{}\"}}\n",
                        r.upstreams_json, buckets_json, r.totals_json, health_name(h))};
  }

  // Aborts the upstream multipart uploads under the binding's prefix that no job uses: begun
  // for a version a newer change replaced before a restart, or by a server since gone. They hold
  // space upstream and nothing will complete them. true: it spared an upload it could not tell
  // from one being begun (another of the same key), and should look again soon.
  asio::awaitable<bool> sweep_orphans(const Binding& b) {
    bool unsure = false;
    const std::int64_t abandoned = now_ms() - std::chrono::milliseconds(kTeedMax).count();
    std::erase_if(teed,
                  [abandoned](const auto& entry) { return entry.second->begun_ms < abandoned; });
    std::string key_marker;
    std::string id_marker;
    std::size_t aborted = 0;
    for (;;) {
      s3client::Request list;
      list.bucket = b.config.upstream_bucket;
      list.query = {{"uploads", ""}, {"prefix", b.config.upstream_prefix}};
      if (!key_marker.empty()) {
        list.query.push_back({"key-marker", key_marker});
        list.query.push_back({"upload-id-marker", id_marker});
      }
      auto listing = call(*b.upstream, std::move(list), std::string());
      auto listed = co_await std::move(listing);
      if (!listed || listed->head.status != 200) break;  // the probe reports why
      const auto doc = xml::XmlDocument::parse(listed->body);
      if (!doc) break;
      // Read after the listing: an upload listed and recorded before is among these.
      auto read = store.tier_upload_ids();
      auto ids = co_await std::move(read);
      if (!ids) break;
      const std::set<std::string> in_use(ids->begin(), ids->end());
      for (const xml::XmlElement& e : doc->root().children()) {
        if (e.name() != "Upload") continue;
        const auto key = e.child("Key");
        const auto id = e.child("UploadId");
        if (!key || !id || in_use.count(id->text()) != 0) continue;
        // Checked as each is reached, since aborts yield: uploads begun since the listing.
        if (live_uploads.count(id->text()) != 0 ||
            std::any_of(teed.begin(), teed.end(), [&](const auto& entry) {
              return entry.second->upstream_id == id->text();
            })) {
          continue;
        }
        if (creating.count(key->text()) != 0) {
          unsure = true;
          continue;
        }
        auto abort = abort_upload(b, key->text(), id->text());
        co_await std::move(abort);
        ++aborted;
      }
      const auto truncated = doc->root().child("IsTruncated");
      const auto next_key = doc->root().child("NextKeyMarker");
      const auto next_id = doc->root().child("NextUploadIdMarker");
      if (!truncated || truncated->text() != "true" || !next_key || !next_id ||
          (next_key->text() == key_marker && next_id->text() == id_marker)) {
        break;
      }
      key_marker = next_key->text();
      id_marker = next_id->text();
    }
    if (aborted > 0) {
      log::info("tier: bucket {}: {} upstream upload(s) no job uses were aborted", b.config.bucket,
                aborted);
    }
    co_return unsure;
  }

  // The bindings' probes (every kProbeInterval, or at once after a reload) and the sweep of
  // orphaned uploads (every kSweepInterval); apart from report(), so that an upstream that lets
  // a connection hang until its timeout does not hold the health report back.
  asio::awaitable<void> watch() {
    asio::steady_timer timer(io);
    std::int64_t next_sweep_ms = 0;
    while (!stopping) {
      if (now_ms() >= next_probe_ms) {
        next_probe_ms = now_ms() + std::chrono::milliseconds(kProbeInterval).count();
        for (auto& [id, b] : bindings) {
          if (stopping) co_return;
          auto asking = probe(b);
          co_await std::move(asking);
        }
      }
      if (now_ms() >= next_sweep_ms) {
        bool unsure = false;
        for (auto& [id, b] : bindings) {
          if (stopping) co_return;
          auto sweep = sweep_orphans(b);
          const bool spared = co_await std::move(sweep);
          unsure = unsure || spared;
        }
        next_sweep_ms =
            now_ms() + std::chrono::milliseconds(unsure ? kSweepRetry : kSweepInterval).count();
      }
      timer.expires_after(kReportInterval);
      co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    }
  }

  // Reads where the bound buckets' data is, kSpaceInterval (past kFewRows, or kPassShare times
  // the pass) after each reading ends: a pass over their catalog rows, apart from report() so that
  // a large catalog never holds the report back.
  asio::awaitable<void> read_space() {
    asio::steady_timer timer(io);
    while (!stopping) {
      std::vector<std::int64_t> ids;
      for (const auto& [id, b] : bindings) ids.push_back(id);
      const std::int64_t now = now_ms();
      const auto began = std::chrono::steady_clock::now();
      auto reading = store.tier_space(std::move(ids), now - tier.evict.min_resident.count());
      auto read = co_await std::move(reading);
      const auto pass = std::chrono::steady_clock::now() - began;
      std::chrono::steady_clock::duration pause = kSpaceInterval;
      if (read) {
        space = std::move(*read);
        space_ms = now;
        std::uint64_t evictable = 0;
        std::uint64_t rows = 0;
        for (const storage::TierSpace& b : space) {
          evictable += b.evictable_bytes;
          rows += b.objects;
        }
        evictable_total.store(evictable, std::memory_order_relaxed);
        pause = std::max(pause, pass_pause(pass, rows));
      } else {
        log::warn("tier: reading where the bound buckets' data is failed: {}",
                  read.error().message());
      }
      timer.expires_after(pause);
      co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    }
  }

  // Rebuilds the health report every kReportInterval (the upstreams' states as they are), with
  // the queue as last read: read again each time, or, past kFewRows, kPassShare times its pass
  // later.
  asio::awaitable<void> report() {
    asio::steady_timer timer(io);
    std::optional<std::vector<storage::TierBacklog>> backlog;
    auto read_again = std::chrono::steady_clock::now();
    while (!stopping) {
      if (std::chrono::steady_clock::now() >= read_again) {
        const auto began = std::chrono::steady_clock::now();
        auto reading = store.tier_backlog();
        auto read = co_await std::move(reading);
        const auto ended = std::chrono::steady_clock::now();
        if (read) {
          std::uint64_t jobs = 0;
          for (const storage::TierBacklog& b : *read) jobs += b.jobs;
          read_again = ended + pass_pause(ended - began, jobs);
          backlog = std::move(*read);
        } else {
          log::warn("tier: reading the write-back queue failed: {}", read.error().message());
        }
      }
      if (backlog) publish(*backlog);
      timer.expires_after(kReportInterval);
      co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    }
  }

  // Leaves the lanes a range's hashing joined, however the hashing ends.
  class InLanes {
   public:
    explicit InLanes(HashLanes& lanes) : lanes_(lanes) {}
    InLanes(const InLanes&) = delete;
    InLanes& operator=(const InLanes&) = delete;
    InLanes(InLanes&&) = delete;
    InLanes& operator=(InLanes&&) = delete;
    ~InLanes() { lanes_.leave(); }

   private:
    HashLanes& lanes_;
  };

  // A range's MD5 (what Content-MD5 carries), read from the version the job names.
  asio::awaitable<Result<std::optional<std::string>>> range_md5(const TierJob& job,
                                                                std::uint64_t offset,
                                                                std::uint64_t length) {
    auto open = store.open_reader(job.bucket_id, job.key);
    auto reader = co_await std::move(open);
    if (!reader) {
      if (reader.error() == errc::kNotFound) co_return std::optional<std::string>{};
      co_return reader.error();
    }
    if ((*reader)->object().id != *job.object_id) co_return std::optional<std::string>{};
    (*reader)->set_range(offset, length);
    // In this thread's lanes, with the pieces of the other parts under way: one MD5 stream is
    // sequential work (about 750 MB/s), and it held this thread, which sends every byte too, busy
    // for most of a drain.
    HashLanes& lanes = HashLanes::of(io);
    lanes.join();
    const InLanes in_lanes(lanes);
    const auto md5 = std::make_shared<Md5>();
    for (;;) {
      auto next = (*reader)->next();
      auto piece = co_await std::move(next);
      if (!piece) co_return piece.error();
      if (piece->empty()) break;
      // The piece stays the reader's until its next(): hashed before that.
      auto hashed = asio::async_initiate<decltype(asio::use_awaitable), void()>(
          [&lanes, md5, piece = *piece](auto handler) {
            auto resume = std::make_shared<decltype(handler)>(std::move(handler));
            lanes.submit(md5, piece, nullptr, [resume] { std::move (*resume)(); });
          },
          asio::use_awaitable);
      co_await std::move(hashed);
    }
    const auto digest = md5->finish();
    co_return std::optional<std::string>(aws::base64_encode(std::as_bytes(std::span(digest))));
  }

  // Sends [offset, offset + length) of the job's version as the body of `request`; the
  // upstream's answer (head and a small body). nullopt: the version is gone (superseded).
  struct Sent {
    unsigned status = 0;
    std::optional<std::string> etag;
    std::string body;
    bool checksum_echoed = false;  // the answer had an x-amz-checksum-* header
  };
  asio::awaitable<Result<std::optional<Sent>>> send_range(const Binding& b, const TierJob& job,
                                                          s3client::Request request,
                                                          std::uint64_t offset,
                                                          std::uint64_t length) {
    auto open = store.open_reader(job.bucket_id, job.key);
    auto reader = co_await std::move(open);
    if (!reader) {
      if (reader.error() == errc::kNotFound) co_return std::optional<Sent>{};
      co_return reader.error();
    }
    if ((*reader)->object().id != *job.object_id) co_return std::optional<Sent>{};
    (*reader)->set_range(offset, length);
    request.content_length = length;
    auto admit = admitted(*b.upstream);
    co_await std::move(admit);
    RequestTally tally(*b.upstream, request);
    auto start = b.upstream->client->start(std::move(request));
    auto call = co_await std::move(start);
    if (!call) co_return call.error();
    for (;;) {
      auto next = (*reader)->next();
      auto piece = co_await std::move(next);
      if (!piece) co_return piece.error();
      if (piece->empty()) break;
      if (stopping) co_return errc::kCancelled;
      auto paced = pace(*b.upstream, piece->size(), Traffic::kWriteback);
      co_await std::move(paced);
      if (stopping) co_return errc::kCancelled;
      auto write = (*call)->write_body(*piece);
      auto written = co_await std::move(write);
      if (!written) co_return written.error();
      n_sent.fetch_add(piece->size(), std::memory_order_relaxed);
    }
    auto answer = (*call)->response();
    auto head = co_await std::move(answer);
    if (!head) co_return head.error();
    tally.answered(head->status);
    auto read = (*call)->read_all(kAnswerBytesMax);
    auto body = co_await std::move(read);
    if (!body) co_return body.error();
    Sent sent{head->status, std::nullopt, std::move(*body), false};
    if (auto etag = head->find("ETag")) sent.etag = unquoted(*etag);
    sent.checksum_echoed =
        std::any_of(head->headers.begin(), head->headers.end(),
                    [](const http::Header& h) { return istarts_with(h.name, "x-amz-checksum-"); });
    co_return std::optional<Sent>(std::move(sent));
  }

  // A PUT of version `o` as `key` of the binding's upstream bucket, with its content headers,
  // its metadata and `conditions` (condition_headers).
  static s3client::Request object_put(const Binding& b, const ObjectRecord& o, std::string key,
                                      const std::vector<http::Header>& conditions) {
    s3client::Request request;
    request.method = "PUT";
    request.bucket = b.config.upstream_bucket;
    request.key = std::move(key);
    request.headers = object_headers(o);
    request.headers.insert(request.headers.end(), conditions.begin(), conditions.end());
    return request;
  }

  asio::awaitable<Outcome> put_single(const Binding& b, const TierJob& job, const ObjectRecord& o,
                                      std::string key, std::vector<http::Header> conditions) {
    s3client::Request request = object_put(b, o, std::move(key), conditions);
    // The ETag of a single-part object is its MD5 when the store computes MD5s; otherwise the
    // MD5 takes a first pass over the data.
    std::optional<std::string> md5;
    if (store.digest_is_md5() && o.etag.size() == 32) {
      if (auto raw = from_hex(o.etag)) md5 = aws::base64_encode(std::string_view(*raw));
    }
    if (!md5) {
      auto hash = range_md5(job, 0, o.size_bytes);
      auto hashed = co_await std::move(hash);
      if (!hashed) co_return failed("reading the object", hashed.error());
      if (!*hashed) co_return Outcome::superseded();
      md5 = std::move(**hashed);
    }
    request.headers.push_back({"Content-MD5", *md5});
    const auto checksums = b.upstream->config.checksums;
    if (checksums == config::UpstreamConfig::Checksums::kOn ||
        (checksums == config::UpstreamConfig::Checksums::kAuto && b.upstream->checksums_echoed)) {
      if (auto checksum = object_checksum(o)) request.headers.push_back(std::move(*checksum));
    }
    std::string expected;
    if (auto raw = aws::base64_decode(*md5)) {
      expected = to_hex({reinterpret_cast<const std::uint8_t*>(raw->data()), raw->size()});
    }
    const std::string what = fmt::format("PUT {}/{}", request.bucket, request.key);
    auto send = send_range(b, job, std::move(request), 0, o.size_bytes);
    auto sent = co_await std::move(send);
    if (!sent) co_return failed(what, sent.error());
    if (!*sent) co_return Outcome::superseded();
    if ((*sent)->checksum_echoed) b.upstream->checksums_echoed = true;
    Outcome out = judge(what, (*sent)->status, (*sent)->body);
    out.expected = std::move(expected);
    if (out.kind != Outcome::Kind::kDone) co_return out;
    out.seen = storage::TierSeen{(*sent)->etag.value_or(o.etag), o.etag};
    out.bytes = o.size_bytes;
    co_return out;
  }

  // CopyObject from where the upstream already holds the version's data (a rename, a copy, new
  // metadata), with the version's metadata. nullopt: the source is not what it was (gone, or
  // another ETag): the data must be sent.
  asio::awaitable<std::optional<Outcome>> copy_single(const Binding& b, const ObjectRecord& o,
                                                      std::string key,
                                                      std::vector<http::Header> conditions,
                                                      CopyFrom from) {
    s3client::Request request = object_put(b, o, std::move(key), conditions);
    copy_from(b, request, from);
    request.headers.push_back({"x-amz-metadata-directive", "REPLACE"});
    const std::string what =
        fmt::format("copy of {} to {}/{}", from.key, request.bucket, request.key);
    auto copying = call(*b.upstream, std::move(request), std::string());
    auto copied = co_await std::move(copying);
    if (!copied) co_return failed(what, copied.error());
    const unsigned status = answered(copied->head.status, copied->body);
    if (status == 404 || status == 412) {
      // The source went away or changed; a 412 may also be the destination's condition, which
      // the upload answers in its turn.
      log::debug("tier: {} refused (HTTP {}): the data is sent instead", what, status);
      co_return std::nullopt;
    }
    Outcome out = judge(what, status, copied->body);
    if (out.kind != Outcome::Kind::kDone) co_return out;
    const std::string etag = copy_result_etag(copied->body);
    out.seen = storage::TierSeen{etag.empty() ? from.etag : etag, o.etag};
    out.bytes = o.size_bytes;
    co_return out;
  }

  // Makes `request` copy its data from `from` in the binding's upstream bucket, as long as that
  // still has the ETag it had.
  static void copy_from(const Binding& b, s3client::Request& request, const CopyFrom& from) {
    request.headers.push_back(
        {"x-amz-copy-source",
         aws::uri_encode(b.config.upstream_bucket, true) + "/" + aws::uri_encode(from.key, false)});
    request.headers.push_back({"x-amz-copy-source-if-match", "\"" + from.etag + "\""});
  }

  // Whether the upstream still has multipart upload `upload_id` of `key` (ListParts of one
  // part). nullopt: it did not say.
  asio::awaitable<std::optional<bool>> upload_exists(const Binding& b, std::string key,
                                                     std::string upload_id) {
    s3client::Request list;
    list.bucket = b.config.upstream_bucket;
    list.key = std::move(key);
    list.query = {{"max-parts", "1"}, {"uploadId", std::move(upload_id)}};
    auto listing = call(*b.upstream, std::move(list), std::string());
    auto listed = co_await std::move(listing);
    if (!listed) co_return std::nullopt;
    if (listed->head.status == 200) co_return true;
    const auto e = s3client::parse_error(listed->body);
    if (listed->head.status == 404 && e && e->code == "NoSuchUpload") co_return false;
    co_return std::nullopt;
  }

  // What set_tier_upload answers for an upload the job does not keep.
  static asio::awaitable<Result<bool>> nothing_to_keep() { co_return true; }

  // Ends an upstream multipart upload that will not be completed: it holds space there.
  // (By value: a coroutine keeps its parameters, and a reference would outlive a temporary.)
  asio::awaitable<void> abort_upload(const Binding& b, std::string key, std::string upload_id) {
    s3client::Request abort;
    abort.method = "DELETE";
    abort.bucket = b.config.upstream_bucket;
    abort.key = key;
    abort.query = {{"uploadId", upload_id}};
    auto aborting = call(*b.upstream, std::move(abort), std::string());
    auto aborted = co_await std::move(aborting);
    if (!aborted || (aborted->head.status / 100 != 2 && aborted->head.status != 404)) {
      log::debug("tier: abort of upload {} of {}/{} failed", upload_id, b.config.upstream_bucket,
                 key);
    }
  }

  // A multipart object keeps its part boundaries upstream (so the upstream's ETag is ours); a
  // large single-part object goes up in parts of part_size, and so does an object whose parts
  // S3 would refuse (appends leave parts under 5 MiB): its upstream ETag is then kept apart.
  // The upload id and each confirmed part are in the catalog (the job's), so that the next
  // attempt, after a failure or a restart, sends only the parts not yet confirmed.
  // `conditions` go with the Complete. With `from`, each part is copied from there (UploadPartCopy)
  // until the upstream refuses a copy; the parts after it are sent.
  asio::awaitable<Outcome> put_multipart(const Binding& b, const TierJob& job,
                                         const ObjectRecord& o, std::string key,
                                         std::vector<http::Header> conditions,
                                         std::optional<CopyFrom> from) {
    std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;  // offset, length
    if (o.parts_count > 0) {
      auto list = store.object_parts(o.id);
      auto parts = co_await std::move(list);
      if (!parts) co_return failed("reading the part table", parts.error());
      for (const auto& p : *parts) ranges.emplace_back(p.offset_bytes, p.size_bytes);
      const bool acceptable = std::all_of(ranges.begin(), ranges.end() - (ranges.empty() ? 0 : 1),
                                          [](const auto& r) { return r.second >= kPartMin; });
      if (!acceptable) ranges.clear();
    }
    if (ranges.empty()) {
      // S3's limit of 10,000 parts decides the part size of very large objects.
      const std::uint64_t step =
          std::max(tier.writeback.part_size_bytes, (o.size_bytes + kPartsMax - 1) / kPartsMax);
      for (std::uint64_t at = 0; at < o.size_bytes; at += step) {
        ranges.emplace_back(at, std::min(step, o.size_bytes - at));
      }
    }
    const std::string what =
        fmt::format("multipart upload of {}/{}", b.config.upstream_bucket, key);

    // The upload a former attempt began, and what of it the upstream has. The job keeps the
    // upload of its key only: a conflict's side copy starts again when it is retried.
    const bool resumable = key == b.config.upstream_prefix + o.key;
    std::string upload_id = resumable ? job.upload_id : std::string();
    std::vector<std::optional<std::string>> confirmed(ranges.size());  // ETag by part index
    if (!upload_id.empty()) {
      auto list = store.tier_parts(job.seq);
      auto parts = co_await std::move(list);
      if (!parts) co_return failed("reading the catalog", parts.error());
      bool same_parts = true;  // a part_size changed since would make other parts
      for (const storage::TierPart& p : *parts) {
        if (p.part_number == 0 || p.part_number > ranges.size() ||
            ranges[p.part_number - 1].second != p.size_bytes) {
          same_parts = false;
          break;
        }
        confirmed[p.part_number - 1] = p.etag;
      }
      if (!same_parts) {
        auto abort = abort_upload(b, key, upload_id);
        co_await std::move(abort);
        upload_id.clear();
        std::fill(confirmed.begin(), confirmed.end(), std::nullopt);
      }
    }
    std::optional<LiveUpload> live;
    if (!upload_id.empty()) {
      live.emplace(live_uploads, upload_id);
    } else {
      auto begin = begin_upload(b, key, object_headers(o), upload_id);
      const Outcome begun = co_await std::move(begin);
      if (begun.kind != Outcome::Kind::kDone) co_return begun;
      live.emplace(live_uploads, upload_id);
      auto keep = resumable ? store.set_tier_upload(job, upload_id) : nothing_to_keep();
      auto kept = co_await std::move(keep);
      if (!kept || !*kept) {
        auto abort = abort_upload(b, key, upload_id);
        co_await std::move(abort);
        if (!kept) co_return failed("recording the upload", kept.error());
        co_return Outcome::superseded();
      }
    }

    // Keeps a part the upstream confirmed for the next attempt. false: the job was superseded.
    const auto record_part = [&](std::size_t index, std::uint64_t length,
                                 std::string etag) -> asio::awaitable<Result<bool>> {
      confirmed[index] = etag;
      if (!resumable) co_return true;
      auto record = store.add_tier_part(
          job, {static_cast<std::uint32_t>(index + 1), length, std::move(etag)});
      co_return co_await std::move(record);
    };
    bool upload_gone = false;  // NoSuchUpload: aborted or expired upstream; a new one is needed
    const auto gone = [&upload_gone](unsigned status, std::string_view code) {
      upload_gone = status == 404 && code == "NoSuchUpload";
    };
    auto finish = [&]() -> asio::awaitable<Outcome> {
      xml::XmlWriter complete("CompleteMultipartUpload", "http://s3.amazonaws.com/doc/2006-03-01/");
      for (std::size_t i = 0; i < ranges.size(); ++i) {
        const auto [offset, length] = ranges[i];
        const std::string part = std::to_string(i + 1);
        if (!confirmed[i] && from) {
          auto copy = copy_part(b, key, upload_id, i + 1, *from, offset, length);
          auto copied = co_await std::move(copy);
          if (!copied) {
            from.reset();  // the source is not what it was: the data goes instead
          } else if (copied->kind != Outcome::Kind::kDone) {
            gone(copied->status, copied->code);
            co_return *copied;
          } else {
            auto record = record_part(i, length, copied->expected);
            auto recorded = co_await std::move(record);
            if (!recorded) co_return failed("recording a part", recorded.error());
            if (!*recorded) co_return Outcome::superseded();
          }
        }
        if (!confirmed[i]) {
          auto hash = range_md5(job, offset, length);
          auto hashed = co_await std::move(hash);
          if (!hashed) co_return failed("reading the object", hashed.error());
          if (!*hashed) co_return Outcome::superseded();
          s3client::Request put;
          put.method = "PUT";
          put.bucket = b.config.upstream_bucket;
          put.key = key;
          put.query = {{"partNumber", part}, {"uploadId", upload_id}};
          put.headers.push_back({"Content-MD5", **hashed});
          auto send = send_range(b, job, std::move(put), offset, length);
          auto sent = co_await std::move(send);
          const std::string part_what = fmt::format("{} (part {})", what, part);
          if (!sent) {
            // An upstream may refuse a part of an upload it no longer has (aborted, expired)
            // before reading its body, and close: the body's write fails before the answer
            // is read. Whether the upload is still there decides the next attempt.
            auto check = upload_exists(b, key, upload_id);
            if (auto exists = co_await std::move(check); exists && !*exists) upload_gone = true;
            co_return failed(part_what, sent.error());
          }
          if (!*sent) co_return Outcome::superseded();
          if (Outcome out = judge(part_what, (*sent)->status, (*sent)->body);
              out.kind != Outcome::Kind::kDone) {
            gone(out.status, out.code);
            co_return out;
          }
          if (!(*sent)->etag) co_return malformed(part_what, "no ETag in the answer");
          auto record = record_part(i, length, *(*sent)->etag);
          auto recorded = co_await std::move(record);
          if (!recorded) co_return failed("recording a part", recorded.error());
          if (!*recorded) co_return Outcome::superseded();
        }
        complete.open("Part");
        complete.element("PartNumber", part);
        complete.element("ETag", "\"" + *confirmed[i] + "\"");
        complete.close();
      }
      s3client::Request done;
      done.method = "POST";
      done.bucket = b.config.upstream_bucket;
      done.key = key;
      done.query = {{"uploadId", upload_id}};
      done.headers = conditions;
      std::vector<std::string_view> part_etags;
      part_etags.reserve(confirmed.size());
      for (const auto& etag : confirmed) part_etags.emplace_back(*etag);  // all confirmed by now
      const std::string expected = aws::multipart_etag(part_etags, part_etags.size());
      auto completing = call(*b.upstream, std::move(done), complete.finish());
      auto completed = co_await std::move(completing);
      if (!completed) co_return failed(what, completed.error());
      Outcome out = judge(what, answered(completed->head.status, completed->body), completed->body);
      out.expected = expected;
      gone(out.status, out.code);
      // A part it holds is not the one recorded (a write-through part sent again whose commit
      // here never came): the upload is of no use, and a new one sends every part.
      if (out.status == 400 && out.code == "InvalidPart") upload_gone = true;
      if (out.kind != Outcome::Kind::kDone) co_return out;
      // Some upstreams (Ceph RGW) answer an empty ETag: the one S3 would give is the reference.
      std::string theirs = copy_result_etag(completed->body);
      if (theirs.empty()) theirs = expected;
      out.seen = storage::TierSeen{std::move(theirs), o.etag};
      out.bytes = o.size_bytes;
      co_return out;
    };
    auto attempt = finish();
    Outcome out = co_await std::move(attempt);
    if (upload_gone) {
      // Nothing of it is left upstream, or nothing of use: the next attempt begins anew (it is
      // retried; an upload of no use is an orphan the sweep aborts).
      if (resumable) {
        auto forget = store.set_tier_upload(job, "");
        co_await std::move(forget);
      }
      out.kind = Outcome::Kind::kRetry;
    } else if (out.kind == Outcome::Kind::kPark || out.kind == Outcome::Kind::kSuperseded ||
               (out.kind == Outcome::Kind::kRetry && !resumable)) {
      // It will not be completed. A retry keeps the key's own upload, and its confirmed parts,
      // for the next attempt.
      auto abort = abort_upload(b, key, upload_id);
      co_await std::move(abort);
      if (out.kind == Outcome::Kind::kPark && resumable) {
        auto forget = store.set_tier_upload(job, "");
        co_await std::move(forget);
      }
    }
    co_return out;
  }

  // UploadPartCopy of [offset, offset + length) of `from` as part `number`; the Outcome's
  // `expected` is the part's ETag. nullopt: the source is not what it was.
  asio::awaitable<std::optional<Outcome>> copy_part(const Binding& b, std::string key,
                                                    std::string upload_id, std::size_t number,
                                                    CopyFrom from, std::uint64_t offset,
                                                    std::uint64_t length) {
    s3client::Request put;
    put.method = "PUT";
    put.bucket = b.config.upstream_bucket;
    put.key = std::move(key);
    put.query = {{"partNumber", std::to_string(number)}, {"uploadId", std::move(upload_id)}};
    copy_from(b, put, from);
    put.headers.push_back(
        {"x-amz-copy-source-range", fmt::format("bytes={}-{}", offset, offset + length - 1)});
    const std::string what =
        fmt::format("copy of {} to {}/{} (part {})", from.key, put.bucket, put.key, number);
    auto copying = call(*b.upstream, std::move(put), std::string());
    auto copied = co_await std::move(copying);
    if (!copied) co_return failed(what, copied.error());
    const unsigned status = answered(copied->head.status, copied->body);
    Outcome out = judge(what, status, copied->body);
    if (status == 412 || (status == 404 && out.code != "NoSuchUpload")) co_return std::nullopt;
    if (out.kind != Outcome::Kind::kDone) co_return out;
    out.expected = copy_result_etag(copied->body);
    if (out.expected.empty()) co_return malformed(what, "no ETag in the answer");
    co_return out;
  }

  // The version's bytes go up as one PUT, or as a multipart upload; copied upstream when `from`.
  asio::awaitable<Outcome> send(const Binding& b, const TierJob& job, const ObjectRecord& o,
                                std::string key, std::vector<http::Header> conditions,
                                std::optional<CopyFrom> from) {
    if (o.parts_count > 0 || o.size_bytes > tier.writeback.multipart_threshold_bytes) {
      auto op = put_multipart(b, job, o, std::move(key), std::move(conditions), std::move(from));
      co_return co_await std::move(op);
    }
    if (from) {
      auto copy = copy_single(b, o, key, conditions, *from);
      auto copied = co_await std::move(copy);
      if (copied) co_return std::move(*copied);
    }
    auto op = put_single(b, job, o, std::move(key), std::move(conditions));
    co_return co_await std::move(op);
  }

  asio::awaitable<Outcome> upload(Binding& b, const TierJob& job) {
    auto found = store.head(job.bucket_id, job.key);
    if (!found) co_return failed("reading the catalog", found.error());
    if (!*found || (*found)->id != *job.object_id) co_return Outcome::superseded();
    const ObjectRecord object = **found;
    const bool lost = object.tier_state == storage::TierState::kLost;
    auto read = store.tier_seen(job.bucket_id, job.key);
    auto seen = co_await std::move(read);
    if (!seen) co_return failed("reading the catalog", seen.error());
    // A version renamed or copied from a key whose upstream copy holds its data is copied there.
    std::optional<CopyFrom> from;
    if (!job.source_key.empty()) {
      auto source = store.tier_seen(job.bucket_id, job.source_key);
      auto held = co_await std::move(source);
      if (!held) co_return failed("reading the catalog", held.error());
      if (*held && !(*held)->ours.empty() && (*held)->ours == object.etag) {
        from = CopyFrom{b.config.upstream_prefix + job.source_key, (*held)->etag};
      }
    }
    // A version whose data went with a lost device (tier recover) can only be copied upstream
    // from where its data is there; else only the operator settles it.
    const auto lost_here = [&job] {
      return Outcome::failure(Outcome::Kind::kPark, Outcome::Source::kLocal, "uploading " + job.key,
                              storage::kLostCause);
    };
    if (lost && !from) co_return lost_here();
    const std::string key = b.config.upstream_prefix + object.key;
    std::vector<http::Header> conditions;
    if (b.conditional()) conditions = condition_headers(*b.upstream, *seen);
    auto attempt = send(b, job, object, key, conditions, from);
    Outcome out = co_await std::move(attempt);
    if (out.status == 501 && !conditions.empty()) {
      // An upstream without conditional writes: its keys are written as they come.
      log::warn(
          "tier: upstream {} refuses conditional writes ({}); writes to it are no longer "
          "checked for conflicts",
          b.upstream->config.name, out.cause);
      b.upstream->conditional = false;
      auto again = send(b, job, object, key, {}, from);
      out = co_await std::move(again);
    }
    if (!conditions.empty() &&
        (out.status == 412 || (out.status == 404 && out.code == "NoSuchKey"))) {
      auto settle =
          settle_conflict(b, job, object, key, std::move(out), from, if_match_sent(conditions));
      out = co_await std::move(settle);
    }
    if (lost && out.kind != Outcome::Kind::kDone && out.source == Outcome::Source::kLocal) {
      // The copy was refused (sending the data instead would need it here): its source changed,
      // or a copy of ours whose answer was lost is there already. What the key holds says which.
      Outcome refused = std::move(out);
      refused.expected = from->etag;
      auto settle = settle_conflict(b, job, object, key, std::move(refused), from, "");
      out = co_await std::move(settle);
      if (out.kind != Outcome::Kind::kDone && out.source == Outcome::Source::kLocal)
        co_return lost_here();
    }
    co_return out;
  }

  // The upstream refused a conditional write of the version: the key does not hold what was
  // last seen there. A HEAD says what it holds. Our own attempt whose answer was lost: done.
  // Nothing: written again (unconditionally new). Another writer's version: a conflict, which
  // writeback.on_conflict settles.
  // `from`: where the upstream holds the version's data (a rename or copy): writes copy it there.
  // `sent`: the write's If-Match ("" for none).
  asio::awaitable<Outcome> settle_conflict(Binding& b, const TierJob& job, const ObjectRecord& o,
                                           std::string key, Outcome refused,
                                           std::optional<CopyFrom> from, std::string sent) {
    s3client::Request head;
    head.method = "HEAD";
    head.bucket = b.config.upstream_bucket;
    head.key = key;
    const std::string what = fmt::format("HEAD {}/{}", head.bucket, head.key);
    auto asking = call(*b.upstream, std::move(head), std::string());
    auto answer = co_await std::move(asking);
    if (!answer) co_return failed(what, answer.error());
    if (answer->head.status == 404) {
      auto forget = store.set_tier_seen(job.bucket_id, job.key, std::nullopt);
      co_await std::move(forget);
      refused.kind = Outcome::Kind::kRetry;  // If-None-Match: * next time
      co_return refused;
    }
    Outcome out = judge(what, answer->head.status, answer->body);
    if (out.kind != Outcome::Kind::kDone) co_return out;
    const std::string theirs = unquoted(answer->head.find("ETag").value_or(""));
    if (!refused.expected.empty() && theirs == refused.expected) {
      out.seen = storage::TierSeen{theirs, o.etag};
      out.bytes = o.size_bytes;
      co_return out;
    }
    if (misread_if_match(*b.upstream, sent, theirs)) {
      refused.kind = Outcome::Kind::kRetry;
      co_return refused;
    }
    if (!theirs.empty() && listed_in(job.prior_etags, theirs)) {
      // A version of ours this one replaced, whose upload was never confirmed (a kill after
      // the upstream's answer): replaced in turn.
      auto again =
          send(b, job, o, key, condition_headers(*b.upstream, storage::TierSeen{theirs, ""}), from);
      co_return co_await std::move(again);
    }
    // Counted once settled (a side copy that fails is retried, and meets the conflict again).
    const auto settled = [this, &b](const Outcome& result) {
      if (result.kind != Outcome::Kind::kDone) return;
      ++b.conflicts;
      n_conflicts.fetch_add(1, std::memory_order_relaxed);
    };
    const storage::TierSeen other{theirs, ""};
    switch (tier.writeback.on_conflict) {
      case config::WritebackConfig::OnConflict::kOverwrite: {
        log::warn(
            "tier: conflict: {}/{} was written upstream by another writer (ETag {}); "
            "overwritten with ours (on_conflict = overwrite)",
            b.config.upstream_bucket, key, theirs);
        auto again = send(b, job, o, key, condition_headers(*b.upstream, other), from);
        out = co_await std::move(again);
        settled(out);
        co_return out;
      }
      case config::WritebackConfig::OnConflict::kKeepUpstream:
        if (o.tier_state == storage::TierState::kLost) {
          // Theirs kept, ours would be nowhere once its source goes: the operator settles it.
          co_return Outcome::failure(Outcome::Kind::kPark, Outcome::Source::kLocal,
                                     "uploading " + job.key, storage::kLostCause);
        }
        log::warn(
            "tier: conflict: {}/{} was written upstream by another writer (ETag {}); "
            "theirs is kept, ours stays here only (on_conflict = keep-upstream)",
            b.config.upstream_bucket, key, theirs);
        out.seen = other;
        settled(out);
        co_return out;
      case config::WritebackConfig::OnConflict::kSideCopy: {
        // Named after the change, so that a retry writes the same side copy.
        const std::string side = fmt::format("{}.hots3-conflict-{}", key, job.first_ms);
        log::warn(
            "tier: conflict: {}/{} was written upstream by another writer (ETag {}); "
            "theirs is kept, ours goes to {}",
            b.config.upstream_bucket, key, theirs, side);
        auto beside = send(b, job, o, side, {}, from);
        out = co_await std::move(beside);
        if (out.kind == Outcome::Kind::kDone) out.seen = other;
        settled(out);
        co_return out;
      }
    }
    co_return out;
  }

  // A write-through PUT, fed through `passage`: waits for the key's turn, sends the body as it
  // comes (conditional like an upload), answers, then holds the key until the request lets go.
  asio::awaitable<void> pass_through(std::int64_t bucket_id, std::string key, std::uint64_t length,
                                     std::vector<http::Header> headers,
                                     std::shared_ptr<Passage> passage) {
    const std::pair<std::int64_t, std::string> id{bucket_id, key};
    bool held = false;
    UpstreamAnswer answer;
    const auto bound = bindings.find(bucket_id);
    if (bound == bindings.end()) {
      answer.cause = "the bucket is not bound to an upstream";
    } else {
      asio::steady_timer timer(io);
      const auto deadline = std::chrono::steady_clock::now() + kPassageTurnMax;
      while ((in_flight.count(id) != 0 || through.count(id) != 0) && !stopping &&
             std::chrono::steady_clock::now() < deadline) {
        timer.expires_after(std::chrono::milliseconds(5));
        co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
      }
      if (stopping) {
        answer.cause = "the server is stopping";
      } else if (in_flight.count(id) != 0 || through.count(id) != 0) {
        answer.cause = "an earlier change of the key is still on its way to the upstream";
      } else {
        through.insert(id);
        held = true;
        auto sending = send_through(bound->second, key, length, std::move(headers), *passage);
        answer = co_await std::move(sending);
      }
    }
    passage->answer.try_send(boost::system::error_code{}, std::move(answer));
    auto dropping = drop_rest(*passage);
    co_await std::move(dropping);
    if (!held) co_return;
    // The request lets the key go once it has committed, or given up.
    auto [e] = co_await passage->done.async_receive(asio::as_tuple(asio::use_awaitable));
    (void)e;
    through.erase(id);
    wake.cancel();
  }

  asio::awaitable<UpstreamAnswer> send_through(Binding& b, const std::string& key,
                                               std::uint64_t length,
                                               std::vector<http::Header> headers,
                                               Passage& passage) {
    Upstream& u = *b.upstream;
    UpstreamAnswer answer;
    auto read = store.tier_seen(b.bucket_id, key);
    auto seen = co_await std::move(read);
    if (!seen) {
      answer.cause = "reading the catalog: " + seen.error().message();
      co_return answer;
    }
    const bool conditional = b.conditional();
    std::vector<http::Header> request_conditions;
    if (conditional) {
      request_conditions = condition_headers(u, *seen);
      headers.insert(headers.end(), request_conditions.begin(), request_conditions.end());
    }
    const std::string upstream_key = b.config.upstream_prefix + key;
    s3client::Request request;
    request.method = "PUT";
    request.bucket = b.config.upstream_bucket;
    request.key = upstream_key;
    request.headers = std::move(headers);
    request.content_length = length;
    const std::string what = fmt::format("PUT {}/{}", request.bucket, upstream_key);
    auto passing = pass_body(u, std::move(request), what, passage);
    Passed passed = co_await std::move(passing);
    if (passed.kind != Passed::Kind::kAnswered) {
      answer.cause = std::move(passed.cause);
      if (passed.kind != Passed::Kind::kLost) co_return answer;
      auto settling = settle_unknown(b, key, std::move(answer.cause), passage.expected_etag);
      co_return co_await std::move(settling);
    }
    const std::optional<http::ClientResponseHead>& head = passed.head;
    Outcome out = judge(what, head->status, passed.body);
    note(u, out);
    adapt(u, out);
    if (out.kind == Outcome::Kind::kDone) {
      answer.kind = UpstreamAnswer::Kind::kStored;
      answer.etag = unquoted(head->find("ETag").value_or(""));
      n_uploaded.fetch_add(1, std::memory_order_relaxed);
      n_bytes.fetch_add(length, std::memory_order_relaxed);
      co_return answer;
    }
    if (out.status == 501 && conditional) {
      log::warn(
          "tier: upstream {} refuses conditional writes ({}); writes to it are no longer "
          "checked for conflicts",
          u.config.name, out.cause);
      u.conditional = false;
    } else if (conditional &&
               (out.status == 412 || (out.status == 404 && out.code == "NoSuchKey"))) {
      // The key upstream is not what was last seen there: refused once, and what it holds is
      // recorded, so that the client's next PUT replaces it knowingly. This very body (a retry
      // of a PUT whose answer was lost) is stored already. Another version of ours whose answer
      // was lost (the key's job lists it), or none, is no conflict: the client retries the 503.
      auto ask = upstream_etag(b, key);
      auto theirs = co_await std::move(ask);
      if (theirs && !theirs->empty() && *theirs == passage.expected_etag) {
        answer.kind = UpstreamAnswer::Kind::kStored;
        answer.etag = *theirs;
        co_return answer;
      }
      if (theirs && misread_if_match(u, if_match_sent(request_conditions), *theirs)) {
        answer.cause = "the upstream misread the PUT's If-Match";  // the client's retry goes on
        co_return answer;
      }
      if (theirs) {
        auto find = store.tier_job(b.bucket_id, key);
        auto job = co_await std::move(find);
        const bool queued = job && *job;
        const bool ours = !theirs->empty() && queued && listed_in((*job)->prior_etags, *theirs);
        // A change of the key queued before this PUT (not the request's own job) still owes
        // the upstream its version: it meets the other writer's itself, and settles it by
        // writeback.on_conflict, which a recorded ETag of theirs would let it overwrite.
        if (ours || !queued || (*job)->seq == passage.own_job) {
          auto record = store.set_tier_seen(
              b.bucket_id, key,
              theirs->empty() ? std::nullopt : std::optional(storage::TierSeen{*theirs, ""}));
          co_await std::move(record);
        }
        if (ours || theirs->empty()) {
          answer.cause = ours ? "the upstream held an unconfirmed version of ours"
                              : "another writer deleted the key upstream";
          co_return answer;
        }
      }
      ++b.conflicts;
      n_conflicts.fetch_add(1, std::memory_order_relaxed);
      log::warn(
          "tier: conflict: {}/{} was written upstream by another writer; the write-through "
          "PUT is refused",
          b.config.upstream_bucket, upstream_key);
      answer.kind = UpstreamAnswer::Kind::kConflict;
      answer.cause = out.cause;
      co_return answer;
    }
    if (out.status == 412 && !conditional) {
      // Only the client's own conditions were sent (cache mode): theirs to hear.
      answer.kind = UpstreamAnswer::Kind::kPreconditionFailed;
      answer.cause = out.cause;
      co_return answer;
    }
    if (out.status >= 500) {
      // A server error after the whole body may come after the upstream stored it.
      auto settling = settle_unknown(b, key, out.cause, passage.expected_etag);
      co_return co_await std::move(settling);
    }
    answer.kind = UpstreamAnswer::Kind::kFailed;
    answer.cause = out.cause;
    co_return answer;
  }

  // What became of a body passed through to the upstream.
  struct Passed {
    enum class Kind {
      kCut,       // not sent whole (the request gave up, or the length was wrong): not stored
      kFailed,    // the upstream, or the way to it, failed before the body was whole
      kLost,      // sent whole without an answer: the upstream may hold it
      kAnswered,  // `head` and `body` are its answer
    } kind = Kind::kCut;
    std::string cause;
    std::optional<http::ClientResponseHead> head;
    std::string body;
  };

  // Sends `request` with the body the request passes through `passage`, admitted into the
  // upstream's window and paced like an upload. The empty piece ends the body (the request has
  // verified it); a closed channel cuts it off, so the upstream never completes it.
  asio::awaitable<Passed> pass_body(Upstream& u, s3client::Request request, const std::string& what,
                                    Passage& passage) {
    Passed passed;
    const std::uint64_t length = request.content_length;
    // The next piece from the request; nullopt when it gave up.
    const auto next = [&passage]() -> asio::awaitable<std::optional<std::vector<std::byte>>> {
      auto [e, got] = co_await passage.pieces.async_receive(asio::as_tuple(asio::use_awaitable));
      if (e) co_return std::nullopt;
      co_return std::move(got);
    };
    const auto fail = [&](Passed::Kind kind, const Outcome& out) {
      note(u, out);
      passed.kind = kind;
      passed.cause = out.cause;
      return std::move(passed);
    };
    std::optional<std::vector<std::byte>> piece;
    if (length == 0) {
      // Nothing of an empty body can be held back: its request starts once it is verified.
      auto receiving = next();
      piece = co_await std::move(receiving);
      if (!piece) co_return passed;
    }
    auto admit = admitted(u);
    co_await std::move(admit);
    RequestTally tally(u, request);
    auto start = u.client->start(std::move(request));
    auto call = co_await std::move(start);
    if (!call) co_return fail(Passed::Kind::kFailed, failed(what, call.error()));
    std::uint64_t sent = 0;
    for (;;) {
      if (!piece) {
        auto receiving = next();
        piece = co_await std::move(receiving);
        if (!piece) co_return passed;
      }
      if (piece->empty()) break;
      if (stopping) {
        passed.cause = "the server is stopping";
        co_return passed;
      }
      if (sent + piece->size() > length) {
        passed.cause = "the body is longer than its declared length";
        co_return passed;
      }
      auto paced = pace(u, piece->size(), Traffic::kForeground);
      co_await std::move(paced);
      auto write = (*call)->write_body(*piece);
      auto written = co_await std::move(write);
      if (!written) co_return fail(Passed::Kind::kFailed, failed(what, written.error()));
      sent += piece->size();
      n_sent.fetch_add(piece->size(), std::memory_order_relaxed);
      piece.reset();
    }
    if (sent != length) {
      passed.cause = "the body is shorter than its declared length";
      co_return passed;
    }
    // The body is whole upstream: from here, a failure leaves the upstream's state unknown.
    auto reply = (*call)->response();
    auto head = co_await std::move(reply);
    if (!head) co_return fail(Passed::Kind::kLost, failed(what, head.error()));
    tally.answered(head->status);
    auto read_body = (*call)->read_all(kAnswerBytesMax);
    auto body = co_await std::move(read_body);
    if (!body) co_return fail(Passed::Kind::kLost, failed(what, body.error()));
    passed.kind = Passed::Kind::kAnswered;
    passed.head = std::move(*head);
    passed.body = std::move(*body);
    co_return passed;
  }

  // A write-through PUT whose whole body went up without a (good) answer: whether the upstream
  // holds it, asked. It does when it shows `expected` (the body's ETag there, "" when unknown);
  // it shows another version or nothing only if the PUT did not land (or another writer came in
  // between; the request's held job then settles it as any upload's conflict).
  asio::awaitable<UpstreamAnswer> settle_unknown(Binding& b, const std::string& key,
                                                 std::string cause, std::string expected) {
    UpstreamAnswer answer;
    answer.kind = UpstreamAnswer::Kind::kUnknown;
    answer.cause = std::move(cause);
    if (expected.empty()) co_return answer;
    auto ask = upstream_etag(b, key);
    auto theirs = co_await std::move(ask);
    if (!theirs || *theirs != expected) co_return answer;
    log::info("tier: {}/{}: the upstream holds the write-through PUT whose answer was lost",
              b.config.upstream_bucket, b.config.upstream_prefix + key);
    answer.kind = UpstreamAnswer::Kind::kStored;
    answer.etag = std::move(expected);
    answer.cause.clear();
    n_uploaded.fetch_add(1, std::memory_order_relaxed);
    co_return answer;
  }

  // A write-through upload's part, fed through `passage`: into the upstream upload of the
  // client's upload (begun here by its first part). Parts are not ordered by key: they are
  // nothing until the Complete.
  asio::awaitable<void> pass_part(std::int64_t bucket_id, std::string key, std::string upload_id,
                                  std::string teed_id, std::uint32_t number, std::uint64_t length,
                                  std::vector<http::Header> create_headers,
                                  std::vector<http::Header> headers,
                                  std::shared_ptr<Passage> passage) {
    auto sending =
        send_part(bucket_id, std::move(key), std::move(upload_id), std::move(teed_id), number,
                  length, std::move(create_headers), std::move(headers), *passage);
    UpstreamAnswer answer = co_await std::move(sending);
    passage->answer.try_send(boost::system::error_code{}, std::move(answer));
    auto dropping = drop_rest(*passage);
    co_await std::move(dropping);
  }

  // Takes and drops what the request still sends through `passage` once it was answered, until
  // the request lets go (it stops at the answer, after at most one more piece).
  static asio::awaitable<void> drop_rest(Passage& passage) {
    for (;;) {
      auto receiving = passage.pieces.async_receive(asio::as_tuple(asio::use_awaitable));
      auto [e, dropped] = co_await std::move(receiving);
      if (e) co_return;
    }
  }

  asio::awaitable<UpstreamAnswer> send_part(std::int64_t bucket_id, std::string key,
                                            std::string upload_id, std::string teed_id,
                                            std::uint32_t number, std::uint64_t length,
                                            std::vector<http::Header> create_headers,
                                            std::vector<http::Header> headers, Passage& passage) {
    UpstreamAnswer answer;
    const auto bound = bindings.find(bucket_id);
    if (bound == bindings.end()) {
      answer.cause = "the bucket is not bound to an upstream";
      co_return answer;
    }
    Binding& b = bound->second;
    const std::string upstream_key = b.config.upstream_prefix + key;
    auto& slot = teed[upload_id];
    if (!slot) {
      slot = std::make_shared<Teed>(Teed{now_ms(), std::move(teed_id), false});
    }
    const std::shared_ptr<Teed> t = slot;
    if (t->upstream_id.empty() && !t->beginning) {
      t->beginning = true;
      std::string begun;
      auto begin = begin_upload(b, upstream_key, std::move(create_headers), begun);
      const Outcome out = co_await std::move(begin);
      note(*b.upstream, out);
      t->beginning = false;
      if (out.kind == Outcome::Kind::kDone) t->upstream_id = std::move(begun);
    }
    asio::steady_timer timer(io);
    while (t->beginning && !stopping) {
      timer.expires_after(std::chrono::milliseconds(5));
      co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    }
    if (t->upstream_id.empty()) {
      answer.cause = "the upstream upload could not be begun";
      co_return answer;
    }
    const std::string upstream_id = t->upstream_id;
    s3client::Request request;
    request.method = "PUT";
    request.bucket = b.config.upstream_bucket;
    request.key = upstream_key;
    request.query = {{"partNumber", std::to_string(number)}, {"uploadId", upstream_id}};
    request.headers = std::move(headers);
    request.content_length = length;
    const std::string what = fmt::format("part {} of {}/{}", number, request.bucket, request.key);
    auto passing = pass_body(*b.upstream, std::move(request), what, passage);
    Passed passed = co_await std::move(passing);
    if (passed.kind != Passed::Kind::kAnswered) {
      answer.cause = std::move(passed.cause);
      co_return answer;
    }
    Outcome out = judge(what, passed.head->status, passed.body);
    note(*b.upstream, out);
    adapt(*b.upstream, out);
    if (out.kind != Outcome::Kind::kDone) {
      // Aborted upstream (its lifecycle, an operator): the next part begins another.
      if (passed.head->status == 404 && out.code == "NoSuchUpload" &&
          t->upstream_id == upstream_id) {
        t->upstream_id.clear();
      }
      answer.cause = std::move(out.cause);
      co_return answer;
    }
    answer.kind = UpstreamAnswer::Kind::kStored;
    answer.etag = unquoted(passed.head->find("ETag").value_or(""));
    answer.upload_id = upstream_id;
    co_return answer;
  }

  // Whether a read of `key` (a version of `size` bytes) is kept, by the binding's rule for it.
  bool admits(const config::TierBucketConfig& binding, std::int64_t bucket_id, std::string_view key,
              std::uint64_t size) const {
    const config::AdmitRule& rule = binding.admission(key);
    if (rule.max_object_size_bytes != 0 && size > rule.max_object_size_bytes) return false;
    switch (rule.admit) {
      case config::AdmitRule::Admit::kFirstMiss:
        return true;
      case config::AdmitRule::Admit::kSecondMiss:
        return store.reads_lately(bucket_id, key) >= 2;  // this read is counted already
      case config::AdmitRule::Admit::kNever:
        return false;
    }
    return false;
  }

  // A GET of `read`, its answer's head checked: the call whose body is the `count` bytes at
  // `first` of the version, asked for in a Range when `ranged`, or why the read ends.
  asio::awaitable<Result<std::unique_ptr<http::Call>>> open_read(Upstream& u, const ReadSpec& read,
                                                                 std::uint64_t first,
                                                                 std::uint64_t count, bool ranged) {
    const std::string& what = read.what;
    s3client::Request get = read.get;
    if (ranged) {
      get.headers.push_back({"Range", fmt::format("bytes={}-{}", first, first + count - 1)});
    }
    auto admit = admitted(u);
    co_await std::move(admit);
    RequestTally tally(u, get);
    auto start = u.client->start(std::move(get));
    auto call = co_await std::move(start);
    if (!call) {
      note(u, failed(what, call.error()));
      co_return errc::kUnavailable;
    }
    auto answer = (*call)->response();
    auto head = co_await std::move(answer);
    if (!head) {
      note(u, failed(what, head.error()));
      co_return errc::kUnavailable;
    }
    tally.answered(head->status);
    if (head->status == 412 || head->status == 404) {
      // Another version under the key, or none: an answer about this key, not the upstream's
      // health.
      note(u, Outcome{});
      co_return head->status == 412 ? errc::kPreconditionFailed : errc::kNotFound;
    }
    const unsigned expected = ranged ? 206U : 200U;
    if (head->status / 100 == 2 && head->status != expected) {
      // (A Range ignored on the way: the body is not what was asked for, however long.)
      note(u,
           malformed(what, fmt::format("HTTP {} where {} was asked for", head->status, expected)));
      co_return errc::kUnavailable;
    }
    if (head->status != expected) {
      auto reading = (*call)->read_all(kAnswerBytesMax);
      auto body = co_await std::move(reading);
      const Outcome out = judge(what, head->status, body ? *body : std::string());
      note(u, out);
      log::warn("tier: {}: {}", what, out.cause);
      co_return errc::kUnavailable;
    }
    // An upstream (or a proxy before it) that ignored If-Match must not slip another version in.
    if (const auto answered = head->find("ETag"); answered && unquoted(*answered) != read.etag) {
      note(u, Outcome{});
      co_return errc::kPreconditionFailed;
    }
    if (head->content_length != count) {
      note(u, malformed(what, fmt::format("{} bytes where {} were asked for",
                                          head->content_length.value_or(0), count)));
      co_return errc::kUnavailable;
    }
    if (ranged) {
      const std::string said{head->find("Content-Range").value_or("")};
      const std::string meant =
          fmt::format("bytes {}-{}/{}", first, first + count - 1,
                      read.size ? fmt::format("{}", *read.size) : std::string());
      if (read.size ? said != meant : !said.starts_with(meant)) {
        note(u, malformed(what, fmt::format("Content-Range \"{}\" where \"{}\" was asked for", said,
                                            meant)));
        co_return errc::kUnavailable;
      }
    }
    note(u, Outcome{});  // it answers: other misses need not wait for this body to end
    co_return std::move(*call);
  }

  // Tells the reader of `pieces` why its read ended, after the pieces sent so far: it gets them
  // first (a chunk whose last bytes came is kept), then the error. Never by closing the channel,
  // which would drop both. A reader that lets go (let_go_of) ends the send.
  static asio::awaitable<void> tell_failure(Fetch::Pieces& pieces, boost::system::error_code e) {
    auto sending = pieces.async_send(e, Fetch::Piece{}, asio::as_tuple(asio::use_awaitable));
    co_await std::move(sending);
  }

  // Passes the body of a read-through's GET (`count` bytes) on to `to`, then the empty piece:
  // whether it all went. In full pieces (the last one shorter) when `full` (a chunk's channel
  // holds a chunk's worth of them), else as they come. When the body fails, `to` hears why; once
  // `to` or `reader` (the channel of the request's reader) is closed, the rest is not read and
  // `to` is closed.
  asio::awaitable<bool> pass_body(Upstream& u, http::Call& call, const ReadSpec& read,
                                  std::uint64_t count, Fetch::Pieces& to, bool full,
                                  const Fetch::Pieces& reader) {
    const std::string& what = read.what;
    std::uint64_t passed = 0;
    for (bool last = false; !last;) {
      if (!to.is_open() || !reader.is_open()) {
        to.close();  // the connection closes with the call
        co_return false;
      }
      Fetch::Piece piece{std::make_unique_for_overwrite<std::byte[]>(kFetchPieceBytes), 0};
      do {
        auto reading =
            call.read_body(std::span(piece.data.get() + piece.size, kFetchPieceBytes - piece.size));
        auto got = co_await std::move(reading);
        if (!got) {
          note(u, failed(what, got.error()));
          auto telling = tell_failure(to, errc::kUnavailable);
          co_await std::move(telling);
          co_return false;
        }
        last = *got == 0;
        piece.size += *got;
        if (!last && u.config.read_bytes_per_s == 0 && !u.link->capped()) {
          u.link->charge(read.traffic, *got);  // nothing paces reads: counted, no turn taken
        } else if (!last) {
          auto paced = pace(u, *got, read.traffic, true);
          co_await std::move(paced);
        }
      } while (full && !last && piece.size < kFetchPieceBytes);
      passed += piece.size;
      if (piece.size == 0) break;
      auto sending = to.async_send(boost::system::error_code{}, std::move(piece),
                                   asio::as_tuple(asio::use_awaitable));
      auto [e] = co_await std::move(sending);
      if (e) co_return false;  // the reader let go
    }
    if (passed != count) {
      note(u, malformed(what, fmt::format("the body ended after {} of {} bytes", passed, count)));
      auto telling = tell_failure(to, errc::kUnavailable);
      co_await std::move(telling);
      co_return false;
    }
    auto ending = to.async_send(boost::system::error_code{}, Fetch::Piece{},
                                asio::as_tuple(asio::use_awaitable));
    auto [e] = co_await std::move(ending);
    co_return !e;
  }

  // One chunk of a read-through in chunks, into `to`, unless the read ended meanwhile. It holds
  // one of the upstream's fetch_streams until it ends. The read's first chunk is passed on as its
  // pieces come (the client's first byte waits for no more than the upstream's), since its
  // channel is read from the start; the others in full pieces, so that `to` holds all of them.
  asio::awaitable<void> fetch_chunk(Upstream& u, std::shared_ptr<const ReadSpec> read,
                                    std::uint64_t first, std::uint64_t count,
                                    std::shared_ptr<Fetch::Pieces> to, std::shared_ptr<Fetch> fetch,
                                    bool head) {
    if (to->is_open() && fetch->pieces.is_open()) {
      auto opening = open_read(u, *read, first, count, true);
      auto call = co_await std::move(opening);
      if (!call) {
        to->try_send(call.error(), Fetch::Piece{});
      } else {
        auto passing = pass_body(u, **call, *read, count, *to, !head, fetch->pieces);
        co_await std::move(passing);
      }
    }
    --u.fetch_streams;
  }

  // Whether a read may go to `u` now: while it is unreachable, one read at a time tries it
  // (see kReadTrialInterval), and the others fail at once instead of each waiting out a timeout.
  static bool may_try(Upstream& u) {
    if (!u.unreachable) return true;
    const auto now = std::chrono::steady_clock::now();
    if (now < u.next_read_trial) return false;
    // No other trial while this one may wait for its answer; its failure (note) sets the next.
    next_trial(u, now + kReadFirstByteTimeout + u.read_trial_interval);
    u.read_trial_interval =
        std::min<std::chrono::steady_clock::duration>(u.read_trial_interval * 2, kReadTrialMax);
    return true;
  }
  static void next_trial(Upstream& u, std::chrono::steady_clock::time_point at) {
    u.next_read_trial = at;
    u.reads_refused_until.store(
        std::chrono::duration_cast<std::chrono::nanoseconds>(at.time_since_epoch()).count(),
        std::memory_order_relaxed);
  }

  // HEADs under way, by what they ask: an identical one waits for it and shares its answer, so
  // that the readers of one key (its look-up, its revalidation) make one upstream request.
  struct Inquiry {
    explicit Inquiry(asio::io_context& io) : done(io, asio::steady_timer::time_point::max()) {}
    asio::steady_timer done;  // cancelled once `answer` is set
    std::optional<Result<http::ClientReply>> answer;
  };
  std::map<std::string, std::shared_ptr<Inquiry>> inquiries;

  asio::awaitable<Result<http::ClientReply>> ask(std::int64_t bucket_id, UpstreamQuery query) {
    if (query.method != "HEAD") {
      auto asking = ask_now(bucket_id, std::move(query));
      co_return co_await std::move(asking);
    }
    // Each part with its length first: a key may hold any byte, a line break included, and must
    // not pass for another question.
    std::string asked = fmt::format("{} {}:{}", bucket_id, query.key.size(), query.key);
    const auto add = [&asked](std::string_view name, std::string_view value) {
      asked += fmt::format(" {}:{} {}:{}", name.size(), name, value.size(), value);
    };
    for (const auto& [name, value] : query.query) add(name, value);
    asked += " |";
    for (const http::Header& h : query.headers) add(h.name, h.value);
    if (const auto under_way = inquiries.find(asked); under_way != inquiries.end()) {
      const std::shared_ptr<Inquiry> inquiry = under_way->second;
      auto waiting = inquiry->done.async_wait(asio::as_tuple(asio::use_awaitable));
      co_await std::move(waiting);
      if (inquiry->answer) co_return *inquiry->answer;
      co_return errc::kUnavailable;
    }
    const auto inquiry = std::make_shared<Inquiry>(io);
    inquiries.emplace(asked, inquiry);
    // However it ends, its waiters are let go and it leaves the map. (Not by a destructor: a
    // frame destroyed with this thread's io_context would outlive the map.)
    const auto land = [this, &asked, &inquiry] {
      inquiries.erase(asked);
      inquiry->done.cancel();
    };
    try {
      auto asking = ask_now(bucket_id, std::move(query));
      inquiry->answer = co_await std::move(asking);
    } catch (...) {
      land();
      throw;
    }
    land();
    co_return *inquiry->answer;
  }

  asio::awaitable<Result<http::ClientReply>> ask_now(std::int64_t bucket_id, UpstreamQuery query) {
    const auto bound = bindings.find(bucket_id);
    if (bound == bindings.end() || stopping) co_return errc::kUnavailable;
    Binding& b = bound->second;
    Upstream& u = *b.upstream;
    if (!may_try(u)) co_return errc::kUnavailable;
    s3client::Request request;
    request.method = std::move(query.method);
    request.bucket = b.config.upstream_bucket;
    if (!query.key.empty()) request.key = b.config.upstream_prefix + query.key;
    for (auto& [name, value] : query.query) request.query.push_back({name, std::move(value)});
    request.headers = std::move(query.headers);
    // A listing with a delimiter may take the upstream a while to start.
    request.first_byte_timeout = request.method == "HEAD" ? kReadFirstByteTimeout : kListTimeout;
    const std::string what = fmt::format("{} {}/{}", request.method, request.bucket, request.key);
    auto asking = call(u, std::move(request), std::string());
    auto answer = co_await std::move(asking);
    if (!answer) {
      note(u, failed(what, answer.error()));
      co_return errc::kUnavailable;
    }
    u.link->charge(query.traffic, answer->body.size());
    const unsigned status = answer->head.status;
    // A 404 or 412 is about the key; what else fails says something about the upstream.
    note(u, status / 100 == 2 || status == 304 || status == 404 || status == 412
                ? Outcome{}
                : judge(what, status, answer->body));
    co_return std::move(*answer);
  }

  // The upstream GET of a read-through (ReadThrough::read), its answer passed on to `fetch`.
  // One of several chunks is read as ranged GETs of kFetchChunkBytes, up to the upstream's
  // read_streams at once (one stream of an upstream is often slower than its link), passed on in
  // order; each chunk after the first goes into a channel that holds all of it, so its GET never
  // waits for the request's client and its connection is free as soon as it is in (the first
  // one's channel is read from the start). An upstream has at most max_connections such streams
  // (and their buffers: 8 MiB each) at a time; a read that would get fewer than two is one GET.
  asio::awaitable<void> fetch_through(std::int64_t bucket_id, std::string key, std::string etag,
                                      std::uint64_t offset, std::uint64_t length, bool whole,
                                      std::uint64_t keep_size, Traffic traffic,
                                      std::shared_ptr<Fetch> fetch) {
    auto fetching = fetch_into(bucket_id, std::move(key), std::move(etag), offset, length, whole,
                               keep_size, traffic, fetch);
    const boost::system::error_code failure = co_await std::move(fetching);
    if (!failure) co_return;
    auto telling = tell_failure(fetch->pieces, failure);
    co_await std::move(telling);
  }

  // fetch_through's work: why the read failed, when its reader is yet to hear it (nothing when
  // it ended well, when the reader let go, or when pass_body told it).
  asio::awaitable<boost::system::error_code> fetch_into(std::int64_t bucket_id, std::string key,
                                                        std::string etag, std::uint64_t offset,
                                                        std::uint64_t length, bool whole,
                                                        std::uint64_t keep_size, Traffic traffic,
                                                        std::shared_ptr<Fetch> fetch) {
    const auto bound = bindings.find(bucket_id);
    if (bound == bindings.end() || stopping) co_return make_error_code(errc::kUnavailable);
    Binding& b = bound->second;
    Upstream& u = *b.upstream;
    if (!may_try(u)) co_return make_error_code(errc::kUnavailable);
    if (keep_size != 0) fetch->admitted.store(admits(b.config, bucket_id, key, keep_size));
    auto read = std::make_shared<ReadSpec>();
    read->get.method = "GET";
    read->get.bucket = b.config.upstream_bucket;
    read->get.key = b.config.upstream_prefix + key;
    read->get.headers = {{"If-Match", "\"" + etag + "\""}};
    read->get.first_byte_timeout = kReadFirstByteTimeout;
    read->etag = std::move(etag);
    if (whole) read->size = length;
    read->what = fmt::format("read of {}/{}", read->get.bucket, read->get.key);
    read->traffic = traffic;
    const std::uint64_t chunks = (length + kFetchChunkBytes - 1) / kFetchChunkBytes;
    const std::uint64_t free_streams =
        u.config.max_connections > u.fetch_streams ? u.config.max_connections - u.fetch_streams : 0;
    const std::uint64_t streams = std::min({u.config.read_streams, chunks, free_streams});
    if (streams < 2) {
      auto opening = open_read(u, *read, offset, length, !whole);
      auto call = co_await std::move(opening);
      if (!call) co_return call.error();
      auto passing = pass_body(u, **call, *read, length, fetch->pieces, false, fetch->pieces);
      co_await std::move(passing);  // (it told the reader why it failed)
      co_return boost::system::error_code{};
    }
    std::deque<std::shared_ptr<Fetch::Pieces>> window;  // the chunks asked for, not yet passed on
    std::uint64_t asked = 0;
    // Until the reader is done with the first piece (its client has its first byte), the first
    // chunk is the only one asked for: the others would compete with it for the upstream and for
    // this machine's cores, most of all on a fast link, where they come in as fast as it does.
    const auto ask = [&](std::uint64_t passing) {
      const bool first_passed = fetch->first_passed.load(std::memory_order_relaxed);
      for (; asked < chunks && asked < passing + (first_passed ? streams : 1); ++asked) {
        // The next chunk to pass on is always asked for; the others while the upstream has
        // streams free (other reads took them meanwhile).
        if (asked > passing && u.fetch_streams >= u.config.max_connections) break;
        ++u.fetch_streams;
        const std::uint64_t first = offset + asked * kFetchChunkBytes;
        const std::uint64_t count = std::min(kFetchChunkBytes, offset + length - first);
        window.push_back(std::make_shared<Fetch::Pieces>(io, kChunkPieces));
        asio::co_spawn(io, fetch_chunk(u, read, first, count, window.back(), fetch, asked == 0),
                       asio::detached);
      }
    };
    boost::system::error_code failure;
    bool let_go = false;
    for (std::uint64_t passing = 0; passing < chunks && !failure && !let_go; ++passing) {
      ask(passing);
      Fetch::Pieces& from = *window.front();
      for (;;) {
        auto receiving = from.async_receive(asio::as_tuple(asio::use_awaitable));
        auto [e, piece] = co_await std::move(receiving);
        if (e) {
          failure = e;  // (the reader makes a channel's own error kUnavailable)
          break;
        }
        if (asked < passing + streams) ask(passing);
        if (piece.size == 0) break;
        auto sending = fetch->pieces.async_send(boost::system::error_code{}, std::move(piece),
                                                asio::as_tuple(asio::use_awaitable));
        auto [sent] = co_await std::move(sending);
        if (sent) {
          let_go = true;
          break;
        }
      }
      let_go_of(*window.front());
      window.pop_front();
    }
    // The chunks still under way stop at their next piece (and free their buffers then).
    for (const auto& left : window) let_go_of(*left);
    window.clear();
    if (failure || let_go) co_return failure;
    auto ending = fetch->pieces.async_send(boost::system::error_code{}, Fetch::Piece{},
                                           asio::as_tuple(asio::use_awaitable));
    co_await std::move(ending);
    co_return boost::system::error_code{};
  }

  // Begins an upstream multipart upload of `upstream_key` (its id into `upload_id`): kDone, or
  // why the upstream did not begin one.
  asio::awaitable<Outcome> begin_upload(const Binding& b, std::string upstream_key,
                                        std::vector<http::Header> headers, std::string& upload_id) {
    s3client::Request create;
    create.method = "POST";
    create.bucket = b.config.upstream_bucket;
    create.key = std::move(upstream_key);
    create.query = {{"uploads", ""}};
    create.headers = std::move(headers);
    const std::string what = fmt::format("multipart upload of {}/{}", create.bucket, create.key);
    const auto pending = creating.insert(create.key);
    auto asking = call(*b.upstream, std::move(create), std::string());
    auto created = co_await std::move(asking);
    creating.erase(pending);
    if (!created) co_return failed(what, created.error());
    Outcome out = judge(what, created->head.status, created->body);
    if (out.kind != Outcome::Kind::kDone) co_return out;
    if (auto doc = xml::XmlDocument::parse(created->body)) {
      if (auto id = doc->root().child("UploadId")) upload_id = id->text();
    }
    if (upload_id.empty()) co_return malformed(what, "no UploadId in the answer");
    co_return out;
  }

  // The Complete of a write-through upload committed `object_id` and queued its job: the parts
  // upstream upload `teed_id` holds as they are here (`held`) become the job's upload, so that
  // it sends only the rest. Any other outcome leaves the job to upload everything, and the
  // upstream upload goes, as does one this run began that no part recorded.
  asio::awaitable<void> adopt(std::int64_t bucket_id, std::string key, std::string upload_id,
                              std::string teed_id, std::int64_t object_id,
                              std::vector<storage::TierPart> held) {
    const auto bound = bindings.find(bucket_id);
    if (bound == bindings.end()) co_return;
    const Binding& b = bound->second;
    const std::string upstream_key = b.config.upstream_prefix + key;
    std::string begun;  // one this run began, if no part recorded it
    const auto found = teed.find(upload_id);
    if (found != teed.end()) {
      if (found->second->upstream_id != teed_id) begun = found->second->upstream_id;
      teed.erase(found);
    }
    if (!teed_id.empty()) {
      const LiveUpload live(live_uploads, teed_id);  // until the job has recorded it
      bool adopted = false;
      if (!held.empty() && in_flight.count({bucket_id, key}) == 0) {
        auto find = store.tier_job(bucket_id, key);
        auto job = co_await std::move(find);
        if (job && *job && (*job)->object_id == object_id && (*job)->upload_id.empty()) {
          auto keep = store.set_tier_upload(**job, teed_id);
          auto kept = co_await std::move(keep);
          adopted = kept && *kept;
          // A part not recorded is sent again.
          for (std::size_t i = 0; adopted && i < held.size(); ++i) {
            auto record = store.add_tier_part(**job, held[i]);
            co_await std::move(record);
          }
        }
      }
      if (!adopted) {
        auto abort = abort_upload(b, upstream_key, teed_id);
        co_await std::move(abort);
      }
    }
    if (!begun.empty()) {
      auto abort = abort_upload(b, upstream_key, begun);
      co_await std::move(abort);
    }
  }

  // The client aborted a write-through upload: its upstream side goes too, the one its parts
  // recorded and one this run began (a part still beginning one leaves an orphan, which the
  // sweep aborts).
  asio::awaitable<void> drop_teed(std::int64_t bucket_id, std::string key, std::string upload_id,
                                  std::string teed_id) {
    std::set<std::string> ids;
    if (!teed_id.empty()) ids.insert(std::move(teed_id));
    const auto found = teed.find(upload_id);
    if (found != teed.end()) {
      if (!found->second->upstream_id.empty()) ids.insert(found->second->upstream_id);
      teed.erase(found);
    }
    const auto bound = bindings.find(bucket_id);
    if (bound == bindings.end()) co_return;
    const std::string upstream_key = bound->second.config.upstream_prefix + key;
    for (const std::string& id : ids) {
      auto abort = abort_upload(bound->second, upstream_key, id);
      co_await std::move(abort);
    }
  }

  // The ETag the upstream holds under `key` (local name): "" for none; nullopt when it did not say.
  asio::awaitable<std::optional<std::string>> upstream_etag(Binding& b, std::string key) {
    s3client::Request head;
    head.method = "HEAD";
    head.bucket = b.config.upstream_bucket;
    head.key = b.config.upstream_prefix + key;
    auto asking = call(*b.upstream, std::move(head), std::string());
    auto answer = co_await std::move(asking);
    if (!answer) co_return std::nullopt;
    if (answer->head.status == 404) co_return std::string();
    if (answer->head.status / 100 != 2) co_return std::nullopt;
    co_return unquoted(answer->head.find("ETag").value_or(""));
  }

  asio::awaitable<Outcome> remove(const Binding& b, const TierJob& job) {
    s3client::Request request;
    request.method = "DELETE";
    request.bucket = b.config.upstream_bucket;
    request.key = b.config.upstream_prefix + job.key;
    const std::string what = fmt::format("DELETE {}/{}", request.bucket, request.key);
    auto deleting = call(*b.upstream, std::move(request), std::string());
    auto deleted = co_await std::move(deleting);
    if (!deleted) co_return failed(what, deleted.error());
    if (deleted->head.status == 404) {
      // NoSuchKey: nothing to delete. NoSuchBucket is a binding that cannot work.
      const auto e = s3client::parse_error(deleted->body);
      if (!e || e->code != "NoSuchBucket") co_return Outcome{};
    }
    co_return judge(what, deleted->head.status, deleted->body);
  }

  // Exponential back-off with full jitter: a random wait up to base * 2^attempts, capped.
  std::int64_t retry_delay_ms(std::uint32_t attempts) const {
    const std::int64_t base = tier.writeback.retry_base.count();
    const std::int64_t cap = tier.writeback.retry_cap.count();
    std::int64_t ceiling = base;
    for (std::uint32_t i = 0; i < attempts && ceiling < cap; ++i) ceiling *= 2;
    ceiling = std::min(ceiling, cap);
    return static_cast<std::int64_t>(random_u64() % static_cast<std::uint64_t>(ceiling + 1));
  }

  // An upstream that answers 429 or 503 asks for less: its window halves; each success grows
  // it by 1/window, one more attempt at once per window of successes.
  void adapt(Upstream& u, const Outcome& out) {
    const auto most = static_cast<double>(tier.writeback.parallelism);
    if (out.status == 429 || out.status == 503) {
      const auto now = std::chrono::steady_clock::now();
      if (u.last_cut != std::chrono::steady_clock::time_point{} &&
          now - u.last_cut < kSlowDownHold) {
        return;
      }
      const double before = u.window;
      u.window = std::max(1.0, u.window / 2);
      u.last_cut = now;
      log::info("tier: upstream {} asks to slow down (HTTP {}): {} attempts at once, from {}",
                u.config.name, out.status, static_cast<int>(u.window), static_cast<int>(before));
      n_slowdowns.fetch_add(1, std::memory_order_relaxed);
    } else if (out.kind == Outcome::Kind::kDone) {
      u.window = std::min(most, u.window + 1.0 / u.window);
    }
  }

  asio::awaitable<void> run_job(Binding* b, TierJob job) {
    auto attempt = job.object_id ? upload(*b, job) : remove(*b, job);
    const Outcome out = co_await std::move(attempt);
    --b->upstream->running;
    if (!stopping) {
      note(*b->upstream, out);
      adapt(*b->upstream, out);
    }
    switch (out.kind) {
      case Outcome::Kind::kDone: {
        auto finish = store.finish_tier_job(job, out.seen);
        auto finished = co_await std::move(finish);
        if (!finished) {
          log::warn("tier: recording the upload of {} failed: {}", job.key,
                    finished.error().message());
        } else if (job.object_id) {
          n_uploaded.fetch_add(1, std::memory_order_relaxed);
          n_bytes.fetch_add(out.bytes, std::memory_order_relaxed);
        } else {
          n_deleted.fetch_add(1, std::memory_order_relaxed);
        }
        break;
      }
      case Outcome::Kind::kSuperseded:
        break;
      case Outcome::Kind::kRetry:
      case Outcome::Kind::kPark: {
        if (stopping) break;  // cut short by stop(): not a failure of the upstream
        const bool park = out.kind == Outcome::Kind::kPark;
        const std::int64_t due = now_ms() + (park ? 0 : retry_delay_ms(job.attempts));
        if (park) {
          log::warn("tier: parked {} (bucket {}): {}", job.key, b->config.bucket, out.error);
          n_parked.fetch_add(1, std::memory_order_relaxed);
        } else {
          // The first failure of a job says why; the retries after it would only repeat it.
          if (job.attempts == 0) log::warn("tier: {} (will retry)", out.error);
          n_retried.fetch_add(1, std::memory_order_relaxed);
        }
        auto defer = store.defer_tier_job(job, due, out.error, park);
        auto deferred = co_await std::move(defer);
        if (!deferred) {
          log::warn("tier: rescheduling {} failed: {}", job.key, deferred.error().message());
        }
        break;
      }
    }
    if (reading_queue) ended_during_reading.insert(job.seq);
    in_flight.erase({job.bucket_id, job.key});
    wake.cancel();
  }

  asio::awaitable<void> drain() {
    const std::size_t parallelism = static_cast<std::size_t>(tier.writeback.parallelism);
    while (!stopping) {
      if (in_flight.size() < parallelism) {
        // Jobs under way are still due: ask for enough to see past them.
        reading_queue = true;
        auto read = store.due_tier_jobs(now_ms(), in_flight.size() + 4 * parallelism);
        auto due = co_await std::move(read);
        // Due jobs that wait for others: moved on a little, so that the next reading sees past
        // them (the jobs they wait for may be due later, after retries).
        std::vector<TierJob> waiting;
        if (!due) {
          log::warn("tier: reading the write-back queue failed: {}", due.error().message());
        } else {
          for (TierJob& job : *due) {
            if (stopping || in_flight.size() >= parallelism) break;
            const auto bound = bindings.find(job.bucket_id);
            if (bound == bindings.end()) continue;  // no longer bound: its jobs wait
            if (in_flight.count({job.bucket_id, job.key}) != 0 ||
                through.count({job.bucket_id, job.key}) != 0 ||
                ended_during_reading.count(job.seq) != 0) {
              continue;
            }
            Upstream& upstream = *bound->second.upstream;
            if (static_cast<double>(upstream.running) + 1 > upstream.window) continue;
            if (!job.object_id) {
              // A rename or copy whose data the upstream holds under this key copies it first.
              auto check = store.tier_copy_pending(job.bucket_id, job.key);
              auto pending = co_await std::move(check);
              if (!pending) continue;
              if (*pending) {
                waiting.push_back(std::move(job));
                continue;
              }
            }
            if (job.object_id && glob_any(tier.writeback.commit_markers, job.key)) {
              // A commit marker goes up after everything acknowledged before it under its
              // prefix, so that a reader of the upstream never sees it without its shards.
              auto check = store.tier_jobs_before(job, std::string(marker_prefix(job.key)));
              auto earlier = co_await std::move(check);
              if (!earlier) continue;
              if (*earlier) {
                waiting.push_back(std::move(job));
                continue;
              }
            }
            in_flight.emplace(job.bucket_id, job.key);
            ++upstream.running;
            asio::co_spawn(io, run_job(&bound->second, std::move(job)), asio::detached);
          }
        }
        reading_queue = false;
        ended_during_reading.clear();
        if (!waiting.empty()) {
          auto postponing = store.postpone_tier_jobs(std::move(waiting), now_ms() + kWaitingHold);
          auto postponed = co_await std::move(postponing);
          if (!postponed) {
            log::warn("tier: postponing jobs that wait failed: {}", postponed.error().message());
          }
        }
      }
      wake.expires_after(kPollInterval);
      co_await wake.async_wait(asio::as_tuple(asio::use_awaitable));
    }
    // Attempts under way notice `stopping` between pieces of their bodies.
    while (!in_flight.empty()) {
      wake.expires_after(std::chrono::milliseconds(10));
      co_await wake.async_wait(asio::as_tuple(asio::use_awaitable));
    }
  }

  // Changes still owed to a bucket's old binding would go to another place than the one they
  // were acknowledged for: refused unless the operator says so (--tier-rebind).
  asio::awaitable<void> refuse_rebind(const storage::BucketRecord& bucket, std::string_view why) {
    auto list = store.tier_jobs(bucket.id, true);
    auto jobs = co_await std::move(list);
    if (!jobs) throw std::runtime_error("tier: " + jobs.error().message());
    if (jobs->empty()) co_return;
    if (rebind) {
      log::warn(
          "tier: bucket {}: {} with {} changes owed to {}; they go to the new binding "
          "(--tier-rebind)",
          bucket.name, why, jobs->size(), bucket.upstream);
      co_return;
    }
    std::uint64_t bytes = 0;
    for (const TierJob& j : *jobs) bytes += j.size_bytes;
    throw config::ConfigError(fmt::format(
        "tier.bucket {}: {} while changes are still owed to the old binding ({} of them, {} bytes; "
        "bound to {}); restore that binding until they are upstream, or start with --tier-rebind "
        "to send them to the new one",
        bucket.name, why, jobs->size(), bytes, bucket.upstream));
  }

  asio::awaitable<void> bind() {
    for (const config::TierBucketConfig& c : tier.buckets) {
      const config::UpstreamConfig* u = tier.upstream(c.upstream);
      H3_ASSERT(u != nullptr, "a binding to an upstream the configuration does not name");
      auto found = store.find_bucket(c.bucket);
      if (!found) throw std::runtime_error("tier: " + found.error().message());
      if (*found && (*found)->tier != storage::BucketTier::kNone &&
          !config::binding_sends_where((*found)->upstream, c)) {
        auto check = refuse_rebind(**found, "its binding changed");
        co_await std::move(check);
      }
      if (!*found) {
        auto create = store.create_bucket(c.bucket, owner);
        auto created = co_await std::move(create);
        if (!created && created.error() != errc::kAlreadyExists) {
          throw std::runtime_error(
              fmt::format("tier: creating bucket {}: {}", c.bucket, created.error().message()));
        }
      }
      auto set = store.set_bucket_tier(c.bucket, bucket_tier(c.mode), config::binding_json(c, *u));
      auto bound = co_await std::move(set);
      if (!bound) {
        throw std::runtime_error(
            fmt::format("tier: binding bucket {}: {}", c.bucket, bound.error().message()));
      }
      const auto record = store.find_bucket(c.bucket);
      H3_ASSERT(record && *record, "a bucket vanished while it was bound");
      Upstream* upstream = nullptr;
      for (auto& candidate : upstreams) {
        if (candidate->config.name == c.upstream) upstream = candidate.get();
      }
      store.set_pins((*record)->id, c.pin, c.pin_max_bytes);
      bindings[(*record)->id] = Binding{(*record)->id, c, upstream, {}};
    }
    // Parked jobs get another chance at each start: what parked them (a key, a bucket, a policy
    // upstream) may have been mended meanwhile.
    auto unpark = store.unpark_tier_jobs();
    auto unparked = co_await std::move(unpark);
    if (unparked && *unparked > 0) log::info("tier: {} parked uploads are retried", *unparked);
    // Buckets bound before and no longer: changes there stop queueing uploads.
    auto all = store.list_buckets();
    if (all) {
      for (const storage::BucketRecord& b : *all) {
        if (b.tier == storage::BucketTier::kNone || tier.binding(b.name) != nullptr) continue;
        auto check = refuse_rebind(b, "it is no longer bound");
        co_await std::move(check);
        log::warn("tier: bucket {} is no longer bound to an upstream: {}", b.name, b.upstream);
        auto unset = store.set_bucket_tier(b.name, storage::BucketTier::kNone, "");
        auto unbound = co_await std::move(unset);
        if (!unbound) log::warn("tier: unbinding {}: {}", b.name, unbound.error().message());
      }
    }
  }
};

namespace {
// The signing credentials of upstream `u`, read from its credentials file now. Throws
// config::ConfigError when the file cannot be read.
aws::Credentials read_credentials(const config::UpstreamConfig& u) {
  const config::UpstreamCredentials keys = config::read_upstream_credentials(u.credentials_file);
  return {keys.access_key, keys.secret_key, keys.session_token, u.region};
}
}  // namespace

Uploader::Uploader(storage::ObjectStore& store, const config::TierConfig& tier,
                   std::string bucket_owner, bool rebind)
    : impl_(std::make_shared<Impl>(store, tier, std::move(bucket_owner), rebind)) {
  for (const config::UpstreamConfig& u : tier.upstreams) {
    s3client::Options options;
    options.http.endpoint = u.endpoint;
    options.http.verify_tls = u.tls_verify;
    options.http.ca_file = u.ca_file;
    options.http.idle_connections_max = static_cast<std::size_t>(u.max_connections);
    // Under a cap on reads, what the kernel takes in ahead of the paced reader crosses unpaced:
    // 25 ms of the cap a connection (Linux doubles what is asked for), from 64 KiB to 4 MiB.
    const std::uint64_t read_cap =
        std::min(u.bytes_per_s == 0 ? UINT64_MAX : u.bytes_per_s,
                 u.read_bytes_per_s == 0 ? UINT64_MAX : u.read_bytes_per_s);
    if (read_cap != UINT64_MAX) {
      options.http.receive_buffer_bytes =
          static_cast<std::size_t>(std::clamp<std::uint64_t>(read_cap / 80, 64 * kKiB, 4 * kMiB));
    }
    options.credentials = read_credentials(u);
    options.virtual_host = u.virtual_host;
    auto upstream = std::make_unique<Upstream>();
    upstream->config = u;
    upstream->window = static_cast<double>(tier.writeback.parallelism);
    upstream->link =
        std::make_unique<LinkShare>(impl_->io, u.bytes_per_s, tier.writeback.min_share);
    try {
      upstream->client =
          std::make_unique<s3client::Client>(impl_->io.get_executor(), std::move(options));
    } catch (const std::exception& e) {
      throw config::ConfigError(fmt::format("tier.upstream {}: {}", u.name, e.what()));
    }
    impl_->upstreams.push_back(std::move(upstream));
  }
}

namespace {

// The request's end of a Passage. The last piece is held back until finish(): the upstream
// completes no body that the client's checksums may still refuse.
class PassagePut final : public UpstreamPut {
 public:
  PassagePut(std::shared_ptr<Uploader::Impl> impl, std::shared_ptr<Passage> passage)
      : impl_(std::move(impl)), passage_(std::move(passage)) {}
  ~PassagePut() override {
    passage_->pieces.close();
    passage_->done.close();
  }
  PassagePut(const PassagePut&) = delete;
  PassagePut& operator=(const PassagePut&) = delete;
  PassagePut(PassagePut&&) = delete;
  PassagePut& operator=(PassagePut&&) = delete;

  asio::awaitable<bool> write(std::span<const std::byte> piece) override {
    if (!failed_ && !held_.empty()) {
      auto passing = pass();
      co_await std::move(passing);
    }
    if (failed_) co_return false;
    held_.assign(piece.begin(), piece.end());
    co_return true;
  }

  asio::awaitable<UpstreamAnswer> finish(std::string etag, std::int64_t own_job) override {
    if (!failed_ && !held_.empty()) {
      auto passing = pass();
      co_await std::move(passing);
    }
    if (!failed_) {
      passage_->expected_etag = std::move(etag);
      passage_->own_job = own_job;
      auto ending = pass();  // an empty piece: the body is whole and verified
      co_await std::move(ending);
    }
    if (answer_) co_return std::move(*answer_);
    auto [e, answer] = co_await passage_->answer.async_receive(asio::as_tuple(asio::use_awaitable));
    if (e) co_return failed_answer("the upstream PUT ended");
    co_return std::move(answer);
  }

 private:
  // Hands held_ over (it is left empty).
  asio::awaitable<void> pass() {
    std::vector<std::byte> piece = std::move(held_);
    held_.clear();
    auto [e] = co_await passage_->pieces.async_send(boost::system::error_code{}, std::move(piece),
                                                    asio::as_tuple(asio::use_awaitable));
    // An answer before the body's end says the upstream PUT ended: the rest is not sent.
    passage_->answer.try_receive([this](boost::system::error_code got, UpstreamAnswer answer) {
      if (!got) answer_ = std::move(answer);
    });
    failed_ = e || answer_;
  }

  std::shared_ptr<Uploader::Impl> impl_;  // keeps the io_context of the channels
  std::shared_ptr<Passage> passage_;
  std::vector<std::byte> held_;
  std::optional<UpstreamAnswer> answer_;  // taken early, by pass()
  bool failed_ = false;
};

// The request's end of a read-through.
class FetchRead final : public UpstreamRead {
 public:
  FetchRead(std::shared_ptr<Uploader::Impl> impl, std::shared_ptr<Fetch> fetch)
      : impl_(std::move(impl)), fetch_(std::move(fetch)) {
    const std::lock_guard lock(impl_->being_read_mutex);
    impl_->being_read.emplace(fetch_.get(), fetch_);
  }
  ~FetchRead() override {
    // On the uploader's thread, which sends into the channel (let_go_of says why).
    asio::post(impl_->io, [fetch = fetch_] { let_go_of(fetch->pieces); });
    const std::lock_guard lock(impl_->being_read_mutex);
    impl_->being_read.erase(fetch_.get());
    if (impl_->being_read.empty()) impl_->being_read_ended.notify_all();
  }
  FetchRead(const FetchRead&) = delete;
  FetchRead& operator=(const FetchRead&) = delete;
  FetchRead(FetchRead&&) = delete;
  FetchRead& operator=(FetchRead&&) = delete;

  asio::awaitable<Result<std::span<const std::byte>>> next() override {
    // (The fetch sends nothing after its error: asked again, the same answer.)
    if (failed_) co_return failed_;
    if (current_.data) fetch_->first_passed.store(true, std::memory_order_relaxed);
    auto [e, piece] = co_await fetch_->pieces.async_receive(asio::as_tuple(asio::use_awaitable));
    if (e) {
      // Ours (errc) say why; the channel's own (closed, cancelled) mean the uploader stopped.
      failed_ = e.category() == make_error_code(errc::kUnavailable).category()
                    ? e
                    : make_error_code(errc::kUnavailable);
      co_return failed_;
    }
    current_ = std::move(piece);
    co_return std::span<const std::byte>(current_.data.get(), current_.size);
  }

  [[nodiscard]] bool admitted() const override { return fetch_->admitted.load(); }

 private:
  std::shared_ptr<Uploader::Impl> impl_;  // keeps the io_context of the channel
  std::shared_ptr<Fetch> fetch_;
  Fetch::Piece current_;
  boost::system::error_code failed_;
};

// Whether `passage` is answered at once because the uploader is not running: no thread of ours
// would ever take its pieces, so the request fails at its first one.
bool refused_at_once(const Uploader::Impl& im, Passage& passage) {
  if (im.running.load(std::memory_order_acquire)) return false;
  passage.answer.try_send(boost::system::error_code{},
                          failed_answer("the server is not sending to the upstream"));
  passage.pieces.close();
  return true;
}

}  // namespace

std::unique_ptr<UpstreamPut> Uploader::put(std::int64_t bucket_id, std::string key,
                                           std::uint64_t length,
                                           const storage::ContentHeaders& content,
                                           const storage::Metadata& metadata,
                                           std::vector<http::Header> more) {
  std::vector<http::Header> headers = object_headers(content, metadata);
  headers.insert(headers.end(), std::make_move_iterator(more.begin()),
                 std::make_move_iterator(more.end()));
  auto passage = std::make_shared<Passage>(impl_->io);
  if (refused_at_once(*impl_, *passage)) return std::make_unique<PassagePut>(impl_, passage);
  asio::co_spawn(
      impl_->io,
      impl_->pass_through(bucket_id, std::move(key), length, std::move(headers), passage),
      asio::detached);
  return std::make_unique<PassagePut>(impl_, std::move(passage));
}

std::unique_ptr<UpstreamRead> Uploader::read(std::int64_t bucket_id, std::string key,
                                             std::string etag, std::uint64_t offset,
                                             std::uint64_t length, bool whole,
                                             std::uint64_t keep_size, Traffic traffic) {
  auto fetch = std::make_shared<Fetch>(impl_->io, impl_->fetches);
  // Registered before `running` is read: a stop after that read closes it.
  auto reader = std::make_unique<FetchRead>(impl_, fetch);
  if (!impl_->running.load(std::memory_order_acquire)) {
    fetch->pieces.try_send(make_error_code(errc::kUnavailable), Fetch::Piece{});
  } else {
    asio::co_spawn(impl_->io,
                   impl_->fetch_through(bucket_id, std::move(key), std::move(etag), offset, length,
                                        whole, keep_size, traffic, std::move(fetch)),
                   asio::detached);
  }
  return reader;
}

asio::awaitable<Result<http::ClientReply>> Uploader::ask(std::int64_t bucket_id,
                                                         UpstreamQuery query) {
  if (!impl_->running.load(std::memory_order_acquire)) co_return errc::kUnavailable;
  auto asking =
      asio::co_spawn(impl_->io, impl_->ask(bucket_id, std::move(query)), asio::use_awaitable);
  co_return co_await std::move(asking);
}

Freshness Uploader::freshness(std::int64_t bucket_id, std::string_view key) const {
  // The bindings are all made before `running` is first set, and never change after.
  if (!impl_->running.load(std::memory_order_acquire)) return {};
  const auto bound = impl_->bindings.find(bucket_id);
  if (bound == impl_->bindings.end()) return {};
  const config::TierBucketConfig& c = bound->second.config;
  return {c.revalidation(key), c.serve_stale, c.keep_upstream_deleted, c.list_local,
          c.negative_ttl};
}

bool Uploader::reachable(std::int64_t bucket_id) const {
  if (!impl_->running.load(std::memory_order_acquire)) return false;
  const auto bound = impl_->bindings.find(bucket_id);
  if (bound == impl_->bindings.end()) return false;
  const std::int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                               std::chrono::steady_clock::now().time_since_epoch())
                               .count();
  return now >= bound->second.upstream->reads_refused_until.load(std::memory_order_relaxed);
}

bool Uploader::admits(std::int64_t bucket_id, std::string_view key, std::uint64_t size) const {
  // (As freshness: the bindings never change once running.)
  if (!impl_->running.load(std::memory_order_acquire)) return false;
  const auto bound = impl_->bindings.find(bucket_id);
  return bound != impl_->bindings.end() &&
         impl_->admits(bound->second.config, bucket_id, key, size);
}

std::unique_ptr<UpstreamPut> Uploader::put_part(std::int64_t bucket_id,
                                                const storage::UploadRecord& upload,
                                                std::uint32_t part_number, std::uint64_t length,
                                                std::vector<http::Header> more) {
  auto passage = std::make_shared<Passage>(impl_->io);
  if (refused_at_once(*impl_, *passage)) return std::make_unique<PassagePut>(impl_, passage);
  asio::co_spawn(
      impl_->io,
      impl_->pass_part(bucket_id, upload.key, upload.upload_id, upload.tier_upload_id, part_number,
                       length, object_headers(upload.headers, upload.user_metadata),
                       std::move(more), passage),
      asio::detached);
  return std::make_unique<PassagePut>(impl_, std::move(passage));
}

asio::awaitable<void> Uploader::adopt_parts(std::int64_t bucket_id, std::string key,
                                            std::string upload_id, std::string teed_id,
                                            std::int64_t object_id,
                                            std::vector<storage::TierPart> held) {
  if (!impl_->running.load(std::memory_order_acquire)) co_return;
  auto adopting = asio::co_spawn(impl_->io,
                                 impl_->adopt(bucket_id, std::move(key), std::move(upload_id),
                                              std::move(teed_id), object_id, std::move(held)),
                                 asio::use_awaitable);
  co_await std::move(adopting);
}

void Uploader::abort_parts(const storage::UploadRecord& upload) {
  if (!impl_->running.load(std::memory_order_acquire)) return;
  asio::co_spawn(
      impl_->io,
      impl_->drop_teed(upload.bucket_id, upload.key, upload.upload_id, upload.tier_upload_id),
      asio::detached);
}

Uploader::~Uploader() { stop(); }

void Uploader::start() {
  Impl& im = *impl_;
  H3_ASSERT(!im.started);
  im.started = true;
  im.store.attach(im.io);  // the uploader reads objects from the device like a worker
  im.work.emplace(im.io.get_executor());
  im.thread = std::thread([&im] {
    pthread_setname_np(pthread_self(), "h3-tier-upload");
    im.io.run();
  });
  std::promise<void> bound;
  auto bound_future = bound.get_future();
  asio::co_spawn(im.io, im.bind(), [&bound](const std::exception_ptr& e) {
    if (e) {
      bound.set_exception(e);
    } else {
      bound.set_value();
    }
  });
  try {
    bound_future.get();
  } catch (...) {
    im.work.reset();
    im.io.stop();
    im.thread.join();
    im.started = false;
    throw;
  }
  for (auto watcher : {&Impl::report, &Impl::read_space, &Impl::watch}) {
    asio::co_spawn(im.io, (im.*watcher)(), [](const std::exception_ptr& e) {
      if (!e) return;
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& ex) {
        log::error("tier: the health report stopped: {}", ex.what());
      }
    });
  }
  std::vector<std::int64_t> bound_ids;
  for (const auto& [id, b] : im.bindings) bound_ids.push_back(id);
  asio::co_spawn(
      im.io,
      evict_by_watermark(im.store, im.tier.evict, std::move(bound_ids), im.stopping, im.evictions),
      [](const std::exception_ptr& e) {
        if (!e) return;
        try {
          std::rethrow_exception(e);
        } catch (const std::exception& ex) {
          log::error("tier: eviction stopped: {}", ex.what());
        }
      });
  im.running.store(true, std::memory_order_release);
  // A client waiting for an upload (x-hots3-durability, a flush) has it looked at now. Raw
  // pointers: a handler owning the Impl would be owned by the Impl's own io_context.
  im.store.set_tier_wake([st = impl_.get()] { asio::post(st->io, [st] { st->wake.cancel(); }); });
  asio::co_spawn(im.io, im.drain(), [st = impl_.get()](const std::exception_ptr& e) {
    if (e) {
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& ex) {
        log::error("tier: the uploader stopped: {}", ex.what());
      }
    }
    st->drained.set_value();
  });
}

void Uploader::stop() {
  Impl& im = *impl_;
  if (!im.started) return;
  im.started = false;
  im.running.store(false, std::memory_order_release);
  asio::post(im.io, [st = impl_.get()] {
    st->stopping = true;
    st->wake.cancel();
    for (const auto& u : st->upstreams) u->link->release_all();
  });
  // Attempts notice the stop between two pieces of a body; one waiting for an upstream's answer
  // is not waited for beyond the grace: its job stays queued, and the io_context's end ends it.
  const auto drained = im.drained.get_future().wait_for(kStopGrace);
  if (drained != std::future_status::ready) {
    log::info("tier: uploads under way abandoned at stop; they are sent again at the next start");
  }
  im.work.reset();
  im.io.stop();
  im.thread.join();
  std::vector<std::shared_ptr<Fetch>> live;
  {
    const std::lock_guard lock(im.being_read_mutex);
    for (const auto& [_, fetch] : im.being_read) {
      if (auto held = fetch.lock()) live.push_back(std::move(held));
    }
  }
  // (Outside the lock: a reader resumed here would take it in its destructor.)
  for (const auto& fetch : live) fetch->pieces.close();
  live.clear();
  std::unique_lock lock(im.being_read_mutex);
  // Their readers end on their workers (a fill's writer gives its space back) before the store
  // shuts down; one held up by its client is not waited for long.
  if (!im.being_read_ended.wait_for(lock, kStopGrace, [&im] { return im.being_read.empty(); })) {
    log::info("tier: {} read-through(s) still ending at stop", im.being_read.size());
  }
}

bool Uploader::reload_credentials() {
  Impl& im = *impl_;
  std::vector<aws::Credentials> fresh;
  try {
    for (const auto& u : im.upstreams) fresh.push_back(read_credentials(u->config));
  } catch (const std::exception& e) {
    log::error("tier: credentials not reloaded, the ones in use stay: {}", e.what());
    return false;
  }
  asio::post(im.io, [st = impl_.get(), fresh = std::move(fresh)]() mutable {
    for (std::size_t i = 0; i < fresh.size(); ++i) {
      st->upstreams[i]->client->set_credentials(std::move(fresh[i]));
    }
    // What the old key was refused may go through with the new one: parked jobs and the
    // bindings' probes try again now.
    st->next_probe_ms = 0;
    asio::co_spawn(
        st->io,
        [st]() -> asio::awaitable<void> {
          auto unpark = st->store.unpark_tier_jobs();
          auto unparked = co_await std::move(unpark);
          if (unparked && *unparked > 0)
            log::info("tier: {} parked uploads are retried", *unparked);
          st->wake.cancel();
        },
        asio::detached);
  });
  log::info("tier: credentials of {} upstream(s) reloaded", im.upstreams.size());
  return true;
}

void Uploader::set_limits(const std::vector<config::UpstreamConfig>& upstreams) {
  asio::post(impl_->io, [st = impl_.get(), upstreams] {
    for (const auto& u : st->upstreams) {
      const auto next = std::find_if(upstreams.begin(), upstreams.end(),
                                     [&u](const auto& c) { return c.name == u->config.name; });
      if (next == upstreams.end()) continue;
      config::UpstreamConfig& now = u->config;
      for (auto [name, field] :
           {std::pair{"requests_per_s", &config::UpstreamConfig::requests_per_s},
            {"write_bytes_per_s", &config::UpstreamConfig::write_bytes_per_s},
            {"read_bytes_per_s", &config::UpstreamConfig::read_bytes_per_s},
            {"bytes_per_s", &config::UpstreamConfig::bytes_per_s}}) {
        if (now.*field == (*next).*field) continue;
        log::info("tier: upstream {}: {} {} -> {} (0: no cap)", now.name, name, now.*field,
                  (*next).*field);
        now.*field = (*next).*field;
        if (field == &config::UpstreamConfig::bytes_per_s) u->link->set_rate(now.bytes_per_s);
      }
    }
  });
}

http::Probe Uploader::health(bool text, std::string_view bucket) const {
  return impl_->health(text, bucket);
}

void Uploader::write_metrics(metrics::Writer& w) const { impl_->write_metrics(w); }

std::uint64_t Uploader::evictable_bytes() const {
  return impl_->evictable_total.load(std::memory_order_relaxed);
}

ReadCounts* Uploader::Impl::read_counts(std::int64_t bucket_id) {
  // The bindings are all made before `running` is first set, and never change after.
  if (!running.load(std::memory_order_acquire)) return nullptr;
  const auto bound = bindings.find(bucket_id);
  return bound == bindings.end() ? nullptr : bound->second.reads.get();
}

void Uploader::count_read(std::int64_t bucket_id, CacheAnswer answer, std::uint64_t bytes) {
  if (ReadCounts* reads = impl_->read_counts(bucket_id)) reads->count(answer, bytes);
}

void Uploader::count_coalesced(std::int64_t bucket_id) {
  if (ReadCounts* reads = impl_->read_counts(bucket_id))
    reads->coalesced.fetch_add(1, std::memory_order_relaxed);
}

void Uploader::count_revalidation(std::int64_t bucket_id, RevalidationResult result) {
  if (ReadCounts* reads = impl_->read_counts(bucket_id))
    reads->revalidations[static_cast<std::size_t>(result)].fetch_add(1, std::memory_order_relaxed);
}

void Uploader::observe_cold_ttfb(std::int64_t bucket_id, std::chrono::microseconds time) {
  if (ReadCounts* reads = impl_->read_counts(bucket_id))
    reads->cold_ttfb.observe_us(
        static_cast<std::uint64_t>(std::max<std::int64_t>(0, time.count())));
}

UploaderStats Uploader::stats() const {
  const Impl& im = *impl_;
  return {im.n_uploaded.load(),      im.n_deleted.load(),      im.n_bytes.load(),
          im.n_sent.load(),          im.n_retried.load(),      im.n_parked.load(),
          im.n_slowdowns.load(),     im.n_conflicts.load(),    im.evictions.objects.load(),
          im.evictions.bytes.load(), im.evictions.young.load()};
}

}  // namespace hots3::tier
