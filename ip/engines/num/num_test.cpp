// Bit-exact number formats: every FP8 code, round trips, ties to even,
// saturation and NaN/infinity rules (OCP FP8 v1.0), BF16 and FP16 against
// known encodings, stochastic rounding, block scaling, GEMM error bounds per
// format and block-scaled FP8 GEMM, vector-unit operations.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <cstdio>
#include <random>

#include "engines/num/block_scale.hpp"
#include "engines/num/formats.hpp"

using namespace tessera::num;

namespace {
// The OCP tables, written out for the test (independent of the generic code).
double e4m3_value(unsigned c) {
  const double s = (c & 0x80) ? -1 : 1;
  const unsigned e = (c >> 3) & 15, m = c & 7;
  if (e == 15 && m == 7) return NAN;
  if (e == 0) return s * m / 8.0 * std::ldexp(1.0, -6);
  return s * (1 + m / 8.0) * std::ldexp(1.0, static_cast<int>(e) - 7);
}
double e5m2_value(unsigned c) {
  const double s = (c & 0x80) ? -1 : 1;
  const unsigned e = (c >> 2) & 31, m = c & 3;
  if (e == 31) return m ? NAN : s * INFINITY;
  if (e == 0) return s * m / 4.0 * std::ldexp(1.0, -14);
  return s * (1 + m / 4.0) * std::ldexp(1.0, static_cast<int>(e) - 15);
}
Convert saturating() {
  Convert c;
  c.saturate = true;
  return c;
}
}  // namespace

TEST(Numerics, E4M3AllCodesDecodeAndRoundTrip) {
  for (unsigned c = 0; c < 256; ++c) {
    const double want = e4m3_value(c), got = decode(Format::E4M3, c);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << c;
      EXPECT_EQ(encode(Format::E4M3, got) & 0x7f, 0x7fu) << "NaN stays NaN";
      continue;
    }
    EXPECT_EQ(got, want) << "code " << c;
    EXPECT_EQ(encode(Format::E4M3, got), c) << "round trip of code " << c;
  }
  EXPECT_EQ(max_finite(Format::E4M3), 448);
  EXPECT_EQ(decode(Format::E4M3, 0x01), std::ldexp(1.0, -9)) << "smallest subnormal";
  EXPECT_EQ(decode(Format::E4M3, 0x08), std::ldexp(1.0, -6)) << "smallest normal";
}

TEST(Numerics, E5M2AllCodesDecodeAndRoundTrip) {
  for (unsigned c = 0; c < 256; ++c) {
    const double want = e5m2_value(c), got = decode(Format::E5M2, c);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << c;
      continue;
    }
    EXPECT_EQ(got, want) << "code " << c;
    EXPECT_EQ(encode(Format::E5M2, got), c) << "round trip of code " << c;
  }
  EXPECT_EQ(max_finite(Format::E5M2), 57344);
  EXPECT_EQ(decode(Format::E5M2, 0x7c), INFINITY);
}

TEST(Numerics, TiesRoundToEven) {
  // E4M3 around 1: 1.0 = 0x38, 1.125 = 0x39, 1.25 = 0x3a.
  EXPECT_EQ(encode(Format::E4M3, 1.0625), 0x38u) << "halfway 1.0/1.125 -> even mantissa";
  EXPECT_EQ(encode(Format::E4M3, 1.1875), 0x3au) << "halfway 1.125/1.25 -> even mantissa";
  EXPECT_EQ(encode(Format::E4M3, 1.0626), 0x39u);
  // E5M2 around 1: 1.0 = 0x3c, 1.25 = 0x3d, 1.5 = 0x3e.
  EXPECT_EQ(encode(Format::E5M2, 1.125), 0x3cu);
  EXPECT_EQ(encode(Format::E5M2, 1.375), 0x3eu);
  // Subnormals tie to even too: halfway between 2^-9 (0x01) and 2^-8 (0x02).
  EXPECT_EQ(encode(Format::E4M3, 1.5 * std::ldexp(1.0, -9)), 0x02u);
  EXPECT_EQ(encode(Format::E4M3, 0.5 * std::ldexp(1.0, -9)), 0x00u) << "half the smallest subnormal rounds to zero";
}

TEST(Numerics, SaturationAndSpecialValuesPerOcp) {
  // E4M3: 464 is halfway between 448 and the NaN code: ties to even keep 448.
  EXPECT_EQ(encode(Format::E4M3, 464), 0x7eu);
  EXPECT_EQ(encode(Format::E4M3, 465) & 0x7f, 0x7fu) << "overflow is NaN when not saturating";
  EXPECT_EQ(encode(Format::E4M3, 465, saturating()), 0x7eu);
  EXPECT_EQ(encode(Format::E4M3, -1e9, saturating()), 0xfeu);
  EXPECT_EQ(encode(Format::E4M3, INFINITY) & 0x7f, 0x7fu) << "no infinity in E4M3";
  EXPECT_EQ(encode(Format::E4M3, INFINITY, saturating()), 0x7eu);
  EXPECT_EQ(encode(Format::E4M3, -0.0), 0x80u) << "negative zero";
  // E5M2: IEEE-like.
  EXPECT_EQ(encode(Format::E5M2, 61440), 0x7cu) << "ties to even past the maximum: infinity";
  EXPECT_EQ(encode(Format::E5M2, 61439), 0x7bu);
  EXPECT_EQ(encode(Format::E5M2, 1e9, saturating()), 0x7bu);
  EXPECT_EQ(encode(Format::E5M2, -INFINITY), 0xfcu);
  EXPECT_TRUE(std::isnan(decode(Format::E5M2, encode(Format::E5M2, NAN))));
}

TEST(Numerics, Bf16FromFp32ValuesRoundsToNearestEvenAtEveryEdge) {
  // encode(BF16) takes FP32 values by their bits (the engines' common
  // case); these are the edges that shortcut must get right, and a double
  // that is no FP32 value takes the general path.
  auto bits = [](std::uint32_t b) {
    float f;
    std::memcpy(&f, &b, 4);
    return static_cast<double>(f);
  };
  Convert sat;
  sat.saturate = true;
  EXPECT_EQ(encode(Format::BF16, 1.0), 0x3f80u);
  EXPECT_EQ(encode(Format::BF16, 1.0 + std::ldexp(1.0, -8)), 0x3f80u);           // a tie, to the even 1
  EXPECT_EQ(encode(Format::BF16, 1.0 + 3 * std::ldexp(1.0, -8)), 0x3f82u);       // a tie, to the even 1 + 2^-6
  EXPECT_EQ(encode(Format::BF16, 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -20)), 0x3f81u);  // past the tie
  EXPECT_EQ(encode(Format::BF16, -0.0), 0x8000u);
  EXPECT_EQ(encode(Format::BF16, bits(0x7f7fffffu)), 0x7f80u);       // FP32's largest rounds past BF16's: infinity
  EXPECT_EQ(encode(Format::BF16, bits(0x7f7fffffu), sat), 0x7f7fu);  // or, saturating, BF16's largest
  EXPECT_EQ(encode(Format::BF16, -bits(0x7f7fffffu), sat), 0xff7fu);
  EXPECT_EQ(encode(Format::BF16, bits(0x00000001u)), 0x0000u);  // the smallest subnormal rounds to zero
  EXPECT_EQ(encode(Format::BF16, bits(0x00008000u)), 0x0000u);  // a subnormal tie to the even zero
  EXPECT_EQ(encode(Format::BF16, bits(0x00018000u)), 0x0002u);  // and to the even 2
  EXPECT_EQ(encode(Format::BF16, bits(0x007fffffu)), 0x0080u);  // the largest subnormal rounds up to the smallest normal
  EXPECT_TRUE(std::isnan(decode(Format::BF16, encode(Format::BF16, std::nan("")))));
  EXPECT_EQ(encode(Format::BF16, INFINITY), 0x7f80u);
  EXPECT_EQ(encode(Format::BF16, 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40)), 0x3f81u);  // no FP32 value: above the tie
  // A million random FP32 values against the rounding done by hand: the
  // two BF16 neighbours (FP32's bits cut at bit 16, and one up), the
  // nearer one, on a tie the even one.
  std::mt19937 rng(7);
  for (int i = 0; i < 1000000; ++i) {
    const std::uint32_t b = rng();
    const double x = bits(b);
    if (!std::isfinite(x) || std::fabs(x) >= bits(0x7f7f8000u)) continue;  // NaN, infinity, what rounds past BF16's largest
    const std::uint32_t lo = b >> 16, hi = lo + 1;
    const double dl = std::fabs(x - bits(lo << 16)), dh = std::fabs(bits(hi << 16) - x);
    const std::uint32_t want = dl < dh ? lo : dh < dl ? hi : (lo & 1 ? hi : lo);
    ASSERT_EQ(encode(Format::BF16, x), want) << std::hexfloat << x;
  }
}

TEST(Numerics, EveryBf16CodeDecodesToItsValue) {
  // decode(BF16) reads finite codes as FP32's upper half; every one of the
  // 65,536 codes against the value worked out from its fields by hand.
  for (std::uint32_t code = 0; code < 0x10000u; ++code) {
    const std::uint32_t exp = (code >> 7) & 0xff, man = code & 0x7f;
    const double sign = code & 0x8000u ? -1.0 : 1.0;
    const double v = decode(Format::BF16, code);
    if (exp == 0xff) {
      if (man) ASSERT_TRUE(std::isnan(v)) << code;
      else ASSERT_EQ(v, sign * INFINITY) << code;
      continue;
    }
    const double want = exp ? sign * std::ldexp(128.0 + man, static_cast<int>(exp) - 127 - 7) : sign * std::ldexp(man, -126 - 7);
    ASSERT_EQ(v, want) << code;
    ASSERT_EQ(std::signbit(v), (code & 0x8000u) != 0) << code;  // -0 too
  }
}

TEST(Numerics, Bf16AndFp16KnownVectors) {
  EXPECT_EQ(encode(Format::BF16, 1.0), 0x3f80u);
  EXPECT_EQ(encode(Format::BF16, -2.0), 0xc000u);
  EXPECT_EQ(encode(Format::BF16, static_cast<float>(M_PI)), 0x4049u);  // 3.140625
  EXPECT_EQ(encode(Format::BF16, 1.00390625), 0x3f80u) << "halfway 1 and 1+2^-7: even";
  EXPECT_EQ(encode(Format::BF16, 3.4e38f), 0x7f80u) << "past the largest BF16: infinity";
  EXPECT_EQ(decode(Format::BF16, 0x7f7f), 3.3895313892515355e38);
  EXPECT_EQ(encode(Format::FP16, 1.0), 0x3c00u);
  EXPECT_EQ(encode(Format::FP16, 65504), 0x7bffu);
  EXPECT_EQ(encode(Format::FP16, 65519), 0x7bffu);
  EXPECT_EQ(encode(Format::FP16, 65520), 0x7c00u) << "IEEE: 65520 rounds to infinity";
  EXPECT_EQ(encode(Format::FP16, std::ldexp(1.0, -24)), 0x0001u) << "smallest subnormal";
  EXPECT_EQ(encode(Format::FP16, 0.1), 0x2e66u);
  EXPECT_EQ(decode(Format::FP16, 0x3555), 0.333251953125);
}

TEST(Numerics, IntegersSaturateAndRoundToEven) {
  EXPECT_EQ(encode(Format::INT8, 300.0), 0x7fu);
  EXPECT_EQ(encode(Format::INT8, -300.0), 0x80u);
  EXPECT_EQ(encode(Format::INT8, 2.5), 2u);
  EXPECT_EQ(encode(Format::INT8, -3.5), static_cast<std::uint8_t>(-4));
  EXPECT_EQ(decode(Format::INT8, 0xff), -1);
  EXPECT_EQ(encode(Format::INT32, 3e10), 0x7fffffffu);
}

TEST(Numerics, StochasticRoundingIsUnbiasedAndSeeded) {
  Rng a, b;
  a.state = b.state = 42;
  Convert ca, cb;
  ca.rounding = cb.rounding = Rounding::stochastic;
  ca.rng = &a;
  cb.rng = &b;
  const double x = 1.03;  // between 1.0 and 1.125 in E4M3
  double sum = 0;
  for (int i = 0; i < 20000; ++i) {
    const std::uint32_t ea = encode(Format::E4M3, x, ca), eb = encode(Format::E4M3, x, cb);
    EXPECT_EQ(ea, eb) << "same seed, same stream";
    EXPECT_TRUE(ea == 0x38 || ea == 0x39);
    sum += decode(Format::E4M3, ea);
  }
  EXPECT_NEAR(sum / 20000, x, 0.002) << "unbiased on average";
}

TEST(Numerics, BlockScalingKeepsEveryBlockInRange) {
  std::mt19937 rng(5);
  std::normal_distribution<float> n(0, 1);
  const unsigned rows = 128, cols = 256;
  std::vector<float> x(rows * cols);
  for (unsigned i = 0; i < x.size(); ++i) x[i] = n(rng) * (i % 97 == 0 ? 1000.0f : 1.0f);  // outliers
  for (const auto& [br, bc] : {std::pair{1u, 32u}, {1u, 128u}, {128u, 128u}})
    for (ScaleFormat sf : {ScaleFormat::FP32, ScaleFormat::E8M0}) {
      const BlockQuantized q = block_quantize(x.data(), rows, cols, Format::E4M3, sf, br, bc);
      EXPECT_EQ(q.scales.size(), ((rows + br - 1) / br) * ((cols + bc - 1) / bc));
      double worst = 0;
      for (unsigned r = 0; r < rows; ++r)
        for (unsigned c = 0; c < cols; ++c) {
          const double v = x[r * cols + c], back = q.value(r, c);
          EXPECT_FALSE(std::isnan(back));
          // Half an ulp of E4M3 at the element's magnitude, or half the
          // smallest subnormal step of its block.
          EXPECT_LE(std::fabs(back - v), std::max(std::fabs(v) / 16, q.scale_of(r, c) * std::ldexp(1.0, -10)) * 1.0001)
              << "at (" << r << ", " << c << ")";
          // Elements at least 1/16 of their block's scale keep E4M3's relative precision (2^-4).
          if (std::fabs(v) >= q.scale_of(r, c) * 8) worst = std::max(worst, std::fabs(back - v) / std::fabs(v));
        }
      EXPECT_LE(worst, 1.0 / 16 + 1e-9) << br << "x" << bc;
      if (sf == ScaleFormat::E8M0) {
        for (float s : q.scales) EXPECT_EQ(e8m0_decode(e8m0_encode(s)), s) << "a power of two";
      }
    }
}

#include "engines/num/accumulate.hpp"

TEST(Numerics, LimitedAccumulationAndItsFixAtK4096) {
  // FP8 E4M3 inputs (positive, so the sums grow and the kept bits matter),
  // K = 4096: a 13-bit in-array accumulator loses far more than FP32
  // accumulation; promoting into FP32 every 128 products brings it back.
  const unsigned m = 8, n = 8, k = 4096;
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> u(0.1, 2.0);
  std::vector<double> a(m * k), b(k * n);
  for (auto& x : a) x = quantize(Format::E4M3, u(rng));
  for (auto& x : b) x = quantize(Format::E4M3, u(rng));
  std::vector<double> exact(m * n, 0.0);
  for (unsigned i = 0; i < m; ++i)
    for (unsigned j = 0; j < n; ++j)
      for (unsigned p = 0; p < k; ++p) exact[i * n + j] += a[i * k + p] * b[p * n + j];
  auto error = [&](const Accumulation& acc) {
    std::vector<double> c;
    gemm(a, b, c, m, n, k, acc);
    double worst = 0;
    for (unsigned i = 0; i < m * n; ++i) worst = std::max(worst, std::fabs(c[i] - exact[i]) / std::fabs(exact[i]));
    return worst;
  };
  Accumulation fp32, limited, promoted;
  limited.kind = promoted.kind = Accumulation::Kind::limited;
  promoted.promote_every = 128;
  const double e32 = error(fp32), el = error(limited), ep = error(promoted);
  std::printf("K=4096 max relative error: fp32 %.2e, 13-bit limited %.2e, promoted every 128 %.2e\n", e32, el, ep);
  EXPECT_GT(el, 20 * e32) << "limited accumulation is clearly worse";
  EXPECT_LT(ep, el / 10) << "promotion brings it back down";
  EXPECT_LT(ep, 1e-3);
}

TEST(Numerics, Int8ProductsSumExactlyInInt32) {
  std::vector<double> a = {127, -128, 5, 3}, b = {127, -128, -7, 2};  // 1x4 and 4x1
  std::vector<double> c;
  Accumulation acc;
  acc.kind = Accumulation::Kind::int32;
  gemm(a, b, c, 1, 1, 4, acc);
  EXPECT_EQ(c[0], 127.0 * 127 + 128.0 * 128 - 35 + 6);
  EXPECT_EQ(truncate_mantissa(1.0 + std::ldexp(1.0, -20), 13), 1.0);
  EXPECT_EQ(truncate_mantissa(1.0 + std::ldexp(1.0, -13), 13), 1.0 + std::ldexp(1.0, -13));
}

#include "engines/num/vector_ops.hpp"

namespace {
// Walks [lo, hi] in `steps` points and returns the worst error of f against
// ref, relative (with a floor) or absolute.
template <class F, class Ref>
double worst(F f, Ref ref, double lo, double hi, int steps, bool relative, double floor = 0) {
  double w = 0;
  for (int i = 0; i <= steps; ++i) {
    const float x = static_cast<float>(lo + (hi - lo) * i / steps);
    const double want = ref(static_cast<double>(x)), got = f(x);
    const double err = std::fabs(got - want) / (relative ? std::max(std::fabs(want), floor) : 1.0);
    w = std::max(w, err);
  }
  return w;
}
}  // namespace

TEST(VectorOps, SpecialFunctionsWithinTheirDocumentedBounds) {
  using namespace tessera::num;
  EXPECT_LE(worst(vec::exp, [](double x) { return std::exp(x); }, -80, 80, 20000, true), 4e-7);
  EXPECT_LE(worst(vec::log, [](double x) { return std::log(x); }, 1e-6, 1e6, 20000, true, 1.0), 4e-7);
  EXPECT_LE(worst(vec::tanh, [](double x) { return std::tanh(x); }, -12, 12, 20000, false), 2e-6);
  EXPECT_LE(worst(vec::sigmoid, [](double x) { return 1 / (1 + std::exp(-x)); }, -30, 30, 20000, false), 2e-6);
  EXPECT_LE(worst(vec::silu, [](double x) { return x / (1 + std::exp(-x)); }, -30, 30, 20000, false, 0), 2e-6 * 30);
  EXPECT_LE(worst(vec::gelu,
                  [](double x) { return 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); },
                  -8, 8, 20000, false),
            2e-6 * 8);
  EXPECT_LE(worst(vec::sin, [](double x) { return std::sin(x); }, -100, 100, 20000, false), 2e-6);
  EXPECT_LE(worst(vec::cos, [](double x) { return std::cos(x); }, -100, 100, 20000, false), 2e-6);
  EXPECT_LE(worst(vec::rsqrt, [](double x) { return 1 / std::sqrt(x); }, 1e-3, 1e4, 20000, true), 1.2e-7);
  EXPECT_EQ(vec::relu2(-3.0f), 0.0f);
  EXPECT_EQ(vec::relu2(3.0f), 9.0f);
  EXPECT_EQ(vec::exp(100.0f), INFINITY);
  EXPECT_EQ(vec::exp(-200.0f), 0.0f);
  EXPECT_TRUE(std::isnan(vec::log(-1.0f)));
}

TEST(VectorOps, RowOperationsAgainstFloat64) {
  using namespace tessera::num;
  std::mt19937 rng(9);
  std::normal_distribution<float> n(0, 3);
  const unsigned len = 4096;
  std::vector<float> x(len), w(len), b(len);
  for (unsigned i = 0; i < len; ++i) x[i] = n(rng), w[i] = 1 + 0.1f * n(rng), b[i] = 0.1f * n(rng);
  // Softmax.
  std::vector<float> s = x;
  vec::softmax(s.data(), len);
  double m = x[0], z = 0;
  for (float v : x) m = std::max<double>(m, v);
  for (float v : x) z += std::exp(v - m);
  double worst_sm = 0, total = 0;
  for (unsigned i = 0; i < len; ++i) {
    worst_sm = std::max(worst_sm, std::fabs(s[i] - std::exp(x[i] - m) / z));
    total += s[i];
  }
  EXPECT_LE(worst_sm, 2e-6);
  EXPECT_NEAR(total, 1.0, 1e-5);
  // RMSNorm and LayerNorm.
  double ss = 0, mean = 0;
  for (float v : x) ss += static_cast<double>(v) * v, mean += v;
  mean /= len;
  double var = 0;
  for (float v : x) var += (v - mean) * (v - mean);
  var /= len;
  std::vector<float> r = x, l = x;
  vec::rmsnorm(r.data(), w.data(), len);
  vec::layernorm(l.data(), w.data(), b.data(), len);
  double worst_rms = 0, worst_ln = 0;
  for (unsigned i = 0; i < len; ++i) {
    const double rr = x[i] / std::sqrt(ss / len + 1e-6) * w[i];
    const double ll = (x[i] - mean) / std::sqrt(var + 1e-5) * w[i] + b[i];
    worst_rms = std::max(worst_rms, std::fabs(r[i] - rr) / std::max(std::fabs(rr), 1e-3));
    // LayerNorm adds beta, so the scale of the answer is |normalised*gamma| + |beta|;
    // measuring against |result| alone would charge the float add's cancellation.
    const double scale = std::fabs(ll - b[i]) + std::fabs(b[i]);
    worst_ln = std::max(worst_ln, std::fabs(l[i] - ll) / std::max(scale, 1e-3));
  }
  EXPECT_LE(worst_rms, 2e-6);
  EXPECT_LE(worst_ln, 2e-6);
  // Reductions.
  double exact = 0;
  for (float v : x) exact += v;
  EXPECT_NEAR(vec::sum(x.data(), len), exact, 1e-6 * std::sqrt(double(len)) * 3 * len);
  const unsigned am = vec::argmax(x.data(), len);
  for (unsigned i = 0; i < len; ++i) EXPECT_LE(x[i], x[am]);
}

TEST(VectorOps, ZerosAfterARowChangeNoBitOfItsSumOrSoftmax) {
  // The reduction tree adds aligned power-of-two blocks, so a row's sum is
  // the same with zeros after it, and its softmax the same with columns of
  // -inf after it (the attention kernel's scores of a shorter sequence in
  // a wider matrix): every length to 1100, up to 70 columns more.
  using namespace tessera::num;
  std::mt19937 rng(21);
  std::normal_distribution<float> n(0, 3);
  std::vector<float> x(1200);
  for (float& v : x) v = n(rng);
  unsigned differ = 0, checked = 0;
  for (unsigned len = 1; len <= 1100; len += 1 + len / 64)
    for (unsigned more : {1u, 7u, 10u, 33u, 70u}) {
      std::vector<float> row(x.begin(), x.begin() + len), padded = row;
      padded.resize(len + more, 0.0f);
      const float a = vec::sum(row.data(), len), b = vec::sum(padded.data(), len + more);
      differ += std::memcmp(&a, &b, 4) != 0;
      std::vector<float> sm = row, sp = row;
      sp.resize(len + more, -std::numeric_limits<float>::infinity());
      vec::softmax(sm.data(), len);
      vec::softmax(sp.data(), len + more);
      differ += std::memcmp(sm.data(), sp.data(), 4 * len) != 0;
      ++checked;
    }
  EXPECT_EQ(differ, 0u) << "of " << checked << " lengths";
  // (The halves at n / 2 it had: 1001 values and 1011 with ten zeros
  // summed differently.)
  std::vector<float> r(x.begin(), x.begin() + 1001), p = r;
  p.resize(1011, 0.0f);
  const float a = vec::sum(r.data(), 1001), b = vec::sum(p.data(), 1011);
  EXPECT_EQ(std::memcmp(&a, &b, 4), 0);
}

TEST(VectorOps, TopKValuesAndIndicesWithTies) {
  using namespace tessera::num;
  const float x[] = {0.5f, 3.0f, -1.0f, 3.0f, 2.0f, 7.0f, 2.0f, 0.0f, 9.0f, 1.0f};
  float v[8];
  unsigned idx[8];
  vec::topk(x, 10, 4, v, idx);
  EXPECT_EQ(std::vector<float>(v, v + 4), (std::vector<float>{9, 7, 3, 3}));
  EXPECT_EQ(std::vector<unsigned>(idx, idx + 4), (std::vector<unsigned>{8, 5, 1, 3})) << "ties: lower index first";
  vec::topk(x, 10, 2, v, idx);
  EXPECT_EQ(idx[0], 8u);
  EXPECT_EQ(idx[1], 5u);
}

TEST(VectorOps, RotaryEmbeddingRotatesPairs) {
  using namespace tessera::num;
  const unsigned n = 64, pos = 17;
  std::vector<float> x(n);
  for (unsigned i = 0; i < n; ++i) x[i] = 0.1f * static_cast<float>(i) - 1.0f;
  std::vector<float> y = x;
  vec::rope(y.data(), n, pos);
  for (unsigned i = 0; i < n; i += 2) {
    const double f = std::pow(10000.0, -static_cast<double>(i) / n), a = pos * f;
    EXPECT_NEAR(y[i], x[i] * std::cos(a) - x[i + 1] * std::sin(a), 2e-6) << i;
    EXPECT_NEAR(y[i + 1], x[i] * std::sin(a) + x[i + 1] * std::cos(a), 2e-6) << i;
  }
}

namespace {
// Worst |got - ref| / sum_p |a_ip b_pj| over C: the error measure of the
// classic dot-product bound (gamma_k = k u), immune to cancellation.
double gemm_error(const std::vector<double>& got, const std::vector<double>& a, const std::vector<double>& b,
                  unsigned m, unsigned n, unsigned k) {
  double worst = 0;
  for (unsigned i = 0; i < m; ++i)
    for (unsigned j = 0; j < n; ++j) {
      double ref = 0, mag = 0;
      for (unsigned p = 0; p < k; ++p)
        ref += a[i * k + p] * b[p * n + j], mag += std::fabs(a[i * k + p] * b[p * n + j]);
      worst = std::max(worst, std::fabs(got[i * n + j] - ref) / mag);
    }
  return worst;
}
}  // namespace

TEST(Gemm, EachFormatAgainstFloat64WithinItsBound) {
  // Inputs drawn in float64, rounded into the format, multiplied with FP32
  // accumulation. Two bounds, per element, relative to sum |a||b|:
  //   against the float64 product of the rounded inputs: k * 2^-24 (FP32 sums);
  //   against the float64 product of the original inputs: that plus
  //   2u + u^2 for the two roundings of the inputs (u: the format's unit roundoff).
  const unsigned m = 12, n = 10, k = 1024;
  std::mt19937 rng(21);
  std::normal_distribution<double> dist(0, 1);
  std::vector<double> a0(m * k), b0(k * n);
  for (auto& x : a0) x = dist(rng);
  for (auto& x : b0) x = dist(rng);
  const double gamma = k * std::ldexp(1.0, -24);
  for (const auto& [f, u] : {std::pair{Format::FP32, std::ldexp(1.0, -24)}, {Format::BF16, std::ldexp(1.0, -8)},
                             {Format::FP16, std::ldexp(1.0, -11)}, {Format::E4M3, std::ldexp(1.0, -4)},
                             {Format::E5M2, std::ldexp(1.0, -3)}}) {
    std::vector<double> a(a0.size()), b(b0.size()), c;
    // FP8 ranges hold N(0, 1) samples, but subnormals (below 2^-6 in E4M3)
    // lose relative precision: count their absolute error separately.
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = quantize(f, a0[i]);
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = quantize(f, b0[i]);
    gemm(a, b, c, m, n, k, Accumulation{});
    const double to_rounded = gemm_error(c, a, b, m, n, k), to_original = gemm_error(c, a0, b0, m, n, k);
    std::printf("%-5s max error / sum|ab|: %.2e vs rounded inputs, %.2e vs original inputs\n", name(f), to_rounded,
                to_original);
    EXPECT_LE(to_rounded, gamma) << name(f);
    const double sub = (f == Format::E4M3 ? std::ldexp(1.0, -10) : f == Format::E5M2 ? std::ldexp(1.0, -17) : 0);
    // A subnormal element's error is at most half its step; relative to the
    // typical |a||b| (about 2/pi for unit normals) that is sub / 0.6.
    EXPECT_LE(to_original, gamma + 2 * u + u * u + sub / 0.6) << name(f);
    EXPECT_GT(to_original, (f == Format::FP32 ? 0.0 : u / 64)) << name(f) << ": the format's rounding must show";
  }
}

TEST(Gemm, BlockScaledFp8MatchesItsDequantizedProduct) {
  // A in 1x128 groups, B in 128x128 blocks, E4M3 codes, FP32 and E8M0
  // scales, K = 512 (four groups). Rows of A span six decades, which a
  // single per-tensor scale could not hold.
  const unsigned m = 16, n = 32, k = 512;
  std::mt19937 rng(23);
  std::normal_distribution<float> dist(0, 1);
  std::vector<float> a(m * k), b(k * n);
  for (unsigned i = 0; i < m; ++i)
    for (unsigned p = 0; p < k; ++p) a[i * k + p] = dist(rng) * std::pow(10.0f, static_cast<float>(i % 7) - 3);
  for (auto& x : b) x = dist(rng);
  std::vector<double> ad(a.begin(), a.end()), bd(b.begin(), b.end());
  for (ScaleFormat sf : {ScaleFormat::FP32, ScaleFormat::E8M0}) {
    const BlockQuantized qa = block_quantize(a.data(), m, k, Format::E4M3, sf, 1, 128);
    const BlockQuantized qb = block_quantize(b.data(), k, n, Format::E4M3, sf, 128, 128);
    std::vector<double> c;
    gemm_block_scaled(qa, qb, c);
    std::vector<double> da(m * k), db(k * n);
    for (unsigned i = 0; i < m; ++i)
      for (unsigned p = 0; p < k; ++p) da[i * k + p] = qa.value(i, p);
    for (unsigned p = 0; p < k; ++p)
      for (unsigned j = 0; j < n; ++j) db[p * n + j] = qb.value(p, j);
    const double to_dequantized = gemm_error(c, da, db, m, n, k), to_original = gemm_error(c, ad, bd, m, n, k);
    std::printf("block-scaled E4M3 (%s scales): %.2e vs dequantized, %.2e vs original\n",
                sf == ScaleFormat::FP32 ? "FP32" : "E8M0", to_dequantized, to_original);
    // FP32 sums inside a group, one rounding for the scale product and two
    // per group when promoting: well inside k * 2^-24.
    EXPECT_LE(to_dequantized, k * std::ldexp(1.0, -24));
    // Input rounding: 2u + u^2 with u = 2^-4, plus subnormals of each block.
    EXPECT_LE(to_original, 2.0 / 16 + 1.0 / 256 + std::ldexp(1.0, -9));
  }
  // One scale for all of A instead: the rows 10^6 below the largest fall
  // under E4M3's smallest subnormal and vanish. Worst row's relative error
  // (||row - ref|| / ||ref||): about E4M3's precision with 1x128 groups, total
  // loss with a per-tensor scale.
  auto worst_row = [&](const BlockQuantized& qa) {
    const BlockQuantized qb = block_quantize(b.data(), k, n, Format::E4M3, ScaleFormat::FP32, 128, 128);
    std::vector<double> da(m * k), db(k * n), c;
    for (unsigned i = 0; i < m; ++i)
      for (unsigned p = 0; p < k; ++p) da[i * k + p] = qa.value(i, p);
    for (unsigned p = 0; p < k; ++p)
      for (unsigned j = 0; j < n; ++j) db[p * n + j] = qb.value(p, j);
    gemm(da, db, c, m, n, k, Accumulation{});
    double worst = 0;
    for (unsigned i = 0; i < m; ++i) {
      double e2 = 0, r2 = 0;
      for (unsigned j = 0; j < n; ++j) {
        double ref = 0;
        for (unsigned p = 0; p < k; ++p) ref += ad[i * k + p] * bd[p * n + j];
        e2 += (c[i * n + j] - ref) * (c[i * n + j] - ref);
        r2 += ref * ref;
      }
      worst = std::max(worst, std::sqrt(e2 / r2));
    }
    return worst;
  };
  const double grouped = worst_row(block_quantize(a.data(), m, k, Format::E4M3, ScaleFormat::FP32, 1, 128));
  const double per_tensor = worst_row(block_quantize(a.data(), m, k, Format::E4M3, ScaleFormat::FP32, m, k));
  std::printf("worst row relative error: 1x128 groups %.2e, per-tensor scale %.2e\n", grouped, per_tensor);
  EXPECT_LT(grouped, 0.1);
  EXPECT_GT(per_tensor, 0.9) << "per-tensor scaling loses the small rows";
}

TEST(Gemm, BlockScaledFp32SumsAreTheStepByStepRoundingsBits) {
  // The float path of gemm_block_scaled against the definition, step by
  // step in float64, each step rounded to FP32: the same bits, for E4M3
  // and E5M2 codes (subnormal ones included), FP32 scales from 2^-100 to
  // 2^60 (products and sums that fall subnormal or grow large), K not a
  // multiple of the group. A NaN code takes the general path: NaN there.
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> code(0, 255), expo(-100, 60);
  for (Format f : {Format::E4M3, Format::E5M2}) {
    BlockQuantized a, b;
    a.format = b.format = f;
    a.rows = 5, a.cols = 300, a.block_rows = 1, a.block_cols = 128;
    b.rows = 300, b.cols = 70, b.block_rows = 128, b.block_cols = 32;
    auto fill = [&](BlockQuantized& q) {
      for (unsigned i = 0; i < q.rows * q.cols; ++i) {
        std::uint8_t c;
        do c = static_cast<std::uint8_t>(code(rng));
        while (!std::isfinite(decode(f, c)));
        q.codes.push_back(c);
      }
      const unsigned blocks = ((q.rows + q.block_rows - 1) / q.block_rows) * q.blocks_per_row();
      for (unsigned i = 0; i < blocks; ++i) q.scales.push_back(std::ldexp(1.0f + static_cast<float>(code(rng)) / 256, expo(rng)));
    };
    fill(a), fill(b);
    std::vector<double> c;
    gemm_block_scaled(a, b, c);
    for (unsigned i = 0; i < a.rows; ++i)
      for (unsigned j = 0; j < b.cols; ++j) {
        double out = 0;
        for (unsigned p0 = 0; p0 < a.cols; p0 += 128) {
          double partial = 0;
          for (unsigned p = p0; p < std::min(a.cols, p0 + 128); ++p)
            partial = to_fp32(partial + decode(f, a.codes[i * a.cols + p]) * decode(f, b.codes[p * b.cols + j]));
          out = to_fp32(out + to_fp32(partial * to_fp32(static_cast<double>(a.scale_of(i, p0)) * b.scale_of(p0, j))));
        }
        const float got = static_cast<float>(c[i * b.cols + j]), want = static_cast<float>(out);
        ASSERT_EQ(std::memcmp(&got, &want, 4), 0) << name(f) << " (" << i << ", " << j << "): " << got << " vs " << want;
      }
    a.codes[3] = f == Format::E4M3 ? 0x7f : 0x7e;  // NaN
    gemm_block_scaled(a, b, c);
    EXPECT_TRUE(std::isnan(c[0])) << name(f);
  }
}

TEST(Gemm, BlockScaledRejectsMismatchedShapes) {
  std::vector<float> a(4 * 256, 1.0f), b(256 * 8, 1.0f), b2(128 * 8, 1.0f);
  const BlockQuantized qa = block_quantize(a.data(), 4, 256, Format::E4M3, ScaleFormat::FP32, 1, 128);
  const BlockQuantized qb = block_quantize(b.data(), 256, 8, Format::E4M3, ScaleFormat::FP32, 128, 8);
  std::vector<double> c;
  gemm_block_scaled(qa, qb, c);
  EXPECT_NEAR(c[0], 256.0, 256.0 * 1e-6);
  auto message = [&](const BlockQuantized& x, const BlockQuantized& y, const Accumulation& acc = {}) {
    try {
      gemm_block_scaled(x, y, c, acc);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const BlockQuantized short_b = block_quantize(b2.data(), 128, 8, Format::E4M3, ScaleFormat::FP32, 128, 8);
  EXPECT_NE(message(qa, short_b).find("K differs"), std::string::npos) << message(qa, short_b);
  const BlockQuantized b32 = block_quantize(b.data(), 256, 8, Format::E4M3, ScaleFormat::FP32, 32, 8);
  EXPECT_NE(message(qa, b32).find("differ"), std::string::npos) << message(qa, b32);
  const BlockQuantized a2d = block_quantize(a.data(), 4, 256, Format::E4M3, ScaleFormat::FP32, 2, 128);
  EXPECT_NE(message(a2d, qb).find("1 x G"), std::string::npos) << message(a2d, qb);
  Accumulation int32;
  int32.kind = Accumulation::Kind::int32;
  EXPECT_NE(message(qa, qb, int32).find("int32"), std::string::npos);
}

TEST(Gemm, Fp32AccumulationIsTheSequentialFp32SumBitForBit) {
  // gemm() takes a float path when products are exact in FP32; it must give
  // exactly the bits of the definition: for p = 0..K-1, c = fp32(c + a*b).
  // Random inputs of every tile format, wide exponent ranges (subnormals of
  // the format included), with and without C +=.
  std::mt19937 rng(29);
  std::uniform_real_distribution<double> mant(-1, 1);
  std::uniform_int_distribution<int> expo(-20, 12);
  const unsigned m = 9, n = 7, k = 300;
  for (Format f : {Format::BF16, Format::FP16, Format::E4M3, Format::E5M2, Format::INT8}) {
    std::vector<double> a(m * k), b(k * n), c0(m * n);
    auto draw = [&] {
      return f == Format::INT8 ? quantize(f, std::round(mant(rng) * 127))
                               : quantize(f, std::ldexp(mant(rng), expo(rng)), saturating());
    };
    for (auto& x : a) x = draw();
    for (auto& x : b) x = draw();
    for (auto& x : c0) x = static_cast<float>(mant(rng) * 100);
    for (bool acc : {false, true}) {
      std::vector<double> got = c0;
      gemm(a, b, got, m, n, k, Accumulation{}, acc);
      for (unsigned i = 0; i < m; ++i)
        for (unsigned j = 0; j < n; ++j) {
          float want = acc ? static_cast<float>(c0[i * n + j]) : 0.0f;
          for (unsigned p = 0; p < k; ++p)
            want = static_cast<float>(static_cast<double>(want) + a[i * k + p] * b[p * n + j]);
          ASSERT_EQ(static_cast<float>(got[i * n + j]), want) << name(f) << " C[" << i << "][" << j << "] acc=" << acc;
        }
    }
  }
}
