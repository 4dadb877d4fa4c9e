#include "engines/num/accumulate.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

namespace tessera::num {

double truncate_mantissa(double x, unsigned bits) {
  if (x == 0 || !std::isfinite(x)) return x;
  int e;
  const double f = std::frexp(x, &e);  // x = f * 2^e, 0.5 <= |f| < 1
  const double scale = std::ldexp(1.0, static_cast<int>(bits) + 1);
  return std::ldexp(std::trunc(f * scale) / scale, e);
}

double to_fp32(double x) { return static_cast<double>(static_cast<float>(x)); }

namespace {
// True when every value is finite, zero or within [2^-62, 2^62] in
// magnitude, and has at most 12 significant bits (BF16, FP16, FP8, INT8):
// then each product is exact in FP32 and stays normal, and FP32 sums
// computed in float equal the float64 sums rounded to FP32 (double
// rounding through float64 is innocuous for addition), so the float path
// below gives the same bits.
bool products_exact_in_float(const std::vector<double>& v) {
  // On the float64 bits: the biased exponent within [1023 - 62, 1023 + 61]
  // (magnitudes in [2^-62, 2^62)) and the low 52 - 11 mantissa bits clear
  // (at most 12 significant bits); zeros pass. Integer work only: this
  // runs over every operand of every GEMM.
  constexpr std::uint64_t kLow = (1ull << 41) - 1;
  for (const double x : v) {
    std::uint64_t bits;
    std::memcpy(&bits, &x, 8);
    bits &= ~(1ull << 63);
    if (bits == 0) continue;
    const std::uint64_t e = bits >> 52;
    if (e < 1023 - 62 || e > 1023 + 61 || (bits & kLow)) return false;
  }
  return true;
}

}  // namespace

void accumulate_row_f32(const float* __restrict a, const float* __restrict b, unsigned n, unsigned k, float* __restrict row) {
  for (unsigned p = 0; p < k; ++p) {
    const float x = a[p];
    const float* bp = b + static_cast<std::size_t>(p) * n;
    for (unsigned j = 0; j < n; ++j) row[j] += x * bp[j];
  }
}

namespace {
// FP32 accumulation in float, row by row: each C element still adds its K
// products one by one in order; the loop runs across C's columns.
void gemm_fp32_fast(const std::vector<double>& a, const std::vector<double>& b, std::vector<double>& c, unsigned m,
                    unsigned n, unsigned k, bool accumulate) {
  // Scratch kept between calls: no page faults on every GEMM.
  thread_local std::vector<float> bf, row, ar;
  bf.assign(b.begin(), b.end());
  row.assign(n, 0.0f);
  ar.resize(k);
  for (unsigned i = 0; i < m; ++i) {
    for (unsigned j = 0; j < n; ++j)
      row[j] = accumulate ? static_cast<float>(c[static_cast<std::size_t>(i) * n + j]) : 0.0f;
    for (unsigned p = 0; p < k; ++p) ar[p] = static_cast<float>(a[static_cast<std::size_t>(i) * k + p]);
    accumulate_row_f32(ar.data(), bf.data(), n, k, row.data());
    for (unsigned j = 0; j < n; ++j) c[static_cast<std::size_t>(i) * n + j] = row[j];
  }
}
}  // namespace

void gemm(const std::vector<double>& a, const std::vector<double>& b, std::vector<double>& c, unsigned m, unsigned n,
          unsigned k, const Accumulation& acc, bool accumulate) {
  c.resize(static_cast<std::size_t>(m) * n, 0.0);
  // An accumulated C must itself hold FP32 values for the float path.
  const bool c_is_float = !accumulate || std::all_of(c.begin(), c.end(), [](double x) {
    return static_cast<double>(static_cast<float>(x)) == x || std::isnan(x);
  });
  if (acc.kind == Accumulation::Kind::fp32 && c_is_float && products_exact_in_float(a) && products_exact_in_float(b)) {
    gemm_fp32_fast(a, b, c, m, n, k, accumulate);
    return;
  }
  for (unsigned i = 0; i < m; ++i)
    for (unsigned j = 0; j < n; ++j) {
      double out = accumulate ? c[i * n + j] : 0.0;
      switch (acc.kind) {
        case Accumulation::Kind::fp32:
          for (unsigned p = 0; p < k; ++p) out = to_fp32(out + a[i * k + p] * b[p * n + j]);
          break;
        case Accumulation::Kind::int32: {
          std::int64_t s = static_cast<std::int64_t>(out);
          for (unsigned p = 0; p < k; ++p)
            s = static_cast<std::int32_t>(
                static_cast<std::uint32_t>(s) +
                static_cast<std::uint32_t>(static_cast<std::int64_t>(a[i * k + p] * b[p * n + j])));
          out = static_cast<double>(s);
          break;
        }
        case Accumulation::Kind::limited: {
          double partial = 0;
          for (unsigned p = 0; p < k; ++p) {
            partial = truncate_mantissa(partial + a[i * k + p] * b[p * n + j], acc.mantissa_bits);
            if (acc.promote_every && (p + 1) % acc.promote_every == 0) {
              out = to_fp32(out + partial);
              partial = 0;
            }
          }
          out = to_fp32(out + partial);
          break;
        }
      }
      c[i * n + j] = out;
    }
}

void gemm_block_scaled(const BlockQuantized& a, const BlockQuantized& b, std::vector<double>& c,
                       const Accumulation& acc) {
  const auto shape = [](const BlockQuantized& q) {
    return std::to_string(q.rows) + "x" + std::to_string(q.cols) + " in " + std::to_string(q.block_rows) + "x" +
           std::to_string(q.block_cols) + " blocks";
  };
  if (a.cols != b.rows)
    throw std::invalid_argument("block-scaled gemm: A is " + shape(a) + ", B is " + shape(b) + ": K differs");
  if (a.block_rows != 1)
    throw std::invalid_argument("block-scaled gemm: A (" + shape(a) + ") must be scaled in 1 x G groups along K");
  if (a.block_cols != b.block_rows)
    throw std::invalid_argument("block-scaled gemm: A's K-groups (" + shape(a) + ") and B's K-blocks (" + shape(b) +
                                ") differ");
  if (acc.kind == Accumulation::Kind::int32)
    throw std::invalid_argument("block-scaled gemm: FP8 operands need fp32 or limited accumulation, not int32");
  if (a.codes.size() != static_cast<std::size_t>(a.rows) * a.cols ||
      b.codes.size() != static_cast<std::size_t>(b.rows) * b.cols)
    throw std::invalid_argument("block-scaled gemm: an operand's codes do not match its shape");
  const unsigned m = a.rows, n = b.cols, k = a.cols, g = a.block_cols;
  // Decode once: the array multiplies code values; scales come in per group.
  std::vector<double> av(a.codes.size()), bv(b.codes.size());
  for (std::size_t i = 0; i < av.size(); ++i) av[i] = decode(a.format, a.codes[i]);
  for (std::size_t i = 0; i < bv.size(); ++i) bv[i] = decode(b.format, b.codes[i]);
  c.assign(static_cast<std::size_t>(m) * n, 0.0);
  // FP32 accumulation of finite codes (at most 4 significant bits, within
  // [2^-16, 57344]) and finite scales: each step below rounds an exact
  // float64 result (a product of two floats, or a sum of two, which
  // rounds innocuously through float64) to FP32, so the same steps in
  // float give the same bits, a row at a time.
  const auto finite = [](const std::vector<float>& v) {
    return std::all_of(v.begin(), v.end(), [](float x) { return std::isfinite(x); });
  };
  if (acc.kind == Accumulation::Kind::fp32 && products_exact_in_float(av) && products_exact_in_float(bv) && finite(a.scales) &&
      finite(b.scales)) {
    thread_local std::vector<float> af, bf, part, sc, out;
    af.assign(av.begin(), av.end());
    bf.assign(bv.begin(), bv.end());
    part.resize(n), sc.resize(n), out.resize(n);
    for (unsigned i = 0; i < m; ++i) {
      std::fill(out.begin(), out.end(), 0.0f);
      for (unsigned p0 = 0; p0 < k; p0 += g) {
        std::fill(part.begin(), part.end(), 0.0f);
        accumulate_row_f32(af.data() + static_cast<std::size_t>(i) * k + p0, bf.data() + static_cast<std::size_t>(p0) * n, n,
                           std::min(g, k - p0), part.data());
        const float sa = a.scale_of(i, p0);
        for (unsigned j = 0; j < n; ++j) sc[j] = sa * b.scale_of(p0, j);
        for (unsigned j = 0; j < n; ++j) out[j] += part[j] * sc[j];
      }
      std::copy(out.begin(), out.end(), c.begin() + static_cast<std::ptrdiff_t>(i) * n);
    }
    return;
  }
  for (unsigned i = 0; i < m; ++i)
    for (unsigned j = 0; j < n; ++j) {
      double out = 0;
      for (unsigned p0 = 0; p0 < k; p0 += g) {
        double partial = 0;
        for (unsigned p = p0; p < std::min(k, p0 + g); ++p) {
          const double prod = av[static_cast<std::size_t>(i) * k + p] * bv[static_cast<std::size_t>(p) * n + j];
          partial = acc.kind == Accumulation::Kind::limited ? truncate_mantissa(partial + prod, acc.mantissa_bits)
                                                             : to_fp32(partial + prod);
        }
        const double scale = to_fp32(static_cast<double>(a.scale_of(i, p0)) * b.scale_of(p0, j));
        out = to_fp32(out + to_fp32(partial * scale));
      }
      c[static_cast<std::size_t>(i) * n + j] = out;
    }
}

}  // namespace tessera::num
