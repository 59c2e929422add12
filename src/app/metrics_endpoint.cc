// What a running server reports to Prometheus beyond its S3 requests.

#include "metrics_endpoint.h"

#include "hots3/common/version.h"

#include <boost/asio/use_awaitable.hpp>

namespace hots3::app {

void add_server_metrics(metrics::Registry& registry, const http::Server& server,
                        const storage::ObjectStore& store, const tier::Uploader* uploader,
                        std::int64_t started_ms) {
  registry.add([started_ms](metrics::Writer& w) {
    w.family("hots3_build_info", "gauge", "The running version (always 1)");
    w.sample("hots3_build_info", {{"version", kVersion}}, 1);
    w.gauge("hots3_start_time_seconds", "When the server started (Unix time)",
            static_cast<double>(started_ms) / 1000);
  });
  registry.add([&server](metrics::Writer& w) {
    const http::ServerStats s = server.stats();
    w.gauge("hots3_http_connections", "Open client connections",
            static_cast<double>(s.connections_active));
    w.counter("hots3_http_connections_total", "Client connections accepted",
              static_cast<double>(s.connections_total));
    w.counter("hots3_http_connections_rejected_total",
              "Client connections refused over http.connections_max",
              static_cast<double>(s.connections_rejected));
  });
  registry.add([&store](metrics::Writer& w) {
    const storage::StoreStats s = store.stats();
    auto bytes = [](std::uint64_t n) { return static_cast<double>(n); };
    w.gauge("hots3_device_bytes", "Size of the data device", bytes(s.device_bytes));
    w.gauge("hots3_device_used_bytes", "Device space holding data", bytes(s.used_bytes));
    w.gauge("hots3_device_free_bytes", "Device space free for new data", bytes(s.free_bytes));
    w.gauge("hots3_device_pending_free_bytes",
            "Device space freed but still read by requests in flight", bytes(s.pending_free_bytes));
    w.gauge("hots3_device_free_extents", "Runs of free device space (its fragmentation)",
            bytes(s.free_extents));
    w.gauge("hots3_device_largest_free_bytes", "The longest run of free device space",
            bytes(s.largest_free_bytes));
    w.gauge("hots3_block_cache_capacity_bytes", "Capacity of the block cache in RAM",
            bytes(s.cache_capacity_bytes));
    w.gauge("hots3_block_cache_used_bytes", "Block cache holding data", bytes(s.cache_used_bytes));
    w.counter("hots3_block_cache_hits_total", "Device reads the block cache answered",
              bytes(s.cache_hits));
    w.counter("hots3_block_cache_misses_total", "Device reads the block cache did not answer",
              bytes(s.cache_misses));
    w.counter("hots3_block_cache_evictions_total", "Blocks the block cache let go for others",
              bytes(s.cache_evictions));
    w.counter("hots3_checksum_failures_total",
              "Stored blocks a read found damaged (nothing of them was returned)",
              bytes(s.checksum_failures));
    w.gauge("hots3_metadata_cache_used_bytes", "Metadata cache holding object records",
            bytes(s.metadata_cache_used_bytes));
    w.counter("hots3_metadata_cache_hits_total", "Object lookups the metadata cache answered",
              bytes(s.metadata_cache_hits));
    w.counter("hots3_metadata_cache_misses_total", "Object lookups that read the catalog",
              bytes(s.metadata_cache_misses));
    w.counter("hots3_catalog_writes_total", "Catalog write transactions requested",
              bytes(s.catalog_writer.writes));
    w.counter("hots3_catalog_commits_total",
              "Catalog commits (fsyncs); writes per commit is the group-commit factor",
              bytes(s.catalog_writer.commits));
    w.counter("hots3_catalog_writer_checkpoints_total",
              "WAL checkpoints the catalog writer stopped for",
              bytes(s.catalog_writer.writer_checkpoints));
    w.counter("hots3_catalog_writer_checkpoint_seconds_total",
              "Time the catalog writer spent in checkpoints",
              static_cast<double>(s.catalog_writer.writer_checkpoint_ns) / 1e9);
    w.family("hots3_catalog_batch_seconds", "histogram",
             "A catalog batch's transaction, BEGIN to COMMIT into the WAL");
    w.histogram("hots3_catalog_batch_seconds", {}, s.catalog_writer.batch_seconds);
    w.family("hots3_catalog_batch_writes", "histogram",
             "Writes per catalog batch: how many acknowledgements share one commit");
    w.histogram("hots3_catalog_batch_writes", {}, s.catalog_writer.batch_writes);
    w.family("hots3_catalog_sync_seconds", "histogram",
             "A flush of the catalog's WAL (fdatasync), which makes the batches since the last "
             "one durable; a write is answered after both");
    w.histogram("hots3_catalog_sync_seconds", {}, s.catalog_writer.sync_seconds);
    w.gauge("hots3_device_io_in_flight",
            "Device operations submitted and not yet completed (the queue depth)",
            bytes(s.device_io_in_flight));
    w.family("hots3_device_io_seconds", "histogram",
             "Device operations from submission to completion, by op");
    constexpr std::string_view kOps[] = {"read", "write", "flush"};
    for (std::size_t k = 0; k < std::size(kOps); ++k)
      w.histogram("hots3_device_io_seconds", {{"op", kOps[k]}}, s.device_io_seconds[k]);
    w.gauge("hots3_tier_owed_bytes", "Bytes of changes not yet confirmed by an upstream",
            bytes(store.tier_owed_bytes()));
  });
  if (uploader == nullptr) return;
  registry.add([uploader](metrics::Writer& w) {
    const tier::UploaderStats s = uploader->stats();
    auto n = [](std::uint64_t v) { return static_cast<double>(v); };
    w.counter("hots3_tier_uploaded_objects_total", "Objects the upstream confirmed", n(s.uploaded));
    w.counter("hots3_tier_uploaded_bytes_total", "Bytes of the objects the upstream confirmed",
              n(s.bytes));
    w.counter("hots3_tier_sent_bytes_total", "Bytes sent upstream, confirmed or not",
              n(s.sent_bytes));
    w.counter("hots3_tier_deleted_objects_total", "Upstream deletes confirmed", n(s.deleted));
    w.counter("hots3_tier_retries_total", "Failed upstream attempts to be retried", n(s.retried));
    w.counter("hots3_tier_parked_jobs_total", "Jobs parked: no retry will change their answer",
              n(s.parked));
    w.counter("hots3_tier_slowdowns_total",
              "Times an upstream's 429 or 503 halved the upload concurrency", n(s.slowdowns));
    w.counter("hots3_tier_conflicts_total", "Keys another writer had changed upstream",
              n(s.conflicts));
    w.counter("hots3_tier_evicted_objects_total", "Versions evicted by the watermarks",
              n(s.evicted));
    w.counter("hots3_tier_evicted_bytes_total", "Device space eviction gave back",
              n(s.evicted_bytes));
    w.gauge("hots3_tier_evictable_bytes", "Bytes eviction may take now",
            n(uploader->evictable_bytes()));
    uploader->write_metrics(w);
  });
}

boost::asio::awaitable<void> MetricsHandler::handle(http::Exchange& exchange) {
  const http::RequestHead& head = exchange.request();
  const std::string_view path = head.target.substr(0, head.target.find('?'));
  if (path != "/metrics" ||
      (head.method != http::Method::kGet && head.method != http::Method::kHead)) {
    http::Response head_404(404);
    head_404.add("Content-Type", "text/plain");
    co_await exchange.respond(std::move(head_404), "only GET /metrics here\n");
    co_return;
  }
  http::Response ok(200);
  ok.add("Content-Type", std::string(metrics::kContentType));
  co_await exchange.respond(std::move(ok), registry_.scrape());
}

}  // namespace hots3::app
