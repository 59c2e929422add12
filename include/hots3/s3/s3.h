#pragma once

// The S3 API on top of the HTTP core and the object store: the request handler the server
// runs. Everything else of the S3 layer is private to src/s3.

#include "hots3/config/config.h"
#include "hots3/http/handler.h"

#include <functional>
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

// What operators reach through the handler. Metrics: requests by operation and status reported
// to `registry` (outliving the handler, which also holds what other modules report), served as
// GET /metrics with "Authorization: Bearer <bearer_token>" on the S3 port ("" = not there).
// `server_status`: what GET /?x-hots3-status (admins) says of the process around the handler
// (version, uptime, listen addresses, connections), as members of a JSON object without its
// braces; none without it.
struct OperatorEndpoints {
  metrics::Registry* registry = nullptr;
  std::string bearer_token;
  std::function<std::string()> server_status;
};

class Handler : public http::Handler {
 public:
  // Replaces the users and their grants (a configuration reload) for the requests that begin
  // from now on; false when they are the ones in use.
  virtual bool set_users(std::vector<config::UserConfig> users) = 0;
};

// `store` must outlive the handler. `probes`
// answers the health probes beyond live and ready (http::Handler::probe). `write_through`
// (outliving the handler) takes the PUTs of buckets bound in write-through mode; without it,
// they are refused. `read_through` (outliving the handler) brings back the data of evicted
// versions; without it, their GETs answer 503.
std::unique_ptr<Handler> make_handler(storage::ObjectStore& store, const config::S3Config& config,
                                      std::vector<config::UserConfig> users,
                                      http::ProbeFn probes = {},
                                      tier::WriteThrough* write_through = nullptr,
                                      tier::ReadThrough* read_through = nullptr,
                                      OperatorEndpoints operators = {});

}  // namespace hots3::s3
