#pragma once

// Private to src/s3: what the bytes of a read-through (a version fetched back from the upstream)
// are checked against before the version counts as local again.

#include "hots3/aws/checksum.h"
#include "hots3/common/md5.h"
#include "hots3/storage/object_store.h"

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace hots3::s3 {

// Its whole-object CRC, the cheapest (folded by carry-less multiplication, some 40 times faster
// than MD5, which would be the largest single cost of a cold read after the copies); else the MD5s
// its ETag is made of (the object's, or each part's and then theirs); else its whole-object SHA. An
// appended object's ETag is made of neither, and without a checksum nothing vouches for its
// bytes: they are served, not kept.
class FetchCheck {
 public:
  // `parts`: the version's part table, when it has parts. `md5_etags`: the store's ETags are
  // MD5s (not digests of block checksums).
  FetchCheck(const storage::ObjectRecord& o, std::vector<storage::ObjectPartRecord> parts,
             bool md5_etags);

  // Whether anything vouches for the version's bytes.
  [[nodiscard]] bool possible() const { return way_ != Way::kNone; }

  // The version's bytes, in order from its first.
  void update(std::span<const std::byte> data);

  // After every byte: whether they are the version's.
  [[nodiscard]] bool passed();

 private:
  using Candidate = std::pair<aws::ChecksumAlgorithm, const std::optional<std::string>*>;

  // Checks against the first of `candidates` the version has.
  bool take_checksum(std::initializer_list<Candidate> candidates);

  enum class Way { kNone, kMd5, kParts, kChecksum } way_ = Way::kNone;
  std::string expected_;
  Md5 md5_;
  std::optional<aws::Checksummer> sum_;
  std::vector<storage::ObjectPartRecord> parts_;
  std::vector<std::string> part_md5s_;
  std::size_t index_ = 0;
  std::uint64_t at_ = 0;
};

}  // namespace hots3::s3
