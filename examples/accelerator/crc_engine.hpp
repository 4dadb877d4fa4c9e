// The CRC engine, a block of your own (docs/tutorial-own-accelerator.md):
// registers from crc_engine.regs.json, an initiator socket on the NoC for
// its DMA, an interrupt, parameters from the platform file, statistics and
// an energy event of its own.
#pragma once

#include <cstdint>
#include <vector>
#include <tlm_utils/simple_initiator_socket.h>

#include "common/config.hpp"
#include "common/power.hpp"
#include "common/regs.hpp"

namespace example {

class CrcEngine : public tessera::MmioTarget {
 public:
  tlm_utils::simple_initiator_socket<CrcEngine> dma;  // reads and writes through the NoC
  tessera::IrqOut irq_out;                            // DONE while IRQ_ENABLE.DONE

  struct Config {
    tessera::Hertz clock{1e9};
    unsigned bytes_per_cycle = 8;  // how fast the CRC unit consumes data
    unsigned burst = 256;          // bytes per DMA access
    void visit(tessera::Params& p);
    void validate(const tessera::Params& p) const;
  };

  CrcEngine(const sc_core::sc_module_name& n, const Config& c);
  void report_stats(nlohmann::ordered_json& out) const override;

  // The CRC-32 of IEEE 802.3 (reflected, polynomial 0xEDB88320), continued from `crc`.
  static std::uint32_t crc32(std::uint32_t crc, const std::uint8_t* data, std::size_t n);

 private:
  void run();
  void update_irq();

  Config c_;
  tessera::power::Meter* meter_ = &tessera::power::meter(name());  // the chip's energy meter
  sc_core::sc_event start_;
  bool busy_ = false, done_ = false, error_ = false;
  std::vector<std::uint8_t> buffer_;
  std::uint64_t runs_ = 0, bytes_ = 0, errors_ = 0;
};

}  // namespace example
