// hots3-http-test-server: the HTTP core (src/http) with a small fixed handler and nothing of
// S3 or storage. Integration tests drive the core's behaviour through it; bench/http drives its
// speed against nginx serving the same bytes.
//
//   GET  /bytes/N        N bytes (the repeating pattern "0123456789abcdef"), Content-Length
//   GET  /chunked/N      the same bytes, Transfer-Encoding: chunked, in 64 KiB pieces
//   GET  /slow/MS        "done\n" after MS milliseconds (shutdown tests)
//   PUT  /sink           reads the body; answers "<bytes> <crc32 hex>\n"
//   PUT  /limited        like /sink, but refuses a Content-Length over 1 MiB with 413 without
//                        reading (100-continue reject)
//   GET  /fail           throws inside the handler (the core answers 500)
//   anything else        404
//
// Usage: hots3-http-test-server [--config FILE] [--listen ADDR:PORT] [--port-file FILE]
//                                [--threads N]

#include "test_handler.h"

#include "hots3/common/logging.h"
#include "hots3/common/worker_pool.h"
#include "hots3/config/config.h"
#include "hots3/http/server.h"

#include <CLI/CLI.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/crc.hpp>

#include <charconv>
#include <csignal>
#include <functional>
#include <string>
#include <thread>

using hots3::test::TestHandler;

int main(int argc, char** argv) {
  CLI::App app{"HTTP core test server"};
  std::string config_path, listen, port_file;
  int threads = -1;
  app.add_option("--config", config_path);
  app.add_option("--listen", listen);
  app.add_option("--port-file", port_file);
  app.add_option("--threads", threads);
  CLI11_PARSE(app, argc, argv);

  // Before any thread starts: a SIGTERM sent the instant the port file appears must stop the
  // server cleanly, as it does hots3 (see hots3::StopSignals).
  hots3::StopSignals signals;
  hots3::config::Config config;
  config.log.access_log_path = "";
  if (!config_path.empty()) hots3::config::apply_file(config, config_path);
  if (!listen.empty()) config.http.listen = hots3::config::parse_listen(listen);
  if (threads >= 0) config.http.threads = static_cast<unsigned>(threads);
  hots3::log::init(config.log);

  hots3::WorkerPool workers(config.http.threads);
  auto handler = std::make_unique<TestHandler>();
  hots3::http::Server server(config.http, *handler, workers.contexts());
  server.start();
  workers.start();
  if (!port_file.empty()) {
    hots3::write_file_atomically(port_file, std::to_string(server.port()) + "\n");
  }
  while (signals.wait() == SIGHUP) {
  }
  {
    const hots3::StopSignals::Watch again(signals, [&server](int second) {
      hots3::log::warn("received {} again: closing connections now", hots3::signal_name(second));
      server.stop_now();
    });
    server.shutdown(config.http.shutdown_grace);
  }
  workers.stop();
  hots3::log::shutdown();
  return 0;
}
