#include "storage/pins.h"

#include "hots3/common/glob.h"

#include <algorithm>
#include <iterator>
#include <mutex>

namespace hots3::storage::detail {

void Pins::set_globs(std::int64_t bucket_id, std::vector<std::string> globs) {
  const std::unique_lock lock(mutex_);
  buckets_[bucket_id].globs = std::move(globs);
}

namespace {

// Removes the rules of `rules` starting with `prefix`: a run in key order.
void erase_under(std::set<std::string, std::less<>>& rules, std::string_view prefix) {
  auto from = rules.lower_bound(prefix);
  auto to = from;
  while (to != rules.end() && to->starts_with(prefix)) ++to;
  rules.erase(from, to);
}

}  // namespace

void Pins::add(std::int64_t bucket_id, const KeySpan& span) {
  const std::unique_lock lock(mutex_);
  Bucket& b = buckets_[bucket_id];
  if (under_prefix(b, span.text)) return;
  if (!span.exact) {
    erase_under(b.keys, span.text);
    erase_under(b.prefixes, span.text);
  }
  (span.exact ? b.keys : b.prefixes).insert(span.text);
}

void Pins::remove(std::int64_t bucket_id, const KeySpan& span) {
  const std::unique_lock lock(mutex_);
  auto found = buckets_.find(bucket_id);
  if (found == buckets_.end()) return;
  Bucket& b = found->second;
  if (span.exact) {
    b.keys.erase(span.text);
  } else {
    erase_under(b.keys, span.text);
    erase_under(b.prefixes, span.text);
  }
}

void Pins::add_pending(std::int64_t bucket_id, const KeySpan& span) {
  const std::unique_lock lock(mutex_);
  buckets_[bucket_id].pending.push_back(span);
}

void Pins::drop_pending(std::int64_t bucket_id, const KeySpan& span) {
  const std::unique_lock lock(mutex_);
  auto found = buckets_.find(bucket_id);
  if (found == buckets_.end()) return;
  auto& pending = found->second.pending;
  auto it = std::find_if(pending.begin(), pending.end(), [&](const KeySpan& p) {
    return p.exact == span.exact && p.text == span.text;
  });
  if (it != pending.end()) pending.erase(it);
}

void Pins::forget_bucket(std::int64_t bucket_id) {
  const std::unique_lock lock(mutex_);
  buckets_.erase(bucket_id);
}

bool Pins::under_prefix(const Bucket& b, std::string_view key) {
  // No prefix rule lies under another, so only the last one sorting at or before `key` can
  // hold it: any between a prefix of `key` and `key` would lie under that prefix.
  auto after = b.prefixes.upper_bound(key);
  return after != b.prefixes.begin() && key.starts_with(*std::prev(after));
}

std::size_t Pins::rule_count(std::int64_t bucket_id) const {
  const std::shared_lock lock(mutex_);
  auto found = buckets_.find(bucket_id);
  return found == buckets_.end() ? 0 : found->second.keys.size() + found->second.prefixes.size();
}

bool Pins::pinned(std::int64_t bucket_id, std::string_view key) const {
  const std::shared_lock lock(mutex_);
  auto found = buckets_.find(bucket_id);
  if (found == buckets_.end()) return false;
  const Bucket& b = found->second;
  return b.keys.contains(key) || under_prefix(b, key) ||
         std::any_of(b.pending.begin(), b.pending.end(),
                     [key](const KeySpan& p) {
                       return p.exact ? key == p.text : key.starts_with(p.text);
                     }) ||
         glob_any(b.globs, key);
}

bool Pins::covered(std::int64_t bucket_id, const KeySpan& span) const {
  const std::shared_lock lock(mutex_);
  auto found = buckets_.find(bucket_id);
  if (found == buckets_.end()) return false;
  const Bucket& b = found->second;
  return under_prefix(b, span.text) || (span.exact && b.keys.contains(span.text));
}

std::vector<KeySpan> Pins::spans(std::int64_t bucket_id) const {
  std::vector<KeySpan> all;
  {
    const std::shared_lock lock(mutex_);
    auto found = buckets_.find(bucket_id);
    if (found == buckets_.end()) return all;
    const Bucket& b = found->second;
    for (const std::string& key : b.keys) all.push_back({key, true});
    for (const std::string& prefix : b.prefixes) all.push_back({prefix, false});
    for (const std::string& glob : b.globs) {
      all.push_back({glob.substr(0, glob.find_first_of("*?")), false});
    }
  }
  // In key order, a span inside the prefix before it adds nothing.
  std::sort(all.begin(), all.end(), [](const KeySpan& x, const KeySpan& y) {
    return x.text != y.text ? x.text < y.text : !x.exact && y.exact;
  });
  std::vector<KeySpan> out;
  for (KeySpan& span : all) {
    if (!out.empty() && !out.back().exact && span.text.starts_with(out.back().text)) continue;
    out.push_back(std::move(span));
  }
  return out;
}

}  // namespace hots3::storage::detail
