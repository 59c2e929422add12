#include "hots3/aws/etag.h"

#include "hots3/common/digest.h"
#include "hots3/common/hex.h"

namespace hots3::aws {
namespace {

// The 16 bytes of a hex MD5, or the text itself when it is not one.
std::string md5_bytes(std::string_view hex) {
  if (hex.size() == 32) {
    if (auto raw = from_hex(hex)) return *raw;
  }
  return std::string(hex);
}

std::string md5_then_count(Digest& md5, std::size_t parts) {
  std::array<std::uint8_t, 32> digest{};
  md5.finish(digest);
  return to_hex(std::span(digest).first(16)) + "-" + std::to_string(parts);
}

}  // namespace

std::string multipart_etag(std::span<const std::string_view> md5s, std::size_t parts) {
  Digest md5(Digest::Algorithm::kMd5);
  for (const std::string_view one : md5s) md5.update(md5_bytes(one));
  return md5_then_count(md5, parts);
}

std::string appended_etag(std::string_view previous_etag,
                          const std::array<std::uint8_t, 16>& data_md5, std::uint32_t parts) {
  Digest md5(Digest::Algorithm::kMd5);
  md5.update(md5_bytes(previous_etag.substr(0, previous_etag.find('-'))));
  md5.update(std::string_view(reinterpret_cast<const char*>(data_md5.data()), data_md5.size()));
  return md5_then_count(md5, parts);
}

}  // namespace hots3::aws
