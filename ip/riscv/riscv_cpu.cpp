#include "riscv/riscv_cpu.hpp"

#include <fmt/format.h>

#include <cmath>

#include "common/log.hpp"
#include "common/sim.hpp"
#include "riscv/gdb_server.hpp"
#include "riscv/hart.hpp"

namespace tessera::riscv {

const power::Event kCpInstruction = power::declare_event("cp_instruction", "cp", 25, "an instruction of the control processor");

void RiscvCpu::Config::visit(Params& p) {
  p("xlen", xlen, "32 (RV32) or 64 (RV64)");
  p("extensions", extensions, "the ISA after rv32/rv64: imac, imafc or imafdc (g stands for imafd: gc = imafdc)");
  p("s_mode", s_mode, "supervisor mode, with Sv39 paging on RV64 (without: machine and user modes only)");
  p("pmp_entries", pmp_entries, "physical memory protection entries: 0, 16 or 64");
  p("hartid", hartid, "value of mhartid");
  p("clock", clock, "core clock");
  p("quantum", quantum, "how far the hart may run ahead of simulated time (0: never past another process's next event)");
  p("dmi", dmi, "use direct memory interface pointers where targets grant them");
  p.address("reset_pc", reset_pc, "where execution starts (the firmware's entry point replaces it)");
  p("misaligned", misaligned, "misaligned loads and stores: trap, or emulate");
  p.address("mtime_address", mtime_address, "address of the CLINT's mtime, read by the time CSR (0: no time CSR)");
  p("cpi_alu", cpi_alu, "cycles of an ALU instruction");
  p("cpi_branch_taken", cpi_branch_taken, "cycles of a taken branch (not taken: cpi_alu)");
  p("cpi_jump", cpi_jump, "cycles of jal/jalr");
  p("cpi_load", cpi_load, "cycles of a load, before the memory's latency");
  p("cpi_store", cpi_store, "cycles of a store, before the memory's latency");
  p("cpi_mul", cpi_mul, "cycles of a multiplication");
  p("cpi_div", cpi_div, "cycles of a division or remainder");
  p("cpi_csr", cpi_csr, "cycles of a CSR instruction");
  p("cpi_atomic", cpi_atomic, "cycles of an LR/SC/AMO, before the memory's latency");
  p("cpi_system", cpi_system, "cycles of ecall/ebreak/mret/wfi/fence and of taking a trap");
  p("cpi_fpu", cpi_fpu, "cycles of an F/D instruction other than a load, store, division or square root");
  p("cpi_fdiv", cpi_fdiv, "cycles of an F/D division or square root");
}

bool RiscvCpu::Config::has(char extension) const {
  const bool g = extensions.find('g') != std::string::npos && std::string("imafd").find(extension) != std::string::npos;
  return g || extensions.find(extension) != std::string::npos;
}

void RiscvCpu::Config::validate(const Params& p) const {
  if (xlen != 32 && xlen != 64) p.fail("xlen", "must be 32 or 64");
  if (misaligned != "trap" && misaligned != "emulate") p.fail("misaligned", "must be trap or emulate");
  if (extensions.find_first_not_of("imafdcg") != std::string::npos)
    p.fail("extensions", "'" + extensions + "' has a letter other than i, m, a, f, d, c and g");
  for (char e : std::string("imac"))
    if (!has(e)) p.fail("extensions", "'" + extensions + "' lacks " + std::string(1, e) + ": the hart always has I, M, A and C");
  if (has('d') && !has('f')) p.fail("extensions", "'" + extensions + "' has D without F");
  if (pmp_entries != 0 && pmp_entries != 16 && pmp_entries != 64) p.fail("pmp_entries", "must be 0, 16 or 64");
  if (clock.value > 100e9) p.fail("clock", "must be at most 100GHz");
  for (unsigned c : {cpi_alu, cpi_branch_taken, cpi_jump, cpi_load, cpi_store, cpi_mul, cpi_div, cpi_csr, cpi_atomic,
                     cpi_system, cpi_fpu, cpi_fdiv})
    if (c == 0 || c > 1000) p.fail("cpi_*", "cycle counts must be between 1 and 1000");
}

RiscvCpu::RiscvCpu(const sc_core::sc_module_name& n, const Config& c)
    : Ip(n), bus_initiator("bus_initiator"), config_(c) {
  bus_initiator.register_invalidate_direct_mem_ptr(this, &RiscvCpu::invalidate_direct_mem_ptr);
  expose_initiator("bus_initiator", bus_initiator);
  expose_irq_in("msip", msip_in);
  expose_irq_in("mtip", mtip_in);
  expose_irq_in("meip", meip_in);

  HartEnv env;
  env.path = path();
  env.stop = &sim::stop_flag(path());
  env.hartid = c.hartid;
  env.dmi = c.dmi;
  env.misaligned_trap = c.misaligned == "trap";
  env.has_f = c.has('f');
  env.has_d = c.has('d');
  env.has_s = c.s_mode;
  env.pmp_entries = c.pmp_entries;
  env.mtime_address = c.mtime_address;
  env.period_ticks = std::max<std::uint64_t>(1, c.clock.period().value());
  const unsigned cpi[kOpClasses] = {c.cpi_alu, c.cpi_branch_taken, c.cpi_jump,   c.cpi_load,   c.cpi_store,
                                    c.cpi_mul, c.cpi_div,          c.cpi_csr,    c.cpi_atomic, c.cpi_system,
                                    c.cpi_fpu, c.cpi_fdiv};
  std::copy(std::begin(cpi), std::end(cpi), env.cpi);
  hart_ = make_hart(c.xlen, env);
  hart_->reset(c.reset_pc);

  auto line = [this](unsigned bit) {
    return [this, bit](bool level) {
      hart_->set_irq(bit, level);
      if (level) wake_.notify(sc_core::SC_ZERO_TIME);
    };
  };
  msip_in.set_handler(line(kIrqMsoft));
  mtip_in.set_handler(line(kIrqMtimer));
  meip_in.set_handler(line(kIrqMext));
  SC_HAS_PROCESS(RiscvCpu);
  SC_THREAD(thread);
}

RiscvCpu::~RiscvCpu() = default;

void RiscvCpu::set_reset_pc(std::uint64_t pc) { hart_->set_pc(pc); }

void RiscvCpu::start(std::uint64_t pc) {
  halted_ = false;
  restart_ = true;
  start_pc_ = pc;
  hart_->request_yield();  // a core restarting itself leaves its old program now
  wake_.notify(sc_core::SC_ZERO_TIME);
}

void RiscvCpu::halt() {
  halted_ = true;
  hart_->request_yield();
  wake_.notify(sc_core::SC_ZERO_TIME);
}

void RiscvCpu::on_unhandled(std::function<void(unsigned, std::uint64_t, std::uint64_t)> f) {
  hart_->set_unhandled([this, f](unsigned cause, std::uint64_t pc, std::uint64_t tval) {
    halt();
    f(cause, pc, tval);
  });
}

void RiscvCpu::thread() {
  hart_->set_bus(bus_initiator.operator->());
  // DVFS: the period follows the domain's clock (the CP's, or the tiles'
  // for a tile's core), read whenever the hart is in step with the kernel.
  const power::Clock& clock = meter_->clock(power::domain_of(instruction_event_));
  const std::uint64_t nominal = std::max<std::uint64_t>(1, config_.clock.period().value());
  std::uint64_t period = nominal, quantum_cycles = std::max<std::uint64_t>(1, config_.quantum.value() / period);
  double scale = 1.0;
  auto retime = [&] {
    if (clock.scale() == scale) return;
    scale = clock.scale();
    period = std::max<std::uint64_t>(1, static_cast<std::uint64_t>(std::llround(static_cast<double>(nominal) / scale)));
    quantum_cycles = std::max<std::uint64_t>(1, config_.quantum.value() / period);
    hart_->set_period_ticks(period);
  };
  const bool exact = config_.quantum == sc_core::SC_ZERO_TIME;
  const bool trace = log::enabled(path(), log::Level::trace);
  auto sync = [&] {
    if (hart_->unsynced()) sc_core::wait(sc_core::sc_time::from_value(hart_->unsynced() * period));
    hart_->synced();
  };
  if (gdb_ && halt_at_reset_) debug_stop(5, "");
  unsigned slices = 0;
  const bool& stopped = sim::stop_flag(path());
  for (;;) {
    retime();
    if (stopped) {
      sync();
      for (;;) sc_core::wait(wake_);  // the kernel stops at the end of this delta
    }
    if (halted_ || restart_) {
      sync();
      while (halted_) sc_core::wait(wake_);
      // Time spent halted is not the hart's: its cycle count resumes here.
      hart_->wake(0);
      hart_->reset(start_pc_);
      restart_ = false;
      continue;
    }
    if (hart_->sleeping()) {
      sync();
      const sc_core::sc_time start = sc_core::sc_time_stamp();
      while (!hart_->wfi_wakeup() && !halted_ && !restart_) sc_core::wait(wake_);
      hart_->wake((sc_core::sc_time_stamp() - start).value() / period);
      continue;
    }
    std::uint64_t budget = quantum_cycles;
    if (exact) {
      // Never run past another process's next event (by more than one
      // instruction): nothing else can observe the difference.
      const sc_core::sc_time next = sc_core::sc_time_to_pending_activity();
      budget = next == sc_core::sc_max_time() ? quantum_cycles * 1000 : std::max<std::uint64_t>(1, next.value() / period);
      // Nor past the power meter's next window: each window is charged
      // the instructions that began in it, however the slices fall (they
      // follow every other process's events, in a system every chip's).
      const std::uint64_t w = meter_->window().value(), now = sc_core::sc_time_stamp().value();
      budget = std::min(budget, std::max<std::uint64_t>(1, (w - now % w + period - 1) / period));
    }
    const sc_core::sc_time slice_start = sc_core::sc_time_stamp() + sc_core::sc_time::from_value(hart_->unsynced() * period);
    hart_->run(hart_->cycle() - hart_->unsynced() + budget, exact, trace);
    if (const std::uint64_t n = hart_->instret() - charged_) {
      sc_core::sc_time slice_end = sc_core::sc_time_stamp() + sc_core::sc_time::from_value(hart_->unsynced() * period);
      if (exact) {
        const sc_core::sc_time edge = meter_->window() * static_cast<double>(slice_start.value() / meter_->window().value() + 1);
        slice_end = std::min(slice_end, edge);
      }
      meter_->charge(instruction_event_, static_cast<double>(n), slice_start, slice_end);
      charged_ += n;
    }
    if (gdb_) {
      switch (hart_->debug_stop()) {
        case HartBase::Stop::breakpoint: debug_stop(5, "swbreak:;"); break;
        case HartBase::Stop::hw_breakpoint: debug_stop(5, "hwbreak:;"); break;
        case HartBase::Stop::watchpoint: debug_stop(5, fmt::format("watch:{:x};", hart_->watch_address())); break;
        case HartBase::Stop::step: debug_stop(5, ""); break;
        case HartBase::Stop::none:
          if (++slices % 64 == 0 && gdb_->poll()) debug_stop(2, "");  // Ctrl-C, or a debugger attaching
          break;
      }
    }
    sync();
  }
}

bool RiscvCpu::asleep() const { return hart_->sleeping() && !halted_; }

void RiscvCpu::debug_stop(unsigned sig, const std::string& reason) {
  hart_->clear_debug_stop();
  // The whole simulation stands still while the debugger holds this hart.
  switch (gdb_->stopped(this, sig, reason)) {
    case GdbServer::Action::kill: sim::request_exit(0, path(), "killed by the debugger"); break;
    case GdbServer::Action::detach:
    case GdbServer::Action::resume: break;
  }
}

void RiscvCpu::invalidate_direct_mem_ptr(sc_dt::uint64 start, sc_dt::uint64 end) { hart_->invalidate_dmi(start, end); }

void RiscvCpu::report_stats(nlohmann::ordered_json& out) const {
  out["instructions"] = hart_->instret();
  out["cycles"] = hart_->cycle();
  out["traps"] = hart_->traps;
  out["interrupts"] = hart_->interrupts;
  out["wfi_sleeps"] = hart_->wfi_sleeps;
  out["dmi_accesses"] = hart_->dmi_accesses;
  out["bus_accesses"] = hart_->bus_accesses;
  out["page_walks"] = hart_->page_walks;
}

}  // namespace tessera::riscv
