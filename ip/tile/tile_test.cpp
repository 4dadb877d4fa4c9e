// A tile driven through its registers: a GEMM pushed field by field runs on
// the tensor core and interrupts; refused commands report their id and
// code; a full queue drops and says so; reset recovers.
#include <gtest/gtest.h>

#include <cstring>

#include "common/log.hpp"
#include "common/testing/initiator.hpp"
#include "common/testing/reg_checks.hpp"
#include "numerics/vector_ops.hpp"
#include "tile/tile.hpp"
#include "tile_regs.hpp"

using namespace tessera;
using namespace tessera::testing;
namespace R = tessera::regs::tile;

namespace {
struct Bench {
  Tile tile;
  TestInitiator mem{"mem"}, bus{"bus"};
  IrqIn irq;
  explicit Bench(unsigned queue_depth = 8) : tile("tile0", config(queue_depth)) {
    mem.socket.bind(tile.scratchpad().mem_target);
    bus.socket.bind(tile.csr_target());
    tile.irq.bind(irq);
  }
  static Tile::Config config(unsigned depth) {
    Tile::Config c;
    c.queue_depth = depth;
    return c;
  }
  tlm::tlm_fw_transport_if<>& csr() { return fw_of(tile.csr_target()); }
  void put_bf16(std::uint64_t addr, const std::vector<double>& v) {
    for (std::size_t i = 0; i < v.size(); ++i) {
      const std::uint16_t code = static_cast<std::uint16_t>(num::encode(num::Format::BF16, v[i]));
      ASSERT_EQ(mem.transport(tlm::TLM_WRITE_COMMAND, addr + 2 * i, const_cast<std::uint16_t*>(&code), 2),
                tlm::TLM_OK_RESPONSE);
    }
  }
  void program(std::uint32_t id, unsigned m, unsigned n, unsigned k, std::uint32_t a, std::uint32_t b, std::uint32_t c,
               std::uint32_t format = 1) {
    write(csr(), R::kBlock.regs[R::CMD_ID].offset, id, 4);
    write(csr(), R::kBlock.regs[R::CMD_FORMAT].offset, format, 4);
    write(csr(), R::kBlock.regs[R::CMD_M].offset, m, 4);
    write(csr(), R::kBlock.regs[R::CMD_N].offset, n, 4);
    write(csr(), R::kBlock.regs[R::CMD_K].offset, k, 4);
    write(csr(), R::kBlock.regs[R::CMD_A].offset, a, 4);
    write(csr(), R::kBlock.regs[R::CMD_B].offset, b, 4);
    write(csr(), R::kBlock.regs[R::CMD_C].offset, c, 4);
    write(csr(), R::kBlock.regs[R::CMD_PUSH].offset, 1, 4);
  }
  std::uint64_t reg(unsigned r) { return read(csr(), R::kBlock.regs[r].offset, 4); }
  void run_idle() {
    sc_core::sc_start(sc_core::SC_ZERO_TIME);
    while (reg(R::STATUS) & R::STATUS_f::BUSY_MASK) sc_core::sc_start(sc_core::sc_time(1, sc_core::SC_US));
  }
};
}  // namespace

TEST(Tile, CAndCppViewsAgree) { expect_c_view_matches(R::kBlock, tile_regs_cview, tile_fields_cview); }

TEST(Tile, ResetValuesAndAccessTypes) {
  Bench b;
  expect_reset_and_access(b.csr(), 0, R::kBlock, {"STATUS"});
  EXPECT_EQ(b.reg(R::STATUS), 0u);
}

TEST(Tile, GemmPushedThroughRegistersRunsAndInterrupts) {
  Bench b;
  const unsigned m = 3, n = 2, k = 4;
  b.put_bf16(0x100, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});  // A 3x4
  b.put_bf16(0x200, {1, 0, 0, 1, 1, 1, 0.5, -1});              // B 4x2
  write(b.csr(), 0x14, R::IRQ_ENABLE_f::DONE_MASK | R::IRQ_ENABLE_f::ERROR_MASK, 4);
  b.program(5, m, n, k, 0x100, 0x200, 0x400);
  EXPECT_TRUE(b.reg(R::STATUS) & R::STATUS_f::BUSY_MASK);
  b.run_idle();
  EXPECT_TRUE(b.irq.level());
  EXPECT_EQ(b.reg(R::IRQ_STATUS), R::IRQ_STATUS_f::DONE_MASK);
  EXPECT_EQ(b.reg(R::COMPLETED), 1u);
  const float want[] = {1 + 3 + 2, 2 + 3 - 4, 5 + 7 + 4, 6 + 7 - 8, 9 + 11 + 6, 10 + 11 - 12};
  for (unsigned i = 0; i < m * n; ++i) {
    float got = 0;
    EXPECT_EQ(b.mem.debug(tlm::TLM_READ_COMMAND, 0x400 + 4 * i, &got, 4), 4u);
    EXPECT_EQ(got, want[i]) << i;
  }
  write(b.csr(), 0x18, R::IRQ_STATUS_f::DONE_MASK, 4);
  EXPECT_FALSE(b.irq.level()) << "acknowledged";
  nlohmann::ordered_json stats;
  b.tile.report_stats(stats);
  EXPECT_EQ(stats["tensor_macs_bf16"], m * n * k);
  EXPECT_GT(stats["spm_bytes_written"].get<std::uint64_t>(), 0u);
}

TEST(Tile, RefusedCommandsReportIdAndCodeAndResetRecovers) {
  Bench b;
  write(b.csr(), 0x14, R::IRQ_ENABLE_f::ERROR_MASK, 4);
  const auto before = log::guest_error_count();
  b.program(77, 64, 64, 64, 0x0, 0x2000, 0x1ff000);  // C runs past the 2 MiB scratchpad
  b.run_idle();
  EXPECT_TRUE(b.irq.level());
  EXPECT_EQ(b.reg(R::IRQ_STATUS), R::IRQ_STATUS_f::ERROR_MASK);
  EXPECT_TRUE(b.reg(R::STATUS) & R::STATUS_f::ERROR_MASK);
  EXPECT_EQ(b.reg(R::ERROR_ID), 77u);
  EXPECT_EQ(b.reg(R::ERROR_CODE), 3u) << "operand outside the scratchpad";
  EXPECT_EQ(log::guest_error_count(), before + 1);
  b.program(78, 4, 4, 4, 0x0, 0x100, 0x200, 9);  // no such input format
  b.run_idle();
  EXPECT_EQ(b.reg(R::ERROR_ID), 78u);
  EXPECT_EQ(b.reg(R::ERROR_CODE), 1u);
  write(b.csr(), 0x1c, R::CTRL_f::RESET_MASK, 4);
  write(b.csr(), 0x18, R::IRQ_STATUS_f::ERROR_MASK, 4);
  EXPECT_EQ(b.reg(R::STATUS), 0u);
  EXPECT_EQ(b.reg(R::ERROR_CODE), 0u);
  EXPECT_FALSE(b.irq.level());
  b.program(79, 4, 4, 4, 0x0, 0x100, 0x200);
  b.run_idle();
  EXPECT_EQ(b.reg(R::COMPLETED), 1u);
  EXPECT_EQ(b.reg(R::STATUS), 0u);
}

TEST(Tile, FullQueueDropsThePushAndSaysSo) {
  Bench b(1);
  write(b.csr(), 0x14, R::IRQ_ENABLE_f::ERROR_MASK, 4);
  for (std::uint32_t id = 1; id <= 3; ++id) b.program(id, 64, 64, 64, 0x0, 0x2000, 0x4000);
  // The engine has not started yet (no simulated time passed): one queued, two dropped.
  EXPECT_EQ(b.reg(R::ERROR_CODE), 6u);
  EXPECT_TRUE(b.irq.level());
  b.run_idle();
  EXPECT_EQ(b.reg(R::COMPLETED), 1u);
  nlohmann::ordered_json stats;
  b.tile.report_stats(stats);
  EXPECT_EQ(stats["tensor_refused_queue_full"], 2u);
}

TEST(Tile, AnErrorAfterACompletionRaisesOnlyError) {
  Bench b;
  b.put_bf16(0x100, std::vector<double>(16, 1.0));
  b.program(1, 4, 4, 4, 0x100, 0x100, 0x400);
  b.run_idle();
  EXPECT_EQ(b.reg(R::IRQ_STATUS), R::IRQ_STATUS_f::DONE_MASK);
  write(b.csr(), 0x18, R::IRQ_STATUS_f::DONE_MASK, 4);
  b.program(2, 4, 4, 4, 0x100, 0x100, 0x1ffff8);  // C past the end
  b.run_idle();
  EXPECT_EQ(b.reg(R::IRQ_STATUS), R::IRQ_STATUS_f::ERROR_MASK) << "no DONE for a refused command";
}

TEST(Tile, BlockScaledFp8ThroughRegisters) {
  Bench b;
  // E4M3 ones (code 0x38): A 8x128 with FP32 scale 2.0 per row group, B
  // 128x8 with one block scale 0.5: every C element is 128 x 2 x 0.5.
  std::vector<std::uint8_t> ones(128 * 8, 0x38);
  ASSERT_EQ(b.mem.transport(tlm::TLM_WRITE_COMMAND, 0x0, ones.data(), 1024), tlm::TLM_OK_RESPONSE);
  ASSERT_EQ(b.mem.transport(tlm::TLM_WRITE_COMMAND, 0x1000, ones.data(), 1024), tlm::TLM_OK_RESPONSE);
  std::vector<float> sa(8, 2.0f);
  float sb = 0.5f;
  ASSERT_EQ(b.mem.transport(tlm::TLM_WRITE_COMMAND, 0x2000, sa.data(), 32), tlm::TLM_OK_RESPONSE);
  ASSERT_EQ(b.mem.transport(tlm::TLM_WRITE_COMMAND, 0x2100, &sb, 4), tlm::TLM_OK_RESPONSE);
  write(b.csr(), R::kBlock.regs[R::CMD_SA].offset, 0x2000, 4);
  write(b.csr(), R::kBlock.regs[R::CMD_SB].offset, 0x2100, 4);
  write(b.csr(), R::kBlock.regs[R::CMD_GROUP].offset, 0, 4);  // 128
  b.program(1, 8, 8, 128, 0x0, 0x1000, 0x3000, 3 | R::CMD_FORMAT_f::BLOCK_SCALED_MASK);
  b.run_idle();
  EXPECT_EQ(b.reg(R::ERROR_CODE), 0u);
  EXPECT_EQ(b.reg(R::COMPLETED), 1u);
  for (unsigned i = 0; i < 64; ++i) {
    float got = 0;
    b.mem.debug(tlm::TLM_READ_COMMAND, 0x3000 + 4 * i, &got, 4);
    ASSERT_EQ(got, 128.0f) << i;
  }
}

TEST(Tile, VectorCommandsThroughRegisters) {
  Bench b;
  write(b.csr(), 0x14, R::IRQ_ENABLE_f::VDONE_MASK | R::IRQ_ENABLE_f::VERROR_MASK, 4);
  // Softmax of two rows of four.
  const float x[8] = {1, 2, 3, 4, 0, 0, 0, 0};
  ASSERT_EQ(b.mem.transport(tlm::TLM_WRITE_COMMAND, 0x100, const_cast<float*>(x), 32), tlm::TLM_OK_RESPONSE);
  auto vwrite = [&](unsigned r, std::uint64_t v) { write(b.csr(), R::kBlock.regs[r].offset, v, 4); };
  vwrite(R::VCMD_ID, 11);
  vwrite(R::VCMD_OP, 19);  // softmax
  vwrite(R::VCMD_ROWS, 2);
  vwrite(R::VCMD_COLS, 4);
  vwrite(R::VCMD_SRC0, 0x100);
  vwrite(R::VCMD_DST, 0x200);
  vwrite(R::VCMD_PUSH, 1);
  sc_core::sc_start(sc_core::SC_ZERO_TIME);
  while (b.reg(R::VSTATUS) & R::VSTATUS_f::BUSY_MASK) sc_core::sc_start(sc_core::sc_time(10, sc_core::SC_NS));
  EXPECT_EQ(b.reg(R::IRQ_STATUS), R::IRQ_STATUS_f::VDONE_MASK);
  EXPECT_TRUE(b.irq.level());
  EXPECT_EQ(b.reg(R::VCOMPLETED), 1u);
  float y[8];
  b.mem.debug(tlm::TLM_READ_COMMAND, 0x200, y, 32);
  std::vector<float> want(x, x + 8);
  num::vec::softmax(want.data(), 4);
  num::vec::softmax(want.data() + 4, 4);
  for (unsigned i = 0; i < 8; ++i) EXPECT_EQ(y[i], want[i]) << i;
  EXPECT_EQ(y[4], 0.25f);
  write(b.csr(), 0x18, R::IRQ_STATUS_f::VDONE_MASK, 4);
  // An unknown op is refused by number; VRESET clears it.
  vwrite(R::VCMD_ID, 12);
  vwrite(R::VCMD_OP, 99);
  vwrite(R::VCMD_PUSH, 1);
  sc_core::sc_start(sc_core::sc_time(100, sc_core::SC_NS));
  EXPECT_EQ(b.reg(R::IRQ_STATUS), R::IRQ_STATUS_f::VERROR_MASK);
  EXPECT_EQ(b.reg(R::VERROR_ID), 12u);
  EXPECT_TRUE(b.reg(R::VSTATUS) & R::VSTATUS_f::ERROR_MASK);
  write(b.csr(), 0x1c, R::CTRL_f::VRESET_MASK, 4);
  EXPECT_EQ(b.reg(R::VSTATUS), 0u);
  EXPECT_EQ(b.reg(R::STATUS), 0u) << "the tensor core is untouched";
}

TEST(Tile, VectorCastThroughRegisters) {
  Bench b;
  const float x[4] = {1.0f, -2.5f, 3.0e38f, 0.1f};
  ASSERT_EQ(b.mem.transport(tlm::TLM_WRITE_COMMAND, 0x100, const_cast<float*>(x), 16), tlm::TLM_OK_RESPONSE);
  auto vwrite = [&](unsigned r, std::uint64_t v) { write(b.csr(), R::kBlock.regs[r].offset, v, 4); };
  EXPECT_EQ(b.reg(R::VCMD_FORMAT), 0x11u) << "BF16, saturating";
  vwrite(R::VCMD_OP, 27);  // cast_to
  vwrite(R::VCMD_ROWS, 1);
  vwrite(R::VCMD_COLS, 4);
  vwrite(R::VCMD_SRC0, 0x100);
  vwrite(R::VCMD_DST, 0x200);
  vwrite(R::VCMD_FORMAT, 0x3);  // E4M3, not saturating
  vwrite(R::VCMD_PUSH, 1);
  sc_core::sc_start(sc_core::sc_time(100, sc_core::SC_NS));
  EXPECT_EQ(b.reg(R::VCOMPLETED), 1u);
  std::uint8_t codes[4];
  b.mem.debug(tlm::TLM_READ_COMMAND, 0x200, codes, 4);
  EXPECT_EQ(codes[0], 0x38);
  EXPECT_EQ(codes[1], 0xc2);
  EXPECT_EQ(codes[2], 0x7f) << "overflow without saturation is NaN in E4M3";
  EXPECT_EQ(codes[3], num::encode(num::Format::E4M3, 0.1f));
}
