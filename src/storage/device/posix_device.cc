// PosixDevice: pread/pwrite/fdatasync with O_DIRECT on a small thread pool, for machines where
// io_uring_setup is refused (some containers). Completions come back on the calling worker.

#include "storage/device/device.h"
#include "storage/device/device_errors.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <pthread.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace hots3::storage {
namespace {

namespace asio = boost::asio;
constexpr unsigned kThreads = 4;  // enough to keep an NVMe queue busy with blocking calls

class PosixDevice final : public Device {
 public:
  PosixDevice(int fd, DeviceGeometry geometry) : Device(std::move(geometry)), fd_(fd) {
    for (unsigned i = 0; i < kThreads; ++i) {
      threads_.emplace_back([this] {
        pthread_setname_np(pthread_self(), "h3-posix-io");
        work();
      });
    }
  }

  // Runs the jobs still queued (each completes its handler by posting it to its worker, or
  // drops it if that worker is gone), then joins the threads, then closes the descriptor.
  ~PosixDevice() override {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    ready_.notify_all();
    for (auto& t : threads_) t.join();
    ::close(fd_);
  }
  PosixDevice(const PosixDevice&) = delete;
  PosixDevice& operator=(const PosixDevice&) = delete;
  PosixDevice(PosixDevice&&) = delete;
  PosixDevice& operator=(PosixDevice&&) = delete;

  [[nodiscard]] std::string_view engine() const noexcept override { return "posix"; }
  void attach(asio::io_context& /*context*/) override {}

  asio::awaitable<Result<void>> read(std::uint64_t offset, std::span<std::byte> buffer) override {
    check_io(offset, buffer.size(), buffer.data());
    co_return co_await run(
        IoKind::kRead, [fd = fd_, offset, buffer]() -> boost::system::error_code {
          std::size_t done = 0;
          while (done < buffer.size()) {
            const ssize_t n = ::pread(fd, buffer.data() + done, buffer.size() - done,
                                      static_cast<off_t>(offset + done));
            if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
            if (n < 0) return detail::device_error(errno);
            if (n == 0) return errc::kShortIo;
            done += static_cast<std::size_t>(n);
          }
          return {};
        });
  }

  asio::awaitable<Result<void>> write(std::uint64_t offset,
                                      std::span<const std::byte> data) override {
    check_io(offset, data.size(), data.data());
    co_return co_await run(IoKind::kWrite, [fd = fd_, offset, data]() -> boost::system::error_code {
      std::size_t done = 0;
      while (done < data.size()) {
        const ssize_t n =
            ::pwrite(fd, data.data() + done, data.size() - done, static_cast<off_t>(offset + done));
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (n < 0) return detail::device_error(errno);
        if (n == 0) return errc::kShortIo;
        done += static_cast<std::size_t>(n);
      }
      return {};
    });
  }

  asio::awaitable<Result<void>> flush() override {
    co_return co_await run(IoKind::kFlush, [fd = fd_]() -> boost::system::error_code {
      while (::fdatasync(fd) != 0) {
        if (errno != EINTR) return detail::device_error(errno);
      }
      return {};
    });
  }

 private:
  template <class Job>
  asio::awaitable<Result<void>> run(IoKind kind, Job job) {
    const IoTimer timed(*this, kind);
    constexpr auto kToken = asio::as_tuple(asio::use_awaitable);
    const auto [ec] =
        co_await asio::async_initiate<decltype(kToken), void(boost::system::error_code)>(
            [this, &job](auto handler) {
              // The work guard keeps the worker's io_context running while the job is away.
              auto executor = asio::get_associated_executor(handler);
              auto guard = asio::make_work_guard(executor);
              auto shared = std::make_shared<decltype(handler)>(std::move(handler));
              enqueue([job = std::move(job), shared, guard = std::move(guard)]() mutable {
                const boost::system::error_code result = job();
                auto ex = guard.get_executor();
                asio::post(ex, [shared, result, guard = std::move(guard)]() mutable {
                  (*shared)(result);
                });
              });
            },
            kToken);
    if (ec) co_return ec;
    co_return Result<void>{};
  }

  void enqueue(std::function<void()> job) {
    {
      std::lock_guard lock(mutex_);
      jobs_.push_back(std::move(job));
    }
    ready_.notify_one();
  }

  void work() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock lock(mutex_);
        ready_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
        if (jobs_.empty()) return;
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      job();
    }
  }

  int fd_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> jobs_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace

std::unique_ptr<Device> make_posix_device(int fd, DeviceGeometry geometry) {
  return std::make_unique<PosixDevice>(fd, std::move(geometry));
}

}  // namespace hots3::storage
