#include "s3_client.h"

#include "hots3/aws/sigv4.h"
#include "hots3/http/client.h"
#include "hots3/s3client/s3_client.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <random>

namespace hots3::bench {

namespace asio = boost::asio;

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

// One simulated client's connection: a pool of one.
http::ClientOptions one_connection(const Endpoint& endpoint) {
  http::ClientOptions o;
  o.endpoint = endpoint;
  o.idle_connections_max = 1;
  return o;
}

}  // namespace

struct Connection::Impl {
  Impl(asio::any_io_executor executor, const Endpoint& endpoint, const Credentials* credentials,
       const Payload& p)
      : payload(p), sink(kSinkBytes) {
    if (credentials != nullptr) {
      s3.emplace(executor, s3client::Options{one_connection(endpoint), *credentials, false});
    } else {
      plain.emplace(executor, one_connection(endpoint));
    }
  }

  asio::awaitable<Result<std::unique_ptr<http::Call>>> start(const Request& r) {
    const std::uint64_t length = r.body.empty() ? r.body_bytes : r.body.size();
    std::vector<aws::QueryParameter> query;
    for (const auto& [name, value] : r.query) query.push_back({name, value});
    std::vector<http::Header> headers;
    for (const auto& [name, value] : r.headers) headers.push_back({name, value});
    if (plain) {
      http::ClientRequest out{std::string(r.method),
                              aws::request_target(r.path, query),
                              std::move(headers),
                              length,
                              {}};
      co_return co_await plain->start(std::move(out));
    }
    // "/bucket/key" → bucket, key.
    const std::string_view path = std::string_view(r.path).substr(1);
    const auto slash = path.find('/');
    s3client::Request out;
    out.method = std::string(r.method);
    out.bucket = std::string(path.substr(0, slash));
    out.key = slash == std::string_view::npos ? std::string() : std::string(path.substr(slash + 1));
    out.query = std::move(query);
    out.headers = std::move(headers);
    out.content_length = length;
    co_return co_await s3->start(std::move(out));
  }

  asio::awaitable<Result<void>> write_body(const Request& r, http::Call& call) {
    if (!r.body.empty()) co_return co_await call.write_body(std::as_bytes(std::span(r.body)));
    for (std::uint64_t sent = 0; sent < r.body_bytes;) {
      const auto piece = payload.piece(
          r.body_origin, sent,
          static_cast<std::size_t>(std::min<std::uint64_t>(kWriteBytes, r.body_bytes - sent)));
      H3_CO_TRY(co_await call.write_body(piece));
      sent += piece.size();
    }
    co_return Result<void>{};
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

  const Payload& payload;
  std::optional<s3client::Client> s3;
  std::optional<http::Client> plain;
  std::vector<std::byte> sink;
};

Connection::Connection(asio::any_io_executor executor, Endpoint endpoint,
                       const Credentials* credentials, const Payload& payload)
    : impl_(std::make_unique<Impl>(std::move(executor), endpoint, credentials, payload)) {}

Connection::~Connection() = default;
Connection::Connection(Connection&&) noexcept = default;
Connection& Connection::operator=(Connection&&) noexcept = default;

asio::awaitable<Result<Response>> Connection::send(const Request& request,
                                                   std::size_t keep_body_bytes) {
  auto call = co_await impl_->start(request);
  if (!call) co_return call.error();
  H3_CO_TRY(co_await impl_->write_body(request, **call));
  auto head = co_await (*call)->response();
  if (!head) co_return head.error();
  Response out;
  out.status = head->status;
  if (auto etag = head->find("ETag")) out.etag = std::string(*etag);
  for (;;) {
    auto n = co_await (*call)->read_body(impl_->sink);
    if (!n) co_return n.error();
    if (*n == 0) break;
    impl_->take(request, out, std::span(impl_->sink.data(), *n), keep_body_bytes);
  }
  co_return out;
}

}  // namespace hots3::bench
