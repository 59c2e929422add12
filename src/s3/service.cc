#include "service.h"

#include "router.h"

#include "hots3/aws/checksum.h"
#include "hots3/common/clock.h"
#include "hots3/common/logging.h"
#include "hots3/common/random.h"
#include "hots3/s3/s3.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>

namespace hots3::s3 {

Service::Service(storage::ObjectStore& store, const config::S3Config& config,
                 std::vector<config::UserConfig> users, http::ProbeFn probes,
                 tier::WriteThrough* write_through, tier::ReadThrough* read_through,
                 OperatorEndpoints operators)
    : store_(store),
      config_(config),
      authenticator_(config_, std::move(users)),
      probes_(std::move(probes)),
      write_through_(write_through),
      read_through_(read_through),
      operators_(std::move(operators)) {
  std::array<std::byte, 24> id{};
  random_bytes(id);
  host_id_ = aws::base64_encode(id);
  fixed_lines_ = "x-amz-id-2: " + host_id_ + "\r\nServer: hots3\r\n";
  if (operators_.registry != nullptr)
    operators_.registry->add([this](metrics::Writer& w) { requests_.write(w); });
}

asio::awaitable<void> Service::handle(http::Exchange& exchange) {
  std::size_t operation = not_routed();
  co_await serve(exchange, operation);
  const auto micros = std::chrono::duration_cast<std::chrono::microseconds>(
                          std::chrono::steady_clock::now() - exchange.request().started)
                          .count();
  requests_.record(operation, exchange.counts(), static_cast<std::uint64_t>(micros));
}

asio::awaitable<void> Service::serve(http::Exchange& exchange, std::size_t& operation) {
  Request r(exchange);
  if (operators_.registry != nullptr && !operators_.bearer_token.empty()) {
    if (auto authorization = r.header("authorization");
        authorization && authorization->starts_with("Bearer ")) {
      operation = metrics_scrape();
      co_return co_await serve_metrics(r, authorization->substr(7));
    }
  }
  if (auto e = locate(r, config_)) co_return co_await send_error(r, std::move(*e));
  if (auto e = authenticator_.authenticate(r)) {
    log::debug("request {}: {} {}: authentication failed: {}", r.head.request_id,
               r.head.method_string, http::loggable_target(r.head.target), code_name(e->code));
    co_return co_await send_error(r, std::move(*e));
  }
  // A ReadOnly session reads: GetObject, HeadObject, ListObjectsV2, GetObjectAttributes,
  // ListParts, ListMultipartUploads, all of them GET or HEAD.
  if (r.auth.session == SessionMode::kReadOnly && r.head.method != http::Method::kGet &&
      r.head.method != http::Method::kHead) {
    co_return co_await send_error(
        r, Error(Code::kAccessDenied, "A ReadOnly session cannot change the bucket."));
  }
  auto routed = route(r);
  if (auto* e = std::get_if<Error>(&routed)) co_return co_await send_error(r, std::move(*e));
  operation = std::get<Routed>(routed).index;
  co_await std::get<Routed>(routed).operation(*this, r);
}

asio::awaitable<void> Service::serve_metrics(Request& r, std::string_view token) {
  // GET /metrics with the configured token (compared in constant time); any other target or
  // token with a bearer is refused as S3 refuses what it cannot authenticate.
  const auto target = r.head.target.substr(0, r.head.target.find('?'));
  if (target != "/metrics" || r.head.method != http::Method::kGet ||
      !aws::signatures_equal(token, operators_.bearer_token)) {
    co_return co_await send_error(
        r, Error(Code::kAccessDenied, "Bearer tokens serve GET /metrics only."));
  }
  http::Response head(200);
  head.add("Content-Type", std::string(metrics::kContentType));
  co_await r.exchange.respond(std::move(head), operators_.registry->scrape());
}

http::Response Service::response(unsigned status) const {
  http::Response response(status);
  // Room for what an object's GET adds (its headers, metadata, and a tiered bucket's four), so
  // the lines are allocated once, not grown five times.
  response.lines.reserve(512);
  response.request_id_header = "x-amz-request-id";
  response.fixed_lines = fixed_lines_;
  return response;
}

asio::awaitable<void> Service::send_error(Request& r, Error error) {
  const unsigned status = http_status(error.code);
  http::Response head = response(status);
  for (const auto& [name, value] : error.headers) head.add(name, value);
  if (error.code == Code::kInvalidRange) {
    // A 416 says what there is to range over (RFC 9110), HEAD included.
    for (const auto& [name, value] : error.details) {
      if (name == "ActualObjectSize") head.add("Content-Range", "bytes */" + value);
    }
  }
  if (error.code == Code::kNotModified || r.head.method == http::Method::kHead) {
    // HEAD and 304 carry no body (rclone HEADs every key; a body would break the framing).
    co_await send_empty(r, status, std::move(head));
    co_return;
  }
  head.add("Content-Type", "application/xml");
  std::string body = error_body(error, r.resource(), r.head.request_id, host_id_);
  co_await r.exchange.respond(std::move(head), std::move(body));
}

asio::awaitable<void> Service::send_xml(Request& r, unsigned status, std::string body,
                                        http::Response head) {
  head.status = status;
  head.add("Content-Type", "application/xml");
  co_await r.exchange.respond(std::move(head), std::move(body));
}

asio::awaitable<void> Service::send_empty(Request& r, unsigned status, http::Response head) {
  head.status = status;
  if (r.head.method == http::Method::kHead && head.content_length) {
    // HEAD keeps the Content-Length of what a GET would send; the core sends no body.
    // (The result is bound to a variable: GCC 12 miscompiles `if (co_await ...)` here.)
    auto started = co_await r.exchange.write_head(std::move(head));
    if (started) co_await r.exchange.finish();
    co_return;
  }
  co_await r.exchange.respond(std::move(head), std::string());
}

http::Response Service::protocol_error(http::ProtocolError error, std::string_view request_id,
                                       std::string& body) {
  Error e(Code::kInvalidRequest);
  unsigned status = 400;
  switch (error) {
    case http::ProtocolError::kBadRequest:
      e = Error(Code::kInvalidRequest, "The request could not be parsed.");
      break;
    case http::ProtocolError::kHeaderTooLarge:
      e = Code::kRequestHeaderSectionTooLarge;
      break;
    case http::ProtocolError::kRequestTimeout:
      e = Code::kRequestTimeout;
      break;
    case http::ProtocolError::kTooManyConnections:
      e = Code::kSlowDown;
      break;
    case http::ProtocolError::kUnsupportedVersion:
      e = Error(Code::kInvalidRequest, "Only HTTP/1.0 and HTTP/1.1 are supported.");
      break;
    case http::ProtocolError::kInternalError:
      e = Code::kInternalError;
      break;
  }
  status = http_status(e.code);
  body = error_body(e, "", request_id, host_id_);
  http::Response head = response(status);
  head.add("Content-Type", "application/xml");
  return head;
}

asio::awaitable<std::optional<storage::BucketRecord>> Service::bucket_for(Request& r,
                                                                          Access access) {
  auto found = store_.find_bucket(r.bucket);
  if (!found) {
    co_await send_error(r, from_errc(found.error()));
    co_return std::nullopt;
  }
  if (!*found) {
    co_await send_error(r, Error(Code::kNoSuchBucket).with("BucketName", r.bucket));
    co_return std::nullopt;
  }
  if (!allowed(*r.auth.user, **found, access)) {
    co_await send_error(r, Code::kAccessDenied);
    co_return std::nullopt;
  }
  co_return std::move(*found);
}

std::optional<Error> Service::tier_budget(const storage::BucketRecord& bucket,
                                          std::uint64_t incoming) const {
  if (bucket.tier != storage::BucketTier::kWriteback || store_.tier_budget_allows(incoming)) {
    return std::nullopt;
  }
  return Error(Code::kSlowDown,
               "Too much data is waiting for upload to the upstream; please retry later.");
}

std::optional<Error> Service::upstream_key_fits(const storage::BucketRecord& bucket,
                                                std::string_view key) {
  if (bucket.tier == storage::BucketTier::kNone) return std::nullopt;
  constexpr std::size_t kUpstreamKeyBytesMax = 1024;  // S3's
  const std::size_t prefix = config::binding_prefix_bytes(bucket.upstream);
  if (key.size() + prefix <= kUpstreamKeyBytesMax) return std::nullopt;
  return Error(Code::kKeyTooLong,
               fmt::format("The key and the bucket's upstream prefix ({} bytes) would be longer "
                           "than {} bytes upstream.",
                           prefix, kUpstreamKeyBytesMax))
      .with("Size", std::to_string(key.size()))
      .with("MaxSizeAllowed", std::to_string(kUpstreamKeyBytesMax - prefix));
}

std::variant<bool, Error> Service::wants_upstream(const Request& r,
                                                  const storage::BucketRecord& bucket) const {
  const auto asked = r.header("x-hots3-durability");
  if (asked && *asked != "local" && *asked != "upstream") {
    return Error(Code::kInvalidArgument, "x-hots3-durability is either local or upstream.")
        .with("ArgumentName", "x-hots3-durability")
        .with("ArgumentValue", std::string(*asked));
  }
  if (storage::writes_through(bucket.tier)) return true;
  if (!asked || *asked == "local") return false;
  if (bucket.tier != storage::BucketTier::kWriteback) {
    return Error(Code::kInvalidRequest,
                 "x-hots3-durability: upstream needs a bucket bound to an upstream in write-back "
                 "or write-through mode.");
  }
  return true;
}

namespace {
// How long a request waits for the upstream to confirm: under the 60 s read timeout of the
// common SDKs, so that the client hears why rather than timing out and sending it all again.
constexpr std::chrono::seconds kUpstreamWait{50};
// Between two looks at the queue: short at first (a small object is up in milliseconds), then
// no busier than ten looks a second.
constexpr std::chrono::milliseconds kUpstreamPollFirst{2};
constexpr std::chrono::milliseconds kUpstreamPollMax{100};
}  // namespace

asio::awaitable<Result<Service::UpstreamWait>> Service::wait_upstream(
    const storage::BucketRecord& bucket, storage::KeySpan span, std::int64_t up_to_seq,
    std::optional<std::chrono::steady_clock::time_point> until) {
  const auto deadline = until.value_or(std::chrono::steady_clock::now() + kUpstreamWait);
  auto expedite = store_.expedite_tier_jobs(bucket.id, span);
  auto last = co_await std::move(expedite);
  if (!last) co_return last.error();
  UpstreamWait wait{up_to_seq != 0 ? up_to_seq : *last, {}};
  if (wait.seq == 0) co_return wait;
  asio::steady_timer timer(co_await asio::this_coro::executor);
  std::chrono::milliseconds pause = kUpstreamPollFirst;
  for (;;) {
    auto read = store_.tier_owed(bucket.id, span, wait.seq);
    auto owed = co_await std::move(read);
    if (!owed) co_return owed.error();
    wait.owed = std::move(*owed);
    if (wait.owed.jobs == wait.owed.parked) co_return wait;  // all up, or refused for good
    if (std::chrono::steady_clock::now() + pause > deadline) co_return wait;
    timer.expires_after(pause);
    co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    pause = std::min(pause * 2, kUpstreamPollMax);
  }
}

namespace {

// What a client waiting for its change hears of what is still owed.
std::optional<Error> unconfirmed(const Result<Service::UpstreamWait>& waited) {
  if (!waited) return from_errc(waited.error());
  if (waited->owed.jobs == 0) return std::nullopt;
  if (waited->owed.parked > 0) {
    return Error(
        Code::kServiceUnavailable,
        "The upstream refused the upload; it is kept here, parked: " + waited->owed.parked_error);
  }
  return Error(Code::kServiceUnavailable,
               "The upstream has not confirmed the upload yet; it is durable here and stays "
               "queued.");
}

}  // namespace

asio::awaitable<std::optional<Error>> Service::wait_upstream_for(
    const storage::BucketRecord& bucket, std::string key) {
  auto waiting = wait_upstream(bucket, {std::move(key), true});
  auto waited = co_await std::move(waiting);
  co_return unconfirmed(waited);
}

asio::awaitable<std::optional<Error>> Service::upstream_confirms(
    const Request& r, const storage::BucketRecord& bucket, std::vector<std::string> keys) {
  auto confirming = upstream_confirms_each(r, bucket, std::move(keys));
  auto confirmed = co_await std::move(confirming);
  for (auto& e : confirmed) {
    if (e) co_return std::move(e);
  }
  co_return std::nullopt;
}

asio::awaitable<std::vector<std::optional<Error>>> Service::upstream_confirms_each(
    const Request& r, const storage::BucketRecord& bucket, std::vector<std::string> keys) {
  std::vector<std::optional<Error>> out(keys.size());
  const auto wanted = wants_upstream(r, bucket);
  if (const auto* wants = std::get_if<bool>(&wanted); wants == nullptr || !*wants) {
    co_return out;  // an invalid x-hots3-durability was refused before the write
  }
  // Every key's change is sent at once (the uploader's window takes them together), then each
  // is waited for, all within one wait.
  std::vector<std::int64_t> last(keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) {
    auto expedite = store_.expedite_tier_jobs(bucket.id, {keys[i], true});
    auto expedited = co_await std::move(expedite);
    if (!expedited) {
      out[i] = from_errc(expedited.error());
    } else {
      last[i] = *expedited;
    }
  }
  const auto deadline = std::chrono::steady_clock::now() + kUpstreamWait;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (out[i] || last[i] == 0) continue;
    auto waiting = wait_upstream(bucket, {std::move(keys[i]), true}, last[i], deadline);
    auto waited = co_await std::move(waiting);
    out[i] = unconfirmed(waited);
  }
  co_return out;
}

void Service::start(const asio::any_io_executor& executor) {
  if (read_through_ != nullptr) {
    asio::co_spawn(executor, fetch_pinned_at_start(*this), asio::detached);
    asio::co_spawn(executor, resume_prefetches(*this, now_ms()), asio::detached);
  }
}

std::unique_ptr<Handler> make_handler(storage::ObjectStore& store, const config::S3Config& config,
                                      std::vector<config::UserConfig> users, http::ProbeFn probes,
                                      tier::WriteThrough* write_through,
                                      tier::ReadThrough* read_through,
                                      OperatorEndpoints operators) {
  return std::make_unique<Service>(store, config, std::move(users), std::move(probes),
                                   write_through, read_through, std::move(operators));
}

}  // namespace hots3::s3
