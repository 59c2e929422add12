// The one ACL a hots3 bucket or object has: its owner has full control.

#include "acl.h"

#include "hots3/common/digest.h"
#include "hots3/common/hex.h"

#include <span>

namespace hots3::s3 {

std::string owner_id(std::string_view user) {
  // A stable 64-hex-digit ID in the shape of S3's canonical user IDs.
  return to_hex(sha256(std::as_bytes(std::span(user.data(), user.size()))));
}

void write_owner(XmlWriter& xml, std::string_view user) {
  xml.open("Owner");
  xml.element("ID", owner_id(user));
  xml.element("DisplayName", user);
  xml.close();
}

std::string owner_full_control_acl(std::string_view owner) {
  XmlWriter xml("AccessControlPolicy");
  write_owner(xml, owner);
  xml.open("AccessControlList");
  xml.open("Grant");
  xml.open("Grantee");
  // As S3 writes it; s3cmd reads the grantee's type from xsi:type and fails without it.
  xml.attribute("xmlns:xsi", "http://www.w3.org/2001/XMLSchema-instance");
  xml.attribute("xsi:type", "CanonicalUser");
  xml.element("ID", owner_id(owner));
  xml.element("DisplayName", owner);
  xml.close();
  xml.element("Permission", "FULL_CONTROL");
  xml.close();
  xml.close();
  return xml.finish();
}

}  // namespace hots3::s3
