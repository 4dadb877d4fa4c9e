// A tile driven through its registers: a GEMM pushed field by field runs on
// the tensor core and interrupts; refused commands report their id and
// code; a full queue drops and says so; reset recovers.
#include <gtest/gtest.h>

#include <cstring>

#include "common/log.hpp"
#include "common/memory.hpp"
#include "common/router.hpp"
#include "common/testing/initiator.hpp"
#include "common/testing/reg_checks.hpp"
#include "engines/num/vector_ops.hpp"
#include "tile/tile.hpp"
#include "tile_regs.hpp"

using namespace tessera;
using namespace tessera::tile;
using namespace tessera::testing;
namespace R = tessera::regs::tile;

namespace {
// The tile's initiators (its DMA, its core's way out) reach a 1 MiB
// memory at kFar through a router; everything else is a hole.
constexpr std::uint64_t kFar = 0x4000'0000;
MemoryConfig far_config() {
  MemoryConfig m;
  m.size = 1 << 20;
  m.read_latency = m.write_latency = sc_core::sc_time(50, sc_core::SC_NS);
  return m;
}
struct Bench {
  Tile tile;
  TestInitiator mem{"mem"}, bus{"bus"};
  Router outside{"outside", Router::Config{}};
  Memory far{"far", far_config()};
  IrqIn irq;
  explicit Bench(unsigned queue_depth = 8) : tile("tile0", config(queue_depth)) {
    mem.socket.bind(tile.scratchpad().mem_target);
    bus.socket.bind(tile.csr_target());
    tile.irq_out.bind(irq);
    for (const auto& [name, socket] : tile.initiators()) socket->bind(outside.target_socket);
    outside.initiator_socket.bind(far.mem_target);
    outside.map(0, kFar, 1 << 20, "far");
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

TEST(Tile, CAndCppViewsAgree) { expect_c_view_matches(R::kBlock, tile_regs_cview, tile_fields_cview, tile_values_cview); }

// The tile decodes VCMD_OP and the format fields by the names
// tile.regs.json gives the codes: every engine operation and format has
// exactly one code there, so none is unreachable or decoded as another.
TEST(Tile, EveryEngineOpAndFormatHasOneCodeInTheRegisterDescription) {
  auto count = [](const EnumDesc& d, const char* name) {
    unsigned n = 0;
    for (unsigned i = 0; i < d.num_values; ++i) {
      std::string lower = d.values[i].name;
      for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      n += lower == name;
    }
    return n;
  };
  for (unsigned op = 0; op < static_cast<unsigned>(vector::Op::count); ++op)
    EXPECT_EQ(count(R::kVectorOpEnum, vector::name(static_cast<vector::Op>(op))), 1u) << vector::name(static_cast<vector::Op>(op));
  EXPECT_EQ(R::kVectorOpEnum.num_values, static_cast<unsigned>(vector::Op::count));
  for (unsigned f = 0; f < num::kFormats; ++f)
    EXPECT_EQ(count(R::kFormatEnum, num::name(static_cast<num::Format>(f))), 1u) << num::name(static_cast<num::Format>(f));
  EXPECT_EQ(R::kFormatEnum.num_values, num::kFormats);
}

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

namespace {
// RV32I encodings for the hand-written core programs below.
std::uint32_t lui(unsigned rd, std::uint32_t imm20) { return imm20 << 12 | rd << 7 | 0x37; }
std::uint32_t addi(unsigned rd, unsigned rs1, std::int32_t imm) {
  return (static_cast<std::uint32_t>(imm) & 0xfff) << 20 | rs1 << 15 | rd << 7 | 0x13;
}
std::uint32_t lw(unsigned rd, unsigned rs1, std::uint32_t imm) { return imm << 20 | rs1 << 15 | 2 << 12 | rd << 7 | 0x03; }
std::uint32_t sw(unsigned rs2, unsigned rs1, std::uint32_t imm) {
  return (imm >> 5) << 25 | rs2 << 20 | rs1 << 15 | 2 << 12 | (imm & 31) << 7 | 0x23;
}
constexpr std::uint32_t kSpin = 0x0000006f;  // jal x0, 0
constexpr unsigned a0 = 10, a1 = 11, a2 = 12;
unsigned off(unsigned r) { return R::kBlock.regs[r].offset; }
}  // namespace

TEST(Tile, CoreRunsFromTheScratchpadExitsAndFaults) {
  Bench b;
  // Program 1: a1 = CORE_ARG[0] + 1, stored to the far memory (through the
  // core's way out) and written to CORE_EXIT.
  const std::vector<std::uint32_t> exit_prog = {
      lui(a0, Tile::kLocalRegs >> 12), lw(a1, a0, off(R::CORE_ARG)), addi(a1, a1, 1), lui(a2, kFar >> 12),
      sw(a1, a2, 0), sw(a1, a0, off(R::CORE_EXIT)), kSpin};
  // Program 2 (at 0x100): a load from a hole; mtvec is 0, so the handler
  // cannot even be fetched: the core stops with a fault.
  const std::vector<std::uint32_t> fault_prog = {lui(a2, (kFar + (2 << 20)) >> 12), lw(a1, a2, 0), kSpin};
  b.mem.debug(tlm::TLM_WRITE_COMMAND, 0, const_cast<std::uint32_t*>(exit_prog.data()), 4 * exit_prog.size());
  b.mem.debug(tlm::TLM_WRITE_COMMAND, 0x100, const_cast<std::uint32_t*>(fault_prog.data()), 4 * fault_prog.size());
  EXPECT_EQ(b.reg(R::CORE_STATUS), 0u) << "held until started";
  write(b.csr(), off(R::IRQ_ENABLE), R::IRQ_ENABLE_f::CORE_DONE_MASK | R::IRQ_ENABLE_f::CORE_FAULT_MASK, 4);
  write(b.csr(), off(R::CORE_ARG), 41, 4);
  write(b.csr(), off(R::CORE_CTRL), R::CORE_CTRL_f::START_MASK, 4);
  sc_core::sc_start(sc_core::sc_time(2, sc_core::SC_US));
  EXPECT_EQ(b.reg(R::CORE_STATUS), 2u);
  EXPECT_EQ(b.reg(R::CORE_EXIT), 42u);
  EXPECT_TRUE(b.irq.level());
  std::uint32_t far = 0;
  tlm::tlm_generic_payload t;
  set_access(t, tlm::TLM_READ_COMMAND, 0, &far, 4);
  b.far.mem_target.get_base_export()->transport_dbg(t);
  EXPECT_EQ(far, 42u);
  write(b.csr(), off(R::IRQ_STATUS), ~0u, 4);

  write(b.csr(), off(R::CORE_PC), Tile::kLocalSpm + 0x100, 4);
  write(b.csr(), off(R::CORE_CTRL), R::CORE_CTRL_f::START_MASK, 4);
  sc_core::sc_start(sc_core::sc_time(2, sc_core::SC_US));
  EXPECT_EQ(b.reg(R::CORE_STATUS), 3u);
  EXPECT_EQ(b.reg(R::CORE_FAULT_CAUSE), 5u) << "load access fault";
  EXPECT_EQ(b.reg(R::CORE_FAULT_PC), Tile::kLocalSpm + 0x104);
  EXPECT_EQ(b.reg(R::CORE_FAULT_TVAL), kFar + (2 << 20));
  EXPECT_EQ(b.reg(R::IRQ_STATUS), R::IRQ_STATUS_f::CORE_FAULT_MASK);
  write(b.csr(), off(R::IRQ_STATUS), ~0u, 4);

  // And the core serves the next kernel.
  write(b.csr(), off(R::CORE_PC), Tile::kLocalSpm, 4);
  write(b.csr(), off(R::CORE_ARG), 99, 4);
  write(b.csr(), off(R::CORE_CTRL), R::CORE_CTRL_f::START_MASK, 4);
  sc_core::sc_start(sc_core::sc_time(2, sc_core::SC_US));
  EXPECT_EQ(b.reg(R::CORE_STATUS), 2u);
  EXPECT_EQ(b.reg(R::CORE_EXIT), 100u);
  nlohmann::ordered_json stats;
  b.tile.report_stats(stats);
  EXPECT_EQ(stats["kernels_done"], 2u);
  EXPECT_EQ(stats["kernel_faults"], 1u);
}

TEST(Tile, SemaphoresOrderTheDmaAndTheTensorCore) {
  Bench b;
  const unsigned m = 8, n = 8, k = 16;
  std::vector<std::uint16_t> a(m * k), bm(k * n);
  for (unsigned i = 0; i < m * k; ++i) a[i] = static_cast<std::uint16_t>(num::encode(num::Format::BF16, int(i % 7) - 3));
  for (unsigned i = 0; i < k * n; ++i) bm[i] = static_cast<std::uint16_t>(num::encode(num::Format::BF16, int(i % 5) - 2));
  tlm::tlm_generic_payload t;
  set_access(t, tlm::TLM_WRITE_COMMAND, 0, a.data(), 2 * m * k);
  b.far.mem_target.get_base_export()->transport_dbg(t);
  set_access(t, tlm::TLM_WRITE_COMMAND, 0x1000, bm.data(), 2 * k * n);
  b.far.mem_target.get_base_export()->transport_dbg(t);
  auto dma = [&](std::uint32_t id, std::uint64_t src, std::uint64_t dst, std::uint32_t flags, std::uint32_t len,
                 std::uint32_t sem) {
    write(b.csr(), off(R::DMA_ID), id, 4);
    write(b.csr(), off(R::DMA_SRC_LO), static_cast<std::uint32_t>(src), 4);
    write(b.csr(), off(R::DMA_SRC_HI), src >> 32, 4);
    write(b.csr(), off(R::DMA_DST_LO), static_cast<std::uint32_t>(dst), 4);
    write(b.csr(), off(R::DMA_DST_HI), dst >> 32, 4);
    write(b.csr(), off(R::DMA_FLAGS), flags, 4);
    write(b.csr(), off(R::DMA_LEN0), len, 4);
    write(b.csr(), off(R::DMA_SEM), sem, 4);
    write(b.csr(), off(R::DMA_PUSH), 1, 4);
  };
  constexpr std::uint32_t kDstLocal = R::DMA_FLAGS_f::DST_LOCAL_MASK, kSrcLocal = R::DMA_FLAGS_f::SRC_LOCAL_MASK;
  // The GEMM is queued first but waits on semaphore 1, which the second
  // DMA signals; the copy-out waits on semaphore 2, which the GEMM signals
  // (with semaphore 4 as its second).
  write(b.csr(), off(R::CMD_SEM), 2 | 3 << 8 | 5 << 16, 4);
  b.program(1, m, n, k, 0x0, 0x2000, 0x4000);
  dma(10, kFar, 0x0, kDstLocal, 2 * m * k, 0);
  dma(11, kFar + 0x1000, 0x2000, kDstLocal, 2 * k * n, 2 << 8);
  dma(12, 0x4000, kFar + 0x8000, kSrcLocal, 4 * m * n, 3);
  EXPECT_TRUE(b.reg(R::STATUS) & R::STATUS_f::BUSY_MASK);
  sc_core::sc_start(sc_core::sc_time(20, sc_core::SC_US));
  EXPECT_EQ(b.reg(R::COMPLETED), 1u);
  EXPECT_EQ(b.reg(R::DMA_COMPLETED), 3u);
  EXPECT_EQ(b.reg(R::DMA_STATUS), 0u);
  std::vector<float> c(m * n);
  set_access(t, tlm::TLM_READ_COMMAND, 0x8000, c.data(), 4 * m * n);
  b.far.mem_target.get_base_export()->transport_dbg(t);
  for (unsigned i = 0; i < m; ++i)
    for (unsigned j = 0; j < n; ++j) {
      double want = 0;
      for (unsigned p = 0; p < k; ++p) want += double(int((i * k + p) % 7) - 3) * (int((p * n + j) % 5) - 2);
      ASSERT_EQ(c[i * n + j], want) << i << " " << j;
    }
  EXPECT_EQ(b.reg(R::IRQ_STATUS) & (R::IRQ_STATUS_f::DDONE_MASK | R::IRQ_STATUS_f::DONE_MASK | R::IRQ_STATUS_f::SEM_MASK),
            R::IRQ_STATUS_f::DDONE_MASK | R::IRQ_STATUS_f::DONE_MASK | R::IRQ_STATUS_f::SEM_MASK);
  nlohmann::ordered_json stats;
  b.tile.report_stats(stats);
  EXPECT_GT(stats["tensor_semaphore_wait_cycles"].get<std::uint64_t>(), 100u) << "the GEMM waited for its operands";
  EXPECT_EQ(stats["dma_global_bytes"], 2u * (2 * m * k + 2 * k * n + 4 * m * n) / 2);
  EXPECT_EQ(stats["semaphore_signals"], 3u);
  EXPECT_EQ(read(b.csr(), off(R::SEM) + 4 * 4, 4), 1u) << "the GEMM's second signal";

  // The semaphore registers: a write signals, SEM_TAKE takes, debug reads
  // take nothing; a bad semaphore number is refused with code 7.
  write(b.csr(), off(R::SEM) + 5 * 4, 3, 4);
  EXPECT_EQ(read(b.csr(), off(R::SEM) + 5 * 4, 4), 3u);
  std::uint32_t v = 0;
  tlm::tlm_generic_payload d;
  set_access(d, tlm::TLM_READ_COMMAND, off(R::SEM_TAKE) + 5 * 4, &v, 4);
  b.csr().transport_dbg(d);
  EXPECT_EQ(v, 1u);
  EXPECT_EQ(read(b.csr(), off(R::SEM) + 5 * 4, 4), 3u) << "a debug read takes nothing";
  EXPECT_EQ(read(b.csr(), off(R::SEM_TAKE) + 5 * 4, 4), 1u);
  EXPECT_EQ(read(b.csr(), off(R::SEM) + 5 * 4, 4), 2u);
  write(b.csr(), off(R::CTRL), R::CTRL_f::SEMRESET_MASK, 4);
  EXPECT_EQ(read(b.csr(), off(R::SEM_TAKE) + 5 * 4, 4), 0u);
  write(b.csr(), off(R::CMD_SEM), 17, 4);
  b.program(2, m, n, k, 0x0, 0x2000, 0x4000);
  b.run_idle();
  EXPECT_EQ(b.reg(R::ERROR_CODE), 7u);
  EXPECT_EQ(b.reg(R::ERROR_ID), 2u);
}
