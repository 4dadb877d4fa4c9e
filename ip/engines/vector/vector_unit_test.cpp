// The vector unit engine: every op's result equals the numerics library's
// bit for bit, the special-function unit's rate shows in the time, bad
// commands are reported and survived.
#include <gtest/gtest.h>

#include "common/testing/reg_checks.hpp"
#include "vector_regs.hpp"
#include "common/testing/random.hpp"

#include <cstring>
#include <random>

#include "common/testing/initiator.hpp"
#include "engines/num/block_scale.hpp"
#include "engines/num/vector_ops.hpp"
#include "engines/vector/vector_unit.hpp"

using namespace tessera;
using namespace tessera::vector;
using tessera::testing::random_floats;

namespace {
struct Bench {
  scratchpad::Scratchpad spm{"spm", scratchpad::Scratchpad::Config{}};
  VectorUnit vu{"vu", spm, VectorConfig{}};
  tessera::testing::TestInitiator noc{"noc"};
  IrqIn irq;
  Bench() {
    noc.socket.bind(spm.mem_target);
    vu.irq.bind(irq);
  }
  void put(std::uint64_t at, const std::vector<float>& v) { std::memcpy(spm.data() + at, v.data(), v.size() * 4); }
  std::vector<float> get(std::uint64_t at, std::size_t n) {
    std::vector<float> v(n);
    std::memcpy(v.data(), spm.data() + at, n * 4);
    return v;
  }
  sc_core::sc_time run() {
    const sc_core::sc_time t0 = sc_core::sc_time_stamp();
    sc_core::sc_start(sc_core::SC_ZERO_TIME);
    while (vu.busy()) sc_core::sc_start(sc_core::sc_time(10, sc_core::SC_NS));
    return sc_core::sc_time_stamp() - t0;
  }
};
bool same_bits(float a, float b) { return std::memcmp(&a, &b, 4) == 0; }
}  // namespace

TEST(VectorUnit, EveryOpMatchesTheNumericsBitForBit) {
  Bench b;
  namespace vec = num::vec;
  const unsigned rows = 3, cols = 96, e = rows * cols;
  const auto x = random_floats(e, 1, -4, 4), y = random_floats(e, 2, -4, 4), z = random_floats(e, 3, -1, 1), pos = random_floats(e, 4, 0.1f, 9);
  const auto w = random_floats(cols, 5, 0.5f, 1.5f), bias = random_floats(cols, 6, -0.5f, 0.5f);
  b.put(0x0, x), b.put(0x10000, y), b.put(0x20000, z), b.put(0x30000, pos), b.put(0x40000, w), b.put(0x41000, bias);
  std::uint32_t id = 0;
  struct Case {
    Op op;
    std::uint64_t src0;
  };
  const Case cases[] = {{Op::add, 0}, {Op::sub, 0}, {Op::mul, 0}, {Op::max, 0}, {Op::min, 0}, {Op::fma, 0},
                        {Op::abs, 0}, {Op::neg, 0}, {Op::relu, 0}, {Op::relu2, 0}, {Op::exp, 0}, {Op::log, 0x30000},
                        {Op::rsqrt, 0x30000}, {Op::recip, 0x30000}, {Op::tanh, 0}, {Op::sigmoid, 0}, {Op::silu, 0},
                        {Op::gelu, 0}, {Op::swiglu, 0}, {Op::softmax, 0}, {Op::rmsnorm, 0}, {Op::layernorm, 0},
                        {Op::rope, 0}, {Op::sum, 0}, {Op::rmax, 0}, {Op::argmax, 0}, {Op::topk, 0}};
  for (const Case& cs : cases) {
    VectorCommand c;
    c.id = ++id;
    c.op = cs.op;
    c.rows = rows, c.cols = cols;
    c.src0 = cs.src0;
    c.src1 = (cs.op == Op::rmsnorm || cs.op == Op::layernorm) ? 0x40000 : 0x10000;
    c.src2 = cs.op == Op::layernorm ? 0x41000 : 0x20000;
    c.dst = 0x100000;
    c.k = 5;
    c.position = 17;
    std::memset(b.spm.data() + c.dst, 0xee, e * 8);
    b.vu.submit(c);
    b.run();
    ASSERT_EQ(b.vu.error(), "") << name(cs.op);
    // The reference, straight from the numerics library.
    const std::vector<float>& in = cs.src0 ? pos : x;
    std::vector<float> want;
    if (cs.op == Op::softmax || cs.op == Op::rmsnorm || cs.op == Op::layernorm || cs.op == Op::rope) {
      want = in;
      for (unsigned r = 0; r < rows; ++r) {
        float* row = want.data() + r * cols;
        if (cs.op == Op::softmax) vec::softmax(row, cols);
        if (cs.op == Op::rmsnorm) vec::rmsnorm(row, w.data(), cols, 1e-6f);
        if (cs.op == Op::layernorm) vec::layernorm(row, w.data(), bias.data(), cols, 1e-6f);
        if (cs.op == Op::rope) vec::rope(row, cols, 17);
      }
    } else if (cs.op == Op::sum || cs.op == Op::rmax || cs.op == Op::argmax || cs.op == Op::topk) {
      for (unsigned r = 0; r < rows; ++r) {
        const float* row = in.data() + r * cols;
        if (cs.op == Op::sum) want.push_back(vec::sum(row, cols));
        if (cs.op == Op::rmax) want.push_back(*std::max_element(row, row + cols));
        if (cs.op == Op::argmax) {
          const std::uint32_t i = vec::argmax(row, cols);
          float f;
          std::memcpy(&f, &i, 4);
          want.push_back(f);
        }
        if (cs.op == Op::topk) {
          float v[5];
          unsigned ix[5];
          vec::topk(row, cols, 5, v, ix);
          want.insert(want.end(), v, v + 5);
        }
      }
      if (cs.op == Op::topk) {
        const auto idx = b.get(0x100000 + rows * 5 * 4, rows * 5);
        std::uint32_t first;
        std::memcpy(&first, &idx[0], 4);
        EXPECT_EQ(first, vec::argmax(x.data(), cols)) << "the largest's index comes first";
      }
    } else {
      for (unsigned i = 0; i < e; ++i) {
        const float a = in[i], c2 = y[i];
        switch (cs.op) {
          case Op::add: want.push_back(a + c2); break;
          case Op::sub: want.push_back(a - c2); break;
          case Op::mul: want.push_back(a * c2); break;
          case Op::max: want.push_back(std::max(a, c2)); break;
          case Op::min: want.push_back(std::min(a, c2)); break;
          case Op::fma: want.push_back(std::fma(a, c2, z[i])); break;
          case Op::abs: want.push_back(std::fabs(a)); break;
          case Op::neg: want.push_back(-a); break;
          case Op::relu: want.push_back(vec::relu(a)); break;
          case Op::relu2: want.push_back(vec::relu2(a)); break;
          case Op::exp: want.push_back(vec::exp(a)); break;
          case Op::log: want.push_back(vec::log(a)); break;
          case Op::rsqrt: want.push_back(vec::rsqrt(a)); break;
          case Op::recip: want.push_back(vec::recip(a)); break;
          case Op::tanh: want.push_back(vec::tanh(a)); break;
          case Op::sigmoid: want.push_back(vec::sigmoid(a)); break;
          case Op::silu: want.push_back(vec::silu(a)); break;
          case Op::gelu: want.push_back(vec::gelu(a)); break;
          default: want.push_back(vec::swiglu(a, c2)); break;
        }
      }
    }
    const auto got = b.get(0x100000, want.size());
    for (std::size_t i = 0; i < want.size(); ++i)
      ASSERT_TRUE(same_bits(got[i], want[i])) << name(cs.op) << " element " << i;
  }
  EXPECT_EQ(b.vu.completed(), id);
  EXPECT_EQ(b.vu.stats().row_ops, 4u);
  EXPECT_EQ(b.vu.stats().reductions, 4u);
}

TEST(VectorUnit, SpecialFunctionsRunAtTheirOwnRate) {
  // 64 lanes; the special-function unit at 1/16 of that: exp over 64 K
  // elements takes 16 times the lane cycles an add does, plus the pipeline.
  const VectorConfig cfg;
  VectorCommand add, exp;
  add.op = Op::add, exp.op = Op::exp;
  add.rows = exp.rows = 1;
  add.cols = exp.cols = 65536;
  const VectorTiming ta = timing(cfg, add), te = timing(cfg, exp);
  EXPECT_EQ(ta.cycles, 65536u / 64 + 8);
  EXPECT_EQ(te.cycles, 65536u / 64 + 65536u * 16 / 64 + 8);
  // SwiGLU costs its exp; ReLU^2 does not.
  VectorCommand swiglu = exp, relu2 = exp;
  swiglu.op = Op::swiglu, relu2.op = Op::relu2;
  EXPECT_GT(timing(cfg, swiglu).cycles, 12 * timing(cfg, relu2).cycles);
  // And the engine takes that time.
  Bench b;
  b.vu.submit(exp);
  const sc_core::sc_time took = b.run();
  const sc_core::sc_time want = sc_core::sc_time(1.0 / 1.5e9, sc_core::SC_SEC) * static_cast<double>(te.cycles);
  EXPECT_GE(took, want);
  EXPECT_LT(took, want + sc_core::sc_time(10, sc_core::SC_NS));
  EXPECT_EQ(b.vu.stats().special_ops, 65536u);
}

TEST(VectorUnit, BadCommandsAreReportedAndSurvived) {
  Bench b;
  VectorCommand c;
  c.id = 5;
  c.op = Op::softmax;
  c.rows = 4, c.cols = 1024;
  c.dst = 0x1ff000;  // 16 KiB of output from 4 KiB before the end
  b.vu.submit(c);
  b.run();
  EXPECT_TRUE(b.irq.level());
  EXPECT_EQ(b.vu.error_id(), 5u);
  EXPECT_NE(b.vu.error().find("dst"), std::string::npos) << b.vu.error();
  c.id = 6, c.dst = 0x100000, c.op = Op::topk, c.k = 9;
  b.vu.submit(c);
  b.run();
  EXPECT_NE(b.vu.error().find("k=9"), std::string::npos) << b.vu.error();
  c.id = 7, c.op = static_cast<Op>(200);
  b.vu.submit(c);
  b.run();
  EXPECT_NE(b.vu.error().find("unknown vector op 200"), std::string::npos) << b.vu.error();
  b.vu.reset();
  c.id = 8, c.op = Op::relu;
  b.vu.submit(c);
  b.run();
  EXPECT_EQ(b.vu.error(), "");
  EXPECT_EQ(b.vu.completed(), 1u);
  EXPECT_EQ(b.vu.stats().errors, 3u);
}

TEST(VectorUnit, CastsBetweenFormatsWithAndWithoutGroupScales) {
  Bench b;
  const unsigned rows = 2, cols = 256, e = rows * cols;
  std::vector<float> x = random_floats(e, 7, -3, 3);
  for (unsigned i = 0; i < e; i += 97) x[i] *= 500;  // outliers the group scales must absorb
  b.put(0x0, x);
  // FP32 -> E4M3 in 1x128 groups, scales at aux; and back.
  VectorCommand to;
  to.id = 1, to.op = Op::cast_to, to.rows = rows, to.cols = cols;
  to.format = num::Format::E4M3, to.group = 128;
  to.src0 = 0x0, to.dst = 0x10000, to.aux = 0x11000;
  b.vu.submit(to);
  VectorCommand from = to;
  from.id = 2, from.op = Op::cast_from, from.src0 = 0x10000, from.dst = 0x20000;
  b.vu.submit(from);
  // FP32 -> BF16 unscaled.
  VectorCommand bf = to;
  bf.id = 3, bf.format = num::Format::BF16, bf.group = 0, bf.dst = 0x30000;
  b.vu.submit(bf);
  b.run();
  ASSERT_EQ(b.vu.error(), "");
  const num::BlockQuantized q = num::block_quantize(x.data(), rows, cols, num::Format::E4M3, num::ScaleFormat::FP32, 1, 128);
  EXPECT_EQ(0, std::memcmp(b.spm.data() + 0x10000, q.codes.data(), e)) << "codes as numerics quantises them";
  EXPECT_EQ(b.get(0x11000, q.scales.size()), q.scales);
  const auto back = b.get(0x20000, e);
  for (unsigned i = 0; i < e; ++i)
    ASSERT_EQ(back[i], static_cast<float>(q.value(i / cols, i % cols))) << "dequantised element " << i;
  for (unsigned i = 0; i < e; ++i) {
    std::uint16_t code;
    std::memcpy(&code, b.spm.data() + 0x30000 + 2 * i, 2);
    ASSERT_EQ(code, num::encode(num::Format::BF16, x[i])) << i;
  }
  EXPECT_EQ(b.vu.stats().casts, 3u);
  // Scaling an FP32 target makes no sense and is refused.
  VectorCommand bad = to;
  bad.id = 4, bad.format = num::Format::FP32;
  b.vu.submit(bad);
  b.run();
  EXPECT_NE(b.vu.error().find("narrow format"), std::string::npos) << b.vu.error();
}

TEST(VectorUnit, StochasticCastsAreUnbiasedAndSeededAndE8m0ScalesRoundTrip) {
  Bench b;
  // 1 + 2^-9 lies a quarter of a BF16 step above 1: nearest-even always
  // gives 1, stochastic rounding gives 1 + 2^-7 a quarter of the time.
  const unsigned n = 4096;
  b.put(0, std::vector<float>(n, 1.0f + 0x1p-9f));
  auto cast = [&](std::uint32_t id, std::uint64_t dst, bool stochastic, std::uint64_t seed) {
    VectorCommand c;
    c.id = id, c.op = Op::cast_to, c.cols = n, c.src0 = 0, c.dst = dst, c.format = num::Format::BF16;
    c.stochastic = stochastic, c.seed = seed;
    b.vu.submit(c);
  };
  cast(1, 0x10000, true, 5);
  cast(2, 0x20000, true, 5);
  cast(3, 0x30000, true, 6);
  cast(4, 0x40000, false, 0);
  b.run();
  ASSERT_EQ(b.vu.completed(), 4u) << b.vu.error();
  auto codes = [&](std::uint64_t at) {
    std::vector<std::uint16_t> v(n);
    std::memcpy(v.data(), b.spm.data() + at, 2 * n);
    return v;
  };
  const auto s5 = codes(0x10000), again = codes(0x20000), s6 = codes(0x30000), rne = codes(0x40000);
  EXPECT_EQ(s5, again) << "the same seed gives the same bits";
  EXPECT_NE(s5, s6) << "another seed, other bits";
  unsigned up = 0;
  for (unsigned i = 0; i < n; ++i) {
    ASSERT_TRUE(s5[i] == 0x3f80 || s5[i] == 0x3f81) << i;
    up += s5[i] == 0x3f81;
    ASSERT_EQ(rne[i], 0x3f80) << i;
  }
  EXPECT_NEAR(up / double(n), 0.25, 0.03) << "unbiased: the mean stays at 1 + 2^-9";

  // E8M0 group scales: the same codes and scales as block_quantize, and back.
  const auto x = random_floats(2 * 64, 9, -100, 100);
  b.put(0x50000, x);
  VectorCommand to;
  to.id = 5, to.op = Op::cast_to, to.rows = 2, to.cols = 64, to.src0 = 0x50000, to.dst = 0x51000;
  to.format = num::Format::E4M3, to.group = 32, to.aux = 0x52000, to.scale_format = num::ScaleFormat::E8M0;
  VectorCommand from = to;
  from.id = 6, from.op = Op::cast_from, from.src0 = 0x51000, from.dst = 0x53000;
  b.vu.submit(to);
  b.vu.submit(from);
  b.run();
  ASSERT_EQ(b.vu.completed(), 6u) << b.vu.error();
  num::Convert sat;
  sat.saturate = true;
  const num::BlockQuantized q = num::block_quantize(x.data(), 2, 64, num::Format::E4M3, num::ScaleFormat::E8M0, 1, 32, sat);
  for (unsigned i = 0; i < 128; ++i) ASSERT_EQ(b.spm.data()[0x51000 + i], q.codes[i]) << i;
  for (unsigned g = 0; g < 4; ++g) EXPECT_EQ(b.spm.data()[0x52000 + g], num::e8m0_encode(q.scales[g])) << g;
  const auto back = b.get(0x53000, 128);
  for (unsigned i = 0; i < 128; ++i) ASSERT_EQ(back[i], static_cast<float>(q.value(i / 64, i % 64))) << i;
}

TEST(VectorUnit, ScaleRowsMultipliesEachRowByItsScalar) {
  Bench b;
  const unsigned rows = 5, cols = 100;
  const auto x = random_floats(rows * cols, 21, -3, 3), g = random_floats(rows, 22, 0, 1);
  b.put(0, x), b.put(0x10000, g);
  VectorCommand c;
  c.id = 1, c.op = Op::scale_rows, c.rows = rows, c.cols = cols, c.src0 = 0, c.src1 = 0x10000, c.dst = 0x20000;
  b.vu.submit(c);
  VectorCommand bad = c;  // the scalars run past the scratchpad
  bad.id = 2, bad.src1 = (2u << 20) - 8;
  b.vu.submit(bad);
  const sc_core::sc_time t = b.run();
  EXPECT_EQ(b.vu.completed(), 1u);
  EXPECT_NE(b.vu.error().find("src1"), std::string::npos) << b.vu.error();
  const auto y = b.get(0x20000, rows * cols);
  for (unsigned r = 0; r < rows; ++r)
    for (unsigned j = 0; j < cols; ++j) ASSERT_TRUE(same_bits(y[r * cols + j], x[r * cols + j] * g[r])) << r << " " << j;
  // A lane op per element, like mul: ceil(500 / 64) + 8 pipeline cycles.
  EXPECT_EQ(b.vu.stats().busy_cycles, 8u + 8u);
  (void)t;
}

// Its command registers (the tile includes them): the generic checks of every register block.
TEST(VectorUnit, CommandRegistersCAndCppViewsAgree) {
  tessera::testing::expect_c_view_matches(tessera::regs::vector::kBlock, vector_regs_cview, vector_fields_cview,
                                          vector_values_cview);
}
