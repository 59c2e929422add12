#include "hots3/http/handler.h"

#include <gtest/gtest.h>

namespace hots3::http {
namespace {

TEST(Headers, CaseInsensitiveLookup) {
  const std::vector<HeaderView> headers = {
      {"Host", "h"}, {"X-Amz-Date", "d1"}, {"x-amz-date", "d2"}};
  RequestHead head;
  head.headers = headers;
  EXPECT_EQ(head.find("x-amz-date").value(), "d1");  // the first one
  EXPECT_EQ(head.find("HOST").value(), "h");
  EXPECT_FALSE(head.find("range").has_value());
}

TEST(RequestHead, HasBody) {
  RequestHead head;
  EXPECT_FALSE(head.has_body());
  head.content_length = 0;
  EXPECT_FALSE(head.has_body());
  head.content_length = 1;
  EXPECT_TRUE(head.has_body());
  head.content_length.reset();
  head.chunked = true;
  EXPECT_TRUE(head.has_body());
}

// What is added is what is sent: lines in the order added, line endings inside made spaces, and
// found again by name in any case (the first of a repeated one).
TEST(Response, HeadersAreWrittenAsLinesWhenAdded) {
  Response response;
  response.add("ETag", "\"abc\"");
  response.add("X-Amz-Meta-A", "one\r\nSet-Cookie: evil");
  response.add("etag", "second");
  response.add("Empty", "");
  EXPECT_EQ(response.lines,
            "ETag: \"abc\"\r\nX-Amz-Meta-A: one  Set-Cookie: evil\r\netag: second\r\nEmpty: \r\n");
  EXPECT_EQ(response.find("ETAG").value(), "\"abc\"");
  EXPECT_EQ(response.find("x-amz-meta-a").value(), "one  Set-Cookie: evil");
  EXPECT_EQ(response.find("empty").value(), "");
  EXPECT_FALSE(response.find("Set-Cookie").has_value());
  EXPECT_FALSE(response.find("X-Amz").has_value());
}

}  // namespace
}  // namespace hots3::http
