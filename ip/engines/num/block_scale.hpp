// Block-scaled FP8: a matrix is cut into blocks (1x32, 1x128 activation
// groups, 128x128 weight blocks, or any size), each block gets one scale so
// that its largest magnitude maps to the format's largest finite value,
// and every element is stored as FP8 of (value / scale), saturating.
// Scales are FP32, or E8M0 (a power of two, stored as its biased exponent,
// rounded up so nothing overflows).
#pragma once

#include <cstdint>
#include <vector>

#include "engines/num/formats.hpp"

namespace tessera::num {

enum class ScaleFormat : std::uint8_t { FP32, E8M0 };

struct BlockQuantized {
  Format format = Format::E4M3;
  ScaleFormat scale_format = ScaleFormat::FP32;
  unsigned rows = 0, cols = 0, block_rows = 1, block_cols = 32;
  std::vector<std::uint8_t> codes;  // rows x cols, row-major
  std::vector<float> scales;        // one per block, blocks row-major
  unsigned blocks_per_row() const { return (cols + block_cols - 1) / block_cols; }
  float scale_of(unsigned r, unsigned c) const { return scales[(r / block_rows) * blocks_per_row() + c / block_cols]; }
  double value(unsigned r, unsigned c) const { return decode(format, codes[r * cols + c]) * scale_of(r, c); }
};

BlockQuantized block_quantize(const float* x, unsigned rows, unsigned cols, Format f, ScaleFormat sf,
                              unsigned block_rows, unsigned block_cols, const Convert& c = {});

// E8M0: an exponent with bias 127 (255 is NaN).
std::uint8_t e8m0_encode(float power_of_two);
float e8m0_decode(std::uint8_t code);

}  // namespace tessera::num
