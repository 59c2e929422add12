// Pure pieces of the S3 layer: the error table, Range parsing (of GET and of UploadPartCopy),
// time formats, XML.

#include "s3/copy_source.h"
#include "s3/errors.h"
#include "s3/names.h"
#include "s3/object_attributes.h"
#include "s3/range.h"
#include "s3/s3_xml.h"
#include "s3/time_format.h"

#include <gtest/gtest.h>

namespace hots3::s3 {
namespace {

TEST(Errors, EveryCodeHasAnEntry) {
  for (int c = 0; c <= static_cast<int>(Code::kInvalidPartNumber); ++c) {
    const auto code = static_cast<Code>(c);
    EXPECT_FALSE(code_name(code).empty()) << c;
    EXPECT_GE(http_status(code), 300U) << c;
    // Only InternalError itself may render as InternalError.
    if (code != Code::kInternalError) {
      EXPECT_NE(code_name(code), "InternalError") << c;
    }
  }
  EXPECT_EQ(http_status(Code::kNoSuchKey), 404U);
  EXPECT_EQ(http_status(Code::kInvalidRange), 416U);
  EXPECT_EQ(code_name(Code::kExpiredPresignedRequest), "AccessDenied");
}

TEST(Errors, BodyIsS3Xml) {
  const std::string body =
      error_body(Error(Code::kNoSuchKey).with("Key", "a&b"), "/b/a&b", "REQ", "HOST");
  EXPECT_NE(
      body.find(
          "<Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message>"),
      std::string::npos)
      << body;
  EXPECT_NE(body.find("<Key>a&amp;b</Key>"), std::string::npos) << body;
  EXPECT_NE(body.find("<RequestId>REQ</RequestId><HostId>HOST</HostId>"), std::string::npos)
      << body;
}

TEST(Errors, FromErrc) {
  EXPECT_EQ(from_errc(errc::kNoSpace).code, Code::kInsufficientStorage);
  EXPECT_EQ(from_errc(errc::kPreconditionFailed).code, Code::kPreconditionFailed);
  EXPECT_EQ(from_errc(errc::kIoError).code, Code::kInternalError);
  EXPECT_EQ(from_errc(error_code(EIO, boost::system::generic_category())).code,
            Code::kInternalError);
}

// The syntax UploadPartCopy checks: which bounds a range names, before any object size.
TEST(Names, DirectoryBucketsEndInTheirZoneAndXS3) {
  EXPECT_EQ(directory_bucket_zone("ckpt--use1-az4--x-s3"), "use1-az4");
  EXPECT_EQ(directory_bucket_zone("a--b--x-s3"), "b");
  EXPECT_EQ(directory_bucket_zone("my-data--rack7--x-s3"), "rack7");
  for (std::string_view name :
       {"ckpt", "ckpt--x-s3", "--use1-az4--x-s3", "ckpt----x-s3", "ckpt--use1-az4-",
        "Ckpt--az--x-s3", "ck.pt--az--x-s3", "ckpt---az--x-s3", "ckpt--az---x-s3",
        "xn--ckpt--az--x-s3", "sthree-ckpt--az--x-s3", "ckpt--az--x-s3x"}) {
    EXPECT_EQ(directory_bucket_zone(name), std::nullopt) << name;
  }
  EXPECT_EQ(directory_bucket_zone(std::string(52, 'a') + "--az1--x-s3"), "az1");  // 63
  EXPECT_EQ(directory_bucket_zone(std::string(53, 'a') + "--az1--x-s3"), std::nullopt);
  // Neither is a general purpose name.
  EXPECT_FALSE(valid_bucket_name("ckpt--use1-az4--x-s3"));
}

TEST(Range, Syntax) {
  auto both = parse_byte_range("bytes=3-18446744073709551615");
  ASSERT_TRUE(both);
  EXPECT_EQ(both->first, std::optional<std::uint64_t>(3));
  EXPECT_EQ(both->last, std::optional<std::uint64_t>(UINT64_MAX));
  auto open = parse_byte_range(" bytes= 7- ");
  ASSERT_TRUE(open);
  EXPECT_EQ(open->first, std::optional<std::uint64_t>(7));
  EXPECT_FALSE(open->last);
  auto suffix = parse_byte_range("bytes=-5");
  ASSERT_TRUE(suffix);
  EXPECT_FALSE(suffix->first);
  EXPECT_EQ(suffix->last, std::optional<std::uint64_t>(5));
  for (const char* bad : {"bytes=-", "bytes=5-2", "bytes=0-1,4-5", "items=0-1", "bytes=a-1",
                          "bytes=1", "bytes=18446744073709551616-"}) {
    EXPECT_FALSE(parse_byte_range(bad)) << bad;
  }
}

TEST(Range, Forms) {
  using K = RangeResult::Kind;
  auto r = parse_range("bytes=0-9", 100);
  EXPECT_EQ(r.kind, K::kRange);
  EXPECT_EQ(r.offset, 0U);
  EXPECT_EQ(r.length, 10U);
  r = parse_range("bytes=90-", 100);
  EXPECT_EQ(r.length, 10U);
  EXPECT_EQ(r.offset, 90U);
  r = parse_range("bytes=-5", 100);
  EXPECT_EQ(r.offset, 95U);
  EXPECT_EQ(r.length, 5U);
  r = parse_range("bytes=-500", 100);
  EXPECT_EQ(r.offset, 0U);
  EXPECT_EQ(r.length, 100U);
  r = parse_range("bytes=50-5000", 100);
  EXPECT_EQ(r.length, 50U);
  EXPECT_EQ(parse_range("bytes=100-", 100).kind, K::kUnsatisfiable);
  EXPECT_EQ(parse_range("bytes=-0", 100).kind, K::kUnsatisfiable);
  EXPECT_EQ(parse_range("bytes=0-", 0).kind, K::kUnsatisfiable);
  EXPECT_EQ(parse_range("bytes=9-3", 100).kind, K::kWhole);
  EXPECT_EQ(parse_range("bytes=0-1,4-5", 100).kind, K::kWhole);
  EXPECT_EQ(parse_range("items=0-1", 100).kind, K::kWhole);
  EXPECT_EQ(parse_range("bytes=a-b", 100).kind, K::kWhole);
  EXPECT_EQ(parse_range("bytes=99999999999999999999999-", 100).kind, K::kWhole);
}

TEST(Range, UploadPartCopyTakesFirstToLastInsideTheSource) {
  using Span = std::pair<std::uint64_t, std::uint64_t>;
  EXPECT_EQ(std::get<Span>(parse_copy_source_range("bytes=0-9", 100)), Span(0, 10));
  EXPECT_EQ(std::get<Span>(parse_copy_source_range("bytes=99-99", 100)), Span(99, 1));
  // GET would accept all of these (suffix, open end, cut short); a part copy does not.
  for (const char* refused : {"bytes=-5", "bytes=90-", "bytes=50-100", "bytes=a-b", "0-9"}) {
    auto parsed = parse_copy_source_range(refused, 100);
    ASSERT_TRUE(std::holds_alternative<Error>(parsed)) << refused;
    EXPECT_EQ(std::get<Error>(parsed).code, Code::kInvalidArgument) << refused;
  }
}

TEST(TimeFormat, RoundTrips) {
  const std::int64_t t = 784111777000;  // Sun, 06 Nov 1994 08:49:37 GMT
  EXPECT_EQ(http_date(t), "Sun, 06 Nov 1994 08:49:37 GMT");
  EXPECT_EQ(http_date(t + 999), "Sun, 06 Nov 1994 08:49:37 GMT");
  EXPECT_EQ(http_date(0), "Thu, 01 Jan 1970 00:00:00 GMT");
  EXPECT_EQ(http_date(951782400000), "Tue, 29 Feb 2000 00:00:00 GMT");
  EXPECT_EQ(http_date(1798761599000), "Thu, 31 Dec 2026 23:59:59 GMT");
  EXPECT_EQ(http_date(4102444800000), "Fri, 01 Jan 2100 00:00:00 GMT");
  EXPECT_EQ(iso8601(t + 123), "1994-11-06T08:49:37.123Z");
  EXPECT_EQ(parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT"), t);
  EXPECT_EQ(parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT"), t);
  EXPECT_EQ(parse_http_date("Sun Nov  6 08:49:37 1994"), t);
  EXPECT_FALSE(parse_http_date("yesterday").has_value());
  EXPECT_EQ(parse_amz_date("19941106T084937Z"), t);
  EXPECT_FALSE(parse_amz_date("19941106T084937").has_value());
  EXPECT_FALSE(parse_amz_date("19941306T084937Z").has_value());
  // A signed field has one spelling: no signs in the numbers, no days a month does not have.
  EXPECT_FALSE(parse_amz_date("20261127T0809-1Z").has_value());
  EXPECT_FALSE(parse_amz_date("20261127T08+901Z").has_value());
  EXPECT_FALSE(parse_amz_date("20260230T080901Z").has_value());
  EXPECT_FALSE(parse_amz_date("20250229T080901Z").has_value());
  EXPECT_TRUE(parse_amz_date("20240229T080901Z").has_value());
  EXPECT_FALSE(parse_http_date("Sun, -6 Nov 1994 08:49:37 GMT").has_value());
  EXPECT_EQ(parse_iso8601("1994-11-06T08:49:37Z"), t);
  EXPECT_EQ(parse_iso8601("1994-11-06T08:49:37.123Z"), t + 123);
  EXPECT_EQ(parse_iso8601("1994-11-06T08:49:37.1Z"), t + 100);
  EXPECT_EQ(parse_iso8601(iso8601(t + 7)), t + 7);
  for (const char* bad : {"1994-11-06 08:49:37Z", "1994-11-06T08:49:37", "1994-11-06T08:49:37.Z",
                          "1994-13-06T08:49:37Z", "1994-11-06T08:49:37.12xZ"}) {
    EXPECT_FALSE(parse_iso8601(bad).has_value()) << bad;
  }
}

TEST(ObjectAttributes, PartsArePagedAfterTheMarker) {
  storage::ObjectRecord object;
  object.etag = "abc-3";
  object.size_bytes = 30;
  object.parts_count = 3;
  object.checksums.crc32 = "AAAAAA==-3";
  object.checksums.type = "COMPOSITE";
  std::vector<storage::ObjectPartRecord> parts;
  for (std::uint32_t n = 1; n <= 3; ++n)
    parts.push_back({n, (n - 1) * 10, 10, "c" + std::to_string(n)});
  AttributesRequest asked;
  asked.etag = asked.checksum = asked.object_parts = true;
  asked.max_parts = 1;
  asked.part_number_marker = 1;
  const std::string xml = attributes_response(asked, object, parts, "STANDARD");
  EXPECT_NE(xml.find("<ETag>abc-3</ETag>"), std::string::npos) << xml;
  EXPECT_NE(xml.find("<Checksum><ChecksumCRC32>AAAAAA==-3</ChecksumCRC32><ChecksumType>COMPOSITE"
                     "</ChecksumType></Checksum>"),
            std::string::npos)
      << xml;
  EXPECT_NE(
      xml.find("<PartsCount>3</PartsCount><PartNumberMarker>1</PartNumberMarker>"
               "<NextPartNumberMarker>2</NextPartNumberMarker><MaxParts>1</MaxParts>"
               "<IsTruncated>true</IsTruncated><Part><PartNumber>2</PartNumber><Size>10</Size>"
               "<ChecksumCRC32>c2</ChecksumCRC32></Part></ObjectParts>"),
      std::string::npos)
      << xml;
  EXPECT_EQ(xml.find("ObjectSize"), std::string::npos) << xml;  // not asked for
  // The last page is not truncated; an object in one piece has no parts.
  asked.max_parts = 5;
  EXPECT_NE(attributes_response(asked, object, parts, "STANDARD")
                .find("<IsTruncated>false</IsTruncated>"),
            std::string::npos);
  EXPECT_EQ(attributes_response(asked, object, {}, "STANDARD").find("ObjectParts"),
            std::string::npos);
}

TEST(Xml, WriterEscapesAndReaderIgnoresNamespaces) {
  XmlWriter w("Root");
  w.element("Text", "<&>\"");
  w.element("Number", std::uint64_t{42});
  w.element("Flag", true);
  w.element("Literal", "STANDARD");
  const std::string out = w.finish();
  EXPECT_NE(out.find("<Root xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"), std::string::npos)
      << out;
  EXPECT_NE(out.find("<Text>&lt;&amp;&gt;&quot;</Text>"), std::string::npos) << out;
  EXPECT_NE(out.find("<Flag>true</Flag><Literal>STANDARD</Literal>"), std::string::npos) << out;

  // Whatever a key holds, the document is well-formed: what XML 1.0 cannot carry (C0 controls,
  // malformed UTF-8, U+FFFF) becomes U+FFFD; CR survives as a reference; nothing ends at a NUL.
  XmlWriter hostile("ListBucketResult");
  const std::string key = std::string("a") + '\0' +
                          "b\x01"
                          "c\rd\te\xff"
                          "f\xef\xbf\xbf"
                          "g\xc3\xa9";
  hostile.element("Key", key);
  hostile.element("After", "end");
  const std::string document = hostile.finish();
  const std::string fffd = "\xef\xbf\xbd";
  EXPECT_NE(document.find("<Key>a" + fffd + "b" + fffd + "c&#13;d\te" + fffd + "f" + fffd + fffd +
                          fffd + "g\xc3\xa9</Key>"),
            std::string::npos)
      << document;
  auto reread = XmlDocument::parse(document);
  ASSERT_TRUE(reread.has_value()) << document;
  EXPECT_EQ(reread->root().child("After")->text(), "end");
  EXPECT_EQ(reread->root().child("Key")->text(),
            "a" + fffd + "b" + fffd + "c\rd\te" + fffd + "f" + fffd + fffd + fffd + "g\xc3\xa9");

  for (const char* text : {"<Delete "
                           "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/"
                           "\"><Object><Key>a&amp;b</Key></Object></Delete>",
                           "<Delete><Object><Key>a&#38;b</Key></Object></Delete>"}) {
    auto doc = XmlDocument::parse(text);
    ASSERT_TRUE(doc.has_value()) << text;
    EXPECT_EQ(doc->root().name(), "Delete");
    EXPECT_EQ(doc->root().child("Object")->child("Key")->text(), "a&b");
  }
  EXPECT_FALSE(XmlDocument::parse("<Delete><Object>").has_value());
  EXPECT_FALSE(XmlDocument::parse("not xml").has_value());
  // No entity expansion, no DTDs: an XXE attempt is refused outright.
  EXPECT_FALSE(XmlDocument::parse("<?xml version=\"1.0\"?><!DOCTYPE d [<!ENTITY e SYSTEM "
                                  "\"file:///etc/passwd\">]><d>&e;</d>")
                   .has_value());
}

}  // namespace
}  // namespace hots3::s3
