#include "hots3/storage/check.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include <filesystem>

#include "hots3/storage/buffer_pool.h"
#include "hots3/storage/checksum.h"
#include "hots3/storage/extent_allocator.h"
#include "hots3/storage/format.h"
#include "sqlite.h"

namespace hots3::storage {
namespace {

namespace asio = boost::asio;
namespace fs = std::filesystem;

struct Owner {
  std::string what;  // for messages
  std::uint64_t size_bytes;
  std::vector<ExtentRecord> extents;
};

void check_layout(const Owner& owner, std::uint64_t device_end, CheckReport& report) {
  std::uint64_t expect = 0;
  for (const ExtentRecord& e : owner.extents) {
    if (e.logical_offset_bytes != expect) {
      report.problems.push_back(fmt::format("{}: data gap or overlap at offset {} (extent starts at {})", owner.what,
                                            expect, e.logical_offset_bytes));
    }
    expect = e.logical_offset_bytes + e.length_bytes;
    if (e.device.end_bytes() > device_end || e.device.offset_bytes < kDataStartBytes) {
      report.problems.push_back(fmt::format("{}: extent {}+{} outside the data area", owner.what, e.device.offset_bytes,
                                            e.device.length_bytes));
    }
    if (e.length_bytes > e.device.length_bytes) {
      report.problems.push_back(fmt::format("{}: extent holds {} bytes in {} allocated", owner.what, e.length_bytes,
                                            e.device.length_bytes));
    }
    const std::uint64_t blocks = (e.length_bytes + kChecksumBlockBytes - 1) / kChecksumBlockBytes;
    if (e.checksums.size() != blocks) {
      report.problems.push_back(fmt::format("{}: {} checksums for {} blocks", owner.what, e.checksums.size(), blocks));
    }
  }
  if (expect != owner.size_bytes) {
    report.problems.push_back(fmt::format("{}: extents hold {} bytes, the size is {}", owner.what, expect, owner.size_bytes));
  }
}

asio::awaitable<void> verify_data(Device& device, BufferPool& pool, const std::vector<Owner>& owners, CheckReport& report) {
  IoBuffer buffer = co_await pool.acquire();
  for (const Owner& owner : owners) {
    for (const ExtentRecord& e : owner.extents) {
      for (std::uint64_t at = 0; at < e.length_bytes; at += buffer.size()) {
        const std::uint64_t want = std::min<std::uint64_t>(buffer.size(), e.device.length_bytes - at);
        const std::span<std::byte> target(buffer.data(), static_cast<std::size_t>(want));
        if (auto r = co_await device.read(e.device.offset_bytes + at, target); !r) {
          report.problems.push_back(fmt::format("{}: device read at {} failed: {}", owner.what, e.device.offset_bytes + at,
                                                r.error().message()));
          break;
        }
        for (std::uint64_t block = 0; block < want && at + block < e.length_bytes; block += kChecksumBlockBytes) {
          const std::uint64_t index = (at + block) / kChecksumBlockBytes;
          const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(kChecksumBlockBytes, e.length_bytes - at - block));
          ++report.blocks_verified;
          if (index < e.checksums.size() && block_checksum(target.subspan(static_cast<std::size_t>(block), n)) != e.checksums[index]) {
            report.problems.push_back(fmt::format("{}: checksum mismatch at byte {} (device offset {})", owner.what,
                                                  e.logical_offset_bytes + at + block, e.device.offset_bytes + at + block));
          }
        }
      }
    }
  }
}

}  // namespace

CheckReport check_store(const StoreOptions& options) {
  CheckReport report;
  const std::string catalog_path = (fs::path(options.data_dir) / "catalog.db").string();
  if (!fs::exists(catalog_path)) throw std::runtime_error("no catalog at " + catalog_path);
  DeviceOptions device_options;
  device_options.path = options.device_path.empty() ? (fs::path(options.data_dir) / "device.img").string() : options.device_path;
  device_options.engine = options.engine;
  if (!fs::exists(device_options.path)) throw std::runtime_error("no device at " + device_options.path);
  auto device = open_device(device_options);
  auto catalog = Catalog::open({catalog_path});
  const auto& geometry = device->geometry();
  const std::uint64_t device_end = geometry.size_bytes - geometry.size_bytes % geometry.block_size_bytes;
  report.device_bytes = device_end - kDataStartBytes;

  asio::io_context context(1);
  BufferPool& pool = BufferPool::install(context, {options.io_buffer_bytes, 2, geometry.memory_alignment_bytes});
  device->attach(context);
  auto run = [&](asio::awaitable<void> op) {
    asio::co_spawn(context, std::move(op), [](const std::exception_ptr& e) {
      if (e) std::rethrow_exception(e);
    });
    context.restart();
    context.run();
  };

  // Superblock and identity.
  run([&]() -> asio::awaitable<void> {
    IoBuffer block = co_await pool.acquire();
    auto read = co_await device->read(0, block.bytes().first(kSuperblockBytes));
    if (!read) {
      report.problems.push_back("cannot read the superblock: " + read.error().message());
      co_return;
    }
    auto sb = decode_superblock(block.bytes());
    auto uuid = catalog->device_uuid();
    if (!sb) {
      report.problems.push_back("the device has no valid hots3 superblock");
    } else if (!uuid || !*uuid || **uuid != sb->uuid) {
      report.problems.push_back("the catalog does not belong to this device (UUID " + format_uuid(sb->uuid) + ")");
    }
  }());

  const auto counts = catalog->counts();
  if (!counts) throw std::runtime_error("catalog: " + counts.error().message());
  report.buckets = counts->buckets;
  report.objects = counts->objects;
  report.uploads = counts->uploads;
  report.parts = counts->parts;
  report.extents = counts->extents;

  // Every extent once: inside the device and not overlapping another.
  auto all = catalog->all_extents();
  if (!all) throw std::runtime_error("catalog: " + all.error().message());
  for (const Extent& e : *all) report.referenced_bytes += e.length_bytes;
  ExtentAllocator allocator(kDataStartBytes, device_end, geometry.block_size_bytes);
  if (!allocator.build_from_used(*all)) report.problems.push_back("extents overlap or lie outside the data area");

  // Each object's and part's layout, then its data.
  std::vector<Owner> owners;
  detail::Connection db(catalog_path, detail::Connection::Mode::kReadOnly, false);
  {
    auto q = db.query("SELECT o.id, b.name, o.key, o.size, o.is_inline, length(i.data) FROM objects o "
                      "JOIN buckets b ON b.id = o.bucket_id LEFT JOIN inline_data i ON i.object_id = o.id");
    for (auto row = q.step(); row.value(); row = q.step()) {  // value() throws: a failing catalog aborts check
      const std::string what = fmt::format("object {}/{}", q.text(1), q.text(2));
      if (q.int64(4) != 0) {
        ++report.inline_objects;
        if (q.is_null(5) || q.uint64(5) != q.uint64(3)) report.problems.push_back(what + ": inline data missing or of the wrong size");
        continue;
      }
      auto extents = catalog->object_extents(q.int64(0), true);
      if (!extents) throw std::runtime_error("catalog: " + extents.error().message());
      owners.push_back({what, q.uint64(3), std::move(*extents)});
    }
  }
  {
    auto q = db.query("SELECT p.id, u.key, p.part_number, p.size FROM parts p JOIN uploads u ON u.id = p.upload");
    for (auto row = q.step(); row.value(); row = q.step()) {
      auto extents = catalog->part_extents(q.int64(0), true);
      if (!extents) throw std::runtime_error("catalog: " + extents.error().message());
      owners.push_back({fmt::format("upload of {} part {}", q.text(1), q.int64(2)), q.uint64(3), std::move(*extents)});
    }
  }
  for (const Owner& owner : owners) check_layout(owner, device_end, report);
  run(verify_data(*device, pool, owners, report));
  catalog->stop();
  return report;
}

}  // namespace hots3::storage
