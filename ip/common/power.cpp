#include "common/power.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include "common/log.hpp"

namespace tessera::power {

namespace {

struct Registry {
  std::vector<EventInfo> events;
  std::vector<DomainInfo> domains;
  std::vector<Domain> event_domain;  // resolved; kMaxDomains until then
  std::vector<Event> in_order;       // rebuilt when events are added
};

Registry make_registry() {
  Registry r;
  // The chip's domains (power.hpp), leakage at the nominal voltage.
  r.domains = {{"tiles", "the tiles: cores, engines, scratchpads", 2.4, 0.75},
               {"noc", "the network-on-chip", 0.3, 0.75},
               {"hbm", "the HBM stacks, controllers and PHYs", 2.0, 1.1},
               {"links", "the chip-to-chip SerDes links", 1.0, 0.9},
               {"cp", "the control processor's subsystem", 0.05, 0.75}};
  return r;
}

Registry& registry() {
  static Registry r = make_registry();
  return r;
}

}  // namespace

Event declare_event(const char* name, const char* domain, double default_pj, const char* doc) {
  Registry& r = registry();
  for (Event e = 0; e < r.events.size(); ++e)
    if (r.events[e].name == name) log::internal("power", "energy event \"{}\" declared twice", name);  // elaboration-only
  r.events.push_back({name, domain, doc, default_pj});
  r.event_domain.push_back(kMaxDomains);
  r.in_order.clear();
  return static_cast<Event>(r.events.size() - 1);
}

Domain declare_domain(const char* name, double static_w, double nominal_v, const char* doc) {
  Registry& r = registry();
  for (const DomainInfo& d : r.domains)
    if (d.name == name) log::internal("power", "power domain \"{}\" declared twice", name);  // elaboration-only
  if (r.domains.size() >= kMaxDomains) log::internal("power", "more than {} power domains", kMaxDomains);  // elaboration-only
  r.domains.push_back({name, doc, static_w, nominal_v});
  return static_cast<Domain>(r.domains.size() - 1);
}

const std::vector<EventInfo>& events() { return registry().events; }
const std::vector<DomainInfo>& domains() { return registry().domains; }
unsigned event_count() { return static_cast<unsigned>(registry().events.size()); }
unsigned domain_count() { return static_cast<unsigned>(registry().domains.size()); }

Domain domain(const std::string& name) {
  const Registry& r = registry();
  for (Domain d = 0; d < r.domains.size(); ++d)
    if (r.domains[d].name == name) return d;
  log::internal("power", "no power domain \"{}\" is declared (the power manager declares them)", name);  // elaboration-only
}

Event event(const std::string& name) {
  const Registry& r = registry();
  for (Event e = 0; e < r.events.size(); ++e)
    if (r.events[e].name == name) return e;
  log::internal("power", "no energy event \"{}\" is declared", name);  // elaboration-only
}

const std::string& event_name(Event e) { return registry().events.at(e).name; }
const std::string& domain_name(Domain d) { return registry().domains.at(d).name; }

Domain domain_of(Event e) {
  Registry& r = registry();
  Domain& d = r.event_domain.at(e);
  if (d == kMaxDomains) d = domain(r.events[e].domain);
  return d;
}

const std::vector<Event>& events_in_order() {
  Registry& r = registry();
  if (r.in_order.size() != r.events.size()) {
    r.in_order.resize(r.events.size());
    for (Event e = 0; e < r.events.size(); ++e) r.in_order[e] = e;
    std::sort(r.in_order.begin(), r.in_order.end(), [](Event a, Event b) {
      const Domain da = domain_of(a), db = domain_of(b);
      return da != db ? da < db : event_name(a) < event_name(b);
    });
  }
  return r.in_order;
}

Table::Table() {
  for (Domain d = 0; d < domain_count(); ++d) {
    static_w[d] = domains()[d].static_w;
    volts[d] = nominal[d] = domains()[d].nominal_v;
  }
  cover();
}

void Table::cover() {
  for (Event e = static_cast<Event>(pj.size()); e < event_count(); ++e) pj.push_back(events()[e].default_pj);
}

double Table::static_power(Domain d) const {
  const double r = nominal[d] > 0 ? volts[d] / nominal[d] : 1.0;
  return static_w[d] * r * r;
}

std::uint64_t Clock::nominal(const sc_core::sc_time& t) const {
  const std::uint64_t v = t.value();
  if (scale_ == 1.0) return v >= base_t_ ? base_n_ + (v - base_t_) : base_n_ - std::min(base_n_, base_t_ - v);
  if (v >= base_t_) return base_n_ + static_cast<std::uint64_t>(std::llround(static_cast<double>(v - base_t_) * scale_));
  const auto back = static_cast<std::uint64_t>(std::llround(static_cast<double>(base_t_ - v) * scale_));
  return base_n_ - std::min(base_n_, back);
}

sc_core::sc_time Clock::at(std::uint64_t n) const {
  if (scale_ == 1.0) return sc_core::sc_time::from_value(n >= base_n_ ? base_t_ + (n - base_n_) : base_t_ - std::min(base_t_, base_n_ - n));
  if (n >= base_n_)
    return sc_core::sc_time::from_value(base_t_ + static_cast<std::uint64_t>(std::ceil(static_cast<double>(n - base_n_) / scale_ - 1e-9)));
  const auto back = static_cast<std::uint64_t>(static_cast<double>(base_n_ - n) / scale_);
  return sc_core::sc_time::from_value(base_t_ - std::min(base_t_, back));
}

sc_core::sc_time Clock::span(const sc_core::sc_time& nominal) const {
  if (scale_ == 1.0) return nominal;
  return sc_core::sc_time::from_value(static_cast<std::uint64_t>(std::llround(static_cast<double>(nominal.value()) / scale_)));
}

void Clock::set(double scale, const sc_core::sc_time& when) {
  if (!(scale > 0) || scale == scale_) return;
  base_n_ = nominal(when);
  base_t_ = std::max<std::uint64_t>(base_t_, when.value());
  scale_ = scale;
  ++changes_;
}

void Meter::set_volts(Domain d, double v, const sc_core::sc_time& when) {
  if (d >= domain_count() || !(v > 0) || v == table_.volts[d]) return;
  auto& steps = steps_[d];
  const sc_core::sc_time at = std::max(steps.empty() ? sc_core::SC_ZERO_TIME : steps.back().at, when);
  if (steps.empty()) steps.push_back({sc_core::SC_ZERO_TIME, table_.static_power(d)});
  table_.volts[d] = v;
  steps.push_back({at, table_.static_power(d)});
}

void Meter::set_window(const sc_core::sc_time& w) {
  set_window_length(w > sc_core::SC_ZERO_TIME ? w : sc_core::sc_time(1, sc_core::SC_US));
  windows_.clear();
}

void Meter::set_window_length(const sc_core::sc_time& w) {
  window_ = w;
  per_window_ = 1.0 / w.to_seconds();
  limit_ = w * static_cast<double>(kMaxWindows);
}

void Meter::charge(Event e, double count, const sc_core::sc_time& start, const sc_core::sc_time& end) {
  if (e >= event_count() || count <= 0) return;
  if (e >= counts_.size()) {  // an event declared after the meter was made (a plugin's)
    table_.cover();
    counts_.resize(event_count(), 0.0);
    scaled_.resize(event_count(), 0.0);
  }
  const Domain d = domain_of(e);
  const double r = table_.nominal[d] > 0 ? table_.volts[d] / table_.nominal[d] : 1.0;
  const double scaled = r == 1.0 ? count : count * r * r;
  counts_[e] += count;
  scaled_[e] += scaled;
  if (wake_) {
    auto f = std::move(wake_);
    wake_ = nullptr;
    f();
  }
  bin(d, scaled * table_.pj[e] * 1e-12, start, end);
}

void Meter::bin(Domain d, double joules, const sc_core::sc_time& start, const sc_core::sc_time& end) {
  // A long run keeps at most kMaxWindows windows: twice as long, half as many, as often as needed.
  while ((end > start ? end : start) >= limit_) {
    for (std::size_t i = 0; 2 * i < windows_.size(); ++i)
      for (unsigned k = 0; k < kMaxDomains; ++k)
        windows_[i][k] = windows_[2 * i][k] + (2 * i + 1 < windows_.size() ? windows_[2 * i + 1][k] : 0.0);
    windows_.resize((windows_.size() + 1) / 2);
    set_window_length(window_ * 2.0);
  }
  if (end <= start) {  // at one moment: one window
    const std::size_t first = static_cast<std::size_t>(start.value() / window_.value());
    if (first >= windows_.size()) windows_.resize(first + 1, std::array<double, kMaxDomains>{});
    windows_[first][d] += joules;
    return;
  }
  const double s = start.to_seconds() * per_window_;  // in windows
  const std::size_t first = static_cast<std::size_t>(s);
  const double e = end.to_seconds() * per_window_;
  std::size_t last = static_cast<std::size_t>(e);
  if (static_cast<double>(last) == e && last > first) --last;  // ends on a boundary
  if (last >= windows_.size()) windows_.resize(last + 1, std::array<double, kMaxDomains>{});
  if (first == last) {
    windows_[first][d] += joules;
    return;
  }
  for (std::size_t i = first; i <= last; ++i) {
    const double lo = std::max(s, double(i)), hi = std::min(e, double(i + 1));
    if (hi > lo) windows_[i][d] += joules * (hi - lo) / (e - s);
  }
}

double Meter::dynamic_joules(Domain d) const {
  // From the counts, so the total is exactly the activity times the energy per event.
  double j = 0;
  for (Event e = 0; e < counts_.size(); ++e)
    if (domain_of(e) == d) j += scaled_[e] * table_.pj[e] * 1e-12;
  return j;
}

double Meter::dynamic_joules() const {
  double j = 0;
  for (Domain d = 0; d < domain_count(); ++d) j += dynamic_joules(d);
  return j;
}

double Meter::static_joules(Domain d, const sc_core::sc_time& until) const {
  const auto& steps = steps_[d];
  if (steps.empty()) return table_.static_power(d) * until.to_seconds();
  double j = 0;
  for (std::size_t i = 0; i < steps.size() && steps[i].at < until; ++i) {
    const sc_core::sc_time to = i + 1 < steps.size() ? std::min(until, steps[i + 1].at) : until;
    j += steps[i].watts * (to - steps[i].at).to_seconds();
  }
  return j;
}

std::vector<double> Meter::static_watts(Domain d) const {
  const auto& steps = steps_[d];
  if (steps.empty()) return std::vector<double>(windows_.size(), table_.static_power(d));
  std::vector<double> out(windows_.size(), 0.0);
  const double w = window_.to_seconds(), end = static_cast<double>(out.size()) * w;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const double from = steps[i].at.to_seconds(), to = i + 1 < steps.size() ? steps[i + 1].at.to_seconds() : end;
    for (auto k = static_cast<std::size_t>(from / w); k < out.size() && static_cast<double>(k) * w < to; ++k) {
      const double lo = std::max(from, static_cast<double>(k) * w), hi = std::min(to, static_cast<double>(k + 1) * w);
      if (hi > lo) out[k] += steps[i].watts * (hi - lo) / w;
    }
  }
  return out;
}

double Meter::total_joules(const sc_core::sc_time& until) const {
  double j = dynamic_joules();
  for (Domain d = 0; d < domain_count(); ++d) j += static_joules(d, until);
  return j;
}

namespace {
std::map<std::string, Meter>& meters() {
  static std::map<std::string, Meter> m;
  return m;
}
}  // namespace

Meter& meter(const std::string& path) {
  // A chip of a system: "chipN." leads the path.
  const auto dot = path.find('.');
  std::string key;
  if (path.rfind("chip", 0) == 0 && dot != std::string::npos && dot > 4 &&
      path.find_first_not_of("0123456789", 4) == dot)
    key = path.substr(0, dot);
  return meters()[key];
}

void reset() { meters().clear(); }

}  // namespace tessera::power
