#include <gtest/gtest.h>

#include "common/testing/reg_checks.hpp"
#include "mailbox/mailbox.hpp"
#include "mailbox_regs.hpp"

using namespace tessera;
using namespace tessera::mailbox;
using namespace tessera::testing;
namespace R = tessera::regs::mailbox;

namespace {
struct Bench {
  Mailbox box{"mailbox", config()};
  IrqIn cp_irq, host_irq;
  Bench() {
    box.cp.irq.bind(cp_irq);
    box.host.irq.bind(host_irq);
  }
  static Mailbox::Config config() {
    Mailbox::Config c;
    c.fifo_depth = 2;
    return c;
  }
  tlm::tlm_fw_transport_if<>& cp() { return fw_of(box.cp.csr_target); }
  tlm::tlm_fw_transport_if<>& host() { return fw_of(box.host.csr_target); }
};
}  // namespace

TEST(Mailbox, CAndCppViewsAgree) { expect_c_view_matches(R::kBlock, mailbox_regs_cview, mailbox_fields_cview, mailbox_values_cview); }

TEST(Mailbox, ResetValuesAndAccessTypes) {
  Bench b;
  expect_reset_and_access(b.cp(), 0, R::kBlock, {"STATUS"});
  expect_reset_and_access(b.host(), 0, R::kBlock, {"STATUS"});
  EXPECT_EQ(read(b.cp(), 0x4, 4), 0x10200u) << "empty, room for 2";
}

TEST(Mailbox, WordsFlowBothWaysWithInterrupts) {
  Bench b;
  write(b.cp(), 0x18, 0x2, 4);  // CP: interrupt on RX not empty
  write(b.host(), 0xc, 0xabc, 4);
  EXPECT_TRUE(b.cp_irq.level());
  EXPECT_EQ(read(b.cp(), 0x4, 4) & 0xff, 1u);
  EXPECT_EQ(read(b.cp(), 0x8, 4), 0xabcu);
  EXPECT_FALSE(b.cp_irq.level());
  write(b.cp(), 0xc, 0x123, 4);
  EXPECT_EQ(read(b.host(), 0x8, 4), 0x123u);
}

TEST(Mailbox, DoorbellsRingThePeer) {
  Bench b;
  write(b.host(), 0x18, 0x1, 4);
  write(b.cp(), 0x14, 0x5, 4);
  EXPECT_TRUE(b.host_irq.level());
  EXPECT_FALSE(b.cp_irq.level());
  EXPECT_EQ(read(b.host(), 0x10, 4), 0x5u);
  write(b.host(), 0x10, 0x1, 4);
  EXPECT_TRUE(b.host_irq.level());
  write(b.host(), 0x10, 0x4, 4);
  EXPECT_FALSE(b.host_irq.level());
}

TEST(Mailbox, OverflowAndUnderflowAreStickyErrors) {
  Bench b;
  write(b.host(), 0x18, 0x4, 4);
  EXPECT_EQ(read(b.host(), 0x8, 4), 0u);
  EXPECT_EQ(read(b.host(), 0x1c, 4), 0x1u);
  EXPECT_TRUE(b.host_irq.level());
  for (std::uint32_t i = 0; i < 3; ++i) write(b.host(), 0xc, i, 4);
  EXPECT_EQ(read(b.host(), 0x1c, 4), 0x3u);
  EXPECT_EQ(read(b.host(), 0x4, 4) & 0x20000, 0x20000u) << "TX_FULL";
  EXPECT_EQ(read(b.cp(), 0x8, 4), 0u);
  EXPECT_EQ(read(b.cp(), 0x8, 4), 1u) << "the third word was dropped";
  write(b.host(), 0x1c, 0x3, 4);
  EXPECT_FALSE(b.host_irq.level());
}
