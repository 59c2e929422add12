// Known-answer test over every captured request of real S3 clients (tests/data/wire): for each
// one, our implementation re-verifies what tests/data/wire/verify.py verifies, from the raw
// bytes: the SigV4 header or presigned signature (or the SigV2 presigned one), the aws-chunked
// chunk-signature chain and trailer signature, the hex payload hash, every x-amz-checksum-*
// (header, trailer, or composite on CompleteMultipartUpload) and Content-MD5.
//
// Bodies over 64 KiB keep only their first and last 2 KiB in the captures. Their payloads are
// deterministic (README section 5), so the full wire body is rebuilt from the regenerated
// payload and the framing recorded in the .json (chunk header lines, HTTP chunk sizes, trailer
// lines); the rebuild must match the captured head and tail and the recorded sha256 of the
// whole wire body before anything is verified, and then goes through the same checks as a
// complete capture. The .json's digests only pick which payload a request carried.

#include "wire_payload.h"

#include "hots3/aws/checksum.h"
#include "hots3/aws/chunked.h"
#include "hots3/aws/sigv4.h"
#include "hots3/common/digest.h"

#include <boost/json/src.hpp>  // Boost.JSON header-only, in this one TU
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace hots3::aws {
namespace {

using test::generated_payload;

namespace fs = std::filesystem;
namespace json = boost::json;

constexpr std::string_view kAccessKey = "AKIAIOSFODNN7EXAMPLE";
constexpr std::string_view kSecret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
constexpr std::size_t kExpectedCaptures = 362;

fs::path captures_dir() { return fs::path(HOTS3_WIRE_DIR) / "captures"; }

std::span<const std::byte> bytes(std::string_view s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

std::optional<std::string> read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream out;
  out << in.rdbuf();
  return std::move(out).str();
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}
bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())) != 0) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())) != 0) s.remove_suffix(1);
  return s;
}

// Request captures, relative to captures_dir(), sorted: "http/minio-go/002-PutObject.http".
std::vector<std::string> list_captures() {
  std::vector<std::string> out;
  std::error_code ec;
  if (!fs::is_directory(captures_dir(), ec)) return out;
  for (fs::recursive_directory_iterator it(captures_dir(), ec), end; !ec && it != end;
       it.increment(ec)) {
    const fs::path& p = it->path();
    const std::string name = p.filename().string();
    if (p.extension() == ".http" && name.size() > 4 &&
        std::isdigit(static_cast<unsigned char>(name[0])) != 0 && name[3] == '-') {
      out.push_back(fs::relative(p, captures_dir()).generic_string());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> list_presigned_urls() {
  std::vector<std::string> out;
  std::error_code ec;
  if (!fs::is_directory(captures_dir(), ec)) return out;
  for (fs::recursive_directory_iterator it(captures_dir(), ec), end; !ec && it != end;
       it.increment(ec)) {
    if (starts_with(it->path().filename().string(), "presigned-url")) {
      out.push_back(fs::relative(it->path(), captures_dir()).generic_string());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string test_name(const std::string& relative) {
  std::string out;
  for (char c : relative.substr(0, relative.rfind('.')))
    out.push_back(std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
  return out;
}

// ---- the request as captured ---------------------------------------------------------------

struct Request {
  std::string method;
  std::string raw_path;
  std::string raw_query;
  std::vector<std::pair<std::string, std::string>> headers;  // names as sent, values untrimmed
  std::string body;                                          // the wire body (possibly truncated)

  // All values of a header, any case of its name.
  [[nodiscard]] std::vector<std::string_view> values(std::string_view name) const {
    std::vector<std::string_view> out;
    for (const auto& [n, v] : headers) {
      if (lower(n) == name) out.push_back(v);
    }
    return out;
  }
  [[nodiscard]] std::optional<std::string> get(std::string_view name) const {
    const auto v = values(name);
    if (v.empty()) return std::nullopt;
    return std::string(trim(v.front()));
  }
};

std::optional<Request> parse_http(std::string_view raw) {
  const std::size_t head_end = raw.find("\r\n\r\n");
  if (head_end == std::string_view::npos) return std::nullopt;
  Request r;
  r.body = std::string(raw.substr(head_end + 4));
  std::string_view head = raw.substr(0, head_end);
  const std::size_t first_eol = head.find("\r\n");
  const std::string_view request_line = head.substr(0, first_eol);
  const std::size_t sp1 = request_line.find(' ');
  const std::size_t sp2 = request_line.rfind(' ');
  if (sp1 == std::string_view::npos || sp2 == sp1) return std::nullopt;
  r.method = std::string(request_line.substr(0, sp1));
  const std::string_view target = request_line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::size_t q = target.find('?');
  r.raw_path = std::string(target.substr(0, q));
  if (q != std::string_view::npos) r.raw_query = std::string(target.substr(q + 1));
  head = first_eol == std::string_view::npos ? std::string_view() : head.substr(first_eol + 2);
  while (!head.empty()) {
    const std::size_t eol = head.find("\r\n");
    const std::string_view line = head.substr(0, eol);
    head = eol == std::string_view::npos ? std::string_view() : head.substr(eol + 2);
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) return std::nullopt;
    r.headers.emplace_back(std::string(line.substr(0, colon)), std::string(line.substr(colon + 1)));
  }
  return r;
}

// HTTP/1.1 chunked transfer coding, strictly (the HTTP layer's job in the server).
std::optional<std::string> dechunk_http(std::string_view raw) {
  std::string out;
  for (std::size_t at = 0;;) {
    const std::size_t eol = raw.find("\r\n", at);
    if (eol == std::string_view::npos) return std::nullopt;
    const std::string_view size_text =
        raw.substr(at, raw.find(';', at) < eol ? raw.find(';', at) - at : eol - at);
    std::size_t size = 0;
    if (size_text.empty()) return std::nullopt;
    for (char c : size_text) {
      const int d = std::isxdigit(static_cast<unsigned char>(c)) == 0 ? -1
                    : c <= '9'                                        ? c - '0'
                                                                      : (c | 0x20) - 'a' + 10;
      if (d < 0 || size > (std::size_t{1} << 40)) return std::nullopt;
      size = size * 16 + static_cast<std::size_t>(d);
    }
    at = eol + 2;
    if (size == 0) {
      // No HTTP trailers in the captures: just the closing CRLF.
      return raw.substr(at) == "\r\n" ? std::optional<std::string>(std::move(out)) : std::nullopt;
    }
    if (at + size + 2 > raw.size() || raw.substr(at + size, 2) != "\r\n") return std::nullopt;
    out.append(raw.substr(at, size));
    at += size + 2;
  }
}

// ---- rebuilding truncated bodies ---------------------------------------------------------------

// The payloads of the truncated captures: 70k.bin, and the two 5 MiB parts of 10m.bin.
const std::vector<std::string>& known_payloads() {
  static const std::vector<std::string> payloads = [] {
    const std::string ten = generated_payload("10m", 10485760);
    return std::vector<std::string>{generated_payload("70k", 71680), ten.substr(0, 5242880),
                                    ten.substr(5242880)};
  }();
  return payloads;
}

std::string hex_size(std::size_t n) {
  char text[32];
  std::snprintf(text, sizeof text, "%zx", n);
  return text;
}

// Rebuilds the whole wire body of a truncated capture; fails the test if it does not match.
std::optional<std::string> rebuild_wire_body(const json::object& meta, std::string_view head_2k,
                                             std::string_view tail_2k) {
  const auto length = meta.at("payload_length").to_number<std::size_t>();
  const std::string_view sha = meta.at("payload_digests").at("sha256_hex").as_string();
  const std::string* payload = nullptr;
  for (const auto& candidate : known_payloads()) {
    if (candidate.size() == length && sha256_hex(candidate) == sha) payload = &candidate;
  }
  if (payload == nullptr) {
    ADD_FAILURE() << "payload of " << length << " bytes is none of the regenerable files";
    return std::nullopt;
  }
  std::string stream;
  if (const auto* aws = meta.if_contains("aws_chunked"); aws != nullptr && !aws->is_null()) {
    std::size_t at = 0;
    for (const auto& chunk : aws->at("chunks").as_array()) {
      const auto size = chunk.at("size").to_number<std::size_t>();
      stream.append(chunk.at("header_line").as_string()).append("\r\n");
      if (size == 0) break;
      stream.append(payload->substr(at, size)).append("\r\n");
      at += size;
    }
    for (const auto& trailer : aws->at("trailers").as_array())
      stream.append(trailer.as_string()).append("\r\n");
    stream.append("\r\n");
  } else {
    stream = *payload;
  }
  std::string wire;
  if (const auto* http = meta.if_contains("http_chunked"); http != nullptr && !http->is_null()) {
    std::size_t at = 0;
    for (const auto& size_value : http->at("chunk_sizes").as_array()) {
      const auto size = size_value.to_number<std::size_t>();
      wire.append(hex_size(size)).append("\r\n");
      if (size == 0) break;
      wire.append(stream.substr(at, size)).append("\r\n");
      at += size;
    }
    wire.append("\r\n");
  } else {
    wire = std::move(stream);
  }
  const bool same = wire.size() == meta.at("body_wire_length").to_number<std::size_t>() &&
                    starts_with(wire, head_2k) && ends_with(wire, tail_2k) &&
                    sha256_hex(wire) == meta.at("body_wire_sha256").as_string();
  if (!same) {
    ADD_FAILURE() << "the rebuilt body (" << wire.size() << " bytes) is not the captured one";
    return std::nullopt;
  }
  return wire;
}

// ---- verification ------------------------------------------------------------------------------

struct SigV4Seed {
  std::string signature;
  SigningScope scope;
  std::string amz_date;
};

// Canonical x-amz-* headers for SigV2 (lower-case names, sorted, repeated values joined).
std::string v2_amz_headers(const Request& r, bool include_amz_date) {
  std::map<std::string, std::vector<std::string>> amz;
  for (const auto& [name, value] : r.headers) {
    const std::string n = lower(name);
    if (starts_with(n, "x-amz-") && (n != "x-amz-date" || include_amz_date))
      amz[n].emplace_back(trim(value));
  }
  std::string out;
  for (const auto& [name, values] : amz) {
    out.append(name).append(":");
    for (std::size_t i = 0; i < values.size(); ++i) out.append(i > 0 ? "," : "").append(values[i]);
    out.append("\n");
  }
  return out;
}

std::optional<std::string> query_value(const std::vector<QueryParameter>& query,
                                       std::string_view name) {
  for (const auto& p : query) {
    if (p.name == name) return p.value;
  }
  return std::nullopt;
}

// Verifies the request's signature; returns the seed for aws-chunked when it was a SigV4 header.
std::optional<SigV4Seed> verify_signature(const Request& r, std::vector<std::string>& checks) {
  const auto path = percent_decode(r.raw_path);
  const auto query = parse_query(r.raw_query);
  if (!path || !query) {
    ADD_FAILURE() << "undecodable target " << r.raw_path << "?" << r.raw_query;
    return std::nullopt;
  }
  const auto header_values = [&r](std::string_view name, std::vector<std::string_view>& out) {
    for (const std::string_view v : r.values(name)) out.push_back(v);
  };
  const auto authorization = r.get("authorization");

  if (authorization && starts_with(*authorization, kAlgorithm)) {
    const auto parsed = parse_authorization(*authorization);
    if (!std::holds_alternative<Authorization>(parsed)) {
      ADD_FAILURE() << std::get<ParseError>(parsed).message;
      return std::nullopt;
    }
    const auto& a = std::get<Authorization>(parsed);
    EXPECT_EQ(a.access_key, kAccessKey);
    for (const auto& name : a.signed_headers) {
      EXPECT_FALSE(r.values(name).empty()) << "signed header missing: " << name;
    }
    const std::string amz_date = r.get("x-amz-date").value_or(r.get("date").value_or(""));
    const std::string payload_hash = r.get("x-amz-content-sha256").value_or("UNSIGNED-PAYLOAD");
    CanonicalInput in;
    in.method = r.method;
    in.path = *path;
    in.query = &*query;
    in.header_values = header_values;
    in.signed_headers = &a.signed_headers;
    in.payload_hash = payload_hash;
    const std::string creq = canonical_request(in);
    const std::string computed =
        sign(signing_key(kSecret, a.scope), string_to_sign(amz_date, a.scope, creq));
    EXPECT_EQ(computed, a.signature) << "canonical request:\n" << creq;
    EXPECT_TRUE(signatures_equal(computed, a.signature));
    checks.emplace_back("sigv4");
    return SigV4Seed{a.signature, a.scope, amz_date};
  }

  if (query_value(*query, "X-Amz-Signature")) {
    const auto parsed = parse_presigned_v4(*query);
    if (!std::holds_alternative<PresignedV4>(parsed)) {
      ADD_FAILURE() << std::get<ParseError>(parsed).message;
      return std::nullopt;
    }
    const auto& p = std::get<PresignedV4>(parsed);
    EXPECT_EQ(p.authorization.access_key, kAccessKey);
    EXPECT_EQ(p.expires_s, 3600U);
    const std::string payload_hash =
        query_value(*query, "X-Amz-Content-Sha256").value_or("UNSIGNED-PAYLOAD");
    CanonicalInput in;
    in.method = r.method;
    in.path = *path;
    in.query = &*query;
    in.exclude_query = "X-Amz-Signature";
    in.header_values = header_values;
    in.signed_headers = &p.authorization.signed_headers;
    in.payload_hash = payload_hash;
    const std::string creq = canonical_request(in);
    const std::string computed = sign(signing_key(kSecret, p.authorization.scope),
                                      string_to_sign(p.amz_date, p.authorization.scope, creq));
    EXPECT_EQ(computed, p.authorization.signature) << "canonical request:\n" << creq;
    checks.emplace_back("sigv4-presigned");
    return std::nullopt;
  }

  if (query_value(*query, "Signature") && query_value(*query, "AWSAccessKeyId")) {
    EXPECT_EQ(query_value(*query, "AWSAccessKeyId"), kAccessKey);
    const std::string sts =
        v2_string_to_sign(r.method, r.get("content-md5").value_or(""),
                          r.get("content-type").value_or(""), *query_value(*query, "Expires"),
                          v2_amz_headers(r, false), v2_canonical_resource(r.raw_path, *query));
    const std::string computed = v2_sign(kSecret, sts);
    EXPECT_EQ(computed, *query_value(*query, "Signature")) << "string to sign:\n" << sts;
    EXPECT_TRUE(signatures_equal(computed, *query_value(*query, "Signature")));
    checks.emplace_back("sigv2-presigned");
    return std::nullopt;
  }

  if (authorization && starts_with(*authorization, "AWS ")) {
    // SigV2 header auth ("AWS AK:SIG"): verify.py handles it, no client sent it.
    const std::string_view v = std::string_view(*authorization).substr(4);
    const std::size_t colon = v.rfind(':');
    EXPECT_EQ(v.substr(0, colon), kAccessKey);
    const std::string date = r.get("x-amz-date") ? "" : r.get("date").value_or("");
    const std::string sts = v2_string_to_sign(
        r.method, r.get("content-md5").value_or(""), r.get("content-type").value_or(""), date,
        v2_amz_headers(r, true), v2_canonical_resource(r.raw_path, *query));
    EXPECT_EQ(v2_sign(kSecret, sts), v.substr(colon + 1));
    checks.emplace_back("sigv2");
    return std::nullopt;
  }
  ADD_FAILURE() << "no authentication found (every capture is signed)";
  return std::nullopt;
}

struct DecodedBody {
  std::string payload;
  std::vector<std::pair<std::string, std::string>> trailers;
};

std::uint64_t fnv1a(std::string_view s) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (char c : s) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ULL;
  return h;
}

// Runs our aws-chunked decoder over the whole stream, then again in random pieces.
std::optional<DecodedBody> decode_aws_chunked(const Request& r, std::string_view stream,
                                              const std::optional<SigV4Seed>& seed,
                                              std::string_view name,
                                              std::vector<std::string>& checks) {
  const std::string csha = r.get("x-amz-content-sha256").value_or("");
  const bool signed_chunks = starts_with(csha, "STREAMING-AWS4-HMAC-SHA256-PAYLOAD");
  const bool trailer = ends_with(csha, "-TRAILER");
  std::optional<std::uint64_t> decoded_length;
  if (const auto dcl = r.get("x-amz-decoded-content-length")) decoded_length = std::stoull(*dcl);
  std::optional<AwsChunkedDecoder::Signing> signing;
  if (signed_chunks) {
    if (!seed) {
      ADD_FAILURE() << "signed aws-chunked without a SigV4 header signature";
      return std::nullopt;
    }
    signing = AwsChunkedDecoder::Signing{signing_key(kSecret, seed->scope), seed->amz_date,
                                         seed->scope, seed->signature};
  }

  DecodedBody whole;
  {
    AwsChunkedDecoder d(signing, trailer, decoded_length);
    const auto e = d.feed(bytes(stream), [&whole](std::span<const std::byte> run) {
      whole.payload.append(reinterpret_cast<const char*>(run.data()), run.size());
    });
    EXPECT_EQ(e, AwsChunkedDecoder::Error::kNone);
    EXPECT_TRUE(d.finished());
    if (e != AwsChunkedDecoder::Error::kNone || !d.finished()) return std::nullopt;
    EXPECT_EQ(d.decoded_bytes(), whole.payload.size());
    whole.trailers = d.trailers();
  }
  {
    // Arbitrary boundaries (HTTP reads never line up with aws-chunks) give the same result.
    std::mt19937_64 rng(fnv1a(name));
    AwsChunkedDecoder d(signing, trailer, decoded_length);
    std::string payload;
    for (std::size_t at = 0; at < stream.size();) {
      const std::size_t n = std::min<std::size_t>(stream.size() - at, 1 + rng() % 3000);
      const auto e =
          d.feed(bytes(stream.substr(at, n)), [&payload](std::span<const std::byte> run) {
            payload.append(reinterpret_cast<const char*>(run.data()), run.size());
          });
      if (e != AwsChunkedDecoder::Error::kNone) {
        ADD_FAILURE() << "error " << static_cast<int>(e) << " when fed in pieces, at " << at;
        return std::nullopt;
      }
      at += n;
    }
    EXPECT_TRUE(d.finished());
    EXPECT_TRUE(payload == whole.payload) << "payload differs when fed in pieces";
    EXPECT_EQ(d.trailers(), whole.trailers);
  }
  if (decoded_length) {
    EXPECT_EQ(whole.payload.size(), *decoded_length);
    checks.emplace_back("decoded-length");
  }
  checks.emplace_back(signed_chunks ? "chunk-chain" : "aws-chunked-unsigned");
  if (signed_chunks && trailer) checks.emplace_back("trailer-signature");
  // Every trailer announced in x-amz-trailer arrived.
  if (const auto announced = r.get("x-amz-trailer")) {
    const bool found = std::any_of(whole.trailers.begin(), whole.trailers.end(),
                                   [&](const auto& t) { return t.first == lower(*announced); });
    EXPECT_TRUE(found) << "announced trailer " << *announced << " missing";
  }
  return whole;
}

// The composite checksum of a CompleteMultipartUpload: the checksum of the concatenated raw part
// checksums listed in the XML body (<ChecksumCRC32C> etc., any namespace prefix).
std::optional<std::string> composite_checksum(std::string_view xml, ChecksumAlgorithm algorithm) {
  const std::string wanted = "checksum" + lower(checksum_name(algorithm));
  Checksummer composite(algorithm);
  for (std::size_t at = xml.find('<'); at != std::string_view::npos; at = xml.find('<', at + 1)) {
    const std::size_t end = xml.find_first_of("> /", at);
    if (end == std::string_view::npos) break;
    std::string_view tag = xml.substr(at + 1, end - at - 1);
    if (const std::size_t colon = tag.find(':'); colon != std::string_view::npos)
      tag.remove_prefix(colon + 1);
    if (lower(tag) != wanted || xml[end] != '>') continue;
    const std::size_t close = xml.find('<', end);
    const auto raw = base64_decode(trim(xml.substr(end + 1, close - end - 1)));
    if (!raw) return std::nullopt;
    composite.update(bytes(*raw));
  }
  return composite.base64();
}

void verify_payload(const Request& r, std::string_view operation, const DecodedBody& body,
                    std::vector<std::string>& checks) {
  const std::string& payload = body.payload;
  const std::string csha = r.get("x-amz-content-sha256").value_or("");
  if (csha.size() == 64 && std::all_of(csha.begin(), csha.end(), [](char c) {
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
      })) {
    EXPECT_EQ(sha256_hex(payload), csha) << "x-amz-content-sha256";
    checks.emplace_back("content-sha256");
  }

  struct Declared {
    std::string where;
    ChecksumAlgorithm algorithm;
    std::string value;
  };
  std::vector<Declared> declared;
  for (const auto& [name, value] : r.headers) {
    const std::string n = lower(name);
    if (!starts_with(n, "x-amz-checksum-")) continue;
    if (const auto a = parse_checksum_algorithm(std::string_view(n).substr(15))) {
      EXPECT_EQ(n, checksum_header(*a));
      declared.push_back({"header", *a, std::string(trim(value))});
    }
  }
  for (const auto& [name, value] : body.trailers) {
    if (!starts_with(name, "x-amz-checksum-")) continue;
    const auto a = parse_checksum_algorithm(std::string_view(name).substr(15));
    EXPECT_TRUE(a.has_value()) << "unknown trailer " << name;
    if (a) declared.push_back({"trailer", *a, value});
  }
  for (const auto& d : declared) {
    if (operation == "CompleteMultipartUpload") {
      const auto composite = composite_checksum(payload, d.algorithm);
      ASSERT_TRUE(composite.has_value()) << "bad base64 in the Complete XML";
      EXPECT_EQ(*composite, d.value.substr(0, d.value.find('-')))
          << "composite " << checksum_name(d.algorithm);
      checks.push_back("composite-" + lower(checksum_name(d.algorithm)));
      continue;
    }
    Checksummer c(d.algorithm);
    c.update(bytes(payload));
    EXPECT_EQ(c.base64(), d.value) << d.where << " " << checksum_name(d.algorithm);
    ASSERT_TRUE(base64_decode(d.value).has_value()) << d.value;
    EXPECT_EQ(*base64_decode(d.value), c.raw());
    checks.push_back(d.where + "-" + lower(checksum_name(d.algorithm)));
  }

  if (const auto md5 = r.get("content-md5")) {
    const auto digest = hots3::md5(bytes(payload));
    EXPECT_EQ(base64_encode(std::as_bytes(std::span(digest))), *md5) << "Content-MD5";
    checks.emplace_back("content-md5");
  }
}

// ---- the tests ---------------------------------------------------------------------------------

TEST(WireCaptures, AllCapturesArePresent) {
  std::error_code ec;
  ASSERT_TRUE(fs::is_directory(captures_dir(), ec)) << captures_dir() << " is missing";
  const auto captures = list_captures();
  EXPECT_GE(captures.size(), kExpectedCaptures);
  std::map<std::string, std::size_t> per_client;
  for (const auto& c : captures) ++per_client[c.substr(0, c.rfind('/'))];
  EXPECT_EQ(per_client.size(), 16U) << "8 clients over http and https";
  EXPECT_GE(list_presigned_urls().size(), 20U);
}

class WireCapture : public ::testing::TestWithParam<std::string> {};

TEST_P(WireCapture, Verifies) {
  ASSERT_NE(GetParam(), "<no captures>") << "no captures found under " << captures_dir();
  const fs::path http_path = captures_dir() / GetParam();
  const auto raw = read_file(http_path);
  ASSERT_TRUE(raw) << http_path;
  auto request = parse_http(*raw);
  ASSERT_TRUE(request) << "unparseable request head";
  Request& r = *request;
  const std::string file = http_path.filename().string();
  const std::string operation = file.substr(4, file.rfind('.') - 4);

  // The whole wire body: as captured, or rebuilt when the capture keeps only its ends.
  const auto meta_text = read_file(fs::path(http_path).replace_extension(".json"));
  ASSERT_TRUE(meta_text) << "no .json beside the capture";
  const json::object meta = json::parse(*meta_text).as_object();
  const bool truncated = meta.at("body_truncated").as_bool();
  const fs::path last2k = fs::path(http_path).replace_extension(".last2k");
  EXPECT_EQ(truncated, fs::exists(last2k));
  if (truncated) {
    const auto tail = read_file(last2k);
    ASSERT_TRUE(tail);
    auto wire = rebuild_wire_body(meta, r.body, *tail);
    ASSERT_TRUE(wire);
    r.body = std::move(*wire);
  }
  if (const auto content_length = r.get("content-length")) {
    EXPECT_EQ(std::stoull(*content_length), r.body.size());
  }

  std::vector<std::string> checks;
  const auto seed = verify_signature(r, checks);

  std::string stream = r.body;
  if (lower(r.get("transfer-encoding").value_or("")).find("chunked") != std::string::npos) {
    auto dechunked = dechunk_http(r.body);
    ASSERT_TRUE(dechunked) << "bad HTTP chunked body";
    stream = std::move(*dechunked);
  }
  const std::string csha = r.get("x-amz-content-sha256").value_or("");
  const bool aws_chunked =
      starts_with(csha, "STREAMING-") ||
      lower(r.get("content-encoding").value_or("")).find("aws-chunked") != std::string::npos;
  DecodedBody body;
  if (aws_chunked) {
    auto decoded = decode_aws_chunked(r, stream, seed, GetParam(), checks);
    ASSERT_TRUE(decoded) << "aws-chunked body did not decode";
    body = std::move(*decoded);
  } else {
    body.payload = std::move(stream);
  }
  verify_payload(r, operation, body, checks);
  EXPECT_FALSE(checks.empty());
  // What was verified, for the XML report (--gtest_output=xml); the console stays quiet.
  std::string list;
  for (const auto& c : checks) list.append(list.empty() ? "" : ",").append(c);
  RecordProperty("checks", list);
}

std::vector<std::string> captures_or_sentinel() {
  auto captures = list_captures();
  if (captures.empty()) captures.emplace_back("<no captures>");
  return captures;
}

INSTANTIATE_TEST_SUITE_P(Captures, WireCapture, ::testing::ValuesIn(captures_or_sentinel()),
                         [](const ::testing::TestParamInfo<std::string>& param_info) {
                           return param_info.param == "<no captures>" ? std::string("missing")
                                                                      : test_name(param_info.param);
                         });

// The URLs the clients printed for the presigned scenario (09): the same check, from the URL.
class PresignedUrl : public ::testing::TestWithParam<std::string> {};

TEST_P(PresignedUrl, Verifies) {
  ASSERT_NE(GetParam(), "<none>") << "no presigned-url*.txt under " << captures_dir();
  const auto text = read_file(captures_dir() / GetParam());
  ASSERT_TRUE(text);
  const std::string_view url = trim(*text);
  const std::size_t scheme = url.find("://");
  ASSERT_NE(scheme, std::string_view::npos);
  const std::size_t path_at = url.find('/', scheme + 3);
  ASSERT_NE(path_at, std::string_view::npos);
  const std::string_view target = url.substr(path_at);
  Request r;
  r.method = "GET";
  r.headers = {{"Host", std::string(url.substr(scheme + 3, path_at - scheme - 3))}};
  const std::size_t q = target.find('?');
  r.raw_path = std::string(target.substr(0, q));
  r.raw_query = std::string(target.substr(q + 1));
  std::vector<std::string> checks;
  verify_signature(r, checks);
  ASSERT_EQ(checks.size(), 1U);
  const bool v4 = url.find("X-Amz-Signature=") != std::string_view::npos;
  EXPECT_EQ(checks[0], v4 ? "sigv4-presigned" : "sigv2-presigned");
  if (GetParam().find("s3v4") != std::string::npos) {
    EXPECT_TRUE(v4);
  }
}

std::vector<std::string> urls_or_sentinel() {
  auto urls = list_presigned_urls();
  if (urls.empty()) urls.emplace_back("<none>");
  return urls;
}

INSTANTIATE_TEST_SUITE_P(Urls, PresignedUrl, ::testing::ValuesIn(urls_or_sentinel()),
                         [](const ::testing::TestParamInfo<std::string>& param_info) {
                           return param_info.param == "<none>" ? std::string("missing")
                                                               : test_name(param_info.param);
                         });

}  // namespace
}  // namespace hots3::aws
