// The tile scratchpad: banked SRAM (default 2 MiB in 32 banks of 32-byte
// rows at 1.5 GHz). Consecutive rows go to consecutive banks; each bank
// serves one row per cycle, and every element an access wants from that
// row comes with it. An access therefore costs as many cycles as its
// busiest bank has distinct rows to serve, and banks still busy with an
// earlier access (another initiator's, or the same initiator's ahead of
// it in decoupled time) delay it further: those are the conflict stalls.
//
// Faces: a TLM target (`mem_target`) for the tile core, the DMA and other
// tiles over the NoC, contiguous, byte-enabled or streaming; and
// `access()` for the engines, which issue a wave of element addresses per
// cycle (a strided column read, a gather) and get its timing back.
// Out-of-range accesses answer TLM_ADDRESS_ERROR_RESPONSE and are guest
// errors. No DMI: every access goes through the bank model.
#pragma once

#include <cstdint>
#include <tlm_utils/simple_target_socket.h>
#include <vector>

#include "common/config.hpp"
#include "common/power.hpp"
#include "common/ip.hpp"
#include "common/storage.hpp"
#include "common/units.hpp"

namespace tessera::scratchpad {

// Address to bank mapping and the cost of one access with idle banks.
struct BankGeometry {
  unsigned banks = 32;
  unsigned row_bytes = 32;

  unsigned bank_of(std::uint64_t addr) const { return static_cast<unsigned>((addr / row_bytes) % banks); }
  // Rows each bank must serve for `count` elements of `bytes` at `addrs`
  // (an element crossing a row boundary needs both rows); `rows` gets one
  // entry per bank.
  void rows_per_bank(const std::uint64_t* addrs, unsigned count, unsigned bytes, std::vector<unsigned>& rows) const;
  // The same for one contiguous block.
  void rows_per_bank(std::uint64_t addr, std::uint64_t len, std::vector<unsigned>& rows) const;
  // Cycles with idle banks: the busiest bank's row count.
  std::uint64_t cycles(const std::uint64_t* addrs, unsigned count, unsigned bytes) const;
  std::uint64_t cycles(std::uint64_t addr, std::uint64_t len) const;
};

class Scratchpad : public Ip {
 public:
  struct Config {
    std::uint64_t size = 2ull << 20;
    unsigned banks = 32;
    unsigned row_bytes = 32;
    Hertz clock{1.5e9};
    unsigned latency = 2;  // cycles from the last row read to the data
    void visit(Params& p);
    void validate(const Params& p) const;
  };

  struct Timing {
    std::uint64_t cycles = 0;  // from the request to the data, latency included
    std::uint64_t stalls = 0;  // of those, cycles lost to banks still busy with earlier accesses
  };

  tlm_utils::simple_target_socket<Scratchpad> mem_target;

  Scratchpad(const sc_core::sc_module_name& n, const Config& c);

  // An engine's wave of `count` elements of `bytes` each, issued at
  // `start` (absolute simulated time). Books the banks. Addresses must be
  // in range (the engine checks its operands first).
  Timing access(const std::uint64_t* addrs, unsigned count, unsigned bytes, bool write, const sc_core::sc_time& start);

  // Bytes an engine moved through the banks whose timing it accounts for
  // itself (the tensor core's operand streams): counted here, and shared
  // out over time with engine_stream().
  void count_engine_traffic(std::uint64_t read, std::uint64_t written) {
    engine_bytes_read_ += read;
    engine_bytes_written_ += written;
  }
  // An engine streams `bytes` through the banks between `start` and `end`
  // (absolute simulated time), spread evenly: accesses booked in that
  // window get the rest of each bank's cycles, so a bank's rows cost
  // 1 / (1 - share) as many cycles, with share = bytes / (the banks' bytes
  // per cycle x the window's cycles), summed over the streams active at the
  // access's start and capped at 0.9. (The engines' own timing does not
  // see the other accesses: they take precedence.)
  void engine_stream(const sc_core::sc_time& start, const sc_core::sc_time& end, std::uint64_t bytes);

  const BankGeometry& geometry() const { return geometry_; }
  std::uint8_t* data() { return storage_.data(); }
  std::uint64_t size() const { return config_.size; }
  void report_stats(nlohmann::ordered_json& out) const override;

  // What mem_target does, for the tile's own initiators (its core's local
  // bus and its DMA), which reach the banks without crossing the NoC.
  void b_transport(tlm::tlm_generic_payload& trans, sc_core::sc_time& delay);
  unsigned transport_dbg(tlm::tlm_generic_payload& trans);

 private:
  bool copy(tlm::tlm_generic_payload& trans, bool debug);
  // Books `rows_` (per bank) from `start`.
  Timing book(const sc_core::sc_time& start);

  Config config_;
  BankGeometry geometry_;
  sc_core::sc_time period_;
  ZeroedBytes storage_;
  std::vector<std::uint64_t> bank_free_;  // first cycle each bank is free
  std::vector<unsigned> rows_;            // scratch: rows per bank of the access being booked
  std::uint64_t reads_ = 0, writes_ = 0, bytes_read_ = 0, bytes_written_ = 0, waves_ = 0, errors_ = 0;
  std::uint64_t busy_cycles_ = 0, conflict_cycles_ = 0, stall_cycles_ = 0;
  std::uint64_t engine_bytes_read_ = 0, engine_bytes_written_ = 0, shared_cycles_ = 0;
  power::Meter* meter_ = &power::meter(name());
  power::Clock* clk_ = &power::meter(name()).clock(power::kTiles);  // DVFS: the tiles domain
  struct Stream {
    std::uint64_t from, to;  // cycles
    double share;
  };
  std::vector<Stream> streams_;
};

}  // namespace tessera::scratchpad
