// The DMA engine: strided copies land where they should, casts with block
// scales equal the numerics library's bit for bit, outstanding chunks hide
// the far side's latency, semaphores order descriptors, and bad
// descriptors and bus errors are reported and survived.
#include <gtest/gtest.h>

#include "common/testing/reg_checks.hpp"
#include "dma_regs.hpp"
#include "common/testing/random.hpp"

#include <cstring>
#include <random>

#include "common/memory.hpp"
#include "common/testing/initiator.hpp"
#include "engines/dma/dma.hpp"

using namespace tessera;
using namespace tessera::dma;
using tessera::testing::random_floats;

namespace {
struct Bench {
  scratchpad::Scratchpad spm{"spm", scratchpad::Scratchpad::Config{}};
  Memory far;
  Dma dma;
  tessera::testing::TestInitiator noc{"noc"};
  Semaphores sems{4};
  IrqIn irq;
  static MemoryConfig far_config() {
    MemoryConfig m;
    m.size = 1 << 20;
    m.read_latency = m.write_latency = sc_core::sc_time(100, sc_core::SC_NS);
    return m;
  }
  explicit Bench(Dma::Config c = {}) : far("far", far_config()), dma("dma", spm, c) {
    noc.socket.bind(spm.mem_target);
    dma.initiator.bind(far.mem_target);
    dma.irq.bind(irq);
    dma.set_semaphores(&sems);
  }
  sc_core::sc_time run() {
    const sc_core::sc_time t0 = sc_core::sc_time_stamp();
    sc_core::sc_start(sc_core::SC_ZERO_TIME);
    while (dma.busy()) sc_core::sc_start(sc_core::sc_time(10, sc_core::SC_NS));
    return sc_core::sc_time_stamp() - t0;
  }
  void put_far(std::uint64_t at, const void* p, unsigned n) {
    tlm::tlm_generic_payload t;
    set_access(t, tlm::TLM_WRITE_COMMAND, at, const_cast<void*>(p), n);
    far.mem_target.get_base_export()->transport_dbg(t);
  }
  void get_far(std::uint64_t at, void* p, unsigned n) {
    tlm::tlm_generic_payload t;
    set_access(t, tlm::TLM_READ_COMMAND, at, p, n);
    far.mem_target.get_base_export()->transport_dbg(t);
  }
};
}  // namespace

TEST(Dma, ThreeDimensionalStridedCopiesLandWhereTheyShould) {
  Bench b;
  std::vector<std::uint8_t> src(64 * 1024);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::uint8_t>(i * 7 + i / 251);
  b.put_far(0, src.data(), static_cast<unsigned>(src.size()));
  // Global -> local: 3 planes of 5 rows of 40 bytes; source rows 100 apart,
  // planes 1000 apart; packed at the destination.
  Descriptor d;
  d.id = 1, d.src = 16, d.dst = 0x100, d.dst_local = true;
  d.len0 = 40, d.count1 = 5, d.count2 = 3, d.src_stride1 = 100, d.src_stride2 = 1000;
  d.signal_sem = 1;
  b.dma.submit(d);
  // Local -> local: the packed block again, rows padded to 64 bytes.
  Descriptor e;
  e.id = 2, e.src = 0x100, e.src_local = true, e.dst = 0x8000, e.dst_local = true;
  e.len0 = 40, e.count1 = 15, e.dst_stride1 = 64, e.wait_sem = 1;
  b.dma.submit(e);
  b.run();
  ASSERT_EQ(b.dma.completed(), 2u) << b.dma.error();
  for (unsigned p = 0; p < 3; ++p)
    for (unsigned r = 0; r < 5; ++r)
      for (unsigned x = 0; x < 40; ++x) {
        const std::uint8_t want = src[16 + p * 1000 + r * 100 + x];
        ASSERT_EQ(b.spm.data()[0x100 + (p * 5 + r) * 40 + x], want) << p << " " << r << " " << x;
        ASSERT_EQ(b.spm.data()[0x8000 + (p * 5 + r) * 64 + x], want) << p << " " << r << " " << x;
      }
  EXPECT_EQ(b.spm.data()[0x8000 + 40], 0) << "the padding stays untouched";
  EXPECT_EQ(b.dma.stats().bytes_read, 2u * 600);
  EXPECT_EQ(b.dma.stats().global_bytes, 600u);
  EXPECT_TRUE(b.irq.level());
}

TEST(Dma, CastsWithBlockScalesMatchTheNumericsBitForBit) {
  Bench b;
  const unsigned rows = 4, cols = 256, group = 32;
  const auto x = random_floats(rows * cols, 11, -300, 300);
  b.put_far(0, x.data(), rows * cols * 4);
  // FP32 in the far memory -> E4M3 codes in the scratchpad, FP32 scales per 32.
  Descriptor d;
  d.id = 7, d.src = 0, d.dst = 0x1000, d.dst_local = true, d.len0 = cols, d.count1 = rows;
  d.raw = false, d.src_format = num::Format::FP32, d.dst_format = num::Format::E4M3;
  d.group = group, d.scales = 0x8000, d.scales_local = true;
  b.dma.submit(d);
  // And back: the E4M3 codes and their scales decoded to FP32 in the far memory.
  Descriptor e = d;
  e.id = 8, e.src = 0x1000, e.src_local = true, e.dst = 0x10000, e.dst_local = false;
  e.src_format = num::Format::E4M3, e.dst_format = num::Format::FP32;
  b.dma.submit(e);
  b.run();
  ASSERT_EQ(b.dma.completed(), 2u) << b.dma.error();
  num::Convert conv;
  conv.saturate = true;
  const num::BlockQuantized q =
      num::block_quantize(x.data(), rows, cols, num::Format::E4M3, num::ScaleFormat::FP32, 1, group, conv);
  for (unsigned i = 0; i < rows * cols; ++i) ASSERT_EQ(b.spm.data()[0x1000 + i], q.codes[i]) << i;
  std::vector<float> scales(q.scales.size()), back(rows * cols);
  std::memcpy(scales.data(), b.spm.data() + 0x8000, scales.size() * 4);
  EXPECT_EQ(scales, q.scales);
  b.get_far(0x10000, back.data(), rows * cols * 4);
  for (unsigned r = 0; r < rows; ++r)
    for (unsigned c = 0; c < cols; ++c)
      ASSERT_EQ(back[r * cols + c], static_cast<float>(q.value(r, c))) << r << " " << c;
  EXPECT_EQ(b.dma.stats().cast_elements, 2u * rows * cols);
}

TEST(Dma, E8M0ScalesAndPlainCastsRoundToNearestEven) {
  Bench b;
  const unsigned cols = 128;
  const auto x = random_floats(cols, 3, -5, 5);
  std::memcpy(b.spm.data(), x.data(), cols * 4);
  Descriptor d;
  d.src_local = d.dst_local = d.scales_local = true;
  d.src = 0, d.dst = 0x1000, d.len0 = cols, d.raw = false;
  d.src_format = num::Format::FP32, d.dst_format = num::Format::E5M2;
  d.group = 128, d.scales = 0x2000, d.scale_format = num::ScaleFormat::E8M0;
  b.dma.submit(d);
  Descriptor e;  // FP32 -> BF16, no scales
  e.src_local = e.dst_local = true, e.src = 0, e.dst = 0x3000, e.len0 = cols, e.raw = false;
  e.src_format = num::Format::FP32, e.dst_format = num::Format::BF16;
  b.dma.submit(e);
  b.run();
  ASSERT_EQ(b.dma.completed(), 2u) << b.dma.error();
  num::Convert conv;
  conv.saturate = true;
  const num::BlockQuantized q =
      num::block_quantize(x.data(), 1, cols, num::Format::E5M2, num::ScaleFormat::E8M0, 1, 128, conv);
  EXPECT_EQ(b.spm.data()[0x2000], num::e8m0_encode(q.scales[0]));
  for (unsigned i = 0; i < cols; ++i) {
    ASSERT_EQ(b.spm.data()[0x1000 + i], q.codes[i]) << i;
    std::uint16_t h;
    std::memcpy(&h, b.spm.data() + 0x3000 + 2 * i, 2);
    ASSERT_EQ(h, num::encode(num::Format::BF16, x[i])) << i;
  }
}

// 64 KiB from a memory 100 ns away in 256-byte chunks. Per chunk: the
// port (256 B at 64 B/cycle: 4 cycles at 1.5 GHz), the far read (100 ns),
// the scratchpad write (8 rows over 8 banks, 1 cycle, and 2 of latency).
namespace {
constexpr double kChunkNs = 4 / 1.5 + 100 + 3 / 1.5;
double time_64k(unsigned outstanding) {
  Dma::Config c;
  c.outstanding = outstanding;
  Bench b(c);
  Descriptor d;
  d.src = 0, d.dst = 0, d.dst_local = true, d.len0 = 64 * 1024;
  b.dma.submit(d);
  const sc_core::sc_time t = b.run();
  EXPECT_EQ(b.dma.completed(), 1u) << b.dma.error();
  EXPECT_EQ(b.dma.stats().chunks, 256u);
  return t.to_seconds() * 1e9;
}
}  // namespace

TEST(Dma, OneChunkInFlightPaysTheLatencyOfEveryChunk) {
  EXPECT_NEAR(time_64k(1), 256 * kChunkNs, 256 * kChunkNs * 0.02);
}

TEST(Dma, EightChunksInFlightHideTheLatency) {
  // Eight in flight pay the latency about 32 times (the port and the
  // scratchpad overlap with it).
  const double t = time_64k(8);
  EXPECT_LT(t, 256 * kChunkNs / 6);
  EXPECT_GT(t, 32 * 100.0);
}

TEST(Dma, BadDescriptorsAndBusErrorsAreReportedAndSurvived) {
  Bench b;
  Descriptor range;  // runs past the 2 MiB scratchpad
  range.id = 21, range.dst_local = true, range.dst = (2u << 20) - 10, range.len0 = 64;
  b.dma.submit(range);
  b.run();
  EXPECT_EQ(b.dma.error_code(), DmaError::range);
  EXPECT_EQ(b.dma.error_id(), 21u);
  EXPECT_NE(b.dma.error().find("runs past the scratchpad"), std::string::npos) << b.dma.error();
  EXPECT_TRUE(b.irq.level());
  b.dma.reset();
  EXPECT_FALSE(b.irq.level());

  Descriptor bus;  // the far memory is 1 MiB: the read fails at the far end
  bus.id = 22, bus.src = (1u << 20) - 512, bus.dst_local = true, bus.len0 = 1024;
  b.dma.submit(bus);
  b.run();
  EXPECT_EQ(b.dma.error_code(), DmaError::bus);
  EXPECT_NE(b.dma.error().find("0x100000"), std::string::npos) << b.dma.error();
  b.dma.reset();

  Descriptor fmt;  // block scales without an FP8 side
  fmt.id = 23, fmt.src_local = fmt.dst_local = true, fmt.len0 = 64, fmt.raw = false, fmt.group = 32;
  fmt.src_format = num::Format::FP32, fmt.dst_format = num::Format::BF16;
  b.dma.submit(fmt);
  Descriptor sem;  // semaphore 9 of 4
  sem.id = 24, sem.src_local = sem.dst_local = true, sem.len0 = 8, sem.signal_sem = 9;
  b.dma.submit(sem);
  b.run();
  EXPECT_EQ(b.dma.stats().errors, 4u);
  EXPECT_EQ(b.dma.error_code(), DmaError::semaphore);
  b.dma.reset();

  // A descriptor waiting on a semaphore nobody signals is dropped by reset,
  // and the engine serves the next one.
  Descriptor wait;
  wait.id = 25, wait.src_local = wait.dst_local = true, wait.len0 = 8, wait.wait_sem = 2;
  b.dma.submit(wait);
  sc_core::sc_start(sc_core::sc_time(1, sc_core::SC_US));
  EXPECT_TRUE(b.dma.busy());
  b.dma.reset();
  sc_core::sc_start(sc_core::sc_time(10, sc_core::SC_NS));
  EXPECT_FALSE(b.dma.busy());
  Descriptor ok;
  ok.id = 26, ok.src_local = ok.dst_local = true, ok.dst = 64, ok.len0 = 8;
  b.dma.submit(ok);
  b.run();
  EXPECT_EQ(b.dma.completed(), 1u) << b.dma.error();
}

TEST(Dma, StochasticCastsDependOnTheSeedOnly) {
  Dma::Config c;
  c.burst = 64;  // many chunks, several in flight
  Bench b(c);
  const unsigned n = 2048;
  std::vector<float> x(n, 1.0f + 0x1p-9f);
  std::memcpy(b.spm.data(), x.data(), 4 * n);
  auto cast = [&](std::uint64_t dst, std::uint64_t seed) {
    Descriptor d;
    d.src_local = d.dst_local = true, d.src = 0, d.dst = dst, d.len0 = n, d.raw = false;
    d.src_format = num::Format::FP32, d.dst_format = num::Format::BF16, d.stochastic = true, d.seed = seed;
    b.dma.submit(d);
  };
  cast(0x10000, 1);
  cast(0x20000, 1);
  cast(0x30000, 2);
  b.run();
  ASSERT_EQ(b.dma.completed(), 3u) << b.dma.error();
  EXPECT_EQ(std::memcmp(b.spm.data() + 0x10000, b.spm.data() + 0x20000, 2 * n), 0);
  EXPECT_NE(std::memcmp(b.spm.data() + 0x10000, b.spm.data() + 0x30000, 2 * n), 0);
  unsigned up = 0;
  for (unsigned i = 0; i < n; ++i) {
    std::uint16_t h;
    std::memcpy(&h, b.spm.data() + 0x10000 + 2 * i, 2);
    up += h == 0x3f81;
  }
  EXPECT_NEAR(up / double(n), 0.25, 0.04);
}

// A descriptor of 2^64 chunks whose first chunk fails is abandoned there
// with its error code, in simulated time the size of one chunk, not
// drained in a host loop while simulated time stands still.
TEST(Dma, AHugeDescriptorThatFailsAtItsFirstChunkIsAbandonedAtOnce) {
  Bench b;
  Descriptor huge;
  huge.id = 31, huge.src = 1ull << 40, huge.dst = 0, huge.len0 = 64;  // far to far: nothing to check locally
  huge.count1 = huge.count2 = 0xffffffffu;
  b.dma.submit(huge);
  const sc_core::sc_time took = b.run();
  EXPECT_EQ(b.dma.error_code(), DmaError::bus) << b.dma.error();
  EXPECT_EQ(b.dma.error_id(), 31u);
  EXPECT_LT(b.dma.stats().chunks, 64u) << "only the chunks in flight at the error were begun";
  EXPECT_LT(took, sc_core::sc_time(10, sc_core::SC_US));
}

// Its command registers (the tile includes them): the generic checks of every register block.
TEST(Dma, CommandRegistersCAndCppViewsAgree) {
  tessera::testing::expect_c_view_matches(tessera::regs::dma::kBlock, dma_regs_cview, dma_fields_cview,
                                          dma_values_cview);
}
