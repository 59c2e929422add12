#pragma once

// Private to src/s3: authorization of authenticated users.

#include "hots3/config/config.h"
#include "hots3/storage/object_store.h"

#include <cstdint>
#include <string_view>

namespace hots3::s3 {

enum class Access : std::uint8_t { kRead, kWrite, kOwner };

// Whether `user` may do `access` in `bucket`: admins and the bucket's owner anything; others what
// a grant whose bucket pattern matches (and whose owner, when it names one, owns the bucket)
// allows; kOwner only admins and the owner.
bool allowed(const config::UserConfig& user, const storage::BucketRecord& bucket, Access access);
// Whether `user` may create a bucket of this name (admins, and the user's create_buckets).
bool may_create_bucket(const config::UserConfig& user, std::string_view name);
// '*' any run of characters, '?' one character.
bool glob_match(std::string_view pattern, std::string_view text);

}  // namespace hots3::s3
