#include "riscv/mmu.hpp"

namespace tessera::riscv {

Pmp::Pmp(unsigned entries, unsigned xlen) : xlen_(xlen), cfg_(entries, 0), addr_(entries, 0) {}

bool Pmp::read_cfg(unsigned reg, std::uint64_t& v) const {
  if (xlen_ == 64 && (reg & 1)) return false;
  const unsigned per = xlen_ / 8, first = reg * 4;  // entries 4*reg.. (RV64's pmpcfg2 starts at entry 8)
  v = 0;
  for (unsigned k = 0; k < per; ++k)
    if (first + k < cfg_.size()) v |= static_cast<std::uint64_t>(cfg_[first + k]) << (8 * k);
  return true;
}

bool Pmp::write_cfg(unsigned reg, std::uint64_t v) {
  if (xlen_ == 64 && (reg & 1)) return false;
  const unsigned per = xlen_ / 8, first = reg * 4;
  for (unsigned k = 0; k < per; ++k) {
    const unsigned i = first + k;
    if (i >= cfg_.size() || locked(i)) continue;
    std::uint8_t c = static_cast<std::uint8_t>(v >> (8 * k)) & 0x9f;  // L, A, X, W, R
    if ((c & 3) == 2) c &= ~2;                                         // R=0 W=1 is reserved
    cfg_[i] = c;
  }
  update();
  return true;
}

std::uint64_t Pmp::read_addr(unsigned i) const { return i < addr_.size() ? addr_[i] : 0; }

void Pmp::write_addr(unsigned i, std::uint64_t v) {
  if (i >= addr_.size() || locked(i)) return;
  if (i + 1 < cfg_.size() && locked(i + 1) && ((cfg_[i + 1] >> 3) & 3) == 1) return;  // the top of a locked TOR
  addr_[i] = v & (xlen_ == 64 ? (1ull << 54) - 1 : 0xffffffffull);
  update();
}

void Pmp::update() {
  locked_ = false;
  for (unsigned i = 0; i < cfg_.size(); ++i) locked_ = locked_ || (locked(i) && ((cfg_[i] >> 3) & 3));
}

bool Pmp::range(unsigned i, std::uint64_t& lo, std::uint64_t& hi) const {
  const std::uint64_t a = addr_[i];
  switch ((cfg_[i] >> 3) & 3) {
    case 1:  // TOR: [pmpaddr[i-1], pmpaddr[i])
      lo = i ? addr_[i - 1] << 2 : 0;
      if ((a << 2) <= lo) return false;  // empty
      hi = (a << 2) - 1;
      return true;
    case 2: lo = a << 2, hi = lo + 3; return true;  // NA4
    case 3: {                                       // NAPOT: trailing ones give the size
      const unsigned ones = static_cast<unsigned>(__builtin_ctzll(~a));
      if (ones >= (xlen_ == 64 ? 54u : 32u)) return lo = 0, hi = ~0ull, true;
      const std::uint64_t size = 8ull << ones;
      lo = (a << 2) & ~(size - 1);
      hi = lo + size - 1;
      return true;
    }
    default: return false;
  }
}

bool Pmp::allows(std::uint64_t pa, unsigned len, unsigned access, bool machine) const {
  const std::uint64_t last = pa + len - 1;
  for (unsigned i = 0; i < cfg_.size(); ++i) {
    std::uint64_t lo, hi;
    if (!range(i, lo, hi) || last < lo || pa > hi) continue;
    if (pa < lo || last > hi) return false;  // partly inside: fails
    if (machine && !locked(i)) return true;
    return (cfg_[i] & access) != 0;
  }
  return machine || cfg_.empty();
}

bool pte_allows(std::uint64_t pte, unsigned access, bool user, bool sum, bool mxr) {
  const bool r = pte & 2, w = pte & 4, x = pte & 8, u = pte & 16, a = pte & 64, d = pte & 128;
  if (user ? !u : (u && (access == kExec || !sum))) return false;
  switch (access) {
    case kExec: if (!x) return false; break;
    case kWrite: if (!w || !d) return false; break;
    default: if (!r && !(mxr && x)) return false; break;
  }
  return a;
}

}  // namespace tessera::riscv
