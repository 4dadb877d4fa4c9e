// The host side of a kernel of your own: it boots the T1's command
// processor through the runtime, puts two vectors in HBM, loads the vadd
// kernel onto every tile, launches it on each with its slice, reads the
// sum back and checks every element. Exit code 0 when all match.
#include <cstdio>
#include <vector>

#include "tessera/runtime.hpp"

using tessera::rt::Device;

int main(int argc, char** argv) {
  const std::uint32_t n = 1u << 16;  // elements in all
  Device dev;                        // the default T1 and its command processor
  const unsigned tiles = dev.tiles();
  std::vector<float> x(n), y(n), z(n);
  for (std::uint32_t i = 0; i < n; ++i) x[i] = 0.5f * static_cast<float>(i), y[i] = 1.0f / static_cast<float>(i + 1);
  const auto dx = dev.alloc(4ull * n), dy = dev.alloc(4ull * n, 1), dz = dev.alloc(4ull * n, 2);
  dev.write(dx, x.data(), 4ull * n);
  dev.write(dy, y.data(), 4ull * n);

  const auto k = dev.load_kernel(argc > 1 ? argv[1] : VADD_ELF, (1u << tiles) - 1);
  const double t0 = dev.simulated_seconds();
  std::vector<tessera::rt::Event> events;
  const std::uint32_t slice = n / tiles;
  for (unsigned t = 0; t < tiles; ++t) {
    const std::uint64_t off = 4ull * slice * t;
    auto word = [](std::uint64_t a, int hi) { return static_cast<std::uint32_t>(hi ? a >> 32 : a); };
    events.push_back(dev.launch(k,
                                {word(dx.address + off, 0), word(dx.address + off, 1), word(dy.address + off, 0),
                                 word(dy.address + off, 1), word(dz.address + off, 0), word(dz.address + off, 1), slice},
                                1u << t));
  }
  for (auto e : events) dev.wait(e);
  const double us = (dev.simulated_seconds() - t0) * 1e6;
  dev.read(dz, z.data(), 4ull * n);

  unsigned bad = 0;
  for (std::uint32_t i = 0; i < n; ++i) bad += z[i] != x[i] + y[i];
  std::printf("vadd: %u elements on %u tiles in %.1f us of simulated time (%.1f GB/s moved), %u mismatches\n", n,
              tiles, us, 12.0 * n / (us * 1e3), bad);
  return bad ? 1 : 0;
}
