#include <gtest/gtest.h>

#include "clint/clint.hpp"
#include "clint_regs.hpp"
#include "common/testing/initiator.hpp"
#include "common/testing/reg_checks.hpp"

using namespace tessera;
using namespace tessera::clint;
using namespace tessera::testing;
using sc_core::SC_NS;
using sc_core::SC_US;
using sc_core::sc_time;
namespace R = tessera::regs::clint;

namespace {

struct Bench {
  TestInitiator cpu{"cpu"};
  Clint clint;
  std::vector<IrqIn> msip{2}, mtip{2};
  std::vector<sc_time> mtip_rise{2, sc_core::SC_ZERO_TIME};
  Bench() : clint("clint", config()) {
    cpu.socket.bind(clint.csr_target);
    for (unsigned h = 0; h < 2; ++h) {
      clint.msip_out[h].bind(msip[h]);
      mtip[h].set_handler([this, h](bool level) {
        if (level) mtip_rise[h] = sc_core::sc_time_stamp();
      });
      clint.mtip_out[h].bind(mtip[h]);
    }
  }
  static Clint::Config config() {
    Clint::Config c;
    c.harts = 2;
    c.timebase = Hertz{10e6};  // 100 ns per tick
    return c;
  }
  tlm::tlm_fw_transport_if<>& fw() { return fw_of(clint.csr_target); }
};

}  // namespace

TEST(Clint, CAndCppViewsAgree) { expect_c_view_matches(R::kBlock, clint_regs_cview, clint_fields_cview, clint_values_cview); }

TEST(Clint, ResetValuesAndAccessTypes) {
  Bench b;
  expect_reset_and_access(b.fw(), 0, R::kBlock);
}

TEST(Clint, MtimeCountsTimebaseTicks) {
  Bench b;
  sc_core::sc_start(sc_time(1, SC_US));
  EXPECT_EQ(read(b.fw(), 0xbff8, 8), 10u);
  sc_time delay(250, SC_NS);  // a decoupled initiator ahead of simulation time
  std::uint64_t v = 0;
  access(b.fw(), tlm::TLM_READ_COMMAND, 0xbff8, &v, 8, &delay);
  EXPECT_EQ(v, 12u) << "reads see the initiator's local time";
  write(b.fw(), 0xbffc, 0x1, 4);  // high half
  EXPECT_EQ(read(b.fw(), 0xbff8, 8), 0x10000000au);
  EXPECT_EQ(read(b.fw(), 0xbff8, 4), 0xau);
}

TEST(Clint, TimerInterruptFiresWhenMtimeReachesCompare) {
  Bench b;
  sc_core::sc_start(sc_core::SC_ZERO_TIME);
  write(b.fw(), 0x4000 + 8, 50, 8);  // hart 1: tick 50 = 5 us
  write(b.fw(), 0x4000, 0x0, 4);     // hart 0: low half 0, high still all ones
  sc_core::sc_start(sc_time(4, SC_US));
  EXPECT_FALSE(b.mtip[1].level());
  sc_core::sc_start(sc_time(2, SC_US));
  EXPECT_TRUE(b.mtip[1].level());
  EXPECT_EQ(b.mtip_rise[1], sc_time(5, SC_US));
  EXPECT_FALSE(b.mtip[0].level()) << "0xffffffff_00000000 is far away";
  write(b.fw(), 0x4000 + 8, ~0ull, 8);
  EXPECT_FALSE(b.mtip[1].level()) << "a new compare value lowers the interrupt";
  write(b.fw(), 0x4000 + 8, 10, 8);
  EXPECT_TRUE(b.mtip[1].level()) << "a compare value in the past raises it at once";
}

TEST(Clint, SoftwareInterrupt) {
  Bench b;
  write(b.fw(), 0x4, 1, 4);
  EXPECT_TRUE(b.msip[1].level());
  EXPECT_FALSE(b.msip[0].level());
  write(b.fw(), 0x4, 0xfffffffe, 4);
  EXPECT_FALSE(b.msip[1].level());
  EXPECT_EQ(read(b.fw(), 0x4, 4), 0u) << "only bit 0 is implemented";
}

TEST(Clint, HartsBeyondConfigAreHoles) {
  Bench b;
  std::uint64_t v = 0;
  EXPECT_EQ(access(b.fw(), tlm::TLM_READ_COMMAND, 0x8, &v, 4), tlm::TLM_ADDRESS_ERROR_RESPONSE);
  EXPECT_EQ(access(b.fw(), tlm::TLM_READ_COMMAND, 0x4010, &v, 8), tlm::TLM_ADDRESS_ERROR_RESPONSE);
}
