#include "server_app.h"

#include "metrics_endpoint.h"
#include "upload_sweeper.h"

#include "hots3/common/clock.h"
#include "hots3/common/logging.h"
#include "hots3/common/units.h"
#include "hots3/common/version.h"
#include "hots3/common/worker_pool.h"
#include "hots3/http/server.h"
#include "hots3/s3/s3.h"
#include "hots3/storage/check.h"
#include "hots3/tier/uploader.h"

#include <boost/asio/io_context.hpp>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <thread>
#include <unistd.h>

namespace hots3::app {
namespace {

namespace fs = std::filesystem;

// What a start with an existing data directory found there, for the banner ("" for a new one).
std::string reused_store(const config::Config& config, storage::ObjectStore& store) {
  const auto buckets = store.list_buckets();
  const auto stats = store.stats();
  return fmt::format(
      "Reusing the store in {} ({} bucket(s), {} in use); remove the directory to start afresh.\n",
      config.storage.data_dir, buckets ? buckets->size() : 0, format_size(stats.used_bytes));
}

// The URL clients use: "http://127.0.0.1:9000", "https://[::1]:9000".
std::string endpoint_url(const config::Config& config, std::uint16_t port) {
  const std::string& host = config.http.listen.host;
  return fmt::format("{}://{}:{}", config.http.tls.enabled() ? "https" : "http",
                     host.find(':') != std::string::npos ? "[" + host + "]" : host, port);
}

void print_banner(const config::Config& config, const config::ResolvedUsers& users,
                  std::uint16_t port, const std::string& reused) {
  const std::string endpoint = endpoint_url(config, port);
  log::info("hots3 {} listening on {}", kVersion, endpoint);
  if (!reused.empty()) log::info("{}", std::string_view(reused).substr(0, reused.size() - 1));
  if (!users.generated) return;
  // The development key pair goes to stdout so that a newcomer can paste it.
  std::printf(
      "\nhots3 %s is running at %s\n%s"
      "Development credentials (%s %s):\n"
      "  export AWS_ACCESS_KEY_ID=%s\n"
      "  export AWS_SECRET_ACCESS_KEY=%s\n"
      "  export AWS_DEFAULT_REGION=us-east-1\n"
      "  aws --endpoint-url %s s3 ls\n\n",
      kVersion, endpoint.c_str(), reused.c_str(),
      users.reused ? "the same as before, from" : "new, kept in", users.credentials_path.c_str(),
      users.users.front().access_key.c_str(), users.users.front().secret_key.c_str(),
      endpoint.c_str());
  std::fflush(stdout);
}

// Who owns the bound buckets hots3 creates: the first admin, or else the first user.
std::string bucket_owner(const std::vector<config::UserConfig>& users) {
  for (const auto& u : users) {
    if (u.admin) return u.name;
  }
  return users.empty() ? std::string("admin") : users.front().name;
}
// /health/upstream: the uploader's report (JSON, or text with ?format=text; of one bucket with
// ?bucket=B); with nothing bound, an empty report that is ok.
http::ProbeFn health_probes(const std::optional<tier::Uploader>& uploader) {
  return [&uploader](std::string_view target) -> std::optional<http::Probe> {
    const std::string_view path = target.substr(0, target.find('?'));
    if (path != "/health/upstream") return std::nullopt;
    bool text = false;
    std::string_view bucket;  // bucket names need no percent-decoding
    std::string_view query = target.substr(path.size());
    while (!query.empty()) {
      query.remove_prefix(1);  // '?' or '&'
      const std::string_view parameter = query.substr(0, query.find('&'));
      query.remove_prefix(parameter.size());
      if (parameter == "format=text") text = true;
      if (parameter.starts_with("bucket=")) bucket = parameter.substr(7);
    }
    if (uploader) return uploader->health(text, bucket);
    if (!bucket.empty()) return http::Probe{404, "text/plain", "no bucket is bound\n"};
    if (text) return http::Probe{200, "text/plain", "status: ok\nno bucket is bound\n"};
    return http::Probe{200, "application/json",
                       R"({"upstreams":[],"buckets":[],"owed_bytes":0,"status":"ok"})"
                       "\n"};
  };
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Keys of the configuration file (config::changed_keys) that a SIGHUP applies while serving;
// every other change waits for the next start. `tls_on`: TLS was on at start (its files can be
// swapped, not switched on).
bool live_key(std::string_view key, bool tls_on) {
  std::string name;  // without the entries' indices: "tier.upstream.bytes_per_s"
  for (std::size_t i = 0; i < key.size(); ++i) {
    if (key[i] == '[') {
      i = key.find(']', i);
      if (i == std::string_view::npos) break;
      continue;
    }
    name += key[i];
  }
  if (name.starts_with("users") || name.starts_with("log.") || name == "http.connections_max")
    return true;
  if (name == "tier.upstream.requests_per_s" || name == "tier.upstream.bytes_per_s" ||
      name == "tier.upstream.write_bytes_per_s" || name == "tier.upstream.read_bytes_per_s")
    return true;
  return tls_on && (name == "http.tls.certificate" || name == "http.tls.private_key");
}

// What a running server changes on SIGHUP, and the configuration it runs with (what a reload
// applied included).
struct Reloadable {
  config::Config running;
  std::string config_text;  // the configuration file as the start read it
  s3::Handler& handler;
  http::Server& server;
  tier::Uploader* uploader;
};

// SIGHUP: the log files are opened again (logrotate has moved them) whatever else happens. The
// configuration and the credential files are read again; a configuration that does not load
// changes nothing (the error names the file and the key). Of one that loads: users and grants,
// log settings, connections_max, the upstreams' rate limits and the TLS certificate apply now,
// each change of anything else is reported and waits for the next start. The upstreams'
// credentials are read again.
void reload(Reloadable& live, const ServeOptions& options) {
  std::optional<config::Config> next;
  std::optional<config::ResolvedUsers> users;
  std::string refused;
  if (options.reread) {
    try {
      next = options.reread();
      users = config::resolve_users(*next);
    } catch (const std::exception& e) {
      refused = e.what();
      next.reset();
    }
  }
  config::Config& running = live.running;
  try {
    log::init(next ? next->log : running.log);
    if (next) running.log = next->log;
  } catch (const std::exception& e) {
    log::error("SIGHUP: the log files stay as they were: {}", e.what());
  }
  log::info("received SIGHUP: log files opened again; reloading what can change while serving");
  if (!refused.empty())
    log::error("SIGHUP: configuration not reloaded, the running one stays: {}", refused);
  if (next) {
    if (live.handler.set_users(users->users)) {
      log::info("SIGHUP: users and grants reloaded ({} user(s))", users->users.size());
    }
    if (next->http.connections_max != running.http.connections_max) {
      live.server.set_connections_max(next->http.connections_max);
      log::info("SIGHUP: http.connections_max {} -> {}", running.http.connections_max,
                next->http.connections_max);
      running.http.connections_max = next->http.connections_max;
    }
    if (!options.config_path.empty()) {
      for (const std::string& key :
           config::changed_keys(live.config_text, read_text(options.config_path))) {
        if (live_key(key, running.http.tls.enabled())) continue;
        log::warn(
            "SIGHUP: {} changed in {}; it takes effect at the next start, until then the "
            "running value stays",
            key, options.config_path);
      }
    }
  }
  // The certificate's files are read again even when their names did not change: a renewal
  // replaces them in place.
  if (running.http.tls.enabled()) {
    const config::TlsConfig& tls =
        next && next->http.tls.enabled() ? next->http.tls : running.http.tls;
    try {
      const bool loaded = live.server.reload_tls(tls);
      running.http.tls = tls;
      log::info("SIGHUP: TLS certificate {} {}", tls.certificate_path,
                loaded ? "loaded for new connections" : "unchanged");
    } catch (const std::exception& e) {
      log::error("SIGHUP: the TLS certificate in use stays: {}", e.what());
    }
  }
  if (live.uploader != nullptr) {
    if (next) live.uploader->set_limits(next->tier.upstreams);
    live.uploader->reload_credentials();
  }
  log::info("SIGHUP: reload finished");
}

// The server's part of GET /?x-hots3-status: JSON members (see s3::OperatorEndpoints).
std::string server_status(const config::Config& config, const http::Server& server,
                          const http::Server* metrics_server, std::int64_t started_ms,
                          const storage::StoreOptions& store) {
  const http::ServerStats st = server.stats();
  std::string out = fmt::format(
      R"("uptime_s":{},"pid":{},"threads":{},"listen":)", (now_ms() - started_ms) / 1000,
      ::getpid(),
      config.http.threads == 0 ? std::thread::hardware_concurrency() : config.http.threads);
  log::append_json_quoted(out, endpoint_url(config, server.port()));
  out += ",\"metrics_listen\":";
  if (metrics_server != nullptr) {
    log::append_json_quoted(out, fmt::format("http://{}:{}/metrics", config.metrics.listen->host,
                                             metrics_server->port()));
  } else {
    out += "null";
  }
  out += ",\"data_dir\":";
  log::append_json_quoted(out, store.data_dir);
  out += ",\"device_path\":";
  log::append_json_quoted(out, store.device_file());
  out += ",\"catalog_path\":";
  log::append_json_quoted(out, store.catalog_path());
  fmt::format_to(std::back_inserter(out),
                 R"(,"connections":{{"open":{},"max":{},"total":{},"rejected":{}}},)"
                 R"("requests":{})",
                 st.connections_active, st.connections_max, st.connections_total,
                 st.connections_rejected, st.requests_total);
  return out;
}

}  // namespace

storage::StoreOptions store_options(const config::Config& config) {
  const auto& c = config.storage;
  storage::StoreOptions o;
  o.data_dir = c.data_dir;
  o.device_path = c.device_path;
  o.device_size_bytes = c.device_size_bytes;
  switch (c.io_engine) {
    case config::StorageConfig::IoEngine::kAuto:
      o.engine = storage::IoEngine::kAuto;
      break;
    case config::StorageConfig::IoEngine::kUring:
      o.engine = storage::IoEngine::kUring;
      break;
    case config::StorageConfig::IoEngine::kPosix:
      o.engine = storage::IoEngine::kPosix;
      break;
  }
  o.inline_max_bytes = c.inline_max_bytes;
  o.cache_bytes = c.effective_cache_bytes();
  o.metadata_cache_bytes = c.effective_metadata_cache_bytes();
  o.io_buffer_bytes = static_cast<std::size_t>(c.io_buffer_bytes);
  o.io_buffers_per_worker = static_cast<std::size_t>(c.io_buffers_per_worker);
  o.stream_depth = static_cast<std::size_t>(c.stream_depth);
  o.compute_md5 = c.etag_md5;
  o.tier_delay = config.tier.writeback.delay;
  o.tier_owed_max_bytes = config.tier.writeback.max_dirty_bytes.value_or(0);
  if (!config.tier.buckets.empty()) o.tier_full_percent = config.tier.evict.full_percent;
  return o;
}

int serve(const config::Config& config, const ServeOptions& options) {
  // First, before any thread exists (logging, catalog, workers): from here on SIGTERM / SIGINT
  // wait until the server can stop cleanly, however early they come.
  StopSignals signals;
  log::init(config.log);
  fs::create_directories(config.storage.data_dir);
  const config::ResolvedUsers users = config::resolve_users(config);

  // Declared in the order that makes destruction safe: the server's sockets and timers go
  // before the workers' io_contexts, and those (with any coroutine they still hold) before the
  // handler and the store.
  storage::StoreOptions opened = store_options(config);
  opened.force_format = options.force_format;
  const bool existing_store = fs::exists(opened.catalog_path());
  auto store = storage::ObjectStore::open(opened);
  const std::string reused = existing_store ? reused_store(config, *store) : std::string();
  // Bound buckets queue uploads from the first request on: bound (and created) before serving.
  std::optional<tier::Uploader> uploader;
  // However serve() ends (a refused binding, a port in use), the uploader stops and then the
  // store's catalog readers end before the uploader is destroyed: a read it began can still hold
  // its io_context on a reader thread for a moment after the uploader has its answer.
  struct StopInOrder {
    std::optional<tier::Uploader>& uploader;
    storage::ObjectStore& store;
    StopInOrder(std::optional<tier::Uploader>& u, storage::ObjectStore& s)
        : uploader(u), store(s) {}
    StopInOrder(const StopInOrder&) = delete;
    StopInOrder& operator=(const StopInOrder&) = delete;
    StopInOrder(StopInOrder&&) = delete;
    StopInOrder& operator=(StopInOrder&&) = delete;
    ~StopInOrder() {
      if (uploader) uploader->stop();
      store.shutdown();
    }
  } const stop_in_order{uploader, *store};
  if (!config.tier.buckets.empty()) {
    uploader.emplace(*store, config.tier, bucket_owner(users.users), options.tier_rebind);
    uploader->start();
  }
  config::S3Config s3 = config.s3;
  s3.session_key = config::session_key(config.storage.data_dir);
  if (s3.test_hooks) log::warn("s3.test_hooks is on: admins can move the session clock");
  metrics::Registry registry;
  // The admin status asks the servers made below; no request arrives before they start.
  const std::int64_t started_ms = now_ms();
  const http::Server* status_server = nullptr;
  const http::Server* status_metrics_server = nullptr;
  s3::OperatorEndpoints operators{
      .registry = &registry, .bearer_token = config.metrics.bearer_token, .server_status = [&]() {
        return server_status(config, *status_server, status_metrics_server, started_ms, opened);
      }};
  auto handler = s3::make_handler(*store, s3, users.users, health_probes(uploader),
                                  uploader ? &*uploader : nullptr, uploader ? &*uploader : nullptr,
                                  std::move(operators));
  WorkerPool workers(config.http.threads);
  for (auto* context : workers.contexts()) store->attach(*context);
  http::Server server(config.http, *handler, workers.contexts());
  status_server = &server;
  add_server_metrics(registry, server, *store, uploader ? &*uploader : nullptr, now_ms());
  // The metrics address: the same workers, a listener of its own, plain HTTP, no authentication.
  MetricsHandler metrics_handler(registry);
  std::optional<http::Server> metrics_server;
  if (config.metrics.listen) {
    config::HttpConfig m = config.http;
    m.listen = *config.metrics.listen;
    m.tls = {};
    m.connections_max = 64;
    m.shutdown_grace = std::chrono::milliseconds(0);
    metrics_server.emplace(m, metrics_handler, workers.contexts());
    status_metrics_server = &*metrics_server;
  }
  server.start();
  if (metrics_server) metrics_server->start();
  handler->start(workers.contexts().front()->get_executor());
  workers.start();
  std::optional<UploadSweeper> sweeper;
  if (const auto& m = config.s3.multipart; m.abort_after.count() > 0) {
    sweeper.emplace(*store, *workers.contexts().front(), m.abort_after, m.sweep_interval);
    sweeper->start();
  }

  if (!options.port_file.empty()) {
    write_file_atomically(options.port_file, std::to_string(server.port()) + "\n");
  }
  if (metrics_server) {
    log::info("metrics on http://{}:{}/metrics", config.metrics.listen->host,
              metrics_server->port());
    if (!options.metrics_port_file.empty()) {
      write_file_atomically(options.metrics_port_file,
                            std::to_string(metrics_server->port()) + "\n");
    }
  }
  print_banner(config, users, server.port(), reused);

  // Stop in order: HTTP (requests in flight finish within the grace period), the store (queued
  // catalog writes are committed, the catalog closed), then the workers.
  Reloadable live{
      .running = config,
      .config_text = options.config_path.empty() ? std::string() : read_text(options.config_path),
      .handler = *handler,
      .server = server,
      .uploader = uploader ? &*uploader : nullptr};
  int signal = 0;
  while ((signal = signals.wait()) == SIGHUP) reload(live, options);
  log::info("received {}; stopping (grace {} ms; a second signal stops at once)",
            signal_name(signal), config.http.shutdown_grace.count());
  {
    // A second signal (an impatient operator, systemd's stop timeout nearing) cuts the grace
    // period short: connections are closed at once, but the catalog is still closed cleanly.
    const StopSignals::Watch again(signals, [&server](int second) {
      log::warn("received {} again: closing connections now", signal_name(second));
      server.stop_now();
    });
    server.shutdown(config.http.shutdown_grace);
  }
  if (metrics_server) metrics_server->shutdown(std::chrono::milliseconds(0));
  if (sweeper) sweeper->stop();
  if (uploader) {
    uploader->stop();  // unsent changes stay queued for the next start
    const tier::UploaderStats up = uploader->stats();
    log::info(
        "tier: this run uploaded {} objects ({} bytes) and {} deletes; {} retries, {} parked, {} "
        "slow-downs, {} conflicts; {} bytes sent; {} versions evicted ({} bytes, {} of them "
        "recent)",
        up.uploaded, up.bytes, up.deleted, up.retried, up.parked, up.slowdowns, up.conflicts,
        up.sent_bytes, up.evicted, up.evicted_bytes, up.evicted_young);
  }
  store->shutdown();
  workers.stop();
  // What `hots3 check` calls "referenced" must equal this: anything more is leaked space.
  const auto stats = store->stats();
  log::info("stopped; device space in use: {} bytes ({} waiting for readers to finish)",
            stats.used_bytes, stats.pending_free_bytes);
  log::shutdown();
  return 0;
}

int check(const config::Config& config) {
  log::init(config.log);
  const auto report = storage::check_store(store_options(config));
  std::printf(
      "buckets %llu, objects %llu (%llu inline), uploads %llu with %llu parts, %llu extents\n",
      static_cast<unsigned long long>(report.buckets),
      static_cast<unsigned long long>(report.objects),
      static_cast<unsigned long long>(report.inline_objects),
      static_cast<unsigned long long>(report.uploads),
      static_cast<unsigned long long>(report.parts),
      static_cast<unsigned long long>(report.extents));
  std::printf("device data area %s, referenced %s (%llu bytes), %llu blocks verified\n",
              format_size(report.device_bytes).c_str(),
              format_size(report.referenced_bytes).c_str(),
              static_cast<unsigned long long>(report.referenced_bytes),
              static_cast<unsigned long long>(report.blocks_verified));
  for (const auto& problem : report.problems) std::printf("PROBLEM: %s\n", problem.c_str());
  std::printf("%s\n",
              report.ok() ? "OK: catalog and device are consistent" : "FAILED: problems found");
  log::shutdown();
  return report.ok() ? 0 : 1;
}

int recover(const config::Config& config) {
  log::init(config.log);
  storage::DeviceLoss loss;
  try {
    loss = storage::recover_store(store_options(config));
  } catch (const std::exception& e) {
    log::shutdown();
    std::fprintf(stderr, "hots3 tier recover: %s\n", e.what());
    return 1;
  }
  std::uint64_t lost_bytes = 0;
  std::size_t lost = 0;
  for (const storage::LostVersion& v : loss.lost) {
    if (!v.upstream_source.empty()) continue;
    lost_bytes += v.size_bytes;
    ++lost;
  }
  std::printf("read through from upstreams from now on: %llu objects (%s)\n",
              static_cast<unsigned long long>(loss.evicted),
              format_size(loss.evicted_bytes).c_str());
  std::printf("dropped: %llu parts of unfinished multipart uploads, %llu kept chunks\n",
              static_cast<unsigned long long>(loss.parts),
              static_cast<unsigned long long>(loss.chunks));
  // (Keys as a log line holds them: JSON-escaped, one line whatever they hold.)
  std::printf("lost before upload: %zu objects (%s)\n", lost, format_size(lost_bytes).c_str());
  for (const storage::LostVersion& v : loss.lost) {
    if (!v.upstream_source.empty()) continue;
    std::printf("LOST %s/%s %llu \"%s\"\n", v.bucket.c_str(), log::escaped(v.key).c_str(),
                static_cast<unsigned long long>(v.size_bytes), v.etag.c_str());
  }
  std::printf(
      "copied upstream once served, from the key they were renamed or copied from (whose upstream "
      "copy holds their data): %zu objects\n",
      loss.lost.size() - lost);
  for (const storage::LostVersion& v : loss.lost) {
    if (v.upstream_source.empty()) continue;
    std::printf("COPY %s/%s %llu \"%s\" from %s\n", v.bucket.c_str(), log::escaped(v.key).c_str(),
                static_cast<unsigned long long>(v.size_bytes), v.etag.c_str(),
                log::escaped(v.upstream_source).c_str());
  }
  if (lost > 0) {
    std::printf(
        "They answer 500 (lost before upload) until settled, with the server running: `hots3 "
        "tier recover --endpoint URL --bucket B [--prefix P | --key K] --accept-older` (the "
        "upstream's version, older, takes each one's place) or `... --forget` (the key goes)\n");
  }
  log::shutdown();
  return 0;
}

}  // namespace hots3::app
