// `hots3 admin status|users|buckets`. The server answers JSON, which scripts take as it is
// (--json); people get it as tables. Boost.JSON reads it: its implementation is compiled here
// (header-only mode), the one place that parses JSON.

#include "admin_commands.h"

#include "hots3/common/units.h"
#include "hots3/http/client.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/json/src.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

namespace hots3::app {
namespace {

namespace asio = boost::asio;
namespace json = boost::json;

std::uint64_t number(const json::object& o, std::string_view name) {
  const json::value* v = o.if_contains(name);
  if (v == nullptr) return 0;
  if (v->is_uint64()) return v->as_uint64();
  if (v->is_int64()) return static_cast<std::uint64_t>(std::max<std::int64_t>(0, v->as_int64()));
  return 0;
}
std::string text(const json::object& o, std::string_view name) {
  const json::value* v = o.if_contains(name);
  return v != nullptr && v->is_string() ? std::string(v->as_string()) : std::string();
}
bool flag(const json::object& o, std::string_view name) {
  const json::value* v = o.if_contains(name);
  return v != nullptr && v->is_bool() && v->as_bool();
}
const json::object& object(const json::object& o, std::string_view name) {
  static const json::object none;
  const json::value* v = o.if_contains(name);
  return v != nullptr && v->is_object() ? v->as_object() : none;
}
const json::array& array(const json::object& o, std::string_view name) {
  static const json::array none;
  const json::value* v = o.if_contains(name);
  return v != nullptr && v->is_array() ? v->as_array() : none;
}

std::string count(std::uint64_t n) { return std::to_string(n); }
std::string percent(std::uint64_t part, std::uint64_t whole) {
  return whole == 0 ? std::string("-")
                    : fmt::format("{:.1f}%",
                                  100.0 * static_cast<double>(part) / static_cast<double>(whole));
}
std::string duration(std::uint64_t seconds) {
  if (seconds < 60) return fmt::format("{}s", seconds);
  if (seconds < 3600) return fmt::format("{}m {}s", seconds / 60, seconds % 60);
  if (seconds < 86400) return fmt::format("{}h {}m", seconds / 3600, seconds % 3600 / 60);
  return fmt::format("{}d {}h", seconds / 86400, seconds % 86400 / 3600);
}

// Columns padded to their widest cell; numbers (`right` columns) aligned right.
using Row = std::vector<std::string>;
void print_table(const Row& header, const std::vector<Row>& rows, const std::vector<bool>& right) {
  std::vector<std::size_t> width(header.size());
  for (std::size_t c = 0; c < header.size(); ++c) width[c] = header[c].size();
  for (const Row& row : rows) {
    for (std::size_t c = 0; c < row.size() && c < width.size(); ++c)
      width[c] = std::max(width[c], row[c].size());
  }
  const auto print = [&](const Row& row) {
    std::string line;
    for (std::size_t c = 0; c < row.size() && c < width.size(); ++c) {
      const bool last = c + 1 == row.size();
      const std::string pad(width[c] - row[c].size(), ' ');
      if (c < right.size() && right[c]) {
        line += pad + row[c];
      } else {
        line += row[c];
        if (!last) line += pad;
      }
      if (!last) line += "  ";
    }
    std::printf("%s\n", line.c_str());
  };
  print(header);
  for (const Row& row : rows) print(row);
}

// A grant's access, as "rw", "w" or "r".
std::string access_of(const json::object& grant) {
  const bool read = flag(grant, "read");
  const bool write = flag(grant, "write");
  return read && write ? "rw" : write ? "w" : read ? "r" : "-";
}

// `items` as one cell: "a, b", or "-" for none.
std::string cell(const std::vector<std::string>& items) {
  if (items.empty()) return "-";
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

// The upstream a binding names, as "upstream:bucket/prefix".
std::string upstream_of(const json::value& binding) {
  if (!binding.is_object()) return "-";
  const json::object& b = binding.as_object();
  return fmt::format("{}:{}/{}", text(b, "upstream"), text(b, "upstream_bucket"),
                     text(b, "upstream_prefix"));
}

void print_status(const json::object& s) {
  std::printf("hots3 %s, up %s (pid %llu, %llu worker threads)\n", text(s, "version").c_str(),
              duration(number(s, "uptime_s")).c_str(),
              static_cast<unsigned long long>(number(s, "pid")),
              static_cast<unsigned long long>(number(s, "threads")));
  const std::string metrics = text(s, "metrics_listen");
  std::printf("listen       %s (metrics: %s)\n", text(s, "listen").c_str(),
              metrics.empty() ? "not on an address of their own" : metrics.c_str());
  const json::object& device = object(s, "device");
  std::printf(
      "device       %s (%s): %s used of %s (%s), %s free, %s waiting for readers; %llu "
      "checksum failures\n",
      text(s, "device_path").c_str(), text(device, "io_engine").c_str(),
      format_size(number(device, "used_bytes")).c_str(),
      format_size(number(device, "bytes")).c_str(),
      percent(number(device, "used_bytes"), number(device, "bytes")).c_str(),
      format_size(number(device, "free_bytes")).c_str(),
      format_size(number(device, "pending_free_bytes")).c_str(),
      static_cast<unsigned long long>(number(device, "checksum_failures")));
  const json::object& catalog = object(s, "catalog");
  const std::uint64_t commits = number(catalog, "commits");
  std::printf("catalog      %s: %llu writes in %llu commits (%s per commit), %llu checkpoints\n",
              text(s, "catalog_path").c_str(),
              static_cast<unsigned long long>(number(catalog, "writes")),
              static_cast<unsigned long long>(commits),
              commits == 0 ? "-"
                           : fmt::format("{:.1f}", static_cast<double>(number(catalog, "writes")) /
                                                       static_cast<double>(commits))
                                 .c_str(),
              static_cast<unsigned long long>(number(catalog, "checkpoints")));
  for (const auto& [name, label] :
       {std::pair{"cache", "block cache"}, {"metadata_cache", "metadata   "}}) {
    const json::object& c = object(s, name);
    const std::uint64_t hits = number(c, "hits");
    std::printf("%s  %s of %s, hit ratio %s (%llu hits, %llu misses)\n", label,
                format_size(number(c, "used_bytes")).c_str(),
                format_size(number(c, "capacity_bytes")).c_str(),
                percent(hits, hits + number(c, "misses")).c_str(),
                static_cast<unsigned long long>(hits),
                static_cast<unsigned long long>(number(c, "misses")));
  }
  const json::object& connections = object(s, "connections");
  std::printf(
      "connections  %llu open of at most %llu, %llu since start (%llu refused, over the "
      "limit); %llu requests\n",
      static_cast<unsigned long long>(number(connections, "open")),
      static_cast<unsigned long long>(number(connections, "max")),
      static_cast<unsigned long long>(number(connections, "total")),
      static_cast<unsigned long long>(number(connections, "rejected")),
      static_cast<unsigned long long>(number(s, "requests")));
  const json::array& buckets = array(s, "buckets");
  std::printf("usage        %zu buckets, %llu objects, %s\n\n", buckets.size(),
              static_cast<unsigned long long>(number(s, "objects")),
              format_size(number(s, "bytes")).c_str());
  std::vector<Row> rows;
  for (const json::value& v : buckets) {
    if (!v.is_object()) continue;
    const json::object& b = v.as_object();
    const bool bound = text(b, "tier") != "none";
    rows.push_back({text(b, "name"), text(b, "tier"), count(number(b, "objects")),
                    format_size(number(b, "bytes")),
                    bound ? format_size(number(b, "dirty_bytes")) : "-",
                    bound ? format_size(number(b, "remote_bytes")) : "-",
                    bound ? format_size(number(b, "pinned_bytes")) : "-"});
  }
  print_table({"BUCKET", "TIER", "OBJECTS", "BYTES", "NOT UPSTREAM", "EVICTED", "PINNED"}, rows,
              {false, false, true, true, true, true, true});
}

void print_users(const json::object& s) {
  std::vector<Row> rows;
  for (const json::value& v : array(s, "users")) {
    if (!v.is_object()) continue;
    const json::object& u = v.as_object();
    std::vector<std::string> grants;
    for (const json::value& g : array(u, "grants")) {
      if (!g.is_object()) continue;
      const json::object& grant = g.as_object();
      const std::string owner = text(grant, "owner");
      grants.push_back(fmt::format("{}{}:{}", text(grant, "bucket"),
                                   owner.empty() ? "" : " of " + owner, access_of(grant)));
    }
    std::vector<std::string> create;
    for (const json::value& c : array(u, "create_buckets")) {
      if (c.is_string()) create.emplace_back(c.as_string());
    }
    rows.push_back({text(u, "name"), text(u, "access_key"), flag(u, "admin") ? "yes" : "no",
                    cell(grants), cell(create)});
  }
  print_table({"USER", "ACCESS KEY", "ADMIN", "GRANTS", "MAY CREATE"}, rows, {});
}

void print_buckets(const json::object& s) {
  std::vector<Row> rows;
  for (const json::value& v : array(s, "buckets")) {
    if (!v.is_object()) continue;
    const json::object& b = v.as_object();
    std::vector<std::string> grants;
    for (const json::value& g : array(b, "grants")) {
      if (g.is_object())
        grants.push_back(text(g.as_object(), "user") + ":" + access_of(g.as_object()));
    }
    const json::value* binding = b.if_contains("upstream");
    rows.push_back({text(b, "name"), text(b, "owner"), text(b, "tier"),
                    binding != nullptr ? upstream_of(*binding) : "-", count(number(b, "objects")),
                    format_size(number(b, "bytes")), cell(grants)});
  }
  print_table({"BUCKET", "OWNER", "TIER", "UPSTREAM", "OBJECTS", "BYTES", "GRANTS"}, rows,
              {false, false, false, false, true, true, false});
}

}  // namespace

int admin_report(const TierCommandOptions& options, AdminReport report, bool json_out) {
  const char* const names[] = {"status", "users", "buckets"};
  const char* name = names[static_cast<int>(report)];
  asio::io_context io;
  s3client::Client client(io.get_executor(), signed_options(options));
  s3client::Request request;
  request.query = {{std::string("x-hots3-") + name, ""}};
  auto done =
      asio::co_spawn(io, client.request(std::move(request), std::string()), asio::use_future);
  io.run();
  auto reply = done.get();
  if (!reply) {
    std::fprintf(stderr, "hots3 admin %s: %s: %s\n", name, options.endpoint.c_str(),
                 reply.error().message().c_str());
    return 1;
  }
  if (reply->head.status != 200) {
    const auto e = s3client::parse_error(reply->body);
    std::fprintf(stderr, "hots3 admin %s: HTTP %u %s: %s\n", name, reply->head.status,
                 e ? e->code.c_str() : "", e ? e->message.c_str() : reply->body.c_str());
    return 1;
  }
  if (json_out) {
    std::fputs(reply->body.c_str(), stdout);
    return 0;
  }
  boost::system::error_code ec;
  const json::value parsed = json::parse(reply->body, ec);
  if (ec || !parsed.is_object()) {
    std::fprintf(stderr, "hots3 admin %s: the answer is not JSON: %s\n", name,
                 reply->body.substr(0, 200).c_str());
    return 1;
  }
  switch (report) {
    case AdminReport::kStatus:
      print_status(parsed.as_object());
      break;
    case AdminReport::kUsers:
      print_users(parsed.as_object());
      break;
    case AdminReport::kBuckets:
      print_buckets(parsed.as_object());
      break;
  }
  return 0;
}

}  // namespace hots3::app
