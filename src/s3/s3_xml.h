#pragma once

// Private to src/s3: the XML of S3 requests and responses. Response documents have their root
// in S3's namespace (error bodies have none, as S3 writes them).

#include "hots3/xml/xml.h"

#include <string_view>

namespace hots3::s3 {

inline constexpr std::string_view kS3Namespace = "http://s3.amazonaws.com/doc/2006-03-01/";

using xml::XmlDocument;
using xml::XmlElement;

class XmlWriter : public xml::XmlWriter {
 public:
  explicit XmlWriter(std::string_view root, bool with_namespace = true)
      : xml::XmlWriter(root, with_namespace ? kS3Namespace : std::string_view()) {}
};

}  // namespace hots3::s3
