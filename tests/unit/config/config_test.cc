#include "hots3/config/config.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace hots3::config {
namespace {

namespace fs = std::filesystem;

class ConfigFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("hots3-config-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& text) {
    const auto path = (dir_ / "test.toml").string();
    std::ofstream(path) << text;
    return path;
  }

  // The message of the ConfigError that loading `text` throws ("" if none).
  std::string error_of(const std::string& text) {
    Config config;
    try {
      apply_file(config, write(text));
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "";
  }

  fs::path dir_;
};

TEST_F(ConfigFile, ShippedExampleParsesToTheDefaults) {
  Config config;
  apply_file(config, HOTS3_SOURCE_DIR "/conf/hots3.toml");
  const Config defaults;
  EXPECT_EQ(config.http.listen.host, defaults.http.listen.host);
  EXPECT_EQ(config.http.listen.port, defaults.http.listen.port);
  EXPECT_EQ(config.http.threads, defaults.http.threads);
  EXPECT_EQ(config.http.header_bytes_max, defaults.http.header_bytes_max);
  EXPECT_EQ(config.http.header_timeout, defaults.http.header_timeout);
  EXPECT_EQ(config.http.idle_timeout, defaults.http.idle_timeout);
  EXPECT_EQ(config.http.body_stall_timeout, defaults.http.body_stall_timeout);
  EXPECT_EQ(config.http.send_stall_timeout, defaults.http.send_stall_timeout);
  EXPECT_EQ(config.http.connections_max, defaults.http.connections_max);
  EXPECT_EQ(config.http.shutdown_grace, defaults.http.shutdown_grace);
  EXPECT_FALSE(config.http.tls.enabled());
  EXPECT_EQ(config.storage.data_dir, defaults.storage.data_dir);
  EXPECT_EQ(config.storage.device_path, defaults.storage.device_path);
  EXPECT_EQ(config.storage.device_size_bytes, defaults.storage.device_size_bytes);
  EXPECT_EQ(config.storage.io_engine, defaults.storage.io_engine);
  EXPECT_EQ(config.storage.inline_max_bytes, defaults.storage.inline_max_bytes);
  EXPECT_EQ(config.storage.cache_bytes, defaults.storage.cache_bytes);
  EXPECT_EQ(config.storage.metadata_cache_bytes, defaults.storage.metadata_cache_bytes);
  EXPECT_EQ(config.storage.io_buffer_bytes, defaults.storage.io_buffer_bytes);
  EXPECT_EQ(config.storage.io_buffers_per_worker, defaults.storage.io_buffers_per_worker);
  EXPECT_EQ(config.storage.stream_depth, defaults.storage.stream_depth);
  EXPECT_EQ(config.storage.etag_md5, defaults.storage.etag_md5);
  EXPECT_EQ(config.s3.region, defaults.s3.region);
  EXPECT_EQ(config.s3.domain, defaults.s3.domain);
  EXPECT_EQ(config.s3.clock_skew_max, defaults.s3.clock_skew_max);
  EXPECT_EQ(config.s3.single_put_max_bytes, defaults.s3.single_put_max_bytes);
  EXPECT_EQ(config.s3.metadata_max_bytes, defaults.s3.metadata_max_bytes);
  EXPECT_EQ(config.s3.region_check, defaults.s3.region_check);
  EXPECT_EQ(config.s3.multipart.abort_after, defaults.s3.multipart.abort_after);
  EXPECT_EQ(config.s3.multipart.sweep_interval, defaults.s3.multipart.sweep_interval);
  EXPECT_EQ(config.s3.multipart.complete_keepalive, defaults.s3.multipart.complete_keepalive);
  EXPECT_EQ(config.log.level, defaults.log.level);
  EXPECT_EQ(config.log.access_log_path, defaults.log.access_log_path);
  EXPECT_TRUE(config.users.empty());
  EXPECT_TRUE(config.tier.upstreams.empty());
  EXPECT_TRUE(config.tier.buckets.empty());
  EXPECT_EQ(config.tier.writeback.delay, defaults.tier.writeback.delay);
  EXPECT_EQ(config.tier.writeback.commit_markers, defaults.tier.writeback.commit_markers);
  EXPECT_EQ(config.tier.writeback.max_dirty_bytes, defaults.tier.writeback.max_dirty_bytes);
  EXPECT_EQ(config.tier.evict.high_percent, defaults.tier.evict.high_percent);
  EXPECT_EQ(config.tier.evict.low_percent, defaults.tier.evict.low_percent);
  EXPECT_EQ(config.tier.evict.full_percent, defaults.tier.evict.full_percent);
  EXPECT_EQ(config.tier.evict.min_resident, defaults.tier.evict.min_resident);
  EXPECT_EQ(config.tier.evict.policy, defaults.tier.evict.policy);
}

TEST_F(ConfigFile, MetricsHaveAnAddressOfTheirOwnAndABearerTokenForTheS3Port) {
  Config config;
  apply_file(config, write("[metrics]\nlisten = \"0.0.0.0:9464\"\n"
                           "bearer_token = \"0123456789abcdef\"\n"));
  ASSERT_TRUE(config.metrics.listen);
  EXPECT_EQ(config.metrics.listen->host, "0.0.0.0");
  EXPECT_EQ(config.metrics.listen->port, 9464);
  EXPECT_EQ(config.metrics.bearer_token, "0123456789abcdef");
  EXPECT_NE(error_of("[metrics]\nbearer_token = \"short\"\n").find("metrics.bearer_token: must be"),
            std::string::npos);
  EXPECT_NE(error_of("[metrics]\nlisten = \"nowhere\"\n").find("metrics.listen:"),
            std::string::npos);
  EXPECT_NE(error_of("[metrics]\nport = 1\n").find("metrics.port: unknown key"), std::string::npos);
  EXPECT_FALSE(Config{}.metrics.listen);  // off unless asked for
}

TEST_F(ConfigFile, ReadsValuesWithUnits) {
  Config config;
  apply_file(config, write(R"(
[http]
listen = "[::1]:0"
threads = 3
header_bytes_max = "128KiB"
idle_timeout = "1500ms"
header_timeout = 7
[http.tls]
certificate = "/c.pem"
private_key = "/k.pem"
[storage]
data_dir = "/srv/hots3"
device_size = "2GiB"
[log]
level = "debug"
access_log = ""
[[users]]
name = "a"
access_key = "AKIA1"
secret_key = "secret-one"
admin = true
[[users]]
name = "b"
access_key = "AKIA2"
secret_key = "secret-two"
grants = [{ bucket = "data-*", access = "read" }, { bucket = "ckpt", access = "readwrite" }]
[s3]
region = "eu-west-1"
domain = "s3.local"
clock_skew_max = "5m"
region_check = true
[multipart]
abort_after = "2d"
sweep_interval = "250ms"
complete_keepalive = 0
)"));
  EXPECT_EQ(config.http.listen.host, "::1");
  EXPECT_EQ(config.http.listen.port, 0);
  EXPECT_EQ(config.http.threads, 3U);
  EXPECT_EQ(config.http.header_bytes_max, 128U * 1024);
  EXPECT_EQ(config.http.idle_timeout, std::chrono::milliseconds(1500));
  EXPECT_EQ(config.http.header_timeout, std::chrono::milliseconds(7000));
  EXPECT_TRUE(config.http.tls.enabled());
  EXPECT_EQ(config.storage.data_dir, "/srv/hots3");
  EXPECT_EQ(config.storage.device_size_bytes, 2ULL << 30);
  EXPECT_EQ(config.log.level, log::Level::kDebug);
  EXPECT_EQ(config.log.access_log_path, "");
  ASSERT_EQ(config.users.size(), 2U);
  EXPECT_EQ(config.users[1].access_key, "AKIA2");
  EXPECT_TRUE(config.users[0].admin);
  EXPECT_FALSE(config.users[1].admin);
  ASSERT_EQ(config.users[1].grants.size(), 2U);
  EXPECT_EQ(config.users[1].grants[0].bucket, "data-*");
  EXPECT_TRUE(config.users[1].grants[0].read);
  EXPECT_FALSE(config.users[1].grants[0].write);
  EXPECT_TRUE(config.users[1].grants[1].write);
  EXPECT_EQ(config.s3.region, "eu-west-1");
  EXPECT_EQ(config.s3.domain, "s3.local");
  EXPECT_EQ(config.s3.clock_skew_max, std::chrono::seconds(300));
  EXPECT_TRUE(config.s3.region_check);
  EXPECT_EQ(config.s3.multipart.abort_after, std::chrono::hours(48));
  EXPECT_EQ(config.s3.multipart.sweep_interval, std::chrono::milliseconds(250));
  EXPECT_EQ(config.s3.multipart.complete_keepalive, std::chrono::milliseconds(0));
}

TEST_F(ConfigFile, CacheSizesAreAutomaticOrASize) {
  Config config;
  EXPECT_GT(config.storage.effective_metadata_cache_bytes(), 0u);
  EXPECT_LE(config.storage.effective_metadata_cache_bytes(), 8ull << 30);
  apply_file(config, write("[storage]\ncache_size = \"2GiB\"\nmetadata_cache_size = \"512MiB\"\n"));
  EXPECT_EQ(config.storage.effective_cache_bytes(), 2ull << 30);
  EXPECT_EQ(config.storage.effective_metadata_cache_bytes(), 512ull << 20);
  apply_file(config, write("[storage]\nmetadata_cache_size = 0\n"));
  EXPECT_EQ(config.storage.effective_metadata_cache_bytes(), 0u);
  EXPECT_EQ(config.storage.effective_cache_bytes(),
            2ull << 30);  // a later file keeps what it does not set
  apply_file(config, write("[storage]\nmetadata_cache_size = \"auto\"\n"));
  EXPECT_FALSE(config.storage.metadata_cache_bytes.has_value());
  EXPECT_NE(
      error_of("[storage]\nmetadata_cache_size = \"lots\"\n").find("storage.metadata_cache_size:"),
      std::string::npos);
}

TEST_F(ConfigFile, UnknownKeysNameTheFileLineAndKey) {
  const std::string message = error_of("[http]\nthreads = 1\nidel_timeout = \"5s\"\n");
  EXPECT_NE(message.find("test.toml:3: http.idel_timeout: unknown key"), std::string::npos)
      << message;
  EXPECT_NE(error_of("[htp]\n").find("htp: unknown key"), std::string::npos);
  EXPECT_NE(error_of("[http.tls]\ncert = \"x\"\n").find("http.tls.cert: unknown key"),
            std::string::npos);
  EXPECT_NE(
      error_of("[[users]]\nname=\"a\"\naccess_key=\"abc\"\nsecret_key=\"12345678\"\nrole=\"x\"\n")
          .find("users.role: unknown key"),
      std::string::npos);
}

TEST_F(ConfigFile, BadValuesNameTheKey) {
  EXPECT_NE(error_of("[http]\nthreads = \"many\"\n").find("http.threads: expected a whole number"),
            std::string::npos);
  EXPECT_NE(error_of("[http]\nthreads = 5000\n").find("http.threads: must be between"),
            std::string::npos);
  EXPECT_NE(error_of("[http]\nheader_bytes_max = \"12 parsecs\"\n").find("http.header_bytes_max:"),
            std::string::npos);
  EXPECT_NE(error_of("[http]\nheader_bytes_max = 100\n").find("must be between 8 KiB"),
            std::string::npos);
  EXPECT_NE(error_of("[http]\nidle_timeout = \"soon\"\n").find("http.idle_timeout:"),
            std::string::npos);
  EXPECT_NE(error_of("[http]\nlisten = \"localhost\"\n").find("http.listen:"), std::string::npos);
  EXPECT_NE(error_of("[log]\nlevel = \"loud\"\n").find("log.level:"), std::string::npos);
  EXPECT_NE(error_of("[http.tls]\ncertificate = \"/c\"\n").find("set together"), std::string::npos);
  EXPECT_NE(error_of("[storage]\ndata_dir = \"\"\n").find("storage.data_dir"), std::string::npos);
  EXPECT_NE(error_of("[[users]]\nname=\"a\"\naccess_key=\"abc\"\nsecret_key=\"short\"\n")
                .find("users.secret_key"),
            std::string::npos);
  EXPECT_NE(error_of("http = 3\n").find("http: expected a table"), std::string::npos);
  EXPECT_NE(error_of("[storage]\nio_engine = \"aio\"\n").find("storage.io_engine"),
            std::string::npos);
  EXPECT_NE(error_of("[storage]\netag = \"sha\"\n").find("storage.etag"), std::string::npos);
  EXPECT_NE(error_of("[storage]\nio_buffer_size = \"100KiB\"\n").find("multiple of 64 KiB"),
            std::string::npos);
  EXPECT_NE(error_of("[[users]]\nname=\"a\"\naccess_key=\"abc\"\nsecret_key=\"12345678\"\ngrants=[{"
                     "bucket=\"x\", access=\"all\"}]\n")
                .find("users.grants.access"),
            std::string::npos);
  EXPECT_NE(error_of("[http\n").find("test.toml:1:"), std::string::npos);
  EXPECT_NE(error_of("[multipart]\nabort_after = \"a week\"\n").find("multipart.abort_after:"),
            std::string::npos);
  EXPECT_NE(error_of("[multipart]\nabort_after = -1\n").find("multipart.abort_after:"),
            std::string::npos);
  EXPECT_NE(error_of("[multipart]\nsweep_interval = \"0s\"\n")
                .find("multipart.sweep_interval: must be between"),
            std::string::npos);
  EXPECT_NE(
      error_of("[multipart]\nabort_afer = \"1d\"\n").find("multipart.abort_afer: unknown key"),
      std::string::npos);
}

TEST_F(ConfigFile, DuplicateUsersAreRejected) {
  const std::string two = R"(
[[users]]
name = "a"
access_key = "SAME"
secret_key = "secret-one"
[[users]]
name = "b"
access_key = "SAME"
secret_key = "secret-two"
)";
  EXPECT_NE(error_of(two).find("duplicate access key"), std::string::npos);
}

constexpr const char* kTier = R"(
[[tier.upstream]]
name = "golden"
endpoint = "http://127.0.0.1:9100"
region = "eu-west-1"
addressing = "virtual"
credentials_file = "/etc/hots3/golden.toml"
max_connections = 4
read_streams = 3
bytes_per_s = "40MiB"
write_bytes_per_s = "20MiB"
read_bytes_per_s = "30MiB"
requests_per_s = 300
checksums = "off"

[[tier.bucket]]
bucket = "ckpt"
upstream = "golden"
upstream_bucket = "team-ckpt"
upstream_prefix = "rack7/"
mode = "writethrough"

[[tier.bucket]]
bucket = "data"
upstream = "golden"
admit = "second-miss"
admit_max_object_size = "8GiB"

[[tier.bucket.admit_prefix]]
prefix = "scratch/"
admit = "never"

[[tier.bucket.admit_prefix]]
prefix = "scratch/keep/"
max_object_size = "1GiB"

[tier.writeback]
max_dirty = "2GiB"
max_dirty_age = "10m"
delay = "250ms"
commit_markers = ["**/.metadata", "**/COMMIT"]
multipart_threshold = "32MiB"
part_size = "8MiB"
parallelism = 4
min_share = "25%"
on_conflict = "keep-upstream"

[tier.evict]
high = 85
low = 70
full = 95
min_resident = "30m"
policy = "lru"
)";

TEST_F(ConfigFile, TierUpstreamsAndBindings) {
  Config config;
  apply_file(config, write(kTier));
  ASSERT_EQ(config.tier.upstreams.size(), 1U);
  const UpstreamConfig& u = config.tier.upstreams[0];
  EXPECT_EQ(u.endpoint, "http://127.0.0.1:9100");
  EXPECT_EQ(u.region, "eu-west-1");
  EXPECT_TRUE(u.virtual_host);
  EXPECT_EQ(u.max_connections, 4U);
  EXPECT_EQ(u.read_streams, 3U);
  EXPECT_EQ(u.bytes_per_s, 40 * kMiB);
  EXPECT_EQ(u.write_bytes_per_s, 20 * kMiB);
  EXPECT_EQ(u.read_bytes_per_s, 30 * kMiB);
  EXPECT_EQ(u.requests_per_s, 300U);
  EXPECT_EQ(u.checksums, UpstreamConfig::Checksums::kOff);
  EXPECT_EQ(config.tier.upstream("golden"), &u);
  EXPECT_EQ(config.tier.upstream("other"), nullptr);
  const TierBucketConfig* ckpt = config.tier.binding("ckpt");
  ASSERT_NE(ckpt, nullptr);
  EXPECT_EQ(ckpt->upstream_bucket, "team-ckpt");
  EXPECT_EQ(ckpt->upstream_prefix, "rack7/");
  EXPECT_EQ(ckpt->mode, TierMode::kWritethrough);
  const TierBucketConfig* data = config.tier.binding("data");
  ASSERT_NE(data, nullptr);
  EXPECT_EQ(data->upstream_bucket, "data");  // the local name when not given
  EXPECT_EQ(data->mode, TierMode::kWriteback);
  // Admission: the longest matching prefix decides; what it leaves out is the bucket's.
  using Admit = AdmitRule::Admit;
  EXPECT_EQ(ckpt->admission("any").admit, Admit::kFirstMiss);
  EXPECT_EQ(ckpt->admission("any").max_object_size_bytes, 0U);
  EXPECT_EQ(data->admission("train/0").admit, Admit::kSecondMiss);
  EXPECT_EQ(data->admission("train/0").max_object_size_bytes, 8 * kGiB);
  EXPECT_EQ(data->admission("scratch/x").admit, Admit::kNever);
  EXPECT_EQ(data->admission("scratch/x").max_object_size_bytes, 8 * kGiB);
  EXPECT_EQ(data->admission("scratch/keep/x").admit, Admit::kSecondMiss);
  EXPECT_EQ(data->admission("scratch/keep/x").max_object_size_bytes, kGiB);
  EXPECT_EQ(data->admission("scratch").admit, Admit::kSecondMiss);
  const WritebackConfig& w = config.tier.writeback;
  EXPECT_EQ(w.max_dirty_bytes, 2 * kGiB);
  EXPECT_EQ(w.max_dirty_age, std::chrono::minutes(10));
  EXPECT_EQ(w.delay, milliseconds(250));
  EXPECT_EQ(w.commit_markers, (std::vector<std::string>{"**/.metadata", "**/COMMIT"}));
  EXPECT_EQ(w.multipart_threshold_bytes, 32 * kMiB);
  EXPECT_EQ(w.part_size_bytes, 8 * kMiB);
  EXPECT_EQ(w.parallelism, 4U);
  EXPECT_DOUBLE_EQ(w.min_share, 0.25);
  EXPECT_EQ(w.on_conflict, WritebackConfig::OnConflict::kKeepUpstream);
  const EvictConfig& e = config.tier.evict;
  EXPECT_EQ(e.high_percent, 85U);
  EXPECT_EQ(e.low_percent, 70U);
  EXPECT_EQ(e.full_percent, 95U);
  EXPECT_EQ(e.min_resident, std::chrono::minutes(30));
  EXPECT_EQ(e.policy, EvictConfig::Policy::kLru);
}

TEST_F(ConfigFile, TierMistakesNameTheKey) {
  const std::string upstream =
      "[[tier.upstream]]\nname = \"golden\"\nendpoint = \"http://h:1\"\n"
      "credentials_file = \"/c\"\n";
  EXPECT_EQ(error_of(upstream), "");
  EXPECT_NE(error_of(upstream + "mode = \"x\"\n").find("tier.upstream.mode: unknown key"),
            std::string::npos);
  EXPECT_NE(error_of("[[tier.upstream]]\nname = \"g\"\nendpoint = \"h:1\"\n"
                     "credentials_file = \"/c\"\n")
                .find("tier.upstream.endpoint: must be an http:// or https:// URL"),
            std::string::npos);
  EXPECT_NE(error_of("[[tier.upstream]]\nname = \"g\"\nendpoint = \"http://h\"\n")
                .find("tier.upstream.credentials_file: missing"),
            std::string::npos);
  EXPECT_NE(error_of(upstream + "addressing = \"vhost\"\n")
                .find("tier.upstream.addressing: must be one of \"path\", \"virtual\""),
            std::string::npos);
  EXPECT_NE(error_of(upstream + upstream).find("duplicate upstream name"), std::string::npos);
  EXPECT_NE(error_of(upstream + "[[tier.bucket]]\nbucket = \"ckpt\"\nupstream = \"cold\"\n")
                .find("tier.bucket.upstream: no [[tier.upstream]] is named 'cold'"),
            std::string::npos);
  EXPECT_NE(error_of(upstream + "[[tier.bucket]]\nbucket = \"Ckpt\"\nupstream = \"golden\"\n")
                .find("tier.bucket.bucket: not a bucket name"),
            std::string::npos);
  // A directory bucket binds to a general purpose bucket upstream, named as such.
  const std::string directory =
      "[[tier.bucket]]\nbucket = \"ckpt--use1-az4--x-s3\"\nupstream = \"golden\"\n";
  EXPECT_EQ(error_of(upstream + directory + "upstream_bucket = \"ckpt\"\n"), "");
  EXPECT_NE(error_of(upstream + directory)
                .find("tier.bucket.upstream_bucket: 'ckpt--use1-az4--x-s3' is a directory bucket"),
            std::string::npos);
  EXPECT_NE(error_of(upstream + "[[tier.bucket]]\nbucket = \"ckpt--x-s3\"\nupstream = \"golden\"\n")
                .find("tier.bucket.bucket: not a directory bucket name"),
            std::string::npos);
  EXPECT_NE(error_of(upstream + "[[tier.bucket]]\nbucket = \"ckpt\"\nupstream = \"golden\"\n"
                                "mode = \"writearound\"\n")
                .find("tier.bucket.mode: must be one of"),
            std::string::npos);
  const std::string bound = "[[tier.bucket]]\nbucket = \"ckpt\"\nupstream = \"golden\"\n";
  EXPECT_NE(error_of(upstream + bound + bound).find("tier.bucket.bucket: bound twice"),
            std::string::npos);
  // Revalidation: immutable unless said, but every ten minutes in cache mode.
  const auto binding = [&](const std::string& more) {
    Config c;
    apply_text(c, upstream + bound + more, "t.toml");
    return c.tier.buckets.at(0);
  };
  EXPECT_EQ(binding("").revalidate_after, std::nullopt);
  EXPECT_EQ(binding("mode = \"cache\"\n").revalidate_after, std::chrono::minutes(10));
  EXPECT_EQ(binding("mode = \"cache\"\nrevalidate = \"immutable\"\n").revalidate_after,
            std::nullopt);
  EXPECT_EQ(binding("revalidate = \"always\"\n").revalidate_after, milliseconds(0));
  const TierBucketConfig ttl = binding(
      "revalidate = \"ttl:90s\"\non_upstream_error = \"fail\"\non_upstream_delete = \"keep\"\n");
  EXPECT_EQ(ttl.revalidate_after, std::chrono::seconds(90));
  EXPECT_FALSE(ttl.serve_stale);
  EXPECT_TRUE(ttl.keep_upstream_deleted);
  EXPECT_EQ(binding("").negative_ttl, milliseconds(0));
  EXPECT_EQ(binding("negative_ttl = \"30s\"\n").negative_ttl, std::chrono::seconds(30));
  EXPECT_TRUE(binding("").serve_stale);
  EXPECT_FALSE(binding("").keep_upstream_deleted);
  EXPECT_NE(error_of(upstream + bound + "revalidate = \"ttl:\"\n")
                .find("tier.bucket.revalidate: 'ttl:' has no duration"),
            std::string::npos);
  EXPECT_NE(error_of(upstream + bound + "revalidate = \"sometimes\"\n")
                .find("tier.bucket.revalidate: 'sometimes' is none of"),
            std::string::npos);
  EXPECT_NE(error_of(upstream + bound + "on_upstream_error = \"retry\"\n")
                .find("tier.bucket.on_upstream_error: must be one of"),
            std::string::npos);
  // By prefix: the longest that matches decides, else the bucket's rule.
  const TierBucketConfig prefixed = binding(
      "mode = \"cache\"\n[[tier.bucket.revalidate_prefix]]\nprefix = \"live/\"\n"
      "revalidate = \"always\"\n[[tier.bucket.revalidate_prefix]]\nprefix = \"live/frozen/\"\n"
      "revalidate = \"immutable\"\n[[tier.bucket.revalidate_prefix]]\nprefix = \"day/\"\n"
      "revalidate = \"ttl:1d\"\n");
  EXPECT_EQ(prefixed.revalidation("other"), std::chrono::minutes(10));
  EXPECT_EQ(prefixed.revalidation("live/x"), milliseconds(0));
  EXPECT_EQ(prefixed.revalidation("live/frozen/x"), std::nullopt);
  EXPECT_EQ(prefixed.revalidation("day/x"), std::chrono::hours(24));
  EXPECT_EQ(prefixed.revalidation("live"), std::chrono::minutes(10));
  const std::string by_prefix = "[[tier.bucket.revalidate_prefix]]\nprefix = \"a/\"\n";
  EXPECT_NE(error_of(upstream + bound + by_prefix)
                .find("tier.bucket.revalidate_prefix.revalidate: missing"),
            std::string::npos);
  EXPECT_NE(error_of(upstream + bound + by_prefix + "revalidate = \"often\"\n")
                .find("tier.bucket.revalidate_prefix.revalidate: 'often' is none of"),
            std::string::npos);
  EXPECT_NE(error_of(upstream + bound + by_prefix + "revalidate = \"always\"\n" + by_prefix +
                     "revalidate = \"always\"\n")
                .find("tier.bucket.revalidate_prefix.prefix: given twice"),
            std::string::npos);
  EXPECT_NE(
      error_of(upstream + bound + "[[tier.bucket.revalidate_prefix]]\nrevalidate = \"always\"\n")
          .find("tier.bucket.revalidate_prefix.prefix: missing"),
      std::string::npos);
  // Listings: the upstream's unless said; the catalog's only in cache mode.
  EXPECT_FALSE(binding("mode = \"cache\"\n").list_local);
  EXPECT_TRUE(binding("mode = \"cache\"\nlist = \"local\"\n").list_local);
  EXPECT_FALSE(binding("mode = \"cache\"\nlist = \"upstream\"\n").list_local);
  EXPECT_NE(error_of(upstream + bound + "list = \"local\"\n")
                .find("tier.bucket.list: is for buckets in cache mode"),
            std::string::npos);
  EXPECT_NE(error_of(upstream + bound + "mode = \"cache\"\nlist = \"catalog\"\n")
                .find("tier.bucket.list: must be one of"),
            std::string::npos);
  EXPECT_NE(
      error_of(upstream + bound + "admit = \"third-miss\"\n")
          .find("tier.bucket.admit: must be one of \"first-miss\", \"second-miss\", \"never\""),
      std::string::npos);
  const std::string rule = "[[tier.bucket.admit_prefix]]\nprefix = \"tmp/\"\n";
  EXPECT_EQ(error_of(upstream + bound + rule), "");
  EXPECT_NE(
      error_of(upstream + bound + rule + rule).find("tier.bucket.admit_prefix.prefix: given twice"),
      std::string::npos);
  EXPECT_NE(error_of(upstream + bound + "[[tier.bucket.admit_prefix]]\nadmit = \"never\"\n")
                .find("tier.bucket.admit_prefix.prefix: missing"),
            std::string::npos);
  EXPECT_NE(error_of(upstream + bound + rule + "admit_max_object_size = \"1GiB\"\n")
                .find("tier.bucket.admit_prefix.admit_max_object_size: unknown key"),
            std::string::npos);
  EXPECT_NE(error_of("[tier.writeback]\nparallelism = 0\n").find("tier.writeback.parallelism"),
            std::string::npos);
  EXPECT_NE(error_of("[tier.writeback]\npart_size = \"1MiB\"\n").find("tier.writeback.part_size"),
            std::string::npos);
  for (const char* share : {"1.5", "-0.1", "\"20\"", "\"%\"", "\"x%\"", "\"120%\"", "true"}) {
    EXPECT_NE(error_of(std::string("[tier.writeback]\nmin_share = ") + share + "\n")
                  .find("tier.writeback.min_share"),
              std::string::npos)
        << share;
  }
  for (const auto& [share, value] :
       {std::pair{"0.3", 0.3}, {"0", 0.0}, {"1", 1.0}, {"\"7.5%\"", 0.075}}) {
    Config config;
    apply_file(config, write(std::string("[tier.writeback]\nmin_share = ") + share + "\n"));
    EXPECT_DOUBLE_EQ(config.tier.writeback.min_share, value) << share;
  }
  EXPECT_NE(
      error_of("[tier.writeback]\ncommit_markers = [\"\"]\n").find("tier.writeback.commit_markers"),
      std::string::npos);
  EXPECT_NE(
      error_of("[tier.evict]\nhigh = 80\nlow = 80\n").find("tier.evict.low: must be below high"),
      std::string::npos);
  EXPECT_NE(
      error_of("[tier.evict]\nhigh = 90\nfull = 85\n").find("tier.evict.full: must not be below"),
      std::string::npos);
  EXPECT_NE(
      error_of("[tier.evict]\nhigh = 101\n").find("tier.evict.high: must be between 1 and 100"),
      std::string::npos);
  EXPECT_NE(error_of("[tier]\nupstreams = []\n").find("tier.upstreams: unknown key"),
            std::string::npos);
  EXPECT_NE(error_of("[[tier.upstream]]\nname = \"u\"\nread_streams = 0\n")
                .find("tier.upstream.read_streams: must be between 1 and 64"),
            std::string::npos);
}

TEST_F(ConfigFile, UpstreamCredentialsNeverQuoteTheSecret) {
  const auto path = (dir_ / "golden.toml").string();
  std::ofstream(path) << "access_key = \"AKIAGOLDEN\"\nsecret_key = \"s3cr3t-value\"\n";
  const UpstreamCredentials c = read_upstream_credentials(path);
  EXPECT_EQ(c.access_key, "AKIAGOLDEN");
  EXPECT_EQ(c.secret_key, "s3cr3t-value");
  EXPECT_EQ(c.session_token, "");
  std::ofstream(path) << "access_key = \"AKIAGOLDEN\"\nsecret_key = s3cr3t-value\n";
  try {
    read_upstream_credentials(path);
    ADD_FAILURE() << "a file that is not TOML was read";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()).find("s3cr3t"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("golden.toml:2"), std::string::npos) << e.what();
  }
  std::ofstream(path) << "access_key = \"AKIAGOLDEN\"\n";
  EXPECT_THROW(read_upstream_credentials(path), ConfigError);
  EXPECT_THROW(read_upstream_credentials((dir_ / "absent.toml").string()), ConfigError);
}

TEST_F(ConfigFile, MissingFile) {
  Config config;
  EXPECT_THROW(apply_file(config, (dir_ / "absent.toml").string()), ConfigError);
}

TEST(ParseListen, Forms) {
  EXPECT_EQ(parse_listen("0.0.0.0:80").host, "0.0.0.0");
  EXPECT_EQ(parse_listen("0.0.0.0:80").port, 80);
  EXPECT_EQ(parse_listen(":9001").host, "127.0.0.1");
  EXPECT_EQ(parse_listen("[::]:9001").host, "::");
  EXPECT_EQ(parse_listen("localhost:0").port, 0);
  EXPECT_THROW(parse_listen("1.2.3.4"), ConfigError);
  EXPECT_THROW(parse_listen("1.2.3.4:99999"), ConfigError);
  EXPECT_THROW(parse_listen("1.2.3.4:"), ConfigError);
  EXPECT_THROW(parse_listen("[::1:80"), ConfigError);
}

class Credentials : public ConfigFile {
 protected:
  void SetUp() override {
    ConfigFile::SetUp();
    ::unsetenv("HOTS3_ACCESS_KEY");
    ::unsetenv("HOTS3_SECRET_KEY");
  }
  void TearDown() override {
    ::unsetenv("HOTS3_ACCESS_KEY");
    ::unsetenv("HOTS3_SECRET_KEY");
    ConfigFile::TearDown();
  }
};

TEST_F(Credentials, GeneratedOncePerDataDirectory) {
  Config config;
  config.storage.data_dir = dir_.string();
  const ResolvedUsers first = resolve_users(config);
  ASSERT_TRUE(first.generated);
  ASSERT_EQ(first.users.size(), 1U);
  EXPECT_EQ(first.users[0].access_key.size(), 20U);
  EXPECT_EQ(first.users[0].secret_key.size(), 40U);
  EXPECT_EQ(fs::status(first.credentials_path).permissions() & fs::perms::group_all,
            fs::perms::none);
  EXPECT_FALSE(first.reused);
  const ResolvedUsers second = resolve_users(config);
  EXPECT_TRUE(second.reused);
  EXPECT_EQ(second.users[0].access_key, first.users[0].access_key);
  EXPECT_EQ(second.users[0].secret_key, first.users[0].secret_key);
}

TEST_F(Credentials, EnvironmentSetsTheFirstUser) {
  Config config;
  config.storage.data_dir = dir_.string();
  ::setenv("HOTS3_ACCESS_KEY", "ENVKEY", 1);
  ::setenv("HOTS3_SECRET_KEY", "envsecret123", 1);
  const ResolvedUsers users = resolve_users(config);
  EXPECT_FALSE(users.generated);
  ASSERT_EQ(users.users.size(), 1U);
  EXPECT_EQ(users.users[0].access_key, "ENVKEY");
  EXPECT_FALSE(fs::exists(dir_ / "credentials"));
  ::unsetenv("HOTS3_SECRET_KEY");
  EXPECT_THROW(resolve_users(config), ConfigError);
}

TEST_F(Credentials, ConfiguredUsersWin) {
  Config config;
  config.storage.data_dir = dir_.string();
  UserConfig user;
  user.name = "a";
  user.access_key = "AKIA1";
  user.secret_key = "secret-one";
  config.users.push_back(user);
  const ResolvedUsers users = resolve_users(config);
  EXPECT_FALSE(users.generated);
  EXPECT_EQ(users.users[0].access_key, "AKIA1");
}

TEST(TierBinding, TheCatalogsJsonSaysWhereAndHowLongThePrefixIs) {
  UpstreamConfig u;
  u.name = "golden";
  u.endpoint = "http://10.0.0.5:9000";
  TierBucketConfig b;
  b.bucket = "ckpt";
  b.upstream = "golden";
  b.upstream_bucket = "team-ckpt";
  // Every escape the JSON may hold: a quote, a backslash, a tab, a control character.
  b.upstream_prefix = std::string("r\"7\\\t\x01/\xc3\xa9", 9);
  const std::string json = binding_json(b, u);
  EXPECT_EQ(json.find("secret"), std::string::npos);
  EXPECT_EQ(binding_prefix(json), b.upstream_prefix);
  EXPECT_EQ(binding_prefix_bytes(json), b.upstream_prefix.size());
  EXPECT_TRUE(binding_sends_where(json, b));
  TierBucketConfig moved = b;
  moved.upstream_prefix = "r";
  EXPECT_FALSE(binding_sends_where(json, moved));
  moved = b;
  moved.upstream_bucket = "team";
  EXPECT_FALSE(binding_sends_where(json, moved));
  b.upstream_prefix.clear();
  EXPECT_EQ(binding_prefix_bytes(binding_json(b, u)), 0U);
  EXPECT_EQ(binding_prefix_bytes("{}"), 0U);
}

}  // namespace
}  // namespace hots3::config

TEST(ChangedKeys, NamesEachLeafThatDiffersAndTheEntriesOfArraysOfTables) {
  const std::string before = R"(
[http]
connections_max = 10
[log]
level = "info"
[[users]]
name = "a"
grants = [{ bucket = "x-*", access = "read" }]
[[users]]
name = "b"
)";
  // Unchanged text, whatever its layout: nothing.
  EXPECT_TRUE(hots3::config::changed_keys(before, before + "\n# a comment\n").empty());
  const std::string after = R"(
[http]
connections_max = 20
[log]
[[users]]
name = "a"
grants = [{ bucket = "x-*", access = "readwrite" }]
[[users]]
name = "b"
[storage]
cache_size = "1GiB"
)";
  EXPECT_EQ(hots3::config::changed_keys(before, after),
            (std::vector<std::string>{"http.connections_max", "log.level", "storage.cache_size",
                                      "users[0].grants[0].access"}));
  // A text that does not parse names nothing (the reload refuses it before).
  EXPECT_TRUE(hots3::config::changed_keys(before, "[http").empty());
}
