// A test initiator: issues b_transport, transport_dbg and DMI requests from
// the test body and records DMI invalidations.
#pragma once

#include <cstdint>
#include <tlm>
#include <tlm_utils/simple_initiator_socket.h>
#include <utility>
#include <vector>

namespace tessera::testing {

class TestInitiator : public sc_core::sc_module {
 public:
  tlm_utils::simple_initiator_socket<TestInitiator> socket;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> invalidations;

  explicit TestInitiator(const sc_core::sc_module_name& n) : sc_core::sc_module(n), socket("socket") {
    socket.register_invalidate_direct_mem_ptr(this, &TestInitiator::invalidate);
  }

  tlm::tlm_response_status transport(tlm::tlm_command cmd, std::uint64_t addr, void* data, unsigned len,
                                     sc_core::sc_time* delay = nullptr) {
    tlm::tlm_generic_payload t;
    t.set_command(cmd);
    t.set_address(addr);
    t.set_data_ptr(static_cast<unsigned char*>(data));
    t.set_data_length(len);
    t.set_streaming_width(len);
    t.set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);
    sc_core::sc_time local;
    socket->b_transport(t, delay ? *delay : local);
    return t.get_response_status();
  }
  unsigned debug(tlm::tlm_command cmd, std::uint64_t addr, void* data, unsigned len) {
    tlm::tlm_generic_payload t;
    t.set_command(cmd);
    t.set_address(addr);
    t.set_data_ptr(static_cast<unsigned char*>(data));
    t.set_data_length(len);
    t.set_streaming_width(len);
    return socket->transport_dbg(t);
  }
  bool dmi(std::uint64_t addr, bool write, tlm::tlm_dmi& out) {
    tlm::tlm_generic_payload t;
    unsigned char dummy = 0;
    t.set_command(write ? tlm::TLM_WRITE_COMMAND : tlm::TLM_READ_COMMAND);
    t.set_address(addr);
    t.set_data_ptr(&dummy);
    t.set_data_length(1);
    t.set_streaming_width(1);
    return socket->get_direct_mem_ptr(t, out);
  }

 private:
  void invalidate(sc_dt::uint64 start, sc_dt::uint64 end) { invalidations.emplace_back(start, end); }
};

}  // namespace tessera::testing
