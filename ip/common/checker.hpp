// A TLM-2.0 base-protocol checker of our own, as a pass-through module:
// bind it between an initiator and a target and it checks every call on
// the way through (IEEE 1666-2011 §14):
//   - the initiator sends a payload with TLM_INCOMPLETE_RESPONSE, a data
//     pointer, a non-zero length and streaming width, a byte-enable length
//     when it sets byte enables, and the DMI hint cleared;
//   - the target sets the response status, and leaves command, address,
//     data pointer, data length, byte-enable pointer and length and
//     streaming width as they were;
//   - annotated delays never go backwards;
//   - a DMI grant names a range that contains the address, a non-null
//     pointer and some access right, and the bytes behind the pointer are
//     what transport_dbg reads at that address;
//   - transport_dbg never claims more bytes than were asked for.
// A violation is reported as an SC_ERROR of type tessera/protocol (which
// throws, so the test that caused it fails) and counted.
#pragma once

#include <cstdint>
#include <string>
#include <tlm>
#include <tlm_utils/simple_initiator_socket.h>
#include <tlm_utils/simple_target_socket.h>

namespace tessera {

class ProtocolChecker : public sc_core::sc_module {
 public:
  static constexpr const char* kMsgType = "tessera/protocol";

  tlm_utils::simple_target_socket<ProtocolChecker> target_socket;
  tlm_utils::simple_initiator_socket<ProtocolChecker> initiator_socket;

  explicit ProtocolChecker(const sc_core::sc_module_name& n);

  std::uint64_t checked() const { return checked_; }
  std::uint64_t violations() const { return violations_; }

 private:
  struct Snapshot {
    tlm::tlm_command cmd;
    std::uint64_t addr;
    unsigned char* data;
    unsigned len;
    unsigned char* be;
    unsigned be_len;
    unsigned sw;
  };
  Snapshot snap(const tlm::tlm_generic_payload& t) const;
  void check_request(const tlm::tlm_generic_payload& t, const char* call);
  void check_unchanged(const Snapshot& s, const tlm::tlm_generic_payload& t, const char* call);
  void violation(const char* call, const std::string& what);

  void b_transport(tlm::tlm_generic_payload& trans, sc_core::sc_time& delay);
  unsigned transport_dbg(tlm::tlm_generic_payload& trans);
  bool get_direct_mem_ptr(tlm::tlm_generic_payload& trans, tlm::tlm_dmi& dmi);
  void invalidate_direct_mem_ptr(sc_dt::uint64 start, sc_dt::uint64 end);

  std::uint64_t checked_ = 0, violations_ = 0;
};

}  // namespace tessera
