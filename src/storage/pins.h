#pragma once

// Private to src/storage: which keys are pinned — never evicted. A bucket's pins are the globs
// of its binding (configuration) and the rules pinned by command or by a write's header (the
// catalog's tier_pins rows: one key, or every key under a prefix). They are held here in
// memory, since eviction's queries ask for every candidate (the catalog's SQL function
// h3_pinned) and a HEAD of a bound bucket asks too.

#include "hots3/storage/records.h"

#include <cstdint>
#include <set>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace hots3::storage::detail {

class Pins {
 public:
  void set_globs(std::int64_t bucket_id, std::vector<std::string> globs);
  // A rule (the catalog's, at open).
  void add(std::int64_t bucket_id, const KeySpan& span);
  // A rule ahead of its transaction: held until settle(), whatever replace_rules sets meanwhile
  // (another transaction's view may not have it yet).
  void add_pending(std::int64_t bucket_id, const KeySpan& span);
  // Its transaction ended (and replace_rules took what it committed, if anything).
  void settle(std::int64_t bucket_id, const KeySpan& span);
  // The bucket's rules as a transaction committed them, `seq` its place in commit order: an
  // older commit's view, set late, changes nothing. Pending rules stay.
  void replace_rules(std::int64_t bucket_id, const std::vector<KeySpan>& rules, std::uint64_t seq);
  void forget_bucket(std::int64_t bucket_id);
  [[nodiscard]] bool pinned(std::int64_t bucket_id, std::string_view key) const;
  // Whether one rule (not a glob) covers `span` whole.
  [[nodiscard]] bool covered(std::int64_t bucket_id, const KeySpan& span) const;
  [[nodiscard]] std::size_t rule_count(std::int64_t bucket_id) const;
  // Prefixes together holding every pinned key of the bucket (a glob's: up to its first
  // wildcard), none within another: where pinned bytes are counted.
  [[nodiscard]] std::vector<KeySpan> spans(std::int64_t bucket_id) const;

 private:
  // Rules are kept as the catalog keeps them: no rule lies under a prefix rule.
  struct Bucket {
    std::vector<std::string> globs;
    std::set<std::string, std::less<>> keys;
    std::set<std::string, std::less<>> prefixes;
    std::uint64_t seq = 0;           // of the commit the rules are from
    std::vector<KeySpan> committed;  // as the catalog's rows were last seen
    std::vector<KeySpan> pending;    // add_pending's, not settled yet
  };
  [[nodiscard]] static bool under_prefix(const Bucket& b, std::string_view key);
  static void insert(Bucket& b, const KeySpan& span);
  static void rebuild(Bucket& b);  // the rules: committed, then pending
  mutable std::shared_mutex mutex_;
  std::unordered_map<std::int64_t, Bucket> buckets_;
};

}  // namespace hots3::storage::detail
