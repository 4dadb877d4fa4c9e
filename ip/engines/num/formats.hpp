// Number formats of the Tessera tensor tile, bit-exact, one library for
// models, runtime and tests: FP32, FP16, BF16, OCP FP8 E4M3 and E5M2, INT8,
// INT32. Conversions from FP32 round to nearest even or stochastically
// (seeded), saturate or not, and treat NaN and infinity as the OCP 8-bit
// floating point specification (v1.0) says:
//   E4M3: no infinities; NaN is S.1111.111; the largest finite value is 448.
//         Non-saturating: overflow and infinity become NaN. Saturating: ±448.
//   E5M2: IEEE-like: S.11111.00 is infinity, S.11111.xx (xx != 0) NaN; the
//         largest finite value is 57344. Non-saturating: overflow becomes
//         infinity. Saturating: ±57344 (infinity too).
//   FP16, BF16: IEEE rules (overflow to infinity unless saturating).
// Block scaling (FP8 with per-block scales, FP32 or E8M0) for 1x32, 1x128
// and 128x128 blocks lives in block_scale.hpp.
#pragma once

#include <cstdint>
#include <string>

namespace tessera::num {

enum class Format : std::uint8_t { FP32, FP16, BF16, E4M3, E5M2, INT8, INT32 };
inline constexpr unsigned kFormats = 7;  // Format's values
const char* name(Format f);
unsigned bits(Format f);

enum class Rounding : std::uint8_t { nearest_even, stochastic };

// A small seeded generator for stochastic rounding (splitmix64), so a run
// is reproducible and the stream is the chip's, not the host library's.
struct Rng {
  std::uint64_t state = 0x9e3779b97f4a7c15ull;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0); }  // [0, 1)
};

struct Convert {
  Rounding rounding = Rounding::nearest_even;
  bool saturate = false;
  Rng* rng = nullptr;  // required for stochastic rounding
};

// The value of an encoding (NaN, ±infinity included), exactly.
double decode(Format f, std::uint32_t code);
// The encoding of `x` (an FP32 value widened, or any double).
std::uint32_t encode(Format f, double x, const Convert& c = {});
// Round trip through a format: what the chip would hold.
inline double quantize(Format f, double x, const Convert& c = {}) { return decode(f, encode(f, x, c)); }
// Largest finite value.
double max_finite(Format f);

}  // namespace tessera::num
