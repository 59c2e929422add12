#include "upstream_view.h"

#include "conditions.h"
#include "object_spec.h"
#include "time_format.h"

#include "hots3/aws/checksum.h"
#include "hots3/aws/sigv4.h"
#include "hots3/common/clock.h"
#include "hots3/common/text.h"
#include "hots3/config/config.h"
#include "hots3/xml/xml.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <utility>
#include <vector>

namespace hots3::s3 {

namespace {

constexpr std::size_t kAdoptPage = 100;

Error unavailable(std::string_view why) {
  return Error(Code::kServiceUnavailable,
               fmt::format("The bucket's upstream cannot say what it holds: {}.", why));
}

// The version an upstream's answer to HEAD describes, as a stub's record: nullopt when it lacks
// a size or an ETag.
std::optional<storage::ObjectRecord> stub_of(const http::ClientResponseHead& head,
                                             std::string key) {
  const std::string etag = unquoted(head.find("ETag").value_or(""));
  if (!head.content_length || etag.empty()) return std::nullopt;
  storage::ObjectRecord o;
  o.key = std::move(key);
  o.size_bytes = *head.content_length;
  o.etag = etag;
  o.created_ms = parse_http_date(head.find("Last-Modified").value_or("")).value_or(0);
  o.validated_ms = now_ms();  // the upstream has just said it holds this version
  const auto take = [&head](std::string_view name, std::optional<std::string>& to) {
    if (const auto v = head.find(name)) to = std::string(*v);
  };
  take("Content-Type", o.headers.content_type);
  take("Content-Encoding", o.headers.content_encoding);
  take("Content-Disposition", o.headers.content_disposition);
  take("Content-Language", o.headers.content_language);
  take("Cache-Control", o.headers.cache_control);
  take("Expires", o.headers.expires);
  using enum aws::ChecksumAlgorithm;
  for (const aws::ChecksumAlgorithm a : {kCrc32, kCrc32c, kCrc64Nvme, kSha1, kSha256}) {
    if (const auto v = head.find(aws::checksum_header(a)))
      set_checksum(o.checksums, a, std::string(*v));
  }
  take("x-amz-checksum-type", o.checksums.type);
  for (const http::Header& h : head.headers) {
    if (h.name.size() > 11 && istarts_with(h.name, "x-amz-meta-")) {
      o.user_metadata.emplace_back(lower(h.name.substr(11)), h.value);
    }
  }
  return o;
}

// The number of parts a multipart ETag ("<md5>-N") names; 0 for another ETag.
std::uint32_t etag_parts(std::string_view etag) {
  const std::size_t dash = etag.rfind('-');
  if (dash == std::string_view::npos) return 0;
  const auto n = parse_decimal<std::uint64_t>(etag.substr(dash + 1));
  return n && *n > 0 && *n <= 10'000 ? static_cast<std::uint32_t>(*n) : 0;
}

// The size of part `number` of the version `etag` of `key`, from a HEAD ?partNumber=.
asio::awaitable<std::optional<std::uint64_t>> part_size(Service& s, std::int64_t bucket_id,
                                                        std::string key, std::string etag,
                                                        std::uint32_t part) {
  tier::UpstreamQuery q;
  q.method = "HEAD";
  q.key = std::move(key);
  q.query = {{"partNumber", std::to_string(part)}};
  q.headers = {{"If-Match", quoted(etag)}};
  auto asking = s.read_through()->ask(bucket_id, std::move(q));
  auto answer = co_await std::move(asking);
  if (!answer || (answer->head.status != 206 && answer->head.status != 200)) co_return std::nullopt;
  co_return answer->head.content_length;
}

// The part table of a multipart version, from the sizes of its first and last parts: the SDKs
// upload in parts of one size, the last one holding the rest. The table lets the version's bytes
// be checked against its ETag and answers GET ?partNumber=; empty when the sizes do not fit
// (its bytes are then checked against its checksum, if it has one, else not kept).
asio::awaitable<std::vector<storage::ObjectPartRecord>> part_table(Service& s,
                                                                   std::int64_t bucket_id,
                                                                   const storage::ObjectRecord& o) {
  const std::uint32_t n = etag_parts(o.etag);
  if (n == 0) co_return std::vector<storage::ObjectPartRecord>{};
  auto first = part_size(s, bucket_id, o.key, o.etag, 1);
  const std::optional<std::uint64_t> size = co_await std::move(first);
  if (!size || *size == 0 || (o.size_bytes + *size - 1) / *size != n)
    co_return std::vector<storage::ObjectPartRecord>{};
  const std::uint64_t rest = o.size_bytes - (n - 1) * *size;
  if (n > 1) {
    auto last = part_size(s, bucket_id, o.key, o.etag, n);
    const std::optional<std::uint64_t> last_size = co_await std::move(last);
    if (last_size != rest) co_return std::vector<storage::ObjectPartRecord>{};
  }
  std::vector<storage::ObjectPartRecord> parts(n);
  for (std::uint32_t i = 0; i < n; ++i) {
    parts[i].part_number = i + 1;
    parts[i].offset_bytes = i * *size;
    parts[i].size_bytes = i + 1 == n ? rest : *size;
  }
  co_return parts;
}

// The stub of the version an answer to HEAD (200) describes, with its part table; nullopt when
// the answer lacks a size or an ETag.
struct Learnt {
  storage::ObjectRecord stub;
  std::vector<storage::ObjectPartRecord> parts;
};
asio::awaitable<std::optional<Learnt>> learn(Service& s, std::int64_t bucket_id,
                                             const http::ClientResponseHead& head,
                                             std::string key) {
  auto stub = stub_of(head, std::move(key));
  if (!stub) co_return std::nullopt;
  auto tabling = part_table(s, bucket_id, *stub);
  std::vector<storage::ObjectPartRecord> parts = co_await std::move(tabling);
  stub->parts_count = static_cast<std::uint32_t>(parts.size());
  co_return Learnt{std::move(*stub), std::move(parts)};
}

// What `key` holds here once its state was made the upstream's (`learnt`, or nothing) in place
// of version `replacing`: the stub recorded (confirmed now), or, when the key changed here
// meanwhile (another reader took the same answer, a write came, a delete is queued), what it
// holds now. nullptr: no version.
asio::awaitable<Result<std::shared_ptr<const storage::ObjectRecord>>> take(
    Service& s, const storage::BucketRecord& bucket, std::string key, std::int64_t replacing,
    std::optional<Learnt> learnt, std::optional<std::string> seen_before = std::nullopt) {
  std::optional<storage::ObjectRecord> stub;
  std::vector<storage::ObjectPartRecord> parts;
  if (learnt) {
    stub = std::move(learnt->stub);
    parts = std::move(learnt->parts);
  }
  auto taking = s.store().take_upstream_state(bucket, key, replacing, std::move(stub),
                                              std::move(parts), std::move(seen_before));
  auto taken = co_await std::move(taking);
  if (taken) {
    if (!*taken) co_return nullptr;
    s.validated().mark((*taken)->id, now_ms());
    co_return std::make_shared<const storage::ObjectRecord>(std::move(**taken));
  }
  if (taken.error() != errc::kPreconditionFailed) co_return taken.error();
  co_return s.store().head(bucket.id, key);
}

// A page of the upstream's listing, in local names.
struct Listed {
  std::vector<storage::ListEntry> objects;
  std::vector<std::string> common_prefixes;
  bool truncated = false;
};

std::optional<Listed> parse_listing(std::string_view body, std::string_view up) {
  const auto doc = xml::XmlDocument::parse(body);
  if (!doc || doc->root().name() != "ListBucketResult") return std::nullopt;
  Listed out;
  // Asked for url-encoded (a key may hold what XML cannot), which S3 writes with '+' for a
  // space; an upstream that did not say it encoded sent them as they are.
  const auto encoded = doc->root().child("EncodingType");
  const bool decode = encoded && encoded->text() == "url";
  const auto local = [up, decode](std::string name) -> std::optional<std::string> {
    if (decode) {
      std::replace(name.begin(), name.end(), '+', ' ');
      auto decoded = aws::percent_decode(name);
      if (!decoded) return std::nullopt;
      name = std::move(*decoded);
    }
    if (!name.starts_with(up)) return std::nullopt;
    return name.substr(up.size());
  };
  for (const xml::XmlElement& e : doc->root().children()) {
    if (e.name() == "Contents") {
      const auto key = e.child("Key");
      const auto size = e.child("Size");
      if (!key || !size) return std::nullopt;
      auto name = local(key->text());
      if (!name) continue;
      storage::ListEntry entry;
      entry.key = std::move(*name);
      const auto bytes = parse_decimal<std::uint64_t>(size->text());
      if (!bytes) return std::nullopt;
      entry.size_bytes = *bytes;
      if (const auto etag = e.child("ETag")) entry.etag = unquoted(etag->text());
      if (const auto modified = e.child("LastModified"))
        entry.created_ms = parse_iso8601(modified->text()).value_or(0);
      if (const auto algorithm = e.child("ChecksumAlgorithm"))
        entry.checksum_algorithm = algorithm->text();
      out.objects.push_back(std::move(entry));
    } else if (e.name() == "CommonPrefixes") {
      if (const auto prefix = e.child("Prefix")) {
        if (auto name = local(prefix->text())) out.common_prefixes.push_back(std::move(*name));
      }
    } else if (e.name() == "IsTruncated") {
      out.truncated = e.text() == "true";
    }
  }
  return out;
}

// One page of the upstream's ListObjectsV2 under `prefix` after `start_after` (local names;
// `delimiter` and `max_keys` as given, none when empty or 0), in local names.
using ListedPage = std::variant<Listed, Error>;
// (By value: the awaitable may outlive the caller's temporaries.)
asio::awaitable<ListedPage> list_upstream_page(Service& s, const storage::BucketRecord& bucket,
                                               std::string prefix, std::string start_after,
                                               std::string delimiter, std::size_t max_keys) {
  const std::string up = config::binding_prefix(bucket.upstream);
  tier::UpstreamQuery q;
  q.query = {{"list-type", "2"}, {"encoding-type", "url"}, {"prefix", up + prefix}};
  if (max_keys != 0) q.query.emplace_back("max-keys", std::to_string(max_keys));
  if (!delimiter.empty()) q.query.emplace_back("delimiter", delimiter);
  if (!start_after.empty()) q.query.emplace_back("start-after", up + start_after);
  auto asking = s.read_through()->ask(bucket.id, std::move(q));
  auto answer = co_await std::move(asking);
  if (!answer) co_return unavailable("it cannot be reached");
  if (answer->head.status != 200) {
    co_return unavailable(fmt::format("it answers HTTP {} to a listing", answer->head.status));
  }
  auto listed = parse_listing(answer->body, up);
  if (!listed) co_return unavailable("its listing is not one");
  co_return std::move(*listed);
}

}  // namespace

namespace {

// What a HEAD of `key` upstream says it holds: nullopt for nothing.
using Headed = std::variant<std::optional<Learnt>, Error>;
asio::awaitable<Headed> head_upstream(Service& s, const storage::BucketRecord& bucket,
                                      std::string key) {
  // (No such key upstream: its name there would be longer than S3's keys.)
  if (Service::upstream_key_fits(bucket, key)) co_return std::nullopt;
  tier::UpstreamQuery q;
  q.method = "HEAD";
  q.key = key;
  q.headers = {{"x-amz-checksum-mode", "ENABLED"}};
  auto asking = s.read_through()->ask(bucket.id, std::move(q));
  auto answer = co_await std::move(asking);
  if (!answer) co_return unavailable("it cannot be reached");
  if (answer->head.status == 404) co_return std::nullopt;
  if (answer->head.status == 403) {
    // (S3 answers so for a missing key to whom may not list the bucket.)
    co_return Error(Code::kAccessDenied,
                    "The bucket's upstream does not let this server see whether it holds the key.");
  }
  if (answer->head.status != 200) {
    co_return unavailable(fmt::format("it answers HTTP {} to HEAD", answer->head.status));
  }
  auto learning = learn(s, bucket.id, answer->head, key);
  std::optional<Learnt> learnt = co_await std::move(learning);
  if (!learnt) co_return unavailable("its answer to HEAD lacks a size or an ETag");
  co_return std::move(learnt);
}

}  // namespace

asio::awaitable<LookedUp> look_up_upstream(Service& s, const storage::BucketRecord& bucket,
                                           std::string key) {
  // A change of the key still owed to the upstream (a delete here) hides what it holds: not
  // asked. What it was last seen to hold goes with the question, so that a change confirmed
  // there while the question was out (the delete's) makes the answer stale rather than taken.
  auto owing = s.store().tier_job(bucket.id, key);
  auto owed = co_await std::move(owing);
  if (!owed) co_return from_errc(owed.error());
  if (*owed) co_return nullptr;
  auto reading = s.store().tier_seen(bucket.id, key);
  auto seen = co_await std::move(reading);
  if (!seen) co_return from_errc(seen.error());
  std::string seen_before = *seen ? (*seen)->etag : std::string();
  auto heading = head_upstream(s, bucket, key);
  Headed headed = co_await std::move(heading);
  if (auto* e = std::get_if<Error>(&headed)) co_return std::move(*e);
  auto& learnt = std::get<std::optional<Learnt>>(headed);
  if (!learnt) co_return nullptr;
  // (Taken or not: a version that came here meanwhile, or none when a change of the key here
  // came or was confirmed upstream meanwhile.)
  auto taking = take(s, bucket, key, 0, std::move(learnt), std::move(seen_before));
  auto now = co_await std::move(taking);
  if (!now) co_return from_errc(now.error());
  co_return std::move(*now);
}

namespace {

// Cache-Control: no-cache or x-hots3-revalidate: 1.
bool revalidation_asked(const Request& r) {
  const auto asked = [&r](std::string_view name, std::string_view value) {
    const auto v = r.header(name);
    return v && v->find(value) != std::string_view::npos;
  };
  return asked("Cache-Control", "no-cache") || asked("x-hots3-revalidate", "1");
}

}  // namespace

bool known_missing(Service& s, const Request& r, std::int64_t bucket_id) {
  if (s.read_through()->freshness(bucket_id, r.key).negative_ttl.count() == 0) return false;
  return !revalidation_asked(r) && s.missing_keys().missing(bucket_id, r.key, now_ms());
}

void note_missing(Service& s, const Request& r, std::int64_t bucket_id) {
  const auto ttl = s.read_through()->freshness(bucket_id, r.key).negative_ttl;
  if (ttl.count() > 0) s.missing_keys().note(bucket_id, r.key, now_ms() + ttl.count());
}

bool revalidation_due(Service& s, const Request& r, const storage::ObjectRecord& object,
                      const tier::Freshness& f) {
  // (Nor for one lost before upload: the operator chooses whether the upstream's replaces it.)
  if (object.tier_state == storage::TierState::kLocal ||
      object.tier_state == storage::TierState::kLost) {
    return false;
  }
  if (revalidation_asked(r)) return true;
  // (Only a version whose data is not here is refused: a hit does not look.)
  if (object.tier_state == storage::TierState::kUpstreamOnly && s.validated().changed(object.id))
    return true;
  if (!f.revalidate_after) return false;
  if (f.revalidate_after->count() == 0) return true;
  // Since the start, or as the catalog has it (a fetch of its data, its record learnt).
  std::optional<std::int64_t> at = s.validated().at(object.id);
  if (!at && !s.validated().changed(object.id)) at = object.validated_ms;
  return !at || now_ms() - *at > f.revalidate_after->count();
}

namespace {

asio::awaitable<Revalidation> revalidate_once(Service& s, const storage::BucketRecord& bucket,
                                              storage::ObjectRecord object, tier::Freshness f) {
  const std::string etag = object.upstream_etag.value_or(object.etag);
  tier::UpstreamQuery q;
  q.method = "HEAD";
  q.key = object.key;
  q.headers = {{"If-None-Match", quoted(etag)}, {"x-amz-checksum-mode", "ENABLED"}};
  q.traffic = tier::Traffic::kRevalidation;
  auto asking = s.read_through()->ask(bucket.id, std::move(q));
  auto answer = co_await std::move(asking);
  const unsigned status = answer ? answer->head.status : 0;
  const bool same =
      status == 304 || (status == 200 && unquoted(answer->head.find("ETag").value_or("")) == etag);
  // Only a bucket in cache mode follows a delete upstream: in the others a version gone there
  // was lost by the upstream (ours to send again), not deleted by a writer.
  const bool keep = f.keep_upstream_deleted || bucket.tier != storage::BucketTier::kCache;
  if (same || (status == 404 && keep)) {
    Revalidated::Kind kind = Revalidated::Kind::kCurrent;
    if (status == 404 && object.tier_state == storage::TierState::kUpstreamOnly) {
      // Evicted here and gone there (in any mode, whatever a cache bucket keeps): no copy of
      // the version's data is left. Said as it is, and nothing changes here: the key can be
      // written again, or deleted.
      co_return Revalidated{Revalidated::Kind::kLost, nullptr};
    }
    if (status == 404 && bucket.tier == storage::BucketTier::kCache) {
      kind = Revalidated::Kind::kKept;
    } else if (status == 404) {
      // The only copy is here now: it goes up again, and nothing evicts it meanwhile.
      auto resending = s.store().resend_tier_key(bucket.id, object.key, etag);
      if (auto resent = co_await std::move(resending); !resent) co_return from_errc(resent.error());
      kind = Revalidated::Kind::kRequeued;
    }
    s.validated().mark(object.id, now_ms());
    co_return Revalidated{kind, nullptr};
  }
  std::optional<Learnt> learnt;
  if (status == 200) {
    auto learning = learn(s, bucket.id, answer->head, object.key);
    learnt = co_await std::move(learning);
  }
  if (status != 404 && !learnt) {
    if (f.serve_stale) co_return Revalidated{Revalidated::Kind::kStale, nullptr};
    co_return answer ? unavailable(fmt::format("it answers HTTP {} to HEAD", status))
                     : unavailable("it cannot be reached");
  }
  // Another version upstream, or none: this bucket's state of the key follows, unless it changed
  // here meanwhile; what it holds then is what to serve.
  auto taking = take(s, bucket, object.key, object.id, std::move(learnt));
  auto now = co_await std::move(taking);
  if (!now) co_return from_errc(now.error());
  if (!*now) co_return Revalidated{Revalidated::Kind::kGone, nullptr};
  if ((*now)->id == object.id) co_return Revalidated{};  // newer here than the upstream's
  co_return Revalidated{Revalidated::Kind::kReplaced, std::move(*now)};
}

}  // namespace

asio::awaitable<Revalidation> revalidate(Service& s, const storage::BucketRecord& bucket,
                                         storage::ObjectRecord object, tier::Freshness f) {
  auto asking = revalidate_once(s, bucket, std::move(object), f);
  Revalidation found = co_await std::move(asking);
  const auto* done = std::get_if<Revalidated>(&found);
  const tier::RevalidationResult result =
      done != nullptr ? done->kind : tier::RevalidationResult::kFailed;
  s.read_through()->count_revalidation(bucket.id, result);
  co_return found;
}

namespace {

// One page of list_upstream from one upstream page: may be empty and truncated, when all the
// upstream's keys on it are deleted here.
asio::awaitable<UpstreamPage> list_once(Service& s, const storage::BucketRecord& bucket,
                                        storage::ListQuery query) {
  auto asking = list_upstream_page(s, bucket, query.prefix, query.start_after, query.delimiter,
                                   query.max_keys);
  ListedPage asked = co_await std::move(asking);
  if (auto* e = std::get_if<Error>(&asked)) co_return std::move(*e);
  Listed* upstream = &std::get<Listed>(asked);

  auto listing = s.store().list_objects(bucket.id, query);
  auto local = co_await std::move(listing);
  if (!local) co_return from_errc(local.error());
  auto owing = s.store().tier_jobs(bucket.id, false);  // (the deletes)
  auto owed = co_await std::move(owing);
  if (!owed) co_return from_errc(owed.error());
  std::set<std::string> deleted;  // here, not yet upstream
  for (const storage::TierJob& job : *owed) {
    if (!job.object_id) deleted.insert(job.key);
  }

  // Each name once, in order: a key's entry here replaces the upstream's.
  std::map<std::string, std::optional<storage::ListEntry>> names;  // nullopt: a common prefix
  std::string upstream_last;
  for (auto& o : upstream->objects) {
    upstream_last = std::max(upstream_last, o.key);
    std::string name = o.key;
    names.insert_or_assign(std::move(name), std::move(o));
  }
  for (auto& p : upstream->common_prefixes) {
    upstream_last = std::max(upstream_last, p);
    names.try_emplace(std::move(p), std::nullopt);
  }
  if (upstream->truncated && upstream_last <= query.start_after) {
    co_return unavailable("its listing does not move on");
  }
  for (auto& o : local->objects) {
    std::string name = o.key;
    names.insert_or_assign(std::move(name), std::move(o));
  }
  for (auto& p : local->common_prefixes) names.try_emplace(std::move(p), std::nullopt);
  // What lies past the end of a truncated page of either is on the next page of both.
  std::optional<std::string> bound;
  if (upstream->truncated) bound = upstream_last;
  if (local->truncated && (!bound || local->last < *bound)) bound = local->last;

  storage::ListPage page;
  for (auto& [name, entry] : names) {
    // (A common prefix the position is inside of was listed on an earlier page.)
    if (name <= query.start_after || (bound && name > *bound)) continue;
    if (entry && deleted.contains(name)) continue;
    if (page.objects.size() + page.common_prefixes.size() == query.max_keys) {
      page.truncated = true;
      break;
    }
    page.last = name;
    if (entry) {
      page.objects.push_back(std::move(*entry));
    } else {
      page.common_prefixes.push_back(name);
    }
  }
  if (!page.truncated && bound) {
    page.truncated = true;
    page.last = *bound;
  }
  co_return page;
}

}  // namespace

asio::awaitable<UpstreamPage> list_upstream(Service& s, const storage::BucketRecord& bucket,
                                            storage::ListQuery query) {
  if (query.max_keys == 0) co_return storage::ListPage{};
  // An empty page that is not the last would leave a V1 client without a marker to go on from.
  constexpr int kRounds = 16;
  for (int round = 1;; ++round) {
    auto listing = list_once(s, bucket, query);
    UpstreamPage page = co_await std::move(listing);
    const auto* got = std::get_if<storage::ListPage>(&page);
    if (got == nullptr || !got->truncated || !got->objects.empty() ||
        !got->common_prefixes.empty() || round == kRounds) {
      co_return page;
    }
    query.start_after = got->last;
  }
}

namespace {

// Brings a version here into line with the upstream (see adopt_page): what revalidating it did.
// An upstream that cannot say fails the page, whatever the binding serves meanwhile.
using Synced = std::variant<Revalidated::Kind, Error>;
asio::awaitable<Synced> follow_upstream(Service& s, const storage::BucketRecord& bucket,
                                        storage::ObjectRecord here) {
  tier::Freshness f = s.read_through()->freshness(bucket.id, here.key);
  f.serve_stale = false;
  auto asking = revalidate(s, bucket, std::move(here), f);
  Revalidation answer = co_await std::move(asking);
  if (auto* e = std::get_if<Error>(&answer)) co_return std::move(*e);
  co_return std::get<Revalidated>(answer).kind;
}

// Whether a sync may replace or remove `v` by what the upstream holds: not a version written here
// and not yet upstream (it is what the upstream is to get), nor one lost before upload (the
// operator chooses whether the upstream's older version replaces it).
bool follows_upstream(const storage::ObjectRecord& v) {
  return v.tier_state == storage::TierState::kLocalAndUpstream ||
         v.tier_state == storage::TierState::kUpstreamOnly;
}

void count(Adopted& out, Revalidated::Kind kind) {
  switch (kind) {
    case Revalidated::Kind::kReplaced:
      ++out.replaced;
      break;
    case Revalidated::Kind::kGone:
      ++out.removed;
      break;
    case Revalidated::Kind::kCurrent:
    case Revalidated::Kind::kRequeued:
    case Revalidated::Kind::kKept:
    case Revalidated::Kind::kLost:
    case Revalidated::Kind::kStale:
    case Revalidated::Kind::kFailed:  // (never: an Error)
      ++out.present;
      break;
  }
}

}  // namespace

asio::awaitable<AdoptedPage> adopt_page(Service& s, const storage::BucketRecord& bucket,
                                        std::string prefix, std::string start_after, bool sync) {
  // (A page of kAdoptPage keys: each costs a HEAD, and the whole page one client request.)
  auto asking = list_upstream_page(s, bucket, prefix, start_after, std::string(), kAdoptPage);
  ListedPage asked = co_await std::move(asking);
  if (auto* e = std::get_if<Error>(&asked)) co_return std::move(*e);
  const Listed& listed = std::get<Listed>(asked);
  Adopted out;
  out.truncated = listed.truncated;
  if (listed.objects.empty() && out.truncated) {
    co_return unavailable("its listing does not move on");
  }
  if (!listed.objects.empty()) {
    out.last = listed.objects.back().key;
    if (out.last <= start_after) co_return unavailable("its listing does not move on");
  }
  for (const storage::ListEntry& e : listed.objects) {
    auto here = s.store().head(bucket.id, e.key);
    if (!here) co_return from_errc(here.error());
    if (*here) {
      const storage::ObjectRecord& v = **here;
      if (!sync || !follows_upstream(v) || v.upstream_etag.value_or(v.etag) == e.etag) {
        ++out.present;
        continue;
      }
      auto following = follow_upstream(s, bucket, v);
      auto followed = co_await std::move(following);
      if (auto* error = std::get_if<Error>(&followed)) co_return std::move(*error);
      count(out, std::get<Revalidated::Kind>(followed));
      continue;
    }
    auto looking = look_up_upstream(s, bucket, e.key);
    auto looked = co_await std::move(looking);
    if (auto* error = std::get_if<Error>(&looked)) co_return std::move(*error);
    const auto& now = std::get<std::shared_ptr<const storage::ObjectRecord>>(looked);
    if (!now || now->tier_state != storage::TierState::kUpstreamOnly) {
      // (Deleted here or there meanwhile, or written here: what is here stands.)
      ++(now ? out.present : out.skipped);
      continue;
    }
    ++out.adopted;
    out.bytes += now->size_bytes;
  }
  if (!sync) co_return out;

  // The versions here in the span the page covered that the upstream did not list: each is
  // asked about (a listing may lag behind a write), and removed when the upstream has none.
  std::set<std::string, std::less<>> listed_keys;
  for (const storage::ListEntry& e : listed.objects) listed_keys.insert(e.key);
  storage::ListQuery q;
  q.prefix = prefix;
  q.start_after = start_after;
  q.max_keys = kAdoptPage;
  std::size_t followed_up = 0;
  std::string handled = start_after;  // the last key here done with
  for (;;) {
    auto listing = s.store().list_objects(bucket.id, q);
    auto local = co_await std::move(listing);
    if (!local) co_return from_errc(local.error());
    for (const storage::ListEntry& o : local->objects) {
      if (out.truncated && o.key > out.last) co_return out;
      if (listed_keys.contains(o.key)) continue;
      if (followed_up == kAdoptPage) {
        // A page's work stays bounded however much went upstream: the next page goes on from
        // here (the upstream's keys after it are listed again, and found here).
        out.truncated = true;
        out.last = handled;
        co_return out;
      }
      auto here = s.store().head(bucket.id, o.key);
      if (!here) co_return from_errc(here.error());
      if (*here && follows_upstream(**here)) {
        ++followed_up;
        auto following = follow_upstream(s, bucket, **here);
        auto followed = co_await std::move(following);
        if (auto* error = std::get_if<Error>(&followed)) co_return std::move(*error);
        count(out, std::get<Revalidated::Kind>(followed));
      }
      handled = o.key;
    }
    if (!local->truncated) break;
    q.start_after = local->last;
  }
  co_return out;
}

asio::awaitable<SettledLost> settle_lost(Service& s, const storage::BucketRecord& bucket,
                                         storage::ObjectRecord lost, bool accept_older) {
  std::optional<storage::ObjectRecord> stub;  // none: forgotten
  std::vector<storage::ObjectPartRecord> parts;
  if (accept_older) {
    auto heading = head_upstream(s, bucket, lost.key);
    Headed headed = co_await std::move(heading);
    if (auto* e = std::get_if<Error>(&headed)) co_return std::move(*e);
    auto& learnt = std::get<std::optional<Learnt>>(headed);
    if (!learnt) co_return Settled{Settled::Kind::kNotUpstream, nullptr};
    stub = std::move(learnt->stub);
    parts = std::move(learnt->parts);
  }
  auto settling =
      s.store().settle_lost(bucket, lost.key, lost.id, std::move(stub), std::move(parts));
  auto settled = co_await std::move(settling);
  if (!settled) {
    if (settled.error() == errc::kPreconditionFailed)
      co_return Settled{Settled::Kind::kChanged, nullptr};
    co_return from_errc(settled.error());
  }
  if (!*settled) co_return Settled{Settled::Kind::kForgotten, nullptr};
  s.validated().mark((*settled)->id, now_ms());
  co_return Settled{Settled::Kind::kOlder,
                    std::make_shared<const storage::ObjectRecord>(std::move(**settled))};
}

}  // namespace hots3::s3
