// A plain access as a generic payload: no byte enables, streaming width
// equal to the length, status TLM_INCOMPLETE_RESPONSE as the base protocol
// asks of an initiator.
#pragma once

#include <cstdint>
#include <tlm>

namespace tessera {

inline void set_access(tlm::tlm_generic_payload& t, tlm::tlm_command cmd, std::uint64_t addr, void* data,
                       unsigned len) {
  t.set_command(cmd);
  t.set_address(addr);
  t.set_data_ptr(static_cast<unsigned char*>(data));
  t.set_data_length(len);
  t.set_streaming_width(len);
  t.set_byte_enable_ptr(nullptr);
  t.set_byte_enable_length(0);
  t.set_dmi_allowed(false);
  t.set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);
}

}  // namespace tessera
