#include <gtest/gtest.h>

#include "common/testing/reg_checks.hpp"
#include "plic/plic.hpp"
#include "plic_regs.hpp"

using namespace tessera;
using namespace tessera::plic;
using namespace tessera::testing;
namespace R = tessera::regs::plic;

namespace {

struct Bench {
  Plic plic;
  IrqOut src[41];
  IrqIn ctx[2];
  Bench() : plic("plic", config()) {
    for (unsigned s = 1; s <= 40; ++s) src[s].bind(plic.source_in[s]);
    for (unsigned c = 0; c < 2; ++c) plic.context_out[c].bind(ctx[c]);
  }
  static Plic::Config config() {
    Plic::Config c;
    c.sources = 40;
    c.contexts = 2;
    return c;
  }
  tlm::tlm_fw_transport_if<>& fw() { return fw_of(plic.csr_target); }
  void priority(unsigned s, unsigned p) { write(fw(), 4 * s, p, 4); }
  void enable(unsigned c, unsigned s) {
    std::uint64_t addr = 0x2000 + 0x80 * c + 4 * (s / 32);
    write(fw(), addr, read(fw(), addr, 4) | (1u << (s % 32)), 4);
  }
  std::uint64_t claim(unsigned c) { return read(fw(), 0x200004 + 0x1000 * c, 4); }
  void complete(unsigned c, unsigned s) { write(fw(), 0x200004 + 0x1000 * c, s, 4); }
};

}  // namespace

TEST(Plic, CAndCppViewsAgree) { expect_c_view_matches(R::kBlock, plic_regs_cview, plic_fields_cview, plic_values_cview); }

TEST(Plic, ResetValuesAndAccessTypes) {
  Bench b;
  expect_reset_and_access(b.fw(), 0, R::kBlock);
}

TEST(Plic, ClaimHighestPriorityThenLowestId) {
  Bench b;
  b.priority(3, 2);
  b.priority(5, 6);
  b.priority(35, 6);
  for (unsigned s : {3u, 5u, 35u}) b.enable(0, s);
  b.src[3].write(true);
  EXPECT_TRUE(b.ctx[0].level());
  EXPECT_FALSE(b.ctx[1].level()) << "context 1 has nothing enabled";
  b.src[35].write(true);
  b.src[5].write(true);
  EXPECT_EQ(read(b.fw(), 0x1000, 4), (1u << 3) | (1u << 5));
  EXPECT_EQ(read(b.fw(), 0x1004, 4), 1u << 3);
  EXPECT_EQ(b.claim(0), 5u) << "priority 6, lower id than 35";
  EXPECT_EQ(b.claim(0), 35u);
  EXPECT_EQ(b.claim(0), 3u);
  EXPECT_EQ(b.claim(0), 0u);
  EXPECT_FALSE(b.ctx[0].level()) << "all in service";
  b.complete(0, 5);
  EXPECT_TRUE(b.ctx[0].level()) << "level still high: pending again after completion";
  b.src[5].write(false);
  EXPECT_FALSE(b.ctx[0].level()) << "pending follows the level input";
}

TEST(Plic, ThresholdMasksAndPriorityZeroNeverInterrupts) {
  Bench b;
  b.enable(1, 7);
  b.src[7].write(true);
  EXPECT_FALSE(b.ctx[1].level()) << "priority 0";
  b.priority(7, 3);
  EXPECT_TRUE(b.ctx[1].level());
  write(b.fw(), 0x201000, 3, 4);
  EXPECT_FALSE(b.ctx[1].level()) << "threshold 3 masks priority 3";
  EXPECT_EQ(b.claim(1), 0u);
  write(b.fw(), 0x201000, 2, 4);
  EXPECT_EQ(b.claim(1), 7u);
}

TEST(Plic, WarlBitsAndHoles) {
  Bench b;
  b.priority(1, 0xff);
  EXPECT_EQ(read(b.fw(), 4, 4), 7u) << "3 priority bits";
  b.priority(0, 5);
  EXPECT_EQ(read(b.fw(), 0, 4), 0u) << "source 0 does not exist";
  write(b.fw(), 0x2004, 0xffffffff, 4);
  EXPECT_EQ(read(b.fw(), 0x2004, 4), 0x1ffu) << "sources 32..40 exist";
  std::uint64_t v = 0;
  EXPECT_EQ(access(b.fw(), tlm::TLM_READ_COMMAND, 4 * 41, &v, 4), tlm::TLM_ADDRESS_ERROR_RESPONSE);
  EXPECT_EQ(access(b.fw(), tlm::TLM_READ_COMMAND, 0x202000, &v, 4), tlm::TLM_ADDRESS_ERROR_RESPONSE)
      << "context 2 does not exist";
}

TEST(Plic, DebugReadOfClaimDoesNotClaim) {
  Bench b;
  b.priority(2, 1);
  b.enable(0, 2);
  b.src[2].write(true);
  EXPECT_EQ(read_dbg(b.fw(), 0x200004, 4), 2u);
  EXPECT_EQ(read_dbg(b.fw(), 0x200004, 4), 2u);
  EXPECT_EQ(b.claim(0), 2u);
}
