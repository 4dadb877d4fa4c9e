// UART 16550: the registers and interrupts firmware drivers use (RBR/THR,
// IER, IIR/FCR, LCR, MCR, LSR, MSR, SCR, DLL/DLM behind LCR.DLAB), receive
// FIFO with trigger levels and overrun, loopback. Transmission is
// instantaneous (THR is empty again as soon as it is written), so the baud
// divisor only matters to the firmware that programs it; received bytes
// arrive one per `rx_interval` from a file or stdin, or from the host
// through receive(). Not modelled: parity/framing errors, break, modem
// lines (MSR reads CTS, DSR and DCD asserted), the character-timeout delay
// (a timeout interrupt is reported as soon as data sits below the trigger).
#pragma once

#include <deque>
#include <string>

#include "common/config.hpp"
#include "common/regs.hpp"
#include "common/sink.hpp"

namespace tessera::uart16550 {

class Uart16550 : public MmioTarget {
 public:
  IrqOut irq_out;

  struct Config {
    unsigned fifo_depth = 16;
    std::string tx = "stdout";  // stdout, stderr, none, or a file
    std::string rx = "none";    // none, stdin, or a file
    sc_core::sc_time rx_interval = sc_core::sc_time(10, sc_core::SC_US);
    std::string rx_prompt;      // each line of rx waits until the transmitted text shows this again
    void visit(Params& p);
    void validate(const Params& p) const;
  };

  Uart16550(const sc_core::sc_module_name& n, const Config& c);

  // Bytes arriving on the line (host side).
  void receive(const std::string& bytes);
  // Everything transmitted so far.
  const std::string& transmitted() const { return tx_.written(); }
  void report_stats(nlohmann::ordered_json& out) const override;

 private:
  void transmit(std::uint8_t byte);
  void deliver(std::uint8_t byte);
  unsigned interrupt_id() const;
  unsigned trigger() const;
  void update_irq();
  void rx_thread();
  void end_of_simulation() override;

  Config config_;
  std::deque<std::uint8_t> rx_fifo_, rx_pending_;
  bool rx_line_start_ = true;      // the next byte from rx begins a line
  std::size_t prompt_seen_ = 0;    // where in the transmitted text to look for rx_prompt next
  bool fifo_enabled_ = false;
  bool thre_pending_ = false;
  bool overrun_ = false;
  CharSink tx_;
  std::uint64_t overruns_ = 0;
};

}  // namespace tessera::uart16550
