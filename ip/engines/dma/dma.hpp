// The tile's DMA engine: a descriptor queue, and transfers of up to three
// dimensions between any two addresses: global addresses (HBM, other
// tiles' scratchpads, CSRs; through `initiator`, so across the NoC with
// its timing) or the tile's own scratchpad (offsets, reached directly and
// booked in its banks). Elements may be cast on the fly between FP32,
// BF16, FP16, E4M3 and E5M2 (rounding to nearest even; saturating or not);
// a cast to FP8 with `group` > 0 scales each group of a row so that its
// largest magnitude maps to the format's largest value and writes the
// scales (FP32 or E8M0), and a cast from FP8 with `group` reads them.
//
// Timing: a descriptor is cut into chunks of at most `burst` source bytes
// (whole groups when casting with scales). Up to `outstanding` chunks are
// in flight at once, each a read then a write whose latencies come from the
// targets (the NoC, HBM, the scratchpad's banks); the engine's own port
// moves `port_bytes` per cycle. A bus error ends the descriptor with an
// error naming the address; nothing a descriptor holds can crash the
// simulator.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <systemc>

#include "common/regs.hpp"
#include "common/waves.hpp"
#include <tlm_utils/simple_initiator_socket.h>
#include <vector>

#include "common/irq.hpp"
#include "common/power.hpp"
#include "common/semaphores.hpp"
#include "engines/num/block_scale.hpp"
#include "engines/num/formats.hpp"
#include "scratchpad/scratchpad.hpp"

namespace tessera::dma {

struct Descriptor {
  std::uint32_t id = 0;                  // echoed in the status
  std::uint64_t src = 0, dst = 0;        // global addresses, or scratchpad offsets (src_local, dst_local)
  bool src_local = false, dst_local = false;
  // Shape: len0 elements (bytes when both formats are `raw`) per row,
  // count1 rows per plane, count2 planes; strides in bytes (0: packed).
  std::uint32_t len0 = 0, count1 = 1, count2 = 1;
  std::uint64_t src_stride1 = 0, src_stride2 = 0, dst_stride1 = 0, dst_stride2 = 0;
  // Element formats; equal formats copy bits. `raw` (both sides) copies bytes.
  bool raw = true;
  num::Format src_format = num::Format::FP32, dst_format = num::Format::FP32;
  bool saturate = true;
  // Block scales of the FP8 side: one per `group` elements of a row, packed
  // in row order (plane, row, group) at `scales` (global or local).
  unsigned group = 0;
  std::uint64_t scales = 0;
  bool scales_local = false;
  num::ScaleFormat scale_format = num::ScaleFormat::FP32;
  // Stochastic rounding: chunk i of the descriptor draws from a generator
  // seeded with seed + i, so the result does not depend on the order in
  // which chunks complete.
  bool stochastic = false;
  std::uint64_t seed = 0;
  unsigned wait_sem = 0, signal_sem = 0, signal_sem2 = 0;  // 0 none, i + 1 semaphore i
};

enum class DmaError : std::uint8_t { none, shape, range, format, bus, semaphore, queue_full };

struct DmaStats {
  std::uint64_t descriptors = 0, errors = 0, chunks = 0;
  std::uint64_t bytes_read = 0, bytes_written = 0, global_bytes = 0, local_bytes = 0, cast_elements = 0;
  std::uint64_t global_read_bytes = 0, global_written_bytes = 0;  // global_bytes by direction
  std::uint64_t busy_cycles = 0, semaphore_wait_cycles = 0;
};

class Dma : public sc_core::sc_module {
 public:
  struct Config {
    double clock_hz = 1.5e9;
    unsigned burst = 256;       // source bytes per chunk
    unsigned outstanding = 32;  // chunks in flight
    unsigned port_bytes = 64;   // bytes the engine's port moves per cycle
  };

  tlm_utils::simple_initiator_socket<Dma> initiator;  // global addresses
  IrqOut irq;  // level: a descriptor finished or failed, until acknowledged

  Dma(const sc_core::sc_module_name& n, scratchpad::Scratchpad& spm, const Config& c);

  void set_semaphores(Semaphores* s) { sems_ = s; }
  void submit(const Descriptor& d);
  bool busy() const { return running_ || !queue_.empty(); }
  std::size_t queued() const { return queue_.size(); }
  std::uint32_t completed() const { return completed_; }
  const std::string& error() const { return error_; }
  std::uint32_t error_id() const { return error_id_; }
  DmaError error_code() const { return error_code_; }
  void acknowledge() { irq.write(false); }
  // Drops queued descriptors (and one waiting for its semaphore) and clears
  // the error. A descriptor already moving data finishes.
  void reset();
  const DmaStats& stats() const { return stats_; }

 private:
  struct Chunk {
    std::uint64_t src, dst, scales;  // scales: this chunk's first scale
    std::uint32_t elements;
  };
  Chunk chunk(std::uint64_t i) const;
  void run();
  void worker();
  std::string validate(const Descriptor& d, DmaError& code) const;
  // One access; false (and error_ set) on a failed response.
  bool access(bool local, bool write, std::uint64_t addr, std::uint8_t* data, unsigned len, sc_core::sc_time& delay);
  void move(const Chunk& c, std::uint64_t index);
  void fail(const Descriptor& d, DmaError code, const std::string& why);

  scratchpad::Scratchpad& spm_;
  Config cfg_;
  sc_core::sc_time period_;
  power::Clock* clk_ = &power::meter(name()).clock(power::kTiles);  // DVFS: the tiles domain
  Semaphores* sems_ = nullptr;
  std::deque<Descriptor> queue_;
  sc_core::sc_event work_, chunk_ready_, chunks_done_, reset_;
  bool running_ = false;
  // Waves (engines): busy while a command runs, and the queue's depth.
  waves::Id w_busy_ = waves::declare(waves::engines, name(), "busy", 1);
  waves::Id w_queue_ = waves::declare(waves::engines, name(), "queue", 8);
  void probe() {
    waves::change(w_busy_, running_);
    waves::change(w_queue_, queue_.size());
  }
  // The descriptor being moved and its chunks.
  Descriptor cur_;
  unsigned src_eb_ = 1, dst_eb_ = 1, scale_bytes_ = 4;
  std::uint64_t src_s1_ = 0, src_s2_ = 0, dst_s1_ = 0, dst_s2_ = 0;
  std::uint32_t per_chunk_ = 0, chunks_per_row_ = 0;
  std::uint64_t total_ = 0, next_ = 0, pending_ = 0;
  std::string chunk_error_;
  std::uint64_t port_free_ = 0;  // first cycle the engine's port is free
  std::string error_;
  std::uint32_t error_id_ = 0, completed_ = 0;
  DmaError error_code_ = DmaError::none;
  DmaStats stats_;
};

// The descriptor the DMA_ registers (dma.regs.json) describe, as the tile holds them.
Descriptor decode(const IncludedRegs& regs);

}  // namespace tessera::dma
