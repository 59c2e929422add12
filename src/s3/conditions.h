#pragma once

// Private to src/s3: the conditions of conditional requests.

#include "errors.h"
#include "request.h"

#include "hots3/storage/object_store.h"

#include <optional>
#include <string>
#include <string_view>
#include <variant>

namespace hots3::s3 {

// If-None-Match: * and If-Match: <etag> on a write.
std::variant<storage::WriteCondition, Error> write_condition(const Request& r);

// A conditional delete: If-Match (an ETag or *), x-amz-if-match-last-modified-time (an HTTP
// date), x-amz-if-match-size. Errors: InvalidArgument (a date or a size that is not one).
std::variant<storage::DeleteCondition, Error> delete_condition(const Request& r);

// GET/HEAD preconditions in S3's (RFC 9110's) order; `copy_source` reads the
// x-amz-copy-source-if-* forms instead (which never answer 304).
std::optional<Error> read_conditions(const Request& r, const storage::ObjectRecord& object,
                                     bool copy_source);

// Does one entity tag of a list ("a", W/"b", *) match `etag`?
bool etag_matches(std::string_view list, std::string_view etag);

std::string quoted(std::string_view etag);
std::string unquoted(std::string_view etag);

}  // namespace hots3::s3
