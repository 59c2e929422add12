#include "s3/multipart_rules.h"

#include "hots3/aws/checksum.h"
#include "hots3/aws/etag.h"
#include "hots3/common/digest.h"
#include "hots3/common/hex.h"

#include <gtest/gtest.h>

namespace hots3::s3 {
namespace {

constexpr std::uint64_t kMiB = 1024 * 1024;

std::string md5_hex(std::string_view data) {
  return to_hex(md5(std::as_bytes(std::span(data.data(), data.size()))));
}

storage::PartRecord part(std::uint32_t number, std::string_view data, std::uint64_t size_bytes) {
  storage::PartRecord p;
  p.part_number = number;
  p.etag = md5_hex(data);
  p.size_bytes = size_bytes;
  return p;
}

TEST(MultipartRules, PartNumbersAreOneToTenThousand) {
  EXPECT_EQ(parse_part_number("1"), 1U);
  EXPECT_EQ(parse_part_number("10000"), 10000U);
  for (const char* bad : {"0", "10001", "-1", "+1", "1.0", "", " 1", "4294967297", "x"}) {
    EXPECT_FALSE(parse_part_number(bad).has_value()) << bad;
  }
  const Error e = invalid_part_number("0");
  EXPECT_EQ(e.code, Code::kInvalidArgument);
}

TEST(MultipartRules, TheEtagIsTheMd5OfThePartsMd5s) {
  // A known answer: two parts "a" and "b".
  const std::string a = md5_hex("a"), b = md5_hex("b");
  const std::string raw = *from_hex(a) + *from_hex(b);
  const std::string_view parts[] = {a, b};
  EXPECT_EQ(aws::multipart_etag(parts, 2), md5_hex(raw) + "-2");
  // An append chains the previous ETag's hash with the new data's MD5.
  const auto data_md5 = md5(std::as_bytes(std::span(std::string_view("c"))));
  EXPECT_EQ(aws::appended_etag(a + "-2", data_md5, 3),
            md5_hex(*from_hex(a) + *from_hex(md5_hex("c"))) + "-3");
  EXPECT_EQ(aws::appended_etag(a, data_md5, 2), aws::appended_etag(a + "-7", data_md5, 2));
}

class CompletionTest : public ::testing::Test {
 protected:
  std::vector<ListedPart> listed(std::initializer_list<std::uint32_t> numbers) {
    std::vector<ListedPart> out;
    for (auto n : numbers) {
      auto it = std::find_if(stored_.begin(), stored_.end(),
                             [n](const auto& p) { return p.part_number == n; });
      out.push_back({n, it == stored_.end() ? "missing" : it->etag, {}});
    }
    return out;
  }
  storage::UploadRecord upload_;
  std::vector<storage::PartRecord> stored_ = {part(1, "one", 5 * kMiB), part(2, "two", 5 * kMiB),
                                              part(3, "three", 1)};
};

TEST_F(CompletionTest, TheListedPartsInOrderMakeTheObject) {
  auto plan = plan_completion(upload_, stored_, listed({1, 3}), std::nullopt);
  ASSERT_TRUE(std::holds_alternative<storage::ObjectStore::CompletionPlan>(plan));
  const auto& chosen = std::get<storage::ObjectStore::CompletionPlan>(plan);
  ASSERT_EQ(chosen.parts.size(), 2U);
  EXPECT_EQ(chosen.parts[1].part_number, 3U);
  const std::string_view md5s[] = {stored_[0].etag, stored_[2].etag};
  EXPECT_EQ(chosen.spec.etag, aws::multipart_etag(md5s, 2));
}

TEST_F(CompletionTest, ADirectoryBucketsPartsAreNumberedFromOneWithNoneLeftOut) {
  auto code = [&](std::vector<ListedPart> parts) {
    auto plan = plan_completion(upload_, stored_, parts, std::nullopt, true);
    return std::holds_alternative<Error>(plan) ? std::get<Error>(plan).code : Code::kInternalError;
  };
  EXPECT_EQ(code(listed({1, 3})), Code::kInvalidPartOrder);
  EXPECT_EQ(code(listed({2, 3})), Code::kInvalidPartOrder);
  EXPECT_EQ(code(listed({3, 2})), Code::kInvalidPartOrder);
  EXPECT_EQ(code(listed({1, 2, 3})), Code::kInternalError);  // (no error)
  EXPECT_EQ(code(listed({1})), Code::kInternalError);
  // Elsewhere parts may be left out.
  EXPECT_TRUE(std::holds_alternative<storage::ObjectStore::CompletionPlan>(
      plan_completion(upload_, stored_, listed({1, 3}), std::nullopt, false)));
}

TEST_F(CompletionTest, SThreesChecksInItsOrder) {
  auto code = [&](std::vector<ListedPart> parts) {
    auto plan = plan_completion(upload_, stored_, parts, std::nullopt);
    return std::holds_alternative<Error>(plan) ? std::get<Error>(plan).code : Code::kInternalError;
  };
  EXPECT_EQ(code(listed({2, 1})), Code::kInvalidPartOrder);
  EXPECT_EQ(code(listed({1, 1})), Code::kInvalidPartOrder);
  EXPECT_EQ(code(listed({1, 4})), Code::kInvalidPart);
  auto wrong_etag = listed({1, 2});
  wrong_etag[1].etag = md5_hex("other");
  EXPECT_EQ(code(wrong_etag), Code::kInvalidPart);
  EXPECT_EQ(code(listed({3, 4})), Code::kEntityTooSmall);    // part by part, in the list's order
  EXPECT_EQ(code(listed({3, 2})), Code::kInvalidPartOrder);  // order before everything
  stored_[0].size_bytes = kMiB;
  EXPECT_EQ(code(listed({1, 2})), Code::kEntityTooSmall);
  EXPECT_EQ(code(listed({2, 3})), Code::kInternalError);  // the last part may be small
}

TEST_F(CompletionTest, FullObjectCrcsCombineAndAClaimIsChecked) {
  upload_.checksum_algorithm = "CRC32";
  upload_.checksum_type = "FULL_OBJECT";
  const std::string data[] = {std::string(5 * kMiB, 'a'), std::string(5 * kMiB, 'b'), "z"};
  for (int i = 0; i < 3; ++i) {
    stored_[static_cast<std::size_t>(i)].checksums.crc32 =
        aws::crc_to_base64(aws::ChecksumAlgorithm::kCrc32,
                           aws::crc32(std::as_bytes(std::span(data[i].data(), data[i].size()))));
  }
  const std::string whole = data[0] + data[1] + data[2];
  const std::string expected =
      aws::crc_to_base64(aws::ChecksumAlgorithm::kCrc32,
                         aws::crc32(std::as_bytes(std::span(whole.data(), whole.size()))));
  auto plan = plan_completion(upload_, stored_, listed({1, 2, 3}), std::nullopt);
  ASSERT_TRUE(std::holds_alternative<storage::ObjectStore::CompletionPlan>(plan));
  const auto& spec = std::get<storage::ObjectStore::CompletionPlan>(plan).spec;
  EXPECT_EQ(spec.checksums.crc32, expected);
  EXPECT_EQ(spec.checksums.type, "FULL_OBJECT");
  EXPECT_TRUE(std::holds_alternative<storage::ObjectStore::CompletionPlan>(
      plan_completion(upload_, stored_, listed({1, 2, 3}), expected)));
  auto refused = plan_completion(upload_, stored_, listed({1, 2, 3}), std::string("AAAAAA=="));
  ASSERT_TRUE(std::holds_alternative<Error>(refused));
  EXPECT_EQ(std::get<Error>(refused).code, Code::kBadDigest);
  EXPECT_FALSE(check_claimed_algorithm(upload_checksums(upload_), aws::ChecksumAlgorithm::kCrc32));
  EXPECT_TRUE(check_claimed_algorithm(upload_checksums(upload_), aws::ChecksumAlgorithm::kSha256));
}

TEST_F(CompletionTest, ACompositeUploadNeedsEveryPartsChecksumListed) {
  upload_.checksum_algorithm = "SHA256";
  for (auto& p : stored_) p.checksums.sha256 = aws::base64_encode(std::string(32, 'x'));
  auto missing = plan_completion(upload_, stored_, listed({1, 2}), std::nullopt);
  ASSERT_TRUE(std::holds_alternative<Error>(missing));
  EXPECT_EQ(std::get<Error>(missing).code, Code::kInvalidRequest);
  auto parts = listed({1, 2});
  for (auto& p : parts)
    p.checksums = {{aws::ChecksumAlgorithm::kSha256, aws::base64_encode(std::string(32, 'x'))}};
  auto plan = plan_completion(upload_, stored_, parts, std::nullopt);
  ASSERT_TRUE(std::holds_alternative<storage::ObjectStore::CompletionPlan>(plan));
  const auto& spec = std::get<storage::ObjectStore::CompletionPlan>(plan).spec;
  ASSERT_TRUE(spec.checksums.sha256.has_value());
  EXPECT_TRUE(spec.checksums.sha256->ends_with("-2"));
  EXPECT_EQ(spec.checksums.type, "COMPOSITE");
}

// ---- appends --------------------------------------------------------------------------------

TEST(AppendRules, TheOffsetIsAWholeNumber) {
  EXPECT_EQ(std::get<std::uint64_t>(parse_write_offset("0")), 0U);
  EXPECT_EQ(std::get<std::uint64_t>(parse_write_offset("18446744073709551615")),
            18446744073709551615ULL);
  for (const char* bad : {"", "-1", "+1", "1.5", " 1", "18446744073709551616", "x"}) {
    auto parsed = parse_write_offset(bad);
    ASSERT_TRUE(std::holds_alternative<Error>(parsed)) << bad;
    EXPECT_EQ(std::get<Error>(parsed).code, Code::kInvalidArgument) << bad;
  }
}

class AppendTest : public ::testing::Test {
 protected:
  AppendTest() {
    base_.id = 7;
    base_.size_bytes = 100;
    base_.etag = md5_hex("base");
    base_.headers.content_type = "text/plain";
    base_.user_metadata.emplace_back("owner", "training");
    base_.checksums.crc32c = aws::crc_to_base64(aws::ChecksumAlgorithm::kCrc32c, 0x1234);
    base_.checksums.type = "FULL_OBJECT";
  }

  std::variant<AppendPlan, Error> plan(std::optional<storage::ObjectRecord> base,
                                       std::uint64_t offset,
                                       std::optional<aws::ChecksumAlgorithm> algorithm = {}) {
    return plan_append(base, offset, condition_, requested_, algorithm, "k");
  }

  // The error's code; nullopt when the append may go ahead.
  static std::optional<Code> refused(const std::variant<AppendPlan, Error>& planned) {
    if (const auto* e = std::get_if<Error>(&planned)) return e->code;
    return std::nullopt;
  }

  storage::ObjectRecord base_;
  storage::WriteCondition condition_;
  storage::ObjectSpec requested_;
};

TEST_F(AppendTest, TheOffsetIsTheObjectsSize) {
  EXPECT_EQ(refused(plan(std::nullopt, 0)), std::nullopt);
  EXPECT_EQ(refused(plan(std::nullopt, 1)), Code::kInvalidWriteOffset);
  EXPECT_EQ(refused(plan(base_, 99)), Code::kInvalidWriteOffset);
  const auto planned = plan(base_, 100);
  ASSERT_EQ(refused(planned), std::nullopt);
  EXPECT_EQ(std::get<AppendPlan>(planned).parts, 2U);  // the first part is the object so far
  base_.parts_count = 2;
  EXPECT_EQ(std::get<AppendPlan>(plan(base_, 100)).parts, 3U);
  base_.parts_count = kPartNumberMax;
  EXPECT_EQ(refused(plan(base_, 100)), Code::kTooManyParts);
}

TEST_F(AppendTest, ConditionsMetadataAndChecksumsAreCheckedInS3sOrder) {
  condition_.if_none_match_any = true;
  EXPECT_EQ(refused(plan(base_, 100)), Code::kPreconditionFailed);
  EXPECT_EQ(refused(plan(base_, 5)), Code::kInvalidWriteOffset);  // the offset first
  EXPECT_EQ(refused(plan(std::nullopt, 0)), std::nullopt);
  condition_ = {};
  condition_.if_match = "other";
  EXPECT_EQ(refused(plan(base_, 100)), Code::kPreconditionFailed);
  EXPECT_EQ(refused(plan(std::nullopt, 0)), Code::kNoSuchKey);
  condition_.if_match = base_.etag;
  EXPECT_EQ(refused(plan(base_, 100)), std::nullopt);
  requested_.user_metadata.emplace_back("new", "value");
  EXPECT_EQ(refused(plan(base_, 100)), Code::kInvalidRequest);
  condition_ = {};
  EXPECT_EQ(refused(plan(std::nullopt, 0)), std::nullopt);  // a new object may set its metadata
  requested_ = {};
  EXPECT_EQ(refused(plan(base_, 100, aws::ChecksumAlgorithm::kSha256)), Code::kInvalidRequest);
}

TEST_F(AppendTest, AFullObjectCrcCarriesOnAndTheEtagChains) {
  const auto planned = std::get<AppendPlan>(plan(base_, 100));
  ASSERT_TRUE(planned.extended_crc.has_value());
  EXPECT_EQ(planned.extended_crc->first, aws::ChecksumAlgorithm::kCrc32c);
  EXPECT_EQ(planned.extended_crc->second, 0x1234U);
  EXPECT_EQ(planned.body_algorithm, aws::ChecksumAlgorithm::kCrc32c);  // verified on the new bytes

  AppendedData data;
  data.digest = md5(std::as_bytes(std::span(std::string_view("more"))));
  data.bytes = 4;
  data.crc = 0x5678;
  data.checksum = {{aws::ChecksumAlgorithm::kCrc32c, "part-crc"}};
  const AppendedVersion version = appended_version(base_, requested_, planned, data);
  EXPECT_EQ(version.spec.etag, aws::appended_etag(base_.etag, data.digest, 2));
  EXPECT_TRUE(version.spec.etag.ends_with("-2"));
  EXPECT_EQ(version.spec.headers, base_.headers);
  EXPECT_EQ(version.spec.user_metadata, base_.user_metadata);
  EXPECT_EQ(version.spec.checksums.crc32c,
            aws::crc_to_base64(aws::ChecksumAlgorithm::kCrc32c, 0x5678));
  ASSERT_EQ(version.new_parts.size(), 2U);  // the object so far becomes part 1
  EXPECT_EQ(version.new_parts[0].part_number, 1U);
  EXPECT_EQ(version.new_parts[0].size_bytes, 100U);
  EXPECT_EQ(version.new_parts[1].part_number, 2U);
  EXPECT_EQ(version.new_parts[1].offset_bytes, 100U);
  EXPECT_EQ(version.new_parts[1].size_bytes, 4U);
  EXPECT_EQ(version.new_parts[1].checksum, "part-crc");

  // A SHA-256 object keeps no checksum past its first append.
  base_.checksums = {};
  base_.checksums.sha256 = "sha";
  const auto sha_plan = std::get<AppendPlan>(plan(base_, 100));
  EXPECT_FALSE(sha_plan.extended_crc.has_value());
  EXPECT_FALSE(appended_version(base_, requested_, sha_plan, data).spec.checksums.sha256);
}

TEST_F(AppendTest, ANewObjectIsAnOrdinaryOne) {
  requested_.user_metadata.emplace_back("new", "value");
  const auto planned = std::get<AppendPlan>(plan(std::nullopt, 0));
  AppendedData data;
  data.etag = md5_hex("data");
  data.checksum = {{aws::ChecksumAlgorithm::kCrc32, "crc"}};
  const AppendedVersion version = appended_version(std::nullopt, requested_, planned, data);
  EXPECT_EQ(version.spec.etag, data.etag);
  EXPECT_EQ(version.spec.user_metadata, requested_.user_metadata);
  EXPECT_EQ(version.spec.checksums.crc32, "crc");
  EXPECT_EQ(version.spec.checksums.type, "FULL_OBJECT");
  EXPECT_TRUE(version.new_parts.empty());
}

}  // namespace
}  // namespace hots3::s3
