// The S3 handlers over strings: requests signed as an SDK signs them go through the S3 layer's
// http::Handler into a real store on a temporary file, without a socket (FakeExchange). What a
// client sees (status, headers, XML) and what the store then holds are both checked.

#include "fake_exchange.h"
#include "test_support.h"

#include "hots3/aws/signer.h"
#include "hots3/common/clock.h"
#include "hots3/common/digest.h"
#include "hots3/common/hex.h"
#include "hots3/common/worker_pool.h"
#include "hots3/config/config.h"
#include "hots3/s3/s3.h"
#include "hots3/storage/object_store.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace hots3::s3 {
namespace {

namespace asio = boost::asio;
using test::FakeExchange;

constexpr std::uint64_t kMiB = 1024 * 1024;
constexpr const char* kAccessKey = "HANDLERTESTACCESSKEY";
constexpr const char* kSecretKey = "handler-test-secret-key-0123456789";

std::string hex_of(std::string_view data) {
  return to_hex(sha256(std::as_bytes(std::span(data.data(), data.size()))));
}

std::string md5_hex(std::string_view data) {
  return to_hex(md5(std::as_bytes(std::span(data.data(), data.size()))));
}

std::string pattern(std::size_t n, unsigned seed) {
  std::string out(n, '\0');
  for (std::size_t i = 0; i < n; ++i)
    out[i] = static_cast<char>((i * 131 + seed * 7 + i / 977) & 0xFF);
  return out;
}

struct Call {
  std::string method = "GET";
  std::string path = "/";  // decoded
  std::vector<aws::QueryParameter> query;
  std::vector<std::pair<std::string, std::string>> headers;  // besides Host and the signature's
  std::string body;
  std::size_t piece_bytes = 64 * 1024;
  std::optional<std::size_t> cut_after;
  std::string secret = kSecretKey;
};

class HandlerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    storage::StoreOptions store;
    store.data_dir = dir_.file("data");
    store.device_size_bytes = 128 * kMiB;
    store.io_buffers_per_worker = 8;
    store_ = storage::ObjectStore::open(store);
    workers_ = std::make_unique<WorkerPool>(1);
    for (auto* context : workers_->contexts()) store_->attach(*context);
    workers_->start();
    config::UserConfig user;
    user.name = "admin";
    user.admin = true;
    user.access_key = kAccessKey;
    user.secret_key = kSecretKey;
    handler_ = make_handler(*store_, config::S3Config{}, {user});
    Call create;
    create.method = "PUT";
    create.path = "/bkt";
    ASSERT_EQ(serve(create)->status(), 200U);
  }

  void TearDown() override {
    handler_.reset();
    store_->shutdown();
    workers_->stop();
  }

  // The request as an SDK sends it: Host, Content-Length for a body, the payload's SHA-256, all
  // signed with SigV4 at the current time.
  static FakeExchange::Request signed_request(const Call& call) {
    FakeExchange::Request request;
    request.method = call.method;
    request.target = aws::request_target(call.path, call.query);
    request.headers = call.headers;
    request.headers.emplace_back("Host", "127.0.0.1:9000");
    if (!call.body.empty() || call.method == "PUT" || call.method == "POST")
      request.headers.emplace_back("Content-Length", std::to_string(call.body.size()));
    aws::Signer signer({kAccessKey, call.secret, "", "us-east-1"});
    signer.sign(call.method, call.path, call.query, request.headers, hex_of(call.body), now_ms());
    request.body = call.body;
    request.piece_bytes = call.piece_bytes;
    request.cut_after = call.cut_after;
    return request;
  }

  // Runs the handler on the worker the store's I/O completes on.
  std::unique_ptr<FakeExchange> serve(const Call& call) {
    auto exchange = std::make_unique<FakeExchange>(signed_request(call));
    test::run_on(*workers_->contexts()[0], handler_->handle(*exchange));
    EXPECT_TRUE(exchange->finished()) << call.method << " " << call.path;
    return exchange;
  }

  std::unique_ptr<FakeExchange> put(const std::string& key, std::string body,
                                    std::vector<std::pair<std::string, std::string>> headers = {}) {
    Call call;
    call.method = "PUT";
    call.path = "/bkt/" + key;
    call.body = std::move(body);
    call.headers = std::move(headers);
    call.piece_bytes = 1000;  // odd pieces, across the store's buffers
    return serve(call);
  }

  std::unique_ptr<FakeExchange> get(const std::string& key,
                                    std::vector<std::pair<std::string, std::string>> headers = {},
                                    std::string method = "GET") {
    Call call;
    call.method = std::move(method);
    call.path = "/bkt/" + key;
    call.headers = std::move(headers);
    return serve(call);
  }

  static std::string element(const std::string& xml, const std::string& name) {
    const auto open = xml.find("<" + name + ">");
    if (open == std::string::npos) return "";
    const auto from = open + name.size() + 2;
    return xml.substr(from, xml.find("</" + name + ">", from) - from);
  }

  test::TempDir dir_;
  std::unique_ptr<storage::ObjectStore> store_;
  std::unique_ptr<WorkerPool> workers_;
  std::unique_ptr<http::Handler> handler_;
};

TEST_F(HandlerTest, PutThenGetReturnsTheBytesWithTheirEtagAndRanges) {
  const std::string data = pattern(300 * 1024 + 17, 1);
  auto stored = put("dir/object", data, {{"Content-Type", "application/x-test"}});
  ASSERT_EQ(stored->status(), 200U) << stored->body();
  EXPECT_EQ(stored->header("ETag"), "\"" + md5_hex(data) + "\"");
  EXPECT_TRUE(stored->header("x-amz-checksum-crc64nvme").has_value());  // S3's default

  auto whole = get("dir/object");
  ASSERT_EQ(whole->status(), 200U);
  EXPECT_TRUE(whole->body() == data);
  EXPECT_EQ(whole->response().content_length, data.size());
  EXPECT_EQ(whole->header("Content-Type"), "application/x-test");
  EXPECT_EQ(whole->header("ETag"), stored->header("ETag"));

  auto part = get("dir/object", {{"Range", "bytes=100000-100099"}});
  ASSERT_EQ(part->status(), 206U);
  EXPECT_EQ(part->body(), data.substr(100000, 100));
  EXPECT_EQ(part->header("Content-Range"), "bytes 100000-100099/" + std::to_string(data.size()));

  auto head = get("dir/object", {}, "HEAD");
  EXPECT_EQ(head->status(), 200U);
  EXPECT_TRUE(head->body().empty());
  EXPECT_EQ(head->response().content_length, data.size());

  auto beyond = get("dir/object", {{"Range", "bytes=999999999-"}});
  EXPECT_EQ(beyond->status(), 416U);
  EXPECT_EQ(element(beyond->body(), "Code"), "InvalidRange");
}

TEST_F(HandlerTest, AWrongContentMd5StoresNothing) {
  auto refused = put("k", "the data", {{"Content-MD5", "AAAAAAAAAAAAAAAAAAAAAA=="}});
  EXPECT_EQ(refused->status(), 400U);
  EXPECT_EQ(element(refused->body(), "Code"), "BadDigest");
  auto missing = get("k");
  EXPECT_EQ(missing->status(), 404U);
  EXPECT_EQ(element(missing->body(), "Code"), "NoSuchKey");
}

TEST_F(HandlerTest, AClientGonePartWayStoresNothingAndKeepsTheOldVersion) {
  ASSERT_EQ(put("k", "old")->status(), 200U);
  Call call;
  call.method = "PUT";
  call.path = "/bkt/k";
  call.body = pattern(200 * 1024, 2);
  call.cut_after = 150 * 1024;
  auto cut = serve(call);
  EXPECT_NE(cut->status(), 200U);
  auto kept = get("k");
  ASSERT_EQ(kept->status(), 200U);
  EXPECT_EQ(kept->body(), "old");
}

TEST_F(HandlerTest, ABadSignatureIsRefusedBeforeTheBodyIsRead) {
  Call call;
  call.method = "PUT";
  call.path = "/bkt/k";
  call.body = "data";
  call.secret = "not-the-secret";
  call.headers = {{"Expect", "100-continue"}};
  auto refused = serve(call);
  EXPECT_EQ(refused->status(), 403U);
  EXPECT_EQ(element(refused->body(), "Code"), "SignatureDoesNotMatch");
  EXPECT_FALSE(refused->body_read());  // no "100 Continue": the client never sends the body
  EXPECT_EQ(get("k")->status(), 404U);
}

TEST_F(HandlerTest, AppendsChainTheirEtagsAndCheckTheOffset) {
  auto first = put("log", "abc", {{"x-amz-write-offset-bytes", "0"}});
  ASSERT_EQ(first->status(), 200U) << first->body();
  EXPECT_EQ(first->header("x-amz-object-size"), "3");
  auto second = put("log", "defg", {{"x-amz-write-offset-bytes", "3"}});
  ASSERT_EQ(second->status(), 200U) << second->body();
  EXPECT_EQ(second->header("x-amz-object-size"), "7");
  EXPECT_TRUE(second->header("ETag")->ends_with("-2\""));
  auto stale = put("log", "x", {{"x-amz-write-offset-bytes", "3"}});
  EXPECT_EQ(stale->status(), 400U);
  EXPECT_EQ(element(stale->body(), "Code"), "InvalidWriteOffset");
  auto read = get("log");
  EXPECT_EQ(read->body(), "abcdefg");
  EXPECT_EQ(read->header("ETag"), second->header("ETag"));
}

TEST_F(HandlerTest, AMultipartUploadCompletesFromItsListedParts) {
  Call create;
  create.method = "POST";
  create.path = "/bkt/big";
  create.query = {{"uploads", ""}};
  auto created = serve(create);
  ASSERT_EQ(created->status(), 200U);
  const std::string upload_id = element(created->body(), "UploadId");
  ASSERT_FALSE(upload_id.empty());

  const std::string parts[] = {pattern(5 * kMiB, 3), pattern(1234, 4)};
  std::string listed;
  for (int n = 1; n <= 2; ++n) {
    Call part;
    part.method = "PUT";
    part.path = "/bkt/big";
    part.query = {{"partNumber", std::to_string(n)}, {"uploadId", upload_id}};
    part.body = parts[n - 1];
    auto uploaded = serve(part);
    ASSERT_EQ(uploaded->status(), 200U) << uploaded->body();
    EXPECT_EQ(uploaded->header("ETag"), "\"" + md5_hex(parts[n - 1]) + "\"");
    listed += "<Part><PartNumber>" + std::to_string(n) + "</PartNumber><ETag>" +
              *uploaded->header("ETag") + "</ETag></Part>";
  }
  Call complete;
  complete.method = "POST";
  complete.path = "/bkt/big";
  complete.query = {{"uploadId", upload_id}};
  complete.body = "<CompleteMultipartUpload>" + listed + "</CompleteMultipartUpload>";
  auto completed = serve(complete);
  ASSERT_EQ(completed->status(), 200U);
  const std::string etag = element(completed->body(), "ETag");  // XML-escaped quotes
  EXPECT_TRUE(etag.starts_with("&quot;") && etag.ends_with("-2&quot;")) << completed->body();
  auto read = get("big");
  ASSERT_EQ(read->status(), 200U);
  EXPECT_TRUE(read->body() == parts[0] + parts[1]);
  EXPECT_EQ(read->header("ETag"), "\"" + etag.substr(6, etag.size() - 12) + "\"");
  EXPECT_EQ(read->header("x-amz-mp-parts-count"), std::nullopt);  // only with ?partNumber
  auto second = serve([&] {
    Call c;
    c.path = "/bkt/big";
    c.query = {{"partNumber", "2"}};
    return c;
  }());
  EXPECT_EQ(second->status(), 206U);
  EXPECT_EQ(second->body(), parts[1]);
  EXPECT_EQ(second->header("x-amz-mp-parts-count"), "2");
}

TEST_F(HandlerTest, AnUnknownBucketIsRefusedBeforeTheBody) {
  Call call;
  call.method = "PUT";
  call.path = "/nobucket/k";
  call.body = "data";
  call.headers = {{"Expect", "100-continue"}};
  auto refused = serve(call);
  EXPECT_EQ(refused->status(), 404U);
  EXPECT_EQ(element(refused->body(), "Code"), "NoSuchBucket");
  EXPECT_FALSE(refused->body_read());
}

}  // namespace
}  // namespace hots3::s3
