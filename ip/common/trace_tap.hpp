// A pass-through on one TLM connection that puts every b_transport on the
// trace (category tlm) as a slice from the initiator's time to the end of
// its annotated delay: command, address, length, response. The platform
// inserts one on each connection `--trace-sockets` names. Accesses a core
// makes through DMI do not cross the socket, so they are not on it.
#pragma once

#include <fmt/format.h>

#include <string>
#include <tlm>
#include <tlm_utils/simple_initiator_socket.h>
#include <tlm_utils/simple_target_socket.h>

#include "common/trace.hpp"

namespace tessera {

class TraceTap : public sc_core::sc_module {
 public:
  tlm_utils::simple_target_socket<TraceTap> target_socket;
  tlm_utils::simple_initiator_socket<TraceTap> initiator_socket;

  // `track`: the trace track, "<platform>.<connection>".
  TraceTap(const sc_core::sc_module_name& n, std::string track)
      : sc_core::sc_module(n), target_socket("target_socket"), initiator_socket("initiator_socket"), track_(std::move(track)) {
    target_socket.register_b_transport(this, &TraceTap::b_transport);
    target_socket.register_transport_dbg(this, &TraceTap::transport_dbg);
    target_socket.register_get_direct_mem_ptr(this, &TraceTap::get_direct_mem_ptr);
    initiator_socket.register_invalidate_direct_mem_ptr(this, &TraceTap::invalidate);
  }

 private:
  void b_transport(tlm::tlm_generic_payload& t, sc_core::sc_time& delay) {
    const sc_core::sc_time start = sc_core::sc_time_stamp() + delay;
    initiator_socket->b_transport(t, delay);
    if (!trace::on(trace::tlm)) return;
    const sc_core::sc_time end = sc_core::sc_time_stamp() + delay;
    trace::slice(trace::tlm, track_,
                 fmt::format("{} {:#x} +{}", t.is_read() ? "R" : t.is_write() ? "W" : "I", t.get_address(), t.get_data_length()),
                 start, end, {{"address", t.get_address()}, {"length", t.get_data_length()}, {"response", t.get_response_string()}});
  }
  unsigned transport_dbg(tlm::tlm_generic_payload& t) { return initiator_socket->transport_dbg(t); }
  bool get_direct_mem_ptr(tlm::tlm_generic_payload& t, tlm::tlm_dmi& d) { return initiator_socket->get_direct_mem_ptr(t, d); }
  void invalidate(sc_dt::uint64 start, sc_dt::uint64 end) { target_socket->invalidate_direct_mem_ptr(start, end); }

  std::string track_;
};

}  // namespace tessera
