#include "server_app.h"

#include <csignal>
#include <cstdio>
#include <filesystem>

#include "hots3/common/logging.h"
#include "hots3/common/version.h"
#include "hots3/common/worker_pool.h"
#include "hots3/http/server.h"
#include "placeholder_handler.h"

namespace hots3::app {
namespace {

namespace fs = std::filesystem;

void print_banner(const config::Config& config, const config::ResolvedUsers& users,
                  std::uint16_t port) {
  const bool tls = config.http.tls.enabled();
  const std::string host = config.http.listen.host.find(':') != std::string::npos
                               ? "[" + config.http.listen.host + "]"
                               : config.http.listen.host;
  const std::string endpoint = fmt::format("{}://{}:{}", tls ? "https" : "http", host, port);
  log::info("hots3 {} listening on {}", kVersion, endpoint);
  if (!users.generated) return;
  // The development key pair goes to stdout so that a newcomer can paste it.
  std::printf(
      "\nhots3 %s is running at %s\n"
      "Development credentials (kept in %s):\n"
      "  export AWS_ACCESS_KEY_ID=%s\n"
      "  export AWS_SECRET_ACCESS_KEY=%s\n"
      "  export AWS_DEFAULT_REGION=us-east-1\n"
      "  aws --endpoint-url %s s3 ls\n\n",
      kVersion, endpoint.c_str(), users.credentials_path.c_str(),
      users.users.front().access_key.c_str(), users.users.front().secret_key.c_str(),
      endpoint.c_str());
  std::fflush(stdout);
}

}  // namespace

int serve(const config::Config& config, const ServeOptions& options) {
  log::init(config.log);
  fs::create_directories(config.storage.data_dir);
  const config::ResolvedUsers users = config::resolve_users(config);

  WorkerPool workers(config.http.threads);
  PlaceholderHandler handler;
  http::Server server(config.http, handler, workers.contexts());
  server.start();
  workers.start();

  if (!options.port_file.empty()) {
    write_file_atomically(options.port_file, std::to_string(server.port()) + "\n");
  }
  print_banner(config, users, server.port());

  // Stop in order: HTTP first (requests in flight finish within the grace period), then the
  // workers.
  const int signal = wait_for_stop_signal();
  log::info("received {}; stopping (grace {} ms)", signal == SIGINT ? "SIGINT" : "SIGTERM",
            config.http.shutdown_grace.count());
  server.shutdown(config.http.shutdown_grace);
  workers.stop();
  log::info("stopped");
  log::shutdown();
  return 0;
}

}  // namespace hots3::app
