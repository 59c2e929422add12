#pragma once

// Typed configuration of a hots3 server. Values come, in increasing precedence, from the
// defaults below, the TOML file (--config; conf/hots3.toml documents every key), environment
// variables (HOTS3_ACCESS_KEY / HOTS3_SECRET_KEY) and command-line flags.
// Units are last in names: *_bytes, *_ms.

#include "hots3/common/logging.h"
#include "hots3/common/units.h"

#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace hots3::config {

using std::chrono::milliseconds;

// A configuration that cannot be used. The message names the file and the key.
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ListenAddress {
  std::string host = "127.0.0.1";  // IPv4 or IPv6 literal ("::1"), or "localhost"
  std::uint16_t port = 9000;       // 0 = pick a free port (see --port-file)
};

struct TlsConfig {
  std::string certificate_path;  // PEM chain; TLS is on when both paths are set
  std::string private_key_path;  // PEM key
  bool allow_plaintext = false;  // also accept plain HTTP on the same listener
  [[nodiscard]] bool enabled() const {
    return !certificate_path.empty() && !private_key_path.empty();
  }
};

struct HttpConfig {
  ListenAddress listen;
  unsigned threads = 0;                        // worker threads; 0 = number of cores
  std::uint64_t header_bytes_max = 64 * kKiB;  // request line + headers
  milliseconds header_timeout{10'000};         // from a request's first byte to its last header
  milliseconds idle_timeout{60'000};           // keep-alive connection with no request
  milliseconds body_stall_timeout{30'000};     // no request body byte arrived for this long
  milliseconds send_stall_timeout{30'000};     // the client did not take response bytes
  std::uint64_t connections_max = 4096;        // open connections, all workers together
  milliseconds shutdown_grace{10'000};         // SIGTERM: time for in-flight requests
  TlsConfig tls;
};

struct StorageConfig {
  std::string data_dir = "./data";      // catalog, credentials; the default device file
  std::string device_path;              // "" = <data_dir>/device.img
  std::uint64_t device_size_bytes = 0;  // size of a new device file; 0 = automatic
  enum class IoEngine { kAuto, kUring, kPosix } io_engine = IoEngine::kAuto;
  std::uint64_t inline_max_bytes = 4096;     // objects up to this size live in the catalog
  std::optional<std::uint64_t> cache_bytes;  // block cache; unset = automatic, 0 = off
  std::optional<std::uint64_t>
      metadata_cache_bytes;                  // objects' records; unset = automatic, 0 = off
  std::uint64_t io_buffer_bytes = kMiB;      // one device I/O
  std::uint64_t io_buffers_per_worker = 32;  // bounds the memory of streams
  std::uint64_t stream_depth = 4;            // device I/Os in flight per stream
  bool etag_md5 = true;                      // ETag = MD5 of the data, as S3 does

  // The cache sizes in effect: the configured ones, or an eighth of the memory (at most 8 GiB).
  [[nodiscard]] std::uint64_t effective_cache_bytes() const;
  [[nodiscard]] std::uint64_t effective_metadata_cache_bytes() const;
};

// Access of a non-admin user to buckets whose names match `bucket` (a glob: '*' any run of
// characters, '?' one character) and, when `owner` is set, that this user owns: a grant on
// "shared-*" owned by "platform" gives nothing in a "shared-x" someone else created.
struct Grant {
  std::string bucket;
  std::string owner;  // "" = whoever owns the bucket
  bool read = false;
  bool write = false;
  bool operator==(const Grant&) const = default;
};

struct UserConfig {
  std::string name;
  std::string access_key;
  std::string secret_key;
  // Admins may do everything. Other users: all of their own buckets (the ones they created),
  // and what their grants allow in others'.
  bool admin = false;
  std::vector<Grant> grants;
  // The names of the buckets a non-admin user may create (globs as in grants); none by default.
  // A bucket belongs to whoever creates it, so creating one is a permission of its own: a user
  // free to create any name could take one that others' grants name before its owner does.
  std::vector<std::string> create_buckets;
  bool operator==(const UserConfig&) const = default;
};

// Multipart uploads (TOML table [multipart]; the checkpoint path).
struct MultipartConfig {
  // Uploads created longer ago than this are aborted and their space freed. S3 keeps them until
  // a lifecycle rule says otherwise; a hot tier cannot keep abandoned parts forever. 0 = never.
  milliseconds abort_after{7LL * 24 * 3600 * 1000};
  milliseconds sweep_interval{3'600'000};  // how often abandoned uploads are looked for
  // A CompleteMultipartUpload still running after this answers 200 at once and sends a space
  // every `complete_keepalive` (at least every second) until its result, as S3 does, so that
  // clients do not time out. A failure after that is an Error XML body in the 200 response.
  milliseconds complete_keepalive{10'000};
  // Open (neither completed nor aborted) uploads a bucket, and a user, may have: each costs a
  // catalog row until it ends, and one client could otherwise create them without end.
  std::uint64_t open_uploads_max_per_bucket = 100'000;
  std::uint64_t open_uploads_max_per_user = 20'000;
};

struct S3Config {
  std::string region = "us-east-1";  // GetBucketLocation, x-amz-bucket-region
  std::string domain;  // virtual-hosted-style: "<bucket>.<domain>"; "" = path-style only
  std::chrono::seconds clock_skew_max{900};  // RequestTimeTooSkewed beyond this
  std::uint64_t single_put_max_bytes = 5ULL * 1024 * 1024 * 1024;  // PutObject (S3: 5 GiB)
  std::uint64_t metadata_max_bytes = 2048;  // x-amz-meta-* names and values together (S3: 2 KiB)
  // SigV4 credential scopes must name `region` (S3: AuthorizationHeaderMalformed); off: any.
  bool region_check = false;
  // SigV2 presigned URLs (AWSAccessKeyId, Expires, Signature) are accepted; false: InvalidRequest.
  bool sigv2 = true;
  // POST /?x-hots3-clock&advance-seconds=N (admins) moves the clock that S3 Express sessions
  // expire by, for tests of their expiry; off: NotImplemented.
  bool test_hooks = false;
  MultipartConfig multipart;  // read from the top-level [multipart] table
  // Not read from TOML: the key that S3 Express session credentials are derived from, the
  // data directory's (session_key); "" = a random one for this process.
  std::string session_key;
};

// Tiering (TOML [tier]): upstream S3 endpoints that hold the golden copy, and the local buckets
// bound to them. An upstream is named once ([[tier.upstream]]) and used by any number of
// buckets ([[tier.bucket]]). Secrets live only in each upstream's credentials file.
struct UpstreamConfig {
  std::string name;
  std::string endpoint;  // http://host[:port] or https://host[:port]
  std::string region = "us-east-1";
  bool virtual_host = false;  // addressing = "virtual": "bucket.host/key"
  bool tls_verify = true;
  std::string ca_file;           // PEM bundle for https; "" = the system's
  std::string credentials_file;  // TOML: access_key, secret_key, optional session_token
  std::uint64_t max_connections = 16;
  // Ranged GETs at once of one read-through of a large object (8 MiB each; all read-throughs
  // together take at most max_connections): one stream of an upstream is often slower than the
  // link to it. As many as the AWS CLI's downloads use.
  std::uint64_t read_streams = 10;
  // Bytes per second to and from it, all traffic together (0: no cap), shared by class: a
  // client's misses first, then read-ahead and restores, then write-back (which gets
  // WritebackConfig::min_share of it whatever else waits), then revalidation.
  std::uint64_t bytes_per_s = 0;
  // Bytes per second sent to it, all uploads together (0: no cap): a shared uplink keeps room
  // for everything else.
  std::uint64_t write_bytes_per_s = 0;
  // Bytes per second read from it, all read-throughs together (0: no cap).
  std::uint64_t read_bytes_per_s = 0;
  // Requests per second sent to it, all together (0: no cap): an upstream that bills or
  // throttles by request rate is kept under it.
  std::uint64_t requests_per_s = 0;
  // x-amz-checksum-* on uploads: kAuto sends them once the upstream has echoed one (hots3, AWS),
  // so that an upstream without them (Ceph RGW 16) still works.
  enum class Checksums { kAuto, kOn, kOff } checksums = Checksums::kAuto;
};

enum class TierMode {
  kWriteback,     // acknowledged on local durability, uploaded in the background
  kWritethrough,  // acknowledged once the upstream has the object too
  kCache,         // read-through of an upstream bucket others also write
};

// Which versions read from the upstream are kept on the device (the others stream through and
// leave nothing): a one-off scan need not fill it.
struct AdmitRule {
  std::string prefix;  // of the local key; the longest that matches decides
  enum class Admit {
    kFirstMiss,   // the first whole-object GET keeps it
    kSecondMiss,  // only once the key was read lately before (the evictor's read counts)
    kNever,
  } admit = Admit::kFirstMiss;
  std::uint64_t max_object_size_bytes = 0;  // larger versions are not kept (0: no limit)
};

// When reads of versions under a prefix first ask the upstream
// (TierBucketConfig::revalidate_after).
struct RevalidateRule {
  std::string prefix;  // of the local key; the longest that matches decides
  std::optional<milliseconds> revalidate_after;
};

struct TierBucketConfig {
  std::string bucket;           // the local bucket (created at start if missing)
  std::string upstream;         // an UpstreamConfig::name
  std::string upstream_bucket;  // "" = the same name as the local bucket
  std::string upstream_prefix;  // the upstream key is upstream_prefix + key, byte for byte
  TierMode mode = TierMode::kWriteback;
  AdmitRule admit;                        // the bucket's own (prefix "")
  std::vector<AdmitRule> admit_prefixes;  // [[tier.bucket.admit_prefix]]
  // Keys matching these globs (hots3/common/glob.h) are pinned: never evicted, and fetched
  // back at start when evicted.
  std::vector<std::string> pin;
  // The bytes the bucket's pinned versions may hold, all pins together; a pin past it is
  // refused. Unset: a quarter of the device.
  std::optional<std::uint64_t> pin_max_bytes;
  // When a read of a version here (not one written here and not yet upstream) first asks the
  // upstream whether it still holds it (If-None-Match on its ETag): nullopt never ("immutable":
  // the upstream changes only through this bucket), 0 at every read ("always"), else once the
  // version was last confirmed longer ago than this ("ttl:<duration>"). Unset in the file:
  // immutable, but ttl:10m in cache mode, whose upstream others write.
  std::optional<milliseconds> revalidate_after;
  std::vector<RevalidateRule> revalidate_prefixes;  // [[tier.bucket.revalidate_prefix]]
  // An upstream that cannot answer a revalidation: the version here is served and said stale
  // ("serve-stale"), or the read fails with 503 ("fail").
  bool serve_stale = true;
  // A revalidation that finds the key gone upstream: gone here too ("remove"), or the version
  // here is still served ("keep").
  bool keep_upstream_deleted = false;
  // A GET or HEAD of a key neither here nor upstream: how long the next ones answer 404 without
  // asking the upstream again. 0 (the default): each asks, so an object written upstream after
  // a 404 is found at once.
  milliseconds negative_ttl{0};
  // Where a bucket in cache mode answers ListObjects from: the upstream's listing merged with
  // what is here ("upstream"), or the catalog alone ("local"), which `hots3 tier sync` keeps in
  // line with the upstream, for buckets too large to list through at every request.
  bool list_local = false;
  // The rules for `key`: the longest matching prefix's, else the bucket's.
  [[nodiscard]] const AdmitRule& admission(std::string_view key) const;
  [[nodiscard]] std::optional<milliseconds> revalidation(std::string_view key) const;
};

struct WritebackConfig {
  // Bytes acknowledged but not yet upstream, all buckets together; past it writes to tiered
  // buckets answer 503 SlowDown. Unset: half the device.
  std::optional<std::uint64_t> max_dirty_bytes;
  milliseconds max_dirty_age{15LL * 60 * 1000};  // older un-uploaded data: "behind"
  milliseconds delay{5'000};  // a write waits this long for a newer one of its key to replace it
  // Keys matching these globs ('**' any run, '*' any run without '/', '?' one character) reach
  // the upstream only after everything acknowledged before them under the same prefix.
  std::vector<std::string> commit_markers{"**/.metadata"};
  // Single-part objects above this go up as multipart uploads of part_size (the upstream's ETag
  // then differs from ours and is kept apart); multipart objects keep their own parts.
  std::uint64_t multipart_threshold_bytes = 64 * kMiB;
  std::uint64_t part_size_bytes = 16 * kMiB;
  std::uint64_t parallelism = 8;  // objects (or parts) uploaded at once per upstream
  // The part of an upstream's bytes_per_s uploads get while they wait, whatever else waits, so
  // that the oldest un-uploaded change does not age without bound under heavy reads.
  double min_share = 0.2;
  milliseconds retry_base{1'000};
  milliseconds retry_cap{5LL * 60 * 1000};
  // A 412 from the upstream (someone else wrote the key there): keep theirs and upload ours
  // beside it as "<key>.hots3-conflict-<ms>", keep theirs only, or overwrite theirs.
  enum class OnConflict {
    kSideCopy,
    kKeepUpstream,
    kOverwrite
  } on_conflict = OnConflict::kSideCopy;
};

// Eviction by watermark, in percent of the device allocated. Only versions the upstream holds
// give their space back: never un-uploaded, inline or queued ones.
struct EvictConfig {
  unsigned high_percent = 90;  // above it, versions are evicted (in `policy`'s order) ...
  unsigned low_percent = 80;   // ... until allocation is back below this
  // Above it, fetched data is served without being kept, and write-back writes get 503 SlowDown.
  unsigned full_percent = 97;
  // A version uploaded (or written, when clean at once) less than this long ago is evicted only
  // when nothing else can be.
  milliseconds min_resident{3600LL * 1000};
  // Which go first: the least often hit lately (among equals, the last to come), so
  // that a scan keeps the often read and a loop over more than the device keeps part of it; or
  // the least recently read.
  enum class Policy { kFrequency, kLru } policy = Policy::kFrequency;
};

struct TierConfig {
  std::vector<UpstreamConfig> upstreams;
  std::vector<TierBucketConfig> buckets;
  WritebackConfig writeback;
  EvictConfig evict;
  [[nodiscard]] const UpstreamConfig* upstream(std::string_view name) const;
  [[nodiscard]] const TierBucketConfig* binding(std::string_view bucket) const;
};

// Prometheus metrics (TOML [metrics]): GET /metrics on an address of their own, unauthenticated,
// and on the S3 port with "Authorization: Bearer <bearer_token>".
struct MetricsConfig {
  std::optional<ListenAddress> listen;  // unset ("" in TOML) = no address of their own
  std::string bearer_token;             // "" = not served on the S3 port
};

struct Config {
  std::string source;  // the file this was read from, "" for defaults only
  HttpConfig http;
  MetricsConfig metrics;
  StorageConfig storage;
  S3Config s3;
  log::Options log;
  std::vector<UserConfig> users;
  TierConfig tier;
};

// Reads `path` (TOML) on top of `config`. Throws ConfigError for a file that cannot be read or
// parsed, an unknown section or key, or a value of the wrong type or out of range; the message
// has the form "<path>:<line>: <key>: <problem>".
void apply_file(Config& config, const std::string& path);
// The same for TOML text; `path` names it in messages.
void apply_text(Config& config, std::string_view text, const std::string& path);

// Parses "host:port", "[v6]:port" or ":port" (host 127.0.0.1). Throws ConfigError.
ListenAddress parse_listen(std::string_view text);

// An upstream's keys, from its credentials file (TOML: access_key, secret_key, optional
// session_token). Read at start and again on SIGHUP, never stored elsewhere. Throws ConfigError
// naming the file (never a secret).
struct UpstreamCredentials {
  std::string access_key;
  std::string secret_key;
  std::string session_token;
};
UpstreamCredentials read_upstream_credentials(const std::string& path);

// The dotted keys ("http.connections_max", "log.level") whose values differ between two TOML
// configuration texts: set in one and not the other, or set to another value. The entries of an
// array of tables are named by index ("tier.upstream[0].bytes_per_s", "users[1].grants[0].bucket");
// another array is one key. None when either does not parse.
std::vector<std::string> changed_keys(std::string_view before, std::string_view after);

std::string_view tier_mode_name(TierMode mode);  // "writeback", "writethrough", "cache"

// A binding as the catalog keeps it (buckets.upstream): JSON with the upstream's name, endpoint,
// region and addressing, the upstream bucket, the prefix and the mode; enough for recovery tools
// to find the upstream copy from the catalog alone, and no secret.
std::string binding_json(const TierBucketConfig& bucket, const UpstreamConfig& upstream);
// Whether a binding_json sends data where `bucket` does: the same upstream, upstream bucket and
// prefix (an upstream's endpoint may move).
bool binding_sends_where(std::string_view binding, const TierBucketConfig& bucket);
// A binding_json's upstream_prefix ("" without one), and its bytes: an upstream key is the
// prefix and the key, and S3 keys end at 1,024 bytes.
std::string binding_prefix(std::string_view binding);
std::size_t binding_prefix_bytes(std::string_view binding);

}  // namespace hots3::config

namespace hots3::config {

// The users a server accepts, after the environment is applied: the configured users; with
// HOTS3_ACCESS_KEY and HOTS3_SECRET_KEY set, the first user's keys (or a user "admin") come from
// them; with no user at all, a development key pair is generated once per data directory, kept
// in <data_dir>/credentials (mode 0600) across restarts, and `generated` is set.
// Throws ConfigError when the credentials file is unreadable or the environment is half set.
struct ResolvedUsers {
  std::vector<UserConfig> users;
  bool generated = false;  // a development key pair from <data_dir>/credentials
  bool reused = false;     // ... made by an earlier start, read back from that file
  std::string credentials_path;
};
ResolvedUsers resolve_users(const Config& config);

// The development key pair of a data directory (<data_dir>/credentials), if a start made one;
// for the commands that talk to that directory's server. Throws ConfigError when it is there
// and cannot be read.
std::optional<UserConfig> development_credentials(const std::string& data_dir);

// The key S3 Express session credentials are derived from: 32 random bytes generated at first
// start into <data_dir>/session.key (owner-only) and read afterwards, so that a session outlives
// a restart (SDKs keep theirs until it expires). Deleting the file revokes every session at the
// next start. Throws ConfigError when it cannot be read or written.
std::string session_key(const std::string& data_dir);

}  // namespace hots3::config
