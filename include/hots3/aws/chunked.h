#pragma once

// The aws-chunked body encoding, as a push parser: the router feeds it the HTTP body (already
// de-chunked at the HTTP level) in whatever pieces arrive, and it hands out the payload.
//
//   unsigned:  hex-size\r\n DATA \r\n ... 0\r\n [trailer lines] \r\n
//   signed:    hex-size;chunk-signature=SIG\r\n DATA \r\n ... 0;chunk-signature=SIG\r\n
//              [trailer lines, then x-amz-trailer-signature:SIG\r\n] \r\n
//
// Signed chunks are verified as each chunk ends (the chain starts at the request's seed
// signature); a signed trailer is verified against the last chunk's signature. Trailer lines
// are split on CRLF and their values trimmed (minio-go writes "name:value\n\r\n"); the
// trailer signature covers "name:value\n" per trailer line (lower-case name, trimmed value).
// Chunk lines are exactly the forms above: no other chunk extensions, no signature in the
// unsigned modes, no x-amz-trailer-signature line either; trailer lines only in the *-TRAILER
// modes and none after the signature line.
// The framing never reaches storage: only payload bytes go to the sink.

#include "hots3/aws/sigv4.h"
#include "hots3/common/digest.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace hots3::aws {

class AwsChunkedDecoder {
 public:
  struct Signing {
    SigningKey key;
    std::string amz_date;
    SigningScope scope;
    std::string seed_signature;  // the request's own signature
  };

  enum class Error : std::uint8_t {
    kNone,
    kMalformed,            // framing broken (IncompleteBody / InvalidRequest)
    kBadChunkSignature,    // SignatureDoesNotMatch
    kBadTrailerSignature,  // SignatureDoesNotMatch
    kTooLarge,             // more payload than declared (x-amz-decoded-content-length)
  };

  // `signing` for the STREAMING-AWS4-HMAC-SHA256-PAYLOAD[-TRAILER] modes; `trailer` for the
  // *-TRAILER modes; `decoded_length` from x-amz-decoded-content-length when sent.
  AwsChunkedDecoder(std::optional<Signing> signing, bool trailer,
                    std::optional<std::uint64_t> decoded_length);

  // Parses `input`, calling `sink` with each run of payload bytes in order. After an error the
  // decoder stays failed. Chunk lines and trailers are bounded (a hostile client cannot make it
  // buffer without limit): a line over 4 KiB or trailers over 16 KiB are kMalformed.
  // Payload reaches the sink as it arrives, so a chunk's bytes have been handed out before its
  // signature is checked at the chunk's end: on kBadChunkSignature the caller discards what it
  // got. kTooLarge is reported at a chunk line that would take the payload past
  // `decoded_length`; a payload shorter than declared is for the caller to notice
  // (decoded_bytes() once finished()). Bytes after the closing empty line are kMalformed.
  Error feed(std::span<const std::byte> input,
             const std::function<void(std::span<const std::byte>)>& sink);

  // The final chunk, the trailer (if any) and the closing empty line have been parsed.
  [[nodiscard]] bool finished() const noexcept;
  // Trailer headers (lower-case names, trimmed values), the signature line excluded.
  [[nodiscard]] const std::vector<std::pair<std::string, std::string>>& trailers() const noexcept {
    return trailers_;
  }
  [[nodiscard]] std::uint64_t decoded_bytes() const noexcept { return decoded_; }

 private:
  enum class State : std::uint8_t { kChunkLine, kData, kDataEnd, kTrailer, kDone, kFailed };
  Error fail(Error e);
  Error take_line(std::span<const std::byte> input, std::size_t& at);
  Error end_chunk_line();
  Error end_chunk_data();
  Error end_trailer_line();

  std::optional<Signing> signing_;
  bool trailer_expected_;
  std::optional<std::uint64_t> decoded_length_;
  State state_ = State::kChunkLine;
  Error error_ = Error::kNone;     // once failed, every later feed() returns it
  std::string line_;               // the chunk or trailer line being collected
  std::uint64_t chunk_left_ = 0;   // payload bytes left in the current chunk
  bool data_cr_seen_ = false;      // kDataEnd: the '\r' of the CRLF after chunk data is in
  std::size_t trailer_bytes_ = 0;  // all trailer lines so far, bounded
  std::string chunk_signature_;    // the current chunk's claimed signature
  std::string previous_signature_;
  std::optional<Digest> chunk_sha256_;  // sha256 of the current chunk (signed mode)
  std::string trailer_canonical_;       // "name:value\n"... for the trailer signature
  std::string trailer_signature_;
  std::vector<std::pair<std::string, std::string>> trailers_;
  std::uint64_t decoded_ = 0;
  bool final_chunk_ = false;
};

}  // namespace hots3::aws
