// HBM model speed: simulated 32-byte requests per host second on one
// pseudo-channel, streaming and random, detailed and fast mode, with the
// bandwidth each reached. Each case runs in its own process (SystemC
// elaborates once per process): `bench_hbm` runs them all and prints a
// table; `bench_hbm CASE` runs one.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <systemc>
#include <tlm_utils/simple_initiator_socket.h>

#include "common/payload.hpp"
#include "hbm/hbm_stack.hpp"

using namespace tessera;

namespace {

struct Case {
  const char* name;
  const char* mode;
  bool random;
  unsigned threads, count, bytes;
};
const Case kCases[] = {
    {"streaming, detailed", "detailed", false, 4, 2000, 4096},
    {"streaming, fast", "fast", false, 4, 20000, 4096},
    {"random 32 B, detailed", "detailed", true, 32, 20000, 32},
    {"random 32 B, fast", "fast", true, 32, 100000, 32},
};

struct Driver : sc_core::sc_module {
  tlm_utils::simple_initiator_socket<Driver> socket{"socket"}, csr{"csr"};
  const Case& c;
  std::uint64_t span;
  Driver(const sc_core::sc_module_name& n, const Case& cs, std::uint64_t sp) : sc_core::sc_module(n), c(cs), span(sp) {
    for (unsigned t = 0; t < c.threads; ++t) sc_core::sc_spawn([this, t] { run(t); });
  }
  void run(unsigned t) {
    std::mt19937_64 rng(t + 1);
    std::vector<std::uint8_t> buf(c.bytes);
    for (unsigned i = 0; i < c.count; ++i) {
      const std::uint64_t a = c.random ? (rng() % (span / c.bytes)) * c.bytes
                                       : ((std::uint64_t(i) * c.threads + t) * c.bytes) % span;
      tlm::tlm_generic_payload g;
      set_access(g, tlm::TLM_READ_COMMAND, a, buf.data(), c.bytes);
      sc_core::sc_time d;
      socket->b_transport(g, d);
      wait(d);
    }
  }
};

const bool kNoBanner = ::setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 0) == 0;

}  // namespace

int sc_main(int argc, char** argv) {
  if (argc < 2) {
    fmt::print("{:<24} {:>12} {:>10} {:>14} {:>11}\n", "case (one pseudo-channel)", "requests", "host s", "requests/s", "efficiency");
    std::fflush(stdout);
    for (unsigned i = 0; i < sizeof kCases / sizeof kCases[0]; ++i) {
      const std::string cmd = std::string(argv[0]) + " " + std::to_string(i);
      if (std::system(cmd.c_str()) != 0) return 1;
    }
    return 0;
  }
  const Case& c = kCases[std::atoi(argv[1])];
  hbm::HbmStack::Config cfg;
  cfg.t = hbm::Timing::load(std::string(TESSERA_PLATFORM_DIR) + "/hbm3-6400.json");
  cfg.mode = c.mode;
  cfg.org.channels = 1;
  cfg.org.pseudo_channels = 1;
  cfg.address_map = "O5 G2 C2 B2 C3 R15";
  cfg.size = hbm::AddressMap(cfg.address_map, cfg.org, cfg.t.burst_bytes(), false).capacity();
  hbm::HbmStack stack("hbm", cfg);
  Driver drv("drv", c, cfg.size);
  drv.socket.bind(stack.mem_target);
  drv.csr.bind(stack.csr_target());
  const auto t0 = std::chrono::steady_clock::now();
  sc_core::sc_start();
  const double host = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double requests = static_cast<double>(c.threads) * c.count * (c.bytes / 32);
  const double eff = requests * 32 / sc_core::sc_time_stamp().to_seconds() / cfg.t.peak_bytes_per_s();
  fmt::print("{:<24} {:>12.0f} {:>10.3f} {:>14.3g} {:>10.1f}%\n", c.name, requests, host, requests / host, 100 * eff);
  return 0;
}
