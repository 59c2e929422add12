// The client-side signer against the S3 API reference's known answers ("Signature Calculations
// for the Authorization Header: Transferring Payload in a Single Chunk"), and against the
// server's own verification.

#include "hots3/aws/signer.h"

#include <gtest/gtest.h>

namespace hots3::aws {
namespace {

constexpr std::int64_t k20130524 = 1369353600000;  // 2013-05-24T00:00:00Z

Signer doc_signer() {
  return Signer(
      {"AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "", "us-east-1"});
}

std::string header(const HeaderList& headers, std::string_view name) {
  for (const auto& [n, v] : headers) {
    if (n == name) return v;
  }
  return {};
}

TEST(Signer, AwsDocExampleGetObject) {
  HeaderList headers{{"Host", "examplebucket.s3.amazonaws.com"}, {"Range", "bytes=0-9"}};
  Signer signer = doc_signer();
  signer.sign("GET", "/test.txt", {}, headers, kEmptySha256, k20130524);
  EXPECT_EQ(header(headers, "x-amz-date"), "20130524T000000Z");
  EXPECT_EQ(header(headers, "Authorization"),
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
            "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
            "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

TEST(Signer, AwsDocExamplePutObject) {
  HeaderList headers{{"Host", "examplebucket.s3.amazonaws.com"},
                     {"Date", "Fri, 24 May 2013 00:00:00 GMT"},
                     {"x-amz-storage-class", "REDUCED_REDUNDANCY"}};
  Signer signer = doc_signer();
  signer.sign("PUT", "/test$file.text", {}, headers,
              "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072", k20130524);
  EXPECT_NE(
      header(headers, "Authorization")
          .find("SignedHeaders=date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class, "
                "Signature=98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd"),
      std::string::npos)
      << header(headers, "Authorization");
}

TEST(Signer, AwsDocExampleGetBucketLifecycleAndListObjects) {
  HeaderList lifecycle{{"Host", "examplebucket.s3.amazonaws.com"}};
  Signer signer = doc_signer();
  signer.sign("GET", "/", {{"lifecycle", ""}}, lifecycle, kEmptySha256, k20130524);
  EXPECT_NE(header(lifecycle, "Authorization")
                .find("Signature=fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543"),
            std::string::npos);
  HeaderList list{{"Host", "examplebucket.s3.amazonaws.com"}};
  signer.sign("GET", "/", {{"max-keys", "2"}, {"prefix", "J"}}, list, kEmptySha256, k20130524);
  EXPECT_NE(header(list, "Authorization")
                .find("Signature=34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7"),
            std::string::npos);
  EXPECT_EQ(request_target("/", {{"max-keys", "2"}, {"prefix", "J"}}), "/?max-keys=2&prefix=J");
  EXPECT_EQ(request_target("/b/odd key+/x", {{"uploads", ""}}), "/b/odd%20key%2B/x?uploads");
}

TEST(Signer, SessionTokensAreSentAndSigned) {
  HeaderList headers{{"Host", "h"}};
  Signer signer({"AK", "secret", "token/with+chars", "eu-west-1"});
  signer.sign("GET", "/", {}, headers, "UNSIGNED-PAYLOAD", k20130524);
  EXPECT_EQ(header(headers, "X-Amz-Security-Token"), "token/with+chars");
  EXPECT_NE(header(headers, "Authorization").find("/eu-west-1/s3/aws4_request"), std::string::npos);
  EXPECT_NE(header(headers, "Authorization").find("x-amz-security-token"), std::string::npos);
}

TEST(Signer, S3ExpressSessionsSignForS3ExpressWithTheirOwnHeader) {
  HeaderList headers{{"Host", "h"}};
  Credentials session{"H3SKEY", "secret", "session-token", "us-east-1"};
  session.s3express = true;
  Signer signer(session);
  signer.sign("GET", "/b--z1--x-s3/k", {}, headers, "UNSIGNED-PAYLOAD", k20130524);
  EXPECT_EQ(header(headers, "x-amz-s3session-token"), "session-token");
  EXPECT_EQ(header(headers, "X-Amz-Security-Token"), "");
  const std::string authorization = header(headers, "Authorization");
  EXPECT_NE(authorization.find("/us-east-1/s3express/aws4_request"), std::string::npos);
  EXPECT_NE(authorization.find(";x-amz-s3session-token"), std::string::npos);
}

}  // namespace
}  // namespace hots3::aws
