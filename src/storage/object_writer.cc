// The streaming writer: data arrives buffer by buffer, is copied into the worker's aligned I/O
// buffers, checksummed (per 4 KiB block), and written with O_DIRECT while the next buffers
// fill; MD5 for the ETag runs beside the write, in the worker's hash lanes together with its
// other streams' buffers. Small objects stay in memory and are stored in the catalog.

#include "storage/checksum.h"
#include "storage/device/device.h"
#include "storage/device/format.h"
#include "storage/store_core.h"

#include "hots3/common/assert.h"
#include "hots3/common/hash_lanes.h"
#include "hots3/common/md5.h"
#include "hots3/common/units.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <xxhash.h>

#include <cstring>

namespace hots3::storage::detail {
namespace {

namespace asio = boost::asio;

// Space to grow an object of unknown size by, at a time.
constexpr std::uint64_t kGrowBytes = 64 * kMiB;

std::uint64_t round_up(std::uint64_t n, std::uint64_t unit) { return (n + unit - 1) / unit * unit; }

// The device space a writer has reserved. In-flight device writes share it, so an abandoned
// writer's space returns to the allocator only after the last of its writes has completed
// (reusing it earlier could let a late write land on someone else's data).
struct Reservation {
  explicit Reservation(Retirement& r) : retirement(r) {}
  ~Reservation() {
    if (!committed && !extents.empty()) retirement.release_now(extents);
  }
  Reservation(const Reservation&) = delete;
  Reservation& operator=(const Reservation&) = delete;
  Reservation(Reservation&&) = delete;
  Reservation& operator=(Reservation&&) = delete;

  Retirement& retirement;
  ExtentList extents;
  bool committed = false;
};

asio::awaitable<void> write_one(Device& device, std::shared_ptr<Reservation> keep,
                                std::shared_ptr<Pipeline> pipeline,
                                std::shared_ptr<IoBuffer> buffer, std::uint64_t offset,
                                std::size_t length) {
  auto result = co_await device.write(offset, std::span(buffer->data(), length));
  buffer.reset();
  keep.reset();
  pipeline->finished(result ? error_code{} : result.error());
}

class WriterImpl final : public ObjectWriter {
 public:
  WriterImpl(StoreCore& core, BufferPool& pool, HashLanes& lanes,
             const asio::any_io_executor& executor, std::optional<std::uint64_t> declared,
             bool inline_allowed)
      : core_(core),
        pool_(pool),
        lanes_(lanes),
        declared_(declared),
        pipeline_(std::make_shared<Pipeline>(executor)),
        inline_mode_(inline_allowed && (!declared || *declared <= core.options.inline_max_bytes)) {}

  ~WriterImpl() override { leave_lanes(); }
  WriterImpl(const WriterImpl&) = delete;
  WriterImpl& operator=(const WriterImpl&) = delete;
  WriterImpl(WriterImpl&&) = delete;
  WriterImpl& operator=(WriterImpl&&) = delete;

  // Reserves the whole declared size up front (one contiguous extent when space allows), so a
  // full device is refused before any data is received.
  Result<void> reserve_declared() {
    if (inline_mode_) return {};
    reservation_ = std::make_shared<Reservation>(*core_.retirement);
    if (declared_ && *declared_ > 0) {
      H3_TRY(reservation_->extents,
             core_.allocator->allocate(round_up(*declared_, kChecksumBlockBytes),
                                       ExtentAllocator::Placement::kBestFit));
    }
    return {};
  }

  asio::awaitable<Result<void>> write(std::span<const std::byte> data) override {
    H3_ASSERT(!finished_, "write after finish");
    if (failed_) co_return failed_;
    if (declared_ && size_ + data.size() > *declared_) co_return fail(errc::kTooLarge);
    size_ += data.size();
    if (inline_mode_) {
      if (inline_.size() + data.size() <= core_.options.inline_max_bytes) {
        inline_.append(reinterpret_cast<const char*>(data.data()), data.size());
        co_return Result<void>{};
      }
      // Larger than an inline object after all: what was kept goes to the device first.
      inline_mode_ = false;
      reservation_ = std::make_shared<Reservation>(*core_.retirement);
      std::string held = std::move(inline_);
      inline_.clear();
      H3_CO_TRY(co_await append(std::as_bytes(std::span(held.data(), held.size()))));
    }
    co_return co_await append(data);
  }

  asio::awaitable<Result<void>> finish() override {
    H3_ASSERT(!finished_, "finish called twice");
    if (failed_) co_return failed_;
    if (declared_ && size_ != *declared_) co_return fail(errc::kInvalidArgument);
    if (!inline_mode_) {
      if (fill_ > 0) H3_CO_TRY(co_await submit_buffer());
      co_await pipeline_->wait_below(1);
      leave_lanes();
      if (pipeline_->error()) co_return fail(pipeline_->error());
      release_unused();
      // Durable before the catalog may reference it.
      if (auto flushed = co_await core_.device->flush(); !flushed) co_return fail(flushed.error());
    }
    std::array<std::uint8_t, 32> digest{};
    if (core_.options.compute_md5) {
      // Device mode: every buffer has been hashed (the pipeline is empty).
      if (inline_mode_ && !inline_.empty()) {
        // Small objects' bytes go through the lanes too: the puts a worker finishes in one turn
        // of its loop share a pass (one MD5 of 4 KiB at a time took two thirds of the workers'
        // time with 64 writers of 4 KiB objects).
        auto held = std::make_shared<std::string>(std::move(inline_));
        pipeline_->started();
        lanes_.submit(md5_, std::as_bytes(std::span(held->data(), held->size())), held,
                      [pipeline = pipeline_] { pipeline->finished({}); });
        co_await pipeline_->wait_below(1);
        inline_ = std::move(*held);
      }
      const auto md5 = md5_->finish();
      std::copy(md5.begin(), md5.end(), digest.begin());
    } else {
      // No MD5 wanted: xxh3-128 of the data's block checksums and size.
      XXH3_state_t* state = XXH3_createState();
      XXH3_128bits_reset(state);
      for (const auto& row : rows_)
        XXH3_128bits_update(state, row.checksums.data(), row.checksums.size() * 4);
      XXH3_128bits_update(state, inline_.data(), inline_.size());
      XXH3_128bits_update(state, &size_, sizeof size_);
      const XXH128_hash_t h = XXH3_128bits_digest(state);
      XXH3_freeState(state);
      for (std::size_t i = 0; i < 8; ++i) {
        digest[i] = static_cast<std::uint8_t>(h.high64 >> (56 - 8 * i));
        digest[i + 8] = static_cast<std::uint8_t>(h.low64 >> (56 - 8 * i));
      }
    }
    std::copy_n(digest.begin(), 16, digest_.begin());
    finished_ = true;
    co_return Result<void>{};
  }

  [[nodiscard]] std::uint64_t size() const noexcept override { return size_; }
  [[nodiscard]] const std::array<std::uint8_t, 16>& digest() const noexcept override {
    return digest_;
  }

  [[nodiscard]] WrittenData data() const {
    H3_ASSERT(finished_ && !failed_, "written_data of an unfinished writer");
    WrittenData out;
    out.size_bytes = size_;
    out.extents = rows_;
    if (inline_mode_) out.inline_data = inline_;
    return out;
  }

  void committed() {
    if (reservation_) reservation_->committed = true;
  }

 private:
  error_code fail(error_code ec) {
    failed_ = ec;
    return ec;
  }

  // Device space for the next bytes at the cursor; grows the reservation when the size is not
  // known in advance (in place when the neighbouring space is free, so the object stays
  // contiguous).
  Result<void> ensure_space() {
    auto& extents = reservation_->extents;
    if (cursor_extent_ < extents.size() && cursor_used_ < extents[cursor_extent_].length_bytes)
      return {};
    if (declared_) return errc::kTooLarge;  // cannot happen: the declared size was reserved
    H3_ASSERT(cursor_extent_ == extents.size(), "the cursor is at the end of the reservation");
    // A step of kGrowBytes; when less than that is free, one I/O buffer at a time (or what is
    // left), so that a nearly full device still takes a streamed object that fits without one
    // stream holding all the free space while it runs.
    const std::uint64_t free_bytes =
        core_.allocator->free_bytes() / kChecksumBlockBytes * kChecksumBlockBytes;
    const std::uint64_t step = free_bytes >= kGrowBytes
                                   ? kGrowBytes
                                   : std::min<std::uint64_t>(free_bytes, pool_.buffer_bytes());
    if (step == 0) return errc::kNoSpace;
    if (!extents.empty() && core_.allocator->allocate_at(extents.back().end_bytes(), step)) {
      // Grown in place: the cursor steps back onto the last extent's new tail.
      cursor_extent_ = extents.size() - 1;
      cursor_used_ = extents.back().length_bytes;
      extents.back().length_bytes += step;
      return {};
    }
    H3_TRY(auto more, core_.allocator->allocate(step, ExtentAllocator::Placement::kLargest));
    extents.insert(extents.end(), more.begin(), more.end());
    return {};
  }

  asio::awaitable<Result<void>> append(std::span<const std::byte> data) {
    while (!data.empty()) {
      if (!buffer_) {
        if (auto space = ensure_space(); !space) {
          // Out of space: let the writes in flight finish first, so that the space is back
          // (when the writer goes) by the time the client hears "no space".
          co_await pipeline_->wait_below(1);
          co_return fail(space.error());
        }
        buffer_ = co_await pool_.acquire();
        fill_ = 0;
        // A buffer never crosses a device extent or a catalog row: each is one contiguous
        // device write belonging to one row.
        const Extent& extent = reservation_->extents[cursor_extent_];
        std::uint64_t limit =
            std::min<std::uint64_t>(buffer_.size(), extent.length_bytes - cursor_used_);
        if (row_open_)
          limit = std::min(limit, core_.options.extent_row_max_bytes - rows_.back().length_bytes);
        limit_ = static_cast<std::size_t>(limit);
      }
      const std::size_t n = std::min(limit_ - fill_, data.size());
      std::memcpy(buffer_.data() + fill_, data.data(), n);
      fill_ += n;
      data = data.subspan(n);
      if (fill_ == limit_) H3_CO_TRY(co_await submit_buffer());
    }
    co_return Result<void>{};
  }

  // Writes the current buffer at the cursor (the last one padded with zeros to the block
  // size), recording its checksums in the current catalog row.
  asio::awaitable<Result<void>> submit_buffer() {
    const std::size_t length = static_cast<std::size_t>(round_up(fill_, kChecksumBlockBytes));
    std::memset(buffer_.data() + fill_, 0, length - fill_);
    Extent& extent = reservation_->extents[cursor_extent_];
    const std::uint64_t offset = extent.offset_bytes + cursor_used_;
    if (!row_open_) {
      ExtentRecord row;
      row.logical_offset_bytes = written_;
      row.device = {offset, 0};
      rows_.push_back(std::move(row));
      row_open_ = true;
    }
    ExtentRecord& row = rows_.back();
    row.length_bytes += fill_;
    row.device.length_bytes += length;
    append_block_checksums(std::span(buffer_.data(), fill_), row.checksums);
    written_ += fill_;
    cursor_used_ += length;
    if (cursor_used_ == extent.length_bytes) {
      ++cursor_extent_;
      cursor_used_ = 0;
      row_open_ = false;
    }
    if (row.length_bytes >= core_.options.extent_row_max_bytes || fill_ % kChecksumBlockBytes != 0)
      row_open_ = false;

    // The write and the MD5 of the buffer are two operations in flight; the buffer returns to
    // the pool when both are done.
    co_await pipeline_->wait_below(static_cast<unsigned>(core_.options.stream_depth));
    if (pipeline_->error()) co_return fail(pipeline_->error());
    auto buffer = std::make_shared<IoBuffer>(std::move(buffer_));
    if (core_.options.compute_md5) {
      if (!in_lanes_) {
        in_lanes_ = true;
        lanes_.join();
      }
      pipeline_->started();
      lanes_.submit(md5_, std::span(buffer->data(), fill_), buffer,
                    [pipeline = pipeline_] { pipeline->finished({}); });
    }
    pipeline_->started();
    asio::co_spawn(
        pipeline_->executor(),
        write_one(*core_.device, reservation_, pipeline_, std::move(buffer), offset, length),
        asio::detached);
    fill_ = 0;
    co_return Result<void>{};
  }

  void leave_lanes() noexcept {
    if (in_lanes_) lanes_.leave();
    in_lanes_ = false;
  }

  // Returns reserved space that no data went to.
  void release_unused() {
    auto& extents = reservation_->extents;
    ExtentList unused;
    if (cursor_extent_ < extents.size()) {
      Extent& current = extents[cursor_extent_];
      if (cursor_used_ > 0) {
        unused.push_back(
            {current.offset_bytes + cursor_used_, current.length_bytes - cursor_used_});
        current.length_bytes = cursor_used_;
        ++cursor_extent_;
      }
      unused.insert(unused.end(), extents.begin() + static_cast<std::ptrdiff_t>(cursor_extent_),
                    extents.end());
      extents.erase(extents.begin() + static_cast<std::ptrdiff_t>(cursor_extent_), extents.end());
    }
    std::erase_if(unused, [](const Extent& e) { return e.length_bytes == 0; });
    if (!unused.empty()) core_.retirement->release_now(unused);
  }

  StoreCore& core_;
  BufferPool& pool_;
  HashLanes& lanes_;
  std::optional<std::uint64_t> declared_;
  std::shared_ptr<Pipeline> pipeline_;
  std::shared_ptr<Reservation> reservation_;
  std::shared_ptr<Md5> md5_ = std::make_shared<Md5>();  // shared with the hash lanes
  std::array<std::uint8_t, 16> digest_{};
  std::uint64_t size_ = 0;     // bytes accepted
  std::uint64_t written_ = 0;  // bytes handed to the device
  bool inline_mode_;
  std::string inline_;
  IoBuffer buffer_;
  std::size_t fill_ = 0;
  std::size_t limit_ = 0;
  std::size_t cursor_extent_ = 0;  // index into reservation_->extents
  std::uint64_t cursor_used_ = 0;  // bytes of that extent already written
  std::vector<ExtentRecord> rows_;
  bool row_open_ = false;
  bool finished_ = false;
  bool in_lanes_ = false;
  error_code failed_;
};

}  // namespace

Result<std::unique_ptr<ObjectWriter>> make_writer(StoreCore& core, BufferPool& pool,
                                                  asio::any_io_executor executor,
                                                  std::optional<std::uint64_t> size_bytes,
                                                  bool inline_allowed) {
  HashLanes& lanes = HashLanes::of(
      static_cast<asio::io_context&>(asio::query(executor, asio::execution::context)));
  auto writer = std::make_unique<WriterImpl>(core, pool, lanes, std::move(executor), size_bytes,
                                             inline_allowed);
  H3_TRY(writer->reserve_declared());
  return std::unique_ptr<ObjectWriter>(std::move(writer));
}

WrittenData written_data(ObjectWriter& writer) { return static_cast<WriterImpl&>(writer).data(); }

void mark_committed(ObjectWriter& writer) { static_cast<WriterImpl&>(writer).committed(); }

}  // namespace hots3::storage::detail
