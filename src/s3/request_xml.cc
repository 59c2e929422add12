#include "request_xml.h"

#include "acl.h"
#include "conditions.h"
#include "copy_source.h"
#include "multipart_rules.h"
#include "names.h"
#include "object_spec.h"
#include "s3_xml.h"
#include "time_format.h"

#include "hots3/common/text.h"

#include <charconv>
#include <system_error>

namespace hots3::s3 {

std::variant<DeleteRequest, Error> parse_delete_request(std::string_view body) {
  auto doc = XmlDocument::parse(body);
  if (!doc || doc->root().name() != "Delete") return Error(Code::kMalformedXML);
  DeleteRequest request;
  for (const XmlElement& e : doc->root().children()) {
    if (e.name() == "Quiet") {
      const std::string text = e.text();
      if (text != "true" && text != "false") return Error(Code::kMalformedXML);
      request.quiet = text == "true";
    } else if (e.name() == "Object") {
      auto key = e.child("Key");
      if (!key) return Error(Code::kMalformedXML);
      DeleteRequest::Object object{key->text(), std::nullopt, {}};
      if (auto v = e.child("VersionId")) object.version_id = v->text();
      if (auto etag = e.child("ETag")) object.condition.if_match = unquoted(etag->text());
      if (auto modified = e.child("LastModifiedTime")) {
        auto ms = parse_iso8601(modified->text());
        if (!ms) return Error(Code::kMalformedXML);
        object.condition.last_modified_s = *ms / 1000;
      }
      if (auto size = e.child("Size")) {
        object.condition.size_bytes = parse_decimal<std::uint64_t>(size->text());
        if (!object.condition.size_bytes) return Error(Code::kMalformedXML);
      }
      request.objects.push_back(std::move(object));
      if (request.objects.size() > 1000) return Error(Code::kMalformedXML);
    }
  }
  if (request.objects.empty()) return Error(Code::kMalformedXML);
  return request;
}

std::variant<std::vector<ListedPart>, Error> parse_complete_request(std::string_view body) {
  auto doc = XmlDocument::parse(body);
  if (!doc || doc->root().name() != "CompleteMultipartUpload") return Error(Code::kMalformedXML);
  std::vector<ListedPart> listed;
  for (const XmlElement& part : doc->root().children()) {
    if (part.name() != "Part") continue;
    auto number = part.child("PartNumber");
    auto etag = part.child("ETag");
    if (!number || !etag) return Error(Code::kMalformedXML);
    const auto value = parse_decimal<std::uint32_t>(number->text());
    if (!value) return Error(Code::kMalformedXML);
    ListedPart entry{*value, unquoted(etag->text()), {}};
    for (const XmlElement& field : part.children()) {
      const std::string_view name = field.name();
      if (!name.starts_with("Checksum") || name == "ChecksumType") continue;
      auto algorithm = aws::parse_checksum_algorithm(name.substr(8));
      if (!algorithm) return Error(Code::kMalformedXML);
      entry.checksums.emplace_back(*algorithm, field.text());
    }
    listed.push_back(std::move(entry));
  }
  if (listed.empty()) {
    return Error(Code::kMalformedXML,
                 "The XML you provided was not well-formed or did not validate against our "
                 "published schema: no parts");
  }
  return listed;
}

std::variant<BucketConfiguration, Error> parse_create_bucket_configuration(std::string_view body) {
  BucketConfiguration c;
  if (body.empty()) return c;
  auto doc = XmlDocument::parse(body);
  if (!doc || doc->root().name() != "CreateBucketConfiguration") return Error(Code::kMalformedXML);
  const XmlElement root = doc->root();
  if (auto element = root.child("LocationConstraint")) c.location_constraint = element->text();
  const auto text_of = [](const std::optional<XmlElement>& parent, std::string_view name) {
    std::optional<std::string> out;
    if (!parent) return out;
    if (auto element = parent->child(name)) out = element->text();
    return out;
  };
  const auto location = root.child("Location");
  const auto bucket = root.child("Bucket");
  c.location_type = text_of(location, "Type");
  c.location_name = text_of(location, "Name");
  c.bucket_type = text_of(bucket, "Type");
  c.data_redundancy = text_of(bucket, "DataRedundancy");
  if (c.location_constraint && (location || bucket)) return Error(Code::kMalformedXML);
  return c;
}

std::optional<Error> check_restore_request(std::string_view body) {
  if (body.empty()) return std::nullopt;
  auto doc = XmlDocument::parse(body);
  if (!doc || doc->root().name() != "RestoreRequest") return Error(Code::kMalformedXML);
  if (auto days = doc->root().child("Days")) {
    const std::string text = days->text();
    std::uint32_t n = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    if (ec != std::errc{} || end != text.data() + text.size() || n == 0)
      return Error(Code::kMalformedXML, "Days is a positive number of days.");
  }
  if (auto type = doc->root().child("Type"); type && type->text() == "SELECT")
    return Error(Code::kNotImplemented, "hots3 does not run SELECT restore requests.");
  return std::nullopt;
}

std::variant<bool, Error> acl_is_owner_full_control(std::string_view body,
                                                    std::string_view owner_id) {
  auto doc = XmlDocument::parse(body);
  if (!doc) return Error(Code::kMalformedXML);
  bool owner_only = true;
  if (auto list = doc->root().child("AccessControlList")) {
    for (const XmlElement& grant : list->children()) {
      auto permission = grant.child("Permission");
      auto grantee = grant.child("Grantee");
      auto id = grantee ? grantee->child("ID") : std::nullopt;
      if (!permission || permission->text() != "FULL_CONTROL" || !id || id->text() != owner_id)
        owner_only = false;
    }
  }
  return owner_only;
}

}  // namespace hots3::s3
