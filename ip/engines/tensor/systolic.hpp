// The tensor core's systolic array: how long a GEMM takes on it, and what it
// computes. An R x C array of processing elements (default 64 x 64 at
// 1.5 GHz: 12.3 TFLOP/s BF16); FP8 and INT8 pack two products per element
// per cycle along K, so they run at twice the rate.
//
// Weight-stationary: B is cut into tiles of (R * pack) x C; a tile's weights
// sit in the array while A's M rows stream through, one per cycle, skewed
// by one cycle per row and column. Weights for the next tile load into a
// shadow buffer (R cycles) while the current tile streams, so a tile takes
// max(M, R) cycles, and the last tile's results leave the array R + C
// cycles after its last row entered (R + C - 1 through the skewed array,
// one to hand the row out). With T tiles:
//   cycles = R (first load) + (T - 1) max(M, R) + M + R + C
// Calibrated from the RTL of the array (ip/rtl/sv, tests/cosim): one
// tile takes exactly these cycles there.
// Output-stationary: C is cut into R x C tiles, each element accumulating
// its own C value. A's rows enter from the left and B's columns from the
// top, skewed, meeting in element (r, c) at step k + r + c; K' = ceil(K /
// pack) steps per tile. After its last product an element puts its result
// on its column's output bus in the next cycle and switches to its second
// accumulator, so tiles follow each other every max(K', R) cycles (the
// input ports take K', a column's bus R):
//   cycles = (T - 1) max(K', R) + K' + R + C - 1
// Operand reads from the scratchpad: a row of A (R * pack elements) per
// cycle; if that wave costs w > 1 cycles in the banks, streaming slows by w.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engines/num/accumulate.hpp"
#include "engines/num/formats.hpp"

namespace tessera::tensor {

enum class Dataflow : std::uint8_t { weight_stationary, output_stationary };

struct ArrayConfig {
  unsigned rows = 64, cols = 64;
  double clock_hz = 1.5e9;
  Dataflow dataflow = Dataflow::weight_stationary;
};

struct GemmShape {
  unsigned m = 0, n = 0, k = 0;
  num::Format input = num::Format::BF16;
};

struct GemmTiming {
  std::uint64_t cycles = 0;
  std::uint64_t tiles = 0;
  std::uint64_t macs = 0;
  double utilisation = 0;  // macs / (cycles x peak MACs per cycle)
};

// Products per element per cycle for an input format; 0 if the array does
// not take it (FP32, INT32).
unsigned pack_of(num::Format f);
// Peak MACs per cycle for a format.
std::uint64_t peak_macs(const ArrayConfig& a, num::Format f);
// Empty when the shape can run; otherwise what is wrong with it.
std::string check(const ArrayConfig& a, const GemmShape& s);
// `operand_wave_cycles`: scratchpad cycles for one row of A (1 when conflict-free).
GemmTiming timing(const ArrayConfig& a, const GemmShape& s, std::uint64_t operand_wave_cycles = 1);

}  // namespace tessera::tensor
