#include "tile/tile.hpp"

#include <cstring>

#include "common/log.hpp"
#include "common/registry.hpp"
#include "tile_regs.hpp"

namespace tessera {

namespace R = regs::tile;

void Tile::Config::visit(Params& p) {
  spm.size = p.instance_size() ? p.instance_size() : spm.size;
  p("banks", spm.banks, "scratchpad SRAM banks (a power of two)");
  p("row_bytes", spm.row_bytes, "bytes a bank serves per cycle (a power of two)");
  p("sram_clock", spm.clock, "scratchpad clock");
  p("sram_latency", spm.latency, "scratchpad cycles from the last row read to the data");
  p("array_rows", array.rows, "systolic array rows (K)");
  p("array_cols", array.cols, "systolic array columns (N)");
  p("array_clock", array_clock, "tensor core clock");
  p("dataflow", dataflow, "weight_stationary or output_stationary");
  p("queue_depth", queue_depth, "commands each engine's queue holds");
  p("vector_lanes", vector.lanes, "vector unit FP32 lanes");
  p("sfu_ratio", vector.sfu_ratio, "lane ops per special-function op (exp, rsqrt, ...)");
  array.clock_hz = array_clock.value;
  vector.clock_hz = array_clock.value;
  array.dataflow =
      dataflow == "output_stationary" ? tensor::Dataflow::output_stationary : tensor::Dataflow::weight_stationary;
}

void Tile::Config::validate(const Params& p) const {
  if (!(spm.clock.value > 0)) p.fail("sram_clock", "must be above zero");
  spm.validate(p);
  if (array.rows < 1 || array.rows > 1024) p.fail("array_rows", "must be between 1 and 1024");
  if (array.cols < 1 || array.cols > 1024) p.fail("array_cols", "must be between 1 and 1024");
  if (!(array_clock.value > 0)) p.fail("array_clock", "must be above zero");
  if (dataflow != "weight_stationary" && dataflow != "output_stationary")
    p.fail("dataflow", "must be weight_stationary or output_stationary, not \"" + dataflow + "\"");
  if (queue_depth < 1 || queue_depth > 255) p.fail("queue_depth", "must be between 1 and 255");
  if (vector.lanes < 1 || vector.lanes > 4096) p.fail("vector_lanes", "must be between 1 and 4096");
  if (vector.sfu_ratio < 1 || vector.sfu_ratio > 1024) p.fail("sfu_ratio", "must be between 1 and 1024");
}

// The register window: a child module so the scratchpad, not the
// registers, is the tile's first target (mapped at its base).
class Tile::Regs : public MmioTarget {
 public:
  Regs(const sc_core::sc_module_name& n, Tile& t) : MmioTarget(n, R::kBlock), tile_(t) {
    tensor::TensorCore& tc = *t.tc_;
    regs_.on_read(R::STATUS, [&tc](unsigned, bool) -> std::uint64_t {
      return (tc.busy() ? R::STATUS_f::BUSY_MASK : 0) | (tc.error().empty() ? 0 : R::STATUS_f::ERROR_MASK) |
             (std::min<std::uint64_t>(tc.queued(), 255) << 8);
    });
    regs_.on_read(R::COMPLETED, [&tc](unsigned, bool) -> std::uint64_t { return tc.completed(); });
    regs_.on_read(R::ERROR_ID, [&tc](unsigned, bool) -> std::uint64_t { return tc.error_id(); });
    regs_.on_read(R::ERROR_CODE, [this, &tc](unsigned, bool) -> std::uint64_t {
      return refused_ ? static_cast<std::uint64_t>(tensor::CommandError::queue_full)
                      : static_cast<std::uint64_t>(tc.error_code());
    });
    for (unsigned r : {R::IRQ_ENABLE, R::IRQ_STATUS})
      regs_.on_write(r, [this, r](RegisterBank::Write& w) {
        regs_.set(r, w.next);
        update_irq();
        return true;
      });
    regs_.on_write(R::CTRL, [this, &tc](RegisterBank::Write& w) {
      if (w.data & R::CTRL_f::RESET_MASK) {
        tc.reset();
        refused_ = 0;
      }
      if (w.data & R::CTRL_f::VRESET_MASK) {
        tile_.vu_->reset();
        vrefused_ = 0;
      }
      return true;
    });
    regs_.on_write(R::CMD_PUSH, [this](RegisterBank::Write&) {
      push();
      return true;
    });
    vector::VectorUnit& vu = *t.vu_;
    regs_.on_read(R::VSTATUS, [&vu](unsigned, bool) -> std::uint64_t {
      return (vu.busy() ? R::VSTATUS_f::BUSY_MASK : 0) | (vu.error().empty() ? 0 : R::VSTATUS_f::ERROR_MASK) |
             (std::min<std::uint64_t>(vu.queued(), 255) << 8);
    });
    regs_.on_read(R::VCOMPLETED, [&vu](unsigned, bool) -> std::uint64_t { return vu.completed(); });
    regs_.on_read(R::VERROR_ID, [&vu](unsigned, bool) -> std::uint64_t { return vu.error_id(); });
    regs_.on_write(R::VCMD_PUSH, [this](RegisterBank::Write&) {
      vpush();
      return true;
    });
  }

  void vector_event() {
    vector::VectorUnit& vu = *tile_.vu_;
    const bool completed = vu.completed() != seen_vcompleted_, failed = vu.stats().errors != seen_verrors_;
    seen_vcompleted_ = vu.completed();
    seen_verrors_ = vu.stats().errors;
    regs_.set(R::IRQ_STATUS, regs_.get(R::IRQ_STATUS) | (failed ? R::IRQ_STATUS_f::VERROR_MASK : 0) |
                                 (completed ? R::IRQ_STATUS_f::VDONE_MASK : 0));
    vu.acknowledge();
    update_irq();
  }

  // The engine holds its line until acknowledged; its news become status bits.
  void engine_event() {
    tensor::TensorCore& tc = *tile_.tc_;
    const bool completed = tc.completed() != seen_completed_, failed = tc.stats().errors != seen_errors_;
    seen_completed_ = tc.completed();
    seen_errors_ = tc.stats().errors;
    regs_.set(R::IRQ_STATUS, regs_.get(R::IRQ_STATUS) | (failed ? R::IRQ_STATUS_f::ERROR_MASK : 0) |
                                 (completed ? R::IRQ_STATUS_f::DONE_MASK : 0));
    tc.acknowledge();
    update_irq();
  }

  std::uint64_t refused_ = 0, vrefused_ = 0;

 private:
  std::uint64_t seen_completed_ = 0, seen_errors_ = 0, seen_vcompleted_ = 0, seen_verrors_ = 0;

  void vpush() {
    vector::VectorCommand c;
    c.id = static_cast<std::uint32_t>(regs_.get(R::VCMD_ID));
    const std::uint64_t op = regs_.get(R::VCMD_OP);
    // Unknown op numbers stay unknown: the unit refuses them by number.
    c.op = static_cast<vector::Op>(std::min<std::uint64_t>(op, 255));
    c.rows = static_cast<unsigned>(regs_.get(R::VCMD_ROWS));
    c.cols = static_cast<unsigned>(regs_.get(R::VCMD_COLS));
    c.src0 = regs_.get(R::VCMD_SRC0);
    c.src1 = regs_.get(R::VCMD_SRC1);
    c.src2 = regs_.get(R::VCMD_SRC2);
    c.dst = regs_.get(R::VCMD_DST);
    c.k = static_cast<unsigned>(regs_.get(R::VCMD_K));
    c.position = static_cast<unsigned>(regs_.get(R::VCMD_POSITION));
    const auto eps_bits = static_cast<std::uint32_t>(regs_.get(R::VCMD_EPS));
    std::memcpy(&c.eps, &eps_bits, 4);
    static const num::Format formats[] = {num::Format::FP32, num::Format::BF16, num::Format::FP16, num::Format::E4M3,
                                          num::Format::E5M2, num::Format::INT8, num::Format::INT32};
    const std::uint64_t vf = regs_.get(R::VCMD_FORMAT);
    const unsigned fmt_code = static_cast<unsigned>(vf & R::VCMD_FORMAT_f::FORMAT_MASK);
    // Unknown codes stay unknown: the unit refuses them by number.
    c.format = fmt_code < 7 ? formats[fmt_code] : static_cast<num::Format>(fmt_code + 16);
    c.saturate = vf & R::VCMD_FORMAT_f::SATURATE_MASK;
    c.group = static_cast<unsigned>(regs_.get(R::VCMD_GROUP));
    c.aux = regs_.get(R::VCMD_AUX);
    vector::VectorUnit& vu = *tile_.vu_;
    if (vu.queued() >= tile_.config_.queue_depth) {
      ++vrefused_;
      log::guest_error(tile_.path(), "tile/vqueue-full",
                       "VCMD_PUSH of command {} with {} commands queued (queue_depth {}); dropped", c.id, vu.queued(),
                       tile_.config_.queue_depth);
      regs_.set(R::IRQ_STATUS, regs_.get(R::IRQ_STATUS) | R::IRQ_STATUS_f::VERROR_MASK);
      update_irq();
      return;
    }
    vu.submit(c);
  }
  void update_irq() { tile_.irq.write(regs_.get(R::IRQ_ENABLE) & regs_.get(R::IRQ_STATUS)); }

  void push() {
    tensor::GemmCommand c;
    c.id = static_cast<std::uint32_t>(regs_.get(R::CMD_ID));
    const std::uint64_t f = regs_.get(R::CMD_FORMAT);
    static const num::Format inputs[] = {num::Format::FP32, num::Format::BF16, num::Format::FP16,
                                         num::Format::E4M3, num::Format::E5M2, num::Format::INT8};
    const unsigned input = static_cast<unsigned>(f & R::CMD_FORMAT_f::INPUT_MASK);
    // Unknown codes become FP32, which the array refuses with a format error.
    c.shape.input = input < 6 ? inputs[input] : num::Format::FP32;
    c.shape.m = static_cast<unsigned>(regs_.get(R::CMD_M));
    c.shape.n = static_cast<unsigned>(regs_.get(R::CMD_N));
    c.shape.k = static_cast<unsigned>(regs_.get(R::CMD_K));
    const unsigned acc = static_cast<unsigned>((f & R::CMD_FORMAT_f::ACC_MASK) >> 4);
    c.acc.kind = acc == 1 ? num::Accumulation::Kind::limited
                          : acc == 2 ? num::Accumulation::Kind::int32 : num::Accumulation::Kind::fp32;
    c.acc.mantissa_bits = static_cast<unsigned>((f & R::CMD_FORMAT_f::MANT_BITS_MASK) >> 16);
    c.acc.promote_every = static_cast<unsigned>(regs_.get(R::CMD_PROMOTE));
    c.accumulate = f & R::CMD_FORMAT_f::ACCUMULATE_MASK;
    c.trans_a = f & R::CMD_FORMAT_f::TRANS_A_MASK;
    c.trans_b = f & R::CMD_FORMAT_f::TRANS_B_MASK;
    c.a = regs_.get(R::CMD_A);
    c.b = regs_.get(R::CMD_B);
    c.c = regs_.get(R::CMD_C);
    c.lda = static_cast<std::uint32_t>(regs_.get(R::CMD_LDA));
    c.ldb = static_cast<std::uint32_t>(regs_.get(R::CMD_LDB));
    c.ldc = static_cast<std::uint32_t>(regs_.get(R::CMD_LDC));
    c.block_scaled = f & R::CMD_FORMAT_f::BLOCK_SCALED_MASK;
    c.scale_format = (f & R::CMD_FORMAT_f::SCALE_E8M0_MASK) ? num::ScaleFormat::E8M0 : num::ScaleFormat::FP32;
    c.sa = regs_.get(R::CMD_SA);
    c.sb = regs_.get(R::CMD_SB);
    c.group = regs_.get(R::CMD_GROUP) ? static_cast<unsigned>(regs_.get(R::CMD_GROUP)) : 128;
    tensor::TensorCore& tc = *tile_.tc_;
    if (tc.queued() >= tile_.config_.queue_depth) {
      ++refused_;
      log::guest_error(tile_.path(), "tile/queue-full",
                       "CMD_PUSH of command {} with {} commands queued (queue_depth {}); dropped", c.id, tc.queued(),
                       tile_.config_.queue_depth);
      regs_.set(R::IRQ_STATUS, regs_.get(R::IRQ_STATUS) | R::IRQ_STATUS_f::ERROR_MASK);
      update_irq();
      return;
    }
    tc.submit(c);
  }

  Tile& tile_;
};

Tile::Tile(const sc_core::sc_module_name& n, const Config& c) : Ip(n), config_(c) {
  spm_ = std::make_unique<Scratchpad>("spm", c.spm);
  tc_ = std::make_unique<tensor::TensorCore>("tensor", *spm_, c.array);
  vu_ = std::make_unique<vector::VectorUnit>("vector", *spm_, c.vector);
  regs_ = std::make_unique<Regs>("regs", *this);
  expose_target("mem_target", spm_->mem_target, c.spm.size);
  expose_target("csr_target", regs_->csr_target, R::kBlock.window);
  expose_irq_out("irq_out", irq);
  tc_irq_.set_handler([this](bool level) {
    if (level) regs_->engine_event();
  });
  tc_->irq.bind(tc_irq_);
  vu_irq_.set_handler([this](bool level) {
    if (level) regs_->vector_event();
  });
  vu_->irq.bind(vu_irq_);
}

Tile::~Tile() = default;

tlm::tlm_target_socket<>& Tile::csr_target() { return regs_->csr_target; }

void Tile::report_stats(nlohmann::ordered_json& out) const {
  // Flat keys, prefixed by the part they count.
  nlohmann::ordered_json regs, spm;
  regs_->report_stats(regs);
  spm_->report_stats(spm);
  for (const auto& [k, v] : regs.items()) out[k] = v;
  for (const auto& [k, v] : spm.items()) out["spm_" + k] = v;
  const tensor::TensorStats& s = tc_->stats();
  out["tensor_commands"] = s.commands;
  out["tensor_errors"] = s.errors;
  out["tensor_refused_queue_full"] = regs_->refused_;
  out["tensor_macs_bf16"] = s.macs_bf16;
  out["tensor_macs_fp16"] = s.macs_fp16;
  out["tensor_macs_fp8"] = s.macs_fp8;
  out["tensor_macs_int8"] = s.macs_int8;
  out["tensor_busy_cycles"] = s.busy_cycles;
  out["tensor_operand_stall_cycles"] = s.operand_stall_cycles;
  out["tensor_bytes_read"] = s.bytes_read;
  out["tensor_bytes_written"] = s.bytes_written;
  const vector::VectorStats& v = vu_->stats();
  out["vector_commands"] = v.commands;
  out["vector_errors"] = v.errors;
  out["vector_refused_queue_full"] = regs_->vrefused_;
  out["vector_elementwise"] = v.elementwise;
  out["vector_special"] = v.special;
  out["vector_row_ops"] = v.row_ops;
  out["vector_reductions"] = v.reductions;
  out["vector_lane_ops"] = v.lane_ops;
  out["vector_special_function_ops"] = v.special_ops;
  out["vector_busy_cycles"] = v.busy_cycles;
}

TESSERA_REGISTER_IP("tile", Tile,
                    "tensor tile: banked scratchpad, tensor core and vector unit behind command registers");

}  // namespace tessera
