// One conformance suite over every Device implementation (Ceph's AllocTest style).

#include "storage/device/device.h"

#include "storage/buffer_pool.h"
#include "storage/device/fault_device.h"
#include "storage/device/uring_ring.h"
#include "test_support.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace hots3::storage {
namespace {

namespace asio = boost::asio;
using test::run_on;
constexpr std::uint64_t kSize = 64 * 1024 * 1024;

enum class Kind { kUring, kPosix, kFault };

std::string kind_name(const ::testing::TestParamInfo<Kind>& param_info) {
  switch (param_info.param) {
    case Kind::kUring:
      return "Uring";
    case Kind::kPosix:
      return "Posix";
    case Kind::kFault:
      return "Fault";
  }
  return "?";
}

class DeviceTest : public ::testing::TestWithParam<Kind> {
 protected:
  void SetUp() override {
    if (GetParam() == Kind::kUring && !uring_available())
      GTEST_SKIP() << "io_uring_setup is refused here";
    if (GetParam() == Kind::kFault) {
      device_ = std::make_unique<FaultDevice>(kSize);
    } else {
      DeviceOptions options;
      options.path = dir_.file("device.img");
      options.create_size_bytes = kSize;
      options.engine = GetParam() == Kind::kUring ? DeviceOptions::Engine::kUring
                                                  : DeviceOptions::Engine::kPosix;
      device_ = open_device(options);
    }
    pool_ = &BufferPool::install(context_, {1024 * 1024, 8, 4096});
    device_->attach(context_);
  }

  // Writes one buffer of pattern bytes at `offset`, flushes, and reads it back exact.
  asio::awaitable<void> write_flush_read(std::uint64_t offset, std::uint32_t seed) {
    IoBuffer out = co_await pool_->acquire();
    IoBuffer in = co_await pool_->acquire();
    const auto data = test::pattern_bytes(out.size(), seed);
    std::memcpy(out.data(), data.data(), data.size());
    EXPECT_TRUE((co_await device_->write(offset, out.bytes())).has_value());
    EXPECT_TRUE((co_await device_->flush()).has_value());
    EXPECT_TRUE((co_await device_->read(offset, in.bytes())).has_value());
    EXPECT_EQ(std::memcmp(in.data(), data.data(), data.size()), 0);
  }

  test::TempDir dir_;
  asio::io_context context_{1};
  BufferPool* pool_ = nullptr;
  std::unique_ptr<Device> device_;
};

TEST_P(DeviceTest, GeometryOfANewDevice) {
  EXPECT_EQ(device_->geometry().size_bytes, kSize);
  EXPECT_EQ(device_->geometry().block_size_bytes % 4096, 0U);
  EXPECT_TRUE(device_->is_valid_io(0, 4096, pool_->region().data()));
  EXPECT_FALSE(device_->is_valid_io(512, 4096, pool_->region().data()));
  EXPECT_FALSE(device_->is_valid_io(0, 100, pool_->region().data()));
  EXPECT_FALSE(device_->is_valid_io(kSize - 4096, 8192, pool_->region().data()));
  EXPECT_FALSE(device_->is_valid_io(0, 4096, pool_->region().data() + 1));
}

TEST_P(DeviceTest, WriteFlushReadRoundTrip) {
  run_on(context_, write_flush_read(3 * 1024 * 1024, 1), true);
  run_on(
      context_,
      [&]() -> asio::awaitable<void> {
        // A 4 KiB read in the middle.
        IoBuffer in = co_await pool_->acquire();
        const auto data = test::pattern_bytes(in.size(), 1);
        EXPECT_TRUE(
            (co_await device_->read(3 * 1024 * 1024 + 8192, in.bytes().first(4096))).has_value());
        EXPECT_EQ(std::memcmp(in.data(), data.data() + 8192, 4096), 0);
      }(),
      true);
}

TEST_P(DeviceTest, ManyOperationsInFlight) {
  // More concurrent operations than the ring's in-flight cap: the rest must queue, not fail.
  constexpr int kOps = 300;
  std::vector<std::vector<std::byte>> blocks;
  std::byte* memory = static_cast<std::byte*>(std::aligned_alloc(4096, kOps * 4096));
  for (int i = 0; i < kOps; ++i) {
    auto b = test::pattern_bytes(4096, static_cast<std::uint32_t>(i));
    std::memcpy(memory + i * 4096, b.data(), 4096);
    blocks.push_back(std::move(b));
  }
  int done = 0;
  for (int i = 0; i < kOps; ++i) {
    asio::co_spawn(
        context_,
        [&, i]() -> asio::awaitable<void> {
          auto r = co_await device_->write(static_cast<std::uint64_t>(i) * 8192,
                                           std::span(memory + i * 4096, 4096));
          EXPECT_TRUE(r.has_value());
          ++done;
        },
        asio::detached);
  }
  context_.run();  // returns only when every operation has completed
  EXPECT_EQ(done, kOps);
  std::memset(memory, 0, kOps * 4096);
  context_.restart();
  for (int i = 0; i < kOps; ++i) {
    asio::co_spawn(
        context_,
        [&, i]() -> asio::awaitable<void> {
          auto r = co_await device_->read(static_cast<std::uint64_t>(i) * 8192,
                                          std::span(memory + i * 4096, 4096));
          EXPECT_TRUE(r.has_value());
          EXPECT_EQ(
              std::memcmp(memory + i * 4096, blocks[static_cast<std::size_t>(i)].data(), 4096), 0);
        },
        asio::detached);
  }
  context_.run();
  std::free(memory);
}

// The io_uring completion checklist on the real ring: a completion that is -EAGAIN is
// submitted again, a short transfer goes again for the rest, and end-of-device is an error.
std::atomic<int> fault_calls{0};
std::atomic<int> fault_eagains{0};
std::atomic<int> fault_shorts{0};

int eagain_and_short(int result) {
  if (fault_calls++ % 3 == 0) {
    ++fault_eagains;
    return -EAGAIN;
  }
  if (result > 4096) {
    ++fault_shorts;
    return 4096;  // as if only the first 4 KiB had been transferred
  }
  return result;
}

int end_of_device(int result) { return result > 0 ? 0 : result; }

struct FaultGuard {
  explicit FaultGuard(detail::UringRing::CompletionFault f) {
    detail::UringRing::inject_completion_fault(f);
  }
  ~FaultGuard() { detail::UringRing::inject_completion_fault(nullptr); }
  FaultGuard(const FaultGuard&) = delete;
  FaultGuard& operator=(const FaultGuard&) = delete;
  FaultGuard(FaultGuard&&) = delete;
  FaultGuard& operator=(FaultGuard&&) = delete;
};

// The io_uring device alone: the hook sits in its ring.
class UringCompletionTest : public DeviceTest {};

TEST_P(UringCompletionTest, EagainAndShortTransfersAreResubmittedAndEndOfDeviceFails) {
  {
    FaultGuard guard(eagain_and_short);
    run_on(context_, write_flush_read(5 * 1024 * 1024, 7), true);
  }
  EXPECT_GT(fault_eagains.load(), 2);
  EXPECT_GT(fault_shorts.load(), 200);  // 1 MiB written and read 4 KiB at a time
  FaultGuard guard(end_of_device);
  run_on(
      context_,
      [&]() -> asio::awaitable<void> {
        IoBuffer in = co_await pool_->acquire();
        auto read = co_await device_->read(0, in.bytes());
        EXPECT_FALSE(read.has_value());
      }(),
      true);
}

// A no-op that records its result and, when it completes, submits `then` from inside the
// ring's completion handling; with `throws`, its handler throws after that.
class NopOp final : public detail::UringRing::Op {
 public:
  NopOp(detail::UringRing& ring, std::vector<int>& results, NopOp* then, bool throws = false)
      : ring_(ring), results_(results), then_(then), throws_(throws) {}
  void prepare(io_uring_sqe* sqe, const detail::UringRing&) override { io_uring_prep_nop(sqe); }
  bool complete(int result) override {
    results_.push_back(result);
    if (then_ != nullptr) {
      ring_.submit(then_);
      // Held back until every completion of this drain is handled, then submitted together.
      EXPECT_EQ(ring_.unsubmitted(), 1U);
    }
    const bool throws = throws_;
    delete this;
    if (throws) throw std::runtime_error("a handler failed");
    return true;
  }
  void destroy() noexcept override { delete this; }

 private:
  detail::UringRing& ring_;
  std::vector<int>& results_;
  NopOp* then_;
  bool throws_;
};

// An operation is in the kernel when submit() returns, not at the end of the event loop's turn
// (held back, 32 random readers kept the disk's queue shorter than fio's).
TEST(UringRingTest, OperationsGoToTheKernelWhenSubmitted) {
  if (!uring_available()) GTEST_SKIP() << "io_uring_setup is refused here";
  asio::io_context context;
  auto& ring = detail::UringRing::of(context);
  std::vector<int> results;
  ring.submit(new NopOp(ring, results, new NopOp(ring, results, nullptr)));
  EXPECT_EQ(ring.unsubmitted(), 0U);
  EXPECT_EQ(ring.inflight(), 1U);
  context.run();
  EXPECT_EQ(results, (std::vector<int>{0, 0}));
  EXPECT_EQ(ring.unsubmitted(), 0U);
  EXPECT_EQ(ring.inflight(), 0U);
}

// A handler that throws out of the drain (the worker's loop catches it and runs on) does not
// leave the ring holding back every later operation.
TEST(UringRingTest, ADrainEndedByAnExceptionStillSubmits) {
  if (!uring_available()) GTEST_SKIP() << "io_uring_setup is refused here";
  asio::io_context context;
  auto& ring = detail::UringRing::of(context);
  std::vector<int> results;
  ring.submit(new NopOp(ring, results, new NopOp(ring, results, nullptr), /*throws=*/true));
  EXPECT_THROW(context.run(), std::runtime_error);
  ASSERT_EQ(ring.unsubmitted(), 0U);  // what the drain submitted before the throw
  ring.submit(new NopOp(ring, results, nullptr));
  ASSERT_EQ(ring.unsubmitted(), 0U);  // and what comes after it (else run() would wait forever)
  context.restart();
  context.run();
  EXPECT_EQ(results, (std::vector<int>{0, 0, 0}));
  EXPECT_EQ(ring.inflight(), 0U);
}

TEST_P(DeviceTest, MisalignedIoIsAProgrammerError) {
  auto misaligned = [&] {
    run_on(
        context_,
        [&]() -> asio::awaitable<void> {
          IoBuffer b = co_await pool_->acquire();
          (void)co_await device_->read(100, b.bytes().first(4096));
        }(),
        true);
  };
  EXPECT_DEATH(misaligned(), "not aligned");
}

INSTANTIATE_TEST_SUITE_P(Devices, DeviceTest,
                         ::testing::Values(Kind::kUring, Kind::kPosix, Kind::kFault), kind_name);
INSTANTIATE_TEST_SUITE_P(Devices, UringCompletionTest, ::testing::Values(Kind::kUring), kind_name);

TEST(FaultDevice, CrashLosesOrTearsUnflushedWrites) {
  asio::io_context context(1);
  FaultDevice device(16 * 1024 * 1024);
  std::byte* buffer = static_cast<std::byte*>(std::aligned_alloc(4096, 65536));
  std::memset(buffer, 0xAB, 65536);
  run_on(
      context,
      [&]() -> asio::awaitable<void> {
        EXPECT_TRUE((co_await device.write(0, std::span(buffer, 65536))).has_value());
        EXPECT_TRUE((co_await device.flush()).has_value());
        std::memset(buffer, 0xCD, 65536);
        EXPECT_TRUE((co_await device.write(65536, std::span(buffer, 65536))).has_value());
      }(),
      true);
  EXPECT_EQ(device.unflushed_writes(), 1U);
  device.crash(FaultDevice::Crash::kLoseUnflushed);
  run_on(
      context,
      [&]() -> asio::awaitable<void> {
        EXPECT_TRUE((co_await device.read(0, std::span(buffer, 65536))).has_value());
        EXPECT_EQ(buffer[100], std::byte{0xAB});  // flushed: kept
        EXPECT_TRUE((co_await device.read(65536, std::span(buffer, 65536))).has_value());
        EXPECT_EQ(buffer[100], std::byte{0});  // unflushed: gone
      }(),
      true);
  device.fail_range(0, 4096);
  run_on(
      context,
      [&]() -> asio::awaitable<void> {
        EXPECT_EQ((co_await device.read(0, std::span(buffer, 4096))).error(), errc::kIoError);
      }(),
      true);
  std::free(buffer);
}

}  // namespace
}  // namespace hots3::storage
