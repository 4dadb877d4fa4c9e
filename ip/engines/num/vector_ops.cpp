#include "engines/num/vector_ops.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tessera::num::vec {
namespace {
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2 = 0.69314718055994531f;

// e^t for |t| <= ln2 / 2: degree-7 Taylor polynomial, Horner in FP32.
float exp_reduced(float t) {
  float p = 1.0f / 5040.0f;
  p = p * t + 1.0f / 720.0f;
  p = p * t + 1.0f / 120.0f;
  p = p * t + 1.0f / 24.0f;
  p = p * t + 1.0f / 6.0f;
  p = p * t + 0.5f;
  p = p * t + 1.0f;
  return p * t + 1.0f;
}
}  // namespace

float exp(float x) {
  if (std::isnan(x)) return x;
  if (x > 88.7f) return std::numeric_limits<float>::infinity();
  if (x < -103.9f) return 0.0f;
  // x = n ln2 + r, |r| <= ln2 / 2, with ln2 in two parts so n ln2 is exact.
  const float n = std::nearbyint(x * kLog2e);
  const float r = (x - n * 0.693145751953125f) - n * 1.428606765330187e-06f;
  return std::ldexp(exp_reduced(r), static_cast<int>(n));
}

float log(float x) {
  if (std::isnan(x) || x < 0) return std::numeric_limits<float>::quiet_NaN();
  if (x == 0) return -std::numeric_limits<float>::infinity();
  if (std::isinf(x)) return x;
  int e;
  float m = std::frexp(x, &e);  // m in [0.5, 1)
  if (m < 0.70710678f) {
    m *= 2;
    --e;
  }
  // log(m) = 2 atanh(s), s = (m - 1) / (m + 1), |s| <= 0.1716
  const float s = (m - 1.0f) / (m + 1.0f), s2 = s * s;
  float p = 1.0f / 13.0f;
  p = p * s2 + 1.0f / 11.0f;
  p = p * s2 + 1.0f / 9.0f;
  p = p * s2 + 1.0f / 7.0f;
  p = p * s2 + 1.0f / 5.0f;
  p = p * s2 + 1.0f / 3.0f;
  p = p * s2 + 1.0f;
  return 2.0f * s * p + static_cast<float>(e) * kLn2;
}

float tanh(float x) {
  if (std::fabs(x) > 9.0f) return x > 0 ? 1.0f : -1.0f;
  if (std::fabs(x) < 0.0005f) return x;
  const float e = exp(2.0f * x);
  return (e - 1.0f) / (e + 1.0f);
}

float sigmoid(float x) { return 1.0f / (1.0f + exp(-x)); }
float silu(float x) { return x * sigmoid(x); }
float gelu(float x) {
  const float c = 0.7978845608028654f;  // sqrt(2 / pi)
  return 0.5f * x * (1.0f + tanh(c * (x + 0.044715f * x * x * x)));
}

float rsqrt(float x) { return 1.0f / std::sqrt(x); }

namespace {
// sin and cos on [-pi/4, pi/4] (Taylor, Horner), after reduction by pi/2.
float sin_reduced(float r) {
  const float r2 = r * r;
  float p = -1.0f / 5040.0f;
  p = p * r2 + 1.0f / 120.0f;
  p = p * r2 - 1.0f / 6.0f;
  return r + r * r2 * p;
}
float cos_reduced(float r) {
  const float r2 = r * r;
  float p = 1.0f / 40320.0f;
  p = p * r2 - 1.0f / 720.0f;
  p = p * r2 + 1.0f / 24.0f;
  p = p * r2 - 0.5f;
  return 1.0f + r2 * p;
}
void sincos(float x, float& s, float& c) {
  const double q = std::nearbyint(static_cast<double>(x) / 1.5707963267948966);  // quadrant, in double for large angles
  const float r = static_cast<float>(static_cast<double>(x) - q * 1.5707963267948966);
  const float sr = sin_reduced(r), cr = cos_reduced(r);
  switch (static_cast<long long>(q) & 3) {
    case 0: s = sr, c = cr; break;
    case 1: s = cr, c = -sr; break;
    case 2: s = -sr, c = -cr; break;
    default: s = -cr, c = sr; break;
  }
}
}  // namespace

float sin(float x) {
  float s, c;
  sincos(x, s, c);
  return s;
}
float cos(float x) {
  float s, c;
  sincos(x, s, c);
  return c;
}

float sum(const float* x, unsigned n) {
  // The reduction tree over the row padded with zeros to a power of two:
  // each addition's halves are aligned blocks of a power of two (the
  // first as large as fits), so zeros after the row (a softmax's columns
  // of -inf) change no bit of its sum.
  if (n == 0) return 0.0f;
  if (n == 1) return x[0];
  unsigned h = 1;
  while (2 * h < n) h *= 2;
  return sum(x, h) + sum(x + h, n - h);
}

unsigned argmax(const float* x, unsigned n) {
  unsigned best = 0;
  for (unsigned i = 1; i < n; ++i)
    if (x[i] > x[best]) best = i;
  return best;
}

void softmax(float* row, unsigned n) {
  float m = row[0];
  for (unsigned i = 1; i < n; ++i) m = std::max(m, row[i]);
  for (unsigned i = 0; i < n; ++i) row[i] = exp(row[i] - m);
  const float inv = 1.0f / sum(row, n);
  for (unsigned i = 0; i < n; ++i) row[i] *= inv;
}

void rmsnorm(float* row, const float* weight, unsigned n, float eps) {
  std::vector<float> sq(n);
  for (unsigned i = 0; i < n; ++i) sq[i] = row[i] * row[i];
  const float inv = rsqrt(sum(sq.data(), n) / static_cast<float>(n) + eps);
  for (unsigned i = 0; i < n; ++i) row[i] = row[i] * inv * weight[i];
}

void layernorm(float* row, const float* gamma, const float* beta, unsigned n, float eps) {
  const float mean = sum(row, n) / static_cast<float>(n);
  std::vector<float> sq(n);
  for (unsigned i = 0; i < n; ++i) sq[i] = (row[i] - mean) * (row[i] - mean);
  const float inv = rsqrt(sum(sq.data(), n) / static_cast<float>(n) + eps);
  for (unsigned i = 0; i < n; ++i) row[i] = (row[i] - mean) * inv * gamma[i] + beta[i];
}

void topk(const float* x, unsigned n, unsigned k, float* values, unsigned* indices) {
  k = std::min(k, std::min(n, 8u));
  for (unsigned j = 0; j < k; ++j) values[j] = -std::numeric_limits<float>::infinity(), indices[j] = n;
  for (unsigned i = 0; i < n; ++i) {
    // Insert if larger than the smallest kept (ties keep the lower index).
    if (!(x[i] > values[k - 1]) && indices[k - 1] != n) continue;
    unsigned p = k - 1;
    while (p > 0 && x[i] > values[p - 1]) {
      values[p] = values[p - 1];
      indices[p] = indices[p - 1];
      --p;
    }
    values[p] = x[i];
    indices[p] = i;
  }
}

void rope(float* x, unsigned n, unsigned position, float theta) {
  for (unsigned i = 0; i + 1 < n; i += 2) {
    const float freq = exp(-log(theta) * static_cast<float>(i) / static_cast<float>(n));
    float s, c;
    sincos(static_cast<float>(position) * freq, s, c);
    const float a = x[i], b = x[i + 1];
    x[i] = a * c - b * s;
    x[i + 1] = a * s + b * c;
  }
}

}  // namespace tessera::num::vec
