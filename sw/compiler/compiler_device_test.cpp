// Compiled graphs on the virtual T1: their outputs equal the host
// reference (reference.hpp) bit for bit, fused or not, on the shapes of
// decode (one row: the weights split by columns) and prefill (many rows:
// row blocks, K in chunks, several column blocks), run after run.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <tuple>

#include "common/paths.hpp"
#include "executable.hpp"
#include "reference.hpp"
#include "tessera_program.h"

using namespace tessera;
using namespace tessera::compiler;

namespace {

Options unfused() {
  Options o;
  o.fuse = o.narrow = false;
  return o;
}

// `f` throws std::invalid_argument saying `words`.
void refused_with(const std::function<void()>& f, const std::string& words) {
  try {
    f();
    ADD_FAILURE() << "accepted: " << words;
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

// Bit for bit, element by element, named.
void expect_bits(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  std::size_t bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (std::memcmp(&got[i], &want[i], 4) != 0 && bad++ < 5)
      ADD_FAILURE() << what << "[" << i << "]: device " << got[i] << ", reference " << want[i];
  EXPECT_EQ(bad, 0u) << what << ": elements that differ";
}

void expect_reference(const Executable& e, const std::map<std::string, std::vector<float>>& in,
                      const std::map<std::string, std::vector<float>>& out) {
  const std::vector<std::vector<float>> ref = reference(e.graph(), in);
  for (int t : e.graph().outputs())
    expect_bits(out.at(e.graph().tensor(t).name), ref[static_cast<std::size_t>(t)], e.graph().tensor(t).name);
}

// State `name` of `e` (a KV cache) filled with seeded BF16 values (FP32
// ones with their low half cleared), on the chip and in `caches`, the
// reference's state.
void seeded_cache(Executable& e, const std::string& name, std::uint32_t seed, std::map<std::string, std::vector<float>>& caches) {
  const Tensor& t = *std::find_if(e.graph().tensors().begin(), e.graph().tensors().end(), [&](const Tensor& x) { return x.name == name; });
  std::vector<float> vals = seeded_values(t.elements(), seed, 1.0f);
  std::vector<std::uint16_t> bits(vals.size());
  for (std::size_t i = 0; i < vals.size(); ++i) {
    std::uint32_t u;
    std::memcpy(&u, &vals[i], 4);
    bits[i] = static_cast<std::uint16_t>(u >> 16), u &= 0xffff0000u;
    std::memcpy(&vals[i], &u, 4);
  }
  e.write_cache(name, bits);
  caches[name] = vals;
}

// x (rows x d) -> rmsnorm -> matmul + bias -> gelu -> matmul + x
Graph mlp(unsigned rows, unsigned d, unsigned hidden) {
  Graph g;
  const int x = g.input("x", {rows, d});
  const int n = g.rmsnorm(x, g.weight("norm", {d}, seeded_values(d, 1, 2.0f)), 1e-6f, "norm_x");
  const int h = g.matmul(n, g.weight("w1", {d, hidden}, seeded_values(std::size_t{d} * hidden, 2, 0.2f), DType::bf16), DType::bf16, "up");
  const int b = g.binary(OpKind::add, h, g.weight("b1", {hidden}, seeded_values(hidden, 3, 0.5f)), "bias");
  const int a = g.unary(OpKind::gelu, b, "act");
  const int y = g.matmul(a, g.weight("w2", {hidden, d}, seeded_values(std::size_t{hidden} * d, 4, 0.2f), DType::bf16), DType::bf16, "down");
  g.output(g.binary(OpKind::add, y, x, "residual"));
  return g;
}

struct Chip {
  rt::Device dev;
  rt::Kernel program = dev.load_kernel(data_file(DataKind::kernels, "program.elf"), (1u << dev.tiles()) - 1);
};

// The packet-level NoC and the fast HBM (the T1's four stacks), for tests
// whose bits do not depend on the models' timing: faster to simulate.
const std::vector<std::string> kFastModels = {"noc.model=packet", "hbm0.mode=fast", "hbm1.mode=fast", "hbm2.mode=fast",
                                              "hbm3.mode=fast"};

}  // namespace

TEST(CompilerDevice, AFusedMlpEqualsTheReferenceBitForBitAndBeatsTheUnfusedOne) {
  Chip c;
  const std::map<std::string, std::vector<float>> in{{"x", seeded_values(40 * 256, 9, 2.0f)}};
  Executable fused(c.dev, c.program, mlp(40, 256, 512));
  Executable plain(c.dev, c.program, mlp(40, 256, 512), unfused());
  // The norm runs in the up projection's node (its prologue), the bias and
  // the activation in its epilogue, the residual in the down projection's.
  EXPECT_EQ(fused.groups().size(), 2u);
  EXPECT_EQ(fused.groups()[0].prologue, 0);
  EXPECT_EQ(plain.groups().size(), 6u);
  double t0 = c.dev.simulated_seconds();
  const auto a = fused.run(in);
  const double fused_s = c.dev.simulated_seconds() - t0;
  t0 = c.dev.simulated_seconds();
  const auto b = plain.run(in);
  const double plain_s = c.dev.simulated_seconds() - t0;
  expect_reference(fused, in, a);
  expect_bits(a.at("residual"), b.at("residual"), "fused against unfused");
  EXPECT_LT(fused_s, plain_s);
  // Its roofline: a bound the launch could not beat, and what set it.
  EXPECT_GT(fused.last_bound().seconds(), 0);
  EXPECT_LE(fused.last_bound().seconds(), fused.last_seconds());
  EXPECT_FALSE(fused.last_bound().binding().resource.empty());
  // The same again, bit for bit; new inputs, new outputs (still the reference's).
  expect_bits(fused.run(in).at("residual"), a.at("residual"), "a second run");
  const std::map<std::string, std::vector<float>> in2{{"x", seeded_values(40 * 256, 10, 2.0f)}};
  const auto a2 = fused.run(in2);
  expect_reference(fused, in2, a2);
  EXPECT_NE(a2.at("residual"), a.at("residual"));
  const std::vector<double> nodes = fused.node_seconds();
  ASSERT_EQ(nodes.size(), 2u);
  for (double s : nodes) EXPECT_GT(s, 0);
}

TEST(CompilerDevice, ADecodeStepOfEveryOperationEqualsTheReference) {
  Chip c;
  Graph g;
  const unsigned d = 256;
  const int x = g.input("x", {2, d});
  const int ln = g.layernorm(x, g.weight("gamma", {d}, seeded_values(d, 1, 2.0f)), g.weight("beta", {d}, seeded_values(d, 2, 1.0f)));
  const int h = g.matmul(ln, g.weight("wh", {d, 1024}, seeded_values(d * 1024ull, 3, 0.3f), DType::f16), DType::f16, "wide");
  const int gate = g.unary(OpKind::silu, g.binary(OpKind::add, h, g.weight("bh", {1024}, seeded_values(1024, 4, 0.5f))));
  const int up = g.matmul(ln, g.weight("wu", {d, 1024}, seeded_values(d * 1024ull, 5, 0.3f), DType::e4m3), DType::e4m3, "fp8");
  const int sw = g.binary(OpKind::swiglu, gate, up, "swiglu");
  const int down = g.matmul(sw, g.weight("wd", {1024, d}, seeded_values(d * 1024ull, 6, 0.05f), DType::bf16), DType::bf16);
  const int r = g.binary(OpKind::sub, x, down, "x_minus");  // the chain's value as the second operand
  const int q = g.rope(r, 64, 7, 1, "rope");
  const int m = g.binary(OpKind::max, g.unary(OpKind::relu2, q), g.unary(OpKind::abs, x));
  const int e = g.unary(OpKind::log, g.unary(OpKind::exp, g.unary(OpKind::tanh, m)));
  const int one = g.weight("one", {d}, std::vector<float>(d, 1.0f));
  const int s = g.unary(OpKind::rsqrt, g.binary(OpKind::add, g.unary(OpKind::sigmoid, e), one));
  const int rx = g.unary(OpKind::recip, g.binary(OpKind::add, g.unary(OpKind::relu, x), one));
  const int sm = g.softmax(g.binary(OpKind::mul, g.unary(OpKind::neg, s), rx), "softmax");
  g.output(sm);
  g.output(g.cast(g.unary(OpKind::gelu, down), DType::bf16, "down_bf16"));
  g.output(g.argmax(sm, "token"));
  g.output(g.reduce(OpKind::reduce_sum, m, "sum"));
  g.output(g.reduce(OpKind::reduce_max, e, "max"));
  g.output(g.rmsnorm(g.binary(OpKind::min, q, x), g.weight("rn", {d}, seeded_values(d, 8, 1.0f)), 1e-5f, "normed"));
  Executable ex(c.dev, c.program, std::move(g));
  // The wide matmuls of one row go by columns over every tile.
  for (std::size_t k = 0; k < ex.groups().size(); ++k)
    if (ex.graph().ops()[static_cast<std::size_t>(ex.groups()[k].ops[0])].name == "wide") {
      EXPECT_EQ(ex.tilings()[k].parts.size(), c.dev.tiles());
    }
  const std::map<std::string, std::vector<float>> in{{"x", seeded_values(2 * d, 11, 3.0f)}};
  expect_reference(ex, in, ex.run(in));
}

TEST(CompilerDevice, APrefillMatmulInRowBlocksChunksAndColumnBlocksIsExact) {
  Chip c;
  Graph g;
  const int x = g.input("x", {600, 1100});
  const int y = g.matmul(x, g.weight("w", {1100, 1300}, seeded_values(1100 * 1300ull, 1, 0.1f), DType::bf16));
  g.output(g.binary(OpKind::add, y, g.weight("b", {1300}, seeded_values(1300, 2, 1.0f)), "out"));
  Executable ex(c.dev, c.program, std::move(g));
  const Tiling& t = ex.tilings()[0];
  bool row_blocks = false, col_blocks = false;
  for (const Part& p : t.parts) row_blocks |= p.r1 - p.r0 > t.mb, col_blocks |= p.c1 - p.c0 > t.nb;
  EXPECT_LT(t.kb, 1100u);  // K in chunks
  EXPECT_TRUE(row_blocks || col_blocks);
  const std::map<std::string, std::vector<float>> in{{"x", seeded_values(600 * 1100ull, 3, 1.0f)}};
  expect_reference(ex, in, ex.run(in));
}

TEST(CompilerDevice, BlockScaledFp8MatmulsEqualTheReferenceBitForBit) {
  // DeepSeek-V3's FP8 recipe on the tensor core: weights in E4M3 with a
  // scale per 128 x 128 block, activations cast on the fly in 1 x 128
  // groups (by the DMA engine, or by the vector unit after a norm fused as
  // the matmul's prologue, up to 64 rows). Prefill rows (row blocks,
  // several column blocks, a last block of 104 columns; the norm in a node
  // of its own), a block of 64 rows and a decode row (the norm fused).
  Chip c;
  auto build = [](unsigned rows) {
    Graph g;
    const int x = g.input("x", {rows, 512}), h = g.input("h", {rows, 1024});
    const auto [wu, su] = g.weight_scaled("wu", {512, 1000}, seeded_values(512 * 1000ull, 1, 0.2f));
    const auto [wd, sd] = g.weight_scaled("wd", {1024, 512}, seeded_values(1024 * 512ull, 2, 0.1f), DType::e5m2);
    const int n = g.rmsnorm(x, g.weight("nw", {512}, seeded_values(512, 3, 1.0f)));
    g.output(g.unary(OpKind::gelu, g.matmul_scaled(n, wu, su, "up"), "act"));  // the norm as its prologue
    g.output(g.binary(OpKind::add, g.matmul_scaled(h, wd, sd, "down"), x, "out"));  // h cast by the DMA engine
    return g;
  };
  for (const unsigned rows : {300u, 64u, 1u}) {
    Executable ex(c.dev, c.program, build(rows));
    bool scaled_group = false;
    for (std::size_t gi = 0; gi < ex.groups().size(); ++gi) {
      const Op& anchor = ex.graph().ops()[static_cast<std::size_t>(ex.groups()[gi].ops[0])];
      if (!block_scaled(anchor)) continue;
      scaled_group = true;
      EXPECT_EQ(ex.tilings()[gi].kb, anchor.name == "down" ? 1024u : 512u) << anchor.name << ": all of K a GEMM";
      for (const Part& p : ex.tilings()[gi].parts) EXPECT_EQ(p.c0 % kScaleBlock, 0u) << anchor.name;
    }
    EXPECT_TRUE(scaled_group);
    EXPECT_EQ(ex.groups()[0].prologue, rows > 64 ? -1 : 0) << "the norm casts A in groups (up to 64 rows)";
    const std::map<std::string, std::vector<float>> in{{"x", seeded_values(rows * 512ull, 4, 3.0f)},
                                                       {"h", seeded_values(rows * 1024ull, 5, 2.0f)}};
    expect_reference(ex, in, ex.run(in));
  }
}

TEST(CompilerDevice, BatchedMatmulsEqualTheReferenceBitForBit) {
  // Each batch of a's rows through a matrix of its own (the absorbed
  // latent attention's heads): a BF16 weight at one row a batch (decode),
  // 5 and 70 (a batch in several row blocks where the scratchpad makes
  // them so) with a chain after it; an activation as b (cast on the fly);
  // block-scaled FP8 matrices. Parts hold whole batches.
  Chip c;
  for (const unsigned M : {1u, 5u, 70u}) {
    Graph g;
    const unsigned G = 12, K = 200, N = 100;
    const int a = g.input("a", {G, M, K});
    const int y = g.matmul(a, g.weight("w", {G, K, N}, seeded_values(std::size_t{G} * K * N, 1, 0.2f), DType::bf16), DType::bf16, "mm");
    g.output(g.unary(OpKind::gelu, y, "act"));
    const int b = g.input("b", {4, 64, 48});
    const int z = g.matmul(g.input("x", {4, M, 64}), b, DType::bf16, "by_activation");
    g.output(z);
    const auto [codes, scales] = g.weight_scaled("q", {3, 256, 200}, seeded_values(3 * 256 * 200ull, 2, 0.2f));
    g.output(g.matmul_scaled(g.input("s", {3, M, 256}), codes, scales, "scaled"));
    Executable ex(c.dev, c.program, std::move(g));
    for (std::size_t gi = 0; gi < ex.groups().size(); ++gi) {
      const Op& anchor = ex.graph().ops()[static_cast<std::size_t>(ex.groups()[gi].ops[0])];
      if (anchor.kind != OpKind::matmul) continue;
      for (const Part& p : ex.tilings()[gi].parts) EXPECT_EQ(p.r0 % M + p.r1 % M, 0u) << anchor.name << ": whole batches";
    }
    const std::map<std::string, std::vector<float>> in{{"a", seeded_values(12ull * M * 200, 3, 2.0f)},
                                                       {"b", seeded_values(4 * 64 * 48ull, 4, 1.0f)},
                                                       {"x", seeded_values(4ull * M * 64, 5, 1.0f)},
                                                       {"s", seeded_values(3ull * M * 256, 6, 3.0f)}};
    expect_reference(ex, in, ex.run(in));
    expect_reference(ex, in, ex.run(in));
  }
  // Each part's matrices lie in the stack near its tile: 8 heads' 128 x
  // 512 in one node take less simulated time than a move and a matmul a
  // head (bench_compiler: 20.12 against 28.50 us; 35.49 with every
  // part's matrices in one stack).
  const std::map<std::string, std::vector<float>> in{{"x", seeded_values(8 * 128ull, 7, 2.0f)}};
  double took[2];
  for (const bool per_head : {false, true}) {
    Graph g;
    const int x = g.input("x", {8, 1, 128});
    for (unsigned b = 0; b < (per_head ? 8u : 1u); ++b) {
      const int a = per_head ? g.move({x}, {1, 128}, {{0, b * 128ull, 0, 128, 1, 0, 0}}) : x;
      const std::vector<unsigned> shape = per_head ? std::vector<unsigned>{128, 512} : std::vector<unsigned>{8, 128, 512};
      g.output(g.matmul(a, g.weight(fmt::format("w{}", b), shape, seeded_values(std::size_t{per_head ? 1u : 8u} * 128 * 512, 8 + b, 0.2f),
                                    DType::bf16), DType::bf16));
    }
    Executable ex(c.dev, c.program, std::move(g));
    ex.run(in);
    expect_reference(ex, in, ex.run(in));
    took[per_head] = ex.last_seconds();
  }
  EXPECT_LT(took[0], 0.8 * took[1]) << "batched " << took[0] * 1e6 << " us, a head a node " << took[1] * 1e6 << " us";
}

TEST(CompilerDevice, OperandsBroadcastAsNumpyHasIt) {
  Chip c;
  Graph g;
  const int x = g.input("x", {3, 70, 96});
  const int row = g.input("row", {96}), plane = g.input("plane", {70, 96}), scalar = g.input("scalar", {1});
  // In row groups (blocks of rows wrapping the plane's period), behind a
  // matmul.
  const int a = g.binary(OpKind::mul, g.binary(OpKind::add, x, row), plane, "a");
  g.output(g.binary(OpKind::max, a, scalar, "b"));
  g.output(g.reshape(a, {3 * 70 * 96 / 64, 64}, "flat"));  // a copy: every byte of a
  const int y = g.matmul(g.input("m", {70, 64}), g.weight("w", {64, 96}, seeded_values(64 * 96, 1, 0.2f), DType::bf16));
  g.output(g.binary(OpKind::sub, g.binary(OpKind::min, y, scalar), row, "d"));
  // A value per row (mul only): behind the matmul (its columns split over
  // tiles), and as a group of its own over x's 210 rows.
  const int per = g.input("per", {70, 1}), per3 = g.input("per3", {3, 70, 1});
  g.output(g.binary(OpKind::mul, g.unary(OpKind::exp, y), per, "e"));
  g.output(g.binary(OpKind::mul, x, per3, "f"));
  Executable ex(c.dev, c.program, std::move(g));
  const std::map<std::string, std::vector<float>> in{{"x", seeded_values(3 * 70 * 96, 2, 2.0f)},
                                                     {"row", seeded_values(96, 3, 2.0f)},
                                                     {"plane", seeded_values(70 * 96, 4, 2.0f)},
                                                     {"scalar", {0.25f}},
                                                     {"m", seeded_values(70 * 64, 5, 1.0f)},
                                                     {"per", seeded_values(70, 6, 2.0f)},
                                                     {"per3", seeded_values(210, 7, 2.0f)}};
  const auto out = ex.run(in);
  expect_reference(ex, in, out);
  EXPECT_EQ(out.at("f")[96 * 5 + 7], in.at("x")[96 * 5 + 7] * in.at("per3")[5]);
}

TEST(CompilerDevice, MovesTransposeAndConcatenateExactly) {
  Chip c;
  Graph g;
  const int x = g.input("x", {40, 50}), y = g.input("y", {40, 30});
  std::vector<Move> t, cat;
  for (unsigned j = 0; j < 50; ++j) t.push_back({0, j, j * 40ull, 1, 40, 50, 1});  // out[j][i] = x[i][j]
  cat.push_back({0, 0, 0, 50, 40, 50, 80});                                      // [x | y] row by row
  cat.push_back({1, 0, 50, 30, 40, 30, 80});
  g.output(g.move({g.unary(OpKind::exp, x)}, {50, 40}, t, "transpose"));
  g.output(g.move({x, y}, {40, 80}, cat, "concat"));
  Executable ex(c.dev, c.program, std::move(g));
  const std::map<std::string, std::vector<float>> in{{"x", seeded_values(2000, 1, 2.0f)}, {"y", seeded_values(1200, 2, 2.0f)}};
  expect_reference(ex, in, ex.run(in));
}

TEST(CompilerDevice, AGraphLongerThanADeviceGraphRunsAsSeveralLaunches) {
  Chip c;
  Graph g;
  int x = g.input("x", {4, 64});
  for (int i = 0; i < 600; ++i) x = g.unary(i % 2 ? OpKind::neg : OpKind::tanh, x);
  g.output(x);
  Executable ex(c.dev, c.program, std::move(g), unfused());
  ASSERT_EQ(ex.groups().size(), 600u);  // more than TKP_MARKS_MAX - 1
  const std::map<std::string, std::vector<float>> in{{"x", seeded_values(256, 3, 4.0f)}};
  expect_reference(ex, in, ex.run(in));
  // Every node timed, the first launch's too (read before the second
  // overwrote its marks): each node takes time, and together they are
  // the run less its launches' and transfers' overhead.
  const std::vector<double> t = ex.node_seconds();
  ASSERT_EQ(t.size(), 600u);
  double sum = 0;
  for (std::size_t n = 0; n < t.size(); ++n) {
    EXPECT_GT(t[n], 0.0) << "node " << n;
    EXPECT_LT(t[n], ex.last_seconds()) << "node " << n;
    sum += t[n];
  }
  EXPECT_LE(sum, ex.last_seconds());
  EXPECT_GT(sum, 0.5 * ex.last_seconds());
}

TEST(CompilerDevice, BadInputsAreRefusedByName) {
  Chip c;
  Executable ex(c.dev, c.program, mlp(4, 64, 64));
  try {
    ex.run({{"x", std::vector<float>(3)}});
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'x' needs 256 values, not 3"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ex.run({{"x", std::vector<float>(256)}, {"y", {}}}), std::invalid_argument);
  EXPECT_THROW(ex.run({}), std::invalid_argument);
  // The device serves on.
  const std::map<std::string, std::vector<float>> in{{"x", seeded_values(256, 1, 1.0f)}};
  expect_reference(ex, in, ex.run(in));
}

namespace {

// A mixture-of-experts block: rmsnorm, router (BF16 logits), top-k with
// softmax gates, the chosen experts' SwiGLU FFNs, the residual.
// With `experts_in` E4M3 or E5M2 the experts are block-scaled (moe_scaled).
Graph moe_block(unsigned rows, unsigned d, unsigned hidden, unsigned experts, unsigned k, DType experts_in = DType::bf16) {
  Graph g;
  const int x = g.input("x", {rows, d});
  const int n = g.rmsnorm(x, g.weight("norm", {d}, seeded_values(d, 1, 0.4f)), 1e-6f, "norm_x");
  const int logits = g.matmul(n, g.weight("router", {d, experts}, seeded_values(std::size_t{d} * experts, 2, 0.5f), DType::bf16));
  const int route = g.route(logits, k, true, "route");
  const std::size_t w = std::size_t{experts} * d * hidden;
  const int xb = g.cast(n, DType::bf16, "xb");
  int y;
  if (experts_in != DType::bf16) {
    const auto [w1, s1] = g.weight_scaled("w1", {experts, d, hidden}, seeded_values(w, 3, 0.2f), experts_in);
    const auto [w3, s3] = g.weight_scaled("w3", {experts, d, hidden}, seeded_values(w, 4, 0.2f), experts_in);
    const auto [w2, s2] = g.weight_scaled("w2", {experts, hidden, d}, seeded_values(w, 5, 0.2f), experts_in);
    y = g.moe_scaled(xb, route, w1, s1, w3, s3, w2, s2, "experts");
  } else {
    const int w1 = g.weight("w1", {experts, d, hidden}, seeded_values(w, 3, 0.2f), DType::bf16);
    const int w3 = g.weight("w3", {experts, d, hidden}, seeded_values(w, 4, 0.2f), DType::bf16);
    const int w2 = g.weight("w2", {experts, hidden, d}, seeded_values(w, 5, 0.2f), DType::bf16);
    y = g.moe(xb, route, w1, w3, w2, "experts");
  }
  g.output(g.binary(OpKind::add, y, x, "residual"));
  return g;
}

}  // namespace

TEST(CompilerDevice, AMixtureOfExpertsRunsOnlyTheChosenExpertsBitForBit) {
  Chip c;
  // 256 rows, top 4: each expert's rows run in several blocks of the
  // kernel's (64), its weights loaded once.
  for (const auto& [rows, k] : {std::pair{1u, 2u}, std::pair{5u, 2u}, std::pair{3u, 1u}, std::pair{4u, 4u}, std::pair{256u, 4u}}) {
    SCOPED_TRACE(testing::Message() << rows << " rows, top-" << k);
    const std::map<std::string, std::vector<float>> in{{"x", seeded_values(std::size_t{rows} * 64, 7 + rows, 2.0f)}};
    Executable ex(c.dev, c.program, moe_block(rows, 64, 128, 8, k));
    // The router's top k runs in its matmul's node; the residual is added
    // in the experts' combine (one node each, the same bits).
    const auto& gs = ex.groups();
    EXPECT_TRUE(std::any_of(gs.begin(), gs.end(), [&](const Group& grp) {
      return grp.ops.size() == 2 && ex.graph().ops()[static_cast<std::size_t>(grp.ops[1])].name == "route";
    }));
    EXPECT_EQ(ex.graph().ops()[static_cast<std::size_t>(ex.groups().back().ops.back())].name, "residual");
    EXPECT_EQ(ex.groups().back().ops.size(), 2u);
    const auto out = ex.run(in);
    expect_reference(ex, in, out);
    // The routes differ by row (the test would not see a mixed-up dispatch otherwise).
    const std::vector<std::vector<float>> ref = reference(ex.graph(), in);
    const int route = ex.graph().ops()[static_cast<std::size_t>(ex.graph().producer(ex.graph().ops().back().in[0]))].in[1];
    std::set<float> chosen(ref[static_cast<std::size_t>(route)].begin(), ref[static_cast<std::size_t>(route)].begin() + rows * k);
    EXPECT_GE(chosen.size(), std::min<std::size_t>(k * rows, 3));
    std::map<float, unsigned> per_expert;
    for (std::size_t i = 0; i < std::size_t{rows} * k; ++i) ++per_expert[ref[static_cast<std::size_t>(route)][i]];
    if (rows > 64) {
      EXPECT_GT(std::max_element(per_expert.begin(), per_expert.end(), [](auto& a, auto& b) { return a.second < b.second; })->second,
                2 * TKP_MOE_BLOCK)
          << "an expert's rows in three blocks at least";
    }
    expect_bits(ex.run(in).at("residual"), out.at("residual"), "a second run");
  }
}

TEST(CompilerDevice, AnExpertLayerTakesTheTimeOfTheExpertsChosen) {
  // Top-2 of 8 reads a quarter of the experts' weights that top-8 reads:
  // the experts' node takes far less time.
  Chip c;
  const std::map<std::string, std::vector<float>> in{{"x", seeded_values(2 * 256, 3, 2.0f)}};
  double seconds[2];
  int i = 0;
  for (unsigned k : {2u, 8u}) {
    Executable ex(c.dev, c.program, moe_block(2, 256, 512, 8, k));
    expect_reference(ex, in, ex.run(in));
    std::size_t moe_group = 0;
    for (std::size_t gi = 0; gi < ex.groups().size(); ++gi)
      if (ex.graph().ops()[static_cast<std::size_t>(ex.groups()[gi].ops[0])].kind == OpKind::moe) moe_group = gi;
    seconds[i++] = ex.node_seconds()[moe_group];
  }
  EXPECT_LT(seconds[0], 0.5 * seconds[1]) << "top-2 " << seconds[0] << " s, top-8 " << seconds[1] << " s";
}

TEST(CompilerDevice, BlockScaledFp8ExpertsEqualTheReferenceBitForBit) {
  // The experts' kernel in FP8: each slice's E4M3 (or E5M2) codes and
  // block scales, the rows cast in 1 x 128 groups as they are gathered,
  // the SwiGLU's product so before w2. One row, a few, and 256 (an
  // expert's rows in several blocks); faster than BF16 where the weights
  // bind (a decode row), and not the same numbers.
  Chip c;
  double seconds[2] = {0, 0};
  for (const auto& [rows, k, f] : {std::tuple{1u, 2u, DType::e4m3}, std::tuple{5u, 2u, DType::e5m2}, std::tuple{256u, 4u, DType::e4m3}}) {
    SCOPED_TRACE(testing::Message() << rows << " rows, top-" << k << ", " << name(f));
    const std::map<std::string, std::vector<float>> in{{"x", seeded_values(std::size_t{rows} * 256, 7 + rows, 2.0f)}};
    Executable ex(c.dev, c.program, moe_block(rows, 256, 512, 8, k, f));
    const Op& moe = *std::find_if(ex.graph().ops().begin(), ex.graph().ops().end(), [](const Op& o) { return o.kind == OpKind::moe; });
    EXPECT_TRUE(block_scaled(moe));
    EXPECT_EQ(512 / moe.slices % kScaleBlock, 0u) << "whole blocks in a slice: " << moe.slices << " slices";
    const auto out = ex.run(in);
    expect_reference(ex, in, out);
    expect_bits(ex.run(in).at("residual"), out.at("residual"), "a second run");
    if (rows == 1) {
      // Each run's nodes' times (the device's last run's).
      auto experts_node = [](const Executable& e) {
        for (std::size_t gi = 0; gi < e.groups().size(); ++gi)
          if (e.graph().ops()[static_cast<std::size_t>(e.groups()[gi].ops[0])].kind == OpKind::moe) return e.node_seconds()[gi];
        return 0.0;
      };
      seconds[1] = experts_node(ex);
      Executable bf(c.dev, c.program, moe_block(rows, 256, 512, 8, k));
      const auto ob = bf.run(in);
      seconds[0] = experts_node(bf);
      EXPECT_NE(std::memcmp(ob.at("residual").data(), out.at("residual").data(), 4 * 256), 0) << "FP8 rounds otherwise";
      double err = 0, mag = 0;
      for (std::size_t i = 0; i < 256; ++i)
        err = std::max(err, double(std::abs(ob.at("residual")[i] - out.at("residual")[i]))), mag = std::max(mag, double(std::abs(ob.at("residual")[i])));
      EXPECT_LT(err, 0.1 * mag) << "FP8 near BF16";
      std::printf("a decode row: experts %.3f us FP8, %.3f BF16; FP8 - BF16 at most %.4f (largest %.3f)\n", seconds[1] * 1e6, seconds[0] * 1e6, err, mag);
    }
  }
  EXPECT_LT(seconds[1], seconds[0]) << "a decode row's FP8 experts " << seconds[1] << " s, BF16 " << seconds[0] << " s";
  // Refusals, by name.
  Graph g;
  const int x = g.input("x", {2, 192});
  const int route = g.route(g.matmul(x, g.weight("r", {192, 4}, seeded_values(768, 1, 1.0f))), 2);
  const int xb = g.cast(x, DType::bf16);
  const auto [w1, s1] = g.weight_scaled("w1", {4, 192, 256}, seeded_values(4 * 192 * 256ull, 2, 0.1f));
  const auto [w2, s2] = g.weight_scaled("w2", {4, 256, 192}, seeded_values(4 * 192 * 256ull, 3, 0.1f));
  refused_with([&] { g.moe_scaled(xb, route, w1, s1, w1, s1, w2, s2, "fp8_experts"); }, "fp8_experts: D (192) and F (256) must be multiples of 128");
  const int b1 = g.weight("b1", {4, 192, 256}, seeded_values(4 * 192 * 256ull, 2, 0.1f), DType::bf16);
  refused_with([&] { g.moe_scaled(xb, route, b1, s1, b1, s1, w2, s2, "bf16_codes"); }, "bf16_codes: w1 'b1' must hold e4m3 or e5m2 codes");
}

// An elementwise chain on a router's logits (a scale by a weight, scores
// added from an input: what seeded routing does, hf::llama_step) runs in
// the router's node before its top k, on every block of rows.
TEST(CompilerDevice, AChainOnARoutersLogitsRunsInItsNodeBitForBit) {
  Chip c;
  for (const unsigned rows : {1u, 5u, 70u}) {
    SCOPED_TRACE(testing::Message() << rows << " rows");
    Graph g;
    const int x = g.input("x", {rows, 64});
    const int logits = g.matmul(x, g.weight("router", {64, 8}, seeded_values(64 * 8, 2, 0.5f), DType::bf16), DType::bf16, "logits");
    const int scaled = g.binary(OpKind::mul, logits, g.weight("scale", {8}, seeded_values(8, 3, 2.0f)), "scaled");
    const int scores = g.binary(OpKind::add, scaled, g.input("scores", {rows, 8}), "summed");
    g.output(g.route(scores, 2, true, "route"));
    Executable ex(c.dev, c.program, std::move(g));
    ASSERT_EQ(ex.groups().size(), 1u) << "one node: the router, the chain and the top k";
    EXPECT_EQ(ex.groups()[0].ops.size(), 4u);
    const std::map<std::string, std::vector<float>> in{{"x", seeded_values(std::size_t{rows} * 64, 4 + rows, 1.0f)},
                                                       {"scores", seeded_values(std::size_t{rows} * 8, 9 + rows, 3.0f)}};
    const auto out = ex.run(in);
    expect_reference(ex, in, out);
    // The scores decide: the chosen experts differ from the logits' own.
    Graph plain;
    const int px = plain.input("x", {rows, 64});
    plain.output(plain.route(plain.matmul(px, plain.weight("router", {64, 8}, seeded_values(64 * 8, 2, 0.5f), DType::bf16),
                                          DType::bf16, "logits"), 2, true, "route"));
    Executable pe(c.dev, c.program, std::move(plain));
    EXPECT_NE(pe.run({{"x", in.at("x")}}).at("route"), out.at("route"));
  }
}

TEST(CompilerDevice, AMixtureOfExpertsTooLargeForTheKernelIsRefusedByName) {
  Chip c;
  // 257 tokens: the experts kernel takes 256 at a time.
  try {
    Executable ex(c.dev, c.program, moe_block(257, 64, 128, 8, 2));
    FAIL() << "compiled";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("moe 'experts'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("257 tokens"), std::string::npos) << e.what();
  }
}

TEST(CompilerDevice, ExpertsTooWideForAScratchpadStreamTheirWeightsInChunksBitForBit) {
  // d_model 4096: 64 rows of it and their outputs (1.5 MiB twice over)
  // leave no room for any slice whole, so the slices' weights stream in
  // chunks of the model's columns, one unit of rows after another (130
  // rows: an expert's rows in two or more units, its weights streamed for
  // each). Block-scaled FP8 experts likewise, in chunks of whole 128 x 128
  // blocks, their rows cast chunk by chunk. Every run equals the
  // reference; one row fits whole.
  struct {
    rt::Device dev{[] {
      rt::Device::Options o;
      o.sets = kFastModels;
      return o;
    }()};
    rt::Kernel program = dev.load_kernel(data_file(DataKind::kernels, "program.elf"), (1u << dev.tiles()) - 1);
  } c;
  const unsigned D = 4096, E = 4;
  for (const auto& [rows, k, f, F] : {std::tuple{1u, 2u, DType::bf16, 128u}, std::tuple{64u, 2u, DType::bf16, 128u},
                                      std::tuple{130u, 2u, DType::bf16, 128u}, std::tuple{64u, 2u, DType::e4m3, 512u},
                                      std::tuple{40u, 1u, DType::e5m2, 512u}}) {
    SCOPED_TRACE(testing::Message() << rows << " rows, top-" << k << ", " << name(f));
    const bool fp8 = f != DType::bf16;
    const unsigned want = (c.dev.tiles() + k - 1) / k;  // as the compiler asks: at most a slice per block, block-scaled
    const rt::MoeSplit split = rt::MoeSplit::plan(c.dev, c.dev.tiles(), E, F, D, rows, fp8 ? std::min(want, F / kScaleBlock) : want, 1, fp8);
    if (rows == 1) {
      EXPECT_EQ(split.chunk, 0u) << "one row's slice fits whole";
    } else {
      EXPECT_GT(split.chunk, 0u);
      EXPECT_EQ(D % split.chunk, 0u);
      EXPECT_LT(split.chunk, D) << "more than one chunk";
      EXPECT_EQ(split.block, std::min(rows, TKP_MOE_BLOCK)) << "a full block of rows fits beside a chunked slice";
      EXPECT_LE(tkp_moe_chunked_scratch(split.block, D, F / split.slices, split.chunk, fp8), TKP_PROGRAM_OFFSET - 0x10000u);
      EXPECT_GT(tkp_moe_scratch(rows, D, F / split.slices, fp8), TKP_PROGRAM_OFFSET - 0x10000u);
      EXPECT_EQ(fp8 ? split.chunk % kScaleBlock : 0u, 0u) << "block-scaled chunks of whole blocks";
    }
    const std::map<std::string, std::vector<float>> in{{"x", seeded_values(std::size_t{rows} * D, 7 + rows, 2.0f)}};
    Executable ex(c.dev, c.program, moe_block(rows, D, F, E, k, f));
    const Op& moe_op = ex.graph().ops()[static_cast<std::size_t>(ex.graph().producer(ex.graph().ops().back().in[0]))];
    EXPECT_EQ(block_scaled(moe_op), fp8);
    EXPECT_EQ(moe_op.moe_chunk, split.chunk) << "the reference sums in the kernel's chunks";
    const auto out = ex.run(in);
    expect_reference(ex, in, out);
    expect_bits(ex.run(in).at("residual"), out.at("residual"), "a second run");
    if (rows > TKP_MOE_BLOCK) {
      const std::vector<std::vector<float>> ref = reference(ex.graph(), in);
      const int moe = ex.graph().producer(ex.graph().ops().back().in[0]);
      const std::vector<float>& route = ref[static_cast<std::size_t>(ex.graph().ops()[static_cast<std::size_t>(moe)].in[1])];
      std::map<float, unsigned> per_expert;
      for (std::size_t i = 0; i < std::size_t{rows} * k; ++i) ++per_expert[route[i]];
      EXPECT_GT(std::max_element(per_expert.begin(), per_expert.end(), [](auto& a, auto& b) { return a.second < b.second; })->second,
                TKP_MOE_BLOCK)
          << "an expert's rows in two units at least";
    }
    std::printf("%u rows, top-%u, %s: %u slices, chunks of %u columns (0: whole), blocks of %u rows: %.2f us\n", rows, k, name(f),
                split.slices, split.chunk, split.block, ex.last_seconds() * 1e6);
  }
  // Chunks at least 64 columns deep (the tensor core's) where some row
  // block has them: Mixtral-8x7B's whole expert (14336 hidden) over 64
  // rows had streamed in chunks of 8 columns in 64-row blocks (2451 us a
  // layer, against 2091 in chunks of 64).
  const rt::MoeSplit deep = rt::MoeSplit::plan(c.dev, c.dev.tiles(), 1, 14336, D, 64, 4, 1, false);
  EXPECT_GE(deep.chunk, 64u);
  EXPECT_GT(deep.block, 0u);
}

TEST(CompilerDevice, GroupLimitedRoutingOnTheCoresEqualsTheReference) {
  // DeepSeek-V3's routing: sigmoid scores, a bias for choosing, 8 groups
  // of 8, the 3 best groups, top 4, gates normalised and scaled; then the
  // experts it chose.
  Chip c;
  const unsigned T = 6, D = 64, F = 64, E = 64;
  Graph g;
  const int x = g.input("x", {T, D});
  const int logits = g.matmul(x, g.weight("router", {D, E}, seeded_values(std::size_t{D} * E, 2, 0.5f), DType::bf16));
  const int scores = g.unary(OpKind::sigmoid, logits, "scores");
  const int choice = g.binary(OpKind::add, scores, g.weight("bias", {E}, seeded_values(E, 3, 0.2f)), "choice");
  const int route = g.route_grouped(choice, scores, 4, 8, 3, 2.5f, true, "route");
  g.output(route);
  const std::size_t w = std::size_t{E} * D * F;
  g.output(g.moe(g.cast(x, DType::bf16, "xb"), route, g.weight("w1", {E, D, F}, seeded_values(w, 4, 0.2f), DType::bf16),
                 g.weight("w3", {E, D, F}, seeded_values(w, 5, 0.2f), DType::bf16),
                 g.weight("w2", {E, F, D}, seeded_values(w, 6, 0.2f), DType::bf16), "experts"));
  Executable ex(c.dev, c.program, std::move(g));
  const std::map<std::string, std::vector<float>> in{{"x", seeded_values(std::size_t{T} * D, 7, 2.0f)}};
  const auto out = ex.run(in);
  expect_reference(ex, in, out);
  // Every choice lies in one of the row's 3 kept groups, and the gates sum to the scale.
  const std::vector<float>& r = out.at("route");
  for (unsigned t = 0; t < T; ++t) {
    std::set<unsigned> groups;
    float sum = 0;
    for (unsigned j = 0; j < 4; ++j) groups.insert(static_cast<unsigned>(r[t * 4 + j]) / 8), sum += r[(T + t) * 4 + j];
    EXPECT_LE(groups.size(), 3u);
    EXPECT_NEAR(sum, 2.5f, 1e-5);
  }
}

TEST(CompilerDevice, AnEmbeddingLookupGathersTheRowsItsIndicesName) {
  // Indices from an input (FP32 whole numbers) and from an argmax on the
  // chip, a BF16 table and an FP32 one; an index out of range fails the
  // op by name, and the device serves on.
  Chip c;
  Graph g;
  const int tokens = g.input("tokens", {6});
  const int table = g.weight("table", {50, 96}, seeded_values(50 * 96, 1, 2.0f), DType::bf16);
  const int rows = g.gather_rows(table, tokens, "embed");
  const int scores = g.input("scores", {3, 20});
  const int picked = g.gather_rows(g.weight("t2", {20, 16}, seeded_values(320, 2, 2.0f)), g.argmax(scores), "picked");
  g.output(g.binary(OpKind::add, rows, g.weight("bias", {96}, seeded_values(96, 3, 1.0f)), "out"));
  g.output(picked);
  Executable ex(c.dev, c.program, std::move(g));
  std::map<std::string, std::vector<float>> in{{"tokens", {3, 49, 0, 7, 7, 22}}, {"scores", seeded_values(60, 4, 2.0f)}};
  const auto out = ex.run(in);
  expect_reference(ex, in, out);
  EXPECT_EQ(out.at("picked").size(), 3u * 16);
  in.at("tokens")[4] = 50;  // one past the table
  try {
    ex.run(in);
    FAIL() << "an index out of range ran";
  } catch (const rt::DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("embed"), std::string::npos) << e.what();
  }
  in.at("tokens")[4] = 2.5f;  // not a whole number
  EXPECT_THROW(ex.run(in), rt::DeviceError);
  in.at("tokens")[4] = 9;
  expect_reference(ex, in, ex.run(in));  // it serves on
}

namespace {

// Attention over a KV cache: x (T x D) projected to q (H heads of dh), k
// (KV heads of dh) and v (KV heads of dv), the caches `prefix`.k/.v of C
// positions (shared by every graph of the same prefix through Options::state).
Graph attention_step(unsigned T, unsigned C, const std::string& out = "o") {
  constexpr unsigned D = 64, H = 4, KV = 2, dh = 16, dv = 8;
  Graph g;
  const int x = g.input("x", {T, D});
  const int pos = g.input("positions", {T});
  auto w = [&](const char* name, unsigned cols, std::uint32_t seed) {
    return g.weight(name, {D, cols}, seeded_values(std::size_t{D} * cols, seed, 0.5f), DType::bf16);
  };
  const int q = g.matmul(x, w("wq", H * dh, 21), DType::bf16, "q");
  const int k = g.matmul(x, w("wk", KV * dh, 22), DType::bf16, "k");
  const int v = g.matmul(x, w("wv", KV * dv, 23), DType::bf16, "v");
  const int kc = g.kv_cache("cache.k", KV, C, dh), vc = g.kv_cache("cache.v", KV, C, dv);
  g.output(g.attention(q, k, v, kc, vc, pos, H, 0.25f, out));
  return g;
}

std::map<std::string, std::vector<float>> attention_inputs(unsigned p, unsigned T, std::uint32_t seed) {
  std::vector<float> pos(T);
  for (unsigned t = 0; t < T; ++t) pos[t] = static_cast<float>(p + t);
  return {{"x", seeded_values(std::size_t{T} * 64, seed, 2.0f)}, {"positions", pos}};
}

// attention_step's projections over paged caches: S sequences (3), pages
// of 4 positions, P pages each (4), a pool of S P; H heads (4) over KV
// heads (2).
Graph paged_step(unsigned T, unsigned S = 3, unsigned P = 4, unsigned H = 4, unsigned KV = 2) {
  constexpr unsigned D = 64, dh = 16, dv = 8;
  Graph g;
  const int x = g.input("x", {T, D});
  const int pos = g.input("positions", {T});
  Paging paging;
  paging.sequences = g.input("sequences", {T}), paging.table = g.input("pages", {S, P}), paging.page = 4;
  auto w = [&](const char* name, unsigned cols, std::uint32_t seed) {
    return g.weight(name, {D, cols}, seeded_values(std::size_t{D} * cols, seed, 0.5f), DType::bf16);
  };
  const int q = g.matmul(x, w("wq", H * dh, 21), DType::bf16, "q");
  const int k = g.matmul(x, w("wk", KV * dh, 22), DType::bf16, "k");
  const int v = g.matmul(x, w("wv", KV * dv, 23), DType::bf16, "v");
  const int kc = g.kv_cache("cache.k", KV, 4 * S * P, dh), vc = g.kv_cache("cache.v", KV, 4 * S * P, dv);
  g.output(g.attention(q, k, v, kc, vc, pos, H, 0.25f, "o", false, paging));
  return g;
}

}  // namespace

TEST(CompilerDevice, PagedAttentionOverAWholeGroupOfSegmentsEqualsTheReference) {
  // 32 two-row prompts (the kernel's group of segments, ATT_GROUP, exactly,
  // a tile per head holding every row): the group ends on the last
  // segment's first row, its second row continuing it (a batch of 32
  // eight-token prompts failed so once, an empty group after the last).
  Chip c;
  Executable e(c.dev, c.program, paged_step(64, 32, 1, 8));
  std::map<std::string, std::vector<float>> in{{"x", seeded_values(64 * 64, 80, 2.0f)}};
  for (unsigned s = 0; s < 32; ++s) {
    in["pages"].push_back(static_cast<float>((s * 7) % 32));
    for (unsigned r = 0; r < 2; ++r) in["sequences"].push_back(static_cast<float>(s)), in["positions"].push_back(static_cast<float>(r));
  }
  expect_reference(e, in, e.run(in));
}

TEST(CompilerDevice, PagedAttentionGroupsSegmentsAsTheScratchpadHoldsThem) {
  // Eight decode rows, each its own sequence about 900 positions in (KV
  // rows of 128 values: a segment's keys and values take 460 KiB of the
  // kernel's scratchpad), every head's tile holding all eight: the
  // segments run in groups that the room ends (three or four a group),
  // not the group's count, over caches filled beforehand; bit for bit the
  // reference, twice.
  constexpr unsigned D = 128, H = 8, KV = 2, dh = 128, S = 8, P = 16, page = 64;
  Chip c;
  Graph g;
  const int x = g.input("x", {S, D});
  const int pos = g.input("positions", {S});
  Paging paging;
  paging.sequences = g.input("sequences", {S}), paging.table = g.input("pages", {S, P}), paging.page = page;
  auto w = [&](const char* name, unsigned cols, std::uint32_t seed) {
    return g.weight(name, {D, cols}, seeded_values(std::size_t{D} * cols, seed, 0.1f), DType::bf16);
  };
  const int q = g.matmul(x, w("wq", H * dh, 31), DType::bf16, "q");
  const int k = g.matmul(x, w("wk", KV * dh, 32), DType::bf16, "k");
  const int v = g.matmul(x, w("wv", KV * dh, 33), DType::bf16, "v");
  const int kc = g.kv_cache("cache.k", KV, page * S * P, dh), vc = g.kv_cache("cache.v", KV, page * S * P, dh);
  g.output(g.attention(q, k, v, kc, vc, pos, H, 0.088f, "o", false, paging));
  Executable e(c.dev, c.program, std::move(g));
  // The caches: BF16 values, on the chip and in the reference's state.
  std::map<std::string, std::vector<float>> caches;
  seeded_cache(e, "cache.k", 90, caches), seeded_cache(e, "cache.v", 91, caches);
  std::map<std::string, std::vector<float>> in{{"x", seeded_values(S * D, 95, 2.0f)}};
  for (unsigned s = 0; s < S; ++s) {
    in["sequences"].push_back(static_cast<float>(s)), in["positions"].push_back(static_cast<float>(900 + 3 * s));
    for (unsigned i = 0; i < P; ++i) in["pages"].push_back(static_cast<float>((s + S * i) % (S * P)));  // interleaved
  }
  for (int run = 0; run < 2; ++run) {
    const auto out = e.run(in);
    const std::vector<std::vector<float>> ref = reference(e.graph(), in, &caches);
    expect_bits(out.at("o"), ref[static_cast<std::size_t>(e.graph().outputs()[0])], fmt::format("run {}", run));
    for (float& p : in["positions"]) p += 1;  // the next row of each
  }
}

TEST(CompilerDevice, PagedAttentionOverSeveralSequencesEqualsTheReferenceAndEachSequenceAlone) {
  // Steps mixing sequences (a prompt beside decode rows, rows crossing a
  // page, sequences in any order), each sequence's positions in its own
  // pages: every step equals the reference bit for bit, and each
  // sequence's rows equal those of the unpaged graph run on it alone.
  Chip c;
  Executable step8(c.dev, c.program, paged_step(8));
  Options shared;
  shared.state = step8.state();
  Executable step3(c.dev, c.program, paged_step(3), shared);
  const std::vector<float> pages = {5, 1, 9, 4, 0, 2, 11, 6, 7, 3, 10, 8};  // by sequence, in position order
  std::vector<std::vector<float>> rows_of(3);  // each sequence's x rows so far
  std::vector<std::vector<float>> out_of(3);   // and their outputs
  std::map<std::string, std::vector<float>> caches;
  auto run = [&](Executable& e, const std::vector<std::pair<unsigned, unsigned>>& seq_rows, std::uint32_t seed) {
    std::map<std::string, std::vector<float>> in;
    const unsigned T = static_cast<unsigned>(e.graph().tensor(e.graph().outputs()[0]).rows());
    in["x"] = seeded_values(std::size_t{T} * 64, seed, 2.0f);
    in["pages"] = pages;
    for (const auto& [s, n] : seq_rows)
      for (unsigned i = 0; i < n; ++i) {
        in["positions"].push_back(static_cast<float>(rows_of[s].size() / 64));
        const std::size_t r = in["sequences"].size();
        in["sequences"].push_back(static_cast<float>(s));
        rows_of[s].insert(rows_of[s].end(), in["x"].begin() + r * 64, in["x"].begin() + (r + 1) * 64);
      }
    const auto out = e.run(in);
    const std::vector<std::vector<float>> ref = reference(e.graph(), in, &caches);
    expect_bits(out.at("o"), ref[static_cast<std::size_t>(e.graph().outputs()[0])], fmt::format("step of seed {}", seed));
    for (std::size_t r = 0; r < in["sequences"].size(); ++r) {
      auto& o = out_of[static_cast<std::size_t>(in["sequences"][r])];
      o.insert(o.end(), out.at("o").begin() + r * 32, out.at("o").begin() + (r + 1) * 32);
    }
    return in;
  };
  run(step8, {{0, 5}, {2, 3}}, 70);
  run(step8, {{1, 6}, {0, 1}, {2, 1}}, 71);
  const auto last = run(step3, {{2, 1}, {0, 1}, {1, 1}}, 72);
  for (unsigned s = 0; s < 3; ++s) {  // alone, unpaged, as one prompt (caches of its own)
    const unsigned T = static_cast<unsigned>(rows_of[s].size() / 64);
    Executable e(c.dev, c.program, attention_step(T, 16));
    auto in = attention_inputs(0, T, 1);
    in["x"] = rows_of[s];
    expect_bits(out_of[s], e.run(in).at("o"), fmt::format("sequence {} alone", s));
  }
  // Inputs that break the paging are refused by name before anything
  // runs; the device serves on.
  auto refused_run = [&](std::map<std::string, std::vector<float>> in, const std::string& what) {
    EXPECT_THROW(
        try { step3.run(in); } catch (const std::invalid_argument& e) {
          EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
          throw;
        },
        std::invalid_argument);
  };
  auto in = last;
  in["sequences"] = {0, 1, 0}, in["positions"] = {7, 7, 8};
  refused_run(in, "o: sequence 0's rows are not together");
  in["sequences"] = {0, 1, 3}, in["positions"] = {7, 7, 0};
  refused_run(in, "sequences 'sequences' [2] is 3");
  in["sequences"] = {0, 1, 2}, in["positions"] = {7, 7, 16};
  refused_run(in, "sequence 2 at positions 16 to 16 is past its 4 pages of 4");
  in["positions"] = {7, 7, 5};
  in["pages"][4] = 12;
  refused_run(in, "page table 'pages' [1][0] is 12");
  in["pages"] = pages;
  in["pages"][9] = 2;  // sequence 2's second page is sequence 1's, which it writes
  refused_run(in, "page 2 is written by sequence");
  in["pages"] = pages;
  in["positions"] = {7, 7, 5.5f};
  refused_run(in, "positions 'positions' [2] is 5.5");
  // The next step runs as if none of that had been tried.
  run(step3, {{2, 1}, {0, 1}, {1, 1}}, 73);
}

TEST(CompilerDevice, ExecutablesGivenOneWeightStoreHoldOneCopyOfEachLayout) {
  // A step graph of 5 rows and one of 1 with one store: the second writes
  // only the layouts the first's tiling did not make; the same graph again
  // writes nothing; a graph with other values under the same names gets
  // its own. Every run still equals the reference.
  Chip c;
  auto store = std::make_shared<WeightStore>(c.dev);
  Options o;
  o.weights = store;
  auto mlp = [](unsigned T, std::uint32_t seed) {
    Graph g;
    const int x = g.input("x", {T, 64});
    const int h = g.matmul(x, g.weight("w1", {64, 256}, seeded_values(64 * 256, seed, 0.5f), DType::bf16), DType::bf16, "h");
    g.output(g.matmul(h, g.weight("w2", {256, 64}, seeded_values(256 * 64, seed + 1, 0.5f), DType::bf16), DType::bf16, "y"));
    return g;
  };
  auto check = [&](Executable& e, unsigned T) {
    const std::map<std::string, std::vector<float>> in = {{"x", seeded_values(std::size_t{T} * 64, 9, 2.0f)}};
    expect_bits(e.run(in).at("y"), reference(e.graph(), in)[static_cast<std::size_t>(e.graph().outputs()[0])], fmt::format("{} rows", T));
  };
  Executable five(c.dev, c.program, mlp(5, 30), o);
  const std::uint64_t first = store->bytes();
  EXPECT_GE(first, 2u * 64 * 256 * 2) << "both weights, in BF16";
  Executable one(c.dev, c.program, mlp(1, 30), o);
  const std::uint64_t both = store->bytes();
  Executable again(c.dev, c.program, mlp(1, 30), o);
  EXPECT_EQ(store->bytes(), both) << "the same graph again writes nothing";
  Executable other(c.dev, c.program, mlp(1, 31), o);
  EXPECT_GE(store->bytes(), both + 2u * 64 * 256 * 2) << "other values under the same names are their own";
  EXPECT_EQ(five.weights(), store);
  check(five, 5), check(one, 1), check(again, 1), check(other, 1);
  std::printf("weights: %llu bytes for 5 rows, %llu with 1 row too\n", static_cast<unsigned long long>(first),
              static_cast<unsigned long long>(both));
}

TEST(CompilerDevice, AttentionOverAKvCacheEqualsTheReferenceRunAfterRun) {
  // A prompt of 5 rows, then 3 decode steps of one row sharing its caches
  // (grouped queries: 4 heads over 2 KV heads): every run equals the
  // reference, which keeps its own caches, bit for bit.
  Chip c;
  Executable prefill(c.dev, c.program, attention_step(5, 16));
  Options shared;
  shared.state = prefill.state();
  Executable decode(c.dev, c.program, attention_step(1, 16), shared);
  EXPECT_EQ(decode.state().at("cache.k").address, prefill.state().at("cache.k").address);
  std::map<std::string, std::vector<float>> caches;
  auto check = [&](Executable& e, unsigned p, unsigned T, std::uint32_t seed) {
    const auto in = attention_inputs(p, T, seed);
    const auto out = e.run(in);
    const std::vector<std::vector<float>> ref = reference(e.graph(), in, &caches);
    expect_bits(out.at("o"), ref[static_cast<std::size_t>(e.graph().outputs()[0])], fmt::format("rows at {}", p));
  };
  check(prefill, 0, 5, 40);
  for (unsigned p = 5; p < 8; ++p) check(decode, p, 1, 40 + p);
  // A position past the cache, or positions not one after another, are
  // refused by name before anything runs; the device serves on.
  EXPECT_THROW(
      try { decode.run(attention_inputs(16, 1, 1)); } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("positions"), std::string::npos) << e.what();
        throw;
      },
      std::invalid_argument);
  auto skipping = attention_inputs(0, 5, 1);
  skipping["positions"][3] = 7;
  EXPECT_THROW(prefill.run(skipping), std::invalid_argument);
  check(decode, 8, 1, 50);
}

TEST(CompilerDevice, QueriesWiderThanTheKernelsWordAttendPackedAsTheReferenceHasIt) {
  // DeepSeek-V3's absorbed latent attention on one chip: 128 heads of 576
  // over one KV head, each query row 73728 values, past the kernel's
  // 16-bit strides (a packed q is given as 0: H dh). A prompt of 3 rows,
  // then a decode row over the cache it filled: both equal the reference
  // bit for bit. A k whose rows pass the word is refused by name.
  Chip c;
  constexpr unsigned H = 128, dh = 576, dv = 512, C = 8;
  auto step = [&](unsigned T) {
    Graph g;
    const int q = g.input("q", {T, H * dh}), k = g.input("k", {T, dh}), v = g.input("v", {T, dv});
    const int pos = g.input("positions", {T});
    const int kc = g.kv_cache("cache.k", 1, C, dh), vc = g.kv_cache("cache.v", 1, C, dv);
    g.output(g.attention(q, k, v, kc, vc, pos, H, 0.05f, "o"));
    return g;
  };
  Executable prefill(c.dev, c.program, step(3));
  Options shared;
  shared.state = prefill.state();
  Executable decode(c.dev, c.program, step(1), shared);
  std::map<std::string, std::vector<float>> caches;
  for (const auto& [e, p, T] : {std::tuple<Executable*, unsigned, unsigned>{&prefill, 0, 3}, {&decode, 3, 1}}) {
    std::vector<float> pos(T);
    for (unsigned t = 0; t < T; ++t) pos[t] = static_cast<float>(p + t);
    const std::map<std::string, std::vector<float>> in{{"q", seeded_values(std::size_t{T} * H * dh, 60 + p, 1.0f)},
                                                       {"k", seeded_values(std::size_t{T} * dh, 61 + p, 1.0f)},
                                                       {"v", seeded_values(std::size_t{T} * dv, 62 + p, 1.0f)},
                                                       {"positions", pos}};
    const auto out = e->run(in);
    expect_bits(out.at("o"), reference(e->graph(), in, &caches)[static_cast<std::size_t>(e->graph().outputs()[0])],
                fmt::format("rows at {}", p));
  }
  Graph wide;  // two KV heads of 40000: k's rows of 80000
  const int kc = wide.kv_cache("wide.k", 2, C, 40000), vc = wide.kv_cache("wide.v", 2, C, 8);
  refused_with([&] { wide.attention(wide.input("q", {1, 80000}), wide.input("k", {1, 80000}), wide.input("v", {1, 16}), kc, vc,
                                    wide.input("positions", {1}), 2, 1.0f, "too_wide"); },
               "too_wide: rows of 80000 values in 'k'");
}

TEST(CompilerDevice, QueryHeadsSharingAKvHeadReadItsCacheOnceBitForBit) {
  // Grouped queries with several heads on a tile: 32 heads over 4 KV
  // heads (dh = dv = 128) on eight tiles, four heads a tile over one KV
  // head, rotated in the kernel or not. A prompt of 5 rows (a head's rows
  // one GEMM each), decode rows over the cache it filled and over a cache
  // of 600 positions written beforehand (the set's heads one GEMM), and
  // paged steps (the heads split by KV head, the rows over the tiles
  // left; runs of pages in order loaded as one): bit for bit the
  // reference. The decode row over
  // 600 positions takes less than twice what 8 heads (one a tile) take
  // over the same caches: a tile's heads read its KV head's cache once
  // (read a head at a time, four heads took about four times as long).
  Chip c;
  constexpr unsigned KV = 4, dh = 128, dv = 128, C = 640;
  auto step = [&](unsigned T, unsigned H, bool rotary, const std::string& prefix, unsigned S = 0) {
    Graph g;
    const int q = g.input("q", {T, H * dh}), k = g.input("k", {T, KV * dh}), v = g.input("v", {T, KV * dv});
    const int pos = g.input("positions", {T});
    Paging paging;
    if (S) paging.sequences = g.input("sequences", {T}), paging.table = g.input("pages", {S, C / 16 / S}), paging.page = 16;
    const int kc = g.kv_cache(prefix + ".k", KV, C, dh), vc = g.kv_cache(prefix + ".v", KV, C, dv);
    g.output(g.attention(q, k, v, kc, vc, pos, H, 0.088f, "o", rotary, paging));
    return g;
  };
  auto inputs = [&](unsigned T, unsigned H, unsigned p, std::uint32_t seed) {
    std::map<std::string, std::vector<float>> in{{"q", seeded_values(std::size_t{T} * H * dh, seed, 1.0f)},
                                                 {"k", seeded_values(std::size_t{T} * KV * dh, seed + 1, 1.0f)},
                                                 {"v", seeded_values(std::size_t{T} * KV * dv, seed + 2, 1.0f)}};
    for (unsigned t = 0; t < T; ++t) in["positions"].push_back(static_cast<float>(p + t));
    return in;
  };
  auto check = [&](Executable& e, const std::map<std::string, std::vector<float>>& in,
                   std::map<std::string, std::vector<float>>& caches, const std::string& what) {
    const auto out = e.run(in);
    expect_bits(out.at("o"), reference(e.graph(), in, &caches)[static_cast<std::size_t>(e.graph().outputs()[0])], what);
    return e.last_seconds();
  };
  for (const bool rotary : {false, true}) {
    const std::string prefix = rotary ? "rot" : "plain";
    Executable prefill(c.dev, c.program, step(5, 32, rotary, prefix));
    Options shared;
    shared.state = prefill.state();
    Executable decode(c.dev, c.program, step(1, 32, rotary, prefix), shared);
    std::map<std::string, std::vector<float>> caches;
    check(prefill, inputs(5, 32, 0, 10), caches, prefix + " prompt");
    for (unsigned p = 5; p < 8; ++p) check(decode, inputs(1, 32, p, 10 + p), caches, fmt::format("{} row at {}", prefix, p));
  }
  // Caches of BF16 values written on the chip and given to the reference.
  Executable wide(c.dev, c.program, step(1, 32, false, "long"));
  Options shared;
  shared.state = wide.state();
  Executable narrow(c.dev, c.program, step(1, 8, false, "long"), shared);
  std::map<std::string, std::vector<float>> caches;
  seeded_cache(wide, "long.k", 40, caches), seeded_cache(wide, "long.v", 41, caches);
  std::map<std::string, std::vector<float>> again = caches;  // the same row twice: the caches as they were
  const double four = check(wide, inputs(1, 32, 600, 50), caches, "32 heads at 600");
  const double one = check(narrow, inputs(1, 8, 600, 50), again, "8 heads at 600");
  std::printf("a decode row over 600 positions: 32 heads %.2f us, 8 heads %.2f us (%.2fx)\n", four * 1e6, one * 1e6, four / one);
  EXPECT_LT(four, 2.0 * one) << "four heads a tile read their KV head's cache once";
  // Paged, pages of 16: prompts of 20 rows for sequences 0 and 3, then a
  // row for each of four sequences (one KV head a part, two parts a KV
  // head over the rows), then a prompt of 3 beside rows. Sequence 0's
  // pages follow one another in the pool (its cached rows load as one
  // run), sequence 3's run backwards, 1's and 2's in runs of five.
  Executable prompts(c.dev, c.program, step(40, 32, true, "paged", 4));
  Options sp;
  sp.state = prompts.state();
  Executable rows(c.dev, c.program, step(4, 32, true, "paged", 4), sp);
  Executable mixed(c.dev, c.program, step(6, 32, true, "paged", 4), sp);
  std::map<std::string, std::vector<float>> pc;
  std::vector<float> table;
  for (unsigned s = 0; s < 4; ++s)
    for (unsigned i = 0; i < C / 16 / 4; ++i)
      table.push_back(static_cast<float>(s == 0 ? i : s == 3 ? 39 - i : 5 + 5 * s + (i < 5 ? i : i + 5)));
  auto in = inputs(40, 32, 0, 60);
  in["pages"] = table, in["positions"].clear();
  for (unsigned r = 0; r < 40; ++r) in["positions"].push_back(static_cast<float>(r % 20)), in["sequences"].push_back(r < 20 ? 0.0f : 3.0f);
  check(prompts, in, pc, "paged prompts");
  in = inputs(4, 32, 0, 70);
  in["positions"] = {20, 0, 0, 20}, in["sequences"] = {0, 1, 2, 3}, in["pages"] = table;
  check(rows, in, pc, "paged rows");
  in = inputs(6, 32, 0, 80);
  in["positions"] = {21, 1, 2, 3, 1, 21}, in["sequences"] = {0, 2, 2, 2, 1, 3}, in["pages"] = table;
  check(mixed, in, pc, "paged prompt beside rows");
}

namespace {

// An attention step of H heads over KV heads of dh / dv on caches
// "<name>.k" and "<name>.v" of C positions (with S sequences, paged:
// pages of 16, interleaved over the sequences), compiled with `o`, its
// caches seeded on the chip and in `caches` (seeds `seed`, `seed` + 1),
// and its inputs (seeds `seed` + 2 ..).
struct CacheStep {
  std::unique_ptr<Executable> e;
  std::map<std::string, std::vector<float>> in, caches;
};
CacheStep cache_step(Chip& c, unsigned H, unsigned KV, unsigned dh, unsigned dv, unsigned C, const std::vector<float>& positions,
                     const std::vector<float>& sequences, unsigned S, const std::string& name, std::uint32_t seed,
                     const Options& o = {}) {
  const unsigned T = static_cast<unsigned>(positions.size()), page = 16;
  Graph g;
  const int q = g.input("q", {T, H * dh}), k = g.input("k", {T, KV * dh}), v = g.input("v", {T, KV * dv});
  const int pos = g.input("positions", {T});
  Paging paging;
  if (S) paging.sequences = g.input("sequences", {T}), paging.table = g.input("pages", {S, C / page / S}), paging.page = page;
  const int kc = g.kv_cache(name + ".k", KV, C, dh), vc = g.kv_cache(name + ".v", KV, C, dv);
  g.output(g.attention(q, k, v, kc, vc, pos, H, 0.05f, "o", false, paging));
  CacheStep st;
  st.e = std::make_unique<Executable>(c.dev, c.program, std::move(g), o);
  seeded_cache(*st.e, name + ".k", seed, st.caches), seeded_cache(*st.e, name + ".v", seed + 1, st.caches);
  st.in = {{"q", seeded_values(std::size_t{T} * H * dh, seed + 2, 1.0f)},
           {"k", seeded_values(std::size_t{T} * KV * dh, seed + 3, 1.0f)},
           {"v", seeded_values(std::size_t{T} * KV * dv, seed + 4, 1.0f)},
           {"positions", positions}};
  if (S) {
    st.in["sequences"] = sequences;
    for (unsigned s = 0; s < S; ++s)
      for (unsigned i = 0; i < C / page / S; ++i) st.in["pages"].push_back(static_cast<float>(i * S + s));  // interleaved
  }
  return st;
}

}  // namespace

TEST(CompilerDevice, CachesTooLongForTheScratchpadStreamTheirRowsBitForBit) {
  // Cached rows past what a tile's scratchpad holds whole stream through
  // it in blocks of 64 positions (K for the scores, then V for P.V, each
  // block's sums added in position order as one GEMM adds them): a decode
  // row of 32 heads over 4 KV heads of 128 at position 5000 (5.1 MB of
  // K and V per KV head), four rows of a prompt continuing it, paged rows
  // of two sequences 3000 and 4100 positions in, pages interleaved, and
  // DeepSeek-V3's 128 absorbed heads (576 / 512) over one KV head at 2000,
  // and paged rows whose pages lie past position 65535 of their pool: bit
  // for bit the reference, over caches written beforehand; an unpaged
  // cache past 65535 positions refused by name. A cache
  // whose scores do not fit (64 rows over 60000 positions) is still
  // refused at compile time (DecodingWithTheCacheGivesThePrefillsRowsBitForBit).
  Chip c;
  auto run = [&](unsigned H, unsigned KV, unsigned dh, unsigned dv, unsigned C, std::vector<float> positions,
                 std::vector<float> sequences, const std::string& what) {
    const unsigned S = sequences.empty() ? 0 : static_cast<unsigned>(*std::max_element(sequences.begin(), sequences.end())) + 1;
    CacheStep st = cache_step(c, H, KV, dh, dv, C, positions, sequences, S, "long", 70);
    Executable& e = *st.e;
    const auto out = e.run(st.in);
    expect_bits(out.at("o"), reference(e.graph(), st.in, &st.caches)[static_cast<std::size_t>(e.graph().outputs()[0])], what);
    std::printf("%s: %.2f us\n", what.c_str(), e.last_seconds() * 1e6);
  };
  run(32, 4, 128, 128, 5120, {5000}, {}, "a row at 5000");
  run(32, 4, 128, 128, 5120, {4000, 4001, 4002, 4003}, {}, "a prompt's 4 rows at 4000");
  run(32, 4, 128, 128, 16384, {3000, 4100}, {0, 1}, "paged rows at 3000 and 4100");
  run(128, 1, 576, 512, 2048, {2000}, {}, "128 absorbed heads at 2000");
  // A paged pool past the attention's 16-bit word for positions (its high
  // half in TKP_PAGED's): pages up to position 79999.
  run(8, 1, 64, 64, 80000, {39990, 39000}, {0, 1}, "paged rows in a pool of 80000 positions");
  // A sequence past it: its positions are the page table's to place.
  run(8, 1, 64, 64, 80000, {70000, 70001}, {0, 0}, "a sequence's rows at 70000");
  Graph g;  // unpaged, a cache holds at most 65535
  const int kc = g.kv_cache("big.k", 1, 70000, 16), vc = g.kv_cache("big.v", 1, 70000, 16);
  refused_with([&] { g.attention(g.input("q", {1, 16}), g.input("k", {1, 16}), g.input("v", {1, 16}), kc, vc, g.input("positions", {1}), 1,
                                 1.0f, "unpaged"); },
               "unpaged: an unpaged cache of 70000 positions (at most 65535");
}

TEST(CompilerDevice, CachesStripedOverTheStacksGiveTheSameBitsAndReadEveryStack) {
  // A KV cache of 4096 positions in a stripe per HBM stack (blocks of 256
  // positions, KV head j's block b in stripe (b + j) mod 4) against the
  // same cache in one buffer (Options::stripe_caches off): a decode row of
  // 32 heads over 8 KV heads of 128 at position 4000, and paged rows of
  // four sequences (pages of 16, interleaved) about 1000 positions in.
  // Both bit for bit the reference, over the same caches written
  // beforehand (write_cache); the new rows appended where read_cache finds
  // them; the striped caches read through every stack (each at least a
  // sixth of the cache's bytes) and the row faster.
  Chip c;
  const unsigned H = 32, KV = 8, dh = 128, C = 4096;
  struct Run {
    double seconds = 0;
    std::vector<double> stack_reads;  // bytes read from each stack in the run
  };
  auto run = [&](bool stripe, std::vector<float> positions, std::vector<float> sequences, const std::string& what) {
    Options o;
    o.stripe_caches = stripe;
    CacheStep st = cache_step(c, H, KV, dh, dh, C, positions, sequences, sequences.empty() ? 0 : 4, "c", 30, o);
    Executable& e = *st.e;
    std::map<std::string, std::vector<float>>&in = st.in, &caches = st.caches;
    EXPECT_EQ(e.state().size(), stripe ? 8u : 2u) << what;
    EXPECT_EQ(e.state().count("c.k#3"), stripe ? 1u : 0u) << what;
    auto reads = [&] {
      std::vector<double> r;
      const auto st = c.dev.stats();
      for (unsigned h = 0; h < c.dev.hbm_stacks(); ++h) r.push_back(st[fmt::format("device.hbm{}", h)]["bytes_read"].get<double>());
      return r;
    };
    const std::vector<double> before = reads();
    const auto out = e.run(in);
    Run r;
    r.seconds = e.last_seconds(), r.stack_reads = reads();
    for (unsigned h = 0; h < r.stack_reads.size(); ++h) r.stack_reads[h] -= before[h];
    expect_bits(out.at("o"), reference(e.graph(), in, &caches)[static_cast<std::size_t>(e.graph().outputs()[0])], what);
    for (const std::string name : {"c.k", "c.v"}) {  // the caches with the new rows, as the reference has them
      const std::vector<std::uint16_t> bits = e.read_cache(name);
      std::vector<float> got(bits.size());
      for (std::size_t i = 0; i < bits.size(); ++i) {
        const std::uint32_t u = std::uint32_t{bits[i]} << 16;
        std::memcpy(&got[i], &u, 4);
      }
      expect_bits(got, caches.at(name), what + ": " + name);
    }
    // write_cache checks what it is given.
    refused_with([&] { e.write_cache("c.k", std::vector<std::uint16_t>(5)); }, "cache 'c.k': 5 values given for 8 heads x 4096 positions x 128");
    refused_with([&] { e.write_cache("q", {}); }, "'q' is no KV cache of this graph");
    std::printf("%s: %.2f us, stacks read", what.c_str(), r.seconds * 1e6);
    for (double b : r.stack_reads) std::printf(" %.2f MB", b / 1e6);
    std::printf("\n");
    return r;
  };
  const std::uint64_t cache_bytes = 2ull * KV * 4000 * dh * 2;  // K and V up to the row
  const Run one = run(false, {4000}, {}, "a row at 4000, one buffer a cache");
  const Run striped = run(true, {4000}, {}, "a row at 4000, striped");
  for (double b : striped.stack_reads) EXPECT_GT(b, cache_bytes / 6.0);
  EXPECT_LT(striped.seconds, 0.7 * one.seconds);
  run(false, {1000, 900, 1010, 700}, {0, 1, 2, 3}, "paged rows, one buffer a cache");
  const Run paged = run(true, {1000, 900, 1010, 700}, {0, 1, 2, 3}, "paged rows, striped");
  for (double b : paged.stack_reads) EXPECT_GT(b, 2.0 * KV * 3610 * dh * 2 / 6.0);
}

TEST(CompilerDevice, DecodingWithTheCacheGivesThePrefillsRowsBitForBit) {
  // The same 8 rows as one prefill, and as a prefill of 5 then 3 steps of
  // one: each row attends to the same keys in the same order.
  Chip c;
  const auto all = attention_inputs(0, 8, 60);
  Executable whole(c.dev, c.program, attention_step(8, 8));
  const std::vector<float> want = whole.run(all).at("o");
  Executable prefill(c.dev, c.program, attention_step(5, 8));
  Options shared;
  shared.state = prefill.state();
  Executable step(c.dev, c.program, attention_step(1, 8), shared);
  auto rows = [&](unsigned r0, unsigned n) {
    std::map<std::string, std::vector<float>> in;
    in["x"].assign(all.at("x").begin() + r0 * 64, all.at("x").begin() + (r0 + n) * 64);
    in["positions"].assign(all.at("positions").begin() + r0, all.at("positions").begin() + r0 + n);
    return in;
  };
  std::vector<float> got = prefill.run(rows(0, 5)).at("o");
  for (unsigned r = 5; r < 8; ++r) {
    const std::vector<float> o = step.run(rows(r, 1)).at("o");
    got.insert(got.end(), o.begin(), o.end());
  }
  expect_bits(got, want, "rows");
  // A cache too long for the kernel's scratchpad is refused by name.
  EXPECT_THROW(
      try { Executable big(c.dev, c.program, attention_step(64, 60000)); } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("attention 'o'"), std::string::npos) << e.what();
        throw;
      },
      std::invalid_argument);
}

TEST(CompilerDevice, ARotaryEmbeddingAtARunTimePositionIsTheCompiledOnesBits) {
  // rope_at reads its position on the chip: the same bits as a rope
  // compiled at that position, and as the reference, at any position.
  Chip c;
  Graph at;
  at.output(at.rope_at(at.input("x", {3, 64}), 16, at.input("positions", {3}), 1, "r"));
  Executable run_time(c.dev, c.program, std::move(at));
  for (unsigned p : {0u, 7u, 200u}) {
    Graph fixed;
    fixed.output(fixed.rope(fixed.input("x", {3, 64}), 16, p, 1, "r"));
    Executable compiled(c.dev, c.program, std::move(fixed));
    const std::vector<float> x = seeded_values(3 * 64, 70 + p, 4.0f);
    const std::map<std::string, std::vector<float>> in{{"x", x}, {"positions", {float(p), float(p + 1), float(p + 2)}}};
    const auto got = run_time.run(in);
    expect_bits(got.at("r"), compiled.run({{"x", x}}).at("r"), fmt::format("position {}", p));
    expect_reference(run_time, in, got);
  }
  EXPECT_THROW(run_time.run({{"x", std::vector<float>(192)}, {"positions", {1.5f, 2.5f, 3.5f}}}), std::invalid_argument);
}

TEST(CompilerDevice, AFusedQkvWithRotaryAttentionIsTheUnfusedGraphsBits) {
  // One projection to [q | k | v] and the rotation inside the attention
  // kernel, against three projections, two rope_at nodes and a plain
  // attention: the same bits (each output column is the same dot product,
  // each rotation the vector unit's in FP32 before rounding), and the
  // reference's, for a prompt and then decode steps over the cache.
  constexpr unsigned D = 64, H = 4, KV = 2, dh = 16, C = 12;
  auto build = [&](unsigned T, bool fused) {
    Graph g;
    const int x = g.input("x", {T, D}), pos = g.input("positions", {T});
    const std::vector<float> wq = seeded_values(std::size_t{D} * H * dh, 31, 0.5f), wk = seeded_values(std::size_t{D} * KV * dh, 32, 0.5f),
                             wv = seeded_values(std::size_t{D} * KV * dh, 33, 0.5f);
    const int kc = g.kv_cache("k_cache", KV, C, dh), vc = g.kv_cache("v_cache", KV, C, dh);
    if (fused) {
      std::vector<float> w;  // row by row: q's columns, k's, v's
      for (unsigned r = 0; r < D; ++r) {
        w.insert(w.end(), wq.begin() + r * H * dh, wq.begin() + (r + 1) * H * dh);
        w.insert(w.end(), wk.begin() + r * KV * dh, wk.begin() + (r + 1) * KV * dh);
        w.insert(w.end(), wv.begin() + r * KV * dh, wv.begin() + (r + 1) * KV * dh);
      }
      const int qkv = g.matmul(x, g.weight("wqkv", {D, (H + 2 * KV) * dh}, w, DType::bf16));
      g.output(g.attention_qkv(qkv, kc, vc, pos, H, 0.25f, true, "o"));
    } else {
      const int q = g.rope_at(g.matmul(x, g.weight("wq", {D, H * dh}, wq, DType::bf16)), dh, pos);
      const int k = g.rope_at(g.matmul(x, g.weight("wk", {D, KV * dh}, wk, DType::bf16)), dh, pos);
      const int v = g.matmul(x, g.weight("wv", {D, KV * dh}, wv, DType::bf16));
      g.output(g.attention(q, k, v, kc, vc, pos, H, 0.25f, "o"));
    }
    return g;
  };
  Chip c;
  Executable fused_prefill(c.dev, c.program, build(4, true)), plain_prefill(c.dev, c.program, build(4, false));
  Options fs, ps;
  fs.state = fused_prefill.state(), ps.state = plain_prefill.state();
  Executable fused_step(c.dev, c.program, build(1, true), fs), plain_step(c.dev, c.program, build(1, false), ps);
  std::map<std::string, std::vector<float>> caches;
  auto inputs = [](unsigned p, unsigned T) {
    std::vector<float> at(T);
    for (unsigned t = 0; t < T; ++t) at[t] = static_cast<float>(p + t);
    return std::map<std::string, std::vector<float>>{{"x", seeded_values(std::size_t{T} * D, 80 + p, 2.0f)}, {"positions", at}};
  };
  auto check = [&](Executable& f, Executable& u, unsigned p, unsigned T) {
    const auto in = inputs(p, T);
    const std::vector<float> got = f.run(in).at("o");
    expect_bits(got, u.run(in).at("o"), fmt::format("fused against unfused at {}", p));
    expect_bits(got, reference(f.graph(), in, &caches)[static_cast<std::size_t>(f.graph().outputs()[0])], fmt::format("reference at {}", p));
  };
  check(fused_prefill, plain_prefill, 0, 4);
  for (unsigned p = 4; p < 7; ++p) check(fused_step, plain_step, p, 1);
  Graph bad;
  const int q = bad.input("q", {2, 50});
  refused_with(
      [&] {
        bad.attention_qkv(q, bad.kv_cache("k", KV, C, dh), bad.kv_cache("v", KV, C, dh), bad.input("pos", {2}), H, 1.0f, true, "fq");
      },
      "fq: qkv 'q' f32 [2, 50] needs f32 columns of 4 queries, then 2 keys and 2 values (128 in all");
}

namespace {

// The stacks that hold tensor t's stripes 0 .. n - 1 in ex's HBM plan (each
// must exist).
std::set<unsigned> stripe_stacks(const Executable& ex, int t, unsigned n) {
  std::set<unsigned> stacks;
  for (unsigned i = 0; i < n; ++i) {
    const HbmSlot* s = ex.hbm().find(t, i);
    EXPECT_NE(s, nullptr) << ex.graph().tensor(t).name << "'s stripe " << i;
    if (s) stacks.insert(s->stack);
  }
  return stacks;
}

}  // namespace

TEST(CompilerDevice, StripedQkvAndResidentWeightsGiveTheReferencesBitsRunAfterRun) {
  // A prompt's layer: its norm's output (BF16, 300 KB) in four stripes
  // that the QKV projection reads as A, [q | k | v] in three (a stack
  // each) that the attention reads, its output in four (its tiles' heads,
  // a stack each) that Wo reads as A, then the residual; past 64 rows the
  // matmuls keep their weights in the scratchpads and run their rows in
  // blocks of 64 (the last one short). The same bits as the graph with
  // neither (unfused, unstriped, one row block) and as the reference, for
  // the prompt and again for other rows.
  constexpr unsigned T = 150, D = 1024, H = 8, KV = 2, dh = 64, C = 160;
  auto build = [&] {
    Graph g;
    const int x = g.input("x", {T, D}), pos = g.input("positions", {T});
    const unsigned qkv_cols = (H + 2 * KV) * dh;
    const int n = g.rmsnorm(x, g.weight("norm.weight", {D}, seeded_values(D, 40, 1.0f)), 1e-6f, "norm");
    const int qkv = g.matmul(n, g.weight("wqkv", {D, qkv_cols}, seeded_values(std::size_t{D} * qkv_cols, 41, 0.3f), DType::bf16), DType::bf16, "qkv");
    const int o = g.attention_qkv(qkv, g.kv_cache("k_cache", KV, C, dh), g.kv_cache("v_cache", KV, C, dh), pos, H, 0.125f, true, "attn");
    const int y = g.matmul(o, g.weight("wo", {H * dh, D}, seeded_values(std::size_t{H} * dh * D, 42, 0.3f), DType::bf16), DType::bf16, "proj");
    g.output(g.binary(OpKind::add, y, x, "out"));
    return g;
  };
  Chip c;
  Executable ex(c.dev, c.program, build());
  Options plain = unfused();
  plain.stripe = false;
  Executable ref(c.dev, c.program, build(), plain);
  const int normed = ex.groups()[0].out, qkv = ex.groups()[1].out;
  ASSERT_EQ(ex.graph().tensor(normed).name, "norm");
  ASSERT_EQ(ex.graph().tensor(qkv).name, "qkv");
  EXPECT_EQ(stripe_stacks(ex, normed, c.dev.hbm_stacks()).size(), c.dev.hbm_stacks());
  EXPECT_EQ(stripe_stacks(ex, qkv, 3).size(), 3u);
  EXPECT_EQ(ref.hbm().find(qkv, 1), nullptr);
  const int attn = ex.groups()[2].out;  // 150 x 512 FP32: 300 KB
  ASSERT_EQ(ex.graph().tensor(attn).name, "attn");
  EXPECT_EQ(stripe_stacks(ex, attn, c.dev.hbm_stacks()).size(), c.dev.hbm_stacks());
  for (unsigned i = 0; i < c.dev.hbm_stacks(); ++i) {
    if (const HbmSlot* s = ex.hbm().find(attn, i)) {
      EXPECT_EQ(s->col0, i * 128);  // two heads of the eight tiles' one each
    }
  }
  unsigned resident = 0;
  for (const Tiling& t : ex.tilings()) resident += t.resident;
  EXPECT_GE(resident, 1u);
  for (unsigned run = 0; run < 2; ++run) {
    std::vector<float> at(T);
    for (unsigned t = 0; t < T; ++t) at[t] = static_cast<float>(t);
    const std::map<std::string, std::vector<float>> in{{"x", seeded_values(std::size_t{T} * D, 50 + run, 2.0f)}, {"positions", at}};
    const auto got = ex.run(in);
    expect_bits(got.at("out"), ref.run(in).at("out"), fmt::format("run {}: striped and resident against neither", run));
    expect_reference(ex, in, got);
  }
}

TEST(CompilerDevice, LogitsInAStripePerStackGiveTheReferencesBitsToTheHostAndTheArgmax) {
  // A prompt's LM head (300 rows x 1000 columns, 1.2 MB of FP32 logits):
  // stored in four stripes, written by the head's tiles, read by the
  // argmax's and by the host a stripe at a time; the same bits as the
  // unstriped graph and the reference's, run after run.
  auto build = [] {
    Graph g;
    const int x = g.input("x", {300, 128});
    const int logits = g.matmul(x, g.weight("head", {128, 1000}, seeded_values(128 * 1000ull, 61, 0.3f), DType::bf16), DType::bf16, "logits");
    g.output(logits);
    g.output(g.argmax(logits, "next"));
    return g;
  };
  Chip c;
  Executable ex(c.dev, c.program, build());
  Options plain;
  plain.stripe = false;
  Executable whole(c.dev, c.program, build(), plain);
  const int logits = ex.groups()[0].out;
  EXPECT_EQ(stripe_stacks(ex, logits, c.dev.hbm_stacks()).size(), c.dev.hbm_stacks());
  EXPECT_EQ(whole.hbm().find(logits, 1), nullptr);
  for (unsigned run = 0; run < 2; ++run) {
    const std::map<std::string, std::vector<float>> in{{"x", seeded_values(300 * 128ull, 70 + run, 2.0f)}};
    const auto got = ex.run(in), want = whole.run(in);
    expect_bits(got.at("logits"), want.at("logits"), fmt::format("run {}: logits", run));
    expect_bits(got.at("next"), want.at("next"), fmt::format("run {}: argmax", run));
    expect_reference(ex, in, got);
  }
}

namespace {

// Two expert layers over rows looked up in a table (so that a bad index
// fails the graph on the device before the experts).
Graph moe_layers(unsigned rows, unsigned d, unsigned hidden, unsigned experts, unsigned k) {
  Graph g;
  const int tokens = g.input("tokens", {rows});
  int x = g.gather_rows(g.weight("table", {64, d}, seeded_values(64ull * d, 9, 2.0f)), tokens, "embed");
  for (int l = 0; l < 2; ++l) {
    const std::string p = fmt::format("layer{}.", l);
    const int n = g.rmsnorm(x, g.weight(p + "norm.weight", {d}, seeded_values(d, 1 + l, 0.4f)), 1e-6f, p + "norm");
    const int xb = g.cast(n, DType::bf16, p + "xb");
    const int logits = g.matmul(xb, g.weight(p + "router", {d, experts}, seeded_values(std::size_t{d} * experts, 2 + l, 0.5f), DType::bf16));
    const int route = g.route(logits, k, true, p + "route");
    const std::size_t w = std::size_t{experts} * d * hidden;
    const int w1 = g.weight(p + "w1", {experts, d, hidden}, seeded_values(w, 3 + l, 0.2f), DType::bf16);
    const int w3 = g.weight(p + "w3", {experts, d, hidden}, seeded_values(w, 4 + l, 0.2f), DType::bf16);
    const int w2 = g.weight(p + "w2", {experts, hidden, d}, seeded_values(w, 5 + l, 0.2f), DType::bf16);
    x = g.binary(OpKind::add, g.moe(xb, route, w1, w3, w2, p + "experts"), x, p + "residual");
  }
  g.output(x);
  return g;
}

}  // namespace

TEST(CompilerDevice, ANormTheRouterAndTheExpertsReadRunsInTheRoutersNodeBitForBit) {
  // The norm (and its cast to BF16) before a router and its experts runs
  // as the router's prologue, the router's parts storing the normed rows
  // for the experts: one node less a layer, the unfused graph's bits and
  // the reference's, at a decode row and at prompt rows (several parts).
  Chip c;
  for (unsigned rows : {1u, 40u}) {
    SCOPED_TRACE(testing::Message() << rows << " rows");
    std::vector<float> tokens(rows);
    for (unsigned r = 0; r < rows; ++r) tokens[r] = static_cast<float>((r * 37 + 11) % 64);
    const std::map<std::string, std::vector<float>> in{{"tokens", tokens}};
    Executable fused(c.dev, c.program, moe_layers(rows, 256, 512, 8, 2));
    Executable plain(c.dev, c.program, moe_layers(rows, 256, 512, 8, 2), unfused());
    unsigned kept = 0;
    for (const Group& grp : fused.groups()) {
      const Graph& g = fused.graph();
      if (grp.kept < 0) continue;
      ++kept;
      EXPECT_EQ(g.ops()[static_cast<std::size_t>(grp.prologue)].kind, OpKind::rmsnorm);
      EXPECT_EQ(g.ops()[static_cast<std::size_t>(grp.ops.back())].kind, OpKind::route);
      EXPECT_EQ(g.tensor(grp.kept).dtype, DType::bf16) << "the cast's rows, as the experts read them";
      EXPECT_NE(fused.hbm().find(grp.kept), nullptr);
    }
    EXPECT_EQ(kept, 2u) << "one a layer";
    const auto a = fused.run(in);
    expect_reference(fused, in, a);
    expect_bits(a.at("layer1.residual"), plain.run(in).at("layer1.residual"), "fused against unfused");
    expect_bits(fused.run(in).at("layer1.residual"), a.at("layer1.residual"), "a second run");
  }
}

namespace {
// The ring of four T1s (platform/t1x4-ring.json, with `sets` overriding
// it), the program kernel on every chip.
struct Ring {
  explicit Ring(std::vector<std::string> sets = {})
      : cluster([&] {
          rt::Device::Options o;
          o.platform = rt::Device::system_platform(4);
          o.sets = std::move(sets);
          return o;
        }()) {
    for (unsigned c = 0; c < cluster.chips(); ++c)
      programs.push_back(cluster.chip(c).load_kernel(data_file(DataKind::kernels, "program.elf"), (1u << cluster.chip(c).tiles()) - 1));
  }
  // Options whose peers are the other chips, each with a weight store of its own.
  Options system() {
    Options o;
    for (unsigned c = 1; c < cluster.chips(); ++c)
      o.peers.push_back({&cluster.chip(c), programs[c], std::make_shared<WeightStore>(cluster.chip(c))});
    return o;
  }
  rt::Cluster cluster;
  std::vector<rt::Kernel> programs;
};
}  // namespace

TEST(CompilerDevice, ExpertsWithNoSplitOverTheChipsRunOnTheDeviceAlone) {
  // 255 experts on a ring of four chips: a slice of every expert per
  // stack of every chip would want 255 x 16 slices, past the kernel's
  // table of 1024, and the chips do not divide the experts, so the
  // experts stay on chip 0 (255 x 4); the peers hold none of them and the
  // run equals the reference.
  Ring ring(kFastModels);
  rt::Cluster& cluster = ring.cluster;
  const std::vector<rt::Kernel>& programs = ring.programs;
  const Options system = ring.system();
  const unsigned rows = 5, D = 64, F = 64, E = 255;
  refused_with([&] { rt::MoeSplit::plan(cluster.chip(0), cluster.chip(0).tiles(), E, F, D, rows, 16, cluster.chips()); },
               "at most 1024 in all");
  std::vector<float> tokens(rows);
  for (unsigned r = 0; r < rows; ++r) tokens[r] = static_cast<float>((r * 37 + 11) % 64);
  const std::map<std::string, std::vector<float>> in{{"tokens", tokens}};
  Executable ex(cluster.chip(0), programs[0], moe_layers(rows, D, F, E, 2), system);
  for (const rt::Graph::Node& n : ex.device_graph().nodes()) EXPECT_EQ(n.name.find(".gather"), std::string::npos) << n.name;
  for (const Op& op : ex.graph().ops()) {
    if (op.kind == OpKind::moe) {
      EXPECT_TRUE(op.slice_chips.empty()) << op.name << ": on the device alone";
    }
  }
  const auto out = ex.run(in);
  expect_reference(ex, in, out);
  for (const Options::Peer& p : system.peers) EXPECT_EQ(p.weights->bytes(), 0u);
}

TEST(CompilerDevice, ExpertsSpreadOverTheChipsByExpertEqualTheReferenceBitForBit) {
  // 256 experts (DeepSeek-V3's count) on a ring of four chips: no slice
  // split over the chips fits the kernel's table (256 x 16 slices), so
  // the experts spread by expert, chip c holding experts c, c + 4, ...
  // whole (64 x 4 slices), each chip's planes zero where another chip runs
  // a row's choice. At a decode row, 5 rows (choices on every chip) and
  // past a block of rows (which stays on chip 0), every run equals the
  // reference, run after run; each peer holds a quarter of the experts;
  // top-8 routing as DeepSeek-V3's.
  Ring ring(kFastModels);
  rt::Cluster& cluster = ring.cluster;
  const std::vector<rt::Kernel>& programs = ring.programs;
  const Options system = ring.system();
  const unsigned D = 64, F = 64, E = 256;
  for (const auto& [rows, k] : {std::pair{1u, 8u}, std::pair{5u, 2u}, std::pair{20u, 8u}, std::pair{70u, 2u}}) {
    SCOPED_TRACE(testing::Message() << rows << " rows, top " << k);
    std::vector<float> tokens(rows);
    for (unsigned r = 0; r < rows; ++r) tokens[r] = static_cast<float>((r * 37 + 11) % 64);
    const std::map<std::string, std::vector<float>> in{{"tokens", tokens}};
    Executable ex(cluster.chip(0), programs[0], moe_layers(rows, D, F, E, k), system);
    std::size_t gathers = 0;
    for (const rt::Graph::Node& n : ex.device_graph().nodes()) gathers += n.name.find(".gather") != std::string::npos;
    const bool spread = rows <= TKP_MOE_BLOCK;
    EXPECT_EQ(gathers, spread ? 2u : 0u);
    for (const Op& op : ex.graph().ops())
      if (op.kind == OpKind::moe) {
        EXPECT_EQ(op.expert_chips, spread ? 4u : 0u) << op.name;
        EXPECT_TRUE(op.slice_chips.empty()) << op.name;
      }
    const auto out = ex.run(in);
    expect_reference(ex, in, out);
    // Other tokens (other choices: the planes' rows a chip wrote before
    // are another chip's now), then the first again.
    std::map<std::string, std::vector<float>> other = in;
    for (unsigned r = 0; r < rows; ++r) other.at("tokens")[r] = static_cast<float>((r * 13 + 50) % 64);
    expect_reference(ex, other, ex.run(other));
    expect_bits(ex.run(in).at("layer1.residual"), out.at("layer1.residual"), "the first tokens again");
    // Each peer: its 64 experts' three 64 x 64 BF16 matrices a layer.
    if (spread) {
      for (const Options::Peer& p : system.peers) EXPECT_EQ(p.weights->bytes(), 2ull * E / 4 * 3 * D * F * 2);
    }
  }
}

TEST(CompilerDevice, ExpertsStreamedInChunksSplitOverTheChipsEqualTheReferenceBitForBit) {
  // 48 rows of 4096 on a ring of four chips: the slices stream their
  // weights in chunks on every chip's tiles, each chip's planes summed on
  // it, then the chips' sums; each peer holds a quarter of the experts.
  Ring ring(kFastModels);
  rt::Cluster& cluster = ring.cluster;
  const std::vector<rt::Kernel>& programs = ring.programs;
  const Options system = ring.system();
  const unsigned rows = 48, D = 4096, F = 128, E = 2;
  const rt::MoeSplit split = rt::MoeSplit::plan(cluster.chip(0), cluster.chip(0).tiles(), E, F, D, rows,
                                                (cluster.chips() * cluster.chip(0).tiles() + 1) / 2, cluster.chips());
  EXPECT_GT(split.chunk, 0u);
  std::vector<float> tokens(rows);
  for (unsigned r = 0; r < rows; ++r) tokens[r] = static_cast<float>((r * 37 + 11) % 64);
  const std::map<std::string, std::vector<float>> in{{"tokens", tokens}};
  Executable ex(cluster.chip(0), programs[0], moe_layers(rows, D, F, E, 2), system);
  std::size_t gathers = 0;
  for (const rt::Graph::Node& n : ex.device_graph().nodes()) gathers += n.name.find(".gather") != std::string::npos;
  EXPECT_EQ(gathers, 2u) << "both layers' experts spread over the chips";
  const auto out = ex.run(in);
  expect_reference(ex, in, out);
  expect_bits(ex.run(in).at("layer1.residual"), out.at("layer1.residual"), "a second run");
  for (const Options::Peer& p : system.peers) EXPECT_EQ(p.weights->bytes(), 2ull * E * 3 * D * F * 2 / 4);
}

TEST(CompilerDevice, ExpertsSplitOverTheChipsOfASystemEqualTheReferenceBitForBit) {
  // A ring of four chips: the experts' slices spread over all 32 tiles,
  // the chips handing each layer over through their tiles' semaphores.
  // Every run equals the reference (each chip's planes summed on it, then
  // the chips' sums); each chip holds a quarter of the experts' weights; at
  // 5 rows the experts take less time than on one chip; 130 rows (past a
  // block) stay on chip 0; a bad index fails the graph by name on chip 0
  // (the peers released) and the system serves on.
  Ring ring;
  rt::Cluster& cluster = ring.cluster;
  const std::vector<rt::Kernel>& programs = ring.programs;
  const Options system = ring.system();
  for (unsigned rows : {1u, 5u, 130u}) {
    SCOPED_TRACE(testing::Message() << rows << " rows");
    std::vector<float> tokens(rows);
    for (unsigned r = 0; r < rows; ++r) tokens[r] = static_cast<float>((r * 37 + 11) % 64);
    std::map<std::string, std::vector<float>> in{{"tokens", tokens}};
    Executable ex(cluster.chip(0), programs[0], moe_layers(rows, 256, 512, 8, 2), system);
    Executable alone(cluster.chip(0), programs[0], moe_layers(rows, 256, 512, 8, 2));
    // The experts' time (their nodes and the wait for the peers) against
    // one chip's, each read after its run (the marks are the chip's last launch's).
    double experts[2] = {0, 0};
    auto moe_seconds = [](const Executable& e) {
      double s = 0;
      for (std::size_t gi = 0; gi < e.groups().size(); ++gi)
        if (e.graph().ops()[static_cast<std::size_t>(e.groups()[gi].ops[0])].kind == OpKind::moe) s += e.node_seconds()[gi];
      return s;
    };
    const auto out = ex.run(in);
    experts[0] = moe_seconds(ex);
    expect_reference(ex, in, out);
    expect_reference(alone, in, alone.run(in));
    experts[1] = moe_seconds(alone);
    expect_bits(ex.run(in).at("layer1.residual"), out.at("layer1.residual"), "a second run");
    std::size_t gathers = 0;
    for (const rt::Graph::Node& n : ex.device_graph().nodes()) gathers += n.name.find(".gather") != std::string::npos;
    // Past a block of rows (TKP_MOE_BLOCK) the experts stay on chip 0.
    EXPECT_EQ(gathers, rows <= TKP_MOE_BLOCK ? 2u : 0u);
    std::printf("%u rows: experts and combine %.2f us on 4 chips, %.2f us on one; the run %.2f us, %.2f us\n", rows, experts[0] * 1e6,
                experts[1] * 1e6, ex.last_seconds() * 1e6, alone.last_seconds() * 1e6);
    // A few rows: each tile's share of the weights is a quarter and the
    // experts take less time than on one chip (one row: the hand-over costs
    // what the split saves at this size).
    if (rows == 5) {
      EXPECT_LT(experts[0], 0.9 * experts[1]);
    }
    if (rows == 5) {
      in.at("tokens")[3] = 64;  // one past the table: chip 0 fails before the experts, the peers are released
      try {
        ex.run(in);
        FAIL() << "an index out of range ran";
      } catch (const rt::DeviceError& e) {
        EXPECT_NE(std::string(e.what()).find("embed"), std::string::npos) << e.what();
      }
      in.at("tokens")[3] = 5;
      expect_reference(ex, in, ex.run(in));
    }
  }
  // Each peer holds a quarter of the experts' weights (2 layers of 8
  // experts' three 256 x 512 BF16 matrices), the same for the row counts
  // that spread.
  for (const Options::Peer& p : system.peers) EXPECT_EQ(p.weights->bytes(), 2ull * 8 * 3 * 256 * 512 * 2 / 4);
  // A peer that is not one: refused by name.
  Options bad;
  bad.peers.push_back({&cluster.chip(0), programs[0], nullptr});
  refused_with([&] { Executable e(cluster.chip(0), programs[0], moe_layers(1, 256, 512, 8, 2), bad); }, "peers are the other chips");
  bad.peers = {{&cluster.chip(1), programs[1], nullptr}, {&cluster.chip(1), programs[1], nullptr}};
  refused_with([&] { Executable e(cluster.chip(0), programs[0], moe_layers(1, 256, 512, 8, 2), bad); }, "chip 1 is a peer twice");
}

TEST(CompilerDevice, MatmulsSplitOverTheChipsOfASystemEqualTheReferenceBitForBit) {
  // Options::split_matmuls on a ring of four chips: each matmul on a
  // weight computes a quarter of its columns on each chip, from that
  // chip's columns of B only, reading A on chip 0 and writing there.
  // Decode (1 row) and prefill (40 rows) shapes equal the reference bit
  // for bit and the same graph on one chip; each chip holds a quarter of
  // the matmuls' weights; a graph that also spreads a moe op over the
  // chips hands both over in turn, bit for bit run after run.
  Ring ring;
  rt::Cluster& cluster = ring.cluster;
  const std::vector<rt::Kernel>& programs = ring.programs;
  auto system = [&] {
    Options s = ring.system();
    s.split_matmuls = compiler::Options::Split::always;
    return s;
  };
  for (unsigned rows : {1u, 40u}) {
    SCOPED_TRACE(testing::Message() << rows << " rows");
    std::map<std::string, std::vector<float>> in{{"x", seeded_values(std::size_t{rows} * 512, 7, 1.0f)}};
    const Options s = system();
    Executable ex(cluster.chip(0), programs[0], mlp(rows, 512, 1024), s);
    Executable alone(cluster.chip(0), programs[0], mlp(rows, 512, 1024));
    const auto out = ex.run(in);
    expect_reference(ex, in, out);
    expect_bits(out.at("residual"), alone.run(in).at("residual"), "one chip's");
    expect_bits(ex.run(in).at("residual"), out.at("residual"), "a second run");
    std::size_t gathers = 0;
    for (const rt::Graph::Node& n : ex.device_graph().nodes()) gathers += n.name.find(".gather") != std::string::npos;
    EXPECT_EQ(gathers, 2u);  // up and down
    // Chip 0's parts cover its quarter of the columns, every row once.
    for (std::size_t gi = 0; gi < ex.groups().size(); ++gi) {
      const Op& a = ex.graph().ops()[static_cast<std::size_t>(ex.groups()[gi].ops[0])];
      if (a.kind != OpKind::matmul) continue;
      const unsigned N = ex.graph().tensor(a.out).cols();
      std::uint64_t covered = 0;
      for (const Part& p : ex.tilings()[gi].parts) {
        EXPECT_LE(p.c1, N / 4) << a.name;
        covered += std::uint64_t{p.r1 - p.r0} * (p.c1 - p.c0);
      }
      EXPECT_EQ(covered, std::uint64_t{rows} * N / 4) << a.name;
    }
    // Each peer: a quarter of w1's and of w2's columns, BF16.
    for (const Options::Peer& p : s.peers) EXPECT_EQ(p.weights->bytes(), (512ull * 1024 + 1024ull * 512) * 2 / 4);
    std::printf("%u rows: %.2f us on 4 chips, %.2f us on one\n", rows, ex.last_seconds() * 1e6, alone.last_seconds() * 1e6);
  }
  {
    // A projection spread over the chips, then experts spread over them.
    Graph g;
    const unsigned rows = 5, d = 256;
    const int tokens = g.input("tokens", {rows});
    int x = g.gather_rows(g.weight("table", {64, d}, seeded_values(64ull * d, 9, 2.0f)), tokens, "embed");
    const int xb0 = g.cast(x, DType::bf16, "xb0");
    x = g.binary(OpKind::add, g.matmul(xb0, g.weight("proj", {d, d}, seeded_values(std::size_t{d} * d, 8, 0.2f), DType::bf16), DType::bf16, "project"), x,
                 "proj.residual");
    const int n = g.rmsnorm(x, g.weight("norm.weight", {d}, seeded_values(d, 1, 0.4f)), 1e-6f, "norm");
    const int xb = g.cast(n, DType::bf16, "xb");
    const int route = g.route(g.matmul(xb, g.weight("router", {d, 8}, seeded_values(std::size_t{d} * 8, 2, 0.5f), DType::bf16)), 2, true, "route");
    const std::size_t w = std::size_t{8} * d * 512;
    const int w1 = g.weight("w1", {8, d, 512}, seeded_values(w, 3, 0.2f), DType::bf16);
    const int w3 = g.weight("w3", {8, d, 512}, seeded_values(w, 4, 0.2f), DType::bf16);
    const int w2 = g.weight("w2", {8, 512, d}, seeded_values(w, 5, 0.2f), DType::bf16);
    g.output(g.binary(OpKind::add, g.moe(xb, route, w1, w3, w2, "experts"), x, "residual"));
    Executable ex(cluster.chip(0), programs[0], g, system());
    std::map<std::string, std::vector<float>> in{{"tokens", {3, 17, 40, 63, 0}}};
    const auto out = ex.run(in);
    expect_reference(ex, in, out);
    expect_bits(ex.run(in).at("residual"), out.at("residual"), "a second run");
  }
  {
    // More spread matmuls than one launch's nodes hold (each two device
    // nodes: its share and the wait for the peers): launches of whole
    // groups, each handing over afresh, every node timed.
    Graph g;
    int x = g.input("x", {1, 64});
    for (int i = 0; i < 260; ++i)
      x = g.matmul(x, g.weight(fmt::format("w{}", i), {64, 64}, seeded_values(64ull * 64, 100 + i, 0.25f), DType::bf16), DType::bf16);
    g.output(x);
    Executable ex(cluster.chip(0), programs[0], std::move(g), system());
    ASSERT_GT(ex.device_graph().nodes().size(), std::size_t{TKP_MARKS_MAX - 1});
    const std::map<std::string, std::vector<float>> in{{"x", seeded_values(64, 3, 1.0f)}};
    expect_reference(ex, in, ex.run(in));
    const std::vector<double> t = ex.node_seconds();
    for (std::size_t n = 0; n < t.size(); ++n) EXPECT_GT(t[n], 0.0) << "node " << n;
  }
}

TEST(CompilerDevice, AttentionSpreadOverTheChipsByHeadsKeepsEachChipsCachesBitForBit) {
  // Options::split_matmuls = always on the ring of four also spreads an
  // attention by heads: 8 heads over 4 KV heads, a KV head (and its two
  // query heads) on each chip, each chip appending to and reading its own
  // part of the paged caches. Steps that mix sequences, a prefill's graph
  // and a decode step's sharing the caches (the peers' parts too, by
  // name), equal the reference and one chip's run bit for bit; each chip
  // holds only its KV head's part of the caches, a peer's holding its
  // rows as the reference's caches do. With 2
  // KV heads over the four chips, two chips run the attention and two
  // hold nothing of it.
  Ring ring(kFastModels);
  rt::Cluster& cluster = ring.cluster;
  Options system = ring.system();
  system.split_matmuls = Options::Split::always;
  Executable step8(cluster.chip(0), ring.programs[0], paged_step(8, 3, 4, 8, 4), system);
  Options shared = system;
  shared.state = step8.state();
  Executable step3(cluster.chip(0), ring.programs[0], paged_step(3, 3, 4, 8, 4), shared);
  Executable alone8(cluster.chip(0), ring.programs[0], paged_step(8, 3, 4, 8, 4));
  Options alone_shared;
  alone_shared.state = alone8.state();
  Executable alone3(cluster.chip(0), ring.programs[0], paged_step(3, 3, 4, 8, 4), alone_shared);
  // Each chip's parts of the caches, a KV head each of 48 positions (the
  // device's too).
  EXPECT_EQ(step8.state().at("cache.k").size, 48ull * 16 * 2);
  EXPECT_EQ(step8.state().at("cache.v").size, 48ull * 8 * 2);
  for (unsigned c = 1; c < 4; ++c) {
    EXPECT_EQ(step8.state().at(fmt::format("cache.k@{}", c)).size, 48ull * 16 * 2);
    EXPECT_EQ(step8.state().at(fmt::format("cache.v@{}", c)).size, 48ull * 8 * 2);
    EXPECT_EQ(step3.state().at(fmt::format("cache.k@{}", c)).address, step8.state().at(fmt::format("cache.k@{}", c)).address);
  }
  std::size_t gathers = 0;
  for (const rt::Graph::Node& n : step8.device_graph().nodes()) gathers += n.name == "o.gather";
  EXPECT_EQ(gathers, 1u);
  const std::vector<float> pages = {5, 1, 9, 4, 0, 2, 11, 6, 7, 3, 10, 8};
  std::map<std::string, std::vector<float>> caches;
  std::vector<unsigned> length(3, 0);
  auto run = [&](Executable& e, Executable& one, const std::vector<std::pair<unsigned, unsigned>>& seq_rows, std::uint32_t seed) {
    std::map<std::string, std::vector<float>> in;
    const unsigned T = static_cast<unsigned>(e.graph().tensor(e.graph().outputs()[0]).rows());
    in["x"] = seeded_values(std::size_t{T} * 64, seed, 2.0f);
    in["pages"] = pages;
    for (const auto& [s, n] : seq_rows)
      for (unsigned i = 0; i < n; ++i) in["positions"].push_back(static_cast<float>(length[s]++)), in["sequences"].push_back(static_cast<float>(s));
    const auto out = e.run(in);
    const std::vector<std::vector<float>> ref = reference(e.graph(), in, &caches);
    expect_bits(out.at("o"), ref[static_cast<std::size_t>(e.graph().outputs()[0])], fmt::format("step of seed {}", seed));
    expect_bits(out.at("o"), one.run(in).at("o"), fmt::format("step of seed {} on one chip", seed));
  };
  run(step8, alone8, {{0, 5}, {2, 3}}, 70);
  run(step8, alone8, {{1, 6}, {0, 1}, {2, 1}}, 71);
  run(step3, alone3, {{2, 1}, {0, 1}, {1, 1}}, 72);
  run(step3, alone3, {{0, 1}, {1, 1}, {2, 1}}, 73);
  // Peer c's cache is KV head c of the reference's (BF16), position by position.
  for (unsigned c = 1; c < 4; ++c)
    for (const auto& [name, dim] : {std::pair<std::string, unsigned>{"cache.k", 16u}, {"cache.v", 8u}}) {
      const rt::Buffer& b = step8.state().at(fmt::format("{}@{}", name, c));
      std::vector<std::uint16_t> bits(b.size / 2);
      cluster.chip(c).read(b, bits.data(), b.size);
      std::vector<float> got(bits.size());
      for (std::size_t i = 0; i < bits.size(); ++i) {
        const std::uint32_t u = std::uint32_t{bits[i]} << 16;
        std::memcpy(&got[i], &u, 4);
      }
      const std::vector<float>& all = caches.at(name);
      const std::size_t head = std::size_t{48} * dim;
      expect_bits(got, std::vector<float>(all.begin() + c * head, all.begin() + (c + 1) * head), fmt::format("{} on chip {}", name, c));
    }
  // 2 KV heads over four chips: chip 0 and chip 1 run it, chips 2 and 3 hold none of it.
  Executable prefill(cluster.chip(0), ring.programs[0], attention_step(5, 16), system);
  shared.state = prefill.state();
  Executable decode(cluster.chip(0), ring.programs[0], attention_step(1, 16), shared);
  EXPECT_EQ(prefill.state().at("cache.k").size, 16ull * 16 * 2);
  EXPECT_EQ(prefill.state().at("cache.k@1").size, 16ull * 16 * 2);
  EXPECT_FALSE(prefill.state().count("cache.k@2"));
  EXPECT_FALSE(prefill.state().count("cache.v@3"));
  std::map<std::string, std::vector<float>> unpaged;
  for (const auto& [e, p, T, seed] : {std::tuple<Executable*, unsigned, unsigned, std::uint32_t>{&prefill, 0, 5, 80}, {&decode, 5, 1, 81},
                                      {&decode, 6, 1, 82}}) {
    const auto in = attention_inputs(p, T, seed);
    const auto out = e->run(in);
    expect_bits(out.at("o"), reference(e->graph(), in, &unpaged)[static_cast<std::size_t>(e->graph().outputs()[0])],
                fmt::format("{} rows at {}", T, p));
  }
}

namespace {
// Chip c's share of a tensor-parallel MLP over `chips` chips (Megatron's
// layout): x on every chip, the columns [c h, (c + 1) h) of w1 and b1 and
// those rows of w2 on chip c (h = H / chips), each chip's partial sums of
// the down projection all-reduced (in `sum`'s format), then the residual.
// With chips 1 and no collective: the whole MLP on one chip.
Graph tensor_parallel_mlp(unsigned c, unsigned chips, unsigned rows, unsigned D, unsigned H, DType sum = DType::f32, bool tree = false,
                          bool pull = false, bool collective = true) {
  const unsigned h = H / chips;
  const std::vector<float> w1 = seeded_values(std::size_t{D} * H, 2, 0.2f), b1 = seeded_values(H, 3, 0.5f),
                           w2 = seeded_values(std::size_t{H} * D, 4, 0.2f);
  std::vector<float> w1c, w2c(w2.begin() + static_cast<std::ptrdiff_t>(std::size_t{c} * h * D),
                              w2.begin() + static_cast<std::ptrdiff_t>(std::size_t{c + 1} * h * D));
  for (unsigned d = 0; d < D; ++d)
    w1c.insert(w1c.end(), w1.begin() + static_cast<std::ptrdiff_t>(std::size_t{d} * H + c * h),
               w1.begin() + static_cast<std::ptrdiff_t>(std::size_t{d} * H + (c + 1) * h));
  Graph g;
  const int x = g.input("x", {rows, D});
  const int up = g.matmul(x, g.weight("w1", {D, h}, w1c, DType::bf16), DType::bf16, "up");
  const int act = g.unary(OpKind::gelu, g.binary(OpKind::add, up, g.weight("b1", {h}, {b1.begin() + c * h, b1.begin() + (c + 1) * h})), "act");
  int part = g.matmul(act, g.weight("w2", {h, D}, w2c, DType::bf16), DType::bf16, "down");
  if (sum != DType::f32) part = g.cast(part, sum, "narrow");
  const int y = collective ? g.all_reduce(part, chips, tree, pull, "sum") : part;
  g.output(g.binary(OpKind::add, y, x, "residual"));
  return g;
}

// Options whose ring collectives' buffers lie at one address on every chip of the ring.
Options symmetric(Ring& ring) {
  Options o;
  std::vector<rt::Device*> chips;
  for (unsigned c = 0; c < ring.cluster.chips(); ++c) chips.push_back(&ring.cluster.chip(c));
  o.symmetric = std::make_shared<SymmetricStore>(chips);
  return o;
}

// A graph with collectives on every chip of the ring, graphs[c] on chip c
// (SPMD): an executable a chip, and the graphs as reference_spmd takes them.
struct Spmd {
  Spmd(Ring& ring, std::vector<Graph> g, const Options& o) : graphs(std::move(g)) {
    for (unsigned c = 0; c < graphs.size(); ++c) {
      owned.push_back(std::make_unique<Executable>(ring.cluster.chip(c), ring.programs[c], graphs[c], o));
      execs.push_back(owned.back().get());
      refs.push_back(&graphs[c]);
    }
  }
  std::vector<Graph> graphs;
  std::vector<std::unique_ptr<Executable>> owned;
  std::vector<Executable*> execs;
  std::vector<const Graph*> refs;
};
}  // namespace

TEST(CompilerDevice, ATensorParallelMlpAllReducesItsPartialSumsOnTheChipsAsTheEnginesReferenceHasIt) {
  // Graph::all_reduce on the ring of four: each chip runs its quarter of
  // an MLP's hidden layer and the chips' communication engines sum the
  // partial outputs, the tile programs posting the collective (no host
  // round trip). Every chip's output equals reference_spmd's bit for bit
  // (ring and tree, push and pull, FP32 and BF16 sums), the same on every
  // chip; within FP32's rounding of the MLP on one chip (the sums' order
  // differs), within BF16's where the partials travel in BF16.
  Ring ring(kFastModels);
  rt::Cluster& cluster = ring.cluster;
  const unsigned rows = 3, D = 256, H = 1024;
  const std::map<std::string, std::vector<float>> in{{"x", seeded_values(std::size_t{rows} * D, 7, 1.0f)}};
  // The whole MLP on chip 0 alone, for comparison.
  Executable whole(cluster.chip(0), ring.programs[0], tensor_parallel_mlp(0, 1, rows, D, H, DType::f32, false, false, false));
  const std::vector<float> alone = whole.run(in).at("residual");
  struct Case {
    DType sum;
    bool tree, pull;
    float tolerance;  // of the largest magnitude, against one chip
  };
  for (const Case& k : {Case{DType::f32, false, false, 1e-5f}, Case{DType::f32, true, true, 1e-5f}, Case{DType::bf16, false, true, 2e-2f}}) {
    SCOPED_TRACE(testing::Message() << name(k.sum) << (k.tree ? " tree" : " ring") << (k.pull ? " pull" : " push"));
    std::vector<Graph> shards;
    for (unsigned c = 0; c < 4; ++c) shards.push_back(tensor_parallel_mlp(c, 4, rows, D, H, k.sum, k.tree, k.pull));
    Spmd tp(ring, std::move(shards), symmetric(ring));
    const std::vector<Graph>& graphs = tp.graphs;
    const std::vector<Executable*>& execs = tp.execs;
    const std::vector<std::map<std::string, std::vector<float>>> inputs(4, in);
    const auto out = run_together(execs, inputs);
    const auto ref = reference_spmd(tp.refs, inputs);
    const std::size_t res = static_cast<std::size_t>(graphs[0].outputs()[0]);
    for (unsigned c = 0; c < 4; ++c) expect_bits(out[c].at("residual"), ref[c][res], fmt::format("chip {}", c));
    for (unsigned c = 1; c < 4; ++c) expect_bits(out[c].at("residual"), out[0].at("residual"), fmt::format("chip {} against chip 0", c));
    float big = 0, worst = 0;
    for (std::size_t i = 0; i < alone.size(); ++i)
      big = std::max(big, std::fabs(alone[i])), worst = std::max(worst, std::fabs(alone[i] - out[0].at("residual")[i]));
    EXPECT_LE(worst, k.tolerance * big) << "against the MLP on one chip";
    EXPECT_GT(worst, 0.0f) << "the partial sums add in another order than one chip's";
    // The sums' order is the engines': the chips' partials added in chip
    // order instead give other bits (BF16: each addition rounded).
    if (k.sum == DType::bf16) {
      const Graph& g = graphs[0];
      const int summed = g.ops()[static_cast<std::size_t>(g.producer(g.outputs()[0]))].in[0];
      const int partial = g.ops()[static_cast<std::size_t>(g.producer(summed))].in[0];
      const std::vector<float>& want = ref[0][static_cast<std::size_t>(summed)];
      std::size_t other = 0;
      for (std::size_t i = 0; i < want.size(); ++i) {
        float acc = ref[0][static_cast<std::size_t>(partial)][i];
        for (unsigned c = 1; c < 4; ++c)
          acc = static_cast<float>(num::quantize(num::Format::BF16, acc + ref[c][static_cast<std::size_t>(partial)][i]));
        other += std::memcmp(&acc, &want[i], 4) != 0;
      }
      EXPECT_GT(other, 0u) << "BF16 sums in chip order round otherwise than the ring's";
    }
    // A second run gives the same bits.
    expect_bits(run_together(execs, inputs)[2].at("residual"), out[2].at("residual"), "a second run");
  }
}

TEST(CompilerDevice, AllToAllSwapsTheChipsBlocksPushedOrPulled) {
  // Graph::all_to_all on the ring of four: chip j's block c of the result
  // is chip c's block j of the operand (8 rows a chip, blocks of 2),
  // pushed (into every chip's result) and pulled (from every chip's
  // operand, at one address on every chip: an intermediate in BF16, and a
  // graph input in FP32): every chip's outputs equal reference_spmd's bit
  // for bit, block by block the chips' inputs, a second run the same
  // bits. A pull without one address on every chip is refused by name.
  Ring ring(kFastModels);
  const Options o = symmetric(ring);
  const unsigned rows = 8, D = 48, block = rows / 4 * D;
  // Chip 2's memory used a little more than the others': the same
  // allocations give it other addresses unless they must be one.
  const rt::Buffer skew = ring.cluster.chip(2).alloc(4096);
  auto swapped = [&](unsigned c, bool pull) {
    Graph g;
    const int x = g.input("x", {rows, D});
    const int act = g.cast(g.binary(OpKind::add, g.unary(OpKind::silu, x), g.weight("bias", {D}, seeded_values(D, 3 + c, 1.0f))),
                           DType::bf16, "act");
    g.output(g.all_to_all(act, 4, pull, "act_swapped"));
    g.output(g.all_to_all(x, 4, pull, "x_swapped"));
    return g;
  };
  std::vector<std::map<std::string, std::vector<float>>> inputs;
  for (unsigned c = 0; c < 4; ++c) inputs.push_back({{"x", seeded_values(std::size_t{rows} * D, 60 + c, 2.0f)}});
  for (bool pull : {false, true}) {
    SCOPED_TRACE(pull ? "pull" : "push");
    std::vector<Graph> each;
    for (unsigned c = 0; c < 4; ++c) each.push_back(swapped(c, pull));
    Spmd run(ring, std::move(each), o);
    const auto out = run_together(run.execs, inputs);
    const auto ref = reference_spmd(run.refs, inputs);
    for (unsigned c = 0; c < 4; ++c)
      for (unsigned k = 0; k < 2; ++k) {
        const char* t = k ? "x_swapped" : "act_swapped";
        expect_bits(out[c].at(t), ref[c][static_cast<std::size_t>(run.graphs[c].outputs()[k])], fmt::format("chip {}'s {}", c, t));
      }
    for (unsigned j = 0; j < 4; ++j)
      for (unsigned c = 0; c < 4; ++c)
        expect_bits({out[j].at("x_swapped").begin() + c * block, out[j].at("x_swapped").begin() + (c + 1) * block},
                    {inputs[c]["x"].begin() + j * block, inputs[c]["x"].begin() + (j + 1) * block}, fmt::format("chip {}'s block {}", j, c));
    const auto again = run_together(run.execs, inputs);
    for (unsigned c = 0; c < 4; ++c) expect_bits(again[c].at("act_swapped"), out[c].at("act_swapped"), fmt::format("chip {} again", c));
  }
  refused_with([&] { Executable(ring.cluster.chip(1), ring.programs[1], swapped(1, true)); },
               "all_to_all 'act_swapped' pulled needs Options::symmetric");
  ring.cluster.chip(2).free(skew);
}

TEST(CompilerDevice, AllGatherPutsTheChipsRowsInChipOrderAndCollectivesAreCheckedAndFailByName) {
  // Graph::all_gather on the ring of four: each chip's normed rows, every
  // chip then holding all of them in chip order (as an intermediate and as
  // an output), equal to reference_spmd bit for bit. A collective the
  // system cannot run is refused when compiled, naming the op; one the
  // engines fail (more than their staging buffer holds) comes back from
  // every chip as rt::DeviceError naming it, and the chips serve on.
  Ring ring([] {
    std::vector<std::string> s = kFastModels;
    s.push_back("c2c.comm_staging=256KiB");  // the least: a quarter of it for a ring's slots, 64 KiB
    return s;
  }());
  rt::Cluster& cluster = ring.cluster;
  const Options o = symmetric(ring);
  const unsigned rows = 5, D = 64;
  auto gathered = [&](unsigned c, bool pull, unsigned big = 0) {
    Graph g;
    const int x = g.input("x", {rows, D});
    const int all = g.all_gather(g.rmsnorm(x, g.weight("norm", {D}, seeded_values(D, 1 + c, 2.0f))), 4, pull, "all");
    g.output(all);
    g.output(g.binary(OpKind::add, g.unary(OpKind::relu, all), g.weight("bias", {D}, seeded_values(D, 9, 1.0f)), "out"));
    if (big) g.output(g.all_reduce(g.input("wide", {big, 256}), 4, false, false, "big"));
    return g;
  };
  std::vector<std::map<std::string, std::vector<float>>> inputs;
  for (unsigned c = 0; c < 4; ++c) inputs.push_back({{"x", seeded_values(std::size_t{rows} * D, 20 + c, 3.0f)}});
  for (bool pull : {false, true}) {
    SCOPED_TRACE(pull ? "pull" : "push");
    std::vector<Graph> each;
    for (unsigned c = 0; c < 4; ++c) each.push_back(gathered(c, pull));
    Spmd run(ring, std::move(each), o);
    const std::vector<Graph>& graphs = run.graphs;
    const auto out = run_together(run.execs, inputs);
    const auto ref = reference_spmd(run.refs, inputs);
    for (unsigned c = 0; c < 4; ++c)
      for (const char* t : {"all", "out"}) {
        const int id = graphs[c].outputs()[std::string(t) == "all" ? 0 : 1];
        expect_bits(out[c].at(t), ref[c][static_cast<std::size_t>(id)], fmt::format("chip {}'s {}", c, t));
      }
    // Chip k's rows, normed by its own weights, at k rows x D of the gathered.
    const int normed = graphs[2].ops()[static_cast<std::size_t>(graphs[2].producer(graphs[2].outputs()[0]))].in[0];
    expect_bits({out[0].at("all").begin() + 2 * rows * D, out[0].at("all").begin() + 3 * rows * D}, ref[2][static_cast<std::size_t>(normed)],
                "chip 2's rows on chip 0");
  }
  // Refused when compiled, by name.
  refused_with([&] { Executable(cluster.chip(2), ring.programs[2], [] {
                       Graph g;
                       g.output(g.all_reduce(g.input("x", {4, 4}), 2, false, false, "half"));
                       return g;
                     }(), o); },
               "all_reduce 'half' combines 2 chips' values from chip 0 on (Options::first_chip); the device is chip 2 of a system of 4");
  refused_with([&] { Executable(cluster.chip(1), ring.programs[1], gathered(1, false)); }, "all_gather 'all' over a ring needs Options::symmetric");
  refused_with([&] {
    Options p = o;
    p.peers.push_back({&cluster.chip(2), ring.programs[2], nullptr});
    Executable(cluster.chip(1), ring.programs[1], gathered(1, false), p);
  }, "without peers");
  refused_with([&] { reference(gathered(0, false), inputs[0]); }, "all_gather 'all' combines 4 chips' values: reference_spmd");
  {
    Executable one(cluster.chip(0), ring.programs[0], gathered(0, false), o);
    refused_with([&] { run_together({&one}, {inputs[0]}); },
                 "run_together: chip 0's all_gather 'all' spans chips 0 to 3, and chip 1 has no executable here");
  }
  // The engines fail a ring whose slots outgrow the staging buffer: every
  // chip's run fails naming the op; then each chip runs its graph again.
  std::vector<Graph> wide_graphs, small;
  for (unsigned c = 0; c < 4; ++c) wide_graphs.push_back(gathered(c, false, 128)), small.push_back(gathered(c, false));
  Spmd failing(ring, std::move(wide_graphs), o);
  const std::vector<Executable*>& execs = failing.execs;
  std::vector<std::map<std::string, std::vector<float>>> wide = inputs;
  for (unsigned c = 0; c < 4; ++c) wide[c]["wide"] = seeded_values(128 * 256, 40 + c, 1.0f);  // 96 KiB of slots
  try {
    run_together(execs, wide);
    FAIL() << "a ring past the staging buffer ran";
  } catch (const rt::DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("graph node 3 'big', operation 0 of its program on tile 0: a collective the chip's "
                                         "communication engine failed"),
              std::string::npos)
        << e.what();
  }
  for (unsigned c = 0; c < 4; ++c) EXPECT_THROW(execs[c]->finish(), std::logic_error) << "chip " << c << "'s run was finished";
  Spmd again(ring, std::move(small), o);
  const auto out = run_together(again.execs, inputs);
  const auto ref = reference_spmd(again.refs, inputs);
  for (unsigned c = 0; c < 4; ++c)
    expect_bits(out[c].at("out"), ref[c][static_cast<std::size_t>(again.graphs[c].outputs()[1])], fmt::format("chip {} after", c));
}

TEST(CompilerDevice, GroupsOfChipsRunTheirCollectivesAtOnceEachOverItsOwnChips) {
  // The ring of four as two groups of two (Options::first_chip 0 and 2,
  // each with a SymmetricStore of its two chips): every chip's graph
  // all-reduces (ring and tree, push and pull), all-gathers and
  // all-to-alls over its group; the four run at once, and each group's
  // outputs equal reference_spmd over its own two graphs bit for bit. A
  // chip outside the group, a store of another group and a group run
  // without one of its chips are refused by name.
  Ring ring(kFastModels);
  rt::Cluster& cluster = ring.cluster;
  const unsigned rows = 4, D = 64;
  auto graph = [&](unsigned c, bool tree, bool pull) {
    Graph g;
    const int x = g.rmsnorm(g.input("x", {rows, D}), g.weight("norm", {D}, seeded_values(D, 60 + c, 2.0f)));
    g.output(g.all_reduce(x, 2, tree, pull, "sum"));
    g.output(g.all_gather(x, 2, pull, "all"));
    g.output(g.all_to_all(x, 2, pull, "swap"));
    return g;
  };
  std::vector<std::shared_ptr<SymmetricStore>> stores;
  std::vector<Options> opts(2);
  for (unsigned grp = 0; grp < 2; ++grp) {
    stores.push_back(std::make_shared<SymmetricStore>(std::vector<rt::Device*>{&cluster.chip(2 * grp), &cluster.chip(2 * grp + 1)}));
    opts[grp].symmetric = stores.back(), opts[grp].first_chip = 2 * grp;
  }
  std::vector<std::map<std::string, std::vector<float>>> inputs;
  for (unsigned c = 0; c < 4; ++c) inputs.push_back({{"x", seeded_values(std::size_t{rows} * D, 70 + c, 3.0f)}});
  for (const bool tree : {false, true})
    for (const bool pull : {false, true}) {
      SCOPED_TRACE(fmt::format("{} {}", tree ? "tree" : "ring", pull ? "pull" : "push"));
      std::vector<Graph> graphs;
      for (unsigned c = 0; c < 4; ++c) graphs.push_back(graph(c, tree, pull));
      std::vector<std::unique_ptr<Executable>> owned;
      std::vector<Executable*> execs;
      for (unsigned c = 0; c < 4; ++c) {
        owned.push_back(std::make_unique<Executable>(cluster.chip(c), ring.programs[c], graphs[c], opts[c / 2]));
        execs.push_back(owned.back().get());
      }
      const auto out = run_together(execs, inputs);
      for (unsigned grp = 0; grp < 2; ++grp) {
        const auto ref = reference_spmd({&graphs[2 * grp], &graphs[2 * grp + 1]}, {inputs[2 * grp], inputs[2 * grp + 1]});
        for (unsigned r = 0; r < 2; ++r) {
          const unsigned c = 2 * grp + r;
          for (unsigned k = 0; k < 3; ++k) {
            const std::string name = k == 0 ? "sum" : k == 1 ? "all" : "swap";
            expect_bits(out[c].at(name), ref[r][static_cast<std::size_t>(graphs[c].outputs()[k])], fmt::format("chip {}'s {}", c, name));
          }
        }
      }
      // The groups' sums differ (each its own two chips'), and chip 0's rows
      // reach chip 1, not chip 2.
      EXPECT_NE(out[0].at("sum"), out[2].at("sum"));
      EXPECT_EQ(std::vector<float>(out[1].at("all").begin(), out[1].at("all").begin() + rows * D),
                std::vector<float>(out[0].at("all").begin(), out[0].at("all").begin() + rows * D));
    }
  refused_with([&] { Executable(cluster.chip(2), ring.programs[2], graph(2, false, false), opts[0]); },
               "all_reduce 'sum' combines 2 chips' values from chip 0 on (Options::first_chip); the device is chip 2 of a system of 4");
  refused_with([&] {
    Options wrong = opts[1];
    wrong.symmetric = stores[0];
    Executable(cluster.chip(2), ring.programs[2], graph(2, false, false), wrong);
  }, "all_reduce 'sum' over a ring needs Options::symmetric, a SymmetricStore of the group's 2 chips from chip 2");
  Executable alone(cluster.chip(2), ring.programs[2], graph(2, false, false), opts[1]);
  refused_with([&] { run_together({&alone}, {inputs[2]}); },
               "run_together: chip 2's all_reduce 'sum' spans chips 2 to 3, and chip 3 has no executable here");
}

TEST(CompilerDevice, ATensorParallelMlpWithAnAllReduceOutrunsOneChipAndTheColumnSplit) {
  // An MLP of 1024 x 4096 (16 MiB of BF16 weights) on the ring of four,
  // virtual time: tensor parallel with the all-reduce (each chip streams
  // a quarter of the weights, the engines sum 4 KiB a row), against the
  // whole MLP on one chip and against Options::split_matmuls (both
  // matmuls by columns over the chips, chip 0 holding the activations:
  // every peer reads A there and writes its columns back). Measured here
  // (2026-12-06, the fast models): 1 row 43.1 us against 96.5 alone and
  // 54.2 split; 32 rows 77.8 against 148.5 and 115.9 (the detailed NoC and
  // HBM: 45.3, 107.0, 56.9; 85.3, 165.7, 125.0).
  Ring ring(kFastModels);
  rt::Cluster& cluster = ring.cluster;
  const unsigned D = 1024, H = 4096;
  const Options o = symmetric(ring);
  Options split = ring.system();
  split.split_matmuls = Options::Split::always;
  for (unsigned rows : {1u, 32u}) {
    SCOPED_TRACE(testing::Message() << rows << " rows");
    const std::map<std::string, std::vector<float>> in{{"x", seeded_values(std::size_t{rows} * D, 7, 1.0f)}};
    Executable whole(cluster.chip(0), ring.programs[0], tensor_parallel_mlp(0, 1, rows, D, H, DType::f32, false, false, false));
    Executable spread(cluster.chip(0), ring.programs[0], tensor_parallel_mlp(0, 1, rows, D, H, DType::f32, false, false, false), split);
    const std::vector<float> want = whole.run(in).at("residual");
    spread.run(in);
    std::vector<Graph> shards;
    for (unsigned c = 0; c < 4; ++c) shards.push_back(tensor_parallel_mlp(c, 4, rows, D, H));
    Spmd shard(ring, std::move(shards), o);
    const auto out = run_together(shard.execs, std::vector<std::map<std::string, std::vector<float>>>(4, in));
    double tp = 0;
    for (const Executable* x : shard.execs) tp = std::max(tp, x->last_seconds());
    std::printf("tensor parallel MLP %u x %u, %u rows: all-reduce on four chips %.1f us, one chip %.1f us, columns split %.1f us\n", D, H,
                rows, tp * 1e6, whole.last_seconds() * 1e6, spread.last_seconds() * 1e6);
    EXPECT_LT(tp, 0.6 * whole.last_seconds());
    EXPECT_LT(tp, spread.last_seconds());
    float big = 0, worst = 0;
    for (std::size_t i = 0; i < want.size(); ++i)
      big = std::max(big, std::fabs(want[i])), worst = std::max(worst, std::fabs(want[i] - out[0].at("residual")[i]));
    EXPECT_LE(worst, 1e-5f * big);
  }
}

TEST(CompilerDevice, ExpertParallelMoeDispatchesItsRowsToTheExpertsChipsAndCombinesThemBack) {
  // DeepSeek's layout on the ring of four: every chip routes its own 12
  // rows (data parallel) over 8 experts, top 3, expert e on chip e mod 4.
  // Each chip packs the rows by the chips their choices are on
  // (Graph::dispatch, and their choices: dispatch_route), an all-to-all
  // sends each chip its slots, the chip runs its two experts on them
  // (moe_local), a second all-to-all brings the slots' sums back and the
  // chip adds them in chip order (combine). Pushed and pulled: every
  // chip's output equals reference_spmd's bit for bit, and the one-chip
  // moe's with the experts spread by expert over four chips (the same sums
  // in the same order) on the chip's rows. With 3 slots a chip rows are
  // dropped (GShard's capacity): the chips still equal reference_spmd, and
  // differ from the run that dropped none.
  Ring ring(kFastModels);
  const Options o = symmetric(ring);
  const unsigned T = 12, D = 128, F = 256, E = 8, K = 3, N = 4;
  const std::vector<float> router = seeded_values(std::size_t{D} * E, 91, 0.5f);
  std::vector<float> w[3];
  for (int i = 0; i < 3; ++i) w[i] = seeded_values(std::size_t{E} * D * F, 92 + static_cast<unsigned>(i), 0.2f);
  // Chip c's experts (e mod N = c) of an [E, a, b] weight.
  auto experts_of = [&](const std::vector<float>& all, unsigned c) {
    std::vector<float> mine;
    for (unsigned e = c; e < E; e += N)
      mine.insert(mine.end(), all.begin() + static_cast<std::ptrdiff_t>(std::size_t{e} * D * F),
                  all.begin() + static_cast<std::ptrdiff_t>(std::size_t{e + 1} * D * F));
    return mine;
  };
  // The rows, their router and route, on every chip alike.
  struct Routed {
    int xb, route;
  };
  auto routed = [&](Graph& g) {
    const int x = g.input("x", {T, D});
    const int logits = g.matmul(x, g.weight("router", {D, E}, router), DType::bf16, "logits");
    return Routed{g.cast(x, DType::bf16, "xb"), g.route(logits, K, true, "route")};
  };
  auto layer = [&](unsigned c, bool pull, unsigned capacity) {
    Graph g;
    const Routed r = routed(g);
    const int xs = g.all_to_all(g.dispatch(r.xb, r.route, N, capacity, "dispatch"), N, pull, "sent");
    const int rs = g.all_to_all(g.dispatch_route(r.route, N, capacity, "choices"), N, pull, "their_choices");
    const int y = g.moe_local(xs, rs, g.weight("w1", {E / N, D, F}, experts_of(w[0], c), DType::bf16),
                              g.weight("w3", {E / N, D, F}, experts_of(w[1], c), DType::bf16),
                              g.weight("w2", {E / N, F, D}, experts_of(w[2], c), DType::bf16), c, "experts");
    g.output(g.combine(g.all_to_all(y, N, pull, "back"), r.route, N, capacity, "out"));
    return g;
  };
  std::vector<std::map<std::string, std::vector<float>>> inputs;
  for (unsigned c = 0; c < N; ++c) inputs.push_back({{"x", seeded_values(std::size_t{T} * D, 70 + c, 2.0f)}});
  std::vector<std::vector<float>> full(N);
  for (unsigned capacity : {0u, 3u})
    for (bool pull : {false, true}) {
      SCOPED_TRACE(fmt::format("{} slots a chip, {}", capacity ? capacity : T, pull ? "pulled" : "pushed"));
      std::vector<Graph> each;
      for (unsigned c = 0; c < N; ++c) each.push_back(layer(c, pull, capacity));
      Spmd run(ring, std::move(each), o);
      std::vector<const Graph*> compiled;
      for (const Executable* e : run.execs) compiled.push_back(&e->graph());
      const auto out = run_together(run.execs, inputs);
      const auto ref = reference_spmd(compiled, inputs);
      for (unsigned c = 0; c < N; ++c) expect_bits(out[c].at("out"), ref[c][static_cast<std::size_t>(run.graphs[c].outputs()[0])], fmt::format("chip {}", c));
      if (capacity) {
        std::size_t differ = 0;
        for (unsigned c = 0; c < N; ++c)
          for (std::size_t i = 0; i < full[c].size(); ++i) differ += out[c].at("out")[i] != full[c][i];
        EXPECT_GT(differ, std::size_t{D}) << "no row dropped with 3 slots a chip";
        continue;
      }
      // The one-chip moe on each chip's rows, its experts spread by expert
      // over four chips in the slices the chips' experts ran in.
      const Graph& one = *compiled[0];
      unsigned slices = 0;
      for (const Op& op : one.ops())
        if (op.kind == OpKind::moe) slices = op.slices;
      ASSERT_GT(slices, 0u);
      for (unsigned c = 0; c < N; ++c) {
        Graph g;
        const Routed r = routed(g);
        const int y = g.moe(r.xb, r.route, g.weight("w1", {E, D, F}, w[0], DType::bf16), g.weight("w3", {E, D, F}, w[1], DType::bf16),
                            g.weight("w2", {E, F, D}, w[2], DType::bf16), "experts");
        g.output(y);
        g.split_experts(static_cast<int>(g.ops().size()) - 1, slices, {}, 0, N);
        full[c] = out[c].at("out");
        expect_bits(full[c], reference(g, inputs[c])[static_cast<std::size_t>(y)], fmt::format("chip {} against one chip's moe", c));
      }
    }
}

TEST(CompilerDevice, AGraphOfSeveralLaunchesRunsItsCollectivesInStepOnEveryChip) {
  // 256 layers of a matmul (its RMSNorm the prologue) on each chip's own
  // weights and an all-reduce of the products: 512 nodes on each chip of
  // the ring of four, past a launch's 510, so two launches a chip, the
  // last all-reduce in the second. run_together posts launch 1 on every
  // chip once every chip's launch 0 is over: every chip's output equals
  // reference_spmd's bit for bit, run after run. A chip whose graph has
  // one node more before them has an all-reduce in another launch than
  // the others': refused by name before any chip starts, and the system
  // serves on.
  Ring ring(kFastModels);
  const unsigned layers = 256, D = 64;
  auto build = [&](unsigned c, bool extra) {
    Graph g;
    int x = g.input("x", {2, D});
    if (extra) x = g.move({x}, {2, D}, {{0, 0, 0, 2 * D, 1, 0, 0}}, "copy");
    const int ones = g.weight("ones", {D}, std::vector<float>(D, 1.0f));
    for (unsigned l = 0; l < layers; ++l) {
      const int n = g.rmsnorm(x, ones, 1e-6f, fmt::format("norm{}", l));
      const int y = g.matmul(n, g.weight(fmt::format("w{}", l), {D, D}, seeded_values(std::size_t{D} * D, 1000 * c + l, 0.5f), DType::bf16),
                             DType::bf16, fmt::format("mm{}", l));
      x = g.all_reduce(y, 4, false, false, fmt::format("sum{}", l));
    }
    g.output(x);
    return g;
  };
  std::vector<Graph> shards;
  for (unsigned c = 0; c < 4; ++c) shards.push_back(build(c, false));
  Spmd tp(ring, std::move(shards), symmetric(ring));
  EXPECT_EQ(tp.execs[0]->groups().size(), 2u * layers);
  EXPECT_EQ(tp.execs[0]->device_graph().nodes().size(), 2u * layers);
  std::vector<std::map<std::string, std::vector<float>>> inputs;
  for (unsigned c = 0; c < 4; ++c) inputs.push_back({{"x", seeded_values(2 * D, 50 + c, 2.0f)}});
  const auto out = run_together(tp.execs, inputs);
  const auto ref = reference_spmd(tp.refs, inputs);
  const std::size_t res = static_cast<std::size_t>(tp.graphs[0].outputs()[0]);
  float big = 0;
  for (float v : ref[0][res]) big = std::max(big, std::fabs(v));
  EXPECT_GT(big, 0.1f) << "the sums stay in range through the layers";
  for (unsigned c = 0; c < 4; ++c) expect_bits(out[c].at("sum255"), ref[c][res], fmt::format("chip {}", c));
  expect_bits(run_together(tp.execs, inputs)[3].at("sum255"), out[3].at("sum255"), "a second run");
  std::vector<Graph> skewed;
  for (unsigned c = 0; c < 4; ++c) skewed.push_back(build(c, c == 2));
  Spmd bad(ring, std::move(skewed), symmetric(ring));
  refused_with([&] { run_together(bad.execs, inputs); }, "each collective must be in the same launch on every chip");
  expect_bits(run_together(tp.execs, inputs)[0].at("sum255"), out[0].at("sum255"), "after the refusal");
}

TEST(CompilerDevice, AChipFailingBeforeItsCollectiveFailsTheGroupAtOnceAndTheNextRunIsRight) {
  // The ring of four, each chip an embedding lookup and a chain of
  // matmuls summed over the chips (push ring and pull tree all-reduces).
  // Chip 0's token past the table fails its launch at the lookup: its CP
  // gives up its collectives over the group (CE_ABORT), and the other
  // chips' collectives fail as they post them, at once; the run reports
  // chip 0's failure, in a few microseconds where
  // the watchdogs took 100 ms. Likewise where the host cannot post chip
  // 2's part (an input missing). After each, the engines are reset and the
  // next run equals reference_spmd bit for bit on every chip (before the
  // reset the engines were out of step: the next run failed at its
  // watchdog, or combined a stale collective).
  Ring ring(kFastModels);
  const Options o = symmetric(ring);
  auto graph = [](unsigned c, bool pull) {
    Graph g;
    const int tokens = g.input("tokens", {4});
    int x = g.gather_rows(g.weight("table", {16, 256}, seeded_values(16 * 256, 1 + c, 2.0f)), tokens, "embed");
    for (unsigned k = 0; k < 6; ++k)  // (chip 0 fails before these, the others post their collectives after them)
      x = g.matmul(g.cast(x, DType::bf16), g.weight(fmt::format("w{}", k), {256, 256}, seeded_values(256 * 256, 9 + k, 0.1f), DType::bf16),
                   DType::bf16, fmt::format("late{}", k));
    g.output(g.all_reduce(x, 4, pull, pull, "sum"));
    return g;
  };
  for (bool pull : {false, true}) {
    SCOPED_TRACE(pull ? "pull tree" : "push ring");
    std::vector<Graph> each;
    for (unsigned c = 0; c < 4; ++c) each.push_back(graph(c, pull));
    Spmd run(ring, std::move(each), o);
    const std::vector<std::map<std::string, std::vector<float>>> inputs(4, {{"tokens", {1, 2, 3, 4}}});
    const auto ref = reference_spmd(run.refs, inputs);
    auto right = [&](const char* after) {
      const auto out = run_together(run.execs, inputs);
      for (unsigned c = 0; c < 4; ++c)
        expect_bits(out[c].at("sum"), ref[c][static_cast<std::size_t>(run.graphs[c].outputs()[0])], fmt::format("chip {} {}", c, after));
    };
    right("first");
    const double ran = run.execs[0]->last_seconds();
    auto bad = inputs;
    bad[0].at("tokens")[2] = 16;  // one past the table
    const double t0 = ring.cluster.chip(1).simulated_seconds();
    try {
      run_together(run.execs, bad);
      ADD_FAILURE() << "a token past the table ran";
    } catch (const rt::DeviceError& e) {
      EXPECT_NE(std::string(e.what()).find("graph node 0 'embed'"), std::string::npos) << e.what();
      EXPECT_EQ(e.gave_up, -1) << "the cause, not a chip giving up: " << e.what();
    }
    const double failed_us = (ring.cluster.chip(1).simulated_seconds() - t0) * 1e6;
    std::printf("a run that chip 0 fails before its collective: %.2f us (the good run %.2f us)\n", failed_us, ran * 1e6);
    EXPECT_LT(failed_us, 100.0) << "not the watchdog's 100000 us";
    right("after chip 0 failed");
    // The host cannot post chip 2's part: chips 0 and 1 are already running.
    auto missing = inputs;
    missing[2].clear();
    const double t1 = ring.cluster.chip(1).simulated_seconds();
    EXPECT_THROW(run_together(run.execs, missing), std::invalid_argument);
    EXPECT_LT((ring.cluster.chip(1).simulated_seconds() - t1) * 1e6, 100.0);
    right("after chip 2's part was not posted");
    right("once more");
  }
}
