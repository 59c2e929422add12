#pragma once

// Test support: temporary directories and running coroutines on worker threads from a test.

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <string>
#include <thread>

namespace hots3::test {

// A fresh directory under the system temp dir (on disk, not tmpfs: O_DIRECT needs it), removed
// afterwards. HOTS3_TEST_TMPDIR overrides the parent.
class TempDir {
 public:
  TempDir() {
    const char* parent = std::getenv("HOTS3_TEST_TMPDIR");  // NOLINT(concurrency-mt-unsafe): tests
    std::filesystem::path base =
        parent != nullptr ? parent : std::filesystem::temp_directory_path();
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name =
        "hots3-" + std::to_string(::getpid()) + "-" + (info != nullptr ? info->name() : "test");
    for (char& c : name) {
      if (c == '/') c = '_';
    }
    path_ = base / name;
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  TempDir(TempDir&&) = delete;
  TempDir& operator=(TempDir&&) = delete;

  [[nodiscard]] const std::filesystem::path& path() const { return path_; }
  [[nodiscard]] std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// Runs `op` on `context` (which another thread runs, or which this call runs to completion
// when `drive` is set) and returns its result.
template <class T>
T run_on(boost::asio::io_context& context, boost::asio::awaitable<T> op, bool drive = false) {
  std::promise<T> promise;
  auto future = promise.get_future();
  boost::asio::co_spawn(context, std::move(op), [&promise](const std::exception_ptr& e, T value) {
    if (e) {
      promise.set_exception(e);
    } else {
      promise.set_value(std::move(value));
    }
  });
  if (drive) {
    context.restart();
    context.run();
  }
  return future.get();
}

inline void run_on(boost::asio::io_context& context, boost::asio::awaitable<void> op,
                   bool drive = false) {
  std::promise<void> promise;
  auto future = promise.get_future();
  boost::asio::co_spawn(context, std::move(op), [&promise](const std::exception_ptr& e) {
    if (e) {
      promise.set_exception(e);
    } else {
      promise.set_value();
    }
  });
  if (drive) {
    context.restart();
    context.run();
  }
  future.get();
}

// Polls `done` every millisecond until it holds or `limit` has passed; returns whether it held.
// For what a background thread does in its own time (at idle priority, say): a test waits for
// it rather than sleeping for a time that a busy machine may not honour.
template <typename Predicate>
bool wait_until(Predicate done, std::chrono::milliseconds limit = std::chrono::seconds(60)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// Deterministic test data: byte i of stream `seed`.
inline std::vector<std::byte> pattern_bytes(std::size_t size, std::uint32_t seed) {
  std::vector<std::byte> out(size);
  std::uint64_t x = 0x9E3779B97F4A7C15ULL * (seed + 1);
  for (std::size_t i = 0; i < size; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    out[i] = static_cast<std::byte>(x);
  }
  return out;
}

}  // namespace hots3::test
