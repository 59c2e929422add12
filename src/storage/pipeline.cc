#include "storage/pipeline.h"

#include "hots3/common/assert.h"

#include <boost/asio/async_result.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace hots3::storage::detail {

namespace asio = boost::asio;

void Pipeline::finished(error_code ec) {
  H3_ASSERT(inflight_ > 0);
  --inflight_;
  if (ec && !error_) error_ = ec;
  if (waiter_) {
    auto waiter = std::move(waiter_);
    waiter_ = nullptr;
    asio::post(executor_, std::move(waiter));
  }
}

asio::awaitable<void> Pipeline::wait_any() {
  if (inflight_ == 0) co_return;
  co_await asio::async_initiate<decltype(asio::use_awaitable), void()>(
      [this](auto handler) {
        H3_ASSERT(!waiter_, "two waiters on one stream");
        waiter_ = [h = std::make_shared<decltype(handler)>(std::move(handler))]() mutable {
          (*h)();
        };
      },
      asio::use_awaitable);
}

asio::awaitable<void> Pipeline::wait_below(unsigned limit) {
  while (inflight_ >= limit) co_await wait_any();
}

}  // namespace hots3::storage::detail
