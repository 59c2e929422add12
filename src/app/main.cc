// hots3: the command line. CLI11 parses it; precedence is defaults < --config file <
// environment < flags.

#include "admin_commands.h"
#include "server_app.h"
#include "tier_commands.h"

#include "hots3/common/logging.h"
#include "hots3/common/units.h"
#include "hots3/common/version.h"
#include "hots3/config/config.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>
#include <optional>

namespace {

using hots3::config::ConfigError;

struct ServeFlags {
  std::string config_path;
  std::string listen;
  std::string data_dir;
  std::string device;
  std::string device_size;
  std::string port_file;
  std::string metrics_port_file;
  std::string log_level;
  std::string access_log;
  int threads = -1;
  bool force_format = false;
  bool tier_rebind = false;
};

hots3::config::Config build_config(const ServeFlags& flags) {
  hots3::config::Config config;
  if (!flags.config_path.empty()) hots3::config::apply_file(config, flags.config_path);
  if (!flags.listen.empty()) {
    try {
      config.http.listen = hots3::config::parse_listen(flags.listen);
    } catch (const ConfigError& e) {
      throw ConfigError(std::string("--listen: ") + e.what());
    }
  }
  if (!flags.data_dir.empty()) config.storage.data_dir = flags.data_dir;
  if (!flags.device.empty()) config.storage.device_path = flags.device;
  if (!flags.device_size.empty()) {
    auto size = hots3::parse_size_bytes(flags.device_size);
    if (!size) throw ConfigError("--device-size: '" + flags.device_size + "' is not a size");
    config.storage.device_size_bytes = *size;
  }
  if (flags.threads >= 0) config.http.threads = static_cast<unsigned>(flags.threads);
  if (!flags.log_level.empty() && !hots3::log::parse_level(flags.log_level, config.log.level)) {
    throw ConfigError("--log-level: '" + flags.log_level + "' is not a log level");
  }
  if (!flags.access_log.empty())
    config.log.access_log_path = flags.access_log == "off" ? "" : flags.access_log;
  return config;
}

// The configuration of a command on a stopped store (check, tier recover): no cache, no access
// log.
hots3::config::Config stopped_store(const std::string& config_path, const std::string& data_dir,
                                    const std::string& device) {
  hots3::config::Config config;
  if (!config_path.empty()) hots3::config::apply_file(config, config_path);
  config.storage.data_dir = data_dir;
  if (!device.empty()) config.storage.device_path = device;
  config.storage.cache_bytes = 0;
  config.log.access_log_path = "";
  return config;
}

// `hots3 tier ...`, and the same commands as `hots3 admin tier ...`: their options, parsed into
// `options` (of the command, or of `hots3 admin`).
struct TierCli {
  hots3::app::TierCommandOptions* options = nullptr;
  bool status_json = false;
  bool flush_wait = false;
  std::string status_bucket;
  std::string flush_bucket, flush_prefix;
  std::string evict_bucket, evict_prefix;
  std::string ls_bucket, ls_prefix;
  std::string adopt_bucket, adopt_prefix;
  std::string sync_bucket, sync_prefix;
  std::string prefetch_bucket;
  hots3::app::PrefetchTarget prefetch_target;
  std::string revalidate_bucket, revalidate_prefix;
  std::string reconcile_bucket, reconcile_prefix;
  std::string pin_bucket;
  hots3::app::PinTarget pin_target;
  std::string recover_config, recover_data, recover_device, recover_bucket;
  hots3::app::PinTarget recover_target;
  bool accept_older = false;
  bool forget = false;
  CLI::App *status = nullptr, *flush = nullptr, *evict = nullptr, *ls = nullptr, *adopt = nullptr,
           *sync = nullptr, *prefetch = nullptr, *revalidate = nullptr, *reconcile = nullptr,
           *pin = nullptr, *unpin = nullptr, *recover = nullptr;

  TierCli() = default;
  TierCli(const TierCli&) = delete;  // CLI11 holds the addresses of the members
  TierCli& operator=(const TierCli&) = delete;
  TierCli(TierCli&&) = delete;
  TierCli& operator=(TierCli&&) = delete;
  ~TierCli() = default;

  void add(CLI::App* tier, hots3::app::TierCommandOptions& tier_options);
  // The exit code of the command that was parsed; nullopt when none of these was.
  [[nodiscard]] std::optional<int> run() const;
};

void TierCli::add(CLI::App* tier, hots3::app::TierCommandOptions& tier_options) {
  options = &tier_options;
  tier->require_subcommand(1);
  // The server; required, and checked once parsed (`hots3 admin` names it before the command).
  const auto endpoint_options = [&tier_options](CLI::App* command) {
    command->add_option("--endpoint", tier_options.endpoint, "The server: http://HOST:PORT");
    command->add_option("--ca-file", tier_options.ca_file, "https: certificates to trust");
    command->add_flag("--insecure", tier_options.insecure, "https: do not verify the server");
  };
  // The bound bucket a command works on, and the prefix it takes (all keys without one).
  const auto bucket_options = [&endpoint_options](CLI::App* command, std::string& bucket,
                                                  std::string& prefix) {
    endpoint_options(command);
    command->add_option("--bucket", bucket, "The bound bucket")->required();
    command->add_option("--prefix", prefix, "Only keys starting with this");
  };
  status = tier->add_subcommand(
      "status",
      "Upstreams (reachable? last error); per bucket what is owed, where the data is, hit ratio; "
      "exit 1 unless ok");
  endpoint_options(status);
  status->add_flag("--json", status_json, "The report as JSON");
  status->add_option("--bucket", status_bucket,
                     "Only this bound bucket, with its parked jobs (credentials as for flush)");
  flush = tier->add_subcommand(
      "flush", "Send a prefix's changes up now (credentials: AWS_ACCESS_KEY_ID, ...)");
  bucket_options(flush, flush_bucket, flush_prefix);
  flush->add_flag("--wait", flush_wait,
                  "Return once everything acknowledged under the prefix before the call is "
                  "upstream");
  evict = tier->add_subcommand(
      "evict", "Free the device space of objects the upstream holds; GETs read them through");
  bucket_options(evict, evict_bucket, evict_prefix);

  ls = tier->add_subcommand(
      "ls", "Each object of a bound bucket and where its data is: dirty, clean, remote; pinned");
  bucket_options(ls, ls_bucket, ls_prefix);

  adopt = tier->add_subcommand(
      "adopt", "Record what the upstream holds and the bucket does not (a fresh or lost catalog)");
  bucket_options(adopt, adopt_bucket, adopt_prefix);

  sync = tier->add_subcommand(
      "sync",
      "Bring the catalog of a bound bucket into line with what the upstream holds: "
      "adopt what it lacks, follow what changed or went there (list = \"local\")");
  bucket_options(sync, sync_bucket, sync_prefix);

  prefetch = tier->add_subcommand(
      "prefetch",
      "Fetch the evicted objects under a prefix, or of a list, by a job that outlives "
      "restarts");
  bucket_options(prefetch, prefetch_bucket, prefetch_target.prefix);
  prefetch
      ->add_option("--list", prefetch_target.list_file, "Only the keys in this file, one per line")
      ->check(CLI::ExistingFile);
  prefetch->add_flag("--wait", prefetch_target.wait, "Show its progress until it ends");
  prefetch->add_option("--job", prefetch_target.job,
                       "Show the progress of this running job until it ends (start none)");

  revalidate = tier->add_subcommand(
      "revalidate", "Ask the upstream again about each object under a prefix of a bound bucket");
  bucket_options(revalidate, revalidate_bucket, revalidate_prefix);

  reconcile = tier->add_subcommand(
      "reconcile",
      "Bring a bound bucket and its upstream back into line: versions the upstream lost go up "
      "again, changed or deleted ones are followed; in cache mode, as sync");
  bucket_options(reconcile, reconcile_bucket, reconcile_prefix);

  const auto pin_options = [&, endpoint_options](CLI::App* command) {
    endpoint_options(command);
    command->add_option("--bucket", pin_bucket, "The bound bucket")->required();
    CLI::Option* key = command->add_option("--key", pin_target.key, "One key");
    command->add_option("--prefix", pin_target.prefix, "Every key starting with this")
        ->excludes(key);
  };
  pin = tier->add_subcommand(
      "pin", "Keep a key, or every key under a prefix, from eviction; fetch what is evicted");
  pin_options(pin);
  unpin = tier->add_subcommand("unpin", "Remove the pins of a key, or every pin under a prefix");
  pin_options(unpin);

  // Two steps, the server stopped for the first: the store's lost device replaced by a blank
  // one, then (served) what to do with the versions lost before upload.
  recover = tier->add_subcommand(
      "recover",
      "With --data (server stopped): go on with the catalog on a new blank device in place of a "
      "lost one; lists what was lost before upload. With --endpoint: settle those versions");
  CLI::Option* recover_data_option =
      recover->add_option("--data", recover_data, "Data directory of the stopped store");
  recover->add_option("--config", recover_config, "TOML configuration file (with --data)")
      ->check(CLI::ExistingFile)
      ->needs(recover_data_option);
  recover->add_option("--device", recover_device, "The new device (default DATA/device.img)")
      ->needs(recover_data_option);
  recover->add_option("--endpoint", tier_options.endpoint, "The server: http://HOST:PORT")
      ->excludes(recover_data_option);
  recover->add_option("--ca-file", tier_options.ca_file, "https: certificates to trust");
  recover->add_flag("--insecure", tier_options.insecure, "https: do not verify the server");
  recover->add_option("--bucket", recover_bucket, "The bucket (with --endpoint)")
      ->excludes(recover_data_option);
  CLI::Option* recover_key = recover->add_option("--key", recover_target.key, "One key");
  recover->add_option("--prefix", recover_target.prefix, "Every key starting with this")
      ->excludes(recover_key);
  CLI::Option* older = recover->add_flag(
      "--accept-older", accept_older, "The upstream's version, older, takes each lost one's place");
  recover->add_flag("--forget", forget, "Each lost key goes (the upstream keeps what it has)")
      ->excludes(older);
}

std::optional<int> TierCli::run() const {
  const bool parsed = status->parsed() || flush->parsed() || evict->parsed() || ls->parsed() ||
                      adopt->parsed() || sync->parsed() || prefetch->parsed() ||
                      revalidate->parsed() || reconcile->parsed() || pin->parsed() ||
                      unpin->parsed() || recover->parsed();
  if (!parsed) return std::nullopt;
  if (options->endpoint.empty() && !(recover->parsed() && !recover_data.empty())) {
    std::fprintf(stderr, "hots3: --endpoint URL is required\n");
    return 2;
  }
  if (status->parsed()) return hots3::app::tier_status(*options, status_bucket, status_json);
  if (flush->parsed()) {
    return hots3::app::tier_flush(*options, flush_bucket, flush_prefix, flush_wait);
  }
  if (evict->parsed()) return hots3::app::tier_evict(*options, evict_bucket, evict_prefix);
  if (ls->parsed()) return hots3::app::tier_ls(*options, ls_bucket, ls_prefix);
  if (adopt->parsed()) {
    return hots3::app::tier_adopt(*options, adopt_bucket, adopt_prefix, false);
  }
  if (sync->parsed()) return hots3::app::tier_adopt(*options, sync_bucket, sync_prefix, true);
  if (prefetch->parsed()) {
    return hots3::app::tier_prefetch(*options, prefetch_bucket, prefetch_target);
  }
  if (revalidate->parsed()) {
    return hots3::app::tier_revalidate(*options, revalidate_bucket, revalidate_prefix);
  }
  if (reconcile->parsed()) {
    return hots3::app::tier_reconcile(*options, reconcile_bucket, reconcile_prefix);
  }
  if (pin->parsed()) return hots3::app::tier_pin(*options, pin_bucket, pin_target);
  if (unpin->parsed()) return hots3::app::tier_unpin(*options, pin_bucket, pin_target);
  if (recover->parsed()) {
    if (!recover_data.empty()) {
      return hots3::app::recover(stopped_store(recover_config, recover_data, recover_device));
    }
    if (options->endpoint.empty() || recover_bucket.empty() || accept_older == forget) {
      std::fprintf(stderr,
                   "hots3 tier recover: --data DIR (server stopped), or --endpoint URL --bucket B "
                   "with --accept-older or --forget\n");
      return 2;
    }
    return hots3::app::tier_settle_lost(*options, recover_bucket, recover_target, accept_older);
  }
  return std::nullopt;
}

// The command line, parsed and run. Throws ConfigError and whatever start-up throws.
int run(int argc, char** argv) {
  CLI::App app{"hots3: an S3-compatible hot tier for GPU racks, on NVMe", "hots3"};
  app.set_version_flag("--version", std::string("hots3 ") + hots3::kVersion);
  app.require_subcommand(1);

  ServeFlags flags;
  CLI::App* serve = app.add_subcommand("serve", "Run the server (until SIGTERM or SIGINT)");
  serve->add_option("--config", flags.config_path, "TOML configuration file (see conf/hots3.toml)")
      ->check(CLI::ExistingFile);
  serve->add_option("--listen", flags.listen,
                    "ADDRESS:PORT to listen on (port 0: pick a free one)");
  serve->add_option("--data", flags.data_dir,
                    "Data directory (catalog, credentials, default device)");
  serve->add_option("--device", flags.device,
                    "Device: a block device or a file (default DATA/device.img)");
  serve->add_option("--device-size", flags.device_size, "Size of a new device file (e.g. 64GiB)");
  serve->add_option("--port-file", flags.port_file, "Write the bound port to this file");
  serve->add_option("--metrics-port-file", flags.metrics_port_file,
                    "Write the bound port of [metrics] listen to this file");
  serve->add_option("--threads", flags.threads, "Worker threads (0: one per core)")
      ->check(CLI::Range(0, 1024));
  serve->add_option("--log-level", flags.log_level,
                    "trace, debug, info, warn, error, critical, off");
  serve->add_option("--access-log", flags.access_log, "Access log: a file, '-' for stdout, 'off'");
  serve->add_flag(
      "--force-format", flags.force_format,
      "Let a new catalog take over a device another store formatted (that store's data is lost)");
  serve->add_flag("--tier-rebind", flags.tier_rebind,
                  "Let a bucket's upstream, upstream bucket or prefix change (or the bucket be "
                  "unbound) while changes are still owed to the old one; they go to the new one");
  std::string check_config, check_data, check_device;
  CLI::App* check = app.add_subcommand(
      "check", "Verify a stopped store: catalog against device, and every checksum");
  check->add_option("--config", check_config, "TOML configuration file")->check(CLI::ExistingFile);
  check->add_option("--data", check_data, "Data directory")->required();
  check->add_option("--device", check_device, "Device (default DATA/device.img)");

  CLI::App* tier = app.add_subcommand("tier", "Ask a running server about its upstreams");
  hots3::app::TierCommandOptions tier_options;
  TierCli tier_cli;
  tier_cli.add(tier, tier_options);

  // hots3 admin: the server's state, users and buckets, and its tier commands, as an admin.
  CLI::App* admin =
      app.add_subcommand("admin", "Ask a running server about itself (as an admin user)");
  admin->require_subcommand(1);
  admin->fallthrough();
  hots3::app::TierCommandOptions admin_options;
  admin_options.admin = true;
  bool admin_json = false;
  admin->add_option("--endpoint", admin_options.endpoint, "The server: http://HOST:PORT");
  admin->add_option("--ca-file", admin_options.ca_file, "https: certificates to trust");
  admin->add_flag("--insecure", admin_options.insecure, "https: do not verify the server");
  admin->add_option("--data", admin_options.data_dir,
                    "The server's data directory: its development credentials, when "
                    "HOTS3_ACCESS_KEY and HOTS3_SECRET_KEY are not set (default ./data)");
  admin->add_flag("--json", admin_json, "The server's JSON instead of tables");
  CLI::App* admin_status = admin->add_subcommand(
      "status", "Version, uptime, addresses, device, catalog, caches, connections, usage");
  CLI::App* admin_users = admin->add_subcommand("users", "Users and their grants (never a secret)");
  CLI::App* admin_buckets =
      admin->add_subcommand("buckets", "Buckets: owner, grants, upstream binding, usage");
  CLI::App* admin_tier = admin->add_subcommand("tier", "The tier commands (hots3 tier ...)");
  TierCli admin_tier_cli;
  admin_tier_cli.add(admin_tier, admin_options);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  if (serve->parsed()) {
    return hots3::app::serve(build_config(flags),
                             {.port_file = flags.port_file,
                              .metrics_port_file = flags.metrics_port_file,
                              .force_format = flags.force_format,
                              .tier_rebind = flags.tier_rebind,
                              .reread = [&flags] { return build_config(flags); },
                              .config_path = flags.config_path});
  }
  if (admin_status->parsed() || admin_users->parsed() || admin_buckets->parsed()) {
    if (admin_options.endpoint.empty()) {
      std::fprintf(stderr, "hots3 admin: --endpoint URL is required\n");
      return 2;
    }
    using hots3::app::AdminReport;
    const AdminReport report = admin_status->parsed()  ? AdminReport::kStatus
                               : admin_users->parsed() ? AdminReport::kUsers
                                                       : AdminReport::kBuckets;
    return hots3::app::admin_report(admin_options, report, admin_json);
  }
  if (auto code = tier_cli.run()) return *code;
  if (auto code = admin_tier_cli.run()) return *code;
  if (check->parsed()) {
    return hots3::app::check(stopped_store(check_config, check_data, check_device));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const ConfigError& e) {
    std::fprintf(stderr, "hots3: configuration error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hots3: %s\n", e.what());
    return 1;
  }
}
