#include <gtest/gtest.h>

#include "common/sim.hpp"
#include "common/testing/reg_checks.hpp"
#include "test_finisher/test_finisher.hpp"
#include "test_finisher_regs.hpp"

using namespace tessera;
using namespace tessera::test_finisher;
using namespace tessera::testing;
namespace R = tessera::regs::test_finisher;

TEST(TestFinisher, CAndCppViewsAgree) {
  expect_c_view_matches(R::kBlock, test_finisher_regs_cview, test_finisher_fields_cview, test_finisher_values_cview);
}

TEST(TestFinisher, ResetValuesAndAccessTypes) {
  TestFinisher f("finisher", {});
  expect_reset_and_access(fw_of(f.csr_target), 0, R::kBlock);
}

TEST(TestFinisher, Pass) {
  sim::reset();
  TestFinisher f("finisher", {});
  write(fw_of(f.csr_target), 0, 0x5555, 4);
  ASSERT_TRUE(sim::exit_code());
  EXPECT_EQ(*sim::exit_code(), 0);
}

TEST(TestFinisher, FailWithCode) {
  sim::reset();
  TestFinisher f("finisher", {});
  write(fw_of(f.csr_target), 0, (42u << 16) | 0x3333, 4);
  ASSERT_TRUE(sim::exit_code());
  EXPECT_EQ(*sim::exit_code(), 42);
}

TEST(TestFinisher, FailWithCodeZeroIsStillFailure) {
  sim::reset();
  TestFinisher f("finisher", {});
  write(fw_of(f.csr_target), 0, 0x3333, 4);
  EXPECT_EQ(*sim::exit_code(), 1);
}

TEST(TestFinisher, UnknownValueIsRejected) {
  sim::reset();
  TestFinisher f("finisher", {});
  std::uint32_t v = 0x1234;
  EXPECT_EQ(access(fw_of(f.csr_target), tlm::TLM_WRITE_COMMAND, 0, &v, 4), tlm::TLM_COMMAND_ERROR_RESPONSE);
  EXPECT_FALSE(sim::exit_code());
}
