// Co-simulated cycles per host second of the RTL blocks (issue 9): the
// systolic array tile (8 x 8) streaming random INT8 and E4M3 tiles through
// its transactor, and the link layer sending FLITs looped back, each
// without and with FST tracing. Each measurement runs in
// its own process (SystemC elaborates once). Usage: bench_cosim
#define SC_INCLUDE_DYNAMIC_PROCESSES
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <systemc>

#include "rtl/link_rtl.hpp"
#include "rtl/systolic_rtl.hpp"

using tessera::rtl::LinkRtl;
using tessera::rtl::SystolicRtl;

namespace {

int measure_link(bool fst) {
  LinkRtl link("link", sc_core::sc_time(1, sc_core::SC_NS), 8, fst ? "/tmp/bench_cosim_link.fst" : "");
  double seconds = 0;
  std::uint64_t cycles = 0;
  sc_core::sc_spawn([&] {
    std::mt19937_64 rng(1);
    std::vector<LinkRtl::Flit> flits(3000);
    for (auto& f : flits) {
      f.payload.resize(244);
      for (auto& b : f.payload) b = static_cast<std::uint8_t>(rng());
    }
    const auto t0 = std::chrono::steady_clock::now();
    cycles = link.send(flits, {}).cycles;
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    sc_core::sc_stop();
  });
  sc_core::sc_start();
  std::printf("%llu %.6f\n", static_cast<unsigned long long>(cycles), seconds);
  if (fst) std::remove("/tmp/bench_cosim_link.fst");
  return 0;
}

int measure(bool fst) {
  SystolicRtl array("array", sc_core::sc_time(1.0 / 1.5, sc_core::SC_NS), fst ? "/tmp/bench_cosim.fst" : "");
  double seconds = 0;
  std::uint64_t cycles = 0;
  sc_core::sc_spawn([&] {
    std::mt19937_64 rng(1);
    const auto t0 = std::chrono::steady_clock::now();
    for (unsigned i = 0; i < 2000; ++i) {
      SystolicRtl::Tile t;
      t.mode = i % 2 ? SystolicRtl::Mode::e4m3 : SystolicRtl::Mode::int8;
      t.m = 64;
      t.weights.resize(64);
      t.a.resize(64 * 8);
      t.c_in.assign(64 * 8, 0);
      for (auto& w : t.weights) w = static_cast<std::uint8_t>(rng() & 0x77);
      for (auto& a : t.a) a = static_cast<std::uint8_t>(rng() & 0x77);
      cycles += array.run(t).cycles;
    }
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    sc_core::sc_stop();
  });
  sc_core::sc_start();
  std::printf("%llu %.6f\n", static_cast<unsigned long long>(cycles), seconds);
  if (fst) std::remove("/tmp/bench_cosim.fst");
  return 0;
}

bool child(const std::string& self, const std::string& what, double& rate) {
  std::FILE* p = popen(("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE=1 " + self + " " + what).c_str(), "r");
  unsigned long long cycles = 0;
  double seconds = 0;
  bool ok = false;
  char line[256];
  while (p && std::fgets(line, sizeof line, p)) ok |= std::sscanf(line, "%llu %lf", &cycles, &seconds) == 2;
  if (p) pclose(p);
  rate = ok && seconds > 0 ? static_cast<double>(cycles) / seconds : 0;
  return ok;
}

}  // namespace

int sc_main(int argc, char** argv) {
  if (argc == 2 && std::string(argv[1]) == "--run") return measure(false);
  if (argc == 2 && std::string(argv[1]) == "--run-fst") return measure(true);
  if (argc == 2 && std::string(argv[1]) == "--link") return measure_link(false);
  if (argc == 2 && std::string(argv[1]) == "--link-fst") return measure_link(true);
  double plain = 0, traced = 0, link = 0, link_traced = 0;
  if (!child(argv[0], "--run", plain) || !child(argv[0], "--run-fst", traced) || !child(argv[0], "--link", link) ||
      !child(argv[0], "--link-fst", link_traced)) {
    std::fprintf(stderr, "bench_cosim: a measurement failed\n");
    return 1;
  }
  fmt::print("systolic array RTL (8x8, Verilator, SystemC transactor), 2000 tiles of 64 rows:\n");
  fmt::print("  untraced  {:8.0f} cycles/s\n  FST       {:8.0f} cycles/s  ({:.2f}x slower)\n", plain, traced, plain / traced);
  fmt::print("link layer RTL (8 bytes a cycle, looped back), 3000 FLITs:\n");
  fmt::print("  untraced  {:8.0f} cycles/s\n  FST       {:8.0f} cycles/s  ({:.2f}x slower)\n", link, link_traced,
             link / link_traced);
  return 0;
}
