#include "rtl/link_rtl.hpp"

#include <verilated.h>
#include <verilated_fst_sc.h>

#include <deque>
#include <functional>
#include <stdexcept>

#include "Vtessera_link.h"

namespace tessera::rtl {

LinkRtl::LinkRtl(const sc_core::sc_module_name& n, const sc_core::sc_time& period, unsigned ack_delay_cycles,
                 const std::string& fst)
    : Clocked(n, period, fst), ack_delay_(ack_delay_cycles) {
  top_ = std::make_unique<Vtessera_link>("rtl");
  top_->clk(clk_);
  top_->rst_n(rst_n_);
  top_->p_valid(p_valid_);
  top_->p_ready(p_ready_);
  top_->p_data(p_data_);
  top_->p_len(p_len_);
  top_->p_last(p_last_);
  top_->tx_valid(tx_valid_);
  top_->tx_data(tx_data_);
  top_->rx_valid(rx_valid_);
  top_->rx_data(rx_data_);
  top_->ack_valid(ack_valid_);
  top_->ack_nak(ack_nak_);
  top_->ack_seq(ack_seq_);
  top_->a_valid(a_valid_);
  top_->a_nak(a_nak_);
  top_->a_seq(a_seq_);
  top_->o_valid(o_valid_);
  top_->o_data(o_data_);
  top_->o_first(o_first_);
  top_->sent(sent_);
  top_->naks(naks_);
  top_->crc_errors(crc_errors_);
  SC_HAS_PROCESS(LinkRtl);
  SC_THREAD(driver);
}

LinkRtl::~LinkRtl() {
  if (top_) top_->final();
}

void LinkRtl::trace_to(VerilatedFstSc* fst) { top_->trace(fst, 99); }

LinkRtl::Result LinkRtl::send(const std::vector<Flit>& flits, const std::set<std::uint64_t>& corrupt, std::uint64_t limit) {
  for (const Flit& f : flits)
    if (f.payload.size() > kPayload) throw std::invalid_argument("LinkRtl::send: a FLIT carries at most 244 payload bytes");
  flits_ = &flits;
  corrupt_ = &corrupt;
  limit_ = limit;
  start_.notify(sc_core::SC_ZERO_TIME);
  sc_core::wait(done_);
  return result_;
}

void LinkRtl::driver() {
  reset();
  for (;;) {
    while (!flits_) sc_core::wait(start_);
    const std::vector<Flit>& flits = *flits_;
    result_ = Result{};
    std::size_t next_flit = 0;
    unsigned next_beat = 0;  // payload beats of the FLIT being handed in (31)
    std::uint64_t transmissions = 0;
    std::vector<std::uint8_t> tx_flit, out_flit;
    struct Ack {
      std::uint64_t due;
      bool nak;
      std::uint32_t seq;
    };
    std::deque<Ack> acks;
    const std::uint64_t base_sent = sent_.read(), base_naks = naks_.read(), base_crc = crc_errors_.read();
    for (std::uint64_t n = 0; result_.delivered.size() < flits.size() && n < limit_; ++n) {
      // Payload in: 31 beats of 8 bytes per FLIT.
      const bool offer = next_flit < flits.size();
      if (offer) {
        const Flit& f = flits[next_flit];
        std::uint64_t bits = 0;
        for (unsigned b = 0; b < 8; ++b) {
          const std::size_t at = std::size_t{next_beat} * 8 + b;
          if (at < f.payload.size()) bits |= std::uint64_t{f.payload[at]} << (8 * b);
        }
        p_data_.write(bits);
        p_len_.write(static_cast<std::uint32_t>(f.payload.size()));
        p_last_.write(f.last);
      }
      p_valid_.write(offer);
      // Acknowledgements whose round trip is over.
      const bool ack = !acks.empty() && acks.front().due <= n;
      a_valid_.write(ack);
      if (ack) {
        a_nak_.write(acks.front().nak);
        a_seq_.write(acks.front().seq);
        acks.pop_front();
      }
      bool taken = false;
      cycle([&] {
        taken = offer && p_ready_.read();
        // The wire: what the transmitter drives now reaches the receiver at this edge.
        const bool v = tx_valid_.read();
        std::uint64_t beat = tx_data_.read();
        if (v) {
          if (tx_flit.empty() && corrupt_->count(transmissions)) beat ^= 1ull << (transmissions % 64);
          for (unsigned b = 0; b < 8; ++b) tx_flit.push_back(static_cast<std::uint8_t>(beat >> (8 * b)));
          if (tx_flit.size() == kFlitBytes) {
            result_.wire.push_back(tx_flit);
            tx_flit.clear();
            ++transmissions;
          }
        }
        rx_valid_.write(v);
        rx_data_.write(beat);
        if (ack_valid_.read()) acks.push_back({n + ack_delay_, ack_nak_.read(), ack_seq_.read()});
        if (o_valid_.read()) {
          if (o_first_.read()) out_flit.clear();
          const std::uint64_t o = o_data_.read();
          for (unsigned b = 0; b < 8; ++b) out_flit.push_back(static_cast<std::uint8_t>(o >> (8 * b)));
          if (out_flit.size() == kFlitBytes) result_.delivered.push_back(out_flit);
        }
      });
      ++result_.cycles;
      if (taken && ++next_beat == 31) next_beat = 0, ++next_flit;
    }
    p_valid_.write(false);
    a_valid_.write(false);
    rx_valid_.write(false);
    result_.sent = sent_.read() - base_sent;
    result_.naks = naks_.read() - base_naks;
    result_.crc_errors = crc_errors_.read() - base_crc;
    flits_ = nullptr;
    done_.notify(sc_core::SC_ZERO_TIME);
  }
}

}  // namespace tessera::rtl
