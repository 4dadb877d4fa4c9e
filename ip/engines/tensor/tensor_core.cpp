#include "engines/tensor/tensor_core.hpp"

#include "engines/command.hpp"
#include "tensor_regs.hpp"

#include <fmt/format.h>

#include "common/trace.hpp"

#include <fmt/format.h>

#include <cstring>

#include "common/log.hpp"
#include "common/sim.hpp"

namespace tessera::tensor {

// Energy per MAC by input format (sources: ip/power/README.md).
const power::Event kMacBf16 = power::declare_event("mac_bf16", "tiles", 0.25, "a BF16 multiply-accumulate of the tensor core");
const power::Event kMacFp16 = power::declare_event("mac_fp16", "tiles", 0.25, "an FP16 multiply-accumulate");
const power::Event kMacFp8 = power::declare_event("mac_fp8", "tiles", 0.12, "an FP8 multiply-accumulate");
const power::Event kMacInt8 = power::declare_event("mac_int8", "tiles", 0.06, "an INT8 multiply-accumulate");

namespace {
const trace::Category kTrace = trace::category("tensor", "tensor core commands");
}  // namespace
namespace {
unsigned element_bytes(num::Format f) { return num::bits(f) / 8; }
// Every code's value, per input format (at most 65536 entries), built once.
const std::vector<double>& decode_table(num::Format f) {
  static std::vector<double> tables[8];
  std::vector<double>& t = tables[static_cast<unsigned>(f)];
  if (t.empty()) {
    t.resize(std::size_t(1) << num::bits(f));
    for (std::size_t code = 0; code < t.size(); ++code) t[code] = num::decode(f, static_cast<std::uint32_t>(code));
  }
  return t;
}
bool is_integer(num::Format f) { return f == num::Format::INT8; }
}  // namespace

TensorCore::TensorCore(const sc_core::sc_module_name& n, scratchpad::Scratchpad& spm, const ArrayConfig& cfg)
    : sc_core::sc_module(n), spm_(spm), cfg_(cfg), period_(sc_core::sc_time(1.0 / cfg.clock_hz, sc_core::SC_SEC)) {
  SC_HAS_PROCESS(TensorCore);
  SC_THREAD(run);
}

void TensorCore::submit(const GemmCommand& c) {
  queue_.push_back(c);
  probe();
  work_.notify(sc_core::SC_ZERO_TIME);
}

void TensorCore::acknowledge() { irq.write(false); }

void TensorCore::reset() {
  queue_.clear();
  probe();
  reset_.notify();  // a command waiting for its semaphore is dropped too
  error_.clear();
  error_id_ = 0;
  error_code_ = CommandError::none;
  irq.write(false);
}

std::string TensorCore::validate(const GemmCommand& c, CommandError& code) const {
  code = CommandError::semaphore;
  if (!Semaphores::valid(sems_, c.wait_sem) || !Semaphores::valid(sems_, c.signal_sem) ||
      !Semaphores::valid(sems_, c.signal_sem2))
    return fmt::format("semaphore numbers wait {} / signal {} / signal2 {}: this tile has {} (0 means none)",
                       c.wait_sem, c.signal_sem, c.signal_sem2, sems_ ? sems_->size() : 0);
  if (std::string e = check(cfg_, c.shape); !e.empty()) {
    code = pack_of(c.shape.input) ? CommandError::shape : CommandError::format;
    return e;
  }
  const GemmShape& s = c.shape;
  if (rtl_ && (c.block_scaled || (s.input != num::Format::INT8 && s.input != num::Format::E4M3) ||
               c.acc.kind == num::Accumulation::Kind::limited)) {
    code = CommandError::format;
    return fmt::format("this tile's array is RTL (impl rtl): it takes INT8 and E4M3 GEMMs with full accumulation, not {}{}{}",
                       num::name(s.input), c.block_scaled ? " block-scaled" : "",
                       c.acc.kind == num::Accumulation::Kind::limited ? " with limited accumulation" : "");
  }
  code = CommandError::accumulation;
  if (is_integer(s.input) != (c.acc.kind == num::Accumulation::Kind::int32))
    return "INT8 inputs take int32 accumulation, and int32 accumulation only INT8 inputs";
  if (c.acc.kind == num::Accumulation::Kind::limited && (c.acc.mantissa_bits < 1 || c.acc.mantissa_bits > 23))
    return "a limited accumulator keeps 1 to 23 mantissa bits, not " + std::to_string(c.acc.mantissa_bits);
  const unsigned eb = element_bytes(s.input);
  // Each operand: rows x cols stored with a pitch; the last byte must be inside.
  struct Operand {
    const char* name;
    std::uint64_t base;
    std::uint64_t rows, cols, pitch, bytes;
  };
  const Operand ops[] = {
      {"A", c.a, c.trans_a ? s.k : s.m, c.trans_a ? s.m : s.k, c.lda, eb},
      {"B", c.b, c.trans_b ? s.n : s.k, c.trans_b ? s.k : s.n, c.ldb, eb},
      {"C", c.c, s.m, s.n, c.ldc, 4},
  };
  if (c.block_scaled) {
    code = CommandError::format;
    if (s.input != num::Format::E4M3 && s.input != num::Format::E5M2)
      return std::string("block scaling takes E4M3 or E5M2 inputs, not ") + num::name(s.input);
    code = CommandError::shape;
    if (c.group == 0 || (c.group & (c.group - 1)) || c.group > 4096)
      return "block-scale group " + std::to_string(c.group) + " is not a power of two from 1 to 4096";
    if (c.trans_a || c.trans_b) return "block-scaled operands are not transposed";
    code = CommandError::range;
    const std::uint64_t kg = (s.k + c.group - 1) / c.group, ng = (s.n + c.group - 1) / c.group;
    const std::uint64_t sbytes = c.scale_format == num::ScaleFormat::E8M0 ? 1 : 4;
    const struct {
      const char* name;
      std::uint64_t base, bytes;
    } scales[] = {{"A's scales", c.sa, s.m * kg * sbytes}, {"B's scales", c.sb, kg * ng * sbytes}};
    for (const auto& sc : scales)
      if (sc.base >= spm_.size() || sc.bytes > spm_.size() - sc.base)
        return std::string(sc.name) + " [" + fmt::format("{:#x}, {:#x}", sc.base, sc.base + sc.bytes) +
               ") are outside the scratchpad (" + fmt::format("{:#x}", spm_.size()) + " bytes)";
  }
  for (const Operand& o : ops) {
    const std::uint64_t pitch = o.pitch ? o.pitch : o.cols;
    code = CommandError::pitch;
    if (pitch < o.cols)
      return std::string(o.name) + "'s pitch " + std::to_string(pitch) + " is less than its " + std::to_string(o.cols) +
             " columns";
    code = CommandError::range;
    const std::uint64_t end = o.base + ((o.rows - 1) * pitch + o.cols) * o.bytes;
    if (end > spm_.size() || o.base >= spm_.size())
      return std::string(o.name) + " [" + fmt::format("{:#x}, {:#x}", o.base, end) + ") is outside the scratchpad (" +
             fmt::format("{:#x}", spm_.size()) + " bytes)";
  }
  code = CommandError::none;
  return {};
}

namespace {

// The bytes a command reads from the scratchpad (A, B, their block scales,
// C when it accumulates) and writes (C).
std::pair<std::uint64_t, std::uint64_t> operand_bytes(const GemmCommand& c) {
  const GemmShape& s = c.shape;
  const std::uint64_t mk = std::uint64_t{s.m} * s.k, kn = std::uint64_t{s.k} * s.n, mn = std::uint64_t{s.m} * s.n;
  std::uint64_t read = (mk + kn) * element_bytes(s.input) + (c.accumulate ? mn * 4 : 0);
  if (c.block_scaled) {
    const std::uint64_t kg = (s.k + c.group - 1) / c.group, ng = (s.n + c.group - 1) / c.group;
    read += (std::uint64_t{s.m} * kg + kg * ng) * (c.scale_format == num::ScaleFormat::E8M0 ? 1 : 4);
  }
  return {read, mn * 4};
}

}  // namespace

void TensorCore::execute(const GemmCommand& c) {
  const GemmShape& s = c.shape;
  const unsigned eb = element_bytes(s.input);
  const std::uint64_t lda = c.lda ? c.lda : (c.trans_a ? s.m : s.k), ldb = c.ldb ? c.ldb : (c.trans_b ? s.k : s.n),
                      ldc = c.ldc ? c.ldc : s.n;
  const auto [read, written] = operand_bytes(c);
  stats_.bytes_read += read;
  stats_.bytes_written += written;
  spm_.count_engine_traffic(read, written);
  if (sim::timing_only()) {  // no products: seeded values in [-1, 1) (INT32: -64 .. 63), the same run after run
    std::uint64_t x = (stats_.commands * 0x9e3779b97f4a7c15ull) ^ (std::uint64_t{c.id} << 32) ^ c.c;
    std::uint8_t* cm = spm_.data() + c.c;
    for (unsigned i = 0; i < s.m; ++i)
      for (unsigned j = 0; j < s.n; ++j) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        const std::int32_t r = static_cast<std::int32_t>(x >> 40) - (1 << 23);  // uniform in [-2^23, 2^23)
        const float f = static_cast<float>(r) / static_cast<float>(1 << 23);
        std::uint32_t w;
        if (is_integer(s.input)) w = static_cast<std::uint32_t>(r >> 17);
        else std::memcpy(&w, &f, 4);
        std::memcpy(cm + (i * ldc + j) * 4, &w, 4);
      }
    return;
  }
  if (c.block_scaled) {
    execute_block_scaled(c, lda, ldb, ldc);
    return;
  }
  if (s.input == num::Format::BF16 && c.acc.kind == num::Accumulation::Kind::fp32 && execute_bf16(c, lda, ldb, ldc)) return;
  const std::uint8_t* mem = spm_.data();
  const std::vector<double>& table = decode_table(s.input);
  auto load = [&](std::uint64_t addr) -> double {
    std::uint32_t code = 0;
    std::memcpy(&code, mem + addr, eb);
    return table[code];
  };
  // Operand and result buffers live on between commands (no page faults).
  std::vector<double>& a = scratch_a_;
  std::vector<double>& b = scratch_b_;
  std::vector<double>& out = scratch_out_;
  a.resize(static_cast<std::size_t>(s.m) * s.k);
  b.resize(static_cast<std::size_t>(s.k) * s.n);
  out.clear();
  for (unsigned i = 0; i < s.m; ++i)
    for (unsigned p = 0; p < s.k; ++p)
      a[static_cast<std::size_t>(i) * s.k + p] = load(c.a + (c.trans_a ? p * lda + i : i * lda + p) * eb);
  for (unsigned p = 0; p < s.k; ++p)
    for (unsigned j = 0; j < s.n; ++j)
      b[static_cast<std::size_t>(p) * s.n + j] = load(c.b + (c.trans_b ? j * ldb + p : p * ldb + j) * eb);
  std::uint8_t* cm = spm_.data() + c.c;
  const bool int_out = is_integer(s.input);
  if (c.accumulate) {
    out.resize(static_cast<std::size_t>(s.m) * s.n);
    for (unsigned i = 0; i < s.m; ++i)
      for (unsigned j = 0; j < s.n; ++j) {
        std::uint32_t w;
        std::memcpy(&w, cm + (i * ldc + j) * 4, 4);
        float f;
        std::memcpy(&f, &w, 4);
        out[static_cast<std::size_t>(i) * s.n + j] = int_out ? static_cast<double>(static_cast<std::int32_t>(w)) : f;
      }
  }
  num::gemm(a, b, out, s.m, s.n, s.k, c.acc, c.accumulate);
  for (unsigned i = 0; i < s.m; ++i)
    for (unsigned j = 0; j < s.n; ++j) {
      const double v = out[static_cast<std::size_t>(i) * s.n + j];
      std::uint32_t w;
      if (int_out) {
        w = static_cast<std::uint32_t>(static_cast<std::int32_t>(v));
      } else {
        const float f = static_cast<float>(v);
        std::memcpy(&w, &f, 4);
      }
      std::memcpy(cm + (i * ldc + j) * 4, &w, 4);
    }
}

// BF16 operands accumulated in FP32, the common command: each code
// decoded straight to the float it is the top half of, and multiplied and
// added in float as num::gemm's float path does (each product exact and
// normal, each C element adding its K products one by one in order), the
// same bits without the general path's float64 operands. False, having
// written nothing, where an operand is outside that path's range (a
// subnormal, an infinity, a NaN, a magnitude outside [2^-62, 2^62)): the
// general path then runs the command.
bool TensorCore::execute_bf16(const GemmCommand& c, std::uint64_t lda, std::uint64_t ldb, std::uint64_t ldc) {
  const GemmShape& s = c.shape;
  const std::uint8_t* mem = spm_.data();
  std::vector<float>& a = scratch_fa_;
  std::vector<float>& b = scratch_fb_;
  std::vector<float>& row = scratch_row_;
  a.resize(static_cast<std::size_t>(s.m) * s.k);
  b.resize(static_cast<std::size_t>(s.k) * s.n);
  row.resize(s.n);
  std::uint32_t outside = 0;
  auto take = [&](std::uint64_t addr) {
    std::uint16_t h;
    std::memcpy(&h, mem + addr, 2);
    const std::uint32_t e = (h >> 7) & 0xffu;
    outside |= (h & 0x7fffu) != 0 && (e < 127 - 62 || e > 127 + 61);
    const std::uint32_t w = std::uint32_t{h} << 16;
    float f;
    std::memcpy(&f, &w, 4);
    return f;
  };
  for (unsigned i = 0; i < s.m; ++i)
    for (unsigned p = 0; p < s.k; ++p)
      a[static_cast<std::size_t>(i) * s.k + p] = take(c.a + (c.trans_a ? p * lda + i : i * lda + p) * 2);
  for (unsigned p = 0; p < s.k; ++p)
    for (unsigned j = 0; j < s.n; ++j)
      b[static_cast<std::size_t>(p) * s.n + j] = take(c.b + (c.trans_b ? j * ldb + p : p * ldb + j) * 2);
  if (outside) return false;
  std::uint8_t* cm = spm_.data() + c.c;
  for (unsigned i = 0; i < s.m; ++i) {
    float* r = row.data();
    for (unsigned j = 0; j < s.n; ++j) {
      if (c.accumulate) std::memcpy(&r[j], cm + (i * ldc + j) * 4, 4);
      else r[j] = 0.0f;
    }
    num::accumulate_row_f32(a.data() + static_cast<std::size_t>(i) * s.k, b.data(), s.n, s.k, r);
    std::memcpy(cm + i * ldc * 4, r, std::size_t{s.n} * 4);
  }
  return true;
}

void TensorCore::execute_block_scaled(const GemmCommand& c, std::uint64_t lda, std::uint64_t ldb, std::uint64_t ldc) {
  const GemmShape& s = c.shape;
  const std::uint8_t* mem = spm_.data();
  const unsigned kg = (s.k + c.group - 1) / c.group, ng = (s.n + c.group - 1) / c.group;
  auto scales = [&](std::uint64_t base, std::size_t count) {
    std::vector<float> out(count);
    for (std::size_t i = 0; i < count; ++i) {
      if (c.scale_format == num::ScaleFormat::E8M0) {
        out[i] = num::e8m0_decode(mem[base + i]);
      } else {
        std::memcpy(&out[i], mem + base + 4 * i, 4);
      }
    }
    return out;
  };
  num::BlockQuantized a, b;
  a.format = b.format = s.input;
  a.scale_format = b.scale_format = c.scale_format;
  a.rows = s.m, a.cols = s.k, a.block_rows = 1, a.block_cols = c.group;
  b.rows = s.k, b.cols = s.n, b.block_rows = c.group, b.block_cols = c.group;
  a.codes.resize(static_cast<std::size_t>(s.m) * s.k);
  b.codes.resize(static_cast<std::size_t>(s.k) * s.n);
  for (unsigned i = 0; i < s.m; ++i)
    std::memcpy(a.codes.data() + static_cast<std::size_t>(i) * s.k, mem + c.a + i * lda, s.k);
  for (unsigned p = 0; p < s.k; ++p)
    std::memcpy(b.codes.data() + static_cast<std::size_t>(p) * s.n, mem + c.b + p * ldb, s.n);
  a.scales = scales(c.sa, static_cast<std::size_t>(s.m) * kg);
  b.scales = scales(c.sb, static_cast<std::size_t>(kg) * ng);
  std::vector<double> out;
  num::gemm_block_scaled(a, b, out, c.acc);
  std::uint8_t* cm = spm_.data() + c.c;
  for (unsigned i = 0; i < s.m; ++i)
    for (unsigned j = 0; j < s.n; ++j) {
      float f = static_cast<float>(out[static_cast<std::size_t>(i) * s.n + j]);
      if (c.accumulate) {
        float old;
        std::memcpy(&old, cm + (i * ldc + j) * 4, 4);
        f = old + f;
      }
      std::memcpy(cm + (i * ldc + j) * 4, &f, 4);
    }
}

std::uint64_t TensorCore::execute_rtl(const GemmCommand& c) {
  // The GEMM cut into the RTL's tiles: for each block of columns, the K
  // slices in order, each slice's partial sums going into the next.
  const GemmShape& s = c.shape;
  const unsigned R = rtl_->rows(), C = rtl_->cols();
  const std::uint64_t lda = c.lda ? c.lda : (c.trans_a ? s.m : s.k), ldb = c.ldb ? c.ldb : (c.trans_b ? s.k : s.n),
                      ldc = c.ldc ? c.ldc : s.n;
  const std::uint8_t* mem = spm_.data();
  auto a_at = [&](unsigned i, unsigned p) { return mem[c.a + (c.trans_a ? p * lda + i : i * lda + p)]; };
  auto b_at = [&](unsigned p, unsigned j) { return mem[c.b + (c.trans_b ? j * ldb + p : p * ldb + j)]; };
  std::uint8_t* cm = spm_.data() + c.c;
  std::uint64_t cycles = 0;
  std::vector<std::uint8_t> w(std::size_t{R} * C), a(std::size_t{s.m} * R);
  std::vector<std::uint32_t> partial(std::size_t{s.m} * C);
  for (unsigned n0 = 0; n0 < s.n; n0 += C) {
    for (unsigned i = 0; i < s.m; ++i)
      for (unsigned j = 0; j < C; ++j) {
        std::uint32_t v = 0;
        if (c.accumulate && n0 + j < s.n) std::memcpy(&v, cm + (i * ldc + n0 + j) * 4, 4);
        partial[std::size_t{i} * C + j] = v;
      }
    for (unsigned k0 = 0; k0 < s.k; k0 += R) {
      for (unsigned r = 0; r < R; ++r)
        for (unsigned j = 0; j < C; ++j) w[std::size_t{r} * C + j] = k0 + r < s.k && n0 + j < s.n ? b_at(k0 + r, n0 + j) : 0;
      for (unsigned i = 0; i < s.m; ++i)
        for (unsigned r = 0; r < R; ++r) a[std::size_t{i} * R + r] = k0 + r < s.k ? a_at(i, k0 + r) : 0;
      std::uint64_t n = 0;
      partial = rtl_->run_tile(s.input == num::Format::E4M3, w, a, partial, s.m, n);
      cycles += n;
    }
    for (unsigned i = 0; i < s.m; ++i)
      for (unsigned j = 0; j < C && n0 + j < s.n; ++j) std::memcpy(cm + (i * ldc + n0 + j) * 4, &partial[std::size_t{i} * C + j], 4);
  }
  const std::uint64_t read = (static_cast<std::uint64_t>(s.m) * s.k + static_cast<std::uint64_t>(s.k) * s.n) +
                             (c.accumulate ? static_cast<std::uint64_t>(s.m) * s.n * 4 : 0),
                      written = static_cast<std::uint64_t>(s.m) * s.n * 4;
  stats_.bytes_read += read;
  stats_.bytes_written += written;
  spm_.count_engine_traffic(read, written);
  return cycles;
}

void TensorCore::run() {
  for (;;) {
    while (queue_.empty()) sc_core::wait(work_);
    const GemmCommand c = queue_.front();
    queue_.pop_front();
    running_ = true;
    probe();
    ++stats_.commands;
    CommandError code = CommandError::none;
    std::string why = validate(c, code);
    if (why.empty() && c.wait_sem && !sems_->acquire(c.wait_sem, reset_, clk_->span(period_), stats_.semaphore_wait_cycles)) {
      running_ = false;  // the queue was reset while the command waited
      probe();
      continue;
    }
    if (!why.empty()) {
      ++stats_.errors;
      error_ = "command " + std::to_string(c.id) + ": " + why;
      error_id_ = c.id;
      error_code_ = code;
      log::guest_error(name(), "engines/tensor/command", "{}", error_);
      running_ = false;
      probe();
      irq.write(true);
      done_.notify(sc_core::SC_ZERO_TIME);
      continue;
    }
    if (rtl_) {  // the RTL in the loop: its clock is the time the command takes
      const sc_core::sc_time began = sc_core::sc_time_stamp();
      const std::uint64_t cycles = execute_rtl(c);
      const GemmShape& s = c.shape;
      const std::uint64_t macs = static_cast<std::uint64_t>(s.m) * s.n * s.k;
      meter_->charge(s.input == num::Format::INT8 ? kMacInt8 : kMacFp8, static_cast<double>(macs), began,
                     sc_core::sc_time_stamp());
      (s.input == num::Format::INT8 ? stats_.macs_int8 : stats_.macs_fp8) += macs;
      stats_.busy_cycles += cycles;
      if (trace::on(kTrace))
        trace::slice(kTrace, name(), fmt::format("gemm {}x{}x{} {} (rtl)", s.m, s.n, s.k, num::name(s.input)), began,
                     sc_core::sc_time_stamp(), {{"id", c.id}, {"macs", macs}, {"cycles", cycles}});
      ++completed_;
      running_ = false;
      probe();
      if (c.signal_sem || c.signal_sem2) sems_->signal_numbers(c.signal_sem, c.signal_sem2);
      irq.write(true);
      done_.notify(sc_core::SC_ZERO_TIME);
      continue;
    }
    // One row wave of A: R * pack consecutive K elements of row 0.
    const GemmShape& s = c.shape;
    const unsigned eb = element_bytes(s.input), wave = std::min(s.k, cfg_.rows * pack_of(s.input));
    const std::uint64_t lda = c.lda ? c.lda : (c.trans_a ? s.m : s.k);
    std::vector<std::uint64_t> addrs(wave);
    for (unsigned p = 0; p < wave; ++p) addrs[p] = c.a + (c.trans_a ? p * lda : p) * eb;
    const std::uint64_t wave_cycles = spm_.geometry().cycles(addrs.data(), wave, eb);
    const GemmTiming t = timing(cfg_, s, wave_cycles);
    const GemmTiming ideal = timing(cfg_, s, 1);
    const std::uint64_t moved = stats_.bytes_read + stats_.bytes_written;
    execute(c);
    // The operand and result streams occupy the banks while the array runs.
    const sc_core::sc_time busy = clk_->span(period_ * static_cast<double>(t.cycles));
    spm_.engine_stream(sc_core::sc_time_stamp(), sc_core::sc_time_stamp() + busy,
                       stats_.bytes_read + stats_.bytes_written - moved);
    // The energy is known now: charged over the run to come, so a power
    // manager reading the windows as they end sees it without delay.
    meter_->charge(s.input == num::Format::BF16   ? kMacBf16
                   : s.input == num::Format::FP16 ? kMacFp16
                   : s.input == num::Format::INT8 ? kMacInt8
                                                  : kMacFp8,
                   static_cast<double>(t.macs), sc_core::sc_time_stamp(), sc_core::sc_time_stamp() + busy);
    switch (s.input) {
      case num::Format::BF16: stats_.macs_bf16 += t.macs; break;
      case num::Format::FP16: stats_.macs_fp16 += t.macs; break;
      case num::Format::INT8: stats_.macs_int8 += t.macs; break;
      default: stats_.macs_fp8 += t.macs; break;
    }
    if (trace::on(kTrace))
      trace::slice(kTrace, name(), fmt::format("gemm {}x{}x{} {}", s.m, s.n, s.k, num::name(s.input)),
                   sc_core::sc_time_stamp(), sc_core::sc_time_stamp() + busy,
                   {{"id", c.id}, {"macs", t.macs}, {"cycles", t.cycles}});
    sc_core::wait(busy);
    stats_.busy_cycles += t.cycles;
    stats_.operand_stall_cycles += t.cycles - ideal.cycles;
    ++completed_;
    running_ = false;
    probe();
    if (c.signal_sem || c.signal_sem2) sems_->signal_numbers(c.signal_sem, c.signal_sem2);
    irq.write(true);
    done_.notify(sc_core::SC_ZERO_TIME);
  }
}

GemmCommand decode(const IncludedRegs& r) {
  namespace R = regs::tensor;
  GemmCommand c;
  const engine::Semaphores sem = engine::semaphores(r, R::CMD_SEM);
  c.id = static_cast<std::uint32_t>(r.get(R::CMD_ID));
  const std::uint64_t f = r.get(R::CMD_FORMAT);
  const num::Format input = engine::format_of(static_cast<unsigned>(f & R::CMD_FORMAT_f::INPUT_MASK));
  // Unknown codes (and INT32, no input format) become FP32, which the array refuses with a format error.
  c.shape.input = static_cast<unsigned>(input) < num::kFormats && input != num::Format::INT32 ? input : num::Format::FP32;
  c.shape.m = static_cast<unsigned>(r.get(R::CMD_M));
  c.shape.n = static_cast<unsigned>(r.get(R::CMD_N));
  c.shape.k = static_cast<unsigned>(r.get(R::CMD_K));
  const unsigned acc = static_cast<unsigned>((f & R::CMD_FORMAT_f::ACC_MASK) >> R::CMD_FORMAT_f::ACC_SHIFT);
  c.acc.kind = acc == 1 ? num::Accumulation::Kind::limited
                        : acc == 2 ? num::Accumulation::Kind::int32 : num::Accumulation::Kind::fp32;
  c.acc.mantissa_bits = static_cast<unsigned>((f & R::CMD_FORMAT_f::MANT_BITS_MASK) >> R::CMD_FORMAT_f::MANT_BITS_SHIFT);
  c.acc.promote_every = static_cast<unsigned>(r.get(R::CMD_PROMOTE));
  c.accumulate = f & R::CMD_FORMAT_f::ACCUMULATE_MASK;
  c.trans_a = f & R::CMD_FORMAT_f::TRANS_A_MASK;
  c.trans_b = f & R::CMD_FORMAT_f::TRANS_B_MASK;
  c.a = r.get(R::CMD_A);
  c.b = r.get(R::CMD_B);
  c.c = r.get(R::CMD_C);
  c.lda = static_cast<std::uint32_t>(r.get(R::CMD_LDA));
  c.ldb = static_cast<std::uint32_t>(r.get(R::CMD_LDB));
  c.ldc = static_cast<std::uint32_t>(r.get(R::CMD_LDC));
  c.block_scaled = f & R::CMD_FORMAT_f::BLOCK_SCALED_MASK;
  c.scale_format = (f & R::CMD_FORMAT_f::SCALE_E8M0_MASK) ? num::ScaleFormat::E8M0 : num::ScaleFormat::FP32;
  c.sa = r.get(R::CMD_SA);
  c.sb = r.get(R::CMD_SB);
  c.group = r.get(R::CMD_GROUP) ? static_cast<unsigned>(r.get(R::CMD_GROUP)) : 128;
  c.wait_sem = sem.wait;
  c.signal_sem = sem.signal;
  c.signal_sem2 = sem.signal2;
  return c;
}

}  // namespace tessera::tensor
