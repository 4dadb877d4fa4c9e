#include "common/sim.hpp"

#include <deque>
#include <systemc>

#include "common/log.hpp"

namespace tessera::sim {
namespace {
std::optional<int> g_code;
std::string g_reason;
sc_core::sc_time g_when;
bool g_stop = false;
bool g_windowed = false;
struct Domain {
  std::string name;
  bool stopped = false;
  // Windowed runs: the exit it asked for.
  bool exited = false;
  int code = 0;
  std::uint64_t when = 0;
  std::string reason;
};
std::vector<DomainExit> g_new_exits;
std::deque<Domain> g_domains;  // stable addresses: processors hold their flags

Domain* domain_of(const std::string& path) {
  const std::string first = path.substr(0, path.find('.'));
  for (Domain& d : g_domains)
    if (d.name == first) return &d;
  return nullptr;
}

void stop_all(int code, const std::string& reason, const sc_core::sc_time& when) {
  g_code = code;
  g_when = std::max(g_when, when);
  g_reason = reason;
  g_stop = true;
  for (Domain& d : g_domains) d.stopped = true;
  if (sc_core::sc_is_running()) sc_core::sc_stop();
}
}  // namespace

void request_exit(int code, const std::string& who, const std::string& why, const sc_core::sc_time& when) {
  if (g_code) return;
  log::info(who, "exit requested with code {}: {}", code, why);
  Domain* d = domain_of(who);
  if (g_windowed && d) {  // the run ends at the window's end
    if (d->exited) return;
    d->stopped = true;
    g_new_exits.push_back({static_cast<unsigned>(d - &g_domains.front()), code,
                           std::max(when, sc_core::sc_time_stamp()).value(), who + ": " + why});
    note_exit(g_new_exits.back());
    return;
  }
  if (!d || code != 0) {
    stop_all(code, who + ": " + why, when);
    return;
  }
  if (d->stopped) return;
  d->stopped = true;
  g_when = std::max(g_when, when);
  g_reason = who + ": " + why;
  for (const Domain& o : g_domains)
    if (!o.stopped) return;
  stop_all(0, g_domains.size() > 1 ? "every chip's firmware ended (the last: " + g_reason + ")" : g_reason,
           g_when);
}

void set_domains(const std::vector<std::string>& names) {
  g_domains.clear();
  for (const std::string& n : names) {
    g_domains.emplace_back();
    g_domains.back().name = n;
  }
}

const bool& stop_flag(const std::string& path) {
  if (Domain* d = domain_of(path)) return d->stopped;
  return g_stop;
}

void set_windowed(bool on) { g_windowed = on; }
bool windowed() { return g_windowed; }

std::vector<DomainExit> take_exits() {
  std::vector<DomainExit> out;
  out.swap(g_new_exits);
  return out;
}

void note_exit(const DomainExit& e) {
  if (e.domain >= g_domains.size()) return;
  Domain& d = g_domains[e.domain];
  d.stopped = d.exited = true;
  d.code = e.code;
  d.when = e.when;
  d.reason = e.reason;
}

bool windowed_end() {
  if (g_code) return true;
  const Domain* first_error = nullptr;  // the earliest non-zero exit (by time, then chip)
  const Domain* last = nullptr;         // the latest exit (by time, then chip)
  bool all = !g_domains.empty();
  for (const Domain& d : g_domains) {
    if (!d.exited) {
      all = false;
      continue;
    }
    if (d.code != 0 && (!first_error || d.when < first_error->when)) first_error = &d;
    if (!last || d.when >= last->when) last = &d;
  }
  if (first_error) {
    g_code = first_error->code;
    g_reason = first_error->reason;
    g_when = sc_core::sc_time::from_value(first_error->when);
  } else if (all) {
    g_code = 0;
    g_reason = g_domains.size() > 1 ? "every chip's firmware ended (the last: " + last->reason + ")" : last->reason;
    g_when = sc_core::sc_time::from_value(last->when);
  } else {
    return false;
  }
  g_stop = true;
  for (Domain& d : g_domains) d.stopped = true;
  return true;
}

std::optional<int> exit_code() { return g_code; }
bool stop_requested() { return g_stop; }
sc_core::sc_time end_time() {
  if (g_code && g_windowed) return g_when;  // the run went on to the end of the window
  return g_code ? std::max(g_when, sc_core::sc_time_stamp()) : sc_core::sc_time_stamp();
}
const std::string& exit_reason() { return g_reason; }
void reset() {
  g_code.reset();
  g_reason.clear();
  g_when = sc_core::SC_ZERO_TIME;
  g_stop = false;
  g_windowed = false;
  g_new_exits.clear();
  g_domains.clear();
}

}  // namespace tessera::sim
