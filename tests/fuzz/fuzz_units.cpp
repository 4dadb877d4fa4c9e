// Fuzz target: the units parser. Whatever the text, each parser returns a
// value or throws UnitError; nothing else escapes, and what it returns
// formats again.
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/units.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  using namespace tessera;
  try {
    (void)format_hex(parse_uint(text));
  } catch (const UnitError&) {
  }
  try {
    (void)format_size(parse_size(text));
  } catch (const UnitError&) {
  }
  try {
    (void)format_time(parse_time(text));
  } catch (const UnitError&) {
  }
  try {
    (void)format_frequency(parse_frequency(text)).size();
  } catch (const UnitError&) {
  }
  try {
    (void)parse_bitrate(text);
  } catch (const UnitError&) {
  }
  return 0;
}
