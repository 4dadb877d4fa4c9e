// The transactor of the tensor core's systolic array RTL
// (ip/rtl/sv/tessera_systolic.sv, Verilated): the model's operation
// (one weight-stationary tile: load ROWS x COLS weights, stream M rows of A
// with their initial partial sums, collect M result rows) turned into the
// block's valid/ready handshakes on its own clock. Requests are handed to
// the wrapper's thread, which owns the pins (a Verilated model's inputs may
// not be driven from another initiator's process).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <systemc>
#include <vector>

#include "rtl/clocked.hpp"

#include "engines/tensor/tensor_core.hpp"

class Vtessera_systolic;
class VerilatedFstSc;

namespace tessera::rtl {

class SystolicRtl : public Clocked, public tensor::ArrayRtl {
 public:
  static constexpr unsigned kRows = 8, kCols = 8;
  enum class Mode : unsigned { int8 = 0, e4m3 = 1 };
  struct Tile {
    Mode mode = Mode::int8;
    std::vector<std::uint8_t> weights;   // kRows x kCols, row-major (K x N)
    std::vector<std::uint8_t> a;         // m x kRows, row-major (M x K slice)
    std::vector<std::uint32_t> c_in;     // m x kCols: initial partial sums (INT32 or FP32 bits)
    unsigned m = 0;
  };
  struct Result {
    std::vector<std::uint32_t> c;  // m x kCols
    std::uint64_t cycles = 0;      // from the first weight handshake to the last result
  };

  // `period`: the array clock. `fst`: record the block's signals to this
  // FST file (empty: none).
  SystolicRtl(const sc_core::sc_module_name& n, const sc_core::sc_time& period, const std::string& fst = "");
  ~SystolicRtl() override;

  // Runs one tile from a SystemC thread; returns when its last row is out.
  // `stall_every`: hold o_ready low one cycle in this many (0: never), to
  // exercise the back-pressure.
  Result run(const Tile& t, unsigned stall_every = 0);
  std::uint64_t cycles() const { return cycles_; }
  // The tensor core's view (ArrayRtl).
  unsigned rows() const override { return kRows; }
  unsigned cols() const override { return kCols; }
  std::vector<std::uint32_t> run_tile(bool e4m3, const std::vector<std::uint8_t>& weights, const std::vector<std::uint8_t>& a,
                                      const std::vector<std::uint32_t>& c_in, unsigned m, std::uint64_t& cycles) override;

 private:
  void driver();
  void trace_to(VerilatedFstSc* fst) override;

  sc_core::sc_signal<bool> mode_{"mode"}, w_valid_{"w_valid"}, w_ready_{"w_ready"};
  sc_core::sc_signal<std::uint32_t> w_row_{"w_row"};
  sc_core::sc_signal<std::uint64_t> w_data_{"w_data"};  // kCols x 8 bits
  sc_core::sc_signal<bool> a_valid_{"a_valid"}, a_ready_{"a_ready"};
  sc_core::sc_signal<std::uint64_t> a_data_{"a_data"};  // kRows x 8 bits
  sc_core::sc_signal<sc_dt::sc_bv<kCols * 32>> c_in_{"c_in"}, o_data_{"o_data"};
  sc_core::sc_signal<bool> o_valid_{"o_valid"}, o_ready_{"o_ready"};
  sc_core::sc_signal<std::uint32_t> in_flight_{"in_flight"};
  std::unique_ptr<Vtessera_systolic> top_;

  const Tile* job_ = nullptr;
  unsigned stall_every_ = 0;
  Result result_;
  sc_core::sc_event start_, done_;
  std::uint64_t cycles_ = 0;
};

}  // namespace tessera::rtl
