#include "errors.h"

#include "s3_xml.h"

#include <array>

namespace hots3::s3 {
namespace {

struct Entry {
  Code code;
  std::string_view name;
  unsigned status;
  std::string_view message;
};

// Codes, statuses and messages as Amazon S3 documents them (Error Responses, List of error
// codes). InsufficientStorage is ours: S3 never runs out of space, a local device does.
constexpr std::array kTable = {
    Entry{Code::kAccessDenied, "AccessDenied", 403, "Access Denied"},
    Entry{Code::kAuthorizationHeaderMalformed, "AuthorizationHeaderMalformed", 400,
          "The authorization header is malformed."},
    Entry{Code::kAuthorizationQueryParametersError, "AuthorizationQueryParametersError", 400,
          "Error parsing the X-Amz-Credential parameter."},
    Entry{Code::kBadDigest, "BadDigest", 400,
          "The Content-MD5 you specified did not match what we received."},
    Entry{Code::kBucketAlreadyExists, "BucketAlreadyExists", 409,
          "The requested bucket name is not available. The bucket namespace is shared by all users "
          "of the "
          "system. Please select a different name and try again."},
    Entry{Code::kBucketAlreadyOwnedByYou, "BucketAlreadyOwnedByYou", 409,
          "Your previous request to create the named bucket succeeded and you already own it."},
    Entry{Code::kBucketNotEmpty, "BucketNotEmpty", 409,
          "The bucket you tried to delete is not empty"},
    Entry{Code::kConditionalRequestConflict, "ConditionalRequestConflict", 409,
          "The conditional request cannot succeed due to a conflicting operation against this "
          "resource."},
    Entry{Code::kEntityTooLarge, "EntityTooLarge", 400,
          "Your proposed upload exceeds the maximum allowed object size."},
    Entry{Code::kEntityTooSmall, "EntityTooSmall", 400,
          "Your proposed upload is smaller than the minimum allowed object size."},
    Entry{Code::kExpiredPresignedRequest, "AccessDenied", 403, "Request has expired"},
    Entry{Code::kIllegalLocationConstraint, "IllegalLocationConstraintException", 400,
          "The specified location constraint is not valid."},
    Entry{Code::kIncompleteBody, "IncompleteBody", 400,
          "You did not provide the number of bytes specified by the Content-Length HTTP header."},
    Entry{Code::kInsufficientStorage, "InsufficientStorage", 507,
          "The device has no space left for this object."},
    Entry{Code::kInternalError, "InternalError", 500,
          "We encountered an internal error. Please try again."},
    Entry{Code::kInvalidAccessKeyId, "InvalidAccessKeyId", 403,
          "The AWS Access Key Id you provided does not exist in our records."},
    Entry{Code::kInvalidArgument, "InvalidArgument", 400, "Invalid Argument"},
    Entry{Code::kInvalidBucketName, "InvalidBucketName", 400, "The specified bucket is not valid."},
    Entry{Code::kInvalidDigest, "InvalidDigest", 400,
          "The Content-MD5 you specified is not valid."},
    Entry{Code::kInvalidLocationConstraint, "InvalidLocationConstraint", 400,
          "The specified location-constraint is not valid"},
    Entry{Code::kInvalidPart, "InvalidPart", 400,
          "One or more of the specified parts could not be found. The part may not have been "
          "uploaded, or the "
          "specified entity tag may not match the part's entity tag."},
    Entry{Code::kInvalidPartOrder, "InvalidPartOrder", 400,
          "The list of parts was not in ascending order. Parts must be ordered by part number."},
    Entry{Code::kInvalidRange, "InvalidRange", 416, "The requested range is not satisfiable"},
    Entry{Code::kInvalidRequest, "InvalidRequest", 400, "Invalid Request"},
    Entry{Code::kInvalidURI, "InvalidURI", 400, "Couldn't parse the specified URI."},
    Entry{Code::kKeyTooLong, "KeyTooLongError", 400, "Your key is too long"},
    Entry{Code::kMalformedXML, "MalformedXML", 400,
          "The XML you provided was not well-formed or did not validate against our published "
          "schema"},
    Entry{Code::kMetadataTooLarge, "MetadataTooLarge", 400,
          "Your metadata headers exceed the maximum allowed metadata size."},
    Entry{Code::kMethodNotAllowed, "MethodNotAllowed", 405,
          "The specified method is not allowed against this resource."},
    Entry{Code::kMissingContentLength, "MissingContentLength", 411,
          "You must provide the Content-Length HTTP header."},
    Entry{Code::kNoSuchBucket, "NoSuchBucket", 404, "The specified bucket does not exist"},
    Entry{Code::kNoSuchBucketPolicy, "NoSuchBucketPolicy", 404, "The bucket policy does not exist"},
    Entry{Code::kNoSuchCORSConfiguration, "NoSuchCORSConfiguration", 404,
          "The CORS configuration does not exist"},
    Entry{Code::kNoSuchKey, "NoSuchKey", 404, "The specified key does not exist."},
    Entry{Code::kNoSuchLifecycleConfiguration, "NoSuchLifecycleConfiguration", 404,
          "The lifecycle configuration does not exist"},
    Entry{Code::kNoSuchTagSet, "NoSuchTagSet", 404, "The TagSet does not exist"},
    Entry{Code::kNoSuchUpload, "NoSuchUpload", 404,
          "The specified upload does not exist. The upload ID may be invalid, or the upload may "
          "have been "
          "aborted or completed."},
    Entry{Code::kNoSuchVersion, "NoSuchVersion", 404, "The specified version does not exist."},
    Entry{Code::kNotImplemented, "NotImplemented", 501,
          "A header you provided implies functionality that is not implemented"},
    Entry{Code::kNotModified, "NotModified", 304, "Not Modified"},
    Entry{Code::kPreconditionFailed, "PreconditionFailed", 412,
          "At least one of the pre-conditions you specified did not hold"},
    Entry{Code::kRequestHeaderSectionTooLarge, "RequestHeaderSectionTooLarge", 400,
          "Your request header section exceeds the maximum allowed size."},
    Entry{Code::kRequestTimeTooSkewed, "RequestTimeTooSkewed", 403,
          "The difference between the request time and the current time is too large."},
    Entry{Code::kRequestTimeout, "RequestTimeout", 400,
          "Your socket connection to the server was not read from or written to within the timeout "
          "period."},
    Entry{Code::kServerSideEncryptionConfigurationNotFound,
          "ServerSideEncryptionConfigurationNotFoundError", 404,
          "The server side encryption configuration was not found"},
    Entry{Code::kServiceUnavailable, "ServiceUnavailable", 503,
          "Service is unable to handle request."},
    Entry{Code::kSignatureDoesNotMatch, "SignatureDoesNotMatch", 403,
          "The request signature we calculated does not match the signature you provided. Check "
          "your key and "
          "signing method."},
    Entry{Code::kSlowDown, "SlowDown", 503, "Please reduce your request rate."},
    Entry{Code::kXAmzContentSHA256Mismatch, "XAmzContentSHA256Mismatch", 400,
          "The provided 'x-amz-content-sha256' header does not match what was computed."},
    // S3 Express One Zone (RenameObject, appends); after the others so that kTable[14] stays put.
    Entry{Code::kIdempotencyParameterMismatch, "IdempotencyParameterMismatch", 400,
          "Parameters on this idempotent request are inconsistent with parameters used in previous "
          "request(s)."},
    Entry{Code::kInvalidWriteOffset, "InvalidWriteOffset", 400,
          "The write offset value that you specified does not match the current object size."},
    Entry{Code::kTooManyParts, "TooManyParts", 400,
          "You have attempted to add more parts than the maximum of 10000 that are allowed for "
          "this object."},
    Entry{Code::kInvalidPartNumber, "InvalidPartNumber", 416,
          "The requested partnumber is not satisfiable"},
    Entry{Code::kRestoreAlreadyInProgress, "RestoreAlreadyInProgress", 409,
          "Object restore is already in progress"},
    Entry{Code::kPinLimitExceeded, "PinLimitExceeded", 409,
          "The pin would pass the bytes the bucket's pins may hold"},
    Entry{Code::kPrefetchTooLarge, "PrefetchTooLarge", 409,
          "The objects to fetch would not fit in the device's free and evictable space"},
    Entry{Code::kExpiredToken, "ExpiredToken", 400, "The provided token has expired."},
    Entry{Code::kInvalidToken, "InvalidToken", 400,
          "The provided token is malformed or otherwise invalid."},
    Entry{Code::kNotSupported, "NotSupported", 400,
          "The request is not supported for this type of bucket."},
    Entry{Code::kInvalidStorageClass, "InvalidStorageClass", 400,
          "The storage class you specified is not valid"},
};

constexpr std::size_t kInternalErrorAt = [] {
  for (std::size_t i = 0; i < kTable.size(); ++i) {
    if (kTable[i].code == Code::kInternalError) return i;
  }
  return kTable.size();
}();
static_assert(kInternalErrorAt < kTable.size());

const Entry& entry(Code code) noexcept {
  for (const Entry& e : kTable) {
    if (e.code == code) return e;
  }
  return kTable[kInternalErrorAt];  // every code has an entry (checked by a test)
}

}  // namespace

std::string_view code_name(Code code) noexcept { return entry(code).name; }
unsigned http_status(Code code) noexcept { return entry(code).status; }
std::string_view default_message(Code code) noexcept { return entry(code).message; }

std::string error_body(const Error& error, std::string_view resource, std::string_view request_id,
                       std::string_view host_id) {
  XmlWriter xml("Error", /*with_namespace=*/false);
  xml.element("Code", code_name(error.code));
  xml.element("Message", error.message.empty() ? default_message(error.code)
                                               : std::string_view(error.message));
  for (const auto& [name, value] : error.details) xml.element(name, value);
  if (!resource.empty()) xml.element("Resource", resource);
  xml.element("RequestId", request_id);
  xml.element("HostId", host_id);
  return xml.finish();
}

Error from_errc(error_code ec) {
  if (ec.category() != hots3_category()) return Code::kInternalError;
  switch (static_cast<errc>(ec.value())) {
    case errc::kNoSpace:
      return Code::kInsufficientStorage;
    case errc::kPreconditionFailed:
      return Code::kPreconditionFailed;
    case errc::kConflict:
      return Code::kConditionalRequestConflict;
    case errc::kTooLarge:
      return Code::kEntityTooLarge;
    case errc::kTimedOut:
      return Code::kRequestTimeout;
    case errc::kClosed:
      return Code::kIncompleteBody;
    case errc::kInvalidArgument:
      return Code::kInvalidRequest;
    case errc::kBusy:
      return Code::kSlowDown;
    case errc::kNotSupported:
      return Code::kNotImplemented;
    case errc::kUnavailable:
      return Code::kServiceUnavailable;
    case errc::kLost: {
      // Never the upstream's older version in its place: the operator chooses (tier recover).
      Error lost(Code::kInternalError,
                 "The object's data was lost before upload: it went with the device before it "
                 "reached the upstream.");
      lost.headers.emplace_back("x-hots3-tier", "lost");
      return lost;
    }
    default:
      return Code::kInternalError;  // I/O errors, corruption: details are in the log
  }
}

}  // namespace hots3::s3
