#include "engines/dma/dma.hpp"

#include "dma_regs.hpp"
#include "engines/command.hpp"

#include <fmt/format.h>

#include "common/trace.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "common/log.hpp"
#include "common/payload.hpp"

namespace tessera::dma {

namespace {
const trace::Category kTrace = trace::category("dma", "DMA descriptors");
}  // namespace

namespace {

bool is_fp8(num::Format f) { return f == num::Format::E4M3 || f == num::Format::E5M2; }
bool is_wide_float(num::Format f) {
  return f == num::Format::FP32 || f == num::Format::BF16 || f == num::Format::FP16;
}

}  // namespace

Dma::Dma(const sc_core::sc_module_name& n, scratchpad::Scratchpad& spm, const Config& c)
    : sc_core::sc_module(n), initiator("initiator"), spm_(spm), cfg_(c),
      period_(sc_core::sc_time(1.0 / c.clock_hz, sc_core::SC_SEC)) {
  SC_HAS_PROCESS(Dma);
  SC_THREAD(run);
  for (unsigned w = 0; w < std::max(1u, c.outstanding); ++w)
    sc_core::sc_spawn([this] { worker(); }, sc_core::sc_gen_unique_name("worker"));
}

void Dma::submit(const Descriptor& d) {
  queue_.push_back(d);
  probe();
  work_.notify(sc_core::SC_ZERO_TIME);
}

void Dma::reset() {
  queue_.clear();
  probe();
  reset_.notify();
  error_.clear();
  error_id_ = 0;
  error_code_ = DmaError::none;
  irq.write(false);
}

std::string Dma::validate(const Descriptor& d, DmaError& code) const {
  code = DmaError::semaphore;
  if (!Semaphores::valid(sems_, d.wait_sem) || !Semaphores::valid(sems_, d.signal_sem) ||
      !Semaphores::valid(sems_, d.signal_sem2))
    return fmt::format("semaphore numbers wait {} / signal {} / signal2 {}: this tile has {} (0 means none)",
                       d.wait_sem, d.signal_sem, d.signal_sem2, sems_ ? sems_->size() : 0);
  code = DmaError::shape;
  if (d.len0 == 0 || d.count1 == 0 || d.count2 == 0)
    return fmt::format("empty shape {} x {} x {}", d.len0, d.count1, d.count2);
  code = DmaError::format;
  unsigned seb = 1, deb = 1;
  if (!d.raw) {
    for (num::Format f : {d.src_format, d.dst_format})
      if (f > num::Format::INT32) return fmt::format("unknown element format {}", static_cast<unsigned>(f));
    seb = num::bits(d.src_format) / 8;
    deb = num::bits(d.dst_format) / 8;
  }
  if (d.group) {
    if (d.raw || !((is_fp8(d.dst_format) && is_wide_float(d.src_format)) ||
                   (is_fp8(d.src_format) && is_wide_float(d.dst_format))))
      return "block scales (group " + std::to_string(d.group) +
             ") need a cast between FP32/BF16/FP16 and E4M3/E5M2";
    if (d.len0 % d.group) return fmt::format("rows of {} elements are not whole groups of {}", d.len0, d.group);
  }
  code = DmaError::range;
  // Local sides must lie inside the scratchpad; the bus answers for the rest.
  auto extent = [&](std::uint64_t base, std::uint64_t s1, std::uint64_t s2, unsigned eb) {
    const std::uint64_t row = static_cast<std::uint64_t>(d.len0) * eb;
    s1 = s1 ? s1 : row;
    s2 = s2 ? s2 : s1 * d.count1;
    return base + (d.count2 - 1) * s2 + (d.count1 - 1) * s1 + row;
  };
  const std::uint64_t size = spm_.size();
  if (d.src_local && extent(d.src, d.src_stride1, d.src_stride2, seb) > size)
    return fmt::format("source [{:#x}, {:#x}) runs past the scratchpad ({:#x} bytes)", d.src,
                       extent(d.src, d.src_stride1, d.src_stride2, seb), size);
  if (d.dst_local && extent(d.dst, d.dst_stride1, d.dst_stride2, deb) > size)
    return fmt::format("destination [{:#x}, {:#x}) runs past the scratchpad ({:#x} bytes)", d.dst,
                       extent(d.dst, d.dst_stride1, d.dst_stride2, deb), size);
  if (d.group && d.scales_local) {
    const std::uint64_t n = static_cast<std::uint64_t>(d.count2) * d.count1 * (d.len0 / d.group) *
                            (d.scale_format == num::ScaleFormat::E8M0 ? 1 : 4);
    if (d.scales + n > size)
      return fmt::format("scales [{:#x}, {:#x}) run past the scratchpad ({:#x} bytes)", d.scales, d.scales + n, size);
  }
  return {};
}

void Dma::fail(const Descriptor& d, DmaError code, const std::string& why) {
  ++stats_.errors;
  error_ = "descriptor " + std::to_string(d.id) + ": " + why;
  error_id_ = d.id;
  error_code_ = code;
  log::guest_error(name(), "engines/dma/descriptor", "{}", error_);
  running_ = false;
  probe();
  irq.write(true);
}

Dma::Chunk Dma::chunk(std::uint64_t i) const {
  const Descriptor& d = cur_;
  const std::uint64_t row = i / chunks_per_row_, piece = i % chunks_per_row_;
  const std::uint64_t plane = row / d.count1, r = row % d.count1;
  const std::uint64_t e0 = piece * per_chunk_;
  Chunk c;
  c.elements = static_cast<std::uint32_t>(std::min<std::uint64_t>(per_chunk_, d.len0 - e0));
  c.src = d.src + plane * src_s2_ + r * src_s1_ + e0 * src_eb_;
  c.dst = d.dst + plane * dst_s2_ + r * dst_s1_ + e0 * dst_eb_;
  c.scales = d.group ? d.scales + (row * (d.len0 / d.group) + e0 / d.group) * scale_bytes_ : 0;
  return c;
}

bool Dma::access(bool local, bool write, std::uint64_t addr, std::uint8_t* data, unsigned len,
                 sc_core::sc_time& delay) {
  tlm::tlm_generic_payload t;
  set_access(t, write ? tlm::TLM_WRITE_COMMAND : tlm::TLM_READ_COMMAND, addr, data, len);
  if (local) spm_.b_transport(t, delay);
  else initiator->b_transport(t, delay);
  (write ? stats_.bytes_written : stats_.bytes_read) += len;
  (local ? stats_.local_bytes : stats_.global_bytes) += len;
  if (!local) (write ? stats_.global_written_bytes : stats_.global_read_bytes) += len;
  if (t.is_response_ok()) return true;
  if (chunk_error_.empty())
    chunk_error_ = fmt::format("{} of {} bytes at {} {:#x}: {}", write ? "write" : "read", len,
                               local ? "scratchpad offset" : "address", addr, t.get_response_string());
  return false;
}

void Dma::move(const Chunk& c, std::uint64_t index) {
  const Descriptor& d = cur_;
  ++stats_.chunks;
  const unsigned sbytes = c.elements * src_eb_, dbytes = c.elements * dst_eb_;
  // The engine's port: one chunk's bytes at port_bytes per cycle.
  const std::uint64_t now = clk_->nominal(sc_core::sc_time_stamp()) / period_.value();
  const std::uint64_t start = std::max(now, port_free_);
  port_free_ = start + (std::max(sbytes, dbytes) + cfg_.port_bytes - 1) / cfg_.port_bytes;
  sc_core::sc_time delay = clk_->span(period_ * static_cast<double>(port_free_ - now));
  std::vector<std::uint8_t> in(sbytes), out;
  if (!access(d.src_local, false, c.src, in.data(), sbytes, delay)) return;
  sc_core::wait(delay);
  delay = sc_core::SC_ZERO_TIME;
  const bool cast = !d.raw && d.src_format != d.dst_format;
  if (!cast) {
    out = std::move(in);
  } else {
    stats_.cast_elements += c.elements;
    out.resize(dbytes);
    std::vector<float> x(c.elements);
    const unsigned groups = d.group ? c.elements / d.group : 0;
    std::vector<std::uint8_t> sbuf(static_cast<std::size_t>(groups) * scale_bytes_);
    auto scale_at = [&](unsigned g) {
      if (d.scale_format == num::ScaleFormat::E8M0) return num::e8m0_decode(sbuf[g]);
      float s;
      std::memcpy(&s, &sbuf[g * 4u], 4);
      return s;
    };
    if (d.group && is_fp8(d.src_format) &&
        !access(d.scales_local, false, c.scales, sbuf.data(), static_cast<unsigned>(sbuf.size()), delay))
      return;
    for (std::uint32_t e = 0; e < c.elements; ++e) {
      std::uint32_t code = 0;
      std::memcpy(&code, &in[e * src_eb_], src_eb_);
      double v = num::decode(d.src_format, code);
      if (d.group && is_fp8(d.src_format)) v *= scale_at(e / d.group);
      x[e] = static_cast<float>(v);
    }
    num::Convert conv;
    conv.saturate = d.saturate;
    num::Rng rng{d.seed + index};
    if (d.stochastic) conv.rounding = num::Rounding::stochastic, conv.rng = &rng;
    if (d.group && is_fp8(d.dst_format)) {
      conv.saturate = true;
      const num::BlockQuantized q = num::block_quantize(x.data(), 1, c.elements, d.dst_format, d.scale_format, 1,
                                                        d.group, conv);
      std::copy(q.codes.begin(), q.codes.end(), out.begin());
      for (unsigned g = 0; g < groups; ++g) {
        if (d.scale_format == num::ScaleFormat::E8M0) sbuf[g] = num::e8m0_encode(q.scales[g]);
        else std::memcpy(&sbuf[g * 4u], &q.scales[g], 4);
      }
      if (!access(d.scales_local, true, c.scales, sbuf.data(), static_cast<unsigned>(sbuf.size()), delay)) return;
    } else {
      for (std::uint32_t e = 0; e < c.elements; ++e) {
        const std::uint32_t code = num::encode(d.dst_format, x[e], conv);
        std::memcpy(&out[e * dst_eb_], &code, dst_eb_);
      }
    }
  }
  if (!access(d.dst_local, true, c.dst, out.data(), dbytes, delay)) return;
  sc_core::wait(delay);
}

void Dma::worker() {
  for (;;) {
    while (next_ >= total_) sc_core::wait(chunk_ready_);
    const std::uint64_t i = next_++;
    move(chunk(i), i);
    if (!chunk_error_.empty() && next_ < total_) {
      // The first error abandons the descriptor: the chunks not yet begun
      // are dropped, not drained in a host loop at a standstill.
      pending_ -= total_ - next_;
      next_ = total_;
    }
    if (--pending_ == 0) chunks_done_.notify(sc_core::SC_ZERO_TIME);
  }
}

void Dma::run() {
  for (;;) {
    while (queue_.empty()) sc_core::wait(work_);
    const Descriptor d = queue_.front();
    queue_.pop_front();
    running_ = true;
    probe();
    ++stats_.descriptors;
    DmaError code = DmaError::none;
    const std::string why = validate(d, code);
    if (why.empty() && d.wait_sem && !sems_->acquire(d.wait_sem, reset_, clk_->span(period_), stats_.semaphore_wait_cycles)) {
      running_ = false;  // the queue was reset while the descriptor waited
      probe();
      continue;
    }
    if (!why.empty()) {
      fail(d, code, why);
      continue;
    }
    const sc_core::sc_time start = sc_core::sc_time_stamp();
    cur_ = d;
    src_eb_ = d.raw ? 1 : num::bits(d.src_format) / 8;
    dst_eb_ = d.raw ? 1 : num::bits(d.dst_format) / 8;
    scale_bytes_ = d.scale_format == num::ScaleFormat::E8M0 ? 1 : 4;
    src_s1_ = d.src_stride1 ? d.src_stride1 : static_cast<std::uint64_t>(d.len0) * src_eb_;
    src_s2_ = d.src_stride2 ? d.src_stride2 : src_s1_ * d.count1;
    dst_s1_ = d.dst_stride1 ? d.dst_stride1 : static_cast<std::uint64_t>(d.len0) * dst_eb_;
    dst_s2_ = d.dst_stride2 ? d.dst_stride2 : dst_s1_ * d.count1;
    per_chunk_ = std::max(1u, cfg_.burst / src_eb_);
    if (d.group) per_chunk_ = std::max(d.group, per_chunk_ / d.group * d.group);
    per_chunk_ = std::min(per_chunk_, d.len0);
    chunks_per_row_ = (d.len0 + per_chunk_ - 1) / per_chunk_;
    chunk_error_.clear();
    next_ = 0;
    total_ = pending_ = static_cast<std::uint64_t>(d.count2) * d.count1 * chunks_per_row_;
    chunk_ready_.notify(sc_core::SC_ZERO_TIME);
    while (pending_) sc_core::wait(chunks_done_);
    total_ = 0;
    stats_.busy_cycles += (clk_->nominal(sc_core::sc_time_stamp()) - clk_->nominal(start)) / period_.value();
    if (!chunk_error_.empty()) {
      fail(d, DmaError::bus, chunk_error_);
      continue;
    }
    if (trace::on(kTrace))
      trace::slice(kTrace, name(), fmt::format("{:#x} -> {:#x}", d.src, d.dst), start, sc_core::sc_time_stamp(),
                   {{"id", d.id}, {"elements", static_cast<std::uint64_t>(d.len0) * d.count1 * d.count2},
                    {"src_local", d.src_local}, {"dst_local", d.dst_local}});
    ++completed_;
    running_ = false;
    probe();
    if (d.signal_sem || d.signal_sem2) sems_->signal_numbers(d.signal_sem, d.signal_sem2);
    irq.write(true);
  }
}

Descriptor decode(const IncludedRegs& r) {
  namespace R = regs::dma;
  Descriptor d;
  const engine::Semaphores sem = engine::semaphores(r, R::DMA_SEM);
  d.id = static_cast<std::uint32_t>(r.get(R::DMA_ID));
  d.src = r.get(R::DMA_SRC_LO) | r.get(R::DMA_SRC_HI) << 32;
  d.dst = r.get(R::DMA_DST_LO) | r.get(R::DMA_DST_HI) << 32;
  d.scales = r.get(R::DMA_SCALES_LO) | r.get(R::DMA_SCALES_HI) << 32;
  const std::uint64_t f = r.get(R::DMA_FLAGS);
  d.src_local = f & R::DMA_FLAGS_f::SRC_LOCAL_MASK;
  d.dst_local = f & R::DMA_FLAGS_f::DST_LOCAL_MASK;
  d.scales_local = f & R::DMA_FLAGS_f::SCALES_LOCAL_MASK;
  d.raw = !(f & R::DMA_FLAGS_f::CAST_MASK);
  d.saturate = f & R::DMA_FLAGS_f::SATURATE_MASK;
  d.stochastic = f & R::DMA_FLAGS_f::STOCHASTIC_MASK;
  d.seed = r.get(R::DMA_SEED);
  d.scale_format = (f & R::DMA_FLAGS_f::SCALE_E8M0_MASK) ? num::ScaleFormat::E8M0 : num::ScaleFormat::FP32;
  d.src_format = engine::format_of(static_cast<unsigned>((f & R::DMA_FLAGS_f::SRC_FORMAT_MASK) >> R::DMA_FLAGS_f::SRC_FORMAT_SHIFT));
  d.dst_format = engine::format_of(static_cast<unsigned>((f & R::DMA_FLAGS_f::DST_FORMAT_MASK) >> R::DMA_FLAGS_f::DST_FORMAT_SHIFT));
  d.len0 = static_cast<std::uint32_t>(r.get(R::DMA_LEN0));
  d.count1 = static_cast<std::uint32_t>(r.get(R::DMA_COUNT1));
  d.count2 = static_cast<std::uint32_t>(r.get(R::DMA_COUNT2));
  d.src_stride1 = r.get(R::DMA_SSTRIDE1);
  d.src_stride2 = r.get(R::DMA_SSTRIDE2);
  d.dst_stride1 = r.get(R::DMA_DSTRIDE1);
  d.dst_stride2 = r.get(R::DMA_DSTRIDE2);
  d.group = static_cast<unsigned>(r.get(R::DMA_GROUP));
  d.wait_sem = sem.wait;
  d.signal_sem = sem.signal;
  d.signal_sem2 = sem.signal2;
  return d;
}

}  // namespace tessera::dma
