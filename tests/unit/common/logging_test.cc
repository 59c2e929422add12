#include "hots3/common/logging.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace hots3::log {
namespace {

TEST(Logging, JsonEscaping) {
  std::string out;
  append_json_escaped(out, "a\"b\\c\nd\x01\xc3\xa9");
  EXPECT_EQ(out, "a\\\"b\\\\c\\nd\\u0001\xc3\xa9");
}

TEST(Logging, ParseLevel) {
  Level level = Level::kInfo;
  EXPECT_TRUE(parse_level("debug", level));
  EXPECT_EQ(level, Level::kDebug);
  EXPECT_FALSE(parse_level("loud", level));
  EXPECT_EQ(level, Level::kDebug);
}

TEST(Logging, WritesServerAndAccessLogsToFiles) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("hots3-log-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  Options options;
  options.level = Level::kWarn;
  options.server_log_path = (dir / "server.log").string();
  options.access_log_path = (dir / "access.log").string();
  init(options);
  info("not written: below the level");
  warn("disk {} is slow", 3);
  EXPECT_TRUE(access_enabled());
  access(R"({"status":200})");
  shutdown();
  auto read = [](const std::filesystem::path& p) {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  };
  const std::string server = read(dir / "server.log");
  EXPECT_NE(server.find("disk 3 is slow"), std::string::npos);
  EXPECT_EQ(server.find("not written"), std::string::npos);
  EXPECT_EQ(read(dir / "access.log"), "{\"status\":200}\n");
  options.access_log_path = "";
  init(options);
  EXPECT_FALSE(access_enabled());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hots3::log
