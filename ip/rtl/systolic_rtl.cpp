#include "rtl/systolic_rtl.hpp"

#include <verilated.h>
#include <verilated_fst_sc.h>

#include <functional>
#include <stdexcept>

#include "Vtessera_systolic.h"

namespace tessera::rtl {

SystolicRtl::SystolicRtl(const sc_core::sc_module_name& n, const sc_core::sc_time& period, const std::string& fst)
    : Clocked(n, period, fst) {
  top_ = std::make_unique<Vtessera_systolic>("rtl");
  top_->clk(clk_);
  top_->rst_n(rst_n_);
  top_->mode(mode_);
  top_->w_valid(w_valid_);
  top_->w_ready(w_ready_);
  top_->w_row(w_row_);
  top_->w_data(w_data_);
  top_->a_valid(a_valid_);
  top_->a_ready(a_ready_);
  top_->a_data(a_data_);
  top_->c_in(c_in_);
  top_->o_valid(o_valid_);
  top_->o_ready(o_ready_);
  top_->o_data(o_data_);
  top_->in_flight(in_flight_);
  SC_HAS_PROCESS(SystolicRtl);
  SC_THREAD(driver);
}

SystolicRtl::~SystolicRtl() {
  if (top_) top_->final();
}

void SystolicRtl::trace_to(VerilatedFstSc* fst) { top_->trace(fst, 99); }

SystolicRtl::Result SystolicRtl::run(const Tile& t, unsigned stall_every) {
  if (t.weights.size() != kRows * kCols || t.a.size() != std::size_t{t.m} * kRows || t.c_in.size() != std::size_t{t.m} * kCols)
    throw std::invalid_argument("SystolicRtl::run: weights must be 8 x 8, a m x 8 and c_in m x 8");
  job_ = &t;
  stall_every_ = stall_every;
  start_.notify(sc_core::SC_ZERO_TIME);
  sc_core::wait(done_);
  return result_;
}

std::vector<std::uint32_t> SystolicRtl::run_tile(bool e4m3, const std::vector<std::uint8_t>& weights,
                                                const std::vector<std::uint8_t>& a, const std::vector<std::uint32_t>& c_in,
                                                unsigned m, std::uint64_t& cycles) {
  Tile t;
  t.mode = e4m3 ? Mode::e4m3 : Mode::int8;
  t.weights = weights;
  t.a = a;
  t.c_in = c_in;
  t.m = m;
  Result r = run(t);
  cycles = r.cycles;
  return std::move(r.c);
}

void SystolicRtl::driver() {
  reset();
  for (;;) {
    while (!job_) sc_core::wait(start_);  // a request may come before the reset is over
    const Tile& t = *job_;
    result_ = Result{};
    result_.c.assign(std::size_t{t.m} * kCols, 0);
    std::uint64_t cycles = 0;
    mode_.write(t.mode == Mode::e4m3);
    // Weights, a row per handshake.
    for (unsigned r = 0; r < kRows;) {
      std::uint64_t bits = 0;
      for (unsigned c = 0; c < kCols; ++c) bits |= std::uint64_t{t.weights[r * kCols + c]} << (8 * c);
      w_row_.write(r);
      w_data_.write(bits);
      w_valid_.write(true);
      bool taken = false;
      cycle([&] { taken = w_ready_.read(); });
      ++cycles;
      if (taken) ++r;
    }
    w_valid_.write(false);
    // Rows of A in, rows of C out.
    unsigned in = 0, out = 0;
    std::uint64_t n = 0;
    while (out < t.m) {
      const bool offer = in < t.m;
      if (offer) {
        std::uint64_t bits = 0;
        for (unsigned r = 0; r < kRows; ++r) bits |= std::uint64_t{t.a[std::size_t{in} * kRows + r]} << (8 * r);
        a_data_.write(bits);
        sc_dt::sc_bv<kCols * 32> c;
        for (unsigned k = 0; k < kCols; ++k) c.range(32 * k + 31, 32 * k) = t.c_in[std::size_t{in} * kCols + k];
        c_in_.write(c);
      }
      a_valid_.write(offer);
      const bool ready = !(stall_every_ && ++n % stall_every_ == 0);
      o_ready_.write(ready);
      bool in_taken = false, out_taken = false;
      cycle([&] {
        in_taken = offer && a_ready_.read();
        out_taken = o_valid_.read() && ready;
        if (!out_taken) return;
        const sc_dt::sc_bv<kCols * 32> o = o_data_.read();
        for (unsigned k = 0; k < kCols; ++k)
          result_.c[std::size_t{out} * kCols + k] = static_cast<std::uint32_t>(o.range(32 * k + 31, 32 * k).to_uint());
      });
      ++cycles;
      in += in_taken;
      out += out_taken;
    }
    a_valid_.write(false);
    o_ready_.write(false);
    result_.cycles = cycles;
    cycles_ += cycles;
    job_ = nullptr;
    done_.notify(sc_core::SC_ZERO_TIME);
  }
}

}  // namespace tessera::rtl
