#include "power/power_manager.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "common/log.hpp"
#include "common/registry.hpp"
#include "common/sim.hpp"
#include "common/trace.hpp"
#include "power_regs.hpp"

namespace tessera::power {

namespace {
const trace::Category kTrace = trace::category("power", "power and frequency per domain");
}  // namespace

namespace R = regs::power;


namespace {

std::string format_pstates(const std::vector<PowerManager::Pstate>& v) {
  std::string s;
  for (const auto& p : v) s += fmt::format("{}{:g}@{:g}", s.empty() ? "" : ",", p.scale, p.volts);
  return s;
}

// "1@0.75,0.8@0.69": frequency (a fraction of nominal) @ volts, fastest first.
std::vector<PowerManager::Pstate> parse_pstates(const Params& p, const std::string& key, const std::string& text) {
  std::vector<PowerManager::Pstate> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const auto at = item.find('@');
    PowerManager::Pstate s{};
    std::size_t used1 = 0, used2 = 0;
    try {
      if (at == std::string::npos) throw std::invalid_argument("no @");
      s.scale = std::stod(item.substr(0, at), &used1);
      s.volts = std::stod(item.substr(at + 1), &used2);
    } catch (const std::exception&) {
      p.fail(key, "'" + item + "' is not FREQUENCY_FRACTION@VOLTS (e.g. 0.8@0.69)");
    }
    if (used1 != at || used2 != item.size() - at - 1) p.fail(key, "'" + item + "' is not FREQUENCY_FRACTION@VOLTS (e.g. 0.8@0.69)");
    out.push_back(s);
  }
  return out;
}

}  // namespace

PowerManager::Config::Config() {
  // Where these come from: ip/power/README.md.
  const std::vector<Pstate> logic = {{1.0, 0.75}, {0.9, 0.72}, {0.8, 0.69}, {0.7, 0.66}, {0.6, 0.63}, {0.5, 0.60}};
  pstates[kTiles] = logic;
  pstates[kNoc] = {{1.0, 0.75}, {0.8, 0.69}, {0.6, 0.63}, {0.5, 0.60}};
  pstates[kHbm] = {{1.0, 1.1}, {0.875, 1.08}, {0.75, 1.05}, {0.5, 1.0}};
  pstates[kLinks] = {{1.0, 0.9}, {0.5, 0.8}, {0.25, 0.75}};
  pstates[kCp] = {{1.0, 0.75}, {0.75, 0.68}, {0.5, 0.60}};
  transition = {sc_core::sc_time(1, sc_core::SC_US), sc_core::sc_time(1, sc_core::SC_US), sc_core::sc_time(5, sc_core::SC_US),
                sc_core::sc_time(5, sc_core::SC_US), sc_core::sc_time(1, sc_core::SC_US)};
}

void PowerManager::Config::visit(Params& p) {
  using namespace power;
  table.cover();
  for (const Event e : events_in_order()) {
    const std::string key = "pj_" + event_name(e);
    const std::string doc = events()[e].doc + ": energy per event, picojoules (sources: ip/power/README.md)";
    p(key.c_str(), table.pj[e], doc.c_str());
  }
  for (unsigned d = 0; d < kDomains; ++d) {
    const std::string dom = power::domain_name(d);
    p(("static_w_" + dom).c_str(), table.static_w[d], "leakage of the domain at its nominal voltage, watts");
    p(("nominal_v_" + dom).c_str(), table.nominal[d], "the voltage static_w is given at");
    std::string ps = format_pstates(pstates[d]);
    p(("pstates_" + dom).c_str(), ps, "P-states, fastest first: FREQUENCY_FRACTION@VOLTS,... (the fraction of the models' nominal clocks)");
    pstates[d] = parse_pstates(p, "pstates_" + dom, ps);
    p(("pstate_" + dom).c_str(), initial[d], "the P-state at reset (0: the fastest)");
    p(("transition_" + dom).c_str(), transition[d], "how long a P-state change takes");
    p(("limit_w_" + dom).c_str(), limit[d], "the domain's own power limit, watts (0: none)");
  }
  p("window", window, "power is measured, reported and controlled per window of this length");
  p("csv", csv, "write per-window power per domain to this file (empty: none)");
  p("cap_w", cap, "the chip's power cap, watts (0: none)");
  std::string control = firmware ? "firmware" : "auto";
  p("control", control, "who moves the P-states: auto (the manager's loop) or firmware");
  if (control != "auto" && control != "firmware") p.fail("control", "must be auto or firmware, not '" + control + "'");
  firmware = control == "firmware";
  p("margin", margin, "the loop aims this fraction below the cap");
  p("overcap_time", overcap_time, "over the cap for longer than this raises the OVERCAP interrupt");
}

void PowerManager::Config::validate(const Params& p) const {
  using namespace power;
  for (const Event e : events_in_order())
    if (!(table.pj[e] >= 0) || table.pj[e] > 1e9) p.fail("pj_" + event_name(e), "must be between 0 and 1e9 pJ");
  for (unsigned d = 0; d < kDomains; ++d) {
    const std::string dom = power::domain_name(d);
    if (!(table.static_w[d] >= 0) || table.static_w[d] > 1e4) p.fail("static_w_" + dom, "must be between 0 and 10 kW");
    if (!(table.nominal[d] > 0) || table.nominal[d] > 5) p.fail("nominal_v_" + dom, "must be above 0 and at most 5 V");
    const auto& ps = pstates[d];
    if (ps.empty() || ps.size() > kMaxPstates) p.fail("pstates_" + dom, fmt::format("must list 1 to {} P-states", kMaxPstates));
    for (std::size_t i = 0; i < ps.size(); ++i) {
      if (!(ps[i].scale > 0) || ps[i].scale > 4) p.fail("pstates_" + dom, "frequency fractions must be above 0 and at most 4");
      if (!(ps[i].volts > 0) || ps[i].volts > 5) p.fail("pstates_" + dom, "voltages must be above 0 and at most 5 V");
      if (i && !(ps[i].scale < ps[i - 1].scale)) p.fail("pstates_" + dom, "must be listed fastest first, each slower than the one before");
    }
    if (initial[d] >= ps.size()) p.fail("pstate_" + dom, fmt::format("must be below {} (the domain's P-states)", ps.size()));
    if (transition[d] > sc_core::sc_time(1, sc_core::SC_SEC)) p.fail("transition_" + dom, "must be at most 1 s");
    if (!(limit[d] >= 0) || limit[d] > 1e5) p.fail("limit_w_" + dom, "must be between 0 and 100 kW");
  }
  if (window <= sc_core::SC_ZERO_TIME) p.fail("window", "must be longer than zero");
  if (!(cap >= 0) || cap > 1e5) p.fail("cap_w", "must be between 0 and 100 kW");
  if (!(margin >= 0) || margin >= 0.5) p.fail("margin", "must be at least 0 and below 0.5");
}

PowerManager::PowerManager(const sc_core::sc_module_name& n, const Config& c)
    : MmioTarget(n, R::kBlock), config_(c), meter_(power::meter(name())) {
  expose_irq_out("irq_out", irq_out);
  meter_.table() = c.table;
  meter_.set_window(c.window);
  cap_ = c.cap;
  firmware_ = c.firmware;
  for (unsigned d = 0; d < kDomains; ++d) {
    DomainState& dm = dom_[d];
    dm.current = dm.target = dm.previous = c.initial[d];
    dm.limit = c.limit[d];
    const Pstate& s = c.pstates[d][dm.current];
    meter_.clock(static_cast<power::Domain>(d)).set(s.scale, sc_core::SC_ZERO_TIME);
    meter_.table().volts[d] = s.volts;
  }

  regs_.set(R::INFO, kDomains | (kMaxPstates << R::INFO_f::MAX_PSTATES_SHIFT));
  regs_.set(R::CTRL, firmware_ ? 1 : 0);
  regs_.set(R::CAP_MW, static_cast<std::uint64_t>(std::llround(cap_ * 1e3)));
  regs_.set(R::OVERCAP_NS, static_cast<std::uint64_t>(c.overcap_time.to_seconds() * 1e9));
  for (unsigned d = 0; d < kDomains; ++d) regs_.set(R::LIMIT_MW, static_cast<std::uint64_t>(std::llround(dom_[d].limit * 1e3)), d);
  regs_.limit_count(R::DOMAIN_POWER_MW, kDomains);
  regs_.limit_count(R::DOMAIN_ENERGY_NJ, kDomains);
  regs_.limit_count(R::PSTATE, kDomains);
  regs_.limit_count(R::PSTATE_REQ, kDomains);
  regs_.limit_count(R::LIMIT_MW, kDomains);
  regs_.limit_count(R::DOMAIN_THROTTLES, kDomains);
  regs_.limit_count(R::FREQ_PERMILLE, kDomains);
  regs_.limit_count(R::VOLTAGE_MV, kDomains);
  regs_.limit_count(R::PSTATE_TABLE, kDomains * kMaxPstates);
  regs_.limit_count(R::TRANSITION_NS, kDomains);

  auto last_window = [this] {
    const std::size_t k = static_cast<std::size_t>(now() / meter_.window());
    return k ? k - 1 : ~std::size_t{0};
  };
  auto mw = [](double w) { return static_cast<std::uint64_t>(std::llround(std::max(0.0, w) * 1e3)); };
  regs_.on_read(R::WINDOW_NS, [this](unsigned, bool) { return static_cast<std::uint64_t>(meter_.window().to_seconds() * 1e9); });
  regs_.on_read(R::POWER_MW, [=](unsigned, bool) {
    const std::size_t k = last_window();
    return k == ~std::size_t{0} ? 0 : mw(window_watts(k));
  });
  regs_.on_read(R::DOMAIN_POWER_MW, [=](unsigned i, bool) {
    const std::size_t k = last_window();
    return k == ~std::size_t{0} ? 0 : mw(window_watts(k, static_cast<power::Domain>(i)));
  });
  regs_.on_read(R::THROTTLES, [this](unsigned, bool) { return throttles(); });
  regs_.on_read(R::OVERCAP_EVENTS, [this](unsigned, bool) { return overcap_events_; });
  regs_.on_read(R::ENERGY_UJ, [this](unsigned, bool) {
    double j = 0;
    for (unsigned d = 0; d < kDomains; ++d) j += energy(static_cast<power::Domain>(d));
    return static_cast<std::uint64_t>(j * 1e6);
  });
  regs_.on_read(R::DOMAIN_ENERGY_NJ, [this](unsigned i, bool) { return static_cast<std::uint64_t>(energy(static_cast<power::Domain>(i)) * 1e9); });
  // P-states as the reader's own time sees them (a decoupled core may be ahead of the kernel).
  auto seen = [this](unsigned i) { return dom_[i].busy && dom_[i].due <= now() ? dom_[i].target : dom_[i].current; };
  regs_.on_read(R::PSTATE, [=](unsigned i, bool) {
    const DomainState& dm = dom_[i];
    const bool busy = dm.busy && dm.due > now();
    return std::uint64_t{seen(i)} | (std::uint64_t{dm.target} << R::PSTATE_f::TARGET_SHIFT) |
           (std::uint64_t{busy} << R::PSTATE_f::BUSY_SHIFT) |
           (std::uint64_t(config_.pstates[i].size()) << R::PSTATE_f::COUNT_SHIFT);
  });
  regs_.on_read(R::DOMAIN_THROTTLES, [this](unsigned i, bool) { return dom_[i].throttles; });
  regs_.on_read(R::FREQ_PERMILLE, [=](unsigned i, bool) {
    return static_cast<std::uint64_t>(std::llround(config_.pstates[i][seen(i)].scale * 1e3));
  });
  regs_.on_read(R::VOLTAGE_MV, [=](unsigned i, bool) {
    return static_cast<std::uint64_t>(std::llround(config_.pstates[i][seen(i)].volts * 1e3));
  });
  regs_.on_read(R::PSTATE_TABLE, [this](unsigned i, bool) -> std::uint64_t {
    const auto& ps = config_.pstates[i / kMaxPstates];
    if (i % kMaxPstates >= ps.size()) return 0;
    const Pstate& s = ps[i % kMaxPstates];
    return static_cast<std::uint64_t>(std::llround(s.scale * 1e3)) |
           (static_cast<std::uint64_t>(std::llround(s.volts * 1e3)) << R::PSTATE_TABLE_f::VOLTAGE_MV_SHIFT);
  });
  regs_.on_read(R::TRANSITION_NS, [this](unsigned i, bool) { return static_cast<std::uint64_t>(config_.transition[i].to_seconds() * 1e9); });

  regs_.on_write(R::CTRL, [this](RegisterBank::Write& w) {
    firmware_ = w.next & R::CTRL_f::FIRMWARE_MASK;
    reconfigured_.notify(sc_core::SC_ZERO_TIME);
    return true;
  });
  regs_.on_write(R::CAP_MW, [this](RegisterBank::Write& w) {
    cap_ = static_cast<double>(w.next) * 1e-3;
    reconfigured_.notify(sc_core::SC_ZERO_TIME);
    return true;
  });
  regs_.on_write(R::LIMIT_MW, [this](RegisterBank::Write& w) {
    dom_[w.index].limit = static_cast<double>(w.next) * 1e-3;
    reconfigured_.notify(sc_core::SC_ZERO_TIME);
    return true;
  });
  regs_.on_write(R::OVERCAP_NS, [this](RegisterBank::Write& w) {
    config_.overcap_time = sc_core::sc_time(static_cast<double>(w.next), sc_core::SC_NS);
    return true;
  });
  regs_.on_write(R::PSTATE_REQ, [this](RegisterBank::Write& w) {
    const auto d = static_cast<power::Domain>(w.index);
    if (!firmware_) {
      log::guest_error(path(), "power/pstate-auto", "PSTATE_REQ[{}] written while the control loop owns the P-states (set CTRL.FIRMWARE first)",
                       power::domain_name(d));
      return false;
    }
    if (w.next >= config_.pstates[d].size()) {
      log::guest_error(path(), "power/pstate-range", "PSTATE_REQ[{}] = {}: the domain has P-states 0 to {}", power::domain_name(d), w.next,
                       config_.pstates[d].size() - 1);
      return false;
    }
    start(d, static_cast<unsigned>(w.next), now());  // from the core's own time
    return true;
  });
  regs_.on_write(R::IRQ_STATUS, [this](RegisterBank::Write& w) {
    w.next = w.old & ~w.data;
    irq_out.write(w.next & regs_.get(R::IRQ_ENABLE));
    return true;
  });
  regs_.on_write(R::IRQ_ENABLE, [this](RegisterBank::Write& w) {
    irq_out.write(regs_.get(R::IRQ_STATUS) & w.next);
    return true;
  });

  for (unsigned d = 0; d < kDomains; ++d) {
    const std::string dom = power::domain_name(d);
    w_pstate_[d] = waves::declare(waves::clocks, path(), dom + "_pstate", 4);
    w_freq_[d] = waves::declare(waves::clocks, path(), dom + "_freq", 0);
    w_volts_[d] = waves::declare(waves::clocks, path(), dom + "_volts", 0);
    w_watts_[d] = waves::declare(waves::power, path(), dom + "_w", 0);
    show_clock(static_cast<power::Domain>(d), sc_core::SC_ZERO_TIME);
  }
  w_total_ = waves::declare(waves::power, path(), "total_w", 0);

  SC_HAS_PROCESS(PowerManager);
  SC_THREAD(loop);
  SC_METHOD(transitions);
  for (DomainState& d : dom_) sensitive << d.done;
  dont_initialize();
}

void PowerManager::raise(std::uint64_t cause) {
  regs_.set(R::IRQ_STATUS, regs_.get(R::IRQ_STATUS) | cause);
  irq_out.write(regs_.get(R::IRQ_STATUS) & regs_.get(R::IRQ_ENABLE));
}

std::uint64_t PowerManager::throttles() const {
  std::uint64_t n = 0;
  for (const DomainState& d : dom_) n += d.throttles;
  return n;
}

double PowerManager::energy(power::Domain d) const {
  return meter_.dynamic_joules(d) + meter_.static_joules(d, sc_core::sc_time_stamp());
}

double PowerManager::window_watts(std::size_t i, power::Domain d) const {
  const double w = meter_.window().to_seconds();
  const auto& win = meter_.windows();
  const double dyn = i < win.size() ? win[i][d] / w : 0.0;
  // Leakage: at the voltage of the window's end (changes are rare next to windows).
  return dyn + meter_.table().static_power(d);
}

double PowerManager::window_watts(std::size_t i) const {
  double p = 0;
  for (unsigned d = 0; d < kDomains; ++d) p += window_watts(i, static_cast<power::Domain>(d));
  return p;
}

sc_core::sc_time PowerManager::response_time() const {
  sc_core::sc_time slowest = sc_core::SC_ZERO_TIME;
  for (const auto& t : config_.transition) slowest = std::max(slowest, t);
  return meter_.window() + slowest;
}

void PowerManager::set_cap(double watts) {
  cap_ = std::max(0.0, watts);
  regs_.set(R::CAP_MW, static_cast<std::uint64_t>(std::llround(cap_ * 1e3)));
  reconfigured_.notify(sc_core::SC_ZERO_TIME);
}

void PowerManager::set_limit(power::Domain d, double watts) {
  dom_[d].limit = std::max(0.0, watts);
  regs_.set(R::LIMIT_MW, static_cast<std::uint64_t>(std::llround(dom_[d].limit * 1e3)), d);
  reconfigured_.notify(sc_core::SC_ZERO_TIME);
}

void PowerManager::set_firmware_control(bool on) {
  firmware_ = on;
  regs_.set(R::CTRL, on ? 1 : 0);
  reconfigured_.notify(sc_core::SC_ZERO_TIME);
}

bool PowerManager::request(power::Domain d, unsigned s) {
  if (d >= kDomains || s >= config_.pstates[d].size()) return false;
  start(d, s, sc_core::sc_time_stamp());
  return true;
}

void PowerManager::start(power::Domain d, unsigned s, const sc_core::sc_time& at) {
  DomainState& dm = dom_[d];
  if (dm.busy) {  // after the one under way
    dm.queued = s;
    return;
  }
  if (s == dm.current) return;
  dm.target = s;
  dm.busy = true;
  dm.due = std::max(at, sc_core::sc_time_stamp()) + config_.transition[d];
  dm.done.notify(dm.due - sc_core::sc_time_stamp());
}

void PowerManager::transitions() {
  for (unsigned d = 0; d < kDomains; ++d)
    if (dom_[d].busy && dom_[d].due <= sc_core::sc_time_stamp()) transition(static_cast<power::Domain>(d));
}

void PowerManager::transition(power::Domain d) {
  DomainState& dm = dom_[d];
  const sc_core::sc_time now = sc_core::sc_time_stamp();
  const Pstate& s = config_.pstates[d][dm.target];
  dm.residency[dm.current] += (now - dm.since).to_seconds();
  dm.since = now;
  dm.previous = dm.current;
  meter_.clock(d).set(s.scale, now);
  meter_.set_volts(d, s.volts, now);
  dm.current = dm.target;
  show_clock(d, now);
  dm.busy = false;
  ++dm.transitions;
  raise(R::IRQ_STATUS_f::PSTATE_DONE_MASK);
  if (dm.queued != ~0u) {
    const unsigned next = dm.queued;
    dm.queued = ~0u;
    start(d, next, sc_core::sc_time_stamp());
  }
}

bool PowerManager::active() const {
  if (cap_ > 0) return true;  // the loop watches the cap (and raises OVERCAP) in either mode
  if (firmware_) return false;
  for (const DomainState& d : dom_)
    if (d.limit > 0) return true;
  return false;
}

void PowerManager::loop() {
  for (;;) {
    while (!active()) sc_core::wait(reconfigured_);
    // The end of the present window, then every window.
    const sc_core::sc_time w = meter_.window();
    const auto k = static_cast<std::uint64_t>(sc_core::sc_time_stamp() / w) + 1;
    sc_core::wait(w * static_cast<double>(k) - sc_core::sc_time_stamp(), reconfigured_);
    if (sc_core::sc_time_stamp() < w * static_cast<double>(k)) continue;  // reconfigured: start over
    control(k - 1);
    // Rest while the chip does nothing and nothing is throttled: the meter wakes the loop.
    bool rest = meter_.windows().size() <= k && debt_ == 0 && !overcap_flagged_;
    for (unsigned d = 0; d < kDomains && rest; ++d) rest = !dom_[d].busy && dom_[d].current == config_.initial[d];
    if (rest && sim::stop_flag(path()) == false) {
      meter_.on_next_charge([this] { activity_.notify(sc_core::SC_ZERO_TIME); });
      sc_core::wait(activity_ | reconfigured_);
      meter_.on_next_charge(nullptr);
    }
  }
}

void PowerManager::control(std::size_t k) {
  const double w = meter_.window().to_seconds();
  std::array<double, kDomains> dyn{}, leak{};
  double total = 0;
  for (unsigned d = 0; d < kDomains; ++d) {
    const auto dom = static_cast<power::Domain>(d);
    dyn[d] = window_watts(k, dom) - meter_.table().static_power(dom);
    leak[d] = meter_.table().static_power(dom);
    total += dyn[d] + leak[d];
  }
  // The cap: over it for too long raises OVERCAP; energy over it is repaid.
  if (cap_ > 0 && total > cap_) {
    over_for_ += meter_.window();
    if (over_for_ > config_.overcap_time && !overcap_flagged_) {
      overcap_flagged_ = true;
      ++overcap_events_;
      raise(R::IRQ_STATUS_f::OVERCAP_MASK);
      log::emit(path(), log::Level::info, fmt::format("over the {:.3f} W cap for {}: {:.3f} W", cap_, over_for_.to_string(), total));
    }
  } else {
    over_for_ = sc_core::SC_ZERO_TIME;
    overcap_flagged_ = false;
  }
  debt_ = cap_ > 0 ? std::max(0.0, debt_ + (total - cap_) * w) : 0.0;
  if (firmware_) return;

  // The state each domain ran at through the window; a window with a
  // change inside it measured a mix, and its domain waits for a clean one.
  const sc_core::sc_time from = meter_.window() * static_cast<double>(k), to = from + meter_.window();
  std::array<unsigned, kDomains> ran{};
  std::array<bool, kDomains> clean{};
  for (unsigned d = 0; d < kDomains; ++d) {
    ran[d] = dom_[d].since <= from ? dom_[d].current : dom_[d].previous;
    clean[d] = dom_[d].since <= from || dom_[d].since >= to;
  }
  // Predicted power of domain d in P-state s, from what it drew in the window.
  auto predict = [&](unsigned d, unsigned s) {
    const Pstate& now = config_.pstates[d][ran[d]];
    const Pstate& p = config_.pstates[d][s];
    const double v = p.volts / now.volts;
    return dyn[d] * (p.scale / now.scale) * v * v + leak[d] * v * v;
  };
  std::array<unsigned, kDomains> pick{};
  for (unsigned d = 0; d < kDomains; ++d) pick[d] = dom_[d].busy ? dom_[d].target : dom_[d].current;
  auto movable = [&](unsigned d) { return !dom_[d].busy && clean[d]; };
  const unsigned last = kMaxPstates;
  // Each domain's own limit: its fastest state that fits.
  std::array<unsigned, kDomains> fastest{};
  for (unsigned d = 0; d < kDomains; ++d) {
    const unsigned n = static_cast<unsigned>(config_.pstates[d].size());
    if (dom_[d].limit > 0)
      while (fastest[d] + 1 < n && predict(d, fastest[d]) > dom_[d].limit * (1 - config_.margin)) ++fastest[d];
    if (movable(d)) pick[d] = std::max(pick[d], fastest[d]);
  }
  // The chip's cap, less the margin and the debt (repaid over four response times).
  if (cap_ > 0) {
    const double target = cap_ * (1 - config_.margin) - debt_ / (4 * response_time().to_seconds());
    auto sum = [&] {
      double s = 0;
      for (unsigned d = 0; d < kDomains; ++d) s += predict(d, pick[d]);
      return s;
    };
    // Down: the step that saves the most, until it fits.
    while (sum() > target) {
      unsigned best = last;
      double saving = 0;
      for (unsigned d = 0; d < kDomains; ++d) {
        if (!movable(d) || pick[d] + 1 >= config_.pstates[d].size()) continue;
        const double s = predict(d, pick[d]) - predict(d, pick[d] + 1);
        if (s > saving) saving = s, best = d;
      }
      if (best == last) break;
      ++pick[best];
    }
    // Up: the slowest domain first, while it still fits.
    for (bool moved = true; moved;) {
      moved = false;
      unsigned best = last;
      for (unsigned d = 0; d < kDomains; ++d) {
        if (!movable(d) || pick[d] <= fastest[d]) continue;
        if (sum() - predict(d, pick[d]) + predict(d, pick[d] - 1) > target) continue;
        if (best == last || config_.pstates[d][pick[d]].scale < config_.pstates[best][pick[best]].scale) best = d;
      }
      if (best != last) --pick[best], moved = true;
    }
  } else {
    for (unsigned d = 0; d < kDomains; ++d)
      if (movable(d)) pick[d] = fastest[d];
  }
  for (unsigned d = 0; d < kDomains; ++d) {
    if (!movable(d) || pick[d] == dom_[d].current) continue;
    if (pick[d] > dom_[d].current) {
      ++dom_[d].throttles;
      raise(R::IRQ_STATUS_f::THROTTLE_MASK);
    }
    start(static_cast<power::Domain>(d), pick[d], sc_core::sc_time_stamp());
  }
}

void PowerManager::show_clock(power::Domain d, const sc_core::sc_time& at) {
  const Pstate& s = config_.pstates[d][dom_[d].current];
  waves::change(w_pstate_[d], dom_[d].current, at);
  waves::change_real(w_freq_[d], s.scale, at);
  waves::change_real(w_volts_[d], s.volts, at);
  const std::string dom = power::domain_name(d);
  trace::counter(kTrace, path(), dom + " freq", at, s.scale);
  trace::counter(kTrace, path(), dom + " V", at, s.volts);
}

void PowerManager::publish() {
  if (published_ || (!waves::on() && !trace::on(kTrace))) return;
  published_ = true;
  const auto& windows = meter_.windows();
  std::array<std::vector<double>, kDomains> leak;
  for (unsigned d = 0; d < kDomains; ++d) leak[d] = meter_.static_watts(static_cast<power::Domain>(d));
  // At most 100 000 points per counter: longer runs average neighbouring windows.
  const std::size_t step = std::max<std::size_t>(1, (windows.size() + 99999) / 100000);
  for (std::size_t i = 0; i < windows.size(); i += step) {
    const std::size_t n = std::min(step, windows.size() - i);
    const sc_core::sc_time at = meter_.window() * static_cast<double>(i);
    double total = 0;
    for (unsigned d = 0; d < kDomains; ++d) {
      double w = 0;
      for (std::size_t k = i; k < i + n; ++k) w += windows[k][d] / meter_.window().to_seconds() + leak[d][k];
      w /= static_cast<double>(n);
      total += w;
      waves::change_real(w_watts_[d], w, at);
      trace::counter(kTrace, path(), std::string(power::domain_name(d)) + " W", at, w);
    }
    waves::change_real(w_total_, total, at);
    trace::counter(kTrace, path(), "total W", at, total);
  }
}

void PowerManager::end_of_simulation() {
  publish();
  if (config_.csv.empty()) return;
  write_csv(config_.csv);
}

void PowerManager::write_csv(const std::string& file) const {
  std::ofstream out(file);
  out << "start_us";
  for (unsigned d = 0; d < kDomains; ++d) out << ',' << power::domain_name(d) << "_w";
  out << ",total_w\n";
  const double w = meter_.window().to_seconds();
  const auto& windows = meter_.windows();
  std::array<std::vector<double>, kDomains> leak;
  for (unsigned d = 0; d < kDomains; ++d) leak[d] = meter_.static_watts(static_cast<power::Domain>(d));
  for (std::size_t i = 0; i < windows.size(); ++i) {
    out << i * w * 1e6;
    double total = 0;
    for (unsigned d = 0; d < kDomains; ++d) {
      const double watts = windows[i][d] / w + leak[d][i];
      total += watts;
      out << ',' << watts;
    }
    out << ',' << total << '\n';
  }
  if (!out) log::emit(path(), log::Level::warning, "cannot write " + file);
}

void PowerManager::report_stats(nlohmann::ordered_json& out) const {
  MmioTarget::report_stats(out);
  const sc_core::sc_time now = sim::end_time();  // the run's end (a decoupled core's exit may be ahead of the kernel)
  const double seconds = now.to_seconds(), w = meter_.window().to_seconds();
  double total = 0;
  for (unsigned d = 0; d < kDomains; ++d) {
    const auto dom = static_cast<power::Domain>(d);
    const std::string k = power::domain_name(dom);
    const double dyn = meter_.dynamic_joules(dom), stat = meter_.static_joules(dom, now);
    const auto leak = meter_.static_watts(dom);
    double peak = 0;
    for (std::size_t i = 0; i < meter_.windows().size(); ++i) peak = std::max(peak, meter_.windows()[i][d] / w + leak[i]);
    out[k + "_dynamic_j"] = dyn;
    out[k + "_static_j"] = stat;
    out[k + "_average_w"] = seconds > 0 ? (dyn + stat) / seconds : 0.0;
    out[k + "_peak_w"] = peak;
    out[k + "_pstate"] = dom_[d].current;
    out[k + "_throttles"] = dom_[d].throttles;
    out[k + "_transitions"] = dom_[d].transitions;
    // Time in each P-state, as a fraction of the run.
    auto residency = nlohmann::ordered_json::array();
    for (std::size_t s = 0; s < config_.pstates[d].size(); ++s) {
      double t = dom_[d].residency[s] + (s == dom_[d].current ? std::max(0.0, (now - dom_[d].since).to_seconds()) : 0.0);
      residency.push_back(seconds > 0 ? t / seconds : 0.0);
    }
    out[k + "_pstate_residency"] = residency;
    total += dyn + stat;
  }
  out["total_j"] = total;
  out["average_w"] = seconds > 0 ? total / seconds : 0.0;
  out["cap_w"] = cap_;
  out["throttles"] = throttles();
  out["overcap_events"] = overcap_events_;
  for (const power::Event ev : power::events_in_order()) {
    out["events_" + power::event_name(ev)] = meter_.count(ev);
  }
}

TESSERA_REGISTER_IP("power", PowerManager,
                    "power manager: energy per event, leakage per domain, P-states, a power cap and its control loop, telemetry",
                    R::kBlock.window);

}  // namespace tessera::power
