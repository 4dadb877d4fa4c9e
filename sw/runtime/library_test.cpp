// The kernel library's building blocks as tile programs run through the
// runtime (sw/kernels/program): RMSNorm, RoPE, softmax, residual add,
// argmax, the MoE router's top-k, an embedding lookup, and attention
// (causal, a block of new tokens over a KV cache), each against a float64
// host reference with the bound of its format.
#include <gtest/gtest.h>

#include "common/testing/random.hpp"

#include <cmath>
#include <random>

#include "engines/num/formats.hpp"
#include "tessera/program.hpp"
#include "tessera/runtime.hpp"

using namespace tessera;
using namespace tessera::rt;
using tessera::testing::random_floats;

namespace {
const std::string kKernels = TESSERA_KERNEL_DIR;

std::vector<std::uint16_t> to_bf16(const std::vector<float>& v, std::vector<double>* q = nullptr) {
  std::vector<std::uint16_t> out(v.size());
  if (q) q->resize(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    out[i] = static_cast<std::uint16_t>(num::encode(num::Format::BF16, v[i]));
    if (q) (*q)[i] = num::decode(num::Format::BF16, out[i]);
  }
  return out;
}

struct Lib {
  Device dev;
  Kernel program = dev.load_kernel(kKernels + "/program.elf", 0xff);
  template <class T>
  Buffer put(const std::vector<T>& v) {
    Buffer b = dev.alloc(v.size() * sizeof(T));
    dev.write(b, v.data(), v.size() * sizeof(T));
    return b;
  }
  template <class T>
  std::vector<T> get(const Buffer& b, std::size_t n) {
    std::vector<T> v(n);
    dev.read(b, v.data(), n * sizeof(T));
    return v;
  }
  void run(const TileProgram& p, std::uint32_t tile = 1) { dev.wait(dev.run(program, p, tile)); }
};
}  // namespace

TEST(KernelLibrary, NormsRotaryAndSoftmaxWithinTheirBounds) {
  Lib l;
  const unsigned T = 8, d = 256;
  const auto x = random_floats(T * d, 1, -3, 3), w = random_floats(d, 2, 0.5f, 1.5f), r = random_floats(T * d, 3, -1, 1);
  Buffer bx = l.put(x), bw = l.put(w), br = l.put(r), out = l.dev.alloc(4 * 4ull * T * d);
  const std::uint32_t X = 0x10000, W = 0x20000, RS = 0x30000, Y = 0x40000, Z = 0x50000, S = 0x60000, A = 0x70000;
  TileProgram p;
  p.load(bx.address, X, 4 * T * d).load(bw.address, W, 4 * d).load(br.address, RS, 4 * T * d).drain();
  p.vec({VecOp::rmsnorm, T, d, X, W, 0, Y});
  for (unsigned t = 0; t < T; ++t) {  // each token at its own position
    TileProgram::Vec v{VecOp::rope, 1, d, Y + 4 * t * d, 0, 0, Z + 4 * t * d};
    v.position = 3 + t;
    p.vec(v);
  }
  p.vec({VecOp::softmax, T, d, X, 0, 0, S});
  p.vec({VecOp::add, T, d, X, RS, 0, A});  // residual
  p.drain().store(Y, out.address, 4 * T * d).store(Z, out.address + 4 * T * d, 4 * T * d);
  p.store(S, out.address + 8 * T * d, 4 * T * d).store(A, out.address + 12 * T * d, 4 * T * d);
  l.run(p, 1u << 2);
  const auto got = l.get<float>(out, 4 * T * d);
  double worst[4] = {0, 0, 0, 0};
  for (unsigned t = 0; t < T; ++t) {
    double ms = 0, mx = -1e300, se = 0;
    for (unsigned j = 0; j < d; ++j) ms += double(x[t * d + j]) * x[t * d + j], mx = std::max(mx, double(x[t * d + j]));
    const double inv = 1 / std::sqrt(ms / d + 1e-6);
    for (unsigned j = 0; j < d; ++j) se += std::exp(x[t * d + j] - mx);
    std::vector<double> y(d);
    for (unsigned j = 0; j < d; ++j) y[j] = x[t * d + j] * inv * w[j];
    for (unsigned j = 0; j < d; ++j) {
      const double ey = got[t * d + j], yr = y[j];
      ASSERT_LE(std::fabs(ey - yr), 2e-6 * std::fabs(yr) + 1e-30) << "rmsnorm " << t << " " << j;
      worst[0] = std::max(worst[0], std::fabs(ey - yr) / std::fabs(yr));
      // RoPE of the chip's normalised row (its input), angle (3 + t) theta^(-i/d).
      const unsigned i = j & ~1u;
      const double ang = (3.0 + t) * std::pow(10000.0, -double(i) / d), c = std::cos(ang), s = std::sin(ang);
      const double a = got[t * d + i], b = got[t * d + i + 1];
      const double zr = j % 2 ? a * s + b * c : a * c - b * s;
      ASSERT_LE(std::fabs(got[T * d + t * d + j] - zr), 2e-6 * (1 + std::fabs(a) + std::fabs(b))) << "rope " << t << " " << j;
      worst[1] = std::max(worst[1], std::fabs(got[T * d + t * d + j] - zr));
      const double sr = std::exp(x[t * d + j] - mx) / se;
      ASSERT_LE(std::fabs(got[2 * T * d + t * d + j] - sr), 2e-6) << "softmax " << t << " " << j;
      worst[2] = std::max(worst[2], std::fabs(got[2 * T * d + t * d + j] - sr));
      ASSERT_EQ(got[3 * T * d + t * d + j], x[t * d + j] + r[t * d + j]) << "add is correctly rounded";
    }
  }
  std::printf("rmsnorm max rel %.2g, rope max abs %.2g, softmax max abs %.2g\n", worst[0], worst[1], worst[2]);
}

TEST(KernelLibrary, ArgmaxRouterTopkAndEmbeddingLookup) {
  Lib l;
  const unsigned T = 4, V = 4096, E = 8, d = 128;
  auto logits = random_floats(T * V, 4, -10, 10);
  logits[1 * V + 77] = 50, logits[2 * V + 4095] = 50, logits[3 * V + 5] = 50, logits[3 * V + 6] = 50;  // a tie: the first
  const auto router = random_floats(T * E, 5, -2, 2), table = random_floats(64 * d, 6, -1, 1);
  const auto table16 = to_bf16(table);
  Buffer bl = l.put(logits), br = l.put(router), bt = l.put(table16), out = l.dev.alloc(4096);
  Buffer emb = l.dev.alloc(2ull * T * d);
  const std::uint32_t L = 0x10000, RT = 0x50000, AM = 0x60000, TK = 0x61000;
  TileProgram p;
  p.load(bl.address, L, 4 * T * V).load(br.address, RT, 4 * T * E).drain();
  p.vec({VecOp::argmax, T, V, L, 0, 0, AM});
  TileProgram::Vec top{VecOp::topk, T, E, RT, 0, 0, TK};
  top.k = 2;
  p.vec(top).drain();
  p.store(AM, out.address, 4 * T).store(TK, out.address + 64, 4 * T * 2 * 2);
  // Embedding lookup: token ids known to the host, one row DMA each, table -> table.
  const std::uint32_t tokens[T] = {3, 63, 0, 17};
  for (unsigned t = 0; t < T; ++t) {
    TileProgram::Dma g;
    g.src = bt.address + 2ull * tokens[t] * d, g.dst = emb.address + 2ull * t * d, g.len0 = 2 * d;
    p.dma(g);
  }
  l.run(p, 1u << 5);
  const auto am = l.get<std::uint32_t>(out, 4 * T + 16 + 4 * T * 4);
  for (unsigned t = 0; t < T; ++t) {
    const unsigned want = static_cast<unsigned>(std::max_element(logits.begin() + t * V, logits.begin() + (t + 1) * V) -
                                                (logits.begin() + t * V));
    EXPECT_EQ(am[t], want) << "token " << t;
    // Top-2 of the router: values then indices.
    std::vector<unsigned> idx(E);
    for (unsigned e = 0; e < E; ++e) idx[e] = e;
    std::stable_sort(idx.begin(), idx.end(), [&](unsigned a, unsigned b) { return router[t * E + a] > router[t * E + b]; });
    float vals[2];
    std::memcpy(vals, &am[16 + 2 * t], 8);
    EXPECT_EQ(vals[0], router[t * E + idx[0]]);
    EXPECT_EQ(vals[1], router[t * E + idx[1]]);
    EXPECT_EQ(am[16 + 2 * T + 2 * t], idx[0]);
    EXPECT_EQ(am[16 + 2 * T + 2 * t + 1], idx[1]);
  }
  EXPECT_EQ(am[3], 5u) << "ties go to the first index";
  const auto rows = l.get<std::uint16_t>(emb, T * d);
  for (unsigned t = 0; t < T; ++t)
    for (unsigned j = 0; j < d; ++j) ASSERT_EQ(rows[t * d + j], table16[tokens[t] * d + j]) << t << " " << j;
}

TEST(KernelLibrary, CausalAttentionOverAKvCache) {
  Lib l;
  // One head of 64 dims; a KV cache of 48 tokens; prefill of 16 tokens.
  const unsigned dh = 64, ctx = 48, T = 16;
  std::vector<double> qk, qv, qq;
  const auto k16 = to_bf16(random_floats(ctx * dh, 7, -1, 1), &qk), v16 = to_bf16(random_floats(ctx * dh, 8, -1, 1), &qv);
  const auto q16 = to_bf16(random_floats(T * dh, 9, -1, 1), &qq);
  const float scale = 1.0f / 8.0f;  // 1 / sqrt(64)
  // The causal mask: row t sees cache rows 0 .. ctx - T + t.
  std::vector<float> mask(T * ctx, 0.0f), scales(ctx, scale);
  for (unsigned t = 0; t < T; ++t)
    for (unsigned j = ctx - T + t + 1; j < ctx; ++j) mask[t * ctx + j] = -INFINITY;
  Buffer bk = l.put(k16), bv = l.put(v16), bq = l.put(q16), bm = l.put(mask), bs = l.put(scales);
  Buffer out = l.dev.alloc(4ull * T * dh);
  const std::uint32_t K = 0x10000, Vv = 0x20000, Q = 0x30000, M = 0x40000, SC = 0x48000, S = 0x50000, P = 0x60000,
                      P16 = 0x70000, O = 0x80000;
  TileProgram p;
  p.load(bk.address, K, 2 * ctx * dh).load(bv.address, Vv, 2 * ctx * dh).load(bq.address, Q, 2 * T * dh);
  p.load(bm.address, M, 4 * T * ctx).load(bs.address, SC, 4 * ctx).drain();
  // S = Q K^T (K stored ctx x dh: B transposed), scaled, masked, softmax.
  TileProgram::Gemm s{T, ctx, dh, Q, K, S};
  s.trans_b = true;
  p.gemm(s, {-1, 0, -1});
  for (unsigned t = 0; t < T; ++t) p.vec({VecOp::mul, 1, ctx, S + 4 * t * ctx, SC, 0, S + 4 * t * ctx}, {t == 0 ? 0 : -1});
  p.vec({VecOp::add, T, ctx, S, M, 0, S});
  p.vec({VecOp::softmax, T, ctx, S, 0, 0, P});
  p.vec({VecOp::cast_to, T, ctx, P, 0, 0, P16}, {-1, 1, -1});  // to BF16 for the tensor core
  p.gemm({T, dh, ctx, P16, Vv, O}, {1, -1, -1});
  p.drain().store(O, out.address, 4 * T * dh);
  l.run(p, 1u << 6);
  const auto o = l.get<float>(out, T * dh);
  double worst = 0;
  for (unsigned t = 0; t < T; ++t) {
    const unsigned seen = ctx - T + t + 1;
    std::vector<double> sc(seen);
    double mx = -1e300, sum = 0;
    for (unsigned j = 0; j < seen; ++j) {
      double dot = 0;
      for (unsigned i = 0; i < dh; ++i) dot += qq[t * dh + i] * qk[j * dh + i];
      sc[j] = dot * scale, mx = std::max(mx, sc[j]);
    }
    for (double& x : sc) x = std::exp(x - mx), sum += x;
    for (unsigned i = 0; i < dh; ++i) {
      double ref = 0, mag = 0;
      for (unsigned j = 0; j < seen; ++j) ref += sc[j] / sum * qv[j * dh + i], mag += sc[j] / sum * std::fabs(qv[j * dh + i]);
      // Probabilities rounded to BF16 (2^-9 relative) and softmax's 2e-6:
      const double bound = (std::ldexp(1.0, -8) + 2e-5) * mag + 2e-6 * seen;
      ASSERT_LE(std::fabs(o[t * dh + i] - ref), bound) << "token " << t << " dim " << i;
      worst = std::max(worst, std::fabs(o[t * dh + i] - ref));
    }
  }
  std::printf("causal attention %u tokens over a %u-token cache: max abs error %.3g\n", T, ctx, worst);
}

TEST(KernelLibrary, BadProgramsEndAsKernelErrorsNamingTheOperation) {
  Lib l;
  TileProgram p;
  p.drain();
  TileProgram bad = p;
  tkp_op junk{};
  junk.kind = 99;
  bad.raw(junk);
  try {
    l.run(bad);
    FAIL() << "an unknown operation ran";
  } catch (const DeviceError& e) {
    EXPECT_EQ(e.status(), TP_KERNEL_ERROR);
    EXPECT_EQ(e.completion.detail, 2u);
  }
  // A GEMM whose C runs past the scratchpad: the tensor core refuses it,
  // the program ends with code 3, and the tile's registers name operation 1.
  TileProgram g;
  g.drain().gemm({64, 64, 64, 0x10000, 0x20000, 0x1ff000});
  try {
    l.run(g, 1u << 4);
    FAIL() << "the bad GEMM passed";
  } catch (const DeviceError& e) {
    EXPECT_EQ(e.status(), TP_KERNEL_ERROR);
    EXPECT_EQ(e.completion.tile, 4u);
    EXPECT_EQ(e.completion.detail, 3u);
  }
  EXPECT_EQ(l.dev.stats()["device.tile4"]["tensor_errors"], 1u);
  // And the tiles serve on.
  TileProgram ok;
  ok.drain();
  l.run(ok, 1u << 4);
}

TEST(KernelLibrary, ATileReadsAnotherTilesScratchpadOverTheNoc) {
  Lib l;
  // Tile 0 writes a pattern into its scratchpad; tile 5 copies it from tile
  // 0's global window (0x3000_0000 on t1) into its own, then to HBM.
  std::vector<std::uint32_t> pattern(1024);
  for (unsigned i = 0; i < pattern.size(); ++i) pattern[i] = i * 2654435761u;
  Buffer src = l.put(pattern), out = l.dev.alloc(4096);
  TileProgram p0;
  p0.load(src.address, 0x40000, 4096).drain();
  l.run(p0, 1u << 0);
  TileProgram p5;
  TileProgram::Dma d;
  d.src = 0x3000'0000u + 0x40000, d.dst = 0x50000, d.dst_local = true, d.len0 = 4096;
  p5.dma(d).drain().store(0x50000, out.address, 4096);
  l.run(p5, 1u << 5);
  EXPECT_EQ(l.get<std::uint32_t>(out, 1024), pattern);
  const auto s = l.dev.stats();
  EXPECT_GE(s["device.tile0"]["spm_bytes_read"].get<std::uint64_t>(), 4096u) << "served to tile 5 over the NoC";
}
