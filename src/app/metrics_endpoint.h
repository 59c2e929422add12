#pragma once

// Prometheus metrics of a running server: the collectors of its modules (connections, the device,
// the caches and the catalog, the tier's uploads and evictions) and the handler of the metrics
// address ([metrics] listen: GET /metrics, nothing else, no authentication).

#include "hots3/common/metrics.h"
#include "hots3/http/handler.h"
#include "hots3/http/server.h"
#include "hots3/storage/object_store.h"
#include "hots3/tier/uploader.h"

#include <cstdint>

namespace hots3::app {

// Adds the server-wide collectors to `registry`. `server`, `store` and `uploader` (nullptr when
// no bucket is bound) must outlive the scrapes.
void add_server_metrics(metrics::Registry& registry, const http::Server& server,
                        const storage::ObjectStore& store, const tier::Uploader* uploader,
                        std::int64_t started_ms);

class MetricsHandler final : public http::Handler {
 public:
  explicit MetricsHandler(const metrics::Registry& registry) : registry_(registry) {}
  boost::asio::awaitable<void> handle(http::Exchange& exchange) override;

 private:
  const metrics::Registry& registry_;
};

}  // namespace hots3::app
