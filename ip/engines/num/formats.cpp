#include <iterator>
#include "engines/num/formats.hpp"

#include <cmath>
#include <cstring>
#include <limits>

namespace tessera::num {
namespace {

// A binary floating-point format with `e` exponent and `m` mantissa bits.
struct Float {
  unsigned e, m;
  int bias;
  bool has_inf;       // IEEE-like top exponent (E5M2, FP16, BF16, FP32)
  std::uint32_t nan;  // the canonical NaN encoding (without sign)
  // Largest finite encoding (without sign).
  std::uint32_t max_code() const {
    const std::uint32_t top = (1u << e) - 1;
    return has_inf ? ((top - 1) << m) | ((1u << m) - 1) : (top << m) | ((1u << m) - 2);  // E4M3: S.1111.110
  }
  int emin() const { return 1 - bias; }  // exponent of the smallest normal
};

const Float* float_of(Format f) {
  static const Float fp32{8, 23, 127, true, 0x7fc00000u};
  static const Float fp16{5, 10, 15, true, 0x7e00u};
  static const Float bf16{8, 7, 127, true, 0x7fc0u};
  static const Float e4m3{4, 3, 7, false, 0x7fu};
  static const Float e5m2{5, 2, 15, true, 0x7eu};
  switch (f) {
    case Format::FP32: return &fp32;
    case Format::FP16: return &fp16;
    case Format::BF16: return &bf16;
    case Format::E4M3: return &e4m3;
    case Format::E5M2: return &e5m2;
    default: return nullptr;
  }
}

double decode_float(const Float& F, std::uint32_t code) {
  const bool neg = (code >> (F.e + F.m)) & 1;
  const std::uint32_t exp = (code >> F.m) & ((1u << F.e) - 1), man = code & ((1u << F.m) - 1);
  const std::uint32_t top = (1u << F.e) - 1;
  double v;
  if (F.has_inf && exp == top) {
    v = man ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else if (!F.has_inf && exp == top && man == (1u << F.m) - 1) {
    v = std::numeric_limits<double>::quiet_NaN();
  } else if (exp == 0) {
    v = std::ldexp(static_cast<double>(man), F.emin() - static_cast<int>(F.m));
  } else {
    v = std::ldexp(static_cast<double>(man | (1u << F.m)), static_cast<int>(exp) - F.bias - static_cast<int>(F.m));
  }
  return neg ? -v : v;
}

// Rounds a non-negative scaled value to an integer.
double round_scaled(double s, const Convert& c) {
  if (c.rounding == Rounding::stochastic && c.rng) return std::floor(s + c.rng->uniform());
  return std::nearbyint(s);  // the host's default mode: to nearest, ties to even
}

std::uint32_t encode_float(const Float& F, double x, const Convert& c) {
  const std::uint32_t sign = std::signbit(x) ? 1u << (F.e + F.m) : 0;
  const double max = decode_float(F, F.max_code());
  const std::uint32_t top = (1u << F.e) - 1;
  const std::uint32_t inf = F.has_inf ? top << F.m : F.nan;  // E4M3 has no infinity: NaN stands in
  if (std::isnan(x)) return sign | F.nan;
  const double a = std::fabs(x);
  if (std::isinf(a)) return sign | (c.saturate ? F.max_code() : inf);
  if (a == 0) return sign;
  // Quantum of the binade (or of the subnormal range).
  int ex = std::ilogb(a);
  if (ex < F.emin()) ex = F.emin();
  const double q = std::ldexp(1.0, ex - static_cast<int>(F.m));
  const double v = round_scaled(a / q, c) * q;
  if (v > max) return sign | (c.saturate ? F.max_code() : inf);
  if (v == 0) return sign;
  int ev = std::ilogb(v);
  if (ev < F.emin()) {  // subnormal
    return sign | static_cast<std::uint32_t>(v / std::ldexp(1.0, F.emin() - static_cast<int>(F.m)));
  }
  const std::uint32_t man = static_cast<std::uint32_t>(v / std::ldexp(1.0, ev - static_cast<int>(F.m))) - (1u << F.m);
  return sign | (static_cast<std::uint32_t>(ev + F.bias) << F.m) | man;
}

}  // namespace

const char* name(Format f) {
  static const char* const names[] = {"fp32", "fp16", "bf16", "e4m3", "e5m2", "int8", "int32"};
  static_assert(std::size(names) == kFormats, "a name per format");  // elaboration-only
  return names[static_cast<unsigned>(f)];
}

unsigned bits(Format f) {
  static const unsigned b[] = {32, 16, 16, 8, 8, 8, 32};
  return b[static_cast<unsigned>(f)];
}

double decode(Format f, std::uint32_t code) {
  switch (f) {
    case Format::INT8: return static_cast<double>(static_cast<std::int8_t>(code & 0xff));
    case Format::INT32: return static_cast<double>(static_cast<std::int32_t>(code));
    case Format::BF16:
      // BF16 is FP32's upper half: every finite BF16 value is that float,
      // read by its bits (NaN and infinities take the general path).
      if ((code & 0x7f80u) != 0x7f80u) {
        const std::uint32_t bits = (code & 0xffffu) << 16;
        float v;
        std::memcpy(&v, &bits, 4);
        return v;
      }
      return decode_float(*float_of(f), code);
    default: return decode_float(*float_of(f), code);
  }
}

std::uint32_t encode(Format f, double x, const Convert& c) {
  if (f == Format::INT8 || f == Format::INT32) {
    // Integers always saturate; NaN becomes 0.
    const double lo = f == Format::INT8 ? -128.0 : -2147483648.0, hi = f == Format::INT8 ? 127.0 : 2147483647.0;
    double r = std::isnan(x)              ? 0.0
               : std::fabs(x) == INFINITY ? x
                                          : (std::signbit(x) ? -round_scaled(-x, c) : round_scaled(x, c));
    r = std::min(hi, std::max(lo, r));
    const auto v = static_cast<std::int32_t>(r);
    return f == Format::INT8 ? static_cast<std::uint32_t>(static_cast<std::uint8_t>(v)) : static_cast<std::uint32_t>(v);
  }
  if (f == Format::BF16 && c.rounding == Rounding::nearest_even) {
    // The common case at the speed of a few integer operations: a value
    // that is an FP32 number (what the engines cast) rounds to BF16 by
    // rounding its FP32 bits to nearest even at bit 16. BF16 has FP32's
    // exponents, so subnormals round alike; NaN, infinities and what
    // overflows (saturating or not) take the general path.
    const float v = static_cast<float>(x);
    if (static_cast<double>(v) == x) {
      std::uint32_t bits;
      std::memcpy(&bits, &v, 4);
      if ((bits & 0x7f800000u) != 0x7f800000u) {
        const std::uint32_t r = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
        if ((r & 0x7f80u) != 0x7f80u) return r;
      }
    }
  }
  return encode_float(*float_of(f), x, c);
}

double max_finite(Format f) {
  switch (f) {
    case Format::INT8: return 127;
    case Format::INT32: return 2147483647.0;
    default: return decode_float(*float_of(f), float_of(f)->max_code());
  }
}

}  // namespace tessera::num
