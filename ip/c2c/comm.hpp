// The communication engine: a DMA-like co-processor in each chip's fabric
// that runs collectives over the SerDes links, so tiles spend no compute on
// communication. Every chip of the group posts the same collective (from
// firmware, through the fabric's CE_* registers, or from C++); the engines
// then exchange data and notifications among themselves.
//
// Data paths: local memory (HBM, scratchpads) through the chip's NoC; other
// chips through the fabric and the links (not the local NoC); each engine's
// staging buffer (an SRAM in its fabric, at local address kFabricLocal of
// its chip's global window) directly. Transfers are cut into `chunk`-byte
// pieces with `outstanding` of them in flight. Reductions add in FP32 and
// round to the element type (round to nearest even; E4M3 saturates) after
// every addition, in an order fixed by the algorithm, so a host reference
// can reproduce the results bit for bit (comm_reference.hpp).
//
// Two modes for every transfer:
//   push: the producer writes into the consumer (its staging buffer, or its
//         destination buffer for all-to-all), then notifies it: a write to
//         the consumer's FLAG[producer], which the consumer sees
//         `notify_latency` after it arrives.
//   pull: the producer leaves the data in its own memory and bumps its
//         PUBLISHED counter; the consumer polls that counter over the link
//         (every `poll_interval` while it is behind) and then reads the
//         data.
//
// Algorithms: ring (all-reduce as reduce-scatter then all-gather,
// reduce-scatter, all-gather), tree (binomial: all-reduce, broadcast),
// direct (all-to-all with per-peer sizes; put and wait, point to point).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <systemc>
#include <vector>

#include "common/page_store.hpp"

namespace tlm {
class tlm_generic_payload;
}

namespace tessera::c2c {

class C2c;

// Chips a system (and the global window) holds.
inline constexpr unsigned kMaxChips = 64;

// The fabric's own memory inside a chip's global window.
inline constexpr std::uint64_t kFabricLocal = 0xff'0000'0000ull;
// From kFabricLocal: FLAG[kMaxChips], then PUBLISHED[kMaxChips], then
// ABORTED[kMaxChips] (a write to ABORTED[i]: chip i gave up its collectives).
inline constexpr std::uint64_t kFlagBase = 0x8000'0000ull;
inline constexpr unsigned kPublished = kMaxChips;  // flag index of PUBLISHED[0]
inline constexpr unsigned kAborted = 2 * kMaxChips;  // flag index of ABORTED[0]

enum class CommOp : unsigned { none = 0, all_reduce, reduce_scatter, all_gather, broadcast, all_to_all, put, wait };
enum class CommAlgo : unsigned { ring = 0, tree = 1, direct = 2 };
enum class CommMode : unsigned { push = 0, pull = 1 };
enum class CommType : unsigned { fp32 = 0, bf16 = 1, e4m3 = 2 };
const char* name(CommOp op);
unsigned element_bytes(CommType t);

enum CommError : unsigned {
  kCommOk = 0,
  kCommBadOp = 1,        // unknown operation, or an algorithm it does not support
  kCommBadType = 2,      // unknown element type
  kCommBadPeer = 3,      // put/wait/broadcast peer or root outside the system
  kCommStaging = 4,      // the collective needs more staging buffer than there is
  kCommBus = 5,          // a memory access failed (the address is in ERROR_ADDR)
  kCommQueueFull = 6,
  kCommAlignment = 7,    // a count or address that is not a whole number of elements
  kCommBadGroup = 8,     // a group past the system's chips, or without this chip
  kCommAborted = 9,      // a chip of its group gave up its collectives (abort): this one or another (error_addr names it)
};

struct Collective {
  CommOp op = CommOp::none;
  CommAlgo algo = CommAlgo::ring;
  CommMode mode = CommMode::push;
  CommType type = CommType::fp32;
  // The chips it spans, first .. first + chips - 1 (chips 0: every chip of
  // the system), each by its rank (chip - first): a communicator, as NCCL
  // has them; every chip of the group posts the same collective. A chip's
  // collectives alternate the halves of its staging buffer (each its
  // peers'), so a group's chips must have run as many collectives before
  // it: groups that share no chip (data-parallel groups) always have;
  // overlapping groups (a chip in two) are not checked.
  unsigned first = 0, chips = 0;
  unsigned peer = 0;            // put: the destination's rank; wait: the rank it waits for; broadcast: the root's
  std::uint64_t src = 0, dst = 0;  // local addresses on this chip (put: dst on the peer)
  std::uint64_t count = 0;      // elements (all-gather: this chip's share); put: bytes
  // all-to-all: local address of a table with one entry per chip of six
  // 64-bit words: send offset (from src), send bytes, where they go in that
  // chip's dst, receive offset (from dst), receive bytes, where they come
  // from in that chip's src. Push uses the first three, pull the last three.
  std::uint64_t table = 0;
  std::uint64_t signal = 0;     // written with a 32-bit 1 when done, or failed (local or global address); 0: none
  std::uint32_t id = 0;
};

struct CommConfig {
  std::uint64_t staging = 64ull << 20;  // bytes of staging buffer
  unsigned chunk = 16 << 10;            // bytes per transfer
  unsigned outstanding = 8;             // transfers in flight
  sc_core::sc_time notify_latency{100, sc_core::SC_NS};
  sc_core::sc_time poll_interval{50, sc_core::SC_NS};
  double reduce_gbps = 256;             // reduction ALU, GB/s of output
  double staging_gbps = 512;            // staging buffer bandwidth, GB/s
  sc_core::sc_time staging_latency{5, sc_core::SC_NS};
  unsigned queue = 4;                   // collectives waiting behind the running one
  std::string check() const;
};

class CommEngine : public sc_core::sc_module {
 public:
  CommEngine(const sc_core::sc_module_name& n, C2c& fabric, const CommConfig& c);

  // Queues a collective; false when the queue is full (the error is recorded).
  bool submit(const Collective& c);
  bool busy() const { return running_ || !queue_.empty(); }
  unsigned queued() const { return static_cast<unsigned>(queue_.size()); }
  std::uint64_t completed() const { return completed_; }
  const sc_core::sc_event& done_event() const { return done_event_; }  // after each collective
  unsigned error() const { return error_; }
  std::uint32_t error_id() const { return error_id_; }
  std::uint64_t error_addr() const { return error_addr_; }
  void clear_error() { error_ = 0; }
  // This chip gives up its collectives over the group first .. first +
  // chips - 1 (chips 0: the system), as its command processor does when a
  // launch that runs them fails: the running one and the queued ones fail
  // (kCommAborted), and every one posted until reset(); the group's other
  // chips are told (a write to their ABORTED[this chip]), and their engines
  // fail theirs over a group with this chip in it likewise, at once and
  // until their reset(). A second abort before reset() tells nobody.
  void give_up(unsigned first, unsigned chips);
  // Forgets every abort and starts the notifications, publications and
  // staging halves afresh, as at power-on: every chip of a group together,
  // once each is idle (the host does it after a failed run), each given
  // the same `round`, new for each reset: an abort's notice carries its
  // sender's round, and one from another round (sent before the reset,
  // still travelling) is ignored. While a collective runs or waits, they
  // fail (kCommAborted) and the reset follows them, before anything
  // posted since runs (false: deferred so; true: done now).
  bool reset(std::uint32_t round = 0);
  // The chips whose aborts this engine has seen (bit i: chip i), its own included.
  std::uint64_t aborted() const { return revoked_; }
  // Called with (collective, ok) when one ends.
  void on_done(std::function<void(const Collective&, bool)> f) { on_done_ = std::move(f); }
  // The fabric-local window: staging buffer and flags (from kFabricLocal).
  void access(tlm::tlm_generic_payload& trans, std::uint64_t offset, sc_core::sc_time& delay, bool debug);
  const CommConfig& config() const { return config_; }
  // What-if studies: a different cost of remote notifications from now on.
  void set_notify_latency(const sc_core::sc_time& t) { config_.notify_latency = t; }

  struct Stats {
    std::uint64_t collectives = 0, bytes_sent = 0, bytes_read_remote = 0, notifications = 0, polls = 0;
    std::uint64_t bytes_reduced = 0;  // output of the reduction ALU
    sc_core::sc_time busy;
  };
  const Stats& stats() const { return stats_; }

 private:
  void thread();
  unsigned run(const Collective& c);
  // Memory from this engine: `chip`'s local address `addr` (this chip: NoC
  // or the staging buffer; another: over the links). False on an error.
  bool mem(bool write, unsigned chip, std::uint64_t addr, void* data, std::uint64_t len);
  // Runs fn(offset, length) over [0, bytes) in chunks, `outstanding` at a time.
  bool parallel(std::uint64_t bytes, const std::function<bool(std::uint64_t, std::uint64_t)>& fn);
  // One step's data, `bytes` long: out = a (+ b if b_chip >= 0, element-wise),
  // to one or two destinations. Sources and destinations are (chip, address).
  struct Place {
    int chip = -1;
    std::uint64_t addr = 0;
  };
  bool move(std::uint64_t bytes, Place a, Place b, Place out, Place out2, CommType t);
  void notify(unsigned peer, unsigned index);  // adds 1 to `peer`'s FLAG[index]
  bool wait_flag(unsigned peer);               // the next notification from `peer` (false: aborted)
  bool poll(unsigned peer);                    // the next publication of `peer` for this chip (false: failed or aborted)
  // Chips first .. first + chips - 1 (0: the system) as a mask, within the system.
  std::uint64_t group_mask(unsigned first, unsigned chips) const;
  void cancel();                // fails the running collective at its next wait
  void noticed(unsigned chip, std::uint64_t word);  // chip's abort (its notice's word: its round + 1) has reached this engine
  void teller();                // sends this chip's abort to the chips in to_tell_
  void worker();
  // Staging addresses of this engine, in this chip's window.
  std::uint64_t in_slot(unsigned slot) const;
  std::uint64_t out_slot(unsigned slot) const;

  C2c& fabric_;
  CommConfig config_;
  PageStore staging_{64 << 10};
  // FLAG[i]: notifications from chip i; PUBLISHED[i] (at kPublished + i): publications for chip i.
  std::vector<std::uint64_t> flags_ = std::vector<std::uint64_t>(3 * kMaxChips, 0);
  std::vector<std::uint64_t> seen_flag_ = std::vector<std::uint64_t>(kPublished, 0);
  std::vector<std::uint64_t> seen_pub_ = std::vector<std::uint64_t>(kPublished, 0);
  sc_core::sc_event flag_event_, kick_, done_event_, cancel_event_, tell_kick_;
  // Aborts: the chips whose aborts this engine has seen (its own too); the
  // running collective being failed; the chips still to be told of this
  // chip's abort.
  std::uint64_t revoked_ = 0, to_tell_ = 0;
  std::uint32_t round_ = 0;  // the last reset's
  bool cancel_ = false;
  // A reset that waits for what ran and waited when it came (`doomed_` of
  // the queued ones still to fail).
  bool resetting_ = false;
  std::uint32_t reset_round_ = 0;
  std::size_t doomed_ = 0;
  void clear(std::uint32_t round);  // the reset itself
  Collective current_;
  sc_core::sc_event_queue flag_due_;
  std::multimap<sc_core::sc_time, std::pair<unsigned, std::uint64_t>> pending_flags_;  // when -> (index, value)
  struct Job {
    std::uint64_t bytes = 0, n = 0, next = 0;
    unsigned running = 0;
    bool ok = true;
    const std::function<bool(std::uint64_t, std::uint64_t)>* fn = nullptr;
    sc_core::sc_event done;
  };
  Job* job_ = nullptr;
  sc_core::sc_event work_;
  std::deque<Collective> queue_;
  bool running_ = false;
  std::uint64_t completed_ = 0, epoch_ = 0;
  std::uint64_t slot_bytes_ = 0, slots_ = 0;
  unsigned error_ = 0;
  std::uint32_t error_id_ = 0;
  std::uint64_t error_addr_ = 0;
  sc_core::sc_time alu_free_, staging_free_;
  std::function<void(const Collective&, bool)> on_done_;
  Stats stats_;
  void apply_flags();
};

}  // namespace tessera::c2c
