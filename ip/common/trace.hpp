// Transaction traces in the Chrome / Perfetto trace-event format
// (`tessera-vp --trace FILE.json`; open it in ui.perfetto.dev or
// chrome://tracing). Each chip is a process, each instance path a track
// (a thread) of it; IPs put slices on their track (a tensor or vector
// command, a DMA descriptor, a kernel launch, an HBM command, a FLIT, a
// TLM transaction on a chosen socket) and counters (power and frequency
// per domain). Nothing is recorded, and nothing costs more than a load and
// a branch, unless a trace is open.
//
// Categories: each IP declares its own in its source file
// (`const trace::Category kTrace = trace::category("hbm", "HBM commands");`);
// the framework's is tlm. A trace records all of them unless told which
// (`--trace-categories`).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <systemc>
#include <vector>

namespace tessera::trace {

struct Options {
  std::string file;
  std::vector<std::string> categories;  // empty: every category
  std::vector<std::string> sockets;     // TLM connections to trace: instance names or labels (tlm category)
};

namespace detail {
extern bool on;
extern unsigned mask;
}  // namespace detail

using Category = unsigned;  // a bit of the trace's mask
// Registers a category (at static initialisation) and returns it; the same
// name again is the same category. At most 32.
Category category(const char* name, const char* doc);
extern const Category tlm;  // TLM transactions on the sockets Options::sockets names
const char* name(Category c);
// Every category, "name (doc), ...", for help and messages.
std::string categories();

// Opens the trace; throws std::runtime_error naming the file or the unknown category.
void open(const Options& o);
// Writes the end of the file (also at exit); a closed trace takes no more events.
void close();
inline bool on(Category c) { return detail::on && (detail::mask >> c & 1u); }
// Whether the connection `label` ("cp_bus_initiator") is one of Options::sockets.
bool socket_wanted(const std::string& label);
// After elaboration: "" when every name in Options::sockets matched a
// connection, else a message naming the ones that did not and the known ones.
std::string unmatched_sockets();

// A slice [start, end) on the track of instance `path`.
void slice(Category c, const std::string& path, const std::string& name, const sc_core::sc_time& start,
           const sc_core::sc_time& end, const nlohmann::json& args = nullptr);
// A moment on the track of `path`.
void instant(Category c, const std::string& path, const std::string& name, const sc_core::sc_time& at,
             const nlohmann::json& args = nullptr);
// A counter of `path`'s chip, named "<path without the chip> <name>".
void counter(Category c, const std::string& path, const std::string& name, const sc_core::sc_time& at, double value);

// Events written so far (tests).
std::uint64_t events();

}  // namespace tessera::trace
