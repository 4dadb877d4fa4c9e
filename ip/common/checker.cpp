#include "common/checker.hpp"

#include <fmt/format.h>

#include <cstring>

#include "common/payload.hpp"

namespace tessera {

ProtocolChecker::ProtocolChecker(const sc_core::sc_module_name& n)
    : sc_core::sc_module(n), target_socket("target_socket"), initiator_socket("initiator_socket") {
  target_socket.register_b_transport(this, &ProtocolChecker::b_transport);
  target_socket.register_transport_dbg(this, &ProtocolChecker::transport_dbg);
  target_socket.register_get_direct_mem_ptr(this, &ProtocolChecker::get_direct_mem_ptr);
  initiator_socket.register_invalidate_direct_mem_ptr(this, &ProtocolChecker::invalidate_direct_mem_ptr);
}

void ProtocolChecker::violation(const char* call, const std::string& what) {
  ++violations_;
  SC_REPORT_ERROR(kMsgType, fmt::format("{}: {}: {}", name(), call, what).c_str());
}

ProtocolChecker::Snapshot ProtocolChecker::snap(const tlm::tlm_generic_payload& t) const {
  return Snapshot{t.get_command(),          t.get_address(),         t.get_data_ptr(),       t.get_data_length(),
                  t.get_byte_enable_ptr(), t.get_byte_enable_length(), t.get_streaming_width()};
}

void ProtocolChecker::check_request(const tlm::tlm_generic_payload& t, const char* call) {
  ++checked_;
  if (t.get_response_status() != tlm::TLM_INCOMPLETE_RESPONSE)
    violation(call, fmt::format("the initiator sent response status {} instead of TLM_INCOMPLETE_RESPONSE",
                                t.get_response_string()));
  if (!t.get_data_ptr()) violation(call, "the data pointer is null");
  if (t.get_data_length() == 0) violation(call, "the data length is 0");
  if (t.get_byte_enable_ptr() && t.get_byte_enable_length() == 0)
    violation(call, "byte enables are set but their length is 0");
  if (t.get_streaming_width() == 0) violation(call, "the streaming width is 0");
  if (t.is_dmi_allowed()) violation(call, "the initiator sent the DMI hint set");
}

void ProtocolChecker::check_unchanged(const Snapshot& s, const tlm::tlm_generic_payload& t, const char* call) {
  Snapshot now = snap(t);
  if (now.cmd != s.cmd) violation(call, "the target changed the command");
  if (now.addr != s.addr) violation(call, fmt::format("the address changed from {:#x} to {:#x}", s.addr, now.addr));
  if (now.data != s.data) violation(call, "the target changed the data pointer");
  if (now.len != s.len) violation(call, fmt::format("the data length changed from {} to {}", s.len, now.len));
  if (now.be != s.be || now.be_len != s.be_len) violation(call, "the target changed the byte enables");
  if (now.sw != s.sw) violation(call, "the target changed the streaming width");
}

void ProtocolChecker::b_transport(tlm::tlm_generic_payload& trans, sc_core::sc_time& delay) {
  check_request(trans, "b_transport");
  const Snapshot s = snap(trans);
  // The target may annotate delay or wait(); the initiator's local time
  // (simulation time plus delay) must not go backwards either way.
  const sc_core::sc_time before = sc_core::sc_time_stamp() + delay;
  initiator_socket->b_transport(trans, delay);
  check_unchanged(s, trans, "b_transport");
  if (trans.get_response_status() == tlm::TLM_INCOMPLETE_RESPONSE)
    violation("b_transport", "the target returned without setting the response status");
  if (sc_core::sc_time_stamp() + delay < before)
    violation("b_transport", fmt::format("local time went backwards from {} to {}", before.to_string(),
                                         (sc_core::sc_time_stamp() + delay).to_string()));
}

unsigned ProtocolChecker::transport_dbg(tlm::tlm_generic_payload& trans) {
  ++checked_;
  if (trans.get_data_length() > 0 && !trans.get_data_ptr()) violation("transport_dbg", "the data pointer is null");
  const Snapshot s = snap(trans);
  unsigned n = initiator_socket->transport_dbg(trans);
  check_unchanged(s, trans, "transport_dbg");
  if (n > trans.get_data_length())
    violation("transport_dbg", fmt::format("the target claims {} bytes of {} asked for", n, trans.get_data_length()));
  return n;
}

bool ProtocolChecker::get_direct_mem_ptr(tlm::tlm_generic_payload& trans, tlm::tlm_dmi& dmi) {
  ++checked_;
  const Snapshot s = snap(trans);
  const std::uint64_t addr = trans.get_address();
  bool ok = initiator_socket->get_direct_mem_ptr(trans, dmi);
  check_unchanged(s, trans, "get_direct_mem_ptr");
  if (!ok) return false;
  if (!dmi.get_dmi_ptr()) violation("get_direct_mem_ptr", "granted with a null pointer");
  if (dmi.get_start_address() > dmi.get_end_address())
    violation("get_direct_mem_ptr", "granted an empty range (start above end)");
  if (addr < dmi.get_start_address() || addr > dmi.get_end_address())
    violation("get_direct_mem_ptr", fmt::format("granted [{:#x}, {:#x}], which does not contain {:#x}",
                                                dmi.get_start_address(), dmi.get_end_address(), addr));
  if (dmi.get_granted_access() == tlm::tlm_dmi::DMI_ACCESS_NONE)
    violation("get_direct_mem_ptr", "granted with no access right");
  // The pointer must show the bytes the target would give a debug read.
  if (dmi.is_read_allowed() && dmi.get_dmi_ptr() && addr >= dmi.get_start_address() &&
      addr <= dmi.get_end_address()) {
    unsigned char via_dbg = 0;
    tlm::tlm_generic_payload probe;
    set_access(probe, tlm::TLM_READ_COMMAND, addr, &via_dbg, 1);
    const unsigned char via_dmi = dmi.get_dmi_ptr()[addr - dmi.get_start_address()];
    if (initiator_socket->transport_dbg(probe) == 1 && via_dbg != via_dmi)
      violation("get_direct_mem_ptr", fmt::format("the DMI pointer shows {:#04x} at {:#x} but transport_dbg reads {:#04x}",
                                                  via_dmi, addr, via_dbg));
  }
  return true;
}

void ProtocolChecker::invalidate_direct_mem_ptr(sc_dt::uint64 start, sc_dt::uint64 end) {
  if (start > end) violation("invalidate_direct_mem_ptr", "start above end");
  target_socket->invalidate_direct_mem_ptr(start, end);
}

}  // namespace tessera
