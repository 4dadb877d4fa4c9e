// HBM model speed: simulated 32-byte requests per host second on one
// pseudo-channel, streaming and random, detailed and fast mode, driven by
// the traffic generator IP, with the bandwidth and the mean latency each reached. Each case runs in its own process (SystemC
// elaborates once per process): `bench_hbm` runs them all and prints a
// table; `bench_hbm CASE` runs one.
//   bench_hbm [--platform FILE [--instance hbm0]] [--set KEY=VALUE]... [--traffic KEY=VALUE]... [CASE]
// takes every parameter of the hbm type (timing, organisation, address map,
// controller, mode; tessera-vp --list-types) from a platform file's instance
// or one by one (--set), and the traffic generator's (pattern,
// request_bytes, count, outstanding, read_percent, ...) with --traffic; the
// cases set mode and traffic first, so --set mode=... and --traffic ...
// override them. Without --platform: one pseudo-channel of HBM3-6400. The
// fast cases drive the stack from one thread (traffic generator driver
// one_thread), the detailed ones with a thread per stream.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <systemc>
#include <tlm_utils/simple_initiator_socket.h>

#include "hbm/hbm.hpp"
#include "model_params.hpp"
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
  std::vector<std::string> args(argv + 1, argv + argc);
  tessera::bench::ModelParams hp, tp;
  if (!hp.parse(args, "hbm0") || !tp.parse(args, "tgen0", "--traffic")) return 2;
  const unsigned cases = sizeof kCases / sizeof kCases[0];
  if (args.empty()) {
    fmt::print("{:<24} {:>12} {:>10} {:>14} {:>11} {:>11}\n", "case (one pseudo-channel)", "requests", "host s", "requests/s", "efficiency",
               "latency ns");
    std::fflush(stdout);
    std::string rest;
    for (int i = 1; i < argc; ++i) rest += std::string(" '") + argv[i] + "'";
    for (unsigned i = 0; i < cases; ++i) {
      const std::string cmd = std::string(argv[0]) + rest + " " + std::to_string(i);
      if (std::system(cmd.c_str()) != 0) return 1;
    }
    return 0;
  }
  const unsigned which = static_cast<unsigned>(std::atoi(args[0].c_str()));
  if (args.size() != 1 || which >= cases || args[0].find_first_not_of("0123456789") != std::string::npos) {
    std::fprintf(stderr, "bench_hbm: expected a case number below %u, not %s\n", cases, args[0].c_str());
    return 2;
  }
  const Case& c = kCases[which];
  // The case's mode, then the platform file's or the command line's parameters.
  hbm::Hbm::Config cfg;
  cfg.mode = c.mode;
  nlohmann::json& raw = hp.raw;
  if (hp.where == "(command line)") {
    cfg.timing = std::string(TESSERA_PLATFORM_DIR) + "/hbm3-6400.json";
    cfg.org.channels = 1;
    cfg.org.pseudo_channels = 1;
    cfg.address_map = "O5 G2 C2 B2 C3 R15";
  }
  if (!raw.contains("mode")) raw["mode"] = c.mode;
  if (hp.size == 0) {  // no platform file's size: the organisation's capacity
    hbm::Hbm::Config probe = cfg;
    tessera::Params p(hp.where, hp.instance, raw);
    try {
      probe.visit(p);
      hp.size = hbm::AddressMap(probe.address_map, probe.org, probe.t.burst_bytes(), probe.xor_hash).capacity();
    } catch (const std::exception&) {
      // configure() below says what is wrong.
    }
  }
  if (!hp.configure(cfg)) return 2;
  hbm::Hbm stack("hbm", cfg);
  TrafficGen::Config g;
  g.pattern = c.random ? "random" : "sequential";
  g.size = cfg.size;
  g.request_bytes = c.bytes;
  g.count = c.threads * c.count;
  g.outstanding = c.threads;
  g.autostart = true;
  // The fast mode answers at once: one thread drives every stream, in time
  // order, as loosely-timed initiators drive such models (--traffic
  // driver=threads for a thread per stream); the detailed mode waits, so
  // it needs a thread per stream.
  g.driver = cfg.mode == "fast" ? "one_thread" : "threads";
  tp.raw["autostart"] = true;
  if (!tp.configure(g)) return 2;
  TrafficGen tgen("tgen", g);
  tgen.bus_initiator.bind(stack.mem_target);
  CsrPort hbm_csr("hbm_csr"), tgen_csr("tgen_csr");
  hbm_csr.socket.bind(stack.csr_target());
  tgen_csr.socket.bind(tgen.csr_target);
  const auto t0 = std::chrono::steady_clock::now();
  sc_core::sc_start();
  const double host = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double requests = static_cast<double>(tgen.requests_done()) * std::max(1u, g.request_bytes / cfg.t.burst_bytes());
  const double eff = tgen.bandwidth() / (cfg.t.peak_bytes_per_s() * cfg.org.pcs());
  nlohmann::ordered_json st;
  tgen.report_stats(st);
  fmt::print("{:<24} {:>12.0f} {:>10.3f} {:>14.3g} {:>10.1f}% {:>11.1f}\n", c.name, requests, host, requests / host, 100 * eff,
             st["latency_avg_ns"].get<double>());
  return 0;
}
