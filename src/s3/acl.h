#pragma once

// Private to src/s3: owners and the one ACL hots3 has ("owner: full control").

#include "s3_xml.h"

#include <string>
#include <string_view>

namespace hots3::s3 {

// A stable 64-hex-digit ID for a user, in the shape of S3's canonical user IDs.
std::string owner_id(std::string_view user);
// <Owner><ID/><DisplayName/></Owner>
void write_owner(XmlWriter& xml, std::string_view user);
// The AccessControlPolicy document of a bucket or object owned by `owner`.
std::string owner_full_control_acl(std::string_view owner);

}  // namespace hots3::s3
