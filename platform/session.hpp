// One simulation session: the lifecycle every front end shares (tessera-vp,
// the host runtime's Device and Cluster, and whatever front end comes
// next). A session owns, in this order:
//   1. the inputs: the platform or system file with its --set overrides,
//      the ELF files (HTIF placed at the firmware's tohost), the options;
//      all read and checked before anything elaborates;
//   2. the outputs: statistics, trace, waves, the signature; opened before
//      elaboration, so a run never ends in a file it cannot write;
//   3. elaboration of one platform or a system of chips, loading of the
//      firmware, the GDB server;
//   4. running (to the end, or --max-time), or run control left to the
//      front end (the runtime advances time as its host waits);
//   5. reporting: power published, outputs closed, the signature dumped,
//      statistics written and summarised.
// Every bad input is a SessionError naming what is wrong; its code() is the
// process exit code tessera-vp gives it.
//
// The header holds no model header: front ends see a session, not the IPs.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace tessera {

class Platform;
class Ranks;
class System;
struct PlatformSpec;

struct SessionOptions {
  std::string platform;                    // platform or system file; empty: the default T1
  std::vector<std::string> sets;           // instance.key=value (chipK.instance.key=value: chip K of a system)
  std::string firmware;                    // the boot processor's ELF, on every chip; empty: none
  std::vector<std::string> chip_firmware;  // in a system: K=ELF runs ELF on chip K instead
  std::vector<std::string> loads;          // FILE@ADDR: raw images (one chip)
  std::vector<std::string> kernels;        // TILE=ELF: a kernel started on that tile's core at time 0 (one chip)
  bool boot = false;                       // start as QEMU does: reset vector, a0 = hart id, a1 = device tree
  std::string dtb;                         // with boot: this device tree instead of the generated one
  std::string top;                         // the top module's name; empty: the platform's own
  bool protocol_checker = false;           // a TLM-2.0 checker on every binding
  bool reports = false;                    // Tessera's report handler (one line per message)
  std::vector<std::string> logs;           // LEVEL or instance=LEVEL
  bool strict = false;                     // a guest error fails the run (exit 4)
  bool timing_only = false;                // the engines take time but compute no products (sim::timing_only)
  std::string max_time;                    // run(): stop after this much simulated time; empty: never
  std::string stats;                       // finish(): statistics as JSON
  std::string signature;                   // finish(): begin_signature..end_signature, riscv-arch-test format
  std::string trace, trace_categories, trace_sockets;  // Chrome/Perfetto trace; comma-separated lists
  std::string waves, waves_preset, waves_window;       // VCD or FST waveforms
  std::optional<int> gdb_port;             // a GDB remote server on localhost:PORT (1-65535)
  std::optional<int> gdb_tiles_port;       // another for the tiles' RV32 cores
  bool gdb_wait = false;                   // with gdb_port: halt at reset until GDB connects
  // A system over MPI ranks (platform/ranks.hpp): this process is one of
  // them and builds the chips `placement` gives it ("0,0,1,1": chip k on
  // rank placement[k]; empty: round robin, chip k on rank k mod ranks).
  Ranks* ranks = nullptr;
  std::string placement;
};

// A bad input or option. usage(): a command-line mistake (tessera-vp adds
// the pointer to --help); code(): the exit code (2).
class SessionError : public std::runtime_error {
 public:
  SessionError(const std::string& what, bool usage);
  bool usage() const { return usage_; }
  int code() const;

 private:
  bool usage_;
};

// How a run ended.
struct RunResult {
  int code = 0;     // the process exit code: the guest's own, 0, 3 (abnormal), 4 (--strict)
  std::string end;  // in words: "finished", "--max-time 10ms reached", ...
  double wall_s = 0;
  bool input_error = false;  // the firmware could not be loaded: `end` says why, code 2
};

class Session {
 public:
  // Step 1: reads and checks every input. Throws SessionError.
  explicit Session(const SessionOptions& options);
  ~Session();  // closes the outputs if finish() has not
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // The platform file a session opens when SessionOptions::platform is empty.
  static std::string default_platform();
  // What tessera-vp runs when no firmware is named (hello.elf), and the
  // running program's folder (common/paths.hpp finds both).
  static std::string default_firmware();
  static std::string program_dir();
  // Every IP type with its parameters and defaults (tessera-vp --list-types).
  static std::string list_types();
  // The trace categories the IPs declare, comma-separated (--trace-categories).
  static std::string trace_categories();

  bool is_system() const;
  const std::string& file() const;  // the platform or system file
  unsigned chips() const;
  const PlatformSpec& chip_spec(unsigned k = 0) const;
  nlohmann::ordered_json effective() const;  // the effective configuration (--dump-config)
  std::string device_tree() const;           // chip 0's device tree source (--dump-dts)
  // The firmware-facing views of chip 0: memory-map header, linker symbols.
  // Rewritten only on change. Throws SessionError.
  void write_header(const std::string& path) const;
  void write_linker(const std::string& path) const;

  // Steps 2 and 3: opens the outputs, elaborates, loads the firmware,
  // starts the GDB server (and says so on stderr). Throws SessionError.
  void elaborate();
  Platform& chip(unsigned k = 0);  // over ranks: the k-th chip this process holds
  System* system();  // null for one chip
  unsigned rank() const;  // this process's rank (0 alone); only rank 0 prints the summary
  std::string describe() const;  // the memory map and the firmware, as tessera-vp prints them

  // Over MPI ranks: how many (1 alone), the rank chip k lives on, and this
  // process's platform of chip k (null where another rank holds it).
  unsigned ranks() const;
  unsigned owner(unsigned chip) const;
  Platform* held(unsigned chip);

  // Run control for a front end that drives time itself (the host
  // runtime's Cluster), instead of run(); every rank calls these in the
  // same order. exchange(): one round among the ranks: what crossed the
  // cut since the last round, the chips' exits, whether this rank stopped,
  // and out[r] (the front end's bytes for rank r); returns what each
  // rank's front end sent this one (out[rank()] is its own; alone: out).
  // advance(): one window (the system's lookahead) of simulated time.
  // halted(): why the system stopped (a chip's exit, a model error, a
  // rank's failure, a load error), the same on every rank after an
  // exchange; empty while it runs.
  std::vector<std::vector<std::uint8_t>> exchange(const std::vector<std::vector<std::uint8_t>>& out);
  void advance();
  std::string halted() const;
  // Ends every rank now with `code`, after a failure on this one (alone: this process).
  [[noreturn]] void abort(int code);
  // The synchronisation so far: ranks, lookahead_ns, windows, exchanged_bytes, waited_s (this rank's).
  nlohmann::ordered_json rank_report() const;

  // Step 4: runs to the end, --max-time, or a model error.
  RunResult run();
  // Step 5: power published, outputs closed, GDB told, signature dumped,
  // --strict applied, statistics written (a failure to write them makes
  // the run abnormal). Returns the statistics. Once.
  nlohmann::ordered_json finish(RunResult& result);
  // The counters that moved, as tessera-vp's summary prints them.
  static std::string summary(const nlohmann::ordered_json& stats);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera
