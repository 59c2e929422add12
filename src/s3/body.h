#pragma once

// Private to src/s3: the request body as payload. Reads the HTTP body in bounded pieces,
// removes aws-chunked framing when the request streams, and checks what the client vouched for:
// the x-amz-content-sha256 digest, chunk and trailer signatures, the declared length, the
// x-amz-checksum-* value (header or trailer), Content-MD5. Only payload bytes leave it.

#include "service.h"

#include "hots3/aws/checksum.h"
#include "hots3/common/digest.h"
#include "hots3/common/units.h"

#include <boost/asio/awaitable.hpp>

#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

namespace hots3::s3 {

// What the request says about its checksums.
struct ChecksumRequest {
  std::optional<aws::ChecksumAlgorithm> algorithm;  // the one to verify (header or trailer)
  std::optional<std::string> header_value;          // from x-amz-checksum-<alg>
  bool in_trailer = false;                          // x-amz-trailer names it
  std::optional<std::string> content_md5;           // raw 16 bytes
};

// Reads the checksum headers. Errors: InvalidRequest (several algorithms, unknown algorithm,
// malformed value), InvalidDigest (malformed Content-MD5).
std::variant<ChecksumRequest, Error> read_checksum_request(const Request& r);

// The CRC64NVME a write gets from the server, as S3 gives one to every object and part.
enum class DefaultCrc64 : std::uint8_t {
  kNo,
  kWhenNoneAsked,  // PutObject: the requested checksum, or else CRC64NVME
  kAlways,         // parts of an upload without an algorithm: CRC64NVME besides any requested
                   // one (their FULL_OBJECT checksum is combined from the parts' CRC64NVMEs)
};

class Body {
 public:
  // `checksum`: what to verify and compute while reading; `crc64`: the CRC64NVME to compute as
  // well. `md5`: compute MD5 here too (when the store does not).
  // An aws-chunked body without a valid x-amz-decoded-content-length fails at once (failed()):
  // MissingContentLength, S3's answer to a missing and to a malformed one alike.
  Body(Request& request, ChecksumRequest checksum, DefaultCrc64 crc64, bool md5);
  ~Body();
  Body(const Body&) = delete;
  Body& operator=(const Body&) = delete;
  Body(Body&&) = delete;
  Body& operator=(Body&&) = delete;

  // The payload length, when known before reading (Content-Length, or
  // x-amz-decoded-content-length when streaming); nullopt for a chunked body without one.
  [[nodiscard]] std::optional<std::uint64_t> declared_length() const noexcept { return declared_; }

  // The next piece of payload; an empty span at the end. nullopt on an error (error() says
  // which). Pieces stay valid until the next call.
  asio::awaitable<std::optional<std::span<const std::byte>>> next();

  // After the end: the digests and checksums agree with what the client sent; the trailer
  // arrived if one was announced. `md5` is the payload's MD5 when the caller computed it.
  std::optional<Error> verify(const std::optional<std::array<std::uint8_t, 16>>& md5);

  [[nodiscard]] const Error& error() const noexcept { return *error_; }
  // The request is refused before any of its body is read (see the constructor).
  [[nodiscard]] bool failed() const noexcept { return error_.has_value(); }
  [[nodiscard]] std::uint64_t payload_bytes() const noexcept { return payload_bytes_; }

  // The checksum to store and return (algorithm, base64 value); set after verify().
  [[nodiscard]] const std::optional<std::pair<aws::ChecksumAlgorithm, std::string>>& checksum()
      const noexcept {
    return checksum_;
  }
  // The CRC64NVME (base64) when DefaultCrc64::kAlways added one; set after verify().
  [[nodiscard]] const std::optional<std::string>& crc64nvme() const noexcept { return crc64nvme_; }

  // Reads the whole payload into memory (small XML bodies) and verifies it as verify() does:
  // nothing a client vouched for goes unchecked. Errors: EntityTooLarge over `max`, and those of
  // verify().
  asio::awaitable<std::optional<std::string>> read_all(std::size_t max);

 private:
  std::optional<std::span<const std::byte>> fail(Error e);

  Request& request_;
  ChecksumRequest want_;
  std::optional<std::uint64_t> declared_;
  std::optional<aws::AwsChunkedDecoder> decoder_;
  std::optional<Digest> sha256_;  // x-amz-content-sha256 verification
  std::optional<Digest> md5_;
  std::optional<aws::Checksummer> checksummer_;
  std::optional<aws::Checksummer> crc64_;  // DefaultCrc64::kAlways, when checksummer_ is another
  std::vector<std::byte> raw_;             // one read of the HTTP body
  std::vector<std::span<const std::byte>> pending_;  // decoded pieces of the last read
  std::size_t pending_next_ = 0;
  std::uint64_t payload_bytes_ = 0;
  bool http_done_ = false;
  std::optional<Error> error_;
  std::optional<std::pair<aws::ChecksumAlgorithm, std::string>> checksum_;
  std::optional<std::string> crc64nvme_;
};

// Whether a Body must compute the payload's MD5 itself for Content-MD5: the store's writers
// compute one only when it computes MD5s (StoreOptions::compute_md5).
bool md5_in_body(const storage::ObjectStore& store, const ChecksumRequest& checksums);

// A small optional request body (an XML configuration, up to 64 KiB unless `max_bytes` says
// otherwise), verified against what the request vouches for; "" when there is none.
asio::awaitable<std::variant<std::string, Error>> read_small_body(Request& r,
                                                                  std::size_t max_bytes = 64 *
                                                                                          kKiB);

// Streams the request body into a new writer (its size reserved first, so a full device is
// refused before "100 Continue"), finishes it and verifies what the client vouched for
// (Body::verify). With `upstream`, each piece goes there too, as it is written here. Sends the
// error and returns nullptr on failure (ServiceUnavailable when the upstream fails, unless
// `for_part`: a part goes on without it).
asio::awaitable<std::unique_ptr<storage::ObjectWriter>> receive(
    Service& s, Request& r, Body& body, bool for_part, std::uint64_t max_bytes,
    tier::UpstreamPut* upstream = nullptr);

// The error a write-through PUT the upstream did not take answers with.
Error upstream_refusal(const tier::UpstreamAnswer& answer);

}  // namespace hots3::s3
