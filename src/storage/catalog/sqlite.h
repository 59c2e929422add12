#pragma once

// Private to src/storage: RAII over SQLite connections and prepared statements. Statements are
// prepared once per connection and reset after each use; SQLite result codes become errc here
// and nowhere else.

#include "hots3/common/result.h"

#include <sqlite3.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace hots3::storage::detail {

// SQLite result code → errc (SQLITE_FULL → kNoSpace, SQLITE_CORRUPT/NOTADB → kCorrupt,
// SQLITE_BUSY/LOCKED → kBusy, SQLITE_IOERR → kIoError, others → kInternal), logging the
// message for the unexpected ones.
error_code sqlite_error(int rc, sqlite3* db, std::string_view context);

class Connection;

// A prepared statement in use: binds parameters, steps, reads columns; reset on destruction
// so the cached statement is ready for the next user.
class Query {
 public:
  Query(sqlite3_stmt* stmt, Connection& connection) : stmt_(stmt), connection_(connection) {}
  ~Query();
  Query(const Query&) = delete;
  Query& operator=(const Query&) = delete;
  Query(Query&&) = delete;
  Query& operator=(Query&&) = delete;

  Query& bind(int index, std::int64_t value);
  Query& bind(int index, std::uint64_t value) {
    return bind(index, static_cast<std::int64_t>(value));
  }
  Query& bind(int index, int value) { return bind(index, static_cast<std::int64_t>(value)); }
  Query& bind(int index, std::string_view text);  // TEXT (keys compare as bytes: BINARY)
  Query& bind_blob(int index, std::span<const std::byte> blob);
  Query& bind_blob(int index, std::string_view blob);
  Query& bind_null(int index);
  Query& bind_optional(int index, const std::optional<std::string>& text);

  // Steps once: true with a row, false when done. Errors become a Result error.
  Result<bool> step();
  // Steps to completion (INSERT/UPDATE/DELETE).
  Result<void> run();

  [[nodiscard]] std::int64_t int64(int column) const;
  [[nodiscard]] std::uint64_t uint64(int column) const {
    return static_cast<std::uint64_t>(int64(column));
  }
  [[nodiscard]] std::string_view text(int column) const;
  [[nodiscard]] std::span<const std::byte> blob(int column) const;
  [[nodiscard]] bool is_null(int column) const;
  [[nodiscard]] std::optional<std::string> optional_text(int column) const;

 private:
  sqlite3_stmt* stmt_;
  Connection& connection_;
};

class Connection {
 public:
  enum class Mode { kReadWrite, kReadOnly };
  // Throws std::runtime_error (start-up and tools only). `vfs`: a registered VFS's name, or
  // nullptr for the default.
  Connection(const std::string& path, Mode mode, bool create, const char* vfs = nullptr);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  Connection(Connection&&) = delete;
  Connection& operator=(Connection&&) = delete;

  // A cached prepared statement for `sql` (keyed by the literal's address: pass string
  // literals or other storage that outlives the connection).
  Query query(const char* sql);
  // Runs one or more statements without results (schema, pragmas, BEGIN/COMMIT).
  Result<void> exec(const char* sql);
  // Throws std::runtime_error on failure (start-up).
  void exec_or_throw(const char* sql);

  [[nodiscard]] sqlite3* handle() const noexcept { return db_; }
  [[nodiscard]] std::int64_t changes() const noexcept { return sqlite3_changes64(db_); }
  [[nodiscard]] std::int64_t last_insert_rowid() const noexcept {
    return sqlite3_last_insert_rowid(db_);
  }

 private:
  sqlite3* db_ = nullptr;
  std::map<const char*, sqlite3_stmt*> statements_;
};

}  // namespace hots3::storage::detail
