#include "s3_client.h"

#include "hots3/aws/sigv4.h"
#include "hots3/common/text.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <ctime>
#include <random>

namespace hots3::bench {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using asio::ip::tcp;
constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);

std::optional<Endpoint> parse_endpoint(std::string_view url) {
  constexpr std::string_view kScheme = "http://";
  if (!url.starts_with(kScheme)) return std::nullopt;
  url.remove_prefix(kScheme.size());
  while (url.ends_with('/')) url.remove_suffix(1);
  const auto colon = url.rfind(':');
  Endpoint e;
  if (colon == std::string_view::npos) {
    e.host = std::string(url);
    e.port = 80;
    return e;
  }
  e.host = std::string(url.substr(0, colon));
  unsigned port = 0;
  for (char c : url.substr(colon + 1)) {
    if (c < '0' || c > '9') return std::nullopt;
    port = port * 10 + static_cast<unsigned>(c - '0');
    if (port > 65535) return std::nullopt;
  }
  e.port = static_cast<std::uint16_t>(port);
  return e;
}

Payload::Payload(std::size_t size_bytes, std::uint64_t seed) : bytes_(size_bytes) {
  std::mt19937_64 random(seed);
  for (std::size_t i = 0; i < size_bytes; i += 8) {
    const std::uint64_t v = random();
    std::memcpy(bytes_.data() + i, &v, std::min<std::size_t>(8, size_bytes - i));
  }
}

std::span<const std::byte> Payload::piece(std::uint64_t origin, std::uint64_t offset,
                                          std::size_t max_bytes) const noexcept {
  const std::size_t at = static_cast<std::size_t>((origin + offset) % bytes_.size());
  return std::span(bytes_).subspan(at, std::min(max_bytes, bytes_.size() - at));
}

bool Payload::matches(std::uint64_t origin, std::uint64_t offset,
                      std::span<const std::byte> data) const noexcept {
  while (!data.empty()) {
    const auto expected = piece(origin, offset, data.size());
    if (std::memcmp(expected.data(), data.data(), expected.size()) != 0) return false;
    data = data.subspan(expected.size());
    offset += expected.size();
  }
  return true;
}

std::string xml_value(std::string_view xml, std::string_view name) {
  const std::string open = fmt::format("<{}>", name);
  const std::string close = fmt::format("</{}>", name);
  const auto begin = xml.find(open);
  if (begin == std::string_view::npos) return {};
  const auto from = begin + open.size();
  const auto end = xml.find(close, from);
  if (end == std::string_view::npos) return {};
  return std::string(xml.substr(from, end - from));
}

namespace {

constexpr std::size_t kSinkBytes = 256 * 1024;
constexpr std::size_t kWriteBytes = 1024 * 1024;

// SigV4 in the Authorization header, UNSIGNED-PAYLOAD (as SDKs send over TLS and warp does), the
// signing key kept for the day.
class Signer {
 public:
  explicit Signer(const Credentials& c) : credentials_(c) {}

  // Adds x-amz-date, x-amz-content-sha256 and Authorization to `headers` (which holds the
  // request's other headers, Host among them).
  void sign(const Request& r, std::vector<std::pair<std::string, std::string>>& headers) {
    const auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
    std::tm tm{};
    gmtime_r(&now, &tm);
    std::array<char, 20> stamp{};
    std::strftime(stamp.data(), stamp.size(), "%Y%m%dT%H%M%SZ", &tm);
    const std::string amz_date(stamp.data());
    headers.emplace_back("x-amz-date", amz_date);
    headers.emplace_back("x-amz-content-sha256", "UNSIGNED-PAYLOAD");

    const aws::SigningScope scope{amz_date.substr(0, 8), credentials_.region, "s3"};
    if (scope.date != key_date_) {
      key_ = aws::signing_key(credentials_.secret_key, scope);
      key_date_ = scope.date;
    }
    std::vector<std::string> names;
    for (const auto& [name, value] : headers) names.push_back(lower(name));
    std::sort(names.begin(), names.end());
    names.erase(std::unique(names.begin(), names.end()), names.end());
    std::vector<aws::QueryParameter> query;
    for (const auto& [name, value] : r.query) query.push_back({name, value});
    aws::CanonicalInput input;
    input.method = r.method;
    input.path = r.path;
    input.query = &query;
    input.header_values = [&headers](std::string_view name) {
      std::vector<std::string_view> values;
      for (const auto& [n, v] : headers) {
        if (lower(n) == name) values.emplace_back(v);
      }
      return values;
    };
    input.signed_headers = &names;
    input.payload_hash = "UNSIGNED-PAYLOAD";
    const std::string to_sign = aws::string_to_sign(amz_date, scope, aws::canonical_request(input));
    std::string signed_list;
    for (const auto& n : names) signed_list += (signed_list.empty() ? "" : ";") + n;
    headers.emplace_back("Authorization",
                         fmt::format("{} Credential={}/{}, SignedHeaders={}, Signature={}",
                                     aws::kAlgorithm, credentials_.access_key, scope.to_string(),
                                     signed_list, aws::sign(key_, to_sign)));
  }

 private:
  Credentials credentials_;
  std::string key_date_;
  aws::SigningKey key_{};
};

}  // namespace

struct Connection::Impl {
  Impl(asio::any_io_executor executor, Endpoint e, const Credentials* c, const Payload& p)
      : socket(executor), endpoint(std::move(e)), payload(p), sink(kSinkBytes) {
    if (c != nullptr) signer.emplace(*c);
    buffer.max_size(1 << 20);
  }

  asio::awaitable<boost::system::error_code> connect() {
    boost::system::error_code ignored;  // closing a socket that may be half-open
    socket.close(ignored);
    buffer.clear();
    tcp::resolver resolver(socket.get_executor());
    auto [rec, results] =
        co_await resolver.async_resolve(endpoint.host, std::to_string(endpoint.port), kTuple);
    if (rec) co_return rec;
    auto [ec, ep] = co_await asio::async_connect(socket, results, kTuple);
    if (ec) co_return ec;
    socket.set_option(tcp::no_delay(true), ignored);  // best effort, as curl and wrk do
    connected = true;
    co_return ec;
  }

  std::string head_of(const Request& r) {
    std::vector<std::pair<std::string, std::string>> headers;
    headers.emplace_back("Host", endpoint.host_header());
    for (const auto& h : r.headers) headers.push_back(h);
    if (signer) signer->sign(r, headers);
    std::string target = aws::uri_encode(r.path, false);
    char sep = '?';
    for (const auto& [name, value] : r.query) {
      target += sep;
      target += aws::uri_encode(name, true);
      if (!value.empty()) target += "=" + aws::uri_encode(value, true);
      sep = '&';
    }
    std::string head = fmt::format("{} {} HTTP/1.1\r\n", r.method, target);
    for (const auto& [name, value] : headers) head += fmt::format("{}: {}\r\n", name, value);
    const std::uint64_t length = r.body.empty() ? r.body_bytes : r.body.size();
    if (length > 0 || r.method == "PUT" || r.method == "POST")
      head += fmt::format("Content-Length: {}\r\n", length);
    head += "\r\n";
    return head;
  }

  asio::awaitable<boost::system::error_code> write_request(const Request& r) {
    const std::string head = head_of(r);
    if (!r.body.empty() || r.body_bytes == 0) {
      std::array<asio::const_buffer, 2> buffers{asio::buffer(head), asio::buffer(r.body)};
      auto [ec, n] = co_await asio::async_write(socket, buffers, kTuple);
      co_return ec;
    }
    std::uint64_t sent = 0;
    bool first = true;
    while (sent < r.body_bytes) {
      const auto piece = payload.piece(
          r.body_origin, sent,
          static_cast<std::size_t>(std::min<std::uint64_t>(kWriteBytes, r.body_bytes - sent)));
      std::array<asio::const_buffer, 2> buffers{
          asio::buffer(first ? std::string_view(head) : std::string_view()),
          asio::buffer(piece.data(), piece.size())};
      auto [ec, n] = co_await asio::async_write(socket, buffers, kTuple);
      if (ec) co_return ec;
      sent += piece.size();
      first = false;
    }
    co_return boost::system::error_code{};
  }

  // Takes body bytes: counts them, keeps the first ones, checks them against the payload.
  void take(const Request& r, Response& out, std::span<const std::byte> data, std::size_t keep) {
    if (out.body.size() < keep) {
      const std::size_t n = std::min(keep - out.body.size(), data.size());
      out.body.append(reinterpret_cast<const char*>(data.data()), n);
    }
    if (r.verify_against && out.verified) {
      out.verified =
          payload.matches(r.verify_against->first, r.verify_against->second + out.body_bytes, data);
    }
    out.body_bytes += data.size();
  }

  asio::awaitable<Result<Response>> read_response(const Request& r, std::size_t keep) {
    bhttp::response_parser<bhttp::buffer_body> parser;
    parser.body_limit(boost::none);
    parser.header_limit(1 << 20);
    if (r.method == "HEAD") parser.skip(true);
    auto [ec, n] = co_await bhttp::async_read_header(socket, buffer, parser, kTuple);
    if (ec) co_return Failure{ec};
    Response out;
    out.status = parser.get().result_int();
    if (auto it = parser.get().find("ETag"); it != parser.get().end())
      out.etag = std::string(it->value());
    const bool keep_alive = parser.get().keep_alive();
    const auto length = parser.content_length();
    if (parser.is_done()) {
      // No body (HEAD, 204, 304, Content-Length: 0).
    } else if (length && !parser.chunked()) {
      // The common case: read the body straight from the socket into the sink (no parser copy).
      std::uint64_t left = *length;
      const auto buffered = buffer.data();
      const std::size_t from_buffer =
          static_cast<std::size_t>(std::min<std::uint64_t>(left, buffered.size()));
      take(r, out, std::span(static_cast<const std::byte*>(buffered.data()), from_buffer), keep);
      buffer.consume(from_buffer);
      left -= from_buffer;
      while (left > 0) {
        const std::size_t want =
            static_cast<std::size_t>(std::min<std::uint64_t>(left, sink.size()));
        auto [rec, got] = co_await socket.async_read_some(asio::buffer(sink.data(), want), kTuple);
        if (rec) co_return Failure{rec};
        take(r, out, std::span(sink.data(), got), keep);
        left -= got;
      }
    } else {
      while (!parser.is_done()) {
        parser.get().body().data = sink.data();
        parser.get().body().size = sink.size();
        auto [rec, got] = co_await bhttp::async_read(socket, buffer, parser, kTuple);
        if (rec && rec != bhttp::error::need_buffer) co_return Failure{rec};
        take(r, out, std::span(sink.data(), sink.size() - parser.get().body().size), keep);
      }
    }
    if (!keep_alive) {
      boost::system::error_code ignored;  // the server closes its side too
      socket.close(ignored);
      connected = false;
    }
    co_return out;
  }

  tcp::socket socket;
  Endpoint endpoint;
  const Payload& payload;
  std::optional<Signer> signer;
  beast::flat_buffer buffer;
  std::vector<std::byte> sink;
  bool connected = false;
};

Connection::Connection(asio::any_io_executor executor, Endpoint endpoint,
                       const Credentials* credentials, const Payload& payload)
    : impl_(
          std::make_unique<Impl>(std::move(executor), std::move(endpoint), credentials, payload)) {}

Connection::~Connection() = default;
Connection::Connection(Connection&&) noexcept = default;
Connection& Connection::operator=(Connection&&) noexcept = default;

asio::awaitable<Result<Response>> Connection::send(const Request& request,
                                                   std::size_t keep_body_bytes) {
  // A kept-alive connection may have been closed by the server while idle: one fresh attempt.
  for (int attempt = 0; attempt < 2; ++attempt) {
    const bool reused = impl_->connected;
    if (!impl_->connected) {
      if (auto ec = co_await impl_->connect()) co_return Failure{ec};
    }
    if (auto ec = co_await impl_->write_request(request)) {
      impl_->connected = false;
      if (reused) continue;
      co_return Failure{ec};
    }
    auto response = co_await impl_->read_response(request, keep_body_bytes);
    if (!response) {
      impl_->connected = false;
      if (reused && response.error() == bhttp::error::end_of_stream) continue;
    }
    co_return response;
  }
  co_return Failure{make_error_code(boost::asio::error::connection_reset)};
}

}  // namespace hots3::bench
