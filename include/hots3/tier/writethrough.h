#pragma once

// Write-through (mode "writethrough"): a PUT's body goes to the device and, at the same time, to
// the bucket's upstream, and the new version becomes visible here only once the upstream holds it.
// The S3 layer feeds an UpstreamPut with the pieces it writes to the device; the tier module sends
// them from its own thread, under the same conditions, pacing and health accounting as the
// write-back uploads. The last piece is held back until finish(): a body the client's checksums
// then refuse never completes upstream either.

#include "hots3/http/handler.h"
#include "hots3/storage/records.h"

#include <boost/asio/awaitable.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace hots3::tier {

// What became of a write-through PUT upstream.
struct UpstreamAnswer {
  enum class Kind {
    kStored,    // the upstream holds the body: `etag` is its ETag
    kConflict,  // another writer changed the key upstream (its conditional PUT was refused)
    kPreconditionFailed,  // the client's own If-Match / If-None-Match, sent on, was refused
    kFailed,              // the upstream, or the way to it, failed: it does not hold the body
    kUnknown,             // the body was sent whole, but the upstream failed or did not answer, and
                          // asking it afterwards did not settle it: it may hold the body
  } kind = Kind::kFailed;
  std::string etag;
  std::string upload_id;  // a part's: the upstream upload that holds it
  std::string cause;      // why it failed (no secrets, no key)
};

class UpstreamPut {
 public:
  UpstreamPut() = default;
  // Without finish(), the upstream PUT is cut off before its body ends: nothing is stored there.
  // Either way, the key is free for the next write once this is gone.
  virtual ~UpstreamPut() = default;
  UpstreamPut(const UpstreamPut&) = delete;
  UpstreamPut& operator=(const UpstreamPut&) = delete;
  UpstreamPut(UpstreamPut&&) = delete;
  UpstreamPut& operator=(UpstreamPut&&) = delete;

  // The next piece of the body (copied); waits while the upstream is behind. false once the
  // upstream PUT has failed: finish() says why.
  virtual boost::asio::awaitable<bool> write(std::span<const std::byte> piece) = 0;
  // After the last piece, once the body is verified: sends what was held back and waits for the
  // upstream's answer. `etag` is the ETag the upstream gives this body ("" when not known): an
  // answer lost on the way back is settled by asking whether the upstream holds it. `own_job`:
  // the seq of the job the request queued for the key first (0: none; a job the key had
  // already is another change's, which then settles a conflict by its own rules).
  virtual boost::asio::awaitable<UpstreamAnswer> finish(std::string etag, std::int64_t own_job) = 0;
};

class WriteThrough {
 public:
  WriteThrough() = default;
  virtual ~WriteThrough() = default;
  WriteThrough(const WriteThrough&) = delete;
  WriteThrough& operator=(const WriteThrough&) = delete;
  WriteThrough(WriteThrough&&) = delete;
  WriteThrough& operator=(WriteThrough&&) = delete;

  // Starts the PUT of `key` (local name) of a bound bucket with `length` bytes, the version's
  // content headers and user metadata, and `more` headers (what the client vouched for the body
  // with: Content-MD5, a checksum). It waits for the key's earlier upstream change to end first,
  // so that one key reaches the upstream in order.
  virtual std::unique_ptr<UpstreamPut> put(std::int64_t bucket_id, std::string key,
                                           std::uint64_t length,
                                           const storage::ContentHeaders& headers,
                                           const storage::Metadata& metadata,
                                           std::vector<http::Header> more) = 0;

  // A multipart upload's parts go up as they come too, into an upstream upload begun with the
  // first part (with the upload's content headers and metadata), so that the Complete's job has
  // only the parts the upstream did not take to send before its own Complete. Teeing is an
  // acceleration, not a promise: a part whose upstream side fails is still stored here. The
  // upstream upload and each part's ETag in it are committed with the part (`TeedPart`, from
  // the answer), so that they outlive a restart.
  // put_part: as put(), for part `part_number` of the client's `upload`.
  virtual std::unique_ptr<UpstreamPut> put_part(std::int64_t bucket_id,
                                                const storage::UploadRecord& upload,
                                                std::uint32_t part_number, std::uint64_t length,
                                                std::vector<http::Header> more) = 0;
  // After the Complete's commit, before its job is sent: upstream upload `teed_id` (the one
  // the upload recorded, if any) holds `held`, parts of object `object_id` numbered as its job
  // numbers them (1..N), with our ETags; they become the job's, and the job sends the rest.
  virtual boost::asio::awaitable<void> adopt_parts(std::int64_t bucket_id, std::string key,
                                                   std::string upload_id, std::string teed_id,
                                                   std::int64_t object_id,
                                                   std::vector<storage::TierPart> held) = 0;
  // The client aborted `upload`: its upstream upload is aborted too.
  virtual void abort_parts(const storage::UploadRecord& upload) = 0;
};

}  // namespace hots3::tier
