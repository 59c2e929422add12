// hots3's own operations on a bucket bound to an upstream: flush (POST /bucket?x-hots3-flush),
// which sends a prefix's changes up now and answers once the upstream has them; evict
// (POST /bucket?x-hots3-evict), which frees the device space of what the upstream holds; pin and
// unpin (POST /bucket?x-hots3-pin, ?x-hots3-unpin), which keep keys from eviction; adopt
// (POST /bucket?x-hots3-adopt), which records what the upstream holds and this bucket does not;
// parked (GET /bucket?x-hots3-parked), the changes the upstream refused for good; and S3's
// RestoreObject (POST /bucket/key?restore), which brings an evicted object back ahead of reading.

#include "body.h"
#include "conditions.h"
#include "names.h"
#include "read_through.h"
#include "request_xml.h"
#include "s3_xml.h"
#include "service.h"
#include "upstream_view.h"

#include "hots3/aws/sigv4.h"
#include "hots3/common/logging.h"

#include <fmt/format.h>

#include <charconv>
#include <limits>
#include <variant>

namespace hots3::s3 {

namespace {

// The request's bucket, if the caller may write to it and it is bound to an upstream (in any
// mode: a write-through or cache bucket owes changes too, those whose request gave up waiting
// for them); otherwise answers why not.
asio::awaitable<std::optional<storage::BucketRecord>> bound_for_write(Service& s, Request& r) {
  auto bucket = co_await s.bucket_for(r, Access::kWrite);
  if (!bucket) co_return std::nullopt;
  if (bucket->tier != storage::BucketTier::kNone) co_return bucket;
  auto refusing =
      s.send_error(r, Error(Code::kInvalidRequest, "The bucket is not bound to an upstream."));
  co_await std::move(refusing);
  co_return std::nullopt;
}

// The key or prefix a pin or unpin names: key=K (that key) or prefix=P (every key under P; the
// whole bucket when neither is given).
std::variant<storage::KeySpan, Error> pin_span(const Request& r) {
  const std::string* key = r.param("key");
  const std::string* prefix = r.param("prefix");
  if (key != nullptr && prefix != nullptr) {
    return Error(Code::kInvalidArgument, "Name a key or a prefix, not both.")
        .with("ArgumentName", "key");
  }
  if (key != nullptr) {
    if (auto e = validate_key(*key)) return std::move(*e);
    return storage::KeySpan{*key, true};
  }
  if (prefix != nullptr && prefix->size() > kKeyBytesMax) {
    return Error(Code::kInvalidArgument, "The prefix is longer than a key may be.")
        .with("ArgumentName", "prefix");
  }
  return storage::KeySpan{prefix != nullptr ? *prefix : std::string(), false};
}

// The bucket (bound, the caller may write) and what a pin or unpin names; none when the
// request was answered.
asio::awaitable<std::optional<std::pair<storage::BucketRecord, storage::KeySpan>>> pin_request(
    Service& s, Request& r) {
  auto finding = bound_for_write(s, r);
  auto bucket = co_await std::move(finding);
  if (!bucket) co_return std::nullopt;
  auto named = pin_span(r);
  if (auto* e = std::get_if<Error>(&named)) {
    auto refusing = s.send_error(r, std::move(*e));
    co_await std::move(refusing);
    co_return std::nullopt;
  }
  co_return std::pair(std::move(*bucket), std::get<storage::KeySpan>(std::move(named)));
}

Error pin_refusal(const storage::PinOutcome& outcome) {
  if (outcome.too_many_rules) {
    return Error(Code::kPinLimitExceeded,
                 fmt::format("The bucket has {} pinned keys and prefixes, the most it may have: "
                             "pin a prefix, or unpin some first.",
                             storage::kMaxPinRules));
  }
  return Error(Code::kPinLimitExceeded,
               fmt::format("Pinning {} more bytes would pin {} bytes of the bucket, past its "
                           "pin_max of {} bytes.",
                           outcome.adding_bytes, outcome.pinned_bytes + outcome.adding_bytes,
                           outcome.max_bytes))
      .with("PinnedBytes", std::to_string(outcome.pinned_bytes))
      .with("AddingBytes", std::to_string(outcome.adding_bytes))
      .with("MaxBytes", std::to_string(outcome.max_bytes));
}

// Asks for the restore of every evicted, pinned version of `span` of `bucket` while they fit in
// `budget` (the bytes fetching may still bring: taken from it); returns how many were queued
// (those already under way are not counted). Stops when the queue is full or the next version
// does not fit: what it leaves is fetched by its first GET.
asio::awaitable<std::uint64_t> fetch_pinned(Service& s, storage::BucketRecord bucket,
                                            storage::KeySpan span, std::uint64_t& budget) {
  constexpr std::size_t kPage = 1000;
  std::uint64_t queued = 0;
  std::string after;
  for (;;) {
    auto listing = s.store().versions_in_state(bucket.id, span, storage::TierState::kUpstreamOnly,
                                               after, kPage, true);
    auto page = co_await std::move(listing);
    if (!page) {
      log::warn("tier: pinned objects of {} not fetched: {}", bucket.name, page.error().message());
      co_return queued;
    }
    for (storage::ObjectRecord& object : *page) {
      after = object.key;
      if (object.size_bytes > budget) {
        log::warn(
            "tier: pinned objects of {} from {} on are not fetched: they would pass the "
            "bucket's pin_max of {} bytes; each comes back on its first GET",
            bucket.name, log::escaped(after), s.store().pin_max_bytes(bucket.id));
        budget = 0;
        co_return queued;
      }
      const std::uint64_t size = object.size_bytes;
      auto asking = ask_restore(s, {std::move(object), bucket.name, true, 0});
      const FillFlights::Asked asked = co_await std::move(asking);
      if (asked == FillFlights::Asked::kFull) {
        log::warn("tier: the restore queue is full: pinned objects of {} after {} wait for a GET",
                  bucket.name, log::escaped(after));
        co_return queued;
      }
      budget -= size;
      if (asked == FillFlights::Asked::kQueued) ++queued;
    }
    if (page->size() < kPage) co_return queued;
  }
}

// The bytes of the versions of `spans` of `bucket` that are pinned and here (written here, or
// uploaded and kept).
asio::awaitable<std::uint64_t> pinned_here_bytes(Service& s, const storage::BucketRecord& bucket,
                                                 const std::vector<storage::KeySpan>& spans) {
  constexpr std::size_t kPage = 1000;
  std::uint64_t bytes = 0;
  for (const storage::KeySpan& span : spans) {
    for (const storage::TierState state :
         {storage::TierState::kLocal, storage::TierState::kLocalAndUpstream}) {
      std::string after;
      for (;;) {
        auto listing = s.store().versions_in_state(bucket.id, span, state, after, kPage, true);
        auto page = co_await std::move(listing);
        if (!page) break;
        for (const storage::ObjectRecord& object : *page) bytes += object.size_bytes;
        if (page->size() < kPage) break;
        after = page->back().key;
      }
    }
  }
  co_return bytes;
}

}  // namespace

// A bound bucket the request may write (else it is answered), for an operation that needs the
// bucket's upstream served here (503 else).
asio::awaitable<std::optional<storage::BucketRecord>> served_for_write(Service& s, Request& r) {
  auto finding = bound_for_write(s, r);
  auto bucket = co_await std::move(finding);
  if (!bucket || s.read_through() != nullptr) co_return bucket;
  auto refusing = s.send_error(
      r, Error(Code::kServiceUnavailable, "The bucket's upstream is not served by this server."));
  co_await std::move(refusing);
  co_return std::nullopt;
}

asio::awaitable<void> fetch_pinned_at_start(Service& s) {
  auto listing = s.store().list_buckets();
  if (!listing) co_return;
  for (const storage::BucketRecord& bucket : *listing) {
    if (bucket.tier == storage::BucketTier::kNone) continue;
    std::uint64_t queued = 0;
    const std::vector<storage::KeySpan> spans = s.store().pin_spans(bucket.id);
    if (spans.empty()) continue;
    // The globs pin without asking, so their fetch is what pin_max bounds here.
    auto counting = pinned_here_bytes(s, bucket, spans);
    const std::uint64_t here = co_await std::move(counting);
    const std::uint64_t cap = s.store().pin_max_bytes(bucket.id);
    std::uint64_t budget = cap > here ? cap - here : 0;
    for (const storage::KeySpan& span : spans) {
      auto fetching = fetch_pinned(s, bucket, span, budget);
      queued += co_await std::move(fetching);
    }
    if (queued > 0)
      log::info("tier: {} pinned objects of {} are being fetched", queued, bucket.name);
  }
}

asio::awaitable<bool> pin_on_write(Service& s, Request& r, const storage::BucketRecord& bucket,
                                   std::uint64_t incoming) {
  const std::optional<std::string_view> asked = r.header("x-hots3-pin");
  if (!asked || *asked == "false") co_return true;
  std::optional<Error> refused;
  if (*asked != "true") {
    refused = Error(Code::kInvalidArgument, "x-hots3-pin is true or false.")
                  .with("ArgumentName", "x-hots3-pin")
                  .with("ArgumentValue", std::string(*asked));
  } else if (bucket.tier == storage::BucketTier::kNone) {
    refused = Error(Code::kInvalidRequest,
                    "x-hots3-pin: the bucket is not bound to an upstream, so nothing is evicted.");
  } else {
    auto pinning = s.store().pin(bucket.id, {r.key, true}, incoming);
    auto outcome = co_await std::move(pinning);
    if (!outcome) {
      refused = from_errc(outcome.error());
    } else if (!outcome->pinned) {
      refused = pin_refusal(*outcome);
    }
  }
  if (!refused) co_return true;
  auto refusing = s.send_error(r, std::move(*refused));
  co_await std::move(refusing);
  co_return false;
}

// POST /bucket?x-hots3-flush[&prefix=P][&seq=N][&wait=false]: the changes acknowledged under P
// go up at once, without the coalescing delay. The answer comes once the upstream has all of
// them, once only refused ones (parked) are left, or after the longest wait of a request; it says
// which (Owed, Parked), and Seq names the changes waited for, so that a caller still owed some
// asks again with seq=Seq and waits for the same set, not for changes made since. wait=false:
// the answer comes at once.
asio::awaitable<void> flush_bucket(Service& s, Request& r) {
  auto finding = bound_for_write(s, r);
  auto bucket = co_await std::move(finding);
  if (!bucket) co_return;
  std::int64_t seq = 0;
  if (const std::string* given = r.param("seq")) {
    const auto [end, ec] = std::from_chars(given->data(), given->data() + given->size(), seq);
    if (ec != std::errc{} || end != given->data() + given->size() || seq <= 0) {
      co_return co_await s.send_error(r, Error(Code::kInvalidArgument, "seq is a positive integer.")
                                             .with("ArgumentName", "seq")
                                             .with("ArgumentValue", *given));
    }
  }
  const std::string* wait_param = r.param("wait");
  const bool wait = wait_param == nullptr || *wait_param != "false";
  const std::string prefix = r.param("prefix") ? *r.param("prefix") : std::string();
  Service::UpstreamWait result;
  if (wait) {
    auto waiting = s.wait_upstream(*bucket, {prefix, false}, seq);
    auto waited = co_await std::move(waiting);
    if (!waited) co_return co_await s.send_error(r, from_errc(waited.error()));
    result = std::move(*waited);
  } else {
    auto expedite = s.store().expedite_tier_jobs(bucket->id, {prefix, false});
    auto last = co_await std::move(expedite);
    if (!last) co_return co_await s.send_error(r, from_errc(last.error()));
    result.seq = seq != 0 ? seq : *last;
    auto read = s.store().tier_owed(bucket->id, {prefix, false}, result.seq);
    auto owed = co_await std::move(read);
    if (!owed) co_return co_await s.send_error(r, from_errc(owed.error()));
    result.owed = std::move(*owed);
  }
  XmlWriter xml("FlushResult");
  xml.element("Bucket", bucket->name);
  xml.element("Prefix", prefix);
  xml.element("Seq", std::to_string(result.seq));
  xml.element("Owed", std::to_string(result.owed.jobs));
  xml.element("Parked", std::to_string(result.owed.parked));
  if (result.owed.parked > 0) xml.element("ParkedError", result.owed.parked_error);
  co_await s.send_xml(r, 200, xml.finish());
}

// POST /bucket?x-hots3-adopt[&prefix=P][&start-after=K][&sync]: one page of the upstream's keys
// under P (after K) that this bucket holds no version of is recorded here as evicted versions;
// with `sync`, the versions here over the same span follow the upstream too (see adopt_page). The
// answer says what it did, and NextStartAfter (percent-encoded: a key may hold what XML cannot)
// where the next page starts, while IsTruncated.
asio::awaitable<void> adopt_keys(Service& s, Request& r) {
  auto finding = served_for_write(s, r);
  auto bucket = co_await std::move(finding);
  if (!bucket) co_return;
  const std::string prefix = r.param("prefix") ? *r.param("prefix") : std::string();
  const std::string start_after = r.param("start-after") ? *r.param("start-after") : std::string();
  const bool sync = r.has_param("sync");
  if (sync && bucket->tier != storage::BucketTier::kCache) {
    co_return co_await s.send_error(
        r, Error(Code::kInvalidRequest,
                 "A sync is for buckets in cache mode: in the others the upstream changes only "
                 "through this server."));
  }
  auto adopting = adopt_page(s, *bucket, prefix, start_after, sync);
  auto adopted = co_await std::move(adopting);
  if (auto* e = std::get_if<Error>(&adopted)) co_return co_await s.send_error(r, std::move(*e));
  const Adopted& page = std::get<Adopted>(adopted);
  XmlWriter xml("AdoptResult");
  xml.element("Bucket", bucket->name);
  xml.element("Prefix", prefix);
  xml.element("Adopted", std::to_string(page.adopted));
  xml.element("Bytes", std::to_string(page.bytes));
  xml.element("Present", std::to_string(page.present));
  xml.element("Skipped", std::to_string(page.skipped));
  if (sync) {
    xml.element("Replaced", std::to_string(page.replaced));
    xml.element("Removed", std::to_string(page.removed));
  }
  xml.element("IsTruncated", page.truncated);
  if (page.truncated) xml.element("NextStartAfter", aws::uri_encode(page.last, true));
  co_await s.send_xml(r, 200, xml.finish());
}

// POST /bucket?x-hots3-lost&settle=accept-older|forget, with key=K or prefix=P (the whole
// bucket without either) and start-after=K: a page of the versions lost before upload (see
// `hots3 tier recover`), each settled: the upstream's version takes its place (accept-older,
// only in a bucket whose upstream is served here), or the key holds no version here any more
// (forget). What each became is in the answer; one the upstream holds nothing of stays lost.
asio::awaitable<void> settle_lost_keys(Service& s, Request& r) {
  constexpr std::size_t kPage = 100;  // each costs a HEAD upstream, the page one request
  const std::string* how = r.param("settle");
  if (how == nullptr || (*how != "accept-older" && *how != "forget")) {
    co_return co_await s.send_error(
        r, Error(Code::kInvalidArgument, "settle must be accept-older or forget.")
               .with("ArgumentName", "settle"));
  }
  const bool accept_older = *how == "accept-older";
  std::optional<storage::BucketRecord> bucket;
  if (accept_older) {
    auto finding = served_for_write(s, r);
    bucket = co_await std::move(finding);
  } else {
    bucket = co_await s.bucket_for(r, Access::kWrite);
  }
  if (!bucket) co_return;
  auto named = pin_span(r);
  if (auto* e = std::get_if<Error>(&named)) co_return co_await s.send_error(r, std::move(*e));
  const auto& span = std::get<storage::KeySpan>(named);
  const std::string start_after = r.param("start-after") ? *r.param("start-after") : std::string();
  auto listing = s.store().versions_in_state(bucket->id, span, storage::TierState::kLost,
                                             start_after, kPage, false);
  auto page = co_await std::move(listing);
  if (!page) co_return co_await s.send_error(r, from_errc(page.error()));
  XmlWriter xml("LostResult");
  xml.element("Bucket", bucket->name);
  for (storage::ObjectRecord& lost : *page) {
    const std::string key = lost.key;
    auto settling = settle_lost(s, *bucket, std::move(lost), accept_older);
    auto settled = co_await std::move(settling);
    // (What was settled before stays so: the command runs again from the start.)
    if (auto* e = std::get_if<Error>(&settled)) co_return co_await s.send_error(r, std::move(*e));
    const Settled& done = std::get<Settled>(settled);
    xml.open("Version");
    xml.element("Key", aws::uri_encode(key, true));
    switch (done.kind) {
      case Settled::Kind::kOlder:
        xml.element("Outcome", "older");
        xml.element("ETag", quoted(done.now->etag));
        xml.element("Size", std::to_string(done.now->size_bytes));
        break;
      case Settled::Kind::kForgotten:
        xml.element("Outcome", "forgotten");
        break;
      case Settled::Kind::kNotUpstream:
        xml.element("Outcome", "not-upstream");
        break;
      case Settled::Kind::kChanged:
        xml.element("Outcome", "changed");
        break;
    }
    xml.close();
  }
  const bool truncated = page->size() == kPage;
  xml.element("IsTruncated", truncated);
  if (truncated) xml.element("NextStartAfter", aws::uri_encode(page->back().key, true));
  co_await s.send_xml(r, 200, xml.finish());
}

// GET /bucket?x-hots3-parked: the bound bucket's parked jobs (changes the upstream refused in a
// way no retry mends: an operator must act), the longest parked first, with what the upstream
// last answered; at most kParkedShown of them, and how many there are in all.
asio::awaitable<void> parked_jobs(Service& s, Request& r) {
  constexpr std::size_t kParkedShown = 100;
  auto bucket = co_await s.bucket_for(r, Access::kRead);
  if (!bucket) co_return;
  if (bucket->tier == storage::BucketTier::kNone) {
    co_return co_await s.send_error(
        r, Error(Code::kInvalidRequest, "The bucket is not bound to an upstream."));
  }
  auto reading = s.store().parked_tier_jobs(bucket->id, kParkedShown);
  auto parked = co_await std::move(reading);
  if (!parked) co_return co_await s.send_error(r, from_errc(parked.error()));
  auto counting = s.store().tier_backlog();
  auto backlog = co_await std::move(counting);
  if (!backlog) co_return co_await s.send_error(r, from_errc(backlog.error()));
  std::uint64_t count = 0;
  for (const storage::TierBacklog& b : *backlog) {
    if (b.bucket_id == bucket->id) count = b.parked;
  }
  XmlWriter xml("ParkedJobs");
  xml.element("Bucket", bucket->name);
  xml.element("Count", std::to_string(std::max<std::uint64_t>(count, parked->size())));
  for (const storage::TierJob& job : *parked) {
    xml.open("Job");
    xml.element("Key", job.key);
    xml.element("Action", !job.object_id ? "delete" : job.source_key.empty() ? "upload" : "copy");
    xml.element("Attempts", std::to_string(job.attempts));
    xml.element("Error", job.last_error);
    xml.close();
  }
  co_await s.send_xml(r, 200, xml.finish());
}

// POST /bucket?x-hots3-evict[&prefix=P]: the versions under P that the upstream holds, and that
// no queued change needs, give their device space back; a GET reads them through again.
asio::awaitable<void> evict_bucket(Service& s, Request& r) {
  auto finding = served_for_write(s, r);
  auto bucket = co_await std::move(finding);
  if (!bucket) co_return;
  const std::string prefix = r.param("prefix") ? *r.param("prefix") : std::string();
  auto evicting = s.store().evict_objects(bucket->id, {prefix, false});
  auto evicted = co_await std::move(evicting);
  if (!evicted) co_return co_await s.send_error(r, from_errc(evicted.error()));
  XmlWriter xml("EvictResult");
  xml.element("Bucket", bucket->name);
  xml.element("Prefix", prefix);
  xml.element("Objects", std::to_string(evicted->objects));
  xml.element("Bytes", std::to_string(evicted->bytes));
  co_await s.send_xml(r, 200, xml.finish());
}

// POST /bucket?x-hots3-pin[&key=K | &prefix=P]: the key, or every key under the prefix (also
// those written later), is never evicted, and its evicted versions are fetched now (as restores,
// whatever the admission rule). 409 PinLimitExceeded, with the byte counts, when the bucket's
// pinned versions would then hold more than its pin_max: nothing changes then.
asio::awaitable<void> pin_keys(Service& s, Request& r) {
  auto reading = pin_request(s, r);
  auto request = co_await std::move(reading);
  if (!request) co_return;
  const storage::BucketRecord* bucket = &request->first;
  const storage::KeySpan& span = request->second;
  auto pinning = s.store().pin(bucket->id, span, std::nullopt);
  auto outcome = co_await std::move(pinning);
  if (!outcome) co_return co_await s.send_error(r, from_errc(outcome.error()));
  if (!outcome->pinned) co_return co_await s.send_error(r, pin_refusal(*outcome));
  std::uint64_t fetching = 0;
  if (s.read_through() != nullptr) {
    // (The pin was counted against pin_max already.)
    std::uint64_t budget = std::numeric_limits<std::uint64_t>::max();
    auto fetch = fetch_pinned(s, *bucket, span, budget);
    fetching = co_await std::move(fetch);
  }
  XmlWriter xml("PinResult");
  xml.element("Bucket", bucket->name);
  xml.element(span.exact ? "Key" : "Prefix", span.text);
  xml.element("PinnedBytes", std::to_string(outcome->pinned_bytes + outcome->adding_bytes));
  xml.element("MaxBytes", std::to_string(outcome->max_bytes));
  xml.element("Fetching", std::to_string(fetching));
  co_await s.send_xml(r, 200, xml.finish());
}

// POST /bucket?x-hots3-unpin[&key=K | &prefix=P]: the pins of the key, or every pin under the
// prefix, go (its versions may be evicted again); pins by the binding's globs stay. Says how many
// went, and of a key whether it is still pinned (by a glob of the binding or a wider prefix).
asio::awaitable<void> unpin_keys(Service& s, Request& r) {
  auto reading = pin_request(s, r);
  auto request = co_await std::move(reading);
  if (!request) co_return;
  const storage::BucketRecord* bucket = &request->first;
  const storage::KeySpan& span = request->second;
  auto unpinning = s.store().unpin(bucket->id, span);
  auto removed = co_await std::move(unpinning);
  if (!removed) co_return co_await s.send_error(r, from_errc(removed.error()));
  XmlWriter xml("UnpinResult");
  xml.element("Bucket", bucket->name);
  xml.element(span.exact ? "Key" : "Prefix", span.text);
  xml.element("Removed", std::to_string(*removed));
  // (Of a key: by a glob of the binding or a prefix. Under a prefix, globs may still pin keys
  // one by one: that is not told.)
  if (span.exact) {
    xml.element("StillPinned", s.store().pinned(bucket->id, span.text) ? "true" : "false");
  }
  co_await s.send_xml(r, 200, xml.finish());
}

// POST /bucket/key?restore: an evicted object's data is fetched into the device now, so that
// reading it later is local; unmodified SDKs prefetch this way. 202 when the fetch starts or is
// queued, 409 RestoreAlreadyInProgress while one is queued or under way (HEAD shows it as
// x-amz-restore: ongoing-request="true"), 200 when the data is here already (where S3 would say
// InvalidObjectState of an object that was never archived: every object of hots3 may be), 503
// SlowDown when the device is too full to keep it. The object is kept whatever the admission
// rule says: it was asked for. The request's Days and tier change nothing: a restored object
// stays for as long as eviction leaves it. Reading rights suffice, since a GET would fetch the
// same bytes. The queue is kept in memory: a restore not yet run when the server stops is asked
// for again.
asio::awaitable<void> restore_object(Service& s, Request& r) {
  auto bucket = co_await s.bucket_for(r, Access::kRead);
  if (!bucket) co_return;
  if (auto e = check_version_id(r)) co_return co_await s.send_error(r, std::move(*e));
  auto reading = read_small_body(r);
  auto text = co_await std::move(reading);
  if (auto* e = std::get_if<Error>(&text)) co_return co_await s.send_error(r, std::move(*e));
  if (auto e = check_restore_request(std::get<std::string>(text)))
    co_return co_await s.send_error(r, std::move(*e));
  auto found = s.store().head(bucket->id, r.key);
  if (!found) co_return co_await s.send_error(r, from_errc(found.error()));
  if (!*found) co_return co_await s.send_error(r, Error(Code::kNoSuchKey).with("Key", r.key));
  const storage::ObjectRecord& object = **found;
  if (object.tier_state == storage::TierState::kLost)
    co_return co_await s.send_error(r, from_errc(errc::kLost));
  if (object.tier_state != storage::TierState::kUpstreamOnly) {
    co_return co_await s.send_empty(r, 200, s.response(200));
  }
  std::optional<Error> refused;
  if (s.read_through() == nullptr) {
    refused.emplace(Code::kServiceUnavailable,
                    "The object's data is kept upstream, which this server does not read from.");
  } else if (!s.fill_flights().restoring(object.id) &&
             !s.store().tier_fill_allows(object.size_bytes)) {
    refused.emplace(Code::kSlowDown, "The device is too full to take the object back now.");
  }
  if (refused) {
    auto refusing = s.send_error(r, std::move(*refused));
    co_return co_await std::move(refusing);
  }
  auto asking = ask_restore(s, {object, bucket->name, true, 0});
  const FillFlights::Asked asked = co_await std::move(asking);
  if (asked == FillFlights::Asked::kAlready)
    co_return co_await s.send_error(r, Code::kRestoreAlreadyInProgress);
  if (asked == FillFlights::Asked::kFull) co_return co_await s.send_error(r, Code::kSlowDown);
  co_await s.send_empty(r, 202, s.response(202));
}

}  // namespace hots3::s3
