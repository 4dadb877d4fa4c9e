#include "crc_engine.hpp"

#include <algorithm>

#include "common/log.hpp"
#include "common/payload.hpp"
#include "common/power.hpp"
#include "common/registry.hpp"
#include "crc_engine_regs.hpp"

namespace example {

namespace R = tessera::regs::crc_engine;

// Its energy: a byte through the CRC unit, in the CP subsystem's power
// domain. The power manager then has a parameter pj_crc_byte and a
// statistic events_crc_byte.
const tessera::power::Event kCrcByte =
    tessera::power::declare_event("crc_byte", "cp", 0.2, "a byte through the CRC engine's CRC unit");

void CrcEngine::Config::visit(tessera::Params& p) {
  p("clock", clock, "the engine's clock");
  p("bytes_per_cycle", bytes_per_cycle, "bytes the CRC unit consumes per cycle");
  p("burst", burst, "bytes per DMA access");
}

void CrcEngine::Config::validate(const tessera::Params& p) const {
  if (bytes_per_cycle == 0 || bytes_per_cycle > 64) p.fail("bytes_per_cycle", "must be between 1 and 64");
  if (burst == 0 || burst > 4096 || (burst & (burst - 1))) p.fail("burst", "must be a power of two up to 4096");
}

CrcEngine::CrcEngine(const sc_core::sc_module_name& n, const Config& c)
    : MmioTarget(n, R::kBlock), dma("dma"), c_(c), buffer_(c.burst) {
  expose_initiator("dma", dma);
  expose_irq_out("irq_out", irq_out);
  regs_.on_read(R::STATUS, [this](unsigned, bool) -> std::uint64_t {
    return (busy_ ? R::STATUS_f::BUSY_MASK : 0) | (done_ ? R::STATUS_f::DONE_MASK : 0) |
           (error_ ? R::STATUS_f::ERROR_MASK : 0);
  });
  regs_.on_write(R::IRQ_ENABLE, [this](tessera::RegisterBank::Write& w) {
    irq_out.write(done_ && (w.next & R::IRQ_ENABLE_f::DONE_MASK));  // w.next: the value being stored
    return true;
  });
  regs_.on_write(R::CTRL, [this](tessera::RegisterBank::Write& w) {
    if (w.data & R::CTRL_f::ACK_MASK) {
      done_ = error_ = false;
      update_irq();
    }
    if (w.data & R::CTRL_f::START_MASK) {
      if (busy_) {
        // Firmware's mistake, not the simulator's: say so and carry on.
        tessera::log::guest_error(path(), "crc/busy", "START while a run is going on: ignored");
        return true;
      }
      busy_ = true;
      done_ = error_ = false;
      update_irq();
      start_.notify(sc_core::SC_ZERO_TIME);
    }
    return true;
  });
  sc_core::sc_spawn([this] { run(); }, "run");
}

void CrcEngine::update_irq() { irq_out.write(done_ && (regs_.get(R::IRQ_ENABLE) & R::IRQ_ENABLE_f::DONE_MASK)); }

void CrcEngine::run() {
  for (;;) {
    sc_core::wait(start_);
    const std::uint64_t src = regs_.get(R::SRC), dst = regs_.get(R::DST), len = regs_.get(R::LEN);
    const sc_core::sc_time begin = sc_core::sc_time_stamp();
    std::uint32_t crc = 0;
    for (std::uint64_t at = 0; at < len && !error_; at += c_.burst) {
      const auto n = static_cast<unsigned>(std::min<std::uint64_t>(c_.burst, len - at));
      // Read a burst through the NoC, then (if asked) write it out: each
      // access takes the time the NoC and the memory say it takes.
      for (const bool read : {true, false}) {
        if (!read && !dst) break;
        tlm::tlm_generic_payload t;
        const std::uint64_t a = (read ? src : dst) + at;
        tessera::set_access(t, read ? tlm::TLM_READ_COMMAND : tlm::TLM_WRITE_COMMAND, a, buffer_.data(), n);
        sc_core::sc_time delay = sc_core::SC_ZERO_TIME;
        dma->b_transport(t, delay);
        sc_core::wait(delay);
        if (t.get_response_status() != tlm::TLM_OK_RESPONSE) {
          tessera::log::guest_error(path(), "crc/access", "{} of {} bytes at {:#x}: {}; the run stops",
                                    read ? "read" : "write", n, a, t.get_response_string());
          regs_.set(R::ERROR_ADDR, a);
          error_ = true;
          ++errors_;
          break;
        }
        if (read) {
          crc = crc32(crc, buffer_.data(), n);
          // The CRC unit's own time for the burst, and its energy over that time.
          const sc_core::sc_time from = sc_core::sc_time_stamp();
          sc_core::wait(c_.clock.period() * static_cast<double>((n + c_.bytes_per_cycle - 1) / c_.bytes_per_cycle));
          meter_->charge(kCrcByte, n, from, sc_core::sc_time_stamp());
        }
      }
      if (!error_) bytes_ += n;
    }
    regs_.set(R::RESULT, crc);
    regs_.set(R::CYCLES, static_cast<std::uint64_t>((sc_core::sc_time_stamp() - begin) / c_.clock.period()));
    ++runs_;
    busy_ = false;
    done_ = true;
    update_irq();
  }
}

std::uint32_t CrcEngine::crc32(std::uint32_t crc, const std::uint8_t* data, std::size_t n) {
  crc = ~crc;
  for (std::size_t i = 0; i < n; ++i) {
    crc ^= data[i];
    for (int b = 0; b < 8; ++b) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

void CrcEngine::report_stats(nlohmann::ordered_json& out) const {
  MmioTarget::report_stats(out);
  out["runs"] = runs_;
  out["bytes"] = bytes_;
  out["errors"] = errors_;
}

TESSERA_REGISTER_IP("crc_engine", CrcEngine, "CRC-32 engine with copy (examples/accelerator)", R::kBlock.window);

}  // namespace example
