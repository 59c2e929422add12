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
  // What a committed transaction did to the catalog's rules, applied in commit order (at open,
  // and by the write's on_durable): a rule added (none under a prefix rule; a prefix takes the
  // rules under it, as WriteTxn::add_pin does), or the rules of a span removed (remove_pins).
  void add(std::int64_t bucket_id, const KeySpan& span);
  void remove(std::int64_t bucket_id, const KeySpan& span);
  // A rule whose transaction is under way: pinned from now until drop_pending, so that an
  // eviction between its commit and add() cannot take what it pins.
  void add_pending(std::int64_t bucket_id, const KeySpan& span);
  void drop_pending(std::int64_t bucket_id, const KeySpan& span);
  void forget_bucket(std::int64_t bucket_id);
  [[nodiscard]] bool pinned(std::int64_t bucket_id, std::string_view key) const;
  // Whether one committed rule (not a glob) covers `span` whole.
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
    std::vector<KeySpan> pending;  // few: the pins under way
  };
  [[nodiscard]] static bool under_prefix(const Bucket& b, std::string_view key);
  mutable std::shared_mutex mutex_;
  std::unordered_map<std::int64_t, Bucket> buckets_;
};

}  // namespace hots3::storage::detail
