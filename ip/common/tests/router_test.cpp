#include <gtest/gtest.h>

#include "common/memory.hpp"
#include "common/router.hpp"
#include "common/testing/initiator.hpp"

using namespace tessera;
using namespace tessera::testing;

namespace {

Ram::Config ram_config(std::uint64_t size) {
  Ram::Config c;
  c.size = size;
  return c;
}

// Two initiators, a router, two RAMs at 0x1000 and 0x8000_0000.
struct Bench {
  TestInitiator cpu{"cpu"}, dma{"dma"};
  Router router{"router", Router::Config{sc_core::sc_time(2, sc_core::SC_NS)}};
  Ram a{"a", ram_config(0x1000)}, b{"b", ram_config(0x10000)};
  Bench() {
    cpu.socket.bind(router.target_socket);
    dma.socket.bind(router.target_socket);
    router.initiator_socket.bind(a.mem_target);
    router.initiator_socket.bind(b.mem_target);
    router.map(0, 0x1000, 0x1000, "a");
    router.map(1, 0x80000000, 0x10000, "b");
    sc_core::sc_start(sc_core::SC_ZERO_TIME);
  }
};

}  // namespace

TEST(Router, DecodesAndTranslates) {
  Bench t;
  std::uint32_t v = 0xcafef00d;
  sc_core::sc_time delay;
  EXPECT_EQ(t.cpu.transport(tlm::TLM_WRITE_COMMAND, 0x80000010, &v, 4, &delay), tlm::TLM_OK_RESPONSE);
  EXPECT_EQ(delay, sc_core::sc_time(12, sc_core::SC_NS)) << "router 2 ns + RAM 10 ns";
  std::uint32_t r = 0;
  EXPECT_EQ(t.dma.debug(tlm::TLM_READ_COMMAND, 0x80000010, &r, 4), 4u);
  EXPECT_EQ(r, v);
  r = 0;
  EXPECT_EQ(t.cpu.transport(tlm::TLM_READ_COMMAND, 0x80000010, &r, 4), tlm::TLM_OK_RESPONSE);
  EXPECT_EQ(r, v);
  // Writes to a land at a's offset 0x20.
  EXPECT_EQ(t.cpu.transport(tlm::TLM_WRITE_COMMAND, 0x1020, &v, 4), tlm::TLM_OK_RESPONSE);
  EXPECT_EQ(t.cpu.debug(tlm::TLM_READ_COMMAND, 0x1020, &r, 4), 4u);
  EXPECT_EQ(r, v);
}

TEST(Router, HolesAnswerAddressError) {
  Bench t;
  std::uint32_t v = 0;
  EXPECT_EQ(t.cpu.transport(tlm::TLM_READ_COMMAND, 0x0, &v, 4), tlm::TLM_ADDRESS_ERROR_RESPONSE);
  EXPECT_EQ(t.cpu.transport(tlm::TLM_READ_COMMAND, 0x2000, &v, 4), tlm::TLM_ADDRESS_ERROR_RESPONSE);
  EXPECT_EQ(t.cpu.transport(tlm::TLM_READ_COMMAND, 0x1ffe, &v, 4), tlm::TLM_ADDRESS_ERROR_RESPONSE)
      << "an access crossing the end of a range";
  EXPECT_EQ(t.cpu.transport(tlm::TLM_READ_COMMAND, ~0ull - 1, &v, 2), tlm::TLM_ADDRESS_ERROR_RESPONSE);
  EXPECT_EQ(t.cpu.debug(tlm::TLM_READ_COMMAND, 0x5000, &v, 4), 0u);
}

TEST(Router, DmiRangesTranslatedAndHolesDenied) {
  Bench t;
  tlm::tlm_dmi dmi;
  ASSERT_TRUE(t.cpu.dmi(0x80000100, false, dmi));
  EXPECT_EQ(dmi.get_start_address(), 0x80000000u);
  EXPECT_EQ(dmi.get_end_address(), 0x8000ffffu);
  EXPECT_TRUE(dmi.is_read_write_allowed());
  dmi.get_dmi_ptr()[0x100] = 0x5a;  // visible through b_transport
  std::uint8_t r = 0;
  EXPECT_EQ(t.cpu.transport(tlm::TLM_READ_COMMAND, 0x80000100, &r, 1), tlm::TLM_OK_RESPONSE);
  EXPECT_EQ(r, 0x5a);
  tlm::tlm_dmi hole;
  EXPECT_FALSE(t.cpu.dmi(0x40000000, false, hole));
  EXPECT_EQ(hole.get_start_address(), 0x2000u) << "denied for exactly the hole";
  EXPECT_EQ(hole.get_end_address(), 0x7fffffffu);
}

TEST(Router, OverlayCutsRangeAndClipsDmi) {
  TestInitiator cpu("cpu");
  Router router("router", Router::Config{});
  Ram ram("ram", ram_config(0x10000)), dev("dev", ram_config(0x10));
  cpu.socket.bind(router.target_socket);
  router.initiator_socket.bind(ram.mem_target);
  router.initiator_socket.bind(dev.mem_target);
  router.map(0, 0x80000000, 0x10000, "ram");
  router.map(1, 0x80001000, 0x10, "dev", 0, true);
  sc_core::sc_start(sc_core::SC_ZERO_TIME);
  ASSERT_EQ(router.decode_table().size(), 3u);
  tlm::tlm_dmi low, high;
  ASSERT_TRUE(cpu.dmi(0x80000000, false, low));
  EXPECT_EQ(low.get_end_address(), 0x80000fffu);
  ASSERT_TRUE(cpu.dmi(0x80002000, false, high));
  EXPECT_EQ(high.get_start_address(), 0x80001010u);
  EXPECT_EQ(high.get_dmi_ptr()[0x2000 - 0x1010], 0) << "pointer offset matches the clipped start";
  std::uint32_t v = 7;
  EXPECT_EQ(cpu.transport(tlm::TLM_WRITE_COMMAND, 0x80001004, &v, 4), tlm::TLM_OK_RESPONSE);
  std::uint32_t r = 0;
  EXPECT_EQ(cpu.debug(tlm::TLM_READ_COMMAND, 0x80001004, &r, 4), 4u);
  EXPECT_EQ(r, 7u);
  std::uint32_t under = 1;
  EXPECT_EQ(cpu.debug(tlm::TLM_READ_COMMAND, 0x80001010, &under, 4), 4u);
  EXPECT_EQ(under, 0u) << "the write went to the overlay, not the RAM below";
}

TEST(Router, OverlapIsRefused) {
  TestInitiator cpu("cpu");
  Router router("router", Router::Config{});
  EXPECT_NO_THROW(router.map(0, 0x1000, 0x1000, "a"));
  EXPECT_THROW(router.map(1, 0x1800, 0x1000, "b"), ConfigError);
  EXPECT_THROW(router.map(1, 0x0, 0, "c"), ConfigError);
}

namespace {
// A target that invalidates its DMI on request of the test.
struct Invalidator : sc_core::sc_module {
  tlm_utils::simple_target_socket<Invalidator> socket{"socket"};
  explicit Invalidator(const sc_core::sc_module_name& n) : sc_core::sc_module(n) {
    socket.register_b_transport(this, &Invalidator::b_transport);
  }
  void b_transport(tlm::tlm_generic_payload& t, sc_core::sc_time&) { t.set_response_status(tlm::TLM_OK_RESPONSE); }
};
}  // namespace

TEST(Router, InvalidationTranslatedToEveryInitiator) {
  TestInitiator cpu("cpu"), dma("dma");
  Router router("router", Router::Config{});
  Invalidator x("x");
  cpu.socket.bind(router.target_socket);
  dma.socket.bind(router.target_socket);
  router.initiator_socket.bind(x.socket);
  router.map(0, 0x40000000, 0x1000, "x");
  sc_core::sc_start(sc_core::SC_ZERO_TIME);
  x.socket->invalidate_direct_mem_ptr(0x100, 0x1ff);
  x.socket->invalidate_direct_mem_ptr(0x0, ~0ull);
  for (auto* i : {&cpu, &dma}) {
    ASSERT_EQ(i->invalidations.size(), 2u);
    EXPECT_EQ(i->invalidations[0].first, 0x40000100u);
    EXPECT_EQ(i->invalidations[0].second, 0x400001ffu);
    EXPECT_EQ(i->invalidations[1].first, 0x40000000u) << "clipped to the mapped range";
    EXPECT_EQ(i->invalidations[1].second, 0x40000fffu) << "clipped to the mapped range";
  }
}
