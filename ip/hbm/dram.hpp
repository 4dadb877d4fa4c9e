// DRAM organisation, timing and commands for the HBM model. Timings come
// from a timing file (platform/hbm3-6400.json, ...) in nanoseconds and are
// rounded up to whole controller clocks (tCK); everything below works in
// cycles.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "common/config.hpp"
#include "common/power.hpp"

namespace tessera::hbm {

// The stacks' energy events (sources: ip/power/README.md).
namespace energy {
extern const power::Event activate, read_byte, write_byte, refresh;
}

enum class Cmd : std::uint8_t { ACT, RD, WR, PRE, REFAB, REFPB };
const char* cmd_name(Cmd c);

struct Timing {
  std::string name;
  double tck_ns = 0.625;
  unsigned burst_length = 8, pc_width_bits = 32;
  // In cycles.
  unsigned tBURST = 0, tCL = 0, tCWL = 0, tRCDRD = 0, tRCDWR = 0, tRP = 0, tRAS = 0, tRC = 0, tCCD_S = 0,
           tCCD_L = 0, tRRD_S = 0, tRRD_L = 0, tFAW = 0, tWR = 0, tRTP = 0, tWTR_S = 0, tWTR_L = 0, tRTW = 0,
           tREFI = 0, tRFCab = 0, tRFCpb = 0;
  // Optional in a timing file: read data's strobe delay past tCL (tDQSCK,
  // default 0); per-bank refresh's interval (tREFISB, default tREFI over
  // the pseudo-channel's banks: 0 here) and the gap between per-bank
  // refreshes of different banks (tRREFD, default 0).
  unsigned tDQSCK = 0, tREFISB = 0, tRREFD = 0;
  // Between column commands to different stack IDs (tCCDR; default: tCCD_S).
  unsigned tCCDR = 0;
  unsigned ccdr() const { return std::max(tCCDR, tCCD_S); }
  // The per-bank refresh interval of a pseudo-channel with `banks` banks.
  unsigned refisb(unsigned banks) const { return tREFISB ? tREFISB : tREFI / banks; }
  // The first refresh of pseudo-channel `index` of `count` whose refreshes
  // recur every `period` cycles: at `period`, less its turn's share of it
  // (stagger: the channels take turns in bit-reversed order, so that any
  // run of them is spread over the interval; else all at `period`).
  static std::uint64_t first_refresh(std::uint64_t period, unsigned index, unsigned count, bool stagger);
  unsigned burst_bytes() const { return burst_length * pc_width_bits / 8; }
  // Peak bandwidth of one pseudo-channel in bytes per second.
  double peak_bytes_per_s() const { return burst_bytes() / (tBURST * tck_ns * 1e-9); }

  // Reads a timing file; throws ConfigError naming the file and the key.
  static Timing load(const std::string& file);
};

struct Org {
  unsigned stacks = 1, channels = 16, pseudo_channels = 2, bank_groups = 4, banks = 4;
  unsigned stack_ids = 1;  // dies a pseudo-channel's banks are spread over (HBM3 12/16-high: SID), each its own bank groups
  std::uint64_t row_bytes = 1024;
  std::uint64_t rows = 32768;
  unsigned banks_per_sid() const { return bank_groups * banks; }
  unsigned banks_per_pc() const { return stack_ids * bank_groups * banks; }
  unsigned pcs() const { return stacks * channels * pseudo_channels; }
};

// Where one burst goes.
struct Location {
  unsigned pc = 0;  // global pseudo-channel index
  unsigned sid = 0, bg = 0, bank = 0;
  std::uint64_t row = 0, col = 0;
  unsigned flat_bank(const Org& o) const { return (sid * o.bank_groups + bg) * o.banks + bank; }
};

}  // namespace tessera::hbm
