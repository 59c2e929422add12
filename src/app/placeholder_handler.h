#pragma once

#include "hots3/http/handler.h"

namespace hots3::app {

// Answers every request with 501 until the S3 layer is wired in.
class PlaceholderHandler final : public http::Handler {
 public:
  boost::asio::awaitable<void> handle(http::Exchange& exchange) override;
};

}  // namespace hots3::app
