// The Tessera host runtime: what a host program uses to drive a T1, the
// same API a driver for the silicon would offer. A Device boots the chip's
// firmware (the command processor, sw/firmware/cmdproc) and talks to it
// through the command protocol (tessera/protocol.h): buffers in HBM,
// copies between host and device, kernels loaded onto tiles, launches with
// arguments, events to wait on. Errors come back as DeviceError, carrying
// the command, the tile and the device's code.
//
// Here the device is simulated in the same process: the runtime advances
// simulated time whenever the host waits for the device, and a host
// program never touches SystemC. Nothing in the API shows that, except
// the inspection calls at the end (simulated time, statistics). One Device
// per process (a SystemC simulation elaborates once), or one Cluster: a
// system of chips, a Device each.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/paths.hpp"  // a program built against an SDK finds that SDK's data
#include "roofline.hpp"  // platform/roofline.hpp
#include "tessera/protocol.h"

namespace tessera::rt {

// A command the device refused or that failed there.
struct DeviceError : std::runtime_error {
  DeviceError(const std::string& what, const tp_completion& c) : std::runtime_error(what), completion(c) {}
  tp_completion completion;  // id, opcode, status (tp_status), tile, detail, detail2
  std::uint32_t status() const { return completion.status; }
  // A graph's launch: the node that failed (empty if not known), and the
  // operation within the node's program on completion.tile (-1: not known).
  std::string node;
  int op = -1;
  // A collective that failed because a chip of its group gave up its
  // collectives (its own launch or collective failed: the engine's
  // CE_ERROR 9): that chip; -1 otherwise. A consequence, not the cause.
  int gave_up = -1;
};

// Misuse of the API on the host side (a freed buffer, a copy past its end,
// a bad ELF): nothing reached the device.
struct UsageError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

struct Buffer {
  std::uint64_t address = 0;  // device address, on its chip
  std::uint64_t size = 0;
  unsigned chip = 0;          // in a system of chips: whose HBM
};

struct Kernel {
  std::string name;
  std::uint32_t entry = 0;  // in the tile core's local map
  std::uint32_t tiles = 0;  // the tiles it is loaded on
  Buffer image;             // its image in HBM
};

struct Event {
  std::uint32_t id = 0;
};

// Commands of one stream run in order; commands of different streams run
// side by side where their tiles allow. Stream 0 is the default.
struct Stream {
  std::uint32_t id = 0;
};

class TileProgram;  // tessera/program.hpp
class Graph;
struct GraphExec;
class Cluster;

class Device {
 public:
  struct Options {
    std::string platform;               // platform file; empty: the default T1
    std::string firmware;               // command processor ELF; empty: this build's
    std::vector<std::string> sets;      // platform overrides, "instance.key=value"
    double timeout_s = 1.0;             // simulated seconds the host waits for any one answer
    bool quiet = true;                  // the firmware's UART output goes nowhere
    std::string trace;                  // a Chrome/Perfetto trace of the run (as tessera-vp --trace); empty: none
    std::string waves;                  // model-level waveforms (VCD, as tessera-vp --waves); empty: none
    std::string placement;              // a Cluster under mpirun: each chip's rank, "0,0,1,1" (empty: round robin)
    // Timing only: the tensor cores take their time, traffic and energy but
    // compute no products (seeded results, sim::timing_only); for full-size
    // models whose weights are never written (compiler::Executable then
    // uploads none).
    bool timing_only = false;
  };

  explicit Device(const Options& options);
  Device();
  // The platform file a Device opens when Options::platform is empty.
  static std::string default_platform();
  // The shipped system of `chips` T1s: 1 the default platform, 4 a ring
  // (t1x4-ring.json), 8 to 64 a torus (t1xN-torus.json). Throws UsageError
  // for another count, naming those it has.
  static std::string system_platform(unsigned chips);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  unsigned tiles() const;
  unsigned hbm_stacks() const;
  // Options::timing_only (of the Device or the Cluster it belongs to).
  bool timing_only() const;
  // The mhartid of tile t's core (kernels that pick their work by it).
  unsigned tile_hart(unsigned t) const;
  // The HBM stack (alloc's numbering) fewest NoC hops from tile t, the
  // lowest of those tied: where to place what tile t reads most.
  unsigned stack_near(unsigned t) const;

  // HBM buffers: 4 KiB aligned, first fit, in the given stack.
  Buffer alloc(std::uint64_t bytes, unsigned stack = 0);
  void free(const Buffer& b);
  // A buffer of `bytes` in `stack` of each chip given, all at the same
  // local address (the lowest free on every one): what a collective whose
  // engines write straight into each other's destinations needs (the
  // ring's all-gather). Each is freed with free() on its own chip.
  static std::vector<Buffer> alloc_symmetric(const std::vector<Device*>& chips, std::uint64_t bytes, unsigned stack = 0);
  void write(const Buffer& b, const void* data, std::uint64_t bytes, std::uint64_t offset = 0);
  void read(const Buffer& b, void* data, std::uint64_t bytes, std::uint64_t offset = 0);
  // An untimed write, as a boot loader's image or a debugger's: the bytes
  // are in memory before the run, the host port and the NoC untouched, no
  // simulated time passing. For what a server holds resident before it
  // serves (a model's weights), so a step's time does not depend on how
  // long they took to load (and a timing-only run, which loads none,
  // starts its steps at the same simulated time).
  void preload(const Buffer& b, const void* data, std::uint64_t bytes, std::uint64_t offset = 0);

  // Host accesses to several chips at once (a chip of a Cluster; a Device
  // alone ignores these): after hold_io(), the chip's writes and command
  // submissions are kept, in order, and send_io() posts them as one
  // request without waiting for it; wait_io() waits for what was posted
  // (and throws its error). Between, a host that holds and sends each
  // chip's accesses in turn reaches them all in the same window, as it
  // would post to several chips' ports without waiting for each. A read,
  // or anything that waits for the chip, sends what is kept first.
  void hold_io();
  void send_io();
  void wait_io();
  // A read posted without waiting for it (after the writes posted before
  // it): `data` holds the bytes once wait_io() returns; the reads of
  // several chips posted in turn overlap. A Device alone reads at once.
  void read_post(const Buffer& b, void* data, std::uint64_t bytes, std::uint64_t offset = 0);

  // Loads an RV32 kernel ELF onto the tiles in `tiles` (bit i: tile i) and
  // waits until it is there.
  Kernel load_kernel(const std::string& elf_path, std::uint32_t tiles);
  // Starts the kernel on its tiles (or `tiles`, a subset) with up to 16
  // argument words; `timeout_us` is the device's watchdog (0: its default).
  // `group`: TP_LAUNCH_GROUP(first, chips) where the kernels run collectives
  // over those chips: if the launch fails, the chip gives them up (the
  // group's other chips fail theirs at once; reset_collectives() after).
  Event launch(const Kernel& k, const std::vector<std::uint32_t>& args, std::uint32_t tiles = 0,
               std::uint32_t timeout_us = 0, Stream stream = {}, std::uint32_t group = 0);
  // A new stream.
  Stream stream();
  // Runs a tile program on `tiles` with the `program` kernel, which must be
  // loaded there (load_kernel of sw/kernels' program.elf).
  Event run(const Kernel& program_kernel, const TileProgram& p, std::uint32_t tiles = 0,
            std::uint32_t timeout_us = 0, Stream stream = {});
  // Runs a different tile program on each of several tiles with one launch
  // (a table indexed by the tile cores' hart ids).
  Event run(const Kernel& program_kernel, const std::vector<std::pair<unsigned, TileProgram>>& per_tile,
            std::uint32_t timeout_us = 0, Stream stream = {});
  // Graphs (tessera/program.hpp): put in HBM once, launched as often as
  // wanted, each launch one command; the program kernel must be loaded on
  // the graph's tiles. free() gives the memory back (not while a launch of
  // it runs).
  GraphExec instantiate(const Graph& g);
  Event launch_graph(const Kernel& program_kernel, const GraphExec& g, std::uint32_t timeout_us = 0, Stream stream = {},
                     std::uint32_t group = 0);
  void free(const GraphExec& g);
  // Waits for a command; throws DeviceError if it failed.
  tp_completion wait(Event e);
  // Waits for every command submitted so far; throws the first failure
  // that wait() has not already reported.
  void synchronize();

  // A raw command, as the API would build it (for protocol tests).
  Event submit(tp_command c);

  // A collective on the chip's communication engine (every chip of the
  // system posts the same one; Cluster::collective does that): `ce_op`
  // combines TP_CE_* (operation | algorithm | mode | type | peer << 16);
  // `count` in elements (all-gather: this chip's share); `table` for
  // all-to-all. A chip alone is a system of one.
  Event collective(std::uint32_t ce_op, const Buffer& src, const Buffer& dst, std::uint64_t count,
                   const Buffer* table = nullptr, Stream stream = {});
  // A 32-bit device register through the host port (a PCIe BAR access):
  // the power manager's cap and P-states (ip/power/power.regs.json), a
  // tile's or a fabric's counters. A failed access throws UsageError.
  std::uint32_t read32(std::uint64_t address);
  void write32(std::uint64_t address, std::uint32_t value);

  // Which chip this is, of how many.
  unsigned chip() const;
  unsigned chips() const;
  // A buffer's address as every chip (its tiles' DMA, its engine) sees it.
  std::uint64_t global(const Buffer& b) const;
  // The chip-to-chip fabric's registers (its communication engine's CE_*:
  // ip/c2c/c2c.regs.json) as the chip's own cores and engines address
  // them: where a tile program posts a collective (TKP_COLLECTIVE).
  std::uint64_t fabric_registers() const;
  // The host gives up the chip's collectives over `group`
  // (TP_LAUNCH_GROUP), as the chip's CP does when a launch naming it fails:
  // for a chip whose part of a run could not be launched, so that the
  // group's other chips fail theirs at once (CE_ABORT).
  void abort_collectives(std::uint32_t group);
  // After a failed run whose launches named a group (launch's `group`):
  // the chip's communication engine forgets the aborts and starts its
  // collectives afresh (CE_RESET). Every chip of the group, once each
  // one's launches of the run are over, with the same `round`, new for
  // each reset (an abort's notice from before it, still travelling, is
  // ignored); else its collectives stay failed (and a half-run one leaves
  // the engines out of step).
  void reset_collectives(std::uint32_t round);
  // A round number no reset in this process has used yet.
  static std::uint32_t new_round();
  // Semaphore `s` of tile t's registers as every chip sees it: a 4-byte
  // write of n there (a DMA from any chip) signals it n times, which is how
  // the tiles of several chips hand work over without the host.
  std::uint64_t semaphore(unsigned t, unsigned s) const;

  // ---- inspection (not part of a silicon driver) ----
  double simulated_seconds() const;
  // Every instance's counters; with `prefix` ("tile"), only those instances'.
  nlohmann::ordered_json stats(const std::string& prefix = "") const;
  // The chip's roofline (platform/roofline.hpp): what its resources can do
  // at most, and the bound of the work done between two stats() snapshots.
  const roofline::Limits& limits() const;
  roofline::Report roofline(const nlohmann::ordered_json& before, const nlohmann::ordered_json& after) const;
  // The chip's energy so far (its power model): in all, and by power
  // domain the dynamic joules and the leakage (watts at nominal voltage).
  struct Energy {
    double joules = 0;
    std::vector<std::string> domains;
    std::vector<double> dynamic_joules, static_watts;
  };
  Energy energy() const;
  // Each node's time in the graph's last completed launch (simulated
  // seconds between the barriers that end the nodes, on the graph's timing
  // tile, from its marks).
  std::vector<double> node_seconds(const GraphExec& g) const;

 private:
  friend class Cluster;
  struct Impl;
  explicit Device(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// A system of chips (a system file such as platform/t1x4-ring.json): one
// Device per chip, each booting its own command processor, all in one
// simulation. Options::platform names the system file. The host reacts to
// the chips at the ends of windows of the system's lookahead (its shortest
// chip-to-chip link latency, 100 ns on the T1), the same whether the
// system runs in one process or over MPI ranks.
//
// Under mpirun (`mpirun -np R host-program ...`) the chips are spread over
// the ranks (round robin, or Options::placement) and the host program runs
// on rank 0: on every other rank, constructing the Cluster serves that
// rank's chips to rank 0 until rank 0 destroys its Cluster, then ends the
// process (exit code 0). The program does not change; what it prints
// before it opens the Cluster, every rank prints.
class Cluster {
 public:
  explicit Cluster(const Device::Options& options);
  ~Cluster();
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;
  unsigned chips() const;
  Device& chip(unsigned k);
  // The same collective on every chip, with each chip's buffers; one event per chip.
  std::vector<Event> collective(std::uint32_t ce_op, const std::vector<Buffer>& src, const std::vector<Buffer>& dst,
                                std::uint64_t count, const std::vector<Buffer>& tables = {});
  // Waits for one event per chip (as collective() returns them), every chip
  // at once. Where a chip's collective fails, that chip gives up its
  // collectives over the collective's group (abort_collectives), so the
  // others fail theirs at once rather than at the timeout; then, if no chip
  // has another command under way, every chip's engine is reset (a new
  // round), and the cause is thrown: the first failure that is not a chip's
  // giving up (DeviceError::gave_up), else the first failure.
  void wait(const std::vector<Event>& events);
  double simulated_seconds() const;
  nlohmann::ordered_json stats() const;  // every chip's counters, "chipK.instance", in chip order
  // The synchronisation so far: ranks, lookahead_ns, windows,
  // exchanged_bytes, waited_s (rank 0's time waiting for the others), and
  // over MPI ranks waited_by_rank_s (each rank's) and longest_wait_s.
  nlohmann::ordered_json synchronisation() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The chips a program runs on, in chip order: one Device, or a Cluster's
// chips where `system` (Options::platform then names a system file; under
// mpirun the ranks other than 0 serve theirs from here on).
struct Chips {
  Chips(const Device::Options& options, bool system) {
    if (system) {
      cluster = std::make_unique<Cluster>(options);
      for (unsigned k = 0; k < cluster->chips(); ++k) all.push_back(&cluster->chip(k));
    } else {
      single = std::make_unique<Device>(options);
      all.push_back(single.get());
    }
  }
  std::unique_ptr<Device> single;
  std::unique_ptr<Cluster> cluster;
  std::vector<Device*> all;
};

// Words of a 64-bit device address, for kernel arguments.
inline std::uint32_t lo(std::uint64_t a) { return static_cast<std::uint32_t>(a); }
inline std::uint32_t hi(std::uint64_t a) { return static_cast<std::uint32_t>(a >> 32); }

const char* status_name(std::uint32_t status);

}  // namespace tessera::rt
