// The chip's power manager (type `power`): the power model's parameters
// (energy per event of every IP, leakage and voltage per domain, the
// window of the power figures), the P-states of each domain, and a control
// loop that keeps the chip under a power cap and each domain under its own
// limit.
//
// It configures the chip's energy meter (common/power.hpp), which the IPs
// feed as they work. Each window the loop reads the power of the window
// that just ended, predicts each domain's power in each of its P-states
// (dynamic power x f'/f x (V'/V)^2, leakage x (V'/V)^2) and picks the
// fastest states that fit: below every domain's limit, and the chip below
// its cap less a margin and less the energy it went over by recently
// (repaid over a few response times, so the average over any stretch
// longer than that stays at the cap). Lowering a state is a throttle event.
// A P-state change takes the domain's transition latency; the domain runs
// at its old state until then. Firmware can set the cap and the limits and
// can take the P-states over (CTRL.FIRMWARE); an interrupt tells it when
// the chip stayed over its cap for longer than OVERCAP_NS. Registers:
// power.regs.json.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "common/config.hpp"
#include "common/irq.hpp"
#include "common/power.hpp"
#include "common/regs.hpp"
#include "common/waves.hpp"

namespace tessera::power {

// The domains the power manager controls: the chip's (common/power.hpp).
inline constexpr unsigned kDomains = kChipDomains;

class PowerManager : public MmioTarget {
 public:
  static constexpr unsigned kMaxPstates = 8;
  struct Pstate {
    double scale;  // frequency / nominal
    double volts;
  };
  struct Config {
    power::Table table;
    sc_core::sc_time window{1, sc_core::SC_US};
    std::string csv;  // per-window power per domain; empty: none
    std::array<std::vector<Pstate>, power::kDomains> pstates;
    std::array<sc_core::sc_time, power::kDomains> transition;
    std::array<unsigned, power::kDomains> initial{};  // P-state at reset
    double cap = 0;                                   // watts, 0: none
    std::array<double, power::kDomains> limit{};      // watts, 0: none
    bool firmware = false;                            // firmware moves the P-states
    double margin = 0.02;                             // the loop aims this fraction below the cap
    sc_core::sc_time overcap_time{10, sc_core::SC_US};
    Config();
    void visit(Params& p);
    void validate(const Params& p) const;
  };

  IrqOut irq_out;

  PowerManager(const sc_core::sc_module_name& n, const Config& c);
  power::Meter& meter() { return meter_; }
  void report_stats(nlohmann::ordered_json& out) const override;
  // Writes the per-window table (time, watts per domain with leakage, total).
  void write_csv(const std::string& file) const;

  // The host API and the tests: what firmware does through the registers.
  void set_cap(double watts);
  void set_limit(power::Domain d, double watts);
  void set_firmware_control(bool on);
  // Starts a transition of `d` to P-state `s` (refused, false, when `s` is
  // not one of the domain's).
  bool request(power::Domain d, unsigned s);
  unsigned pstate(power::Domain d) const { return dom_[d].current; }
  unsigned target(power::Domain d) const { return dom_[d].target; }
  std::uint64_t throttles(power::Domain d) const { return dom_[d].throttles; }
  std::uint64_t throttles() const;
  // Power of the chip and of each domain over window i (leakage included).
  double window_watts(std::size_t i) const;
  double window_watts(std::size_t i, power::Domain d) const;
  // The time from a change of load until the loop's answer has taken effect.
  sc_core::sc_time response_time() const;
  // Puts the power per window and domain into the waveforms and the trace
  // (as counters); once, at the end of the run (tessera-vp calls it, and
  // end_of_simulation does).
  void publish();

 private:
  struct DomainState {
    unsigned current = 0, target = 0;   // P-states
    unsigned previous = 0;              // the one before `current`
    bool busy = false;                  // a transition is under way (towards `target`)
    unsigned queued = ~0u;              // asked for while busy
    std::uint64_t throttles = 0, transitions = 0;
    double limit = 0;
    sc_core::sc_event done;
    sc_core::sc_time since;             // when `current` took effect
    sc_core::sc_time due;               // when the transition under way ends
    std::array<double, kMaxPstates> residency{};  // seconds in each P-state
  };
  void start(power::Domain d, unsigned s, const sc_core::sc_time& at);
  void transition(power::Domain d);
  void transitions();  // the ones due now
  void loop();
  void control(std::size_t window);  // decides after window `window` ended
  bool active() const;
  void raise(std::uint64_t cause);
  void end_of_simulation() override;
  double energy(power::Domain d) const;

  Config config_;
  power::Meter& meter_;
  std::array<DomainState, power::kDomains> dom_;
  double cap_ = 0, debt_ = 0;
  bool firmware_ = false, overcap_flagged_ = false;
  sc_core::sc_time over_for_;
  std::uint64_t overcap_events_ = 0;
  sc_core::sc_event reconfigured_, activity_;
  bool published_ = false;
  // Waves: per domain its P-state, frequency (fraction of nominal), voltage and power.
  std::array<waves::Id, power::kDomains> w_pstate_{}, w_freq_{}, w_volts_{}, w_watts_{};
  waves::Id w_total_ = waves::kNone;
  void show_clock(power::Domain d, const sc_core::sc_time& at);
};

}  // namespace tessera::power
