#include "s3/request_xml.h"

#include <gtest/gtest.h>

#include <string>

namespace hots3::s3 {
namespace {

TEST(RequestXml, DeleteTakesOneToAThousandObjects) {
  auto parsed = parse_delete_request(
      "<Delete xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Quiet>true</Quiet>"
      "<Object><Key>a&amp;b</Key></Object><Object><Key>c</Key><VersionId>null</VersionId></"
      "Object></Delete>");
  ASSERT_TRUE(std::holds_alternative<DeleteRequest>(parsed));
  const auto& request = std::get<DeleteRequest>(parsed);
  EXPECT_TRUE(request.quiet);
  ASSERT_EQ(request.objects.size(), 2U);
  EXPECT_EQ(request.objects[0].key, "a&b");
  EXPECT_FALSE(request.objects[0].version_id.has_value());
  EXPECT_EQ(request.objects[1].version_id, "null");

  for (const std::string body :
       {"<Delete></Delete>", "<Delete><Quiet>yes</Quiet><Object><Key>a</Key></Object></Delete>",
        "<Delete><Object><VersionId>x</VersionId></Object></Delete>", "<Remove/>", "not xml"}) {
    auto refused = parse_delete_request(body);
    ASSERT_TRUE(std::holds_alternative<Error>(refused)) << body;
    EXPECT_EQ(std::get<Error>(refused).code, Code::kMalformedXML) << body;
  }
  std::string many = "<Delete>";
  for (int i = 0; i < 1001; ++i) many += "<Object><Key>k</Key></Object>";
  EXPECT_TRUE(std::holds_alternative<Error>(parse_delete_request(many + "</Delete>")));
}

TEST(RequestXml, DeleteCarriesEachObjectsConditions) {
  auto parsed = parse_delete_request(
      "<Delete><Object><Key>a</Key><ETag>\"e1\"</ETag><Size>12</Size>"
      "<LastModifiedTime>1994-11-06T08:49:37.123Z</LastModifiedTime></Object>"
      "<Object><Key>b</Key></Object></Delete>");
  ASSERT_TRUE(std::holds_alternative<DeleteRequest>(parsed));
  const auto& objects = std::get<DeleteRequest>(parsed).objects;
  ASSERT_EQ(objects.size(), 2U);
  EXPECT_EQ(objects[0].condition.if_match, "e1");
  EXPECT_EQ(objects[0].condition.size_bytes, 12U);
  EXPECT_EQ(objects[0].condition.last_modified_s, 784111777);
  EXPECT_FALSE(objects[1].condition.if_match || objects[1].condition.size_bytes ||
               objects[1].condition.last_modified_s);
  for (const std::string field :
       {"<Size>-1</Size>", "<Size>1x</Size>", "<LastModifiedTime>yesterday</LastModifiedTime>"}) {
    auto refused =
        parse_delete_request("<Delete><Object><Key>a</Key>" + field + "</Object></Delete>");
    ASSERT_TRUE(std::holds_alternative<Error>(refused)) << field;
    EXPECT_EQ(std::get<Error>(refused).code, Code::kMalformedXML) << field;
  }
}

TEST(RequestXml, CompleteListsPartsAsSent) {
  auto parsed = parse_complete_request(
      "<CompleteMultipartUpload><Part><PartNumber>2</PartNumber><ETag>\"e2\"</ETag>"
      "<ChecksumCRC32>AAAAAA==</ChecksumCRC32><ChecksumType>COMPOSITE</ChecksumType></Part>"
      "<Part><ETag>e1</ETag><PartNumber>1</PartNumber></Part></CompleteMultipartUpload>");
  ASSERT_TRUE(std::holds_alternative<std::vector<ListedPart>>(parsed));
  const auto& parts = std::get<std::vector<ListedPart>>(parsed);
  ASSERT_EQ(parts.size(), 2U);
  EXPECT_EQ(parts[0].number, 2U);
  EXPECT_EQ(parts[0].etag, "e2");
  ASSERT_EQ(parts[0].checksums.size(), 1U);
  EXPECT_EQ(parts[0].checksums[0].first, aws::ChecksumAlgorithm::kCrc32);
  EXPECT_EQ(parts[1].number, 1U);  // the order is the client's: the completion judges it

  for (const char* body : {"<CompleteMultipartUpload/>",
                           "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber></Part></"
                           "CompleteMultipartUpload>",
                           "<CompleteMultipartUpload><Part><PartNumber>-1</PartNumber><ETag>e</"
                           "ETag></Part></CompleteMultipartUpload>",
                           "<CompleteMultipartUpload><Part><PartNumber>99999999999</"
                           "PartNumber><ETag>e</ETag></Part></CompleteMultipartUpload>",
                           "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>e</"
                           "ETag><ChecksumMD5>x</ChecksumMD5></Part>"
                           "</CompleteMultipartUpload>"}) {
    auto refused = parse_complete_request(body);
    ASSERT_TRUE(std::holds_alternative<Error>(refused)) << body;
    EXPECT_EQ(std::get<Error>(refused).code, Code::kMalformedXML) << body;
  }
}

TEST(RequestXml, BucketConfigurationAndAcl) {
  const auto configuration = [](std::string_view body) {
    return std::get<BucketConfiguration>(parse_create_bucket_configuration(body));
  };
  EXPECT_EQ(configuration("").location_constraint, std::nullopt);
  EXPECT_EQ(configuration("<CreateBucketConfiguration><LocationConstraint>eu-west-1</"
                          "LocationConstraint></CreateBucketConfiguration>")
                .location_constraint,
            "eu-west-1");
  EXPECT_TRUE(std::holds_alternative<Error>(parse_create_bucket_configuration("<Bucket/>")));
  // A directory bucket's, as boto3 sends it.
  const BucketConfiguration directory = configuration(
      "<CreateBucketConfiguration xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Location>"
      "<Type>AvailabilityZone</Type><Name>use1-az4</Name></Location><Bucket><DataRedundancy>"
      "SingleAvailabilityZone</DataRedundancy><Type>Directory</Type></Bucket>"
      "</CreateBucketConfiguration>");
  EXPECT_EQ(directory.location_constraint, std::nullopt);
  EXPECT_EQ(directory.location_type, "AvailabilityZone");
  EXPECT_EQ(directory.location_name, "use1-az4");
  EXPECT_EQ(directory.bucket_type, "Directory");
  EXPECT_EQ(directory.data_redundancy, "SingleAvailabilityZone");
  // Not both kinds at once.
  EXPECT_TRUE(std::holds_alternative<Error>(parse_create_bucket_configuration(
      "<CreateBucketConfiguration><LocationConstraint>eu-west-1</LocationConstraint><Bucket>"
      "<Type>Directory</Type></Bucket></CreateBucketConfiguration>")));
  const std::string owner_only =
      "<AccessControlPolicy><AccessControlList><Grant><Grantee><ID>me</ID></Grantee>"
      "<Permission>FULL_CONTROL</Permission></Grant></AccessControlList></AccessControlPolicy>";
  EXPECT_TRUE(std::get<bool>(acl_is_owner_full_control(owner_only, "me")));
  EXPECT_FALSE(std::get<bool>(acl_is_owner_full_control(owner_only, "you")));
  EXPECT_TRUE(std::holds_alternative<Error>(acl_is_owner_full_control("<Acl", "me")));
}

TEST(RequestXml, RestoreTakesDaysAndRefusesWhatItCannotDo) {
  EXPECT_FALSE(check_restore_request("").has_value());
  EXPECT_FALSE(
      check_restore_request(
          "<RestoreRequest xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Days>2</Days>"
          "<GlacierJobParameters><Tier>Expedited</Tier></GlacierJobParameters>"
          "</RestoreRequest>")
          .has_value());
  for (const std::string body :
       {"<RestoreRequest><Days>0</Days></RestoreRequest>",
        "<RestoreRequest><Days>two</Days></RestoreRequest>", "<Restore/>", "<RestoreRequest"}) {
    auto refused = check_restore_request(body);
    ASSERT_TRUE(refused.has_value()) << body;
    EXPECT_EQ(refused->code, Code::kMalformedXML) << body;
  }
  auto select = check_restore_request("<RestoreRequest><Type>SELECT</Type></RestoreRequest>");
  ASSERT_TRUE(select.has_value());
  EXPECT_EQ(select->code, Code::kNotImplemented);
}

}  // namespace
}  // namespace hots3::s3
