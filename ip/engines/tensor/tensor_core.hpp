// The tensor core as a SystemC engine: takes a GEMM command, reads its
// operands from the tile's scratchpad, computes C = A.B (+ C) bit-exactly
// with the configured accumulation (engines/num/accumulate.hpp), writes C
// (FP32, or INT32 for INT8 inputs) back, and takes the time the systolic
// array would (systolic.hpp), operand bank conflicts included. A command
// the engine cannot run (format, shape, an operand outside the scratchpad)
// sets an error status naming the failing command and raises the
// interrupt; nothing is read or written, and the engine keeps running.
// The command queue, registers and the tile core's driver come later.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>
#include <systemc>

#include "common/regs.hpp"
#include "common/waves.hpp"

#include "common/irq.hpp"
#include "common/power.hpp"
#include "common/semaphores.hpp"
#include "engines/num/accumulate.hpp"
#include "scratchpad/scratchpad.hpp"
#include "engines/tensor/systolic.hpp"

namespace tessera::tensor {

struct GemmCommand {
  std::uint32_t id = 0;  // echoed in the status
  GemmShape shape;
  std::uint64_t a = 0, b = 0, c = 0;      // scratchpad offsets
  std::uint32_t lda = 0, ldb = 0, ldc = 0;  // row pitches in elements (0: packed)
  bool trans_a = false, trans_b = false;  // A stored K x M, B stored N x K
  bool accumulate = false;                // C += A.B
  num::Accumulation acc;
  // Block-scaled FP8 (E4M3/E5M2 inputs): A in 1 x `group` groups along K,
  // B in `group` x `group` blocks; scales packed row-major at `sa`
  // (m x ceil(k/group)) and `sb` (ceil(k/group) x ceil(n/group)), FP32 or
  // E8M0 (one byte). Each group's partial sum is scaled and added in FP32
  // (numerics::gemm_block_scaled); with C += the old C is added last.
  bool block_scaled = false;
  num::ScaleFormat scale_format = num::ScaleFormat::FP32;
  unsigned group = 128;
  std::uint64_t sa = 0, sb = 0;
  // Semaphores (common/semaphores.hpp numbering: 0 none, i + 1 semaphore
  // i): wait before starting, signal after finishing.
  unsigned wait_sem = 0, signal_sem = 0, signal_sem2 = 0;
};

// Why a command was refused (the tile's ERROR_CODE register).
enum class CommandError : std::uint8_t { none, format, shape, range, pitch, accumulation, queue_full, semaphore };

struct TensorStats {
  std::uint64_t commands = 0, errors = 0, macs_bf16 = 0, macs_fp16 = 0, macs_fp8 = 0, macs_int8 = 0;
  std::uint64_t busy_cycles = 0, operand_stall_cycles = 0, bytes_read = 0, bytes_written = 0;
  std::uint64_t semaphore_wait_cycles = 0;  // waiting for a command's semaphore
};

// The array in RTL (ip/rtl; "impl": "rtl" on the tile): runs one
// weight-stationary tile of rows() x cols() 8-bit codes (INT8, or E4M3 into
// FP32), taking the simulated time its clock takes.
class ArrayRtl {
 public:
  virtual ~ArrayRtl() = default;
  virtual unsigned rows() const = 0;
  virtual unsigned cols() const = 0;
  // weights rows x cols, a m x rows, c_in m x cols (INT32 or FP32 bits); the results, m x cols.
  virtual std::vector<std::uint32_t> run_tile(bool e4m3, const std::vector<std::uint8_t>& weights,
                                              const std::vector<std::uint8_t>& a, const std::vector<std::uint32_t>& c_in,
                                              unsigned m, std::uint64_t& cycles) = 0;
};

class TensorCore : public sc_core::sc_module {
 public:
  IrqOut irq;  // level: a command finished or failed, until acknowledged

  TensorCore(const sc_core::sc_module_name& n, scratchpad::Scratchpad& spm, const ArrayConfig& cfg);
  // Commands run on the RTL from now on (nullptr: the model). The RTL takes
  // INT8 and E4M3 GEMMs with full accumulation; others are refused.
  void set_rtl(ArrayRtl* rtl) { rtl_ = rtl; }

  void submit(const GemmCommand& c);
  // The tile's semaphores, for commands that wait or signal (none: such
  // commands are refused).
  void set_semaphores(Semaphores* s) { sems_ = s; }
  bool busy() const { return running_ || !queue_.empty(); }
  // The last error ("" when none) and the id of the command that caused it.
  const std::string& error() const { return error_; }
  std::uint32_t error_id() const { return error_id_; }
  CommandError error_code() const { return error_code_; }
  std::size_t queued() const { return queue_.size(); }
  std::uint32_t completed() const { return completed_; }
  void acknowledge();
  // Drops queued commands and clears the error (the queue's reset).
  void reset();
  const TensorStats& stats() const { return stats_; }
  sc_core::sc_event& done_event() { return done_; }

 private:
  void run();
  // Empty when `c` can run, else why not (and `code`).
  std::string validate(const GemmCommand& c, CommandError& code) const;
  void execute(const GemmCommand& c);
  void execute_block_scaled(const GemmCommand& c, std::uint64_t lda, std::uint64_t ldb, std::uint64_t ldc);
  bool execute_bf16(const GemmCommand& c, std::uint64_t lda, std::uint64_t ldb, std::uint64_t ldc);

  scratchpad::Scratchpad& spm_;
  Semaphores* sems_ = nullptr;
  ArrayConfig cfg_;
  sc_core::sc_time period_;
  std::deque<GemmCommand> queue_;
  sc_core::sc_event work_, done_, reset_;
  bool running_ = false;
  ArrayRtl* rtl_ = nullptr;
  std::uint64_t execute_rtl(const GemmCommand& c);  // returns the RTL's cycles
  // Waves (engines): busy while a command runs, and the queue's depth.
  waves::Id w_busy_ = waves::declare(waves::engines, name(), "busy", 1);
  waves::Id w_queue_ = waves::declare(waves::engines, name(), "queue", 8);
  void probe() {
    waves::change(w_busy_, running_);
    waves::change(w_queue_, queue_.size());
  }
  std::string error_;
  std::uint32_t error_id_ = 0, completed_ = 0;
  CommandError error_code_ = CommandError::none;
  TensorStats stats_;
  power::Meter* meter_ = &power::meter(name());
  power::Clock* clk_ = &power::meter(name()).clock(power::kTiles);  // DVFS: the tiles domain
  std::vector<double> scratch_a_, scratch_b_, scratch_out_;
  std::vector<float> scratch_fa_, scratch_fb_, scratch_row_;  // execute_bf16's
};

// The command the CMD_ registers (tensor.regs.json) describe, as the tile holds them.
GemmCommand decode(const IncludedRegs& regs);

}  // namespace tessera::tensor
