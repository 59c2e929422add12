#pragma once

// Private to src/storage: the operations one stream has in flight.

#include "hots3/common/result.h"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <functional>

namespace hots3::storage::detail {

// The operations one stream has in flight (device writes of a writer, read-ahead of a reader).
// One waiter at a time, on the stream's worker; completions resume it through the executor.
class Pipeline {
 public:
  explicit Pipeline(boost::asio::any_io_executor executor) : executor_(std::move(executor)) {}

  void started() noexcept { ++inflight_; }
  void finished(error_code ec);
  // Waits until fewer than `limit` operations are in flight.
  boost::asio::awaitable<void> wait_below(unsigned limit);
  // Waits for one completion (or returns at once if nothing is in flight).
  boost::asio::awaitable<void> wait_any();

  [[nodiscard]] unsigned inflight() const noexcept { return inflight_; }
  [[nodiscard]] error_code error() const noexcept { return error_; }
  [[nodiscard]] const boost::asio::any_io_executor& executor() const noexcept { return executor_; }

 private:
  boost::asio::any_io_executor executor_;
  unsigned inflight_ = 0;
  error_code error_;
  std::function<void()> waiter_;
};

}  // namespace hots3::storage::detail
