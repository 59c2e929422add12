#pragma once

// Private to src/storage: epoch-based reclamation of device space.

#include "storage/block_cache.h"
#include "storage/extent_allocator.h"

#include "hots3/common/result.h"
#include "hots3/storage/extent.h"

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>

namespace hots3::storage::detail {

// Epoch-based reclamation of device space, SRCU-style (as Linux's sleepable RCU). Readers
// enter before they look an object up and leave when they are done; space retired while some
// reader might still use it is freed only once every such reader has left. So a reader that
// found a version keeps its extents readable however often the key is overwritten meanwhile,
// and nothing freed can be read by mistake.
//
// Readers count themselves in one of two phase parities, in a counter slot picked by their
// thread (a cache line of its own): enter is a load of the phase and one atomic add, leave one
// atomic subtract, both on a line other threads rarely write — no lock, no allocation, so the
// read path of every worker scales. The mutex is taken by retire() and by a leave() that
// empties its slot's count of a closed phase while space waits; never by any other enter or
// leave. Nothing ever blocks waiting for readers: space comes back on the leave() that lets it.
//
// Why it is safe: a reader that found a version entered before it looked, and its lookup
// happened before the change that unreferenced the version (else it would have seen the
// change), which happens before retire(). So every look at the reader's counter made after
// retire() sees it until it leaves. Space is freed once both parities have been seen empty
// after its retire(), whichever parity such a reader counted in.
//
// Why it is not starved: a busy parity need not ever be empty by itself, so the reclaimer
// flips the current phase (once the other parity is empty): new readers count in the other
// parity and the old one drains as its readers leave. Space retired in the current phase
// waits in open_ until a flip, then in closing_ until the closed parity has drained: two
// generations of readers at most. A flip is only needed while something waits.
class Retirement {
 public:
  static constexpr std::size_t kSlots = 64;
  struct alignas(64) Slot {
    std::array<std::atomic<std::uint64_t>, 2> readers{};  // by phase parity
  };
  struct Ticket {
    Slot* slot;
    unsigned phase;  // parity: 0 or 1
  };

  Retirement(ExtentAllocator& allocator, BlockCache& cache)
      : allocator_(allocator), cache_(cache) {}

  // Lock-free; the ticket goes back to leave(), from any thread, exactly once.
  Ticket enter() noexcept;
  // May free space that this reader was the last to hold (then it takes the mutex).
  void leave(Ticket ticket);
  // `version`'s cache entries are dropped now; `extents` go back to the allocator once no
  // reader that entered before this call remains (at once if none). REQUIRES: the transaction
  // that unreferenced them is durable and the metadata cache no longer hands the version out.
  void retire(ExtentList extents, std::int64_t version);
  // Space no reader can be using: never committed (aborted writes), or multipart parts (never
  // read). Free at once.
  void release_now(const ExtentList& extents);

  // Bytes retired and not yet freed.
  [[nodiscard]] std::uint64_t pending_bytes() const noexcept { return pending_bytes_.load(); }
  // Whether `version` has been retired and not yet freed. One atomic load when nothing waits
  // (the common case), else a lookup in one of several small sharded sets.
  [[nodiscard]] bool is_retired(std::int64_t version) const;

 private:
  struct Retired {
    ExtentList extents;
    std::int64_t version;
    std::uint64_t bytes;
  };
  struct alignas(64) VersionShard {
    std::mutex mutex;
    std::unordered_map<std::int64_t, unsigned> versions;  // version → times retired, pending
  };
  static constexpr std::size_t kVersionShards = 16;
  VersionShard& version_shard(std::int64_t version) const noexcept;
  // Whether no reader counts in `parity` (as seen now; readers may enter it later).
  [[nodiscard]] bool drained(unsigned parity) const noexcept;
  // Moves retired space along as far as the readers allow (flipping the phase if that helps)
  // and returns what may be freed now. REQUIRES: mutex_ held.
  std::vector<Retired> collect();
  // Frees collected space; called without mutex_ (a cache erase per block can take a while).
  void reclaim(std::vector<Retired> batch);

  ExtentAllocator& allocator_;
  BlockCache& cache_;
  std::array<Slot, kSlots> slots_{};
  std::atomic<unsigned> phase_{0};  // where readers enter; stored only under mutex_
  std::mutex mutex_;                // the reclaimer's state below
  std::vector<Retired> open_;       // retired since the last flip
  std::vector<Retired> closing_;    // retired before it: free once the closed parity drains
  std::atomic<std::uint64_t> pending_bytes_{0};
  std::atomic<std::uint64_t> pending_versions_{
      0};  // entries of open_ and closing_, and being freed
  mutable std::array<VersionShard, kVersionShards> versions_;
};

// Holds an epoch for as long as it lives (a reader's shared state).
class EpochGuard {
 public:
  explicit EpochGuard(Retirement& r) : retirement_(r), ticket_(r.enter()) {}
  ~EpochGuard() { retirement_.leave(ticket_); }
  EpochGuard(const EpochGuard&) = delete;
  EpochGuard& operator=(const EpochGuard&) = delete;
  EpochGuard(EpochGuard&&) = delete;
  EpochGuard& operator=(EpochGuard&&) = delete;

 private:
  Retirement& retirement_;
  Retirement::Ticket ticket_;
};

}  // namespace hots3::storage::detail
