#include "rtl/clocked.hpp"

#include <verilated.h>
#include <verilated_fst_sc.h>

namespace tessera::rtl {

Clocked::Clocked(const sc_core::sc_module_name& n, const sc_core::sc_time& period, std::string fst)
    : sc_core::sc_module(n), half_(period / 2.0), fst_file_(std::move(fst)) {
  if (!fst_file_.empty()) Verilated::traceEverOn(true);
}

Clocked::~Clocked() {
  if (fst_) fst_->close();
}

void Clocked::start_of_simulation() {
  if (fst_file_.empty()) return;
  fst_ = std::make_unique<VerilatedFstSc>();
  trace_to(fst_.get());
  fst_->open(fst_file_.c_str());
}

void Clocked::cycle(const std::function<void()>& before_edge) {
  clk_.write(false);
  sc_core::wait(half_);
  before_edge();
  clk_.write(true);
  sc_core::wait(half_);
}

void Clocked::reset() {
  rst_n_.write(false);
  for (int i = 0; i < 2; ++i) cycle([] {});
  rst_n_.write(true);
  cycle([] {});
}

}  // namespace tessera::rtl
