// A test initiator: issues b_transport, transport_dbg and DMI requests from
// the test body and records DMI invalidations.
#pragma once

#include <cstdint>
#include <tlm>
#include <tlm_utils/simple_initiator_socket.h>
#include <utility>
#include <vector>

#include "common/payload.hpp"

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
    set_access(t, cmd, addr, data, len);
    sc_core::sc_time local;
    socket->b_transport(t, delay ? *delay : local);
    return t.get_response_status();
  }
  unsigned debug(tlm::tlm_command cmd, std::uint64_t addr, void* data, unsigned len) {
    tlm::tlm_generic_payload t;
    set_access(t, cmd, addr, data, len);
    return socket->transport_dbg(t);
  }
  bool dmi(std::uint64_t addr, bool write, tlm::tlm_dmi& out) {
    tlm::tlm_generic_payload t;
    unsigned char dummy = 0;
    set_access(t, write ? tlm::TLM_WRITE_COMMAND : tlm::TLM_READ_COMMAND, addr, &dummy, 1);
    return socket->get_direct_mem_ptr(t, out);
  }

 private:
  void invalidate(sc_dt::uint64 start, sc_dt::uint64 end) { invalidations.emplace_back(start, end); }
};

}  // namespace tessera::testing
