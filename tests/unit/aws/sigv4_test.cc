// Known-answer and property tests for s3/auth: checksums, encodings, SigV4/SigV2 and the
// aws-chunked decoder. The captures of real clients are replayed in wire_captures_test.cc.

#include "hots3/aws/sigv4.h"

#include "wire_payload.h"

#include "hots3/aws/checksum.h"
#include "hots3/aws/chunked.h"
#include "hots3/common/digest.h"
#include "hots3/common/hex.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace hots3::aws {
namespace {

using test::generated_payload;

constexpr std::string_view kSecret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";

std::span<const std::byte> bytes(std::string_view s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

std::string random_bytes(std::mt19937_64& rng, std::size_t n) {
  std::string out(n, '\0');
  for (char& c : out) c = static_cast<char>(rng() & 0xff);
  return out;
}

// ---- checksums ---------------------------------------------------------------------------------

TEST(Crc, CheckValues) {
  EXPECT_EQ(crc32(bytes("123456789")), 0xcbf43926U);
  EXPECT_EQ(crc32c(bytes("123456789")), 0xe3069283U);
  EXPECT_EQ(crc64nvme(bytes("123456789")), 0xae8b14860a799888ULL);
  EXPECT_EQ(crc32(bytes("")), 0U);
  EXPECT_EQ(crc32c(bytes("")), 0U);
  EXPECT_EQ(crc64nvme(bytes("")), 0U);
}

TEST(Crc, IncrementalEqualsOneShot) {
  std::mt19937_64 rng(42);
  for (int round = 0; round < 50; ++round) {
    const std::string data = random_bytes(rng, rng() % 5000);
    const std::uint32_t want32 = crc32(bytes(data));
    const std::uint32_t want32c = crc32c(bytes(data));
    const std::uint64_t want64 = crc64nvme(bytes(data));
    std::uint32_t c32 = 0;
    std::uint32_t c32c = 0;
    std::uint64_t c64 = 0;
    for (std::size_t at = 0; at < data.size();) {
      const std::size_t n = std::min<std::size_t>(data.size() - at, rng() % 300);
      const auto piece = bytes(std::string_view(data).substr(at, n));
      c32 = crc32(piece, c32);
      c32c = crc32c(piece, c32c);
      c64 = crc64nvme(piece, c64);
      at += n;
    }
    EXPECT_EQ(c32, want32);
    EXPECT_EQ(c32c, want32c);
    EXPECT_EQ(c64, want64);
  }
}

TEST(Crc, OddAlignmentsAndLengths) {
  // Every start offset, and every length through the table walk's 16-byte stride and the
  // carry-less fold's 64-byte lanes and 16-byte tail, against one table step per byte.
  std::mt19937_64 rng(7);
  const std::string data = random_bytes(rng, 400);
  for (std::size_t start = 0; start < 16; ++start) {
    for (std::size_t n = 0; n + start <= data.size(); ++n) {
      const auto piece = bytes(std::string_view(data).substr(start, n));
      std::uint64_t bytewise = 0;
      for (std::size_t i = 0; i < n; ++i) bytewise = crc64nvme(piece.subspan(i, 1), bytewise);
      ASSERT_EQ(crc64nvme(piece), bytewise) << start << "+" << n;
    }
  }
}

TEST(Crc, LargeBuffersMatchTheByteAtATimeReference) {
  std::mt19937_64 rng(11);
  const std::string data = random_bytes(rng, 1 << 20);
  std::uint64_t bytewise = 0;
  for (std::size_t i = 0; i < data.size(); ++i)
    bytewise = crc64nvme(bytes(std::string_view(data).substr(i, 1)), bytewise);
  EXPECT_EQ(crc64nvme(bytes(data)), bytewise);
}

TEST(Crc, CombineEqualsTheCrcOfTheConcatenation) {
  // Split points include empty halves and lengths past one table step of x^(8·n).
  std::mt19937_64 rng(5);
  const std::string data = random_bytes(rng, 70000);
  for (std::size_t split : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{4096},
                            std::size_t{65537}, data.size() - 1, data.size()}) {
    const auto a = bytes(std::string_view(data).substr(0, split));
    const auto b = bytes(std::string_view(data).substr(split));
    EXPECT_EQ(crc_combine(ChecksumAlgorithm::kCrc32, crc32(a), crc32(b), b.size()),
              crc32(bytes(data)))
        << split;
    EXPECT_EQ(crc_combine(ChecksumAlgorithm::kCrc32c, crc32c(a), crc32c(b), b.size()),
              crc32c(bytes(data)))
        << split;
    EXPECT_EQ(crc_combine(ChecksumAlgorithm::kCrc64Nvme, crc64nvme(a), crc64nvme(b), b.size()),
              crc64nvme(bytes(data)))
        << split;
  }
  // Many parts, as CompleteMultipartUpload folds them: start from the CRC of nothing.
  std::uint64_t folded = 0;
  for (std::size_t at = 0; at < data.size(); at += 9999) {
    const auto part = bytes(std::string_view(data).substr(at, 9999));
    folded = crc_combine(ChecksumAlgorithm::kCrc64Nvme, folded, crc64nvme(part), part.size());
  }
  EXPECT_EQ(folded, crc64nvme(bytes(data)));
  // A long second half (many powers of x^8 set in its length).
  const std::string zeros((1 << 22) + 12345, '\0');
  const std::string whole = data + zeros;
  EXPECT_EQ(crc_combine(ChecksumAlgorithm::kCrc32c, crc32c(bytes(data)), crc32c(bytes(zeros)),
                        zeros.size()),
            crc32c(bytes(whole)));
}

TEST(Crc, Base64Forms) {
  EXPECT_EQ(crc_to_base64(ChecksumAlgorithm::kCrc32, 0xcbf43926U), "y/Q5Jg==");
  EXPECT_EQ(crc_from_base64(ChecksumAlgorithm::kCrc32, "y/Q5Jg=="), 0xcbf43926U);
  EXPECT_EQ(crc_from_base64(ChecksumAlgorithm::kCrc64Nvme,
                            crc_to_base64(ChecksumAlgorithm::kCrc64Nvme, 0xae8b14860a799888ULL)),
            0xae8b14860a799888ULL);
  EXPECT_EQ(crc_from_base64(ChecksumAlgorithm::kCrc64Nvme, "y/Q5Jg=="),
            std::nullopt);  // 4 bytes, not 8
  EXPECT_EQ(crc_from_base64(ChecksumAlgorithm::kCrc32c, "not base64"), std::nullopt);
}

TEST(Checksummer, HelloWorld) {
  const std::map<ChecksumAlgorithm, std::string> want = {
      {ChecksumAlgorithm::kCrc32, "DUoRhQ=="},
      {ChecksumAlgorithm::kCrc32c, "yZRlqg=="},
      {ChecksumAlgorithm::kCrc64Nvme, "jSnVw/bqjr4="},
      {ChecksumAlgorithm::kSha1, "Kq5sNclPz7QV2+lfQIuc6R7oRu0="},
      {ChecksumAlgorithm::kSha256, "uU0nuZNNPgilLlLX2n2r+sSE7+N6U4DukIj3rOLvzek="},
  };
  for (const auto& [algorithm, b64] : want) {
    Checksummer c(algorithm);
    c.update(bytes("hello "));
    c.update(bytes("world"));
    EXPECT_EQ(c.base64(), b64) << checksum_name(algorithm);
    EXPECT_EQ(c.base64(), b64) << "reading must not reset";
    EXPECT_EQ(base64_encode(c.raw()), b64);
  }
}

TEST(Checksummer, RawSizesAndContinuingAfterRead) {
  const std::map<ChecksumAlgorithm, std::size_t> sizes = {
      {ChecksumAlgorithm::kCrc32, 4},     {ChecksumAlgorithm::kCrc32c, 4},
      {ChecksumAlgorithm::kCrc64Nvme, 8}, {ChecksumAlgorithm::kSha1, 20},
      {ChecksumAlgorithm::kSha256, 32},
  };
  for (const auto& [algorithm, size] : sizes) {
    Checksummer a(algorithm);
    EXPECT_EQ(a.raw().size(), size);
    a.update(bytes("hello "));
    (void)a.base64();
    a.update(bytes("world"));
    Checksummer b(algorithm);
    b.update(bytes("hello world"));
    EXPECT_EQ(a.raw(), b.raw()) << checksum_name(algorithm);
    Checksummer moved(std::move(a));
    EXPECT_EQ(moved.base64(), b.base64());
    EXPECT_EQ(moved.algorithm(), algorithm);
  }
  EXPECT_EQ(Checksummer(ChecksumAlgorithm::kCrc32).raw(), std::string(4, '\0'));
  EXPECT_EQ(Checksummer(ChecksumAlgorithm::kSha256).raw(),
            base64_decode("47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="));
}

TEST(Checksummer, CapturePayload70k) {
  // The 70 KiB file every client uploaded; the values are those in the captures' .json files
  // (payload_digests) and verify.py's CRC64NVME.
  const std::string data = generated_payload("70k", 71680);
  const std::map<ChecksumAlgorithm, std::string> want = {
      {ChecksumAlgorithm::kCrc32, "vQ932Q=="},
      {ChecksumAlgorithm::kCrc32c, "ZGugrQ=="},
      {ChecksumAlgorithm::kCrc64Nvme, "9h75lCse9AM="},
      {ChecksumAlgorithm::kSha1, "sE+3pLVAD697O+aTogEu1b01dMs="},
      {ChecksumAlgorithm::kSha256, "m8Bdu8J4co51UaOpXS1iDFUuwry3FON8LpVOdh+FgMk="},
  };
  std::mt19937_64 rng(3);
  for (const auto& [algorithm, b64] : want) {
    Checksummer c(algorithm);
    for (std::size_t at = 0; at < data.size();) {
      const std::size_t n = std::min<std::size_t>(data.size() - at, 1 + rng() % 9000);
      c.update(bytes(std::string_view(data).substr(at, n)));
      at += n;
    }
    EXPECT_EQ(c.base64(), b64) << checksum_name(algorithm);
  }
}

TEST(Checksummer, Names) {
  for (auto a :
       {ChecksumAlgorithm::kCrc32, ChecksumAlgorithm::kCrc32c, ChecksumAlgorithm::kCrc64Nvme,
        ChecksumAlgorithm::kSha1, ChecksumAlgorithm::kSha256}) {
    EXPECT_EQ(parse_checksum_algorithm(checksum_name(a)), a);
    std::string lower(checksum_name(a));
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    EXPECT_EQ(parse_checksum_algorithm(lower), a);
    EXPECT_EQ(checksum_header(a), "x-amz-checksum-" + lower);
  }
  EXPECT_EQ(parse_checksum_algorithm("crc32c"), ChecksumAlgorithm::kCrc32c);
  EXPECT_EQ(parse_checksum_algorithm("Crc64Nvme"), ChecksumAlgorithm::kCrc64Nvme);
  EXPECT_FALSE(parse_checksum_algorithm("MD5"));
  EXPECT_FALSE(parse_checksum_algorithm("CRC32 "));
  EXPECT_FALSE(parse_checksum_algorithm(""));
  EXPECT_FALSE(parse_checksum_algorithm("algorithm"));
}

// ---- encodings ---------------------------------------------------------------------------------

TEST(Base64, KnownValues) {
  EXPECT_EQ(base64_encode(std::string_view("")), "");
  EXPECT_EQ(base64_encode(std::string_view("f")), "Zg==");
  EXPECT_EQ(base64_encode(std::string_view("fo")), "Zm8=");
  EXPECT_EQ(base64_encode(std::string_view("foo")), "Zm9v");
  EXPECT_EQ(base64_encode(std::string_view("foob")), "Zm9vYg==");
  EXPECT_EQ(base64_encode(std::string_view("\xfb\xff\xbf", 3)), "+/+/");
  EXPECT_EQ(base64_decode("Zm9vYmFy"), "foobar");
  EXPECT_EQ(base64_decode("Zm9vYg=="), "foob");
  EXPECT_EQ(base64_decode(""), "");
}

TEST(Base64, RoundTrips) {
  std::mt19937_64 rng(1);
  for (std::size_t n = 0; n < 200; ++n) {
    const std::string data = random_bytes(rng, n);
    const std::string text = base64_encode(std::string_view(data));
    EXPECT_EQ(text.size(), (n + 2) / 3 * 4);
    EXPECT_EQ(base64_decode(text), data);
    EXPECT_EQ(base64_encode(bytes(data)), text);
  }
}

TEST(Base64, RejectsMalformed) {
  for (std::string_view bad : {"Z",          "Zg",         "Zg=",
                               "Zm9",        "Zg===",      "====",
                               "=Zg=",       "Z=g=",       "Zm9v=Zg=",
                               "Zm9v Zg==",  "Zm9v\nYg==", " Zm9vYg==",
                               "Zm9vYg==\n", "Zm-v",       "Zm_v",
                               "Zm9*",       "Zh==",       "Zm9=",
                               "DUoRhR==",   "Zg==Zg==",   "\xc3\xa9\xc3\xa9"}) {
    EXPECT_FALSE(base64_decode(bad).has_value()) << "accepted '" << bad << "'";
  }
}

TEST(Hex, Encode) {}

TEST(UriEncode, Table) {
  struct Case {
    std::string_view in;
    bool encode_slash;
    std::string_view want;
  };
  const Case cases[] = {
      {"", false, ""},
      {"AZaz09-_.~", true, "AZaz09-_.~"},
      {"/a/b", false, "/a/b"},
      {"/a/b", true, "%2Fa%2Fb"},
      {" ", true, "%20"},
      {"+", true, "%2B"},
      {"*", true, "%2A"},
      {"%", true, "%25"},
      {"=&?#", true, "%3D%26%3F%23"},
      {"\xc3\xa9", true, "%C3%A9"},
      {std::string_view("\x00\xff", 2), true, "%00%FF"},
      {"/wire-test/odd key+plus~tilde=eq&amp(paren)!star*\xc3\xa9.txt", false,
       "/wire-test/odd%20key%2Bplus~tilde%3Deq%26amp%28paren%29%21star%2A%C3%A9.txt"},
  };
  for (const auto& c : cases) EXPECT_EQ(uri_encode(c.in, c.encode_slash), c.want) << c.in;
}

TEST(PercentDecode, ValidAndInvalid) {
  EXPECT_EQ(percent_decode("a%20b+c%2b%2F%C3%A9"), "a b+c+/\xc3\xa9");
  EXPECT_EQ(percent_decode(""), "");
  EXPECT_EQ(percent_decode("%00"), std::string(1, '\0'));
  for (std::string_view bad : {"%", "%4", "a%", "%zz", "%4g", "%g4", "ab%2", "%%41"}) {
    EXPECT_FALSE(percent_decode(bad).has_value()) << bad;
  }
}

TEST(ParseQuery, FormsSeenOnTheWire) {
  const auto q =
      parse_query("uploads&delete=&prefix=list%2F&&x-id=PutObject&a=b=c&encoding-type=url&");
  ASSERT_TRUE(q);
  ASSERT_EQ(q->size(), 6U);
  EXPECT_EQ((*q)[0].name, "uploads");
  EXPECT_EQ((*q)[0].value, "");
  EXPECT_EQ((*q)[1].name, "delete");
  EXPECT_EQ((*q)[1].value, "");
  EXPECT_EQ((*q)[2].value, "list/");
  EXPECT_EQ((*q)[3].name, "x-id");
  EXPECT_EQ((*q)[4].name, "a");
  EXPECT_EQ((*q)[4].value, "b=c");
  EXPECT_EQ((*q)[5].name, "encoding-type");
  EXPECT_TRUE(parse_query("")->empty());
  EXPECT_FALSE(parse_query("a=%zz"));
  EXPECT_FALSE(parse_query("%4=1"));
}

// ---- SigV4 -------------------------------------------------------------------------------------

TEST(ParseAuthorization, BothSeparators) {
  for (std::string_view header : {
           "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20261121/us-east-1/s3/aws4_request, "
           "SignedHeaders=host;x-amz-content-sha256;x-amz-date, "
           "Signature=6CAC1E0DC915E89EBFEB60BB6184CA2187371D49E641CDAEAD456CADFE1BA52C",
           "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20261121/us-east-1/s3/aws4_request,"
           "SignedHeaders=host;x-amz-content-sha256;x-amz-date,"
           "Signature=6cac1e0dc915e89ebfeb60bb6184ca2187371d49e641cdaead456cadfe1ba52c",
           "  AWS4-HMAC-SHA256   "
           "credential=AKIAIOSFODNN7EXAMPLE/20261121/us-east-1/s3/aws4_request ,"
           "signedheaders=Host;X-Amz-Content-Sha256;x-amz-date ,  "
           "SIGNATURE=6cac1e0dc915e89ebfeb60bb6184ca2187371d49e641cdaead456cadfe1ba52c  ",
       }) {
    const auto parsed = parse_authorization(header);
    ASSERT_TRUE(std::holds_alternative<Authorization>(parsed))
        << std::get<ParseError>(parsed).message;
    const auto& a = std::get<Authorization>(parsed);
    EXPECT_EQ(a.access_key, "AKIAIOSFODNN7EXAMPLE");
    EXPECT_EQ(a.scope.date, "20261121");
    EXPECT_EQ(a.scope.region, "us-east-1");
    EXPECT_EQ(a.scope.service, "s3");
    EXPECT_EQ(a.scope.to_string(), "20261121/us-east-1/s3/aws4_request");
    EXPECT_EQ(a.signed_headers,
              (std::vector<std::string>{"host", "x-amz-content-sha256", "x-amz-date"}));
    EXPECT_EQ(a.signature, "6cac1e0dc915e89ebfeb60bb6184ca2187371d49e641cdaead456cadfe1ba52c");
  }
}

TEST(ParseAuthorization, Errors) {
  const std::string cred = "Credential=AK/20261121/us-east-1/s3/aws4_request";
  const std::string sh = "SignedHeaders=host;x-amz-date";
  const std::string sig = "Signature=" + std::string(64, 'a');
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "expecting"},
      {"AWS AK:sig", "expecting"},
      {"AWS4-HMAC-SHA256", "expecting"},
      {"AWS4-HMAC-SHA256Credential=x", "expecting"},
      {"AWS4-HMAC-SHA1 " + cred + "," + sh + "," + sig, "expecting"},
      {"AWS4-HMAC-SHA256 " + sh + "," + sig, "missing Credential"},
      {"AWS4-HMAC-SHA256 " + cred + "," + sig, "missing SignedHeaders"},
      {"AWS4-HMAC-SHA256 " + cred + "," + sh, "missing Signature"},
      {"AWS4-HMAC-SHA256 " + cred + "," + sh + "," + sig + "," + sig, "twice"},
      {"AWS4-HMAC-SHA256 " + cred + ",," + sh + "," + sig, "empty component"},
      {"AWS4-HMAC-SHA256 " + cred + "," + sh + "," + sig + ",Foo=bar", "unknown component"},
      {"AWS4-HMAC-SHA256 " + cred + " " + sh + "," + sig, "Credential"},
      {"AWS4-HMAC-SHA256 Credential=AK/20261121/us-east-1/s3," + sh + "," + sig,
       "Credential is mal-formed"},
      {"AWS4-HMAC-SHA256 Credential=AK/2026112/us-east-1/s3/aws4_request," + sh + "," + sig,
       "YYYYMMDD"},
      {"AWS4-HMAC-SHA256 Credential=AK/20261121/us-east-1/s3/aws5_request," + sh + "," + sig,
       "aws4_request"},
      {"AWS4-HMAC-SHA256 Credential=AK/20261121//s3/aws4_request," + sh + "," + sig, "mal-formed"},
      {"AWS4-HMAC-SHA256 Credential=/20261121/us-east-1/s3/aws4_request," + sh + "," + sig,
       "mal-formed"},
      {"AWS4-HMAC-SHA256 Credential=AK/20261121/us-east-1/s3/aws4_request/x," + sh + "," + sig,
       "too many"},
      {"AWS4-HMAC-SHA256 " + cred + ",SignedHeaders=host;;x-amz-date," + sig, "SignedHeaders"},
      {"AWS4-HMAC-SHA256 " + cred + ",SignedHeaders=," + sig, "SignedHeaders"},
      {"AWS4-HMAC-SHA256 " + cred + "," + sh + ",Signature=abc", "64 hexadecimal"},
      {"AWS4-HMAC-SHA256 " + cred + "," + sh + ",Signature=" + std::string(64, 'g'),
       "64 hexadecimal"},
      {"AWS4-HMAC-SHA256 " + cred + "," + sh + ",Signature", "no '='"},
  };
  for (const auto& [header, fragment] : cases) {
    const auto parsed = parse_authorization(header);
    ASSERT_TRUE(std::holds_alternative<ParseError>(parsed)) << header;
    const std::string& message = std::get<ParseError>(parsed).message;
    EXPECT_NE(message.find(fragment), std::string::npos) << header << " -> " << message;
    EXPECT_EQ(message.rfind("The authorization header is malformed; ", 0), 0U) << message;
  }
}

// Looks up a header by lower-case name in a list of (name, value) with names in any case.
struct Headers {
  std::vector<std::pair<std::string, std::string>> list;
  void operator()(std::string_view lower_name, std::vector<std::string_view>& out) const {
    for (const auto& [name, value] : list) {
      if (name.size() == lower_name.size() &&
          std::equal(name.begin(), name.end(), lower_name.begin(), [](char a, char b) {
            return std::tolower(static_cast<unsigned char>(a)) == b;
          })) {
        out.push_back(value);
      }
    }
  }
};

std::string sign_request(std::string_view method, std::string_view path, std::string_view raw_query,
                         const Headers& headers, const std::vector<std::string>& signed_headers,
                         std::string_view payload_hash, std::string_view amz_date,
                         const SigningScope& scope, std::string* canonical = nullptr) {
  const auto query = parse_query(raw_query);
  EXPECT_TRUE(query);
  CanonicalInput in;
  in.method = method;
  in.path = path;
  in.query = &*query;
  in.header_values = headers;
  in.signed_headers = &signed_headers;
  in.payload_hash = payload_hash;
  const std::string creq = canonical_request(in);
  if (canonical != nullptr) *canonical = creq;
  return sign(signing_key(kSecret, scope), string_to_sign(amz_date, scope, creq));
}

SigningScope doc_scope() { return SigningScope{"20130524", "us-east-1", "s3"}; }

// The examples of "Signature Calculations for the Authorization Header: Transferring Payload in a
// Single Chunk (AWS Signature Version 4)" in the S3 API reference.
TEST(SigV4, AwsDocExampleGetObject) {
  const Headers headers{{{"Host", "examplebucket.s3.amazonaws.com"},
                         {"Range", "bytes=0-9"},
                         {"x-amz-content-sha256", std::string(kEmptySha256)},
                         {"x-amz-date", "20130524T000000Z"}}};
  const std::vector<std::string> signed_headers = {"host", "range", "x-amz-content-sha256",
                                                   "x-amz-date"};
  std::string creq;
  const std::string sig = sign_request("GET", "/test.txt", "", headers, signed_headers,
                                       kEmptySha256, "20130524T000000Z", doc_scope(), &creq);
  EXPECT_EQ(
      creq,
      "GET\n/test.txt\n\nhost:examplebucket.s3.amazonaws.com\nrange:bytes=0-9\n"
      "x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n"
      "x-amz-date:20130524T000000Z\n\nhost;range;x-amz-content-sha256;x-amz-date\n"
      "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(string_to_sign("20130524T000000Z", doc_scope(), creq),
            "AWS4-HMAC-SHA256\n20130524T000000Z\n20130524/us-east-1/s3/aws4_request\n"
            "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972");
  EXPECT_EQ(sig, "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

TEST(SigV4, AwsDocExamplePutObject) {
  const Headers headers{{{"Host", "examplebucket.s3.amazonaws.com"},
                         {"Date", "Fri, 24 May 2013 00:00:00 GMT"},
                         {"x-amz-date", "20130524T000000Z"},
                         {"x-amz-storage-class", "REDUCED_REDUNDANCY"},
                         {"x-amz-content-sha256",
                          "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072"}}};
  EXPECT_EQ(sha256_hex("Welcome to Amazon S3."),
            "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072");
  const std::vector<std::string> signed_headers = {"date", "host", "x-amz-content-sha256",
                                                   "x-amz-date", "x-amz-storage-class"};
  std::string creq;
  EXPECT_EQ(sign_request("PUT", "/test$file.text", "", headers, signed_headers,
                         "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072",
                         "20130524T000000Z", doc_scope(), &creq),
            "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd");
  EXPECT_EQ(creq.substr(0, 25), "PUT\n/test%24file.text\n\nda");
}

TEST(SigV4, AwsDocExampleGetBucketLifecycleAndListObjects) {
  const Headers headers{{{"Host", "examplebucket.s3.amazonaws.com"},
                         {"x-amz-date", "20130524T000000Z"},
                         {"x-amz-content-sha256", std::string(kEmptySha256)}}};
  const std::vector<std::string> signed_headers = {"host", "x-amz-content-sha256", "x-amz-date"};
  EXPECT_EQ(sign_request("GET", "/", "lifecycle", headers, signed_headers, kEmptySha256,
                         "20130524T000000Z", doc_scope()),
            "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543");
  EXPECT_EQ(sign_request("GET", "/", "max-keys=2&prefix=J", headers, signed_headers, kEmptySha256,
                         "20130524T000000Z", doc_scope()),
            "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7");
  // The order of the query on the wire does not matter; an empty path is "/".
  EXPECT_EQ(sign_request("GET", "", "prefix=J&max-keys=2", headers, signed_headers, kEmptySha256,
                         "20130524T000000Z", doc_scope()),
            "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7");
}

TEST(SigV4, AwsDocExamplePresignedUrl) {
  // "Authenticating Requests: Using Query Parameters": GET /test.txt, expires 86400.
  const auto query = parse_query(
      "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-"
      "1%2Fs3%2F"
      "aws4_request&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host&X-Amz-"
      "Signature="
      "aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404");
  ASSERT_TRUE(query);
  const auto parsed = parse_presigned_v4(*query);
  ASSERT_TRUE(std::holds_alternative<PresignedV4>(parsed)) << std::get<ParseError>(parsed).message;
  const auto& p = std::get<PresignedV4>(parsed);
  EXPECT_EQ(p.amz_date, "20130524T000000Z");
  EXPECT_EQ(p.expires_s, 86400U);
  EXPECT_EQ(p.authorization.access_key, "AKIAIOSFODNN7EXAMPLE");
  const Headers headers{{{"Host", "examplebucket.s3.amazonaws.com"}}};
  CanonicalInput in;
  in.method = "GET";
  in.path = "/test.txt";
  in.query = &*query;
  in.exclude_query = "X-Amz-Signature";
  in.header_values = headers;
  in.signed_headers = &p.authorization.signed_headers;
  in.payload_hash = "UNSIGNED-PAYLOAD";
  const std::string sig =
      sign(signing_key(kSecret, p.authorization.scope),
           string_to_sign(p.amz_date, p.authorization.scope, canonical_request(in)));
  EXPECT_EQ(sig, p.authorization.signature);
  EXPECT_TRUE(signatures_equal(sig, p.authorization.signature));
}

TEST(SigV4, PresignedErrors) {
  const std::vector<QueryParameter> good = {
      {"X-Amz-Algorithm", "AWS4-HMAC-SHA256"},
      {"X-Amz-Credential", "AK/20130524/us-east-1/s3/aws4_request"},
      {"X-Amz-Date", "20130524T000000Z"},
      {"X-Amz-Expires", "604800"},
      {"X-Amz-SignedHeaders", "host"},
      {"X-Amz-Signature", std::string(64, '0')},
  };
  ASSERT_TRUE(std::holds_alternative<PresignedV4>(parse_presigned_v4(good)));
  const auto with = [&](std::string_view name, const std::string& value) {
    auto q = good;
    for (auto& p : q) {
      if (p.name == name) p.value = value;
    }
    return q;
  };
  const auto fails = [](const std::vector<QueryParameter>& q, std::string_view fragment) {
    const auto parsed = parse_presigned_v4(q);
    if (!std::holds_alternative<ParseError>(parsed))
      return ::testing::AssertionFailure() << "accepted";
    const std::string& message = std::get<ParseError>(parsed).message;
    if (message.find(fragment) == std::string::npos)
      return ::testing::AssertionFailure() << message;
    return ::testing::AssertionSuccess();
  };
  EXPECT_TRUE(fails(with("X-Amz-Expires", "0"), "X-Amz-Expires"));
  EXPECT_TRUE(fails(with("X-Amz-Expires", "604801"), "X-Amz-Expires"));
  EXPECT_TRUE(fails(with("X-Amz-Expires", "99999999999999999999999"), "X-Amz-Expires"));
  EXPECT_TRUE(fails(with("X-Amz-Expires", "-1"), "X-Amz-Expires"));
  EXPECT_TRUE(fails(with("X-Amz-Expires", ""), "X-Amz-Expires"));
  EXPECT_TRUE(std::holds_alternative<PresignedV4>(parse_presigned_v4(with("X-Amz-Expires", "1"))));
  EXPECT_TRUE(fails(with("X-Amz-Algorithm", "AWS4-HMAC-SHA1"), "X-Amz-Algorithm"));
  EXPECT_TRUE(fails(with("X-Amz-Date", "20130524T000000"), "X-Amz-Date"));
  EXPECT_TRUE(fails(with("X-Amz-Date", "20130525T000000Z"), "date"));
  EXPECT_TRUE(fails(with("X-Amz-Credential", "AK/20130524/us-east-1/s3"), "X-Amz-Credential"));
  EXPECT_TRUE(fails(with("X-Amz-Signature", "abc"), "X-Amz-Signature"));
  EXPECT_TRUE(fails(with("X-Amz-SignedHeaders", ""), "X-Amz-SignedHeaders"));
  for (std::size_t drop = 0; drop < good.size(); ++drop) {
    auto q = good;
    const std::string name = q[drop].name;
    q.erase(q.begin() + static_cast<std::ptrdiff_t>(drop));
    EXPECT_TRUE(fails(q, name + " is missing"));
  }
  auto lower_case = good;
  lower_case[3].name = "x-amz-expires";  // the names are case-sensitive
  EXPECT_TRUE(fails(lower_case, "X-Amz-Expires is missing"));
  auto twice = good;
  twice.push_back(good[3]);
  EXPECT_TRUE(fails(twice, "twice"));
}

TEST(SigV4, CanonicalQueryAndHeaders) {
  const auto query =
      parse_query("uploads&b=2&a=2&a=1&x-id=PutObject&k=a%20b%2Bc~&e=%C3%A9&X-Amz-Signature=zz");
  ASSERT_TRUE(query);
  const Headers headers{{{"Host", " h:1 "},
                         {"X-Amz-Meta-A", "  two   spaces\tand tab  "},
                         {"x-amz-meta-a", "second"},
                         {"Content-Type", ""}}};
  const std::vector<std::string> signed_headers = {"content-type", "host", "x-amz-meta-a",
                                                   "x-amz-missing"};
  CanonicalInput in;
  in.method = "PUT";
  in.path = "/b/odd key+plus~tilde=eq&amp(paren)!star*\xc3\xa9.txt";
  in.query = &*query;
  in.exclude_query = "X-Amz-Signature";
  in.header_values = headers;
  in.signed_headers = &signed_headers;
  in.payload_hash = "UNSIGNED-PAYLOAD";
  EXPECT_EQ(canonical_request(in),
            "PUT\n/b/odd%20key%2Bplus~tilde%3Deq%26amp%28paren%29%21star%2A%C3%A9.txt\n"
            "a=1&a=2&b=2&e=%C3%A9&k=a%20b%2Bc~&uploads=&x-id=PutObject\n"
            "content-type:\nhost:h:1\nx-amz-meta-a:two spaces and tab,second\n\n"
            "content-type;host;x-amz-meta-a;x-amz-missing\nUNSIGNED-PAYLOAD");
}

TEST(SigV4, Primitives) {
  EXPECT_EQ(sha256_hex(""), kEmptySha256);
  // RFC 4231 test case 2.
  const std::string_view key = "Jefe";
  const auto mac =
      hmac_sha256(std::span(reinterpret_cast<const std::uint8_t*>(key.data()), key.size()),
                  "what do ya want for nothing?");
  EXPECT_EQ(to_hex(mac), "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  // RFC 2202 test case 2.
  const auto mac1 = hmac_sha1("Jefe", "what do ya want for nothing?");
  EXPECT_EQ(to_hex(mac1), "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79");
  EXPECT_TRUE(signatures_equal("abc", "abc"));
  EXPECT_TRUE(signatures_equal("", ""));
  EXPECT_FALSE(signatures_equal("abc", "abd"));
  EXPECT_FALSE(signatures_equal("abc", "abcd"));
  EXPECT_FALSE(signatures_equal("abc", ""));
  // The signing key of the captures (worked-examples.md).
  const SigningKey k = signing_key(kSecret, SigningScope{"20261121", "us-east-1", "s3"});
  EXPECT_EQ(to_hex(k), "ad3ce5a78accb6c65fb03bc60858d78e98d38446df55c43e30310c38c1d460f4");
}

// ---- SigV2 -------------------------------------------------------------------------------------

TEST(SigV2, PresignedWorkedExample) {
  // worked-examples.md, example 8 (boto3 generate_presigned_url).
  const auto query = parse_query(
      "AWSAccessKeyId=AKIAIOSFODNN7EXAMPLE&Signature=Di3z3g5BHfjaU3pdTgZKepTifXI%3D&Expires="
      "1795308784");
  ASSERT_TRUE(query);
  const std::string resource = v2_canonical_resource("/wire-test/boto3-1.43.11/small.txt", *query);
  EXPECT_EQ(resource, "/wire-test/boto3-1.43.11/small.txt");
  const std::string sts = v2_string_to_sign("GET", "", "", "1795308784", "", resource);
  EXPECT_EQ(sts, "GET\n\n\n1795308784\n/wire-test/boto3-1.43.11/small.txt");
  EXPECT_EQ(v2_sign(kSecret, sts), "Di3z3g5BHfjaU3pdTgZKepTifXI=");
}

TEST(SigV2, AwsDocExample) {
  // "Signing and Authenticating REST Requests" (SigV2), query-string example.
  const std::string sts = v2_string_to_sign(
      "GET", "", "", "1175139620", "", v2_canonical_resource("/johnsmith/photos/puppy.jpg", {}));
  EXPECT_EQ(v2_sign(kSecret, sts), "NpgCjnDzrM+WFzoENXmpNDUsSn8=");
}

TEST(SigV2, CanonicalResource) {
  const auto query = parse_query(
      "uploadId=u1&partNumber=2&foo=bar&acl&response-content-type=text%2Fplain&uploads=&versionId=&"
      "X-Amz-Date=x&Signature=s&Expires=1&AWSAccessKeyId=a");
  ASSERT_TRUE(query);
  EXPECT_EQ(v2_canonical_resource("/b/odd%20key", *query),
            "/b/odd%20key?acl&partNumber=2&response-content-type=text/"
            "plain&uploadId=u1&uploads&versionId");
  EXPECT_EQ(v2_canonical_resource("/b/", *parse_query("delete")), "/b/?delete");
  EXPECT_EQ(v2_string_to_sign("PUT", "md5", "text/plain", "1",
                              "x-amz-acl:private\nx-amz-meta-a:1\n", "/b/k"),
            "PUT\nmd5\ntext/plain\n1\nx-amz-acl:private\nx-amz-meta-a:1\n/b/k");
}

// ---- aws-chunked -------------------------------------------------------------------------------

using Error = AwsChunkedDecoder::Error;

AwsChunkedDecoder::Signing test_signing(std::string_view seed) {
  AwsChunkedDecoder::Signing s;
  s.scope = SigningScope{"20261121", "us-east-1", "s3"};
  s.key = signing_key(kSecret, s.scope);
  s.amz_date = "20261121T235313Z";
  s.seed_signature = std::string(seed);
  return s;
}

struct BodyOptions {
  std::size_t chunk_bytes = 65536;
  std::vector<std::pair<std::string, std::string>> trailers;  // raw name, value
  bool minio_lf_quirk = false;                                // "name:value\n\r\n"
};

// Frames `payload` as aws-chunked, signing it when `signing` is given.
std::string frame(std::string_view payload,
                  const std::optional<AwsChunkedDecoder::Signing>& signing,
                  const BodyOptions& options) {
  std::string out;
  std::string previous = signing ? signing->seed_signature : "";
  const auto chunk_line = [&](std::string_view data) {
    char size[32];
    std::snprintf(size, sizeof size, "%zx", data.size());
    out.append(size);
    if (signing) {
      previous = sign(signing->key, chunk_string_to_sign(signing->amz_date, signing->scope,
                                                         previous, sha256_hex(data)));
      out.append(";chunk-signature=").append(previous);
    }
    out.append("\r\n");
  };
  for (std::size_t at = 0; at < payload.size(); at += options.chunk_bytes) {
    const std::string_view data = payload.substr(at, options.chunk_bytes);
    chunk_line(data);
    out.append(data).append("\r\n");
  }
  chunk_line("");
  std::string canonical;
  for (const auto& [name, value] : options.trailers) {
    out.append(name).append(":").append(value).append(options.minio_lf_quirk ? "\n\r\n" : "\r\n");
    std::string lower = name;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    // As the decoder (and verify.py) canonicalise: lower-case name, trimmed value.
    std::string_view v = value;
    while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
    while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
    canonical.append(lower).append(":").append(v).append("\n");
  }
  if (signing && !options.trailers.empty()) {
    out.append("x-amz-trailer-signature:")
        .append(sign(signing->key, trailer_string_to_sign(signing->amz_date, signing->scope,
                                                          previous, sha256_hex(canonical))))
        .append("\r\n");
  }
  out.append("\r\n");
  return out;
}

struct Decoded {
  Error error = Error::kNone;
  bool finished = false;
  std::string payload;
  std::vector<std::pair<std::string, std::string>> trailers;
  std::uint64_t decoded_bytes = 0;
};

// Feeds `body` in pieces whose sizes come from `next_piece`.
template <class NextPiece>
Decoded decode(std::string_view body, std::optional<AwsChunkedDecoder::Signing> signing,
               bool trailer, std::optional<std::uint64_t> decoded_length, NextPiece next_piece) {
  AwsChunkedDecoder d(std::move(signing), trailer, decoded_length);
  Decoded out;
  const auto sink = [&out](std::span<const std::byte> run) {
    out.payload.append(reinterpret_cast<const char*>(run.data()), run.size());
  };
  for (std::size_t at = 0; at < body.size() && out.error == Error::kNone;) {
    const std::size_t n = std::min(body.size() - at, std::max<std::size_t>(1, next_piece()));
    out.error = d.feed(bytes(body.substr(at, n)), sink);
    at += n;
  }
  out.finished = d.finished();
  out.trailers = d.trailers();
  out.decoded_bytes = d.decoded_bytes();
  return out;
}

Decoded decode_whole(std::string_view body, std::optional<AwsChunkedDecoder::Signing> signing,
                     bool trailer, std::optional<std::uint64_t> decoded_length = std::nullopt) {
  return decode(body, std::move(signing), trailer, decoded_length, [&] { return body.size(); });
}

TEST(AwsChunked, WorkedExampleSignedTrailer) {
  // worked-examples.md example 2 (minio-go, signed chunks + signed trailer, "\n\r\n" quirk).
  const std::string body =
      "b;chunk-signature=971217d3e218d144bd9776ccc0773d286e3a4d88cbc591c977f38b5b216e03d7\r\n"
      "hello world\r\n"
      "0;chunk-signature=a9a22918d15833a6ec7a0c547354eae4dd6aef7fc80e0353eb84a31ce3b49790\r\n"
      "x-amz-checksum-crc32c:yZRlqg==\n\r\n"
      "x-amz-trailer-signature:3fd9c67fc67c2cd3876b3dc0a15c64abec7287da921d18960fc6f1aaaed7293b\r\n"
      "\r\n";
  const auto signing =
      test_signing("cca30826683c9f3778b94e4ed9b2e78e38b9d20e0521532a34270f699230b052");
  std::size_t one = 1;
  for (bool byte_by_byte : {false, true}) {
    const Decoded d = byte_by_byte ? decode(body, signing, true, 11, [&] { return one; })
                                   : decode_whole(body, signing, true, 11);
    EXPECT_EQ(d.error, Error::kNone);
    EXPECT_TRUE(d.finished);
    EXPECT_EQ(d.payload, "hello world");
    EXPECT_EQ(d.decoded_bytes, 11U);
    ASSERT_EQ(d.trailers.size(), 1U);
    EXPECT_EQ(d.trailers[0].first, "x-amz-checksum-crc32c");
    EXPECT_EQ(d.trailers[0].second, "yZRlqg==");
  }
  // One flipped bit anywhere in a signature, the data or the trailer value is caught.
  for (std::size_t at : {body.find("971217"), body.find("hello"), body.find("a9a229"),
                         body.find("yZRl"), body.find("3fd9c6")}) {
    std::string bad = body;
    bad[at + 1] = bad[at + 1] == 'e' ? 'f' : 'e';
    const Decoded d = decode_whole(bad, signing, true, 11);
    EXPECT_TRUE(d.error == Error::kBadChunkSignature || d.error == Error::kBadTrailerSignature)
        << at;
    EXPECT_FALSE(d.finished);
  }
}

TEST(AwsChunked, AwsDocExampleSignedChunks) {
  // "Signature Calculations for the Authorization Header: Transferring Payload in Multiple Chunks"
  // (S3 API reference): 65536 + 1024 bytes of 'a' in 64 KiB chunks.
  const SigningScope scope{"20130524", "us-east-1", "s3"};
  const Headers headers{{{"Host", "s3.amazonaws.com"},
                         {"x-amz-date", "20130524T000000Z"},
                         {"x-amz-storage-class", "REDUCED_REDUNDANCY"},
                         {"Content-Encoding", "aws-chunked"},
                         {"x-amz-decoded-content-length", "66560"},
                         {"x-amz-content-sha256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"},
                         {"Content-Length", "66824"}}};
  const std::vector<std::string> signed_headers = {
      "content-encoding",     "content-length", "host",
      "x-amz-content-sha256", "x-amz-date",     "x-amz-decoded-content-length",
      "x-amz-storage-class"};
  const std::string seed =
      sign_request("PUT", "/examplebucket/chunkObject.txt", "", headers, signed_headers,
                   "STREAMING-AWS4-HMAC-SHA256-PAYLOAD", "20130524T000000Z", scope);
  EXPECT_EQ(seed, "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9");
  AwsChunkedDecoder::Signing signing;
  signing.scope = scope;
  signing.key = signing_key(kSecret, scope);
  signing.amz_date = "20130524T000000Z";
  signing.seed_signature = seed;
  const std::string payload(66560, 'a');
  const std::string body = frame(payload, signing, {});
  EXPECT_EQ(body.size(), 66824U);
  EXPECT_NE(body.find("10000;chunk-signature="
                      "ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648\r\n"),
            std::string::npos);
  EXPECT_NE(body.find("400;chunk-signature="
                      "0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497\r\n"),
            std::string::npos);
  EXPECT_NE(body.find("0;chunk-signature="
                      "b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9\r\n\r\n"),
            std::string::npos);
  const Decoded d = decode_whole(body, signing, false, 66560);
  EXPECT_EQ(d.error, Error::kNone);
  EXPECT_TRUE(d.finished);
  EXPECT_EQ(d.payload, payload);
}

struct Mode {
  bool signed_chunks;
  bool trailer;
};

class AwsChunkedModes : public ::testing::TestWithParam<Mode> {
 protected:
  [[nodiscard]] std::optional<AwsChunkedDecoder::Signing> signing() const {
    if (!GetParam().signed_chunks) return std::nullopt;
    return test_signing("6cac1e0dc915e89ebfeb60bb6184ca2187371d49e641cdaead456cadfe1ba52c");
  }
  [[nodiscard]] BodyOptions options(std::size_t chunk_bytes, bool quirk = false) const {
    BodyOptions o;
    o.chunk_bytes = chunk_bytes;
    if (GetParam().trailer)
      o.trailers = {{"x-amz-checksum-crc32", "vQ932Q=="}, {"X-Amz-Meta-Extra", " v  "}};
    o.minio_lf_quirk = quirk;
    return o;
  }
};

TEST_P(AwsChunkedModes, AnyPiecesGiveTheSamePayloadAndTrailers) {
  std::mt19937_64 rng(11);
  for (std::size_t size : {std::size_t{0}, std::size_t{1}, std::size_t{100}, std::size_t{5000}}) {
    for (bool quirk : {false, true}) {
      const std::string payload = random_bytes(rng, size);
      const std::string body = frame(payload, signing(), options(777, quirk));
      const Decoded whole = decode_whole(body, signing(), GetParam().trailer, payload.size());
      ASSERT_EQ(whole.error, Error::kNone);
      EXPECT_TRUE(whole.finished);
      EXPECT_EQ(whole.payload, payload);
      EXPECT_EQ(whole.decoded_bytes, payload.size());
      if (GetParam().trailer) {
        const std::vector<std::pair<std::string, std::string>> want = {
            {"x-amz-checksum-crc32", "vQ932Q=="}, {"x-amz-meta-extra", "v"}};
        EXPECT_EQ(whole.trailers, want);
      } else {
        EXPECT_TRUE(whole.trailers.empty());
      }
      const Decoded bytewise =
          decode(body, signing(), GetParam().trailer, std::nullopt, [] { return 1; });
      EXPECT_EQ(bytewise.error, Error::kNone);
      EXPECT_TRUE(bytewise.finished);
      EXPECT_EQ(bytewise.payload, payload);
      EXPECT_EQ(bytewise.trailers, whole.trailers);
      for (int round = 0; round < 20; ++round) {
        const Decoded random = decode(body, signing(), GetParam().trailer, payload.size(),
                                      [&] { return static_cast<std::size_t>(rng() % 200); });
        EXPECT_EQ(random.error, Error::kNone);
        EXPECT_TRUE(random.finished);
        EXPECT_EQ(random.payload, payload);
        EXPECT_EQ(random.trailers, whole.trailers);
      }
    }
  }
}

TEST_P(AwsChunkedModes, TruncatedStreamsAreNotFinished) {
  const std::string body = frame("hello world, hello world", signing(), options(5));
  for (std::size_t n = 0; n < body.size(); ++n) {
    const Decoded d = decode_whole(body.substr(0, n), signing(), GetParam().trailer);
    EXPECT_EQ(d.error, Error::kNone) << n;
    EXPECT_FALSE(d.finished) << n;
  }
  EXPECT_TRUE(decode_whole(body, signing(), GetParam().trailer).finished);
}

TEST_P(AwsChunkedModes, BytesAfterTheEndAreMalformed) {
  const std::string body = frame("hello world", signing(), options(4));
  const Decoded d = decode_whole(body + "0", signing(), GetParam().trailer);
  EXPECT_EQ(d.error, Error::kMalformed);
  // Also when the extra bytes come in a later feed(), and the decoder stays failed.
  AwsChunkedDecoder decoder(signing(), GetParam().trailer, std::nullopt);
  const auto sink = [](std::span<const std::byte>) {};
  EXPECT_EQ(decoder.feed(bytes(body), sink), Error::kNone);
  EXPECT_TRUE(decoder.finished());
  EXPECT_EQ(decoder.feed(bytes("\r\n"), sink), Error::kMalformed);
  EXPECT_FALSE(decoder.finished());
  EXPECT_EQ(decoder.feed(bytes(""), sink), Error::kMalformed);
}

TEST_P(AwsChunkedModes, MoreThanDeclaredIsTooLarge) {
  const std::string body = frame("hello world", signing(), options(4));
  EXPECT_EQ(decode_whole(body, signing(), GetParam().trailer, 11).error, Error::kNone);
  EXPECT_EQ(decode_whole(body, signing(), GetParam().trailer, 10).error, Error::kTooLarge);
  EXPECT_EQ(decode_whole(body, signing(), GetParam().trailer, 0).error, Error::kTooLarge);
  // Fewer bytes than declared: the caller compares decoded_bytes() itself.
  const Decoded d = decode_whole(body, signing(), GetParam().trailer, 12);
  EXPECT_EQ(d.error, Error::kNone);
  EXPECT_TRUE(d.finished);
  EXPECT_EQ(d.decoded_bytes, 11U);
}

TEST_P(AwsChunkedModes, GarbageIsMalformed) {
  const std::string sig(64, 'a');
  const std::string chunk_ext = GetParam().signed_chunks ? ";chunk-signature=" + sig : "";
  const std::vector<std::string> bad = {
      "hello\r\n",                                           // not hex
      "\r\n",                                                // empty size
      "zz" + chunk_ext + "\r\n",                             // not hex
      "-1" + chunk_ext + "\r\n",                             // not hex
      " 5" + chunk_ext + "\r\n",                             // no spaces
      "5 " + chunk_ext + "\r\n",                             // no spaces
      "5" + chunk_ext + "\n",                                // bare LF
      "5" + chunk_ext + "\rx\r\n",                           // CR inside the line
      "10000000000000000" + chunk_ext + "\r\n",              // 2^64: overflows
      "5;foo=bar\r\n",                                       // unknown extension
      "5;chunk-signature=abc\r\n",                           // short signature
      "5;chunk-signature=" + sig + ";x=y\r\n",               // extra extension
      "5;chunk-signature=" + std::string(64, 'g') + "\r\n",  // not hex
  };
  for (const auto& body : bad) {
    EXPECT_EQ(decode_whole(body, signing(), GetParam().trailer).error, Error::kMalformed) << body;
  }
  // The CRLF after a chunk's data (the chunk itself correctly signed).
  const std::string good = frame("a", signing(), options(4));
  const std::size_t after_data = good.find("\r\n") + 2 + 1;
  ASSERT_EQ(good.substr(after_data - 1, 3), "a\r\n");
  for (std::string_view replacement : {"b\r\n", "\n", "\r\r\n", "\rx"}) {
    const std::string body =
        good.substr(0, after_data) + std::string(replacement) + good.substr(after_data + 2);
    EXPECT_EQ(decode_whole(body, signing(), GetParam().trailer).error, Error::kMalformed)
        << replacement;
  }
  // A 64-bit size with leading zeros is fine (and then too large for the declared length).
  EXPECT_EQ(decode_whole("0000000000000000000ffffffffffffffff" + chunk_ext + "\r\n", signing(),
                         GetParam().trailer, 5)
                .error,
            Error::kTooLarge);
  // Trailer lines: no colon, an empty name; trailers when none were announced.
  const std::string end = frame("", signing(), options(4));
  const std::string before_trailers = end.substr(0, end.find("\r\n") + 2);
  for (std::string_view line :
       {"no colon here\r\n\r\n", ":value\r\n\r\n", "x-amz-meta-a:b\nc\r\n\r\n",
        "x-amz-\nmeta-a:bc\r\n\r\n", "x-amz-meta-a:b\rc\r\n\r\n"}) {
    EXPECT_EQ(
        decode_whole(before_trailers + std::string(line), signing(), GetParam().trailer).error,
        Error::kMalformed)
        << line;
  }
  if (!GetParam().trailer) {
    EXPECT_EQ(
        decode_whole(before_trailers + "x-amz-checksum-crc32:AAAAAA==\r\n\r\n", signing(), false)
            .error,
        Error::kMalformed);
  }
}

TEST_P(AwsChunkedModes, OversizeLinesAreMalformed) {
  // A chunk line that never ends.
  std::size_t piece = 1000;
  const Decoded endless = decode(std::string(10000, '0'), signing(), GetParam().trailer,
                                 std::nullopt, [&] { return piece; });
  EXPECT_EQ(endless.error, Error::kMalformed);
  // A long chunk extension.
  EXPECT_EQ(
      decode_whole("5;" + std::string(5000, 'x') + "\r\n", signing(), GetParam().trailer).error,
      Error::kMalformed);
  if (GetParam().trailer) {
    const std::string end = frame("", signing(), options(4));
    const std::string before_trailers = end.substr(0, end.find("\r\n") + 2);
    // One huge trailer line, and many small ones.
    EXPECT_EQ(decode_whole(before_trailers + "x-amz-meta-a:" + std::string(5000, 'v') + "\r\n\r\n",
                           signing(), true)
                  .error,
              Error::kMalformed);
    std::string many;
    for (int i = 0; i < 1000; ++i) many += "x-amz-meta-" + std::to_string(i) + ":value\r\n";
    EXPECT_EQ(decode_whole(before_trailers + many + "\r\n", signing(), true).error,
              Error::kMalformed);
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, AwsChunkedModes,
                         ::testing::Values(Mode{false, false}, Mode{false, true}, Mode{true, false},
                                           Mode{true, true}),
                         [](const ::testing::TestParamInfo<Mode>& param_info) {
                           return std::string(param_info.param.signed_chunks ? "Signed"
                                                                             : "Unsigned") +
                                  (param_info.param.trailer ? "Trailer" : "NoTrailer");
                         });

TEST(AwsChunked, TamperedChunksFailTheChain) {
  const auto signing =
      test_signing("6cac1e0dc915e89ebfeb60bb6184ca2187371d49e641cdaead456cadfe1ba52c");
  std::mt19937_64 rng(5);
  const std::string payload = random_bytes(rng, 3000);
  const std::string body = frame(payload, signing, {1000, {}, false});
  ASSERT_EQ(decode_whole(body, signing, false).error, Error::kNone);
  // Three chunks "3e8;chunk-signature=<64>\r\n<1000 bytes>\r\n", then
  // "0;chunk-signature=<64>\r\n\r\n".
  constexpr std::size_t kLine = 3 + 17 + 64 + 2;
  constexpr std::size_t kChunk = kLine + 1000 + 2;
  ASSERT_EQ(body.size(), 3 * kChunk + (kLine - 2) + 2);
  std::vector<std::size_t> signature_chars;
  std::vector<std::size_t> data_bytes;
  for (std::size_t c = 0; c < 4; ++c) {
    const std::size_t signature = c * kChunk + (c < 3 ? 3 : 1) + 17;
    for (std::size_t i = 0; i < 64; i += 7) signature_chars.push_back(signature + i);
    if (c == 3) break;
    for (std::size_t i = 0; i < 1000; i += 37) data_bytes.push_back(c * kChunk + kLine + i);
  }
  for (std::size_t at : signature_chars) {
    std::string bad = body;
    ASSERT_TRUE(std::isxdigit(static_cast<unsigned char>(bad[at]))) << at;
    bad[at] = bad[at] == '0' ? '1' : '0';
    const Decoded d = decode_whole(bad, signing, false);
    EXPECT_EQ(d.error, Error::kBadChunkSignature) << at;
    EXPECT_FALSE(d.finished);
  }
  for (std::size_t at : data_bytes) {
    std::string bad = body;
    bad[at] = static_cast<char>(bad[at] ^ 0x20);
    const Decoded d = decode_whole(bad, signing, false);
    EXPECT_EQ(d.error, Error::kBadChunkSignature) << at;
    EXPECT_FALSE(d.finished);
  }
  // A chain from another seed fails at the first chunk; two chunks swapped fail too.
  EXPECT_EQ(decode_whole(body, test_signing(std::string(64, '0')), false).error,
            Error::kBadChunkSignature);
  const std::string swapped =
      body.substr(kChunk, kChunk) + body.substr(0, kChunk) + body.substr(2 * kChunk);
  EXPECT_EQ(decode_whole(swapped, signing, false).error, Error::kBadChunkSignature);
}

TEST(AwsChunked, SignedTrailerProblems) {
  const auto signing =
      test_signing("6cac1e0dc915e89ebfeb60bb6184ca2187371d49e641cdaead456cadfe1ba52c");
  BodyOptions options;
  options.trailers = {{"x-amz-checksum-crc32c", "yZRlqg=="}};
  const std::string body = frame("hello world", signing, options);
  ASSERT_EQ(decode_whole(body, signing, true).error, Error::kNone);

  std::string changed_value = body;
  changed_value.replace(changed_value.find("yZRlqg=="), 8, "yZRlqw==");
  EXPECT_EQ(decode_whole(changed_value, signing, true).error, Error::kBadTrailerSignature);

  std::string changed_name = body;
  changed_name.replace(changed_name.find("crc32c"), 6, "crc32 ");
  EXPECT_EQ(decode_whole(changed_name, signing, true).error, Error::kBadTrailerSignature);

  const std::size_t sig_at = body.find("x-amz-trailer-signature:");
  std::string no_signature = body.substr(0, sig_at) + "\r\n";
  EXPECT_EQ(decode_whole(no_signature, signing, true).error, Error::kBadTrailerSignature);

  std::string bad_signature = body;
  bad_signature[sig_at + 30] = bad_signature[sig_at + 30] == '0' ? '1' : '0';
  EXPECT_EQ(decode_whole(bad_signature, signing, true).error, Error::kBadTrailerSignature);

  // An extra trailer after the signature would be unsigned.
  std::string after = body.substr(0, body.size() - 2) + "x-amz-meta-x:1\r\n\r\n";
  EXPECT_EQ(decode_whole(after, signing, true).error, Error::kMalformed);

  // Upper-case names and padded values are canonicalised the same way.
  BodyOptions padded;
  padded.trailers = {{"X-Amz-Checksum-CRC32C", "  yZRlqg==\t"}};
  EXPECT_EQ(decode_whole(frame("hello world", signing, padded), signing, true).error, Error::kNone);

  // The unsigned modes have no trailer signature line.
  BodyOptions unsigned_options;
  unsigned_options.trailers = {{"x-amz-checksum-crc32", "DUoRhQ=="}};
  const std::string unsigned_body = frame("hello world", std::nullopt, unsigned_options);
  EXPECT_EQ(decode_whole(unsigned_body, std::nullopt, true).error, Error::kNone);
  const std::string with_sig = unsigned_body.substr(0, unsigned_body.size() - 2) +
                               "x-amz-trailer-signature:" + std::string(64, 'a') + "\r\n\r\n";
  EXPECT_EQ(decode_whole(with_sig, std::nullopt, true).error, Error::kMalformed);
}

TEST(AwsChunked, UnsignedModeRejectsSignedFraming) {
  EXPECT_EQ(decode_whole("b;chunk-signature=" + std::string(64, 'a') + "\r\nhello world\r\n",
                         std::nullopt, true)
                .error,
            Error::kMalformed);
  const auto signing = test_signing(std::string(64, 'a'));
  EXPECT_EQ(decode_whole("b\r\nhello world\r\n", signing, false).error, Error::kMalformed);
}

TEST(AwsChunked, WorkedExampleUnsignedTrailers) {
  // worked-examples.md examples 3 and 5 (the aws-chunked streams, HTTP chunking removed).
  const Decoded js = decode_whole("b\r\nhello world\r\n0\r\nx-amz-checksum-crc32:DUoRhQ==\r\n\r\n",
                                  std::nullopt, true, 11);
  EXPECT_EQ(js.error, Error::kNone);
  EXPECT_TRUE(js.finished);
  EXPECT_EQ(js.payload, "hello world");
  ASSERT_EQ(js.trailers.size(), 1U);
  EXPECT_EQ(js.trailers[0],
            (std::pair<std::string, std::string>{"x-amz-checksum-crc32", "DUoRhQ=="}));
  std::size_t one = 1;
  const Decoded minio = decode("b\r\nhello world\r\n0\r\nx-amz-checksum-crc32c:yZRlqg==\n\r\n\r\n",
                               std::nullopt, true, 11, [&] { return one; });
  EXPECT_EQ(minio.error, Error::kNone);
  EXPECT_TRUE(minio.finished);
  ASSERT_EQ(minio.trailers.size(), 1U);
  EXPECT_EQ(minio.trailers[0],
            (std::pair<std::string, std::string>{"x-amz-checksum-crc32c", "yZRlqg=="}));
}

}  // namespace
}  // namespace hots3::aws
