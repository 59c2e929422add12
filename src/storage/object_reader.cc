// The streaming reader: serves a byte range of one pinned object version in pieces, from the
// block cache where it can and from the device otherwise, with several device reads running
// ahead of the caller. Every block read from the device is verified against its checksum
// before any of it is handed out.

#include "storage/checksum.h"
#include "storage/device/device.h"
#include "storage/device/format.h"
#include "storage/store_core.h"

#include "hots3/common/assert.h"
#include "hots3/common/clock.h"
#include "hots3/common/logging.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/this_coro.hpp>

#include <deque>

namespace hots3::storage::detail {
namespace {

namespace asio = boost::asio;
constexpr std::uint64_t kChunk = BlockCache::kBlockBytes;
// Objects up to this size have their layout (with checksums: 1 MiB of them at 1 GiB) cached.
constexpr std::uint64_t kLayoutCacheObjectMax = 4ULL * 1024 * 1024 * 1024;
// Layouts of objects up to this size (a few extent rows) are read on the worker itself.
constexpr std::uint64_t kWorkerLayoutMax = 64ULL * 1024 * 1024;

std::uint64_t round_up(std::uint64_t n, std::uint64_t unit) { return (n + unit - 1) / unit * unit; }

// What a reader and its in-flight reads share; holds the epoch that keeps the version's
// extents from being freed.
struct ReadState {
  explicit ReadState(StoreCore& c) : core(c), epoch(*c.retirement) {}
  StoreCore& core;
  EpochGuard epoch;
  std::shared_ptr<const ObjectRecord> record;  // shared with the metadata cache
  [[nodiscard]] const ObjectRecord& object() const { return *record; }
  // The object's extents. Shared and immutable when it came from (or went to) the layout cache,
  // with every checksum loaded; private otherwise (huge objects), checksums loaded per row on
  // first use.
  std::shared_ptr<const LayoutCache::Layout> shared_rows;
  std::vector<ExtentRecord> own_rows;

  [[nodiscard]] const std::vector<ExtentRecord>& rows() const {
    return shared_rows ? *shared_rows : own_rows;
  }
};

struct SegmentResult {
  bool done = false;
  error_code error;
  // The device read's target. Owned here, shared with the read in flight, so that a reader
  // destroyed early (client gone, an error further on) cannot return it to the pool while the
  // device may still write into it: another stream would get it and see its bytes change.
  IoBuffer buffer;
};

// One piece of the range, in delivery order.
struct Segment {
  std::uint64_t begin = 0;  // logical
  std::uint64_t end = 0;
  CacheRef cached;
  std::size_t skip = 0;  // bytes of the buffer/cache block before `begin`
  std::shared_ptr<SegmentResult> result;

  [[nodiscard]] std::span<const std::byte> bytes() const {
    const std::size_t n = static_cast<std::size_t>(end - begin);
    if (cached) return cached.bytes().subspan(skip, n);
    return std::span<const std::byte>(result->buffer.data() + skip, n);
  }
};

// Verifies `data` (device bytes of `row` starting at relative offset `relative`, a multiple of
// the checksum block) against the row's checksums.
error_code verify(const ReadState& st, const ExtentRecord& row, std::uint64_t relative,
                  std::span<const std::byte> data) {
  for (std::uint64_t at = 0; at < data.size(); at += kChecksumBlockBytes) {
    const std::uint64_t block_offset = relative + at;
    if (block_offset >= row.length_bytes) break;  // padding after the data
    const std::uint64_t block = block_offset / kChecksumBlockBytes;
    const std::size_t n = static_cast<std::size_t>(
        std::min<std::uint64_t>(kChecksumBlockBytes, row.length_bytes - block_offset));
    if (block >= row.checksums.size() ||
        block_checksum(data.subspan(static_cast<std::size_t>(at), n)) != row.checksums[block]) {
      log::error(
          "checksum mismatch: object {} (version {}) at device offset {}: stored data is damaged; "
          "nothing of it is returned",
          st.object().key, st.object().id, row.device.offset_bytes + block_offset);
      count_checksum_failure();
      return errc::kChecksumMismatch;
    }
  }
  return {};
}

asio::awaitable<void> read_one(std::shared_ptr<ReadState> st, std::shared_ptr<Pipeline> pipeline,
                               std::shared_ptr<SegmentResult> result, std::size_t row_index,
                               std::uint64_t relative, std::span<std::byte> target,
                               bool cacheable) {
  const ExtentRecord& row = st->rows()[row_index];
  auto read = co_await st->core.device->read(row.device.offset_bytes + relative, target);
  error_code ec = read ? error_code{} : read.error();
  if (!ec) ec = verify(*st, row, relative, target);
  if (!ec && cacheable && !st->core.retirement->is_retired(st->object().id)) {
    // Whole chunks only (the chunk at the row's end may be short).
    for (std::uint64_t at = 0; at < target.size(); at += kChunk) {
      const std::uint64_t chunk_offset = relative + at;
      if (chunk_offset >= row.length_bytes) break;
      const std::size_t n = static_cast<std::size_t>(
          std::min<std::uint64_t>(kChunk, row.length_bytes - chunk_offset));
      st->core.cache->insert({st->object().id, row.device.offset_bytes + chunk_offset},
                             target.subspan(static_cast<std::size_t>(at), n));
    }
  }
  result->done = true;
  result->error = ec;
  pipeline->finished(ec);
}

class ReaderImpl final : public ObjectReader {
 public:
  ReaderImpl(std::shared_ptr<ReadState> st, BufferPool& pool, asio::any_io_executor executor)
      : st_(std::move(st)),
        pool_(pool),
        pipeline_(std::make_shared<Pipeline>(std::move(executor))) {
    end_ = st_->object().size_bytes;
  }

  [[nodiscard]] const ObjectRecord& object() const noexcept override { return st_->object(); }

  void set_range(std::uint64_t offset, std::uint64_t length) override {
    H3_ASSERT(!started_ && offset <= st_->object().size_bytes &&
                  length <= st_->object().size_bytes - offset,
              "set_range outside the object or after reading began");
    planned_ = delivered_ = offset;
    end_ = offset + length;
  }

  asio::awaitable<Result<std::span<const std::byte>>> next() override {
    started_ = true;
    current_ = Segment{};  // the previous piece's buffer or cache block goes back
    if (delivered_ >= end_) co_return std::span<const std::byte>{};
    if (st_->object().inline_data) {
      const auto piece = std::as_bytes(std::span(*st_->object().inline_data))
                             .subspan(static_cast<std::size_t>(delivered_),
                                      static_cast<std::size_t>(end_ - delivered_));
      delivered_ = end_;
      co_return piece;
    }
    H3_CO_TRY(co_await plan(Wait::kIfIdle));
    H3_ASSERT(!queue_.empty());
    while (!queue_.front().result->done) co_await pipeline_->wait_any();
    current_ = std::move(queue_.front());
    queue_.pop_front();
    if (current_.result->error) co_return current_.result->error;
    delivered_ = current_.end;
    // Keep the device busy while the caller sends this piece, with buffers that are free now:
    // waiting for one here, holding the piece's own, is hold-and-wait. With as many streams
    // as buffers, every stream would hold one and wait for another, and none would move.
    H3_CO_TRY(co_await plan(Wait::kNever));
    co_return current_.bytes();
  }

 private:
  std::size_t row_at(std::uint64_t logical) {
    // Rows are in logical order; readers mostly move forward, so start from the last one.
    const auto& rows = st_->rows();
    if (row_hint_ >= rows.size() || rows[row_hint_].logical_offset_bytes > logical) row_hint_ = 0;
    while (row_hint_ + 1 < rows.size() && rows[row_hint_ + 1].logical_offset_bytes <= logical)
      ++row_hint_;
    return row_hint_;
  }

  // The bytes of a row one device read covers, relative to the row: whole chunks (cached
  // afterwards) unless the request covers only part of one chunk (small random reads read just
  // their 4 KiB blocks).
  struct ReadSpan {
    std::uint64_t begin = 0;
    std::uint64_t end = 0;
    bool cacheable = false;
  };
  static ReadSpan read_span(std::uint64_t relative, std::uint64_t wanted_end,
                            std::uint64_t row_length, std::uint64_t buffer_bytes) {
    const std::uint64_t chunk = relative - relative % kChunk;
    if (wanted_end - chunk < std::min<std::uint64_t>(kChunk, row_length - chunk) ||
        relative != chunk) {
      return {relative - relative % kChecksumBlockBytes, std::min(wanted_end, chunk + kChunk),
              false};
    }
    return {chunk, std::min({row_length, chunk + buffer_bytes, round_up(wanted_end, kChunk)}),
            true};
  }

  enum class Wait {
    kIfIdle,  // wait for a buffer when nothing is queued (REQUIRES: the reader holds no buffer)
    kNever,
  };

  // Starts segments until stream_depth are queued (or no buffer is free).
  asio::awaitable<Result<void>> plan(Wait wait) {
    const std::size_t depth = st_->core.options.stream_depth;
    while (planned_ < end_ && queue_.size() < depth) {
      const std::size_t r = row_at(planned_);
      const ExtentRecord& row = st_->rows()[r];
      const std::uint64_t relative = planned_ - row.logical_offset_bytes;
      H3_ASSERT(relative < row.length_bytes, "object rows do not cover the object");
      const std::uint64_t chunk = relative - relative % kChunk;
      const std::uint64_t row_end = row.logical_offset_bytes + row.length_bytes;

      Segment segment;
      segment.begin = planned_;
      segment.result = std::make_shared<SegmentResult>();
      if (CacheRef hit =
              st_->core.cache->lookup({st_->object().id, row.device.offset_bytes + chunk})) {
        segment.end = std::min(end_, row.logical_offset_bytes + chunk + hit.bytes().size());
        segment.skip = static_cast<std::size_t>(relative - chunk);
        segment.cached = std::move(hit);
        segment.result->done = true;
        planned_ = segment.end;
        queue_.push_back(std::move(segment));
        continue;
      }
      // From the device, into a buffer of the pool.
      IoBuffer buffer;
      if (queue_.empty() && wait == Wait::kIfIdle) {
        buffer = co_await pool_.acquire();
      } else if (auto spare = pool_.try_acquire()) {
        buffer = std::move(*spare);
      } else {
        break;  // the pool is busy: keep what is queued
      }
      const std::uint64_t wanted_end =
          std::min(end_, row_end) - row.logical_offset_bytes;  // relative
      const auto [read_begin, read_end, cacheable] =
          read_span(relative, wanted_end, row.length_bytes, buffer.size());
      const std::uint64_t device_length =
          std::min(round_up(read_end - read_begin, kChecksumBlockBytes),
                   row.device.length_bytes - read_begin);
      H3_ASSERT(device_length <= buffer.size());
      if (row.checksums.empty() && row.length_bytes > 0) {
        H3_ASSERT(!st_->shared_rows, "a cached layout without checksums");
        H3_CO_TRY(st_->own_rows[r].checksums, st_->core.catalog->extent_checksums(row.row_id));
      }
      segment.end = row.logical_offset_bytes + read_end;
      segment.end = std::min(segment.end, end_);
      segment.skip = static_cast<std::size_t>(relative - read_begin);
      const std::span<std::byte> target(buffer.data(), static_cast<std::size_t>(device_length));
      segment.result->buffer = std::move(buffer);
      pipeline_->started();
      asio::co_spawn(pipeline_->executor(),
                     read_one(st_, pipeline_, segment.result, r, read_begin, target, cacheable),
                     asio::detached);
      planned_ = segment.end;
      queue_.push_back(std::move(segment));
    }
    co_return Result<void>{};
  }

  std::shared_ptr<ReadState> st_;
  BufferPool& pool_;
  std::shared_ptr<Pipeline> pipeline_;
  std::uint64_t planned_ = 0;    // queued up to here
  std::uint64_t delivered_ = 0;  // handed out up to here
  std::uint64_t end_ = 0;
  std::size_t row_hint_ = 0;
  std::deque<Segment> queue_;
  Segment current_;
  bool started_ = false;
};

}  // namespace

namespace {

// Whether `rows` (in logical order) cover [0, size) exactly, without gap or overlap.
bool rows_cover(const std::vector<ExtentRecord>& rows, std::uint64_t size_bytes) {
  std::uint64_t at = 0;
  for (const ExtentRecord& row : rows) {
    if (row.logical_offset_bytes != at) return false;
    at += row.length_bytes;
  }
  return at == size_bytes;
}

// Whether the version `object` can be read here; its data is checked for completeness later.
error_code readable(const ObjectRecord& object) {
  if (object.tier_state == TierState::kUpstreamOnly) return errc::kUnavailable;
  if (object.tier_state == TierState::kLost) return errc::kLost;
  if (object.inline_data && object.inline_data->size() != object.size_bytes) return errc::kCorrupt;
  return {};
}

}  // namespace

asio::awaitable<Result<std::unique_ptr<ObjectReader>>> open_reader(StoreCore& core,
                                                                   BufferPool& pool,
                                                                   std::int64_t bucket_id,
                                                                   std::string key) {
  // The epoch is entered before the lookup: whatever version the lookup finds stays readable.
  auto st = std::make_shared<ReadState>(core);
  H3_CO_TRY(st->record, lookup_object(core, bucket_id, key));
  if (!st->record) co_return errc::kNotFound;
  // What the evictor goes by: reads served from the device. A read that fetches the version (a
  // miss) is counted apart, for admission only: in epochs over more than the device it would put
  // what was just fetched one read ahead of what is kept and not yet read this epoch, and evict
  // the latter.
  if (st->record->tier_state == TierState::kLocalAndUpstream) {
    core.frequency->add(bucket_id, key);
  } else if (st->record->tier_state == TierState::kUpstreamOnly) {
    core.misses->add(bucket_id, key);
  }
  if (auto ec = readable(*st->record)) co_return ec;
  if (st->record->tier_state == TierState::kLocalAndUpstream && !st->record->inline_data) {
    core.access->touch(st->record->id, now_ms());  // (inline versions are never evicted)
  }
  if (!st->record->inline_data) {
    if (auto cached = core.layouts->find(st->record->id)) {
      st->shared_rows = std::move(cached);  // only complete layouts are cached
    } else {
      // Up to 4 GiB the layout is kept, with every checksum, and shared; beyond, checksums are
      // loaded per row on first use. A layout of more than a few rows is more than an index
      // lookup: it is read on a catalog reader thread, not on this worker.
      const std::uint64_t size = st->record->size_bytes;
      const std::int64_t id = st->record->id;
      // A complete layout that is kept goes into the cache where it was loaded, and a load
      // looks there first: many readers opening one object at once (a dataset's first epoch,
      // 256 streams of one 1 GiB shard) queue behind each other on the catalog readers, and
      // only the first loads it; the others share its copy (1 MiB of checksums per GiB) instead
      // of holding one each.
      struct Loaded {
        std::shared_ptr<const LayoutCache::Layout> shared;
        std::vector<ExtentRecord> rows;  // when not shared
      };
      auto load = [catalog = core.catalog.get(), layouts = core.layouts.get(), id, size,
                   keep = size <= kLayoutCacheObjectMax]() -> Result<Loaded> {
        if (keep) {
          if (auto first = layouts->find(id)) return Loaded{std::move(first), {}};
        }
        H3_TRY(auto rows, catalog->object_extents(id, keep));
        if (!keep || !rows_cover(rows, size)) return Loaded{nullptr, std::move(rows)};
        auto shared = std::make_shared<const LayoutCache::Layout>(std::move(rows));
        layouts->insert(id, shared);
        return Loaded{std::move(shared), {}};
      };
      // (Not a conditional expression: GCC 12 miscompiles co_await inside one.)
      Result<Loaded> loaded = errc::kNotFound;
      if (size <= kWorkerLayoutMax) {
        loaded = load();
      } else {
        auto read = on_catalog_reader(core, load);
        loaded = co_await std::move(read);
      }
      if (!loaded) co_return loaded.error();
      if (loaded->shared) {
        st->shared_rows = std::move(loaded->shared);
      } else {
        std::vector<ExtentRecord> rows = std::move(loaded->rows);
        if (!rows_cover(rows, size)) {
          // The version was overwritten, appended to or deleted after the lookup found it, and
          // that commit took its rows (its space stays: the epoch holds it, but the catalog no
          // longer says where it is). Read the key's current version and its rows again, in one
          // read transaction this time, so that they belong together. The epoch entered above
          // predates whatever this finds, so that version stays readable too.
          auto consistent = [catalog = core.catalog.get(), bucket_id, key] {
            return catalog->find_object_layout(bucket_id, key, kLayoutCacheObjectMax);
          };
          auto read = on_catalog_reader(core, consistent);
          H3_CO_TRY(auto layout, co_await std::move(read));
          if (!layout) co_return errc::kNotFound;
          st->record = std::make_shared<const ObjectRecord>(std::move(layout->object));
          if (auto ec = readable(*st->record)) co_return ec;
          rows = std::move(layout->extents);
          if (!st->record->inline_data && !rows_cover(rows, st->record->size_bytes)) {
            log::error(
                "catalog: the extents of object {} (version {}) do not cover its {} bytes: run "
                "`hots3 check`",
                st->record->key, st->record->id, st->record->size_bytes);
            co_return errc::kCorrupt;
          }
        }
        if (!st->record->inline_data) {
          if (st->record->size_bytes <= kLayoutCacheObjectMax) {
            st->shared_rows = std::make_shared<const LayoutCache::Layout>(std::move(rows));
            core.layouts->insert(st->record->id, st->shared_rows);
          } else {
            st->own_rows = std::move(rows);
          }
        }
      }
    }
  }
  auto executor = co_await asio::this_coro::executor;
  co_return std::unique_ptr<ObjectReader>(
      std::make_unique<ReaderImpl>(std::move(st), pool, std::move(executor)));
}

Result<std::unique_ptr<ObjectReader>> open_chunk_reader(StoreCore& core, BufferPool& pool,
                                                        const ObjectRecord& version,
                                                        std::uint32_t index,
                                                        asio::any_io_executor executor) {
  // Entered before the chunk is looked up: whatever extents the lookup finds stay readable.
  auto st = std::make_shared<ReadState>(core);
  H3_TRY(const std::vector<ChunkRecord> chunks,
         core.catalog->object_chunks(version.id, index, index, 1));
  if (chunks.empty()) return errc::kNotFound;
  const ChunkRecord* chunk = chunks.data();
  if (chunk->size_bytes != tier_chunk_bytes(version.size_bytes, index)) {
    log::error("catalog: chunk {} of object {} (version {}) holds {} bytes, not the chunk's", index,
               log::escaped(version.key), version.id, chunk->size_bytes);
    return errc::kCorrupt;
  }
  H3_TRY(std::vector<ExtentRecord> rows, core.catalog->object_extents(chunk->id, true));
  // (The chunk went between the two reads: its rows with it.)
  if (!rows_cover(rows, chunk->size_bytes)) return errc::kNotFound;
  // Under the version's id, so that retiring the version (or a chunk of it) drops the blocks
  // cached here; device offsets keep its chunks apart. Not in the layout cache, which holds
  // whole versions by id.
  auto record = std::make_shared<ObjectRecord>(version);
  record->size_bytes = chunk->size_bytes;
  record->inline_data.reset();
  st->record = std::move(record);
  st->shared_rows = std::make_shared<const LayoutCache::Layout>(std::move(rows));
  return std::unique_ptr<ObjectReader>(
      std::make_unique<ReaderImpl>(std::move(st), pool, std::move(executor)));
}

}  // namespace hots3::storage::detail
