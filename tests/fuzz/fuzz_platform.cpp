// Fuzz target: the platform and system parsers with --set overrides. The
// input is a description (JSON), then lines of overrides after a line
// "--". Whatever it says, parsing ends in a checked description or a
// ConfigError; nothing else escapes. What parses also prints (the
// effective configuration, the firmware header and linker symbols).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/log.hpp"
#include "spec.hpp"
#include "system.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tessera;
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::size_t cut = text.find("\n--\n");
  std::vector<std::string> sets;
  if (cut != std::string::npos)
    for (std::size_t at = cut + 4; at < text.size();) {
      const std::size_t end = std::min(text.find('\n', at), text.size());
      if (end > at) sets.push_back(text.substr(at, end - at));
      at = end + 1;
    }
  nlohmann::json raw;
  try {
    raw = nlohmann::json::parse(text.substr(0, cut));
  } catch (const nlohmann::json::exception&) {
    return 0;  // read_json_file's business, fuzzed by its callers' tests
  }
  // Relative paths (timing files, a system's chip file) resolve beside the shipped platforms.
  const std::string file = std::string(TESSERA_PLATFORM_DIR) + "/fuzz.json";
  try {
    if (SystemSpec::is_system(raw)) {
      const SystemSpec s = SystemSpec::parse(file, raw, sets);
      (void)s.describe();
    } else {
      for (const std::string& set : sets) PlatformSpec::apply_set(raw, file, set);
      const PlatformSpec s = PlatformSpec::parse(file, raw);
      (void)s.effective().dump();
      (void)s.c_header();
      (void)s.linker_symbols();
    }
  } catch (const ConfigError&) {
  }
  return 0;
}
