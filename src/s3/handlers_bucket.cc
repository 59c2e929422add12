// Bucket-level operations: CreateBucket, DeleteBucket, HeadBucket, GetBucketLocation, ListObjects
// (V1 and V2), and the bucket sub-resources hots3 answers.

#include "acl.h"
#include "body.h"
#include "conditions.h"
#include "copy_source.h"
#include "multipart_rules.h"
#include "names.h"
#include "object_spec.h"
#include "request_xml.h"
#include "s3_xml.h"
#include "service.h"
#include "time_format.h"
#include "upstream_view.h"

#include "hots3/common/digest.h"
#include "hots3/common/hex.h"
#include "hots3/common/text.h"
#include "hots3/common/units.h"

#include <charconv>

namespace hots3::s3 {

namespace {

// What a CreateBucket may ask for beyond a private bucket: nothing hots3 does not do.
std::optional<Error> check_bucket_options(const Request& r) {
  if (auto acl = r.header("x-amz-acl");
      acl && *acl != "private" && *acl != "bucket-owner-full-control") {
    return Error(Code::kNotImplemented, "Only the private canned ACL is supported.");
  }
  if (auto lock = r.header("x-amz-bucket-object-lock-enabled"); lock && iequals(*lock, "true"))
    return Error(Code::kNotImplemented, "Object Lock is not supported.");
  if (auto ownership = r.header("x-amz-object-ownership");
      ownership && *ownership != "BucketOwnerEnforced") {
    return Error(Code::kNotImplemented, "Only BucketOwnerEnforced object ownership is supported.");
  }
  return std::nullopt;
}

// With `region_check` the LocationConstraint must name this endpoint's region, as S3's regional
// endpoints require (none, or none given, is us-east-1; "EU" is eu-west-1); without it any is
// accepted (clients configured for another region sign for it too, and the data lives here
// either way).
std::optional<Error> check_location(const config::S3Config& config,
                                    const std::optional<std::string>& location) {
  if (!config.region_check) return std::nullopt;
  const std::string& here = config.region;
  const std::string wanted = location.value_or("");
  if (wanted == "us-east-1" && here == "us-east-1") return Error(Code::kInvalidLocationConstraint);
  const std::string region = wanted.empty() ? "us-east-1" : wanted == "EU" ? "eu-west-1" : wanted;
  if (region == here) return std::nullopt;
  return Error(Code::kIllegalLocationConstraint,
               "The " + (wanted.empty() ? std::string("unspecified") : wanted) +
                   " location constraint is incompatible for the region specific endpoint this "
                   "request was sent to.")
      .with("LocationConstraint", wanted);
}

// The optional CreateBucketConfiguration body. Sends the error and returns false on failure.
asio::awaitable<bool> read_configuration(Service& s, Request& r, BucketConfiguration& out) {
  auto reading = read_small_body(r);
  auto text = co_await std::move(reading);
  if (auto* e = std::get_if<Error>(&text)) {
    co_await s.send_error(r, std::move(*e));
    co_return false;
  }
  auto parsed = parse_create_bucket_configuration(std::get<std::string>(text));
  if (auto* e = std::get_if<Error>(&parsed)) {
    co_await s.send_error(r, std::move(*e));
    co_return false;
  }
  out = std::get<BucketConfiguration>(std::move(parsed));
  co_return true;
}

// A directory bucket's configuration (S3 Express One Zone): a Location of type AvailabilityZone
// naming the zone of the bucket's name, and a Bucket of type Directory.
std::optional<Error> check_directory_configuration(const BucketConfiguration& c,
                                                   std::string_view zone) {
  if (c.bucket_type != "Directory" || c.location_type != "AvailabilityZone") {
    return Error(Code::kInvalidRequest,
                 "A directory bucket is created with a CreateBucketConfiguration whose Location "
                 "Type is AvailabilityZone and whose Bucket Type is Directory.");
  }
  if (c.location_name != zone) {
    return Error(Code::kInvalidArgument,
                 "The Location Name must be the zone the bucket's name ends in.")
        .with("ArgumentName", "Location.Name")
        .with("ArgumentValue", c.location_name.value_or(""));
  }
  if (c.data_redundancy && c.data_redundancy != "SingleAvailabilityZone") {
    return Error(Code::kInvalidArgument, "DataRedundancy must be SingleAvailabilityZone.")
        .with("ArgumentName", "Bucket.DataRedundancy")
        .with("ArgumentValue", *c.data_redundancy);
  }
  return std::nullopt;
}

// A CreateBucketConfiguration for the bucket `name` (a directory bucket's when `zone` is set).
// A directory bucket's place is its zone, which hots3 takes as its own: no region is checked.
std::optional<Error> check_configuration(const config::S3Config& config, std::string_view name,
                                         std::optional<std::string_view> zone,
                                         const BucketConfiguration& c) {
  if (zone) return check_directory_configuration(c, *zone);
  if (c.bucket_type || c.location_type) {
    return Error(Code::kInvalidBucketName, "A directory bucket's name ends in --<zone>--x-s3.")
        .with("BucketName", std::string(name));
  }
  return check_location(config, c.location_constraint);
}

}  // namespace

asio::awaitable<void> create_bucket(Service& s, Request& r) {
  const std::optional<std::string_view> zone = directory_bucket_zone(r.bucket);
  if (!zone && !valid_bucket_name(r.bucket))
    co_return co_await s.send_error(r,
                                    Error(Code::kInvalidBucketName).with("BucketName", r.bucket));
  if (auto e = check_bucket_options(r)) co_return co_await s.send_error(r, std::move(*e));
  BucketConfiguration configuration;
  const bool configuration_read = co_await read_configuration(s, r, configuration);
  if (!configuration_read) co_return;
  if (auto e = check_configuration(s.config(), r.bucket, zone, configuration))
    co_return co_await s.send_error(r, std::move(*e));
  auto mine = [&s, &r] {
    auto existing = s.store().find_bucket(r.bucket);
    return existing && *existing && (*existing)->owner == r.auth.user->name;
  };
  // The owner re-creating its bucket gets 200 below, as ever (rclone does it before every
  // upload); anyone else without the permission is refused before the store is asked.
  if (!may_create_bucket(*r.auth.user, r.bucket) && !mine()) {
    co_return co_await s.send_error(
        r, Error(Code::kAccessDenied, "You may not create a bucket of this name."));
  }
  auto created = co_await s.store().create_bucket(r.bucket, r.auth.user->name);
  if (!created) {
    if (created.error() == errc::kAlreadyExists) {
      // S3 answers the owner's re-creation with 200 in us-east-1 "for legacy compatibility"
      // (rclone creates the bucket before every upload), BucketAlreadyOwnedByYou elsewhere.
      const bool owned = mine();
      if (!owned || s.config().region != "us-east-1") {
        co_return co_await s.send_error(
            r, Error(owned ? Code::kBucketAlreadyOwnedByYou : Code::kBucketAlreadyExists)
                   .with("BucketName", r.bucket));
      }
    } else {
      co_return co_await s.send_error(r, from_errc(created.error()));
    }
  }
  http::Response head = s.response(200);
  head.add("Location", "/" + r.bucket);
  co_await s.send_empty(r, 200, std::move(head));
}

asio::awaitable<void> delete_bucket(Service& s, Request& r) {
  auto bucket = co_await s.bucket_for(r, Access::kOwner);
  if (!bucket) co_return;
  auto deleted = co_await s.store().delete_bucket(r.bucket);
  if (!deleted) {
    if (deleted.error() == errc::kConflict)
      co_return co_await s.send_error(r, Error(Code::kBucketNotEmpty).with("BucketName", r.bucket));
    if (deleted.error() == errc::kNotFound)
      co_return co_await s.send_error(r, Error(Code::kNoSuchBucket).with("BucketName", r.bucket));
    co_return co_await s.send_error(r, from_errc(deleted.error()));
  }
  co_await s.send_empty(r, 204, s.response(204));
}

asio::awaitable<void> head_bucket(Service& s, Request& r) {
  auto bucket = co_await s.bucket_for(r, Access::kRead);
  if (!bucket) co_return;
  http::Response head = s.response(200);
  head.add("x-amz-bucket-region", s.config().region);
  head.add("x-amz-access-point-alias", "false");
  if (const auto zone = directory_bucket_zone(r.bucket)) {
    head.add("x-amz-bucket-location-type", "AvailabilityZone");
    head.add("x-amz-bucket-location-name", std::string(*zone));
  }
  co_await s.send_empty(r, 200, std::move(head));
}

asio::awaitable<void> get_bucket_location(Service& s, Request& r) {
  auto bucket = co_await s.bucket_for(r, Access::kRead);
  if (!bucket) co_return;
  // us-east-1 is the empty constraint, as S3 answers.
  XmlWriter xml("LocationConstraint");
  if (s.config().region != "us-east-1") xml.text(s.config().region);
  std::string body = xml.finish();
  co_await s.send_xml(r, 200, std::move(body));
}

namespace {

// ListObjects (V1) and ListObjectsV2 parameters. Errors as S3 reports them.
struct ListParameters {
  bool v2 = false;
  storage::ListQuery query;
  bool url_encoding = false;
  std::uint32_t max_keys = 1000;
  std::string continuation;  // V2: as the client sent it
  std::string start_after;   // V2
  std::string marker;        // V1
  bool fetch_owner = true;   // V1 always; V2 when asked
};

// Where the listing starts: V2's continuation-token (our base64 of the last key) or else
// start-after, which is echoed either way; V1's marker.
std::optional<Error> read_list_position(const Request& r, ListParameters& p) {
  if (!p.v2) {
    if (const std::string* m = r.param("marker")) p.marker = p.query.start_after = *m;
    return std::nullopt;
  }
  if (const std::string* after = r.param("start-after"))
    p.start_after = p.query.start_after = *after;
  if (const std::string* token = r.param("continuation-token")) {
    auto decoded = aws::base64_decode(*token);
    if (!decoded || token->empty()) {
      return Error(Code::kInvalidArgument, "The continuation token provided is incorrect")
          .with("ArgumentName", "continuation-token");
    }
    p.continuation = *token;
    if (*decoded > p.query.start_after) p.query.start_after = *decoded;
  }
  return std::nullopt;
}

// What S3 Express lists in a directory bucket: ListObjectsV2 only, '/' the only delimiter, and
// prefixes that end in it (a directory). (Its StartAfter, which S3 Express refuses, is honoured.)
std::optional<Error> directory_listing(const ListParameters& p) {
  if (!p.v2) {
    return Error(Code::kNotSupported,
                 "ListObjects is not supported for directory buckets; use ListObjectsV2.");
  }
  if (!p.query.delimiter.empty() && p.query.delimiter != "/") {
    return Error(Code::kInvalidArgument, "A directory bucket's only delimiter is '/'.")
        .with("ArgumentName", "delimiter")
        .with("ArgumentValue", p.query.delimiter.substr(0, 256));
  }
  if (!p.query.prefix.empty() && !p.query.prefix.ends_with('/')) {
    return Error(Code::kInvalidArgument,
                 "This bucket does not support a prefix that does not end in a delimiter. Specify "
                 "a prefix path ending with a delimiter and try again.")
        .with("ArgumentName", "prefix")
        .with("ArgumentValue", p.query.prefix.substr(0, 256));
  }
  return std::nullopt;
}

std::variant<ListParameters, Error> list_parameters(const Request& r, bool v2) {
  ListParameters p;
  p.v2 = v2;
  if (const std::string* v = r.param("prefix")) p.query.prefix = *v;
  if (const std::string* v = r.param("delimiter")) p.query.delimiter = *v;
  if (const std::string* v = r.param("encoding-type")) {
    if (*v != "url")
      return Error(Code::kInvalidArgument, "Invalid Encoding Method specified in Request")
          .with("ArgumentName", "encoding-type");
    p.url_encoding = true;
  }
  if (const std::string* v = r.param("max-keys")) {
    long long n = 0;
    auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), n);
    if (ec != std::errc{} || end != v->data() + v->size() || n < 0) {
      return Error(Code::kInvalidArgument,
                   "Provided max-keys not an integer or within integer range")
          .with("ArgumentName", "max-keys")
          .with("ArgumentValue", *v);
    }
    p.max_keys = static_cast<std::uint32_t>(std::min<long long>(n, 1000));
  }
  p.query.max_keys = p.max_keys;
  if (auto e = read_list_position(r, p)) return std::move(*e);
  const std::string* fetch_owner = r.param("fetch-owner");
  p.fetch_owner = !v2 || (fetch_owner != nullptr && *fetch_owner == "true");
  if (is_directory_bucket(r.bucket)) {
    if (auto e = directory_listing(p)) return std::move(*e);
  }
  return p;
}

std::string list_result(const ListParameters& p, const storage::BucketRecord& bucket,
                        const storage::ListPage& page) {
  auto text = [&](std::string_view value) {
    return p.url_encoding ? aws::uri_encode(value, false) : std::string(value);
  };
  XmlWriter xml("ListBucketResult");
  xml.element("Name", bucket.name);
  // With encoding-type=url, V1's Prefix goes back as given. The SDKs decode exactly the fields S3
  // encodes (V1: Delimiter, Marker, NextMarker, keys, common prefixes; V2: Delimiter, Prefix,
  // StartAfter, keys, common prefixes): one encoded beyond those reaches the user still encoded.
  xml.element("Prefix", p.v2 ? text(p.query.prefix) : p.query.prefix);
  if (p.v2) {
    if (!p.continuation.empty()) xml.element("ContinuationToken", p.continuation);
    if (!p.start_after.empty()) xml.element("StartAfter", text(p.start_after));
    xml.element("KeyCount",
                static_cast<std::uint64_t>(page.objects.size() + page.common_prefixes.size()));
  } else {
    xml.element("Marker", text(p.marker));
  }
  xml.element("MaxKeys", static_cast<std::uint64_t>(p.max_keys));
  if (!p.query.delimiter.empty()) xml.element("Delimiter", text(p.query.delimiter));
  if (p.url_encoding) xml.element("EncodingType", "url");
  xml.element("IsTruncated", page.truncated);
  if (page.truncated) {
    if (p.v2) {
      xml.element("NextContinuationToken", aws::base64_encode(page.last));
    } else if (!p.query.delimiter.empty()) {
      // S3 sends NextMarker only with a delimiter; without one, the last key is the marker.
      xml.element("NextMarker", text(page.last));
    }
  }
  for (const auto& o : page.objects) {
    xml.open("Contents");
    xml.element("Key", text(o.key));
    xml.element("LastModified", iso8601(o.created_ms));
    xml.element("ETag", quoted(o.etag));
    if (o.checksum_algorithm) xml.element("ChecksumAlgorithm", *o.checksum_algorithm);
    xml.element("Size", o.size_bytes);
    if (p.fetch_owner) write_owner(xml, bucket.owner);
    xml.element("StorageClass", storage_class(bucket.name));
    xml.close();
  }
  for (const auto& prefix : page.common_prefixes) {
    xml.open("CommonPrefixes");
    xml.element("Prefix", text(prefix));
    xml.close();
  }
  return xml.finish();
}

}  // namespace

asio::awaitable<void> list_objects(Service& s, Request& r, bool v2) {
  auto bucket = co_await s.bucket_for(r, Access::kRead);
  if (!bucket) co_return;
  auto parsed = list_parameters(r, v2);
  if (auto* e = std::get_if<Error>(&parsed)) co_return co_await s.send_error(r, std::move(*e));
  const ListParameters& p = std::get<ListParameters>(parsed);
  storage::ListPage page;
  if (bucket->tier == storage::BucketTier::kCache && s.read_through() != nullptr &&
      !s.read_through()->freshness(bucket->id, {}).list_local) {
    auto listing = list_upstream(s, *bucket, p.query);
    auto listed = co_await std::move(listing);
    if (auto* e = std::get_if<Error>(&listed)) co_return co_await s.send_error(r, std::move(*e));
    page = std::get<storage::ListPage>(std::move(listed));
  } else {
    auto listed = co_await s.store().list_objects(bucket->id, p.query);
    if (!listed) co_return co_await s.send_error(r, from_errc(listed.error()));
    page = std::move(*listed);
  }
  // max-keys=0 asks for nothing and gets a complete, empty page (S3: IsTruncated false, no
  // token), whatever the bucket holds; a token past "" would only restart the listing.
  if (p.max_keys == 0) page.truncated = false;
  co_await s.send_xml(r, 200, list_result(p, *bucket, page));
}

asio::awaitable<void> bucket_subresource(Service& s, Request& r) {
  const bool write = r.head.method != http::Method::kGet;
  auto bucket = co_await s.bucket_for(r, write ? Access::kOwner : Access::kRead);
  if (!bucket) co_return;
  if (r.head.method == http::Method::kGet) {
    if (r.has_param("versioning")) {
      // Versioning has never been enabled on a hots3 bucket: S3 answers with an empty element.
      co_return co_await s.send_xml(r, 200, XmlWriter("VersioningConfiguration").finish());
    }
    if (r.has_param("acl")) {
      co_return co_await s.send_xml(r, 200, owner_full_control_acl(bucket->owner));
    }
    if (r.has_param("policy"))
      co_return co_await s.send_error(
          r, Error(Code::kNoSuchBucketPolicy).with("BucketName", r.bucket));
    if (r.has_param("cors"))
      co_return co_await s.send_error(
          r, Error(Code::kNoSuchCORSConfiguration).with("BucketName", r.bucket));
    if (r.has_param("lifecycle"))
      co_return co_await s.send_error(
          r, Error(Code::kNoSuchLifecycleConfiguration).with("BucketName", r.bucket));
    if (r.has_param("tagging"))
      co_return co_await s.send_error(r, Error(Code::kNoSuchTagSet).with("BucketName", r.bucket));
    if (r.has_param("encryption")) {
      co_return co_await s.send_error(
          r, Error(Code::kServerSideEncryptionConfigurationNotFound).with("BucketName", r.bucket));
    }
  }
  if (r.head.method == http::Method::kPut && r.has_param("acl")) {
    // The only ACL a hots3 bucket has is "owner: full control"; setting exactly that is true.
    auto acl = r.header("x-amz-acl");
    if (acl && (*acl == "private" || *acl == "bucket-owner-full-control") && !r.head.has_body()) {
      co_return co_await s.send_empty(r, 200, s.response(200));
    }
  }
  co_await s.send_error(
      r, Error(Code::kNotImplemented, "This bucket sub-resource is not supported by hots3."));
}

}  // namespace hots3::s3
