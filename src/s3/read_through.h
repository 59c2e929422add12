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
// from the upstream as the client takes them. A whole-object GET also writes them to the device
// (a version of several chunks chunk by chunk, each kept as it comes, those kept already read
// from here), and the version is local again once they are verified and durable; its last piece
// reaches the client only then, so that a client never completes a body the check refused. A
// range of a version of several chunks reads and keeps the chunks it covers (a partial object);
// one from byte 0 also starts a fetch of the whole version behind it. A version the bucket's
// admission rule does not keep, or a GET while the device is full, passes through and keeps
// nothing. A whole-object GET that comes while another fetches the same version waits for it and
// then reads the device (FillFlights).
boost::asio::awaitable<void> read_through(Service& s, Request& r, storage::ObjectRecord object,
                                          BodySelection selection, http::Response head);

// Asks for `restore` (a whole fetch of an evicted version into the device, no client waiting):
// started at once by a runner of its own when fewer than FillFlights::kRestoresMax run (kQueued
// then too), else queued behind them, or refused (kAlready, kFull).
boost::asio::awaitable<FillFlights::Asked> ask_restore(Service& s, FillFlights::Restore restore);

// Sends `selection` of a local version from `reader`, with `head`.
boost::asio::awaitable<void> send_local(Request& r, storage::ObjectReader& reader,
                                        const BodySelection& selection, http::Response head);

}  // namespace hots3::s3
