#pragma once

// Private to src/s3: the rules of multipart uploads (and of appends, which S3 Express makes parts
// of an object), as pure functions of their inputs.

#include <cstdint>

namespace hots3::s3 {

inline constexpr std::uint64_t kPartBytesMin = 5ULL * 1024 * 1024;  // every part but the last
inline constexpr std::uint32_t kPartNumberMax = 10000;

}  // namespace hots3::s3
