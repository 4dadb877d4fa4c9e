// The tensor core engine: GEMMs read from and written to the scratchpad,
// bit-exact against the numerics library, timed as the systolic array,
// operand bank conflicts, bad commands reported and survived.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "common/testing/reg_checks.hpp"
#include "tensor_regs.hpp"
#include "common/log.hpp"
#include "common/sim.hpp"
#include "common/testing/initiator.hpp"
#include "engines/num/block_scale.hpp"
#include "engines/tensor/tensor_core.hpp"

using namespace tessera;
using namespace tessera::tensor;

namespace {
// One tile's scratchpad and tensor core. SystemC elaborates once per
// process, so a test needing several builds them all before running any.
struct Tile {
  scratchpad::Scratchpad spm;
  TensorCore tc;
  tessera::testing::TestInitiator noc;  // the scratchpad's other users
  IrqIn irq;
  explicit Tile(const std::string& tag = "")
      : spm((tag + "spm").c_str(), scratchpad::Scratchpad::Config{}),
        tc((tag + "tc").c_str(), spm, ArrayConfig{}),
        noc((tag + "noc").c_str()) {
    tc.irq.bind(irq);
    noc.socket.bind(spm.mem_target);
  }

  // Writes `values` rounded into `f` at `addr`; returns the rounded values.
  std::vector<double> put(std::uint64_t addr, num::Format f, const std::vector<double>& values) {
    std::vector<double> held(values.size());
    const unsigned eb = num::bits(f) / 8;
    for (std::size_t i = 0; i < values.size(); ++i) {
      const std::uint32_t code = num::encode(f, values[i]);
      std::memcpy(spm.data() + addr + i * eb, &code, eb);
      held[i] = num::decode(f, code);
    }
    return held;
  }
  float get_f32(std::uint64_t addr) {
    float f;
    std::memcpy(&f, spm.data() + addr, 4);
    return f;
  }
  std::int32_t get_i32(std::uint64_t addr) {
    std::int32_t v;
    std::memcpy(&v, spm.data() + addr, 4);
    return v;
  }
  // Runs until the engine is idle; returns the simulated time it took.
  sc_core::sc_time run() {
    const sc_core::sc_time t0 = sc_core::sc_time_stamp();
    sc_core::sc_start(sc_core::SC_ZERO_TIME);
    while (tc.busy()) sc_core::sc_start(sc_core::sc_time(1, sc_core::SC_US));
    return sc_core::sc_time_stamp() - t0;
  }
};
std::vector<double> random(std::size_t n, unsigned seed, double lo = -2, double hi = 2) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}
const sc_core::sc_time kPeriod(1.0 / 1.5e9, sc_core::SC_SEC);
}  // namespace

TEST(TensorCore, Bf16GemmIsBitExactAndTakesTheArraysTime) {
  Tile t;
  const unsigned m = 70, n = 50, k = 130;  // several tiles along K, partial ones everywhere
  const auto a = t.put(0x0, num::Format::BF16, random(m * k, 1));
  const auto b = t.put(0x10000, num::Format::BF16, random(k * n, 2));
  GemmCommand c;
  c.id = 7;
  c.shape = {m, n, k, num::Format::BF16};
  c.a = 0x0, c.b = 0x10000, c.c = 0x20000;
  t.tc.submit(c);
  // The engine finishes at the array's time; the run loop may overshoot by its 1 us step.
  sc_core::sc_start(sc_core::SC_ZERO_TIME);
  sc_core::sc_start(kPeriod * static_cast<double>(timing(ArrayConfig{}, c.shape).cycles));
  EXPECT_TRUE(t.tc.busy()) << "not before the array's time";
  sc_core::sc_start(kPeriod);
  EXPECT_FALSE(t.tc.busy()) << "done one cycle later";
  EXPECT_TRUE(t.irq.level());
  EXPECT_EQ(t.tc.completed(), 1u);
  std::vector<double> ref;
  num::gemm(a, b, ref, m, n, k, num::Accumulation{});
  for (unsigned i = 0; i < m * n; ++i) ASSERT_EQ(t.get_f32(0x20000 + i * 4), static_cast<float>(ref[i])) << i;
  EXPECT_EQ(t.tc.stats().macs_bf16, std::uint64_t(m) * n * k);
  EXPECT_EQ(t.tc.stats().operand_stall_cycles, 0u);
}

// BF16 commands take a float path of their own where every operand is a
// normal number of moderate size, and the general one otherwise: both give
// num::gemm's bits, transposed operands and accumulation into C included.
TEST(TensorCore, Bf16GemmsGiveTheNumericsBitsOnEitherPath) {
  Tile t;
  const unsigned m = 5, n = 40, k = 70;
  std::vector<double> a = random(m * k, 3), b = random(k * n, 4), c0 = random(m * n, 5);
  c0[7] = std::nan("");
  struct Case {
    const char* what;
    double a0, b0;  // A's first element and B's last, where the case puts them
  };
  const Case cases[] = {{"every operand normal", 0.75, -1.5},
                        {"a subnormal in A", std::ldexp(1.0, -130), -1.5},
                        {"a magnitude past 2^62 in B", 0.75, std::ldexp(1.0, 70)},
                        {"an infinity in B", 0.75, -INFINITY}};
  for (const Case& x : cases) {
    a[0] = x.a0, b[k * n - 1] = x.b0;
    // A and B stored transposed: A(i, p) at p * m + i, B(p, j) at j * k + p.
    std::vector<double> at(m * k), bt(k * n);
    for (unsigned i = 0; i < m; ++i)
      for (unsigned p = 0; p < k; ++p) at[p * m + i] = a[i * k + p];
    for (unsigned p = 0; p < k; ++p)
      for (unsigned j = 0; j < n; ++j) bt[j * k + p] = b[p * n + j];
    const std::vector<double> held_at = t.put(0x0, num::Format::BF16, at), held_bt = t.put(0x10000, num::Format::BF16, bt);
    std::vector<double> ha(m * k), hb(k * n), ref(m * n);
    for (unsigned i = 0; i < m; ++i)
      for (unsigned p = 0; p < k; ++p) ha[i * k + p] = held_at[p * m + i];
    for (unsigned p = 0; p < k; ++p)
      for (unsigned j = 0; j < n; ++j) hb[p * n + j] = held_bt[j * k + p];
    for (unsigned i = 0; i < m * n; ++i) {
      const float f = static_cast<float>(c0[i]);
      std::memcpy(t.spm.data() + 0x20000 + i * 4, &f, 4);
      ref[i] = f;
    }
    GemmCommand c;
    c.shape = {m, n, k, num::Format::BF16};
    c.a = 0x0, c.b = 0x10000, c.c = 0x20000, c.trans_a = c.trans_b = true, c.accumulate = true;
    t.tc.submit(c);
    t.run();
    num::gemm(ha, hb, ref, m, n, k, num::Accumulation{}, true);
    for (unsigned i = 0; i < m * n; ++i) {
      const float want = static_cast<float>(ref[i]), got = t.get_f32(0x20000 + i * 4);
      if (std::isnan(want)) EXPECT_TRUE(std::isnan(got)) << x.what << ", element " << i;
      else ASSERT_EQ(std::memcmp(&got, &want, 4), 0) << x.what << ", element " << i << ": " << got << " against " << want;
    }
  }
  // A product below float's normal range, added to C in one rounding (the
  // general path's): 2^-75 x 2^-75 = 2^-150 lies halfway between C =
  // 2^-126 + 2^-149 and the next float, and the tie goes to the even one;
  // a product rounded to float first (to 0) would leave C as it was.
  t.put(0x0, num::Format::BF16, {std::ldexp(1.0, -75)});
  t.put(0x10000, num::Format::BF16, {std::ldexp(1.0, -75)});
  const float c = std::ldexp(1.0f, -126) + std::ldexp(1.0f, -149);
  std::memcpy(t.spm.data() + 0x20000, &c, 4);
  GemmCommand tie;
  tie.shape = {1, 1, 1, num::Format::BF16};
  tie.a = 0x0, tie.b = 0x10000, tie.c = 0x20000, tie.accumulate = true;
  t.tc.submit(tie);
  t.run();
  EXPECT_EQ(t.get_f32(0x20000), std::ldexp(1.0f, -126) + std::ldexp(1.0f, -148));
  EXPECT_EQ(t.tc.completed(), 5u);
}

TEST(TensorCore, TimingOnlyTakesTheSameTimeAndTrafficButComputesNoProducts) {
  // Two tiles run the same GEMMs (BF16, then block-scaled E4M3 with C +=),
  // one computing, one timing only (sim::timing_only, switched as each
  // runs): the same busy cycles, stalls, MACs, bytes and completion
  // times; the timing-only results seeded values in [-1, 1), not the
  // products, the same run after run.
  const unsigned m = 40, n = 96, k = 256;
  Tile data("data"), timing("timing");
  for (Tile* t : {&data, &timing}) {
    t->put(0x0, num::Format::BF16, random(m * k, 4));
    t->put(0x10000, num::Format::BF16, random(k * n, 5));
    for (unsigned i = 0; i < m * k + k * n; ++i) t->spm.data()[0x40000 + i] = static_cast<std::uint8_t>(i * 37 % 120);
    for (unsigned i = 0; i < 2 * m + 2 * n; ++i) t->put(0x60000 + 4 * i, num::Format::FP32, {0.5 + (i % 5) * 0.25});
  }
  GemmCommand plain, scaled;
  plain.shape = {m, n, k, num::Format::BF16};
  plain.a = 0x0, plain.b = 0x10000, plain.c = 0x20000;
  scaled.shape = {m, n, k, num::Format::E4M3};
  scaled.a = 0x40000, scaled.b = 0x40000 + m * k, scaled.c = 0x30000, scaled.accumulate = true;
  scaled.block_scaled = true, scaled.group = 128, scaled.sa = 0x60000, scaled.sb = 0x60000 + 4 * 2 * m;
  sc_core::sc_time took[2];
  for (int mode = 0; mode < 2; ++mode) {
    Tile& t = mode ? timing : data;
    sim::set_timing_only(mode == 1);
    t.tc.submit(plain), t.tc.submit(scaled);
    took[mode] = t.run();
  }
  sim::set_timing_only(false);
  EXPECT_EQ(took[0], took[1]);
  const TensorStats &d = data.tc.stats(), &x = timing.tc.stats();
  EXPECT_EQ(d.busy_cycles, x.busy_cycles);
  EXPECT_EQ(d.operand_stall_cycles, x.operand_stall_cycles);
  EXPECT_EQ(d.macs_bf16, x.macs_bf16);
  EXPECT_EQ(d.macs_fp8, x.macs_fp8);
  EXPECT_EQ(d.bytes_read, x.bytes_read);
  EXPECT_EQ(d.bytes_written, x.bytes_written);
  EXPECT_EQ(timing.tc.completed(), 2u);
  EXPECT_TRUE(timing.tc.error().empty()) << timing.tc.error();
  unsigned differ = 0;
  for (unsigned i = 0; i < m * n; ++i) {
    const float v = timing.get_f32(0x20000 + i * 4);
    ASSERT_TRUE(v >= -1.0f && v < 1.0f) << i << ": " << v;
    differ += v != data.get_f32(0x20000 + i * 4);
  }
  EXPECT_GT(differ, m * n * 9 / 10) << "no products were computed";
}

TEST(TensorCore, ConflictingOperandLayoutIsSlowerByThePredictedFactor) {
  // A stored transposed with a 1 KiB pitch: the 64 K-elements of a row wave
  // all sit in bank 0, so each wave costs 64 cycles instead of 1; a padded
  // pitch (1 KiB + one bank row) spreads them over the banks: 2 cycles.
  const unsigned m = 256, n = 64, k = 64;
  Tile bad_tile("bad"), good_tile("good");
  auto setup = [&](Tile& t, std::uint32_t lda_elements) {
    for (unsigned p = 0; p < k; ++p)
      for (unsigned i = 0; i < m; ++i)
        t.put((p * lda_elements + i) * 2, num::Format::BF16, {static_cast<double>((i * 7 + p * 3) % 11) - 5});
    t.put(0x80000, num::Format::BF16, random(k * n, 3));
    GemmCommand c;
    c.shape = {m, n, k, num::Format::BF16};
    c.a = 0x0, c.b = 0x80000, c.c = 0x100000;
    c.trans_a = true;
    c.lda = lda_elements;
    t.tc.submit(c);
  };
  setup(bad_tile, 512);
  setup(good_tile, 512 + 16);
  bad_tile.run();
  good_tile.run();
  std::vector<float> bad(m * n), good(m * n);
  for (unsigned i = 0; i < m * n; ++i) bad[i] = bad_tile.get_f32(0x100000 + i * 4);
  for (unsigned i = 0; i < m * n; ++i) good[i] = good_tile.get_f32(0x100000 + i * 4);
  const std::uint64_t conflicted = bad_tile.tc.stats().busy_cycles, padded = good_tile.tc.stats().busy_cycles;
  EXPECT_EQ(bad, good) << "same answer either way";
  EXPECT_GT(bad_tile.tc.stats().operand_stall_cycles, 0u);
  const ArrayConfig cfg;
  EXPECT_EQ(conflicted, timing(cfg, {256, 64, 64, num::Format::BF16}, 64).cycles);
  EXPECT_EQ(padded, timing(cfg, {256, 64, 64, num::Format::BF16}, 2).cycles);
  std::printf("transposed A, 1 KiB pitch: %llu cycles; padded pitch: %llu cycles\n",
              static_cast<unsigned long long>(conflicted), static_cast<unsigned long long>(padded));
}

TEST(TensorCore, Int8AccumulatesExactlyIntoInt32) {
  Tile t;
  const unsigned m = 4, n = 3, k = 300;
  std::vector<double> a(m * k), b(k * n);
  for (unsigned i = 0; i < a.size(); ++i) a[i] = (i % 2) ? 127 : -128;
  for (unsigned i = 0; i < b.size(); ++i) b[i] = (i % 3) ? -128 : 127;
  t.put(0x0, num::Format::INT8, a);
  t.put(0x1000, num::Format::INT8, b);
  for (unsigned i = 0; i < m * n; ++i) std::memcpy(t.spm.data() + 0x2000 + i * 4, &i, 4);  // C += A.B
  GemmCommand c;
  c.shape = {m, n, k, num::Format::INT8};
  c.a = 0x0, c.b = 0x1000, c.c = 0x2000;
  c.accumulate = true;
  c.acc.kind = num::Accumulation::Kind::int32;
  t.tc.submit(c);
  t.run();
  for (unsigned i = 0; i < m; ++i)
    for (unsigned j = 0; j < n; ++j) {
      std::int64_t want = i * n + j;
      for (unsigned p = 0; p < k; ++p)
        want += static_cast<std::int64_t>(a[i * k + p]) * static_cast<std::int64_t>(b[p * n + j]);
      EXPECT_EQ(t.get_i32(0x2000 + (i * n + j) * 4), want);
    }
  EXPECT_EQ(t.tc.stats().macs_int8, std::uint64_t(m) * n * k);
}

TEST(TensorCore, LimitedFp8AccumulationShowsAndPromotionFixesIt) {
  const unsigned m = 4, n = 4, k = 4096;
  Tile tiles[3] = {Tile("full"), Tile("limited"), Tile("promoted")};
  num::Accumulation accs[3];
  accs[1].kind = accs[2].kind = num::Accumulation::Kind::limited;
  accs[2].promote_every = 128;
  std::vector<double> exact(m * n, 0.0);
  for (unsigned e = 0; e < 3; ++e) {
    const auto a = tiles[e].put(0x0, num::Format::E4M3, random(m * k, 4, 0.1, 2.0));
    const auto b = tiles[e].put(0x10000, num::Format::E4M3, random(k * n, 5, 0.1, 2.0));
    if (e == 0)
      for (unsigned i = 0; i < m; ++i)
        for (unsigned j = 0; j < n; ++j)
          for (unsigned p = 0; p < k; ++p) exact[i * n + j] += a[i * k + p] * b[p * n + j];
    GemmCommand c;
    c.shape = {m, n, k, num::Format::E4M3};
    c.a = 0x0, c.b = 0x10000, c.c = 0x20000;
    c.acc = accs[e];
    tiles[e].tc.submit(c);
  }
  double worst[3] = {0, 0, 0};
  for (unsigned e = 0; e < 3; ++e) {
    tiles[e].run();
    for (unsigned i = 0; i < m * n; ++i)
      worst[e] = std::max(worst[e], std::fabs(tiles[e].get_f32(0x20000 + i * 4) - exact[i]) / exact[i]);
  }
  const double ef = worst[0], el = worst[1], ep = worst[2];
  std::printf("tensor core E4M3 K=4096: fp32 %.2e, limited %.2e, promoted every 128 %.2e\n", ef, el, ep);
  EXPECT_GT(el, 20 * ef);
  EXPECT_LT(ep, el / 10);
}

TEST(TensorCore, BadCommandsSetAnErrorAndTheEngineCarriesOn) {
  Tile t;
  const auto before = log::guest_error_count();
  std::memset(t.spm.data() + 0x1f0000, 0x5a, 0x10000);
  GemmCommand bad;
  bad.id = 41;
  bad.shape = {64, 64, 64, num::Format::BF16};
  bad.a = 0x0, bad.b = 0x2000, bad.c = 0x1ff000;  // C needs 16 KiB, 4 KiB before the end: runs past it
  t.tc.submit(bad);
  t.run();
  EXPECT_TRUE(t.irq.level());
  EXPECT_EQ(t.tc.error_id(), 41u);
  EXPECT_NE(t.tc.error().find("C ["), std::string::npos) << t.tc.error();
  EXPECT_NE(t.tc.error().find("outside the scratchpad"), std::string::npos) << t.tc.error();
  EXPECT_EQ(t.spm.data()[0x1ff000], 0x5a) << "nothing written";
  EXPECT_EQ(log::guest_error_count(), before + 1);
  GemmCommand fp32 = bad;
  fp32.id = 42;
  fp32.c = 0x10000;
  fp32.shape.input = num::Format::FP32;
  t.tc.submit(fp32);
  t.run();
  EXPECT_EQ(t.tc.error_id(), 42u);
  EXPECT_NE(t.tc.error().find("fp32"), std::string::npos) << t.tc.error();
  GemmCommand pitch = fp32;
  pitch.id = 43;
  pitch.shape.input = num::Format::BF16;
  pitch.lda = 10;
  t.tc.submit(pitch);
  t.run();
  EXPECT_NE(t.tc.error().find("A's pitch 10"), std::string::npos) << t.tc.error();
  // Reset of the queue clears the error; a good command then runs.
  t.tc.reset();
  EXPECT_FALSE(t.irq.level());
  EXPECT_EQ(t.tc.error(), "");
  GemmCommand good = fp32;
  good.id = 44;
  good.shape.input = num::Format::BF16;
  t.tc.submit(good);
  t.run();
  EXPECT_EQ(t.tc.error(), "");
  EXPECT_EQ(t.tc.completed(), 1u);
  EXPECT_EQ(t.tc.stats().errors, 3u);
}

TEST(TensorCore, BlockScaledFp8MatchesTheNumericsBitForBit) {
  // A 8x256 in 1x128 groups, B 256x160 in 128x128 blocks (two K-groups, a
  // partial N block), E4M3 codes, FP32 scales and E8M0 scales.
  const unsigned m = 8, n = 160, k = 256, g = 128;
  Tile tiles[2] = {Tile("fp32s"), Tile("e8m0s")};
  std::mt19937 rng(31);
  std::normal_distribution<float> dist(0, 1);
  std::vector<float> a(m * k), b(k * n);
  for (unsigned i = 0; i < m; ++i)
    for (unsigned p = 0; p < k; ++p) a[i * k + p] = dist(rng) * std::pow(10.0f, static_cast<float>(i % 4) - 2);
  for (auto& x : b) x = dist(rng);
  const num::ScaleFormat formats[2] = {num::ScaleFormat::FP32, num::ScaleFormat::E8M0};
  std::vector<double> want[2];
  for (unsigned e = 0; e < 2; ++e) {
    const num::BlockQuantized qa = num::block_quantize(a.data(), m, k, num::Format::E4M3, formats[e], 1, g);
    const num::BlockQuantized qb = num::block_quantize(b.data(), k, n, num::Format::E4M3, formats[e], g, g);
    num::gemm_block_scaled(qa, qb, want[e]);
    std::uint8_t* mem = tiles[e].spm.data();
    std::memcpy(mem + 0x0, qa.codes.data(), qa.codes.size());
    std::memcpy(mem + 0x10000, qb.codes.data(), qb.codes.size());
    auto put_scales = [&](std::uint64_t at, const std::vector<float>& sc) {
      for (std::size_t i = 0; i < sc.size(); ++i) {
        if (formats[e] == num::ScaleFormat::E8M0) mem[at + i] = num::e8m0_encode(sc[i]);
        else std::memcpy(mem + at + 4 * i, &sc[i], 4);
      }
    };
    put_scales(0x20000, qa.scales);
    put_scales(0x21000, qb.scales);
    GemmCommand c;
    c.shape = {m, n, k, num::Format::E4M3};
    c.a = 0x0, c.b = 0x10000, c.c = 0x30000;
    c.block_scaled = true;
    c.scale_format = formats[e];
    c.group = g;
    c.sa = 0x20000, c.sb = 0x21000;
    tiles[e].tc.submit(c);
  }
  for (unsigned e = 0; e < 2; ++e) {
    tiles[e].run();
    EXPECT_EQ(tiles[e].tc.error(), "");
    for (unsigned i = 0; i < m * n; ++i)
      ASSERT_EQ(tiles[e].get_f32(0x30000 + i * 4), static_cast<float>(want[e][i]))
          << "element " << i << " scales " << e;
    EXPECT_EQ(tiles[e].tc.stats().macs_fp8, std::uint64_t(m) * n * k);
  }
}

TEST(TensorCore, BlockScaledCommandsCheckFormatAndScaleRanges) {
  Tile t;
  GemmCommand c;
  c.shape = {8, 128, 128, num::Format::BF16};
  c.a = 0x0, c.b = 0x10000, c.c = 0x20000;
  c.block_scaled = true;
  c.id = 1;
  t.tc.submit(c);
  t.run();
  EXPECT_EQ(t.tc.error_code(), CommandError::format) << t.tc.error();
  c.id = 2;
  c.shape.input = num::Format::E4M3;
  c.sa = 0x1ffff0;  // 8 rows x 1 group x 4 bytes runs past the end
  t.tc.submit(c);
  t.run();
  EXPECT_EQ(t.tc.error_code(), CommandError::range);
  EXPECT_NE(t.tc.error().find("A's scales"), std::string::npos) << t.tc.error();
  c.id = 3;
  c.sa = 0x30000;
  c.group = 96;
  t.tc.submit(c);
  t.run();
  EXPECT_EQ(t.tc.error_code(), CommandError::shape);
  EXPECT_NE(t.tc.error().find("group 96"), std::string::npos) << t.tc.error();
}

// Its command registers (the tile includes them): the generic checks of every register block.
TEST(TensorCore, CommandRegistersCAndCppViewsAgree) {
  tessera::testing::expect_c_view_matches(tessera::regs::tensor::kBlock, tensor_regs_cview, tensor_fields_cview,
                                          tensor_values_cview);
}
