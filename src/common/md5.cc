#include "hots3/common/md5.h"

#include "hots3/common/assert.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <utility>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace hots3 {
namespace {

// RFC 1321: the sine table, the per-step rotations and the message word of each step.
constexpr std::array<std::uint32_t, 64> kSine = {
    0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501,
    0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821,
    0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8,
    0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed, 0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a,
    0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70,
    0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665,
    0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
    0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb, 0xeb86d391};
constexpr std::array<int, 16> kRotation = {7, 12, 17, 22, 5, 9,  14, 20,
                                           4, 11, 16, 23, 6, 10, 15, 21};
constexpr std::array<std::uint32_t, 4> kInitial = {0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476};

constexpr std::size_t message_word(std::size_t step) {
  switch (step / 16) {
    case 0:
      return step;
    case 1:
      return (5 * step + 1) % 16;
    case 2:
      return (3 * step + 5) % 16;
    default:
      return (7 * step) % 16;
  }
}

// The 64 steps on 32-bit words or on vectors of lanes (GCC vector extensions: the same
// expressions). Plain unrolled loops rather than a template over the step number, so that
// everything inlines into the callers compiled for AVX2 / AVX-512.
template <class V>
[[gnu::always_inline]] inline void compress(V (&h)[4], const V (&m)[16]) {
  V a = h[0];
  V b = h[1];
  V c = h[2];
  V d = h[3];
  const auto advance = [](V& va, V& vb, V& vc, V& vd, const V& f, std::size_t i, const V& word) {
    const int s = kRotation[(i / 16) * 4 + i % 4];
    const V x = va + f + kSine[i] + word;
    va = vd;
    vd = vc;
    vc = vb;
    vb = vb + ((x << s) | (x >> (32 - s)));
  };
#pragma GCC unroll 16
  for (std::size_t i = 0; i < 16; ++i)
    advance(a, b, c, d, d ^ (b & (c ^ d)), i, m[message_word(i)]);
#pragma GCC unroll 16
  for (std::size_t i = 16; i < 32; ++i)
    advance(a, b, c, d, c ^ (d & (b ^ c)), i, m[message_word(i)]);
#pragma GCC unroll 16
  for (std::size_t i = 32; i < 48; ++i) advance(a, b, c, d, b ^ c ^ d, i, m[message_word(i)]);
#pragma GCC unroll 16
  for (std::size_t i = 48; i < 64; ++i) advance(a, b, c, d, c ^ (b | ~d), i, m[message_word(i)]);
  h[0] += a;
  h[1] += b;
  h[2] += c;
  h[3] += d;
}

std::uint32_t load_le32(const std::byte* p) {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap32(v);
  return v;
}

void compress_one(std::array<std::uint32_t, 4>& state, std::span<const std::byte> blocks) {
  std::uint32_t h[4] = {state[0], state[1], state[2], state[3]};
  for (std::size_t at = 0; at < blocks.size(); at += 64) {
    std::uint32_t m[16];
    for (std::size_t i = 0; i < 16; ++i) m[i] = load_le32(blocks.data() + at + 4 * i);
    compress(h, m);
  }
  std::copy_n(h, 4, state.begin());
}

// ---- eight lanes ------------------------------------------------------------------------------
constexpr std::size_t kLanes = 8;
using Lanes = std::uint32_t __attribute__((vector_size(4 * kLanes)));

// Message words i of the block at `offset` of each of the eight inputs, one lane each.
[[gnu::always_inline]] inline void load_words_portable(Lanes (&m)[16],
                                                       const std::byte* const* input,
                                                       std::size_t offset) {
  for (std::size_t i = 0; i < 16; ++i) {
    for (std::size_t lane = 0; lane < kLanes; ++lane)
      m[i][lane] = load_le32(input[lane] + offset + 4 * i);
  }
}

// `blocks` 64-byte blocks from each of the eight inputs into the eight states.
template <class LoadWords>
[[gnu::always_inline]] inline void compress_lanes(std::uint32_t* const* state,
                                                  const std::byte* const* input, std::size_t blocks,
                                                  LoadWords load_words) {
  Lanes h[4];
  for (std::size_t i = 0; i < 4; ++i) {
    for (std::size_t lane = 0; lane < kLanes; ++lane) h[i][lane] = state[lane][i];
  }
  for (std::size_t block = 0; block < blocks; ++block) {
    Lanes m[16];
    load_words(m, input, 64 * block);
    compress(h, m);
  }
  for (std::size_t i = 0; i < 4; ++i) {
    for (std::size_t lane = 0; lane < kLanes; ++lane) state[lane][i] = h[i][lane];
  }
}

#if defined(__x86_64__)
// The same with eight 32-byte loads and an 8x8 transpose per half block, instead of 128
// single-word inserts (which cost more than the rounds). Not inlined: an always-inline
// callee must not need more of the CPU than its caller's template, which has no target.
[[gnu::target("avx2"), gnu::always_inline]] inline void transpose_half(
    Lanes* m, const std::byte* const* input, std::size_t offset) {
  __m256i r[8];
  for (std::size_t lane = 0; lane < kLanes; ++lane) {
    r[lane] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(input[lane] + offset));
  }
  // r[l] holds words 0..7 of lane l; m[w] must hold word w of lanes 0..7.
  __m256i t[8];
  for (std::size_t i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  __m256i u[8];
  for (std::size_t i = 0; i < 2; ++i) {
    u[4 * i + 0] = _mm256_unpacklo_epi64(t[4 * i + 0], t[4 * i + 2]);
    u[4 * i + 1] = _mm256_unpackhi_epi64(t[4 * i + 0], t[4 * i + 2]);
    u[4 * i + 2] = _mm256_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    u[4 * i + 3] = _mm256_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
  for (std::size_t w = 0; w < 4; ++w) {
    m[w] = reinterpret_cast<Lanes>(_mm256_permute2x128_si256(u[w], u[w + 4], 0x20));
    m[w + 4] = reinterpret_cast<Lanes>(_mm256_permute2x128_si256(u[w], u[w + 4], 0x31));
  }
}

[[gnu::target("avx2")]] void load_words_avx2(Lanes (&m)[16], const std::byte* const* input,
                                             std::size_t offset) {
  transpose_half(m, input, offset);
  transpose_half(m + 8, input, offset + 32);
}

[[gnu::target("avx2")]] void compress_lanes_avx2(std::uint32_t* const* state,
                                                 const std::byte* const* input,
                                                 std::size_t blocks) {
  compress_lanes(state, input, blocks,
                 [](Lanes(&m)[16], const std::byte* const* in, std::size_t offset) {
                   load_words_avx2(m, in, offset);
                 });
}
// Rotations and the boolean functions become one instruction each (vprold, vpternlogd).
[[gnu::target("avx2,avx512f,avx512vl")]] void compress_lanes_avx512(std::uint32_t* const* state,
                                                                    const std::byte* const* input,
                                                                    std::size_t blocks) {
  compress_lanes(state, input, blocks,
                 [](Lanes(&m)[16], const std::byte* const* in, std::size_t offset) {
                   load_words_avx2(m, in, offset);
                 });
}
#endif
void compress_lanes_generic(std::uint32_t* const* state, const std::byte* const* input,
                            std::size_t blocks) {
  compress_lanes(state, input, blocks,
                 [](Lanes(&m)[16], const std::byte* const* in, std::size_t offset) {
                   load_words_portable(m, in, offset);
                 });
}

using CompressLanes = void (*)(std::uint32_t* const*, const std::byte* const*, std::size_t);

CompressLanes best_compress_lanes() {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512vl") != 0) return compress_lanes_avx512;
  if (__builtin_cpu_supports("avx2") != 0) return compress_lanes_avx2;
#endif
  return compress_lanes_generic;
}

const CompressLanes kCompressLanes = best_compress_lanes();

// Whole blocks of several streams: eight lanes at a time while two or more streams have
// blocks left, one stream alone. Idle lanes re-read the first stream's blocks into a scratch
// state.
struct Job {
  std::array<std::uint32_t, 4>* state;
  std::span<const std::byte> blocks;
};

void compress_jobs(std::span<Job> jobs) {
  while (true) {
    std::size_t live = 0;
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      if (!jobs[i].blocks.empty()) std::swap(jobs[live++], jobs[i]);
    }
    if (live == 0) return;
    if (live == 1) {
      compress_one(*jobs[0].state, jobs[0].blocks);
      return;
    }
    const std::size_t lanes = std::min(live, kLanes);
    std::size_t blocks = jobs[0].blocks.size() / 64;
    for (std::size_t i = 1; i < lanes; ++i) blocks = std::min(blocks, jobs[i].blocks.size() / 64);
    std::array<std::uint32_t, 4> scratch[kLanes];
    std::uint32_t* states[kLanes];
    const std::byte* inputs[kLanes];
    for (std::size_t lane = 0; lane < kLanes; ++lane) {
      const bool idle = lane >= lanes;
      states[lane] = idle ? scratch[lane].data() : jobs[lane].state->data();
      inputs[lane] = jobs[idle ? 0 : lane].blocks.data();
    }
    kCompressLanes(states, inputs, blocks);
    for (std::size_t lane = 0; lane < lanes; ++lane)
      jobs[lane].blocks = jobs[lane].blocks.subspan(64 * blocks);
  }
}

}  // namespace

void Md5::reset() {
  state_ = kInitial;
  length_ = 0;
  pending_bytes_ = 0;
}

std::span<const std::byte> Md5::take_blocks(std::span<const std::byte> data) {
  length_ += data.size();
  if (pending_bytes_ > 0) {
    const std::size_t n = std::min(64 - pending_bytes_, data.size());
    std::memcpy(pending_.data() + pending_bytes_, data.data(), n);
    pending_bytes_ += n;
    data = data.subspan(n);
    if (pending_bytes_ < 64) return {};
    compress_one(state_, pending_);
    pending_bytes_ = 0;
  }
  const std::size_t whole = data.size() / 64 * 64;
  pending_bytes_ = data.size() - whole;
  std::memcpy(pending_.data(), data.data() + whole, pending_bytes_);
  return data.first(whole);
}

void Md5::update(std::span<const std::byte> data) { compress_one(state_, take_blocks(data)); }

void Md5::update_many(std::span<Md5* const> streams,
                      std::span<const std::span<const std::byte>> data) {
  H3_ASSERT(streams.size() == data.size(), "one input per stream");
  constexpr std::size_t kBatch = 64;
  Job jobs[kBatch];
  for (std::size_t begin = 0; begin < streams.size(); begin += kBatch) {
    const std::size_t n = std::min(kBatch, streams.size() - begin);
    for (std::size_t i = 0; i < n; ++i) {
      Md5& stream = *streams[begin + i];
      jobs[i] = {&stream.state_, stream.take_blocks(data[begin + i])};
    }
    compress_jobs(std::span(jobs, n));
  }
}

std::array<std::uint8_t, 16> Md5::finish() {
  const std::uint64_t bits = length_ * 8;
  std::array<std::byte, 128> tail{};
  std::memcpy(tail.data(), pending_.data(), pending_bytes_);
  tail[pending_bytes_] = std::byte{0x80};
  const std::size_t padded = pending_bytes_ < 56 ? 64 : 128;
  for (std::size_t i = 0; i < 8; ++i)
    tail[padded - 8 + i] = static_cast<std::byte>(bits >> (8 * i));
  compress_one(state_, std::span(tail).first(padded));
  std::array<std::uint8_t, 16> digest;
  for (std::size_t i = 0; i < 16; ++i)
    digest[i] = static_cast<std::uint8_t>(state_[i / 4] >> (8 * (i % 4)));
  reset();
  return digest;
}

}  // namespace hots3
