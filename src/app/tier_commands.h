#pragma once

// `hots3 tier ...`: commands an operator runs against a running server over HTTP.

#include "hots3/s3client/s3_client.h"

#include <optional>
#include <string>

namespace hots3::app {

struct TierCommandOptions {
  std::string endpoint;   // "http://127.0.0.1:9000"
  std::string ca_file;    // https: certificates to trust ("" = the system's)
  bool insecure = false;  // https: no verification
  // Signing credentials when the environment has none: the development key pair of this data
  // directory ("" = ./data).
  std::string data_dir;
  bool admin = false;  // hots3 admin: HOTS3_ACCESS_KEY / HOTS3_SECRET_KEY before AWS_*
};

// The signing options of a command: the server, and the credentials (see TierCommandOptions).
// Throws std::runtime_error when there are none.
s3client::Options signed_options(const TierCommandOptions& options);

// Prints /health/upstream (as text, or the JSON with `json`), of every bound bucket or of
// `bucket` only; 0 when all is ok (the bucket is), 1 when it is not (or the server cannot be
// asked), as a script or a probe wants. Of one bucket, also its parked jobs with their keys and
// errors (GET /bucket?x-hots3-parked, signed as tier_flush).
int tier_status(const TierCommandOptions& options, const std::string& bucket, bool json);

// Sends the changes under `prefix` of `bucket` up now (POST /bucket?x-hots3-flush, signed with
// AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, or HOTS3_ACCESS_KEY / HOTS3_SECRET_KEY). With
// `wait`, returns once the upstream has everything acknowledged under it before the call,
// printing progress; 0 then, 1 when some of it was refused for good (parked) or the server
// failed.
int tier_flush(const TierCommandOptions& options, const std::string& bucket,
               const std::string& prefix, bool wait);

// Frees the device space of the objects under `prefix` of `bucket` that the upstream holds
// (POST /bucket?x-hots3-evict, signed as tier_flush); a GET reads them through again. Prints
// what was freed; 0, or 1 when the server refused or failed.
int tier_evict(const TierCommandOptions& options, const std::string& bucket,
               const std::string& prefix);

// Records what the upstream holds under `prefix` and `bucket` does not as evicted versions, a page
// of the upstream's listing at a time (POST /bucket?x-hots3-adopt, signed as tier_flush), so that
// a fresh or lost catalog fronts an upstream bucket that holds data. Prints the counts after each
// page; 0, or 1 when the server refused or failed (run again, it goes on: what is here is left).
// `sync` (hots3 tier sync, cache mode): the versions here follow the upstream too, replaced where
// it holds another and removed where it holds none (as on_upstream_delete says), so that a
// catalog kept by syncs can answer listings (list = "local").
int tier_adopt(const TierCommandOptions& options, const std::string& bucket,
               const std::string& prefix, bool sync);

// Starts a prefetch job (POST /bucket?x-hots3-prefetch, signed as tier_flush) of every evicted
// object under `prefix`, or of the keys listed in `list_file` (one per line), and prints what it
// will fetch; with `wait`, prints its progress (objects, bytes, rate, ETA) every second until it
// ends (with `job`, of that job: one a restart cut off goes on by itself). 0, or 1 when the server
// refused (PrefetchTooLarge: it would not fit) or a fetch failed.
struct PrefetchTarget {
  std::string prefix;
  std::string list_file;  // "" = every key under prefix
  bool wait = false;
  std::string job;  // watch this running job instead of starting one (implies wait)
};
int tier_prefetch(const TierCommandOptions& options, const std::string& bucket,
                  const PrefetchTarget& target);

// Lists the objects under `prefix` of `bucket` with where each one's data is, a line each:
// its x-hots3-tier (dirty: not upstream yet; clean: here and upstream; remote: upstream only,
// read through; absent: in cache mode, a key of the upstream never read here), whether it is
// pinned, its size and key; then the counts. A ListObjectsV2 a
// page at a time and a HEAD of each key (signed as tier_flush); 0, or 1 when the server refused
// or failed.
int tier_ls(const TierCommandOptions& options, const std::string& bucket,
            const std::string& prefix);

// Asks the upstream again about every object under `prefix` of `bucket` (a ListObjectsV2 and a
// HEAD of each key with x-hots3-revalidate: 1), whatever the binding's revalidate rule: a line
// per object whose state here changed (replaced by a newer version upstream, gone, or stale:
// the upstream could not say), then the counts. 0, or 1 when the server refused or failed.
int tier_revalidate(const TierCommandOptions& options, const std::string& bucket,
                    const std::string& prefix);

// Brings the catalog of `bucket` and its upstream back into line under `prefix`, saying what
// differed. In cache mode, as tier_adopt with `sync` (keys new upstream recorded, those changed
// or gone followed). Otherwise each key's version is asked about upstream (a listing and a HEAD
// of each, as tier_revalidate): a line per key that was not as it should be there: requeued
// (uploaded once, the upstream had lost it: it goes up again), replaced (the upstream holds
// another version, which takes its place here), gone, stale (the upstream did not say), lost
// (here, before upload); then the counts. 0, or 1 when the server refused or failed.
int tier_reconcile(const TierCommandOptions& options, const std::string& bucket,
                   const std::string& prefix);

// What a pin or unpin names: one key, or every key under a prefix ("": the whole bucket).
struct PinTarget {
  std::optional<std::string> key;
  std::string prefix;
};

// Pins a key or a prefix of `bucket` (POST /bucket?x-hots3-pin, signed as tier_flush): never
// evicted, and fetched now where evicted. Prints the bucket's pinned bytes against its cap;
// 0, or 1 when the server refused (the cap) or failed.
int tier_pin(const TierCommandOptions& options, const std::string& bucket, const PinTarget& target);

// Removes the pins of a key, or every pin under a prefix (POST /bucket?x-hots3-unpin).
int tier_unpin(const TierCommandOptions& options, const std::string& bucket,
               const PinTarget& target);

// Settles the versions of `bucket` lost before upload (see `hots3 tier recover`) under a key or a
// prefix, a page at a time (POST /bucket?x-hots3-lost, signed as tier_flush): with
// `accept_older` the upstream's version, older, takes each one's place; else each key is
// forgotten here (the upstream keeps what it holds). A line per version with what became of it,
// then the counts; 0, or 1 when the server refused or failed, or a version stays lost (the
// upstream holds nothing of it: only forgetting settles it).
int tier_settle_lost(const TierCommandOptions& options, const std::string& bucket,
                     const PinTarget& target, bool accept_older);

}  // namespace hots3::app
