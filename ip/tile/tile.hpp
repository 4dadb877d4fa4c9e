// A tile as a platform instance: its banked scratchpad (mem_target, the
// instance's base and size), its engines (tensor core, vector unit, DMA)
// and its RV32 core behind one register window (csr_target), sixteen
// hardware semaphores, and one interrupt to the outside (irq_out).
//
// Initiators: the DMA (dma_initiator) and the core's way out
// (core_initiator) attach to the NoC at the tile's node. The core sees a
// local map: its tile's scratchpad at kLocalSpm and its tile's registers at
// kLocalRegs, reached without crossing the NoC; every other 32-bit address
// goes out unchanged. The core is held halted until CORE_CTRL.START.
#pragma once

#include <memory>

#include "common/config.hpp"
#include "common/regs.hpp"
#include "common/semaphores.hpp"
#include "engines/dma/dma.hpp"
#include "riscv/riscv_cpu.hpp"
#include "scratchpad/scratchpad.hpp"
#include "engines/tensor/tensor_core.hpp"
#include "engines/vector/vector_unit.hpp"

namespace tessera::tile {

class Tile : public Ip {
 public:
  static constexpr std::uint64_t kLocalSpm = 0x8000'0000, kLocalRegs = 0x0100'0000;
  static constexpr unsigned kSemaphores = 16;

  struct Config {
    scratchpad::Scratchpad::Config spm;
    tensor::ArrayConfig array;
    vector::VectorConfig vector;
    dma::Dma::Config dma;
    Hertz array_clock{1.5e9};
    std::string dataflow = "weight_stationary";
    unsigned queue_depth = 8;
    bool core = true;
    Hertz core_clock{1e9};
    sc_core::sc_time core_quantum = sc_core::SC_ZERO_TIME;
    unsigned hartid = 0;
    bool rtl = false;  // "impl": "rtl": the tensor core's array is the RTL (ip/rtl/sv), co-simulated
    void visit(Params& p);
    void validate(const Params& p) const;
    std::vector<Fact> facts() const {
      return {{"LOCAL_SPM", kLocalSpm, "the tile core's view of its scratchpad", true},
              {"LOCAL_REGS", kLocalRegs, "the tile core's view of its tile's registers", true}};
    }
  };

  IrqOut irq_out;

  Tile(const sc_core::sc_module_name& n, const Config& c);
  ~Tile() override;
  const Config& config() const { return config_; }
  scratchpad::Scratchpad& scratchpad() { return *spm_; }
  tlm::tlm_target_socket<>& csr_target();
  tensor::TensorCore& tensor_core() { return *tc_; }
  vector::VectorUnit& vector_unit() { return *vu_; }
  dma::Dma& dma() { return *dma_; }
  Semaphores& semaphores() { return sems_; }
  riscv::RiscvCpu* core() { return core_.get(); }
  // Where CORE_CTRL.START runs the core from (a loader sets the entry).
  void set_core_pc(std::uint64_t pc);
  // What CORE_CTRL.START does, from outside (tessera-vp --kernel); during
  // simulation. core_stopped() fires when the kernel exits or faults;
  // core_exit() is its CORE_EXIT value, core_faulted() whether it faulted.
  void start_core();
  const sc_core::sc_event& core_stopped() const { return core_stopped_; }
  std::uint32_t core_exit() const { return core_exit_; }
  bool core_faulted() const { return core_faulted_; }
  void report_stats(nlohmann::ordered_json& out) const override;
  void report_limits(nlohmann::ordered_json& out) const override;

 private:
  class Regs;
  class LocalBus;

  Config config_;
  Semaphores sems_{kSemaphores};
  std::unique_ptr<scratchpad::Scratchpad> spm_;
  std::unique_ptr<tensor::TensorCore> tc_;
  std::unique_ptr<sc_core::sc_module> array_rtl_;  // "impl": "rtl"
  std::unique_ptr<vector::VectorUnit> vu_;
  std::unique_ptr<dma::Dma> dma_;
  std::unique_ptr<Regs> regs_;
  std::unique_ptr<riscv::RiscvCpu> core_;
  sc_core::sc_event core_stopped_;
  std::uint32_t core_exit_ = 0;
  bool core_faulted_ = false;
  std::unique_ptr<LocalBus> local_;
  IrqIn tc_irq_, vu_irq_, dma_irq_;
  IrqOut core_irq_;
};

}  // namespace tessera::tile
