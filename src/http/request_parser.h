#pragma once

// Private to src/http: how a connection parses a request head, in one place for the session and
// for the fuzz harness that feeds it hostile bytes. Beast's parser does the HTTP/1.1 syntax;
// what Beast accepts but hots3 must not (framings two parties could read differently) is
// checked here.

#include "hots3/http/handler.h"

#include <boost/beast/http/basic_parser.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/beast/http/verb.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hots3::http::detail {

// Where a connection keeps the text of its requests' heads: from one request to the next, so a
// head is copied into room it already has, not into allocations of its own.
struct HeadText {
  struct Field {
    boost::beast::http::field name;  // as Beast knows it; field::unknown if it does not
    std::uint32_t name_at = 0;
    std::uint32_t name_bytes = 0;
    std::uint32_t value_at = 0;
    std::uint32_t value_bytes = 0;
  };
  std::string bytes;                // the method, the target, then each header's name and value
  std::vector<Field> fields;        // in the order received
  std::vector<HeaderView> headers;  // views into `bytes`, once the head is complete
};

// Beast's syntax, with what it finds kept in a HeadText (which the parser clears and which must
// outlive it). A body is written into `body` (what Beast's buffer_body does): set it before each
// put; what is left of it after says how much was written. The session reads Content-Length
// bodies itself; it puts chunked ones through here, for the framing to be removed.
class RequestParser final : public boost::beast::http::basic_parser<true> {
 public:
  explicit RequestParser(HeadText& text);

  // The head, once is_header_done(). The views are into the HeadText.
  [[nodiscard]] boost::beast::http::verb method() const noexcept { return method_; }
  [[nodiscard]] std::string_view method_string() const noexcept;
  [[nodiscard]] std::string_view target() const noexcept;
  [[nodiscard]] unsigned version() const noexcept { return version_; }
  [[nodiscard]] const std::vector<HeaderView>& headers() const noexcept { return text_.headers; }
  // How many headers of this (known) name there are, and the first one's value.
  [[nodiscard]] std::size_t count(boost::beast::http::field name) const noexcept;
  [[nodiscard]] std::string_view value(boost::beast::http::field name) const noexcept;

  struct Body {
    char* data = nullptr;
    std::size_t size = 0;
  };
  Body body;

 private:
  void on_request_impl(boost::beast::http::verb method, boost::beast::string_view method_str,
                       boost::beast::string_view target, int version,
                       boost::beast::error_code& ec) override;
  void on_response_impl(int code, boost::beast::string_view reason, int version,
                        boost::beast::error_code& ec) override;
  void on_field_impl(boost::beast::http::field name, boost::beast::string_view name_string,
                     boost::beast::string_view value, boost::beast::error_code& ec) override;
  void on_header_impl(boost::beast::error_code& ec) override;
  void on_body_init_impl(const boost::optional<std::uint64_t>& content_length,
                         boost::beast::error_code& ec) override;
  std::size_t on_body_impl(boost::beast::string_view data, boost::beast::error_code& ec) override;
  void on_chunk_header_impl(std::uint64_t size, boost::beast::string_view extensions,
                            boost::beast::error_code& ec) override;
  std::size_t on_chunk_body_impl(std::uint64_t remain, boost::beast::string_view data,
                                 boost::beast::error_code& ec) override;
  void on_finish_impl(boost::beast::error_code& ec) override;

  // Appends `s` to the text; its place in it.
  std::uint32_t keep(std::string_view s);
  std::size_t take_body(std::string_view data, boost::beast::error_code& ec);

  HeadText& text_;
  boost::beast::http::verb method_ = boost::beast::http::verb::unknown;
  std::uint32_t method_bytes_ = 0;
  std::uint32_t target_at_ = 0;
  std::uint32_t target_bytes_ = 0;
  unsigned version_ = 0;
};

// Sets the limits every request is parsed under: at most `header_bytes_max` of request line and
// headers; no body limit here (the handler decides what body size it accepts).
void limit_request_parser(RequestParser& parser, std::uint64_t header_bytes_max);

// Feeds the bytes that have arrived of a request head (`available`, `waiting` of them still to
// come from the socket after these) to the parser and returns how many it took; `head_bytes`
// counts what the head has taken so far. `ec`: as Beast sets it (need_more while the head is
// incomplete), or header_limit once the head would pass `header_bytes_max` in all (the parser's
// head may then be complete: the request is refused all the same). Beast alone
// bounds only the unparsed rest of a head: fed in small pieces, a head of small fields would grow
// without end.
std::size_t put_head(RequestParser& parser, std::string_view available, std::uint64_t& head_bytes,
                     std::uint64_t header_bytes_max, boost::beast::error_code& ec);

// Whether the request says unambiguously where its body ends. Transfer-Encoding is accepted only
// as exactly one "chunked" on HTTP/1.1 without a Content-Length: any other coding ("chunked,
// identity", "xchunked", "identity"), a repeated header, or both framings at once would let a
// proxy in front and this server disagree on where the body ends, and the rest of the body be
// read as a request of its own (request smuggling; RFC 9112 section 6.1: answer 400 and close).
bool body_framing_clear(const RequestParser& parser);

}  // namespace hots3::http::detail
