#pragma once

// Private to src/s3: GET of an evicted version, whose data comes back from the bucket's upstream.

#include "object_response.h"
#include "request.h"
#include "service.h"

#include "hots3/http/handler.h"
#include "hots3/storage/records.h"

#include <boost/asio/awaitable.hpp>

namespace hots3::s3 {

// Sends `selection` of `object` (kUpstreamOnly) with `head` (its headers made), the bytes read
// from the upstream as the client takes them. A whole-object GET also writes them to the device,
// and the version is local again once they are verified and durable; its last piece reaches the
// client only then, so that a client never completes a body the check refused. A range, or a
// GET while the device is full, passes through and keeps nothing.
boost::asio::awaitable<void> read_through(Service& s, Request& r, storage::ObjectRecord object,
                                          BodySelection selection, http::Response head);

}  // namespace hots3::s3
