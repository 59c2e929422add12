// What `hots3 admin` asks a running server (admins only): its state (GET /?x-hots3-status), its
// users and their grants (GET /?x-hots3-users), its buckets with owner, grants, binding and usage
// (GET /?x-hots3-buckets). JSON, for scripts and for the command's tables alike; never a secret.

#include "authorization.h"
#include "service.h"

#include "hots3/common/clock.h"
#include "hots3/common/logging.h"
#include "hots3/common/version.h"

#include <fmt/format.h>

#include <iterator>
#include <map>

namespace hots3::s3 {
namespace {

void string_array(std::string& out, const std::vector<std::string>& items) {
  out += '[';
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ',';
    log::append_json_quoted(out, items[i]);
  }
  out += ']';
}

std::string_view tier_name(storage::BucketTier tier) {
  switch (tier) {
    case storage::BucketTier::kNone:
      return "none";
    case storage::BucketTier::kWriteback:
      return "writeback";
    case storage::BucketTier::kWritethrough:
      return "writethrough";
    case storage::BucketTier::kCache:
      return "cache";
  }
  return "none";
}

// Admins only: AccessDenied for anyone else (sent), false then.
asio::awaitable<bool> admin_only(Service& s, Request& r) {
  if (r.auth.user->admin) co_return true;
  co_await s.send_error(r, Error(Code::kAccessDenied, "Only admin users may ask this."));
  co_return false;
}

asio::awaitable<void> send_json(Service& s, Request& r, std::string body) {
  http::Response head = s.response(200);
  head.add("Content-Type", "application/json");
  body += '\n';
  co_await r.exchange.respond(std::move(head), std::move(body));
}

// Every bucket with its usage (objects and bytes of its versions, and for a bound bucket where
// their data is), by name.
struct BucketUsage {
  storage::BucketRecord bucket;
  storage::TierSpace space;
};
asio::awaitable<Result<std::vector<BucketUsage>>> bucket_usage(Service& s) {
  auto buckets = s.store().list_buckets();
  if (!buckets) co_return Failure{buckets.error()};
  std::vector<std::int64_t> ids;
  ids.reserve(buckets->size());
  for (const auto& b : *buckets) ids.push_back(b.id);
  auto space = co_await s.store().tier_space(std::move(ids), now_ms());
  if (!space) co_return Failure{space.error()};
  std::map<std::int64_t, storage::TierSpace> by_id;
  for (auto& t : *space) by_id.emplace(t.bucket_id, t);
  std::vector<BucketUsage> out;
  out.reserve(buckets->size());
  for (auto& b : *buckets) {
    BucketUsage u{.bucket = std::move(b), .space = {}};
    if (auto it = by_id.find(u.bucket.id); it != by_id.end()) u.space = it->second;
    out.push_back(std::move(u));
  }
  co_return out;
}

void usage_members(std::string& out, const BucketUsage& u) {
  const storage::TierSpace& t = u.space;
  fmt::format_to(std::back_inserter(out), R"("objects":{},"bytes":{})", t.objects, t.bytes);
  if (u.bucket.tier == storage::BucketTier::kNone) return;
  fmt::format_to(std::back_inserter(out),
                 R"(,"dirty_objects":{},"dirty_bytes":{},"clean_objects":{},"clean_bytes":{},)"
                 R"("remote_objects":{},"remote_bytes":{},"pinned_bytes":{},)"
                 R"("evictable_bytes":{},"lost_objects":{})",
                 t.dirty_objects, t.dirty_bytes, t.clean_objects, t.clean_bytes, t.remote_objects,
                 t.remote_bytes, t.pinned_bytes, t.evictable_bytes, t.lost_objects);
}

}  // namespace

asio::awaitable<void> admin_status(Service& s, Request& r) {
  if (!co_await admin_only(s, r)) co_return;
  auto usage = co_await bucket_usage(s);
  if (!usage) co_return co_await s.send_error(r, from_errc(usage.error()));
  const storage::StoreStats st = s.store().stats();
  std::string out = "{\"version\":";
  log::append_json_quoted(out, kVersion);
  out += ',';
  if (const std::string server = s.server_status(); !server.empty()) out += server + ',';
  fmt::format_to(std::back_inserter(out),
                 R"("device":{{"io_engine":"{}","bytes":{},"used_bytes":{},"free_bytes":{},)"
                 R"("pending_free_bytes":{},"checksum_failures":{}}},)",
                 st.io_engine, st.device_bytes, st.used_bytes, st.free_bytes, st.pending_free_bytes,
                 st.checksum_failures);
  fmt::format_to(
      std::back_inserter(out), R"("catalog":{{"writes":{},"commits":{},"checkpoints":{}}},)",
      st.catalog_writer.writes, st.catalog_writer.commits, st.catalog_writer.writer_checkpoints);
  fmt::format_to(std::back_inserter(out),
                 R"("cache":{{"capacity_bytes":{},"used_bytes":{},"hits":{},"misses":{},)"
                 R"("evictions":{}}},)",
                 st.cache_capacity_bytes, st.cache_used_bytes, st.cache_hits, st.cache_misses,
                 st.cache_evictions);
  fmt::format_to(std::back_inserter(out),
                 R"("metadata_cache":{{"capacity_bytes":{},"used_bytes":{},"entries":{},)"
                 R"("hits":{},"misses":{}}},)",
                 st.metadata_cache_capacity_bytes, st.metadata_cache_used_bytes,
                 st.metadata_cache_entries, st.metadata_cache_hits, st.metadata_cache_misses);
  std::uint64_t objects = 0;
  std::uint64_t bytes = 0;
  out += "\"buckets\":[";
  for (std::size_t i = 0; i < usage->size(); ++i) {
    const BucketUsage& u = (*usage)[i];
    objects += u.space.objects;
    bytes += u.space.bytes;
    out += i > 0 ? ",{\"name\":" : "{\"name\":";
    log::append_json_quoted(out, u.bucket.name);
    fmt::format_to(std::back_inserter(out), R"(,"tier":"{}",)", tier_name(u.bucket.tier));
    usage_members(out, u);
    out += '}';
  }
  fmt::format_to(std::back_inserter(out), R"(],"objects":{},"bytes":{}}})", objects, bytes);
  co_await send_json(s, r, std::move(out));
}

asio::awaitable<void> admin_users(Service& s, Request& r) {
  if (!co_await admin_only(s, r)) co_return;
  const auto& users = s.users();
  std::string out = "{\"users\":[";
  for (std::size_t i = 0; i < users.size(); ++i) {
    const config::UserConfig& u = users[i];
    out += i > 0 ? ",{\"name\":" : "{\"name\":";
    log::append_json_quoted(out, u.name);
    out += ",\"access_key\":";  // an access key id names a user, as in every signed request
    log::append_json_quoted(out, u.access_key);
    fmt::format_to(std::back_inserter(out), R"(,"admin":{},"grants":[)", u.admin);
    for (std::size_t g = 0; g < u.grants.size(); ++g) {
      const config::Grant& grant = u.grants[g];
      out += g > 0 ? ",{\"bucket\":" : "{\"bucket\":";
      log::append_json_quoted(out, grant.bucket);
      out += ",\"owner\":";
      log::append_json_quoted(out, grant.owner);
      fmt::format_to(std::back_inserter(out), R"(,"read":{},"write":{}}})", grant.read,
                     grant.write);
    }
    out += "],\"create_buckets\":";
    string_array(out, u.create_buckets);
    out += '}';
  }
  out += "]}";
  co_await send_json(s, r, std::move(out));
}

asio::awaitable<void> admin_buckets(Service& s, Request& r) {
  if (!co_await admin_only(s, r)) co_return;
  auto usage = co_await bucket_usage(s);
  if (!usage) co_return co_await s.send_error(r, from_errc(usage.error()));
  const auto& users = s.users();
  std::string out = "{\"buckets\":[";
  for (std::size_t i = 0; i < usage->size(); ++i) {
    const BucketUsage& u = (*usage)[i];
    out += i > 0 ? ",{\"name\":" : "{\"name\":";
    log::append_json_quoted(out, u.bucket.name);
    out += ",\"owner\":";
    log::append_json_quoted(out, u.bucket.owner);
    fmt::format_to(std::back_inserter(out), R"(,"created_ms":{},"tier":"{}","upstream":)",
                   u.bucket.created_ms, tier_name(u.bucket.tier));
    // The binding as the catalog keeps it: JSON already, and without secrets.
    out += u.bucket.upstream.empty() ? std::string("null") : u.bucket.upstream;
    // Who else may do what here: each non-admin user's access as the grants give it (admins and
    // the owner may do anything).
    out += ",\"grants\":[";
    bool first = true;
    for (const config::UserConfig& user : users) {
      if (user.admin || user.name == u.bucket.owner) continue;
      const bool read = allowed(user, u.bucket, Access::kRead);
      const bool write = allowed(user, u.bucket, Access::kWrite);
      if (!read && !write) continue;
      out += first ? "{\"user\":" : ",{\"user\":";
      first = false;
      log::append_json_quoted(out, user.name);
      fmt::format_to(std::back_inserter(out), R"(,"read":{},"write":{}}})", read, write);
    }
    out += "],";
    usage_members(out, u);
    out += '}';
  }
  out += "]}";
  co_await send_json(s, r, std::move(out));
}

}  // namespace hots3::s3
