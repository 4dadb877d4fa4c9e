// Model-level waveforms (`tessera-vp --waves FILE.vcd`): interrupt lines,
// engines busy and idle, queue depths, each domain's clock frequency,
// voltage and power, link state and width. IPs declare a signal once
// (during elaboration) and report its changes as they happen; the file is
// written at the end of the run, its scopes following the instance paths,
// so GTKWave shows chip0 > tile3 > tensor > busy. A preset chooses what is
// recorded and a window limits it (`--waves-window 10us..20us`: the values
// at 10 us, then the changes until 20 us).
//
// Nothing is recorded, and a change costs a load and a branch, unless
// waves are open.
#pragma once

#include <cstdint>
#include <string>
#include <systemc>
#include <vector>

namespace tessera::waves {

// What a signal is about; presets are sets of these.
enum Group : unsigned { irq, engines, clocks, power, links, rtl, kGroups };

struct Options {
  std::string file;                     // .vcd, or .fst where an FST writer is installed
  std::vector<std::string> groups;      // preset: group names or "all" (empty: all)
  sc_core::sc_time from = sc_core::SC_ZERO_TIME, to = sc_core::sc_max_time();
};

namespace detail {
extern bool on;
}

using Id = int;  // -1: not recorded
constexpr Id kNone = -1;

// What a writer gets at the end: signals, their values at the window's
// start, and the changes in time order (time in resolution ticks).
struct Dump {
  struct Signal {
    std::string path, name;
    unsigned width;  // 0: real
    std::uint64_t initial;
    double initial_real;
  };
  struct Change {
    std::uint64_t at;
    int id;
    std::uint64_t bits;
    double real;
  };
  std::vector<Signal> signals;
  std::vector<Change> changes;
  std::uint64_t from;
  double resolution;  // seconds per tick
};
using Writer = bool (*)(const std::string& file, const Dump& d);
// "chip0.tile3.tensor" -> {"chip0", "tile3", "tensor"}: a signal's scopes.
std::vector<std::string> scopes(const std::string& path);
// FST comes from Verilator's writer (ip/rtl installs it, as tessera-vp and
// the runtime do before opening waves).
void set_fst_writer(Writer w);

// Throws std::runtime_error naming the bad option.
void open(const Options& o);
// Writes the file (also at exit); returns false when it could not.
bool close();
inline bool on() { return detail::on; }
// A companion file for an RTL block's own waveform (Verilator's FST):
// "<waves file without .vcd>.<path><ext>", or "" when waves are closed or
// the preset leaves out the group rtl.
std::string companion(const std::string& path, const std::string& ext);
// Parses "10us..20us" into o.from / o.to; throws std::runtime_error.
void parse_window(const std::string& text, Options& o);

// A signal of instance `path` (an integer of `width` bits, or a real when
// width is 0). kNone when waves are closed or its group is not recorded.
Id declare(Group g, const std::string& path, const std::string& name, unsigned width);
void change(Id id, std::uint64_t value, const sc_core::sc_time& at);
void change_real(Id id, double value, const sc_core::sc_time& at);
inline void change(Id id, std::uint64_t value) {
  if (id >= 0) change(id, value, sc_core::sc_time_stamp());
}

}  // namespace tessera::waves
