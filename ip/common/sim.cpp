#include "common/sim.hpp"

#include <systemc>

#include "common/log.hpp"

namespace tessera::sim {
namespace {
std::optional<int> g_code;
std::string g_reason;
sc_core::sc_time g_when;
}  // namespace

void request_exit(int code, const std::string& who, const std::string& why, const sc_core::sc_time& when) {
  if (g_code) return;
  g_code = code;
  g_when = when;
  g_reason = who + ": " + why;
  log::info(who, "exit requested with code {}: {}", code, why);
  if (sc_core::sc_is_running()) sc_core::sc_stop();
}

std::optional<int> exit_code() { return g_code; }
bool stop_requested() { return g_code.has_value(); }
sc_core::sc_time end_time() { return g_code ? std::max(g_when, sc_core::sc_time_stamp()) : sc_core::sc_time_stamp(); }
const std::string& exit_reason() { return g_reason; }
void reset() {
  g_code.reset();
  g_reason.clear();
}

}  // namespace tessera::sim
