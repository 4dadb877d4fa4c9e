// The hart: architectural state, CSRs, traps and the interpreter loop,
// templated on the register type (std::uint32_t for RV32, std::uint64_t for
// RV64). Private to riscv_cpu.cpp and the tests.
//
// Speed: instructions are fetched through a DMI window and decoded once
// into a direct-mapped cache keyed by pc. An entry keeps the host address
// its bits came from; on a hit they are compared with what memory holds
// there now, so self-modifying code and code written by DMA always run
// what memory holds. Host addresses are kept per fetch context (the plain
// path, or a privilege and satp): entering another context switches to
// its generation, and anything that may move a mapping (a DMI grant
// withdrawn, satp, SFENCE.VMA, PMP) drops every context's at once. Data
// accesses go through the last DMI region hit, then a few cached regions,
// then b_transport.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <tlm>
#include <type_traits>
#include <vector>

#include "riscv/decode.hpp"
#include "riscv/mmu.hpp"

namespace tessera::riscv {

enum class Priv : unsigned { U = 0, S = 1, M = 3 };

// Trap causes (privileged specification, mcause).
enum Cause : unsigned {
  kMisalignedFetch = 0,
  kFetchAccess = 1,
  kIllegal = 2,
  kBreakpoint = 3,
  kMisalignedLoad = 4,
  kLoadAccess = 5,
  kMisalignedStore = 6,
  kStoreAccess = 7,
  kEcallU = 8,
  kEcallS = 9,
  kEcallM = 11,
  kFetchPage = 12,
  kLoadPage = 13,
  kStorePage = 15,
  kIrqSsoft = 1,
  kIrqMsoft = 3,
  kIrqStimer = 5,
  kIrqMtimer = 7,
  kIrqSext = 9,
  kIrqMext = 11,
};
const char* cause_name(unsigned cause, bool interrupt);

// Everything the hart needs from the outside: the bus, time, and a place to
// report to. Implemented by RiscvCpu.
struct HartEnv {
  tlm::tlm_fw_transport_if<>* bus = nullptr;
  std::string path;
  const bool* stop = nullptr;  // the run (or this chip) stopped: leave the inner loop
  unsigned hartid = 0;
  bool dmi = true;
  bool misaligned_trap = true;
  bool has_f = true, has_d = true;  // the F and D extensions
  bool has_s = true;                // S mode (with Sv39 on RV64)
  unsigned pmp_entries = 16;
  std::uint64_t mtime_address = 0;
  std::uint64_t period_ticks = 1;  // clock period in time-resolution ticks
  unsigned cpi[kOpClasses] = {};   // by OpClass
  // A trap whose handler cannot start: with this set, it is reported here
  // (first cause, its pc and mtval) and the hart stops in run(); without
  // it, the run ends (the CP's behaviour).
  std::function<void(unsigned cause, std::uint64_t pc, std::uint64_t tval)> on_unhandled;
};

struct DmiRegion {
  std::uint64_t base = 0, limit = 0;  // [base, base + limit)
  std::uint8_t* ptr = nullptr;
  std::uint64_t read_cycles = 0, write_cycles = 0;
  bool read = false, write = false;
};

class HartBase;
// Harts holding an LR reservation; any other hart's store may clear them.
extern std::size_t g_reservations;
void register_reservation(HartBase* h, bool hold);

class HartBase {
 public:
  explicit HartBase(const HartEnv& env) : env_(env) { regions_.reserve(8); }
  virtual ~HartBase() = default;

  virtual unsigned xlen() const = 0;
  virtual void reset(std::uint64_t pc) = 0;
  // Executes until the cycle count reaches `limit`, or something needs the
  // SystemC thread: WFI with nothing pending, an exit request, or a
  // transaction that may have scheduled an event (with `exact` set).
  virtual void run(std::uint64_t limit, bool exact, bool trace) = 0;
  virtual void set_irq(unsigned bit, bool level) = 0;
  // An interrupt is pending and enabled in mie (WFI wakes up on it even
  // with interrupts globally disabled).
  virtual bool wfi_wakeup() const = 0;
  virtual std::uint64_t reg(unsigned i) const = 0;
  virtual void set_reg(unsigned i, std::uint64_t v) = 0;
  virtual std::uint64_t pc() const = 0;
  virtual void set_pc(std::uint64_t pc) = 0;
  // The FP registers (0 without F; 32 with F alone, 64 with D) and fcsr.
  unsigned flen() const { return env_.has_d ? 64 : env_.has_f ? 32 : 0; }
  virtual std::uint64_t freg(unsigned i) const = 0;
  virtual void set_freg(unsigned i, std::uint64_t v) = 0;
  virtual std::uint64_t fcsr() const = 0;
  virtual void set_fcsr(std::uint64_t v) = 0;

  // ---- debugger support (the GDB server) ----
  enum class Stop { none, breakpoint, hw_breakpoint, step, watchpoint };
  struct Watch {
    std::uint64_t addr, len;
    bool read, write;
  };
  std::vector<std::uint64_t> breakpoints;
  std::vector<Watch> watchpoints;
  bool stepping = false;
  // Why run() returned for the debugger, and the watched address hit.
  Stop debug_stop() const { return debug_stop_; }
  std::uint64_t watch_address() const { return watch_address_; }
  void clear_debug_stop() { debug_stop_ = Stop::none; }
  bool debugging() const { return stepping || !breakpoints.empty() || !watchpoints.empty() || exec_triggers_; }
  // A debugger's hardware breakpoint (kind 1) or watchpoint (2 write, 3
  // read, 4 access) on a trigger of its own (dmode = 1, action: enter debug
  // mode, which the server stands for); false when no trigger is free or
  // the range suits none (the server falls back to its own lists), or, on
  // removal, when no trigger holds it.
  virtual bool debug_trigger(bool insert, unsigned kind, std::uint64_t addr, std::uint64_t len) = 0;
  // Memory as this hart sees it, without side effects; bytes done. With
  // paging on for the hart's data accesses, addresses are virtual and
  // translate through its page tables (no faults: an unmapped page ends it).
  unsigned debug_access(std::uint64_t addr, std::uint8_t* data, unsigned len, bool write);
  // A CSR as M mode sees it, for the debugger (false: no such CSR here;
  // the time CSRs, which read the bus, are left out). Writing has the
  // CSR's effects (satp flushes the TLB, and so on).
  virtual bool debug_csr(unsigned n, std::uint64_t& v) = 0;
  virtual bool debug_set_csr(unsigned n, std::uint64_t v) = 0;
  // va to pa as debug_access translates; false where nothing is mapped.
  virtual bool debug_translate(std::uint64_t va, std::uint64_t& pa) const {
    pa = va;
    return true;
  }

  bool sleeping() const { return sleeping_; }
  void set_bus(tlm::tlm_fw_transport_if<>* bus) { env_.bus = bus; }
  // DVFS: the clock period from the next access on.
  void set_period_ticks(std::uint64_t p) { env_.period_ticks = p; }
  // Called when an interrupt woke the hart after `cycles` asleep.
  void wake(std::uint64_t cycles) {
    cycle_ += cycles;
    synced_ = cycle_;
    sleeping_ = false;
  }
  void invalidate_dmi(std::uint64_t start, std::uint64_t end);
  // The fetch window dropped, and with it every host pointer the decode
  // cache holds, in every fetch context (a DMI grant withdrawn, satp,
  // SFENCE.VMA, PMP written).
  void drop_fetch();
  // Leave run() at the next instruction boundary (the core is halted from
  // inside an access).
  void request_yield() { yield_ = true; }
  void set_unhandled(std::function<void(unsigned, std::uint64_t, std::uint64_t)> f) { env_.on_unhandled = std::move(f); }

  std::uint64_t cycle() const { return cycle_; }
  std::uint64_t instret() const { return instret_; }
  std::uint64_t unsynced() const { return cycle_ - synced_; }
  void synced() { synced_ = cycle_; }

  // Statistics.
  std::uint64_t traps = 0, interrupts = 0, dmi_accesses = 0, bus_accesses = 0, wfi_sleeps = 0, page_walks = 0;

 protected:
  // The data side of the memory path. Each returns false on a bus error
  // (the response status is in `status_`).
  bool bus_read(std::uint64_t addr, void* data, unsigned len);
  bool bus_write(std::uint64_t addr, const void* data, unsigned len);
  bool fetch_window(std::uint64_t pc);  // sets the fetch window for pc; false: no DMI
  DmiRegion* find_dmi(std::uint64_t addr, unsigned len, bool write);
  // What the pc's mapping to host memory depends on: one key for the plain
  // path (no translation, no PMP); otherwise the privilege, and satp where
  // it translates. Entries decoded in a context carry its generation, and
  // a context met again since the last drop_fetch() gets its generation
  // back (a trap into M and back to S keeps S's decoded code).
  struct FetchKey {
    std::uint64_t priv = ~0ull, satp = ~0ull;
    bool operator==(const FetchKey& o) const { return priv == o.priv && satp == o.satp; }
  };
  void enter_fetch_context(const FetchKey& key);
  // After 2^32 generations: every entry's generation to 0 (none).
  virtual void restart_fetch_gen() = 0;
  void store_seen(std::uint64_t addr, unsigned len);  // clears other harts' reservations

  // Returns true when the debugger must take over before the next
  // instruction; `progressed` says whether one ran in this run() yet.
  bool debug_check(std::uint64_t pc, bool progressed) {
    if (progressed && stepping) return debug_stop_ = Stop::step, true;
    if (progressed && watch_hit_) return watch_hit_ = false, debug_stop_ = Stop::watchpoint, true;
    for (std::uint64_t b : breakpoints)
      if (b == pc && progressed) return debug_stop_ = Stop::breakpoint, true;
    return false;
  }
  void watch(std::uint64_t addr, unsigned len, bool write) {
    for (const Watch& w : watchpoints)
      if (addr < w.addr + w.len && w.addr < addr + len && (write ? w.write : w.read)) {
        watch_hit_ = true;
        watch_address_ = w.addr;
      }
  }

  HartEnv env_;
  Stop debug_stop_ = Stop::none;
  bool exec_triggers_ = false, data_triggers_ = false;  // enabled triggers that match fetches, loads or stores
  bool watch_hit_ = false;
  std::uint64_t watch_address_ = 0;
  std::uint64_t cycle_ = 0, synced_ = 0, instret_ = 0;
  bool sleeping_ = false;
  bool yield_ = false;  // leave run() at the next instruction boundary
  tlm::tlm_response_status status_ = tlm::TLM_OK_RESPONSE;

  DmiRegion fetch_;                  // instruction window
  std::uint32_t fetch_gen_ = 1;      // the current fetch context's generation
  FetchKey fetch_key_;
  struct FetchContext {
    FetchKey key;
    std::uint32_t gen = 0;
  };
  static constexpr unsigned kFetchContexts = 4;
  FetchContext contexts_[kFetchContexts];
  unsigned next_context_ = 0;
  std::uint32_t last_gen_ = 1;
  std::uint32_t new_fetch_gen();
  DmiRegion* last_read_ = &none_;    // data regions hit last
  DmiRegion* last_write_ = &none_;
  DmiRegion none_;
  std::vector<DmiRegion> regions_;   // cached grants
  std::vector<std::pair<std::uint64_t, std::uint64_t>> denied_;  // ranges without DMI
  tlm::tlm_generic_payload trans_;

 public:
  // LR/SC reservations of every hart, cleared by any hart's store.
  std::uint64_t reservation_ = ~0ull;
};

std::unique_ptr<HartBase> make_hart(unsigned xlen, const HartEnv& env);

}  // namespace tessera::riscv
