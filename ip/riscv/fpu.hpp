// IEEE 754 binary32/binary64 arithmetic as the RISC-V F and D extensions
// define it: the five rounding modes (RNE, RTZ, RDN, RUP, RMM), the five
// exception flags, tininess detected after rounding, canonical NaNs for
// every NaN result, minimumNumber/maximumNumber for fmin/fmax, and the
// saturating float-to-integer conversions.
//
// Values are raw bits: binary32 in the low 32 bits, binary64 in all 64 (NaN
// boxing is the hart's business). Each operation ORs its exception flags
// into `flags` (fflags' layout: NV 16, DZ 8, OF 4, UF 2, NX 1).
//
// How: an operation runs once on the host in a wider format (binary64 for
// binary32 operands, x87's 64-bit-significand extended format for binary64,
// binary128 for a binary64 fused multiply-add), with the host rounding
// toward zero. That result carries at least two more bits than the target
// and the host's inexact flag is the sticky bit, so rounding it once more,
// in software, in the instruction's mode, gives the correctly rounded
// result with its flags (tininess and overflow decided there too).
#pragma once

#include <cstdint>
#include <cstring>

namespace tessera::riscv::fpu {

enum Rm : unsigned { kRne = 0, kRtz = 1, kRdn = 2, kRup = 3, kRmm = 4 };
enum Flag : unsigned { kNX = 1, kUF = 2, kOF = 4, kDZ = 8, kNV = 16 };
enum class Fmt { s, d };

constexpr std::uint64_t kCanonicalNanS = 0x7fc00000u;
constexpr std::uint64_t kCanonicalNanD = 0x7ff8000000000000ull;
constexpr std::uint64_t canonical_nan(Fmt f) { return f == Fmt::s ? kCanonicalNanS : kCanonicalNanD; }

// Between host values and raw bits (binary32 in the low 32 bits).
inline std::uint64_t bits(float f) {
  std::uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}
inline std::uint64_t bits(double d) {
  std::uint64_t b;
  std::memcpy(&b, &d, 8);
  return b;
}
inline float as_float(std::uint64_t v) {
  const auto b = static_cast<std::uint32_t>(v);
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
inline double as_double(std::uint64_t v) {
  double d;
  std::memcpy(&d, &v, 8);
  return d;
}

std::uint64_t add(Fmt f, std::uint64_t a, std::uint64_t b, unsigned rm, unsigned& flags);
std::uint64_t sub(Fmt f, std::uint64_t a, std::uint64_t b, unsigned rm, unsigned& flags);
std::uint64_t mul(Fmt f, std::uint64_t a, std::uint64_t b, unsigned rm, unsigned& flags);
std::uint64_t div(Fmt f, std::uint64_t a, std::uint64_t b, unsigned rm, unsigned& flags);
std::uint64_t sqrt(Fmt f, std::uint64_t a, unsigned rm, unsigned& flags);
// a * b + c, rounded once. The negated forms (fmsub, fnmsub, fnmadd) flip
// the signs of their operands before calling it.
std::uint64_t fma(Fmt f, std::uint64_t a, std::uint64_t b, std::uint64_t c, unsigned rm, unsigned& flags);

// minimumNumber / maximumNumber: a NaN operand gives the other one, two
// give the canonical NaN, -0 < +0; NV for a signalling NaN.
std::uint64_t min(Fmt f, std::uint64_t a, std::uint64_t b, unsigned& flags);
std::uint64_t max(Fmt f, std::uint64_t a, std::uint64_t b, unsigned& flags);
// feq is quiet (NV only for a signalling NaN), flt and fle signal on any NaN.
bool eq(Fmt f, std::uint64_t a, std::uint64_t b, unsigned& flags);
bool lt(Fmt f, std::uint64_t a, std::uint64_t b, unsigned& flags);
bool le(Fmt f, std::uint64_t a, std::uint64_t b, unsigned& flags);
// fclass: one bit of ten (-inf, -normal, -subnormal, -0, +0, +subnormal,
// +normal, +inf, signalling NaN, quiet NaN).
unsigned classify(Fmt f, std::uint64_t a);

// To a `width`-bit (32 or 64) integer, signed or not, rounded in `rm`; out
// of range (and NaN) saturates with NV, as RISC-V specifies: NaN and +inf
// give the largest value, -inf the smallest. The result is the integer's
// bits (a 32-bit one zero-extended).
std::uint64_t to_int(Fmt f, std::uint64_t a, unsigned width, bool is_signed, unsigned rm, unsigned& flags);
// From a `width`-bit integer (its bits in v), signed or not.
std::uint64_t from_int(Fmt f, std::uint64_t v, unsigned width, bool is_signed, unsigned rm, unsigned& flags);
// Between the formats (binary64 to binary32 rounds; the other way is exact).
std::uint64_t convert(Fmt to, Fmt from, std::uint64_t a, unsigned rm, unsigned& flags);

}  // namespace tessera::riscv::fpu
