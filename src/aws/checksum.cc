#include "hots3/aws/checksum.h"

#include "hots3/common/assert.h"

#include <openssl/evp.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <isa-l/crc.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace hots3::aws {
namespace {

// ---- CRC64NVME -------------------------------------------------------------------------------
// Reflected CRC-64 with polynomial 0xad93d23594c93659 (reversed: 0x9a6c9329ac4bc9b5), init and
// xorout all ones (the "CRC-64/NVME" of the catalogue; check value ae8b14860a799888). isa-l 2.30
// only has the ECMA, ISO and Jones polynomials, so this is a slice-by-16 table walk: sixteen
// independent table lookups per 16 input bytes (32 KiB of tables, built by the compiler).
constexpr std::uint64_t kCrc64NvmeReflectedPoly = 0x9a6c9329ac4bc9b5ULL;

using Crc64Tables = std::array<std::array<std::uint64_t, 256>, 16>;

constexpr Crc64Tables make_crc64_tables() {
  Crc64Tables t{};
  for (std::uint64_t i = 0; i < 256; ++i) {
    std::uint64_t c = i;
    for (int bit = 0; bit < 8; ++bit)
      c = (c & 1) != 0 ? (c >> 1) ^ kCrc64NvmeReflectedPoly : c >> 1;
    t[0][i] = c;
  }
  // t[k][i]: the CRC contribution of byte i followed by k zero bytes.
  for (std::size_t k = 1; k < t.size(); ++k) {
    for (std::size_t i = 0; i < 256; ++i) t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xff];
  }
  return t;
}

constexpr Crc64Tables kCrc64Tables = make_crc64_tables();
static_assert(kCrc64Tables[0][0x80] == kCrc64NvmeReflectedPoly);

// Byte at a time, for the compile-time check below.
constexpr std::uint64_t crc64nvme_bytewise(std::string_view text) {
  std::uint64_t crc = ~std::uint64_t{0};
  for (char c : text)
    crc = kCrc64Tables[0][(crc ^ static_cast<unsigned char>(c)) & 0xff] ^ (crc >> 8);
  return ~crc;
}
static_assert(crc64nvme_bytewise("123456789") == 0xae8b14860a799888ULL, "CRC-64/NVME check value");

std::uint64_t load_le64(const unsigned char* p) noexcept {
  std::uint64_t word = 0;
  std::memcpy(&word, p, 8);
  if constexpr (std::endian::native == std::endian::big) word = __builtin_bswap64(word);
  return word;
}

// The raw (not inverted) register update, sixteen bytes per step from the tables.
std::uint64_t crc64nvme_tables(std::uint64_t crc, const unsigned char* p, std::size_t n) noexcept {
  // Table `table`, indexed by byte `byte` of `word`.
  const auto at = [](std::size_t table, std::uint64_t word, int byte) {
    return kCrc64Tables[table][(word >> (8 * byte)) & 0xff];
  };
  while (n >= 16) {
    const std::uint64_t lo = load_le64(p) ^ crc;
    const std::uint64_t hi = load_le64(p + 8);
    crc = at(15, lo, 0) ^ at(14, lo, 1) ^ at(13, lo, 2) ^ at(12, lo, 3) ^ at(11, lo, 4) ^
          at(10, lo, 5) ^ at(9, lo, 6) ^ at(8, lo, 7) ^ at(7, hi, 0) ^ at(6, hi, 1) ^ at(5, hi, 2) ^
          at(4, hi, 3) ^ at(3, hi, 4) ^ at(2, hi, 5) ^ at(1, hi, 6) ^ at(0, hi, 7);
    p += 16;
    n -= 16;
  }
  while (n-- > 0) crc = kCrc64Tables[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
  return crc;
}

#if defined(__x86_64__)
// Folding with carry-less multiplication (PCLMULQDQ), after Gopal et al., "Fast CRC
// Computation for Generic Polynomials Using PCLMULQDQ Instruction" (Intel, 2009): the table
// walk runs at about 1.5 GB/s, which made CRC64NVME (computed for every PUT that brings no
// checksum of its own) costlier than MD5; folding runs at memory speed.
//
// In the reflected representation bit i of a 64-bit word is the coefficient of x^(63-i), so
// the word 1 is x^63. The fold constants are x^(63+64m) mod P; the product of two reflected
// 64-bit words is one bit short of the 128-bit reflected product, which the exponents absorb.
struct ClmulConstants {
  std::uint64_t k[9];  // k[m] = x^(63+64m) mod P, reflected
  std::uint64_t poly;  // P with its x^64 term, reflected and shifted: (poly << 1) | 1
  std::uint64_t mu;    // floor(x^128 / P), reflected and shifted likewise
};

constexpr ClmulConstants clmul_constants(std::uint64_t reflected_poly) {
  ClmulConstants c{};
  std::uint64_t a = 1;
  c.k[0] = a;
  for (std::size_t m = 1; m < 9; ++m) {
    for (int i = 0; i < 64; ++i) a = (a >> 1) ^ ((a & 1) != 0 ? reflected_poly : 0);  // times x^64
    c.k[m] = a;
  }
  c.poly = (reflected_poly << 1) | 1;
  std::uint64_t rem = reflected_poly;
  std::uint64_t quotient = 0;
  for (int i = 0; i < 64; ++i) {
    quotient = (quotient >> 1) | (rem << 63);
    rem = (rem >> 1) ^ ((rem & 1) != 0 ? reflected_poly : 0);
  }
  c.mu = (quotient << 1) | 1;
  return c;
}

// The derivation reproduces the published constants of CRC-64/XZ (ECMA-182, reflected).
constexpr ClmulConstants kEcmaCheck = clmul_constants(0xc96c5795d7870f42ULL);
static_assert(kEcmaCheck.k[1] == 0xdabe95afc7875f40ULL &&
              kEcmaCheck.k[2] == 0xe05dd497ca393ae4ULL &&
              kEcmaCheck.poly == 0x92d8af2baf0e1e85ULL && kEcmaCheck.mu == 0x9c3e466c172963d5ULL);

constexpr ClmulConstants kNvme = clmul_constants(kCrc64NvmeReflectedPoly);

// x * (lo, hi) folded forward over the distance the two constants stand for.
[[gnu::target("pclmul,sse2")]] inline __m128i fold(__m128i x, __m128i k) {
  return _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11));
}

// Whole 16-byte blocks of [p, p + n) (n >= 64); returns the bytes consumed.
[[gnu::target("pclmul,sse2")]] std::size_t crc64nvme_clmul(std::uint64_t& crc,
                                                           const unsigned char* p,
                                                           std::size_t n) noexcept {
  const auto load = [](const unsigned char* at) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(at));
  };
  const auto pair = [](std::uint64_t lo, std::uint64_t hi) {
    return _mm_set_epi64x(static_cast<long long>(hi), static_cast<long long>(lo));
  };
  const unsigned char* const begin = p;
  // Four lanes of 16 bytes, each folded 64 bytes forward per step.
  __m128i x0 = _mm_xor_si128(load(p), pair(crc, 0));
  __m128i x1 = load(p + 16);
  __m128i x2 = load(p + 32);
  __m128i x3 = load(p + 48);
  p += 64;
  n -= 64;
  const __m128i k64 = pair(kNvme.k[8], kNvme.k[7]);
  while (n >= 64) {
    x0 = _mm_xor_si128(fold(x0, k64), load(p));
    x1 = _mm_xor_si128(fold(x1, k64), load(p + 16));
    x2 = _mm_xor_si128(fold(x2, k64), load(p + 32));
    x3 = _mm_xor_si128(fold(x3, k64), load(p + 48));
    p += 64;
    n -= 64;
  }
  const __m128i k16 = pair(kNvme.k[2], kNvme.k[1]);
  __m128i x = _mm_xor_si128(
      _mm_xor_si128(fold(x0, pair(kNvme.k[6], kNvme.k[5])), fold(x1, pair(kNvme.k[4], kNvme.k[3]))),
      _mm_xor_si128(fold(x2, k16), x3));
  while (n >= 16) {
    x = _mm_xor_si128(fold(x, k16), load(p));
    p += 16;
    n -= 16;
  }
  // 128 bits to 64: fold the low half onto the high one, then Barrett-reduce.
  x = _mm_xor_si128(_mm_clmulepi64_si128(x, pair(kNvme.k[1], 0), 0x00), _mm_srli_si128(x, 8));
  const __m128i poly_mu = pair(kNvme.mu, kNvme.poly);
  const __m128i t1 = _mm_clmulepi64_si128(x, poly_mu, 0x00);
  const __m128i t2 = _mm_clmulepi64_si128(t1, poly_mu, 0x10);
  x = _mm_xor_si128(_mm_xor_si128(x, _mm_slli_si128(t1, 8)), t2);
  crc = static_cast<std::uint64_t>(_mm_cvtsi128_si64(_mm_unpackhi_epi64(x, x)));
  return static_cast<std::size_t>(p - begin);
}

bool have_clmul() noexcept {
  static const bool supported = __builtin_cpu_supports("pclmul") != 0;
  return supported;
}
#endif

std::uint64_t crc64nvme_update(std::uint64_t crc, const unsigned char* p, std::size_t n) noexcept {
#if defined(__x86_64__)
  if (n >= 64 && have_clmul()) {
    const std::size_t done = crc64nvme_clmul(crc, p, n);
    p += done;
    n -= done;
  }
#endif
  return crc64nvme_tables(crc, p, n);
}

const unsigned char* bytes_of(std::span<const std::byte> data) noexcept {
  return reinterpret_cast<const unsigned char*>(data.data());
}

// ---- combining CRCs ---------------------------------------------------------------------------
// Polynomial arithmetic in GF(2) modulo a CRC's polynomial P, in the reflected representation
// the CRCs use: bit width-1 is the coefficient of x^0, bit 0 that of x^(width-1). After Mark
// Adler's crc32_combine in zlib 1.2.12 (multmodp, x2nmodp).
struct CrcField {
  std::uint64_t poly;  // reflected, without the x^width term
  int width;           // 32 or 64
  [[nodiscard]] constexpr std::uint64_t one() const {
    return std::uint64_t{1} << (width - 1);
  }  // x^0
};

constexpr CrcField kCrc32Field{0xedb88320ULL, 32};
constexpr CrcField kCrc32cField{0x82f63b78ULL, 32};
constexpr CrcField kCrc64NvmeField{kCrc64NvmeReflectedPoly, 64};

// a·b mod P.
constexpr std::uint64_t multiply_mod_p(const CrcField& f, std::uint64_t a, std::uint64_t b) {
  std::uint64_t product = 0;
  // Walk a's coefficients from x^0 upwards while b steps from b to b·x, b·x², ... mod P.
  for (std::uint64_t m = f.one(); m != 0 && a != 0; m >>= 1) {
    if ((a & m) != 0) {
      product ^= b;
      a ^= m;
    }
    b = (b & 1) != 0 ? (b >> 1) ^ f.poly : b >> 1;
  }
  return product;
}

// x^(2^k) mod P for k = 0..66: enough for x^(8·n) with any 64-bit byte count n.
using PowerTable = std::array<std::uint64_t, 67>;
constexpr PowerTable powers_of_x(const CrcField& f) {
  PowerTable t{};
  t[0] = f.one() >> 1;  // x^1
  for (std::size_t k = 1; k < t.size(); ++k) t[k] = multiply_mod_p(f, t[k - 1], t[k - 1]);
  return t;
}

constexpr PowerTable kCrc32Powers = powers_of_x(kCrc32Field);
constexpr PowerTable kCrc32cPowers = powers_of_x(kCrc32cField);
constexpr PowerTable kCrc64NvmePowers = powers_of_x(kCrc64NvmeField);

// x^(8·bytes) mod P.
constexpr std::uint64_t x_to_8n_mod_p(const CrcField& f, const PowerTable& powers,
                                      std::uint64_t bytes) {
  std::uint64_t p = f.one();
  for (std::size_t k = 3; bytes != 0; bytes >>= 1, ++k) {
    if ((bytes & 1) != 0) p = multiply_mod_p(f, powers[k], p);
  }
  return p;
}

constexpr std::uint64_t combine(const CrcField& f, const PowerTable& powers, std::uint64_t crc_a,
                                std::uint64_t crc_b, std::uint64_t length_b) {
  // The initial and final inversions of A and of B cancel out: crc(A‖B) = crc(A)·x^(8|B|) + crc(B).
  return multiply_mod_p(f, x_to_8n_mod_p(f, powers, length_b), crc_a) ^ crc_b;
}

// CRC-64/NVME of "1234" and of "56789" combine to the catalogue's check value of "123456789".
static_assert(combine(kCrc64NvmeField, kCrc64NvmePowers, crc64nvme_bytewise("1234"),
                      crc64nvme_bytewise("56789"), 5) == 0xae8b14860a799888ULL);

// ---- base64 ----------------------------------------------------------------------------------
constexpr std::string_view kBase64Alphabet =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
constexpr std::uint8_t kNotBase64 = 0xff;

constexpr std::array<std::uint8_t, 256> make_base64_decode_table() {
  std::array<std::uint8_t, 256> t{};
  t.fill(kNotBase64);
  for (std::size_t i = 0; i < kBase64Alphabet.size(); ++i) {
    t[static_cast<unsigned char>(kBase64Alphabet[i])] = static_cast<std::uint8_t>(i);
  }
  return t;
}
constexpr std::array<std::uint8_t, 256> kBase64Decode = make_base64_decode_table();

void append_big_endian(std::string& out, std::uint64_t value, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

}  // namespace

// ---- names -------------------------------------------------------------------------------------
std::optional<ChecksumAlgorithm> parse_checksum_algorithm(std::string_view name) {
  const auto equals = [name](std::string_view upper) {
    return name.size() == upper.size() &&
           std::equal(name.begin(), name.end(), upper.begin(), [](char a, char b) {
             return (a >= 'a' && a <= 'z' ? static_cast<char>(a - 'a' + 'A') : a) == b;
           });
  };
  for (auto a :
       {ChecksumAlgorithm::kCrc32, ChecksumAlgorithm::kCrc32c, ChecksumAlgorithm::kCrc64Nvme,
        ChecksumAlgorithm::kSha1, ChecksumAlgorithm::kSha256}) {
    if (equals(checksum_name(a))) return a;
  }
  return std::nullopt;
}

std::string_view checksum_name(ChecksumAlgorithm algorithm) {
  switch (algorithm) {
    case ChecksumAlgorithm::kCrc32:
      return "CRC32";
    case ChecksumAlgorithm::kCrc32c:
      return "CRC32C";
    case ChecksumAlgorithm::kCrc64Nvme:
      return "CRC64NVME";
    case ChecksumAlgorithm::kSha1:
      return "SHA1";
    case ChecksumAlgorithm::kSha256:
      return "SHA256";
  }
  H3_UNREACHABLE("bad ChecksumAlgorithm");
}

std::string_view checksum_header(ChecksumAlgorithm algorithm) {
  switch (algorithm) {
    case ChecksumAlgorithm::kCrc32:
      return "x-amz-checksum-crc32";
    case ChecksumAlgorithm::kCrc32c:
      return "x-amz-checksum-crc32c";
    case ChecksumAlgorithm::kCrc64Nvme:
      return "x-amz-checksum-crc64nvme";
    case ChecksumAlgorithm::kSha1:
      return "x-amz-checksum-sha1";
    case ChecksumAlgorithm::kSha256:
      return "x-amz-checksum-sha256";
  }
  H3_UNREACHABLE("bad ChecksumAlgorithm");
}

// ---- CRCs --------------------------------------------------------------------------------------
// All three take and return the finished value (like zlib's crc32), so a stream is checksummed
// by passing the previous result back in; 0 starts a new one.
std::uint32_t crc32(std::span<const std::byte> data, std::uint32_t previous) {
  // crc32_gzip_refl does the pre/post inversion itself, taking a finished value as init.
  return crc32_gzip_refl(previous, bytes_of(data), data.size());
}

std::uint32_t crc32c(std::span<const std::byte> data, std::uint32_t previous) {
  // crc32_iscsi works on the raw register (no inversions) and takes an int length.
  constexpr std::size_t kStepBytes = std::size_t{1} << 30;
  unsigned int crc = ~previous;
  // isa-l's prototype lacks const; it only reads the buffer.
  auto* p = const_cast<unsigned char*>(bytes_of(data));
  for (std::size_t left = data.size(); left > 0;) {
    const std::size_t n = std::min(left, kStepBytes);
    crc = crc32_iscsi(p, static_cast<int>(n), crc);
    p += n;
    left -= n;
  }
  return ~crc;
}

std::uint64_t crc64nvme(std::span<const std::byte> data, std::uint64_t previous) {
  return ~crc64nvme_update(~previous, bytes_of(data), data.size());
}

std::uint64_t crc_combine(ChecksumAlgorithm algorithm, std::uint64_t crc_a, std::uint64_t crc_b,
                          std::uint64_t length_b) {
  switch (algorithm) {
    case ChecksumAlgorithm::kCrc32:
      return combine(kCrc32Field, kCrc32Powers, crc_a, crc_b, length_b);
    case ChecksumAlgorithm::kCrc32c:
      return combine(kCrc32cField, kCrc32cPowers, crc_a, crc_b, length_b);
    case ChecksumAlgorithm::kCrc64Nvme:
      return combine(kCrc64NvmeField, kCrc64NvmePowers, crc_a, crc_b, length_b);
    case ChecksumAlgorithm::kSha1:
    case ChecksumAlgorithm::kSha256:
      break;
  }
  H3_UNREACHABLE("crc_combine of a digest");
}

namespace {
int crc_bytes(ChecksumAlgorithm algorithm) {
  H3_ASSERT(algorithm == ChecksumAlgorithm::kCrc32 || algorithm == ChecksumAlgorithm::kCrc32c ||
                algorithm == ChecksumAlgorithm::kCrc64Nvme,
            "not a CRC");
  return algorithm == ChecksumAlgorithm::kCrc64Nvme ? 8 : 4;
}
}  // namespace

std::string crc_to_base64(ChecksumAlgorithm algorithm, std::uint64_t crc) {
  std::string raw;
  append_big_endian(raw, crc, crc_bytes(algorithm));
  return base64_encode(std::string_view(raw));
}

std::optional<std::uint64_t> crc_from_base64(ChecksumAlgorithm algorithm, std::string_view text) {
  const int bytes = crc_bytes(algorithm);
  auto raw = base64_decode(text);
  if (!raw || raw->size() != static_cast<std::size_t>(bytes)) return std::nullopt;
  std::uint64_t crc = 0;
  for (char c : *raw) crc = crc << 8 | static_cast<unsigned char>(c);
  return crc;
}

// ---- Checksummer -------------------------------------------------------------------------------
// SHA1/SHA256 keep an EVP context of their own rather than a hots3::Digest: base64()/raw() are
// const and must not end the stream, so they finalise a copy (EVP_MD_CTX_copy_ex), which Digest
// does not offer.
struct Checksummer::Impl {
  EVP_MD_CTX* ctx = nullptr;
  Impl() = default;
  ~Impl() { EVP_MD_CTX_free(ctx); }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  Impl(Impl&&) = delete;
  Impl& operator=(Impl&&) = delete;
};

Checksummer::Checksummer(ChecksumAlgorithm algorithm) : algorithm_(algorithm) {
  if (algorithm_ == ChecksumAlgorithm::kSha1 || algorithm_ == ChecksumAlgorithm::kSha256) {
    digest_ = std::make_unique<Impl>();
    digest_->ctx = EVP_MD_CTX_new();
    const EVP_MD* md = algorithm_ == ChecksumAlgorithm::kSha1 ? EVP_sha1() : EVP_sha256();
    H3_ASSERT(digest_->ctx != nullptr && EVP_DigestInit_ex(digest_->ctx, md, nullptr) == 1);
  }
}

Checksummer::~Checksummer() = default;
Checksummer::Checksummer(Checksummer&&) noexcept = default;
Checksummer& Checksummer::operator=(Checksummer&&) noexcept = default;

// crc_ holds the finished CRC of everything so far (the one-shot helpers chain on it).
void Checksummer::update(std::span<const std::byte> data) {
  switch (algorithm_) {
    case ChecksumAlgorithm::kCrc32:
      crc_ = crc32(data, static_cast<std::uint32_t>(crc_));
      break;
    case ChecksumAlgorithm::kCrc32c:
      crc_ = crc32c(data, static_cast<std::uint32_t>(crc_));
      break;
    case ChecksumAlgorithm::kCrc64Nvme:
      crc_ = crc64nvme(data, crc_);
      break;
    case ChecksumAlgorithm::kSha1:
    case ChecksumAlgorithm::kSha256:
      H3_ASSERT(digest_ != nullptr, "Checksummer used after move");
      H3_ASSERT(EVP_DigestUpdate(digest_->ctx, data.data(), data.size()) == 1);
      break;
  }
}

std::string Checksummer::raw() const {
  std::string out;
  switch (algorithm_) {
    case ChecksumAlgorithm::kCrc32:
    case ChecksumAlgorithm::kCrc32c:
      append_big_endian(out, crc_, 4);
      break;
    case ChecksumAlgorithm::kCrc64Nvme:
      append_big_endian(out, crc_, 8);
      break;
    case ChecksumAlgorithm::kSha1:
    case ChecksumAlgorithm::kSha256: {
      H3_ASSERT(digest_ != nullptr, "Checksummer used after move");
      EVP_MD_CTX* copy = EVP_MD_CTX_new();
      H3_ASSERT(copy != nullptr && EVP_MD_CTX_copy_ex(copy, digest_->ctx) == 1);
      std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
      unsigned length = 0;
      const int ok = EVP_DigestFinal_ex(copy, md.data(), &length);
      EVP_MD_CTX_free(copy);
      H3_ASSERT(ok == 1);
      out.assign(reinterpret_cast<const char*>(md.data()), length);
      break;
    }
  }
  return out;
}

std::string Checksummer::base64() const { return base64_encode(std::string_view(raw())); }

// ---- text encodings ----------------------------------------------------------------------------
std::string base64_encode(std::span<const std::byte> data) {
  std::string out;
  out.reserve((data.size() + 2) / 3 * 4);
  const auto at = [&](std::size_t i) { return std::to_integer<std::uint32_t>(data[i]); };
  std::size_t i = 0;
  for (; i + 3 <= data.size(); i += 3) {
    const std::uint32_t v = at(i) << 16 | at(i + 1) << 8 | at(i + 2);
    out.push_back(kBase64Alphabet[v >> 18]);
    out.push_back(kBase64Alphabet[(v >> 12) & 63]);
    out.push_back(kBase64Alphabet[(v >> 6) & 63]);
    out.push_back(kBase64Alphabet[v & 63]);
  }
  if (const std::size_t rest = data.size() - i; rest > 0) {
    const std::uint32_t v = at(i) << 16 | (rest == 2 ? at(i + 1) << 8 : 0);
    out.push_back(kBase64Alphabet[v >> 18]);
    out.push_back(kBase64Alphabet[(v >> 12) & 63]);
    out.push_back(rest == 2 ? kBase64Alphabet[(v >> 6) & 63] : '=');
    out.push_back('=');
  }
  return out;
}

std::string base64_encode(std::string_view data) {
  return base64_encode(std::as_bytes(std::span(data.data(), data.size())));
}

// Strict: padded to a multiple of 4, only the standard alphabet, '=' only as the last one or
// two characters, and the unused bits before the padding zero (so every value has exactly one
// text form, which is what comparisons against x-amz-checksum-* and Content-MD5 rely on).
std::optional<std::string> base64_decode(std::string_view text) {
  if (text.size() % 4 != 0) return std::nullopt;
  std::size_t padding = 0;
  if (!text.empty() && text.back() == '=')
    padding = text.size() >= 2 && text[text.size() - 2] == '=' ? 2 : 1;
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (std::size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    const std::size_t significant = last ? 4 - padding : 4;
    std::uint32_t v = 0;
    for (std::size_t j = 0; j < 4; ++j) {
      std::uint32_t sextet = 0;
      if (j < significant) {
        sextet = kBase64Decode[static_cast<unsigned char>(text[i + j])];
        if (sextet == kNotBase64) return std::nullopt;
      }
      v = v << 6 | sextet;
    }
    out.push_back(static_cast<char>(v >> 16));
    if (significant >= 3) out.push_back(static_cast<char>((v >> 8) & 0xff));
    if (significant == 4) out.push_back(static_cast<char>(v & 0xff));
    if (significant == 2 && (v & 0xffff) != 0) return std::nullopt;
    if (significant == 3 && (v & 0xff) != 0) return std::nullopt;
  }
  return out;
}

std::uint64_t crc_update(ChecksumAlgorithm algorithm, std::uint64_t previous,
                         std::span<const std::byte> data) {
  switch (algorithm) {
    case ChecksumAlgorithm::kCrc32:
      return crc32(data, static_cast<std::uint32_t>(previous));
    case ChecksumAlgorithm::kCrc32c:
      return crc32c(data, static_cast<std::uint32_t>(previous));
    case ChecksumAlgorithm::kCrc64Nvme:
      return crc64nvme(data, previous);
    case ChecksumAlgorithm::kSha1:
    case ChecksumAlgorithm::kSha256:
      break;
  }
  H3_ASSERT(false, "crc_update of a SHA");
  return 0;
}

}  // namespace hots3::aws
