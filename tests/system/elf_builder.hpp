// Builds small RISC-V ELF executables in memory, good and deliberately
// broken, for the loader's tests.
#pragma once

#include <elf.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace tessera::testing {

struct ElfSpec {
  unsigned xlen = 64;
  std::uint16_t machine = EM_RISCV;
  std::uint16_t type = ET_EXEC;
  std::uint64_t entry = 0x80000000;
  struct Seg {
    std::uint64_t addr;
    std::vector<std::uint8_t> data;
    std::uint64_t memsz;
  };
  std::vector<Seg> segments;
  std::vector<std::pair<std::string, std::uint64_t>> symbols;
};

template <class Ehdr, class Phdr, class Shdr, class Sym>
std::vector<std::uint8_t> build_elf(const ElfSpec& s) {
  std::vector<std::uint8_t> out(sizeof(Ehdr) + s.segments.size() * sizeof(Phdr));
  Ehdr eh{};
  std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = s.xlen == 64 ? ELFCLASS64 : ELFCLASS32;
  eh.e_ident[EI_DATA] = ELFDATA2LSB;
  eh.e_ident[EI_VERSION] = EV_CURRENT;
  eh.e_type = s.type;
  eh.e_machine = s.machine;
  eh.e_version = EV_CURRENT;
  eh.e_entry = s.entry;
  eh.e_phoff = sizeof(Ehdr);
  eh.e_ehsize = sizeof(Ehdr);
  eh.e_phentsize = sizeof(Phdr);
  eh.e_phnum = static_cast<std::uint16_t>(s.segments.size());
  std::vector<Phdr> ph;
  for (const auto& seg : s.segments) {
    Phdr p{};
    p.p_type = PT_LOAD;
    p.p_offset = out.size();
    p.p_vaddr = p.p_paddr = seg.addr;
    p.p_filesz = seg.data.size();
    p.p_memsz = seg.memsz;
    p.p_flags = PF_R | PF_W | PF_X;
    out.insert(out.end(), seg.data.begin(), seg.data.end());
    ph.push_back(p);
  }
  std::memcpy(out.data(), &eh, sizeof(Ehdr));
  std::memcpy(out.data() + sizeof(Ehdr), ph.data(), ph.size() * sizeof(Phdr));
  if (!s.symbols.empty()) {
    std::string strtab(1, '\0');
    std::vector<Sym> syms(1);
    for (const auto& [name, value] : s.symbols) {
      Sym y{};
      y.st_name = static_cast<std::uint32_t>(strtab.size());
      y.st_value = value;
      y.st_shndx = 1;
      strtab += name + '\0';
      syms.push_back(y);
    }
    const std::uint64_t symoff = out.size();
    out.insert(out.end(), reinterpret_cast<const std::uint8_t*>(syms.data()),
               reinterpret_cast<const std::uint8_t*>(syms.data() + syms.size()));
    const std::uint64_t stroff = out.size();
    out.insert(out.end(), strtab.begin(), strtab.end());
    Shdr sh[3]{};
    sh[1].sh_type = SHT_SYMTAB;
    sh[1].sh_offset = symoff;
    sh[1].sh_size = syms.size() * sizeof(Sym);
    sh[1].sh_link = 2;
    sh[1].sh_entsize = sizeof(Sym);
    sh[2].sh_type = SHT_STRTAB;
    sh[2].sh_offset = stroff;
    sh[2].sh_size = strtab.size();
    const std::uint64_t shoff = out.size();
    out.insert(out.end(), reinterpret_cast<const std::uint8_t*>(sh), reinterpret_cast<const std::uint8_t*>(sh + 3));
    Ehdr* e = reinterpret_cast<Ehdr*>(out.data());
    e->e_shoff = shoff;
    e->e_shentsize = sizeof(Shdr);
    e->e_shnum = 3;
  }
  return out;
}

inline std::vector<std::uint8_t> build_elf(const ElfSpec& s) {
  return s.xlen == 64 ? build_elf<Elf64_Ehdr, Elf64_Phdr, Elf64_Shdr, Elf64_Sym>(s)
                      : build_elf<Elf32_Ehdr, Elf32_Phdr, Elf32_Shdr, Elf32_Sym>(s);
}

// Instruction words as little-endian bytes.
inline std::vector<std::uint8_t> words(std::initializer_list<std::uint32_t> w) {
  std::vector<std::uint8_t> b;
  for (std::uint32_t x : w)
    for (int i = 0; i < 4; ++i) b.push_back(static_cast<std::uint8_t>(x >> (8 * i)));
  return b;
}

inline std::string write_elf(const std::string& path, const std::vector<std::uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                              static_cast<std::streamsize>(bytes.size()));
  return path;
}

}  // namespace tessera::testing
