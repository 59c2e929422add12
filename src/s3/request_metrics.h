#pragma once

// Private to src/s3: S3 requests counted by operation and status, with their durations and the
// body bytes they carried, as Prometheus scrapes them. Operations and statuses come from fixed
// lists (router.h's names; the statuses S3 answers most, the rest as "other"): the series stay
// bounded whatever clients send. Thread-safety: record from any worker; write from any thread.

#include "hots3/common/metrics.h"
#include "hots3/http/handler.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace hots3::s3 {

class RequestMetrics {
 public:
  RequestMetrics();

  // One request answered: `operation` indexes operation_names().
  void record(std::size_t operation, const http::Exchange::Counts& counts,
              std::uint64_t micros) noexcept;
  // hots3_s3_requests_total, hots3_s3_request_duration_seconds, hots3_s3_request_body_bytes_total
  // and hots3_s3_response_body_bytes_total; series of operations never asked for are left out.
  void write(metrics::Writer& w) const;

  static constexpr std::array<unsigned, 15> kStatuses = {200, 204, 206, 304, 400, 403, 404, 405,
                                                         409, 412, 416, 500, 501, 503, 0};

 private:
  struct Operation {
    std::array<metrics::Counter, kStatuses.size()> by_status;
    metrics::Histogram duration;
    metrics::Counter body_read_bytes;
    metrics::Counter body_sent_bytes;
  };
  std::unique_ptr<Operation[]> operations_;
  std::size_t count_;
};

}  // namespace hots3::s3
