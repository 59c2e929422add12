// The development key pair: generated once per data directory so that a server started with
// no configuration at all can be used at once, and kept so that restarts do not break clients.

#include "hots3/common/hex.h"
#include "hots3/common/random.h"
#include "hots3/config/config.h"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <array>
#include <cerrno>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <random>
#include <span>
#include <sys/stat.h>
#include <system_error>
#include <unistd.h>

namespace hots3::config {
namespace {

UserConfig load_credentials(const std::string& path) {
  toml::table table;
  try {
    table = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    throw ConfigError(fmt::format("{}: {}", path, e.description()));
  }
  UserConfig user;
  user.admin = true;
  user.name = table["name"].value_or(std::string("dev"));
  user.access_key = table["access_key"].value_or(std::string());
  user.secret_key = table["secret_key"].value_or(std::string());
  if (user.access_key.empty() || user.secret_key.empty()) {
    throw ConfigError(fmt::format("{}: access_key and secret_key must be set", path));
  }
  return user;
}

UserConfig create_credentials(const std::string& path) {
  UserConfig user;
  user.admin = true;
  user.name = "dev";
  user.access_key = "H3DEV" + random_string(15, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567");
  user.secret_key =
      random_string(40, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789");
  const std::string temp = path + ".tmp";
  {
    const mode_t old_mask = ::umask(077);  // the secret is readable by its owner only
    std::ofstream out(temp, std::ios::trunc);
    ::umask(old_mask);
    out << "# Development credentials of this data directory, generated at first start.\n"
        << "# Delete this file to get new ones; configure [[users]] to use your own.\n"
        << "name = \"" << user.name << "\"\n"
        << "access_key = \"" << user.access_key << "\"\n"
        << "secret_key = \"" << user.secret_key << "\"\n";
    out.flush();
    if (!out) throw ConfigError(fmt::format("{}: cannot write development credentials", temp));
  }
  std::error_code ec;
  std::filesystem::rename(temp, path, ec);
  if (ec) throw ConfigError(fmt::format("{}: {}", path, ec.message()));
  return user;
}

}  // namespace

ResolvedUsers resolve_users(const Config& config) {
  ResolvedUsers result;
  result.users = config.users;
  const char* access = std::getenv("HOTS3_ACCESS_KEY");  // NOLINT(concurrency-mt-unsafe): start-up
  const char* secret = std::getenv("HOTS3_SECRET_KEY");  // NOLINT(concurrency-mt-unsafe): start-up
  const bool has_access = access != nullptr && *access != '\0';
  const bool has_secret = secret != nullptr && *secret != '\0';
  if (has_access != has_secret) {
    throw ConfigError("HOTS3_ACCESS_KEY and HOTS3_SECRET_KEY must be set together");
  }
  if (has_access) {
    if (result.users.empty()) {
      UserConfig admin;
      admin.name = "admin";
      admin.admin = true;
      result.users.push_back(std::move(admin));
    }
    result.users.front().access_key = access;
    result.users.front().secret_key = secret;
    return result;
  }
  if (!result.users.empty()) return result;

  result.credentials_path =
      (std::filesystem::path(config.storage.data_dir) / "credentials").string();
  result.generated = true;
  if (std::filesystem::exists(result.credentials_path)) {
    result.users.push_back(load_credentials(result.credentials_path));
    result.reused = true;
  } else {
    result.users.push_back(create_credentials(result.credentials_path));
  }
  return result;
}

std::optional<UserConfig> development_credentials(const std::string& data_dir) {
  const std::string path = (std::filesystem::path(data_dir) / "credentials").string();
  if (!std::filesystem::exists(path)) return std::nullopt;
  return load_credentials(path);
}

std::string session_key(const std::string& data_dir) {
  const std::string path = (std::filesystem::path(data_dir) / "session.key").string();
  auto fail = [&path](const std::string& what) {
    return ConfigError(fmt::format("{}: {}", path, what));
  };
  constexpr std::size_t kKeyBytes = 32;
  auto read_key = [&] {
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);
    auto bytes = from_hex(line);
    if (!bytes || bytes->size() != kKeyBytes)
      throw fail("not a session key (64 hex digits); delete it to make a new one");
    return *bytes;
  };
  if (std::filesystem::exists(path)) return read_key();
  std::array<std::uint8_t, kKeyBytes> key{};
  random_bytes(std::as_writable_bytes(std::span(key)));
  // Written whole to a temporary file and linked into place: a crash leaves no half-written key,
  // and link(2) fails when another start made the key first, which is then read.
  const std::string temp = path + ".tmp";
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) throw fail(std::error_code(errno, std::generic_category()).message());
  const std::string text = to_hex(key) + "\n";
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
                       ::fsync(fd) == 0;
  ::close(fd);
  if (!written) throw fail("cannot write the session key");
  const int linked = ::link(temp.c_str(), path.c_str());
  const int link_errno = errno;
  ::unlink(temp.c_str());
  if (linked == 0) return std::string(key.begin(), key.end());
  if (link_errno != EEXIST)
    throw fail(std::error_code(link_errno, std::generic_category()).message());
  return read_key();
}

}  // namespace hots3::config
