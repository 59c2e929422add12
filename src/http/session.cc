// One HTTP/1.1 connection: read a request head with Beast's parser, hand the request to the
// Handler as an Exchange, stream the body both ways, repeat while the connection is kept alive.
//
// Shape (Beast's awaitable server example, flattened into one coroutine per connection):
//   wait for the first byte (idle timeout) → read the head (header timeout) → serve → ...
// Timeouts are deadlines that the worker's sweeper checks; expiring cancels the pending
// socket operation, so every co_await here has a bound while the peer is involved.

#include "request_parser.h"
#include "wire.h"
#include "worker.h"

#include "hots3/common/assert.h"
#include "hots3/common/logging.h"
#include "hots3/common/text.h"
#include "hots3/common/units.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/detect_ssl.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>

#include <array>
#include <cstring>
#include <exception>

namespace hots3::http::detail {
namespace {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using asio::use_awaitable;
using boost::system::error_code;
constexpr auto kTuple = asio::as_tuple(use_awaitable);
const boost::system::error_category& beast_http_category =
    bhttp::make_error_code(bhttp::error::end_of_stream).category();

using Parser = RequestParser;
using TlsStream = asio::ssl::stream<tcp::socket>;

// Unread request bodies up to this size are read and dropped so the connection can be kept;
// larger ones close it (RFC 9112 §9.3: read the rest of the request or close).
constexpr std::uint64_t kDrainBytesMax = 256 * kKiB;
// After refusing a body, how long and how much of it is read and dropped before the connection
// closes (see linger()).
constexpr std::chrono::milliseconds kLingerTime{2000};
constexpr std::uint64_t kLingerBytesMax = 4 * kMiB;
// The interim response to "Expect: 100-continue".
constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
// First read of a request.
constexpr std::size_t kReadChunkBytes = 16 * kKiB;

Method to_method(bhttp::verb verb) {
  switch (verb) {
    case bhttp::verb::get:
      return Method::kGet;
    case bhttp::verb::head:
      return Method::kHead;
    case bhttp::verb::put:
      return Method::kPut;
    case bhttp::verb::post:
      return Method::kPost;
    case bhttp::verb::delete_:
      return Method::kDelete;
    case bhttp::verb::options:
      return Method::kOptions;
    default:
      return Method::kOther;
  }
}

tcp::socket& lowest(tcp::socket& s) { return s; }
tcp::socket& lowest(TlsStream& s) { return s.next_layer(); }

template <class Stream>
class Session final : public Connection, public Exchange {
 public:
  Session(Worker& worker, Stream stream, beast::flat_buffer buffer, std::string remote, bool tls)
      : Connection(worker),
        stream_(std::move(stream)),
        buffer_(std::move(buffer)),
        config_(worker.shared.config),
        remote_(std::move(remote)),
        tls_(tls) {
    buffer_.max_size(config_.header_bytes_max + kReadChunkBytes);
  }

  static asio::awaitable<void> run(std::unique_ptr<Session> self) { co_await self->loop(); }

  // --- Connection -----------------------------------------------------------------------
  void expire() override {
    // TLS records cannot be resumed after a cancelled operation: close. Plain sockets are
    // cancelled so the session can still answer "request timeout".
    timed_out_ = true;
    error_code ignored;  // cancel/close of a socket that may already be closed
    if (idle_ || tls_ || responding_) {
      lowest(stream_).close(ignored);
    } else {
      lowest(stream_).cancel(ignored);
    }
  }

  void close_now() override {
    closing_ = true;
    error_code ignored;  // the socket may already be closed
    lowest(stream_).close(ignored);
  }

  // --- Exchange -------------------------------------------------------------------------
  [[nodiscard]] const RequestHead& request() const noexcept override { return head_; }
  [[nodiscard]] bool body_complete() const noexcept override { return body_done_; }
  [[nodiscard]] bool response_started() const noexcept override { return response_started_; }
  [[nodiscard]] Counts counts() const noexcept override {
    return {status_, body_read_bytes_, body_sent_bytes_};
  }
  asio::awaitable<Result<std::size_t>> read_body(std::span<std::byte> out) override;
  asio::awaitable<Result<void>> write_head(Response response) override;
  asio::awaitable<Result<void>> write_body(std::span<const std::byte> data) override;
  asio::awaitable<Result<void>> finish() override;

 private:
  asio::awaitable<void> loop();
  asio::awaitable<error_code> read_head();
  asio::awaitable<void> serve();
  asio::awaitable<void> answer_protocol_error(ProtocolError error);
  asio::awaitable<Result<void>> send(std::span<const asio::const_buffer> buffers);
  asio::awaitable<void> drain_body();
  void prepare_head();
  asio::awaitable<void> linger();
  void log_access();
  [[nodiscard]] bool is_health_check() const;

  [[nodiscard]] error_code read_error(error_code ec) const {
    if (timed_out_) return errc::kTimedOut;
    if (ec == bhttp::error::bad_chunk || ec == bhttp::error::bad_chunk_extension ||
        ec == bhttp::error::bad_transfer_encoding) {
      return errc::kInvalidArgument;
    }
    return errc::kClosed;
  }

  Stream stream_;
  beast::flat_buffer buffer_;
  const config::HttpConfig& config_;
  std::string remote_;
  bool tls_;
  bool timed_out_ = false;
  bool closing_ = false;  // close after the current response

  std::optional<Parser> parser_;
  HeadText head_text_;  // what the parser keeps of a head, its room reused across requests
  RequestHead head_;
  char request_id_[16] = {};
  Clock::time_point started_;

  // Request body.
  bool body_done_ = true;
  std::uint64_t body_left_bytes_ = 0;  // Content-Length bodies only
  std::uint64_t body_read_bytes_ = 0;
  bool continue_sent_ = false;

  // Response.
  bool response_started_ = false;
  bool response_finished_ = false;
  bool responding_ = false;  // a response write is in progress
  bool no_body_ = false;     // HEAD, 1xx, 204, 304
  bool chunked_out_ = false;
  bool head_pending_ = false;  // the head is formatted but not sent yet
  unsigned status_ = 0;
  std::optional<std::uint64_t> response_length_;
  std::uint64_t body_sent_bytes_ = 0;
  std::string head_bytes_;  // reused across requests
  char chunk_line_[24] = {};
};

template <class Stream>
asio::awaitable<void> Session<Stream>::loop() {
  while (!closing_) {
    // 1. Wait for the next request. Pipelined requests are already in the buffer.
    if (buffer_.size() == 0) {
      // Draining: a kept-alive connection closes between requests (its client opens another,
      // on the next server); one just opened waits for its first request a moment (the
      // sweeper's kFirstRequestWhileDraining), which it answers.
      if (worker_.draining && used_) break;
      idle_ = true;
      arm(config_.idle_timeout);
      auto [ec, n] = co_await stream_.async_read_some(buffer_.prepare(kReadChunkBytes), kTuple);
      idle_ = false;
      if (ec) break;  // closed, reset, idle timeout or shutdown: nobody to answer
      buffer_.commit(n);
    }
    used_ = true;
    // 2. The request head, within header_timeout of its first byte (slow-loris).
    started_ = Clock::now();
    arm(config_.header_timeout);
    parser_.emplace(head_text_);
    limit_request_parser(*parser_, config_.header_bytes_max);
    const error_code ec = co_await read_head();
    disarm();
    if (ec) {
      const bool parse_error = ec.category() == beast_http_category &&
                               ec != bhttp::error::end_of_stream &&
                               ec != bhttp::error::partial_message;
      if (ec == bhttp::error::header_limit || ec == bhttp::error::buffer_overflow) {
        co_await answer_protocol_error(ProtocolError::kHeaderTooLarge);
      } else if (timed_out_) {
        timed_out_ = false;
        co_await answer_protocol_error(ProtocolError::kRequestTimeout);
      } else if (parse_error) {
        co_await answer_protocol_error(ProtocolError::kBadRequest);
      }
      break;  // after any broken head the framing is lost: close
    }
    if (parser_->version() != 10 && parser_->version() != 11) {
      co_await answer_protocol_error(ProtocolError::kUnsupportedVersion);
      break;
    }
    if (!body_framing_clear(*parser_)) {
      co_await answer_protocol_error(ProtocolError::kBadRequest);
      break;  // where the body ends is unknown: nothing after it can be read as a request
    }
    co_await serve();
  }
  // No TLS close_notify: it would need its own timeout, and every HTTP/1.1 response is
  // delimited without it.
  if (!body_done_ && !timed_out_) co_await linger();
  error_code ignored;  // the peer may have gone already
  lowest(stream_).shutdown(tcp::socket::shutdown_both, ignored);
  lowest(stream_).close(ignored);
}

template <class Stream>
asio::awaitable<void> Session<Stream>::linger() {
  // The client may still be sending a body the answer refused. Closing with unread bytes makes
  // the kernel reset the connection, and a reset can destroy the answer in the client's receive
  // buffer before it is read. So: end our side, and read and drop what still comes for a moment.
  error_code ignored;  // the peer may have gone already
  lowest(stream_).shutdown(tcp::socket::shutdown_send, ignored);
  arm(kLingerTime);
  std::array<char, kReadChunkBytes> sink{};
  std::uint64_t dropped = 0;
  while (dropped < kLingerBytesMax && !timed_out_) {
    auto [ec, n] = co_await lowest(stream_).async_read_some(asio::buffer(sink), kTuple);
    if (ec) break;
    dropped += n;
  }
  disarm();
}

template <class Stream>
asio::awaitable<error_code> Session<Stream>::read_head() {
  std::uint64_t head_bytes = 0;
  for (;;) {
    error_code put_ec;
    const auto data = buffer_.data();
    buffer_.consume(put_head(*parser_,
                             std::string_view(static_cast<const char*>(data.data()), data.size()),
                             head_bytes, config_.header_bytes_max, put_ec));
    if (put_ec != bhttp::error::need_more) co_return put_ec;  // complete ({}), or refused
    auto [ec, n] = co_await stream_.async_read_some(buffer_.prepare(kReadChunkBytes), kTuple);
    if (ec == asio::error::eof) co_return bhttp::error::partial_message;  // gone mid-head
    if (ec) co_return ec;
    buffer_.commit(n);
  }
}

template <class Stream>
bool Session<Stream>::is_health_check() const {
  if (head_.method != Method::kGet && head_.method != Method::kHead) return false;
  if (!head_.target.starts_with("/health/")) return false;
  // A signed request for the same path is an S3 request (bucket "health"), not a probe; so is
  // a presigned one.
  return !head_.find("authorization").has_value() &&
         head_.target.find("X-Amz-Signature") == std::string_view::npos &&
         head_.target.find("Signature=") == std::string_view::npos;
}

template <class Stream>
asio::awaitable<void> Session<Stream>::serve() {
  worker_.shared.requests_total.fetch_add(1, std::memory_order_relaxed);
  format_request_id(worker_.id_seed, worker_.id_counter++, request_id_);

  head_ = RequestHead{};
  head_.method = to_method(parser_->method());
  head_.method_string = parser_->method_string();
  head_.target = parser_->target();
  head_.version = parser_->version();
  head_.headers = parser_->headers();
  if (auto length = parser_->content_length()) head_.content_length = *length;
  head_.chunked = parser_->chunked();
  // An HTTP/1.0 client cannot read a 100 Continue: its expectation is ignored (RFC 9110 §10.1.1).
  if (auto expect = head_.find("expect"); expect && head_.version >= 11)
    head_.expects_continue = iequals(*expect, "100-continue");
  head_.tls = tls_;
  head_.remote_address = remote_;
  head_.request_id = std::string_view(request_id_, sizeof request_id_);
  head_.started = started_;

  body_done_ = !head_.has_body();
  body_left_bytes_ = head_.chunked ? 0 : head_.content_length.value_or(0);
  body_read_bytes_ = 0;
  continue_sent_ = false;
  response_started_ = response_finished_ = head_pending_ = false;
  body_sent_bytes_ = 0;
  status_ = 0;
  if (!parser_->keep_alive()) closing_ = true;

  std::optional<Probe> probe;
  if (is_health_check()) {
    if (head_.target == "/health/live" || head_.target == "/health/ready") {
      const bool ok =
          head_.target == "/health/live" || (worker_.shared.handler.ready() && !worker_.draining);
      probe = Probe{ok ? 200U : 503U, "text/plain", ok ? "OK\n" : "not ready\n"};
    } else {
      probe = worker_.shared.handler.probe(head_.target);
    }
  }
  if (probe) {
    Response response(probe->status);
    response.add("Content-Type", std::move(probe->content_type));
    response.add("Cache-Control", "no-store");
    co_await respond(std::move(response), std::move(probe->body));
  } else {
    bool failed = false;
    try {
      co_await worker_.shared.handler.handle(*this);
    } catch (const std::exception& e) {
      log::error("request {} {} {}: handler failed: {}", head_.request_id, head_.method_string,
                 loggable_target(head_.target), e.what());
      failed = true;
    }
    if (!response_started_) {
      if (!failed) {
        log::error("request {} {} {}: handler returned without a response", head_.request_id,
                   head_.method_string, loggable_target(head_.target));
      }
      std::string body;
      Response response = worker_.shared.handler.protocol_error(ProtocolError::kInternalError,
                                                                head_.request_id, body);
      co_await respond(std::move(response), std::move(body));
    } else if (!response_finished_) {
      closing_ = true;  // a response cut off mid-way: only closing tells the client
    }
  }
  if (!closing_ && !body_done_) co_await drain_body();
  log_access();
}

template <class Stream>
asio::awaitable<void> Session<Stream>::answer_protocol_error(ProtocolError error) {
  // No request head to speak of: make up enough of one for the response and the access log.
  format_request_id(worker_.id_seed, worker_.id_counter++, request_id_);
  head_ = RequestHead{};
  head_.method_string = "-";
  head_.target = "-";
  head_.remote_address = remote_;
  head_.request_id = std::string_view(request_id_, sizeof request_id_);
  body_done_ = true;
  response_started_ = response_finished_ = head_pending_ = false;
  body_read_bytes_ = body_sent_bytes_ = 0;
  closing_ = true;
  std::string body;
  Response response = worker_.shared.handler.protocol_error(error, head_.request_id, body);
  co_await respond(std::move(response), std::move(body));
  log_access();
}

template <class Stream>
asio::awaitable<Result<std::size_t>> Session<Stream>::read_body(std::span<std::byte> out) {
  if (out.empty()) co_return std::size_t{0};
  // Reading the body is processing the request: the client hears 100 Continue, for a body of 0
  // bytes too.
  if (head_.expects_continue && !continue_sent_ && !response_started_) {
    continue_sent_ = true;
    const asio::const_buffer buffer(kContinue.data(), kContinue.size());
    H3_CO_TRY(co_await send(std::span(&buffer, 1)));
  }
  if (body_done_) co_return std::size_t{0};
  H3_ASSERT(!response_started_ || continue_sent_ || !head_.expects_continue,
            "read_body after a final response refused the body");
  if (!head_.chunked) {
    // Content-Length body: what the head read left in the buffer first, then straight from the
    // socket into the caller's buffer (no intermediate copy).
    const std::size_t want =
        static_cast<std::size_t>(std::min<std::uint64_t>(out.size(), body_left_bytes_));
    std::size_t n = 0;
    if (buffer_.size() > 0) {
      n = asio::buffer_copy(asio::buffer(out.data(), want), buffer_.data());
      buffer_.consume(n);
    } else {
      arm(config_.body_stall_timeout);
      auto [ec, got] = co_await stream_.async_read_some(asio::buffer(out.data(), want), kTuple);
      disarm();
      if (ec) {
        closing_ = true;
        co_return read_error(ec);
      }
      n = got;
    }
    body_left_bytes_ -= n;
    body_read_bytes_ += n;
    body_done_ = body_left_bytes_ == 0;
    co_return n;
  }
  // Chunked: Beast's parser removes the framing and writes the data into the caller's buffer.
  auto& body = parser_->body;
  for (;;) {
    body.data = reinterpret_cast<char*>(out.data());
    body.size = out.size();
    arm(config_.body_stall_timeout);
    auto [ec, consumed] = co_await bhttp::async_read_some(stream_, buffer_, *parser_, kTuple);
    disarm();
    if (ec == bhttp::error::need_buffer) ec = {};
    const std::size_t n = out.size() - body.size;
    if (ec) {
      closing_ = true;
      co_return read_error(ec);
    }
    body_read_bytes_ += n;
    if (parser_->is_done()) body_done_ = true;
    if (n > 0 || body_done_) co_return n;
    // Only framing (a chunk header) was parsed: read on.
  }
}

template <class Stream>
void Session<Stream>::prepare_head() {
  // Status line and headers; Content-Length / chunked / Connection added here, once.
  head_bytes_.clear();
  append_status_line(head_bytes_, status_);
  head_bytes_ += "Date: ";
  head_bytes_ += http_date(worker_);
  head_bytes_ += "\r\n";
}

template <class Stream>
asio::awaitable<Result<void>> Session<Stream>::write_head(Response response) {
  H3_ASSERT(!response_started_, "write_head called twice");
  response_started_ = true;
  status_ = response.status;
  // A client that sent "Expect: 100-continue" and got no 100 Continue yet may keep the state of
  // that wait with its pooled connection (botocore then misreads the next response on it). With
  // an empty body nothing is left to send: 100 Continue goes first, as for a request read to its
  // end. A final status instead of 100 Continue refuses the body: it is never sent, and the
  // connection closes after the answer so that nobody reuses it half-way.
  const bool continue_first = head_.expects_continue && !continue_sent_ && !head_.has_body();
  if (head_.expects_continue && !continue_sent_ && !continue_first) closing_ = true;
  // An unread body: drop it if it is small and the client is sending it; otherwise close.
  if (!body_done_ && (head_.chunked || body_left_bytes_ > kDrainBytesMax)) closing_ = true;
  if (worker_.draining) closing_ = true;

  no_body_ = head_.method == Method::kHead || status_ < 200 || status_ == 204 || status_ == 304;
  response_length_ = response.content_length;
  chunked_out_ = !no_body_ && !response_length_;
  if (chunked_out_ && head_.version < 11) {
    // HTTP/1.0 has no chunked encoding: the body ends when the connection closes.
    chunked_out_ = false;
    closing_ = true;
  }
  prepare_head();
  if (continue_first) {
    continue_sent_ = true;
    head_bytes_.insert(0, kContinue);
  }
  append_response_headers(head_bytes_, response, head_.request_id);
  if (response_length_ && status_ >= 200 && status_ != 204 && status_ != 304) {
    append_header(head_bytes_, "Content-Length", std::to_string(*response_length_));
  } else if (chunked_out_) {
    head_bytes_ += "Transfer-Encoding: chunked\r\n";
  }
  if (closing_) {
    head_bytes_ += "Connection: close\r\n";
  } else if (head_.version < 11) {
    head_bytes_ += "Connection: keep-alive\r\n";
  }
  head_bytes_ += "\r\n";
  head_pending_ = true;
  co_return Result<void>{};
}

template <class Stream>
asio::awaitable<Result<void>> Session<Stream>::send(std::span<const asio::const_buffer> buffers) {
  responding_ = true;
  arm(config_.send_stall_timeout);
  auto [ec, n] = co_await asio::async_write(stream_, buffers, kTuple);
  disarm();
  responding_ = false;
  if (ec) {
    closing_ = true;
    co_return timed_out_ ? error_code(errc::kTimedOut) : error_code(errc::kClosed);
  }
  co_return Result<void>{};
}

template <class Stream>
asio::awaitable<Result<void>> Session<Stream>::write_body(std::span<const std::byte> data) {
  H3_ASSERT(response_started_ && !response_finished_, "write_body outside a response");
  if (no_body_ || data.empty()) {
    H3_ASSERT(data.empty() || head_.method == Method::kHead, "body bytes for a bodiless status");
    co_return Result<void>{};
  }
  if (response_length_) {
    H3_ASSERT(body_sent_bytes_ + data.size() <= *response_length_,
              "body longer than Content-Length");
  }
  std::array<asio::const_buffer, 4> buffers;
  std::size_t count = 0;
  if (head_pending_) buffers[count++] = asio::buffer(head_bytes_);
  if (chunked_out_) {
    const std::size_t line = format_chunk_line(data.size(), chunk_line_);
    buffers[count++] = asio::buffer(chunk_line_, line);
  }
  buffers[count++] = asio::buffer(data.data(), data.size());
  if (chunked_out_) buffers[count++] = asio::buffer("\r\n", 2);
  H3_CO_TRY(co_await send(std::span(buffers.data(), count)));
  head_pending_ = false;
  body_sent_bytes_ += data.size();
  co_return Result<void>{};
}

template <class Stream>
asio::awaitable<Result<void>> Session<Stream>::finish() {
  H3_ASSERT(response_started_ && !response_finished_, "finish outside a response");
  std::array<asio::const_buffer, 2> buffers;
  std::size_t count = 0;
  if (head_pending_) buffers[count++] = asio::buffer(head_bytes_);
  if (chunked_out_) buffers[count++] = asio::buffer("0\r\n\r\n", 5);
  if (count > 0) H3_CO_TRY(co_await send(std::span(buffers.data(), count)));
  head_pending_ = false;
  response_finished_ = true;
  if (!no_body_ && response_length_ && body_sent_bytes_ < *response_length_) {
    // The body fell short of its Content-Length (e.g. a read error mid-stream): the only way to
    // tell the client is to close, so it sees a truncated response.
    closing_ = true;
    co_return error_code(errc::kClosed);
  }
  if (!response_length_ && !chunked_out_ && !no_body_) closing_ = true;  // HTTP/1.0 stream
  co_return Result<void>{};
}

template <class Stream>
asio::awaitable<void> Session<Stream>::drain_body() {
  std::array<std::byte, 16 * 1024> sink;
  while (!body_done_) {
    auto n = co_await read_body(sink);
    if (!n) break;  // read_body marked the connection for closing
  }
}

template <class Stream>
void Session<Stream>::log_access() {
  if (!log::access_enabled()) return;
  const auto micros =
      std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - started_).count();
  const auto now = std::chrono::system_clock::now();
  const auto millis = static_cast<unsigned>(
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000);
  log::access(format_access_line(head_, status_, body_read_bytes_, body_sent_bytes_, micros,
                                 iso_second(worker_, std::chrono::system_clock::to_time_t(now)),
                                 millis));
}

// Counts the connection as active from accept until its coroutine ends (TLS detection and
// handshake included); shutdown() waits for the count to reach zero.
class ActiveGuard {
 public:
  ActiveGuard(Shared& shared, Worker& worker) : shared_(shared), worker_(worker) {}
  ~ActiveGuard() {
    worker_.load.fetch_sub(1, std::memory_order_relaxed);
    if (shared_.connections_active.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard lock(shared_.mutex);
      shared_.all_closed.notify_all();
    }
  }
  ActiveGuard(const ActiveGuard&) = delete;
  ActiveGuard& operator=(const ActiveGuard&) = delete;
  ActiveGuard(ActiveGuard&&) = delete;
  ActiveGuard& operator=(ActiveGuard&&) = delete;

 private:
  Shared& shared_;
  Worker& worker_;
};

// TLS detection, handshake, then the session.
asio::awaitable<void> run_connection(std::shared_ptr<Shared> keep_alive, Worker& worker,
                                     tcp::socket socket) {
  ActiveGuard active(*keep_alive, worker);
  error_code ec;
  const auto endpoint = socket.remote_endpoint(ec);
  std::string remote =
      ec ? "-" : endpoint.address().to_string() + ":" + std::to_string(endpoint.port());
  socket.set_option(tcp::no_delay(true), ec);  // responses are written whole; no Nagle delay

  beast::flat_buffer buffer;
  asio::ssl::context* const tls = worker.shared.tls.load(std::memory_order_acquire);
  if (tls == nullptr) {
    co_await Session<tcp::socket>::run(std::make_unique<Session<tcp::socket>>(
        worker, std::move(socket), std::move(buffer), std::move(remote), false));
    co_return;
  }
  // Peek at the first bytes: a TLS ClientHello or plain HTTP. Detection and handshake together
  // are bounded by the header timeout; `watched` follows the socket into the TLS stream.
  tcp::socket* watched = &socket;
  asio::steady_timer timer(worker.context, worker.shared.config.header_timeout);
  timer.async_wait([&watched](error_code wait_ec) {
    if (!wait_ec) watched->cancel(wait_ec);  // on abort the frame may be gone: touch nothing
  });
  auto [detect_ec, is_tls] = co_await beast::async_detect_ssl(socket, buffer, kTuple);
  if (detect_ec) co_return;
  if (!is_tls) {
    timer.cancel();
    if (!worker.shared.config.tls.allow_plaintext) co_return;  // closes: TLS is required
    co_await Session<tcp::socket>::run(std::make_unique<Session<tcp::socket>>(
        worker, std::move(socket), std::move(buffer), std::move(remote), false));
    co_return;
  }
  TlsStream stream(std::move(socket), *tls);
  watched = &stream.next_layer();
  auto [hs_ec, used] =
      co_await stream.async_handshake(asio::ssl::stream_base::server, buffer.data(), kTuple);
  timer.cancel();
  if (hs_ec) {
    log::debug("TLS handshake with {} failed: {}", remote, hs_ec.message());
    co_return;
  }
  buffer.consume(used);
  co_await Session<TlsStream>::run(std::make_unique<Session<TlsStream>>(
      worker, std::move(stream), std::move(buffer), std::move(remote), true));
}

}  // namespace

void start_connection(std::shared_ptr<Shared> keep_alive, Worker& worker, tcp::socket socket) {
  asio::co_spawn(worker.context, run_connection(std::move(keep_alive), worker, std::move(socket)),
                 [&worker](const std::exception_ptr& error) {
                   if (!error) return;
                   try {
                     std::rethrow_exception(error);
                   } catch (const std::exception& e) {
                     log::error("connection on worker {} failed: {}", worker.index, e.what());
                   }
                 });
}

}  // namespace hots3::http::detail
