#include "common/sim.hpp"

#include <sysc/kernel/sc_process.h>

#include <cstring>
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
bool g_timing_only = false;
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

void set_timing_only(bool on) { g_timing_only = on; }
bool timing_only() { return g_timing_only; }

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
  g_timing_only = false;
  g_new_exits.clear();
  g_domains.clear();
}

}  // namespace tessera::sim

// The order of events notified for the same time. SystemC keeps its timed
// events in a heap that leaves equal times in no particular order: the
// order depends on every other event pending, so a chip's processes woken
// at one instant would run in an order that depends on what else the
// process simulates (the other chips of a system, or none when they run
// on other MPI ranks). libsystemc takes this comparison through its GOT,
// so the program's definition replaces the library's: the same order by
// time, and in windowed runs (systems of chips) equal times broken by the
// names of the process the event wakes and of the event, which depend
// only on the chip. A chip alone keeps SystemC's own order.
namespace sc_core {

namespace {
// The processes an event wakes are private to sc_event; an explicit
// instantiation may name private members, and hands out pointers to them.
template <class Tag, typename Tag::type Member>
struct Expose {
  friend typename Tag::type member(Tag) { return Member; }
};
struct ThreadsDynamic { using type = std::vector<sc_thread_handle> sc_event::*; friend type member(ThreadsDynamic); };
struct MethodsDynamic { using type = std::vector<sc_method_handle> sc_event::*; friend type member(MethodsDynamic); };
struct ThreadsStatic { using type = std::vector<sc_thread_handle> sc_event::*; friend type member(ThreadsStatic); };
struct MethodsStatic { using type = std::vector<sc_method_handle> sc_event::*; friend type member(MethodsStatic); };
template struct Expose<ThreadsDynamic, &sc_event::m_threads_dynamic>;
template struct Expose<MethodsDynamic, &sc_event::m_methods_dynamic>;
template struct Expose<ThreadsStatic, &sc_event::m_threads_static>;
template struct Expose<MethodsStatic, &sc_event::m_methods_static>;

// The first process the event wakes (its name is the process's path), or
// null. sc_thread_process and sc_method_process (whose headers are not
// installed) derive from sc_process_b alone.
const sc_object* woken(const sc_event* e) {
  if (const auto& v = e->*member(ThreadsDynamic{}); !v.empty()) return reinterpret_cast<const sc_process_b*>(v.front());
  if (const auto& v = e->*member(MethodsDynamic{}); !v.empty()) return reinterpret_cast<const sc_process_b*>(v.front());
  if (const auto& v = e->*member(ThreadsStatic{}); !v.empty()) return reinterpret_cast<const sc_process_b*>(v.front());
  if (const auto& v = e->*member(MethodsStatic{}); !v.empty()) return reinterpret_cast<const sc_process_b*>(v.front());
  return nullptr;
}
}  // namespace

// Returns > 0 when p1 comes first (the heap's top is the earliest).
int sc_notify_time_compare(const void* p1, const void* p2) {
  const auto* a = static_cast<const sc_event_timed*>(p1);
  const auto* b = static_cast<const sc_event_timed*>(p2);
  if (a->notify_time() < b->notify_time()) return 1;
  if (a->notify_time() > b->notify_time()) return -1;
  if (!tessera::sim::windowed()) return 0;
  const sc_event* ea = a->event();
  const sc_event* eb = b->event();
  if (!ea || !eb) return ea ? 1 : eb ? -1 : 0;  // cancelled notifications: ignored when they come up
  // The process woken first (names differ early: "chip3.tile0.dma.run"),
  // then the event's own name.
  const sc_object* pa = woken(ea);
  const sc_object* pb = woken(eb);
  if (pa != pb) {
    if (!pa || !pb) return pa ? 1 : -1;
    if (const int c = std::strcmp(pa->name(), pb->name())) return c < 0 ? 1 : -1;
  }
  const int c = std::strcmp(ea->name(), eb->name());
  return c < 0 ? 1 : c > 0 ? -1 : 0;
}

}  // namespace sc_core
