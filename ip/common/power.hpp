// Energy accounting. IPs report activity events as they happen (so many
// MACs of a format over an interval, so many bytes of a memory, FLIT-hops,
// activates, instructions); the chip's meter turns them into energy with
// one table of energy per event and bins it into windows of simulated time
// by power domain. Static (leakage) power per domain comes on top, at the
// domain's voltage. The `power` IP (ip/power) sets the table from the
// platform file and reports; without one, the defaults apply.
//
// Every chip of a system has its own meter (the first component of an
// instance path, "chip2"); a lone chip uses the global one.
//
// DVFS: each domain has a clock (a frequency scale relative to the
// nominal frequencies of its models) and a voltage. Dynamic energy per
// event scales with (V / V_nominal)^2 at the moment it is charged, leakage
// with (V / V_nominal)^2 over the time the voltage holds.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <systemc>
#include <vector>

namespace tessera::power {

enum Event : unsigned {
  mac_bf16,
  mac_fp16,
  mac_fp8,
  mac_int8,
  vector_op,        // a lane operation of the vector unit (add, mul, compare, ...)
  vector_special,   // a special-function operation (exp, log, rsqrt, silu, ...)
  spm_byte,         // a scratchpad byte read or written (engines' streams included)
  tile_instruction, // an instruction of a tile's core
  noc_flit_hop,     // a flit through one router
  hbm_activate,
  hbm_read_byte,
  hbm_write_byte,
  hbm_refresh,      // a refresh command of one pseudo-channel
  link_bit,         // a bit on a SerDes link's wire (FLIT overhead and replays included)
  cp_instruction,
  kEvents
};
enum Domain : unsigned { tiles, noc, hbm, links, cp, kDomains };

const char* name(Event e);
const char* name(Domain d);
Domain domain_of(Event e);

struct Table {
  std::array<double, kEvents> pj{};         // energy per event, picojoules
  std::array<double, kDomains> static_w{};  // leakage at the nominal voltage, watts
  std::array<double, kDomains> volts{};     // the domain's voltage now
  std::array<double, kDomains> nominal{};   // the voltage static_w is given at
  Table();                                  // the defaults (sources in ip/power/README.md)
  // Leakage at the domain's voltage: static_w * (V / V_nominal)^2.
  double static_power(Domain d) const;
};

// A domain's clock. A frequency change scales every clock of the domain
// by the same factor. The models keep counting their own cycles and turn
// cycles into time and back through the domain's nominal time: the time
// those cycles would take at the nominal frequencies (the integral of the
// scale over simulated time). Until a change it is simulated time itself,
// bit for bit. Changes take effect at the moment they are set; time
// already computed (a command in progress) keeps the frequency it began
// with.
class Clock {
 public:
  double scale() const { return scale_; }
  std::uint64_t changes() const { return changes_; }
  // Nominal time (resolution ticks) at simulated time t.
  std::uint64_t nominal(const sc_core::sc_time& t) const;
  // The first simulated time at which nominal time reaches n.
  sc_core::sc_time at(std::uint64_t n) const;
  // How long `nominal` of work takes at the present frequency.
  sc_core::sc_time span(const sc_core::sc_time& nominal) const;
  // Edges of a clock of the domain whose nominal period is p ticks: the
  // cycle at or after t, and when cycle c begins.
  std::uint64_t cycle(const sc_core::sc_time& t, std::uint64_t p) const { return (nominal(t) + p - 1) / p; }
  sc_core::sc_time edge(std::uint64_t c, std::uint64_t p) const { return at(c * p); }
  // From `when` (not before the last change) on, run at `scale`.
  void set(double scale, const sc_core::sc_time& when);

 private:
  double scale_ = 1;
  std::uint64_t base_t_ = 0, base_n_ = 0, changes_ = 0;
};

class Meter {
 public:
  // `count` events spread evenly over [start, end) (at `start` when end <= start).
  void charge(Event e, double count, const sc_core::sc_time& start, const sc_core::sc_time& end);
  void charge(Event e, double count, const sc_core::sc_time& at) { charge(e, count, at, at); }

  Table& table() { return table_; }
  Clock& clock(Domain d) { return clocks_[d]; }
  const Clock& clock(Domain d) const { return clocks_[d]; }
  // The domain's voltage becomes v at `when` (not before its last change).
  void set_volts(Domain d, double v, const sc_core::sc_time& when);
  const Table& table() const { return table_; }
  void set_window(const sc_core::sc_time& w);
  // Calls f once, at the next charge (a resting power manager wakes on activity).
  void on_next_charge(std::function<void()> f) { wake_ = std::move(f); }
  const sc_core::sc_time& window() const { return window_; }

  double count(Event e) const { return counts_[e]; }
  // Sum over the domain's events of count x energy per event x (V/V_nominal)^2
  // at the time of each event (exactly count x energy per event at the
  // nominal voltage).
  double dynamic_joules(Domain d) const;
  double dynamic_joules() const;
  // Static energy of the domain over [0, until) at the voltages it had.
  double static_joules(Domain d, const sc_core::sc_time& until) const;
  // Leakage of the domain per window (as windows()), watts.
  std::vector<double> static_watts(Domain d) const;
  double total_joules(const sc_core::sc_time& until) const;
  // Dynamic energy per window and domain (window i: [i w, (i + 1) w)). A
  // run longer than 2^20 windows doubles the window (merging pairs) as it
  // goes, so memory stays bounded; window() tells the length now.
  const std::vector<std::array<double, kDomains>>& windows() const { return windows_; }

 private:
  void bin(Domain d, double joules, const sc_core::sc_time& start, const sc_core::sc_time& end);
  void set_window_length(const sc_core::sc_time& w);
  static constexpr std::size_t kMaxWindows = std::size_t{1} << 20;
  Table table_;
  sc_core::sc_time window_{1, sc_core::SC_US};
  double per_window_ = 1e6;                                    // windows per second
  sc_core::sc_time limit_{static_cast<double>(kMaxWindows), sc_core::SC_US};  // the time the windows reach
  std::array<double, kEvents> counts_{};
  std::array<double, kEvents> scaled_{};  // counts x (V/V_nominal)^2
  std::array<Clock, kDomains> clocks_;
  std::function<void()> wake_;
  struct Step {
    sc_core::sc_time at;
    double watts;  // leakage from `at` on
  };
  std::array<std::vector<Step>, kDomains> steps_;  // voltage changes (with the start, once there is one)
  std::vector<std::array<double, kDomains>> windows_;
};

// The meter of the chip `path` belongs to.
Meter& meter(const std::string& path);
void reset();  // for tests

}  // namespace tessera::power
