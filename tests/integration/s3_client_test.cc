// hots3's S3 client against hots3's S3 service, both in this process over loopback: what the
// client signs the server verifies, path-style and virtual-hosted, bodies stream both ways, and
// S3's error bodies come back parsed.

#include "hots3/s3client/s3_client.h"

#include "test_support.h"

#include "hots3/common/worker_pool.h"
#include "hots3/config/config.h"
#include "hots3/http/server.h"
#include "hots3/s3/s3.h"
#include "hots3/storage/object_store.h"

#include <boost/asio/io_context.hpp>
#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace hots3::s3client {
namespace {

namespace asio = boost::asio;
using test::run_on;

constexpr std::uint64_t kMiB = 1024 * 1024;

class S3ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    storage::StoreOptions store;
    store.data_dir = dir_.file("data");
    store.device_size_bytes = 256 * kMiB;
    store.io_buffers_per_worker = 8;
    store_ = storage::ObjectStore::open(store);
    workers_ = std::make_unique<WorkerPool>(1);
    for (auto* context : workers_->contexts()) store_->attach(*context);
    config::S3Config s3;
    s3.domain = "127.0.0.1";  // virtual-hosted: "<bucket>.127.0.0.1:<port>"
    config::UserConfig user;
    user.name = "admin";
    user.admin = true;
    user.access_key = "CLIENTTESTACCESSKEY1";
    user.secret_key = "client-test-secret-key-0123456789";
    handler_ = s3::make_handler(*store_, s3, {user});
    config::HttpConfig http;
    http.listen.port = 0;
    server_ = std::make_unique<http::Server>(http, *handler_, workers_->contexts());
    server_->start();
    workers_->start();
  }

  void TearDown() override {
    server_->shutdown(std::chrono::milliseconds(100));
    store_->shutdown();
    workers_->stop();
  }

  Options options(bool virtual_host = false,
                  std::string secret = "client-test-secret-key-0123456789") const {
    Options o;
    o.http.endpoint = "http://127.0.0.1:" + std::to_string(server_->port());
    o.credentials = {"CLIENTTESTACCESSKEY1", std::move(secret), "", "us-east-1"};
    o.virtual_host = virtual_host;
    return o;
  }

  template <class T>
  T run(asio::awaitable<T> op) {
    return run_on(context_, std::move(op), true);
  }

  static asio::awaitable<Result<http::Client::Reply>> send(Client& c, std::string method,
                                                           std::string bucket, std::string key,
                                                           std::string body = "") {
    // Named, not a temporary of the co_await expression (GCC 12).
    Request request;
    request.method = std::move(method);
    request.bucket = std::move(bucket);
    request.key = std::move(key);
    co_return co_await c.request(std::move(request), std::move(body));
  }

  test::TempDir dir_;
  asio::io_context context_;
  std::unique_ptr<storage::ObjectStore> store_;
  std::unique_ptr<WorkerPool> workers_;
  std::unique_ptr<http::Handler> handler_;
  std::unique_ptr<http::Server> server_;
};

TEST_F(S3ClientTest, WhatTheClientSignsTheServerVerifies) {
  Client client(context_.get_executor(), options());
  auto reply = run(send(client, "PUT", "bucket", ""));
  ASSERT_TRUE(reply) << reply.error().message();
  EXPECT_EQ(reply->head.status, 200U) << reply->body;
  reply = run(send(client, "PUT", "bucket", "dir/odd key+%.bin", std::string(100000, 'x')));
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->head.status, 200U) << reply->body;
  reply = run(send(client, "GET", "bucket", "dir/odd key+%.bin"));
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->head.status, 200U);
  EXPECT_EQ(reply->body, std::string(100000, 'x'));

  Client hosted(context_.get_executor(), options(true));
  reply = run(send(hosted, "GET", "bucket", "dir/odd key+%.bin"));
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->head.status, 200U) << reply->body;
  EXPECT_EQ(reply->body.size(), 100000U);
}

TEST_F(S3ClientTest, ErrorsComeBackParsed) {
  Client client(context_.get_executor(), options());
  ASSERT_TRUE(run(send(client, "PUT", "bucket", "")));
  auto reply = run(send(client, "GET", "bucket", "missing"));
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->head.status, 404U);
  auto error = parse_error(reply->body);
  ASSERT_TRUE(error.has_value()) << reply->body;
  EXPECT_EQ(error->code, "NoSuchKey");
  EXPECT_EQ(error->resource, "/bucket/missing");
  EXPECT_FALSE(error->request_id.empty());

  Client wrong(context_.get_executor(), options(false, "not-the-secret"));
  reply = run(send(wrong, "GET", "bucket", ""));
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->head.status, 403U);
  EXPECT_EQ(parse_error(reply->body)->code, "SignatureDoesNotMatch");
  EXPECT_FALSE(parse_error("<ListBucketResult/>").has_value());
  EXPECT_FALSE(parse_error("not xml").has_value());
}

}  // namespace
}  // namespace hots3::s3client
