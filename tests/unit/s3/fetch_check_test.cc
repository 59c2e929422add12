#include "s3/fetch_check.h"

#include "hots3/aws/checksum.h"
#include "hots3/aws/etag.h"
#include "hots3/common/digest.h"
#include "hots3/common/hex.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

namespace hots3::s3 {
namespace {

std::span<const std::byte> bytes(std::string_view data) {
  return std::as_bytes(std::span(data.data(), data.size()));
}

std::string md5_hex(std::string_view data) { return to_hex(md5(bytes(data))); }

std::string sum(aws::ChecksumAlgorithm algorithm, std::string_view data) {
  aws::Checksummer c(algorithm);
  c.update(bytes(data));
  return c.base64();
}

// A single-part version of `data` as the store describes it: its MD5 ETag and no checksum.
storage::ObjectRecord version_of(std::string_view data) {
  storage::ObjectRecord o;
  o.size_bytes = data.size();
  o.etag = md5_hex(data);
  return o;
}

// Whether `data`, passed in pieces of `piece` bytes, is taken for the version.
bool check(FetchCheck check, std::string_view data, std::size_t piece = 7) {
  for (std::size_t at = 0; at < data.size(); at += piece)
    check.update(bytes(data.substr(at, piece)));
  return check.passed();
}

std::string damaged(std::string data, std::size_t at) {
  data[at] = static_cast<char>(data[at] ^ 0x10);
  return data;
}

const std::string kData = "the bytes of a version the upstream holds, some of them at least";

TEST(FetchCheck, TheMd5EtagOfASinglePartVersionVouchesForIt) {
  const storage::ObjectRecord o = version_of(kData);
  ASSERT_TRUE(FetchCheck(o, {}, true).possible());
  EXPECT_TRUE(check(FetchCheck(o, {}, true), kData));
  EXPECT_FALSE(check(FetchCheck(o, {}, true), damaged(kData, 20)));
  EXPECT_FALSE(check(FetchCheck(o, {}, true), kData.substr(1)));
}

TEST(FetchCheck, AWholeObjectCrcIsPreferredToTheEtag) {
  using enum aws::ChecksumAlgorithm;
  for (const auto algorithm : {kCrc64Nvme, kCrc32c, kCrc32}) {
    storage::ObjectRecord o = version_of(kData);
    o.etag = md5_hex("another version");  // not what is checked: the CRC is
    const std::string crc = sum(algorithm, kData);
    (algorithm == kCrc64Nvme ? o.checksums.crc64nvme
     : algorithm == kCrc32c  ? o.checksums.crc32c
                             : o.checksums.crc32) = crc;
    EXPECT_TRUE(check(FetchCheck(o, {}, true), kData)) << crc;
    EXPECT_FALSE(check(FetchCheck(o, {}, true), damaged(kData, 3))) << crc;
    o.checksums.type = "FULL_OBJECT";
    EXPECT_TRUE(check(FetchCheck(o, {}, true), kData)) << crc;
  }
  // Of several, CRC64NVME: a wrong one fails bytes the others would pass.
  storage::ObjectRecord o = version_of(kData);
  o.checksums.crc32 = sum(kCrc32, kData);
  o.checksums.crc64nvme = sum(kCrc64Nvme, "another version");
  EXPECT_FALSE(check(FetchCheck(o, {}, true), kData));
}

TEST(FetchCheck, ACompositeChecksumIsNotOfTheWholeObjectAndTheEtagDecides) {
  storage::ObjectRecord o = version_of(kData);
  o.checksums.crc32 = sum(aws::ChecksumAlgorithm::kCrc32, "the parts' checksums");
  o.checksums.type = "COMPOSITE";
  EXPECT_TRUE(check(FetchCheck(o, {}, true), kData));
  EXPECT_FALSE(check(FetchCheck(o, {}, true), damaged(kData, 0)));
}

TEST(FetchCheck, AMultipartEtagIsCheckedPartByPart) {
  // Three parts, the last short; pieces that straddle their bounds.
  const std::vector<std::string_view> parts = {std::string_view(kData).substr(0, 24),
                                               std::string_view(kData).substr(24, 24),
                                               std::string_view(kData).substr(48)};
  std::vector<std::string> md5s;
  std::vector<storage::ObjectPartRecord> table;
  std::uint64_t at = 0;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    md5s.push_back(md5_hex(parts[i]));
    table.push_back({.part_number = static_cast<std::uint32_t>(i + 1),
                     .offset_bytes = at,
                     .size_bytes = parts[i].size(),
                     .checksum = std::nullopt});
    at += parts[i].size();
  }
  std::vector<std::string_view> views(md5s.begin(), md5s.end());
  storage::ObjectRecord o = version_of(kData);
  o.parts_count = 3;
  o.etag = aws::multipart_etag(views, 3);
  for (const std::size_t piece : {1UL, 5UL, 24UL, 100UL}) {
    EXPECT_TRUE(check(FetchCheck(o, table, true), kData, piece)) << piece;
    EXPECT_FALSE(check(FetchCheck(o, table, true), damaged(kData, 30), piece)) << piece;
  }
  // The same bytes under a table that does not add up to the object vouch for nothing.
  table.pop_back();
  EXPECT_FALSE(FetchCheck(o, table, true).possible());
}

TEST(FetchCheck, WithoutMd5EtagsOnlyAChecksumVouches) {
  storage::ObjectRecord o = version_of(kData);
  EXPECT_FALSE(FetchCheck(o, {}, false).possible());
  o.checksums.sha256 = sum(aws::ChecksumAlgorithm::kSha256, kData);
  EXPECT_TRUE(check(FetchCheck(o, {}, false), kData));
  EXPECT_FALSE(check(FetchCheck(o, {}, false), damaged(kData, 63)));
}

TEST(FetchCheck, AnAppendedVersionWithoutAChecksumIsNotVouchedFor) {
  storage::ObjectRecord o = version_of(kData);
  o.etag = "a-digest-of-its-appends";
  o.upstream_etag = md5_hex(kData);
  EXPECT_FALSE(FetchCheck(o, {}, true).possible());
  EXPECT_FALSE(check(FetchCheck(o, {}, true), kData));
}

}  // namespace
}  // namespace hots3::s3
