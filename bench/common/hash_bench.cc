// Hashing throughput per core: MD5 for ETags (OpenSSL, ours for one stream, ours over several
// streams at once) and CRC64NVME, the checksum computed for every PUT without one. Each figure
// is bytes hashed per second of one thread.
//
//   build/bench/hots3-hash-bench [--benchmark_filter=...]

#include "hots3/aws/checksum.h"
#include "hots3/common/digest.h"
#include "hots3/common/md5.h"

#include <benchmark/benchmark.h>
#include <random>
#include <vector>

namespace {

constexpr std::size_t kPiece = 1024 * 1024;  // one I/O buffer

std::vector<std::byte> random_bytes(std::size_t n) {
  std::mt19937_64 rng(1);
  std::vector<std::byte> out(n);
  for (auto& b : out) b = static_cast<std::byte>(rng());
  return out;
}

void openssl_md5(benchmark::State& state) {
  const auto data = random_bytes(kPiece);
  hots3::Digest digest(hots3::Digest::Algorithm::kMd5);
  for (auto _ : state) digest.update(data);
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(kPiece));
}
BENCHMARK(openssl_md5);

void md5_streams(benchmark::State& state) {
  const auto streams = static_cast<std::size_t>(state.range(0));
  std::vector<std::vector<std::byte>> data;
  for (std::size_t i = 0; i < streams; ++i) data.push_back(random_bytes(kPiece));
  std::vector<hots3::Md5> md5(streams);
  std::vector<hots3::Md5*> pointers;
  std::vector<std::span<const std::byte>> pieces;
  for (std::size_t i = 0; i < streams; ++i) {
    pointers.push_back(&md5[i]);
    pieces.emplace_back(data[i]);
  }
  for (auto _ : state) hots3::Md5::update_many(pointers, pieces);
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(kPiece * streams));
}
BENCHMARK(md5_streams)->Arg(1)->Arg(2)->Arg(4)->Arg(8)->Arg(16);

void crc64nvme(benchmark::State& state) {
  const auto data = random_bytes(kPiece);
  std::uint64_t crc = 0;
  for (auto _ : state) crc = hots3::aws::crc64nvme(data, crc);
  benchmark::DoNotOptimize(crc);
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(kPiece));
}
BENCHMARK(crc64nvme);

}  // namespace

BENCHMARK_MAIN();
