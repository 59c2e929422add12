#include "http/wire.h"

#include <gtest/gtest.h>

#include <set>

namespace hots3::http::detail {
namespace {

TEST(Wire, StatusLines) {
  std::string out;
  append_status_line(out, 206);
  EXPECT_EQ(out, "HTTP/1.1 206 Partial Content\r\n");
  out.clear();
  append_status_line(out, 599);
  EXPECT_EQ(out, "HTTP/1.1 599 Unknown\r\n");
}

TEST(Wire, HeaderValuesCannotSplitTheResponse) {
  std::string out;
  append_header(out, "X-Amz-Meta-A", "one\r\nSet-Cookie: evil");
  EXPECT_EQ(out, "X-Amz-Meta-A: one  Set-Cookie: evil\r\n");
}

// The look for line-ending bytes reads words: each is mended at every place in a word and in the
// tail, beside bytes of other values (the high ones included), and every other byte is sent as
// it is.
TEST(Wire, EveryLineEndingByteIsFoundWherever) {
  for (std::size_t length = 1; length <= 19; ++length) {
    for (const char bad : {'\r', '\n', '\0'}) {
      for (std::size_t at = 0; at < length; ++at) {
        for (const unsigned fill : {0x0Eu, 0x20u, 0x7Fu, 0x80u, 0xFFu}) {
          std::string value(length, static_cast<char>(fill));
          value[at] = bad;
          std::string out;
          append_header(out, "N", value);
          std::string expected(length, static_cast<char>(fill));
          expected[at] = ' ';
          ASSERT_EQ(out, "N: " + expected + "\r\n") << length << " " << at << " " << fill;
        }
      }
    }
  }
  std::string all;  // every byte that may stay, in one value
  for (unsigned c = 1; c < 256; ++c) {
    if (c != '\r' && c != '\n') all.push_back(static_cast<char>(c));
  }
  std::string out;
  append_header(out, "N", all);
  EXPECT_EQ(out, "N: " + all + "\r\n");
}

TEST(Wire, ChunkLines) {
  char line[24];
  EXPECT_EQ(std::string(line, format_chunk_line(0x1f40, line)), "1f40\r\n");
  EXPECT_EQ(std::string(line, format_chunk_line(1, line)), "1\r\n");
}

TEST(Wire, RequestIdsAreUniqueHex) {
  std::set<std::string> seen;
  char id[16];
  for (std::uint64_t i = 0; i < 10000; ++i) {
    format_request_id(12345, i, id);
    const std::string s(id, 16);
    EXPECT_EQ(s.find_first_not_of("0123456789ABCDEF"), std::string::npos);
    seen.insert(s);
  }
  EXPECT_EQ(seen.size(), 10000U);
}

TEST(Wire, AccessLineIsJsonAndRedactsSignatures) {
  const std::vector<HeaderView> headers;
  RequestHead head;
  head.method_string = "GET";
  head.target = "/b/k?X-Amz-Credential=AK%2F&X-Amz-Signature=abc&Signature=def&partNumber=1";
  head.remote_address = "127.0.0.1:5";
  head.request_id = "0123456789ABCDEF";
  const std::string line = format_access_line(head, 200, 1, 2, 1500, "2026-12-05T18:00:01", 7);
  EXPECT_EQ(line.rfind(R"({"time":"2026-12-05T18:00:01.007Z","id":"0123456789ABCDEF")", 0), 0U)
      << line;
  EXPECT_NE(
      line.find(
          R"("target":"/b/k?X-Amz-Credential=AK%2F&X-Amz-Signature=REDACTED&Signature=REDACTED&partNumber=1")"),
      std::string::npos)
      << line;
  EXPECT_NE(line.find(R"("status":200,"bytes_in":1,"bytes_out":2,"duration_ms":1.500})"),
            std::string::npos)
      << line;
  EXPECT_EQ(line.find("abc"), std::string::npos);
}

}  // namespace
}  // namespace hots3::http::detail
