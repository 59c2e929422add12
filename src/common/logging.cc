#include "hots3/common/logging.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <vector>

namespace hots3::log {
namespace {

// Loggers are replaced only by init(), which is rare (start-up, tests). Readers load a raw
// pointer without a lock, so a replaced logger is kept alive until exit: a concurrent writer may
// still hold it.
struct State {
  std::mutex mutex;  // serialises init() and shutdown()
  std::vector<std::shared_ptr<spdlog::logger>> retired;
  std::atomic<spdlog::logger*> server{nullptr};
  std::atomic<spdlog::logger*> access{nullptr};
  std::atomic<int> level{static_cast<int>(Level::kInfo)};
  std::atomic<bool> json{false};
};

State& state() {
  static State instance;
  return instance;
}

spdlog::level::level_enum to_spdlog(Level level) {
  switch (level) {
    case Level::kTrace:
      return spdlog::level::trace;
    case Level::kDebug:
      return spdlog::level::debug;
    case Level::kInfo:
      return spdlog::level::info;
    case Level::kWarn:
      return spdlog::level::warn;
    case Level::kError:
      return spdlog::level::err;
    case Level::kCritical:
      return spdlog::level::critical;
    case Level::kOff:
      return spdlog::level::off;
  }
  return spdlog::level::info;
}

std::shared_ptr<spdlog::logger> make_server_logger(const Options& options) {
  std::shared_ptr<spdlog::sinks::sink> sink;
  if (options.server_log_path.empty() || options.server_log_path == "-") {
    sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  } else {
    sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(options.server_log_path);
  }
  auto logger = std::make_shared<spdlog::logger>("hots3", std::move(sink));
  if (options.json) {
    logger->set_pattern(R"({"ts":"%Y-%m-%dT%H:%M:%S.%e%z","level":"%l","thread":%t,"msg":"%v"})");
  } else {
    logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e%z %^%-5l%$ [%t] %v");
  }
  logger->set_level(to_spdlog(options.level));
  logger->flush_on(spdlog::level::trace);  // server logs are rare: write each line at once
  return logger;
}

std::shared_ptr<spdlog::logger> make_access_logger(const Options& options) {
  if (options.access_log_path.empty()) return nullptr;
  // The access log is written once per request: a buffered file sink (stdout included), flushed
  // every second by spdlog's periodic flusher, instead of an fflush per line.
  const std::string path =
      options.access_log_path == "-" ? std::string("/dev/stdout") : options.access_log_path;
  auto sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(path);
  auto logger = std::make_shared<spdlog::logger>("access", std::move(sink));
  logger->set_pattern("%v");
  logger->set_level(spdlog::level::info);
  logger->flush_on(spdlog::level::off);
  return logger;
}

}  // namespace

void init(const Options& options) {
  auto server = make_server_logger(options);
  auto access = make_access_logger(options);
  State& s = state();
  {
    std::lock_guard lock(s.mutex);
    for (const auto& logger : s.retired) logger->flush();
    s.json.store(options.json, std::memory_order_relaxed);
    s.level.store(static_cast<int>(options.level), std::memory_order_relaxed);
    s.server.store(server.get(), std::memory_order_release);
    s.access.store(access.get(), std::memory_order_release);
    s.retired.push_back(std::move(server));
    if (access) {
      // spdlog's periodic flusher only visits loggers in its registry.
      spdlog::drop("access");
      spdlog::register_logger(access);
      s.retired.push_back(std::move(access));
    }
  }
  spdlog::flush_every(std::chrono::seconds(1));
}

void shutdown() noexcept {
  State& s = state();
  std::lock_guard lock(s.mutex);
  try {
    for (const auto& logger : s.retired) logger->flush();
  } catch (...) {  // NOLINT(bugprone-empty-catch): nothing left to report a failed flush to
  }
}

bool parse_level(std::string_view text, Level& level) {
  static constexpr std::array<std::pair<std::string_view, Level>, 8> kNames = {{
      {"trace", Level::kTrace},
      {"debug", Level::kDebug},
      {"info", Level::kInfo},
      {"warn", Level::kWarn},
      {"warning", Level::kWarn},
      {"error", Level::kError},
      {"critical", Level::kCritical},
      {"off", Level::kOff},
  }};
  for (const auto& [name, value] : kNames) {
    if (name == text) {
      level = value;
      return true;
    }
  }
  return false;
}

bool enabled(Level level) noexcept {
  return static_cast<int>(level) >= state().level.load(std::memory_order_relaxed) &&
         level != Level::kOff;
}

void write(Level level, std::string_view message) noexcept {
  try {
    spdlog::logger* logger = state().server.load(std::memory_order_acquire);
    if (logger == nullptr) {
      std::fprintf(stderr, "%.*s\n", static_cast<int>(message.size()), message.data());
      return;
    }
    if (state().json.load(std::memory_order_relaxed)) {
      std::string escaped;
      append_json_escaped(escaped, message);
      logger->log(to_spdlog(level), "{}", escaped);
    } else {
      logger->log(to_spdlog(level), "{}", message);
    }
  } catch (...) {  // NOLINT(bugprone-empty-catch): logging must never take the server down
  }
}

bool access_enabled() noexcept { return state().access.load(std::memory_order_relaxed) != nullptr; }

void access(std::string_view line) noexcept {
  try {
    spdlog::logger* logger = state().access.load(std::memory_order_acquire);
    // (Logged as it is: the line is formatted already, and a "{}" would be parsed and copied.)
    if (logger != nullptr)
      logger->log(spdlog::level::info, spdlog::string_view_t(line.data(), line.size()));
  } catch (...) {  // NOLINT(bugprone-empty-catch): logging must never take the server down
  }
}

void append_json_quoted(std::string& out, std::string_view text) {
  out += '"';
  append_json_escaped(out, text);
  out += '"';
}

std::string json_quoted(std::string_view text) {
  std::string out;
  append_json_quoted(out, text);
  return out;
}

std::string escaped(std::string_view text) {
  std::string out;
  append_json_escaped(out, text);
  return out;
}

void append_json_escaped(std::string& out, std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (byte < 0x20 || byte == 0x7f) {
          out += "\\u00";
          out += kHex[byte >> 4];
          out += kHex[byte & 0xf];
        } else {
          out += c;  // UTF-8 passes through; invalid bytes are the log reader's problem
        }
    }
  }
}

}  // namespace hots3::log
