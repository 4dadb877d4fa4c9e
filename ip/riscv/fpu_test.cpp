// The F/D arithmetic against the host's own IEEE 754 hardware, which rounds
// correctly in four of the five modes (RNE, RTZ, RDN, RUP) and detects
// tininess after rounding as RISC-V does; and hand-worked cases for what
// the host cannot check: RMM, the canonical NaN, minimumNumber, the
// saturating conversions and fclass.
#include <gtest/gtest.h>

#include <cfenv>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "riscv/fpu.hpp"

using namespace tessera::riscv;
using namespace tessera::riscv::fpu;

namespace {

constexpr int kHostMode[4] = {FE_TONEAREST, FE_TOWARDZERO, FE_DOWNWARD, FE_UPWARD};

unsigned host_flags(int raised) {
  unsigned f = 0;
  if (raised & FE_INVALID) f |= kNV;
  if (raised & FE_DIVBYZERO) f |= kDZ;
  if (raised & FE_OVERFLOW) f |= kOF;
  if (raised & FE_UNDERFLOW) f |= kUF;
  if (raised & FE_INEXACT) f |= kNX;
  return f;
}

// Operands that reach every path: random bits, values near 1, at the
// edges of the range, subnormals, zeros, infinities and NaNs.
template <class F, class U>
U pick(std::mt19937_64& rng) {
  const int kind = static_cast<int>(rng() % 8);
  const U r = static_cast<U>(rng());
  constexpr unsigned mant = std::numeric_limits<F>::digits - 1;
  constexpr U sign = U(1) << (sizeof(U) * 8 - 1);
  const U m = r & ((U(1) << mant) - 1);
  switch (kind) {
    case 0: return r;
    case 1: return bits(F(1)) ^ (m & 0xff) ^ (r & sign);                                  // near 1
    case 2: return static_cast<U>((bits(std::numeric_limits<F>::max()) - (m & 0xfff)) ^ (r & sign));  // near overflow
    case 3: return m ^ (r & sign);                                                        // subnormal
    case 4: return static_cast<U>(bits(std::numeric_limits<F>::min()) + (m & 0xfff)) ^ (r & sign);  // near the smallest normal
    case 5: return static_cast<U>(bits(F(1)) + ((r % 60) << mant)) ^ (m & 0xf) ^ (r & sign);  // powers of two
    case 6: {
      const F specials[] = {F(0), -F(0), std::numeric_limits<F>::infinity(), -std::numeric_limits<F>::infinity(),
                            std::numeric_limits<F>::quiet_NaN(), std::numeric_limits<F>::signaling_NaN()};
      return static_cast<U>(bits(specials[r % 6]));
    }
    default: return static_cast<U>(bits(F(static_cast<int>(r % 2001) - 1000) / F(8)));  // small exact values
  }
}

template <class F>
F host_op(int op, F a, F b, F c) {
  volatile F x = a, y = b, z = c, r;
  switch (op) {
    case 0: r = x + y; break;
    case 1: r = x - y; break;
    case 2: r = x * y; break;
    case 3: r = x / y; break;
    case 4: r = std::sqrt(x); break;
    default: r = std::fma(x, y, z); break;
  }
  return r;
}

template <class F, class U>
void against_host(Fmt fmt) {
  std::mt19937_64 rng(fmt == Fmt::s ? 1 : 2);
  int checked = 0;
  for (int i = 0; i < 200000; ++i) {
    const U a = pick<F, U>(rng), b = pick<F, U>(rng), c = pick<F, U>(rng);
    const int op = static_cast<int>(rng() % 6);
    const unsigned rm = static_cast<unsigned>(rng() % 4);
    F fa, fb, fc;
    if constexpr (sizeof(F) == 4) {
      fa = as_float(a), fb = as_float(b), fc = as_float(c);
    } else {
      fa = as_double(a), fb = as_double(b), fc = as_double(c);
    }
    std::fesetround(kHostMode[rm]);
    std::feclearexcept(FE_ALL_EXCEPT);
    const F want = host_op<F>(op, fa, fb, fc);
    const unsigned want_flags = host_flags(std::fetestexcept(FE_ALL_EXCEPT));
    std::fesetround(FE_TONEAREST);
    unsigned flags = 0;
    std::uint64_t got = 0;
    switch (op) {
      case 0: got = add(fmt, a, b, rm, flags); break;
      case 1: got = sub(fmt, a, b, rm, flags); break;
      case 2: got = mul(fmt, a, b, rm, flags); break;
      case 3: got = div(fmt, a, b, rm, flags); break;
      case 4: got = fpu::sqrt(fmt, a, rm, flags); break;
      default: got = fpu::fma(fmt, a, b, c, rm, flags); break;
    }
    if (std::isnan(want)) {
      EXPECT_EQ(got, canonical_nan(fmt)) << "op " << op << " rm " << rm << " a " << std::hex << a << " b " << b;
      // The host's invalid flag for a NaN result matches, except for fma's
      // RISC-V rule (inf * 0 + qNaN is invalid).
      if (op != 5) {
        EXPECT_EQ(flags, want_flags) << "op " << op << " a " << std::hex << a << " b " << b;
      }
      continue;
    }
    ++checked;
    ASSERT_EQ(got, static_cast<std::uint64_t>(bits(want)))
        << "op " << op << " rm " << rm << std::hex << " a " << a << " b " << b << " c " << c;
    ASSERT_EQ(flags, want_flags) << "op " << op << " rm " << rm << std::hex << " a " << a << " b " << b << " c "
                                 << c;
  }
  EXPECT_GT(checked, 100000);
}

}  // namespace

TEST(Fpu, SingleAgreesWithTheHostInFourRoundingModes) { against_host<float, std::uint32_t>(Fmt::s); }
TEST(Fpu, DoubleAgreesWithTheHostInFourRoundingModes) { against_host<double, std::uint64_t>(Fmt::d); }

TEST(Fpu, ConversionsAgreeWithTheHost) {
  std::mt19937_64 rng(3);
  for (int i = 0; i < 100000; ++i) {
    const unsigned rm = static_cast<unsigned>(rng() % 4);
    const auto v = static_cast<std::int64_t>(rng() >> (rng() % 64));
    const bool neg = rng() & 1;
    const std::int64_t s = neg ? -v : v;
    std::fesetround(kHostMode[rm]);
    std::feclearexcept(FE_ALL_EXCEPT);
    volatile std::int64_t sv = s;
    volatile float f = static_cast<float>(sv);
    volatile double d = static_cast<double>(sv);
    const unsigned want = host_flags(std::fetestexcept(FE_ALL_EXCEPT));
    std::fesetround(FE_TONEAREST);
    unsigned flags = 0;
    EXPECT_EQ(from_int(Fmt::s, static_cast<std::uint64_t>(s), 64, true, rm, flags), bits(static_cast<float>(f)));
    EXPECT_EQ(from_int(Fmt::d, static_cast<std::uint64_t>(s), 64, true, rm, flags), bits(static_cast<double>(d)));
    EXPECT_EQ(flags & kNX, want & kNX) << s;
    // Back to integers: the host's rint in the same mode, where it fits.
    const double x = as_double(pick<double, std::uint64_t>(rng));
    if (!std::isfinite(x) || std::fabs(x) > 9e18) continue;
    std::fesetround(kHostMode[rm]);
    std::feclearexcept(FE_ALL_EXCEPT);
    volatile double xv = x;
    const double r = std::rint(xv);
    const bool inexact = std::fetestexcept(FE_INEXACT);
    std::fesetround(FE_TONEAREST);
    flags = 0;
    EXPECT_EQ(static_cast<std::int64_t>(to_int(Fmt::d, bits(x), 64, true, rm, flags)), static_cast<std::int64_t>(r))
        << x << " rm " << rm;
    EXPECT_EQ(flags, inexact ? kNX : 0u) << x;
    // Binary64 to binary32 rounds as the host does.
    std::fesetround(kHostMode[rm]);
    std::feclearexcept(FE_ALL_EXCEPT);
    const std::uint64_t y = pick<double, std::uint64_t>(rng);
    volatile double yv = as_double(y);
    volatile float yf = static_cast<float>(yv);
    const unsigned yflags = host_flags(std::fetestexcept(FE_ALL_EXCEPT));
    std::fesetround(FE_TONEAREST);
    flags = 0;
    const std::uint64_t got = convert(Fmt::s, Fmt::d, y, rm, flags);
    if (std::isnan(yf)) {
      EXPECT_EQ(got, kCanonicalNanS);
    } else {
      EXPECT_EQ(got, bits(static_cast<float>(yf))) << std::hex << y << " rm " << rm;
    }
    EXPECT_EQ(flags, yflags) << std::hex << y << " rm " << rm;
  }
}

TEST(Fpu, RoundToNearestTiesToMaxMagnitude) {
  unsigned flags = 0;
  // 1 + 2^-24 is halfway between 1 and 1 + 2^-23: RMM goes away from zero, RNE to even.
  const std::uint64_t one = bits(1.0f), tie = bits(0x1p-24f);
  EXPECT_EQ(add(Fmt::s, one, tie, kRmm, flags), bits(1.0f + 0x1p-23f));
  EXPECT_EQ(flags, kNX);
  EXPECT_EQ(add(Fmt::s, one, tie, kRne, flags), bits(1.0f));
  EXPECT_EQ(add(Fmt::s, one | 0x80000000u, tie | 0x80000000u, kRmm, flags), bits(-1.0f - 0x1p-23f));
  // Just below the tie, RMM rounds to nearest.
  EXPECT_EQ(add(Fmt::s, one, bits(0x1.fffffep-25f), kRmm, flags), bits(1.0f));
  // Doubles: 3 * (1 + 2^-52) = 3 + 3 * 2^-52, a tie at 2^-51 spacing.
  EXPECT_EQ(mul(Fmt::d, bits(3.0), bits(1.0 + 0x1p-52), kRmm, flags), bits(3.0 + 0x1p-50));
  EXPECT_EQ(mul(Fmt::d, bits(3.0), bits(1.0 + 0x1p-52), kRne, flags), bits(3.0 + 0x1p-50));
  EXPECT_EQ(mul(Fmt::d, bits(1.0 + 0x1p-52), bits(1.0 + 0x1p-1), kRmm, flags), bits(1.5 + 0x1p-51));
  EXPECT_EQ(mul(Fmt::d, bits(1.0 + 0x1p-52), bits(1.0 + 0x1p-1), kRne, flags), bits(1.5 + 0x1p-51));
  // 2.5 to integer: RMM 3, RNE 2; -2.5: -3 and -2.
  flags = 0;
  EXPECT_EQ(to_int(Fmt::d, bits(2.5), 64, true, kRmm, flags), 3u);
  EXPECT_EQ(to_int(Fmt::d, bits(2.5), 64, true, kRne, flags), 2u);
  EXPECT_EQ(static_cast<std::int64_t>(to_int(Fmt::d, bits(-2.5), 64, true, kRmm, flags)), -3);
  EXPECT_EQ(flags, kNX);
  // The smallest subnormal's half rounds up to it in RMM, to zero in RNE.
  flags = 0;
  EXPECT_EQ(mul(Fmt::s, bits(0x1p-149f), bits(0.5f), kRmm, flags), 1u);
  EXPECT_EQ(flags, kNX | kUF);
  EXPECT_EQ(mul(Fmt::s, bits(0x1p-149f), bits(0.5f), kRne, flags), 0u);
}

TEST(Fpu, NansAreCanonicalAndSignalOnlyWhereTheSpecSays) {
  unsigned flags = 0;
  const std::uint64_t snan = 0x7f800001u, qnan_payload = 0xffc12345u;
  EXPECT_EQ(add(Fmt::s, qnan_payload, bits(1.0f), kRne, flags), kCanonicalNanS);
  EXPECT_EQ(flags, 0u);
  EXPECT_EQ(add(Fmt::s, snan, bits(1.0f), kRne, flags), kCanonicalNanS);
  EXPECT_EQ(flags, kNV);
  // fma(inf, 0, qNaN) is invalid in RISC-V.
  flags = 0;
  EXPECT_EQ(fpu::fma(Fmt::d, bits(HUGE_VAL), bits(0.0), kCanonicalNanD, kRne, flags), kCanonicalNanD);
  EXPECT_EQ(flags, kNV);
  // fmin/fmax: a NaN gives the other operand; two give the canonical NaN; -0 < +0.
  flags = 0;
  EXPECT_EQ(fpu::min(Fmt::s, qnan_payload, bits(2.0f), flags), bits(2.0f));
  EXPECT_EQ(flags, 0u);
  EXPECT_EQ(fpu::max(Fmt::s, snan, bits(2.0f), flags), bits(2.0f));
  EXPECT_EQ(flags, kNV);
  EXPECT_EQ(fpu::min(Fmt::s, snan, qnan_payload, flags), kCanonicalNanS);
  EXPECT_EQ(fpu::min(Fmt::d, bits(0.0), bits(-0.0), flags), bits(-0.0));
  EXPECT_EQ(fpu::max(Fmt::d, bits(-0.0), bits(0.0), flags), bits(0.0));
  // feq is quiet, flt/fle signal.
  flags = 0;
  EXPECT_FALSE(eq(Fmt::s, qnan_payload, qnan_payload, flags));
  EXPECT_EQ(flags, 0u);
  EXPECT_TRUE(eq(Fmt::s, bits(0.0f), bits(-0.0f), flags));
  EXPECT_FALSE(lt(Fmt::s, bits(-0.0f), bits(0.0f), flags));
  EXPECT_TRUE(le(Fmt::s, bits(-0.0f), bits(0.0f), flags));
  EXPECT_EQ(flags, 0u);
  EXPECT_FALSE(lt(Fmt::s, qnan_payload, bits(1.0f), flags));
  EXPECT_EQ(flags, kNV);
  flags = 0;
  EXPECT_FALSE(eq(Fmt::d, 0x7ff0000000000001ull, bits(1.0), flags));
  EXPECT_EQ(flags, kNV);
  // Between formats: NaNs become the other format's canonical NaN.
  flags = 0;
  EXPECT_EQ(convert(Fmt::d, Fmt::s, qnan_payload, kRne, flags), kCanonicalNanD);
  EXPECT_EQ(flags, 0u);
  EXPECT_EQ(convert(Fmt::d, Fmt::s, snan, kRne, flags), kCanonicalNanD);
  EXPECT_EQ(flags, kNV);
  EXPECT_EQ(convert(Fmt::d, Fmt::s, 1, kRne, flags), bits(0x1p-149));  // subnormal single to double: exact
}

TEST(Fpu, ConversionsToIntegersSaturate) {
  unsigned flags = 0;
  EXPECT_EQ(to_int(Fmt::s, kCanonicalNanS, 32, true, kRne, flags), 0x7fffffffu);
  EXPECT_EQ(flags, kNV);
  flags = 0;
  EXPECT_EQ(to_int(Fmt::s, bits(-HUGE_VALF), 32, true, kRne, flags), 0x80000000u);
  EXPECT_EQ(to_int(Fmt::s, bits(3e9f), 32, true, kRne, flags), 0x7fffffffu);
  EXPECT_EQ(to_int(Fmt::s, bits(3e9f), 32, false, kRne, flags), 3000000000u);
  EXPECT_EQ(to_int(Fmt::d, kCanonicalNanD, 64, false, kRne, flags), ~0ull);
  EXPECT_EQ(to_int(Fmt::d, bits(-1.0), 64, false, kRne, flags), 0u);
  EXPECT_EQ(flags, kNV);
  flags = 0;
  // -0.4 to unsigned: rounds to 0, inexact, not invalid; -0.6 rounds to -1: invalid.
  EXPECT_EQ(to_int(Fmt::d, bits(-0.4), 32, false, kRne, flags), 0u);
  EXPECT_EQ(flags, kNX);
  flags = 0;
  EXPECT_EQ(to_int(Fmt::d, bits(-0.6), 32, false, kRne, flags), 0u);
  EXPECT_EQ(flags, kNV);
  flags = 0;
  EXPECT_EQ(to_int(Fmt::d, bits(-2147483648.0), 32, true, kRne, flags), 0x80000000u);
  EXPECT_EQ(to_int(Fmt::d, bits(-9223372036854775808.0), 64, true, kRne, flags), 0x8000000000000000ull);
  EXPECT_EQ(to_int(Fmt::d, bits(18446744073709549568.0), 64, false, kRne, flags), 18446744073709549568ull);
  EXPECT_EQ(flags, 0u);
  EXPECT_EQ(to_int(Fmt::d, bits(18446744073709551616.0), 64, false, kRne, flags), ~0ull);
  EXPECT_EQ(flags, kNV);
  // Unsigned 32-bit sources and the largest unsigned 64-bit value.
  flags = 0;
  EXPECT_EQ(from_int(Fmt::s, 0xffffffffu, 32, false, kRtz, flags), bits(4294967040.0f));
  EXPECT_EQ(from_int(Fmt::d, ~0ull, 64, false, kRne, flags), bits(18446744073709551616.0));
  EXPECT_EQ(from_int(Fmt::s, 0xffffffffu, 32, true, kRne, flags), bits(-1.0f));
}

TEST(Fpu, Classify) {
  EXPECT_EQ(classify(Fmt::s, bits(-HUGE_VALF)), 1u << 0);
  EXPECT_EQ(classify(Fmt::s, bits(-1.0f)), 1u << 1);
  EXPECT_EQ(classify(Fmt::s, 0x80000001u), 1u << 2);
  EXPECT_EQ(classify(Fmt::s, 0x80000000u), 1u << 3);
  EXPECT_EQ(classify(Fmt::d, 0), 1u << 4);
  EXPECT_EQ(classify(Fmt::d, 1), 1u << 5);
  EXPECT_EQ(classify(Fmt::d, bits(1.0)), 1u << 6);
  EXPECT_EQ(classify(Fmt::d, bits(HUGE_VAL)), 1u << 7);
  EXPECT_EQ(classify(Fmt::d, 0x7ff0000000000001ull), 1u << 8);
  EXPECT_EQ(classify(Fmt::d, kCanonicalNanD), 1u << 9);
}
