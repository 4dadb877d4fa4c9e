// A RISC-V hart as an IP: RV64GC (IMAFDC_Zicsr_Zifencei) with M, S and
// U modes, Sv39 and PMP for the control processor, RV32IMAC_Zicsr with M
// and U modes for the tile cores (one interpreter, parameterised by XLEN;
// the extensions, S mode and PMP are parameters).
//
// Timing: each instruction costs a configurable number of cycles by class
// (ALU, branch taken, jump, load, store, multiply, divide, CSR, atomic,
// system) plus, for data accesses, the latency the memory annotates or
// announces with DMI. Instruction fetch is taken to hit an ideal cache (no
// fetch latency), so DMI on or off does not change the timing. Temporal
// decoupling: the hart runs ahead of simulated time by up to `quantum`;
// quantum 0 means it never runs past the next event of any other process.
// WFI sleeps until an interrupt is pending; a sleeping hart costs no host
// time. F and D follow IEEE 754 exactly (fpu.hpp); PMP and Sv39 in
// mmu.hpp. Not modelled: the misaligned
// fetch exception (impossible with C), performance counters beyond
// mcycle/minstret.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <tlm_utils/simple_initiator_socket.h>

#include "common/config.hpp"
#include "common/power.hpp"
#include "common/ip.hpp"

namespace tessera::riscv {

// An instruction of the control processor (a tile's core charges its own event instead).
extern const power::Event kCpInstruction;

class HartBase;
class GdbServer;

class RiscvCpu : public Ip {
 public:
  // Whose instructions these are for the energy meter (a tile's core, or the CP).
  void set_power_event(power::Event e) { instruction_event_ = e; }
  tlm_utils::simple_initiator_socket<RiscvCpu> bus_initiator;
  IrqIn msip_in, mtip_in, meip_in;  // "msip", "mtip", "meip"

  struct Config {
    unsigned xlen = 64;
    unsigned hartid = 0;
    Hertz clock{1e9};
    sc_core::sc_time quantum = sc_core::sc_time(1, sc_core::SC_US);
    bool dmi = true;
    std::uint64_t reset_pc = 0x1000;
    std::string misaligned = "trap";  // trap, or emulate (perform the access)
    std::string extensions = "imafdc";  // after rv32/rv64: imac, imafc or imafdc (g = imafd)
    bool s_mode = true;                 // supervisor mode (Sv39 on RV64)
    unsigned pmp_entries = 16;          // 0, 16 or 64
    std::uint64_t mtime_address = 0x200bff8;  // where the time CSR reads from (0: no time CSR)
    unsigned cpi_alu = 1, cpi_branch_taken = 2, cpi_jump = 2, cpi_load = 1, cpi_store = 1, cpi_mul = 3,
             cpi_div = 20, cpi_csr = 2, cpi_atomic = 4, cpi_system = 2, cpi_fpu = 3, cpi_fdiv = 20;
    bool has(char extension) const;  // in `extensions`, with g standing for imafd
    void visit(Params& p);
    void validate(const Params& p) const;
  };

  RiscvCpu(const sc_core::sc_module_name& n, const Config& c);
  ~RiscvCpu() override;

  // Where execution starts (the firmware's entry point); before simulation.
  void set_reset_pc(std::uint64_t pc);
  const Config& config() const { return config_; }
  // Puts the hart under a debugger; with `halt_at_reset` it waits for GDB
  // before the first instruction. Before simulation.
  void attach_debugger(GdbServer* gdb, bool halt_at_reset) {
    gdb_ = gdb;
    halt_at_reset_ = halt_at_reset;
  }
  HartBase& hart() { return *hart_; }

  // Run control for cores that a controller starts and stops (tile cores).
  // hold(): before simulation, the hart waits for start() instead of
  // running from its reset pc. start(pc): reset the hart's registers and
  // run from pc. halt(): stop at the next instruction boundary (also from
  // inside one of the hart's own accesses) and wait for start().
  // on_unhandled(f): a trap whose handler cannot start calls f and halts
  // the hart, instead of ending the run.
  void hold() { halted_ = true; }
  void start(std::uint64_t pc);
  void halt();
  bool halted() const { return halted_; }
  // In wfi, waiting for an interrupt (a halted core is not asleep).
  bool asleep() const;
  void on_unhandled(std::function<void(unsigned cause, std::uint64_t pc, std::uint64_t tval)> f);

  void report_stats(nlohmann::ordered_json& out) const override;

 private:
  void thread();
  void invalidate_direct_mem_ptr(sc_dt::uint64 start, sc_dt::uint64 end);

  void debug_stop(unsigned sig, const std::string& reason);

  Config config_;
  std::unique_ptr<HartBase> hart_;
  power::Meter* meter_ = &power::meter(name());
  power::Event instruction_event_ = kCpInstruction;
  std::uint64_t charged_ = 0;  // instructions charged to the meter
  GdbServer* gdb_ = nullptr;
  bool halt_at_reset_ = false;
  bool halted_ = false, restart_ = false;
  std::uint64_t start_pc_ = 0;
  sc_core::sc_event wake_;
};

}  // namespace tessera::riscv
