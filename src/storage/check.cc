#include "hots3/storage/check.h"

#include "storage/buffer_pool.h"
#include "storage/catalog/sqlite.h"
#include "storage/checksum.h"
#include "storage/device/device.h"
#include "storage/device/format.h"
#include "storage/store_lock.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>

namespace hots3::storage {
namespace {

namespace asio = boost::asio;
namespace fs = std::filesystem;

void add(CheckReport& report, std::string text) { report.problems.push_back(std::move(text)); }

// Where the data area of the device ends: its size rounded down to whole blocks.
std::uint64_t data_end(const Device& device) {
  const auto& geometry = device.geometry();
  return geometry.size_bytes - geometry.size_bytes % geometry.block_size_bytes;
}

struct Owner {
  std::string what;  // for messages
  std::uint64_t size_bytes;
  std::vector<ExtentRecord> extents;
};

void check_layout(const Owner& owner, CheckReport& report) {
  std::uint64_t expect = 0;
  for (const ExtentRecord& e : owner.extents) {
    if (e.logical_offset_bytes != expect) {
      report.problems.push_back(
          fmt::format("{}: data gap or overlap at offset {} (extent starts at {})", owner.what,
                      expect, e.logical_offset_bytes));
    }
    expect = e.logical_offset_bytes + e.length_bytes;
    if (e.length_bytes > e.device.length_bytes) {
      report.problems.push_back(fmt::format("{}: extent holds {} bytes in {} allocated", owner.what,
                                            e.length_bytes, e.device.length_bytes));
    }
    const std::uint64_t blocks = (e.length_bytes + kChecksumBlockBytes - 1) / kChecksumBlockBytes;
    if (e.checksums.size() != blocks) {
      report.problems.push_back(
          fmt::format("{}: {} checksums for {} blocks", owner.what, e.checksums.size(), blocks));
    }
  }
  if (expect != owner.size_bytes) {
    report.problems.push_back(fmt::format("{}: extents hold {} bytes, the size is {}", owner.what,
                                          expect, owner.size_bytes));
  }
}

asio::awaitable<void> verify_data(Device& device, BufferPool& pool,
                                  const std::vector<Owner>& owners, CheckReport& report) {
  IoBuffer buffer = co_await pool.acquire();
  const std::uint64_t align = device.geometry().block_size_bytes;
  const std::uint64_t device_end = data_end(device);
  for (const Owner& owner : owners) {
    for (const ExtentRecord& e : owner.extents) {
      // Reported already; reading them would be I/O outside the device (an assertion).
      if (e.device.offset_bytes % align != 0 || e.device.length_bytes % align != 0 ||
          e.device.offset_bytes < kDataStartBytes || e.device.end_bytes() > device_end ||
          e.device.end_bytes() < e.device.offset_bytes || e.length_bytes > e.device.length_bytes) {
        continue;
      }
      for (std::uint64_t at = 0; at < e.length_bytes; at += buffer.size()) {
        const std::uint64_t want =
            std::min<std::uint64_t>(buffer.size(), e.device.length_bytes - at);
        const std::span<std::byte> target(buffer.data(), static_cast<std::size_t>(want));
        if (auto r = co_await device.read(e.device.offset_bytes + at, target); !r) {
          report.problems.push_back(fmt::format("{}: device read at {} failed: {}", owner.what,
                                                e.device.offset_bytes + at, r.error().message()));
          break;
        }
        for (std::uint64_t block = 0; block < want && at + block < e.length_bytes;
             block += kChecksumBlockBytes) {
          const std::uint64_t index = (at + block) / kChecksumBlockBytes;
          const std::size_t n = static_cast<std::size_t>(
              std::min<std::uint64_t>(kChecksumBlockBytes, e.length_bytes - at - block));
          ++report.blocks_verified;
          if (index < e.checksums.size() &&
              block_checksum(target.subspan(static_cast<std::size_t>(block), n)) !=
                  e.checksums[index]) {
            report.problems.push_back(fmt::format(
                "{}: checksum mismatch at byte {} (device offset {})", owner.what,
                e.logical_offset_bytes + at + block, e.device.offset_bytes + at + block));
          }
        }
      }
    }
  }
}

void check_integrity(detail::Connection& db, CheckReport& report) {
  auto q = db.query("PRAGMA integrity_check");
  // value() throws: a catalog SQLite cannot read aborts the check.
  for (auto row = q.step(); row.value(); row = q.step()) {
    if (q.text(0) != "ok") add(report, fmt::format("catalog integrity: {}", q.text(0)));
  }
}

void count_rows(detail::Connection& db, CheckReport& report) {
  auto count = [&db](const char* sql) {
    auto q = db.query(sql);
    (void)q.step().value();
    return q.uint64(0);
  };
  report.buckets = count("SELECT count(*) FROM buckets");
  report.objects = count("SELECT count(*) FROM objects");
  report.uploads = count("SELECT count(*) FROM uploads");
  report.parts = count("SELECT count(*) FROM parts");
  report.extents = count("SELECT count(*) FROM extents");
}

std::optional<DeviceUuid> catalog_uuid(detail::Connection& db, CheckReport& report) {
  auto q = db.query("SELECT value FROM meta WHERE key = 'device_uuid'");
  if (!q.step().value()) return std::nullopt;
  const auto blob = q.blob(0);
  if (blob.size() != sizeof(DeviceUuid)) {
    add(report, "the catalog's device UUID is malformed");
    return std::nullopt;
  }
  DeviceUuid uuid;
  std::memcpy(uuid.data(), blob.data(), uuid.size());
  return uuid;
}

asio::awaitable<void> check_superblock(Device& device, BufferPool& pool,
                                       std::optional<DeviceUuid> expected, CheckReport& report) {
  IoBuffer buffer = co_await pool.acquire();
  auto read = co_await device.read(0, buffer.bytes().first(kSuperblockBytes));
  if (!read) {
    add(report, "cannot read the superblock: " + read.error().message());
    co_return;
  }
  auto sb = decode_superblock(buffer.bytes());
  if (!sb) {
    add(report, "the device has no valid hots3 superblock");
  } else if (!expected || *expected != sb->uuid) {
    add(report, "the catalog does not belong to this device (device UUID " + format_uuid(sb->uuid) +
                    ", catalog " + (expected ? format_uuid(*expected) : std::string("none")) + ")");
  }
}

// Whether the catalog has `table` (one of an older schema may lack it).
bool has_table(detail::Connection& db, const char* table) {
  auto q = db.query("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = ?1");
  q.bind(1, std::string_view(table));
  auto row = q.step();
  return row.value();
}

// Rows that lost what they belong to. An extent without an owner is space allocated on the
// device that nothing references: leaked until someone deletes the row.
void check_orphans(detail::Connection& db, CheckReport& report) {
  auto each = [&db](const char* sql, auto&& on_row) {
    auto q = db.query(sql);
    for (auto row = q.step(); row.value(); row = q.step()) on_row(q);
  };
  const bool chunks = has_table(db, "tier_chunks");
  std::uint64_t leaked = 0;
  const std::string unowned = fmt::format(
      "SELECT e.id, e.owner_id, e.device_offset, e.device_length FROM extents e "
      "LEFT JOIN objects o ON o.id = e.owner_id LEFT JOIN parts p ON p.id = e.owner_id {} "
      "WHERE o.id IS NULL AND p.id IS NULL {}",
      chunks ? "LEFT JOIN tier_chunks c ON c.id = e.owner_id" : "",
      chunks ? "AND c.id IS NULL" : "");
  each(unowned.c_str(), [&](detail::Query& q) {
    leaked += q.uint64(3);
    add(report,
        fmt::format("extent {} (device {}+{}) belongs to no object or part (owner id {} is gone)",
                    q.int64(0), q.uint64(2), q.uint64(3), q.int64(1)));
  });
  if (chunks) {
    // A kept chunk goes with its version: only an evicted version has any.
    each(
        "SELECT c.id, c.object_id FROM tier_chunks c LEFT JOIN objects o ON o.id = c.object_id "
        "WHERE o.id IS NULL OR o.tier_state != 2",
        [&](detail::Query& q) {
          add(report,
              fmt::format("chunk {} belongs to object id {}, which is not an evicted version",
                          q.int64(0), q.int64(1)));
        });
    const std::string sizes = fmt::format(
        "SELECT c.id, c.object_id, c.chunk, c.size FROM tier_chunks c JOIN objects o ON o.id = "
        "c.object_id WHERE c.chunk < 0 OR c.chunk * {0} >= o.size OR c.size != min({0}, o.size - "
        "c.chunk * {0})",
        kTierChunkBytes);
    each(sizes.c_str(), [&](detail::Query& q) {
      add(report, fmt::format("chunk {} of object id {} (index {}) holds {} bytes, not the "
                              "chunk's",
                              q.int64(0), q.int64(1), q.int64(2), q.int64(3)));
    });
  }
  if (leaked != 0)
    add(report, fmt::format("{} bytes of the device are allocated but unreferenced", leaked));
  each(
      "SELECT p.id, p.upload, p.part_number FROM parts p LEFT JOIN uploads u ON u.id = p.upload "
      "WHERE u.id IS NULL",
      [&](detail::Query& q) {
        add(report, fmt::format("part {} (number {}) belongs to upload {}, which does not exist",
                                q.int64(0), q.int64(2), q.int64(1)));
      });
  each(
      "SELECT u.upload_id, u.bucket_id FROM uploads u LEFT JOIN buckets b ON b.id = u.bucket_id "
      "WHERE b.id IS NULL",
      [&](detail::Query& q) {
        add(report,
            fmt::format("upload {} is in bucket {}, which does not exist", q.text(0), q.int64(1)));
      });
  // A catalog of a schema before ended uploads were kept has no such table.
  if (has_table(db, "ended_uploads")) {
    each(
        "SELECT e.upload_id, e.object_id FROM ended_uploads e "
        "LEFT JOIN objects o ON o.id = e.object_id WHERE e.object_id IS NOT NULL AND o.id IS NULL",
        [&](detail::Query& q) {
          add(report, fmt::format("completed upload {} made object id {}, which does not exist",
                                  q.text(0), q.int64(1)));
        });
  }
  each(
      "SELECT i.object_id FROM inline_data i LEFT JOIN objects o ON o.id = i.object_id "
      "WHERE o.id IS NULL",
      [&](detail::Query& q) {
        add(report, fmt::format("inline data of object id {}, which does not exist", q.int64(0)));
      });
  each(
      "SELECT p.object_id, p.part_number FROM object_parts p "
      "LEFT JOIN objects o ON o.id = p.object_id WHERE o.id IS NULL",
      [&](detail::Query& q) {
        add(report, fmt::format("part boundary {} of object id {}, which does not exist",
                                q.int64(1), q.int64(0)));
      });
}

struct Placed {
  std::int64_t id, owner;
  Extent device;
};

// One extent on its own: aligned, inside the data area, and not allocating more than its data
// needs.
void check_placement(const ExtentRecord& e, const Device& device, CheckReport& report) {
  const std::uint64_t block = device.geometry().block_size_bytes;
  const std::uint64_t device_end = data_end(device);
  if (e.device.offset_bytes % block != 0 || e.device.length_bytes % block != 0) {
    add(report, fmt::format("extent {} (device {}+{}) is not aligned to the block size {}",
                            e.row_id, e.device.offset_bytes, e.device.length_bytes, block));
  }
  if (e.device.offset_bytes < kDataStartBytes || e.device.end_bytes() > device_end ||
      e.device.end_bytes() < e.device.offset_bytes) {
    add(report,
        fmt::format("extent {} (device {}+{}) lies outside the data area [{}, {})", e.row_id,
                    e.device.offset_bytes, e.device.length_bytes, kDataStartBytes, device_end));
  }
  const std::uint64_t needed = (e.length_bytes + block - 1) / block * block;
  if (e.device.length_bytes > needed) {
    add(report,
        fmt::format("extent {} allocates {} bytes for {} bytes of data: {} bytes unreferenced",
                    e.row_id, e.device.length_bytes, e.length_bytes,
                    e.device.length_bytes - needed));
  }
}

// No two extents share a byte of the device.
void check_overlaps(std::vector<Placed> placed, CheckReport& report) {
  std::sort(placed.begin(), placed.end(), [](const Placed& a, const Placed& b) {
    return a.device.offset_bytes < b.device.offset_bytes;
  });
  const Placed* furthest = nullptr;  // of the extents so far, the one that ends last
  for (const Placed& p : placed) {
    if (furthest != nullptr && p.device.offset_bytes < furthest->device.end_bytes()) {
      add(report,
          fmt::format(
              "extent {} (owner {}, device {}+{}) overlaps extent {} (owner {}, device {}+{})",
              p.id, p.owner, p.device.offset_bytes, p.device.length_bytes, furthest->id,
              furthest->owner, furthest->device.offset_bytes, furthest->device.length_bytes));
    }
    if (furthest == nullptr || p.device.end_bytes() > furthest->device.end_bytes()) furthest = &p;
  }
}

// Every extent once, checked on its own and against the others; returned by owner.
std::map<std::int64_t, std::vector<ExtentRecord>> check_extents(detail::Connection& db,
                                                                const Device& device,
                                                                CheckReport& report) {
  std::map<std::int64_t, std::vector<ExtentRecord>> by_owner;
  std::vector<Placed> placed;
  auto q = db.query(
      "SELECT id, owner_id, logical_offset, length, device_offset, device_length, checksums "
      "FROM extents ORDER BY owner_id, logical_offset");
  for (auto row = q.step(); row.value(); row = q.step()) {
    ExtentRecord e;
    e.row_id = q.int64(0);
    e.logical_offset_bytes = q.uint64(2);
    e.length_bytes = q.uint64(3);
    e.device = {q.uint64(4), q.uint64(5)};
    e.checksums = decode_checksums(q.blob(6));
    report.referenced_bytes += e.device.length_bytes;
    placed.push_back({e.row_id, q.int64(1), e.device});
    check_placement(e, device, report);
    by_owner[q.int64(1)].push_back(std::move(e));
  }
  check_overlaps(std::move(placed), report);
  return by_owner;
}

// Each object and part with its extents (inline objects are checked here and not returned).
std::vector<Owner> collect_owners(detail::Connection& db,
                                  std::map<std::int64_t, std::vector<ExtentRecord>> by_owner,
                                  CheckReport& report) {
  auto take_extents = [&by_owner](std::int64_t owner) {
    auto it = by_owner.find(owner);
    if (it == by_owner.end()) return std::vector<ExtentRecord>{};
    return std::move(it->second);
  };
  std::vector<Owner> owners;
  auto q = db.query(
      "SELECT o.id, coalesce(b.name, '#' || o.bucket_id), o.key, o.size, o.is_inline, "
      "length(i.data), b.id IS NULL, i.data, i.checksum, o.tier_state FROM objects o "
      "LEFT JOIN buckets b ON b.id = o.bucket_id LEFT JOIN inline_data i ON i.object_id = o.id");
  for (auto row = q.step(); row.value(); row = q.step()) {
    const std::string what = fmt::format("object {}/{}", q.text(1), q.text(2));
    if (q.int64(6) != 0) add(report, what + ": its bucket does not exist");
    auto extents = take_extents(q.int64(0));
    if (q.int64(9) == static_cast<std::int64_t>(TierState::kUpstreamOnly)) {
      // Evicted: its data is upstream only, and nothing of it may be here.
      if (!extents.empty() || q.int64(4) != 0) add(report, what + ": evicted, yet it holds data");
      continue;
    }
    if (q.int64(9) == static_cast<std::int64_t>(TierState::kLost)) {
      // Lost with a device (tier recover): nothing of it is anywhere.
      if (!extents.empty() || q.int64(4) != 0) add(report, what + ": lost, yet it holds data");
      continue;
    }
    if (q.int64(4) == 0) {
      owners.push_back({what, q.uint64(3), std::move(extents)});
      continue;
    }
    ++report.inline_objects;
    if (q.is_null(5) || q.uint64(5) != q.uint64(3)) {
      add(report, what + ": inline data missing or of the wrong size");
    } else if (q.is_null(8) ||
               static_cast<std::uint32_t>(q.int64(8)) != block_checksum(q.blob(7))) {
      add(report, what + ": inline data checksum mismatch");
    }
    if (!extents.empty()) add(report, what + ": inline, but it also owns extents");
  }
  if (has_table(db, "tier_chunks")) {
    auto chunks = db.query(
        "SELECT c.id, coalesce(b.name, '#' || o.bucket_id), coalesce(o.key, '#' || c.object_id), "
        "c.chunk, c.size FROM tier_chunks c LEFT JOIN objects o ON o.id = c.object_id "
        "LEFT JOIN buckets b ON b.id = o.bucket_id");
    for (auto row = chunks.step(); row.value(); row = chunks.step()) {
      owners.push_back(
          {fmt::format("object {}/{} chunk {}", chunks.text(1), chunks.text(2), chunks.int64(3)),
           chunks.uint64(4), take_extents(chunks.int64(0))});
    }
  }
  auto parts = db.query(
      "SELECT p.id, coalesce(u.key, '#' || p.upload), p.part_number, p.size FROM parts p "
      "LEFT JOIN uploads u ON u.id = p.upload");
  for (auto row = parts.step(); row.value(); row = parts.step()) {
    owners.push_back({fmt::format("upload of {} part {}", parts.text(1), parts.int64(2)),
                      parts.uint64(3), take_extents(parts.int64(0))});
  }
  return owners;
}

}  // namespace

CheckReport check_store(const StoreOptions& options) {
  CheckReport report;
  const std::string catalog_path = options.catalog_path();
  if (!fs::exists(catalog_path)) throw std::runtime_error("no catalog at " + catalog_path);
  DeviceOptions device_options;
  device_options.path = options.device_file();
  device_options.engine = options.engine;
  if (!fs::exists(device_options.path))
    throw std::runtime_error("no device at " + device_options.path);
  // Shared: a running server (exclusive) refuses us, and no server can start while we read.
  const detail::StoreLock lock(options.data_dir, detail::StoreLock::Kind::kShared);
  auto device = open_device(device_options);
  // Read-only and without the Catalog: check never migrates, recovers or otherwise writes
  // what it is asked to judge.
  detail::Connection db(catalog_path, detail::Connection::Mode::kReadOnly, false);
  report.device_bytes = data_end(*device) - kDataStartBytes;

  asio::io_context context(1);
  BufferPool& pool = BufferPool::install(
      context, {options.io_buffer_bytes, 2, device->geometry().memory_alignment_bytes});
  device->attach(context);
  auto run = [&](asio::awaitable<void> op) {
    asio::co_spawn(context, std::move(op), [](const std::exception_ptr& e) {
      if (e) std::rethrow_exception(e);
    });
    context.restart();
    context.run();
  };

  check_integrity(db, report);
  run(check_superblock(*device, pool, catalog_uuid(db, report), report));
  count_rows(db, report);
  check_orphans(db, report);
  const std::vector<Owner> owners = collect_owners(db, check_extents(db, *device, report), report);
  for (const Owner& owner : owners) check_layout(owner, report);
  run(verify_data(*device, pool, owners, report));
  return report;
}

}  // namespace hots3::storage
