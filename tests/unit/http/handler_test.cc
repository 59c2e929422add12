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

}  // namespace
}  // namespace hots3::http
