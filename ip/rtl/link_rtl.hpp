// The transactor of the SerDes link layer RTL (ip/rtl/sv/tessera_link.sv,
// Verilated): FLIT payloads in, the block's transmitter wired back to its
// own receiver through a wire that can corrupt chosen transmissions, its
// ACK/NAK answered after a round-trip delay. One SystemC thread owns the
// pins and the clock (which runs only while there is work).
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <systemc>
#include <vector>

#include "rtl/clocked.hpp"

class Vtessera_link;
class VerilatedFstSc;

namespace tessera::rtl {

class LinkRtl : public Clocked {
 public:
  static constexpr unsigned kFlitBytes = 256, kHeader = 8, kPayload = 244, kBeats = 32;
  struct Flit {
    std::vector<std::uint8_t> payload;  // at most kPayload bytes
    bool last = false;                  // ends its message
  };
  struct Result {
    std::vector<std::vector<std::uint8_t>> wire;       // every transmission, kFlitBytes each, as sent
    std::vector<std::vector<std::uint8_t>> delivered;  // the good FLITs the receiver handed on (header + payload)
    std::uint64_t sent = 0, naks = 0, crc_errors = 0, cycles = 0;
  };

  LinkRtl(const sc_core::sc_module_name& n, const sc_core::sc_time& period, unsigned ack_delay_cycles = 8,
          const std::string& fst = "");
  ~LinkRtl() override;
  // Sends `flits`; transmissions whose index (from 0, replays counted) is in
  // `corrupt` get one bit flipped on the wire. Returns when every FLIT has
  // been delivered (or after `limit` cycles).
  Result send(const std::vector<Flit>& flits, const std::set<std::uint64_t>& corrupt, std::uint64_t limit = 1000000);

 private:
  void driver();
  void trace_to(VerilatedFstSc* fst) override;

  unsigned ack_delay_;
  sc_core::sc_signal<bool> p_valid_{"p_valid"}, p_ready_{"p_ready"}, p_last_{"p_last"};
  sc_core::sc_signal<std::uint64_t> p_data_{"p_data"}, tx_data_{"tx_data"}, rx_data_{"rx_data"}, o_data_{"o_data"};
  sc_core::sc_signal<std::uint32_t> p_len_{"p_len"}, ack_seq_{"ack_seq"}, a_seq_{"a_seq"};
  sc_core::sc_signal<bool> tx_valid_{"tx_valid"}, rx_valid_{"rx_valid"}, ack_valid_{"ack_valid"}, ack_nak_{"ack_nak"};
  sc_core::sc_signal<bool> a_valid_{"a_valid"}, a_nak_{"a_nak"}, o_valid_{"o_valid"}, o_first_{"o_first"};
  sc_core::sc_signal<std::uint32_t> sent_{"sent"}, naks_{"naks"}, crc_errors_{"crc_errors"};
  std::unique_ptr<Vtessera_link> top_;
  const std::vector<Flit>* flits_ = nullptr;
  const std::set<std::uint64_t>* corrupt_ = nullptr;
  std::uint64_t limit_ = 0;
  Result result_;
  sc_core::sc_event start_, done_;
};

}  // namespace tessera::rtl
