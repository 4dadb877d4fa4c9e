// The tensor core's systolic array RTL against the model: the same tiles
// (directed corner cases, then seeded random ones) go through the
// Verilated block and through the model's arithmetic (num::gemm: INT32
// wrapping sums, or FP32 sums in K order rounded at each addition); the
// results must match bit for bit (NaN matches NaN), and a mismatch names
// the first differing operation with its inputs and both results. The
// block's cycles per tile are compared with the model's timing formula.
#define SC_INCLUDE_DYNAMIC_PROCESSES  // sc_spawn
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#include "engines/num/accumulate.hpp"
#include "engines/num/formats.hpp"
#include "rtl/systolic_rtl.hpp"
#include "engines/tensor/systolic.hpp"

using tessera::rtl::SystolicRtl;
namespace num = tessera::num;

namespace {

constexpr unsigned R = SystolicRtl::kRows, C = SystolicRtl::kCols;

float bits_float(std::uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
std::uint32_t float_bits(float f) {
  std::uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

// The model's answer for a tile.
std::vector<std::uint32_t> model(const SystolicRtl::Tile& t) {
  const bool fp = t.mode == SystolicRtl::Mode::e4m3;
  const num::Format f = fp ? num::Format::E4M3 : num::Format::INT8;
  std::vector<double> a(t.a.size()), w(t.weights.size()), c(t.c_in.size());
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = num::decode(f, t.a[i]);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = num::decode(f, t.weights[i]);
  for (std::size_t i = 0; i < c.size(); ++i)
    c[i] = fp ? static_cast<double>(bits_float(t.c_in[i])) : static_cast<double>(static_cast<std::int32_t>(t.c_in[i]));
  num::Accumulation acc;
  acc.kind = fp ? num::Accumulation::Kind::fp32 : num::Accumulation::Kind::int32;
  num::gemm(a, w, c, t.m, C, R, acc, true);
  std::vector<std::uint32_t> out(c.size());
  for (std::size_t i = 0; i < c.size(); ++i)
    out[i] = fp ? float_bits(static_cast<float>(c[i])) : static_cast<std::uint32_t>(static_cast<std::int32_t>(c[i]));
  return out;
}

bool same(bool fp, std::uint32_t x, std::uint32_t y) {
  if (fp && std::isnan(bits_float(x)) && std::isnan(bits_float(y))) return true;
  return x == y;
}

// "" when the RTL and the model agree; else the first differing operation.
std::string compare(const SystolicRtl::Tile& t, const std::vector<std::uint32_t>& rtl, const std::string& what) {
  const std::vector<std::uint32_t> ref = model(t);
  const bool fp = t.mode == SystolicRtl::Mode::e4m3;
  for (unsigned i = 0; i < t.m; ++i)
    for (unsigned c = 0; c < C; ++c) {
      const std::size_t at = std::size_t{i} * C + c;
      if (same(fp, rtl[at], ref[at])) continue;
      std::ostringstream s;
      s << what << ": " << (fp ? "E4M3" : "INT8") << " row " << i << " column " << c << ": a =";
      for (unsigned r = 0; r < R; ++r) s << " 0x" << std::hex << unsigned{t.a[i * R + r]};
      s << ", weights =";
      for (unsigned r = 0; r < R; ++r) s << " 0x" << std::hex << unsigned{t.weights[r * C + c]};
      s << ", c_in = 0x" << std::hex << t.c_in[at] << ": RTL 0x" << rtl[at] << ", model 0x" << ref[at];
      if (fp) s << " (" << bits_float(rtl[at]) << " vs " << bits_float(ref[at]) << ")";
      return s.str();
    }
  return "";
}

SystolicRtl::Tile random_tile(std::mt19937_64& rng, SystolicRtl::Mode mode, unsigned m) {
  SystolicRtl::Tile t;
  t.mode = mode;
  t.m = m;
  t.weights.resize(R * C);
  t.a.resize(std::size_t{m} * R);
  t.c_in.resize(std::size_t{m} * C);
  const bool fp = mode == SystolicRtl::Mode::e4m3;
  auto code = [&] {
    auto x = static_cast<std::uint8_t>(rng());
    if (fp && (x & 0x7f) == 0x7f && rng() % 8) x ^= 1;  // NaN codes rarely
    return x;
  };
  for (auto& w : t.weights) w = code();
  for (auto& a : t.a) a = code();
  for (auto& c : t.c_in) {
    if (!fp) c = static_cast<std::uint32_t>(rng());
    else {
      // Partial sums of earlier K slices: FP32 values of a product's scale, zero, or tiny.
      const unsigned kind = rng() % 4;
      const float v = kind == 0 ? 0.0f
                    : kind == 1 ? static_cast<float>(std::ldexp(static_cast<double>(rng() % 2000000) - 1e6, -int(rng() % 20)))
                    : kind == 2 ? static_cast<float>(std::ldexp(static_cast<double>(rng() % 256) - 128, -140))  // subnormal
                                : static_cast<float>(num::decode(num::Format::E4M3, code()));
      c = float_bits(v);
    }
  }
  return t;
}

}  // namespace

TEST(Cosim, SystolicArrayMatchesTheModelBitForBit) {
  SystolicRtl array("array", sc_core::sc_time(1.0 / 1.5, sc_core::SC_NS));
  std::vector<std::string> mismatches;
  std::uint64_t ops = 0;
  std::vector<std::pair<unsigned, std::uint64_t>> cycles;  // rows, cycles
  sc_core::sc_spawn([&] {
    auto check = [&](const SystolicRtl::Tile& t, const std::string& what, unsigned stall = 0) {
      const SystolicRtl::Result r = array.run(t, stall);
      ops += std::uint64_t{t.m} * R * C;
      if (const std::string e = compare(t, r.c, what); !e.empty() && mismatches.size() < 5) mismatches.push_back(e);
      if (!stall) cycles.emplace_back(t.m, r.cycles);
    };
    // Directed: extremes of both formats, zeros, cancellation, NaN, subnormal E4M3.
    for (const auto mode : {SystolicRtl::Mode::int8, SystolicRtl::Mode::e4m3}) {
      const bool fp = mode == SystolicRtl::Mode::e4m3;
      const std::uint8_t corner[] = {0x00, 0x80, 0x01, 0x81, 0x7e, 0xfe, 0x7f, 0xff, 0x08, 0x07, 0x38, 0xb8};
      for (std::uint8_t w : corner)
        for (std::uint8_t x : corner) {
          SystolicRtl::Tile t;
          t.mode = mode;
          t.m = 2;
          t.weights.assign(R * C, w);
          t.a.assign(2 * R, x);
          for (unsigned r = 0; r < R; r += 2) t.a[R + r] = static_cast<std::uint8_t>(x ^ 0x80);  // +x and -x: cancels
          t.c_in.assign(2 * C, fp ? float_bits(0.0f) : 0u);
          t.c_in[C] = fp ? float_bits(-0.0f) : 0x7fffffffu;
          check(t, "corner w=" + std::to_string(w) + " a=" + std::to_string(x));
        }
    }
    // Seeded random tiles, with and without back-pressure.
    std::mt19937_64 rng(20261130);
    for (unsigned i = 0; i < 400; ++i) {
      const auto mode = i % 2 ? SystolicRtl::Mode::e4m3 : SystolicRtl::Mode::int8;
      const unsigned m = 1 + static_cast<unsigned>(rng() % 32);
      check(random_tile(rng, mode, m), "random tile " + std::to_string(i), i % 5 == 4 ? 3 : 0);
    }
    sc_core::sc_stop();
  });
  sc_core::sc_start();
  for (const auto& m : mismatches) ADD_FAILURE() << m;
  EXPECT_GT(ops, 100000u);
  // Cycles of one tile against the model's weight-stationary formula.
  tessera::tensor::ArrayConfig cfg;
  cfg.rows = R, cfg.cols = C;
  double worst = 0;
  for (const auto& [m, c] : cycles) {
    const auto t = tessera::tensor::timing(cfg, {m, C, R, num::Format::INT8}, 1);
    worst = std::max(worst, std::abs(static_cast<double>(c) - static_cast<double>(t.cycles)) / static_cast<double>(t.cycles));
  }
  std::printf("%llu MAC results compared over %zu tiles; cycles per tile against the model's: worst difference %.1f%%\n",
              static_cast<unsigned long long>(ops), cycles.size(), 100 * worst);
  EXPECT_LE(worst, 0.05);
}

TEST(Cosim, AMismatchNamesTheOperationItsInputsAndBothResults) {
  SystolicRtl::Tile t;
  t.mode = SystolicRtl::Mode::e4m3;
  t.m = 1;
  t.weights.assign(R * C, 0x38);  // 1.0
  t.a.assign(R, 0x38);
  t.c_in.assign(C, float_bits(0.0f));
  std::vector<std::uint32_t> wrong = model(t);
  EXPECT_EQ(bits_float(wrong[3]), 8.0f);
  wrong[3] ^= 1;
  const std::string e = compare(t, wrong, "check");
  EXPECT_NE(e.find("check: E4M3 row 0 column 3: a = 0x38"), std::string::npos) << e;
  EXPECT_NE(e.find("RTL 0x41000001, model 0x41000000"), std::string::npos) << e;
}

TEST(Cosim, TheArrayWritesItsSignalsToAnFstFile) {
  const std::string file = "Cosim.array.fst";
  std::remove(file.c_str());
  {
    SystolicRtl array("array", sc_core::sc_time(1.0 / 1.5, sc_core::SC_NS), file);
    sc_core::sc_spawn([&] {
      std::mt19937_64 rng(1);
      array.run(random_tile(rng, SystolicRtl::Mode::e4m3, 4));
      sc_core::sc_stop();
    });
    sc_core::sc_start();
  }
  std::ifstream in(file, std::ios::binary);
  ASSERT_TRUE(in.good());
  std::string head(64, '\0');
  in.read(head.data(), 64);
  EXPECT_EQ(head[0], 0) << "an FST file starts with its header block";
  EXPECT_GT(in.gcount(), 32);
}
