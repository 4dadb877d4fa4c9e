// HBM3 memory: one or more stacks of channels and pseudo-channels behind
// one target socket, each pseudo-channel with its own command-level
// controller (pseudo_channel.hpp), the data in a sparse store, SECDED ECC
// with error injection, CSRs and statistics.
//
// Detailed mode: b_transport synchronises (wait), splits the access into
// 32-byte bursts, hands them to their pseudo-channels' controllers and
// waits until the last burst's data has moved: the response time is the
// modelled completion time, and concurrent initiators queue and contend.
// Fast mode: the same organisation, mapping and bank state, but reads are
// served in arrival order with latency and bandwidth arithmetic, writes
// are held and drained between the watermarks as the detailed controller
// drains them, and the delay is annotated (no waiting, no commands).
// Writes are posted (answered once the controller holds them) by default.
// Not modelled: the PHY and the NoC-side protocol, temperature-dependent
// refresh, write data masks (byte enables are refused).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <queue>
#include <random>
#include <string>
#include <tlm_utils/simple_target_socket.h>
#include <vector>

#include "common/config.hpp"
#include "common/page_store.hpp"
#include "common/power.hpp"
#include "common/regs.hpp"
#include "hbm/dram.hpp"
#include "hbm/pseudo_channel.hpp"

namespace tessera::hbm {

// Address bits to (stack, channel, pseudo-channel, bank group, bank, row,
// column): a list of fields from the least significant bit, such as
// "O5 G2 C2 P1 H4 C3 B2 R15" (O offset in the burst, C column, G bank
// group, B bank, P pseudo-channel, H channel, S stack, R row; a field may
// appear twice, its bits then continue). With xor_hash, the bank and
// bank-group bits are XORed with the lowest row bits.
class AddressMap {
 public:
  AddressMap() = default;
  // Throws ConfigError-worthy messages as std::invalid_argument.
  AddressMap(const std::string& layout, const Org& org, unsigned burst_bytes, bool xor_hash);
  Location decode(std::uint64_t addr) const;
  std::uint64_t capacity() const { return capacity_; }

 private:
  // The field kinds, each a slot of decode()'s working array.
  static constexpr const char* kKindLetters = "OCGBPHSDR";
  static constexpr unsigned kKinds = 9;
  static constexpr unsigned slot(char kind) {
    for (unsigned i = 0; i < kKinds; ++i)
      if (kKindLetters[i] == kind) return i;
    return 0;
  }
  struct Field {
    char kind;
    unsigned bits;
    unsigned slot;
    unsigned from = 0, to = 0;  // its first bit in the address, in its kind's value
    std::uint64_t mask = 0;     // bits ones
  };
  std::vector<Field> fields_;
  Org org_;
  bool xor_ = false;
  std::uint64_t capacity_ = 0;
};

class Hbm : public Ip {
 public:
  tlm_utils::simple_target_socket<Hbm> mem_target;
  IrqOut irq_out;

  struct Config {
    std::string timing = "hbm3-6400.json";
    Org org;
    std::string address_map = "O5 G2 C2 B2 P1 H4 C3 R15";
    bool xor_hash = false;
    std::string mode = "detailed";  // detailed, fast
    double fast_bank_wait = 0.75;    // fast mode: share of a busy bank's wait that shows (calibrated)
    unsigned read_inflight = 0, write_inflight = 0;  // transactions held at once, detailed mode (0: no limit)
    ControllerConfig ctrl;
    bool ecc = true;
    double ecc_single_rate = 0, ecc_double_rate = 0;  // per 64-bit word read
    unsigned seed = 1;
    std::uint64_t page_size = 64 * 1024;
    // Resolved and checked by validate():
    Timing t;
    std::uint64_t size = 0;
    void visit(Params& p);
    void validate(const Params& p) const;
  };

  Hbm(const sc_core::sc_module_name& n, const Config& c);
  ~Hbm() override;

  const Config& config() const { return config_; }
  double peak_bytes_per_s() const;  // every pseudo-channel's data bus busy
  // The register block's socket (mapped through the instance's "targets").
  tlm::tlm_target_socket<>& csr_target();
  const AddressMap& address_map() const { return map_; }
  PseudoChannel& channel(unsigned pc) { return *channels_[pc]; }
  unsigned channels() const { return static_cast<unsigned>(channels_.size()); }
  // SECDED protects each 64-bit word (72/64 code). Plants an error (1 or 2
  // flipped bits) in the word at `offset`; writing that word clears it.
  static constexpr unsigned kEccWord = 8;
  void inject(std::uint64_t offset, unsigned bits) { injected_[offset & ~std::uint64_t(kEccWord - 1)] = bits; }

  struct Totals {
    std::uint64_t reads = 0, writes = 0, hits = 0, misses = 0, conflicts = 0, refreshes = 0, refresh_cycles = 0,
                  violations = 0, busy_cycles = 0, turnarounds = 0;
  };
  Totals totals() const;
  void report_stats(nlohmann::ordered_json& out) const override;
  void report_limits(nlohmann::ordered_json& out) const override;

 private:
  struct Txn {
    unsigned remaining = 0;
    sc_core::sc_event done;
  };
  class Regs;
  void b_transport(tlm::tlm_generic_payload& trans, sc_core::sc_time& delay);
  unsigned transport_dbg(tlm::tlm_generic_payload& trans);
  void detailed(tlm::tlm_generic_payload& trans, sc_core::sc_time& delay);
  void fast(tlm::tlm_generic_payload& trans, const sc_core::sc_time& now, sc_core::sc_time& delay);  // now: sc_time_stamp()
  // ECC on the bursts of a read: false if an uncorrectable error was hit.
  bool check_ecc(std::uint64_t addr, unsigned len);
  void kick(unsigned pc);
  std::uint64_t cycle_of(const sc_core::sc_time& t) const { return clk_->cycle(t, tck_); }
  unsigned bus_group(unsigned pc) const;                 // pseudo-channels stepped together with pc
  void advance(unsigned pc, std::uint64_t cycle);        // them, in index order

  Config config_;
  bool shared_bus_ = config_.ctrl.command_bus == "shared";  // after config_, which it reads
  bool fast_mode_;  // mode "fast"
  bool refresh_off_, per_bank_refresh_;  // refresh "off", "per_bank"
  AddressMap map_;
  std::uint64_t tck_;  // ticks of the time resolution per cycle
  power::Meter* meter_ = &power::meter(name());
  power::Clock* clk_ = &meter_->clock(power::kHbm);  // DVFS: the HBM domain (controllers and PHYs)
  std::vector<std::unique_ptr<PseudoChannel>> channels_;
  std::vector<std::unique_ptr<sc_core::sc_event>> wake_;
  unsigned reads_held_ = 0, writes_held_ = 0;  // transactions in the detailed controllers
  unsigned peak_held_[2] = {0, 0};             // the most at once: reads, writes
  std::deque<sc_core::sc_event*> waiting_[2];  // transactions waiting for a slot: reads, writes
  PageStore store_;
  // The data side of an access (reads fill the payload, writes store it).
  void move_data(tlm::tlm_generic_payload& trans);
  std::map<std::uint64_t, unsigned> injected_;
  std::mt19937_64 rng_;
  std::uint64_t next_id_ = 0;
  std::uint64_t ecc_corrected_ = 0, ecc_uncorrected_ = 0;
  std::uint64_t bytes_read_ = 0, bytes_written_ = 0;
  sc_core::sc_time first_ = sc_core::SC_ZERO_TIME, last_ = sc_core::SC_ZERO_TIME;
  bool seen_ = false;
  // Fast mode state, per pseudo-channel: buckets for the data bus, the
  // activation rate and the command bus, each bank's row and readiness,
  // the writes the controller holds (posted, drained between the
  // watermarks) and the last column command of each direction.
  struct FastChannel {
    std::uint64_t bus_free = 0, act_bucket = 0, cmd_bucket = 0, refresh_due = 0;
    unsigned refresh_bank = 0;  // per-bank refresh: the bank next in turn
    std::uint64_t last_read = 0, last_write = 0;  // last RD and WR issue cycles
    std::uint64_t floor = 0;                      // no column command of this direction before
    bool writing = false, any = false;            // the last column command was a write; there was one
    std::vector<std::uint64_t> bank_ready, pre_ready, opened;  // opened: the open row's ACT cycle
    std::vector<std::int64_t> open_row;            // -1 closed
    std::uint64_t now = 0;                         // the cycle a drain starts at
    std::uint64_t ahead = 0;                       // a drain: the queued reads' bus time it goes before
    std::uint64_t in_order = 0;                    // no request enters before (one waits for a queue slot)
    std::vector<std::uint64_t> booked_writes;      // drained writes' column cycles, still queued before them
    // The earliest column cycle among the last read_queue reads, kept as a
    // sliding window's minimum: the reads (their number, their cycle) whose
    // cycle no later read in the window undercuts, oldest first; a ring of
    // read_queue + 1 entries.
    struct Queued {
      std::uint64_t read, cycle;
    };
    std::vector<Queued> window;
    std::size_t front = 0, back = 0;  // [front, back) in the ring
    std::uint64_t reads_booked = 0;   // reads booked so far (the next one's number)
    std::uint64_t queue_free() const { return front == back ? 0 : window[front].cycle; }
    void queue(std::uint64_t cycle, std::uint64_t depth) {
      const std::size_t n = window.size();
      while (front != back && window[(back + n - 1) % n].cycle >= cycle) back = (back + n - 1) % n;
      window[back] = {reads_booked, cycle};
      back = (back + 1) % n;
      ++reads_booked;
      // The read `depth` back (and any older) has left the window.
      while (window[front].read + depth < reads_booked) front = (front + 1) % n;
    }
    struct Held {
      Location loc;
      std::uint64_t arrival;
    };
    std::deque<Held> writes;  // posted, not yet in the DRAM
    std::uint64_t reads = 0, writes_done = 0, hits = 0, misses = 0, conflicts = 0, refreshes = 0, busy = 0,
                  turnarounds = 0;
  };
  // Fast mode: the column command's cycle of one burst arriving at `start`
  // (its row opened as needed, the buckets advanced): planned, then
  // committed (a drain plans every held write to choose one).
  struct FastPlan {
    std::uint64_t act = 0, act_slot = 0, cmd_slot = 0, bus_slot = 0, floor = 0, cas = 0;
    unsigned commands = 1;  // 1 a row hit, 2 ACT first, 3 PRE and ACT first
    bool turn = false;      // the first column command of the other direction
  };
  std::uint64_t fast_burst(FastChannel& f, const Location& l, bool write, std::uint64_t start);
  FastPlan fast_plan(const FastChannel& f, const Location& l, bool write, std::uint64_t start, bool in_drain) const;
  std::uint64_t fast_commit(FastChannel& f, const Location& l, bool write, const FastPlan& p, bool in_drain);
  // Refreshes due by `cycle`; writes held while the channel idles before
  // `cycle`; a drain down to the low watermark.
  void fast_refresh(FastChannel& f, std::uint64_t cycle);
  void fast_idle_writes(FastChannel& f, std::uint64_t cycle);
  void fast_drain(FastChannel& f, std::uint64_t cycle, std::size_t down_to);
  void fast_write_one(FastChannel& f);
  std::vector<FastChannel> fast_;
  // Fast mode's in-flight limits (read_inflight, write_inflight): when each
  // of the last `limit` transactions of the kind completes (a min-heap:
  // a new one enters when the first of them is done).
  std::priority_queue<std::uint64_t, std::vector<std::uint64_t>, std::greater<std::uint64_t>> fast_held_[2];
  std::unique_ptr<Regs> regs_;
};

}  // namespace tessera::hbm
