// Checks every IP's tests run against its own register description, so
// reset values and access rules are tested from the one place they are
// written.
#pragma once

#include <cstdint>
#include <tlm>

#include "common/regs_cview.h"
#include "common/regs_desc.hpp"

namespace tessera::testing {

// The forward interface behind a target socket, to call a target directly.
template <class Socket>
tlm::tlm_fw_transport_if<>& fw_of(Socket& socket) {
  return *socket.get_base_export().operator->();
}

// The C header (through its generated C view) and the C++ table agree.
void expect_c_view_matches(const RegBlockDesc& desc, const tessera_reg_cview* regs, const tessera_field_cview* fields,
                           const tessera_value_cview* values);

// Every readable register without read side effects reads its reset value
// through transport_dbg at `base`; writes to read-only registers and reads
// of write-only registers (where no other register shares the offset)
// answer TLM_COMMAND_ERROR_RESPONSE through b_transport. Registers whose
// value the model computes (not the reset value) are named in `skip`.
void expect_reset_and_access(tlm::tlm_fw_transport_if<>& target, std::uint64_t base, const RegBlockDesc& desc,
                             std::initializer_list<const char*> skip = {});

// One access through b_transport; returns the response status.
tlm::tlm_response_status access(tlm::tlm_fw_transport_if<>& target, tlm::tlm_command cmd, std::uint64_t addr,
                                void* data, unsigned len, sc_core::sc_time* delay = nullptr);
std::uint64_t read(tlm::tlm_fw_transport_if<>& target, std::uint64_t addr, unsigned len);
void write(tlm::tlm_fw_transport_if<>& target, std::uint64_t addr, std::uint64_t value, unsigned len);
std::uint64_t read_dbg(tlm::tlm_fw_transport_if<>& target, std::uint64_t addr, unsigned len);

}  // namespace tessera::testing
