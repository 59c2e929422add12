#include "storage/catalog/wal_vfs.h"

#include <sqlite3.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>

namespace hots3::storage::detail {

namespace {

constexpr int kBufferBytes = 4 << 20;  // a 512-write batch's frames fit

thread_local bool t_defer_flush = false;
thread_local std::vector<std::int64_t>* t_database_writes = nullptr;

// The default VFS's file follows this header in the same allocation (szOsFile covers both).
struct File {
  sqlite3_file base;
  sqlite3_file* real;
  bool is_wal;
  bool is_main_db;
  char* buffer;             // is_wal only, from the first write: frames not yet written
  sqlite3_int64 buffer_at;  // the file offset of buffer[0]
  int buffered;
};

sqlite3_vfs* real_vfs(sqlite3_vfs* vfs) { return static_cast<sqlite3_vfs*>(vfs->pAppData); }
File* file_of(sqlite3_file* f) { return reinterpret_cast<File*>(f); }
sqlite3_file* real_of(sqlite3_file* f) { return file_of(f)->real; }

int flush(File* f) {
  // In pieces: the unix VFS writes at most 128 KiB - 1 bytes per call.
  constexpr int kPiece = 64 << 10;
  int rc = SQLITE_OK;
  for (int done = 0; done < f->buffered && rc == SQLITE_OK; done += kPiece) {
    rc = f->real->pMethods->xWrite(f->real, f->buffer + done, std::min(kPiece, f->buffered - done),
                                   f->buffer_at + done);
  }
  f->buffered = 0;  // on failure SQLite fails the transaction: the frames are not retried
  return rc;
}

int x_close(sqlite3_file* p) {
  File* f = file_of(p);
  const int flushed = f->is_wal ? flush(f) : SQLITE_OK;
  std::free(f->buffer);
  f->buffer = nullptr;
  const int rc = f->real->pMethods->xClose(f->real);
  return flushed != SQLITE_OK ? flushed : rc;
}

int x_read(sqlite3_file* p, void* out, int n, sqlite3_int64 at) {
  File* f = file_of(p);
  if (f->buffered != 0 && at < f->buffer_at + f->buffered && at + n > f->buffer_at) {
    if (const int rc = flush(f); rc != SQLITE_OK) return rc;
  }
  return f->real->pMethods->xRead(f->real, out, n, at);
}

int x_write(sqlite3_file* p, const void* data, int n, sqlite3_int64 at) {
  File* f = file_of(p);
  if (!f->is_wal) {
    if (f->is_main_db && t_database_writes != nullptr) t_database_writes->push_back(at);
    return f->real->pMethods->xWrite(f->real, data, n, at);
  }
  if (f->buffer == nullptr) {
    // On the first write: connections that only read the log (the checkpointer's) need none.
    f->buffer = static_cast<char*>(std::malloc(kBufferBytes));
    if (f->buffer == nullptr) return SQLITE_IOERR_NOMEM;
  }
  if (f->buffered != 0 && at == f->buffer_at + f->buffered && n <= kBufferBytes - f->buffered) {
    std::memcpy(f->buffer + f->buffered, data, static_cast<std::size_t>(n));
    f->buffered += n;
    return SQLITE_OK;
  }
  // Not an append to what is buffered (a new log, a frame rewritten in place): write out what
  // is buffered first, so that writes reach the file in SQLite's order.
  if (const int rc = flush(f); rc != SQLITE_OK) return rc;
  if (n >= kBufferBytes) return f->real->pMethods->xWrite(f->real, data, n, at);
  std::memcpy(f->buffer, data, static_cast<std::size_t>(n));
  f->buffer_at = at;
  f->buffered = n;
  return SQLITE_OK;
}

int x_truncate(sqlite3_file* p, sqlite3_int64 size) {
  if (const int rc = flush(file_of(p)); rc != SQLITE_OK) return rc;
  return real_of(p)->pMethods->xTruncate(real_of(p), size);
}

int x_sync(sqlite3_file* p, int flags) {
  File* f = file_of(p);
  if (const int rc = flush(f); rc != SQLITE_OK) return rc;
  if (f->is_wal && t_defer_flush) return SQLITE_OK;
  return f->real->pMethods->xSync(f->real, flags);
}

int x_file_size(sqlite3_file* p, sqlite3_int64* size) {
  if (const int rc = flush(file_of(p)); rc != SQLITE_OK) return rc;
  return real_of(p)->pMethods->xFileSize(real_of(p), size);
}

int x_lock(sqlite3_file* p, int level) { return real_of(p)->pMethods->xLock(real_of(p), level); }
int x_unlock(sqlite3_file* p, int level) {
  return real_of(p)->pMethods->xUnlock(real_of(p), level);
}
int x_check_reserved_lock(sqlite3_file* p, int* out) {
  return real_of(p)->pMethods->xCheckReservedLock(real_of(p), out);
}

int x_file_control(sqlite3_file* p, int op, void* arg) {
  if (const int rc = flush(file_of(p)); rc != SQLITE_OK) return rc;
  return real_of(p)->pMethods->xFileControl(real_of(p), op, arg);
}

int x_sector_size(sqlite3_file* p) { return real_of(p)->pMethods->xSectorSize(real_of(p)); }
int x_device_characteristics(sqlite3_file* p) {
  return real_of(p)->pMethods->xDeviceCharacteristics(real_of(p));
}
int x_shm_map(sqlite3_file* p, int region, int size, int extend, void volatile** out) {
  return real_of(p)->pMethods->xShmMap(real_of(p), region, size, extend, out);
}
int x_shm_lock(sqlite3_file* p, int offset, int n, int flags) {
  return real_of(p)->pMethods->xShmLock(real_of(p), offset, n, flags);
}
void x_shm_barrier(sqlite3_file* p) { real_of(p)->pMethods->xShmBarrier(real_of(p)); }
int x_shm_unmap(sqlite3_file* p, int delete_flag) {
  return real_of(p)->pMethods->xShmUnmap(real_of(p), delete_flag);
}
int x_fetch(sqlite3_file* p, sqlite3_int64 at, int n, void** out) {
  return real_of(p)->pMethods->xFetch(real_of(p), at, n, out);
}
int x_unfetch(sqlite3_file* p, sqlite3_int64 at, void* page) {
  return real_of(p)->pMethods->xUnfetch(real_of(p), at, page);
}

const sqlite3_io_methods kMethods = {
    3,
    x_close,
    x_read,
    x_write,
    x_truncate,
    x_sync,
    x_file_size,
    x_lock,
    x_unlock,
    x_check_reserved_lock,
    x_file_control,
    x_sector_size,
    x_device_characteristics,
    x_shm_map,
    x_shm_lock,
    x_shm_barrier,
    x_shm_unmap,
    x_fetch,
    x_unfetch,
};

int x_open(sqlite3_vfs* vfs, sqlite3_filename name, sqlite3_file* p, int flags, int* out_flags) {
  File* f = file_of(p);
  f->real = reinterpret_cast<sqlite3_file*>(f + 1);
  f->is_wal = (flags & SQLITE_OPEN_WAL) != 0;
  f->is_main_db = (flags & SQLITE_OPEN_MAIN_DB) != 0;
  f->buffer = nullptr;
  f->buffer_at = 0;
  f->buffered = 0;
  const int rc = real_vfs(vfs)->xOpen(real_vfs(vfs), name, f->real, flags, out_flags);
  if (rc != SQLITE_OK || f->real->pMethods == nullptr) {
    // SQLite closes a file whose pMethods is set even when the open failed.
    p->pMethods = f->real->pMethods != nullptr ? &kMethods : nullptr;
    return rc;
  }
  if (f->real->pMethods->iVersion < 3) {
    f->real->pMethods->xClose(f->real);
    p->pMethods = nullptr;
    return SQLITE_CANTOPEN;
  }
  p->pMethods = &kMethods;
  return SQLITE_OK;
}

// The rest of the VFS is the default one's.
int x_delete(sqlite3_vfs* v, const char* name, int sync_dir) {
  return real_vfs(v)->xDelete(real_vfs(v), name, sync_dir);
}
int x_access(sqlite3_vfs* v, const char* name, int flags, int* out) {
  return real_vfs(v)->xAccess(real_vfs(v), name, flags, out);
}
int x_full_pathname(sqlite3_vfs* v, const char* name, int n, char* out) {
  return real_vfs(v)->xFullPathname(real_vfs(v), name, n, out);
}
void* x_dl_open(sqlite3_vfs* v, const char* name) {
  return real_vfs(v)->xDlOpen(real_vfs(v), name);
}
void x_dl_error(sqlite3_vfs* v, int n, char* out) { real_vfs(v)->xDlError(real_vfs(v), n, out); }
void (*x_dl_sym(sqlite3_vfs* v, void* handle, const char* symbol))(void) {
  return real_vfs(v)->xDlSym(real_vfs(v), handle, symbol);
}
void x_dl_close(sqlite3_vfs* v, void* handle) { real_vfs(v)->xDlClose(real_vfs(v), handle); }
int x_randomness(sqlite3_vfs* v, int n, char* out) {
  return real_vfs(v)->xRandomness(real_vfs(v), n, out);
}
int x_sleep(sqlite3_vfs* v, int micros) { return real_vfs(v)->xSleep(real_vfs(v), micros); }
int x_current_time(sqlite3_vfs* v, double* out) {
  return real_vfs(v)->xCurrentTime(real_vfs(v), out);
}
int x_get_last_error(sqlite3_vfs* v, int n, char* out) {
  return real_vfs(v)->xGetLastError(real_vfs(v), n, out);
}
int x_current_time_int64(sqlite3_vfs* v, sqlite3_int64* out) {
  return real_vfs(v)->xCurrentTimeInt64(real_vfs(v), out);
}

}  // namespace

const char* wal_batching_vfs() {
  static constexpr const char* kName = "hots3-wal-batching";
  static std::once_flag registered;
  static sqlite3_vfs vfs;
  std::call_once(registered, [] {
    sqlite3_vfs* real = sqlite3_vfs_find(nullptr);
    if (real == nullptr || real->iVersion < 2)
      throw std::runtime_error("catalog: no usable default SQLite VFS");
    vfs = sqlite3_vfs{};
    vfs.iVersion = 2;
    vfs.szOsFile = static_cast<int>(sizeof(File)) + real->szOsFile;
    vfs.mxPathname = real->mxPathname;
    vfs.zName = kName;
    vfs.pAppData = real;
    vfs.xOpen = x_open;
    vfs.xDelete = x_delete;
    vfs.xAccess = x_access;
    vfs.xFullPathname = x_full_pathname;
    vfs.xDlOpen = x_dl_open;
    vfs.xDlError = x_dl_error;
    vfs.xDlSym = x_dl_sym;
    vfs.xDlClose = x_dl_close;
    vfs.xRandomness = x_randomness;
    vfs.xSleep = x_sleep;
    vfs.xCurrentTime = x_current_time;
    vfs.xGetLastError = x_get_last_error;
    vfs.xCurrentTimeInt64 = x_current_time_int64;
    if (sqlite3_vfs_register(&vfs, 0) != SQLITE_OK)
      throw std::runtime_error("catalog: cannot register the WAL VFS");
  });
  return kName;
}

DeferWalFlush::DeferWalFlush() { t_defer_flush = true; }
DeferWalFlush::~DeferWalFlush() { t_defer_flush = false; }

RecordDatabaseWrites::RecordDatabaseWrites(std::vector<std::int64_t>& out) {
  t_database_writes = &out;
}
RecordDatabaseWrites::~RecordDatabaseWrites() { t_database_writes = nullptr; }

}  // namespace hots3::storage::detail
