#include "common/log.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <stdexcept>
#include <systemc>
#include <utility>
#include <vector>

namespace tessera::log {
namespace {

struct State {
  std::map<std::string, Level> levels;  // by path prefix
  Level default_level = Level::warning;
  std::map<std::string, Level> cache;
  std::set<std::pair<std::string, const void*>> seen;
  std::uint64_t guest_errors = 0;
  bool strict = false;
};

State& state() {
  static State s;
  return s;
}

bool first_time(const std::string& path, const char* place) {
  return state().seen.insert({path, static_cast<const void*>(place)}).second;
}

void handler(const sc_core::sc_report& r, const sc_core::sc_actions& actions) {
  if (actions & sc_core::SC_DISPLAY) {
    const char* sev = "info";
    switch (r.get_severity()) {
      case sc_core::SC_WARNING: sev = "warning"; break;
      case sc_core::SC_ERROR: sev = "error"; break;
      case sc_core::SC_FATAL: sev = "fatal"; break;
      default: break;
    }
    std::fprintf(stderr, "[%s] %s %s: %s\n", sc_core::sc_time_stamp().to_string().c_str(), sev, r.get_msg_type(),
                 r.get_msg());
    std::fflush(stderr);
  }
  // Everything else (throwing on errors, stopping, aborting) as SystemC does.
  sc_core::sc_report_handler::default_handler(r, actions & ~sc_core::SC_DISPLAY & ~sc_core::SC_LOG);
}

}  // namespace

Level parse_level(const std::string& name) {
  static const std::map<std::string, Level> names = {{"quiet", Level::quiet}, {"error", Level::error},
                                                     {"warning", Level::warning}, {"info", Level::info},
                                                     {"debug", Level::debug}, {"trace", Level::trace}};
  auto it = names.find(name);
  if (it == names.end())
    throw std::invalid_argument("unknown log level \"" + name + "\" (quiet, error, warning, info, debug, trace)");
  return it->second;
}

std::string unknown_paths() {
  std::set<std::string> names;
  std::vector<const sc_core::sc_object*> todo(sc_core::sc_get_top_level_objects().begin(),
                                              sc_core::sc_get_top_level_objects().end());
  while (!todo.empty()) {
    const sc_core::sc_object* o = todo.back();
    todo.pop_back();
    names.insert(o->name());
    for (const sc_core::sc_object* c : o->get_child_objects()) todo.push_back(c);
  }
  std::string bad;
  for (const auto& entry : state().levels) {
    const std::string& prefix = entry.first;
    const bool covers = std::any_of(names.begin(), names.end(), [&](const std::string& n) {
      return n == prefix || n.rfind(prefix + ".", 0) == 0;
    });
    if (!covers) bad += (bad.empty() ? "" : ", ") + prefix;
  }
  if (bad.empty()) return "";
  std::string tops;
  for (const sc_core::sc_object* o : sc_core::sc_get_top_level_objects())
    for (const sc_core::sc_object* c : o->get_child_objects())
      if (tops.size() < 300) tops += (tops.empty() ? "" : ", ") + std::string(c->name());
  return "--log: no instance named " + bad + " (instances such as " + tops + ")";
}

void set_level(const std::string& path, Level level) {
  if (path.empty()) state().default_level = level;
  else state().levels[path] = level;
  state().cache.clear();
}

Level level_of(const std::string& path) {
  State& s = state();
  auto hit = s.cache.find(path);
  if (hit != s.cache.end()) return hit->second;
  Level l = s.default_level;
  std::size_t best = 0;
  for (const auto& [prefix, level] : s.levels) {
    bool covers = path == prefix || (path.size() > prefix.size() && path.compare(0, prefix.size(), prefix) == 0 &&
                                     path[prefix.size()] == '.');
    if (covers && prefix.size() >= best) best = prefix.size(), l = level;
  }
  s.cache[path] = l;
  return l;
}

void set_strict(bool strict) { state().strict = strict; }
bool strict() { return state().strict; }
std::uint64_t guest_error_count() { return state().guest_errors; }

void reset() { state() = State{}; }

void install_handler() {
  sc_core::sc_report_handler::set_handler(handler);
  // Our own types are never suppressed by SystemC's repeat limits.
  for (const char* t : {kGuestError, kUnimplemented, kConfig, kInternal, kTrace})
    sc_core::sc_report_handler::set_actions(t, sc_core::SC_INFO, sc_core::SC_DISPLAY);
  // "Simulation stopped by user": tessera-vp's summary says how a run ended.
  sc_core::sc_report_handler::set_actions("/OSCI/SystemC", sc_core::SC_INFO, sc_core::SC_DO_NOTHING);
}

void emit_guest_error(const std::string& path, const char* place, const std::string& msg) {
  ++state().guest_errors;
  if (first_time(path, place) && enabled(path, Level::warning))
    SC_REPORT_WARNING(kGuestError, (path + ": " + msg).c_str());
}

void emit_unimplemented(const std::string& path, const char* place, const std::string& msg) {
  if (first_time(path, place) && enabled(path, Level::warning))
    SC_REPORT_WARNING(kUnimplemented, (path + ": " + msg).c_str());
}

void emit(const std::string& path, Level level, const std::string& msg) {
  SC_REPORT_INFO_VERB(level == Level::info ? "tessera/info" : kTrace, (path + ": " + msg).c_str(), sc_core::SC_NONE);
}

void emit_internal(const std::string& path, const std::string& msg) {
  // A model bug stops the run: SystemC's error action throws, tessera-vp
  // reports it and exits with code 3. Should a handler swallow the report,
  // the exception below still ends the run.
  SC_REPORT_ERROR(kInternal, (path + ": " + msg).c_str());
  throw std::logic_error(path + ": " + msg);
}

}  // namespace tessera::log
