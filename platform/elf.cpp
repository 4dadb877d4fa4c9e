#include "elf.hpp"

#include <elf.h>

#include "common/input.hpp"
#include <fmt/format.h>

#include <cstring>
#include <fstream>
#include <iterator>

namespace tessera {
namespace {

struct Reader {
  const std::string& file;
  const std::vector<std::uint8_t>& bytes;

  [[noreturn]] void fail(const std::string& why) const { throw ElfError(file + ": " + why); }

  void need(std::uint64_t off, std::uint64_t len, const std::string& what) const {
    if (off > bytes.size() || len > bytes.size() - off)
      fail(fmt::format("truncated: {} at offset {:#x} ({} bytes) lies beyond the end of the file ({} bytes)", what, off,
                       len, bytes.size()));
  }
  template <class T>
  T get(std::uint64_t off, const std::string& what) const {
    need(off, sizeof(T), what);
    T v;
    std::memcpy(&v, bytes.data() + off, sizeof(T));
    return v;
  }
};

template <class Ehdr, class Phdr, class Shdr, class Sym>
void parse_as(const Reader& r, ElfImage& img) {
  const auto eh = r.get<Ehdr>(0, "the ELF header");
  if (eh.e_machine != EM_RISCV) r.fail(fmt::format("not a RISC-V program (machine {})", eh.e_machine));
  if (eh.e_type != ET_EXEC) r.fail(fmt::format("not an executable (ELF type {}; link it first)", eh.e_type));
  if (eh.e_phentsize != sizeof(Phdr)) r.fail("unexpected program header size");
  img.entry = eh.e_entry;
  std::uint64_t held = 0;
  for (unsigned i = 0; i < eh.e_phnum; ++i) {
    const auto ph = r.get<Phdr>(eh.e_phoff + std::uint64_t(i) * sizeof(Phdr), fmt::format("program header {}", i));
    if (ph.p_type != PT_LOAD || ph.p_memsz == 0) continue;
    if (ph.p_filesz > ph.p_memsz) r.fail(fmt::format("segment {} has more file bytes than memory bytes", i));
    if (ph.p_paddr + (ph.p_memsz - 1) < ph.p_paddr) r.fail(fmt::format("segment {} wraps around the address space", i));
    if (ph.p_memsz > kMaxSegmentBytes)
      r.fail(fmt::format("segment {} at {:#x} is {} bytes; a program segment holds at most {}", i, ph.p_paddr,
                         ph.p_memsz, kMaxSegmentBytes));
    r.need(ph.p_offset, ph.p_filesz, fmt::format("segment {}", i));
    // Segments may name the same file bytes; the image holds a copy of each
    // segment's, so together they may hold no more than the file has.
    held += ph.p_filesz;
    if (held > r.bytes.size())
      r.fail(fmt::format("segment {}: the segments hold {} file bytes together, more than the file's {} (they share "
                         "file bytes)", i, held, r.bytes.size()));
    ElfImage::Segment s;
    s.addr = ph.p_paddr;  // load address (equals p_vaddr for bare-metal links)
    s.memsz = ph.p_memsz;
    s.data.assign(r.bytes.begin() + static_cast<std::ptrdiff_t>(ph.p_offset),
                  r.bytes.begin() + static_cast<std::ptrdiff_t>(ph.p_offset + ph.p_filesz));
    for (const auto& o : img.segments)
      if (s.addr < o.addr + o.memsz && o.addr < s.addr + s.memsz)
        r.fail(fmt::format("segment {} [{:#x}, {:#x}) overlaps segment [{:#x}, {:#x})", i, s.addr, s.addr + s.memsz,
                           o.addr, o.addr + o.memsz));
    if (img.segments.size() == kMaxSegments) r.fail(fmt::format("more than {} loadable segments", kMaxSegments));
    img.segments.push_back(std::move(s));
  }
  if (img.segments.empty()) r.fail("no loadable segment");
  // Symbols: optional (a stripped program simply has none).
  if (eh.e_shoff == 0 || eh.e_shnum == 0) return;
  if (eh.e_shentsize != sizeof(Shdr)) r.fail("unexpected section header size");
  for (unsigned i = 0; i < eh.e_shnum; ++i) {
    const auto sh = r.get<Shdr>(eh.e_shoff + std::uint64_t(i) * sizeof(Shdr), fmt::format("section header {}", i));
    if (sh.sh_type != SHT_SYMTAB) continue;
    if (sh.sh_link >= eh.e_shnum) r.fail("the symbol table names a missing string table");
    const auto strs = r.get<Shdr>(eh.e_shoff + std::uint64_t(sh.sh_link) * sizeof(Shdr), "the string table header");
    r.need(sh.sh_offset, sh.sh_size, "the symbol table");
    r.need(strs.sh_offset, strs.sh_size, "the string table");
    for (std::uint64_t off = 0; off + sizeof(Sym) <= sh.sh_size; off += sizeof(Sym)) {
      const auto sym = r.get<Sym>(sh.sh_offset + off, "a symbol");
      if (sym.st_name == 0 || sym.st_name >= strs.sh_size || sym.st_shndx == SHN_UNDEF) continue;
      const char* name = reinterpret_cast<const char*>(r.bytes.data() + strs.sh_offset + sym.st_name);
      const std::size_t max = strs.sh_size - sym.st_name;
      img.symbols.emplace(std::string(name, strnlen(name, max)), sym.st_value);
    }
  }
}

}  // namespace

std::optional<std::string> ElfImage::string_at(const std::string& name, std::size_t max) const {
  const std::uint64_t* at = symbol(name);
  if (!at) return std::nullopt;
  for (const Segment& s : segments)
    if (*at >= s.addr && *at - s.addr < s.data.size()) {
      const auto* begin = reinterpret_cast<const char*>(s.data.data() + (*at - s.addr));
      return std::string(begin, strnlen(begin, std::min<std::size_t>(max, s.data.size() - (*at - s.addr))));
    }
  return std::nullopt;
}

ElfImage ElfImage::read(const std::string& file) {
  std::vector<std::uint8_t> bytes;
  try {
    bytes = read_input_file(file, "the program", kMaxElfBytes);
  } catch (const ConfigError& e) {
    throw ElfError(e.what());
  }
  return parse(file, bytes);
}

ElfImage ElfImage::parse(const std::string& file, const std::vector<std::uint8_t>& bytes) {
  const Reader r{file, bytes};
  if (bytes.size() < EI_NIDENT || std::memcmp(bytes.data(), ELFMAG, SELFMAG) != 0) r.fail("not an ELF file");
  if (bytes[EI_DATA] != ELFDATA2LSB) r.fail("not little-endian");
  ElfImage img;
  img.file = file;
  if (bytes[EI_CLASS] == ELFCLASS32) {
    img.xlen = 32;
    parse_as<Elf32_Ehdr, Elf32_Phdr, Elf32_Shdr, Elf32_Sym>(r, img);
  } else if (bytes[EI_CLASS] == ELFCLASS64) {
    img.xlen = 64;
    parse_as<Elf64_Ehdr, Elf64_Phdr, Elf64_Shdr, Elf64_Sym>(r, img);
  } else {
    r.fail(fmt::format("unknown ELF class {}", bytes[EI_CLASS]));
  }
  return img;
}

}  // namespace tessera
