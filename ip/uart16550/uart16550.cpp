#include "uart16550/uart16550.hpp"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <fstream>
#include <iterator>

#include "common/input.hpp"
#include "common/log.hpp"
#include "common/registry.hpp"
#include "uart16550_regs.hpp"

namespace tessera::uart16550 {

namespace R = regs::uart16550;

namespace {
constexpr auto kIidNone = static_cast<unsigned>(R::Iid::NONE), kIidLineStatus = static_cast<unsigned>(R::Iid::LINE_STATUS),
               kIidData = static_cast<unsigned>(R::Iid::DATA), kIidTimeout = static_cast<unsigned>(R::Iid::TIMEOUT),
               kIidThre = static_cast<unsigned>(R::Iid::THRE);
}

void Uart16550::Config::visit(Params& p) {
  p("fifo_depth", fifo_depth, "receive FIFO depth in bytes");
  p("tx", tx, "where transmitted bytes go: stdout, stderr, none, or a file");
  p("rx", rx, "where received bytes come from: none, stdin, or a file");
  p("rx_interval", rx_interval, "time between two received bytes from rx");
  p("rx_prompt", rx_prompt, "when set, each line of rx is sent only once the transmitted text shows this prompt again "
                            "(as someone typing at a prompt would), e.g. \"=> \" for U-Boot");
}

void Uart16550::Config::validate(const Params& p) const {
  if (fifo_depth < 1 || fifo_depth > 256) p.fail("fifo_depth", "must be between 1 and 256");
  if (rx != "none" && rx != "stdin") try {
      check_input_file(rx, "the UART's input", kMaxDescriptionBytes);
    } catch (const ConfigError& e) {
      p.fail("rx", e.what());
    }
  if (rx_interval == sc_core::SC_ZERO_TIME) p.fail("rx_interval", "must be more than 0");
}

Uart16550::Uart16550(const sc_core::sc_module_name& n, const Config& c)
    : MmioTarget(n, R::kBlock), config_(c), tx_(c.tx, std::string(name()) + ".tx") {
  expose_irq_out("irq_out", irq_out);
  if (c.rx != "none") {
    if (c.rx != "stdin") {
      std::ifstream in(c.rx, std::ios::binary);
      rx_pending_.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    sc_core::sc_spawn([this] { rx_thread(); }, "rx_thread");
  }
  regs_.set_bank_selector("dlab", [this] { return (regs_.get(R::LCR) & R::LCR_f::DLAB_MASK) != 0; });

  regs_.on_read(R::RBR, [this](unsigned, bool debug) -> std::uint64_t {
    if (rx_fifo_.empty()) return 0;
    const std::uint8_t v = rx_fifo_.front();
    if (!debug) {
      rx_fifo_.pop_front();
      update_irq();
    }
    return v;
  });
  regs_.on_write(R::THR, [this](RegisterBank::Write& w) {
    transmit(static_cast<std::uint8_t>(w.data));
    return true;
  });
  regs_.on_write(R::IER, [this](RegisterBank::Write& w) {
    // Enabling ETBEI while THR is empty raises the THRE interrupt.
    if ((w.next & R::IER_f::ETBEI_MASK) && !(w.old & R::IER_f::ETBEI_MASK)) thre_pending_ = true;
    regs_.set(R::IER, w.next);
    update_irq();
    return true;
  });
  regs_.on_read(R::IIR, [this](unsigned, bool debug) -> std::uint64_t {
    const unsigned id = interrupt_id();
    if (id == kIidThre && !debug) {
      thre_pending_ = false;
      update_irq();
    }
    return id | (fifo_enabled_ ? R::IIR_f::FIFOS_MASK : 0);
  });
  regs_.on_write(R::FCR, [this](RegisterBank::Write& w) {
    fifo_enabled_ = w.next & R::FCR_f::FIFOE_MASK;
    if (w.next & R::FCR_f::RFIFOR_MASK) rx_fifo_.clear();
    regs_.set(R::FCR, w.next & (R::FCR_f::FIFOE_MASK | R::FCR_f::RT_MASK));
    update_irq();
    return true;
  });
  regs_.on_read(R::LSR, [this](unsigned, bool debug) -> std::uint64_t {
    std::uint64_t v = R::LSR_f::THRE_MASK | R::LSR_f::TEMT_MASK;
    if (!rx_fifo_.empty()) v |= R::LSR_f::DR_MASK;
    if (overrun_) v |= R::LSR_f::OE_MASK;
    if (overrun_ && !debug) {
      overrun_ = false;
      update_irq();
    }
    return v;
  });
}

void Uart16550::end_of_simulation() { tx_.flush(); }

void Uart16550::transmit(std::uint8_t byte) {
  if (regs_.get(R::MCR) & R::MCR_f::LOOP_MASK) deliver(byte);
  else tx_.put(static_cast<char>(byte));
  thre_pending_ = true;  // the byte left at once: THR is empty again
  update_irq();
}

void Uart16550::receive(const std::string& bytes) {
  for (char c : bytes) deliver(static_cast<std::uint8_t>(c));
}

void Uart16550::deliver(std::uint8_t byte) {
  const std::size_t capacity = fifo_enabled_ ? config_.fifo_depth : 1;
  if (rx_fifo_.size() >= capacity) {
    overrun_ = true;
    ++overruns_;
  } else {
    rx_fifo_.push_back(byte);
  }
  update_irq();
}

unsigned Uart16550::trigger() const {
  if (!fifo_enabled_) return 1;
  static const unsigned levels[] = {1, 4, 8, 14};
  return std::min<unsigned>(levels[(regs_.get(R::FCR) & R::FCR_f::RT_MASK) >> R::FCR_f::RT_SHIFT],
                            config_.fifo_depth);
}

unsigned Uart16550::interrupt_id() const {
  const std::uint64_t ier = regs_.get(R::IER);
  if ((ier & R::IER_f::ELSI_MASK) && overrun_) return kIidLineStatus;
  if ((ier & R::IER_f::ERBFI_MASK) && !rx_fifo_.empty())
    return rx_fifo_.size() >= trigger() ? kIidData : kIidTimeout;
  if ((ier & R::IER_f::ETBEI_MASK) && thre_pending_) return kIidThre;
  return kIidNone;
}

void Uart16550::update_irq() { irq_out.write(interrupt_id() != kIidNone); }

void Uart16550::rx_thread() {
  if (config_.rx == "stdin") ::fcntl(0, F_SETFL, ::fcntl(0, F_GETFL) | O_NONBLOCK);
  for (;;) {
    sc_core::wait(config_.rx_interval);
    if (config_.rx == "stdin" && rx_pending_.empty()) {
      char buf[64];
      const ssize_t got = ::read(0, buf, sizeof buf);
      if (got == 0) return;  // end of input
      for (ssize_t i = 0; i < got; ++i) rx_pending_.push_back(static_cast<std::uint8_t>(buf[i]));
    }
    if (rx_pending_.empty()) {
      if (config_.rx != "stdin") return;  // the file is exhausted
      continue;
    }
    if (rx_line_start_ && !config_.rx_prompt.empty()) {  // wait for the prompt
      const std::size_t at = tx_.written().find(config_.rx_prompt, prompt_seen_);
      if (at == std::string::npos) continue;
      prompt_seen_ = at + config_.rx_prompt.size();
      rx_line_start_ = false;
    }
    const std::size_t capacity = fifo_enabled_ ? config_.fifo_depth : 1;
    if (rx_fifo_.size() < capacity) {  // the sender waits for room (flow control)
      rx_line_start_ = rx_pending_.front() == '\n';
      deliver(rx_pending_.front());
      rx_pending_.pop_front();
    }
  }
}

void Uart16550::report_stats(nlohmann::ordered_json& out) const {
  MmioTarget::report_stats(out);
  out["bytes_transmitted"] = tx_.written().size();
  out["overruns"] = overruns_;
}

TESSERA_REGISTER_IP("uart16550", Uart16550, "16550 UART: polled and interrupt-driven TX and RX", R::kBlock.window);

}  // namespace tessera::uart16550
