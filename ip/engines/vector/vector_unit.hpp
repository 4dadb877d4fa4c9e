// The tile's vector unit as a SystemC engine: FP32 operations on rows held
// in the scratchpad, computed by engines/num/vector_ops.hpp (bit for bit the
// same on every host), timed by its lanes (default 64 FP32 per cycle) and
// its special-function unit (exp, log, tanh, sigmoid, rsqrt, recip and
// what is built on them) at 1/16 of the lane rate, so exp-heavy
// activations cost what they cost. A command the unit cannot run (unknown
// op, empty shape, an operand outside the scratchpad) sets an error naming
// the command and raises the interrupt; nothing is written.
//
// Per element, (lane ops, special ops): add sub mul max min abs neg relu
// relu2 (1, 0); fma (2, 0); exp log rsqrt recip tanh sigmoid silu gelu
// (1, 1); swiglu (2, 1); softmax (3, 1) plus one recip per row; rmsnorm
// (3, 0) plus one rsqrt per row; layernorm (5, 0) plus one rsqrt per row;
// sum, max, argmax (1, 0); top-k (k, 0); rope (6, 0) plus one sin/cos pair
// (2) per pair; casts (1, 0), (2, 0) with group scales. cycles = ceil(lane ops / lanes) + ceil(special ops x
// sfu_ratio / lanes) + pipeline.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <systemc>

#include "common/regs.hpp"
#include "common/waves.hpp"

#include "common/irq.hpp"
#include "common/power.hpp"
#include "common/semaphores.hpp"
#include "engines/num/block_scale.hpp"
#include "engines/num/formats.hpp"
#include "scratchpad/scratchpad.hpp"

namespace tessera::vector {

enum class Op : std::uint8_t {
  add, sub, mul, max, min, fma, abs, neg, relu, relu2, exp, log, rsqrt, recip, tanh, sigmoid, silu, gelu, swiglu,
  softmax, rmsnorm, layernorm, sum, rmax, argmax, topk, rope, cast_to, cast_from,
  scale_rows,  // row r of src0 times the FP32 scalar src1[r] (gates, per-row scales)
  count
};
const char* name(Op op);

struct VectorConfig {
  unsigned lanes = 64;
  unsigned sfu_ratio = 16;  // lane ops per special-function op
  unsigned pipeline = 8;    // cycles of latency per command
  double clock_hz = 1.5e9;
};

struct VectorCommand {
  std::uint32_t id = 0;
  Op op = Op::add;
  unsigned rows = 1, cols = 0;          // elementwise ops see rows x cols elements
  std::uint64_t src0 = 0, src1 = 0, src2 = 0, dst = 0;  // scratchpad offsets (FP32, packed rows)
  unsigned k = 1;                        // top-k: values at dst, indices (u32) after them
  unsigned position = 0;                 // rope: token position
  float eps = 1e-6f;                     // rmsnorm/layernorm
  // Casts: cast_to turns FP32 at src0 into `format` codes at dst (rounding
  // to nearest even, saturating if asked); with `group` > 0 each row is
  // cut into groups of that many elements, each scaled so its largest
  // magnitude maps to the format's largest value, the FP32 scales written
  // at `aux` (rows x ceil(cols/group)). cast_from reads codes at src0 (and
  // scales at aux) and writes FP32 at dst.
  num::Format format = num::Format::BF16;
  bool saturate = true;
  unsigned group = 0;
  std::uint64_t aux = 0;
  // Scales as E8M0 bytes (powers of two) instead of FP32; stochastic
  // rounding from a generator seeded with `seed` at the command's start
  // (elements in row order), so a command's result depends on its seed only.
  num::ScaleFormat scale_format = num::ScaleFormat::FP32;
  bool stochastic = false;
  std::uint64_t seed = 0;
  // Semaphores (0 none, i + 1 semaphore i): wait before, signal after.
  unsigned wait_sem = 0, signal_sem = 0, signal_sem2 = 0;
};

struct VectorTiming {
  std::uint64_t lane_ops = 0, special_ops = 0, cycles = 0;
};
// Empty when the command's shape and op are valid (ranges aside).
VectorTiming timing(const VectorConfig& cfg, const VectorCommand& c);

struct VectorStats {
  std::uint64_t commands = 0, errors = 0, lane_ops = 0, special_ops = 0, busy_cycles = 0;
  std::uint64_t elementwise = 0, special = 0, row_ops = 0, reductions = 0, casts = 0;  // commands by class
  std::uint64_t semaphore_wait_cycles = 0;  // waiting for a command's semaphore
};

class VectorUnit : public sc_core::sc_module {
 public:
  IrqOut irq;

  VectorUnit(const sc_core::sc_module_name& n, scratchpad::Scratchpad& spm, const VectorConfig& cfg);

  void submit(const VectorCommand& c);
  bool busy() const { return running_ || !queue_.empty(); }
  const std::string& error() const { return error_; }
  std::uint32_t error_id() const { return error_id_; }
  std::uint32_t completed() const { return completed_; }
  std::size_t queued() const { return queue_.size(); }
  void acknowledge() { irq.write(false); }
  void reset();
  // The tile's semaphores (none: commands that name one are refused).
  void set_semaphores(Semaphores* s) { sems_ = s; }
  const VectorStats& stats() const { return stats_; }

 private:
  void run();
  std::uint64_t traffic(const VectorCommand& c) const;
  std::string validate(const VectorCommand& c) const;
  void execute(const VectorCommand& c);
  void cast(const VectorCommand& c);

  scratchpad::Scratchpad& spm_;
  VectorConfig cfg_;
  sc_core::sc_time period_;
  std::deque<VectorCommand> queue_;
  sc_core::sc_event work_, reset_;
  Semaphores* sems_ = nullptr;
  bool running_ = false;
  // Waves (engines): busy while a command runs, and the queue's depth.
  waves::Id w_busy_ = waves::declare(waves::engines, name(), "busy", 1);
  waves::Id w_queue_ = waves::declare(waves::engines, name(), "queue", 8);
  void probe() {
    waves::change(w_busy_, running_);
    waves::change(w_queue_, queue_.size());
  }
  std::string error_;
  std::uint32_t error_id_ = 0, completed_ = 0;
  VectorStats stats_;
  power::Meter* meter_ = &power::meter(name());
  power::Clock* clk_ = &power::meter(name()).clock(power::kTiles);  // DVFS: the tiles domain
};

// The command the VCMD_ registers (vector.regs.json) describe, as the tile holds them.
VectorCommand decode(const IncludedRegs& regs);

}  // namespace tessera::vector
