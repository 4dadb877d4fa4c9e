// The memory controller of one HBM pseudo-channel, at command level:
// read and write queues, FR-FCFS or FCFS scheduling, open, closed or
// adaptive page policy, write drain with watermarks, all-bank or per-bank
// refresh, and ACT/RD/WR/PRE/REF timing from the timing file. Pure C++:
// the SystemC module around it calls advance(cycle) to issue every command
// due by then and asks next_event() when to come back, so the controller
// costs host time per command, not per cycle.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <queue>
#include <string>
#include <vector>

#include "common/power.hpp"
#include "hbm/dram.hpp"
#include "hbm/timing_checker.hpp"

namespace tessera::hbm {

struct ControllerConfig {
  unsigned read_queue = 32, write_queue = 32;
  std::string scheduler = "frfcfs";   // frfcfs, fcfs
  std::string page_policy = "open";   // open, closed, adaptive
  unsigned write_high = 24, write_low = 8;
  std::string refresh = "all_bank";   // all_bank, per_bank, off
  // none: every pseudo-channel of a stack refreshes at once (a pause of
  // the whole stack every tREFI); stack: they take turns, spread evenly
  // over the interval in bit-reversed order (as DRAMSys spreads a
  // channel's ranks)
  std::string refresh_stagger = "none";
  unsigned refresh_postpone = 0;      // refreshes that may be owed while requests wait
  unsigned frontend = 2;              // cycles from arrival to the queue (documented controller overhead)
  // Command buses: "shared" (the default, JEDEC HBM2/HBM3: a row-command
  // bus for ACT, PRE and REF and a column-command bus for RD and WR per
  // channel, which its pseudo-channels share) or "per_pc" (each
  // pseudo-channel issues one command a cycle of its own). An ACT takes
  // act_cycles on its bus (HBM2: 2).
  std::string command_bus = "shared";
  unsigned act_cycles = 1;
  // "split": a read and a write queue, writes drained between the
  // watermarks; "unified": one FR-FCFS queue of both (read_queue +
  // write_queue deep).
  std::string queues = "split";
  // The controller's interface takes one request and gives one response a cycle.
  bool interface_limit = false;
  // When a write is answered: "posted" (the default, as gem5's controller
  // and most SoC memory controllers do it: once its queue has taken it, the
  // queue's depth holding the writer back) or "on_write" (once its data
  // has gone to the DRAM).
  std::string write_response = "posted";
  bool check = true;                  // verify every command with the TimingChecker
};

// A channel's row- and column-command buses (command_bus "shared"): the
// cycles its pseudo-channels' commands hold, reserved as they issue.
class CommandBus {
 public:
  static bool row(Cmd c) { return c != Cmd::RD && c != Cmd::WR; }
  // The first cycle at or after `c` from which `len` cycles of the bus are free.
  std::uint64_t free_at(bool row, std::uint64_t c, unsigned len) const;
  void reserve(bool row, std::uint64_t c, unsigned len);
  // Counts reservations: a pseudo-channel's decision stands while it is unchanged.
  std::uint64_t generation() const { return generation_; }

 private:
  // Cycles [base, end) of each bus, a bit each (1: a command holds it),
  // in words of 64 cycles from word base / 64. Commands issue near the
  // present, so the window keeps the last few thousand cycles and forgets
  // older ones (free, as is everything outside it).
  struct Window {
    std::vector<std::uint64_t> words;
    std::uint64_t base = 0, end = 0;
    bool held(std::uint64_t k) const {
      return k >= base && k < end && (words[k / 64 - base / 64] >> (k % 64) & 1);
    }
  };
  Window bus_[2];
  std::uint64_t generation_ = 0;
};

struct Request {
  bool write = false;
  Location loc;
  std::uint64_t arrival = 0;  // cycle
  std::uint64_t id = 0;
  void* owner = nullptr;      // the transaction it belongs to
  // Filled by the controller.
  std::uint64_t done = 0;     // cycle the data transfer ends
  enum class Kind : std::uint8_t { unknown, hit, miss, conflict } kind = Kind::unknown;
};

struct ChannelStats {
  std::uint64_t reads = 0, writes = 0, row_hits = 0, row_misses = 0, row_conflicts = 0, refreshes = 0,
                refresh_cycles = 0, violations = 0;
  std::uint64_t turnarounds = 0;            // column commands that changed direction (RD to WR or back)
  std::vector<std::uint64_t> activations;  // per bank
  std::uint64_t busy_cycles = 0;            // data bus
  double queue_area = 0;                    // sum of queue length over cycles
  std::uint64_t last_cycle = 0;
  // Latency, arrival to end of data, in cycles: one bucket per cycle.
  std::vector<std::uint64_t> latency_histogram = std::vector<std::uint64_t>(4096, 0);
  std::uint64_t latency_max = 0, latency_sum = 0;
  std::vector<std::string> violation_log;   // first few
};

class PseudoChannel {
 public:
  // Activates and refreshes go to `m` (cycle c at clock.edge(c, tck)).
  void set_meter(power::Meter* m, const power::Clock* clock, std::uint64_t tck) { meter_ = m, clock_ = clock, tck_ = tck; }
  // Its commands go on the trace (category hbm) under this track.
  void set_track(std::string path) { track_ = std::move(path); }
  // The channel's shared command buses (command_bus "shared").
  void set_command_bus(std::shared_ptr<CommandBus> bus) { bus_ = std::move(bus); }
  using Done = std::function<void(Request&)>;
  PseudoChannel(const Timing& t, const Org& o, const ControllerConfig& c, Done done);
  // Pseudo-channel `index` of `count` in its stack: its first refresh falls
  // due at its turn (ControllerConfig::refresh_stagger); before any request.
  void set_refresh_turn(unsigned index, unsigned count);

  // Queues a request (arrival cycle already set). May not fit: then it
  // waits in the frontend and enters the queue when there is room.
  void enqueue(const Request& r);
  // Issues every command due up to and including `cycle` and completes
  // every request whose data ends by then.
  void advance(std::uint64_t cycle);
  // The next cycle at which advance() has something to do (~0 if idle).
  std::uint64_t next_event() const;
  bool idle() const;

  const ChannelStats& stats() const { return stats_; }
  // Every command issued, for tests (only when recording is on).
  struct Issued {
    Cmd cmd;
    unsigned bank;
    std::uint64_t row, cycle;
  };
  void record_commands(bool on) { record_ = on; }
  const std::vector<Issued>& commands() const { return issued_; }

 private:
  struct BankState {
    bool open = false;
    std::uint64_t row = 0;
    std::uint64_t next_act = 0, next_rd = 0, next_wr = 0, next_pre = 0;
    bool close_after = false;  // closed/adaptive policy wants a PRE
  };
  struct Candidate {
    Cmd cmd;
    unsigned bank = 0;
    std::uint64_t cycle = ~0ull;
    int queue = -1;  // 0 reads, 1 writes; index into it
    std::size_t index = 0;
    std::uint64_t age = 0;
  };

  // The command a request needs next and the earliest cycle it may issue.
  Candidate next_for(const Request& r) const;
  // The earliest cycle, `from` on, the command may issue to the bank (its
  // command bus free then).
  std::uint64_t earliest(Cmd cmd, unsigned bank, std::uint64_t from = 0) const;
  bool pick(std::uint64_t now, Candidate& best);  // pick_now(), or its answer while that stands
  bool pick_now(Candidate& best);
  void issue(const Candidate& c);
  void apply(Cmd cmd, unsigned bank, std::uint64_t row, std::uint64_t cycle);
  void refill();
  // Hands a request back at `cycle` (one response a cycle with interface_limit).
  void respond(Request r, std::uint64_t cycle);
  // Whether a queued request (of `only`, if given; else of either queue) hits bank's row.
  bool row_pending(unsigned bank, std::uint64_t row, const std::vector<Request>* only = nullptr) const;
  void account_queue(std::uint64_t cycle);

  Timing t_;
  Org org_;
  ControllerConfig cfg_;
  // The configuration's words, decided once.
  bool fcfs_ = false, refresh_off_ = false, per_bank_ = false, closed_ = false, adaptive_ = false;
  Done done_;
  TimingChecker checker_;
  std::vector<BankState> banks_;
  std::vector<Request> reads_, writes_;  // in age order; short (the queue depths)
  std::deque<Request> frontend_;
  std::deque<std::uint64_t> faw_;
  std::uint64_t last_cmd_ = 0;  // one command per cycle (per_pc): the last cycle the last one held
  std::shared_ptr<CommandBus> bus_;  // shared command buses, or none (per_pc)
  bool any_cmd_ = false;
  std::uint64_t last_refpb_ = 0;  // tRREFD between per-bank refreshes
  bool any_refpb_ = false;
  bool unified_ = false, posted_ = false;
  std::uint64_t last_accept_ = 0, last_response_ = 0;  // interface_limit
  bool any_accept_ = false, any_response_ = false;
  bool draining_ = false;
  bool any_column_ = false, last_column_write_ = false;
  std::uint64_t now_ = 0;
  std::uint64_t refresh_due_ = 0;
  unsigned refresh_owed_ = 0, refresh_bank_ = 0;
  struct Pending {
    std::uint64_t cycle;
    Request r;
    bool operator>(const Pending& o) const { return cycle > o.cycle || (cycle == o.cycle && r.id > o.r.id); }
  };
  std::priority_queue<Pending, std::vector<Pending>, std::greater<Pending>> completions_;
  ChannelStats stats_;
  power::Meter* meter_ = nullptr;
  const power::Clock* clock_ = nullptr;
  std::string track_;
  std::uint64_t tck_ = 1;
  bool record_ = false;
  std::vector<Issued> issued_;
  // pick()'s last answer. It stands while nothing it read has changed (the
  // queues, the banks, the refresh state: generation_; the shared buses'
  // reservations) and the present has not passed it: every candidate it
  // weighed issues no earlier than the best, so a later present up to the
  // best's cycle changes none of them.
  std::uint64_t generation_ = 0, picked_generation_ = ~0ull, picked_bus_ = 0;
  Candidate picked_;
  bool picked_found_ = false;
};

}  // namespace tessera::hbm
