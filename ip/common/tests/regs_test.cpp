#include <gtest/gtest.h>

#include <deque>

#include "common/regs.hpp"
#include "common/testing/reg_checks.hpp"
#include "demo_block_regs.h"
#include "demo_block_regs.hpp"

using namespace tessera;
using namespace tessera::testing;
namespace R = tessera::regs::demo_block;

namespace {

class Demo : public MmioTarget {
 public:
  std::deque<std::uint8_t> rx{0x11, 0x22};
  std::vector<std::uint8_t> tx;
  bool alt = false;
  unsigned kicks = 0;

  explicit Demo(const sc_core::sc_module_name& n) : MmioTarget(n, R::kBlock, sc_core::sc_time(5, sc_core::SC_NS)) {
    regs_.on_read(R::RXDATA, [this](unsigned, bool debug) -> std::uint64_t {
      if (rx.empty()) return 0;
      std::uint8_t v = rx.front();
      if (!debug) rx.pop_front();
      return v;
    });
    regs_.on_write(R::TXDATA, [this](RegisterBank::Write& w) {
      tx.push_back(static_cast<std::uint8_t>(w.data));
      return true;
    });
    regs_.on_write(R::KICK, [this](RegisterBank::Write& w) {
      if (w.data == 0xdead) return false;
      ++kicks;
      return true;
    });
    regs_.set_bank_selector("alt", [this] { return alt; });
  }
  tlm::tlm_fw_transport_if<>& fw() { return fw_of(csr_target); }
};

}  // namespace

TEST(Regs, CAndCppViewsAgree) { expect_c_view_matches(R::kBlock, demo_block_regs_cview, demo_block_fields_cview, demo_block_values_cview); }

// Enumerated values and shared field sets: one description, every view.
TEST(Regs, EnumsAndFieldSetsReachEveryView) {
  EXPECT_EQ(static_cast<unsigned>(R::Mode::FAST), 5u);
  EXPECT_EQ(DEMO_BLOCK_MODE_SLOW, 7u);
  ASSERT_EQ(R::kBlock.num_enums, 1u);
  EXPECT_STREQ(R::kBlock.enums[0]->name, "mode");
  ASSERT_EQ(R::kBlock.enums[0]->num_values, 3u);
  EXPECT_STREQ(R::kBlock.enums[0]->values[1].name, "FAST");
  const RegDesc& a = R::kBlock.regs[R::PAIR_A];
  const RegDesc& b = R::kBlock.regs[R::PAIR_B];
  ASSERT_EQ(a.num_fields, 2u);
  ASSERT_EQ(b.num_fields, 2u);
  for (unsigned i = 0; i < 2; ++i) {
    EXPECT_STREQ(a.fields[i].name, b.fields[i].name);
    EXPECT_EQ(a.fields[i].mask(), b.fields[i].mask());
  }
  EXPECT_EQ(R::PAIR_B_f::HI_MASK, 0xff00u);
  EXPECT_EQ(DEMO_BLOCK_PAIR_A_HI_SHIFT, 8);
}

TEST(Regs, ResetValuesAndAccessTypes) {
  Demo d("demo");
  expect_reset_and_access(d.fw(), 0, R::kBlock, {"RXDATA"});
}

TEST(Regs, FieldAccessTypes) {
  Demo d("demo");
  write(d.fw(), 0x0, 0xffffffff, 4);
  EXPECT_EQ(read(d.fw(), 0x0, 4), 0xfu) << "RO BUSY and unnamed bits keep their value";
  write(d.fw(), 0x4, 0x30, 4);
  EXPECT_EQ(read(d.fw(), 0x4, 4), 0xc0u) << "W1C clears the bits written as 1";
  write(d.fw(), 0x18, 0x3, 4);
  write(d.fw(), 0x18, 0x8, 4);
  EXPECT_EQ(read(d.fw(), 0x18, 4), 0xbu) << "W1S sets and never clears";
}

TEST(Regs, ErrorResponses) {
  Demo d("demo");
  std::uint64_t v = 0;
  EXPECT_EQ(access(d.fw(), tlm::TLM_READ_COMMAND, 0x30, &v, 4), tlm::TLM_ADDRESS_ERROR_RESPONSE) << "hole";
  EXPECT_EQ(access(d.fw(), tlm::TLM_READ_COMMAND, 0x0, &v, 2), tlm::TLM_BURST_ERROR_RESPONSE) << "too small";
  EXPECT_EQ(access(d.fw(), tlm::TLM_READ_COMMAND, 0x0, &v, 8), tlm::TLM_BURST_ERROR_RESPONSE) << "too large";
  EXPECT_EQ(access(d.fw(), tlm::TLM_READ_COMMAND, 0x12, &v, 4), tlm::TLM_BURST_ERROR_RESPONSE) << "misaligned";
  EXPECT_EQ(access(d.fw(), tlm::TLM_WRITE_COMMAND, 0x8, &v, 4), tlm::TLM_COMMAND_ERROR_RESPONSE) << "RO";
  EXPECT_EQ(access(d.fw(), tlm::TLM_READ_COMMAND, 0xc, &v, 4), tlm::TLM_COMMAND_ERROR_RESPONSE) << "WO";
  v = 0xdead;
  EXPECT_EQ(access(d.fw(), tlm::TLM_WRITE_COMMAND, 0xc, &v, 4), tlm::TLM_COMMAND_ERROR_RESPONSE) << "rejected";
  v = 1;
  EXPECT_EQ(access(d.fw(), tlm::TLM_WRITE_COMMAND, 0xc, &v, 4), tlm::TLM_OK_RESPONSE);
  EXPECT_EQ(d.kicks, 1u);

  tlm::tlm_generic_payload t;
  unsigned char be[4] = {0xff, 0, 0xff, 0xff};
  t.set_read();
  t.set_address(0);
  t.set_data_ptr(reinterpret_cast<unsigned char*>(&v));
  t.set_data_length(4);
  t.set_streaming_width(4);
  t.set_byte_enable_ptr(be);
  t.set_byte_enable_length(4);
  sc_core::sc_time delay;
  d.fw().b_transport(t, delay);
  EXPECT_EQ(t.get_response_status(), tlm::TLM_BYTE_ENABLE_ERROR_RESPONSE);
}

TEST(Regs, SubWordAccessOfWideRegister) {
  Demo d("demo");
  write(d.fw(), 0x10, 0x89abcdef, 4);
  write(d.fw(), 0x14, 0x01234567, 4);
  EXPECT_EQ(read(d.fw(), 0x10, 8), 0x0123456789abcdefull);
  EXPECT_EQ(read(d.fw(), 0x14, 4), 0x01234567u);
}

TEST(Regs, SideEffectsOnlyOutsideDebug) {
  Demo d("demo");
  EXPECT_EQ(read_dbg(d.fw(), 0x1c, 1), 0x11u);
  EXPECT_EQ(read_dbg(d.fw(), 0x1c, 1), 0x11u) << "a debug read pops nothing";
  EXPECT_EQ(read(d.fw(), 0x1c, 1), 0x11u);
  EXPECT_EQ(read(d.fw(), 0x1c, 1), 0x22u);
  write(d.fw(), 0x1c, 0x5a, 1);
  ASSERT_EQ(d.tx.size(), 1u) << "same offset, write goes to the write-only TXDATA";
  EXPECT_EQ(d.tx[0], 0x5a);
}

TEST(Regs, BankSelector) {
  Demo d("demo");
  EXPECT_EQ(read(d.fw(), 0x0, 4), 0x5u);
  d.alt = true;
  EXPECT_EQ(read(d.fw(), 0x0, 4), 0xa17u);
  write(d.fw(), 0x0, 0x123, 4);
  d.alt = false;
  EXPECT_EQ(read(d.fw(), 0x0, 4), 0x5u) << "CTRL untouched by the ALT write";
}

TEST(Regs, ArraysAndLimits) {
  Demo d("demo");
  write(d.fw(), 0x40 + 7 * 8, 0x77, 4);
  EXPECT_EQ(read(d.fw(), 0x40 + 7 * 8, 4), 0x77u);
  std::uint64_t v = 0;
  EXPECT_EQ(access(d.fw(), tlm::TLM_READ_COMMAND, 0x44, &v, 4), tlm::TLM_ADDRESS_ERROR_RESPONSE)
      << "gap between array elements";
}

TEST(Regs, LatencyAnnotated) {
  Demo d("demo");
  std::uint64_t v = 0;
  sc_core::sc_time delay(1, sc_core::SC_NS);
  access(d.fw(), tlm::TLM_READ_COMMAND, 0x8, &v, 4, &delay);
  EXPECT_EQ(delay, sc_core::sc_time(6, sc_core::SC_NS));
}
