#pragma once

// The load generator's connections: one kept-alive connection per simulated client, through
// hots3's own S3 client (s3client::Client: SigV4 signing, the HTTP client's pool and timeouts),
// so that hots3 and any other S3 endpoint see the requests every hots3 client sends; or through
// the plain HTTP client, unsigned, to a plain HTTP server (nginx, the machine's HTTP ceiling).
//
// Request bodies come from a shared read-only payload (no allocation or copy per request);
// response bodies are read into a per-connection sink and counted, optionally checked against
// the payload. Threading: a Connection lives on the io_context it was made with.

#include "hots3/aws/signer.h"
#include "hots3/common/result.h"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hots3::bench {

// "http://HOST:PORT" or "https://HOST:PORT" (hots3's HTTP client's endpoints).
using Endpoint = std::string;

using Credentials = aws::Credentials;

// Random bytes that request bodies are cut from. An object's bytes are the payload read from
// `origin` onwards, wrapping around, so a reader can check what it gets back.
class Payload {
 public:
  explicit Payload(std::size_t size_bytes, std::uint64_t seed = 42);
  [[nodiscard]] std::size_t size() const noexcept { return bytes_.size(); }
  // The longest piece that starts at stream offset `offset` of an object whose bytes begin at
  // `origin` (bounded by the end of the payload and `max_bytes`).
  [[nodiscard]] std::span<const std::byte> piece(std::uint64_t origin, std::uint64_t offset,
                                                 std::size_t max_bytes) const noexcept;
  // Whether `data` equals the object's bytes at `offset`.
  [[nodiscard]] bool matches(std::uint64_t origin, std::uint64_t offset,
                             std::span<const std::byte> data) const noexcept;

 private:
  std::vector<std::byte> bytes_;
};

struct Request {
  std::string_view method = "GET";
  std::string path;  // decoded, starting with '/': "/bucket/key"
  std::vector<std::pair<std::string, std::string>> query;    // decoded; "" value = bare name
  std::vector<std::pair<std::string, std::string>> headers;  // extra headers (Range, ...)
  std::string body;               // a small body held in memory (XML), or:
  std::uint64_t body_bytes = 0;   // a body of this size cut from the payload...
  std::uint64_t body_origin = 0;  // ...starting at this origin
  // Response body checking: compare the body with the payload at (origin, offset).
  std::optional<std::pair<std::uint64_t, std::uint64_t>> verify_against;
};

struct Response {
  unsigned status = 0;
  std::uint64_t body_bytes = 0;
  std::string body;  // the first `keep_body_bytes` bytes of the body
  std::string etag;
  bool verified = true;  // false when verify_against was given and a byte differed
};

class Connection {
 public:
  // `credentials` null: requests go unsigned (a plain HTTP server).
  Connection(boost::asio::any_io_executor executor, Endpoint endpoint,
             const Credentials* credentials, const Payload& payload);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  Connection(Connection&&) noexcept;
  Connection& operator=(Connection&&) noexcept;

  // Sends one request and reads the whole response. Connects (again) as needed; a failure of
  // the connection is an error (the caller counts it), an HTTP error status is not.
  boost::asio::awaitable<Result<Response>> send(const Request& request,
                                                std::size_t keep_body_bytes = 0);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The value of <Name>...</Name> in a small XML body (UploadId, ...), or "".
std::string xml_value(std::string_view xml, std::string_view name);

}  // namespace hots3::bench
