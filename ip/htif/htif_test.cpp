#include <gtest/gtest.h>

#include "common/sim.hpp"
#include "common/testing/reg_checks.hpp"
#include "htif/htif.hpp"
#include "htif_regs.hpp"

using namespace tessera;
using namespace tessera::htif;
using namespace tessera::testing;
namespace R = tessera::regs::htif;

namespace {
Htif::Config quiet() {
  Htif::Config c;
  c.console = "none";
  return c;
}
}  // namespace

TEST(Htif, CAndCppViewsAgree) { expect_c_view_matches(R::kBlock, htif_regs_cview, htif_fields_cview, htif_values_cview); }

TEST(Htif, ResetValuesAndAccessTypes) {
  Htif h("htif", quiet());
  expect_reset_and_access(fw_of(h.csr_target), 0, R::kBlock);
}

TEST(Htif, PassWith64BitWrite) {
  sim::reset();
  Htif h("htif", quiet());
  write(fw_of(h.csr_target), 0, 1, 8);
  ASSERT_TRUE(sim::exit_code());
  EXPECT_EQ(*sim::exit_code(), 0);
  EXPECT_EQ(read(fw_of(h.csr_target), 0, 8), 0u) << "tohost cleared after acting";
}

TEST(Htif, FailingTestNumberWith32BitWrites) {
  sim::reset();
  Htif h("htif", quiet());
  write(fw_of(h.csr_target), 0, (5 << 1) | 1, 4);
  EXPECT_FALSE(sim::exit_code()) << "waits for the upper word";
  write(fw_of(h.csr_target), 4, 0, 4);
  ASSERT_TRUE(sim::exit_code());
  EXPECT_EQ(*sim::exit_code(), 5);
}

TEST(Htif, ConsolePutchar) {
  sim::reset();
  Htif h("htif", quiet());
  for (char c : std::string("ok"))
    write(fw_of(h.csr_target), 0, (1ull << 56) | (1ull << 48) | static_cast<unsigned char>(c), 8);
  EXPECT_EQ(h.console_output(), "ok");
  EXPECT_EQ(read(fw_of(h.csr_target), 8, 8), (1ull << 56) | (1ull << 48)) << "fromhost acknowledges";
  EXPECT_FALSE(sim::exit_code());
}
