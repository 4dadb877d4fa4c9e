// ELF loader for 32- and 64-bit RISC-V executables: reads the program
// headers (what gets loaded where), the entry point and the symbol table
// (tohost, begin_signature, ...). Every malformed input gives one
// ElfError naming the file and what is wrong with it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/config.hpp"

namespace tessera {

// A bad ELF file is bad input like a bad platform file.
struct ElfError : ConfigError {
  using ConfigError::ConfigError;
};

// Larger programs are refused before they are read: no memory of a T1 is
// loaded with more (the HBM stacks are 16 GiB each).
inline constexpr std::uint64_t kMaxElfBytes = 1ull << 30;
// A segment's memory image (file bytes and zeros) is at most this; loading
// writes the zeros in pieces, so only the file's bytes are held on the host.
inline constexpr std::uint64_t kMaxSegmentBytes = 1ull << 36;
inline constexpr std::size_t kMaxSegments = 1024;

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
  // The same from bytes in memory; `file` names them in messages.
  static ElfImage parse(const std::string& file, const std::vector<std::uint8_t>& bytes);
  const std::uint64_t* symbol(const std::string& name) const {
    auto it = symbols.find(name);
    return it == symbols.end() ? nullptr : &it->second;
  }
  // The NUL-terminated string the program holds at symbol `name` (in a
  // segment's file bytes, at most `max` bytes); none if it has no such symbol.
  std::optional<std::string> string_at(const std::string& name, std::size_t max = 4096) const;
};

}  // namespace tessera
