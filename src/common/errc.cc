#include "hots3/common/errc.h"

#include <string>

namespace hots3 {
namespace {

// boost::system::error_category has a protected non-virtual destructor by design (categories
// are never deleted through a base pointer); -Wnon-virtual-dtor cannot tell.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wnon-virtual-dtor"
class Category final : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "hots3"; }

  std::string message(int value) const override {
    switch (static_cast<errc>(value)) {
      case errc::kOk:
        return "success";
      case errc::kNotFound:
        return "not found";
      case errc::kAlreadyExists:
        return "already exists";
      case errc::kNoSpace:
        return "no space left on the device";
      case errc::kChecksumMismatch:
        return "checksum mismatch";
      case errc::kMisalignedIo:
        return "misaligned I/O";
      case errc::kIoError:
        return "I/O error";
      case errc::kShortIo:
        return "short I/O transfer";
      case errc::kInvalidArgument:
        return "invalid argument";
      case errc::kTimedOut:
        return "timed out";
      case errc::kCancelled:
        return "cancelled";
      case errc::kClosed:
        return "connection closed";
      case errc::kTooLarge:
        return "too large";
      case errc::kLimitExceeded:
        return "limit exceeded";
      case errc::kCorrupt:
        return "corrupt data structure";
      case errc::kBusy:
        return "busy";
      case errc::kConflict:
        return "conflicting concurrent change";
      case errc::kPreconditionFailed:
        return "precondition failed";
      case errc::kNotSupported:
        return "not supported";
      case errc::kUnavailable:
        return "unavailable";
      case errc::kInternal:
        return "internal error";
      case errc::kLost:
        return "lost before upload";
    }
    return "unknown hots3 error " + std::to_string(value);
  }
};
#pragma GCC diagnostic pop

}  // namespace

const boost::system::error_category& hots3_category() noexcept {
  static const Category category;
  return category;
}

}  // namespace hots3
