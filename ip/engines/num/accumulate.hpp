// The tensor core's arithmetic, functionally: C = A x B (+ C) with the
// products formed exactly (FP8, BF16 and FP16 products fit in an FP32
// significand) and summed the way the accumulator does it:
//   fp32     every product added to an FP32 accumulator, rounding to nearest even;
//   limited  the array keeps only `mantissa_bits` bits of the running sum
//            (truncating, as current FP8 tensor cores are reported to do)
//            and, every `promote_every` products (0: never), hands the
//            partial sum to an FP32 accumulator and starts again: the
//            limited FP8 accumulation of current hardware, and its fix;
//   int32    exact integer sums (INT8 inputs), wrapping like the hardware.
#pragma once

#include <cstdint>
#include <vector>

#include "engines/num/block_scale.hpp"

namespace tessera::num {

struct Accumulation {
  enum class Kind : std::uint8_t { fp32, limited, int32 } kind = Kind::fp32;
  unsigned mantissa_bits = 13;  // explicit mantissa bits kept in the array (limited)
  unsigned promote_every = 0;   // products per promotion into FP32 (limited); 0: never
};

// Keeps `bits` explicit mantissa bits of x, truncating toward zero.
double truncate_mantissa(double x, unsigned bits);
// Rounds to FP32 (nearest even).
double to_fp32(double x);

// One row of C in FP32 accumulation, the definition's order: each of the
// n elements of `row` adds its k products a[p] * b[p][j] one by one
// (b row-major, k x n), in float. Exact against float64 where every
// product is exact and normal in float (gemm's float path; the tensor
// core's BF16 commands).
void accumulate_row_f32(const float* a, const float* b, unsigned n, unsigned k, float* row);

// Row-major A (m x k), B (k x n), C (m x n); `accumulate` adds into C.
void gemm(const std::vector<double>& a, const std::vector<double>& b, std::vector<double>& c, unsigned m, unsigned n,
          unsigned k, const Accumulation& acc, bool accumulate = false);

// Block-scaled FP8 GEMM as recent FP8 training runs it: A (m x k) in 1 x G
// groups along K, B (k x n) in G x G' blocks (or G x 1), G the same for both.
// Each K-group's products of the FP8 codes' values are summed in the array
// under `acc` (fp32 or limited; the group is the promotion interval, so
// `promote_every` is ignored), then the partial sum is multiplied by the
// FP32 product of the two scales and added to an FP32 accumulator.
// Throws std::invalid_argument naming the mismatch when shapes or block
// shapes do not fit together.
void gemm_block_scaled(const BlockQuantized& a, const BlockQuantized& b, std::vector<double>& c,
                       const Accumulation& acc = {});

}  // namespace tessera::num
