#pragma once

// Wiring of a running server: configuration → logs → store → S3 handler → HTTP server →
// worker threads, and the orderly stop on SIGTERM / SIGINT. The only place that knows every
// module (docs/STYLE.md, "Modules and what they may include").

#include "hots3/config/config.h"
#include "hots3/storage/object_store.h"

#include <functional>
#include <string>

namespace hots3::app {

// The store's options from the configuration.
storage::StoreOptions store_options(const config::Config& config);

// `hots3 check`: prints what it found; returns 0 when the store is consistent, 1 otherwise.
int check(const config::Config& config);

// `hots3 tier recover`: a stopped store's lost device replaced by a blank one (see
// storage::recover_store). Prints what became of the data, and every version lost before upload
// with what settles it; 0, or 1 (said on stderr) when the store cannot be recovered so.
int recover(const config::Config& config);

struct ServeOptions {
  std::string port_file;          // write the bound port here once listening (tests use port 0)
  std::string metrics_port_file;  // ... and the metrics address's ([metrics] listen)
  bool force_format = false;      // --force-format (StoreOptions::force_format)
  bool tier_rebind = false;       // --tier-rebind (tier::Uploader)
  // SIGHUP: the configuration as a start would build it now (the file read again, with the same
  // environment and flags), and the file it reads ("" = none). Without `reread`, SIGHUP reopens
  // the log files and rereads the upstreams' credentials only.
  std::function<config::Config()> reread;
  std::string config_path;
};

// Runs the server until SIGTERM or SIGINT; returns the process exit code. Throws
// config::ConfigError or std::runtime_error when start-up fails.
int serve(const config::Config& config, const ServeOptions& options);

}  // namespace hots3::app
