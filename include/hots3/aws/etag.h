#pragma once

// S3's ETags of objects made of parts, which hots3 gives its own multipart and appended objects
// and expects of an upstream S3 for the uploads it makes there.

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace hots3::aws {

// The ETag of an object made of parts: the MD5 of the parts' binary MD5s, then "-<count>". Each
// digest is given as hex (a part's ETag; the hash of an earlier multipart ETag); text that is not
// 32 hex digits goes in as it is (ETags of another making: still a distinct, stable result).
std::string multipart_etag(std::span<const std::string_view> md5s, std::size_t parts);
// An append's ETag: chained from the ETag appended to and the MD5 of the appended bytes, so that
// every version has its own, in the multipart form "-<parts>".
std::string appended_etag(std::string_view previous_etag,
                          const std::array<std::uint8_t, 16>& data_md5, std::uint32_t parts);

}  // namespace hots3::aws
