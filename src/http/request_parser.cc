#include "request_parser.h"

#include "hots3/common/text.h"
#include "hots3/http/handler.h"

#include <boost/asio/buffer.hpp>

#include <algorithm>
#include <string_view>

namespace hots3::http::detail {

namespace bhttp = boost::beast::http;

RequestParser::RequestParser(HeadText& text) : text_(text) {
  // The room of an ordinary head is kept; a connection that was sent a large one gives it back,
  // so idle connections do not each hold the largest head they ever saw.
  constexpr std::size_t kKeptBytes = std::size_t{8} * 1024;
  constexpr std::size_t kKeptFields = 64;
  if (text_.bytes.capacity() > kKeptBytes || text_.fields.capacity() > kKeptFields) {
    // (Swapped out, not assigned: a string assigned an empty one keeps its room.)
    std::string().swap(text_.bytes);
    std::vector<HeadText::Field>().swap(text_.fields);
    std::vector<HeaderView>().swap(text_.headers);
    return;
  }
  text_.bytes.clear();
  text_.fields.clear();
  text_.headers.clear();
}

std::string_view RequestParser::method_string() const noexcept {
  return std::string_view(text_.bytes).substr(0, method_bytes_);
}

std::string_view RequestParser::target() const noexcept {
  return std::string_view(text_.bytes).substr(target_at_, target_bytes_);
}

std::size_t RequestParser::count(bhttp::field name) const noexcept {
  std::size_t n = 0;
  for (const HeadText::Field& f : text_.fields) n += f.name == name ? 1 : 0;
  return n;
}

std::string_view RequestParser::value(bhttp::field name) const noexcept {
  for (const HeadText::Field& f : text_.fields) {
    if (f.name == name) return std::string_view(text_.bytes).substr(f.value_at, f.value_bytes);
  }
  return {};
}

std::uint32_t RequestParser::keep(std::string_view s) {
  // (A head is bounded by header_bytes_max, far below 4 GiB.)
  const auto at = static_cast<std::uint32_t>(text_.bytes.size());
  text_.bytes.append(s);
  return at;
}

void RequestParser::on_request_impl(bhttp::verb method, boost::beast::string_view method_str,
                                    boost::beast::string_view target, int version,
                                    boost::beast::error_code& /*ec*/) {
  method_ = method;
  method_bytes_ = static_cast<std::uint32_t>(method_str.size());
  keep(method_str);
  target_bytes_ = static_cast<std::uint32_t>(target.size());
  target_at_ = keep(target);
  version_ = static_cast<unsigned>(version);
}

void RequestParser::on_response_impl(int /*code*/, boost::beast::string_view /*reason*/,
                                     int /*version*/, boost::beast::error_code& /*ec*/) {}

void RequestParser::on_field_impl(bhttp::field name, boost::beast::string_view name_string,
                                  boost::beast::string_view value,
                                  boost::beast::error_code& /*ec*/) {
  HeadText::Field& f = text_.fields.emplace_back();
  f.name = name;
  f.name_bytes = static_cast<std::uint32_t>(name_string.size());
  f.name_at = keep(name_string);
  f.value_bytes = static_cast<std::uint32_t>(value.size());
  f.value_at = keep(value);
}

void RequestParser::on_header_impl(boost::beast::error_code& /*ec*/) {
  // The text no longer grows: views into it stay valid.
  const std::string_view bytes = text_.bytes;
  text_.headers.clear();
  for (const HeadText::Field& f : text_.fields) {
    text_.headers.push_back(
        {bytes.substr(f.name_at, f.name_bytes), bytes.substr(f.value_at, f.value_bytes)});
  }
}

void RequestParser::on_body_init_impl(const boost::optional<std::uint64_t>& /*content_length*/,
                                      boost::beast::error_code& /*ec*/) {}

std::size_t RequestParser::take_body(std::string_view data, boost::beast::error_code& ec) {
  // As Beast's buffer_body: need_buffer when the room set for the body is full.
  if (body.data == nullptr) {
    ec = bhttp::error::need_buffer;
    return 0;
  }
  const std::size_t n = std::min(data.size(), body.size);
  std::copy_n(data.data(), n, body.data);
  body.data += n;
  body.size -= n;
  if (n < data.size()) ec = bhttp::error::need_buffer;
  return n;
}

std::size_t RequestParser::on_body_impl(boost::beast::string_view data,
                                        boost::beast::error_code& ec) {
  return take_body(data, ec);
}

void RequestParser::on_chunk_header_impl(std::uint64_t /*size*/,
                                         boost::beast::string_view /*extensions*/,
                                         boost::beast::error_code& /*ec*/) {}

std::size_t RequestParser::on_chunk_body_impl(std::uint64_t /*remain*/,
                                              boost::beast::string_view data,
                                              boost::beast::error_code& ec) {
  return take_body(data, ec);
}

void RequestParser::on_finish_impl(boost::beast::error_code& /*ec*/) {}

void limit_request_parser(RequestParser& parser, std::uint64_t header_bytes_max) {
  parser.header_limit(static_cast<std::uint32_t>(header_bytes_max));
  parser.body_limit(boost::none);
}

std::size_t put_head(RequestParser& parser, std::string_view available, std::uint64_t& head_bytes,
                     std::uint64_t header_bytes_max, boost::beast::error_code& ec) {
  ec = {};
  std::size_t used = 0;
  if (!available.empty()) {
    used = parser.put(boost::asio::buffer(available.data(), available.size()), ec);
    head_bytes += used;
    if (head_bytes > header_bytes_max) {
      ec = bhttp::error::header_limit;
      return used;
    }
    if (parser.is_header_done()) return used;
  }
  if (!ec) ec = bhttp::error::need_more;
  if (ec == bhttp::error::need_more && head_bytes + (available.size() - used) > header_bytes_max) {
    ec = bhttp::error::header_limit;
  }
  return used;
}

bool body_framing_clear(const RequestParser& parser) {
  const auto codings = parser.count(bhttp::field::transfer_encoding);
  if (codings == 0) return true;
  if (codings > 1 || parser.version() < 11 || parser.count(bhttp::field::content_length) > 0)
    return false;
  std::string_view value = parser.value(bhttp::field::transfer_encoding);
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
  return iequals(value, "chunked");
}

}  // namespace hots3::http::detail
