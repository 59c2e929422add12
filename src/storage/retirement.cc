// Retirement: SRCU-style reclamation of device space (the design is in retirement.h).
//
// Memory ordering. Every operation on phase_, the slot counters and pending_versions_ is
// seq_cst (the default). On x86 that costs nothing extra where it matters: enter and leave are
// a locked add each anyway, and loads are plain loads; only the rare phase flip pays a fence.
// The two properties it buys are argued where they are used:
// - safety (nothing freed that a reader may still read): collect() and drained();
// - liveness (no lost wake-up, space is not left waiting once its readers are gone): leave().

#include "storage/retirement.h"

#include "hots3/common/assert.h"
#include "hots3/common/thread_index.h"

namespace hots3::storage::detail {

namespace {

void erase_cached(BlockCache& cache, const ExtentList& extents, std::int64_t version) {
  if (version == 0 || !cache.enabled()) return;
  for (const Extent& e : extents) {
    for (std::uint64_t at = 0; at < e.length_bytes; at += BlockCache::kBlockBytes) {
      cache.erase({version, e.offset_bytes + at});
    }
  }
}

}  // namespace

Retirement::Ticket Retirement::enter() noexcept {
  Slot& slot = slots_[thread_index() % kSlots];
  const unsigned parity = phase_.load();
  // A flip may come between the load and the add: this reader then counts in the parity just
  // closed. That is safe (it is counted somewhere, and any look at that parity after the add
  // sees it) and only delays what waits for that parity until it leaves.
  slot.readers[parity].fetch_add(1);
  return {&slot, parity};
}

void Retirement::leave(Ticket ticket) {
  const std::uint64_t before = ticket.slot->readers[ticket.phase].fetch_sub(1);
  H3_ASSERT(before > 0, "leave() without enter()");
  // Only the reader that empties its slot's count of a closed phase can let waiting space go
  // (space waits for the closed parity only: closing_ to drain, or to flip into it).
  if (before != 1) return;
  // No lost wake-up. All operations here are in one total order S (seq_cst). A collect() that
  // looks at our counter after our subtract in S sees it. One that looked before (and so found
  // it non-zero, and may have stopped there) did so after the flip of phase_ that closed our
  // parity and after the increment of pending_versions_ for what it waits for (made by it or
  // before it under mutex_, which orders them in S too): both precede our subtract in S, so
  // our loads below see them or later values, and we collect ourselves. A later value of
  // phase_ equal to our parity again means a later flip, whose collect() saw our parity empty;
  // the flip away from it after that follows our load in S, and so does every later look at
  // our counter, which then sees our subtract. pending_versions_ 0: nothing waits at all, and
  // whatever is retired later is collected after our subtract.
  if (phase_.load() == ticket.phase) return;
  if (pending_versions_.load() == 0) return;
  std::vector<Retired> batch;
  {
    std::lock_guard lock(mutex_);
    batch = collect();
  }
  reclaim(std::move(batch));
}

void Retirement::retire(ExtentList extents, std::int64_t version) {
  erase_cached(cache_, extents, version);
  std::uint64_t bytes = 0;
  for (const Extent& e : extents) bytes += e.length_bytes;
  {
    VersionShard& shard = version_shard(version);
    std::lock_guard lock(shard.mutex);
    ++shard.versions[version];
  }
  pending_bytes_ += bytes;
  ++pending_versions_;  // before collect() looks at any counter: see leave()
  std::vector<Retired> batch;
  {
    std::lock_guard lock(mutex_);
    open_.push_back({std::move(extents), version, bytes});
    batch = collect();
  }
  reclaim(std::move(batch));
}

void Retirement::release_now(const ExtentList& extents) { allocator_.release(extents); }

bool Retirement::drained(unsigned parity) const noexcept {
  // Slots are looked at one after another, not at one instant; that is enough. A reader R that
  // must be waited for (see collect()) added to its counter before this call began, so each
  // load here returns R's add or a later value of that counter; its value counts R until R's
  // subtract (a reader's subtract always follows its add in the counter's modification order,
  // so a count of 0 cannot hide R). And a load that reads 0 after R's subtract synchronizes
  // with it (the subtract is a release; later adds and subtracts on the counter are
  // read-modify-writes, which continue its release sequence): R's device reads happen before
  // we free.
  for (const Slot& slot : slots_) {
    if (slot.readers[parity].load() != 0) return false;
  }
  return true;
}

std::vector<Retirement::Retired> Retirement::collect() {
  // Safety. Space may be freed once both parities have been seen empty after its retire().
  // Take a reader R that found the retired version: it entered (its add) before its lookup,
  // and the lookup happened before the commit and the metadata-cache invalidation that
  // unreferenced the version (otherwise it would have seen them; both are published under
  // locks, so "before" is happens-before), which happen before retire(), which happens before
  // any later collect() (mutex_). So R's add happens before every drained() called here after
  // the retire(), and whichever parity R counts in, seeing it empty means R has left.
  //
  // Entries move open_ → closing_ at a flip, and a flip to parity P is made only when P has
  // just been seen empty, after everything in open_ was retired (it was pushed under mutex_
  // before). They leave closing_ when the other parity (the closed one) is seen empty, later
  // still. Both parities seen empty after each entry's retire(): it may be freed.
  std::vector<Retired> done;
  for (;;) {
    if (open_.empty() && closing_.empty()) break;
    const unsigned closed = phase_.load() ^ 1U;  // phase_ changes only here, under mutex_
    if (!drained(closed)) break;
    done.insert(done.end(), std::make_move_iterator(closing_.begin()),
                std::make_move_iterator(closing_.end()));
    closing_.clear();
    if (open_.empty()) break;
    // Flip: new readers count in `closed` (just seen empty); open_ waits for the parity that
    // was current to drain. The store is seq_cst: see leave().
    phase_.store(closed);
    closing_.swap(open_);
  }
  return done;
}

void Retirement::reclaim(std::vector<Retired> batch) {
  for (Retired& r : batch) {
    // Readers of the version may have cached blocks after retire() (they checked is_retired()
    // just before it); none is left to do so now: drop them for good.
    erase_cached(cache_, r.extents, r.version);
    allocator_.release(r.extents);
    {
      VersionShard& shard = version_shard(r.version);
      std::lock_guard lock(shard.mutex);
      auto it = shard.versions.find(r.version);
      H3_ASSERT(it != shard.versions.end());
      if (--it->second == 0) shard.versions.erase(it);
    }
    pending_bytes_ -= r.bytes;
    --pending_versions_;
  }
}

bool Retirement::is_retired(std::int64_t version) const {
  if (pending_versions_.load() == 0) return false;
  VersionShard& shard = version_shard(version);
  std::lock_guard lock(shard.mutex);
  return shard.versions.count(version) != 0;
}

Retirement::VersionShard& Retirement::version_shard(std::int64_t version) const noexcept {
  return versions_[static_cast<std::uint64_t>(version) % kVersionShards];
}

}  // namespace hots3::storage::detail
