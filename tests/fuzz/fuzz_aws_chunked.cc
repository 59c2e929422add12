// The aws-chunked decoder in every mode (signed or not, with or without trailers, with or
// without a declared length), fed in pieces of the sizes the input chooses. The payload it hands
// out never exceeds the declared length.

#include "hots3/aws/chunked.h"

#include <cstddef>
#include <cstdint>
#include <fuzzer/FuzzedDataProvider.h>
#include <optional>
#include <span>
#include <vector>

namespace aws = hots3::aws;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  const bool is_signed = in.ConsumeBool();
  const bool trailer = in.ConsumeBool();
  std::optional<std::uint64_t> declared;
  if (in.ConsumeBool()) declared = in.ConsumeIntegralInRange<std::uint64_t>(0, 1 << 20);
  std::optional<aws::AwsChunkedDecoder::Signing> signing;
  if (is_signed) {
    const aws::SigningScope scope{"20261127", "us-east-1", "s3"};
    signing = aws::AwsChunkedDecoder::Signing{aws::signing_key("secret", scope), "20261127T000000Z",
                                              scope, std::string(64, '0')};
  }
  aws::AwsChunkedDecoder decoder(signing, trailer, declared);
  std::uint64_t delivered = 0;
  auto sink = [&delivered](std::span<const std::byte> piece) { delivered += piece.size(); };
  while (in.remaining_bytes() > 0) {
    const std::size_t take = in.ConsumeIntegralInRange<std::size_t>(1, 4096);
    const std::vector<std::uint8_t> piece = in.ConsumeBytes<std::uint8_t>(take);
    const auto error = decoder.feed(std::as_bytes(std::span(piece)), sink);
    if (error != aws::AwsChunkedDecoder::Error::kNone) break;
  }
  if (declared && delivered > *declared) __builtin_trap();
  if (decoder.decoded_bytes() != delivered) __builtin_trap();
  (void)decoder.finished();
  (void)decoder.trailers();
  return 0;
}
