#include "placeholder_handler.h"

namespace hots3::app {

boost::asio::awaitable<void> PlaceholderHandler::handle(http::Exchange& exchange) {
  http::Response response(501);
  response.add("Content-Type", "text/plain");
  co_await exchange.respond(std::move(response), "not implemented\n");
}

}  // namespace hots3::app
