// PLIC: RISC-V platform-level interrupt controller (RISC-V PLIC
// specification 1.0.0). Level-triggered gateways: a source is pending while
// its input is high and it is not being served; a claim takes the
// highest-priority pending enabled source above the context's threshold
// (ties: the lowest id) and a completion lets the gateway forward the source
// again. Each context's output is high while such a source exists.
// Priorities are WARL with `priority_bits` bits. Timing: none beyond the
// register access; interrupt lines change in the same delta.
#pragma once

#include <vector>

#include "common/config.hpp"
#include "common/regs.hpp"

namespace tessera::plic {

class Plic : public MmioTarget {
 public:
  std::vector<IrqIn> source_in;     // "src[i]", i = 1..sources (0 does not exist)
  std::vector<IrqOut> context_out;  // "context[c]"

  struct Config {
    unsigned sources = 31;
    unsigned contexts = 2;
    unsigned priority_bits = 3;
    void visit(Params& p);
    void validate(const Params& p) const;
  };

  Plic(const sc_core::sc_module_name& n, const Config& c);
  void report_stats(nlohmann::ordered_json& out) const override;

 private:
  bool pending(unsigned src) const;
  bool enabled(unsigned ctx, unsigned src) const;
  unsigned best(unsigned ctx) const;  // 0: none
  void input_changed(unsigned src, bool level);
  void update();

  Config config_;
  std::vector<bool> in_service_;
  std::uint64_t claims_ = 0, completions_ = 0;
};

}  // namespace tessera::plic
