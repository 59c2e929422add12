#include "hots3/config/config.h"

#include "hots3/common/logging.h"
#include "hots3/common/units.h"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <unistd.h>

namespace hots3::config {
namespace {

// Reads the keys of one table, remembering which it used; done() rejects the rest, so a typo
// in a key name is an error rather than a silently ignored setting.
class TableReader {
 public:
  TableReader(const std::string& path, std::string prefix, const toml::table& table)
      : path_(path), prefix_(std::move(prefix)), table_(table) {}

  void string(std::string_view key, std::string& out) {
    if (const toml::node* node = take(key)) {
      const auto* value = node->as_string();
      if (value == nullptr) fail(*node, key, "expected a string");
      out = value->get();
    }
  }

  void boolean(std::string_view key, bool& out) {
    if (const toml::node* node = take(key)) {
      const auto* value = node->as_boolean();
      if (value == nullptr) fail(*node, key, "expected true or false");
      out = value->get();
    }
  }

  template <class Int>
  void integer(std::string_view key, Int& out, std::int64_t min, std::int64_t max) {
    if (const toml::node* node = take(key)) {
      const auto* value = node->as_integer();
      if (value == nullptr) fail(*node, key, "expected a whole number");
      const std::int64_t v = value->get();
      if (v < min || v > max) fail(*node, key, fmt::format("must be between {} and {}", min, max));
      out = static_cast<Int>(v);
    }
  }

  // A size: a whole number of bytes or a string with a unit ("64KiB", "16G").
  void size(std::string_view key, std::uint64_t& out, std::uint64_t min, std::uint64_t max) {
    const toml::node* node = take(key);
    if (node == nullptr) return;
    std::uint64_t bytes = 0;
    if (const auto* i = node->as_integer()) {
      if (i->get() < 0) fail(*node, key, "must not be negative");
      bytes = static_cast<std::uint64_t>(i->get());
    } else if (const auto* s = node->as_string()) {
      auto parsed = parse_size_bytes(s->get());
      if (!parsed)
        fail(*node, key,
             fmt::format("'{}' is not a size (e.g. 4096, \"64KiB\", \"16GiB\")", s->get()));
      bytes = *parsed;
    } else {
      fail(*node, key, "expected a size (e.g. 4096 or \"64KiB\")");
    }
    if (bytes < min || bytes > max) {
      fail(*node, key,
           fmt::format("must be between {} and {}", format_size(min), format_size(max)));
    }
    out = bytes;
  }

  // A part of a whole: a number from 0 to 1 or a percentage ("20%").
  void fraction(std::string_view key, double& out) {
    const toml::node* node = take(key);
    if (node == nullptr) return;
    double value = -1;
    if (const auto* f = node->as_floating_point()) {
      value = f->get();
    } else if (const auto* i = node->as_integer()) {
      value = static_cast<double>(i->get());
    } else if (const auto* s = node->as_string()) {
      const std::string& text = s->get();
      if (text.size() < 2 || text.back() != '%') {
        fail(*node, key, fmt::format("'{}' is not a percentage", text));
      }
      const char* last = text.data() + text.size() - 1;  // the '%'
      double percent = 0;
      const auto [at, ec] = std::from_chars(text.data(), last, percent);
      if (ec != std::errc() || at != last) {
        fail(*node, key, fmt::format("'{}' is not a percentage", text));
      }
      value = percent / 100;
    } else {
      fail(*node, key, "expected a number from 0 to 1 or a percentage (e.g. 0.2 or \"20%\")");
    }
    if (!(value >= 0 && value <= 1)) fail(*node, key, "must be between 0 and 1 (0% and 100%)");
    out = value;
  }

  // A duration: a string with a unit ("250ms", "10s", "5m") or a whole number of seconds.
  void duration(std::string_view key, milliseconds& out, milliseconds min, milliseconds max) {
    const toml::node* node = take(key);
    if (node == nullptr) return;
    milliseconds value{0};
    if (const auto* i = node->as_integer()) {
      if (i->get() < 0 || i->get() > std::numeric_limits<std::int32_t>::max()) {
        fail(*node, key, "out of range");
      }
      value = std::chrono::seconds(i->get());
    } else if (const auto* s = node->as_string()) {
      auto parsed = parse_duration(s->get());
      if (!parsed)
        fail(*node, key, fmt::format("'{}' is not a duration (e.g. \"250ms\", \"10s\")", s->get()));
      value = *parsed;
    } else {
      fail(*node, key, "expected a duration (e.g. \"10s\")");
    }
    if (value < min || value > max) {
      fail(*node, key, fmt::format("must be between {}ms and {}ms", min.count(), max.count()));
    }
    out = value;
  }

  const toml::table* table(std::string_view key) {
    const toml::node* node = take(key);
    if (node == nullptr) return nullptr;
    const auto* t = node->as_table();
    if (t == nullptr) fail(*node, key, "expected a table ([section])");
    return t;
  }

  const toml::array* array(std::string_view key) {
    const toml::node* node = take(key);
    if (node == nullptr) return nullptr;
    const auto* a = node->as_array();
    if (a == nullptr) fail(*node, key, "expected an array");
    return a;
  }

  // An array of non-empty strings.
  void strings(std::string_view key, std::vector<std::string>& out) {
    const toml::array* a = array(key);
    if (a == nullptr) return;
    out.clear();
    for (const toml::node& item : *a) {
      const auto* text = item.as_string();
      if (text == nullptr || text->get().empty()) fail(item, key, "expected non-empty strings");
      out.push_back(text->get());
    }
  }

  // One of `choices` (name, value), by name.
  template <class E>
  void choice(std::string_view key, E& out,
              std::initializer_list<std::pair<std::string_view, E>> choices) {
    const toml::node* node = take(key);
    if (node == nullptr) return;
    const auto* text = node->as_string();
    std::string names;
    for (const auto& [name, value] : choices) {
      if (text != nullptr && text->get() == name) {
        out = value;
        return;
      }
      names += fmt::format("{}\"{}\"", names.empty() ? "" : ", ", name);
    }
    fail(*node, key, fmt::format("must be one of {}", names));
  }

  // Rejects every key that no reader method asked for.
  void done() const {
    for (auto&& [key, node] : table_) {
      if (used_.count(std::string(key.str())) == 0) fail(node, key.str(), "unknown key");
    }
  }

  [[noreturn]] void fail(const toml::node& node, std::string_view key,
                         std::string_view problem) const {
    throw ConfigError(
        fmt::format("{}:{}: {}{}: {}", path_, node.source().begin.line, prefix_, key, problem));
  }

  [[nodiscard]] const std::string& prefix() const { return prefix_; }

 private:
  const toml::node* take(std::string_view key) {
    used_.emplace(key);
    return table_.get(key);
  }

  const std::string& path_;
  std::string prefix_;
  const toml::table& table_;
  std::set<std::string, std::less<>> used_;
};

constexpr std::int64_t kThreadsMax = 1024;
constexpr auto kTimeoutMin = milliseconds(10);
constexpr auto kTimeoutMax = milliseconds(24LL * 3600 * 1000);

// The table's `listen` address, if it names one ("" names none).
std::optional<ListenAddress> read_listen(TableReader& r, const toml::table& table) {
  std::string listen;
  r.string("listen", listen);
  if (listen.empty()) return std::nullopt;
  try {
    return parse_listen(listen);
  } catch (const ConfigError& e) {
    r.fail(*table.get("listen"), "listen", e.what());
  }
}

void read_metrics(const std::string& path, const toml::table& table, MetricsConfig& metrics) {
  TableReader r(path, "metrics.", table);
  if (auto listen = read_listen(r, table)) metrics.listen = *listen;
  r.string("bearer_token", metrics.bearer_token);
  r.done();
  if (!metrics.bearer_token.empty() && metrics.bearer_token.size() < 16) {
    r.fail(*table.get("bearer_token"), "bearer_token",
           "must be at least 16 characters (it is all that guards /metrics on the S3 port)");
  }
}

void read_http(const std::string& path, const toml::table& table, HttpConfig& http) {
  TableReader r(path, "http.", table);
  if (auto listen = read_listen(r, table)) http.listen = *listen;
  r.integer("threads", http.threads, 0, kThreadsMax);
  r.size("header_bytes_max", http.header_bytes_max, 8 * kKiB, 16 * kMiB);
  r.duration("header_timeout", http.header_timeout, kTimeoutMin, kTimeoutMax);
  r.duration("idle_timeout", http.idle_timeout, kTimeoutMin, kTimeoutMax);
  r.duration("body_stall_timeout", http.body_stall_timeout, kTimeoutMin, kTimeoutMax);
  r.duration("send_stall_timeout", http.send_stall_timeout, kTimeoutMin, kTimeoutMax);
  r.integer("connections_max", http.connections_max, 1, 1'000'000);
  r.duration("shutdown_grace", http.shutdown_grace, milliseconds(0), kTimeoutMax);
  if (const toml::table* tls = r.table("tls")) {
    TableReader t(path, "http.tls.", *tls);
    t.string("certificate", http.tls.certificate_path);
    t.string("private_key", http.tls.private_key_path);
    t.boolean("allow_plaintext", http.tls.allow_plaintext);
    t.done();
    if (http.tls.certificate_path.empty() != http.tls.private_key_path.empty()) {
      t.fail(*tls, "certificate", "certificate and private_key must be set together");
    }
  }
  r.done();
}

void read_storage(const std::string& path, const toml::table& table, StorageConfig& storage) {
  TableReader r(path, "storage.", table);
  r.string("data_dir", storage.data_dir);
  r.string("device", storage.device_path);
  r.size("device_size", storage.device_size_bytes, 0, 1024 * kTiB);
  std::string engine;
  r.string("io_engine", engine);
  if (engine == "io_uring") {
    storage.io_engine = StorageConfig::IoEngine::kUring;
  } else if (engine == "posix") {
    storage.io_engine = StorageConfig::IoEngine::kPosix;
  } else if (engine == "auto" || engine.empty()) {
    storage.io_engine = StorageConfig::IoEngine::kAuto;
  } else {
    r.fail(*table.get("io_engine"), "io_engine", "must be \"auto\", \"io_uring\" or \"posix\"");
  }
  r.size("inline_max", storage.inline_max_bytes, 0, 64 * kKiB);
  // A cache size: "auto" (unset), or a size (0 = off).
  const auto cache_size = [&](const char* name, std::optional<std::uint64_t>& out) {
    if (const toml::node* cache = table.get(name);
        cache != nullptr && cache->is_string() && cache->as_string()->get() == "auto") {
      std::string ignored;
      r.string(name, ignored);
      out.reset();
    } else {
      std::uint64_t bytes = out.value_or(0);
      const bool present = table.contains(name);
      r.size(name, bytes, 0, 16 * kTiB);
      if (present) out = bytes;
    }
  };
  cache_size("cache_size", storage.cache_bytes);
  cache_size("metadata_cache_size", storage.metadata_cache_bytes);
  r.size("io_buffer_size", storage.io_buffer_bytes, 64 * kKiB, 64 * kMiB);
  if (storage.io_buffer_bytes % (64 * kKiB) != 0)
    r.fail(*table.get("io_buffer_size"), "io_buffer_size", "must be a multiple of 64 KiB");
  r.integer("io_buffers", storage.io_buffers_per_worker, 2, 65536);
  r.integer("stream_depth", storage.stream_depth, 1, 64);
  std::string etag;
  r.string("etag", etag);
  if (etag == "md5" || etag.empty()) {
    storage.etag_md5 = true;
  } else if (etag == "fast") {
    storage.etag_md5 = false;
  } else {
    r.fail(*table.get("etag"), "etag", "must be \"md5\" or \"fast\"");
  }
  r.done();
  if (storage.device_size_bytes != 0 && storage.device_size_bytes < 64 * kMiB) {
    r.fail(*table.get("device_size"), "device_size", "must be 0 (automatic) or at least 64 MiB");
  }
  if (storage.data_dir.empty()) r.fail(table, "data_dir", "must not be empty");
}

void read_log(const std::string& path, const toml::table& table, log::Options& options) {
  TableReader r(path, "log.", table);
  std::string level;
  r.string("level", level);
  if (!level.empty() && !log::parse_level(level, options.level)) {
    r.fail(*table.get("level"), "level",
           fmt::format("'{}' is not one of trace, debug, info, warn, error, critical, off", level));
  }
  r.string("file", options.server_log_path);
  r.boolean("json", options.json);
  r.string("access_log", options.access_log_path);
  r.done();
}

void read_s3(const std::string& path, const toml::table& table, S3Config& s3) {
  TableReader r(path, "s3.", table);
  r.string("region", s3.region);
  r.string("domain", s3.domain);
  milliseconds skew = s3.clock_skew_max;
  r.duration("clock_skew_max", skew, milliseconds(1000), milliseconds(7LL * 24 * 3600 * 1000));
  s3.clock_skew_max = std::chrono::duration_cast<std::chrono::seconds>(skew);
  r.size("single_put_max", s3.single_put_max_bytes, 1, 5 * kTiB);
  r.size("metadata_max", s3.metadata_max_bytes, 1, 64 * kKiB);
  r.boolean("region_check", s3.region_check);
  r.boolean("sigv2", s3.sigv2);
  r.boolean("test_hooks", s3.test_hooks);
  r.done();
  if (s3.region.empty()) r.fail(table, "region", "must not be empty");
}

void read_multipart(const std::string& path, const toml::table& table, MultipartConfig& multipart) {
  TableReader r(path, "multipart.", table);
  constexpr auto kYear = milliseconds(366LL * 24 * 3600 * 1000);
  r.duration("abort_after", multipart.abort_after, milliseconds(0), 10 * kYear);
  r.duration("sweep_interval", multipart.sweep_interval, milliseconds(100), kYear);
  r.duration("complete_keepalive", multipart.complete_keepalive, milliseconds(0), kTimeoutMax);
  r.integer("open_uploads_max_per_bucket", multipart.open_uploads_max_per_bucket, 1, 100'000'000);
  r.integer("open_uploads_max_per_user", multipart.open_uploads_max_per_user, 1, 100'000'000);
  r.done();
}

std::vector<Grant> read_grants(const std::string& path, const toml::array& array) {
  std::vector<Grant> grants;
  for (const toml::node& node : array) {
    const auto* table = node.as_table();
    if (table == nullptr) {
      throw ConfigError(fmt::format(
          "{}:{}: users.grants: each grant is a table {{ bucket = \"...\", access = \"read\" }}",
          path, node.source().begin.line));
    }
    TableReader r(path, "users.grants.", *table);
    Grant grant;
    std::string access;
    r.string("bucket", grant.bucket);
    r.string("access", access);
    r.string("owner", grant.owner);
    r.done();
    if (grant.bucket.empty()) r.fail(*table, "bucket", "missing");
    if (access == "read") {
      grant.read = true;
    } else if (access == "write") {
      grant.write = true;
    } else if (access == "readwrite") {
      grant.read = grant.write = true;
    } else {
      r.fail(*table, "access", "must be \"read\", \"write\" or \"readwrite\"");
    }
    grants.push_back(std::move(grant));
  }
  return grants;
}

void read_users(const std::string& path, const toml::array& array, std::vector<UserConfig>& users) {
  users.clear();
  std::set<std::string, std::less<>> names;
  std::set<std::string, std::less<>> keys;
  for (const toml::node& node : array) {
    const auto* table = node.as_table();
    if (table == nullptr) {
      throw ConfigError(fmt::format("{}:{}: users: each entry must be a table ([[users]])", path,
                                    node.source().begin.line));
    }
    TableReader r(path, "users.", *table);
    UserConfig user;
    r.string("name", user.name);
    r.string("access_key", user.access_key);
    r.string("secret_key", user.secret_key);
    r.boolean("admin", user.admin);
    if (const toml::array* grants = r.array("grants")) user.grants = read_grants(path, *grants);
    if (const toml::array* patterns = r.array("create_buckets")) {
      for (const toml::node& pattern : *patterns) {
        const auto* text = pattern.as_string();
        if (text == nullptr || text->get().empty()) {
          throw ConfigError(fmt::format(
              "{}:{}: users.create_buckets: each entry is a bucket name pattern (\"team-*\")", path,
              pattern.source().begin.line));
        }
        user.create_buckets.push_back(text->get());
      }
    }
    r.done();
    if (user.name.empty()) r.fail(*table, "name", "missing");
    if (user.access_key.size() < 3 || user.access_key.size() > 128) {
      r.fail(*table, "access_key", "must be 3 to 128 characters");
    }
    if (user.secret_key.size() < 8 || user.secret_key.size() > 128) {
      r.fail(*table, "secret_key", "must be 8 to 128 characters");
    }
    if (!names.insert(user.name).second) r.fail(*table, "name", "duplicate user name");
    if (!keys.insert(user.access_key).second) r.fail(*table, "access_key", "duplicate access key");
    users.push_back(std::move(user));
  }
}

// [[tier.upstream]] entries.
void read_upstreams(const std::string& path, const toml::array& array,
                    std::vector<UpstreamConfig>& upstreams) {
  upstreams.clear();
  for (const toml::node& node : array) {
    const auto* table = node.as_table();
    if (table == nullptr) {
      throw ConfigError(
          fmt::format("{}:{}: tier.upstream: each entry must be a table "
                      "([[tier.upstream]])",
                      path, node.source().begin.line));
    }
    TableReader r(path, "tier.upstream.", *table);
    UpstreamConfig u;
    r.string("name", u.name);
    r.string("endpoint", u.endpoint);
    r.string("region", u.region);
    r.choice("addressing", u.virtual_host, {{"path", false}, {"virtual", true}});
    r.boolean("tls_verify", u.tls_verify);
    r.string("ca_file", u.ca_file);
    r.string("credentials_file", u.credentials_file);
    r.integer("max_connections", u.max_connections, 1, 1024);
    r.integer("read_streams", u.read_streams, 1, 64);
    r.size("bytes_per_s", u.bytes_per_s, 64 * kKiB, 1024 * kGiB);
    r.size("write_bytes_per_s", u.write_bytes_per_s, 64 * kKiB, 1024 * kGiB);
    r.size("read_bytes_per_s", u.read_bytes_per_s, 64 * kKiB, 1024 * kGiB);
    r.integer("requests_per_s", u.requests_per_s, 1, 1'000'000);
    r.choice("checksums", u.checksums,
             {{"auto", UpstreamConfig::Checksums::kAuto},
              {"on", UpstreamConfig::Checksums::kOn},
              {"off", UpstreamConfig::Checksums::kOff}});
    r.done();
    const bool name_ok = !u.name.empty() && u.name.size() <= 64 &&
                         u.name.find_first_not_of(
                             "abcdefghijklmnopqrstuvwxyz"
                             "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") == std::string::npos;
    if (!name_ok) r.fail(*table, "name", "must be 1 to 64 letters, digits, '_' or '-'");
    if (!u.endpoint.starts_with("http://") && !u.endpoint.starts_with("https://")) {
      r.fail(*table, "endpoint", "must be an http:// or https:// URL");
    }
    if (u.region.empty()) r.fail(*table, "region", "must not be empty");
    if (u.credentials_file.empty()) r.fail(*table, "credentials_file", "missing");
    for (const UpstreamConfig& other : upstreams) {
      if (other.name == u.name) r.fail(*table, "name", "duplicate upstream name");
    }
    upstreams.push_back(std::move(u));
  }
}

// A name S3 would accept for a general purpose bucket (3 to 63 lowercase letters, digits, '.'
// and '-'); the S3 layer checks the finer rules when the bucket is created.
bool plausible_bucket_name(std::string_view name) {
  return name.size() >= 3 && name.size() <= 63 &&
         name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789.-") == std::string::npos;
}

// A directory bucket's name (S3 Express: base--zone--x-s3); the S3 layer checks the finer rules.
bool is_directory_name(std::string_view name) { return name.ends_with("--x-s3"); }
bool plausible_directory_name(std::string_view name) {
  const std::string_view rest = name.substr(0, name.size() - 6);
  const auto dashes = rest.rfind("--");
  return dashes != std::string_view::npos && dashes > 0 && dashes + 2 < rest.size();
}

// An admission rule's keys, read into `rule`.
void read_admit(TableReader& r, std::string_view admit_key, std::string_view size_key,
                AdmitRule& rule) {
  r.choice(admit_key, rule.admit,
           {{"first-miss", AdmitRule::Admit::kFirstMiss},
            {"second-miss", AdmitRule::Admit::kSecondMiss},
            {"never", AdmitRule::Admit::kNever}});
  r.size(size_key, rule.max_object_size_bytes, 0, 1024 * kTiB);
}

// [[tier.bucket.<name>]] entries of one binding: rules for the keys under a prefix, the longest
// matching one deciding. Each starts as `defaults` (what it leaves out is the bucket's), and
// `read_keys(reader, table, rule)` reads its own keys; every entry names a prefix, none twice.
// `own_key`: the bucket's own key for the rule.
template <typename Rule, typename ReadKeys>
void read_prefix_rules(const std::string& path, const toml::array& array, const std::string& name,
                       std::string_view own_key, const Rule& defaults, std::vector<Rule>& rules,
                       ReadKeys read_keys) {
  const std::string section = "tier.bucket." + name;
  for (const toml::node& node : array) {
    const auto* table = node.as_table();
    if (table == nullptr) {
      throw ConfigError(fmt::format("{}:{}: {}: each entry must be a table ([[{}]])", path,
                                    node.source().begin.line, section, section));
    }
    TableReader r(path, section + ".", *table);
    Rule rule = defaults;
    r.string("prefix", rule.prefix);
    read_keys(r, *table, rule);
    r.done();
    if (rule.prefix.empty()) {
      r.fail(*table, "prefix", fmt::format("missing (the bucket's own rule is {})", own_key));
    }
    for (const Rule& other : rules) {
      if (other.prefix == rule.prefix) r.fail(*table, "prefix", "given twice");
    }
    rules.push_back(std::move(rule));
  }
}

// A `revalidate` value of `table` (see TierBucketConfig::revalidate_after).
std::optional<milliseconds> parse_revalidate(const TableReader& r, const toml::table& table,
                                             const std::string& text) {
  if (text == "immutable") return std::nullopt;
  if (text == "always") return milliseconds(0);
  if (text.starts_with("ttl:")) {
    auto ttl = parse_duration(std::string_view(text).substr(4));
    if (!ttl || *ttl <= milliseconds(0)) {
      r.fail(table, "revalidate", fmt::format("'{}' has no duration (e.g. \"ttl:10m\")", text));
    }
    return *ttl;
  }
  r.fail(table, "revalidate",
         fmt::format("'{}' is none of immutable, always, ttl:<duration>", text));
}

// [[tier.bucket]] entries; their upstreams must be among `upstreams`.
void read_tier_buckets(const std::string& path, const toml::array& array,
                       const std::vector<UpstreamConfig>& upstreams,
                       std::vector<TierBucketConfig>& buckets) {
  buckets.clear();
  for (const toml::node& node : array) {
    const auto* table = node.as_table();
    if (table == nullptr) {
      throw ConfigError(
          fmt::format("{}:{}: tier.bucket: each entry must be a table "
                      "([[tier.bucket]])",
                      path, node.source().begin.line));
    }
    TableReader r(path, "tier.bucket.", *table);
    TierBucketConfig b;
    r.string("bucket", b.bucket);
    r.string("upstream", b.upstream);
    r.string("upstream_bucket", b.upstream_bucket);
    r.string("upstream_prefix", b.upstream_prefix);
    r.choice("mode", b.mode,
             {{"writeback", TierMode::kWriteback},
              {"writethrough", TierMode::kWritethrough},
              {"cache", TierMode::kCache}});
    read_admit(r, "admit", "admit_max_object_size", b.admit);
    if (const toml::array* a = r.array("admit_prefix")) {
      read_prefix_rules(path, *a, "admit_prefix", "admit", b.admit, b.admit_prefixes,
                        [](TableReader& rule_keys, const toml::table&, AdmitRule& rule) {
                          read_admit(rule_keys, "admit", "max_object_size", rule);
                        });
    }
    r.strings("pin", b.pin);
    std::string revalidate;
    r.string("revalidate", revalidate);
    if (const toml::array* a = r.array("revalidate_prefix")) {
      read_prefix_rules(
          path, *a, "revalidate_prefix", "revalidate", RevalidateRule{}, b.revalidate_prefixes,
          [](TableReader& rule_keys, const toml::table& rule_table, RevalidateRule& rule) {
            std::string text;
            rule_keys.string("revalidate", text);
            if (text.empty()) rule_keys.fail(rule_table, "revalidate", "missing");
            rule.revalidate_after = parse_revalidate(rule_keys, rule_table, text);
          });
    }
    r.choice("on_upstream_error", b.serve_stale, {{"serve-stale", true}, {"fail", false}});
    r.choice("on_upstream_delete", b.keep_upstream_deleted, {{"remove", false}, {"keep", true}});
    r.choice("list", b.list_local, {{"upstream", false}, {"local", true}});
    r.duration("negative_ttl", b.negative_ttl, milliseconds(0), std::chrono::hours(24));
    if (table->contains("pin_max")) {
      std::uint64_t cap = 0;
      r.size("pin_max", cap, 0, 1024 * kTiB);
      b.pin_max_bytes = cap;
    }
    r.done();
    if (!plausible_bucket_name(b.bucket)) r.fail(*table, "bucket", "not a bucket name");
    if (is_directory_name(b.bucket) && !plausible_directory_name(b.bucket)) {
      r.fail(*table, "bucket", "not a directory bucket name (base--zone--x-s3)");
    }
    if (b.upstream_bucket.empty()) b.upstream_bucket = b.bucket;
    if (!plausible_bucket_name(b.upstream_bucket)) {
      r.fail(*table, "upstream_bucket", "not a bucket name");
    }
    // An S3 Express directory bucket upstream takes only session-signed requests, which the
    // uploads do not make: the hot tier's golden copy lives in a general purpose bucket.
    if (is_directory_name(b.upstream_bucket)) {
      r.fail(*table, "upstream_bucket",
             "'" + b.upstream_bucket +
                 "' is a directory bucket; the upstream bucket must be a general purpose one "
                 "(name it with upstream_bucket)");
    }
    if (b.upstream_prefix.size() > 512) {
      r.fail(*table, "upstream_prefix", "must be at most 512 bytes");
    }
    if (b.list_local && b.mode != TierMode::kCache) {
      r.fail(*table, "list", "is for buckets in cache mode: the others list what is here");
    }
    if (revalidate.empty()) {
      if (b.mode == TierMode::kCache) b.revalidate_after = milliseconds(10LL * 60 * 1000);
    } else {
      b.revalidate_after = parse_revalidate(r, *table, revalidate);
    }
    const bool known = std::any_of(upstreams.begin(), upstreams.end(),
                                   [&](const UpstreamConfig& u) { return u.name == b.upstream; });
    if (!known) {
      r.fail(*table, "upstream",
             b.upstream.empty() ? std::string("missing")
                                : fmt::format("no [[tier.upstream]] is named '{}'", b.upstream));
    }
    for (const TierBucketConfig& other : buckets) {
      if (other.bucket == b.bucket) r.fail(*table, "bucket", "bound twice");
    }
    buckets.push_back(std::move(b));
  }
}

void read_writeback(const std::string& path, const toml::table& table, WritebackConfig& w) {
  TableReader r(path, "tier.writeback.", table);
  constexpr auto kDay = milliseconds(24LL * 3600 * 1000);
  std::uint64_t dirty = w.max_dirty_bytes.value_or(0);
  const bool dirty_set = table.contains("max_dirty");
  r.size("max_dirty", dirty, kMiB, 1024 * kTiB);
  if (dirty_set) w.max_dirty_bytes = dirty;
  r.duration("max_dirty_age", w.max_dirty_age, milliseconds(1000), 30 * kDay);
  r.duration("delay", w.delay, milliseconds(0), kDay);
  r.strings("commit_markers", w.commit_markers);
  r.size("multipart_threshold", w.multipart_threshold_bytes, 5 * kMiB, 5 * kGiB);
  r.size("part_size", w.part_size_bytes, 5 * kMiB, 5 * kGiB);
  r.integer("parallelism", w.parallelism, 1, 256);
  r.fraction("min_share", w.min_share);
  r.duration("retry_base", w.retry_base, milliseconds(10), kDay);
  r.duration("retry_cap", w.retry_cap, milliseconds(10), kDay);
  r.choice("on_conflict", w.on_conflict,
           {{"side-copy", WritebackConfig::OnConflict::kSideCopy},
            {"keep-upstream", WritebackConfig::OnConflict::kKeepUpstream},
            {"overwrite", WritebackConfig::OnConflict::kOverwrite}});
  r.done();
  if (w.retry_cap < w.retry_base) r.fail(table, "retry_cap", "must not be below retry_base");
}

void read_evict(const std::string& path, const toml::table& table, EvictConfig& e) {
  TableReader r(path, "tier.evict.", table);
  r.integer("high", e.high_percent, 1, 100);
  r.integer("low", e.low_percent, 0, 99);
  r.integer("full", e.full_percent, 1, 100);
  r.duration("min_resident", e.min_resident, milliseconds(0),
             milliseconds(365LL * 24 * 3600 * 1000));
  r.choice("policy", e.policy,
           {{"frequency", EvictConfig::Policy::kFrequency}, {"lru", EvictConfig::Policy::kLru}});
  r.done();
  if (e.low_percent >= e.high_percent) r.fail(table, "low", "must be below high");
  if (e.full_percent < e.high_percent) r.fail(table, "full", "must not be below high");
}

void read_tier(const std::string& path, const toml::table& table, TierConfig& tier) {
  TableReader r(path, "tier.", table);
  if (const toml::array* a = r.array("upstream")) read_upstreams(path, *a, tier.upstreams);
  if (const toml::array* a = r.array("bucket")) {
    read_tier_buckets(path, *a, tier.upstreams, tier.buckets);
  }
  if (const toml::table* t = r.table("writeback")) read_writeback(path, *t, tier.writeback);
  if (const toml::table* t = r.table("evict")) read_evict(path, *t, tier.evict);
  r.done();
}

}  // namespace

const UpstreamConfig* TierConfig::upstream(std::string_view name) const {
  for (const UpstreamConfig& u : upstreams) {
    if (u.name == name) return &u;
  }
  return nullptr;
}

const AdmitRule& TierBucketConfig::admission(std::string_view key) const {
  const AdmitRule* best = &admit;
  for (const AdmitRule& rule : admit_prefixes) {
    if (key.starts_with(rule.prefix) && rule.prefix.size() > best->prefix.size()) best = &rule;
  }
  return *best;
}

std::optional<milliseconds> TierBucketConfig::revalidation(std::string_view key) const {
  const RevalidateRule* best = nullptr;
  for (const RevalidateRule& rule : revalidate_prefixes) {
    if (key.starts_with(rule.prefix) &&
        (best == nullptr || rule.prefix.size() > best->prefix.size()))
      best = &rule;
  }
  return best != nullptr ? best->revalidate_after : revalidate_after;
}

const TierBucketConfig* TierConfig::binding(std::string_view bucket) const {
  for (const TierBucketConfig& b : buckets) {
    if (b.bucket == bucket) return &b;
  }
  return nullptr;
}

UpstreamCredentials read_upstream_credentials(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(fmt::format("{}: cannot be opened for reading", path));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  toml::table root;
  try {
    root = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    // The parser's description may quote the text, and the text holds secrets.
    throw ConfigError(
        fmt::format("{}:{}: not a TOML file of access_key, secret_key and "
                    "session_token",
                    path, e.source().begin.line));
  }
  TableReader r(path, "", root);
  UpstreamCredentials credentials;
  r.string("access_key", credentials.access_key);
  r.string("secret_key", credentials.secret_key);
  r.string("session_token", credentials.session_token);
  r.done();
  if (credentials.access_key.empty()) r.fail(root, "access_key", "missing");
  if (credentials.secret_key.empty()) r.fail(root, "secret_key", "missing");
  return credentials;
}

namespace {
// An eighth of the memory, at most 8 GiB (256 MiB where the memory is unknown).
std::uint64_t eighth_of_memory() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return 256 * kMiB;
  const std::uint64_t memory =
      static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page_size);
  return std::min<std::uint64_t>(memory / 8, 8 * kGiB);
}
}  // namespace

std::uint64_t StorageConfig::effective_cache_bytes() const {
  return cache_bytes ? *cache_bytes : eighth_of_memory();
}

std::uint64_t StorageConfig::effective_metadata_cache_bytes() const {
  return metadata_cache_bytes ? *metadata_cache_bytes : eighth_of_memory();
}

ListenAddress parse_listen(std::string_view text) {
  ListenAddress result;
  std::string_view port_text;
  if (!text.empty() && text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      throw ConfigError(fmt::format("'{}' is not [IPv6]:PORT", text));
    }
    result.host = std::string(text.substr(1, close - 1));
    port_text = text.substr(close + 2);
  } else {
    const auto colon = text.rfind(':');
    if (colon == std::string_view::npos) {
      throw ConfigError(fmt::format("'{}' is not ADDRESS:PORT", text));
    }
    if (colon > 0) result.host = std::string(text.substr(0, colon));
    port_text = text.substr(colon + 1);
  }
  unsigned port = 0;
  const auto [end, ec] =
      std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc{} || end != port_text.data() + port_text.size() || port > 65535 ||
      port_text.empty()) {
    throw ConfigError(fmt::format("'{}' has no valid port (0-65535)", text));
  }
  result.port = static_cast<std::uint16_t>(port);
  return result;
}

void apply_file(Config& config, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(fmt::format("{}: cannot be opened for reading", path));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw ConfigError(fmt::format("{}: cannot be read", path));
  apply_text(config, text, path);
}

void apply_text(Config& config, std::string_view text, const std::string& path) {
  toml::table root;
  try {
    root = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    const auto& where = e.source();
    if (where.begin.line == 0) throw ConfigError(fmt::format("{}: {}", path, e.description()));
    throw ConfigError(
        fmt::format("{}:{}:{}: {}", path, where.begin.line, where.begin.column, e.description()));
  }
  TableReader r(path, "", root);
  if (const toml::table* t = r.table("http")) read_http(path, *t, config.http);
  if (const toml::table* t = r.table("metrics")) read_metrics(path, *t, config.metrics);
  if (const toml::table* t = r.table("storage")) read_storage(path, *t, config.storage);
  if (const toml::table* t = r.table("s3")) read_s3(path, *t, config.s3);
  if (const toml::table* t = r.table("multipart")) read_multipart(path, *t, config.s3.multipart);
  if (const toml::table* t = r.table("log")) read_log(path, *t, config.log);
  if (const toml::array* a = r.array("users")) read_users(path, *a, config.users);
  if (const toml::table* t = r.table("tier")) read_tier(path, *t, config.tier);
  r.done();
  config.source = path;
}

namespace {
// Each leaf of `table` as "dotted.key" -> its value as TOML writes it. The tables of an array
// of tables are entries "name[i]."; any other array is one leaf.
void flatten(const toml::table& table, const std::string& prefix,
             std::map<std::string, std::string>& out) {
  for (const auto& [key, node] : table) {
    std::string name = prefix + std::string(key.str());
    if (const toml::table* t = node.as_table()) {
      flatten(*t, name + ".", out);
      continue;
    }
    if (const toml::array* a = node.as_array();
        a != nullptr && !a->empty() && a->is_array_of_tables()) {
      for (std::size_t i = 0; i < a->size(); ++i)
        flatten(*a->get(i)->as_table(), fmt::format("{}[{}].", name, i), out);
      continue;
    }
    std::ostringstream text;
    node.visit([&text](const auto& value) { text << value; });
    out.emplace(std::move(name), text.str());
  }
}
}  // namespace

std::vector<std::string> changed_keys(std::string_view before, std::string_view after) {
  std::map<std::string, std::string> a;
  std::map<std::string, std::string> b;
  try {
    flatten(toml::parse(before), "", a);
    flatten(toml::parse(after), "", b);
  } catch (const toml::parse_error&) {
    return {};
  }
  std::vector<std::string> changed;
  for (const auto& [key, value] : a) {
    auto it = b.find(key);
    if (it == b.end() || it->second != value) changed.push_back(key);
  }
  for (const auto& [key, value] : b) {
    if (!a.contains(key)) changed.push_back(key);
  }
  std::sort(changed.begin(), changed.end());
  return changed;
}

std::string_view tier_mode_name(TierMode mode) {
  switch (mode) {
    case TierMode::kWriteback:
      return "writeback";
    case TierMode::kWritethrough:
      return "writethrough";
    case TierMode::kCache:
      return "cache";
  }
  return "?";
}

namespace {
// `"name":"` followed by `value` JSON-escaped and its closing quote.
std::string binding_field(std::string_view name, std::string_view value) {
  std::string out = fmt::format("\"{}\":\"", name);
  log::append_json_escaped(out, value);
  out += '"';
  return out;
}
}  // namespace

std::string binding_json(const TierBucketConfig& bucket, const UpstreamConfig& upstream) {
  std::string out = "{";
  for (const auto& [name, value] :
       {std::pair<std::string_view, std::string_view>{"upstream", upstream.name},
        {"endpoint", upstream.endpoint},
        {"region", upstream.region},
        {"addressing", upstream.virtual_host ? "virtual" : "path"},
        {"upstream_bucket", bucket.upstream_bucket},
        {"upstream_prefix", bucket.upstream_prefix},
        {"mode", tier_mode_name(bucket.mode)}}) {
    if (out.size() > 1) out += ',';
    out += binding_field(name, value);
  }
  out += '}';
  return out;
}

// The JSON is ours and its values escaped, so each field appears exactly as binding_json writes
// it, and a quote inside a value is always escaped.
bool binding_sends_where(std::string_view binding, const TierBucketConfig& bucket) {
  for (const auto& [name, value] :
       {std::pair<std::string_view, std::string_view>{"upstream", bucket.upstream},
        {"upstream_bucket", bucket.upstream_bucket},
        {"upstream_prefix", bucket.upstream_prefix}}) {
    if (binding.find(binding_field(name, value)) == std::string_view::npos) return false;
  }
  return true;
}

std::string binding_prefix(std::string_view binding) {
  constexpr std::string_view kField = "\"upstream_prefix\":\"";
  const std::size_t at = binding.find(kField);
  if (at == std::string_view::npos) return {};
  // Undoes append_json_escaped: \", \\, \n, \r, \t, \u00XX.
  std::string prefix;
  for (std::size_t i = at + kField.size(); i < binding.size() && binding[i] != '"'; ++i) {
    if (binding[i] != '\\' || i + 1 >= binding.size()) {
      prefix += binding[i];
      continue;
    }
    const char escaped = binding[++i];
    if (escaped == 'u' && i + 4 < binding.size()) {
      unsigned byte = 0;
      std::from_chars(binding.data() + i + 3, binding.data() + i + 5, byte, 16);
      prefix += static_cast<char>(byte);
      i += 4;
    } else {
      prefix += escaped == 'n' ? '\n' : escaped == 'r' ? '\r' : escaped == 't' ? '\t' : escaped;
    }
  }
  return prefix;
}

std::size_t binding_prefix_bytes(std::string_view binding) {
  return binding_prefix(binding).size();
}

}  // namespace hots3::config
