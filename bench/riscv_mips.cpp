// Instruction-set simulator speed: the integer-mix firmware (CRC-32,
// quicksort, matrix product, recursive calls) on the CP, for RV64 and
// RV32, in three modes, and in S mode with Sv39 paging on (RV64). MIPS = simulated instructions / host seconds of
// simulation (elaboration and loading excluded), best of three runs.
#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

namespace {

struct Mode {
  const char* name;
  const char* args;
};

nlohmann::json run(const std::string& args) {
  // The run's statistics in a scratch file of this process, not in the working directory.
  const std::string stats =
      (std::filesystem::temp_directory_path() / fmt::format("bench_riscv_stats.{}.json", ::getpid())).string();
  const std::string cmd = std::string(TESSERA_VP) + " -q " + args + " --stats " + stats + " >/dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0) {
    fmt::print(stderr, "failed: {}\n", cmd);
    std::exit(1);
  }
  std::ifstream in(stats);
  nlohmann::json j = nlohmann::json::parse(in);
  std::filesystem::remove(stats);
  return j;
}

}  // namespace

int main() {
  const Mode modes[] = {
      {"b_transport for every access, quantum 0", "--set cp.dmi=false --set cp.quantum=0"},
      {"DMI, quantum 1 us", "--set cp.dmi=true --set cp.quantum=1us"},
      {"DMI, quantum 100 us", "--set cp.dmi=true --set cp.quantum=100us"},
  };
  fmt::print("{:<42} {:>6} {:>14} {:>10} {:>9}\n", "mode", "xlen", "instructions", "host s", "MIPS");
  for (const Mode& m : modes)
    for (const char* xlen : {"64", "32"}) {
      double best = 1e9;
      std::uint64_t insns = 0;
      for (int rep = 0; rep < 3; ++rep) {
        const nlohmann::json s = run(fmt::format("--firmware {}/intmix_long_rv{}.elf --set cp.xlen={} {}",
                                                 TESSERA_FIRMWARE_DIR, xlen, xlen, m.args));
        insns = s["ips"]["t1.cp"]["instructions"].get<std::uint64_t>();
        best = std::min(best, s["wall_time_s"].get<double>());
      }
      fmt::print("{:<42} {:>6} {:>14} {:>10.3f} {:>9.1f}\n", m.name, xlen, insns, best, insns / best / 1e6);
    }
  // The same program in S mode with Sv39 paging on (1 GiB pages: the TLB hits).
  double best = 1e9;
  std::uint64_t insns = 0;
  for (int rep = 0; rep < 3; ++rep) {
    const nlohmann::json s = run(fmt::format("--firmware {}/intmix_long_sv39.elf --set cp.quantum=100us", TESSERA_FIRMWARE_DIR));
    insns = s["ips"]["t1.cp"]["instructions"].get<std::uint64_t>();
    best = std::min(best, s["wall_time_s"].get<double>());
  }
  fmt::print("{:<42} {:>6} {:>14} {:>10.3f} {:>9.1f}\n", "DMI, quantum 100 us, S mode, Sv39", "64", insns, best,
             insns / best / 1e6);
  return 0;
}
