#include "hots3/aws/chunked.h"

#include "hots3/aws/checksum.h"
#include "hots3/common/assert.h"
#include "hots3/common/hex.h"
#include "hots3/common/text.h"

#include <algorithm>
#include <cstring>

namespace hots3::aws {
namespace {

// A chunk line is "hex;chunk-signature=<64 hex>" (~90 bytes); a trailer line a header. 4 KiB is
// generous for both and caps what a client can make us hold per line, 16 KiB all trailers.
constexpr std::size_t kMaxLineBytes = 4096;
constexpr std::size_t kMaxTrailerBytes = std::size_t{16} * 1024;
constexpr std::string_view kChunkSignature = "chunk-signature=";
constexpr std::string_view kTrailerSignature = "x-amz-trailer-signature";

// The chunk size: hex digits only, and it must fit in 64 bits (leading zeros allowed).
std::optional<std::uint64_t> parse_chunk_size(std::string_view hex) noexcept {
  if (hex.empty()) return std::nullopt;
  std::uint64_t size = 0;
  for (char c : hex) {
    const int digit = hex_value(c);
    if (digit < 0 || (size >> 60) != 0) return std::nullopt;
    size = size << 4 | static_cast<std::uint64_t>(digit);
  }
  return size;
}

}  // namespace

AwsChunkedDecoder::AwsChunkedDecoder(std::optional<Signing> signing, bool trailer,
                                     std::optional<std::uint64_t> decoded_length)
    : signing_(std::move(signing)), trailer_expected_(trailer), decoded_length_(decoded_length) {
  if (signing_) {
    previous_signature_ = signing_->seed_signature;
    chunk_sha256_.emplace(Digest::Algorithm::kSha256);
  }
  line_.reserve(128);
}

AwsChunkedDecoder::Error AwsChunkedDecoder::fail(Error e) {
  state_ = State::kFailed;
  error_ = e;
  return e;
}

bool AwsChunkedDecoder::finished() const noexcept { return state_ == State::kDone; }

AwsChunkedDecoder::Error AwsChunkedDecoder::feed(
    std::span<const std::byte> input, const std::function<void(std::span<const std::byte>)>& sink) {
  std::size_t at = 0;
  while (at < input.size()) {
    switch (state_) {
      case State::kChunkLine:
      case State::kTrailer:
        if (Error e = take_line(input, at); e != Error::kNone) return e;
        break;

      case State::kData: {
        // Straight through to the sink, no copy; hashed on the way in signed mode.
        const auto n =
            static_cast<std::size_t>(std::min<std::uint64_t>(chunk_left_, input.size() - at));
        const std::span<const std::byte> run = input.subspan(at, n);
        if (chunk_sha256_) chunk_sha256_->update(run);
        sink(run);
        at += n;
        chunk_left_ -= n;
        decoded_ += n;
        if (chunk_left_ == 0) {
          if (Error e = end_chunk_data(); e != Error::kNone) return e;
        }
        break;
      }

      case State::kDataEnd: {
        const auto c = static_cast<char>(input[at++]);
        if (!data_cr_seen_) {
          if (c != '\r') return fail(Error::kMalformed);
          data_cr_seen_ = true;
        } else {
          if (c != '\n') return fail(Error::kMalformed);
          data_cr_seen_ = false;
          state_ = State::kChunkLine;
        }
        break;
      }

      case State::kDone:
        return fail(Error::kMalformed);  // bytes after the end of the stream
      case State::kFailed:
        return error_;
    }
  }
  return state_ == State::kFailed ? error_ : Error::kNone;
}

// Collects one line up to CRLF. Lines end only at CRLF: a bare LF stays in the line, which
// makes a chunk line malformed but is trimmed from a trailer value (minio-go's "value\n\r\n").
AwsChunkedDecoder::Error AwsChunkedDecoder::take_line(std::span<const std::byte> input,
                                                      std::size_t& at) {
  const char* begin = reinterpret_cast<const char*>(input.data()) + at;
  const std::size_t available = input.size() - at;
  const auto* lf = static_cast<const char*>(std::memchr(begin, '\n', available));
  const std::size_t n = lf == nullptr ? available : static_cast<std::size_t>(lf - begin) + 1;
  // +2: the CRLF itself does not count against the line.
  if (line_.size() + n > kMaxLineBytes + 2) return fail(Error::kMalformed);
  if (state_ == State::kTrailer) {
    trailer_bytes_ += n;
    if (trailer_bytes_ > kMaxTrailerBytes) return fail(Error::kMalformed);
  }
  line_.append(begin, n);
  at += n;
  if (lf == nullptr) return Error::kNone;
  if (line_.size() < 2 || line_[line_.size() - 2] != '\r') {
    if (state_ == State::kChunkLine) return fail(Error::kMalformed);
    return Error::kNone;  // a bare LF inside a trailer line: keep collecting
  }
  line_.resize(line_.size() - 2);
  const Error e = state_ == State::kChunkLine ? end_chunk_line() : end_trailer_line();
  line_.clear();
  return e;
}

// "hex-size" (unsigned) or "hex-size;chunk-signature=SIG" (signed); nothing else is accepted.
AwsChunkedDecoder::Error AwsChunkedDecoder::end_chunk_line() {
  const std::string_view line = line_;
  const std::size_t semicolon = line.find(';');
  const auto size = parse_chunk_size(line.substr(0, semicolon));
  if (!size) return fail(Error::kMalformed);
  if (signing_) {
    if (semicolon == std::string_view::npos) return fail(Error::kMalformed);
    const std::string_view extension = line.substr(semicolon + 1);
    if (extension.substr(0, kChunkSignature.size()) != kChunkSignature)
      return fail(Error::kMalformed);
    const std::string_view signature = extension.substr(kChunkSignature.size());
    if (!is_signature_hex(signature)) return fail(Error::kMalformed);
    chunk_signature_.assign(signature);
  } else if (semicolon != std::string_view::npos) {
    return fail(Error::kMalformed);
  }

  if (*size == 0) {
    final_chunk_ = true;
    state_ = State::kTrailer;
    // The final chunk is signed too, over the empty string's hash.
    return end_chunk_data();
  }
  if (decoded_length_ && *size > *decoded_length_ - decoded_) return fail(Error::kTooLarge);
  chunk_left_ = *size;
  state_ = State::kData;
  return Error::kNone;
}

// Checks the signature of the chunk whose data just ended (the final 0-size chunk included)
// and chains it.
AwsChunkedDecoder::Error AwsChunkedDecoder::end_chunk_data() {
  if (!final_chunk_) state_ = State::kDataEnd;
  if (!signing_) return Error::kNone;
  std::array<std::uint8_t, 32> digest{};
  chunk_sha256_->finish(digest);  // also resets it for the next chunk
  const std::string data_hash = to_hex(digest);
  const std::string expected = sign(
      signing_->key,
      chunk_string_to_sign(signing_->amz_date, signing_->scope, previous_signature_, data_hash));
  if (!signatures_equal(expected, chunk_signature_)) return fail(Error::kBadChunkSignature);
  previous_signature_.swap(chunk_signature_);
  return Error::kNone;
}

// One line after the final chunk: a trailer header, the trailer signature, or the empty line
// that ends the stream.
AwsChunkedDecoder::Error AwsChunkedDecoder::end_trailer_line() {
  const std::string_view line = line_;
  if (line.empty()) {
    if (signing_ && trailer_expected_) {
      // The signature covers every trailer line before it, canonicalised as "name:value\n",
      // chained from the final chunk's signature.
      if (trailer_signature_.empty()) return fail(Error::kBadTrailerSignature);
      const std::string expected =
          sign(signing_->key,
               trailer_string_to_sign(signing_->amz_date, signing_->scope, previous_signature_,
                                      sha256_hex(trailer_canonical_)));
      if (!signatures_equal(expected, trailer_signature_)) return fail(Error::kBadTrailerSignature);
    }
    state_ = State::kDone;
    return Error::kNone;
  }
  if (!trailer_expected_) return fail(Error::kMalformed);
  if (!trailer_signature_.empty()) return fail(Error::kMalformed);  // nothing after the signature
  const std::size_t colon = line.find(':');
  if (colon == std::string_view::npos) return fail(Error::kMalformed);
  std::string name(trim(line.substr(0, colon)));
  if (name.empty()) return fail(Error::kMalformed);
  for (char& c : name) c = c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
  const std::string_view value = trim(line.substr(colon + 1));
  // Only minio-go's trailing LF is tolerated (trimmed above); a line break inside is not.
  if (value.find_first_of("\r\n") != std::string_view::npos ||
      name.find_first_of("\r\n") != std::string::npos) {
    return fail(Error::kMalformed);
  }

  if (name == kTrailerSignature) {
    if (!signing_ || !is_signature_hex(value)) return fail(Error::kMalformed);
    trailer_signature_.assign(value);
    return Error::kNone;
  }
  if (signing_) trailer_canonical_.append(name).append(":").append(value).append("\n");
  trailers_.emplace_back(std::move(name), std::string(value));
  return Error::kNone;
}

}  // namespace hots3::aws
