#pragma once

// `hots3 admin ...`: what an operator asks a running server about itself, over its admin
// endpoint (GET /?x-hots3-status, ?x-hots3-users, ?x-hots3-buckets; signed, admins only).
// Tables for people, or the server's JSON with `json`; 0, or 1 when the server refused or could
// not be asked (said on stderr).

#include "tier_commands.h"

namespace hots3::app {

enum class AdminReport : std::uint8_t {
  kStatus,   // version, uptime, addresses, device, catalog, caches, connections, usage by bucket
  kUsers,    // users with their grants (never a secret)
  kBuckets,  // buckets with owner, grants, upstream binding and usage
};

int admin_report(const TierCommandOptions& options, AdminReport report, bool json);

}  // namespace hots3::app
