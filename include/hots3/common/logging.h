#pragma once

// Server logs and the access log. The logging library (spdlog) stays inside
// src/common/logging.cc; callers format with fmt and hand over a finished line.
//
// Thread-safety: every function may be called from any thread after init().

#include <fmt/format.h>

#include <string>
#include <string_view>
#include <utility>

namespace hots3::log {

enum class Level : int { kTrace = 0, kDebug, kInfo, kWarn, kError, kCritical, kOff };

struct Options {
  Level level = Level::kInfo;
  // Where server logs go: "-" or "" = stderr, otherwise a file path (appended).
  std::string server_log_path;
  // Where the access log goes: "-" = stdout, "" = disabled, otherwise a file path (appended).
  std::string access_log_path = "-";
  // Emit server logs as JSON lines instead of plain text.
  bool json = false;
};

// Sets up the sinks. May be called again (tests, reload); lines in flight are flushed first.
// Throws std::runtime_error if a log file cannot be opened (start-up only).
void init(const Options& options);

// Flushes every sink; call before exit.
void shutdown() noexcept;

// Parses "trace", "debug", "info", "warn", "error", "critical", "off".
bool parse_level(std::string_view text, Level& level);

bool enabled(Level level) noexcept;
void write(Level level, std::string_view message) noexcept;

// One structured line of the access log (already formatted as a JSON object).
bool access_enabled() noexcept;
void access(std::string_view line) noexcept;

template <class... Args>
void trace(fmt::format_string<Args...> format, Args&&... args) {
  if (enabled(Level::kTrace))
    write(Level::kTrace, fmt::format(format, std::forward<Args>(args)...));
}
template <class... Args>
void debug(fmt::format_string<Args...> format, Args&&... args) {
  if (enabled(Level::kDebug))
    write(Level::kDebug, fmt::format(format, std::forward<Args>(args)...));
}
template <class... Args>
void info(fmt::format_string<Args...> format, Args&&... args) {
  if (enabled(Level::kInfo)) write(Level::kInfo, fmt::format(format, std::forward<Args>(args)...));
}
template <class... Args>
void warn(fmt::format_string<Args...> format, Args&&... args) {
  if (enabled(Level::kWarn)) write(Level::kWarn, fmt::format(format, std::forward<Args>(args)...));
}
template <class... Args>
void error(fmt::format_string<Args...> format, Args&&... args) {
  if (enabled(Level::kError))
    write(Level::kError, fmt::format(format, std::forward<Args>(args)...));
}
template <class... Args>
void critical(fmt::format_string<Args...> format, Args&&... args) {
  if (enabled(Level::kCritical)) {
    write(Level::kCritical, fmt::format(format, std::forward<Args>(args)...));
  }
}

// Appends `text` to `out` escaped as the inside of a JSON string.
void append_json_escaped(std::string& out, std::string_view text);
// Appends `text` to `out` as a JSON string: quoted, escaped. json_quoted returns it.
void append_json_quoted(std::string& out, std::string_view text);
std::string json_quoted(std::string_view text);

// Text a client chose (a key, a header) as a log line may hold it: JSON-escaped, so that no
// control character or newline in it can forge a line.
std::string escaped(std::string_view text);

}  // namespace hots3::log
