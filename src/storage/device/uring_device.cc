// UringDevice: O_DIRECT reads, writes and fdatasync through the worker's io_uring.

#include "storage/buffer_pool.h"
#include "storage/device/device.h"
#include "storage/device/device_errors.h"
#include "storage/device/uring_ring.h"

#include "hots3/common/assert.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <unistd.h>

namespace hots3::storage {
namespace {

namespace asio = boost::asio;
using detail::UringRing;

using Kind = IoKind;

// One device operation in flight. Completes with an error_code; short transfers and -EAGAIN
// are resubmitted for the remainder (the fio/liburing completion checklist).
template <class Handler>
class DeviceOp final : public UringRing::Op {
 public:
  DeviceOp(Handler handler, Kind kind, int fd, std::uint64_t offset, std::byte* data,
           std::size_t length)
      : handler_(std::move(handler)),
        kind_(kind),
        fd_(fd),
        offset_(offset),
        data_(data),
        length_(length) {}

  void prepare(io_uring_sqe* sqe, const UringRing& ring) override {
    std::byte* p = data_ + done_;
    const auto n = static_cast<unsigned>(length_ - done_);
    const std::uint64_t at = offset_ + done_;
    const int fixed = ring.fixed_index(p, n);
    switch (kind_) {
      case Kind::kRead:
        if (fixed >= 0) {
          io_uring_prep_read_fixed(sqe, fd_, p, n, at, fixed);
        } else {
          io_uring_prep_read(sqe, fd_, p, n, at);
        }
        break;
      case Kind::kWrite:
        if (fixed >= 0) {
          io_uring_prep_write_fixed(sqe, fd_, p, n, at, fixed);
        } else {
          io_uring_prep_write(sqe, fd_, p, n, at);
        }
        break;
      case Kind::kFlush:
        io_uring_prep_fsync(sqe, fd_, IORING_FSYNC_DATASYNC);
        break;
    }
  }

  bool complete(int result) override {
    if (result == -EAGAIN || result == -EINTR) return false;  // resubmit as is
    if (result < 0) return finish(detail::device_error(-result));
    if (kind_ == Kind::kFlush) return finish({});
    if (result == 0) return finish(errc::kShortIo);  // end of device
    done_ += static_cast<std::size_t>(result);
    if (done_ < length_) return false;  // short transfer: the rest goes again
    return finish({});
  }

  void destroy() noexcept override { delete this; }

 private:
  bool finish(boost::system::error_code ec) {
    Handler handler = std::move(handler_);
    delete this;
    std::move(handler)(ec);
    return true;
  }

  Handler handler_;
  Kind kind_;
  int fd_;
  std::uint64_t offset_;
  std::byte* data_;
  std::size_t length_;
  std::size_t done_ = 0;
};

class UringDevice final : public Device {
 public:
  UringDevice(int fd, DeviceGeometry geometry) : Device(std::move(geometry)), fd_(fd) {}
  ~UringDevice() override { ::close(fd_); }
  UringDevice(const UringDevice&) = delete;
  UringDevice& operator=(const UringDevice&) = delete;
  UringDevice(UringDevice&&) = delete;
  UringDevice& operator=(UringDevice&&) = delete;

  [[nodiscard]] std::string_view engine() const noexcept override { return "io_uring"; }

  void attach(asio::io_context& context) override {
    UringRing& ring = asio::has_service<UringRing>(context)
                          ? asio::use_service<UringRing>(context)
                          : asio::make_service<UringRing>(context, 256U, 128U);
    if (BufferPool* pool = BufferPool::of(context)) ring.register_region(pool->region());
  }

  asio::awaitable<Result<void>> read(std::uint64_t offset, std::span<std::byte> buffer) override {
    check_io(offset, buffer.size(), buffer.data());
    co_return co_await run(Kind::kRead, offset, buffer.data(), buffer.size());
  }

  asio::awaitable<Result<void>> write(std::uint64_t offset,
                                      std::span<const std::byte> data) override {
    check_io(offset, data.size(), data.data());
    // The kernel only reads from the buffer; the op type is shared with reads.
    co_return co_await run(Kind::kWrite, offset, const_cast<std::byte*>(data.data()), data.size());
  }

  asio::awaitable<Result<void>> flush() override {
    co_return co_await run(Kind::kFlush, 0, nullptr, 0);
  }

 private:
  asio::awaitable<Result<void>> run(Kind kind, std::uint64_t offset, std::byte* data,
                                    std::size_t length) {
    auto executor = co_await asio::this_coro::executor;
    auto& context = static_cast<asio::io_context&>(asio::query(executor, asio::execution::context));
    UringRing& ring = UringRing::of(context);
    const IoTimer timed(*this, kind);
    constexpr auto kToken = asio::as_tuple(asio::use_awaitable);
    const auto [ec] =
        co_await asio::async_initiate<decltype(kToken), void(boost::system::error_code)>(
            [&](auto handler) {
              ring.submit(new DeviceOp<decltype(handler)>(std::move(handler), kind, fd_, offset,
                                                          data, length));
            },
            kToken);
    if (ec) co_return ec;
    co_return Result<void>{};
  }

  int fd_;
};

}  // namespace

std::unique_ptr<Device> make_uring_device(int fd, DeviceGeometry geometry) {
  return std::make_unique<UringDevice>(fd, std::move(geometry));
}

}  // namespace hots3::storage
