#include "hots3/http/client.h"

#include "wire.h"

#include "hots3/common/assert.h"
#include "hots3/common/text.h"
#include "hots3/common/units.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <openssl/ssl.h>

#include <array>
#include <charconv>
#include <deque>
#include <stdexcept>
#include <sys/socket.h>
#include <tuple>

namespace hots3::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using asio::ip::tcp;
using boost::system::error_code;
constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);

std::string Endpoint::host_header() const {
  const bool v6 = host.find(':') != std::string::npos;
  std::string out = v6 ? "[" + host + "]" : host;
  if (port != (tls ? 443 : 80)) out += ":" + std::to_string(port);
  return out;
}

Result<Endpoint> parse_endpoint(std::string_view url) {
  Endpoint e;
  if (url.starts_with("http://")) {
    url.remove_prefix(7);
  } else if (url.starts_with("https://")) {
    url.remove_prefix(8);
    e.tls = true;
  } else {
    return errc::kInvalidArgument;
  }
  while (url.ends_with('/')) url.remove_suffix(1);
  std::string_view port;
  if (url.starts_with('[')) {
    const auto close = url.find(']');
    if (close == std::string_view::npos) return errc::kInvalidArgument;
    e.host = std::string(url.substr(1, close - 1));
    url.remove_prefix(close + 1);
    if (!url.empty()) {
      if (url.front() != ':') return errc::kInvalidArgument;
      port = url.substr(1);
    }
  } else {
    const auto colon = url.find(':');
    e.host = std::string(url.substr(0, colon));
    if (colon != std::string_view::npos) port = url.substr(colon + 1);
  }
  if (e.host.empty() || e.host.find('/') != std::string::npos) return errc::kInvalidArgument;
  e.port = e.tls ? 443 : 80;
  if (!port.empty()) {
    unsigned value = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (ec != std::errc{} || end != port.data() + port.size() || value == 0 || value > 65535) {
      return errc::kInvalidArgument;
    }
    e.port = static_cast<std::uint16_t>(value);
  }
  return e;
}

std::optional<std::string_view> ClientResponseHead::find(std::string_view name) const {
  for (const Header& h : headers) {
    if (iequals(h.name, name)) return std::string_view(h.value);
  }
  return std::nullopt;
}

asio::awaitable<Result<std::string>> Call::read_all(std::size_t max_bytes) {
  std::string out;
  std::array<std::byte, 16 * kKiB> buffer{};
  for (;;) {
    auto n = co_await read_body(buffer);
    if (!n) co_return n.error();
    if (*n == 0) break;
    if (out.size() + *n > max_bytes) co_return errc::kTooLarge;
    out.append(reinterpret_cast<const char*>(buffer.data()), *n);
  }
  co_return out;
}

asio::awaitable<Result<ClientReply>> Call::complete(std::span<const std::byte> body,
                                                    std::size_t max_response_bytes) {
  if (!body.empty()) H3_CO_TRY(co_await write_body(body));
  auto head = co_await response();
  if (!head) co_return head.error();
  auto content = co_await read_all(max_response_bytes);
  if (!content) co_return content.error();
  co_return ClientReply{std::move(*head), std::move(*content)};
}

namespace {

using TlsStream = asio::ssl::stream<tcp::socket>;

// A connected transport, plain or TLS, with the one timer that bounds whatever it waits for: on
// expiry the socket is cancelled and the operation fails with kTimedOut.
class Link {
 public:
  Link(asio::any_io_executor executor, asio::ssl::context* tls)
      : timer_(executor), buffer_(), tls_(tls) {
    if (tls_ != nullptr) {
      stream_.emplace(executor, *tls_);
    } else {
      socket_.emplace(executor);
    }
  }
  ~Link() = default;
  Link(const Link&) = delete;
  Link& operator=(const Link&) = delete;
  Link(Link&&) = delete;
  Link& operator=(Link&&) = delete;

  tcp::socket& socket() { return stream_ ? stream_->next_layer() : *socket_; }
  beast::flat_buffer& buffer() { return buffer_; }
  [[nodiscard]] bool timed_out() const { return timed_out_; }

  void arm(std::chrono::milliseconds timeout) {
    timer_.expires_after(timeout);
    timer_.async_wait([this](error_code ec) {
      if (ec) return;  // disarmed (or the link is going): touch nothing
      timed_out_ = true;
      error_code ignored;  // cancelling a socket that may be closed already
      socket().cancel(ignored);
    });
  }
  void disarm() { timer_.cancel(); }

  asio::awaitable<error_code> connect(const tcp::resolver::results_type& addresses,
                                      const Endpoint& endpoint, std::chrono::milliseconds timeout,
                                      std::size_t receive_buffer_bytes) {
    arm(timeout);
    auto [ec, chosen] = co_await asio::async_connect(socket(), addresses, kTuple);
    if (!ec) {
      error_code ignored;  // best effort, as curl does
      socket().set_option(tcp::no_delay(true), ignored);
      if (receive_buffer_bytes != 0) {
        socket().set_option(
            asio::socket_base::receive_buffer_size(static_cast<int>(receive_buffer_bytes)),
            ignored);
      }
    }
    if (!ec && stream_) {
      // SNI and the name the certificate must carry.
      if (SSL_set_tlsext_host_name(stream_->native_handle(), endpoint.host.c_str()) != 1) {
        ec = asio::error::invalid_argument;
      } else {
        stream_->set_verify_callback(asio::ssl::host_name_verification(endpoint.host));
        auto [hs] = co_await stream_->async_handshake(asio::ssl::stream_base::client, kTuple);
        ec = hs;
      }
    }
    disarm();
    co_return timed_out_ ? error_code(asio::error::timed_out) : ec;
  }

  asio::awaitable<error_code> write(std::span<const asio::const_buffer> buffers,
                                    std::chrono::milliseconds timeout) {
    arm(timeout);
    error_code ec;
    if (stream_) {
      std::tie(ec, std::ignore) = co_await asio::async_write(*stream_, buffers, kTuple);
    } else {
      std::tie(ec, std::ignore) = co_await asio::async_write(*socket_, buffers, kTuple);
    }
    disarm();
    co_return timed_out_ ? error_code(asio::error::timed_out) : ec;
  }

  asio::awaitable<std::tuple<error_code, std::size_t>> read_some(
      asio::mutable_buffer into, std::chrono::milliseconds timeout) {
    arm(timeout);
    error_code ec;
    std::size_t n = 0;
    if (stream_) {
      std::tie(ec, n) = co_await stream_->async_read_some(into, kTuple);
    } else {
      std::tie(ec, n) = co_await socket_->async_read_some(into, kTuple);
    }
    disarm();
    co_return std::tuple{timed_out_ ? error_code(asio::error::timed_out) : ec, n};
  }

  // Whether an idle link was closed by its server meanwhile (or sent something unasked).
  bool stale() {
    if (buffer_.size() > 0) return true;
    std::byte probe{};
    const auto n = ::recv(socket().native_handle(), &probe, 1, MSG_PEEK | MSG_DONTWAIT);
    return n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
  }

  void close() {
    error_code ignored;  // closing a socket the peer may have closed
    socket().shutdown(tcp::socket::shutdown_both, ignored);
    socket().close(ignored);
  }

 private:
  asio::steady_timer timer_;
  beast::flat_buffer buffer_;
  asio::ssl::context* tls_;
  std::optional<tcp::socket> socket_;
  std::optional<TlsStream> stream_;
  bool timed_out_ = false;
};

// Maps a transport error to the client's own.
errc to_errc(const error_code& ec) {
  if (ec == asio::error::timed_out) return errc::kTimedOut;
  if (ec == bhttp::error::header_limit || ec == bhttp::error::buffer_overflow)
    return errc::kTooLarge;
  if (ec.category() == bhttp::make_error_code(bhttp::error::end_of_stream).category() &&
      ec != bhttp::error::end_of_stream && ec != bhttp::error::partial_message) {
    return errc::kInvalidArgument;
  }
  return errc::kClosed;
}

}  // namespace

struct Client::Impl : std::enable_shared_from_this<Client::Impl> {
  Impl(asio::any_io_executor e, ClientOptions o) : executor(std::move(e)), options(std::move(o)) {
    auto parsed = parse_endpoint(options.endpoint);
    if (!parsed)
      throw std::invalid_argument("not an http:// or https:// endpoint: " + options.endpoint);
    endpoint = std::move(*parsed);
    if (endpoint.tls) {
      tls.emplace(asio::ssl::context::tls_client);
      if (options.verify_tls) {
        tls->set_verify_mode(asio::ssl::verify_peer);
        if (options.ca_file.empty()) {
          tls->set_default_verify_paths();
        } else {
          error_code ec;
          tls->load_verify_file(options.ca_file, ec);
          if (ec)
            throw std::runtime_error("cannot read the CA file " + options.ca_file + ": " +
                                     ec.message());
        }
      } else {
        tls->set_verify_mode(asio::ssl::verify_none);
      }
    }
  }

  asio::awaitable<Result<std::unique_ptr<Link>>> connect() {
    tcp::resolver resolver(executor);
    auto [rec, addresses] =
        co_await resolver.async_resolve(endpoint.host, std::to_string(endpoint.port), kTuple);
    if (rec) co_return errc::kInvalidArgument;
    auto link = std::make_unique<Link>(executor, tls ? &*tls : nullptr);
    if (auto ec = co_await link->connect(addresses, endpoint, options.connect_timeout,
                                         options.receive_buffer_bytes)) {
      if (ec == asio::error::timed_out) co_return errc::kTimedOut;
      if (ec.category() == asio::error::get_ssl_category() ||
          ec.category() == asio::ssl::error::get_stream_category() ||
          ec == asio::error::invalid_argument) {
        co_return errc::kUnavailable;
      }
      // The system's own error (connection refused, no route to host): it says why.
      co_return ec;
    }
    co_return link;
  }

  // A kept-alive link that still looks alive, if any.
  std::unique_ptr<Link> take_idle() {
    while (!idle.empty()) {
      std::unique_ptr<Link> link = std::move(idle.back());
      idle.pop_back();
      if (!link->stale()) return link;
      link->close();
    }
    return nullptr;
  }

  void give_back(std::unique_ptr<Link> link) {
    if (idle.size() >= options.idle_connections_max) {
      link->close();
      return;
    }
    idle.push_back(std::move(link));
  }

  asio::any_io_executor executor;
  ClientOptions options;
  Endpoint endpoint;
  std::optional<asio::ssl::context> tls;
  std::deque<std::unique_ptr<Link>> idle;
};

namespace {

using Parser = bhttp::response_parser<bhttp::buffer_body>;

class ClientCall final : public Call {
 public:
  ClientCall(std::shared_ptr<Client::Impl> client, std::unique_ptr<Link> link,
             ClientRequest request, std::string head, bool reused)
      : client_(std::move(client)),
        link_(std::move(link)),
        request_(std::move(request)),
        head_(std::move(head)),
        reused_(reused) {}

  ~ClientCall() override {
    if (!link_) return;
    if (done_ && keep_alive_ && !failed_) {
      client_->give_back(std::move(link_));
    } else {
      link_->close();
    }
  }
  ClientCall(const ClientCall&) = delete;
  ClientCall& operator=(const ClientCall&) = delete;
  ClientCall(ClientCall&&) = delete;
  ClientCall& operator=(ClientCall&&) = delete;

  // Sends the head (with no body, the whole request). On a reused link that the server closed
  // meanwhile, once more on a new one.
  asio::awaitable<Result<void>> send_head() {
    const asio::const_buffer buffer = asio::buffer(head_);
    auto ec = co_await link_->write(std::span(&buffer, 1), client_->options.stall_timeout);
    if (ec && reused_ && ec != asio::error::timed_out) {
      H3_CO_TRY(co_await reconnect());
      ec = co_await link_->write(std::span(&buffer, 1), client_->options.stall_timeout);
    }
    if (ec) co_return fail(ec);
    co_return Result<void>{};
  }

  asio::awaitable<Result<void>> write_body(std::span<const std::byte> data) override {
    H3_ASSERT(body_sent_ + data.size() <= request_.content_length,
              "more request body than declared");
    if (data.empty()) co_return Result<void>{};
    const asio::const_buffer buffer = asio::buffer(data.data(), data.size());
    if (auto ec = co_await link_->write(std::span(&buffer, 1), client_->options.stall_timeout)) {
      co_return fail(ec);
    }
    body_sent_ += data.size();
    co_return Result<void>{};
  }

  asio::awaitable<Result<ClientResponseHead>> response() override {
    H3_ASSERT(body_sent_ == request_.content_length, "the request body is not all written");
    auto head = co_await read_head();
    // A body-less request on a reused link the server had closed: nothing of it was acted on.
    if (!head && reused_ && request_.content_length == 0 && nothing_received_ &&
        head.error() == errc::kClosed) {
      H3_CO_TRY(co_await reconnect());
      H3_CO_TRY(co_await send_head());
      head = co_await read_head();
    }
    co_return head;
  }

  asio::awaitable<Result<std::size_t>> read_body(std::span<std::byte> out) override {
    H3_ASSERT(parser_.has_value() && parser_->is_header_done(), "read_body before response()");
    if (done_ || out.empty()) co_return std::size_t{0};
    auto& buffer = link_->buffer();
    if (length_left_) {
      // Content-Length: what the head's read left over first, then straight from the socket.
      std::size_t n = 0;
      if (buffer.size() > 0) {
        n = asio::buffer_copy(
            asio::buffer(out.data(), static_cast<std::size_t>(
                                         std::min<std::uint64_t>(out.size(), *length_left_))),
            buffer.data());
        buffer.consume(n);
      } else {
        const auto want =
            static_cast<std::size_t>(std::min<std::uint64_t>(out.size(), *length_left_));
        auto [ec, got] = co_await link_->read_some(asio::buffer(out.data(), want),
                                                   client_->options.stall_timeout);
        if (ec) co_return fail(ec);
        n = got;
      }
      *length_left_ -= n;
      done_ = *length_left_ == 0;
      co_return n;
    }
    // Chunked or delimited by the close: through the parser, into the caller's buffer.
    for (;;) {
      auto& body = parser_->get().body();
      body.data = out.data();
      body.size = out.size();
      body.more = true;
      if (buffer.size() > 0) {
        error_code ec;
        buffer.consume(parser_->put(buffer.data(), ec));
        if (ec == bhttp::error::need_buffer || ec == bhttp::error::need_more) ec = {};
        if (ec) co_return fail(ec);
      }
      const std::size_t n = out.size() - body.size;
      if (parser_->is_done()) done_ = true;
      if (n > 0 || done_) co_return n;
      auto [rec, got] =
          co_await link_->read_some(buffer.prepare(16 * kKiB), client_->options.stall_timeout);
      if (rec == asio::error::eof) {
        error_code ec;
        parser_->put_eof(ec);
        if (ec) co_return fail(ec);
        done_ = true;
        keep_alive_ = false;
        co_return std::size_t{0};
      }
      if (rec) co_return fail(rec);
      buffer.commit(got);
    }
  }

 private:
  asio::awaitable<Result<ClientResponseHead>> read_head() {
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(client_->options.header_bytes_max));
    parser_->body_limit(boost::none);
    if (request_.method == "HEAD") parser_->skip(true);
    auto& buffer = link_->buffer();
    buffer.max_size(client_->options.header_bytes_max + 16 * kKiB);
    bool first = true;
    nothing_received_ = buffer.size() == 0;
    for (;;) {
      if (buffer.size() > 0) {
        error_code ec;
        const std::size_t used = parser_->put(buffer.data(), ec);
        buffer.consume(used);
        if (parser_->is_header_done()) break;
        if (ec && ec != bhttp::error::need_more) co_return fail(ec);
      }
      if (buffer.size() >= client_->options.header_bytes_max)
        co_return fail(bhttp::error::header_limit);
      auto [ec, n] = co_await link_->read_some(
          buffer.prepare(16 * kKiB),
          first ? request_.first_byte_timeout.value_or(client_->options.first_byte_timeout)
                : client_->options.stall_timeout);
      first = false;
      if (ec)
        co_return fail(ec == asio::error::eof ? error_code(bhttp::error::partial_message) : ec);
      nothing_received_ = false;
      buffer.commit(n);
    }
    auto& message = parser_->get();
    ClientResponseHead head;
    head.status = message.result_int();
    for (const auto& field : message)
      head.headers.push_back({std::string(field.name_string()), std::string(field.value())});
    if (auto length = parser_->content_length(); length && !parser_->chunked())
      head.content_length = *length;
    keep_alive_ = parser_->keep_alive();
    // The body is parsed as far as what arrived goes: a parser that is not eager stops after
    // each chunk's size line, and what is left here would wait for bytes that never come.
    parser_->eager(true);
    if (parser_->is_done()) {
      done_ = true;  // no body: HEAD, 1xx, 204, 304, or Content-Length: 0
    } else if (head.content_length) {
      length_left_ = *head.content_length;
    }
    co_return head;
  }

  asio::awaitable<Result<void>> reconnect() {
    link_->close();
    auto link = co_await client_->connect();
    if (!link) co_return link.error();
    link_ = std::move(*link);
    reused_ = false;
    co_return Result<void>{};
  }

  errc fail(const error_code& ec) {
    failed_ = true;
    return to_errc(ec);
  }

  std::shared_ptr<Client::Impl> client_;
  std::unique_ptr<Link> link_;
  ClientRequest request_;
  std::string head_;
  bool reused_;
  std::uint64_t body_sent_ = 0;
  std::optional<Parser> parser_;
  std::optional<std::uint64_t> length_left_;
  bool nothing_received_ = true;
  bool keep_alive_ = false;
  bool done_ = false;
  bool failed_ = false;
};

}  // namespace

Client::Client(asio::any_io_executor executor, ClientOptions options)
    : impl_(std::make_shared<Impl>(std::move(executor), std::move(options))) {}

Client::~Client() {
  for (auto& link : impl_->idle) link->close();
  impl_->idle.clear();
}

const Endpoint& Client::endpoint() const noexcept { return impl_->endpoint; }
std::size_t Client::idle_connections() const noexcept { return impl_->idle.size(); }

asio::awaitable<Result<std::unique_ptr<Call>>> Client::start(ClientRequest request) {
  std::string head;
  head.reserve(256);
  head += request.method;
  head += ' ';
  head += request.target;
  head += " HTTP/1.1\r\n";
  bool has_host = false;
  for (const Header& h : request.headers) {
    has_host = has_host || iequals(h.name, "host");
    detail::append_header(head, h.name, h.value);
  }
  if (!has_host) detail::append_header(head, "Host", impl_->endpoint.host_header());
  if (request.content_length > 0 || request.method == "PUT" || request.method == "POST") {
    detail::append_header(head, "Content-Length", std::to_string(request.content_length));
  }
  head += "\r\n";
  std::unique_ptr<Link> link = impl_->take_idle();
  const bool reused = link != nullptr;
  if (!link) {
    auto connected = co_await impl_->connect();
    if (!connected) co_return connected.error();
    link = std::move(*connected);
  }
  auto call = std::make_unique<ClientCall>(impl_, std::move(link), std::move(request),
                                           std::move(head), reused);
  H3_CO_TRY(co_await call->send_head());
  co_return std::unique_ptr<Call>(std::move(call));
}

asio::awaitable<Result<Client::Reply>> Client::request(ClientRequest request, std::string body,
                                                       std::size_t max_response_bytes) {
  request.content_length = body.size();
  auto call = co_await start(std::move(request));
  if (!call) co_return call.error();
  co_return co_await (*call)->complete(std::as_bytes(std::span(body)), max_response_bytes);
}

}  // namespace hots3::http
