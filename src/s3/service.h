#pragma once

// Private to src/s3: the S3 service, the http::Handler of a hots3 server. A request is located
// (request.h), authenticated (authentication.h), routed to its operation (router.h) and answered;
// the operations (handlers_*.cc) reach the store, the limits and the response helpers through it.

#include "authentication.h"
#include "authorization.h"
#include "client_tokens.h"
#include "errors.h"
#include "fill_flights.h"
#include "missing_keys.h"
#include "request.h"
#include "request_metrics.h"
#include "validated_times.h"

#include "hots3/config/config.h"
#include "hots3/http/handler.h"
#include "hots3/s3/s3.h"
#include "hots3/storage/object_store.h"
#include "hots3/tier/readthrough.h"
#include "hots3/tier/writethrough.h"

#include <boost/asio/awaitable.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hots3::s3 {

namespace asio = boost::asio;

class Service final : public Handler {
 public:
  Service(storage::ObjectStore& store, const config::S3Config& config,
          std::vector<config::UserConfig> users, http::ProbeFn probes,
          tier::WriteThrough* write_through = nullptr, tier::ReadThrough* read_through = nullptr,
          OperatorEndpoints operators = {});

  asio::awaitable<void> handle(http::Exchange& exchange) override;
  // Fetches what pins hold evicted (fetch_pinned_at_start) when an upstream is read.
  void start(const asio::any_io_executor& executor) override;
  [[nodiscard]] std::optional<http::Probe> probe(std::string_view target) const override {
    return probes_ ? probes_(target) : std::nullopt;
  }
  http::Response protocol_error(http::ProtocolError error, std::string_view request_id,
                                std::string& body) override;
  bool set_users(std::vector<config::UserConfig> users) override {
    return authenticator_.set_users(std::move(users));
  }

  // ---- used by the operations ----
  storage::ObjectStore& store() { return store_; }
  const config::S3Config& config() const { return config_; }
  // This server's x-amz-id-2, the HostId of error bodies.
  const std::string& host_id() const { return host_id_; }
  // The x-amz-client-token of renames that succeeded.
  ClientTokens& client_tokens() { return client_tokens_; }
  // Where PUTs to write-through buckets go upstream; nullptr when nothing is bound.
  tier::WriteThrough* write_through() const { return write_through_; }
  // Where GETs of evicted versions read their data; nullptr when nothing is bound.
  tier::ReadThrough* read_through() const { return read_through_; }
  // The fetches of evicted versions under way, which other misses of the same version join.
  FillFlights& fill_flights() { return fill_flights_; }
  ValidatedTimes& validated() { return validated_; }
  MissingKeys& missing_keys() { return missing_keys_; }
  Sessions& sessions() { return authenticator_.sessions(); }
  // The users in use (each set stays valid for the handler's life).
  const std::vector<config::UserConfig>& users() const { return authenticator_.users(); }
  // What the process around the handler says of itself (OperatorEndpoints::server_status).
  std::string server_status() const {
    return operators_.server_status ? operators_.server_status() : std::string();
  }

  // A response head with the headers every S3 response has.
  http::Response response(unsigned status) const;
  asio::awaitable<void> send_error(Request& r, Error error);
  asio::awaitable<void> send_xml(Request& r, unsigned status, std::string body,
                                 http::Response head);
  asio::awaitable<void> send_xml(Request& r, unsigned status, std::string body) {
    co_await send_xml(r, status, std::move(body), response(status));
  }
  asio::awaitable<void> send_empty(Request& r, unsigned status, http::Response head);

  // The bucket, if it exists and the caller may do `access` in it; sends the error otherwise.
  asio::awaitable<std::optional<storage::BucketRecord>> bucket_for(Request& r, Access access);

  // SlowDown (which SDKs retry) for a write of `incoming` more bytes into a write-back bucket
  // while its upstream is owed all it may be: what is not yet upstream stays bounded.
  [[nodiscard]] std::optional<Error> tier_budget(const storage::BucketRecord& bucket,
                                                 std::uint64_t incoming) const;

  // KeyTooLongError for a key that, after the bucket's upstream prefix, would be longer than
  // S3 allows upstream: refused here rather than parked after its 200.
  [[nodiscard]] static std::optional<Error> upstream_key_fits(const storage::BucketRecord& bucket,
                                                              std::string_view key);

  // x-hots3-durability: "local" (the default: a 200 means durable here) or "upstream" (a 200
  // also means the upstream confirmed: write-back buckets only). True for "upstream", and for
  // every write to a write-through bucket (whatever it asks); an error for any other value, or
  // for "upstream" in a bucket without an upstream to write to.
  [[nodiscard]] std::variant<bool, Error> wants_upstream(const Request& r,
                                                         const storage::BucketRecord& bucket) const;
  // Waits for the upstream to have every change of `span` acknowledged up to `up_to_seq` (0:
  // before the call); they are sent at once, not after the coalescing delay. Returns what is
  // still owed when the wait ended: nothing; only parked jobs (the upstream refused them for
  // good); or more, after kUpstreamWait (or at `deadline`). Either way the changes stay durable
  // here and queued.
  struct UpstreamWait {
    std::int64_t seq = 0;  // the jobs waited for: those up to this one
    storage::TierOwed owed;
  };
  asio::awaitable<Result<UpstreamWait>> wait_upstream(
      const storage::BucketRecord& bucket, storage::KeySpan span, std::int64_t up_to_seq = 0,
      std::optional<std::chrono::steady_clock::time_point> deadline = std::nullopt);
  // wait_upstream for one request's own change (x-hots3-durability): ServiceUnavailable unless
  // the upstream has it.
  asio::awaitable<std::optional<Error>> wait_upstream_for(const storage::BucketRecord& bucket,
                                                          std::string key);
  // After a write that changed `keys` (committed and queued): waits for the upstream to confirm
  // them when the write must be upstream before its 200 (a write-through bucket, or
  // x-hots3-durability: upstream in a write-back one). All are sent at once and waited for
  // within one kUpstreamWait. upstream_confirms: the error of the first key it did not confirm;
  // upstream_confirms_each: each key's.
  asio::awaitable<std::optional<Error>> upstream_confirms(const Request& r,
                                                          const storage::BucketRecord& bucket,
                                                          std::vector<std::string> keys);
  asio::awaitable<std::vector<std::optional<Error>>> upstream_confirms_each(
      const Request& r, const storage::BucketRecord& bucket, std::vector<std::string> keys);

 private:
  // A request located, authenticated and routed to its operation (whose index it sets).
  asio::awaitable<void> serve(http::Exchange& exchange, std::size_t& operation);
  // GET /metrics on the S3 port, for a request with a bearer token.
  asio::awaitable<void> serve_metrics(Request& r, std::string_view token);

  storage::ObjectStore& store_;
  config::S3Config config_;
  Authenticator authenticator_;
  std::string host_id_;      // x-amz-id-2
  std::string fixed_lines_;  // x-amz-id-2 and Server, as every response sends them
  ClientTokens client_tokens_;
  http::ProbeFn probes_;
  tier::WriteThrough* write_through_;
  tier::ReadThrough* read_through_;
  FillFlights fill_flights_;
  ValidatedTimes validated_;
  MissingKeys missing_keys_;
  OperatorEndpoints operators_;
  RequestMetrics requests_;
};

// ---- operations (handlers_*.cc) ----
asio::awaitable<void> list_buckets(Service& s, Request& r);
asio::awaitable<void> create_bucket(Service& s, Request& r);
asio::awaitable<void> delete_bucket(Service& s, Request& r);
asio::awaitable<void> head_bucket(Service& s, Request& r);
asio::awaitable<void> get_bucket_location(Service& s, Request& r);
asio::awaitable<void> list_objects(Service& s, Request& r, bool v2);
asio::awaitable<void> bucket_subresource(Service& s, Request& r);  // versioning, acl, policy, ...

asio::awaitable<void> flush_bucket(Service& s, Request& r);      // hots3's own
asio::awaitable<void> evict_bucket(Service& s, Request& r);      // hots3's own
asio::awaitable<void> parked_jobs(Service& s, Request& r);       // hots3's own
asio::awaitable<void> adopt_keys(Service& s, Request& r);        // hots3's own
asio::awaitable<void> settle_lost_keys(Service& s, Request& r);  // hots3's own
asio::awaitable<void> pin_keys(Service& s, Request& r);          // hots3's own
asio::awaitable<void> unpin_keys(Service& s, Request& r);        // hots3's own
asio::awaitable<void> restore_object(Service& s, Request& r);
// x-hots3-pin: true on a write (PUT, CreateMultipartUpload) of `incoming` bytes pins its key
// before the data is taken; false when the request was answered (a bad value, an unbound
// bucket, the bucket's pin_max passed).
asio::awaitable<bool> pin_on_write(Service& s, Request& r, const storage::BucketRecord& bucket,
                                   std::uint64_t incoming);
// Fetches the evicted versions pinned in every bound bucket (those a binding's new glob pins).
asio::awaitable<void> fetch_pinned_at_start(Service& s);
// Prefetch jobs (prefetch.cc): those a restart cut off go on; a new one; how they stand.
// (Those begun from `started_ms` on run already.)
asio::awaitable<void> resume_prefetches(Service& s, std::int64_t started_ms);
asio::awaitable<void> start_prefetch(Service& s, Request& r);   // hots3's own
asio::awaitable<void> prefetch_status(Service& s, Request& r);  // hots3's own
// The bound bucket the request names, when it may write there and the bucket's upstream is
// served here; else the request is answered (403, 400 not bound, 503) and none.
asio::awaitable<std::optional<storage::BucketRecord>> served_for_write(Service& s, Request& r);
asio::awaitable<void> put_object(Service& s, Request& r);
asio::awaitable<void> get_object(Service& s, Request& r, bool head);
asio::awaitable<void> delete_object(Service& s, Request& r);
asio::awaitable<void> delete_objects(Service& s, Request& r);
asio::awaitable<void> copy_object(Service& s, Request& r);
asio::awaitable<void> object_subresource(Service& s, Request& r);  // acl, tagging
asio::awaitable<void> get_object_attributes(Service& s, Request& r);

asio::awaitable<void> create_multipart_upload(Service& s, Request& r);
asio::awaitable<void> upload_part(Service& s, Request& r);
asio::awaitable<void> complete_multipart_upload(Service& s, Request& r);
asio::awaitable<void> abort_multipart_upload(Service& s, Request& r);
asio::awaitable<void> list_parts(Service& s, Request& r);
asio::awaitable<void> list_multipart_uploads(Service& s, Request& r);

// S3 Express One Zone (handlers_express.cc).
asio::awaitable<void> rename_object(Service& s, Request& r);  // PUT /bucket/key?renameObject
// PutObject with x-amz-write-offset-bytes (put_object hands it over once the bucket is known).
asio::awaitable<void> append_object(Service& s, Request& r, storage::BucketRecord bucket);
asio::awaitable<void> create_session(Service& s, Request& r);  // GET /bucket?session
// GET / signed for s3express, or with x-id=ListDirectoryBuckets; ListBuckets otherwise.
asio::awaitable<void> list_buckets_or_directory_buckets(Service& s, Request& r);
asio::awaitable<void> advance_session_clock(Service& s, Request& r);  // hots3's own, test_hooks

// hots3 admin (handlers_admin.cc): the server's state, users and buckets, for admins.
asio::awaitable<void> admin_status(Service& s, Request& r);   // GET /?x-hots3-status
asio::awaitable<void> admin_users(Service& s, Request& r);    // GET /?x-hots3-users
asio::awaitable<void> admin_buckets(Service& s, Request& r);  // GET /?x-hots3-buckets

}  // namespace hots3::s3
