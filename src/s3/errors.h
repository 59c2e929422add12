#pragma once

// S3 errors: the code, HTTP status and message S3 returns for every failure, in one table
// (errors.cc), rendered as S3's XML error body.

#include "hots3/common/result.h"

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hots3::s3 {

enum class Code : std::uint8_t {
  kAccessDenied,
  kAuthorizationHeaderMalformed,
  kAuthorizationQueryParametersError,
  kBadDigest,
  kBucketAlreadyExists,
  kBucketAlreadyOwnedByYou,
  kBucketNotEmpty,
  kConditionalRequestConflict,
  kEntityTooLarge,
  kEntityTooSmall,
  kExpiredPresignedRequest,  // rendered as AccessDenied "Request has expired"
  kIllegalLocationConstraint,
  kIncompleteBody,
  kInsufficientStorage,
  kInternalError,
  kInvalidAccessKeyId,
  kInvalidArgument,
  kInvalidBucketName,
  kInvalidDigest,
  kInvalidLocationConstraint,
  kInvalidPart,
  kInvalidPartOrder,
  kInvalidRange,
  kInvalidRequest,
  kInvalidURI,
  kKeyTooLong,
  kMalformedXML,
  kMetadataTooLarge,
  kMethodNotAllowed,
  kMissingContentLength,
  kNoSuchBucket,
  kNoSuchBucketPolicy,
  kNoSuchCORSConfiguration,
  kNoSuchKey,
  kNoSuchLifecycleConfiguration,
  kNoSuchTagSet,
  kNoSuchUpload,
  kNoSuchVersion,
  kNotImplemented,
  kNotModified,
  kPreconditionFailed,
  kRequestHeaderSectionTooLarge,
  kRequestTimeTooSkewed,
  kRequestTimeout,
  kServerSideEncryptionConfigurationNotFound,
  kServiceUnavailable,
  kSignatureDoesNotMatch,
  kSlowDown,
  kXAmzContentSHA256Mismatch,
  // S3 Express One Zone (RenameObject, appends).
  kIdempotencyParameterMismatch,
  kInvalidWriteOffset,
  kTooManyParts,
  kInvalidPartNumber,  // GET/HEAD ?partNumber past the object's parts (416)
  kRestoreAlreadyInProgress,
  kPinLimitExceeded,  // hots3's own: a pin past the bucket's pin_max
  kPrefetchTooLarge,  // hots3's own: a prefetch past the device's free and evictable space
  // S3 Express One Zone sessions and directory buckets.
  kExpiredToken,
  kInvalidToken,
  kNotSupported,
  kInvalidStorageClass,
};

struct Error {
  Code code;
  std::string message;  // "" = the table's default message
  // Extra elements of the XML body, in order (Key, BucketName, StringToSign, ...).
  std::vector<std::pair<std::string, std::string>> details;
  // Extra response headers: what a HEAD, which has no body, can still tell.
  std::vector<std::pair<std::string, std::string>> headers;

  Error(Code c) : code(c) {}  // NOLINT(google-explicit-constructor): `return Code::kNoSuchKey;`
  Error(Code c, std::string m) : code(c), message(std::move(m)) {}
  Error& with(std::string name, std::string value) {
    details.emplace_back(std::move(name), std::move(value));
    return *this;
  }
};

std::string_view code_name(Code code) noexcept;
unsigned http_status(Code code) noexcept;
std::string_view default_message(Code code) noexcept;

// The XML body of an error response.
std::string error_body(const Error& error, std::string_view resource, std::string_view request_id,
                       std::string_view host_id);

// The S3 error for an operating error of the layers below, when the caller has nothing more
// specific (not-found errors need context and are mapped by the handlers).
Error from_errc(error_code ec);

}  // namespace hots3::s3
