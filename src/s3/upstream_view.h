#pragma once

// Private to src/s3: a bucket in cache mode fronts an upstream bucket that others also write.
// A key it holds no version of is looked up there and recorded as an evicted version (its data
// then comes back by read-through, as any evicted version's), and its listings are the
// upstream's (or, with list = "local", the catalog's, kept in line by syncs).

#include "errors.h"
#include "service.h"

#include "hots3/storage/records.h"

#include <boost/asio/awaitable.hpp>

#include <memory>
#include <string>
#include <variant>

namespace hots3::s3 {

// What the upstream holds under `key`, recorded as an evicted version of `bucket`: nullptr when
// it holds nothing, or when a delete of the key here is not yet confirmed there. An Error
// (503) when the upstream cannot say.
using LookedUp = std::variant<std::shared_ptr<const storage::ObjectRecord>, Error>;
boost::asio::awaitable<LookedUp> look_up_upstream(Service& s, const storage::BucketRecord& bucket,
                                                  std::string key);

// Whether the upstream of bound bucket `bucket_id` was found lately not to hold the request's key
// (its binding's negative_ttl), so that the read answers 404 without asking it again; never when
// the request asks for revalidation. note_missing records such an answer.
bool known_missing(Service& s, const Request& r, std::int64_t bucket_id);
void note_missing(Service& s, const Request& r, std::int64_t bucket_id);

// Whether a read of `object` (of a bound bucket whose rules are `f`) first asks the upstream
// whether it still holds that version: by the rules, or because the request asks for it
// (Cache-Control: no-cache, x-hots3-revalidate: 1). Never for a version written here and not yet
// upstream: it is newer than anything there.
bool revalidation_due(Service& s, const Request& r, const storage::ObjectRecord& object,
                      const tier::Freshness& f);

// What asking the upstream about a version here found.
struct Revalidated {
  // What the upstream held: kCurrent (or the key changed here meanwhile: what the read has
  // stands), kRequeued, kKept, kLost (the read fails), kStale (the rules serve the version here
  // all the same), kReplaced (`now` is the version recorded here as evicted) or kGone; never
  // kFailed (an Error instead).
  using Kind = tier::RevalidationResult;
  Kind kind = Kind::kCurrent;
  std::shared_ptr<const storage::ObjectRecord> now;
};
// An Error (503) when the upstream could not say and the rules fail the read.
using Revalidation = std::variant<Revalidated, Error>;
boost::asio::awaitable<Revalidation> revalidate(Service& s, const storage::BucketRecord& bucket,
                                                storage::ObjectRecord object, tier::Freshness f);

// One page of `query` over the upstream's keys, merged with those here: a version here is listed
// as it is here (it is what a GET of it answers), a key written here and not yet upstream is
// listed too, and one deleted here and not yet upstream is not.
using UpstreamPage = std::variant<storage::ListPage, Error>;
boost::asio::awaitable<UpstreamPage> list_upstream(Service& s, const storage::BucketRecord& bucket,
                                                   storage::ListQuery query);

// What adopting a page of the upstream's keys did.
struct Adopted {
  std::uint64_t adopted = 0;   // recorded here as evicted versions
  std::uint64_t bytes = 0;     // their size
  std::uint64_t present = 0;   // a version here already: left as it is
  std::uint64_t skipped = 0;   // gone upstream since the listing, or deleted here and not yet there
  std::uint64_t replaced = 0;  // (sync) another version upstream: recorded here in its place
  std::uint64_t removed = 0;   // (sync) none upstream any more: removed here too
  std::string last;            // the page's last key (local name): the next page starts after it
  bool truncated = false;      // more keys follow
};
using AdoptedPage = std::variant<Adopted, Error>;
// Records each key of one page of the upstream's listing under `prefix`, after `start_after`,
// that this bucket holds no version of: a HEAD of it, as a look-up in cache mode makes (size,
// ETag, headers, metadata, checksums, part table), becomes an evicted version. A fresh or lost
// catalog so fronts an upstream bucket that holds data: HEAD and LIST answer from here, and GET
// reads through. An Error (503) when the upstream cannot say; what was recorded stays.
//
// `sync` (cache mode) also brings the versions here into line with the upstream, over the same
// span of keys (after `start_after`, up to the page's last key, or to the prefix's end on the
// last page): one whose upstream ETag differs from the listing's, or that the listing lacks, is
// revalidated (see revalidate: replaced, or removed as the binding's on_upstream_delete says).
// A version written here and not yet upstream is left alone. At most kAdoptPage versions the
// listing lacks are revalidated per page: past them the page ends early, at the last one. So
// the catalog follows an upstream that others write, and `list = "local"` can answer from it.
boost::asio::awaitable<AdoptedPage> adopt_page(Service& s, const storage::BucketRecord& bucket,
                                               std::string prefix, std::string start_after,
                                               bool sync);

// What settling a version lost before upload (see storage::recover_store) did.
struct Settled {
  enum class Kind {
    kOlder,        // the upstream's version took its place (`now`)
    kForgotten,    // the key holds no version here now
    kNotUpstream,  // the upstream holds no version of the key: nothing to take
    kChanged,      // the key changed here meanwhile (a write, a delete): what it holds stands
  } kind = Kind::kOlder;
  std::shared_ptr<const storage::ObjectRecord> now;
};
using SettledLost = std::variant<Settled, Error>;
// Settles `lost`: with `accept_older`, a HEAD of its key upstream (as a look-up makes) becomes
// an evicted version in its place; else it is forgotten. The upload its job owed is dropped
// either way. An Error (503) when the upstream cannot say.
boost::asio::awaitable<SettledLost> settle_lost(Service& s, const storage::BucketRecord& bucket,
                                                storage::ObjectRecord lost, bool accept_older);

}  // namespace hots3::s3
