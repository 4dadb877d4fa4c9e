// See fpu.hpp for the method. Compiled with -frounding-math; the host
// operations sit between volatile accesses so that none moves across the
// changes of the host's rounding mode.
#include "riscv/fpu.hpp"

#include <cfenv>
#include <cmath>
#include <cstring>
#include <type_traits>

namespace tessera::riscv::fpu {
namespace {

struct Traits {
  unsigned mant;  // stored significand bits
  int bias;
  std::uint64_t sign_bit() const { return 1ull << (mant + (mant == 23 ? 8 : 11)); }
  std::uint64_t exp_mask() const { return (mant == 23 ? 0xffull : 0x7ffull); }
  std::uint64_t mant_mask() const { return (1ull << mant) - 1; }
  std::uint64_t inf(bool neg) const { return (neg ? sign_bit() : 0) | (exp_mask() << mant); }
  std::uint64_t max_finite(bool neg) const { return (neg ? sign_bit() : 0) | ((exp_mask() - 1) << mant) | mant_mask(); }
};
constexpr Traits kS{23, 127};
constexpr Traits kD{52, 1023};
const Traits& traits(Fmt f) { return f == Fmt::s ? kS : kD; }

enum class Kind { zero, finite, inf, qnan, snan };

// A value taken apart: finite nonzero ones are sig * 2^exp exactly.
struct Parts {
  Kind kind;
  bool neg;
  int exp = 0;
  std::uint64_t sig = 0;
};

Parts unpack(const Traits& t, std::uint64_t v) {
  Parts p{Kind::finite, (v & t.sign_bit()) != 0};
  const std::uint64_t e = (v >> t.mant) & t.exp_mask(), m = v & t.mant_mask();
  if (e == t.exp_mask()) {
    p.kind = m == 0 ? Kind::inf : ((m >> (t.mant - 1)) & 1) ? Kind::qnan : Kind::snan;
  } else if (e == 0) {
    if (m == 0) p.kind = Kind::zero;
    p.sig = m;
    p.exp = 1 - t.bias - static_cast<int>(t.mant);
  } else {
    p.sig = m | (1ull << t.mant);
    p.exp = static_cast<int>(e) - t.bias - static_cast<int>(t.mant);
  }
  return p;
}

bool is_nan(const Parts& p) { return p.kind == Kind::qnan || p.kind == Kind::snan; }

// Whether to round the kept bits up: `rem` are the dropped bits of a
// `field`-bit field (0..64), `sticky` says whether anything below them was
// nonzero.
bool round_up(unsigned rm, bool neg, std::uint64_t kept, std::uint64_t rem, unsigned field, bool sticky) {
  if (rem == 0 && !sticky) return false;  // exact
  // field == 0: the round bit is below `rem`, inside `sticky`: below half.
  const std::uint64_t half = field == 0 ? 0 : 1ull << (field - 1);
  const bool above = field != 0 && (rem > half || (rem == half && sticky));
  const bool tie = field != 0 && rem == half && !sticky;
  switch (rm) {
    case kRne: return above || (tie && (kept & 1));
    case kRmm: return above || tie;
    case kRdn: return neg;
    case kRup: return !neg;
    default: return false;  // kRtz
  }
}

// Splits sig (bit 63 set) at `shift` (0..64 and beyond) into kept and dropped bits.
void split(std::uint64_t sig, unsigned shift, std::uint64_t& kept, std::uint64_t& rem, unsigned& field, bool& sticky) {
  if (shift == 0) {
    kept = sig, rem = 0, field = 0;
  } else if (shift < 64) {
    kept = sig >> shift, rem = sig & ((1ull << shift) - 1), field = shift;
  } else if (shift == 64) {
    kept = 0, rem = sig, field = 64;
  } else {
    kept = 0, rem = 0, field = 64;
    sticky = true;  // all of it is below the round bit
  }
}

// Rounds (sig + a fraction that is nonzero when `sticky`) * 2^exp to the
// format: normal, subnormal, overflow to infinity or the largest finite
// value by the mode; tininess after rounding. sig != 0.
std::uint64_t round_pack(const Traits& t, bool neg, int exp, std::uint64_t sig, bool sticky, unsigned rm,
                         unsigned& flags) {
  const int lz = __builtin_clzll(sig);
  sig <<= lz;
  const int e = exp - lz + 63;  // exponent of the leading bit
  const unsigned p = t.mant + 1;
  const int emin = 1 - t.bias, emax = t.bias;
  const std::uint64_t sign = neg ? t.sign_bit() : 0;

  bool tiny = false;
  if (e < emin) {
    // Tininess after rounding: round to p bits with an unbounded exponent.
    std::uint64_t kept, rem;
    unsigned field;
    bool st = sticky;
    split(sig, 64 - p, kept, rem, field, st);
    const bool carry = round_up(rm, neg, kept, rem, field, st) && kept + 1 == (1ull << p);
    tiny = !(e == emin - 1 && carry);
  }
  const unsigned shift = e >= emin ? 64 - p : 64 - p + static_cast<unsigned>(emin - e);
  std::uint64_t kept, rem;
  unsigned field;
  bool st = sticky;
  split(sig, shift, kept, rem, field, st);
  const bool inexact = rem != 0 || st;
  if (round_up(rm, neg, kept, rem, field, st)) ++kept;
  if (inexact) flags |= kNX;
  if (tiny && inexact) flags |= kUF;
  if (e < emin) return sign | kept;  // subnormal, or the smallest normal after rounding up
  int re = e;
  if (kept == (1ull << p)) kept >>= 1, ++re;
  if (re > emax) {
    flags |= kOF | kNX;
    const bool to_max = rm == kRtz || (rm == kRdn && !neg) || (rm == kRup && neg);
    return to_max ? t.max_finite(neg) : t.inf(neg);
  }
  return sign | (static_cast<std::uint64_t>(re + t.bias) << t.mant) | (kept & t.mant_mask());
}

// ---- the host's wider formats ------------------------------------------------

// A wide result rounded toward zero, with whether it was inexact.
struct Wide {
  bool neg;
  Kind kind;  // zero, finite, inf or qnan (an invalid operation)
  int exp;
  std::uint64_t sig;
  bool sticky;
};

Wide from_double(double v) {
  std::uint64_t b;
  std::memcpy(&b, &v, 8);
  const Parts p = unpack(kD, b);
  return Wide{p.neg, p.kind == Kind::snan ? Kind::qnan : p.kind, p.exp, p.sig, false};
}

Wide from_long_double(long double v) {
  unsigned char raw[16] = {};
  std::memcpy(raw, &v, 10);
  std::uint64_t m;
  std::uint16_t se;
  std::memcpy(&m, raw, 8);
  std::memcpy(&se, raw + 8, 2);
  Wide w{(se & 0x8000) != 0, Kind::finite, 0, m, false};
  const unsigned e = se & 0x7fff;
  if (e == 0x7fff) w.kind = (m << 1) == 0 ? Kind::inf : Kind::qnan;
  else if (m == 0) w.kind = Kind::zero;
  else w.exp = (e == 0 ? 1 : static_cast<int>(e)) - 16383 - 63;
  return w;
}

Wide from_float128(__float128 v) {
  std::uint64_t lo, hi;
  std::memcpy(&lo, &v, 8);
  std::memcpy(&hi, reinterpret_cast<const char*>(&v) + 8, 8);
  Wide w{(hi >> 63) != 0, Kind::finite, 0, 0, false};
  const unsigned e = (hi >> 48) & 0x7fff;
  const std::uint64_t mhi = hi & 0xffffffffffffull;
  if (e == 0x7fff) {
    w.kind = (mhi | lo) == 0 ? Kind::inf : Kind::qnan;
    return w;
  }
  if (e == 0 && (mhi | lo) == 0) {
    w.kind = Kind::zero;
    return w;
  }
  // The 113-bit significand, top 64 bits kept, the rest sticky (never
  // subnormal here: the operands are binary64).
  const std::uint64_t top = ((mhi | (1ull << 48)) << 15) | (lo >> 49);
  w.sig = top;
  w.sticky = (lo & ((1ull << 49) - 1)) != 0;
  w.exp = static_cast<int>(e) - 16383 - 63;
  return w;
}

// Runs `op` with the host rounding toward zero (or down, to get the sign of
// an exact zero right in RDN) and collects the host's flags.
template <class F>
auto on_host(int mode, unsigned& host_flags, F op) {
  std::fesetround(mode);
  std::feclearexcept(FE_ALL_EXCEPT);
  auto r = op();
  const int raised = std::fetestexcept(FE_ALL_EXCEPT);
  std::fesetround(FE_TONEAREST);
  host_flags = 0;
  if (raised & FE_INVALID) host_flags |= kNV;
  if (raised & FE_DIVBYZERO) host_flags |= kDZ;
  if (raised & FE_INEXACT) host_flags |= kNX;
  return r;
}

enum class HostOp { add, mul, div, sqrt, fma };

template <class W>
W host(HostOp op, W a, W b, W c) {
  volatile W x = a, y = b, z = c;
  volatile W r;
  switch (op) {
    case HostOp::add: r = x + y; break;
    case HostOp::mul: r = x * y; break;
    case HostOp::div: r = x / y; break;
    case HostOp::sqrt:
      if constexpr (!std::is_same_v<W, __float128>) r = std::sqrt(x);  // binary128 serves only fma
      break;
    case HostOp::fma:
      if constexpr (sizeof(W) == sizeof(double)) r = std::fma(x, y, z);
      else r = x * y + z;  // binary128: the product of two binary64 values is exact
      break;
  }
  return r;
}

Wide run(Fmt f, HostOp op, std::uint64_t a, std::uint64_t b, std::uint64_t c, int mode, unsigned& hf) {
  if (f == Fmt::s) {
    const double x = as_float(a), y = as_float(b), z = as_float(c);
    Wide w = from_double(on_host(mode, hf, [&] { return host<double>(op, x, y, z); }));
    w.sticky = hf & kNX;
    return w;
  }
  if (op == HostOp::fma) {
    const __float128 x = as_double(a), y = as_double(b), z = as_double(c);
    Wide w = from_float128(on_host(mode, hf, [&] { return host<__float128>(op, x, y, z); }));
    w.sticky = w.sticky || (hf & kNX);
    return w;
  }
  const long double x = as_double(a), y = as_double(b), z = as_double(c);
  Wide w = from_long_double(on_host(mode, hf, [&] { return host<long double>(op, x, y, z); }));
  w.sticky = hf & kNX;
  return w;
}

// The common path of the arithmetic operations: NaN operands, then the host.
std::uint64_t arith(Fmt f, HostOp op, std::uint64_t a, std::uint64_t b, std::uint64_t c, unsigned rm,
                    unsigned& flags) {
  const Traits& t = traits(f);
  const unsigned n = op == HostOp::sqrt ? 1 : op == HostOp::fma ? 3 : 2;
  const Parts pa = unpack(t, a), pb = unpack(t, b), pc = unpack(t, c);
  const Parts* ps[3] = {&pa, &pb, &pc};
  bool nan = false;
  for (unsigned i = 0; i < n; ++i) {
    if (ps[i]->kind == Kind::snan) flags |= kNV;
    nan = nan || is_nan(*ps[i]);
  }
  if (op == HostOp::fma && ((pa.kind == Kind::inf && pb.kind == Kind::zero) ||
                            (pa.kind == Kind::zero && pb.kind == Kind::inf)))
    flags |= kNV;  // even with a quiet NaN addend (the RISC-V rule)
  if (nan) return canonical_nan(f);
  unsigned hf = 0;
  Wide w = run(f, op, a, b, c, FE_TOWARDZERO, hf);
  if (w.kind == Kind::zero && rm == kRdn && (op == HostOp::add || op == HostOp::fma))
    w = run(f, op, a, b, c, FE_DOWNWARD, hf);  // x + -x is -0 rounding down
  flags |= hf & (kNV | kDZ);
  switch (w.kind) {
    case Kind::qnan: case Kind::snan: return canonical_nan(f);
    case Kind::inf: return t.inf(w.neg);
    case Kind::zero: return w.neg ? t.sign_bit() : 0;
    default: return round_pack(t, w.neg, w.exp, w.sig, w.sticky, rm, flags);
  }
}

bool either_nan(Fmt f, std::uint64_t a, std::uint64_t b, bool signalling_any, unsigned& flags) {
  const Parts pa = unpack(traits(f), a), pb = unpack(traits(f), b);
  if (!is_nan(pa) && !is_nan(pb)) return false;
  if (signalling_any || pa.kind == Kind::snan || pb.kind == Kind::snan) flags |= kNV;
  return true;
}

// Total order on non-NaN values by their bits: -0 before +0.
bool less(Fmt f, std::uint64_t a, std::uint64_t b) {
  const Traits& t = traits(f);
  const bool na = a & t.sign_bit(), nb = b & t.sign_bit();
  const std::uint64_t ma = a & ~t.sign_bit(), mb = b & ~t.sign_bit();
  if (na != nb) return na;
  return na ? ma > mb : ma < mb;
}

std::uint64_t min_max(Fmt f, std::uint64_t a, std::uint64_t b, bool want_max, unsigned& flags) {
  const Traits& t = traits(f);
  const Parts pa = unpack(t, a), pb = unpack(t, b);
  if (pa.kind == Kind::snan || pb.kind == Kind::snan) flags |= kNV;
  if (is_nan(pa) && is_nan(pb)) return canonical_nan(f);
  if (is_nan(pa)) return b;
  if (is_nan(pb)) return a;
  return less(f, a, b) != want_max ? a : b;
}

}  // namespace

std::uint64_t add(Fmt f, std::uint64_t a, std::uint64_t b, unsigned rm, unsigned& flags) {
  return arith(f, HostOp::add, a, b, 0, rm, flags);
}
std::uint64_t sub(Fmt f, std::uint64_t a, std::uint64_t b, unsigned rm, unsigned& flags) {
  return arith(f, HostOp::add, a, b ^ traits(f).sign_bit(), 0, rm, flags);
}
std::uint64_t mul(Fmt f, std::uint64_t a, std::uint64_t b, unsigned rm, unsigned& flags) {
  return arith(f, HostOp::mul, a, b, 0, rm, flags);
}
std::uint64_t div(Fmt f, std::uint64_t a, std::uint64_t b, unsigned rm, unsigned& flags) {
  return arith(f, HostOp::div, a, b, 0, rm, flags);
}
std::uint64_t sqrt(Fmt f, std::uint64_t a, unsigned rm, unsigned& flags) {
  return arith(f, HostOp::sqrt, a, 0, 0, rm, flags);
}
std::uint64_t fma(Fmt f, std::uint64_t a, std::uint64_t b, std::uint64_t c, unsigned rm, unsigned& flags) {
  return arith(f, HostOp::fma, a, b, c, rm, flags);
}

std::uint64_t min(Fmt f, std::uint64_t a, std::uint64_t b, unsigned& flags) { return min_max(f, a, b, false, flags); }
std::uint64_t max(Fmt f, std::uint64_t a, std::uint64_t b, unsigned& flags) { return min_max(f, a, b, true, flags); }

bool eq(Fmt f, std::uint64_t a, std::uint64_t b, unsigned& flags) {
  if (either_nan(f, a, b, false, flags)) return false;
  const std::uint64_t mag = ~traits(f).sign_bit() & (f == Fmt::s ? 0xffffffffull : ~0ull);
  return a == b || ((a | b) & mag) == 0;  // +0 == -0
}
bool lt(Fmt f, std::uint64_t a, std::uint64_t b, unsigned& flags) {
  if (either_nan(f, a, b, true, flags)) return false;
  return !eq(f, a, b, flags) && less(f, a, b);
}
bool le(Fmt f, std::uint64_t a, std::uint64_t b, unsigned& flags) {
  if (either_nan(f, a, b, true, flags)) return false;
  return eq(f, a, b, flags) || less(f, a, b);
}

unsigned classify(Fmt f, std::uint64_t a) {
  const Traits& t = traits(f);
  const Parts p = unpack(t, a);
  const bool subnormal = p.kind == Kind::finite && ((a >> t.mant) & t.exp_mask()) == 0;
  switch (p.kind) {
    case Kind::inf: return p.neg ? 1u << 0 : 1u << 7;
    case Kind::zero: return p.neg ? 1u << 3 : 1u << 4;
    case Kind::snan: return 1u << 8;
    case Kind::qnan: return 1u << 9;
    default: return subnormal ? (p.neg ? 1u << 2 : 1u << 5) : (p.neg ? 1u << 1 : 1u << 6);
  }
}

std::uint64_t to_int(Fmt f, std::uint64_t a, unsigned width, bool is_signed, unsigned rm, unsigned& flags) {
  const Parts p = unpack(traits(f), a);
  const std::uint64_t umax = width == 64 ? ~0ull : (1ull << width) - 1;
  const std::uint64_t smax = umax >> 1, smin = (smax + 1) & umax;  // smin: the bits of the most negative
  auto saturate = [&](bool neg) {
    flags |= kNV;
    if (is_signed) return neg ? smin : smax;
    return neg ? 0 : umax;
  };
  if (is_nan(p)) return saturate(false);
  if (p.kind == Kind::inf) return saturate(p.neg);
  if (p.kind == Kind::zero) return 0;
  // The magnitude rounded to an integer, and whether it fits.
  std::uint64_t mag;
  bool inexact = false;
  if (p.exp >= 0) {
    if (p.exp >= 64 || (p.exp > 0 && (p.sig >> (64 - p.exp)) != 0)) return saturate(p.neg);
    mag = p.sig << p.exp;
  } else {
    const unsigned shift = static_cast<unsigned>(-p.exp);
    std::uint64_t kept, rem;
    bool sticky = false;
    if (shift >= 64) {
      kept = 0, rem = 0, sticky = true;  // |value| < 2^-11: below half
      if (shift == 64) rem = p.sig, sticky = false;
    } else {
      kept = p.sig >> shift, rem = p.sig & ((1ull << shift) - 1);
    }
    inexact = rem != 0 || sticky;
    mag = kept + (round_up(rm, p.neg, kept, rem, shift >= 64 ? 64 : shift, sticky) ? 1 : 0);
  }
  if (p.neg) {
    if (mag == 0) {
      if (inexact) flags |= kNX;
      return 0;
    }
    if (!is_signed || mag > smax + 1) return saturate(true);
    if (inexact) flags |= kNX;
    return (~mag + 1) & umax;
  }
  if (mag > (is_signed ? smax : umax)) return saturate(false);
  if (inexact) flags |= kNX;
  return mag;
}

std::uint64_t from_int(Fmt f, std::uint64_t v, unsigned width, bool is_signed, unsigned rm, unsigned& flags) {
  if (width == 32) v = is_signed ? static_cast<std::uint64_t>(static_cast<std::int32_t>(v)) : (v & 0xffffffffull);
  const bool neg = is_signed && static_cast<std::int64_t>(v) < 0;
  const std::uint64_t mag = neg ? ~v + 1 : v;
  if (mag == 0) return 0;
  return round_pack(traits(f), neg, 0, mag, false, rm, flags);
}

std::uint64_t convert(Fmt to, Fmt from, std::uint64_t a, unsigned rm, unsigned& flags) {
  const Traits& t = traits(to);
  const Parts p = unpack(traits(from), a);
  switch (p.kind) {
    case Kind::snan: flags |= kNV; return canonical_nan(to);
    case Kind::qnan: return canonical_nan(to);
    case Kind::inf: return t.inf(p.neg);
    case Kind::zero: return p.neg ? t.sign_bit() : 0;
    default: return round_pack(t, p.neg, p.exp, p.sig, false, rm, flags);
  }
}

}  // namespace tessera::riscv::fpu
