// The HTTP client against the HTTP core, both in this process, over loopback on an ephemeral
// port: bodies both ways (Content-Length and chunked), keep-alive and its pool, the stale
// connection's one retry, the timeouts, and TLS with a CA of the test's own making.

#include "test_handler.h"
#include "test_support.h"

#include "hots3/common/worker_pool.h"
#include "hots3/config/config.h"
#include "hots3/http/client.h"
#include "hots3/http/server.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/write.hpp>
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

namespace hots3::http {
namespace {

namespace asio = boost::asio;
using test::run_on;

class ClientTest : public ::testing::Test {
 protected:
  void start_server(config::HttpConfig config = {}) {
    config.listen.port = 0;
    config.threads = 1;
    server_workers_ = std::make_unique<WorkerPool>(1);
    server_ = std::make_unique<Server>(config, handler_, server_workers_->contexts());
    server_->start();
    server_workers_->start();
  }

  void TearDown() override {
    if (server_) {
      server_->shutdown(std::chrono::milliseconds(100));
      server_workers_->stop();
    }
  }

  std::string endpoint(bool tls = false) const {
    return std::string(tls ? "https" : "http") + "://127.0.0.1:" + std::to_string(server_->port());
  }

  template <class T>
  T run(asio::awaitable<T> op) {
    return run_on(context_, std::move(op), true);
  }

  static ClientOptions options(std::string endpoint) {
    ClientOptions o;
    o.endpoint = std::move(endpoint);
    return o;
  }

  static asio::awaitable<Result<Client::Reply>> get(Client& client, std::string target) {
    // Named, not a temporary of the co_await expression: GCC 12 destroys those twice.
    ClientRequest request{"GET", std::move(target), {}, 0, {}};
    co_return co_await client.request(std::move(request), "");
  }

  asio::io_context context_;
  test::TestHandler handler_;
  std::unique_ptr<WorkerPool> server_workers_;
  std::unique_ptr<Server> server_;
};

TEST(Endpoint, ParsesWhatAnOperatorWrites) {
  auto e = parse_endpoint("https://s3.example.com");
  ASSERT_TRUE(e);
  EXPECT_TRUE(e->tls);
  EXPECT_EQ(e->port, 443);
  EXPECT_EQ(e->host_header(), "s3.example.com");
  e = parse_endpoint("http://[::1]:9100/");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->host, "::1");
  EXPECT_EQ(e->host_header(), "[::1]:9100");
  for (const char* bad :
       {"ftp://x", "http://", "http://h:0", "http://h:70000", "http://h:9x", "http://[::1", "x"}) {
    EXPECT_FALSE(parse_endpoint(bad)) << bad;
  }
}

TEST_F(ClientTest, BodiesBothWaysAndOneConnectionKeptAlive) {
  start_server();
  Client client(context_.get_executor(), options(endpoint()));
  auto reply = run(get(client, "/bytes/100000"));
  ASSERT_TRUE(reply) << reply.error().message();
  EXPECT_EQ(reply->head.status, 200U);
  EXPECT_EQ(reply->head.content_length, 100000U);
  ASSERT_EQ(reply->body.size(), 100000U);
  EXPECT_EQ(reply->body.substr(0, 20), "0123456789abcdef0123");
  EXPECT_EQ(client.idle_connections(), 1U);

  reply = run(get(client, "/chunked/200000"));
  ASSERT_TRUE(reply);
  EXPECT_FALSE(reply->head.content_length.has_value());
  EXPECT_EQ(reply->body.size(), 200000U);
  EXPECT_EQ(client.idle_connections(), 1U);  // the same connection, back in the pool

  // A streamed PUT, written in pieces.
  reply = run([](Client& c) -> asio::awaitable<Result<Client::Reply>> {
    ClientRequest put{"PUT", "/sink", {}, 3 * 1000 * 1000, {}};
    auto call = co_await c.start(std::move(put));
    if (!call) co_return call.error();
    const std::string piece(1000 * 1000, 'x');
    for (int i = 0; i < 3; ++i)
      H3_CO_TRY(co_await (*call)->write_body(std::as_bytes(std::span(piece))));
    co_return co_await (*call)->complete({}, 1024);
  }(client));
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->body.substr(0, 8), "3000000 ");

  reply = run(client.request({"HEAD", "/bytes/77", {}, 0, {}}, ""));
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->head.content_length, 77U);
  EXPECT_TRUE(reply->body.empty());
  reply = run(get(client, "/nothing-here"));
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->head.status, 404U);
  EXPECT_EQ(client.idle_connections(), 1U);
}

// A chunked answer whose head comes alone and whose chunks come together afterwards, as Ceph's
// radosgw answers a CopyObject: every chunk is read from what arrived, with no wait for more
// (a parser that stops after a chunk's size line must be fed again before the socket is read).
TEST_F(ClientTest, ChunksThatArriveTogetherAfterTheHeadAreAllRead) {
  asio::io_context server_context;
  asio::ip::tcp::acceptor acceptor(server_context, {asio::ip::make_address("127.0.0.1"), 0});
  const auto port = acceptor.local_endpoint().port();
  std::thread server([&] {
    asio::ip::tcp::socket socket(server_context);
    acceptor.accept(socket);
    std::string request;
    asio::read_until(socket, asio::dynamic_buffer(request), "\r\n\r\n");
    asio::write(socket,
                asio::buffer(std::string_view("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
                                              "Content-Type: application/xml\r\n\r\n")));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    asio::write(socket, asio::buffer(std::string_view("5\r\n<Copy\r\n3\r\n/>\n\r\n0\r\n\r\n")));
    std::this_thread::sleep_for(std::chrono::seconds(1));  // the connection stays open
  });
  ClientOptions o = options("http://127.0.0.1:" + std::to_string(port));
  o.stall_timeout = std::chrono::seconds(2);
  Client client(context_.get_executor(), o);
  auto reply = run(get(client, "/copy"));
  server.join();
  ASSERT_TRUE(reply) << reply.error().message();
  EXPECT_EQ(reply->body, "<Copy/>\n");
}

TEST_F(ClientTest, AConnectionTheServerClosedWhileIdleIsReplacedNotAnError) {
  config::HttpConfig config;
  config.idle_timeout = std::chrono::milliseconds(200);
  start_server(config);
  Client client(context_.get_executor(), options(endpoint()));
  ASSERT_TRUE(run(get(client, "/bytes/10")));
  EXPECT_EQ(client.idle_connections(), 1U);
  std::this_thread::sleep_for(std::chrono::milliseconds(600));  // the server closes it
  auto reply = run(get(client, "/bytes/10"));
  ASSERT_TRUE(reply) << reply.error().message();
  EXPECT_EQ(reply->body, "0123456789");
}

TEST_F(ClientTest, EveryWaitIsBounded) {
  start_server();
  ClientOptions impatient = options(endpoint());
  impatient.first_byte_timeout = std::chrono::milliseconds(200);
  Client slow(context_.get_executor(), impatient);
  auto reply = run(get(slow, "/slow/700"));
  ASSERT_FALSE(reply);
  EXPECT_EQ(reply.error(), errc::kTimedOut);
  EXPECT_EQ(slow.idle_connections(), 0U);  // a timed-out connection is never reused
  // A request may wait less than its client would.
  Client patient(context_.get_executor(), options(endpoint()));
  reply = run([](Client& c) -> asio::awaitable<Result<Client::Reply>> {
    ClientRequest hurried{"GET", "/slow/700", {}, 0, std::chrono::milliseconds(200)};
    co_return co_await c.request(std::move(hurried), "");
  }(patient));
  ASSERT_FALSE(reply);
  EXPECT_EQ(reply.error(), errc::kTimedOut);
  ASSERT_TRUE(run(get(patient, "/slow/300")));
  // Nobody listening: refused at once.
  const std::string closed = endpoint();
  server_->shutdown(std::chrono::milliseconds(100));
  server_workers_->stop();
  server_.reset();
  Client refused(context_.get_executor(), options(closed));
  reply = run(get(refused, "/bytes/1"));
  ASSERT_FALSE(reply);
  EXPECT_EQ(reply.error(), boost::system::errc::connection_refused);
  EXPECT_EQ(reply.error().message(), "Connection refused");  // what an operator reads
}

TEST_F(ClientTest, TlsIsVerifiedAgainstTheGivenAuthority) {
  test::TempDir dir;
  const std::string cert = dir.file("cert.pem"), key = dir.file("key.pem");
  const std::string command =
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 "
      "-subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 -keyout " +
      key + " -out " + cert + " 2>/dev/null";
  ASSERT_EQ(std::system(command.c_str()), 0);  // NOLINT(concurrency-mt-unsafe): one thread here
  config::HttpConfig config;
  config.tls.certificate_path = cert;
  config.tls.private_key_path = key;
  start_server(config);
  ClientOptions with_ca = options(endpoint(true));
  with_ca.ca_file = cert;
  Client trusted(context_.get_executor(), with_ca);
  auto reply = run(get(trusted, "/bytes/5"));
  ASSERT_TRUE(reply) << reply.error().message();
  EXPECT_EQ(reply->body, "01234");
  Client untrusted(context_.get_executor(), options(endpoint(true)));  // the system's CAs
  reply = run(get(untrusted, "/bytes/5"));
  ASSERT_FALSE(reply);
  EXPECT_EQ(reply.error(), errc::kUnavailable);
  ClientOptions blind = options(endpoint(true));
  blind.verify_tls = false;
  Client unverified(context_.get_executor(), blind);
  EXPECT_TRUE(run(get(unverified, "/bytes/5")));
}

}  // namespace
}  // namespace hots3::http
