#include "engines/vector/vector_unit.hpp"

#include <cstring>

#include "engines/command.hpp"
#include "vector_regs.hpp"

#include <fmt/format.h>

#include "common/trace.hpp"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <vector>

#include "common/log.hpp"
#include "engines/num/block_scale.hpp"
#include "engines/num/vector_ops.hpp"

namespace tessera::vector {

namespace {
// The vector ops' register codes (vector.regs.json) as the unit's own.
const std::vector<Op>& vector_ops() {
  static const auto t = engine::by_name<Op>(regs::vector::kVectorOpEnum, static_cast<unsigned>(Op::count), name);
  return t;
}
}  // namespace

const power::Event kVectorOp = power::declare_event("vector_op", "tiles", 0.6, "a lane operation of the vector unit (add, mul, compare, ...)");
const power::Event kVectorSpecial = power::declare_event("vector_special", "tiles", 2.5, "a special-function operation (exp, log, rsqrt, silu, ...)");

namespace {
const trace::Category kTrace = trace::category("vector", "vector unit commands");
}  // namespace
namespace {
const char* const kNames[] = {"add", "sub", "mul", "max", "min", "fma", "abs", "neg", "relu", "relu2", "exp",
                              "log", "rsqrt", "recip", "tanh", "sigmoid", "silu", "gelu", "swiglu", "softmax",
                              "rmsnorm", "layernorm", "sum", "rmax", "argmax", "topk", "rope", "cast_to",
                              "cast_from", "scale_rows"};
static_assert(std::size(kNames) == static_cast<unsigned>(Op::count), "a name per op");  // elaboration-only

enum class Kind { binary, ternary, unary, row, reduce, cast };
Kind kind_of(Op op) {
  switch (op) {
    case Op::add: case Op::sub: case Op::mul: case Op::max: case Op::min: case Op::swiglu: case Op::scale_rows:
      return Kind::binary;
    case Op::fma: return Kind::ternary;
    case Op::softmax: case Op::rmsnorm: case Op::layernorm: case Op::rope: return Kind::row;
    case Op::sum: case Op::rmax: case Op::argmax: case Op::topk: return Kind::reduce;
    case Op::cast_to: case Op::cast_from: return Kind::cast;
    default: return Kind::unary;
  }
}
bool is_special(Op op) {
  switch (op) {
    case Op::exp: case Op::log: case Op::rsqrt: case Op::recip: case Op::tanh: case Op::sigmoid: case Op::silu:
    case Op::gelu: case Op::swiglu: return true;
    default: return false;
  }
}
std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return (a + b - 1) / b; }
}  // namespace

const char* name(Op op) { return op < Op::count ? kNames[static_cast<unsigned>(op)] : "unknown"; }

VectorTiming timing(const VectorConfig& cfg, const VectorCommand& c) {
  VectorTiming t;
  const std::uint64_t e = static_cast<std::uint64_t>(c.rows) * c.cols, r = c.rows;
  switch (c.op) {
    case Op::fma: t.lane_ops = 2 * e; break;
    case Op::swiglu: t.lane_ops = 2 * e, t.special_ops = e; break;
    case Op::softmax: t.lane_ops = 3 * e, t.special_ops = e + r; break;
    case Op::rmsnorm: t.lane_ops = 3 * e, t.special_ops = r; break;
    case Op::layernorm: t.lane_ops = 5 * e, t.special_ops = r; break;
    case Op::topk: t.lane_ops = e * std::max(1u, c.k); break;
    case Op::rope: t.lane_ops = 6 * e, t.special_ops = e; break;  // a sin/cos pair per element pair
    case Op::cast_to: case Op::cast_from: t.lane_ops = c.group ? 2 * e : e; break;
    default: t.lane_ops = e, t.special_ops = is_special(c.op) ? e : 0; break;
  }
  t.cycles = ceil_div(t.lane_ops, cfg.lanes) + ceil_div(t.special_ops * cfg.sfu_ratio, cfg.lanes) + cfg.pipeline;
  return t;
}

VectorUnit::VectorUnit(const sc_core::sc_module_name& n, scratchpad::Scratchpad& spm, const VectorConfig& cfg)
    : sc_core::sc_module(n), spm_(spm), cfg_(cfg), period_(sc_core::sc_time(1.0 / cfg.clock_hz, sc_core::SC_SEC)) {
  SC_HAS_PROCESS(VectorUnit);
  SC_THREAD(run);
}

void VectorUnit::submit(const VectorCommand& c) {
  queue_.push_back(c);
  probe();
  work_.notify(sc_core::SC_ZERO_TIME);
}

void VectorUnit::reset() {
  queue_.clear();
  probe();
  reset_.notify();  // a command waiting for its semaphore is dropped too
  error_.clear();
  error_id_ = 0;
  irq.write(false);
}

std::string VectorUnit::validate(const VectorCommand& c) const {
  if (!Semaphores::valid(sems_, c.wait_sem) || !Semaphores::valid(sems_, c.signal_sem) ||
      !Semaphores::valid(sems_, c.signal_sem2))
    return "semaphore numbers wait " + std::to_string(c.wait_sem) + " / signal " + std::to_string(c.signal_sem) +
           " / signal2 " + std::to_string(c.signal_sem2) + ": this tile has " + std::to_string(sems_ ? sems_->size() : 0) + " (0 means none)";
  if (c.op >= Op::count) return "unknown vector op " + std::to_string(static_cast<unsigned>(c.op));
  if (c.rows == 0 || c.cols == 0)
    return std::string(vector::name(c.op)) + " on an empty shape: rows=" + std::to_string(c.rows) +
           " cols=" + std::to_string(c.cols);
  if (c.op == Op::topk && (c.k < 1 || c.k > 8 || c.k > c.cols))
    return "top-k takes 1 <= k <= min(8, cols), not k=" + std::to_string(c.k);
  if (c.op == Op::rope && c.cols % 2) return "rope needs an even row length, not " + std::to_string(c.cols);
  if (c.op == Op::cast_to || c.op == Op::cast_from) {
    if (c.format > num::Format::INT32) return "cast to an unknown format " + std::to_string(static_cast<unsigned>(c.format));
    if (c.group && (c.format == num::Format::FP32 || c.format == num::Format::INT32))
      return std::string("group scaling needs a narrow format, not ") + num::name(c.format);
    const std::uint64_t n = static_cast<std::uint64_t>(c.rows) * c.cols, eb = num::bits(c.format) / 8;
    const std::uint64_t groups = c.group ? static_cast<std::uint64_t>(c.rows) * ((c.cols + c.group - 1) / c.group) : 0;
    const bool to = c.op == Op::cast_to;
    const struct {
      const char* name;
      std::uint64_t base, bytes;
    } uses[] = {{"src0", c.src0, n * (to ? 4 : eb)}, {"dst", c.dst, n * (to ? eb : 4)}, {"aux (scales)", c.aux, groups * (c.scale_format == num::ScaleFormat::E8M0 ? 1 : 4)}};
    for (const auto& u : uses)
      if (u.bytes && (u.base >= spm_.size() || u.bytes > spm_.size() - u.base))
        return std::string(vector::name(c.op)) + ": " + u.name + " [" +
               fmt::format("{:#x}, {:#x}", u.base, u.base + u.bytes) + ") is outside the scratchpad (" +
               fmt::format("{:#x}", spm_.size()) + " bytes)";
    return {};
  }
  const std::uint64_t e = static_cast<std::uint64_t>(c.rows) * c.cols * 4, row = static_cast<std::uint64_t>(c.cols) * 4;
  struct Use {
    const char* name;
    std::uint64_t base, bytes;
  };
  std::vector<Use> uses = {{"src0", c.src0, e}};
  const Kind k = kind_of(c.op);
  if (k == Kind::binary || k == Kind::ternary)
    uses.push_back({"src1", c.src1, c.op == Op::scale_rows ? static_cast<std::uint64_t>(c.rows) * 4 : e});
  if (k == Kind::ternary) uses.push_back({"src2", c.src2, e});
  if (c.op == Op::rmsnorm || c.op == Op::layernorm) uses.push_back({"src1", c.src1, row});
  if (c.op == Op::layernorm) uses.push_back({"src2", c.src2, row});
  const std::uint64_t out = c.op == Op::topk ? static_cast<std::uint64_t>(c.rows) * c.k * 8
                            : k == Kind::reduce ? static_cast<std::uint64_t>(c.rows) * 4
                                                : e;
  uses.push_back({"dst", c.dst, out});
  for (const Use& u : uses)
    if (u.base >= spm_.size() || u.bytes > spm_.size() - u.base)
      return std::string(vector::name(c.op)) + ": " + u.name + " [" +
             fmt::format("{:#x}, {:#x}", u.base, u.base + u.bytes) + ") is outside the scratchpad (" +
             fmt::format("{:#x}", spm_.size()) + " bytes)";
  return {};
}

void VectorUnit::execute(const VectorCommand& c) {
  std::uint8_t* mem = spm_.data();
  const std::size_t e = static_cast<std::size_t>(c.rows) * c.cols;
  auto load = [&](std::uint64_t at, std::size_t count) {
    std::vector<float> v(count);
    std::memcpy(v.data(), mem + at, count * 4);
    return v;
  };
  if (c.op == Op::cast_to || c.op == Op::cast_from) {
    cast(c);
    return;
  }
  std::vector<float> x = load(c.src0, e), out;
  namespace vec = num::vec;
  const Kind k = kind_of(c.op);
  if (k == Kind::binary || k == Kind::ternary) {
    const std::vector<float> y = load(c.src1, c.op == Op::scale_rows ? c.rows : e),
                             z = k == Kind::ternary ? load(c.src2, e) : std::vector<float>();
    out.resize(e);
    for (std::size_t i = 0; i < e; ++i) {
      switch (c.op) {
        case Op::add: out[i] = x[i] + y[i]; break;
        case Op::sub: out[i] = x[i] - y[i]; break;
        case Op::mul: out[i] = x[i] * y[i]; break;
        case Op::max: out[i] = std::max(x[i], y[i]); break;
        case Op::min: out[i] = std::min(x[i], y[i]); break;
        case Op::swiglu: out[i] = vec::swiglu(x[i], y[i]); break;
        case Op::scale_rows: out[i] = x[i] * y[i / c.cols]; break;
        default: out[i] = std::fma(x[i], y[i], z[i]); break;
      }
    }
  } else if (k == Kind::unary) {
    out.resize(e);
    for (std::size_t i = 0; i < e; ++i) {
      const float v = x[i];
      switch (c.op) {
        case Op::abs: out[i] = std::fabs(v); break;
        case Op::neg: out[i] = -v; break;
        case Op::relu: out[i] = vec::relu(v); break;
        case Op::relu2: out[i] = vec::relu2(v); break;
        case Op::exp: out[i] = vec::exp(v); break;
        case Op::log: out[i] = vec::log(v); break;
        case Op::rsqrt: out[i] = vec::rsqrt(v); break;
        case Op::recip: out[i] = vec::recip(v); break;
        case Op::tanh: out[i] = vec::tanh(v); break;
        case Op::sigmoid: out[i] = vec::sigmoid(v); break;
        case Op::silu: out[i] = vec::silu(v); break;
        default: out[i] = vec::gelu(v); break;
      }
    }
  } else if (k == Kind::row) {
    out = x;
    const std::vector<float> w =
        (c.op == Op::rmsnorm || c.op == Op::layernorm) ? load(c.src1, c.cols) : std::vector<float>();
    const std::vector<float> b = c.op == Op::layernorm ? load(c.src2, c.cols) : std::vector<float>();
    for (unsigned r = 0; r < c.rows; ++r) {
      float* row = out.data() + static_cast<std::size_t>(r) * c.cols;
      switch (c.op) {
        case Op::softmax: vec::softmax(row, c.cols); break;
        case Op::rmsnorm: vec::rmsnorm(row, w.data(), c.cols, c.eps); break;
        case Op::layernorm: vec::layernorm(row, w.data(), b.data(), c.cols, c.eps); break;
        default: vec::rope(row, c.cols, c.position); break;
      }
    }
  } else {  // reductions, one result (or k) per row
    const unsigned per = c.op == Op::topk ? c.k : 1;
    out.resize(static_cast<std::size_t>(c.rows) * per);
    std::vector<std::uint32_t> idx(out.size());
    for (unsigned r = 0; r < c.rows; ++r) {
      const float* row = x.data() + static_cast<std::size_t>(r) * c.cols;
      switch (c.op) {
        case Op::sum: out[r] = vec::sum(row, c.cols); break;
        case Op::rmax: out[r] = *std::max_element(row, row + c.cols); break;
        case Op::argmax: {
          const std::uint32_t i = vec::argmax(row, c.cols);
          std::memcpy(&out[r], &i, 4);
          break;
        }
        default: {
          unsigned ix[8];
          vec::topk(row, c.cols, c.k, out.data() + static_cast<std::size_t>(r) * c.k, ix);
          for (unsigned j = 0; j < c.k; ++j) idx[static_cast<std::size_t>(r) * c.k + j] = ix[j];
        }
      }
    }
    if (c.op == Op::topk) std::memcpy(mem + c.dst + out.size() * 4, idx.data(), idx.size() * 4);
  }
  std::memcpy(mem + c.dst, out.data(), out.size() * 4);
}

void VectorUnit::cast(const VectorCommand& c) {
  std::uint8_t* mem = spm_.data();
  const std::size_t n = static_cast<std::size_t>(c.rows) * c.cols;
  const unsigned eb = num::bits(c.format) / 8;
  const unsigned per_row = c.group ? (c.cols + c.group - 1) / c.group : 0;
  const bool e8m0 = c.scale_format == num::ScaleFormat::E8M0;
  auto put_code = [&](std::size_t i, std::uint32_t code) { std::memcpy(mem + c.dst + i * eb, &code, eb); };
  num::Rng rng{c.seed};
  num::Convert conv;
  conv.saturate = c.saturate;
  if (c.stochastic) conv.rounding = num::Rounding::stochastic, conv.rng = &rng;
  if (c.op == Op::cast_to) {
    std::vector<float> x(n);
    std::memcpy(x.data(), mem + c.src0, n * 4);
    if (c.group) {
      conv.saturate = true;
      const num::BlockQuantized q =
          num::block_quantize(x.data(), c.rows, c.cols, c.format, c.scale_format, 1, c.group, conv);
      for (std::size_t i = 0; i < n; ++i) put_code(i, q.codes[i]);
      for (std::size_t g = 0; g < q.scales.size(); ++g) {
        if (e8m0) mem[c.aux + g] = num::e8m0_encode(q.scales[g]);
        else std::memcpy(mem + c.aux + 4 * g, &q.scales[g], 4);
      }
    } else {
      for (std::size_t i = 0; i < n; ++i) put_code(i, num::encode(c.format, x[i], conv));
    }
    return;
  }
  std::vector<float> out(n), scales(static_cast<std::size_t>(c.rows) * per_row, 1.0f);
  for (std::size_t g = 0; c.group && g < scales.size(); ++g) {
    if (e8m0) scales[g] = num::e8m0_decode(mem[c.aux + g]);
    else std::memcpy(&scales[g], mem + c.aux + 4 * g, 4);
  }
  for (unsigned r = 0; r < c.rows; ++r)
    for (unsigned j = 0; j < c.cols; ++j) {
      const std::size_t i = static_cast<std::size_t>(r) * c.cols + j;
      std::uint32_t code = 0;
      std::memcpy(&code, mem + c.src0 + i * eb, eb);
      const double v = num::decode(c.format, code);
      out[i] = static_cast<float>(c.group ? v * scales[static_cast<std::size_t>(r) * per_row + j / c.group] : v);
    }
  std::memcpy(mem + c.dst, out.data(), n * 4);
}

// Scratchpad bytes a command reads and writes (operands, results, scales).
std::uint64_t VectorUnit::traffic(const VectorCommand& c) const {
  const std::uint64_t e = static_cast<std::uint64_t>(c.rows) * c.cols, row = 4 * static_cast<std::uint64_t>(c.cols);
  switch (kind_of(c.op)) {
    case Kind::binary: return 3 * 4 * e;
    case Kind::ternary: return 4 * 4 * e;
    case Kind::unary: return 2 * 4 * e;
    case Kind::row: return 2 * 4 * e + 2 * row;
    case Kind::reduce: return 4 * e + 8 * static_cast<std::uint64_t>(c.rows) * std::max(1u, c.k);
    case Kind::cast: return 4 * e + e * (num::bits(c.format) / 8) + (c.group ? 4 * e / c.group : 0);
  }
  return 0;
}

void VectorUnit::run() {
  for (;;) {
    while (queue_.empty()) sc_core::wait(work_);
    const VectorCommand c = queue_.front();
    queue_.pop_front();
    running_ = true;
    probe();
    ++stats_.commands;
    const std::string why = validate(c);
    if (why.empty() && c.wait_sem && !sems_->acquire(c.wait_sem, reset_, clk_->span(period_), stats_.semaphore_wait_cycles)) {
      running_ = false;  // the queue was reset while the command waited
      probe();
      continue;
    }
    if (!why.empty()) {
      ++stats_.errors;
      error_ = "command " + std::to_string(c.id) + ": " + why;
      error_id_ = c.id;
      log::guest_error(name(), "engines/vector/command", "{}", error_);
      running_ = false;
      probe();
      irq.write(true);
      continue;
    }
    const VectorTiming t = timing(cfg_, c);
    execute(c);
    // Its operand rows stream through the banks while it runs.
    const sc_core::sc_time busy = clk_->span(period_ * static_cast<double>(t.cycles));
    spm_.engine_stream(sc_core::sc_time_stamp(), sc_core::sc_time_stamp() + busy, traffic(c));
    // Charged over the run to come (see the tensor core).
    const sc_core::sc_time began = sc_core::sc_time_stamp();
    stats_.lane_ops += t.lane_ops;
    stats_.special_ops += t.special_ops;
    meter_->charge(kVectorOp, static_cast<double>(t.lane_ops), began, began + busy);
    meter_->charge(kVectorSpecial, static_cast<double>(t.special_ops), began, began + busy);
    if (trace::on(kTrace))
      trace::slice(kTrace, name(), fmt::format("{} {}x{}", vector::name(c.op), c.rows, c.cols), began, began + busy,
                   {{"id", c.id}, {"lane_ops", t.lane_ops}, {"special_ops", t.special_ops}, {"cycles", t.cycles}});
    sc_core::wait(busy);
    stats_.busy_cycles += t.cycles;
    switch (kind_of(c.op)) {
      case Kind::row: ++stats_.row_ops; break;
      case Kind::reduce: ++stats_.reductions; break;
      case Kind::cast: ++stats_.casts; break;
      default: ++(is_special(c.op) ? stats_.special : stats_.elementwise); break;
    }
    ++completed_;
    running_ = false;
    probe();
    if (c.signal_sem || c.signal_sem2) sems_->signal_numbers(c.signal_sem, c.signal_sem2);
    irq.write(true);
  }
}

VectorCommand decode(const IncludedRegs& r) {
  namespace R = regs::vector;
  VectorCommand c;
  const engine::Semaphores sem = engine::semaphores(r, R::VCMD_SEM);
  c.id = static_cast<std::uint32_t>(r.get(R::VCMD_ID));
  const std::uint64_t op = r.get(R::VCMD_OP);
  // Unknown op numbers stay unknown: the unit refuses them by number.
  c.op = op < vector_ops().size() ? vector_ops()[op] : static_cast<Op>(std::min<std::uint64_t>(op, 255));
  c.rows = static_cast<unsigned>(r.get(R::VCMD_ROWS));
  c.cols = static_cast<unsigned>(r.get(R::VCMD_COLS));
  c.src0 = r.get(R::VCMD_SRC0);
  c.src1 = r.get(R::VCMD_SRC1);
  c.src2 = r.get(R::VCMD_SRC2);
  c.dst = r.get(R::VCMD_DST);
  c.k = static_cast<unsigned>(r.get(R::VCMD_K));
  c.position = static_cast<unsigned>(r.get(R::VCMD_POSITION));
  const auto eps_bits = static_cast<std::uint32_t>(r.get(R::VCMD_EPS));
  std::memcpy(&c.eps, &eps_bits, 4);
  const std::uint64_t vf = r.get(R::VCMD_FORMAT);
  c.format = engine::format_of(static_cast<unsigned>(vf & R::VCMD_FORMAT_f::FORMAT_MASK));
  c.saturate = vf & R::VCMD_FORMAT_f::SATURATE_MASK;
  c.scale_format = (vf & R::VCMD_FORMAT_f::SCALE_E8M0_MASK) ? num::ScaleFormat::E8M0 : num::ScaleFormat::FP32;
  c.stochastic = vf & R::VCMD_FORMAT_f::STOCHASTIC_MASK;
  c.seed = r.get(R::VCMD_SEED);
  c.group = static_cast<unsigned>(r.get(R::VCMD_GROUP));
  c.aux = r.get(R::VCMD_AUX);
  c.wait_sem = sem.wait;
  c.signal_sem = sem.signal;
  c.signal_sem2 = sem.signal2;
  return c;
}

}  // namespace tessera::vector
