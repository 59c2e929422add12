#include "body.h"

#include "hots3/common/hex.h"
#include "hots3/common/logging.h"
#include "hots3/common/text.h"
#include "hots3/common/units.h"
#include "hots3/storage/object_store.h"

#include <charconv>
#include <cstring>
#include <memory>

namespace hots3::s3 {
namespace {

constexpr std::size_t kReadBytes = 256 * kKiB;

constexpr aws::ChecksumAlgorithm kAlgorithms[] = {
    aws::ChecksumAlgorithm::kCrc32, aws::ChecksumAlgorithm::kCrc32c,
    aws::ChecksumAlgorithm::kCrc64Nvme, aws::ChecksumAlgorithm::kSha1,
    aws::ChecksumAlgorithm::kSha256};

std::size_t raw_length(aws::ChecksumAlgorithm a) {
  switch (a) {
    case aws::ChecksumAlgorithm::kCrc32:
    case aws::ChecksumAlgorithm::kCrc32c:
      return 4;
    case aws::ChecksumAlgorithm::kCrc64Nvme:
      return 8;
    case aws::ChecksumAlgorithm::kSha1:
      return 20;
    case aws::ChecksumAlgorithm::kSha256:
      return 32;
  }
  return 0;
}

// Read buffers are reused per worker thread: a fresh 256 KiB allocation per request would be
// mmap'ed and first-touched every time, which costs more than the copy it serves.
thread_local std::vector<std::vector<std::byte>> spare_buffers;

std::vector<std::byte> take_buffer() {
  if (!spare_buffers.empty()) {
    auto b = std::move(spare_buffers.back());
    spare_buffers.pop_back();
    return b;
  }
  return std::vector<std::byte>(kReadBytes);
}

}  // namespace

std::variant<ChecksumRequest, Error> read_checksum_request(const Request& r) {
  ChecksumRequest c;
  for (const auto algorithm : kAlgorithms) {
    if (auto value = r.header(aws::checksum_header(algorithm))) {
      if (c.algorithm) {
        return Error(
            Code::kInvalidRequest,
            "Expecting a single x-amz-checksum- header. Multiple checksum Types are not allowed.");
      }
      auto raw = aws::base64_decode(*value);
      if (!raw || raw->size() != raw_length(algorithm)) {
        return Error(
            Code::kInvalidRequest,
            "Value for " + std::string(aws::checksum_header(algorithm)) + " header is invalid.");
      }
      c.algorithm = algorithm;
      c.header_value = std::string(*value);
    }
  }
  if (auto trailer = r.header("x-amz-trailer")) {
    const std::string name = lower(*trailer);
    std::optional<aws::ChecksumAlgorithm> named;
    for (const auto algorithm : kAlgorithms) {
      if (name == aws::checksum_header(algorithm)) named = algorithm;
    }
    if (!named)
      return Error(Code::kInvalidRequest,
                   "The value specified in the x-amz-trailer header is not supported");
    if (c.algorithm) {
      return Error(
          Code::kInvalidRequest,
          "Expecting a single x-amz-checksum- header. Multiple checksum Types are not allowed.");
    }
    c.algorithm = named;
    c.in_trailer = true;
  }
  if (!c.algorithm) {
    if (auto sdk = r.header("x-amz-sdk-checksum-algorithm")) {
      c.algorithm = aws::parse_checksum_algorithm(*sdk);
      if (!c.algorithm)
        return Error(Code::kInvalidRequest, "Checksum algorithm provided is unsupported.");
    }
  }
  if (auto md5 = r.header("content-md5")) {
    auto raw = aws::base64_decode(*md5);
    if (!raw || raw->size() != 16) return Error(Code::kInvalidDigest);
    c.content_md5 = std::move(*raw);
  }
  return c;
}

Body::Body(Request& request, ChecksumRequest checksum, DefaultCrc64 crc64, bool md5)
    : request_(request), want_(std::move(checksum)), raw_(take_buffer()) {
  const Payload payload = request.auth.payload;
  const bool streaming = payload == Payload::kStreamingSigned ||
                         payload == Payload::kStreamingSignedTrailer ||
                         payload == Payload::kStreamingUnsignedTrailer;
  if (streaming) {
    if (auto decoded = request.header("x-amz-decoded-content-length")) {
      std::uint64_t n = 0;
      auto [p, ec] = std::from_chars(decoded->data(), decoded->data() + decoded->size(), n);
      if (decoded->empty() || ec != std::errc{} || p != decoded->data() + decoded->size()) {
        // A length the decoder cannot hold the stream to is no length: refused as S3 refuses it
        // (MissingContentLength, as for no length at all), never ignored.
        error_ = Error(Code::kMissingContentLength);
      } else {
        declared_ = n;
      }
    } else {
      // S3 needs the payload's length up front: a stream it could not hold to a length is
      // refused, as S3 answers SDKs that stream a body of unknown length.
      error_ = Error(Code::kMissingContentLength);
    }
    const bool trailer = payload != Payload::kStreamingSigned;
    decoder_.emplace(request.auth.signing, trailer, declared_);
  } else {
    declared_ = request.head.content_length;
    if (!declared_ && !request.head.chunked) declared_ = 0;  // no body at all
  }
  if (payload == Payload::kSha256) sha256_.emplace(Digest::Algorithm::kSha256);
  if (want_.algorithm) {
    checksummer_.emplace(*want_.algorithm);
    if (crc64 == DefaultCrc64::kAlways && *want_.algorithm != aws::ChecksumAlgorithm::kCrc64Nvme) {
      crc64_.emplace(aws::ChecksumAlgorithm::kCrc64Nvme);
    }
  } else if (crc64 != DefaultCrc64::kNo) {
    checksummer_.emplace(aws::ChecksumAlgorithm::kCrc64Nvme);
  }
  if (md5) md5_.emplace(Digest::Algorithm::kMd5);
}

std::optional<std::span<const std::byte>> Body::fail(Error e) {
  if (!error_) error_ = std::move(e);
  return std::nullopt;
}

asio::awaitable<std::optional<std::span<const std::byte>>> Body::next() {
  if (error_) co_return std::nullopt;
  for (;;) {
    if (pending_next_ < pending_.size()) {
      const auto piece = pending_[pending_next_++];
      if (piece.empty()) continue;
      payload_bytes_ += piece.size();
      if (declared_ && payload_bytes_ > *declared_)
        co_return fail(Error(Code::kIncompleteBody, "The request body is longer than declared."));
      if (sha256_) sha256_->update(piece);
      if (md5_) md5_->update(piece);
      if (checksummer_) checksummer_->update(piece);
      if (crc64_) crc64_->update(piece);
      co_return piece;
    }
    if (http_done_) co_return std::span<const std::byte>{};
    pending_.clear();
    pending_next_ = 0;
    auto n = co_await request_.exchange.read_body(raw_);
    if (!n) {
      if (n.error() == errc::kTimedOut) co_return fail(Code::kRequestTimeout);
      co_return fail(Error(Code::kIncompleteBody, "The request body terminated unexpectedly"));
    }
    if (*n == 0) {
      http_done_ = true;
      if (decoder_ && !decoder_->finished()) {
        co_return fail(
            Error(Code::kIncompleteBody, "The aws-chunked request body terminated unexpectedly"));
      }
      if (declared_ && payload_bytes_ != *declared_) co_return fail(Code::kIncompleteBody);
      continue;
    }
    const std::span<const std::byte> input(raw_.data(), *n);
    if (!decoder_) {
      pending_.push_back(input);
      continue;
    }
    const auto result = decoder_->feed(
        input, [this](std::span<const std::byte> piece) { pending_.push_back(piece); });
    switch (result) {
      case aws::AwsChunkedDecoder::Error::kNone:
        break;
      case aws::AwsChunkedDecoder::Error::kMalformed:
        co_return fail(Error(Code::kIncompleteBody, "The aws-chunked request body is malformed."));
      case aws::AwsChunkedDecoder::Error::kBadChunkSignature:
        co_return fail(
            Error(Code::kSignatureDoesNotMatch,
                  "The chunk signature we calculated does not match the one you provided."));
      case aws::AwsChunkedDecoder::Error::kBadTrailerSignature:
        co_return fail(
            Error(Code::kSignatureDoesNotMatch,
                  "The trailer signature we calculated does not match the one you provided."));
      case aws::AwsChunkedDecoder::Error::kTooLarge:
        co_return fail(Error(Code::kIncompleteBody,
                             "The request body is longer than x-amz-decoded-content-length."));
    }
  }
}

Body::~Body() {
  // Back to this thread's spares (a connection stays on its worker, so this is the thread that
  // took it); a few are kept, enough for the requests one worker streams at once.
  if (spare_buffers.size() < 64) spare_buffers.push_back(std::move(raw_));
}

std::optional<Error> Body::verify(const std::optional<std::array<std::uint8_t, 16>>& md5) {
  if (error_) return error_;
  if (sha256_) {
    std::array<std::uint8_t, 32> digest{};
    sha256_->finish(digest);
    const std::string computed = to_hex(digest);
    if (computed != request_.auth.payload_sha256) {
      return Error(Code::kXAmzContentSHA256Mismatch)
          .with("ClientComputedContentSHA256", request_.auth.payload_sha256)
          .with("S3ComputedContentSHA256", computed);
    }
  }
  std::optional<std::array<std::uint8_t, 16>> payload_md5 = md5;
  if (md5_) {
    std::array<std::uint8_t, 32> digest{};
    md5_->finish(digest);
    payload_md5.emplace();
    std::copy_n(digest.begin(), 16, payload_md5->begin());
  }
  if (want_.content_md5) {
    if (!payload_md5 || std::memcmp(payload_md5->data(), want_.content_md5->data(), 16) != 0) {
      return Error(Code::kBadDigest);
    }
  }
  if (checksummer_) {
    const std::string computed = checksummer_->base64();
    std::optional<std::string> expected = want_.header_value;
    if (want_.in_trailer) {
      const auto name = aws::checksum_header(*want_.algorithm);
      for (const auto& [trailer_name, value] :
           decoder_ ? decoder_->trailers() : std::vector<std::pair<std::string, std::string>>{}) {
        if (trailer_name == name) expected = value;
      }
      if (!expected)
        return Error(Code::kInvalidRequest,
                     "The trailing " + std::string(name) + " was not received.");
    }
    if (expected && *expected != computed) {
      return Error(Code::kBadDigest,
                   "The " + std::string(aws::checksum_name(checksummer_->algorithm())) +
                       " you specified did not match the calculated checksum.");
    }
    checksum_ = std::pair{checksummer_->algorithm(), computed};
    if (checksummer_->algorithm() == aws::ChecksumAlgorithm::kCrc64Nvme) crc64nvme_ = computed;
  }
  if (crc64_) crc64nvme_ = crc64_->base64();
  return std::nullopt;
}

asio::awaitable<std::optional<std::string>> Body::read_all(std::size_t max) {
  std::string out;
  for (;;) {
    auto piece = co_await next();
    if (!piece) co_return std::nullopt;
    if (piece->empty()) break;
    if (out.size() + piece->size() > max) {
      fail(Error(Code::kEntityTooLarge, "The request body is too large for this operation."));
      co_return std::nullopt;
    }
    out.append(reinterpret_cast<const char*>(piece->data()), piece->size());
  }
  if (auto e = verify(std::nullopt)) {
    fail(std::move(*e));
    co_return std::nullopt;
  }
  co_return out;
}

asio::awaitable<std::variant<std::string, Error>> read_small_body(Request& r,
                                                                  std::size_t max_bytes) {
  if (!r.head.has_body()) co_return std::string();
  auto checksums = read_checksum_request(r);
  if (auto* e = std::get_if<Error>(&checksums)) co_return std::move(*e);
  Body body(r, std::get<ChecksumRequest>(std::move(checksums)), DefaultCrc64::kNo, false);
  auto text = co_await body.read_all(max_bytes);
  if (!text) co_return body.error();
  co_return std::move(*text);
}

// Streams a body into a new writer. Returns the writer (finished, the body verified) or sends
// the error.
asio::awaitable<std::unique_ptr<storage::ObjectWriter>> receive(Service& s, Request& r, Body& body,
                                                                bool for_part,
                                                                std::uint64_t max_bytes,
                                                                tier::UpstreamPut* upstream) {
  if (body.failed()) {
    co_await s.send_error(r, body.error());
    co_return nullptr;
  }
  const auto declared = body.declared_length();
  if (!declared && r.head.method == http::Method::kPut && !r.head.chunked) {
    co_await s.send_error(r, Code::kMissingContentLength);
    co_return nullptr;
  }
  if (declared && *declared > max_bytes) {
    co_await s.send_error(r, Error(Code::kEntityTooLarge)
                                 .with("ProposedSize", std::to_string(*declared))
                                 .with("MaxSizeAllowed", std::to_string(max_bytes)));
    co_return nullptr;
  }
  // Reserved before the body is read: a full device answers before "100 Continue".
  auto writer = co_await s.store().create_writer(declared, for_part);
  if (!writer) {
    co_await s.send_error(r, from_errc(writer.error()));
    co_return nullptr;
  }
  for (;;) {
    auto piece = co_await body.next();
    if (!piece) {
      co_await s.send_error(r, body.error());
      co_return nullptr;
    }
    if (piece->empty()) break;
    if (body.payload_bytes() > max_bytes) {
      co_await s.send_error(r, Code::kEntityTooLarge);
      co_return nullptr;
    }
    if (auto w = co_await (*writer)->write(*piece); !w) {
      co_await s.send_error(r, from_errc(w.error()));
      co_return nullptr;
    }
    if (upstream == nullptr) continue;
    // (Awaited apart: GCC 12 mishandles a co_await inside a condition.)
    const bool passed = co_await upstream->write(*piece);
    if (!passed && for_part) {
      upstream = nullptr;  // a part not teed is sent by the Complete's job
    } else if (!passed) {
      auto finishing = upstream->finish(std::string(), 0);
      const tier::UpstreamAnswer answer = co_await std::move(finishing);
      Error refusal = upstream_refusal(answer);
      co_await s.send_error(r, std::move(refusal));
      co_return nullptr;
    }
  }
  if (auto f = co_await (*writer)->finish(); !f) {
    co_await s.send_error(r, from_errc(f.error()));
    co_return nullptr;
  }
  // What the client vouched for, with the writer's MD5 where the store computed one.
  std::optional<std::array<std::uint8_t, 16>> md5;
  if (s.store().digest_is_md5()) md5 = (*writer)->digest();
  if (auto e = body.verify(md5)) {
    co_await s.send_error(r, std::move(*e));
    co_return nullptr;
  }
  co_return std::move(*writer);
}

Error upstream_refusal(const tier::UpstreamAnswer& answer) {
  if (answer.kind == tier::UpstreamAnswer::Kind::kPreconditionFailed) {
    return Error(Code::kPreconditionFailed,
                 "At least one of the pre-conditions you specified did not hold");
  }
  if (answer.kind == tier::UpstreamAnswer::Kind::kConflict) {
    return Error(Code::kConditionalRequestConflict,
                 "Another writer changed the object in the upstream bucket; nothing was stored. "
                 "A new request replaces their version.");
  }
  return Error(Code::kServiceUnavailable, "The upstream did not take the object (" + answer.cause +
                                              "); nothing was stored. Please retry.");
}

bool md5_in_body(const storage::ObjectStore& store, const ChecksumRequest& checksums) {
  return checksums.content_md5.has_value() && !store.digest_is_md5();
}

}  // namespace hots3::s3
