// Tensor tile speed: host wall time to simulate GEMMs on one tile (BF16
// inputs, FP32 accumulation, bit-exact), as simulated GFLOP per host
// second, next to a plain host float GEMM in the same process, and their
// ratio, each the best of five runs. Usage: bench_tile
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <systemc>
#include <vector>

#include "common/testing/initiator.hpp"
#include "engines/tensor/tensor_core.hpp"

using namespace tessera;

namespace {
const bool kNoBanner = ::setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 0) == 0;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The host baseline: a plain float GEMM, i-k-j order with a row accumulator
// so the inner loop streams and vectorises.
double host_gemm(const std::vector<float>& a, const std::vector<float>& b, std::vector<float>& c, unsigned m,
                 unsigned n, unsigned k) {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<float> row(n);
  for (unsigned i = 0; i < m; ++i) {
    std::fill(row.begin(), row.end(), 0.0f);
    for (unsigned p = 0; p < k; ++p) {
      const float x = a[i * k + p];
      const float* bp = b.data() + static_cast<std::size_t>(p) * n;
      for (unsigned j = 0; j < n; ++j) row[j] += x * bp[j];
    }
    std::copy(row.begin(), row.end(), c.begin() + static_cast<std::ptrdiff_t>(i) * n);
  }
  return seconds_since(t0);
}
}  // namespace

constexpr unsigned kRuns = 5;

int sc_main(int, char**) {
  const unsigned sizes[] = {128, 256, 384};
  std::vector<std::unique_ptr<scratchpad::Scratchpad>> spms;
  std::vector<std::unique_ptr<tensor::TensorCore>> cores;
  std::vector<std::unique_ptr<testing::TestInitiator>> ports;  // the scratchpads' NoC side, idle here
  for (unsigned s : sizes) {
    spms.push_back(std::make_unique<scratchpad::Scratchpad>(("spm" + std::to_string(s)).c_str(), scratchpad::Scratchpad::Config{}));
    ports.push_back(std::make_unique<testing::TestInitiator>(("noc" + std::to_string(s)).c_str()));
    ports.back()->socket.bind(spms.back()->mem_target);
    cores.push_back(std::make_unique<tensor::TensorCore>(("tc" + std::to_string(s)).c_str(), *spms.back(),
                                                         tensor::ArrayConfig{}));
  }
  // Warm-up: the first command builds the BF16 decode table.
  {
    tensor::GemmCommand w;
    w.shape = {16, 16, 16, num::Format::BF16};
    w.c = 0x1000;
    cores[0]->submit(w);
    sc_core::sc_start(sc_core::SC_ZERO_TIME);
    while (cores[0]->busy()) sc_core::sc_start(sc_core::sc_time(1, sc_core::SC_US));
  }
  std::printf("%-10s %14s %14s %16s %8s\n", "shape", "sim GFLOP/s", "host GFLOP/s", "simulated us", "ratio");
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1, 1);
  for (std::size_t e = 0; e < cores.size(); ++e) {
    const unsigned s = sizes[e];
    std::vector<float> a(s * s), b(s * s), c(s * s);
    for (auto& x : a) x = static_cast<float>(num::quantize(num::Format::BF16, u(rng)));
    for (auto& x : b) x = static_cast<float>(num::quantize(num::Format::BF16, u(rng)));
    std::uint8_t* mem = spms[e]->data();
    for (unsigned i = 0; i < s * s; ++i) {
      const auto ca = static_cast<std::uint16_t>(num::encode(num::Format::BF16, a[i]));
      const auto cb = static_cast<std::uint16_t>(num::encode(num::Format::BF16, b[i]));
      std::memcpy(mem + 2 * i, &ca, 2);
      std::memcpy(mem + 2 * (s * s) + 2 * i, &cb, 2);
    }
    tensor::GemmCommand cmd;
    cmd.shape = {s, s, s, num::Format::BF16};
    cmd.a = 0;
    cmd.b = 2ull * s * s;
    cmd.c = 4ull * s * s;
    // Best of kRuns for the model and for the host baseline alike.
    double sim_host = 1e30, host = 1e30, simulated_us = 0;
    for (unsigned run = 0; run < kRuns; ++run) {
      const auto t0 = std::chrono::steady_clock::now();
      const std::uint64_t busy0 = cores[e]->stats().busy_cycles;
      cores[e]->submit(cmd);
      sc_core::sc_start(sc_core::SC_ZERO_TIME);
      while (cores[e]->busy()) sc_core::sc_start(sc_core::sc_time(1, sc_core::SC_US));
      sim_host = std::min(sim_host, seconds_since(t0));
      simulated_us = static_cast<double>(cores[e]->stats().busy_cycles - busy0) / 1.5e3;  // at 1.5 GHz
      host = std::min(host, host_gemm(a, b, c, s, s, s));
    }
    if (!cores[e]->error().empty()) {
      std::fprintf(stderr, "bench_tile: %s\n", cores[e]->error().c_str());
      return 1;
    }
    const double flop = 2.0 * s * s * s;
    // Keep the baseline's result alive and check the model agrees with it.
    float worst = 0;
    for (unsigned i = 0; i < s * s; ++i) {
      float got;
      std::memcpy(&got, mem + cmd.c + 4 * i, 4);
      worst = std::max(worst, std::fabs(got - c[i]));
    }
    std::printf("%-10s %14.3f %14.3f %16.2f %7.1f%%   (max |model - host| %.1e)\n",
                (std::to_string(s) + "^3").c_str(), flop / sim_host / 1e9, flop / host / 1e9, simulated_us,
                100.0 * host / sim_host, static_cast<double>(worst));
  }
  return 0;
}
