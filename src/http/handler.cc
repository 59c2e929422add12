#include "hots3/http/handler.h"

#include "wire.h"

#include "hots3/common/text.h"

#include <boost/asio/awaitable.hpp>

namespace hots3::http {

std::optional<std::string_view> RequestHead::find(std::string_view name) const noexcept {
  for (const HeaderView& h : headers) {
    if (iequals(h.name, name)) return h.value;
  }
  return std::nullopt;
}

void Response::add(std::string_view name, std::string_view value) {
  detail::append_header(lines, name, value);
}

std::optional<std::string_view> Response::find(std::string_view name) const noexcept {
  for (std::string_view rest = lines; !rest.empty();) {
    const std::size_t end = rest.find("\r\n");
    const std::string_view line = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 2);
    const std::size_t colon = line.find(": ");
    if (colon != std::string_view::npos && iequals(line.substr(0, colon), name))
      return line.substr(colon + 2);
  }
  return std::nullopt;
}

boost::asio::awaitable<Result<void>> Exchange::respond(Response response, std::string body) {
  response.content_length = body.size();
  H3_CO_TRY(co_await write_head(std::move(response)));
  H3_CO_TRY(co_await write_body(std::as_bytes(std::span(body))));
  co_return co_await finish();
}

std::string loggable_target(std::string_view target) {
  std::string out;
  detail::append_redacted_target(out, target);
  return out;
}

Response Handler::protocol_error(ProtocolError error, std::string_view /*request_id*/,
                                 std::string& body) {
  Response response;
  switch (error) {
    case ProtocolError::kBadRequest:
      response.status = 400;
      body = "bad request\n";
      break;
    case ProtocolError::kHeaderTooLarge:
      response.status = 431;
      body = "header too large\n";
      break;
    case ProtocolError::kRequestTimeout:
      response.status = 408;
      body = "request timeout\n";
      break;
    case ProtocolError::kTooManyConnections:
      response.status = 503;
      body = "too many connections\n";
      break;
    case ProtocolError::kUnsupportedVersion:
      response.status = 505;
      body = "HTTP/1.x only\n";
      break;
    case ProtocolError::kInternalError:
      response.status = 500;
      body = "internal error\n";
      break;
  }
  response.add("Content-Type", "text/plain");
  return response;
}

}  // namespace hots3::http
