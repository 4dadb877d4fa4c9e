// Host references for the communication engine's reductions: the same
// elements added in the same order with the same rounding, so results can
// be compared bit for bit. Buffers are raw bytes of the element type.
//
// Ring (reduce-scatter, and all-reduce as reduce-scatter then all-gather),
// N chips, chunk c (elements [c * ceil(n / N), ...)): the partial sum starts
// at chip c + 1, and chips c + 2, ..., c + N - 1 and finally c add their
// own values in turn: ((v[c+1] + v[c+2]) + ...) + v[c].
// Tree (binomial, to chip 0): at stage s, chip k with k mod 2^(s+1) == 0
// adds what chip k + 2^s holds: acc[k] = acc[k] + acc[k + 2^s].
// Every addition is in FP32, rounded to the element type (nearest even;
// E4M3 saturates).
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "engines/num/formats.hpp"
#include "c2c/comm.hpp"

namespace tessera::c2c::reference {

inline void add(CommType t, std::uint8_t* acc, const std::uint8_t* v, std::uint64_t elements) {
  const unsigned es = element_bytes(t);
  for (std::uint64_t i = 0; i < elements; ++i) {
    if (t == CommType::fp32) {
      float a, b;
      std::memcpy(&a, acc + i * 4, 4);
      std::memcpy(&b, v + i * 4, 4);
      a += b;
      std::memcpy(acc + i * 4, &a, 4);
      continue;
    }
    const num::Format f = t == CommType::bf16 ? num::Format::BF16 : num::Format::E4M3;
    std::uint32_t a = 0, b = 0;
    std::memcpy(&a, acc + i * es, es);
    std::memcpy(&b, v + i * es, es);
    num::Convert cv;
    cv.saturate = t == CommType::e4m3;
    const std::uint32_t r =
        num::encode(f, static_cast<float>(num::decode(f, a)) + static_cast<float>(num::decode(f, b)), cv);
    std::memcpy(acc + i * es, &r, es);
  }
}

// inputs[k]: chip k's n elements. The all-reduce result (every chip's).
inline std::vector<std::uint8_t> ring_all_reduce(CommType t, const std::vector<std::vector<std::uint8_t>>& inputs,
                                                 std::uint64_t n) {
  const unsigned N = static_cast<unsigned>(inputs.size()), es = element_bytes(t);
  const std::uint64_t per = (n + N - 1) / N;
  std::vector<std::uint8_t> out(n * es);
  for (unsigned c = 0; c < N; ++c) {
    const std::uint64_t lo = std::min(n, c * per), hi = std::min(n, (c + 1) * per);
    if (hi == lo) continue;
    std::vector<std::uint8_t> acc(inputs[(c + 1) % N].begin() + lo * es, inputs[(c + 1) % N].begin() + hi * es);
    for (unsigned j = 2; j <= N; ++j) add(t, acc.data(), inputs[(c + j) % N].data() + lo * es, hi - lo);
    std::memcpy(out.data() + lo * es, acc.data(), acc.size());
  }
  return out;
}

inline std::vector<std::uint8_t> tree_all_reduce(CommType t, std::vector<std::vector<std::uint8_t>> acc, std::uint64_t n) {
  const unsigned N = static_cast<unsigned>(acc.size());
  for (unsigned bit = 1; bit < N; bit *= 2)
    for (unsigned k = 0; k + bit < N; k += 2 * bit) add(t, acc[k].data(), acc[k + bit].data(), n);
  return acc[0];
}

}  // namespace tessera::c2c::reference
