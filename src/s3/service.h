#pragma once

// Private to src/s3: the request as the S3 layer sees it, and the Service that routes it to an
// operation. Operations live in handlers_{bucket,object,multipart}.cc.

#include "client_tokens.h"
#include "errors.h"

#include "hots3/aws/chunked.h"
#include "hots3/aws/sigv4.h"
#include "hots3/config/config.h"
#include "hots3/http/handler.h"
#include "hots3/storage/object_store.h"

#include <boost/asio/awaitable.hpp>

#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace hots3::s3 {

namespace asio = boost::asio;

// How the request body is protected (x-amz-content-sha256).
enum class Payload : std::uint8_t {
  kSha256,                    // hex digest of the body: verified as it streams
  kUnsigned,                  // UNSIGNED-PAYLOAD
  kStreamingSigned,           // STREAMING-AWS4-HMAC-SHA256-PAYLOAD
  kStreamingSignedTrailer,    // STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER
  kStreamingUnsignedTrailer,  // STREAMING-UNSIGNED-PAYLOAD-TRAILER
};

struct Authenticated {
  const config::UserConfig* user = nullptr;
  Payload payload = Payload::kUnsigned;
  std::string payload_sha256;                              // kSha256: the expected hex digest
  std::optional<aws::AwsChunkedDecoder::Signing> signing;  // signed streaming modes
};

enum class Access : std::uint8_t { kRead, kWrite, kOwner };

struct Request {
  explicit Request(http::Exchange& e) : exchange(e), head(e.request()) {}

  http::Exchange& exchange;
  const http::RequestHead& head;
  std::string_view raw_path;  // as sent, still percent-encoded
  std::string_view raw_query;
  std::string path;  // decoded
  std::vector<aws::QueryParameter> query;
  std::string bucket;  // "" for service-level requests
  std::string key;     // "" for bucket-level requests
  bool virtual_host = false;
  Authenticated auth;

  [[nodiscard]] std::optional<std::string_view> header(std::string_view name) const {
    return head.find(name);
  }
  [[nodiscard]] const std::string* param(std::string_view name) const {
    for (const auto& p : query) {
      if (p.name == name) return &p.value;
    }
    return nullptr;
  }
  [[nodiscard]] bool has_param(std::string_view name) const { return param(name) != nullptr; }
  // "/bucket/key" for error bodies.
  [[nodiscard]] std::string resource() const;
};

class Service final : public http::Handler {
 public:
  Service(storage::ObjectStore& store, const config::S3Config& config,
          std::vector<config::UserConfig> users);

  asio::awaitable<void> handle(http::Exchange& exchange) override;
  http::Response protocol_error(http::ProtocolError error, std::string_view request_id,
                                std::string& body) override;

  // ---- used by the operations ----
  storage::ObjectStore& store() { return store_; }
  const config::S3Config& config() const { return config_; }
  // This server's x-amz-id-2, the HostId of error bodies.
  const std::string& host_id() const { return host_id_; }
  // The x-amz-client-token of renames that succeeded.
  ClientTokens& client_tokens() { return client_tokens_; }

  // A response head with the headers every S3 response has.
  http::Response response(const Request& r, unsigned status) const;
  asio::awaitable<void> send_error(Request& r, Error error);
  asio::awaitable<void> send_xml(Request& r, unsigned status, std::string body,
                                 http::Response head);
  asio::awaitable<void> send_xml(Request& r, unsigned status, std::string body) {
    co_await send_xml(r, status, std::move(body), response(r, status));
  }
  asio::awaitable<void> send_empty(Request& r, unsigned status, http::Response head);

  // The bucket, if it exists and the caller may do `access` in it; sends the error otherwise.
  asio::awaitable<std::optional<storage::BucketRecord>> bucket_for(Request& r, Access access);
  bool allowed(const config::UserConfig& user, const storage::BucketRecord& bucket,
               Access access) const;
  // Whether `user` may create a bucket of this name (admins, and the user's create_buckets).
  bool may_create_bucket(const config::UserConfig& user, std::string_view name) const;

 private:
  std::optional<Error> locate(Request& r);
  std::optional<Error> authenticate(Request& r);
  std::optional<Error> authenticate_v4_header(Request& r, std::string_view authorization);
  std::optional<Error> authenticate_v4_query(Request& r);
  std::optional<Error> authenticate_v2_query(Request& r);
  std::optional<Error> payload_mode(Request& r, std::string_view content_sha256);
  const config::UserConfig* user_for(std::string_view access_key) const;
  // The SigV4 signing key of a user for a scope, if `signature` is the signature of
  // `string_to_sign` under it; nullopt otherwise. Derived once per user, day and region (four
  // HMACs, several microseconds) and then cached: every request of the day reuses it.
  std::optional<aws::SigningKey> verified_signing_key(const config::UserConfig& user,
                                                      const aws::SigningScope& scope,
                                                      std::string_view string_to_sign,
                                                      std::string_view signature);
  asio::awaitable<void> dispatch(Request& r);

  storage::ObjectStore& store_;
  config::S3Config config_;
  std::vector<config::UserConfig> users_;
  std::unordered_map<std::string, const config::UserConfig*> by_access_key_;
  std::string host_id_;  // x-amz-id-2
  ClientTokens client_tokens_;
  std::mutex keys_mutex_;
  std::unordered_map<std::string, aws::SigningKey> signing_keys_;  // "access/date/region/service"
};

// ---- operations (handlers_*.cc) ----
asio::awaitable<void> list_buckets(Service& s, Request& r);
asio::awaitable<void> create_bucket(Service& s, Request& r);
asio::awaitable<void> delete_bucket(Service& s, Request& r);
asio::awaitable<void> head_bucket(Service& s, Request& r);
asio::awaitable<void> get_bucket_location(Service& s, Request& r);
asio::awaitable<void> list_objects(Service& s, Request& r, bool v2);
asio::awaitable<void> bucket_subresource(Service& s, Request& r);  // versioning, acl, policy, ...

asio::awaitable<void> put_object(Service& s, Request& r);
asio::awaitable<void> get_object(Service& s, Request& r, bool head);
asio::awaitable<void> delete_object(Service& s, Request& r);
asio::awaitable<void> delete_objects(Service& s, Request& r);
asio::awaitable<void> copy_object(Service& s, Request& r);
asio::awaitable<void> object_subresource(Service& s, Request& r);  // acl, tagging

asio::awaitable<void> create_multipart_upload(Service& s, Request& r);
asio::awaitable<void> upload_part(Service& s, Request& r);
asio::awaitable<void> complete_multipart_upload(Service& s, Request& r);
asio::awaitable<void> abort_multipart_upload(Service& s, Request& r);
asio::awaitable<void> list_parts(Service& s, Request& r);
asio::awaitable<void> list_multipart_uploads(Service& s, Request& r);

// S3 Express One Zone (handlers_express.cc).
asio::awaitable<void> rename_object(Service& s, Request& r);  // PUT /bucket/key?renameObject
// PutObject with x-amz-write-offset-bytes (put_object hands it over once the bucket is known).
asio::awaitable<void> append_object(Service& s, Request& r, storage::BucketRecord bucket);

}  // namespace hots3::s3
