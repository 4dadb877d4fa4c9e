// The systolic array's timing formula against a cycle-by-cycle model of
// the array moving real data, and the utilisation figures it implies.
#include <gtest/gtest.h>

#include <random>

#include "engines/tensor/systolic.hpp"

using namespace tessera;
using namespace tessera::tensor;

namespace {
// A weight-stationary R x C array simulated cycle by cycle. Each row of A
// issued at cycle s puts its element r into array row r at s + r; data
// moves one element right and partial sums one element down per cycle, each
// tagged with its tile so an element uses that tile's weights (the shadow
// buffer switching behind the wavefront). The weight port loads one row per
// cycle into the shadow buffer, which is free once the previous tile is
// active. Returns the cycle after the last result left the array.
struct Tagged {
  bool valid = false;
  double value = 0;
  unsigned tile = 0, m = 0;
};
std::uint64_t simulate_ws(unsigned R, unsigned C, unsigned M, unsigned N, unsigned K, const std::vector<double>& a,
                          const std::vector<double>& b, std::vector<double>& out) {
  const unsigned kt = (K + R - 1) / R, nt = (N + C - 1) / C, tiles = kt * nt;
  out.assign(static_cast<std::size_t>(M) * N, 0.0);
  auto weight = [&](unsigned tile, unsigned r, unsigned c) {
    const unsigned k = (tile / nt) * R + r, n = (tile % nt) * C + c;
    return k < K && n < N ? b[k * N + n] : 0.0;
  };
  // Issue schedule: tile j's rows at s_j .. s_j + M - 1.
  std::vector<std::uint64_t> start(tiles);
  std::uint64_t load_done = R, port_free = 0;
  for (unsigned j = 0; j < tiles; ++j) {
    start[j] = std::max(port_free, load_done);
    port_free = start[j] + M;
    load_done = start[j] + R;  // the next tile's load starts when this one is active
  }
  std::vector<Tagged> areg(R * C), preg(R * C), anext(R * C), pnext(R * C);
  std::uint64_t last = 0, done = 0, expected = static_cast<std::uint64_t>(tiles) * M * C;
  for (std::uint64_t t = 0; done < expected; ++t) {
    for (unsigned r = 0; r < R; ++r)
      for (unsigned c = 0; c < C; ++c) {
        Tagged in;
        if (c == 0) {
          // Which row of which tile enters array row r now?
          for (unsigned j = 0; j < tiles; ++j)
            if (t >= start[j] + r && t < start[j] + r + M) {
              const unsigned m = static_cast<unsigned>(t - start[j] - r), k = (j / nt) * R + r;
              in = {true, k < K ? a[m * K + k] : 0.0, j, m};
            }
        } else {
          in = areg[r * C + c - 1];
        }
        Tagged p = r == 0 ? Tagged{in.valid, 0.0, in.tile, in.m} : preg[(r - 1) * C + c];
        if (in.valid) {
          EXPECT_TRUE(p.valid && p.tile == in.tile && p.m == in.m) << "data and partial sums meet in step";
          p.value += in.value * weight(in.tile, r, c);
        }
        anext[r * C + c] = in;
        pnext[r * C + c] = p;
      }
    areg.swap(anext);
    preg.swap(pnext);
    for (unsigned c = 0; c < C; ++c) {
      const Tagged& p = preg[(R - 1) * C + c];
      if (!p.valid) continue;
      const unsigned n = (p.tile % nt) * C + c;
      if (n < N) out[p.m * N + n] += p.value;
      ++done;
      last = t;
      preg[(R - 1) * C + c].valid = false;  // leaves the array
    }
  }
  // The row's results go out together through the output register (the
  // deskew's last stage) and are handed over in the next cycle, as the RTL does.
  return last + 3;
}

// An output-stationary R x C array simulated cycle by cycle. Element (r, c)
// holds C[i0 + r][j0 + c] of its tile in one of two accumulators. Tile j's
// operands enter at s_j = j max(K, R): A[i0 + r][k] into row r at s_j + k + r,
// moving right; B[k][j0 + c] into column c at s_j + k + c, moving down; so
// they meet in (r, c) at s_j + k + r + c. After its last product an element
// writes its result on its column's output bus in the next cycle and
// switches accumulators; a bus takes one value per cycle (checked). Returns
// the cycle after the last result left on a bus.
std::uint64_t simulate_os(unsigned R, unsigned C, unsigned M, unsigned N, unsigned K, const std::vector<double>& a,
                          const std::vector<double>& b, std::vector<double>& out) {
  const unsigned mt = (M + R - 1) / R, nt = (N + C - 1) / C, tiles = mt * nt;
  const std::uint64_t period = std::max(K, R);
  out.assign(static_cast<std::size_t>(M) * N, 0.0);
  struct Operand {
    bool valid = false;
    double value = 0;
    unsigned tile = 0, k = 0;
  };
  std::vector<Operand> areg(R * C), breg(R * C), anext(R * C), bnext(R * C);
  std::vector<double> acc(2 * R * C, 0.0);
  struct Write {
    std::uint64_t cycle;
    unsigned tile, r, c;
  };
  std::vector<Write> pending;
  std::vector<std::uint64_t> bus_busy(C, ~0ull);
  std::uint64_t last = 0;
  std::size_t written = 0;
  const std::size_t expected = static_cast<std::size_t>(tiles) * R * C;
  for (std::uint64_t t = 0; written < expected; ++t) {
    // Results finished last cycle go out on their column's bus.
    for (auto it = pending.begin(); it != pending.end();) {
      if (it->cycle != t) {
        ++it;
        continue;
      }
      EXPECT_NE(bus_busy[it->c], t) << "two results on column " << it->c << "'s bus in cycle " << t;
      bus_busy[it->c] = t;
      const unsigned i = (it->tile / nt) * R + it->r, j = (it->tile % nt) * C + it->c;
      double& slot = acc[(it->tile % 2) * R * C + it->r * C + it->c];
      if (i < M && j < N) out[i * N + j] = slot;
      slot = 0;
      ++written;
      last = t;
      it = pending.erase(it);
    }
    for (unsigned r = 0; r < R; ++r)
      for (unsigned c = 0; c < C; ++c) {
        Operand x, y;
        if (c == 0) {
          for (unsigned j = 0; j < tiles; ++j) {
            const std::uint64_t s = j * period;
            if (t >= s + r && t < s + r + K) {
              const unsigned k = static_cast<unsigned>(t - s - r), i = (j / nt) * R + r;
              x = {true, i < M ? a[i * K + k] : 0.0, j, k};
            }
          }
        } else {
          x = areg[r * C + c - 1];
        }
        if (r == 0) {
          for (unsigned j = 0; j < tiles; ++j) {
            const std::uint64_t s = j * period;
            if (t >= s + c && t < s + c + K) {
              const unsigned k = static_cast<unsigned>(t - s - c), n = (j % nt) * C + c;
              y = {true, n < N ? b[k * N + n] : 0.0, j, k};
            }
          }
        } else {
          y = breg[(r - 1) * C + c];
        }
        EXPECT_EQ(x.valid, y.valid) << "operands meet in step at (" << r << ", " << c << ") in cycle " << t;
        if (x.valid && y.valid) {
          EXPECT_TRUE(x.tile == y.tile && x.k == y.k);
          acc[(x.tile % 2) * R * C + r * C + c] += x.value * y.value;
          if (x.k == K - 1) pending.push_back({t + 1, x.tile, r, c});
        }
        anext[r * C + c] = x;
        bnext[r * C + c] = y;
      }
    areg.swap(anext);
    breg.swap(bnext);
  }
  return last + 1;
}
}  // namespace

namespace {
using Simulator = std::uint64_t (*)(unsigned, unsigned, unsigned, unsigned, unsigned, const std::vector<double>&,
                                    const std::vector<double>&, std::vector<double>&);
// A 4 x 3 array, every shape of the lists: the formula's cycles equal the
// cycle model's, and the model's results equal the float64 product.
void expect_formula_matches(Dataflow d, Simulator simulate, unsigned seed, std::initializer_list<unsigned> ms,
                            std::initializer_list<unsigned> ks) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> v(-4, 4);
  const unsigned R = 4, C = 3;
  ArrayConfig cfg;
  cfg.rows = R;
  cfg.cols = C;
  cfg.dataflow = d;
  for (unsigned M : ms)
    for (unsigned K : ks)
      for (unsigned N : {1u, 3u, 5u}) {
        std::vector<double> a(M * K), b(K * N), c;
        for (auto& x : a) x = v(rng);
        for (auto& x : b) x = v(rng);
        const std::uint64_t cycles = simulate(R, C, M, N, K, a, b, c);
        EXPECT_EQ(timing(cfg, {M, N, K, num::Format::BF16}).cycles, cycles) << M << "x" << N << "x" << K;
        for (unsigned i = 0; i < M; ++i)
          for (unsigned j = 0; j < N; ++j) {
            double ref = 0;
            for (unsigned p = 0; p < K; ++p) ref += a[i * K + p] * b[p * N + j];
            ASSERT_EQ(c[i * N + j], ref) << "C[" << i << "][" << j << "] of " << M << "x" << N << "x" << K;
          }
      }
}
}  // namespace

TEST(Systolic, OutputStationaryFormulaMatchesTheCycleModel) {
  expect_formula_matches(Dataflow::output_stationary, simulate_os, 4, {1u, 4u, 6u, 9u}, {1u, 3u, 4u, 7u});
}

TEST(Systolic, WeightStationaryFormulaMatchesTheCycleModel) {
  expect_formula_matches(Dataflow::weight_stationary, simulate_ws, 3, {1u, 3u, 4u, 7u}, {1u, 4u, 5u, 9u});
}

TEST(Systolic, LargeGemmsReachNinetyPercentOfPeak) {
  for (Dataflow d : {Dataflow::weight_stationary, Dataflow::output_stationary}) {
    ArrayConfig cfg;
    cfg.dataflow = d;
    for (num::Format f : {num::Format::BF16, num::Format::E4M3}) {
      const GemmTiming t = timing(cfg, {4096, 4096, 4096, f});
      EXPECT_GE(t.utilisation, 0.9) << num::name(f);
      const double tflops = 2.0 * static_cast<double>(t.macs) / (static_cast<double>(t.cycles) / cfg.clock_hz) / 1e12;
      std::printf("%s %s 4096^3: %.4f of peak, %.2f TFLOP/s\n",
                  d == Dataflow::weight_stationary ? "WS" : "OS", num::name(f), t.utilisation, tflops);
    }
  }
  // Peak: 64 x 64 x 2 flops x 1.5 GHz = 12.3 TFLOP/s BF16; FP8 twice that.
  ArrayConfig cfg;
  EXPECT_EQ(peak_macs(cfg, num::Format::BF16) * 2, peak_macs(cfg, num::Format::E4M3));
  const double bf16 = static_cast<double>(timing(cfg, {4096, 4096, 4096, num::Format::BF16}).cycles);
  const double fp8 = static_cast<double>(timing(cfg, {4096, 4096, 4096, num::Format::E4M3}).cycles);
  EXPECT_NEAR(bf16 / fp8, 2.0, 0.01);
}

TEST(Systolic, UnderfilledShapesAndSlowOperandsCostWhatThePredictionSays) {
  ArrayConfig cfg;  // 64 x 64
  // K = 16 fills a quarter of the rows; N = 64 all columns; long M hides fill and drain.
  const GemmTiming quarter = timing(cfg, {1 << 16, 64, 16, num::Format::BF16});
  EXPECT_NEAR(quarter.utilisation, 0.25, 0.001);
  // Small M: streaming cannot hide the weight loads (max(M, R) per tile).
  const GemmTiming thin = timing(cfg, {8, 4096, 4096, num::Format::BF16});
  EXPECT_NEAR(thin.utilisation, 8.0 / 64, 0.001) << "decode-like GEMV-ish shapes starve the array";
  // A bank-conflicting A layout that makes each row wave cost 4 cycles: a
  // long GEMM slows by that factor.
  const GemmTiming clean = timing(cfg, {1 << 14, 256, 256, num::Format::BF16});
  const GemmTiming conflicted = timing(cfg, {1 << 14, 256, 256, num::Format::BF16}, 4);
  EXPECT_NEAR(static_cast<double>(conflicted.cycles) / static_cast<double>(clean.cycles), 4.0, 0.01);
}

TEST(Systolic, ShapesTheArrayCannotRunAreNamed) {
  ArrayConfig cfg;
  EXPECT_EQ(check(cfg, {64, 64, 64, num::Format::BF16}), "");
  EXPECT_NE(check(cfg, {64, 64, 64, num::Format::FP32}).find("fp32"), std::string::npos);
  EXPECT_NE(check(cfg, {0, 64, 64, num::Format::BF16}).find("m=0"), std::string::npos);
  EXPECT_EQ(timing(cfg, {0, 64, 64, num::Format::BF16}).cycles, 0u);
}
