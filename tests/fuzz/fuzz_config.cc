// The configuration file: any text is either a configuration or a ConfigError naming the file,
// line and key; never a crash or another exception.

#include "hots3/config/config.h"

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  hots3::config::Config config;
  try {
    hots3::config::apply_text(config, std::string_view(reinterpret_cast<const char*>(data), size),
                              "fuzz.toml");
  } catch (const hots3::config::ConfigError&) {
  }
  return 0;
}
