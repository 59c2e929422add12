#pragma once

// The HTTP/1.1 client of hots3: what the load generator drives servers with, and what upstream
// S3 endpoints are reached through. One Client per endpoint and worker: it keeps a small pool of
// kept-alive connections (plain or TLS, the server's certificate verified), bounds every wait by
// a timeout (connect, the response's first byte, a stall in either direction), and streams
// request and response bodies in the caller's buffers. Nothing here knows S3; Beast and OpenSSL
// stay in src/http/client.cc.
//
// A request whose pooled connection turns out to have been closed by the server while it waited
// idle (writing the head fails; or, for a request without a body, the response ends before its
// first byte) is sent once more on a new connection: that is the client's one retry, safe
// because the server cannot have acted on a request it never received whole. A streamed body
// has been consumed by then, so such a request is not sent again. Retrying anything else is the
// caller's decision.
//
// Threading: a Client and its Calls live on the executor the Client was made with; every call is
// made from it.

#include "hots3/common/result.h"
#include "hots3/common/units.h"
#include "hots3/http/handler.h"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace hots3::http {

struct ClientOptions {
  // "http://host[:port]" or "https://host[:port]"; host a name or an IP literal ("[::1]").
  std::string endpoint;
  bool verify_tls = true;  // https: the server's certificate chain and name
  std::string ca_file;     // https: PEM certificates to trust; "" = the system's
  std::chrono::milliseconds connect_timeout{10'000};
  std::chrono::milliseconds first_byte_timeout{60'000};  // from the request's end to the answer
  std::chrono::milliseconds stall_timeout{30'000};       // no byte moving either way
  std::size_t idle_connections_max = 16;                 // kept alive between requests
  std::uint64_t header_bytes_max = 64 * kKiB;            // of a response head
  // SO_RCVBUF of each connection (0: the kernel's, which grows to megabytes). A reader that paces
  // what it reads keeps it small: what the kernel takes in ahead of it is not paced.
  std::size_t receive_buffer_bytes = 0;
};

// Where a ClientOptions::endpoint points. Errors: kInvalidArgument for anything else.
struct Endpoint {
  bool tls = false;
  std::string host;  // without brackets
  std::uint16_t port = 0;
  // The Host header: "host:port" ("[v6]:port"), the port left out when it is the scheme's.
  [[nodiscard]] std::string host_header() const;
};
Result<Endpoint> parse_endpoint(std::string_view url);

struct ClientRequest {
  std::string method = "GET";
  std::string target = "/";     // origin-form, already encoded
  std::vector<Header> headers;  // Host is added when absent
  // The body's length: written through Call::write_body before the response is read. 0 = no
  // body (no Content-Length either for GET, HEAD, DELETE).
  std::uint64_t content_length = 0;
  // How long this request waits for its answer's first byte, if not the client's
  // first_byte_timeout (a read someone waits on gives up sooner than an upload's commit).
  std::optional<std::chrono::milliseconds> first_byte_timeout;
};

struct ClientResponseHead {
  unsigned status = 0;
  std::vector<Header> headers;
  std::optional<std::uint64_t> content_length;  // absent for chunked and close-delimited bodies
  // The value of the first header with this name (any case).
  [[nodiscard]] std::optional<std::string_view> find(std::string_view name) const;
};

// A whole response in memory.
struct ClientReply {
  ClientResponseHead head;
  std::string body;
};

// One request and its response on a connection of the pool. Destroying it returns the
// connection to the pool when the response was read to its end and the server keeps it alive;
// otherwise the connection is closed.
class Call {
 public:
  virtual ~Call() = default;
  Call() = default;
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;
  Call(Call&&) = delete;
  Call& operator=(Call&&) = delete;

  // Request body bytes; `data` may be reused once this completes. REQUIRES: no more in all than
  // the request's content_length. Errors: kTimedOut, kClosed.
  virtual boost::asio::awaitable<Result<void>> write_body(std::span<const std::byte> data) = 0;
  // Ends the request (all of content_length written) and reads the response head. Errors:
  // kTimedOut (connect, first byte, stall), kClosed, kInvalidArgument (a response hots3 cannot
  // parse), kTooLarge (a head over header_bytes_max).
  virtual boost::asio::awaitable<Result<ClientResponseHead>> response() = 0;
  // Response body bytes into `buffer`; 0 at the end. Errors as response().
  virtual boost::asio::awaitable<Result<std::size_t>> read_body(std::span<std::byte> buffer) = 0;
  // The rest of the body in memory; kTooLarge past `max_bytes`.
  boost::asio::awaitable<Result<std::string>> read_all(std::size_t max_bytes);
  // The rest of the exchange: `body` (all of content_length that is left), the response head
  // and up to `max_response_bytes` of its body.
  boost::asio::awaitable<Result<ClientReply>> complete(std::span<const std::byte> body,
                                                       std::size_t max_response_bytes);
};

class Client {
 public:
  // REQUIRES: parse_endpoint(options.endpoint) succeeds (throws std::invalid_argument otherwise),
  // and for https the CA file, if named, can be read (throws std::runtime_error otherwise).
  Client(boost::asio::any_io_executor executor, ClientOptions options);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  Client(Client&&) = delete;
  Client& operator=(Client&&) = delete;

  // Sends `request`'s head on a pooled or new connection. When it has a body, the caller writes
  // it through the Call, then reads the response. Errors: kTimedOut, the system's error when it
  // cannot connect (connection refused, no route to host: its message says why), kClosed (a
  // pooled connection closed under it), kInvalidArgument (the name does not resolve),
  // kUnavailable (TLS handshake or verification failed).
  boost::asio::awaitable<Result<std::unique_ptr<Call>>> start(ClientRequest request);

  // A whole exchange in memory: the head and `body`, then the response with up to
  // `max_response_bytes` of body (kTooLarge beyond).
  using Reply = ClientReply;
  boost::asio::awaitable<Result<Reply>> request(ClientRequest request, std::string body,
                                                std::size_t max_response_bytes = 16 * kMiB);

  [[nodiscard]] const Endpoint& endpoint() const noexcept;
  [[nodiscard]] std::size_t idle_connections() const noexcept;

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace hots3::http
