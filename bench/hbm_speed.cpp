// HBM model speed: simulated 32-byte requests per host second on one
// pseudo-channel, streaming and random, detailed and fast mode, driven by
// the traffic generator IP, with the bandwidth each reached. Each case runs in its own process (SystemC
// elaborates once per process): `bench_hbm` runs them all and prints a
// table; `bench_hbm CASE` runs one.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <systemc>
#include <tlm_utils/simple_initiator_socket.h>

#include "hbm/hbm.hpp"
#include "traffic_gen/traffic_gen.hpp"

using namespace tessera;
using tessera::traffic_gen::TrafficGen;

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

// The traffic generator drives the stack; its CSR socket needs a binding.
struct CsrPort : sc_core::sc_module {
  tlm_utils::simple_initiator_socket<CsrPort> socket{"socket"};
  explicit CsrPort(const sc_core::sc_module_name& n) : sc_core::sc_module(n) {}
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
  hbm::Hbm::Config cfg;
  cfg.t = hbm::Timing::load(std::string(TESSERA_PLATFORM_DIR) + "/hbm3-6400.json");
  cfg.mode = c.mode;
  cfg.org.channels = 1;
  cfg.org.pseudo_channels = 1;
  cfg.address_map = "O5 G2 C2 B2 C3 R15";
  cfg.size = hbm::AddressMap(cfg.address_map, cfg.org, cfg.t.burst_bytes(), false).capacity();
  hbm::Hbm stack("hbm", cfg);
  TrafficGen::Config g;
  g.pattern = c.random ? "random" : "sequential";
  g.size = cfg.size;
  g.request_bytes = c.bytes;
  g.count = c.threads * c.count;
  g.outstanding = c.threads;
  g.autostart = true;
  TrafficGen tgen("tgen", g);
  tgen.bus_initiator.bind(stack.mem_target);
  CsrPort hbm_csr("hbm_csr"), tgen_csr("tgen_csr");
  hbm_csr.socket.bind(stack.csr_target());
  tgen_csr.socket.bind(tgen.csr_target);
  const auto t0 = std::chrono::steady_clock::now();
  sc_core::sc_start();
  const double host = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double requests = static_cast<double>(c.threads) * c.count * (c.bytes / 32);
  const double eff = tgen.bandwidth() / cfg.t.peak_bytes_per_s();
  fmt::print("{:<24} {:>12.0f} {:>10.3f} {:>14.3g} {:>10.1f}%\n", c.name, requests, host, requests / host, 100 * eff);
  return 0;
}
