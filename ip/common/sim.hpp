// How a run ends. Devices that end the simulation (test finisher, HTIF,
// an unhandled trap) ask for an exit code here; tessera-vp returns it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <systemc>
#include <vector>

namespace tessera::sim {

// Exit codes of tessera-vp besides the guest's own.
inline constexpr int kExitOk = 0;
inline constexpr int kExitUsage = 2;     // bad command line or platform description
inline constexpr int kExitAbnormal = 3;  // --max-time reached, simulation starved, model error
inline constexpr int kExitStrict = 4;    // --strict and the guest made an error

// Records the exit code (the first request wins) and stops the simulation.
// `when` is the requester's local time (a temporally decoupled initiator
// runs ahead of simulation time); it becomes the run's end time.
//
// In a system of several chips each chip is a domain (the first component
// of an instance path, "chip2" in "chip2.finisher"): a domain's exit stops
// that domain's processors only, and the run ends when every domain has
// asked for an exit (code: the first non-zero one, else 0), or at once on a
// non-zero code.
void request_exit(int code, const std::string& who, const std::string& why,
                  const sc_core::sc_time& when = sc_core::sc_time_stamp());
// Declares the domains; before the processors are built.
void set_domains(const std::vector<std::string>& names);
// A flag that turns true when the run, or the domain of `path`, stops;
// processors read it in their inner loops. Valid until reset().
const bool& stop_flag(const std::string& path);
// When the run ended: the exit request's time, or simulation time.
sc_core::sc_time end_time();
// True once an exit was requested: processors stop executing at once.
bool stop_requested();
std::optional<int> exit_code();
const std::string& exit_reason();
void reset();  // for tests

// Windowed runs: a system of chips run window by window (platform/session:
// windows of the links' lookahead, in one process or over MPI ranks). There
// a domain's exit stops that domain's processors at once, and the run only
// at the end of the window, with the code and the end time of every
// domain's request ordered by time and chip, so the outcome is the same
// wherever each chip is simulated.
void set_windowed(bool on);
bool windowed();

// Timing-only runs (a per-run switch: SessionOptions::timing_only,
// tessera-vp --timing-only): the engines take the time, traffic and energy
// their commands take, but the tensor core computes no products: it writes
// seeded values in [-1, 1) instead (so routers still spread their tokens,
// as over real activations, and what follows stays finite). For full-size models, whose
// weights the host never writes (their HBM pages stay untouched).
void set_timing_only(bool on);
bool timing_only();
struct DomainExit {
  unsigned domain = 0;  // index in set_domains' list
  int code = 0;
  std::uint64_t when = 0;  // ps
  std::string reason;
};
// The exits requested since the last call (this process's domains).
std::vector<DomainExit> take_exits();
// An exit of a domain simulated elsewhere (another rank).
void note_exit(const DomainExit& e);
// At a window's end: true when the run ends (every domain exited, or one
// with a non-zero code); then exit_code(), exit_reason() and end_time() hold.
bool windowed_end();

}  // namespace tessera::sim
