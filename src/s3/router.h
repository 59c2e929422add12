#pragma once

// Private to src/s3: routing a located, authenticated request to its operation.

#include "errors.h"
#include "request.h"
#include "service.h"

#include <boost/asio/awaitable.hpp>

#include <cstddef>
#include <span>
#include <string_view>
#include <variant>

namespace hots3::s3 {

using Operation = boost::asio::awaitable<void> (*)(Service&, Request&);

struct Routed {
  Operation operation;
  std::size_t index;  // its name's in operation_names()
};

// The operation `r` names, or the error that it names none (NotImplemented for a sub-resource or
// POST hots3 does not have, MethodNotAllowed for anything else).
std::variant<Routed, Error> route(const Request& r);

// The names requests are counted under: each route's operation ("GetObject", "TierFlush"), then
// "GetMetrics" (index metrics_scrape(): /metrics with a bearer token), then "none" (index
// not_routed()) for requests answered before they were routed (not authenticated, not an
// operation hots3 has). A fixed list: metrics labelled by it stay bounded.
std::span<const std::string_view> operation_names();
std::size_t metrics_scrape();
std::size_t not_routed();

}  // namespace hots3::s3
