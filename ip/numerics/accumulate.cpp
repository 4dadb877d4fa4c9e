#include "numerics/accumulate.hpp"

#include <cmath>
#include <cstdint>

namespace tessera::num {

double truncate_mantissa(double x, unsigned bits) {
  if (x == 0 || !std::isfinite(x)) return x;
  int e;
  const double f = std::frexp(x, &e);  // x = f * 2^e, 0.5 <= |f| < 1
  const double scale = std::ldexp(1.0, static_cast<int>(bits) + 1);
  return std::ldexp(std::trunc(f * scale) / scale, e);
}

double to_fp32(double x) { return static_cast<double>(static_cast<float>(x)); }

void gemm(const std::vector<double>& a, const std::vector<double>& b, std::vector<double>& c, unsigned m, unsigned n,
          unsigned k, const Accumulation& acc, bool accumulate) {
  c.resize(static_cast<std::size_t>(m) * n, 0.0);
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
            s = static_cast<std::int32_t>(static_cast<std::uint32_t>(s) +
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

}  // namespace tessera::num
