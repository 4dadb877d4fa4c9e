// Fuzz target: the ELF loader. Whatever the bytes, ElfImage::parse returns
// an image or throws ElfError; an image's segments lie inside the address
// space and hold no more file bytes than the input had.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "elf.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const tessera::ElfImage img = tessera::ElfImage::parse("fuzz.elf", std::vector<std::uint8_t>(data, data + size));
    std::size_t held = 0;
    for (const auto& s : img.segments) {
      if (s.memsz == 0 || s.addr + (s.memsz - 1) < s.addr || s.data.size() > s.memsz) std::abort();
      held += s.data.size();
    }
    if (held > size) std::abort();
  } catch (const tessera::ElfError&) {
  }
  return 0;
}
