// hots3's own operation on a bucket bound to an upstream: flush (POST /bucket?x-hots3-flush),
// which sends a prefix's changes up now and answers once the upstream has them.

#include "s3_xml.h"
#include "service.h"

#include <charconv>

namespace hots3::s3 {

// POST /bucket?x-hots3-flush[&prefix=P][&seq=N][&wait=false]: the changes acknowledged under P
// go up at once, without the coalescing delay. The answer comes once the upstream has all of
// them, once only refused ones (parked) are left, or after the longest wait of a request; it says
// which (Owed, Parked), and Seq names the changes waited for, so that a caller still owed some
// asks again with seq=Seq and waits for the same set, not for changes made since. wait=false:
// the answer comes at once.
asio::awaitable<void> flush_bucket(Service& s, Request& r) {
  auto bucket = co_await s.bucket_for(r, Access::kWrite);
  if (!bucket) co_return;
  // A write-through bucket owes changes too: those whose request gave up waiting for them.
  if (bucket->tier != storage::BucketTier::kWriteback &&
      bucket->tier != storage::BucketTier::kWritethrough) {
    co_return co_await s.send_error(
        r, Error(Code::kInvalidRequest,
                 "The bucket is not bound to an upstream in write-back or write-through mode."));
  }
  std::int64_t seq = 0;
  if (const std::string* given = r.param("seq")) {
    const auto [end, ec] = std::from_chars(given->data(), given->data() + given->size(), seq);
    if (ec != std::errc{} || end != given->data() + given->size() || seq <= 0) {
      co_return co_await s.send_error(r, Error(Code::kInvalidArgument, "seq is a positive integer.")
                                             .with("ArgumentName", "seq")
                                             .with("ArgumentValue", *given));
    }
  }
  const std::string* wait_param = r.param("wait");
  const bool wait = wait_param == nullptr || *wait_param != "false";
  const std::string prefix = r.param("prefix") ? *r.param("prefix") : std::string();
  Service::UpstreamWait result;
  if (wait) {
    auto waiting = s.wait_upstream(*bucket, {prefix, false}, seq);
    auto waited = co_await std::move(waiting);
    if (!waited) co_return co_await s.send_error(r, from_errc(waited.error()));
    result = std::move(*waited);
  } else {
    auto expedite = s.store().expedite_tier_jobs(bucket->id, {prefix, false});
    auto last = co_await std::move(expedite);
    if (!last) co_return co_await s.send_error(r, from_errc(last.error()));
    result.seq = seq != 0 ? seq : *last;
    auto read = s.store().tier_owed(bucket->id, {prefix, false}, result.seq);
    auto owed = co_await std::move(read);
    if (!owed) co_return co_await s.send_error(r, from_errc(owed.error()));
    result.owed = std::move(*owed);
  }
  XmlWriter xml("FlushResult");
  xml.element("Bucket", bucket->name);
  xml.element("Prefix", prefix);
  xml.element("Seq", std::to_string(result.seq));
  xml.element("Owed", std::to_string(result.owed.jobs));
  xml.element("Parked", std::to_string(result.owed.parked));
  if (result.owed.parked > 0) xml.element("ParkedError", result.owed.parked_error);
  co_await s.send_xml(r, 200, xml.finish());
}

}  // namespace hots3::s3
