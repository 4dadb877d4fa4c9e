// Physical memory protection and Sv39 translation, as the privileged
// specification (1.12) has them; the hart (hart_impl.cpp) calls them on
// its slow paths and caches their answers on its fast ones.
//
// PMP: up to 64 entries (the CP has 16), OFF/TOR/NA4/NAPOT, granularity 4
// bytes, the L bit (locks the entry and its address, and applies it to M
// mode; a locked TOR entry locks the address below it too). The lowest
// matching entry decides; an access partly inside it fails; with no match,
// M mode succeeds and S/U fail. R=0 W=1 is reserved: W is cleared.
//
// Sv39: three levels of 4 KiB, 2 MiB and 1 GiB pages; the A and D bits
// are not set by hardware: an access to a page with A clear, or a store to
// one with D clear, is a page fault (the Svade behaviour; software sets
// them). Reserved PTE bits (63:54: no Svpbmt/Svnapot) and misaligned
// superpages fault. ASIDs are not implemented (satp.ASID reads 0).
#pragma once

#include <cstdint>
#include <vector>

namespace tessera::riscv {

enum Access : unsigned { kRead = 1, kWrite = 2, kExec = 4 };

class Pmp {
 public:
  Pmp(unsigned entries, unsigned xlen);
  unsigned entries() const { return static_cast<unsigned>(cfg_.size()); }

  // pmpcfg<reg> (RV64: even regs only, 8 entries each; RV32: 4 each) and
  // pmpaddr<i>. Registers past the implemented entries read 0 and ignore
  // writes; false for a CSR that does not exist (odd pmpcfg on RV64).
  bool read_cfg(unsigned reg, std::uint64_t& v) const;
  bool write_cfg(unsigned reg, std::uint64_t v);
  std::uint64_t read_addr(unsigned i) const;
  void write_addr(unsigned i, std::uint64_t v);

  // Whether an access of `len` bytes at pa with `access` (one Access bit)
  // is allowed, from M mode or not.
  bool allows(std::uint64_t pa, unsigned len, unsigned access, bool machine) const;
  // Whether any entry can refuse an access from M mode (a locked one), or
  // from S/U mode (any implemented entry).
  bool active(bool machine) const { return machine ? locked_ : !cfg_.empty(); }

 private:
  bool locked(unsigned i) const { return cfg_[i] & 0x80; }
  // The range [lo, hi] an entry matches; false when it is off.
  bool range(unsigned i, std::uint64_t& lo, std::uint64_t& hi) const;
  void update();

  unsigned xlen_;
  std::vector<std::uint8_t> cfg_;
  std::vector<std::uint64_t> addr_;
  bool locked_ = false;
};

// A leaf PTE's permission bits (V R W X U G A D) against an access.
bool pte_allows(std::uint64_t pte, unsigned access, bool user, bool sum, bool mxr);

// The outcome of a walk: the physical address, the leaf PTE and its level
// (0: 4 KiB, 1: 2 MiB, 2: 1 GiB), or which fault.
struct Walk {
  enum Result { ok, page_fault, access_fault } result = ok;
  std::uint64_t pa = 0, pte = 0;
  unsigned level = 0;
};

// Walks the Sv39 tables from satp for va. `read_pte(pa, value)` reads a
// PTE (false: an access fault, PMP's or the bus's). With `debugger`, any
// valid leaf translates (a debugger reads what the page holds, whatever
// its permissions and A/D bits).
template <class ReadPte>
Walk sv39_walk(std::uint64_t satp, std::uint64_t va, unsigned access, bool user, bool sum, bool mxr,
               ReadPte&& read_pte, bool debugger = false) {
  Walk w;
  // Bits 63..39 must all equal bit 38.
  const std::int64_t sva = static_cast<std::int64_t>(va << 25) >> 25;
  if (static_cast<std::uint64_t>(sva) != va) return w.result = Walk::page_fault, w;
  std::uint64_t table = (satp & ((1ull << 44) - 1)) << 12;
  for (int level = 2; level >= 0; --level) {
    const std::uint64_t vpn = (va >> (12 + 9 * level)) & 0x1ff;
    std::uint64_t pte;
    if (!read_pte(table + vpn * 8, pte)) return w.result = Walk::access_fault, w;
    const bool v = pte & 1, r = pte & 2, wr = pte & 4, x = pte & 8;
    if (!v || (!r && wr) || (pte >> 54) != 0) return w.result = Walk::page_fault, w;
    const std::uint64_t ppn = (pte >> 10) & ((1ull << 44) - 1);
    if (!r && !x) {  // a pointer to the next level
      if (level == 0) return w.result = Walk::page_fault, w;
      table = ppn << 12;
      continue;
    }
    if (level > 0 && (ppn & ((1ull << (9 * level)) - 1))) return w.result = Walk::page_fault, w;  // misaligned superpage
    if (!debugger && !pte_allows(pte, access, user, sum, mxr)) return w.result = Walk::page_fault, w;
    const std::uint64_t offset_mask = (1ull << (12 + 9 * level)) - 1;
    w.pa = ((ppn << 12) & ~offset_mask) | (va & offset_mask);
    w.pte = pte;
    w.level = static_cast<unsigned>(level);
    return w;
  }
  w.result = Walk::page_fault;
  return w;
}

}  // namespace tessera::riscv
