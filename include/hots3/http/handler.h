#pragma once

// The boundary between the HTTP core and what serves requests (the S3 layer). Nothing here
// knows S3, and nothing here pulls in Beast: handlers see a parsed request head, read the body
// in bounded pieces into buffers they own, and produce the response piece by piece.
//
// Threading: a connection lives on one worker thread. The handler's coroutine runs on that
// worker and every Exchange call must be made from it.

#include "hots3/common/result.h"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace hots3::http {

enum class Method : std::uint8_t { kOther, kGet, kHead, kPut, kPost, kDelete, kOptions };

struct HeaderView {
  std::string_view name;   // as the client spelled it
  std::string_view value;  // surrounding whitespace removed
};

// A request target as log lines may show it: JSON-escaped (no control character can forge a
// line), with the values of parameters that carry secrets (signatures, session tokens) replaced
// by "REDACTED", as in the access log.
std::string loggable_target(std::string_view target);

// The request line and headers. Views point into the connection's parser and stay valid until
// the handler returns.
struct RequestHead {
  Method method = Method::kOther;
  std::string_view method_string;
  std::string_view target;  // origin-form as received: path and query, still percent-encoded
  unsigned version = 11;    // 10 or 11
  std::span<const HeaderView> headers;
  std::optional<std::uint64_t> content_length;  // absent for chunked bodies and no body
  bool chunked = false;                         // Transfer-Encoding: chunked
  bool expects_continue = false;                // Expect: 100-continue (any case), HTTP/1.1
  bool tls = false;
  std::string_view remote_address;
  std::string_view request_id;  // unique per request; also sent as the handler chooses
  // When the request's first byte was taken up, before its head was parsed: what its latency is
  // measured from.
  std::chrono::steady_clock::time_point started;

  // The value of the first header with this name, compared case-insensitively.
  [[nodiscard]] std::optional<std::string_view> find(std::string_view name) const noexcept;
  [[nodiscard]] bool has_body() const noexcept {
    return chunked || (content_length && *content_length > 0);
  }
};

struct Header {
  std::string name;
  std::string value;
};

// A response head. The core adds Date, Content-Length or Transfer-Encoding, and Connection.
struct Response {
  Response() = default;
  explicit Response(unsigned status_code) : status(status_code) {}

  unsigned status = 200;
  // Header lines sent as they are ("Name: value\r\n" each), before `lines`: a service's own,
  // the same on every response, rendered once (not a name and a value copied per response).
  // The text outlives the response.
  std::string_view fixed_lines;
  // When set, a header of this name with the request's id (RequestHead::request_id) follows.
  std::string_view request_id_header;
  // The headers added, as they will be sent: written once, when added, not kept as names and
  // values to be copied again.
  std::string lines;
  // Body length. Absent: the body is sent chunked. Ignored (no body is sent) for HEAD requests
  // and for 1xx, 204 and 304, but still sent as Content-Length on HEAD.
  std::optional<std::uint64_t> content_length = 0;

  // Adds "name: value" to `lines`; a CR, LF or NUL in either (which would end the line or the
  // head early) is sent as a space.
  void add(std::string_view name, std::string_view value);
  // The value of the first header added with this name (case-insensitive), as it will be sent.
  [[nodiscard]] std::optional<std::string_view> find(std::string_view name) const noexcept;
};

// One request and its response on a connection. Owned by the connection; valid until
// Handler::handle returns.
class Exchange {
 public:
  virtual ~Exchange() = default;
  Exchange() = default;
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;
  Exchange(Exchange&&) = delete;
  Exchange& operator=(Exchange&&) = delete;

  [[nodiscard]] virtual const RequestHead& request() const noexcept = 0;

  // Reads body bytes into `buffer`, returning how many; 0 means the body is complete
  // (chunked framing already removed). The first call answers "Expect: 100-continue", so a
  // handler that responds without reading refuses the body. Errors: kTimedOut (no byte for
  // body_stall_timeout), kClosed (the client went away or the body was cut short),
  // kInvalidArgument (broken chunked framing).
  virtual boost::asio::awaitable<Result<std::size_t>> read_body(std::span<std::byte> buffer) = 0;

  // True once read_body has returned 0.
  [[nodiscard]] virtual bool body_complete() const noexcept = 0;

  // Starts the response. The head is held back and sent together with the first body bytes
  // (or by finish()), so a small response is one write.
  // REQUIRES: called once per exchange, before write_body/finish.
  virtual boost::asio::awaitable<Result<void>> write_head(Response response) = 0;

  // Sends body bytes; `data` may be reused once this completes.
  // REQUIRES: write_head was called; the bytes fit the declared Content-Length.
  virtual boost::asio::awaitable<Result<void>> write_body(std::span<const std::byte> data) = 0;

  // Ends the response (sends the chunked terminator, or the head alone). A response whose
  // Content-Length was not met is cut off and the connection closed.
  virtual boost::asio::awaitable<Result<void>> finish() = 0;

  [[nodiscard]] virtual bool response_started() const noexcept = 0;

  // What the exchange carried so far (for metrics): the response status (0 before write_head)
  // and the body bytes read and sent.
  struct Counts {
    unsigned status = 0;
    std::uint64_t body_read_bytes = 0;
    std::uint64_t body_sent_bytes = 0;
  };
  [[nodiscard]] virtual Counts counts() const noexcept = 0;

  // Sends the whole response: head and a body held in memory.
  boost::asio::awaitable<Result<void>> respond(Response response, std::string body);
};

// A health probe's answer (Handler::probe).
struct Probe {
  unsigned status = 200;
  std::string content_type;
  std::string body;
};
using ProbeFn = std::function<std::optional<Probe>(std::string_view target)>;

// A protocol-level failure the core answers by itself (the handler never sees the request).
enum class ProtocolError : std::uint8_t {
  kBadRequest,          // malformed request line, headers or framing          → 400
  kHeaderTooLarge,      // request line + headers over header_bytes_max       → 431 (S3: 400)
  kRequestTimeout,      // the request head or body did not arrive in time    → 400 / 408
  kTooManyConnections,  // → 503
  kUnsupportedVersion,  // → 505
  kInternalError,       // the handler failed before starting a response      → 500
};

class Handler {
 public:
  virtual ~Handler() = default;
  Handler() = default;
  Handler(const Handler&) = delete;
  Handler& operator=(const Handler&) = delete;
  Handler(Handler&&) = delete;
  Handler& operator=(Handler&&) = delete;

  // Serves one request. Must either complete a response or return with none started (the core
  // then answers 500). An exception or a response left unfinished closes the connection.
  virtual boost::asio::awaitable<void> handle(Exchange& exchange) = 0;
  // Once the workers run, before the server answers: work of the handler's own (not a
  // request's) starts on `executor`.
  virtual void start(const boost::asio::any_io_executor& executor) { (void)executor; }

  // The body of the core's own answer to a protocol error (S3 wants its XML error format).
  // Runs on a worker; must not block. The default is a short plain-text response.
  virtual Response protocol_error(ProtocolError error, std::string_view request_id,
                                  std::string& body);

  // /health/ready answers 200 while this is true (and the server is not draining).
  [[nodiscard]] virtual bool ready() const noexcept { return true; }

  // The answer to an unsigned GET or HEAD of /health/<name>[?query] other than live and ready
  // (`target` as received); nullopt: no such probe, and the request is served as any other.
  // Runs on a worker; must not block.
  [[nodiscard]] virtual std::optional<Probe> probe(std::string_view target) const {
    (void)target;
    return std::nullopt;
  }
};

}  // namespace hots3::http
