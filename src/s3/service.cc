#include "service.h"

#include "router.h"

#include "hots3/aws/checksum.h"
#include "hots3/common/logging.h"
#include "hots3/common/random.h"
#include "hots3/s3/s3.h"

#include <array>

namespace hots3::s3 {

Service::Service(storage::ObjectStore& store, const config::S3Config& config,
                 std::vector<config::UserConfig> users, http::ProbeFn probes)
    : store_(store),
      config_(config),
      authenticator_(config_, std::move(users)),
      probes_(std::move(probes)) {
  std::array<std::byte, 24> id{};
  random_bytes(id);
  host_id_ = aws::base64_encode(id);
}

asio::awaitable<void> Service::handle(http::Exchange& exchange) {
  Request r(exchange);
  if (auto e = locate(r, config_)) co_return co_await send_error(r, std::move(*e));
  if (auto e = authenticator_.authenticate(r)) {
    log::debug("request {}: {} {}: authentication failed: {}", r.head.request_id,
               r.head.method_string, http::loggable_target(r.head.target), code_name(e->code));
    co_return co_await send_error(r, std::move(*e));
  }
  auto routed = route(r);
  if (auto* e = std::get_if<Error>(&routed)) co_return co_await send_error(r, std::move(*e));
  co_await std::get<Operation>(routed)(*this, r);
}

http::Response Service::response(const Request& r, unsigned status) const {
  http::Response response(status);
  response.add("x-amz-request-id", std::string(r.head.request_id));
  response.add("x-amz-id-2", host_id_);
  response.add("Server", "hots3");
  return response;
}

asio::awaitable<void> Service::send_error(Request& r, Error error) {
  const unsigned status = http_status(error.code);
  http::Response head = response(r, status);
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
  http::Response response(status);
  response.add("Content-Type", "application/xml");
  response.add("x-amz-request-id", std::string(request_id));
  response.add("x-amz-id-2", host_id_);
  response.add("Server", "hots3");
  return response;
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

std::unique_ptr<http::Handler> make_handler(storage::ObjectStore& store,
                                            const config::S3Config& config,
                                            std::vector<config::UserConfig> users,
                                            http::ProbeFn probes) {
  return std::make_unique<Service>(store, config, std::move(users), std::move(probes));
}

}  // namespace hots3::s3
