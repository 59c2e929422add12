// S3 requests by operation and status.

#include "request_metrics.h"

#include "router.h"

#include <algorithm>
#include <string>
#include <vector>

namespace hots3::s3 {

RequestMetrics::RequestMetrics()
    : operations_(std::make_unique<Operation[]>(operation_names().size())),
      count_(operation_names().size()) {}

void RequestMetrics::record(std::size_t operation, const http::Exchange::Counts& counts,
                            std::uint64_t micros) noexcept {
  if (operation >= count_) return;
  Operation& o = operations_[operation];
  const auto* at = std::find(kStatuses.begin(), kStatuses.end() - 1, counts.status);
  o.by_status[static_cast<std::size_t>(at - kStatuses.begin())].add();
  o.duration.observe_us(micros);
  if (counts.body_read_bytes > 0) o.body_read_bytes.add(counts.body_read_bytes);
  if (counts.body_sent_bytes > 0) o.body_sent_bytes.add(counts.body_sent_bytes);
}

void RequestMetrics::write(metrics::Writer& w) const {
  const auto names = operation_names();
  // A scrape reads each operation once: which ones were asked for, and their durations.
  std::vector<metrics::Histogram::Snapshot> durations(count_);
  for (std::size_t i = 0; i < count_; ++i) durations[i] = operations_[i].duration.snapshot();
  auto asked = [&](std::size_t i) { return durations[i].cumulative.back() > 0; };

  w.family("hots3_s3_requests_total", "counter",
           "S3 requests answered, by operation (\"none\": refused before one was known) and "
           "HTTP status (\"other\": a status not listed)");
  for (std::size_t i = 0; i < count_; ++i) {
    if (!asked(i)) continue;
    for (std::size_t s = 0; s < kStatuses.size(); ++s) {
      const std::uint64_t n = operations_[i].by_status[s].value();
      if (n == 0) continue;
      const std::string status = kStatuses[s] == 0 ? "other" : std::to_string(kStatuses[s]);
      w.sample("hots3_s3_requests_total", {{"operation", names[i]}, {"status", status}},
               static_cast<double>(n));
    }
  }
  w.family("hots3_s3_request_duration_seconds", "histogram",
           "Time from a request's head to the end of its response, by operation");
  for (std::size_t i = 0; i < count_; ++i) {
    if (asked(i))
      w.histogram("hots3_s3_request_duration_seconds", {{"operation", names[i]}}, durations[i]);
  }
  // The body bytes, one family per direction.
  auto bytes = [&](std::string_view family, std::string_view help,
                   metrics::Counter Operation::*counter) {
    w.family(family, "counter", help);
    for (std::size_t i = 0; i < count_; ++i) {
      if (asked(i)) {
        w.sample(family, {{"operation", names[i]}},
                 static_cast<double>((operations_[i].*counter).value()));
      }
    }
  };
  bytes("hots3_s3_request_body_bytes_total", "Request body bytes read (uploads), by operation",
        &Operation::body_read_bytes);
  bytes("hots3_s3_response_body_bytes_total", "Response body bytes sent (downloads), by operation",
        &Operation::body_sent_bytes);
}

}  // namespace hots3::s3
