#include "mailbox/mailbox.hpp"

#include "common/log.hpp"
#include "common/registry.hpp"
#include "mailbox_regs.hpp"

namespace tessera::mailbox {

namespace R = regs::mailbox;

void Mailbox::Config::visit(Params& p) { p("fifo_depth", fifo_depth, "words each FIFO holds"); }

void Mailbox::Config::validate(const Params& p) const {
  if (fifo_depth < 1 || fifo_depth > 255) p.fail("fifo_depth", "must be between 1 and 255");
}

Mailbox::Side::Side(const sc_core::sc_module_name& n, Mailbox& box) : MmioTarget(n, R::kBlock), box_(box) {
  regs_.on_read(R::STATUS, [this](unsigned, bool) -> std::uint64_t {
    const std::size_t space = box_.config_.fifo_depth - peer_->inbox_.size();
    return inbox_.size() | (space << 8) | (inbox_.empty() ? R::STATUS_f::RX_EMPTY_MASK : 0) |
           (space == 0 ? R::STATUS_f::TX_FULL_MASK : 0);
  });
  regs_.on_read(R::RX_DATA, [this](unsigned, bool debug) -> std::uint64_t {
    if (inbox_.empty()) {
      if (!debug) {
        log::guest_error(path(), "mailbox/underflow", "RX_DATA read while empty");
        regs_.set(R::ERROR, regs_.get(R::ERROR) | R::ERROR_f::RX_UNDERFLOW_MASK);
        update_irq();
      }
      return 0;
    }
    const std::uint32_t v = inbox_.front();
    if (!debug) {
      inbox_.pop_front();
      update_irq();
    }
    return v;
  });
  regs_.on_write(R::TX_DATA, [this](RegisterBank::Write& w) {
    if (peer_->inbox_.size() >= box_.config_.fifo_depth) {
      log::guest_error(path(), "mailbox/overflow", "TX_DATA written while the peer's FIFO is full; word dropped");
      regs_.set(R::ERROR, regs_.get(R::ERROR) | R::ERROR_f::TX_OVERFLOW_MASK);
      update_irq();
      return true;
    }
    peer_->inbox_.push_back(static_cast<std::uint32_t>(w.data));
    ++box_.words_;
    peer_->update_irq();
    return true;
  });
  regs_.on_write(R::DOORBELL_RING, [this](RegisterBank::Write& w) {
    peer_->ring(w.data);
    return true;
  });
  for (unsigned r : {R::DOORBELL, R::IRQ_ENABLE, R::ERROR})
    regs_.on_write(r, [this, r](RegisterBank::Write& w) {
      regs_.set(r, w.next);
      update_irq();
      return true;
    });
}

void Mailbox::Side::ring(std::uint64_t bells) {
  if (!bells) return;
  ++box_.doorbells_;
  regs_.set(R::DOORBELL, regs_.get(R::DOORBELL) | bells);
  update_irq();
}

void Mailbox::Side::update_irq() {
  const std::uint64_t en = regs_.get(R::IRQ_ENABLE);
  irq.write(((en & R::IRQ_ENABLE_f::DOORBELL_MASK) && regs_.get(R::DOORBELL)) ||
            ((en & R::IRQ_ENABLE_f::RX_NOT_EMPTY_MASK) && !inbox_.empty()) ||
            ((en & R::IRQ_ENABLE_f::ERROR_MASK) && regs_.get(R::ERROR)));
}

Mailbox::Mailbox(const sc_core::sc_module_name& n, const Config& c) : Ip(n), cp("cp", *this), host("host", *this), config_(c) {
  cp.peer_ = &host;
  host.peer_ = &cp;
  expose_target("csr_target", cp.csr_target, R::kBlock.window);
  expose_target("host_target", host.csr_target, R::kBlock.window);
  expose_irq_out("irq_out", cp.irq);
  expose_irq_out("host_irq_out", host.irq);
}

void Mailbox::report_stats(nlohmann::ordered_json& out) const {
  out["words"] = words_;
  out["doorbells"] = doorbells_;
}

TESSERA_REGISTER_IP("mailbox", Mailbox, "host <-> CP mailbox: word FIFOs and doorbells with interrupts", R::kBlock.window);

}  // namespace tessera::mailbox
