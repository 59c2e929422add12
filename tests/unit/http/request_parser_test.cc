#include "http/request_parser.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>

namespace hots3::http::detail {
namespace {

namespace bhttp = boost::beast::http;

// Feeds `wire` to the parser `piece` bytes at a time, as a socket might deliver it; returns what
// the head took and leaves the rest in `wire`.
boost::beast::error_code feed_head(RequestParser& parser, std::string_view& wire,
                                   std::size_t piece) {
  boost::beast::error_code ec;
  std::uint64_t head_bytes = 0;
  std::string_view pending;
  std::size_t arrived = 0;
  for (;;) {
    pending.remove_prefix(put_head(parser, pending, head_bytes, 8192, ec));
    if (ec != bhttp::error::need_more || arrived == wire.size()) break;
    const std::size_t more = std::min(piece, wire.size() - arrived);
    pending = wire.substr(arrived - pending.size(), pending.size() + more);
    arrived += more;
  }
  wire.remove_prefix(arrived - pending.size());
  return ec;
}

// Whatever pieces a head arrives in, what is kept of it is the request line and each header as
// sent (names in their case, values without the whitespace around them), in order.
TEST(RequestParser, KeepsTheHeadWhateverPiecesItArrivesIn) {
  for (const std::size_t piece : {1U, 7U, 4096U}) {
    HeadText text;
    RequestParser parser(text);
    limit_request_parser(parser, 8192);
    std::string_view wire =
        "HEAD /bucket/a%20key?x=1 HTTP/1.1\r\nHost: h\r\nX-Amz-Date:  20261206T001200Z \r\n"
        "x-amz-date: second\r\nContent-Length: 0\r\n\r\nNEXT";
    ASSERT_FALSE(feed_head(parser, wire, piece)) << piece;
    EXPECT_EQ(wire, "NEXT");
    EXPECT_EQ(parser.method(), bhttp::verb::head);
    EXPECT_EQ(parser.method_string(), "HEAD");
    EXPECT_EQ(parser.target(), "/bucket/a%20key?x=1");
    EXPECT_EQ(parser.version(), 11U);
    ASSERT_EQ(parser.headers().size(), 4U);
    EXPECT_EQ(parser.headers()[1].name, "X-Amz-Date");
    EXPECT_EQ(parser.headers()[1].value, "20261206T001200Z");
    EXPECT_EQ(parser.headers()[2].value, "second");
    EXPECT_EQ(parser.count(bhttp::field::content_length), 1U);
    EXPECT_EQ(parser.value(bhttp::field::host), "h");
    EXPECT_EQ(parser.value(bhttp::field::range), "");
    EXPECT_TRUE(body_framing_clear(parser));
  }
}

// A chunked body is written into the room the reader gives, the framing removed, a piece at a
// time when the room is smaller than a chunk.
TEST(RequestParser, WritesAChunkedBodyIntoTheReadersRoom) {
  HeadText text;
  RequestParser parser(text);
  limit_request_parser(parser, 8192);
  std::string_view wire =
      "PUT /b/k HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n";
  ASSERT_FALSE(feed_head(parser, wire, 4096));
  ASSERT_TRUE(body_framing_clear(parser));
  std::string body;
  for (int rounds = 0; !parser.is_done() && rounds < 100; ++rounds) {
    char room[4];
    parser.body.data = room;
    parser.body.size = sizeof room;
    boost::beast::error_code ec;
    wire.remove_prefix(parser.put(boost::asio::buffer(wire.data(), wire.size()), ec));
    if (ec == bhttp::error::need_buffer) ec = {};
    ASSERT_FALSE(ec) << ec.message();
    body.append(room, sizeof room - parser.body.size);
  }
  EXPECT_TRUE(parser.is_done());
  EXPECT_EQ(body, "hello world");
}

// Framings two parties could read differently are refused.
TEST(RequestParser, RefusesFramingsThatCouldBeReadTwoWays) {
  const auto clear = [](std::string_view wire) {
    HeadText text;
    RequestParser parser(text);
    limit_request_parser(parser, 8192);
    if (feed_head(parser, wire, 4096)) return false;  // Beast refused it already
    return body_framing_clear(parser);
  };
  EXPECT_TRUE(clear("PUT / HTTP/1.1\r\nTransfer-Encoding:  chunked \r\n\r\n"));
  EXPECT_FALSE(clear("PUT / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n"));
  EXPECT_FALSE(clear("PUT / HTTP/1.1\r\nTransfer-Encoding: chunked, identity\r\n\r\n"));
  EXPECT_FALSE(clear("PUT / HTTP/1.1\r\nTransfer-Encoding: xchunked\r\n\r\n"));
  EXPECT_FALSE(clear("PUT / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"));
  EXPECT_TRUE(clear("PUT / HTTP/1.1\r\nContent-Length: 5\r\n\r\n"));
}

// The connection keeps the room of an ordinary head from one request to the next, and gives
// back the room a large one took.
TEST(RequestParser, KeepsTheRoomOfAnOrdinaryHeadOnly) {
  constexpr std::uint64_t kLimit = std::uint64_t{64} * 1024;
  HeadText text;
  {
    RequestParser parser(text);
    limit_request_parser(parser, kLimit);
    std::string_view wire = "GET / HTTP/1.1\r\nHost: h\r\n\r\n";
    ASSERT_FALSE(feed_head(parser, wire, 4096));
  }
  const char* kept = text.bytes.data();
  {
    RequestParser parser(text);
    EXPECT_EQ(text.bytes.data(), kept);  // the same room, cleared
    EXPECT_TRUE(text.headers.empty());
    limit_request_parser(parser, kLimit);
    const std::string large =
        "GET / HTTP/1.1\r\nX-Large: " + std::string(std::size_t{20} * 1024, 'v') + "\r\n\r\n";
    boost::beast::error_code ec;
    std::uint64_t head_bytes = 0;
    put_head(parser, large, head_bytes, kLimit, ec);
    ASSERT_FALSE(ec) << ec.message();
    EXPECT_EQ(parser.headers().at(0).value.size(), 20U * 1024);
  }
  RequestParser parser(text);
  EXPECT_LE(text.bytes.capacity(), 8U * 1024);
}

}  // namespace
}  // namespace hots3::http::detail
