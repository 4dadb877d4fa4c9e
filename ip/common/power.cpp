#include "common/power.hpp"

#include <cmath>
#include <map>

namespace tessera::power {

const char* name(Event e) {
  static const char* const names[] = {"mac_bf16",       "mac_fp16",      "mac_fp8",        "mac_int8",
                                      "vector_op",      "vector_special", "spm_byte",      "tile_instruction",
                                      "noc_flit_hop",   "hbm_activate",  "hbm_read_byte",  "hbm_write_byte",
                                      "hbm_refresh",    "link_bit",      "cp_instruction"};
  return e < kEvents ? names[e] : "?";
}

const char* name(Domain d) {
  static const char* const names[] = {"tiles", "noc", "hbm", "links", "cp"};
  return d < kDomains ? names[d] : "?";
}

Domain domain_of(Event e) {
  switch (e) {
    case noc_flit_hop: return noc;
    case hbm_activate:
    case hbm_read_byte:
    case hbm_write_byte:
    case hbm_refresh: return hbm;
    case link_bit: return links;
    case cp_instruction: return cp;
    default: return tiles;
  }
}

Table::Table() {
  // Where these come from: ip/power/README.md.
  pj[mac_bf16] = 0.25;
  pj[mac_fp16] = 0.25;
  pj[mac_fp8] = 0.12;
  pj[mac_int8] = 0.06;
  pj[vector_op] = 0.6;
  pj[vector_special] = 2.5;
  pj[spm_byte] = 0.15;
  pj[tile_instruction] = 10;
  pj[noc_flit_hop] = 25;
  pj[hbm_activate] = 900;
  pj[hbm_read_byte] = 31;
  pj[hbm_write_byte] = 31;
  pj[hbm_refresh] = 30000;
  pj[link_bit] = 3;
  pj[cp_instruction] = 25;
  static_w = {2.4, 0.3, 2.0, 1.0, 0.05};
  volts = nominal = {0.75, 0.75, 1.1, 0.9, 0.75};
}

double Table::static_power(Domain d) const {
  const double r = nominal[d] > 0 ? volts[d] / nominal[d] : 1.0;
  return static_w[d] * r * r;
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
  if (e >= kEvents || count <= 0) return;
  counts_[e] += count;
  bin(domain_of(e), count * table_.pj[e] * 1e-12, start, end);
}

void Meter::bin(Domain d, double joules, const sc_core::sc_time& start, const sc_core::sc_time& end) {
  // A long run keeps at most kMaxWindows windows: twice as long, half as many, as often as needed.
  while ((end > start ? end : start) >= limit_) {
    for (std::size_t i = 0; 2 * i < windows_.size(); ++i)
      for (unsigned k = 0; k < kDomains; ++k)
        windows_[i][k] = windows_[2 * i][k] + (2 * i + 1 < windows_.size() ? windows_[2 * i + 1][k] : 0.0);
    windows_.resize((windows_.size() + 1) / 2);
    set_window_length(window_ * 2.0);
  }
  const double s = start.to_seconds() * per_window_;  // in windows
  const std::size_t first = static_cast<std::size_t>(s);
  if (end <= start) {  // at one moment: one window
    if (first >= windows_.size()) windows_.resize(first + 1, std::array<double, kDomains>{});
    windows_[first][d] += joules;
    return;
  }
  const double e = end.to_seconds() * per_window_;
  std::size_t last = static_cast<std::size_t>(e);
  if (static_cast<double>(last) == e && last > first) --last;  // ends on a boundary
  if (last >= windows_.size()) windows_.resize(last + 1, std::array<double, kDomains>{});
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
  for (unsigned e = 0; e < kEvents; ++e)
    if (domain_of(static_cast<Event>(e)) == d) j += counts_[e] * table_.pj[e] * 1e-12;
  return j;
}

double Meter::dynamic_joules() const {
  double j = 0;
  for (unsigned d = 0; d < kDomains; ++d) j += dynamic_joules(static_cast<Domain>(d));
  return j;
}

double Meter::static_joules(Domain d, const sc_core::sc_time& until) const {
  return table_.static_power(d) * until.to_seconds();
}

double Meter::total_joules(const sc_core::sc_time& until) const {
  double j = dynamic_joules();
  for (unsigned d = 0; d < kDomains; ++d) j += static_joules(static_cast<Domain>(d), until);
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
