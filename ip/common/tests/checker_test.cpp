#include <gtest/gtest.h>

#include "common/checker.hpp"
#include "common/memory.hpp"
#include "common/testing/initiator.hpp"

using namespace tessera;
using namespace tessera::testing;

namespace {

// A target that breaks one rule of the base protocol on request.
struct BrokenTarget : sc_core::sc_module {
  enum Fault { none, no_status, change_length, change_address, delay_backwards, dmi_outside, dmi_wrong_data, dbg_too_many };
  Fault fault = none;
  unsigned char mem[64] = {};
  tlm_utils::simple_target_socket<BrokenTarget> socket{"socket"};

  explicit BrokenTarget(const sc_core::sc_module_name& n) : sc_core::sc_module(n) {
    socket.register_b_transport(this, &BrokenTarget::b_transport);
    socket.register_transport_dbg(this, &BrokenTarget::transport_dbg);
    socket.register_get_direct_mem_ptr(this, &BrokenTarget::get_dmi);
  }
  void b_transport(tlm::tlm_generic_payload& t, sc_core::sc_time& d) {
    if (fault != no_status) t.set_response_status(tlm::TLM_OK_RESPONSE);
    if (fault == change_length) t.set_data_length(t.get_data_length() - 1);
    if (fault == change_address) t.set_address(t.get_address() + 4);
    if (fault == delay_backwards) d = sc_core::SC_ZERO_TIME;
  }
  unsigned transport_dbg(tlm::tlm_generic_payload& t) {
    std::uint64_t a = t.get_address();
    for (unsigned i = 0; i < t.get_data_length(); ++i) t.get_data_ptr()[i] = mem[(a + i) % 64];
    return t.get_data_length() + (fault == dbg_too_many ? 1 : 0);
  }
  bool get_dmi(tlm::tlm_generic_payload& t, tlm::tlm_dmi& dmi) {
    static unsigned char other[64] = {0xee};
    dmi.set_dmi_ptr(fault == dmi_wrong_data ? other : mem);
    dmi.set_start_address(fault == dmi_outside ? 32 : 0);
    dmi.set_end_address(63);
    dmi.allow_read_write();
    return true;
  }
};

struct Bench {
  TestInitiator cpu{"cpu"};
  ProtocolChecker checker{"checker"};
  BrokenTarget target{"target"};
  Bench() {
    cpu.socket.bind(checker.target_socket);
    checker.initiator_socket.bind(target.socket);
  }
};

}  // namespace

TEST(Checker, CleanTrafficPasses) {
  TestInitiator cpu("cpu");
  ProtocolChecker checker("checker");
  Ram::Config c;
  c.size = 4096;
  Ram ram("ram", c);
  cpu.socket.bind(checker.target_socket);
  checker.initiator_socket.bind(ram.mem_target);
  std::uint32_t v = 1;
  EXPECT_EQ(cpu.transport(tlm::TLM_WRITE_COMMAND, 0, &v, 4), tlm::TLM_OK_RESPONSE);
  EXPECT_EQ(cpu.transport(tlm::TLM_READ_COMMAND, 5000, &v, 4), tlm::TLM_ADDRESS_ERROR_RESPONSE);
  tlm::tlm_dmi dmi;
  EXPECT_TRUE(cpu.dmi(16, true, dmi));
  EXPECT_EQ(cpu.debug(tlm::TLM_READ_COMMAND, 0, &v, 4), 4u);
  EXPECT_EQ(checker.violations(), 0u);
  EXPECT_EQ(checker.checked(), 4u);
}

TEST(Checker, InitiatorMustSendIncompleteStatus) {
  Bench b;
  std::uint32_t v = 0;
  tlm::tlm_generic_payload t;
  t.set_read();
  t.set_data_ptr(reinterpret_cast<unsigned char*>(&v));
  t.set_data_length(4);
  t.set_streaming_width(4);
  t.set_response_status(tlm::TLM_OK_RESPONSE);
  sc_core::sc_time d;
  EXPECT_THROW(b.cpu.socket->b_transport(t, d), sc_core::sc_report);
  EXPECT_EQ(b.checker.violations(), 1u);
}

TEST(Checker, ZeroStreamingWidthAndMissingByteEnableLength) {
  Bench b;
  std::uint32_t v = 0;
  unsigned char be = 0xff;
  tlm::tlm_generic_payload t;
  t.set_read();
  t.set_data_ptr(reinterpret_cast<unsigned char*>(&v));
  t.set_data_length(4);
  t.set_streaming_width(0);
  sc_core::sc_time d;
  EXPECT_THROW(b.cpu.socket->b_transport(t, d), sc_core::sc_report);
  t.set_streaming_width(4);
  t.set_byte_enable_ptr(&be);
  t.set_byte_enable_length(0);
  t.set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);
  EXPECT_THROW(b.cpu.socket->b_transport(t, d), sc_core::sc_report);
}

TEST(Checker, TargetMustSetStatus) {
  Bench b;
  b.target.fault = BrokenTarget::no_status;
  std::uint32_t v = 0;
  EXPECT_THROW(b.cpu.transport(tlm::TLM_READ_COMMAND, 0, &v, 4), sc_core::sc_report);
}

TEST(Checker, TargetMustNotChangeAttributes) {
  Bench b;
  std::uint32_t v = 0;
  b.target.fault = BrokenTarget::change_length;
  EXPECT_THROW(b.cpu.transport(tlm::TLM_READ_COMMAND, 0, &v, 4), sc_core::sc_report);
  b.target.fault = BrokenTarget::change_address;
  EXPECT_THROW(b.cpu.transport(tlm::TLM_READ_COMMAND, 0, &v, 4), sc_core::sc_report);
}

TEST(Checker, DelayNeverGoesBackwards) {
  Bench b;
  b.target.fault = BrokenTarget::delay_backwards;
  std::uint32_t v = 0;
  sc_core::sc_time d(10, sc_core::SC_NS);
  EXPECT_THROW(b.cpu.transport(tlm::TLM_READ_COMMAND, 0, &v, 4, &d), sc_core::sc_report);
}

TEST(Checker, DmiRangeMustContainAddress) {
  Bench b;
  b.target.fault = BrokenTarget::dmi_outside;
  tlm::tlm_dmi dmi;
  EXPECT_THROW(b.cpu.dmi(8, false, dmi), sc_core::sc_report);
}

TEST(Checker, DmiPointerMustMatchDebugReads) {
  Bench b;
  b.target.fault = BrokenTarget::dmi_wrong_data;
  tlm::tlm_dmi dmi;
  EXPECT_THROW(b.cpu.dmi(0, false, dmi), sc_core::sc_report);
}

TEST(Checker, DebugTransportMustNotOverclaim) {
  Bench b;
  b.target.fault = BrokenTarget::dbg_too_many;
  std::uint32_t v = 0;
  EXPECT_THROW(b.cpu.debug(tlm::TLM_READ_COMMAND, 0, &v, 4), sc_core::sc_report);
}
