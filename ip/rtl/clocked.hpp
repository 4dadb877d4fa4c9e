// What the RTL transactors share: the block's clock, which they toggle
// only while there is work (an idle block costs nothing and keeps no run
// alive), its reset, and its own FST trace.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <systemc>

class VerilatedFstSc;

namespace tessera::rtl {

class Clocked : public sc_core::sc_module {
 protected:
  // `period`: the block's clock; `fst`: its signals to this file ("": none).
  Clocked(const sc_core::sc_module_name& n, const sc_core::sc_time& period, std::string fst);
  ~Clocked() override;
  // One cycle: the clock falls, `before_edge` sees what settled (and sets
  // what the block samples), the clock rises.
  void cycle(const std::function<void()>& before_edge);
  // Two cycles in reset, then one out of it.
  void reset();
  // The Verilated model's trace hook (its trace(fst, levels)).
  virtual void trace_to(VerilatedFstSc* fst) = 0;

  sc_core::sc_signal<bool> clk_{"clk"}, rst_n_{"rst_n"};

 private:
  void start_of_simulation() override;
  sc_core::sc_time half_;
  std::string fst_file_;
  std::unique_ptr<VerilatedFstSc> fst_;
};

}  // namespace tessera::rtl
