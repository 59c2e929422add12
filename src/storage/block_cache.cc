#include "storage/block_cache.h"

#include "hots3/common/assert.h"
#include "hots3/common/logging.h"
#include "hots3/common/units.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <mutex>
#include <pthread.h>
#include <sched.h>
#include <stdexcept>
#include <sys/mman.h>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace hots3::storage {
namespace {

struct KeyHash {
  std::size_t operator()(const CacheKey& k) const noexcept {
    std::uint64_t h =
        static_cast<std::uint64_t>(k.version) * 0x9E3779B97F4A7C15ULL ^ k.device_offset;
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ULL;
    h ^= h >> 32;
    return static_cast<std::size_t>(h);
  }
};

constexpr std::uint64_t kPrefaultStepBytes = 2 * kMiB;  // one huge page at a time

}  // namespace

// ---- entries -------------------------------------------------------------------------------

enum class ListTag : std::uint8_t { kNone, kProbation, kMain };

struct CacheRef::Entry {
  CacheKey key;
  std::byte* slot = nullptr;
  std::uint32_t length = 0;
  std::atomic<std::uint32_t> refs{1};  // the index's reference
  BlockCache::Arena* arena = nullptr;
  ListTag list = ListTag::kNone;
  bool referenced = false;  // CLOCK bit (main list only)
  Entry* prev = nullptr;
  Entry* next = nullptr;
};
using Entry = CacheRef::Entry;

// A circular doubly-linked list of entries.
struct EntryList {
  Entry* head = nullptr;  // oldest (probation) / clock hand (main)
  std::size_t size = 0;

  void push_back(Entry* e) {  // before head: the newest
    if (head == nullptr) {
      e->prev = e->next = e;
      head = e;
    } else {
      e->next = head;
      e->prev = head->prev;
      head->prev->next = e;
      head->prev = e;
    }
    ++size;
  }
  void remove(Entry* e) {
    if (e->next == e) {
      head = nullptr;
    } else {
      e->prev->next = e->next;
      e->next->prev = e->prev;
      if (head == e) head = e->next;
    }
    e->prev = e->next = nullptr;
    --size;
  }
};

// ---- the arena: slots, prefaulted in the background ------------------------------------------

struct BlockCache::Arena {
  explicit Arena(std::uint64_t capacity) : slots(capacity / kBlockBytes) {
    bytes = slots * kBlockBytes;
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) throw std::runtime_error("block cache: cannot reserve memory");
    base = static_cast<std::byte*>(p);
    ::madvise(base, bytes, MADV_HUGEPAGE);  // 2 MiB pages: far fewer, cheaper faults
    free_slots.reserve(slots);
    prefaulter = std::thread([this] { prefault_loop(); });
  }
  ~Arena() {
    stop.store(true);
    if (prefaulter.joinable()) prefaulter.join();
    ::munmap(base, bytes);
  }
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;
  Arena(Arena&&) = delete;
  Arena& operator=(Arena&&) = delete;

  void prefault_loop() {
    pthread_setname_np(pthread_self(), "h3-cache-fault");
    // Idle priority: prefaulting only uses CPU nobody else wants.
    sched_param param{};
    ::sched_setscheduler(0, SCHED_IDLE, &param);
    while (!stop.load(std::memory_order_relaxed) && prefault_step()) {
    }
  }

  // Touches the next 2 MiB and publishes its slots; false when done.
  bool prefault_step() {
    std::lock_guard step_lock(step_mutex);
    const std::uint64_t at = touched.load(std::memory_order_relaxed);
    if (at >= bytes) return false;
    const std::uint64_t n = std::min(kPrefaultStepBytes, bytes - at);
    for (std::uint64_t i = 0; i < n; i += 4096) base[at + i] = std::byte{0};
    {
      std::lock_guard lock(mutex);
      for (std::uint64_t s = at; s + kBlockBytes <= at + n; s += kBlockBytes)
        free_slots.push_back(base + s);
    }
    touched.store(at + n, std::memory_order_release);
    return true;
  }

  std::byte* take() {
    std::lock_guard lock(mutex);
    if (free_slots.empty()) return nullptr;
    std::byte* s = free_slots.back();
    free_slots.pop_back();
    return s;
  }

  void give(std::byte* slot) {
    std::lock_guard lock(mutex);
    free_slots.push_back(slot);
  }

  std::uint64_t slots;
  std::uint64_t bytes = 0;
  std::byte* base = nullptr;
  std::mutex mutex;
  std::vector<std::byte*> free_slots;
  std::mutex step_mutex;
  std::atomic<std::uint64_t> touched{0};
  std::atomic<bool> stop{false};
  std::thread prefaulter;
};

// ---- shards ----------------------------------------------------------------------------------

struct BlockCache::Shard {
  std::mutex mutex;
  std::unordered_map<CacheKey, Entry*, KeyHash> index;
  EntryList probation;  // FIFO
  EntryList main;       // CLOCK; head is the hand
  std::deque<CacheKey> ghost_order;
  std::unordered_set<CacheKey, KeyHash> ghosts;
  std::size_t capacity_slots = 0;
  std::size_t probation_slots = 0;
  std::size_t ghost_slots = 0;
  bool filled = false;  // has been full once: new blocks go on probation from then on
  std::atomic<std::uint64_t> hits{0}, misses{0}, inserts{0}, evictions{0};

  std::size_t used() const { return probation.size + main.size; }

  void remember_ghost(const CacheKey& key) {
    if (ghost_slots == 0) return;
    if (ghosts.insert(key).second) ghost_order.push_back(key);
    while (ghost_order.size() > ghost_slots) {
      ghosts.erase(ghost_order.front());
      ghost_order.pop_front();
    }
  }

  // Picks a victim per 2Q and unlinks it from the index and its list. REQUIRES: used() > 0.
  Entry* evict_one() {
    Entry* victim = nullptr;
    if (probation.size > probation_slots || main.size == 0) {
      victim = probation.head;
      probation.remove(victim);
      remember_ghost(victim->key);
    } else {
      while (main.head->referenced) {  // CLOCK: a second chance for recently used blocks
        main.head->referenced = false;
        main.head = main.head->next;
      }
      victim = main.head;
      main.remove(victim);
    }
    victim->list = ListTag::kNone;
    index.erase(victim->key);
    evictions.fetch_add(1, std::memory_order_relaxed);
    return victim;
  }
};

namespace {

void drop_reference(Entry* e, BlockCache::Arena* arena) {
  if (e->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    arena->give(e->slot);
    delete e;
  }
}

}  // namespace

// ---- CacheRef --------------------------------------------------------------------------------

CacheRef::~CacheRef() {
  if (entry_ != nullptr) drop_reference(entry_, entry_->arena);
}

CacheRef& CacheRef::operator=(CacheRef&& other) noexcept {
  if (this != &other) {
    if (entry_ != nullptr) drop_reference(entry_, entry_->arena);
    entry_ = other.entry_;
    other.entry_ = nullptr;
  }
  return *this;
}

std::span<const std::byte> CacheRef::bytes() const noexcept {
  return {entry_->slot, entry_->length};
}

// ---- BlockCache ------------------------------------------------------------------------------

BlockCache::BlockCache(std::uint64_t capacity_bytes)
    : capacity_bytes_(capacity_bytes / kBlockBytes * kBlockBytes) {
  if (capacity_bytes_ == 0) return;
  arena_ = std::make_unique<Arena>(capacity_bytes_);
  const std::uint64_t slots = arena_->slots;
  shard_count_ = static_cast<std::size_t>(std::clamp<std::uint64_t>(slots / 512, 1, 64));
  shards_ = std::make_unique<Shard[]>(shard_count_);
  for (std::size_t i = 0; i < shard_count_; ++i) {
    Shard& s = shards_[i];
    s.capacity_slots = static_cast<std::size_t>(slots / shard_count_);
    s.probation_slots = std::max<std::size_t>(1, s.capacity_slots / 4);
    s.ghost_slots = s.capacity_slots / 2;
  }
}

BlockCache::~BlockCache() {
  if (!arena_) return;
  for (std::size_t i = 0; i < shard_count_; ++i) {
    Shard& s = shards_[i];
    for (auto& [key, e] : s.index) drop_reference(e, arena_.get());
    s.index.clear();
  }
}

BlockCache::Shard& BlockCache::shard_of(const CacheKey& key) const noexcept {
  return shards_[KeyHash{}(key) % shard_count_];
}

CacheRef BlockCache::lookup(const CacheKey& key) {
  if (!arena_) return {};
  Shard& s = shard_of(key);
  std::lock_guard lock(s.mutex);
  auto it = s.index.find(key);
  if (it == s.index.end()) {
    s.misses.fetch_add(1, std::memory_order_relaxed);
    return {};
  }
  Entry* e = it->second;
  if (e->list == ListTag::kMain) e->referenced = true;
  e->refs.fetch_add(1, std::memory_order_relaxed);
  s.hits.fetch_add(1, std::memory_order_relaxed);
  return CacheRef(e);
}

bool BlockCache::insert(const CacheKey& key, std::span<const std::byte> data) {
  if (!arena_) return false;
  H3_ASSERT(data.size() <= kBlockBytes && !data.empty());
  Shard& s = shard_of(key);
  Entry* victim = nullptr;
  {
    std::lock_guard lock(s.mutex);
    if (s.index.count(key) != 0) return false;
    if (s.used() >= s.capacity_slots) victim = s.evict_one();
  }
  if (victim != nullptr) drop_reference(victim, arena_.get());
  std::byte* slot = arena_->take();
  if (slot == nullptr) return false;  // nothing prefaulted free yet: do not fault on this path
  std::memcpy(slot, data.data(), data.size());
  auto* e = new Entry;
  e->key = key;
  e->slot = slot;
  e->length = static_cast<std::uint32_t>(data.size());
  e->arena = arena_.get();
  std::lock_guard lock(s.mutex);
  if (!s.index.emplace(key, e).second) {  // raced with another reader of the same block
    arena_->give(slot);
    delete e;
    return false;
  }
  // 2Q admission: free room or a recent ghost → main set; otherwise probation.
  const bool ghost = s.ghosts.erase(key) != 0;
  if (s.used() + 1 >= s.capacity_slots) s.filled = true;
  if (ghost || !s.filled) {
    e->list = ListTag::kMain;
    s.main.push_back(e);
  } else {
    e->list = ListTag::kProbation;
    s.probation.push_back(e);
  }
  s.inserts.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void BlockCache::erase(const CacheKey& key) {
  if (!arena_) return;
  Shard& s = shard_of(key);
  Entry* e = nullptr;
  {
    std::lock_guard lock(s.mutex);
    auto it = s.index.find(key);
    if (it == s.index.end()) return;
    e = it->second;
    s.index.erase(it);
    if (e->list == ListTag::kMain) s.main.remove(e);
    if (e->list == ListTag::kProbation) s.probation.remove(e);
    e->list = ListTag::kNone;
  }
  drop_reference(e, arena_.get());
}

BlockCache::Stats BlockCache::stats() const {
  Stats st;
  st.capacity_bytes = capacity_bytes_;
  if (!arena_) return st;
  st.prefaulted_bytes = arena_->touched.load();
  for (std::size_t i = 0; i < shard_count_; ++i) {
    Shard& s = shards_[i];
    {
      std::lock_guard lock(s.mutex);
      st.used_bytes += s.used() * kBlockBytes;
    }
    st.hits += s.hits.load();
    st.misses += s.misses.load();
    st.inserts += s.inserts.load();
    st.evictions += s.evictions.load();
  }
  return st;
}

void BlockCache::prefault_all() {
  if (!arena_) return;
  while (arena_->prefault_step()) {
  }
}

}  // namespace hots3::storage
