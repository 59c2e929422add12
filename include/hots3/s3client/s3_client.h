#pragma once

// A client of S3 endpoints (hots3 itself, AWS S3, Ceph RGW, MinIO): requests addressed
// path-style ("/bucket/key") or virtual-hosted ("bucket.host/key"), signed with SigV4
// (aws::Signer), sent through the HTTP client's pool (http::Client: timeouts, TLS, streaming
// bodies), and S3's XML error bodies parsed. The load generator drives servers with it; the
// upstream tier will reach its golden copy through it.
//
// Threading: as http::Client (one per endpoint and worker).

#include "hots3/aws/signer.h"
#include "hots3/common/result.h"
#include "hots3/common/units.h"
#include "hots3/http/client.h"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hots3::s3client {

struct Options {
  http::ClientOptions http;
  aws::Credentials credentials;
  bool virtual_host = false;  // "bucket.host/key" instead of "host/bucket/key"
};

struct Request {
  std::string method = "GET";
  std::string bucket;  // "" for the service (ListBuckets)
  std::string key;     // "" for the bucket
  std::vector<aws::QueryParameter> query;
  std::vector<http::Header> headers;  // more headers (Range, Content-Type, ...): all signed
  std::uint64_t content_length = 0;
  // The payload's hex SHA-256, or UNSIGNED-PAYLOAD (the body is then trusted to the transport).
  std::string payload_hash = "UNSIGNED-PAYLOAD";
  std::optional<std::chrono::milliseconds> first_byte_timeout;  // as http::ClientRequest's
};

// An S3 error body: <Error><Code/><Message/><Resource/><RequestId/></Error>.
struct Error {
  std::string code;
  std::string message;
  std::string resource;
  std::string request_id;
};
// nullopt when `body` is not an S3 error document.
std::optional<Error> parse_error(std::string_view body);

class Client {
 public:
  // Throws as http::Client does for an endpoint it cannot use.
  Client(boost::asio::any_io_executor executor, Options options);

  // Addresses, signs (at the current time) and starts `request`; the caller writes the body and
  // reads the response through the Call. Errors: those of http::Client::start.
  boost::asio::awaitable<Result<std::unique_ptr<http::Call>>> start(Request request);
  // The whole exchange in memory; the body's SHA-256 is signed.
  boost::asio::awaitable<Result<http::Client::Reply>> request(
      Request request, std::string body, std::size_t max_response_bytes = 16 * kMiB);

  // Requests signed from now on use these (a rotated key). On the client's executor.
  void set_credentials(aws::Credentials credentials);

  [[nodiscard]] http::Client& http() noexcept { return http_; }

 private:
  Options options_;
  http::Client http_;
  aws::Signer signer_;
};

}  // namespace hots3::s3client
