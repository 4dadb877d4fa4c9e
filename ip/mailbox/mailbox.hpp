// Mailbox between the host and the CP: two identical register windows
// (csr_target for the CP, host_target for the host), a word FIFO each way,
// 32 doorbells each way, an interrupt per side. Misuse (reading an empty
// FIFO, writing a full one) sets a sticky error bit and is a guest error;
// nothing is lost silently and nothing crashes. Timing: register latency
// only.
#pragma once

#include <deque>

#include "common/config.hpp"
#include "common/regs.hpp"

namespace tessera::mailbox {

class Mailbox : public Ip {
 public:
  // One side's register window.
  class Side : public MmioTarget {
   public:
    IrqOut irq;
    Side(const sc_core::sc_module_name& n, Mailbox& box);
    void update_irq();
    void ring(std::uint64_t bells);

   private:
    friend class Mailbox;
    Mailbox& box_;
    Side* peer_ = nullptr;
    std::deque<std::uint32_t> inbox_;
  };

  struct Config {
    unsigned fifo_depth = 16;
    void visit(Params& p);
    void validate(const Params& p) const;
  };

  Side cp, host;

  Mailbox(const sc_core::sc_module_name& n, const Config& c);
  void report_stats(nlohmann::ordered_json& out) const override;

 private:
  Config config_;
  std::uint64_t words_ = 0, doorbells_ = 0;
};

}  // namespace tessera::mailbox
