#include "tile/tile.hpp"

#include "common/trace.hpp"
#include "common/waves.hpp"
#include "rtl/systolic_rtl.hpp"

#include <cstring>

#include "common/log.hpp"
#include "common/registry.hpp"
#include "dma_regs.hpp"
#include "tensor_regs.hpp"
#include "tile_regs.hpp"
#include "vector_regs.hpp"

namespace tessera::tile {

const power::Event kTileInstruction = power::declare_event("tile_instruction", "tiles", 10, "an instruction of a tile's core");

namespace {
const trace::Category kTrace = trace::category("kernel", "tile kernel launches");
}  // namespace

namespace R = regs::tile;

void Tile::Config::visit(Params& p) {
  spm.size = p.instance_size() ? p.instance_size() : spm.size;
  rtl = p.impl() == "rtl";
  p("banks", spm.banks, "scratchpad SRAM banks (a power of two)");
  p("row_bytes", spm.row_bytes, "bytes a bank serves per cycle (a power of two)");
  p("sram_clock", spm.clock, "scratchpad clock");
  p("sram_latency", spm.latency, "scratchpad cycles from the last row read to the data");
  p("array_rows", array.rows, "systolic array rows (K)");
  p("array_cols", array.cols, "systolic array columns (N)");
  p("array_clock", array_clock, "tensor core clock");
  p("dataflow", dataflow, "weight_stationary or output_stationary");
  p("queue_depth", queue_depth, "commands each engine's queue holds");
  p("vector_lanes", vector.lanes, "vector unit FP32 lanes");
  p("sfu_ratio", vector.sfu_ratio, "lane ops per special-function op (exp, rsqrt, ...)");
  p("dma_burst", dma.burst, "DMA: source bytes per chunk");
  p("dma_outstanding", dma.outstanding, "DMA: chunks in flight at once");
  p("dma_port_bytes", dma.port_bytes, "DMA: bytes its port moves per cycle (at array_clock)");
  p("core", core, "the tile has its RV32IMAC core");
  p("core_clock", core_clock, "tile core clock");
  p("core_quantum", core_quantum, "how far the tile core may run ahead of simulated time (0: never past another event)");
  p("hartid", hartid, "the tile core's mhartid");
  array.clock_hz = array_clock.value;
  vector.clock_hz = array_clock.value;
  dma.clock_hz = array_clock.value;
  array.dataflow =
      dataflow == "output_stationary" ? tensor::Dataflow::output_stationary : tensor::Dataflow::weight_stationary;
}

void Tile::Config::validate(const Params& p) const {
  if (rtl && (array.rows != 8 || array.cols != 8 || dataflow != "weight_stationary"))
    p.fail("array_rows", "impl rtl: the RTL array is 8 x 8, weight stationary: set array_rows and array_cols to 8 (and "
                         "dataflow weight_stationary)");
  if (!(spm.clock.value > 0)) p.fail("sram_clock", "must be above zero");
  spm.validate(p);
  if (array.rows < 1 || array.rows > 1024) p.fail("array_rows", "must be between 1 and 1024");
  if (array.cols < 1 || array.cols > 1024) p.fail("array_cols", "must be between 1 and 1024");
  if (!(array_clock.value > 0)) p.fail("array_clock", "must be above zero");
  if (dataflow != "weight_stationary" && dataflow != "output_stationary")
    p.fail("dataflow", "must be weight_stationary or output_stationary, not \"" + dataflow + "\"");
  if (queue_depth < 1 || queue_depth > 255) p.fail("queue_depth", "must be between 1 and 255");
  if (vector.lanes < 1 || vector.lanes > 4096) p.fail("vector_lanes", "must be between 1 and 4096");
  if (vector.sfu_ratio < 1 || vector.sfu_ratio > 1024) p.fail("sfu_ratio", "must be between 1 and 1024");
  if (dma.burst < 1 || dma.burst > (1u << 20)) p.fail("dma_burst", "must be between 1 and 1048576 bytes");
  if (dma.outstanding < 1 || dma.outstanding > 256) p.fail("dma_outstanding", "must be between 1 and 256");
  if (dma.port_bytes < 1 || dma.port_bytes > 4096) p.fail("dma_port_bytes", "must be between 1 and 4096");
  if (!(core_clock.value > 0) || core_clock.value > 100e9) p.fail("core_clock", "must be above zero and at most 100GHz");
  if (spm.size > 0x7f00'0000) p.fail("size", "a tile's scratchpad must fit its core's local window (at most 2032 MiB)");
}

// The register window: a child module so the scratchpad, not the
// registers, is the tile's first target (mapped at its base).
class Tile::Regs : public MmioTarget {
 public:
  Regs(const sc_core::sc_module_name& n, Tile& t) : MmioTarget(n, R::kBlock), tile_(t) {
    tensor::TensorCore& tc = *t.tc_;
    regs_.on_read(R::STATUS, [&tc](unsigned, bool) -> std::uint64_t {
      return (tc.busy() ? R::STATUS_f::BUSY_MASK : 0) | (tc.error().empty() ? 0 : R::STATUS_f::ERROR_MASK) |
             (std::min<std::uint64_t>(tc.queued(), 255) << R::STATUS_f::QUEUED_SHIFT);
    });
    regs_.on_read(R::COMPLETED, [&tc](unsigned, bool) -> std::uint64_t { return tc.completed(); });
    regs_.on_read(R::ERROR_ID, [&tc](unsigned, bool) -> std::uint64_t { return tc.error_id(); });
    regs_.on_read(R::ERROR_CODE, [this, &tc](unsigned, bool) -> std::uint64_t {
      return refused_ ? static_cast<std::uint64_t>(tensor::CommandError::queue_full)
                      : static_cast<std::uint64_t>(tc.error_code());
    });
    for (unsigned r : {R::IRQ_ENABLE, R::IRQ_STATUS, R::CORE_IRQ_ENABLE})
      regs_.on_write(r, [this, r](RegisterBank::Write& w) {
        regs_.set(r, w.next);
        update_irq();
        return true;
      });
    regs_.on_write(R::CTRL, [this, &tc](RegisterBank::Write& w) {
      if (w.data & R::CTRL_f::RESET_MASK) {
        tc.reset();
        refused_ = 0;
      }
      if (w.data & R::CTRL_f::VRESET_MASK) {
        tile_.vu_->reset();
        vrefused_ = 0;
      }
      if (w.data & R::CTRL_f::DRESET_MASK) {
        tile_.dma_->reset();
        drefused_ = 0;
      }
      if (w.data & R::CTRL_f::SEMRESET_MASK) tile_.sems_.reset();
      return true;
    });
    regs_.on_write(R::CMD_PUSH, [this](RegisterBank::Write&) {
      push();
      return true;
    });
    vector::VectorUnit& vu = *t.vu_;
    regs_.on_read(R::VSTATUS, [&vu](unsigned, bool) -> std::uint64_t {
      return (vu.busy() ? R::VSTATUS_f::BUSY_MASK : 0) | (vu.error().empty() ? 0 : R::VSTATUS_f::ERROR_MASK) |
             (std::min<std::uint64_t>(vu.queued(), 255) << R::VSTATUS_f::QUEUED_SHIFT);
    });
    regs_.on_read(R::VCOMPLETED, [&vu](unsigned, bool) -> std::uint64_t { return vu.completed(); });
    regs_.on_read(R::VERROR_ID, [&vu](unsigned, bool) -> std::uint64_t { return vu.error_id(); });
    regs_.on_write(R::VCMD_PUSH, [this](RegisterBank::Write&) {
      vpush();
      return true;
    });
    dma::Dma& dma = *t.dma_;
    regs_.on_read(R::DMA_STATUS, [&dma](unsigned, bool) -> std::uint64_t {
      return (dma.busy() ? R::DMA_STATUS_f::BUSY_MASK : 0) | (dma.error().empty() ? 0 : R::DMA_STATUS_f::ERROR_MASK) |
             (std::min<std::uint64_t>(dma.queued(), 255) << R::DMA_STATUS_f::QUEUED_SHIFT);
    });
    regs_.on_read(R::DMA_COMPLETED, [&dma](unsigned, bool) -> std::uint64_t { return dma.completed(); });
    regs_.on_read(R::DMA_ERROR_ID, [&dma](unsigned, bool) -> std::uint64_t { return dma.error_id(); });
    regs_.on_read(R::DMA_ERROR_CODE, [this, &dma](unsigned, bool) -> std::uint64_t {
      return dma_full_ ? static_cast<std::uint64_t>(dma::DmaError::queue_full)
                       : static_cast<std::uint64_t>(dma.error_code());
    });
    regs_.on_write(R::DMA_PUSH, [this](RegisterBank::Write&) {
      dpush();
      return true;
    });
    Semaphores& sems = t.sems_;
    regs_.on_read(R::SEM, [&sems](unsigned i, bool) -> std::uint64_t { return sems.value(i); });
    regs_.on_write(R::SEM, [&sems](RegisterBank::Write& w) {
      if (w.data) sems.signal(w.index, static_cast<std::uint32_t>(w.data));
      return true;
    });
    regs_.on_read(R::SEM_TAKE, [&sems](unsigned i, bool debug) -> std::uint64_t {
      return debug ? sems.value(i) != 0 : sems.try_take(i);
    });
    sems.on_signal([this](unsigned) { raise(R::IRQ_STATUS_f::SEM_MASK); });
    regs_.on_read(R::CORE_STATUS, [this](unsigned, bool) -> std::uint64_t { return core_state_; });
    regs_.on_write(R::CORE_CTRL, [this](RegisterBank::Write& w) {
      riscv::RiscvCpu* core = tile_.core_.get();
      if (!core) {
        log::guest_error(tile_.path(), "tile/no-core", "CORE_CTRL written on a tile configured without a core");
        return false;
      }
      if (w.data & R::CORE_CTRL_f::HALT_MASK) {
        core->halt();
        core_state_ = 0;
      }
      if (w.data & R::CORE_CTRL_f::START_MASK) start_core();
      return true;
    });
    regs_.on_write(R::CORE_EXIT, [this](RegisterBank::Write& w) {
      if (tile_.core_ && core_state_ == 1) {
        tile_.core_->halt();
        core_state_ = 2;
        ++kernels_done_;
        tile_.core_exit_ = static_cast<std::uint32_t>(w.next);
        tile_.core_faulted_ = false;
        tile_.core_stopped_.notify(sc_core::SC_ZERO_TIME);
        if (trace::on(kTrace))
          trace::slice(kTrace, tile_.path() + ".core", fmt::format("kernel {:#x}", kernel_pc_), kernel_start_, now(),
                       {{"exit", w.next}});
        raise(R::IRQ_STATUS_f::CORE_DONE_MASK);
      }
      return true;
    });
    regs_.on_write(R::CORE_FAULT_CAUSE, [this](RegisterBank::Write& w) {
      core_fault(static_cast<unsigned>(w.next), regs_.get(R::CORE_FAULT_PC), regs_.get(R::CORE_FAULT_TVAL));
      return true;
    });
  }

  void start_core() {
    tile_.core_->start(regs_.get(R::CORE_PC));
    core_state_ = 1;
    kernel_start_ = now();
    kernel_pc_ = regs_.get(R::CORE_PC);
  }

  // The tile core stopped on a fault (its trap handler reported one, or a
  // trap could not be handled at all).
  void core_fault(unsigned cause, std::uint64_t pc, std::uint64_t tval) {
    regs_.set(R::CORE_FAULT_CAUSE, cause);
    regs_.set(R::CORE_FAULT_PC, pc);
    regs_.set(R::CORE_FAULT_TVAL, tval);
    if (!tile_.core_ || core_state_ != 1) return;
    tile_.core_->halt();
    core_state_ = 3;
    ++kernel_faults_;
    tile_.core_faulted_ = true;
    tile_.core_stopped_.notify(sc_core::SC_ZERO_TIME);
    log::guest_error(tile_.path(), "tile/core-fault", "tile core fault: mcause {:#x} at pc {:#x}, mtval {:#x}", cause,
                     pc, tval);
    raise(R::IRQ_STATUS_f::CORE_FAULT_MASK);
  }

  void dma_event() {
    dma::Dma& dma = *tile_.dma_;
    const bool completed = dma.completed() != seen_dcompleted_, failed = dma.stats().errors != seen_derrors_;
    seen_dcompleted_ = dma.completed();
    seen_derrors_ = dma.stats().errors;
    dma.acknowledge();
    raise((failed ? R::IRQ_STATUS_f::DERROR_MASK : 0) | (completed ? R::IRQ_STATUS_f::DDONE_MASK : 0));
  }

  void set(unsigned r, std::uint64_t v) { regs_.set(r, v); }

  void raise(std::uint64_t bits) {
    regs_.set(R::IRQ_STATUS, regs_.get(R::IRQ_STATUS) | bits);
    update_irq();
  }

  void vector_event() {
    vector::VectorUnit& vu = *tile_.vu_;
    const bool completed = vu.completed() != seen_vcompleted_, failed = vu.stats().errors != seen_verrors_;
    seen_vcompleted_ = vu.completed();
    seen_verrors_ = vu.stats().errors;
    regs_.set(R::IRQ_STATUS, regs_.get(R::IRQ_STATUS) | (failed ? R::IRQ_STATUS_f::VERROR_MASK : 0) |
                                 (completed ? R::IRQ_STATUS_f::VDONE_MASK : 0));
    vu.acknowledge();
    update_irq();
  }

  // The engine holds its line until acknowledged; its news become status bits.
  void engine_event() {
    tensor::TensorCore& tc = *tile_.tc_;
    const bool completed = tc.completed() != seen_completed_, failed = tc.stats().errors != seen_errors_;
    seen_completed_ = tc.completed();
    seen_errors_ = tc.stats().errors;
    regs_.set(R::IRQ_STATUS, regs_.get(R::IRQ_STATUS) | (failed ? R::IRQ_STATUS_f::ERROR_MASK : 0) |
                                 (completed ? R::IRQ_STATUS_f::DONE_MASK : 0));
    tc.acknowledge();
    update_irq();
  }

  std::uint64_t refused_ = 0, vrefused_ = 0, drefused_ = 0, kernels_done_ = 0, kernel_faults_ = 0;
  sc_core::sc_time kernel_start_;  // the running kernel's launch (trace)
  std::uint64_t kernel_pc_ = 0;

 private:
  std::uint64_t seen_completed_ = 0, seen_errors_ = 0, seen_vcompleted_ = 0, seen_verrors_ = 0;
  std::uint64_t seen_dcompleted_ = 0, seen_derrors_ = 0;
  bool dma_full_ = false;
  unsigned core_state_ = 0;
  // Each engine decodes its own command registers (which tile.regs.json includes).
  const IncludedRegs tensor_regs_{regs_, regs::tensor::kBlock}, vector_regs_{regs_, regs::vector::kBlock},
      dma_regs_{regs_, regs::dma::kBlock};

  void dpush() {
    const dma::Descriptor d = dma::decode(dma_regs_);
    dma::Dma& dma = *tile_.dma_;
    dma_full_ = dma.queued() >= tile_.config_.queue_depth;
    if (dma_full_) {
      ++drefused_;
      log::guest_error(tile_.path(), "tile/dqueue-full",
                       "DMA_PUSH of descriptor {} with {} descriptors queued (queue_depth {}); dropped", d.id,
                       dma.queued(), tile_.config_.queue_depth);
      raise(R::IRQ_STATUS_f::DERROR_MASK);
      return;
    }
    dma.submit(d);
  }

  void vpush() {
    const vector::VectorCommand c = vector::decode(vector_regs_);
    vector::VectorUnit& vu = *tile_.vu_;
    if (vu.queued() >= tile_.config_.queue_depth) {
      ++vrefused_;
      log::guest_error(tile_.path(), "tile/vqueue-full",
                       "VCMD_PUSH of command {} with {} commands queued (queue_depth {}); dropped", c.id, vu.queued(),
                       tile_.config_.queue_depth);
      regs_.set(R::IRQ_STATUS, regs_.get(R::IRQ_STATUS) | R::IRQ_STATUS_f::VERROR_MASK);
      update_irq();
      return;
    }
    vu.submit(c);
  }
  void update_irq() {
    tile_.irq_out.write(regs_.get(R::IRQ_ENABLE) & regs_.get(R::IRQ_STATUS));
    tile_.core_irq_.write(regs_.get(R::CORE_IRQ_ENABLE) & regs_.get(R::IRQ_STATUS));
  }

  void push() {
    const tensor::GemmCommand c = tensor::decode(tensor_regs_);
    tensor::TensorCore& tc = *tile_.tc_;
    if (tc.queued() >= tile_.config_.queue_depth) {
      ++refused_;
      log::guest_error(tile_.path(), "tile/queue-full",
                       "CMD_PUSH of command {} with {} commands queued (queue_depth {}); dropped", c.id, tc.queued(),
                       tile_.config_.queue_depth);
      regs_.set(R::IRQ_STATUS, regs_.get(R::IRQ_STATUS) | R::IRQ_STATUS_f::ERROR_MASK);
      update_irq();
      return;
    }
    tc.submit(c);
  }

  Tile& tile_;
};

// The tile core's view: its tile's scratchpad and registers at fixed local
// addresses, everything else out through core_initiator. The scratchpad
// grants the core DMI (its loads and stores are too few to matter to the
// banks, which the engines and the DMA book).
class Tile::LocalBus : public sc_core::sc_module {
 public:
  tlm_utils::simple_target_socket<LocalBus> in;
  tlm_utils::simple_initiator_socket<LocalBus> out;

  LocalBus(const sc_core::sc_module_name& n, Tile& t) : sc_core::sc_module(n), in("in"), out("out"), tile_(t) {
    in.register_b_transport(this, &LocalBus::b_transport);
    in.register_transport_dbg(this, &LocalBus::transport_dbg);
    in.register_get_direct_mem_ptr(this, &LocalBus::get_direct_mem_ptr);
    out.register_invalidate_direct_mem_ptr(this, &LocalBus::invalidate);
  }

 private:
  enum class Where { spm, regs, out };
  Where decode(std::uint64_t a, unsigned len) const {
    if (a >= kLocalSpm && a + len <= kLocalSpm + tile_.spm_->size()) return Where::spm;
    if (a >= kLocalRegs && a + len <= kLocalRegs + R::kBlock.window) return Where::regs;
    return Where::out;
  }
  template <class F>
  auto local(tlm::tlm_generic_payload& t, std::uint64_t base, F&& f) {
    const std::uint64_t a = t.get_address();
    t.set_address(a - base);
    auto r = f();
    t.set_address(a);
    return r;
  }
  void b_transport(tlm::tlm_generic_payload& t, sc_core::sc_time& delay) {
    switch (decode(t.get_address(), t.get_data_length())) {
      case Where::spm: local(t, kLocalSpm, [&] { return tile_.spm_->b_transport(t, delay), 0; }); break;
      case Where::regs: local(t, kLocalRegs, [&] { return tile_.regs_->b_transport(t, delay), 0; }); break;
      case Where::out: out->b_transport(t, delay); break;
    }
  }
  unsigned transport_dbg(tlm::tlm_generic_payload& t) {
    switch (decode(t.get_address(), t.get_data_length())) {
      case Where::spm: return local(t, kLocalSpm, [&] { return tile_.spm_->transport_dbg(t); });
      case Where::regs: return local(t, kLocalRegs, [&] { return tile_.regs_->transport_dbg(t); });
      case Where::out: break;
    }
    return out->transport_dbg(t);
  }
  bool get_direct_mem_ptr(tlm::tlm_generic_payload& t, tlm::tlm_dmi& dmi) {
    switch (decode(t.get_address(), 1)) {
      case Where::spm: {
        const double cycles = tile_.config_.spm.latency + 1;
        const sc_core::sc_time lat = sc_core::sc_time(cycles / tile_.config_.spm.clock.value, sc_core::SC_SEC);
        dmi.set_dmi_ptr(tile_.spm_->data());
        dmi.set_start_address(kLocalSpm);
        dmi.set_end_address(kLocalSpm + tile_.spm_->size() - 1);
        dmi.allow_read_write();
        dmi.set_read_latency(lat);
        dmi.set_write_latency(lat);
        return true;
      }
      case Where::regs:
        dmi.set_start_address(kLocalRegs);
        dmi.set_end_address(kLocalRegs + R::kBlock.window - 1);
        dmi.allow_none();
        return false;
      case Where::out: break;
    }
    const bool ok = out->get_direct_mem_ptr(t, dmi);
    // Never let a grant from outside cover the local windows.
    if (dmi.get_start_address() <= kLocalSpm + tile_.spm_->size() - 1 && dmi.get_end_address() >= kLocalRegs) {
      const std::uint64_t a = t.get_address();
      const std::uint64_t lo = a < kLocalRegs ? 0 : a < kLocalSpm ? kLocalRegs + R::kBlock.window : kLocalSpm + tile_.spm_->size();
      const std::uint64_t hi = a < kLocalRegs ? kLocalRegs - 1 : a < kLocalSpm ? kLocalSpm - 1 : ~0ull;
      dmi.set_start_address(std::max<std::uint64_t>(dmi.get_start_address(), lo));
      dmi.set_end_address(std::min<std::uint64_t>(dmi.get_end_address(), hi));
    }
    return ok;
  }
  void invalidate(sc_dt::uint64 start, sc_dt::uint64 end) { in->invalidate_direct_mem_ptr(start, end); }

  Tile& tile_;
};

Tile::Tile(const sc_core::sc_module_name& n, const Config& c) : Ip(n), config_(c) {
  spm_ = std::make_unique<scratchpad::Scratchpad>("spm", c.spm);
  tc_ = std::make_unique<tensor::TensorCore>("tensor", *spm_, c.array);
  if (c.rtl) {
    auto rtl = std::make_unique<rtl::SystolicRtl>("array_rtl", sc_core::sc_time(1.0 / c.array_clock.value, sc_core::SC_SEC),
                                                  waves::companion(path() + ".array_rtl", ".fst"));
    tc_->set_rtl(rtl.get());
    array_rtl_ = std::move(rtl);
  }
  vu_ = std::make_unique<vector::VectorUnit>("vector", *spm_, c.vector);
  dma_ = std::make_unique<dma::Dma>("dma", *spm_, c.dma);
  tc_->set_semaphores(&sems_);
  vu_->set_semaphores(&sems_);
  dma_->set_semaphores(&sems_);
  regs_ = std::make_unique<Regs>("regs", *this);
  expose_target("mem_target", spm_->mem_target, c.spm.size);
  expose_target("csr_target", regs_->csr_target, R::kBlock.window);
  expose_initiator("dma_initiator", dma_->initiator);
  if (c.core) {
    riscv::RiscvCpu::Config cc;
    cc.xlen = 32;
    cc.extensions = "imac";  // a tile's core: RV32IMAC, M and U modes, no PMP
    cc.s_mode = false;
    cc.pmp_entries = 0;
    cc.hartid = c.hartid;
    cc.clock = c.core_clock;
    cc.quantum = c.core_quantum;
    cc.reset_pc = kLocalSpm;
    cc.mtime_address = 0;
    core_ = std::make_unique<riscv::RiscvCpu>("core", cc);
    core_->hold();
    core_->set_power_event(kTileInstruction);
    core_->on_unhandled([this](unsigned cause, std::uint64_t pc, std::uint64_t tval) {
      regs_->core_fault(cause, pc, tval);
    });
    local_ = std::make_unique<LocalBus>("local", *this);
    core_->bus_initiator.bind(local_->in);
    core_irq_.bind(core_->meip_in);
    expose_initiator("core_initiator", local_->out);
  }
  dma_irq_.set_handler([this](bool level) {
    if (level) regs_->dma_event();
  });
  dma_->irq.bind(dma_irq_);
  expose_irq_out("irq_out", irq_out);
  tc_irq_.set_handler([this](bool level) {
    if (level) regs_->engine_event();
  });
  tc_->irq.bind(tc_irq_);
  vu_irq_.set_handler([this](bool level) {
    if (level) regs_->vector_event();
  });
  vu_->irq.bind(vu_irq_);
}

Tile::~Tile() = default;

tlm::tlm_target_socket<>& Tile::csr_target() { return regs_->csr_target; }

void Tile::set_core_pc(std::uint64_t pc) { regs_->set(R::CORE_PC, pc); }
void Tile::start_core() { regs_->start_core(); }

void Tile::report_limits(nlohmann::ordered_json& out) const {
  // The tensor core's peak: the array's MACs per cycle in each input format.
  nlohmann::ordered_json macs = nlohmann::ordered_json::object();
  for (const auto& [key, f] : {std::pair{"bf16", num::Format::BF16}, {"fp16", num::Format::FP16},
                               {"fp8", num::Format::E4M3}, {"int8", num::Format::INT8}})
    macs[key] = static_cast<double>(tensor::peak_macs(config_.array, f)) * config_.array_clock.value;
  out["macs_per_s"] = macs;
  // The vector unit: a lane op per lane and cycle, a special-function op per sfu_ratio.
  out["vector_ops_per_s"] = static_cast<double>(config_.vector.lanes) * config_.array_clock.value;
  out["vector_special_ops_per_s"] =
      static_cast<double>(config_.vector.lanes) / config_.vector.sfu_ratio * config_.array_clock.value;
  out["dma_bytes_per_s"] = static_cast<double>(config_.dma.port_bytes) * config_.array_clock.value;
}

void Tile::report_stats(nlohmann::ordered_json& out) const {
  // Flat keys, prefixed by the part they count.
  nlohmann::ordered_json regs, spm;
  regs_->report_stats(regs);
  spm_->report_stats(spm);
  for (const auto& [k, v] : regs.items()) out[k] = v;
  for (const auto& [k, v] : spm.items()) out["spm_" + k] = v;
  const tensor::TensorStats& s = tc_->stats();
  out["tensor_commands"] = s.commands;
  out["tensor_errors"] = s.errors;
  out["tensor_refused_queue_full"] = regs_->refused_;
  out["tensor_macs_bf16"] = s.macs_bf16;
  out["tensor_macs_fp16"] = s.macs_fp16;
  out["tensor_macs_fp8"] = s.macs_fp8;
  out["tensor_macs_int8"] = s.macs_int8;
  out["tensor_busy_cycles"] = s.busy_cycles;
  out["tensor_operand_stall_cycles"] = s.operand_stall_cycles;
  out["tensor_bytes_read"] = s.bytes_read;
  out["tensor_bytes_written"] = s.bytes_written;
  const vector::VectorStats& v = vu_->stats();
  out["vector_commands"] = v.commands;
  out["vector_errors"] = v.errors;
  out["vector_refused_queue_full"] = regs_->vrefused_;
  out["vector_elementwise"] = v.elementwise;
  out["vector_special"] = v.special;
  out["vector_row_ops"] = v.row_ops;
  out["vector_reductions"] = v.reductions;
  out["vector_lane_ops"] = v.lane_ops;
  out["vector_special_function_ops"] = v.special_ops;
  out["vector_busy_cycles"] = v.busy_cycles;
  out["vector_semaphore_wait_cycles"] = v.semaphore_wait_cycles;
  out["tensor_semaphore_wait_cycles"] = s.semaphore_wait_cycles;
  const dma::DmaStats& d = dma_->stats();
  out["dma_descriptors"] = d.descriptors;
  out["dma_errors"] = d.errors;
  out["dma_refused_queue_full"] = regs_->drefused_;
  out["dma_chunks"] = d.chunks;
  out["dma_bytes_read"] = d.bytes_read;
  out["dma_bytes_written"] = d.bytes_written;
  out["dma_global_bytes"] = d.global_bytes;
  out["dma_global_read_bytes"] = d.global_read_bytes;
  out["dma_global_written_bytes"] = d.global_written_bytes;
  out["dma_local_bytes"] = d.local_bytes;
  out["dma_cast_elements"] = d.cast_elements;
  out["dma_busy_cycles"] = d.busy_cycles;
  out["dma_semaphore_wait_cycles"] = d.semaphore_wait_cycles;
  out["semaphore_signals"] = sems_.signals();
  out["kernels_done"] = regs_->kernels_done_;
  out["kernel_faults"] = regs_->kernel_faults_;
  if (core_) {
    nlohmann::ordered_json core;
    core_->report_stats(core);
    for (const auto& [k, val] : core.items()) out["core_" + k] = val;
  }
}

TESSERA_REGISTER_IP("tile", Tile,
                    "tensor tile: RV32 core, banked scratchpad, tensor core, vector unit, DMA and semaphores");
// "impl": "rtl": the tensor core's array co-simulated from its RTL.
TESSERA_REGISTER_IMPL("tile", Tile, "rtl");

}  // namespace tessera::tile
