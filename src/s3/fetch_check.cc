#include "fetch_check.h"

#include "hots3/aws/etag.h"
#include "hots3/common/hex.h"

#include <fmt/format.h>

#include <algorithm>
#include <string_view>

namespace hots3::s3 {
namespace {

bool is_md5_hex(std::string_view text) {
  return text.size() == 32 && std::all_of(text.begin(), text.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// Whether the parts lie end to end from byte 0 to `size`.
bool covers(const std::vector<storage::ObjectPartRecord>& parts, std::uint64_t size) {
  std::uint64_t at = 0;
  for (const storage::ObjectPartRecord& p : parts) {
    if (p.offset_bytes != at) return false;
    at += p.size_bytes;
  }
  return at == size;
}

}  // namespace

FetchCheck::FetchCheck(const storage::ObjectRecord& o, std::vector<storage::ObjectPartRecord> parts,
                       bool md5_etags)
    : expected_(o.etag) {
  using enum aws::ChecksumAlgorithm;
  const storage::ChecksumSet& c = o.checksums;
  const bool whole = !c.type || *c.type == "FULL_OBJECT";
  if (whole &&
      take_checksum({{kCrc64Nvme, &c.crc64nvme}, {kCrc32c, &c.crc32c}, {kCrc32, &c.crc32}})) {
    return;
  }
  if (o.upstream_etag || !md5_etags) {
    // Our ETag is not the upstream's, or not made of MD5s.
  } else if (o.parts_count == 0 && is_md5_hex(o.etag)) {
    way_ = Way::kMd5;
    return;
  } else if (o.parts_count > 0 && parts.size() == o.parts_count &&
             o.etag == fmt::format("{}-{}", o.etag.substr(0, 32), o.parts_count) &&
             is_md5_hex(o.etag.substr(0, 32)) && covers(parts, o.size_bytes)) {
    way_ = Way::kParts;
    parts_ = std::move(parts);
    return;
  }
  if (whole) take_checksum({{kSha1, &c.sha1}, {kSha256, &c.sha256}});
}

bool FetchCheck::take_checksum(std::initializer_list<Candidate> candidates) {
  for (const auto& [algorithm, value] : candidates) {
    if (*value) {
      way_ = Way::kChecksum;
      sum_.emplace(algorithm);
      expected_ = **value;
      return true;
    }
  }
  return false;
}

void FetchCheck::update(std::span<const std::byte> data) {
  switch (way_) {
    case Way::kNone:
      break;
    case Way::kMd5:
      md5_.update(data);
      break;
    case Way::kChecksum:
      sum_->update(data);
      break;
    case Way::kParts:
      while (!data.empty() && index_ < parts_.size()) {
        const storage::ObjectPartRecord& p = parts_[index_];
        const std::size_t take =
            std::min<std::uint64_t>(data.size(), p.offset_bytes + p.size_bytes - at_);
        md5_.update(data.first(take));
        at_ += take;
        data = data.subspan(take);
        if (at_ == p.offset_bytes + p.size_bytes) {
          part_md5s_.push_back(to_hex(md5_.finish()));
          ++index_;
        }
      }
      break;
  }
}

bool FetchCheck::passed() {
  switch (way_) {
    case Way::kNone:
      return false;
    case Way::kMd5:
      return to_hex(md5_.finish()) == expected_;
    case Way::kChecksum:
      return sum_->base64() == expected_;
    case Way::kParts: {
      // An empty last part got no bytes to close it.
      while (index_ < parts_.size() && parts_[index_].size_bytes == 0) {
        part_md5s_.push_back(to_hex(md5_.finish()));
        ++index_;
      }
      if (part_md5s_.size() != parts_.size()) return false;
      std::vector<std::string_view> views(part_md5s_.begin(), part_md5s_.end());
      return aws::multipart_etag(views, views.size()) == expected_;
    }
  }
  return false;
}

}  // namespace hots3::s3
