#pragma once

// The S3 API on top of the HTTP core and the object store: the request handler the server
// runs. Everything else of the S3 layer is private to src/s3.

#include "hots3/config/config.h"
#include "hots3/http/handler.h"

#include <memory>
#include <string>
#include <vector>

namespace hots3::storage {
class ObjectStore;
}

namespace hots3::tier {
class ReadThrough;
class WriteThrough;
}  // namespace hots3::tier

namespace hots3::metrics {
class Registry;
}

namespace hots3::s3 {

// Where the handler reports its metrics (requests by operation and status) and serves them:
// GET /metrics with "Authorization: Bearer <bearer_token>" on the S3 port ("" = not there).
// `registry` (outliving the handler) also holds what other modules report.
struct MetricsEndpoint {
  metrics::Registry* registry = nullptr;
  std::string bearer_token;
};

// `store` must outlive the handler. Users are fixed for the handler's lifetime. `probes`
// answers the health probes beyond live and ready (http::Handler::probe). `write_through`
// (outliving the handler) takes the PUTs of buckets bound in write-through mode; without it,
// they are refused. `read_through` (outliving the handler) brings back the data of evicted
// versions; without it, their GETs answer 503.
std::unique_ptr<http::Handler> make_handler(storage::ObjectStore& store,
                                            const config::S3Config& config,
                                            std::vector<config::UserConfig> users,
                                            http::ProbeFn probes = {},
                                            tier::WriteThrough* write_through = nullptr,
                                            tier::ReadThrough* read_through = nullptr,
                                            MetricsEndpoint metrics = {});

}  // namespace hots3::s3
