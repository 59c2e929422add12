// Routing: which operation a request is, by its method, by what its path names (the service, a
// bucket, an object) and by its sub-resource parameter.

#include "router.h"

#include <algorithm>
#include <array>
#include <iterator>

namespace hots3::s3 {

// Routing is an allow-list. S3 picks an operation by the method, by what the path names (the
// service, a bucket, an object) and by a sub-resource parameter (?acl, ?uploads, ?metadataTable,
// ...). Every operation hots3 implements is a row of kRoutes. A request naming a sub-resource
// that no row takes for its method answers NotImplemented and never falls through to the plain
// operation: DELETE /bucket?metadataTable taken as DeleteBucket would delete the bucket, PUT
// /bucket/key?retention taken as PutObject would overwrite the object. Parameters that are not
// sub-resources (list-type, prefix, x-id=PutObject, a typo) select nothing and are left to the
// operation, which ignores what it does not know, as S3 does.

namespace {

enum class Target : std::uint8_t { kService, kBucket, kObject };

struct Route {
  http::Method method;
  Target target;
  std::string_view subresource;  // "" = none
  Operation operation;
  std::string_view name;  // the S3 operation's (or hots3's own), as metrics count requests
};

// Every sub-resource of the S3 API (the REST paths of its operations), implemented or not.
// A request naming one of these is routed by it; hots3 implements the ones in kRoutes.
constexpr std::string_view kSubresources[] = {
    "abac", "accelerate", "acl", "analytics", "annotation", "attributes", "cors", "delete",
    "encryption", "intelligent-tiering", "inventory", "legal-hold", "lifecycle", "location",
    "logging", "metadataAnnotationTable", "metadataConfiguration", "metadataInventoryTable",
    "metadataJournalTable", "metadataTable", "metrics", "notification", "object-lock",
    "ownershipControls", "policy", "policyStatus", "publicAccessBlock", "renameObject",
    "replication", "requestPayment", "restore", "retention", "select", "session", "tagging",
    "torrent", "uploadId", "uploads", "versioning", "versions", "website",
    // hots3's own
    "x-hots3-adopt", "x-hots3-buckets", "x-hots3-clock", "x-hots3-evict", "x-hots3-flush",
    "x-hots3-lost", "x-hots3-parked", "x-hots3-pin", "x-hots3-prefetch", "x-hots3-status",
    "x-hots3-unpin", "x-hots3-users"};

asio::awaitable<void> list_objects_v1_or_v2(Service& s, Request& r) {
  const std::string* list_type = r.param("list-type");
  co_await list_objects(s, r, list_type != nullptr && *list_type == "2");
}
asio::awaitable<void> get_object_body(Service& s, Request& r) { co_await get_object(s, r, false); }
asio::awaitable<void> head_object(Service& s, Request& r) { co_await get_object(s, r, true); }
// PUT /bucket/key: CopyObject when x-amz-copy-source names a source, else PutObject (which
// takes x-amz-write-offset-bytes, an append, as well).
asio::awaitable<void> put_or_copy_object(Service& s, Request& r) {
  if (r.header("x-amz-copy-source")) co_return co_await copy_object(s, r);
  co_await put_object(s, r);
}

using http::Method;
constexpr Route kRoutes[] = {
    {Method::kGet, Target::kService, "", list_buckets_or_directory_buckets, "ListBuckets"},
    {Method::kPost, Target::kService, "x-hots3-clock", advance_session_clock,
     "MoveSessionClock"},  // test_hooks
    {Method::kGet, Target::kService, "x-hots3-status", admin_status, "AdminStatus"},
    {Method::kGet, Target::kService, "x-hots3-users", admin_users, "AdminUsers"},
    {Method::kGet, Target::kService, "x-hots3-buckets", admin_buckets, "AdminBuckets"},

    {Method::kGet, Target::kBucket, "", list_objects_v1_or_v2, "ListObjects"},
    {Method::kGet, Target::kBucket, "location", get_bucket_location, "GetBucketLocation"},
    {Method::kGet, Target::kBucket, "uploads", list_multipart_uploads, "ListMultipartUploads"},
    {Method::kGet, Target::kBucket, "session", create_session,
     "CreateSession"},  // directory buckets
    // Bucket configuration hots3 does not have: answered truthfully (none, owner only).
    {Method::kGet, Target::kBucket, "acl", bucket_subresource, "GetBucketAcl"},
    {Method::kGet, Target::kBucket, "versioning", bucket_subresource, "GetBucketVersioning"},
    {Method::kGet, Target::kBucket, "policy", bucket_subresource, "GetBucketPolicy"},
    {Method::kGet, Target::kBucket, "cors", bucket_subresource, "GetBucketCors"},
    {Method::kGet, Target::kBucket, "lifecycle", bucket_subresource, "GetBucketLifecycle"},
    {Method::kGet, Target::kBucket, "tagging", bucket_subresource, "GetBucketTagging"},
    {Method::kGet, Target::kBucket, "encryption", bucket_subresource, "GetBucketEncryption"},
    {Method::kHead, Target::kBucket, "", head_bucket, "HeadBucket"},
    {Method::kPut, Target::kBucket, "", create_bucket, "CreateBucket"},
    {Method::kPut, Target::kBucket, "acl", bucket_subresource,
     "PutBucketAcl"},  // the owner-only ACL it has
    {Method::kDelete, Target::kBucket, "", delete_bucket, "DeleteBucket"},
    {Method::kPost, Target::kBucket, "delete", delete_objects, "DeleteObjects"},
    {Method::kPost, Target::kBucket, "x-hots3-flush", flush_bucket,
     "TierFlush"},  // write-back buckets
    {Method::kPost, Target::kBucket, "x-hots3-evict", evict_bucket, "TierEvict"},  // bound buckets
    {Method::kGet, Target::kBucket, "x-hots3-parked", parked_jobs, "TierParked"},  // bound buckets
    {Method::kPost, Target::kBucket, "x-hots3-adopt", adopt_keys, "TierAdopt"},    // bound buckets
    {Method::kPost, Target::kBucket, "x-hots3-lost", settle_lost_keys,
     "TierRecover"},  // tier recover
    {Method::kPost, Target::kBucket, "x-hots3-prefetch", start_prefetch,
     "TierPrefetch"},  // bound buckets
    {Method::kGet, Target::kBucket, "x-hots3-prefetch", prefetch_status,
     "TierPrefetchStatus"},                                                      // bound buckets
    {Method::kPost, Target::kBucket, "x-hots3-pin", pin_keys, "TierPin"},        // bound buckets
    {Method::kPost, Target::kBucket, "x-hots3-unpin", unpin_keys, "TierUnpin"},  // bound buckets

    {Method::kGet, Target::kObject, "", get_object_body, "GetObject"},
    {Method::kHead, Target::kObject, "", head_object, "HeadObject"},
    {Method::kPut, Target::kObject, "", put_or_copy_object, "PutObject"},
    {Method::kDelete, Target::kObject, "", delete_object, "DeleteObject"},
    {Method::kGet, Target::kObject, "acl", object_subresource, "GetObjectAcl"},
    {Method::kPut, Target::kObject, "acl", object_subresource,
     "PutObjectAcl"},  // the owner-only ACL it has
    {Method::kGet, Target::kObject, "tagging", object_subresource, "GetObjectTagging"},
    {Method::kGet, Target::kObject, "attributes", get_object_attributes, "GetObjectAttributes"},
    {Method::kPost, Target::kObject, "restore", restore_object,
     "RestoreObject"},  // of an evicted object
    {Method::kPut, Target::kObject, "renameObject", rename_object, "RenameObject"},  // S3 Express
    {Method::kPost, Target::kObject, "uploads", create_multipart_upload, "CreateMultipartUpload"},
    {Method::kPut, Target::kObject, "uploadId", upload_part, "UploadPart"},  // and UploadPartCopy
    {Method::kPost, Target::kObject, "uploadId", complete_multipart_upload,
     "CompleteMultipartUpload"},
    {Method::kDelete, Target::kObject, "uploadId", abort_multipart_upload, "AbortMultipartUpload"},
    {Method::kGet, Target::kObject, "uploadId", list_parts, "ListParts"},
};

constexpr auto kOperationNames = [] {
  std::array<std::string_view, std::size(kRoutes) + 2> names{};
  for (std::size_t i = 0; i < std::size(kRoutes); ++i) names[i] = kRoutes[i].name;
  names[std::size(kRoutes)] = "GetMetrics";
  names.back() = "none";
  return names;
}();

}  // namespace

std::span<const std::string_view> operation_names() { return kOperationNames; }
std::size_t metrics_scrape() { return std::size(kRoutes); }
std::size_t not_routed() { return std::size(kRoutes) + 1; }

std::variant<Routed, Error> route(const Request& r) {
  const Target target = r.bucket.empty() ? Target::kService
                        : r.key.empty()  ? Target::kBucket
                                         : Target::kObject;
  std::string_view subresource;
  for (const auto& p : r.query) {
    if (std::find(std::begin(kSubresources), std::end(kSubresources), p.name) ==
        std::end(kSubresources))
      continue;
    if (!subresource.empty() && subresource != p.name) {
      return Error(Code::kNotImplemented, "A request with both the " + std::string(subresource) +
                                              " and the " + p.name +
                                              " sub-resource is not supported.");
    }
    subresource = p.name;
  }
  // UploadPart names its upload; a partNumber without one is still a part upload (to no upload:
  // NoSuchUpload), never a PutObject that would replace the object.
  if (subresource.empty() && r.head.method == Method::kPut && target == Target::kObject &&
      r.has_param("partNumber")) {
    subresource = "uploadId";
  }
  for (std::size_t i = 0; i < std::size(kRoutes); ++i) {
    const Route& row = kRoutes[i];
    if (row.target == target && row.subresource == subresource && row.method == r.head.method)
      return Routed{row.operation, i};
  }
  if (!subresource.empty()) {
    return Error(Code::kNotImplemented, "The " + std::string(subresource) +
                                            " sub-resource is not implemented by hots3 for " +
                                            std::string(r.head.method_string) + ".");
  }
  // POST with no sub-resource is an HTML form upload (PostObject), which hots3 does not do.
  if (r.head.method == Method::kPost)
    return Error(Code::kNotImplemented, "This POST request is not supported.");
  return Error(Code::kMethodNotAllowed);
}

}  // namespace hots3::s3
