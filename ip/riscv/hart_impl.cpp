// The interpreter. One template serves RV32 (T = uint32_t) and RV64
// (T = uint64_t).
#include <fmt/format.h>

#include <cstdio>
#include <limits>

#include "common/log.hpp"
#include "common/payload.hpp"
#include "common/sim.hpp"
#include "riscv/fpu.hpp"
#include "riscv/hart.hpp"

namespace tessera::riscv {
namespace {

// CSR numbers.
enum Csr : unsigned {
  kFflags = 0x001, kFrm = 0x002, kFcsr = 0x003,
  kCycle = 0xc00, kTime = 0xc01, kInstret = 0xc02, kCycleH = 0xc80, kTimeH = 0xc81, kInstretH = 0xc82,
  kSstatus = 0x100, kSie = 0x104, kStvec = 0x105, kScounteren = 0x106, kSenvcfg = 0x10a, kSscratch = 0x140,
  kSepc = 0x141, kScause = 0x142, kStval = 0x143, kSip = 0x144, kSatp = 0x180,
  kMenvcfg = 0x30a, kMenvcfgH = 0x31a, kMcountinhibit = 0x320, kMconfigptr = 0xf15,
  kPmpcfg0 = 0x3a0, kPmpaddr0 = 0x3b0,
  kTselect = 0x7a0, kTdata1 = 0x7a1, kTdata2 = 0x7a2, kTdata3 = 0x7a3, kTinfo = 0x7a4, kTcontrol = 0x7a5,
  kMstatus = 0x300, kMisa = 0x301, kMedeleg = 0x302, kMideleg = 0x303, kMie = 0x304, kMtvec = 0x305,
  kMcounteren = 0x306, kMstatusH = 0x310, kMscratch = 0x340, kMepc = 0x341, kMcause = 0x342, kMtval = 0x343,
  kMip = 0x344, kMcycle = 0xb00, kMinstret = 0xb02, kMcycleH = 0xb80, kMinstretH = 0xb82,
  kMvendorid = 0xf11, kMarchid = 0xf12, kMimpid = 0xf13, kMhartid = 0xf14,
};

constexpr std::uint64_t kSIE = 1u << 1, kMIE = 1u << 3, kSPIE = 1u << 5, kMPIE = 1u << 7, kSPP = 1u << 8,
                        kMPP = 3u << 11, kFS = 3u << 13, kMPRV = 1u << 17, kSUM = 1u << 18, kMXR = 1u << 19,
                        kTVM = 1u << 20, kTW = 1u << 21, kTSR = 1u << 22;
// What sstatus shows of mstatus (besides UXL and SD).
constexpr std::uint64_t kSstatusMask = kSIE | kSPIE | kSPP | kFS | kSUM | kMXR;
constexpr std::uint64_t kMIrqs = (1u << kIrqMsoft) | (1u << kIrqMtimer) | (1u << kIrqMext);
constexpr std::uint64_t kSIrqs = (1u << kIrqSsoft) | (1u << kIrqStimer) | (1u << kIrqSext);
// Exceptions medeleg can delegate: all but ecall from M (and the reserved 10 and 14).
constexpr std::uint64_t kDelegable = 0xb3ff;
constexpr unsigned kTlbEntries = 256;
// Sdtrig: mcontrol6 (type 6) triggers; tdata1's fields.
constexpr unsigned kTriggers = 4;
constexpr std::uint64_t kTrLoad = 1, kTrStore = 2, kTrExec = 4, kTrU = 8, kTrS = 16, kTrM = 64, kTrMatch = 0xfu << 7,
                        kTrAction = 0xfu << 12, kTrHit0 = 1u << 22;
constexpr std::uint64_t kMTE = 1u << 3, kMPTE = 1u << 7;  // tcontrol

// The loads (operation, memory type, the type it extends as) and the
// stores (operation, memory type), for both loops' switches.
#define TESSERA_RISCV_LOADS(X)                                                                            \
  X(LB, std::int8_t, S) X(LH, std::int16_t, S) X(LW, std::int32_t, S) X(LD, std::uint64_t, T) \
  X(LBU, std::uint8_t, T) X(LHU, std::uint16_t, T) X(LWU, std::uint32_t, T)
#define TESSERA_RISCV_STORES(X) X(SB, std::uint8_t) X(SH, std::uint16_t) X(SW, std::uint32_t) X(SD, std::uint64_t)

template <class T>
class Hart final : public HartBase {
  using S = std::make_signed_t<T>;
  static constexpr unsigned kXlen = sizeof(T) * 8;
  static constexpr unsigned kCacheBits = 14;

  // A decoded instruction, and where its bits were fetched from: while
  // the fetch generation stands (the pc's mapping to host memory holds),
  // a hit costs one compare of those bits with what memory holds now.
  struct Entry {
    std::uint64_t pc = ~0ull;
    const std::uint8_t* host = nullptr;  // 4 readable bytes at the instruction
    std::uint32_t mask = 0;              // the instruction's bits of those 4 bytes
    std::uint32_t gen = 0;               // 0: no host pointer (fetched the slow way each time)
    Decoded d;
  };

 public:
  explicit Hart(const HartEnv& env)
      : HartBase(env), pmp_(env.pmp_entries, kXlen), tlb_(kTlbEntries), cache_(1u << kCacheBits) {
    forget_pmp_pages();
  }

  unsigned xlen() const override { return kXlen; }

  void reset(std::uint64_t pc) override {
    std::memset(x_, 0, sizeof x_);
    pc_ = static_cast<T>(pc);
    priv_ = Priv::M;
    mstatus_ = 0;
    mtvec_ = mepc_ = mcause_ = mtval_ = mscratch_ = mie_ = mcounteren_ = 0;
    std::memset(f_, 0, sizeof f_);
    frm_ = fflags_ = 0;
    stvec_ = sepc_ = scause_ = stval_ = sscratch_ = satp_ = medeleg_ = mideleg_ = scounteren_ = 0;
    mip_sw_ = 0;
    for (auto& t : triggers_)  // the debugger's stay across a core's restart
      if (!dmode(t)) t = Trigger{};
    tselect_ = 0;
    tcontrol_ = 0;
    update_triggers();
    pmp_ = Pmp(env_.pmp_entries, kXlen);
    flush_tlb();
    update_mode();
  }

  bool wfi_wakeup() const override { return (mip() & mie_ & irqs()) != 0; }

  void set_irq(unsigned bit, bool level) override {
    if (level) mip_ |= 1ull << bit;
    else mip_ &= ~(1ull << bit);
    update_pending();
  }

  std::uint64_t reg(unsigned i) const override { return x_[i & 31]; }
  void set_reg(unsigned i, std::uint64_t v) override {
    if (i & 31) x_[i & 31] = static_cast<T>(v);
  }
  std::uint64_t pc() const override { return pc_; }
  void set_pc(std::uint64_t pc) override { pc_ = static_cast<T>(pc); }
  std::uint64_t freg(unsigned i) const override { return env_.has_d ? f_[i & 31] : f_[i & 31] & 0xffffffffu; }
  void set_freg(unsigned i, std::uint64_t v) override {
    f_[i & 31] = env_.has_d ? v : v | kBox;
    fp_dirty();
  }
  std::uint64_t fcsr() const override { return (frm_ << 5) | fflags_; }
  void set_fcsr(std::uint64_t v) override {
    frm_ = (v >> 5) & 7;
    fflags_ = v & 31;
    fp_dirty();
  }

  void run(std::uint64_t limit, bool exact, bool trace) override {
    exact_ = exact;
    yield_ = false;
    watching_ = !watchpoints.empty() || data_triggers_;
    if (debugging()) loop<true, true>(limit);
    else if (trace) loop<true, false>(limit);
    else loop_fast(limit);
  }

 private:
  // ---- interrupts and traps ------------------------------------------------

  std::uint64_t mip() const { return mip_ | mip_sw_; }
  std::uint64_t irqs() const { return env_.has_s ? kMIrqs | kSIrqs : kMIrqs; }

  // The interrupts that trap now: M-level ones (not delegated) below M or
  // with MIE; delegated ones below S or in S with SIE, never in M.
  std::uint64_t takeable() const {
    const std::uint64_t p = mip() & mie_ & irqs();
    const bool m_on = priv_ != Priv::M || (mstatus_ & kMIE);
    const bool s_on = priv_ == Priv::U || (priv_ == Priv::S && (mstatus_ & kSIE));
    return (m_on ? p & ~mideleg_ : 0) | (s_on ? p & mideleg_ : 0);
  }

  void update_pending() { pending_ = takeable() != 0; }

  bool take_interrupt() {
    const std::uint64_t p = takeable();
    for (unsigned cause : {kIrqMext, kIrqMsoft, kIrqMtimer, kIrqSext, kIrqSsoft, kIrqStimer})  // priority order
      if (p & (1ull << cause)) {
        ++interrupts;
        trap(cause, 0, true);
        return true;
      }
    return false;
  }

  void trap(unsigned cause, std::uint64_t tval, bool interrupt = false) {
    ++traps;
    trapped_ = true;
    // To S when delegated and not in M.
    const bool to_s = env_.has_s && priv_ != Priv::M && (((interrupt ? mideleg_ : medeleg_) >> cause) & 1);
    const T tvec = to_s ? stvec_ : mtvec_;
    const T handler = static_cast<T>((tvec & ~T(3)) + ((tvec & 1) && interrupt ? 4 * cause : 0));
    if (!interrupt && pc_ == last_vector_ && instret_ == instret_at_trap_ && traps > 1) {
      unhandled(cause, tval);
      return;
    }
    last_cause_ = cause;
    last_pc_ = pc_;
    last_tval_ = tval;
    const T code = static_cast<T>(cause) | (interrupt ? T(1) << (kXlen - 1) : 0);
    if (to_s) {
      sepc_ = pc_;
      scause_ = code;
      stval_ = static_cast<T>(tval);
      mstatus_ = (mstatus_ & ~(kSPIE | kSPP | kSIE)) | ((mstatus_ & kSIE) ? kSPIE : 0) |
                 (priv_ == Priv::S ? kSPP : 0);
      priv_ = Priv::S;
    } else {
      mepc_ = pc_;
      mcause_ = code;
      mtval_ = static_cast<T>(tval);
      mstatus_ = (mstatus_ & ~(kMPIE | kMPP)) | ((mstatus_ & kMIE) ? kMPIE : 0) | (static_cast<T>(priv_) << 11);
      mstatus_ &= ~kMIE;
      priv_ = Priv::M;
      tcontrol_ = (tcontrol_ & kMTE) ? kMPTE : 0;  // MPTE = MTE, MTE = 0
    }
    pc_ = handler;
    last_vector_ = handler;
    instret_at_trap_ = instret_;
    update_mode();
    cycle_ += env_.cpi[static_cast<unsigned>(OpClass::system)];
  }

  // A trap whose handler cannot even start: report everything, end the run.
  void unhandled(unsigned cause, std::uint64_t tval) {
    if (env_.on_unhandled) {
      yield_ = true;
      env_.on_unhandled(last_cause_, last_pc_, last_tval_);
      return;
    }
    std::string regs;
    for (unsigned i = 0; i < 32; ++i)
      regs += fmt::format("{}x{:<2} {:<4} {:#0{}x}", i % 4 ? "  " : "\n  ", i, reg_name(i), x_[i], kXlen / 4 + 2);
    std::fprintf(stderr,
                 "tessera: %s: unhandled trap: %s (cause %u) at pc %#llx, mtval %#llx; its handler at %#llx "
                 "then raised %s (cause %u, mtval %#llx) before retiring an instruction%s\n",
                 env_.path.c_str(), cause_name(last_cause_, false), last_cause_,
                 static_cast<unsigned long long>(last_pc_), static_cast<unsigned long long>(last_tval_),
                 static_cast<unsigned long long>(pc_), cause_name(cause, false), cause,
                 static_cast<unsigned long long>(tval), regs.c_str());
    sim::request_exit(sim::kExitAbnormal, env_.path, fmt::format("unhandled trap at pc {:#x}", last_pc_),
                      sc_core::sc_time_stamp() + sc_core::sc_time::from_value(unsynced() * env_.period_ticks));
    yield_ = true;
  }

  void illegal(const Decoded& d) { trap(kIllegal, d.raw); }

  // ---- memory --------------------------------------------------------------

  // The fast paths, inlined into the loop: no translation or PMP, no
  // watchpoint, aligned, and in the DMI region hit last. Everything else
  // goes to the full paths.
  // An aligned access of len bytes at addr wholly inside r, at offset off.
  static bool dmi_hit(const DmiRegion* r, T addr, unsigned len, std::uint64_t& off) {
    off = static_cast<std::uint64_t>(addr) - r->base;
    return !(addr & (len - 1)) && off < r->limit && r->limit - off >= len;
  }
  template <class U>
  __attribute__((always_inline)) bool load(T addr, U& v) {
    const DmiRegion* r = last_read_;
    std::uint64_t off;
    if (data_plain_ && !watching_ && dmi_hit(r, addr, sizeof(U), off)) {
      std::memcpy(&v, r->ptr + off, sizeof(U));
      cycle_ += r->read_cycles;
      ++dmi_accesses;
      return true;
    }
    return load_full(addr, v);
  }
  template <class U>
  __attribute__((always_inline)) bool store(T addr, U v) {
    const DmiRegion* r = last_write_;
    std::uint64_t off;
    if (data_plain_ && !watching_ && !g_reservations && dmi_hit(r, addr, sizeof(U), off)) {
      std::memcpy(r->ptr + off, &v, sizeof(U));
      cycle_ += r->write_cycles;
      ++dmi_accesses;
      return true;
    }
    return store_full(addr, v);
  }

  template <class U>
  __attribute__((noinline)) bool load_full(T addr, U& v) {
    if (sizeof(U) > 1 && (addr & (sizeof(U) - 1)) && env_.misaligned_trap) {
      trap(kMisalignedLoad, addr);
      return false;
    }
    if (watching_ && !watch_data(addr, sizeof(U), false)) return false;
    std::uint64_t pa = addr;
    if (!data_plain_) {
      if (sizeof(U) > 1 && crosses_page(addr, sizeof(U)) && translating(data_priv())) return split_load(addr, v);
      if (!translate(addr, sizeof(U), kRead, data_priv(), pa)) return false;
    }
    last_pa_ = pa;
    const DmiRegion* r = last_read_;
    std::uint64_t off = pa - r->base;
    if (off >= r->limit || r->limit - off < sizeof(U)) {
      r = find_dmi(pa, sizeof(U), false);
      if (!r) return load_bus(addr, pa, v);
      last_read_ = const_cast<DmiRegion*>(r);
      off = pa - r->base;
    }
    std::memcpy(&v, r->ptr + off, sizeof(U));
    cycle_ += r->read_cycles;
    ++dmi_accesses;
    return true;
  }

  template <class U>
  bool load_bus(T addr, std::uint64_t pa, U& v) {
    if (!bus_read(pa, &v, sizeof(U))) {
      trap(kLoadAccess, addr);
      return false;
    }
    after_bus();
    return true;
  }

  template <class U>
  __attribute__((noinline)) bool store_full(T addr, U v) {
    if (sizeof(U) > 1 && (addr & (sizeof(U) - 1)) && env_.misaligned_trap) {
      trap(kMisalignedStore, addr);
      return false;
    }
    if (watching_ && !watch_data(addr, sizeof(U), true)) return false;
    std::uint64_t pa = addr;
    if (!data_plain_) {
      if (sizeof(U) > 1 && crosses_page(addr, sizeof(U)) && translating(data_priv())) return split_store(addr, v);
      if (!translate(addr, sizeof(U), kWrite, data_priv(), pa)) return false;
    }
    const DmiRegion* r = last_write_;
    std::uint64_t off = pa - r->base;
    if (off >= r->limit || r->limit - off < sizeof(U)) {
      r = find_dmi(pa, sizeof(U), true);
      if (!r) {
        if (!bus_write(pa, &v, sizeof(U))) {
          trap(kStoreAccess, addr);
          return false;
        }
        after_bus();
        return true;
      }
      last_write_ = const_cast<DmiRegion*>(r);
      off = pa - r->base;
    }
    std::memcpy(r->ptr + off, &v, sizeof(U));
    cycle_ += r->write_cycles;
    ++dmi_accesses;
    if (g_reservations) store_seen(pa, sizeof(U));
    return true;
  }

  // A misaligned access across a page boundary (misaligned=emulate, with
  // translation): byte by byte, each byte translated.
  static bool crosses_page(T addr, unsigned len) { return ((addr & 0xfff) + len) > 0x1000; }
  template <class U>
  bool split_load(T addr, U& v) {
    std::uint8_t b[sizeof(U)];
    for (unsigned i = 0; i < sizeof(U); ++i)
      if (!load<std::uint8_t>(static_cast<T>(addr + i), b[i])) return false;
    std::memcpy(&v, b, sizeof(U));
    return true;
  }
  template <class U>
  bool split_store(T addr, U v) {
    std::uint8_t b[sizeof(U)];
    std::memcpy(b, &v, sizeof(U));
    for (unsigned i = 0; i < sizeof(U); ++i)  // (a fault on the second page leaves the first written)
      if (!store<std::uint8_t>(static_cast<T>(addr + i), b[i])) return false;
    return true;
  }

  // ---- translation and protection ------------------------------------------

  // The privilege data accesses use: MPP under MPRV in M mode.
  Priv data_priv() const {
    return (mstatus_ & kMPRV) && priv_ == Priv::M ? static_cast<Priv>((mstatus_ >> 11) & 3) : priv_;
  }
  bool translating(Priv p) const {
    return kXlen == 64 && p != Priv::M && (static_cast<std::uint64_t>(satp_) >> 60) == 8;
  }

  // After a change of privilege, mstatus, satp or PMP: which paths may skip
  // translation and protection, and the fetch window (a virtual page's off
  // the plain path) dropped.
  void update_mode() {
    const Priv dp = data_priv();
    data_plain_ = !translating(dp) && !pmp_.active(dp == Priv::M);
    const bool plain = !translating(priv_) && !pmp_.active(priv_ == Priv::M);
    if (!plain || !fetch_plain_) fetch_ = DmiRegion{};
    fetch_plain_ = plain;
    enter_fetch_context(plain ? FetchKey{0, 0}
                              : FetchKey{1 + static_cast<unsigned>(priv_), translating(priv_) ? static_cast<std::uint64_t>(satp_) : 0});
    forget_pmp_pages();
    update_pending();
  }
  void flush_tlb() {
    for (auto& e : tlb_) e.vpn = ~0ull;
    drop_fetch();
  }

  // PMP, with pages found wholly allowed remembered per access type.
  void forget_pmp_pages() {
    for (auto& pages : pmp_page_)
      for (auto& page : pages) page = ~0ull;
  }
  bool pmp_ok(std::uint64_t pa, unsigned len, unsigned access, bool machine) {
    std::uint64_t& page = pmp_page_[access == kExec ? 2 : access == kWrite ? 1 : 0][(pa >> 12) % kPmpPages];
    if ((pa >> 12) == page && ((pa + len - 1) >> 12) == page) return true;
    if (!pmp_.allows(pa, len, access, machine)) return false;
    if (pmp_.allows(pa & ~0xfffull, 4096, access, machine)) page = pa >> 12;
    return true;
  }

  // va to pa for an access of `len` bytes (one Access bit) at privilege p:
  // the TLB or a walk, then PMP. A fault traps (page fault, or access fault
  // for PMP and for a PTE the bus refuses) and returns false.
  bool translate(T va, unsigned len, unsigned access, Priv p, std::uint64_t& pa) {
    std::uint64_t a = va;
    if (translating(p)) {
      const bool user = p == Priv::U, sum = mstatus_ & kSUM, mxr = mstatus_ & kMXR;
      const std::uint64_t vpn = static_cast<std::uint64_t>(va) >> 12;
      TlbEntry& e = tlb_[vpn & (kTlbEntries - 1)];
      if (e.vpn == vpn && pte_allows(e.pte, access, user, sum, mxr)) {
        a = (e.ppn << 12) | (a & 0xfff);
      } else {
        const Walk w = sv39_walk(satp_, a, access, user, sum, mxr,
                                 [this](std::uint64_t pte_pa, std::uint64_t& v) { return read_pte(pte_pa, v); });
        if (w.result != Walk::ok) return fault(access, va, w.result == Walk::page_fault), false;
        e.vpn = vpn;
        e.ppn = w.pa >> 12;
        e.pte = w.pte;
        a = w.pa;
        ++page_walks;
      }
    }
    if (!pmp_ok(a, len, access, p == Priv::M)) return fault(access, va, false), false;
    pa = a;
    return true;
  }

  void fault(unsigned access, T va, bool page) {
    if (access == kExec) trap(page ? kFetchPage : kFetchAccess, va);
    else if (access == kWrite) trap(page ? kStorePage : kStoreAccess, va);
    else trap(page ? kLoadPage : kLoadAccess, va);
  }

  // The walker's reads: S-mode accesses for PMP, through DMI or the bus.
  bool read_pte(std::uint64_t pa, std::uint64_t& v) {
    if (!pmp_.allows(pa, 8, kRead, false)) return false;
    if (const DmiRegion* r = find_dmi(pa, 8, false)) {
      std::memcpy(&v, r->ptr + (pa - r->base), 8);
      return true;
    }
    if (!bus_read(pa, &v, 8)) return false;
    after_bus();
    return true;
  }

  // A transaction may have stopped the run or scheduled an event.
  void after_bus() {
    if (exact_ || *env_.stop) yield_ = true;
  }

  // Fetches and decodes the instruction at pc_; nullptr after a fetch trap.
  __attribute__((always_inline)) const Decoded* fetch() {
    Entry& e = cache_[(pc_ >> 1) & ((1u << kCacheBits) - 1)];
    if (e.pc == pc_ && e.gen == fetch_gen_) {
      std::uint32_t raw;
      std::memcpy(&raw, e.host, 4);
      if ((raw & e.mask) == e.d.raw) return &e.d;
    }
    return fetch_miss(e);
  }
  void restart_fetch_gen() override {
    for (Entry& e : cache_) e.gen = 0;
  }
  __attribute__((noinline)) const Decoded* fetch_miss(Entry& e) {
    std::uint64_t off = static_cast<std::uint64_t>(pc_) - fetch_.base;
    std::uint32_t raw;
    if (off < fetch_.limit && fetch_.limit - off >= 4) {
      std::memcpy(&raw, fetch_.ptr + off, 4);
    } else if (!fetch_slow(raw)) {
      return nullptr;
    }
    const std::uint32_t mask = (raw & 3) == 3 ? ~0u : 0xffffu;
    raw &= mask;
    if (e.pc != pc_ || e.d.raw != raw) {
      e.pc = pc_;
      e.d = decode(raw, kXlen);
    }
    off = static_cast<std::uint64_t>(pc_) - fetch_.base;
    const bool windowed = off < fetch_.limit && fetch_.limit - off >= 4;
    e.host = windowed ? fetch_.ptr + off : nullptr;
    e.mask = mask;
    e.gen = windowed ? fetch_gen_ : 0;
    return &e.d;
  }

  bool fetch_slow(std::uint32_t& raw) {
    // Two halves, each from DMI or the bus: a 32-bit instruction may straddle
    // two regions, and a 16-bit one may end a region.
    std::uint16_t half[2] = {0, 0};
    for (unsigned i = 0; i < 2; ++i) {
      const T a = static_cast<T>(pc_ + 2 * i);
      std::uint64_t pa = a;
      if (!fetch_plain_ && !translate(a, 2, kExec, priv_, pa)) return false;
      if (fetch_window_at(a, pa)) {
        std::memcpy(&half[i], fetch_.ptr + (a - fetch_.base), 2);
      } else {
        const std::uint64_t saved = cycle_;  // fetch latency is not modelled (ideal I-cache)
        const bool ok = bus_read(pa, &half[i], 2);
        cycle_ = saved;
        if (!ok) {
          trap(kFetchAccess, a);
          return false;
        }
        if (*env_.stop) yield_ = true;
      }
      if (i == 0 && (half[0] & 3) != 3) break;
    }
    raw = half[0] | (static_cast<std::uint32_t>(half[1]) << 16);
    // Keep the fast path only for windows that hold the whole instruction.
    if (!(static_cast<std::uint64_t>(pc_) - fetch_.base < fetch_.limit && fetch_.limit - (pc_ - fetch_.base) >= 4))
      fetch_ = DmiRegion{};
    return true;
  }

  // The fetch window for va at pa: the DMI region itself on the plain path;
  // otherwise va's page, where the page is DMI memory and PMP lets this
  // privilege execute all of it.
  bool fetch_window_at(T va, std::uint64_t pa) {
    if (fetch_plain_) return fetch_window(pa);
    const DmiRegion* r = find_dmi(pa, 2, false);
    if (!r) return false;
    const std::uint64_t page = pa & ~0xfffull;
    if (page < r->base || page + 4096 > r->base + r->limit) return false;
    if (!pmp_.allows(page, 4096, kExec, priv_ == Priv::M)) return false;
    fetch_ = *r;
    fetch_.base = va & ~T(0xfff);
    fetch_.limit = 4096;
    fetch_.ptr = r->ptr + (page - r->base);
    return true;
  }

  // ---- CSRs ----------------------------------------------------------------

  bool read_time(std::uint64_t& v) {
    if (!env_.mtime_address) return false;
    if (!bus_read(env_.mtime_address, &v, 8)) return false;
    after_bus();
    return true;
  }

  // Returns false for an illegal access (no such CSR, too little
  // privilege, or a write to a read-only one).
  bool csr(unsigned n, T& old, T value, Op op, bool write) {
    if (static_cast<unsigned>(priv_) < ((n >> 8) & 3)) return false;
    if (write && (n >> 10) == 3) return false;
    // Below M, mcounteren allows a counter; in U with S mode, scounteren too.
    auto allowed = [&](unsigned bit) {
      if (priv_ != Priv::M && !((mcounteren_ >> bit) & 1)) return false;
      return !(priv_ == Priv::U && env_.has_s && !((scounteren_ >> bit) & 1));
    };
    auto counter = [&](std::uint64_t v, bool high, unsigned bit) {
      if (!allowed(bit)) return false;
      if (high && kXlen != 32) return false;
      old = static_cast<T>(high ? v >> 32 : v);
      return true;
    };
    T* reg = nullptr;
    T mask = ~T(0);
    switch (n) {
      case kCycle: return counter(cycle_ + cycle_offset_, false, 0);
      case kCycleH: return counter(cycle_ + cycle_offset_, true, 0);
      case kInstret: return counter(instret_, false, 2);
      case kInstretH: return counter(instret_, true, 2);
      case kTime:
      case kTimeH: {
        std::uint64_t t = 0;
        if (!allowed(1)) return false;
        if (!read_time(t)) return false;
        return counter(t, n == kTimeH, 1);
      }
      case kMvendorid: case kMarchid: case kMimpid: old = 0; return true;
      case kMhartid: old = env_.hartid; return true;
      case kMisa:
        old = (T(kXlen == 64 ? 2 : 1) << (kXlen - 2)) | (1u << 0) | (1u << 2) | (1u << 8) | (1u << 12) | (1u << 20) |
              (env_.has_f ? 1u << 5 : 0) | (env_.has_d ? 1u << 3 : 0) | (env_.has_s ? 1u << 18 : 0);
        return true;  // writes ignored (WARL)
      case kMedeleg:
        if (!env_.has_s) return old = 0, true;  // without S mode: read-only zero (WARL)
        reg = &medeleg_;
        mask = kDelegable;
        break;
      case kMideleg:
        if (!env_.has_s) return old = 0, true;
        reg = &mideleg_;
        mask = kSIrqs;
        break;
      case kMenvcfg: case kMcountinhibit: case kMconfigptr: old = 0; return true;  // hardwired zero
      case kMenvcfgH:
        if (kXlen != 32) return false;
        old = 0;
        return true;
      // ---- S mode ----
      case kSstatus: {
        if (!env_.has_s) return false;
        old = mstatus_ & kSstatusMask;
        if constexpr (kXlen == 64) old |= T(2) << 32;                // UXL = 64
        if ((mstatus_ & kFS) == kFS) old |= T(1) << (kXlen - 1);  // SD
        if (write) {
          const T writable = kSIE | kSPIE | kSPP | kSUM | kMXR | (env_.has_f ? kFS : 0);
          mstatus_ = (mstatus_ & ~writable) | (apply(op, old, value) & writable);
          update_mode();
        }
        return true;
      }
      case kSie:
        if (!env_.has_s) return false;
        old = static_cast<T>(mie_ & mideleg_);
        if (write) {
          mie_ = (mie_ & ~mideleg_) | (apply(op, old, value) & mideleg_ & kSIrqs);
          update_pending();
        }
        return true;
      case kSip:
        if (!env_.has_s) return false;
        old = static_cast<T>(mip() & mideleg_);
        if (write) {  // S may set and clear only SSIP, and only when delegated
          const std::uint64_t w = mideleg_ & (1u << kIrqSsoft);
          mip_sw_ = (mip_sw_ & ~w) | (apply(op, old, value) & w);
          update_pending();
        }
        return true;
      case kStvec:
        if (!env_.has_s) return false;
        old = stvec_;
        if (write) {
          T next = apply(op, stvec_, value);
          if ((next & 3) >= 2) next &= ~T(3);
          stvec_ = next & ~T(2);
        }
        return true;
      case kSscratch: if (!env_.has_s) return false; reg = &sscratch_; break;
      case kSepc: if (!env_.has_s) return false; reg = &sepc_; mask = ~T(1); break;
      case kScause: if (!env_.has_s) return false; reg = &scause_; break;
      case kStval: if (!env_.has_s) return false; reg = &stval_; break;
      case kScounteren: if (!env_.has_s) return false; reg = &scounteren_; mask = 7; break;
      case kSenvcfg: if (!env_.has_s) return false; old = 0; return true;
      case kSatp: {
        if (!env_.has_s || (priv_ == Priv::S && (mstatus_ & kTVM))) return false;
        old = satp_;
        if (write) {
          const std::uint64_t v = apply(op, old, value);
          // Bare or Sv39 on RV64 (ASID not implemented: 0), Bare on RV32;
          // a write of another mode has no effect at all.
          if constexpr (kXlen == 64) {
            const std::uint64_t mode = v >> 60;
            if (mode != 0 && mode != 8) return true;
            satp_ = static_cast<T>(v & ((0xfull << 60) | ((1ull << 44) - 1)));
          } else {
            if (v >> 31) return true;
            satp_ = static_cast<T>(v & 0x3fffff);
          }
          flush_tlb();
          update_mode();
        }
        return true;
      }
      case kFflags: case kFrm: case kFcsr: {
        if (!env_.has_f || !(mstatus_ & kFS)) return false;
        old = static_cast<T>(n == kFflags ? fflags_ : n == kFrm ? frm_ : fcsr());
        if (write) {
          const std::uint64_t next = apply(op, old, value);
          if (n == kFflags) fflags_ = next & 31;
          else if (n == kFrm) frm_ = next & 7;
          else set_fcsr(next);
          fp_dirty();
        }
        return true;
      }
      case kMstatus: {
        old = mstatus_;
        if constexpr (kXlen == 64) old |= (T(2) << 32) | (env_.has_s ? T(2) << 34 : 0);  // UXL (and SXL) = 64
        if ((mstatus_ & kFS) == kFS) old |= T(1) << (kXlen - 1);  // SD: FS dirty
        if (write) {
          const T writable = kMIE | kMPIE | kMPP | kMPRV | kTW | (env_.has_f ? kFS : 0) |
                             (env_.has_s ? kSIE | kSPIE | kSPP | kSUM | kMXR | kTVM | kTSR : 0);
          T next = apply(op, mstatus_, value) & writable;
          const unsigned mpp = (next >> 11) & 3;
          if (mpp == 2 || (mpp == 1 && !env_.has_s)) next = (next & ~kMPP) | (mstatus_ & kMPP);  // WARL: keep
          mstatus_ = next;
          update_mode();
        }
        return true;
      }
      case kMstatusH:
        if (kXlen != 32) return false;
        old = 0;
        return true;
      case kMtvec:
        old = mtvec_;
        if (write) {
          T next = apply(op, mtvec_, value);
          if ((next & 3) >= 2) next &= ~T(3);  // reserved modes fall back to direct
          mtvec_ = next & ~T(2);
        }
        return true;
      case kMie: reg = &mie_; mask = static_cast<T>(irqs()); break;
      case kMip:  // MEIP, MTIP, MSIP follow the lines; M writes SEIP, STIP, SSIP
        old = static_cast<T>(mip());
        if (write && env_.has_s) {
          mip_sw_ = apply(op, old, value) & kSIrqs;
          update_pending();
        }
        return true;
      case kMcounteren: reg = &mcounteren_; mask = 7; break;
      case kMscratch: reg = &mscratch_; break;
      case kMepc: reg = &mepc_; mask = ~T(1); break;
      case kMcause: reg = &mcause_; break;
      case kMtval: reg = &mtval_; break;
      case kMcycle:
      case kMinstret:
      case kMcycleH:
      case kMinstretH: {
        // mcycle is the cycle count plus an offset: writing it must not
        // move this hart's time.
        const bool is_cycle = (n & 0xff) == 0;
        const bool high = n >= kMcycleH;
        if (high && kXlen != 32) return false;
        std::uint64_t c = is_cycle ? cycle_ + cycle_offset_ : instret_;
        old = static_cast<T>(high ? c >> 32 : c);
        if (write) {
          const std::uint64_t v = apply(op, old, value);
          if (high) c = (c & 0xffffffffull) | (v << 32);
          else if (kXlen == 32) c = (c & ~0xffffffffull) | (v & 0xffffffffull);
          else c = v;
          if (is_cycle) cycle_offset_ = c - cycle_;
          else instret_ = c - 1;  // the CSR instruction itself retires after the write
        }
        return true;
      }
      default:
        if (n >= kTselect && n <= kTcontrol) return csr_trigger(n, old, value, op, write);
        if (n >= kPmpcfg0 && n < kPmpcfg0 + 16) {
          std::uint64_t v;
          if (!pmp_.read_cfg(n - kPmpcfg0, v)) return false;
          old = static_cast<T>(v);
          if (write) pmp_.write_cfg(n - kPmpcfg0, apply(op, old, value)), pmp_changed();
          return true;
        }
        if (n >= kPmpaddr0 && n < kPmpaddr0 + 64) {
          old = static_cast<T>(pmp_.read_addr(n - kPmpaddr0));
          if (write) pmp_.write_addr(n - kPmpaddr0, apply(op, old, value)), pmp_changed();
          return true;
        }
        // hpmcounter3-31 (and their high halves): none; mcounteren keeps them from S and U.
        if ((n >= 0xc03 && n <= 0xc1f) || (kXlen == 32 && n >= 0xc83 && n <= 0xc9f))
          return counter(0, false, n & 31);
        // mhpmcounter3-31, mhpmevent3-31: hardwired zero.
        if ((n >= 0xb03 && n <= 0xb1f) || (kXlen == 32 && n >= 0xb83 && n <= 0xb9f) || (n >= 0x323 && n <= 0x33f))
          return old = 0, true;
        return false;
    }
    old = *reg;
    if (write) {
      *reg = apply(op, *reg, value) & mask;
      update_pending();
    }
    return true;
  }

  // ---- Sdtrig -------------------------------------------------------------------

  struct Trigger {
    std::uint64_t tdata1 = 15ull << 60;  // type 15: disabled (the field's top bits, kept as 64-bit)
    std::uint64_t tdata2 = 0;
  };
  static unsigned type(const Trigger& t) { return static_cast<unsigned>(t.tdata1 >> 60); }
  static bool dmode(const Trigger& t) { return (t.tdata1 >> 59) & 1; }
  // tdata1 as the guest sees it (type and dmode at the top of XLEN).
  T tdata1_view(const Trigger& t) const {
    return static_cast<T>((static_cast<std::uint64_t>(type(t)) << (kXlen - 4)) |
                          (static_cast<std::uint64_t>(dmode(t)) << (kXlen - 5)) | (t.tdata1 & ((1ull << 27) - 1)));
  }
  void update_triggers() {
    const bool had = exec_triggers_;
    exec_triggers_ = data_triggers_ = false;
    for (const Trigger& t : triggers_)
      if (type(t) == 6) {
        exec_triggers_ = exec_triggers_ || (t.tdata1 & kTrExec);
        data_triggers_ = data_triggers_ || (t.tdata1 & (kTrLoad | kTrStore));
      }
    watching_ = !watchpoints.empty() || data_triggers_;
    if (exec_triggers_ && !had) yield_ = true;  // run() picks the loop that checks fetches
  }
  // The first trigger that fires for an access of `kind` (kTrExec, kTrLoad,
  // kTrStore) to [addr, addr + len) in this mode: it matches if any byte
  // accessed does. -1 for none.
  int trigger_hit(std::uint64_t kind, std::uint64_t addr, unsigned len) {
    const std::uint64_t mode = priv_ == Priv::M ? kTrM : priv_ == Priv::S ? kTrS : kTrU;
    for (unsigned i = 0; i < kTriggers; ++i) {
      Trigger& t = triggers_[i];
      if (type(t) != 6 || !(t.tdata1 & kind) || !(t.tdata1 & mode)) continue;
      // M-mode breakpoint exceptions need tcontrol.MTE (the handler is not re-triggered).
      if (!dmode(t) && priv_ == Priv::M && !(tcontrol_ & kMTE)) continue;
      const std::uint64_t last = addr + len - 1, v = t.tdata2;
      bool hit = false;
      switch ((t.tdata1 & kTrMatch) >> 7) {
        case 0: hit = v >= addr && v <= last; break;  // equal
        case 1: {                                      // NAPOT: the trailing ones give the size
          const unsigned ones = static_cast<unsigned>(__builtin_ctzll(~v));
          const std::uint64_t size = ones >= 63 ? ~0ull : 2ull << ones, lo = v & ~(size - 1);
          hit = last >= lo && addr <= lo + (size - 1);
          break;
        }
        case 2: hit = last >= v; break;  // greater or equal
        case 3: hit = addr < v; break;   // less than
      }
      if (hit) {
        t.tdata1 |= kTrHit0;
        return static_cast<int>(i);
      }
    }
    return -1;
  }
  // Before a load or store: a guest trigger raises a breakpoint exception
  // (false: the access does not happen); a debugger's trigger, or a
  // software watchpoint, stops the hart after the instruction.
  bool watch_data(T addr, unsigned len, bool write) {
    if (data_triggers_) {
      const int t = trigger_hit(write ? kTrStore : kTrLoad, addr, len);
      if (t >= 0 && !dmode(triggers_[t])) return trap(kBreakpoint, addr), false;
      if (t >= 0) {
        watch_hit_ = true;
        watch_address_ = triggers_[t].tdata2 & ~((triggers_[t].tdata1 & kTrMatch) ? (1ull << __builtin_ctzll(~triggers_[t].tdata2)) - 1 : 0);
      }
    }
    if (!watchpoints.empty()) watch(addr, len, write);
    return true;
  }
  bool csr_trigger(unsigned n, T& old, T value, Op op, bool write) {
    Trigger& t = triggers_[tselect_];
    switch (n) {
      case kTselect:
        old = static_cast<T>(tselect_);
        if (write && static_cast<std::uint64_t>(apply(op, old, value)) < kTriggers) tselect_ = static_cast<unsigned>(apply(op, old, value));
        return true;
      case kTdata1: {
        old = tdata1_view(t);
        if (!write || dmode(t)) return true;  // the debugger's triggers are read-only here
        const std::uint64_t v = apply(op, old, value);
        const unsigned ty = static_cast<unsigned>(v >> (kXlen - 4)) & 15;
        if (ty != 6) {
          t.tdata1 = 15ull << 60;  // any other type: disabled
        } else {
          std::uint64_t f = v & (kTrLoad | kTrStore | kTrExec | kTrU | kTrS | kTrM | kTrMatch | kTrHit0);
          if (!env_.has_s) f &= ~kTrS;
          if (((f & kTrMatch) >> 7) > 3) f &= ~kTrMatch;  // match: equal, NAPOT, >=, < (WARL)
          t.tdata1 = (6ull << 60) | f;  // dmode 0, action 0 (breakpoint exception), select 0, size any, no chain
        }
        update_triggers();
        return true;
      }
      case kTdata2:
        old = static_cast<T>(t.tdata2);
        if (write && !dmode(t)) t.tdata2 = apply(op, old, value);
        return true;
      case kTdata3: old = 0; return true;
      case kTinfo: old = (1u << 6) | (1u << 15); return true;  // mcontrol6, disabled (writes ignored: WARL)
      case kTcontrol:
        old = static_cast<T>(tcontrol_);
        if (write) tcontrol_ = apply(op, old, value) & (kMTE | kMPTE);
        return true;
      default: return false;
    }
  }

 public:
  bool debug_csr(unsigned n, std::uint64_t& v) override {
    if (n == kTime || n == kTimeH) return false;
    const Priv saved = priv_;
    priv_ = Priv::M;
    T old = 0;
    const bool ok = csr(n, old, 0, Op::CSRRS, false);
    priv_ = saved;
    v = old;
    return ok;
  }
  bool debug_set_csr(unsigned n, std::uint64_t v) override {
    if (n == kTime || n == kTimeH || (n >> 10) == 3) return false;
    const Priv saved = priv_;
    priv_ = Priv::M;
    T old = 0;
    const bool ok = csr(n, old, static_cast<T>(v), Op::CSRRW, true);
    priv_ = saved;
    update_mode();
    return ok;
  }

  bool debug_translate(std::uint64_t va, std::uint64_t& pa) const override {
    if (!translating(data_priv())) return pa = va, true;
    auto read = [this](std::uint64_t pte_pa, std::uint64_t& v) {
      tlm::tlm_generic_payload t;
      set_access(t, tlm::TLM_READ_COMMAND, pte_pa, reinterpret_cast<unsigned char*>(&v), 8);
      return env_.bus->transport_dbg(t) == 8;
    };
    const Walk w = sv39_walk(satp_, va, kRead, false, true, true, read, true);
    if (w.result != Walk::ok) return false;
    pa = w.pa;
    return true;
  }

  bool debug_trigger(bool insert, unsigned kind, std::uint64_t addr, std::uint64_t len) override {
    std::uint64_t bits = kind == 1 ? kTrExec : kind == 2 ? kTrStore : kind == 3 ? kTrLoad : kTrLoad | kTrStore;
    std::uint64_t match = 0, tdata2 = addr;
    if (kind != 1 && len > 1) {  // NAPOT over an aligned power-of-two range
      if ((len & (len - 1)) || (addr & (len - 1))) return false;
      match = 1, tdata2 = addr | (len / 2 - 1);
    }
    const std::uint64_t tdata1 = (6ull << 60) | (1ull << 59) | (1ull << 12) | (match << 7) | bits | kTrM | kTrS | kTrU;
    for (Trigger& t : triggers_) {
      if (insert && type(t) == 15) {
        t.tdata1 = tdata1, t.tdata2 = tdata2;
        update_triggers();
        return true;
      }
      if (!insert && dmode(t) && (t.tdata1 & ~kTrHit0) == tdata1 && t.tdata2 == tdata2) {
        t = Trigger{};
        update_triggers();
        return true;
      }
    }
    return false;
  }

 private:
  void pmp_changed() {
    flush_tlb();  // walks were checked against the old entries
    update_mode();
  }

  static T apply(Op op, T old, T v) {
    switch (op) {
      case Op::CSRRW: case Op::CSRRWI: return v;
      case Op::CSRRS: case Op::CSRRSI: return old | v;
      default: return old & ~v;
    }
  }

  // ---- atomics ---------------------------------------------------------------

  template <class U>
  void amo(const Decoded& d) {
    const T addr = x_[d.rs1];
    if (addr & (sizeof(U) - 1)) {
      trap(kMisalignedStore, addr);
      return;
    }
    using SU = std::make_signed_t<U>;
    U old;
    if (!load_for_amo(addr, old)) return;
    const U b = static_cast<U>(x_[d.rs2]);
    U v;
    switch (d.op) {
      case Op::AMOSWAP_W: case Op::AMOSWAP_D: v = b; break;
      case Op::AMOADD_W: case Op::AMOADD_D: v = old + b; break;
      case Op::AMOXOR_W: case Op::AMOXOR_D: v = old ^ b; break;
      case Op::AMOAND_W: case Op::AMOAND_D: v = old & b; break;
      case Op::AMOOR_W: case Op::AMOOR_D: v = old | b; break;
      case Op::AMOMIN_W: case Op::AMOMIN_D: v = static_cast<SU>(old) < static_cast<SU>(b) ? old : b; break;
      case Op::AMOMAX_W: case Op::AMOMAX_D: v = static_cast<SU>(old) > static_cast<SU>(b) ? old : b; break;
      case Op::AMOMINU_W: case Op::AMOMINU_D: v = old < b ? old : b; break;
      default: v = old > b ? old : b; break;
    }
    if (!store(addr, v)) return;
    set(d.rd, static_cast<T>(static_cast<S>(static_cast<SU>(old))));
  }

  // The read half of an AMO faults as a store (cause 7).
  template <class U>
  bool load_for_amo(T addr, U& v) {
    std::uint64_t pa = addr;
    if (!data_plain_ && !translate(addr, sizeof(U), kWrite, data_priv(), pa)) return false;
    const DmiRegion* r = find_dmi(pa, sizeof(U), true);
    if (r) {
      std::memcpy(&v, r->ptr + (pa - r->base), sizeof(U));
      cycle_ += r->read_cycles;
      return true;
    }
    if (!bus_read(pa, &v, sizeof(U))) {
      trap(kStoreAccess, addr);
      return false;
    }
    after_bus();
    return true;
  }

  template <class U>
  void load_reserved(const Decoded& d) {
    const T addr = x_[d.rs1];
    if (addr & (sizeof(U) - 1)) {
      trap(kMisalignedLoad, addr);
      return;
    }
    U v;
    if (!load(addr, v)) return;
    using SU = std::make_signed_t<U>;
    set(d.rd, static_cast<T>(static_cast<S>(static_cast<SU>(v))));
    reservation_ = (data_plain_ ? static_cast<std::uint64_t>(addr) : last_pa_) & ~7ull;  // physical
    register_reservation(this, true);
  }

  template <class U>
  void store_conditional(const Decoded& d) {
    const T addr = x_[d.rs1];
    if (addr & (sizeof(U) - 1)) {
      trap(kMisalignedStore, addr);
      return;
    }
    std::uint64_t pa = addr;
    if (!data_plain_ && !translate(addr, sizeof(U), kWrite, data_priv(), pa)) return;
    const bool ok = reservation_ == (pa & ~7ull);
    reservation_ = ~0ull;
    register_reservation(this, false);
    if (ok && !store(addr, static_cast<U>(x_[d.rs2]))) return;
    set(d.rd, ok ? 0 : 1);
  }

  void set(unsigned rd, T v) {
    x_[rd] = v;
    x_[0] = 0;
  }

  // ---- F and D ---------------------------------------------------------------

  static constexpr std::uint64_t kBox = 0xffffffff00000000ull;  // a binary32 in a 64-bit register

  void fp_dirty() { mstatus_ |= kFS; }

  // A binary32 operand: with D, a register that is not NaN-boxed reads as
  // the canonical NaN.
  std::uint64_t fs(unsigned r) const {
    const std::uint64_t v = f_[r];
    if (env_.has_d && (v & kBox) != kBox) return fpu::kCanonicalNanS;
    return v & 0xffffffffu;
  }
  std::uint64_t fsrc(unsigned r, fpu::Fmt f) const { return f == fpu::Fmt::d ? f_[r] : fs(r); }
  void fdst(unsigned r, fpu::Fmt f, std::uint64_t v) {
    f_[r] = f == fpu::Fmt::d ? v : (v & 0xffffffffu) | kBox;
    fp_dirty();
  }
  static T sext32(std::uint64_t v) { return static_cast<T>(static_cast<S>(static_cast<std::int32_t>(static_cast<std::uint32_t>(v)))); }

  // Executes an F/D instruction; false after a trap (illegal: no F or D,
  // mstatus.FS off, or a reserved rounding mode; or a load/store fault).
  bool exec_fp(const Decoded& d, unsigned& cost) {
    using namespace fpu;
    if (!env_.has_f || !(mstatus_ & kFS) || (is_double(d.op) && !env_.has_d)) return illegal(d), false;
    const Fmt fmt = is_double(d.op) ? Fmt::d : Fmt::s;
    const std::uint64_t sign = fmt == Fmt::d ? 1ull << 63 : 1ull << 31;
    cost = env_.cpi[static_cast<unsigned>(op_class(d.op))];
    const T a = x_[d.rs1];
    switch (d.op) {  // moves and memory: no rounding, no flags
      case Op::FLW: {
        std::uint32_t v;
        if (!load<std::uint32_t>(a + static_cast<T>(d.imm), v)) return false;
        fdst(d.rd, Fmt::s, v);
        return true;
      }
      case Op::FLD: {
        std::uint64_t v;
        if (!load<std::uint64_t>(a + static_cast<T>(d.imm), v)) return false;
        fdst(d.rd, Fmt::d, v);
        return true;
      }
      case Op::FSW: return store<std::uint32_t>(a + static_cast<T>(d.imm), static_cast<std::uint32_t>(f_[d.rs2]));
      case Op::FSD: return store<std::uint64_t>(a + static_cast<T>(d.imm), f_[d.rs2]);
      case Op::FMV_X_W: set(d.rd, sext32(f_[d.rs1])); return true;
      case Op::FMV_W_X: fdst(d.rd, Fmt::s, a); return true;
      case Op::FMV_X_D: set(d.rd, static_cast<T>(f_[d.rs1])); return true;
      case Op::FMV_D_X: fdst(d.rd, Fmt::d, a); return true;
      case Op::FSGNJ_S: case Op::FSGNJ_D:
        fdst(d.rd, fmt, (fsrc(d.rs1, fmt) & ~sign) | (fsrc(d.rs2, fmt) & sign));
        return true;
      case Op::FSGNJN_S: case Op::FSGNJN_D:
        fdst(d.rd, fmt, (fsrc(d.rs1, fmt) & ~sign) | (~fsrc(d.rs2, fmt) & sign));
        return true;
      case Op::FSGNJX_S: case Op::FSGNJX_D:
        fdst(d.rd, fmt, fsrc(d.rs1, fmt) ^ (fsrc(d.rs2, fmt) & sign));
        return true;
      case Op::FCLASS_S: case Op::FCLASS_D: set(d.rd, classify(fmt, fsrc(d.rs1, fmt))); return true;
      default: break;
    }
    unsigned flags = 0;
    const std::uint64_t x = fsrc(d.rs1, fmt), y = fsrc(d.rs2, fmt), z = fsrc(d.rs3, fmt);
    switch (d.op) {  // no rounding, but flags
      case Op::FMIN_S: case Op::FMIN_D: fdst(d.rd, fmt, fpu::min(fmt, x, y, flags)); goto done;
      case Op::FMAX_S: case Op::FMAX_D: fdst(d.rd, fmt, fpu::max(fmt, x, y, flags)); goto done;
      case Op::FEQ_S: case Op::FEQ_D: set(d.rd, eq(fmt, x, y, flags)); goto done;
      case Op::FLT_S: case Op::FLT_D: set(d.rd, lt(fmt, x, y, flags)); goto done;
      case Op::FLE_S: case Op::FLE_D: set(d.rd, le(fmt, x, y, flags)); goto done;
      default: break;
    }
    {
      const unsigned rm = d.rm == 7 ? frm_ : d.rm;
      if (rm > kRmm) return illegal(d), false;  // reserved, in the instruction or in frm
      switch (d.op) {
        case Op::FADD_S: case Op::FADD_D: fdst(d.rd, fmt, add(fmt, x, y, rm, flags)); break;
        case Op::FSUB_S: case Op::FSUB_D: fdst(d.rd, fmt, fpu::sub(fmt, x, y, rm, flags)); break;
        case Op::FMUL_S: case Op::FMUL_D: fdst(d.rd, fmt, mul(fmt, x, y, rm, flags)); break;
        case Op::FDIV_S: case Op::FDIV_D: fdst(d.rd, fmt, fpu::div(fmt, x, y, rm, flags)); break;
        case Op::FSQRT_S: case Op::FSQRT_D: fdst(d.rd, fmt, fpu::sqrt(fmt, x, rm, flags)); break;
        case Op::FMADD_S: case Op::FMADD_D: fdst(d.rd, fmt, fpu::fma(fmt, x, y, z, rm, flags)); break;
        case Op::FMSUB_S: case Op::FMSUB_D: fdst(d.rd, fmt, fpu::fma(fmt, x, y, z ^ sign, rm, flags)); break;
        case Op::FNMSUB_S: case Op::FNMSUB_D: fdst(d.rd, fmt, fpu::fma(fmt, x ^ sign, y, z, rm, flags)); break;
        case Op::FNMADD_S: case Op::FNMADD_D: fdst(d.rd, fmt, fpu::fma(fmt, x ^ sign, y, z ^ sign, rm, flags)); break;
        case Op::FCVT_W_S: case Op::FCVT_W_D: set(d.rd, sext32(to_int(fmt, x, 32, true, rm, flags))); break;
        case Op::FCVT_WU_S: case Op::FCVT_WU_D: set(d.rd, sext32(to_int(fmt, x, 32, false, rm, flags))); break;
        case Op::FCVT_L_S: case Op::FCVT_L_D: set(d.rd, static_cast<T>(to_int(fmt, x, 64, true, rm, flags))); break;
        case Op::FCVT_LU_S: case Op::FCVT_LU_D: set(d.rd, static_cast<T>(to_int(fmt, x, 64, false, rm, flags))); break;
        case Op::FCVT_S_W: case Op::FCVT_D_W: fdst(d.rd, fmt, from_int(fmt, a, 32, true, rm, flags)); break;
        case Op::FCVT_S_WU: case Op::FCVT_D_WU: fdst(d.rd, fmt, from_int(fmt, a, 32, false, rm, flags)); break;
        case Op::FCVT_S_L: case Op::FCVT_D_L: fdst(d.rd, fmt, from_int(fmt, a, 64, true, rm, flags)); break;
        case Op::FCVT_S_LU: case Op::FCVT_D_LU: fdst(d.rd, fmt, from_int(fmt, a, 64, false, rm, flags)); break;
        case Op::FCVT_S_D: fdst(d.rd, Fmt::s, convert(Fmt::s, Fmt::d, f_[d.rs1], rm, flags)); break;
        case Op::FCVT_D_S: fdst(d.rd, Fmt::d, convert(Fmt::d, Fmt::s, fs(d.rs1), rm, flags)); break;
        default: return illegal(d), false;
      }
    }
  done:
    if (flags) {
      fflags_ |= flags;
      fp_dirty();
    }
    return true;
  }

  // ---- the loop -----------------------------------------------------------------

  // The loop with a debugger attached or tracing on: every instruction
  // through execute().
  template <bool kTrace, bool kDebug>
  void loop(std::uint64_t limit) {
    [[maybe_unused]] bool progressed = false;
    while (cycle_ < limit && !yield_) {
      if constexpr (kDebug) {
        if (debug_check(pc_, progressed)) break;
        if (exec_triggers_) {
          const int t = trigger_hit(kTrExec, pc_, 2);
          if (t >= 0 && dmode(triggers_[t])) {
            if (progressed) {
              debug_stop_ = Stop::hw_breakpoint;
              break;
            }
          } else if (t >= 0) {
            trap(kBreakpoint, pc_);  // before the instruction: mepc = mtval = its address
            progressed = true;
            continue;
          }
        }
        progressed = true;
      }
      if (pending_ && take_interrupt()) continue;
      if (const Decoded* d = fetch()) execute<kTrace>(*d);
    }
  }

  // The loop without: the pc, the cycle count and instret in registers,
  // the integer instructions and DMI hits inline, anything else (a decode
  // cache miss, a trap, a CSR, a system or FP instruction, an access off
  // the DMI fast path) through execute() on the members. Only that path
  // can raise an interrupt, ask to yield, or change what is copied into
  // registers here.
  void loop_fast(std::uint64_t limit) {
    constexpr std::uint64_t kIndex = (1u << kCacheBits) - 1;
    while (!yield_ && cycle_ < limit) {
      if (pending_ && take_interrupt()) continue;
      T pc = pc_;
      std::uint64_t instret = instret_;
      std::int64_t left = static_cast<std::int64_t>(limit - cycle_);  // cycles to the limit (one register for two)
      Entry* const cache = cache_.data();
      const std::uint32_t gen = fetch_gen_;
      // The DMI regions the inline accesses may use (none_ where they must not).
      const bool plain = data_plain_ && !watching_;
      const DmiRegion* const rr = plain ? last_read_ : &none_;
      const DmiRegion* const rw = plain && !g_reservations ? last_write_ : &none_;
      const unsigned* const cpi = env_.cpi;
      const Decoded* slow = nullptr;
      while (left > 0) {
        const Entry& e = cache[(pc >> 1) & kIndex];
        if (e.pc != pc || e.gen != gen) goto off;
        {
          std::uint32_t raw;
          std::memcpy(&raw, e.host, 4);
          if ((raw & e.mask) != e.d.raw) goto off;
        }
        {
          const Decoded& d = e.d;
          T next = pc + d.len;
          const T a = x_[d.rs1], b = x_[d.rs2];
          const T imm = static_cast<T>(d.imm);
          unsigned cost = cpi[static_cast<unsigned>(OpClass::alu)];
          switch (d.op) {
#include "riscv/hart_integer_ops.inc"
#define TESSERA_LOAD(OP, U, EXT)                                \
  case Op::OP: {                                                \
    std::uint64_t off;                                          \
    if (!dmi_hit(rr, a + imm, sizeof(U), off)) {                \
      slow = &d;                                                \
      goto off;                                                 \
    }                                                           \
    U v;                                                        \
    std::memcpy(&v, rr->ptr + off, sizeof(U));                  \
    left -= rr->read_cycles;                                    \
    ++dmi_accesses;                                             \
    set(d.rd, static_cast<T>(static_cast<EXT>(v)));             \
    cost = cpi[static_cast<unsigned>(OpClass::load)];           \
    break;                                                      \
  }
            TESSERA_RISCV_LOADS(TESSERA_LOAD)
#undef TESSERA_LOAD
#define TESSERA_STORE(OP, U)                                    \
  case Op::OP: {                                                \
    std::uint64_t off;                                          \
    if (!dmi_hit(rw, a + imm, sizeof(U), off)) {                \
      slow = &d;                                                \
      goto off;                                                 \
    }                                                           \
    const U v = static_cast<U>(b);                              \
    std::memcpy(rw->ptr + off, &v, sizeof(U));                  \
    left -= rw->write_cycles;                                   \
    ++dmi_accesses;                                             \
    cost = cpi[static_cast<unsigned>(OpClass::store)];          \
    break;                                                      \
  }
            TESSERA_RISCV_STORES(TESSERA_STORE)
#undef TESSERA_STORE
            case Op::FENCE: break;
            default:
              slow = &d;
              goto off;
          }
          pc = next;
          ++instret;
          left -= cost;
        }
      }
    off:
      pc_ = pc;
      cycle_ = limit - static_cast<std::uint64_t>(left);
      instret_ = instret;
      if (!slow && left <= 0) break;
      if (!slow && !(slow = fetch_miss(cache_[(pc >> 1) & kIndex]))) continue;
      execute<false>(*slow);
    }
  }

  // Executes d, the instruction at pc_, on the members.
  template <bool kTrace>
  void execute(const Decoded& d) {
    const T pc = pc_;
    if constexpr (kTrace) trace_before_ = fp_rd(d.op) ? f_[d.rd] : x_[d.rd];
    T next = pc + d.len;
    const T a = x_[d.rs1], b = x_[d.rs2];
    const T imm = static_cast<T>(d.imm);
    const unsigned* const cpi = env_.cpi;
    unsigned cost = cpi[static_cast<unsigned>(OpClass::alu)];
    switch (d.op) {
#include "riscv/hart_integer_ops.inc"
#define TESSERA_LOAD(OP, U, EXT)                            \
  case Op::OP: {                                            \
    U v;                                                    \
    if (!load<U>(a + imm, v)) goto trapped;                 \
    set(d.rd, static_cast<T>(static_cast<EXT>(v)));         \
    cost = cpi[static_cast<unsigned>(OpClass::load)];       \
    break;                                                  \
  }
      TESSERA_RISCV_LOADS(TESSERA_LOAD)
#undef TESSERA_LOAD
#define TESSERA_STORE(OP, U)                                  \
  case Op::OP:                                                \
    if (!store<U>(a + imm, static_cast<U>(b))) goto trapped;  \
    cost = cpi[static_cast<unsigned>(OpClass::store)];        \
    break;
      TESSERA_RISCV_STORES(TESSERA_STORE)
#undef TESSERA_STORE
      case Op::FENCE: break;
      case Op::FENCE_I: break;  // every execution checks the decoded bits against memory
      case Op::ECALL: trap(priv_ == Priv::U ? kEcallU : priv_ == Priv::S ? kEcallS : kEcallM, 0); goto trapped;
      case Op::EBREAK: trap(kBreakpoint, pc); goto trapped;
      case Op::MRET: {
        if (priv_ != Priv::M) {
          illegal(d);
          goto trapped;
        }
        priv_ = static_cast<Priv>((mstatus_ >> 11) & 3);
        mstatus_ = (mstatus_ & ~(kMIE | kMPP)) | ((mstatus_ & kMPIE) ? kMIE : 0) | kMPIE;
        if (priv_ != Priv::M) mstatus_ &= ~kMPRV;
        tcontrol_ = (tcontrol_ & kMPTE) ? kMPTE | kMTE : 0;
        next = mepc_;
        update_mode();
        cost = cpi[static_cast<unsigned>(OpClass::system)];
        break;
      }
      case Op::SRET: {
        if (!env_.has_s || priv_ == Priv::U || (priv_ == Priv::S && (mstatus_ & kTSR))) {
          illegal(d);
          goto trapped;
        }
        priv_ = (mstatus_ & kSPP) ? Priv::S : Priv::U;
        mstatus_ = (mstatus_ & ~(kSIE | kSPP | kMPRV)) | ((mstatus_ & kSPIE) ? kSIE : 0) | kSPIE;
        next = sepc_;
        update_mode();
        cost = cpi[static_cast<unsigned>(OpClass::system)];
        break;
      }
      case Op::SFENCE_VMA:
        if (!env_.has_s || priv_ == Priv::U || (priv_ == Priv::S && (mstatus_ & kTVM))) {
          illegal(d);
          goto trapped;
        }
        flush_tlb();
        cost = cpi[static_cast<unsigned>(OpClass::system)];
        break;
      case Op::WFI:
        if (priv_ != Priv::M && (mstatus_ & kTW)) {
          illegal(d);
          goto trapped;
        }
        cost = cpi[static_cast<unsigned>(OpClass::system)];
        if (!(mip() & mie_ & irqs())) {
          sleeping_ = true;  // the thread waits for an interrupt
          yield_ = true;
          ++wfi_sleeps;
        }
        break;
      case Op::CSRRW: case Op::CSRRS: case Op::CSRRC: case Op::CSRRWI: case Op::CSRRSI: case Op::CSRRCI: {
        const bool imm_form = d.op >= Op::CSRRWI;
        const T value = imm_form ? T(d.rs1) : a;
        const bool write = d.op == Op::CSRRW || d.op == Op::CSRRWI || d.rs1 != 0;
        T old = 0;
        if (!csr(static_cast<unsigned>(d.imm), old, value, d.op, write)) {
          illegal(d);
          goto trapped;
        }
        set(d.rd, old);
        cost = cpi[static_cast<unsigned>(OpClass::csr)];
        break;
      }
      case Op::LR_W: trapped_ = false; load_reserved<std::uint32_t>(d); goto atomic;
      case Op::SC_W: trapped_ = false; store_conditional<std::uint32_t>(d); goto atomic;
      case Op::AMOSWAP_W: case Op::AMOADD_W: case Op::AMOXOR_W: case Op::AMOAND_W: case Op::AMOOR_W:
      case Op::AMOMIN_W: case Op::AMOMAX_W: case Op::AMOMINU_W: case Op::AMOMAXU_W:
        trapped_ = false;
        amo<std::uint32_t>(d);
        goto atomic;
      case Op::LR_D: trapped_ = false; load_reserved<std::uint64_t>(d); goto atomic;
      case Op::SC_D: trapped_ = false; store_conditional<std::uint64_t>(d); goto atomic;
      case Op::AMOSWAP_D: case Op::AMOADD_D: case Op::AMOXOR_D: case Op::AMOAND_D: case Op::AMOOR_D:
      case Op::AMOMIN_D: case Op::AMOMAX_D: case Op::AMOMINU_D: case Op::AMOMAXU_D:
        trapped_ = false;
        amo<std::uint64_t>(d);
        goto atomic;
      default:
        if (is_fp(d.op)) {
          if (!exec_fp(d, cost)) goto trapped;
          break;
        }
        illegal(d);
        goto trapped;
    }
    pc_ = next;
    ++instret_;
    cycle_ += cost;
    if constexpr (kTrace) trace(pc, d);
    return;
  atomic:
    if (trapped_) return;
    pc_ = next;
    ++instret_;
    cycle_ += cpi[static_cast<unsigned>(OpClass::atomic)];
    if constexpr (kTrace) trace(pc, d);
    return;
  trapped:
    if constexpr (kTrace) log::trace(env_.path, "{:#010x}: trap {:#x}", static_cast<std::uint64_t>(pc), mcause_);
  }

  static T w(T v) { return static_cast<T>(static_cast<S>(static_cast<std::int32_t>(static_cast<std::uint32_t>(v)))); }

  template <class SS, class TT>
  static TT div(TT a, TT b) {
    if (b == 0) return ~TT(0);
    if (static_cast<SS>(a) == std::numeric_limits<SS>::min() && static_cast<SS>(b) == -1) return a;
    return static_cast<TT>(static_cast<SS>(a) / static_cast<SS>(b));
  }
  template <class SS, class TT>
  static TT rem(TT a, TT b) {
    if (b == 0) return a;
    if (static_cast<SS>(a) == std::numeric_limits<SS>::min() && static_cast<SS>(b) == -1) return 0;
    return static_cast<TT>(static_cast<SS>(a) % static_cast<SS>(b));
  }
  static T mulh(T a, T b, bool sa, bool sb) {
    using W = std::conditional_t<sizeof(T) == 8, unsigned __int128, std::uint64_t>;
    using SW = std::conditional_t<sizeof(T) == 8, __int128, std::int64_t>;
    const W x = sa ? static_cast<W>(static_cast<SW>(static_cast<S>(a))) : static_cast<W>(a);
    const W y = sb ? static_cast<W>(static_cast<SW>(static_cast<S>(b))) : static_cast<W>(b);
    return static_cast<T>((x * y) >> kXlen);
  }

  void trace(T pc, const Decoded& d) {
    std::string line = fmt::format("{:#0{}x}: {:0{}x}  {}", static_cast<std::uint64_t>(pc), kXlen / 4 + 2, d.raw,
                                   d.len * 2, disassemble(d, pc));
    if (fp_rd(d.op)) {
      if (f_[d.rd] != trace_before_) line += fmt::format("   {} = {:#x}", freg_name(d.rd), f_[d.rd]);
    } else if (d.rd && x_[d.rd] != trace_before_) {
      line += fmt::format("   {} = {:#x}", reg_name(d.rd), static_cast<std::uint64_t>(x_[d.rd]));
    }
    log::trace(env_.path, "{}", line);
  }

  std::string disassemble(const Decoded& d, T pc) const;

  T x_[32] = {};
  T pc_ = 0;
  std::uint64_t f_[32] = {};       // f0..f31 (binary32 values NaN-boxed)
  std::uint64_t frm_ = 0, fflags_ = 0;
  Priv priv_ = Priv::M;
  T mstatus_ = 0, mtvec_ = 0, mepc_ = 0, mcause_ = 0, mtval_ = 0, mscratch_ = 0, mie_ = 0, mcounteren_ = 0;
  T stvec_ = 0, sepc_ = 0, scause_ = 0, stval_ = 0, sscratch_ = 0, satp_ = 0, scounteren_ = 0;
  T medeleg_ = 0, mideleg_ = 0;
  std::uint64_t mip_ = 0;     // the interrupt lines (MSIP, MTIP, MEIP)
  std::uint64_t mip_sw_ = 0;  // SSIP, STIP, SEIP as software wrote them
  Pmp pmp_;
  struct TlbEntry {
    std::uint64_t vpn = ~0ull, ppn = 0, pte = 0;
  };
  std::vector<TlbEntry> tlb_;  // direct-mapped by the 4 KiB VPN (superpages fill one entry per page used)
  bool data_plain_ = true, fetch_plain_ = true;  // no translation and no PMP on that path
  static constexpr unsigned kPmpPages = 16;
  std::uint64_t pmp_page_[3][kPmpPages];  // by access type, direct-mapped by page: pages wholly allowed
  std::uint64_t last_pa_ = 0;  // the physical address of the last load off the plain path
  Trigger triggers_[kTriggers];
  unsigned tselect_ = 0;
  std::uint64_t tcontrol_ = 0;
  bool pending_ = false;
  bool exact_ = false;
  bool trapped_ = false;
  bool watching_ = false;
  std::uint64_t cycle_offset_ = 0;  // mcycle minus the cycle count
  std::vector<Entry> cache_;
  std::uint64_t trace_before_ = 0;
  // For telling an unhandled trap: where the last trap went and what it was.
  T last_vector_ = ~T(0);
  std::uint64_t instret_at_trap_ = 0;
  unsigned last_cause_ = 0;
  std::uint64_t last_pc_ = 0, last_tval_ = 0;
};

template <class T>
std::string Hart<T>::disassemble(const Decoded& d, T pc) const {
  std::string name = op_name(d.op);
  for (auto& c : name) c = c == '_' ? '.' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (d.len == 2) name = "c." + name;
  const bool fp = is_fp(d.op);
  const char* rd = fp_rd(d.op) ? freg_name(d.rd) : reg_name(d.rd);
  const char* rs1 = fp_rs1(d.op) ? freg_name(d.rs1) : reg_name(d.rs1);
  const char* rs2 = fp ? freg_name(d.rs2) : reg_name(d.rs2);
  if (fp && op_class(d.op) != OpClass::load && op_class(d.op) != OpClass::store) {
    switch (d.op) {
      case Op::FMADD_S: case Op::FMSUB_S: case Op::FNMSUB_S: case Op::FNMADD_S:
      case Op::FMADD_D: case Op::FMSUB_D: case Op::FNMSUB_D: case Op::FNMADD_D:
        return fmt::format("{} {}, {}, {}, {}", name, rd, rs1, rs2, freg_name(d.rs3));
      case Op::FSQRT_S: case Op::FSQRT_D: case Op::FCLASS_S: case Op::FCLASS_D: case Op::FMV_X_W:
      case Op::FMV_W_X: case Op::FMV_X_D: case Op::FMV_D_X: case Op::FCVT_S_D: case Op::FCVT_D_S:
        return fmt::format("{} {}, {}", name, rd, rs1);
      default:
        if (d.op >= Op::FCVT_W_S && d.op <= Op::FCVT_S_LU) return fmt::format("{} {}, {}", name, rd, rs1);
        if (d.op >= Op::FCVT_W_D && d.op <= Op::FCVT_D_LU) return fmt::format("{} {}, {}", name, rd, rs1);
        return fmt::format("{} {}, {}, {}", name, rd, rs1, rs2);
    }
  }
  switch (op_class(d.op)) {
    case OpClass::load: return fmt::format("{} {}, {}({})", name, rd, d.imm, rs1);
    case OpClass::store: return fmt::format("{} {}, {}({})", name, rs2, d.imm, rs1);
    case OpClass::branch:
      return fmt::format("{} {}, {}, {:#x}", name, rs1, rs2, static_cast<std::uint64_t>(static_cast<T>(pc + d.imm)));
    case OpClass::csr:
      return d.op >= Op::CSRRWI ? fmt::format("{} {}, {:#x}, {}", name, rd, d.imm, d.rs1)
                                : fmt::format("{} {}, {:#x}, {}", name, rd, d.imm, rs1);
    case OpClass::atomic: return fmt::format("{} {}, {}, ({})", name, rd, rs2, rs1);
    case OpClass::system: return d.op == Op::ILLEGAL ? fmt::format("illegal {:#x}", d.raw) : name;
    default: break;
  }
  switch (d.op) {
    case Op::LUI: return fmt::format("{} {}, {:#x}", name, rd, (static_cast<std::uint64_t>(d.imm) >> 12) & 0xfffff);
    case Op::AUIPC: return fmt::format("{} {}, {:#x}", name, rd, (static_cast<std::uint64_t>(d.imm) >> 12) & 0xfffff);
    case Op::JAL: return fmt::format("{} {}, {:#x}", name, rd, static_cast<std::uint64_t>(static_cast<T>(pc + d.imm)));
    case Op::JALR: return fmt::format("{} {}, {}({})", name, rd, d.imm, rs1);
    default: break;
  }
  if (d.op >= Op::ADDI && d.op <= Op::SRAI) return fmt::format("{} {}, {}, {}", name, rd, rs1, d.imm);
  if (d.op == Op::ADDIW || d.op == Op::SLLIW || d.op == Op::SRLIW || d.op == Op::SRAIW)
    return fmt::format("{} {}, {}, {}", name, rd, rs1, d.imm);
  return fmt::format("{} {}, {}, {}", name, rd, rs1, rs2);
}

}  // namespace

std::unique_ptr<HartBase> make_hart(unsigned xlen, const HartEnv& env) {
  if (xlen == 32) return std::make_unique<Hart<std::uint32_t>>(env);
  return std::make_unique<Hart<std::uint64_t>>(env);
}

}  // namespace tessera::riscv
