#include "engines/tensor/systolic.hpp"

#include <algorithm>

namespace tessera::tensor {
namespace {
std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return (a + b - 1) / b; }
}  // namespace

unsigned pack_of(num::Format f) {
  switch (f) {
    case num::Format::BF16:
    case num::Format::FP16: return 1;
    case num::Format::E4M3:
    case num::Format::E5M2:
    case num::Format::INT8: return 2;
    case num::Format::FP32:
    case num::Format::INT32: return 0;
  }
  return 0;
}

std::uint64_t peak_macs(const ArrayConfig& a, num::Format f) {
  return static_cast<std::uint64_t>(a.rows) * a.cols * pack_of(f);
}

std::string check(const ArrayConfig& a, const GemmShape& s) {
  if (a.rows == 0 || a.cols == 0) return "the array has no elements";
  if (!pack_of(s.input))
    return std::string("the array does not take ") + num::name(s.input) + " inputs (BF16, FP16, E4M3, E5M2, INT8)";
  if (s.m == 0 || s.n == 0 || s.k == 0)
    return "empty GEMM: m=" + std::to_string(s.m) + " n=" + std::to_string(s.n) + " k=" + std::to_string(s.k);
  return {};
}

GemmTiming timing(const ArrayConfig& a, const GemmShape& s, std::uint64_t wave) {
  GemmTiming t;
  if (!check(a, s).empty()) return t;
  const std::uint64_t R = a.rows, C = a.cols, pack = pack_of(s.input), w = std::max<std::uint64_t>(1, wave);
  t.macs = static_cast<std::uint64_t>(s.m) * s.n * s.k;
  if (a.dataflow == Dataflow::weight_stationary) {
    t.tiles = ceil_div(s.k, R * pack) * ceil_div(s.n, C);
    const std::uint64_t stream = s.m * w;
    t.cycles = R + (t.tiles - 1) * std::max(stream, R) + stream + R + C;
  } else {
    t.tiles = ceil_div(s.m, R) * ceil_div(s.n, C);
    const std::uint64_t steps = ceil_div(s.k, pack) * w;
    t.cycles = (t.tiles - 1) * std::max(steps, R) + steps + R + C - 1;
  }
  t.utilisation =
      static_cast<double>(t.macs) / (static_cast<double>(t.cycles) * static_cast<double>(peak_macs(a, s.input)));
  return t;
}

}  // namespace tessera::tensor
