// CLINT: the SiFive core-local interruptor (as in the FU540 manual and
// QEMU's virt machine): msip, mtimecmp per hart and one mtime.
// mtime counts ticks of the timebase; it is computed from simulated time
// (the initiator's local time for reads), so it costs nothing while nobody
// looks. Each hart's timer interrupt is driven by an event scheduled for
// the moment mtime reaches mtimecmp. Not modelled: the SSWI/ACLINT split.
#pragma once

#include <memory>
#include <vector>

#include "common/config.hpp"
#include "common/regs.hpp"

namespace tessera::clint {

class Clint : public MmioTarget {
 public:
  std::vector<IrqOut> msip_out;  // "msip[h]": software interrupt of hart h
  std::vector<IrqOut> mtip_out;  // "mtip[h]": timer interrupt of hart h

  struct Config {
    unsigned harts = 1;
    Hertz timebase{10e6};
    std::vector<Fact> facts() const {
      return {{"TIMEBASE_HZ", static_cast<std::uint64_t>(timebase.value), "mtime ticks per second"}};
    }
    void visit(Params& p);
    void validate(const Params& p) const;
  };

  Clint(const sc_core::sc_module_name& n, const Config& c);

  std::uint64_t mtime() const { return ticks_at(now()); }

 private:
  std::uint64_t ticks_at(const sc_core::sc_time& t) const;
  void update_timer(unsigned hart);

  Config config_;
  sc_core::sc_time period_;
  std::int64_t offset_ = 0;  // written mtime minus counted ticks
  std::vector<std::unique_ptr<sc_core::sc_event>> timer_events_;
};

}  // namespace tessera::clint
