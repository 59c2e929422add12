#include "hots3/s3client/s3_client.h"

#include "hots3/common/clock.h"
#include "hots3/xml/xml.h"

#include <span>

namespace hots3::s3client {

std::optional<Error> parse_error(std::string_view body) {
  auto doc = xml::XmlDocument::parse(body);
  if (!doc || doc->root().name() != "Error") return std::nullopt;
  Error e;
  auto text = [&](std::string_view name) {
    auto element = doc->root().child(name);
    return element ? element->text() : std::string();
  };
  e.code = text("Code");
  e.message = text("Message");
  e.resource = text("Resource");
  e.request_id = text("RequestId");
  if (e.code.empty()) return std::nullopt;
  return e;
}

Client::Client(boost::asio::any_io_executor executor, Options options)
    : options_(std::move(options)),
      http_(std::move(executor), options_.http),
      signer_(options_.credentials) {}

void Client::set_credentials(aws::Credentials credentials) {
  options_.credentials = std::move(credentials);
  signer_ = aws::Signer(options_.credentials);
}

boost::asio::awaitable<Result<std::unique_ptr<http::Call>>> Client::start(Request request) {
  std::string path = "/";
  std::string host = http_.endpoint().host_header();
  if (!request.bucket.empty()) {
    if (options_.virtual_host) {
      host = request.bucket + "." + host;
      path += request.key;
    } else {
      path += request.bucket;
      if (!request.key.empty()) path += "/" + request.key;
    }
  }
  aws::HeaderList headers;
  headers.reserve(request.headers.size() + 5);
  headers.emplace_back("Host", host);
  for (auto& h : request.headers) headers.emplace_back(std::move(h.name), std::move(h.value));
  signer_.sign(request.method, path, request.query, headers, request.payload_hash, now_ms());
  http::ClientRequest out;
  out.method = std::move(request.method);
  out.target = aws::request_target(path, request.query);
  out.content_length = request.content_length;
  out.first_byte_timeout = request.first_byte_timeout;
  out.headers.reserve(headers.size());
  for (auto& [name, value] : headers) out.headers.push_back({std::move(name), std::move(value)});
  co_return co_await http_.start(std::move(out));
}

boost::asio::awaitable<Result<http::Client::Reply>> Client::request(
    Request request, std::string body, std::size_t max_response_bytes) {
  request.content_length = body.size();
  request.payload_hash = aws::sha256_hex(body);
  auto call = co_await start(std::move(request));
  if (!call) co_return call.error();
  co_return co_await (*call)->complete(std::as_bytes(std::span(body)), max_response_bytes);
}

}  // namespace hots3::s3client
