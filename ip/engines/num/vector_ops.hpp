// The vector unit's operations, functionally, in FP32 as the chip computes
// them. Elementwise arithmetic is IEEE single precision; the special
// functions (exp, log, tanh and what is built on them) use the unit's own
// range reduction and polynomials, so results are the same on every host
// (no host libm). Error bounds against a float64 reference are documented
// per operation and tested (vector_ops_test in numerics_test.cpp):
//   add sub mul fma max min abs neg relu relu2 recip rsqrt   correctly rounded (<= 0.5 ulp; rsqrt <= 1 ulp)
//   exp                      relative 4e-7 (|x| <= 80)
//   log                      absolute 4e-7 or relative 4e-7, whichever is larger
//   tanh, sigmoid, silu, gelu(tanh), swiglu   absolute 2e-6
//   softmax (row-wise, max-subtracted)        absolute 2e-6 per element
//   rmsnorm, layernorm        relative 2e-6 (rows of up to 8192; layernorm relative
//                             to |normalised*gamma| + |beta|)
//   sum, max, argmax          sum: relative 1e-6 x sqrt(n); max/argmax exact (first index on ties)
//   top-k (k <= 8)            exact values and indices, ties to the lower index
//   rotary embedding          absolute 2e-6 (angles from the same exp/log and sin/cos polynomials)
#pragma once

#include <cstdint>
#include <vector>

namespace tessera::num::vec {

float exp(float x);
float log(float x);
float tanh(float x);
float sigmoid(float x);
float silu(float x);
float gelu(float x);  // tanh form
float sin(float x);
float cos(float x);
inline float relu(float x) { return x > 0 ? x : 0.0f; }
inline float relu2(float x) { return x > 0 ? x * x : 0.0f; }
float rsqrt(float x);
inline float recip(float x) { return 1.0f / x; }
inline float swiglu(float a, float b) { return silu(a) * b; }

void softmax(float* row, unsigned n);
void rmsnorm(float* row, const float* weight, unsigned n, float eps = 1e-6f);
void layernorm(float* row, const float* gamma, const float* beta, unsigned n, float eps = 1e-5f);
// Pairwise, as the reduction tree adds: the row padded with zeros to a
// power of two, halved (so zeros after a row change no bit of its sum).
float sum(const float* x, unsigned n);
unsigned argmax(const float* x, unsigned n);
// The k largest values (k <= 8) with their indices, largest first.
void topk(const float* x, unsigned n, unsigned k, float* values, unsigned* indices);
// Rotary position embedding on pairs (x[2i], x[2i+1]) at `position`.
void rope(float* x, unsigned n, unsigned position, float theta = 10000.0f);

}  // namespace tessera::num::vec
