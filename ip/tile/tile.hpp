// A tile as a platform instance: its scratchpad (mem_target, the
// instance's base and size) and its engines behind one register window
// (csr_target): the tensor core's command queue, status, errors and
// interrupt, and the vector unit's. The tile core and DMA join later.
#pragma once

#include <memory>

#include "common/config.hpp"
#include "common/regs.hpp"
#include "scratchpad/scratchpad.hpp"
#include "tensor/tensor_core.hpp"
#include "vector/vector_unit.hpp"

namespace tessera {

class Tile : public Ip {
 public:
  struct Config {
    Scratchpad::Config spm;
    tensor::ArrayConfig array;
    vector::VectorConfig vector;
    Hertz array_clock{1.5e9};
    std::string dataflow = "weight_stationary";
    unsigned queue_depth = 8;
    void visit(Params& p);
    void validate(const Params& p) const;
  };

  IrqOut irq;

  Tile(const sc_core::sc_module_name& n, const Config& c);
  ~Tile() override;
  Scratchpad& scratchpad() { return *spm_; }
  tlm::tlm_target_socket<>& csr_target();
  tensor::TensorCore& tensor_core() { return *tc_; }
  vector::VectorUnit& vector_unit() { return *vu_; }
  void report_stats(nlohmann::ordered_json& out) const override;

 private:
  class Regs;

  Config config_;
  std::unique_ptr<Scratchpad> spm_;
  std::unique_ptr<tensor::TensorCore> tc_;
  std::unique_ptr<vector::VectorUnit> vu_;
  std::unique_ptr<Regs> regs_;
  IrqIn tc_irq_, vu_irq_;
};

}  // namespace tessera
