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

// What the meter counts. Each IP declares the events it charges, once, at
// namespace scope in its source, with their domain and their default
// energy (sources: ip/power/README.md):
//
//   const power::Event kActivate = power::declare_event("hbm_activate", "hbm", 900, "an ACT command");
//
// Nothing here knows a particular IP. The power domains are the chip's:
// the five below come first, in the order the power manager's registers
// index them (ip/power/power.regs.json), with their default leakage
// (sources: ip/power/README.md); an IP names its events' domain.
using Event = unsigned;   // an index into events()
using Domain = unsigned;  // an index into domains()
inline constexpr unsigned kMaxDomains = 8;  // the power manager's register arrays have 8 slots
inline constexpr Domain kTiles = 0, kNoc = 1, kHbm = 2, kLinks = 3, kCp = 4;
inline constexpr unsigned kChipDomains = 5;

struct EventInfo {
  std::string name, domain, doc;  // domain: by name, resolved when first needed
  double default_pj;
};
struct DomainInfo {
  std::string name, doc;
  double static_w, nominal_v;  // default leakage at the nominal voltage
};
Event declare_event(const char* name, const char* domain, double default_pj, const char* doc);
Domain declare_domain(const char* name, double static_w, double nominal_v, const char* doc);
const std::vector<EventInfo>& events();
const std::vector<DomainInfo>& domains();
// Events in report order: by domain, then by name (declaration order is link order).
const std::vector<Event>& events_in_order();
unsigned event_count();
unsigned domain_count();
// By name; an unknown name is an internal error (a model asks for what no IP declared).
Event event(const std::string& name);
Domain domain(const std::string& name);
const std::string& event_name(Event e);
const std::string& domain_name(Domain d);
Domain domain_of(Event e);

struct Table {
  std::vector<double> pj;                      // energy per event, picojoules
  std::array<double, kMaxDomains> static_w{};  // leakage at the nominal voltage, watts
  std::array<double, kMaxDomains> volts{};     // the domain's voltage now
  std::array<double, kMaxDomains> nominal{};   // the voltage static_w is given at
  Table();                                     // the declared defaults
  // Events declared after the table was made (a plugin's) get their defaults.
  void cover();
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

  double count(Event e) const { return e < counts_.size() ? counts_[e] : 0.0; }
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
  const std::vector<std::array<double, kMaxDomains>>& windows() const { return windows_; }

 private:
  void bin(Domain d, double joules, const sc_core::sc_time& start, const sc_core::sc_time& end);
  void set_window_length(const sc_core::sc_time& w);
  static constexpr std::size_t kMaxWindows = std::size_t{1} << 20;
  Table table_;
  sc_core::sc_time window_{1, sc_core::SC_US};
  double per_window_ = 1e6;                                    // windows per second
  sc_core::sc_time limit_{static_cast<double>(kMaxWindows), sc_core::SC_US};  // the time the windows reach
  std::vector<double> counts_;
  std::vector<double> scaled_;  // counts x (V/V_nominal)^2
  std::array<Clock, kMaxDomains> clocks_;
  std::function<void()> wake_;
  struct Step {
    sc_core::sc_time at;
    double watts;  // leakage from `at` on
  };
  std::array<std::vector<Step>, kMaxDomains> steps_;  // voltage changes (with the start, once there is one)
  std::vector<std::array<double, kMaxDomains>> windows_;
};

// The meter of the chip `path` belongs to.
Meter& meter(const std::string& path);
void reset();  // for tests

}  // namespace tessera::power
