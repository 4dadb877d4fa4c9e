// Seeded test data shared by the tests.
#pragma once

#include <random>
#include <vector>

namespace tessera::testing {

// n floats uniform in [lo, hi), the same for the same seed.
inline std::vector<float> random_floats(std::size_t n, unsigned seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

}  // namespace tessera::testing
