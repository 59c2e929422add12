#include "hots3/common/hash_lanes.h"

#include "hots3/common/logging.h"

#include <boost/asio/post.hpp>

#include <algorithm>
#include <vector>

namespace hots3 {

namespace asio = boost::asio;

namespace {

// Owns an event loop's HashLanes as an Asio service: on a worker, shut down before the buffer
// pool (services shut down in reverse order of creation, and the pool is created when the store
// attaches).
class LanesService final : public asio::execution_context::service {
 public:
  using key_type = LanesService;
  static inline asio::execution_context::id id;  // NOLINT: Asio's service identification

  explicit LanesService(asio::execution_context& context)
      : service(context), lanes(static_cast<asio::io_context&>(context)) {}
  void shutdown() override { lanes.shut_down(); }

  HashLanes lanes;
};

}  // namespace

HashLanes& HashLanes::of(asio::io_context& context) {
  return asio::use_service<LanesService>(context).lanes;
}

void HashLanes::submit(std::shared_ptr<Md5> stream, std::span<const std::byte> data,
                       std::shared_ptr<const void> keep, std::function<void()> done) {
  if (shut_down_) return;
  jobs_.push_back({std::move(stream), data, std::move(keep), std::move(done)});
  schedule();
}

void HashLanes::schedule() {
  if (scheduled_) return;
  scheduled_ = true;
  asio::post(context_, [this] { pass(); });
}

void HashLanes::pass() {
  scheduled_ = false;
  if (jobs_.empty()) return;
  // The first job of every stream, in submission order.
  std::vector<Job*> first;
  for (Job& job : jobs_) {
    if (std::none_of(first.begin(), first.end(),
                     [&](const Job* j) { return j->stream == job.stream; })) {
      first.push_back(&job);
    }
  }
  // While some streams have nothing queued, wait a few turns of the event loop (the reactor runs
  // in between): their buffers are likely to fill meanwhile, and hashing them in this pass
  // costs nearly nothing.
  constexpr unsigned kMaxDeferrals = 3;
  if (first.size() < streams_ && deferrals_ < kMaxDeferrals) {
    ++deferrals_;
    schedule();
    return;
  }
  deferrals_ = 0;

  std::vector<Job> batch;
  batch.reserve(first.size());
  for (Job* job : first) batch.push_back(std::move(*job));
  std::erase_if(jobs_, [](const Job& j) { return !j.stream; });
  std::vector<Md5*> streams;
  std::vector<std::span<const std::byte>> data;
  for (const Job& job : batch) {
    streams.push_back(job.stream.get());
    data.push_back(job.data);
  }
  Md5::update_many(streams, data);
  ++stats_.passes;
  stats_.jobs += batch.size();
  if (!jobs_.empty()) schedule();
  for (Job& job : batch) {
    job.keep.reset();
    job.done();
  }
}

void HashLanes::shut_down() noexcept {
  shut_down_ = true;
  if (stats_.passes > 0) {
    log::debug("MD5 lanes: {} buffers hashed in {} passes ({:.2f} streams per pass)", stats_.jobs,
               stats_.passes,
               static_cast<double>(stats_.jobs) / static_cast<double>(stats_.passes));
  }
  auto jobs = std::move(jobs_);
  jobs_.clear();
}

}  // namespace hots3
