#include "power/power_monitor.hpp"

#include <fmt/format.h>

#include <fstream>

#include "common/log.hpp"
#include "common/registry.hpp"
#include "common/sim.hpp"

namespace tessera {

void PowerMonitor::Config::visit(Params& p) {
  using namespace power;
  for (unsigned e = 0; e < kEvents; ++e) {
    const std::string key = std::string("pj_") + power::name(static_cast<Event>(e));
    p(key.c_str(), table.pj[e], "energy per event, picojoules (sources: ip/power/README.md)");
  }
  for (unsigned d = 0; d < kDomains; ++d) {
    const std::string dom = power::name(static_cast<Domain>(d));
    p(("static_w_" + dom).c_str(), table.static_w[d], "leakage of the domain at its nominal voltage, watts");
    p(("nominal_v_" + dom).c_str(), table.nominal[d], "the voltage static_w is given at");
    p(("v_" + dom).c_str(), table.volts[d], "the domain's voltage (leakage scales with its square)");
  }
  p("window", window, "power is reported per window of this length");
  p("csv", csv, "write per-window power per domain to this file (empty: none)");
}

void PowerMonitor::Config::validate(const Params& p) const {
  using namespace power;
  for (unsigned e = 0; e < kEvents; ++e)
    if (!(table.pj[e] >= 0) || table.pj[e] > 1e9)
      p.fail(std::string("pj_") + power::name(static_cast<Event>(e)), "must be between 0 and 1e9 pJ");
  for (unsigned d = 0; d < kDomains; ++d) {
    const std::string dom = power::name(static_cast<Domain>(d));
    if (!(table.static_w[d] >= 0) || table.static_w[d] > 1e4) p.fail("static_w_" + dom, "must be between 0 and 10 kW");
    if (!(table.nominal[d] > 0) || table.nominal[d] > 5) p.fail("nominal_v_" + dom, "must be above 0 and at most 5 V");
    if (!(table.volts[d] > 0) || table.volts[d] > 5) p.fail("v_" + dom, "must be above 0 and at most 5 V");
  }
  if (window <= sc_core::SC_ZERO_TIME) p.fail("window", "must be longer than zero");
}

PowerMonitor::PowerMonitor(const sc_core::sc_module_name& n, const Config& c)
    : Ip(n), config_(c), meter_(power::meter(name())) {
  meter_.table() = c.table;
  meter_.set_window(c.window);
}

void PowerMonitor::end_of_simulation() {
  if (config_.csv.empty()) return;
  write_csv(config_.csv);
}

void PowerMonitor::write_csv(const std::string& file) const {
  std::ofstream out(file);
  out << "start_us";
  for (unsigned d = 0; d < power::kDomains; ++d) out << ',' << power::name(static_cast<power::Domain>(d)) << "_w";
  out << ",total_w\n";
  const double w = meter_.window().to_seconds();
  const auto& windows = meter_.windows();
  for (std::size_t i = 0; i < windows.size(); ++i) {
    out << i * w * 1e6;
    double total = 0;
    for (unsigned d = 0; d < power::kDomains; ++d) {
      const double watts = windows[i][d] / w + meter_.table().static_power(static_cast<power::Domain>(d));
      total += watts;
      out << ',' << watts;
    }
    out << ',' << total << '\n';
  }
  if (!out) log::emit(path(), log::Level::warning, "cannot write " + file);
}

void PowerMonitor::report_stats(nlohmann::ordered_json& out) const {
  const sc_core::sc_time now = sim::end_time();  // the run's end (a decoupled core's exit may be ahead of the kernel)
  const double seconds = now.to_seconds(), w = meter_.window().to_seconds();
  double total = 0;
  for (unsigned d = 0; d < power::kDomains; ++d) {
    const auto dom = static_cast<power::Domain>(d);
    const std::string k = power::name(dom);
    const double dyn = meter_.dynamic_joules(dom), stat = meter_.static_joules(dom, now);
    double peak = 0;
    for (const auto& win : meter_.windows()) peak = std::max(peak, win[d] / w);
    out[k + "_dynamic_j"] = dyn;
    out[k + "_static_j"] = stat;
    out[k + "_average_w"] = seconds > 0 ? (dyn + stat) / seconds : 0.0;
    out[k + "_peak_w"] = peak + meter_.table().static_power(dom);
    total += dyn + stat;
  }
  out["total_j"] = total;
  out["average_w"] = seconds > 0 ? total / seconds : 0.0;
  for (unsigned e = 0; e < power::kEvents; ++e) {
    const auto ev = static_cast<power::Event>(e);
    out[std::string("events_") + power::name(ev)] = meter_.count(ev);
  }
}

TESSERA_REGISTER_IP("power", PowerMonitor, "power model: energy per event, static power per domain, power per window");

}  // namespace tessera
