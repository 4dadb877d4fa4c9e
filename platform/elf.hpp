// ELF loader for 32- and 64-bit RISC-V executables: reads the program
// headers (what gets loaded where), the entry point and the symbol table
// (tohost, begin_signature, ...). Every malformed input gives one
// ElfError naming the file and what is wrong with it.
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/config.hpp"

namespace tessera {

// A bad ELF file is bad input like a bad platform file.
struct ElfError : ConfigError {
  using ConfigError::ConfigError;
};

struct ElfImage {
  struct Segment {
    std::uint64_t addr = 0, memsz = 0;
    std::vector<std::uint8_t> data;  // filesz bytes; the rest up to memsz is zero
  };
  std::string file;
  unsigned xlen = 0;
  std::uint64_t entry = 0;
  std::vector<Segment> segments;
  std::map<std::string, std::uint64_t> symbols;

  static ElfImage read(const std::string& file);
  const std::uint64_t* symbol(const std::string& name) const {
    auto it = symbols.find(name);
    return it == symbols.end() ? nullptr : &it->second;
  }
};

}  // namespace tessera
