#pragma once

// `hots3 check`: verifies a stopped store — the catalog against the device, and every checksum.
// It takes the store's lock shared (a running server holds it exclusively: check refuses) and
// opens the catalog read-only, so it never changes what it judges.
//
// - SQLite's own integrity_check;
// - no row has lost what it belongs to: extents without an object or part (allocated but
//   unreferenced space), parts without an upload, uploads and objects without a bucket, inline
//   data or part boundaries without an object;
// - the superblock is valid and its UUID is the one the catalog records;
// - every extent is block-aligned, lies inside the device's data area, overlaps no other and
//   allocates no more blocks than its data needs;
// - every object's extents cover [0, size) without gap or overlap, with one checksum per 4 KiB;
//   inline objects have exactly their size of inline data, matching its checksum; the same
//   for upload parts;
// - every block of every extent reads back and matches its checksum.

#include "hots3/storage/object_store.h"

#include <cstdint>
#include <string>
#include <vector>

namespace hots3::storage {

struct CheckReport {
  std::uint64_t buckets = 0;
  std::uint64_t objects = 0;
  std::uint64_t inline_objects = 0;
  std::uint64_t uploads = 0;
  std::uint64_t parts = 0;
  std::uint64_t extents = 0;
  std::uint64_t referenced_bytes = 0;  // device bytes the catalog references
  std::uint64_t device_bytes = 0;      // data area
  std::uint64_t blocks_verified = 0;
  std::vector<std::string> problems;
  [[nodiscard]] bool ok() const noexcept { return problems.empty(); }
};

// Throws std::runtime_error when the store cannot be opened at all, or a server holds it.
CheckReport check_store(const StoreOptions& options);

}  // namespace hots3::storage
