#pragma once

// Operating errors of hots3 as values (docs/STYLE.md, "Errors"). Every module turns its
// own failure sources (errno, cqe->res, SQLite codes) into these in exactly one place, and
// src/s3/errors.cc turns them into HTTP status + S3 error code in one table.

#include <boost/system/error_code.hpp>

#include <type_traits>

namespace hots3 {

enum class errc : int {
  kOk = 0,
  kNotFound,            // bucket, key, upload or part does not exist
  kAlreadyExists,       // create of something that exists
  kNoSpace,             // device or catalog full
  kChecksumMismatch,    // stored data does not match its checksum, or client digest mismatch
  kMisalignedIo,        // an I/O violated the device's alignment (a programmer error upstream)
  kIoError,             // the device reported an error (EIO and friends)
  kShortIo,             // the device transferred fewer bytes than asked, and retrying failed
  kInvalidArgument,     // a malformed or out-of-range input
  kTimedOut,            // a deadline passed
  kCancelled,           // the operation was cancelled (shutdown, client gone)
  kClosed,              // the peer closed the connection
  kTooLarge,            // an input exceeded a configured limit
  kLimitExceeded,       // a resource limit (connections, in-flight operations) was reached
  kCorrupt,             // on-disk structure damaged (superblock, catalog)
  kBusy,                // try again later
  kConflict,            // a concurrent change won the race
  kPreconditionFailed,  // a conditional request's condition was false
  kNotSupported,        // the operation or feature is not implemented
  kUnavailable,         // a dependency (device, upstream) is not available
  kInternal,            // an unexpected failure; details are in the log
  kLost,                // the data went with a lost device before it reached the upstream
};

// The category of hots3::errc; name "hots3".
const boost::system::error_category& hots3_category() noexcept;

inline boost::system::error_code make_error_code(errc e) noexcept {
  return {static_cast<int>(e), hots3_category()};
}

}  // namespace hots3

template <>
struct boost::system::is_error_code_enum<hots3::errc> : std::true_type {};
