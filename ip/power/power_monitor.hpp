// The chip's power model in the platform file (type `power`): the energy
// per event of every IP, static power and voltage per domain, the window
// of the power figures, and where to write them. It configures the chip's
// energy meter (common/power.hpp), which the IPs feed as they work, and
// reports energy and power per domain at the end.
#pragma once

#include <string>

#include "common/config.hpp"
#include "common/ip.hpp"
#include "common/power.hpp"

namespace tessera {

class PowerMonitor : public Ip {
 public:
  struct Config {
    power::Table table;
    sc_core::sc_time window{1, sc_core::SC_US};
    std::string csv;  // per-window power per domain; empty: none
    void visit(Params& p);
    void validate(const Params& p) const;
  };

  PowerMonitor(const sc_core::sc_module_name& n, const Config& c);
  power::Meter& meter() { return meter_; }
  void report_stats(nlohmann::ordered_json& out) const override;
  // Writes the per-window table (time, then watts per domain, static included).
  void write_csv(const std::string& file) const;

 private:
  void end_of_simulation() override;
  Config config_;
  power::Meter& meter_;
};

}  // namespace tessera
