#include "engines/num/block_scale.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tessera::num {

std::uint8_t e8m0_encode(float p) { return static_cast<std::uint8_t>(std::ilogb(p) + 127); }

float e8m0_decode(std::uint8_t code) {
  return code == 255 ? std::numeric_limits<float>::quiet_NaN() : std::ldexp(1.0f, static_cast<int>(code) - 127);
}

BlockQuantized block_quantize(const float* x, unsigned rows, unsigned cols, Format f, ScaleFormat sf,
                              unsigned block_rows, unsigned block_cols, const Convert& conv) {
  BlockQuantized q;
  q.format = f;
  q.scale_format = sf;
  q.rows = rows;
  q.cols = cols;
  q.block_rows = block_rows;
  q.block_cols = block_cols;
  q.codes.assign(static_cast<std::size_t>(rows) * cols, 0);
  const unsigned brs = (rows + block_rows - 1) / block_rows, bcs = q.blocks_per_row();
  q.scales.assign(static_cast<std::size_t>(brs) * bcs, 1.0f);
  Convert sat = conv;
  sat.saturate = true;  // a scaled block never overflows; rounding may touch the edge
  for (unsigned br = 0; br < brs; ++br)
    for (unsigned bc = 0; bc < bcs; ++bc) {
      const unsigned r0 = br * block_rows, r1 = std::min(rows, r0 + block_rows);
      const unsigned c0 = bc * block_cols, c1 = std::min(cols, c0 + block_cols);
      float amax = 0;
      for (unsigned r = r0; r < r1; ++r)
        for (unsigned c = c0; c < c1; ++c) amax = std::max(amax, std::fabs(x[r * cols + c]));
      float scale = amax > 0 ? static_cast<float>(amax / max_finite(f)) : 1.0f;
      if (sf == ScaleFormat::E8M0) scale = e8m0_decode(static_cast<std::uint8_t>(
                                       std::clamp(static_cast<int>(std::ceil(std::log2(scale))) + 127, 0, 254)));
      q.scales[br * bcs + bc] = scale;
      for (unsigned r = r0; r < r1; ++r)
        for (unsigned c = c0; c < c1; ++c)
          q.codes[r * cols + c] =
              static_cast<std::uint8_t>(encode(f, static_cast<double>(x[r * cols + c]) / scale, sat));
    }
  return q;
}

}  // namespace tessera::num
