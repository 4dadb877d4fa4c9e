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
#pragma once

#include <array>
#include <cstdint>
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

class Meter {
 public:
  // `count` events spread evenly over [start, end) (at `start` when end <= start).
  void charge(Event e, double count, const sc_core::sc_time& start, const sc_core::sc_time& end);
  void charge(Event e, double count, const sc_core::sc_time& at) { charge(e, count, at, at); }

  Table& table() { return table_; }
  const Table& table() const { return table_; }
  void set_window(const sc_core::sc_time& w);
  const sc_core::sc_time& window() const { return window_; }

  double count(Event e) const { return counts_[e]; }
  // Sum over the domain's events of count x energy per event.
  double dynamic_joules(Domain d) const;
  double dynamic_joules() const;
  // Static energy of every domain over [0, until).
  double static_joules(Domain d, const sc_core::sc_time& until) const;
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
  std::vector<std::array<double, kDomains>> windows_;
};

// The meter of the chip `path` belongs to.
Meter& meter(const std::string& path);
void reset();  // for tests

}  // namespace tessera::power
