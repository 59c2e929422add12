#include "storage/catalog/sqlite.h"

#include "hots3/common/assert.h"
#include "hots3/common/logging.h"

#include <stdexcept>

namespace hots3::storage::detail {

error_code sqlite_error(int rc, sqlite3* db, std::string_view context) {
  switch (rc & 0xff) {
    case SQLITE_FULL:
      return errc::kNoSpace;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      log::error("catalog corrupt ({}): {}", context, db != nullptr ? sqlite3_errmsg(db) : "");
      return errc::kCorrupt;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return errc::kBusy;
    case SQLITE_IOERR:
      log::error("catalog I/O error ({}): {}", context, db != nullptr ? sqlite3_errmsg(db) : "");
      return errc::kIoError;
    case SQLITE_CONSTRAINT:
      return errc::kConflict;
    default:
      log::error("catalog error {} ({}): {}", rc, context, db != nullptr ? sqlite3_errmsg(db) : "");
      return errc::kInternal;
  }
}

Query::~Query() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

Query& Query::bind(int index, std::int64_t value) {
  H3_ASSERT(sqlite3_bind_int64(stmt_, index, value) == SQLITE_OK);
  return *this;
}

Query& Query::bind(int index, std::string_view text) {
  // SQLITE_TRANSIENT: SQLite copies; the caller's buffer may go away before step().
  H3_ASSERT(sqlite3_bind_text64(stmt_, index, text.data(), text.size(), SQLITE_TRANSIENT,
                                SQLITE_UTF8) == SQLITE_OK);
  return *this;
}

Query& Query::bind_blob(int index, std::span<const std::byte> blob) {
  // A zero-length blob must still be a blob, not NULL: pass a non-null pointer.
  static constexpr std::byte kEmpty{};
  H3_ASSERT(sqlite3_bind_blob64(stmt_, index, blob.empty() ? &kEmpty : blob.data(), blob.size(),
                                SQLITE_TRANSIENT) == SQLITE_OK);
  return *this;
}

Query& Query::bind_blob(int index, std::string_view blob) {
  return bind_blob(index, std::as_bytes(std::span(blob.data(), blob.size())));
}

Query& Query::bind_null(int index) {
  H3_ASSERT(sqlite3_bind_null(stmt_, index) == SQLITE_OK);
  return *this;
}

Query& Query::bind_optional(int index, const std::optional<std::string>& text) {
  return text ? bind(index, std::string_view(*text)) : bind_null(index);
}

Result<bool> Query::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return Failure{sqlite_error(rc, connection_.handle(), sqlite3_sql(stmt_))};
}

Result<void> Query::run() {
  for (;;) {
    H3_TRY(bool row, step());
    if (!row) return {};
  }
}

std::int64_t Query::int64(int column) const { return sqlite3_column_int64(stmt_, column); }

std::string_view Query::text(int column) const {
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, column));
  const int n = sqlite3_column_bytes(stmt_, column);
  return p == nullptr ? std::string_view{} : std::string_view(p, static_cast<std::size_t>(n));
}

std::span<const std::byte> Query::blob(int column) const {
  const auto* p = static_cast<const std::byte*>(sqlite3_column_blob(stmt_, column));
  const int n = sqlite3_column_bytes(stmt_, column);
  return p == nullptr ? std::span<const std::byte>{} : std::span(p, static_cast<std::size_t>(n));
}

bool Query::is_null(int column) const { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }

std::optional<std::string> Query::optional_text(int column) const {
  if (is_null(column)) return std::nullopt;
  return std::string(text(column));
}

Connection::Connection(const std::string& path, Mode mode, bool create, const char* vfs) {
  int flags = SQLITE_OPEN_NOMUTEX;  // one thread at a time per connection (our own rule)
  flags |= mode == Mode::kReadOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE;
  if (create && mode == Mode::kReadWrite) flags |= SQLITE_OPEN_CREATE;
  const int rc = sqlite3_open_v2(path.c_str(), &db_, flags, vfs);
  if (rc != SQLITE_OK) {
    std::string message = db_ != nullptr ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    sqlite3_close(db_);
    db_ = nullptr;
    throw std::runtime_error("catalog " + path + ": " + message);
  }
  sqlite3_extended_result_codes(db_, 1);
  // Writers wait for each other (tools next to a running server) instead of failing at once.
  sqlite3_busy_timeout(db_, 5000);
}

Connection::~Connection() {
  for (auto& [sql, stmt] : statements_) sqlite3_finalize(stmt);
  sqlite3_close(db_);
}

Query Connection::query(const char* sql) {
  auto it = statements_.find(sql);
  if (it == statements_.end()) {
    sqlite3_stmt* stmt = nullptr;
    const int rc = sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
    H3_ASSERT(rc == SQLITE_OK, "a catalog statement does not compile (schema mismatch?)");
    it = statements_.emplace(sql, stmt).first;
  }
  return Query(it->second, *this);
}

Result<void> Connection::exec(const char* sql) {
  char* message = nullptr;
  const int rc = sqlite3_exec(db_, sql, nullptr, nullptr, &message);
  sqlite3_free(message);
  if (rc != SQLITE_OK) return sqlite_error(rc, db_, sql);
  return {};
}

void Connection::exec_or_throw(const char* sql) {
  char* message = nullptr;
  const int rc = sqlite3_exec(db_, sql, nullptr, nullptr, &message);
  if (rc != SQLITE_OK) {
    std::string text = message != nullptr ? message : sqlite3_errstr(rc);
    sqlite3_free(message);
    throw std::runtime_error("catalog: " + text);
  }
}

}  // namespace hots3::storage::detail
