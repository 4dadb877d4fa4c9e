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
struct Domain {
  std::string name;
  bool stopped = false;
};
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
  for (const std::string& n : names) g_domains.push_back({n, false});
}

const bool& stop_flag(const std::string& path) {
  if (Domain* d = domain_of(path)) return d->stopped;
  return g_stop;
}

std::optional<int> exit_code() { return g_code; }
bool stop_requested() { return g_stop; }
sc_core::sc_time end_time() { return g_code ? std::max(g_when, sc_core::sc_time_stamp()) : sc_core::sc_time_stamp(); }
const std::string& exit_reason() { return g_reason; }
void reset() {
  g_code.reset();
  g_reason.clear();
  g_when = sc_core::SC_ZERO_TIME;
  g_stop = false;
  g_domains.clear();
}

}  // namespace tessera::sim
