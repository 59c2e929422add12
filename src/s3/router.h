#pragma once

// Private to src/s3: routing a located, authenticated request to its operation.

#include "errors.h"
#include "request.h"
#include "service.h"

#include <boost/asio/awaitable.hpp>

#include <variant>

namespace hots3::s3 {

using Operation = boost::asio::awaitable<void> (*)(Service&, Request&);

// The operation `r` names, or the error that it names none (NotImplemented for a sub-resource or
// POST hots3 does not have, MethodNotAllowed for anything else).
std::variant<Operation, Error> route(const Request& r);

}  // namespace hots3::s3
