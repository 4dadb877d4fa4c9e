// The compiler's passes on their own (no device): fusion's groups, tiling
// that covers every output element exactly once, scratchpad and HBM plans
// that never overlap two live buffers, the IR's refusals and the host
// reference's arithmetic.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

#include "ir.hpp"
#include "passes.hpp"
#include "reference.hpp"

using namespace tessera::compiler;

namespace {

std::vector<float> ramp(std::size_t n, float scale = 0.01f) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = scale * static_cast<float>(static_cast<int>(i % 13) - 6);
  return v;
}

// x (rows x d) -> rmsnorm -> matmul + bias -> gelu -> matmul + x
Graph mlp(unsigned rows, unsigned d, unsigned hidden) {
  Graph g;
  const int x = g.input("x", {rows, d});
  const int n = g.rmsnorm(x, g.weight("norm", {d}, std::vector<float>(d, 1.0f)), 1e-6f, "norm_x");
  const int h = g.matmul(n, g.weight("w1", {d, hidden}, ramp(std::size_t{d} * hidden), DType::bf16), DType::bf16, "up");
  const int b = g.binary(OpKind::add, h, g.weight("b1", {hidden}, ramp(hidden, 0.1f)), "bias");
  const int a = g.unary(OpKind::gelu, b, "act");
  const int y = g.matmul(a, g.weight("w2", {hidden, d}, ramp(std::size_t{hidden} * d), DType::bf16), DType::bf16, "down");
  g.output(g.binary(OpKind::add, y, x, "residual"));
  return g;
}

// Every output element of a group's anchor covered by exactly one part.
void expect_exact_cover(const Graph& g, const Group& grp, const Tiling& t, unsigned tiles) {
  const Op& anchor = g.ops()[static_cast<std::size_t>(grp.ops[0])];
  const Tensor& view = g.tensor(tiles_input(anchor.kind) ? anchor.in[0] : anchor.out);
  const std::uint64_t rows = view.rows(), cols = view.cols();
  std::vector<int> seen(rows * cols, 0);
  std::vector<int> tile_used(tiles, 0);
  ASSERT_LE(t.parts.size(), tiles);
  for (const Part& p : t.parts) {
    ASSERT_LT(p.tile, tiles);
    EXPECT_EQ(tile_used[p.tile]++, 0) << "tile " << p.tile << " has two parts";
    ASSERT_LE(p.r1, rows);
    ASSERT_LE(p.c1, cols);
    for (unsigned r = p.r0; r < p.r1; ++r)
      for (unsigned c = p.c0; c < p.c1; ++c) ++seen[r * cols + c];
  }
  for (std::size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i], 1) << anchor.name << ": element " << i;
  EXPECT_GE(t.mb, 1u);
  EXPECT_GE(t.nb, 1u);
}

}  // namespace

TEST(Compiler, FusionPutsElementwiseChainsBehindTheirProducers) {
  const Graph g = mlp(4, 64, 128);
  const std::vector<Group> groups = fuse(g);
  ASSERT_EQ(groups.size(), 3u);  // norm | up+bias+act | down+residual
  EXPECT_EQ(groups[0].ops.size(), 1u);
  EXPECT_EQ(groups[1].ops.size(), 3u);
  EXPECT_EQ(groups[2].ops.size(), 2u);
  EXPECT_EQ(g.tensor(groups[2].out).name, "residual");
  EXPECT_EQ(fuse(g, false).size(), g.ops().size());
}

TEST(Compiler, FusionStopsAtOutputsSharedValuesAndLaterOperands) {
  Graph g;
  const int x = g.input("x", {2, 8});
  const int a = g.unary(OpKind::exp, x, "a");
  g.output(a);
  const int b = g.unary(OpKind::neg, a, "b");  // a is an output: b starts a group
  const int c = g.unary(OpKind::relu, b, "c");
  const int d = g.binary(OpKind::mul, b, c, "d");  // b has two readers: c starts a group
  const int e = g.unary(OpKind::tanh, x, "e");     // made after d's chain starts
  g.output(g.binary(OpKind::add, d, e, "f"));
  const std::vector<Group> groups = fuse(g);
  std::vector<std::string> anchors;
  for (const Group& grp : groups) anchors.push_back(g.ops()[static_cast<std::size_t>(grp.ops[0])].name);
  EXPECT_EQ(anchors, (std::vector<std::string>{"a", "b", "c", "e"}));
  EXPECT_EQ(groups[2].ops.size(), 2u);  // c, d: not f, whose other operand e comes later
  EXPECT_EQ(groups[3].ops.size(), 2u);  // e, f
}

TEST(Compiler, NarrowStorageKeepsInFp32WhatAnythingButAMatmulReads) {
  Graph g = mlp(4, 64, 128);
  Graph e4 = g;
  const std::vector<int> narrowed = narrow_storage(g, fuse(g));
  ASSERT_EQ(narrowed.size(), 2u);  // the normed x and the activation: only matmuls read them
  EXPECT_EQ(g.tensor(narrowed[0]).name, "norm_x");
  EXPECT_EQ(g.tensor(narrowed[1]).name, "act");
  for (int t : narrowed) EXPECT_EQ(g.tensor(t).dtype, DType::bf16);
  // A value a vector op reads as well stays FP32.
  const int x = 0;
  const int y = e4.unary(OpKind::exp, e4.ops()[0].out);
  e4.output(e4.binary(OpKind::add, y, x));
  const std::vector<int> n2 = narrow_storage(e4, fuse(e4));
  ASSERT_EQ(n2.size(), 1u);
  EXPECT_EQ(e4.tensor(n2[0]).name, "act");
}

TEST(Compiler, TilingCoversEveryOutputElementExactlyOnce) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 60; ++trial) {
    const unsigned rows = 1 + rng() % 300, k = 16 * (1 + rng() % 40), n = 1 + rng() % 700;
    Graph g;
    const int x = g.input("x", {rows, k});
    const int y = g.matmul(x, g.weight("w", {k, n}, std::vector<float>(std::size_t{k} * n, 0.5f), DType::bf16));
    const int s = g.softmax(y);
    const int z = g.unary(OpKind::silu, s);
    g.output(g.argmax(z));
    g.output(z);
    g.output(g.reshape(z, {n, rows}));
    g.output(g.reduce(OpKind::reduce_sum, y));
    for (unsigned tiles : {1u, 3u, 8u}) {
      Target t;
      t.tiles = tiles;
      for (const Group& grp : fuse(g)) {
        const Tiling tl = tile(g, grp, t);
        SCOPED_TRACE(testing::Message() << rows << "x" << k << "x" << n << " on " << tiles << " tiles");
        expect_exact_cover(g, grp, tl, tiles);
        EXPECT_LE(plan_spm(g, grp, tl, t.spm_base).end, t.spm_end);
      }
    }
  }
}

TEST(Compiler, TilingOverChipsGivesEachChipItsColumnsAndCoversEveryElementOnce) {
  // tile_chips: C column ranges, as even as the alignment allows, each
  // tiled over a chip's tiles; together every output element once, each
  // chip's parts inside its range; block-scaled matmuls in whole blocks;
  // groups that need whole rows, or too few columns, not split.
  std::mt19937 rng(9);
  for (int trial = 0; trial < 40; ++trial) {
    const unsigned rows = 1 + rng() % 300, k = 128 * (1 + rng() % 8), n = 128 * (1 + rng() % 40) + (trial % 2 ? 0 : rng() % 128);
    const unsigned chips = 2 + rng() % 15;
    Graph g;
    const int x = g.input("x", {rows, k});
    const int y = g.matmul(x, g.weight("w", {k, n}, std::vector<float>(std::size_t{k} * n, 0.5f), DType::bf16));
    g.output(g.unary(OpKind::silu, y));
    Target t;
    for (const Group& grp : fuse(g)) {
      SCOPED_TRACE(testing::Message() << rows << "x" << k << "x" << n << " over " << chips << " chips");
      const std::vector<Tiling> by_chip = tile_chips(g, grp, t, chips);
      if (n / 16 < chips) {
        EXPECT_TRUE(by_chip.empty());
        continue;
      }
      ASSERT_EQ(by_chip.size(), chips);
      std::vector<int> seen(std::size_t{rows} * n, 0);
      unsigned next = 0;  // the ranges follow one another
      for (const Tiling& tl : by_chip) {
        unsigned lo = n, hi = 0;
        for (const Part& p : tl.parts) {
          ASSERT_LT(p.tile, t.tiles);
          lo = std::min(lo, p.c0), hi = std::max(hi, p.c1);
          for (unsigned r = p.r0; r < p.r1; ++r)
            for (unsigned c = p.c0; c < p.c1; ++c) ++seen[std::size_t{r} * n + c];
        }
        EXPECT_EQ(lo, next);
        EXPECT_EQ(lo % 16, 0u);
        next = hi;
        EXPECT_LE(plan_spm(g, grp, tl, t.spm_base).end, t.spm_end);
      }
      EXPECT_EQ(next, n);
      for (std::size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i], 1) << "element " << i;
    }
  }
  {  // a router's top k needs its rows whole: not split
    Graph g;
    const int x = g.input("x", {4, 256});
    const int r = g.route(g.matmul(x, g.weight("router", {256, 64}, std::vector<float>(256 * 64, 0.5f), DType::bf16)), 2, true);
    g.output(r);
    std::vector<Group> groups = fuse(g);
    fuse_routes(g, groups);
    for (const Group& grp : groups) EXPECT_TRUE(tile_chips(g, grp, Target{}, 4).empty());
  }
  {  // block-scaled: whole 128-column blocks a chip
    Graph g;
    const int x = g.input("x", {2, 256});
    const auto [w, s] = g.weight_scaled("w", {256, 1024}, std::vector<float>(256 * 1024, 0.5f));
    g.output(g.matmul_scaled(x, w, s));
    for (const Group& grp : fuse(g)) {
      const std::vector<Tiling> by_chip = tile_chips(g, grp, Target{}, 3);
      ASSERT_EQ(by_chip.size(), 3u);
      for (const Tiling& tl : by_chip)
        for (const Part& p : tl.parts) EXPECT_EQ(p.c0 % kScaleBlock, 0u);
    }
  }
}

TEST(Compiler, MatmulsSpreadOverTheChipsOnlyWhereTheEstimateSaysTheyGain) {
  // tile_chips(..., where_faster): the chips' shares, A pushed to the
  // peers and their columns back over the links, and the hand-overs,
  // against the device alone. The main job's shapes on the T1 (links
  // 211.7 GB/s), as measured both ways (sw/compiler/README.md): a decode
  // row's LM head (4 MiB of weights) gains on 4 and 8 chips, its QKV (1.5
  // MiB) on 4 only (one more hand-over a peer), its Wo (0.5 MiB) nowhere;
  // 32 rows: the LM head on 4 and 8, Wo nowhere; QKV measured 7% faster
  // on 4, which the estimate misses (it keeps it on the device).
  auto spreads = [](unsigned rows, unsigned n, unsigned chips, const Target& t) {
    Graph g;
    const int x = g.input("x", {rows, 512});
    g.output(g.matmul(x, g.weight("w", {512, n}, std::vector<float>(512 * std::size_t{n}, 0.5f), DType::bf16)));
    const std::vector<Group> groups = fuse(g);
    EXPECT_EQ(tile_chips(g, groups[0], t, chips).size(), chips);  // always possible
    return !tile_chips(g, groups[0], t, chips, true).empty();
  };
  Target t;
  t.link_bytes_per_s = 211.7e9;
  struct Case {
    unsigned rows, n, chips;
    bool spread;
  };
  for (const Case& c : {Case{1, 4096, 4, true}, Case{1, 4096, 8, true}, Case{1, 1536, 4, true}, Case{1, 1536, 8, false},
                        Case{1, 512, 4, false}, Case{1, 512, 8, false}, Case{32, 4096, 4, true}, Case{32, 4096, 8, true},
                        Case{32, 1536, 4, false}, Case{32, 1536, 8, false}, Case{32, 512, 4, false}, Case{32, 512, 8, false}})
    EXPECT_EQ(spreads(c.rows, c.n, c.chips, t), c.spread) << c.rows << " rows x " << c.n << " columns on " << c.chips << " chips";
  // The estimate follows the target: free hand-overs spread Wo too, slow
  // links spread nothing.
  Target free = t;
  free.handover_s = free.handover_peer_s = 0;
  EXPECT_TRUE(spreads(1, 512, 4, free));
  Target slow = t;
  slow.link_bytes_per_s = 1e9;
  EXPECT_FALSE(spreads(32, 4096, 4, slow));
}

TEST(Compiler, TilingFollowsTheTargetsResources) {
  auto parts = [](unsigned rows, const Target& t) {
    Graph g;
    const int x = g.input("x", {rows, 512});
    g.output(g.matmul(x, g.weight("w", {512, 4096}, std::vector<float>(512 * 4096, 0.25f), DType::bf16)));
    return tile(g, fuse(g)[0], t).parts;
  };
  // Decode: every tile streams its eighth of the weights' columns.
  Target t;
  const std::vector<Part> decode = parts(1, t);
  ASSERT_EQ(decode.size(), 8u);
  for (const Part& p : decode) EXPECT_EQ(p.c1 - p.c0, 512u);
  // Prefill where the cut binds hard: fewer tiles re-read A less; where it
  // does not bind, every tile computes.
  t.cut_read_bytes_per_s = t.cut_write_bytes_per_s = 16e9;
  EXPECT_LT(parts(512, t).size(), 8u);
  t.cut_read_bytes_per_s = t.cut_write_bytes_per_s = 1e15;
  EXPECT_EQ(parts(512, t).size(), 8u);
  // Half the tiles: half the parts.
  t.tiles = 4;
  EXPECT_EQ(parts(1, t).size(), 4u);
}

TEST(Compiler, ScratchpadPlansNeverOverlapTwoBuffers) {
  const Graph g = mlp(96, 256, 1024);
  Target t;
  for (const Group& grp : fuse(g)) {
    const SpmPlan p = plan_spm(g, grp, tile(g, grp, t), t.spm_base);
    for (std::size_t i = 0; i < p.buffers.size(); ++i) {
      EXPECT_GE(p.buffers[i].offset, t.spm_base);
      EXPECT_LE(p.buffers[i].offset + p.buffers[i].bytes, p.end);
      for (std::size_t j = i + 1; j < p.buffers.size(); ++j) {
        const SpmBuffer &a = p.buffers[i], &b = p.buffers[j];
        EXPECT_TRUE(a.offset + a.bytes <= b.offset || b.offset + b.bytes <= a.offset) << a.name << " and " << b.name;
      }
    }
  }
}

TEST(Compiler, AQkvProjectionOnlyAttentionReadsIsStoredInAStackPerStripe) {
  // x -> [q | k | v] -> attention -> matmul: the projection's output in
  // three stripes ([0, 64), [64, 96), [96, 128)), each in its own stack and
  // clear of every buffer live beside it; not where anything else reads
  // it, where it is an output, or where its group is kept whole.
  constexpr unsigned T = 40, D = 64, H = 4, KV = 2, dh = 16;
  auto build = [&](bool also_output, bool also_read) {
    Graph g;
    const int x = g.input("x", {T, D}), pos = g.input("positions", {T});
    const int qkv = g.matmul(x, g.weight("wqkv", {D, (H + 2 * KV) * dh}, seeded_values(D * 128ull, 1, 0.5f), DType::bf16), DType::bf16, "qkv");
    const int o = g.attention_qkv(qkv, g.kv_cache("k", KV, T, dh), g.kv_cache("v", KV, T, dh), pos, H, 0.25f, true, "o");
    g.output(g.matmul(o, g.weight("wo", {H * dh, D}, seeded_values(64ull * D, 2, 0.5f), DType::bf16), DType::bf16, "out"));
    if (also_output) g.output(qkv);
    if (also_read) g.output(g.unary(OpKind::exp, qkv, "exp"));
    return g;
  };
  const Graph g = build(false, false);
  const std::vector<Group> groups = fuse(g, true);
  const Stripes st = stripe_outputs(g, groups);
  ASSERT_EQ(st.size(), 1u);
  const int qkv = groups[0].out;
  EXPECT_EQ(g.tensor(qkv).name, "qkv");
  EXPECT_EQ(st.at(qkv), (std::vector<unsigned>{0, 64, 96}));
  EXPECT_TRUE(stripe_outputs(g, groups, {0}).empty());
  // The attention's output (40 x 64 FP32) is below 256 KiB: not striped;
  // at 1100 rows it is, by the parts' heads, where only Wo (not spread)
  // reads it.
  // A norm's output (1100 x 64 FP32) that only the projection reads as A:
  // four stripes of 16 columns.
  {
    Graph h;
    const int x = h.input("x", {1100, D}), pos = h.input("positions", {1100});
    const int n = h.rmsnorm(x, h.weight("nw", {D}, seeded_values(D, 5, 1.0f)), 1e-6f, "norm");
    const int q = h.matmul(n, h.weight("wqkv", {D, 128}, seeded_values(D * 128ull, 1, 0.5f), DType::bf16), DType::bf16, "qkv");
    const int o = h.attention_qkv(q, h.kv_cache("k", KV, 1100, dh), h.kv_cache("v", KV, 1100, dh), pos, H, 0.25f, true, "o");
    h.output(h.matmul(o, h.weight("wo", {H * dh, D}, seeded_values(64ull * D, 2, 0.5f), DType::bf16), DType::bf16, "out"));
    const std::vector<Group> hg = fuse(h, true);
    std::vector<Tiling> tl;
    for (const Group& grp : hg) tl.push_back(tile(h, grp, Target{}));
    const Stripes hs = stripe_outputs(h, hg, {}, 4, tl);
    ASSERT_EQ(hs.count(hg[0].out), 1u);
    EXPECT_EQ(hs.at(hg[0].out), (std::vector<unsigned>{0, 16, 32, 48}));  // the norm's
    ASSERT_EQ(hs.count(hg[2].out), 1u);
    EXPECT_EQ(hs.at(hg[2].out), (std::vector<unsigned>{0, 16, 32, 48}));  // a head a stripe (four heads of 16)
    EXPECT_EQ(stripe_outputs(h, hg, {3}, 4, tl).count(hg[2].out), 0u);    // Wo spread over chips
    EXPECT_EQ(stripe_outputs(h, hg, {1}, 4, tl).count(hg[0].out), 0u);    // the projection spread
    std::vector<Tiling> gt;
    for (const Group& grp : groups) gt.push_back(tile(g, grp, Target{}));
    EXPECT_EQ(stripe_outputs(g, groups, {}, 4, gt).count(groups[1].out), 0u);
  }
  for (bool out : {false, true}) {
    const Graph h = build(out, !out);
    EXPECT_TRUE(stripe_outputs(h, fuse(h, true)).empty()) << (out ? "an output" : "read by another op");
  }
  for (unsigned stacks : {1u, 2u, 4u}) {
    const HbmPlan p = plan_hbm(g, groups, stacks, st);
    std::set<unsigned> used;
    for (unsigned i = 0; i < 3; ++i) {
      const HbmSlot* s = p.find(qkv, i);
      ASSERT_NE(s, nullptr) << i;
      EXPECT_EQ(s->col0, st.at(qkv)[i]);
      EXPECT_EQ(s->cols, (i == 0 ? 64u : 32u));
      EXPECT_EQ(s->bytes, T * s->cols * 4);  // FP32
      used.insert(s->stack);
    }
    EXPECT_EQ(used.size(), std::min(3u, stacks)) << stacks << " stacks";
    EXPECT_EQ(p.find(qkv, 3), nullptr);
    for (std::size_t i = 0; i < p.slots.size(); ++i)
      for (std::size_t j = i + 1; j < p.slots.size(); ++j) {
        const HbmSlot &a = p.slots[i], &b = p.slots[j];
        if (a.stack == b.stack && a.first <= b.last && b.first <= a.last) {
          EXPECT_TRUE(a.offset + a.bytes <= b.offset || b.offset + b.bytes <= a.offset) << i << " and " << j;
        }
      }
  }
}

TEST(Compiler, WideLogitsOnlyRowReductionsReadLieInAStripePerStack) {
  // x -> logits (rows x 2000, FP32) -> argmax: from 1 MiB on, the logits
  // (a graph output too) in a stripe per stack of whole 16-column units;
  // not below 1 MiB, not where another op reads them, not on one stack.
  auto build = [](unsigned rows, bool other_reader) {
    Graph g;
    const int x = g.input("x", {rows, 64});
    const int logits = g.matmul(x, g.weight("head", {64, 2000}, seeded_values(64 * 2000ull, 3, 0.5f), DType::bf16), DType::bf16, "logits");
    g.output(logits);
    g.output(g.argmax(logits, "next"));
    if (other_reader) g.output(g.unary(OpKind::exp, logits, "exp"));
    return g;
  };
  const Graph g = build(132, false);  // 132 x 2000 x 4 bytes: just past 1 MiB
  const std::vector<Group> groups = fuse(g, true);
  const Stripes st = stripe_outputs(g, groups, {}, 4);
  ASSERT_EQ(st.size(), 1u);
  const int logits = groups[0].out;
  EXPECT_EQ(st.at(logits), (std::vector<unsigned>{0, 496, 992, 1488}));
  EXPECT_TRUE(stripe_outputs(g, groups, {}, 1).empty());
  EXPECT_TRUE(stripe_outputs(g, groups, {0}, 4).empty());
  for (const auto& [rows, other] : {std::pair{131u, false}, std::pair{132u, true}}) {
    const Graph h = build(rows, other);
    EXPECT_TRUE(stripe_outputs(h, fuse(h, true), {}, 4).empty()) << rows << " rows" << (other ? ", read by exp" : "");
  }
  const HbmPlan p = plan_hbm(g, groups, 4, st);
  std::set<unsigned> used;
  for (unsigned i = 0; i < 4; ++i) {
    const HbmSlot* s = p.find(logits, i);
    ASSERT_NE(s, nullptr) << i;
    EXPECT_EQ(s->last, groups.size());  // an output: live to the end
    used.insert(s->stack);
  }
  EXPECT_EQ(used.size(), 4u);
}

TEST(Compiler, HbmPlansNeverOverlapTwoLiveBuffersAndReuseDeadOnes) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 40; ++trial) {
    Graph g;
    std::vector<int> live{g.input("x", {8, 64})};
    const unsigned ops = 5 + rng() % 30;
    for (unsigned i = 0; i < ops; ++i) {
      const int a = live[rng() % live.size()], b = live[rng() % live.size()];
      live.push_back(rng() % 2 ? g.unary(OpKind::exp, a) : g.binary(OpKind::add, a, b));
      if (rng() % 5 == 0) g.output(live.back());
    }
    g.output(live.back());
    for (unsigned stacks : {1u, 4u}) {
      const std::vector<Group> groups = fuse(g, trial % 2);
      const HbmPlan p = plan_hbm(g, groups, stacks);
      ASSERT_EQ(p.slots.size(), groups.size());
      std::uint64_t sum = 0;
      for (std::size_t i = 0; i < p.slots.size(); ++i) {
        const HbmSlot& a = p.slots[i];
        sum += a.bytes;
        EXPECT_LE(a.offset + a.bytes, p.arena[a.stack]);
        for (std::size_t j = i + 1; j < p.slots.size(); ++j) {
          const HbmSlot& b = p.slots[j];
          const bool live_together = a.first <= b.last && b.first <= a.last;
          if (a.stack == b.stack && live_together) {
            EXPECT_TRUE(a.offset + a.bytes <= b.offset || b.offset + b.bytes <= a.offset)
                << g.tensor(a.tensor).name << " and " << g.tensor(b.tensor).name;
          }
        }
        if (g.is_output(a.tensor)) {
          EXPECT_EQ(a.last, groups.size());
        }
      }
      std::uint64_t arena = 0;
      for (std::uint64_t s : p.arena) arena += s;
      EXPECT_LE(arena, sum);
    }
  }
  // A long chain whose values die at once needs two places, not twenty.
  Graph g;
  int x = g.input("x", {16, 256});
  for (int i = 0; i < 20; ++i) x = g.unary(OpKind::exp, x);
  g.output(x);
  const HbmPlan p = plan_hbm(g, fuse(g, false), 1);
  EXPECT_EQ(p.arena[0], 2u * 16 * 256 * 4);
}

TEST(Compiler, TheIrRefusesMisshapenOperationsByName) {
  Graph g;
  const int x = g.input("x", {4, 64});
  const int w = g.weight("w", {32, 16}, std::vector<float>(32 * 16, 1.0f), DType::bf16);
  try {
    g.matmul(x, w, DType::bf16, "proj");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("proj"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("disagree on K"), std::string::npos) << e.what();
  }
  EXPECT_THROW(g.matmul(x, g.weight("w2", {64, 8}, std::vector<float>(512, 1.0f)), DType::f32), std::invalid_argument);
  EXPECT_THROW(g.binary(OpKind::add, x, g.input("y", {4, 32})), std::invalid_argument);
  EXPECT_THROW(g.binary(OpKind::add, g.input("s", {1}), x), std::invalid_argument);  // a broadcasts to b: the other way
  EXPECT_NO_THROW(g.binary(OpKind::add, x, g.input("t", {64})));
  EXPECT_NO_THROW(g.binary(OpKind::add, x, g.input("u", {1})));
  EXPECT_NO_THROW(g.binary(OpKind::mul, x, g.input("per", {4, 1})));    // a value per row
  EXPECT_THROW(g.binary(OpKind::add, x, g.input("per2", {4, 1})), std::invalid_argument);  // mul only
  EXPECT_THROW(g.binary(OpKind::mul, x, g.input("per3", {1, 4, 1})), std::invalid_argument);  // not x's rank
  EXPECT_NO_THROW(g.binary(OpKind::max, g.input("v3", {3}), g.input("one", {1})));  // one element, not a value per row
  EXPECT_NO_THROW(g.binary(OpKind::add, g.input("m1", {1, 5}), g.input("one2", {1, 1})));
  EXPECT_THROW(g.rope(x, 6, 0), std::invalid_argument);
  EXPECT_THROW(g.weight("short", {4}, {1, 2, 3}), std::invalid_argument);
  EXPECT_THROW(g.input("x", {2}), std::invalid_argument);  // a second 'x'
  EXPECT_THROW(g.output(x), std::invalid_argument);
  EXPECT_THROW(reference(g, {}), std::invalid_argument);  // the inputs are missing
}

TEST(Compiler, MovesCopyEveryOutputElementOnceAndAreCheckedSo) {
  Graph g;
  const int x = g.input("x", {2, 3, 4});
  // The transpose (2, 0, 1): out[k][i][j] = x[i][j][k], a move per k of 2 x 3 single elements.
  std::vector<Move> moves;
  for (unsigned k = 0; k < 4; ++k)
    for (unsigned i = 0; i < 2; ++i) moves.push_back({0, i * 12 + k, k * 6 + i * 3, 1, 3, 4, 1});
  const int t = g.move({x}, {4, 2, 3}, moves, "transpose");
  g.output(t);
  std::vector<float> in(24);
  for (unsigned i = 0; i < 24; ++i) in[i] = static_cast<float>(i);
  const auto v = reference(g, {{"x", in}});
  for (unsigned k = 0; k < 4; ++k)
    for (unsigned i = 0; i < 2; ++i)
      for (unsigned j = 0; j < 3; ++j) EXPECT_EQ(v[static_cast<std::size_t>(t)][k * 6 + i * 3 + j], in[i * 12 + j * 4 + k]);
  // Split over the tiles by moves, every one in exactly one part.
  Target tgt;
  const Group grp = fuse(g)[0];
  const Tiling tl = tile(g, grp, tgt);
  unsigned covered = 0;
  for (const Part& p : tl.parts) covered += p.r1 - p.r0;
  EXPECT_EQ(covered, moves.size());
  EXPECT_EQ(tl.parts.size(), 8u);
  // Overlaps, gaps and strides that repeat are refused.
  std::vector<Move> twice = moves;
  twice.back().to = 0;
  EXPECT_THROW(g.move({x}, {4, 2, 3}, twice), std::invalid_argument);
  EXPECT_THROW(g.move({x}, {4, 2, 3}, {moves.begin(), moves.end() - 1}), std::invalid_argument);
  EXPECT_THROW(g.move({x}, {24}, {{0, 0, 0, 1, 24, 0, 1}}), std::invalid_argument);
  EXPECT_THROW(g.move({x}, {25}, {{0, 0, 0, 25, 1, 0, 0}}), std::invalid_argument);
}

TEST(Compiler, TheReferenceRoundsOperandsAndAccumulatesInFp32) {
  Graph g;
  const int x = g.input("x", {1, 3});
  // 1 + 2^-9 is not a BF16 value: the matmul sees 1.
  const int y = g.matmul(x, g.weight("w", {3, 1}, {1.0f, 1.0f, 1.0f}, DType::bf16));
  g.output(y);
  const int c = g.cast(x, DType::e4m3);
  g.output(c);
  g.output(g.argmax(x));
  const auto v = reference(g, {{"x", {1.0f + 1.0f / 512, 1e8f, -1e8f}}});
  // In FP32 order: 1, then 1 + B (B = 1e8 in BF16) rounds to B, then B - B.
  EXPECT_EQ(v[static_cast<std::size_t>(y)][0], 0.0f);
  EXPECT_EQ(v[static_cast<std::size_t>(c)][1], 448.0f);  // E4M3 saturates
  EXPECT_EQ(v.back()[0], 1.0f);
}

namespace {

// `f` throws std::invalid_argument saying `words`.
void refused(const std::function<void()>& f, const std::string& words) {
  try {
    f();
    ADD_FAILURE() << "accepted: " << words;
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

}  // namespace

TEST(Compiler, ABatchedMatmulIsEachBatchsMatmulAndTilesByWholeBatches) {
  // b [G, K, N]: a's rows in G blocks, block g times matrix g; the
  // reference is each block's own 2-D matmul, and the tiler gives every
  // part whole batches, every output element once.
  const unsigned G = 6, M = 3, K = 40, N = 24;
  Graph g;
  const int a = g.input("a", {G, M, K});
  const std::vector<float> bv = seeded_values(std::size_t{G} * K * N, 1, 0.5f);
  const int y = g.matmul(a, g.weight("b", {G, K, N}, bv, DType::bf16), DType::bf16, "batched");
  g.output(y);
  EXPECT_EQ(g.tensor(y).shape, (std::vector<unsigned>{G, M, N}));
  const MatmulDims d = matmul_dims(g, g.ops().back());
  EXPECT_EQ(d.batches, G);
  EXPECT_EQ(d.K, K);
  EXPECT_EQ(d.N, N);
  EXPECT_EQ(d.M, M);
  const std::vector<float> av = seeded_values(std::size_t{G} * M * K, 2, 2.0f);
  const std::vector<float> got = reference(g, {{"a", av}})[static_cast<std::size_t>(y)];
  for (unsigned b = 0; b < G; ++b) {
    Graph one;
    const int x = one.input("x", {M, K});
    const int z = one.matmul(x, one.weight("w", {K, N}, std::vector<float>(bv.begin() + b * K * N, bv.begin() + (b + 1) * K * N), DType::bf16));
    one.output(z);
    const std::vector<float> want =
        reference(one, {{"x", std::vector<float>(av.begin() + b * M * K, av.begin() + (b + 1) * M * K)}})[static_cast<std::size_t>(z)];
    for (unsigned i = 0; i < M * N; ++i) ASSERT_EQ(got[b * M * N + i], want[i]) << "batch " << b << " element " << i;
  }
  const std::vector<Group> groups = fuse(g);
  for (const unsigned tiles : {1u, 4u, 8u}) {
    Target t;
    t.tiles = tiles;
    const Tiling tl = tile(g, groups[0], t);
    expect_exact_cover(g, groups[0], tl, tiles);
    for (const Part& p : tl.parts) {
      EXPECT_EQ(p.r0 % M, 0u) << tiles << " tiles";
      EXPECT_EQ(p.r1 % M, 0u) << tiles << " tiles";
    }
    EXPECT_LE(tl.mb, M);
  }
  // a's rows must split into the matrices' blocks; b is 2-D or 3-D.
  refused([&] { g.matmul(g.input("a5", {5, K}), g.weight("b2", {G, K, N}, bv, DType::bf16), DType::bf16, "odd"); }, "odd");
  refused([&] { g.matmul(a, g.weight("b4", {1, G, K, N}, bv, DType::bf16), DType::bf16, "four"); }, "G x K x N");
  // Block-scaled: the scales a block grid per matrix.
  const auto [codes, scales] = g.weight_scaled("q", {2, 128, 64}, seeded_values(2 * 128 * 64, 3, 0.5f));
  const int a2 = g.input("a2", {2, 4, 128});
  EXPECT_NO_THROW(g.matmul_scaled(a2, codes, scales, "scaled"));
  refused([&] { g.matmul_scaled(a2, codes, g.weight("s1", {1, 1}, {1.0f}), "bad_scales"); }, "bad_scales");
}

TEST(Compiler, BlockScaledMatmulsAreCheckedAndTheReferenceScalesEachGroup) {
  Graph g;
  const int x = g.input("x", {2, 256});
  const auto [w, s] = g.weight_scaled("w", {256, 200}, seeded_values(256 * 200, 1, 1.0f));
  EXPECT_EQ(g.tensor(w).dtype, DType::e4m3);
  EXPECT_EQ(g.tensor(s).shape, (std::vector<unsigned>{2, 2}));  // 128 x 128 blocks, the last one 72 columns
  EXPECT_EQ(g.tensor(s).name, "w.scales");
  const int y = g.matmul_scaled(x, w, s, "proj");
  EXPECT_TRUE(block_scaled(g.ops().back()));
  EXPECT_EQ(g.ops().back().format, DType::e4m3);
  g.output(y);
  Graph bad;  // (inputs made here would be missing from the reference's run)
  const int bx = bad.input("x", {2, 256});
  const auto [bw, bs] = bad.weight_scaled("w", {256, 200}, seeded_values(256 * 200, 1, 1.0f));
  refused([&] { bad.matmul_scaled(bx, bad.weight("bf", {256, 8}, std::vector<float>(256 * 8, 1.0f), DType::bf16), bs, "p1"); },
          "p1: b 'bf' must hold e4m3 or e5m2 codes");
  refused([&] { bad.matmul_scaled(bx, bw, bad.weight("s2", {2, 1}, {1, 1}), "p2"); }, "p2: scales 's2' must be f32 [2, 2]");
  const auto [w3, s3] = bad.weight_scaled("w3", {96, 8}, std::vector<float>(96 * 8, 1.0f));
  refused([&] { bad.matmul_scaled(bad.input("x3", {2, 96}), w3, s3, "p3"); }, "p3: K (96) must be a multiple of 128");
  refused([&] { bad.matmul_scaled(bx, bw, bad.input("s4", {2, 2}), "p4"); }, "p4: b 'w' and its scales 's4' must be weights");
  refused([&] { bad.weight_scaled("w5", {256, 8}, std::vector<float>(256 * 8, 1.0f), DType::bf16); },
          "block scaling takes e4m3 or e5m2, not bf16");
  // The reference: each row of x in groups of 128 scaled to E4M3's 448,
  // each block of w to its own; the product is close to the exact one.
  const std::vector<float> xv = seeded_values(2 * 256, 2, 4.0f), wv = seeded_values(256 * 200, 1, 1.0f);
  const auto v = reference(g, {{"x", xv}});
  double worst = 0, largest = 0;
  for (unsigned r = 0; r < 2; ++r)
    for (unsigned n = 0; n < 200; ++n) {
      double exact = 0;
      for (unsigned k = 0; k < 256; ++k) exact += double(xv[r * 256 + k]) * wv[k * 200 + n];
      worst = std::max(worst, std::abs(v[static_cast<std::size_t>(y)][r * 200 + n] - exact));
      largest = std::max(largest, std::abs(exact));
    }
  EXPECT_GT(largest, 1.0);
  EXPECT_LT(worst / largest, 0.05) << "E4M3 keeps 3 mantissa bits: errors of a few percent of the largest output";
  EXPECT_GT(worst, 0.0) << "and the operands are rounded";
  // The tiling keeps K whole and cuts columns at block edges; where the
  // scratchpad is short it narrows B's blocks before it takes fewer rows
  // (a prefill's B would otherwise stream once for every few rows).
  Graph p;
  const auto [pw, ps] = p.weight_scaled("w", {2048, 512}, seeded_values(2048 * 512, 3, 1.0f));
  p.output(p.matmul_scaled(p.input("h", {256, 2048}), pw, ps));
  const Tiling t = tile(p, fuse(p)[0], Target{});
  EXPECT_EQ(t.kb, 2048u);
  EXPECT_GE(t.mb, 64u);
  EXPECT_EQ(t.nb % kScaleBlock, 0u);
  for (const Part& part : t.parts) EXPECT_EQ(part.c0 % kScaleBlock, 0u);
}

TEST(Compiler, RoutesAndExpertsAreCheckedAndTheReferenceRoutesAsTheVectorUnit) {
  Graph g;
  const int logits = g.input("logits", {3, 6});
  refused([&] { g.route(logits, 7, true, "r9"); }, "r9: k 7 must be 1 to 8 and at most the 6 experts");
  const int r = g.route(logits, 2, true, "route");
  const int soft = g.route(logits, 3, false, "plain");
  refused([&] { g.unary(OpKind::exp, r, "peek"); }, "'route' is a route");
  const int x = g.input("x", {3, 4});
  const int xb = g.cast(x, DType::bf16, "xb");
  const int w1 = g.weight("w1", {6, 4, 8}, std::vector<float>(192, 0.5f), DType::bf16);
  const int w2 = g.weight("w2", {6, 8, 4}, std::vector<float>(192, 0.5f), DType::bf16);
  const int bad = g.weight("bad", {6, 8, 4}, std::vector<float>(192, 0.5f), DType::bf16);
  refused([&] { g.moe(x, r, w1, w1, w2, "m1"); }, "m1: x 'x' must be stored bf16");
  refused([&] { g.moe(xb, xb, w1, w1, w2, "m2"); }, "m2: 'xb' is no route()'s output");
  refused([&] { g.moe(xb, r, w1, bad, w2, "m3"); }, "m3: 'bad' bf16 [6, 8, 4] must be a bf16 weight [E, D, F]");
  g.output(g.moe(xb, r, w1, w1, w2, "m"));
  // Row 0 ties experts 1 and 4 (the lower goes first); row 2 is all equal.
  const std::vector<float> l = {0, 3, 1, 2, 3, -1, 5, -2, 4, 9, 0, 1, 2, 2, 2, 2, 2, 2};
  const auto v = reference(g, {{"logits", l}, {"x", std::vector<float>(12, 1.0f)}});
  const std::vector<float>& a = v[static_cast<std::size_t>(r)];
  EXPECT_EQ(std::vector<float>(a.begin(), a.begin() + 6), (std::vector<float>{1, 4, 3, 0, 0, 1}));
  EXPECT_FLOAT_EQ(a[6], 0.5f);                                       // softmax of two equal values
  EXPECT_NEAR(a[8], 1 / (1 + std::exp(-4.0f)), 1e-6);                // 9 against 5
  const std::vector<float>& b = v[static_cast<std::size_t>(soft)];
  EXPECT_EQ(std::vector<float>(b.begin() + 9, b.begin() + 15), (std::vector<float>{3, 3, 2, 9, 5, 4}));  // the values as they are
  // Its planes as tensors of their own (ONNX's TopK): the experts as INT32, the gates as FP32.
  Graph h;
  const int hl = h.input("logits", {3, 6});
  const int hr = h.route(hl, 3, false);
  const int idx = h.route_indices(hr), val = h.route_values(hr);
  EXPECT_EQ(h.tensor(idx).dtype, DType::i32);
  EXPECT_EQ(h.tensor(val).shape, (std::vector<unsigned>{3, 3}));
  h.output(idx), h.output(val);
  const auto hv = reference(h, {{"logits", l}});
  EXPECT_EQ(hv[static_cast<std::size_t>(idx)], std::vector<float>(b.begin(), b.begin() + 9));
  EXPECT_EQ(hv[static_cast<std::size_t>(val)], std::vector<float>(b.begin() + 9, b.end()));
  refused([&] { h.route_values(hl); }, "'logits' is no route()'s output");
}

TEST(Compiler, AttentionIsCheckedAndItsReferenceKeepsTheCaches) {
  Graph g;
  const int q = g.input("q", {2, 8}), k = g.input("k", {2, 4}), v = g.input("v", {2, 2}), pos = g.input("pos", {2});
  const int kc = g.kv_cache("kc", 1, 4, 4), vc = g.kv_cache("vc", 1, 4, 2), wide = g.kv_cache("wide", 1, 5, 2);
  refused([&] { g.attention(q, k, v, q, vc, pos, 2, 1.0f, "a1"); }, "a1: 'q' is no kv_cache()");
  refused([&] { g.attention(q, k, v, kc, wide, pos, 2, 1.0f, "a2"); }, "a2: the caches 'kc' [1, 4, 4] and 'wide' [1, 5, 2] disagree");
  refused([&] { g.attention(q, k, v, kc, vc, pos, 0, 1.0f, "a3"); }, "a3: 0 query heads over 1 KV heads");
  refused([&] { g.attention(q, k, v, kc, vc, pos, 3, 1.0f, "a7"); }, "a7: q 'q' [2, 8] needs 3 x 4 columns");
  refused([&] { g.attention(q, k, k, kc, vc, pos, 2, 1.0f, "a4"); }, "a4: v 'k' [2, 4] needs 2 rows of 1 x 2");
  refused([&] { g.attention(q, k, v, kc, vc, q, 2, 1.0f, "a5"); }, "a5: positions 'q' must be an input of 2 values");
  refused([&] { g.attention(q, k, v, kc, vc, pos, 2, -1.0f, "a6"); }, "a6: scale -1");
  refused([&] { g.output(kc); }, "output 'kc' is an input, a weight or state");
  refused([&] { g.kv_cache("none", 1, 4, 0); }, "KV cache 'none': 1 heads x 4 positions x 0 (1 to 65535 heads and values");
  refused([&] { g.kv_cache("empty", 0, 4, 2); }, "KV cache 'empty': 0 heads x 4 positions x 2");
  refused([&] { g.kv_cache("short", 1, 0, 2); }, "KV cache 'short': 1 heads x 0 positions x 2");
  {  // paged: the sequences and page tables checked too
    Graph h;
    const int hq = h.input("q", {2, 8}), hk = h.input("k", {2, 4}), hv = h.input("v", {2, 2}), hp = h.input("pos", {2});
    const int hkc = h.kv_cache("kc", 1, 4, 4), hvc = h.kv_cache("vc", 1, 4, 2);
    Paging paging;
    paging.sequences = h.input("seqs", {2}), paging.table = h.input("table", {2, 2}), paging.page = 3;
    refused([&] { h.attention(hq, hk, hv, hkc, hvc, hp, 2, 1.0f, "p1", false, paging); }, "p1: pages of 3 positions in a cache of 4");
    paging.page = 2, paging.sequences = paging.table;
    refused([&] { h.attention(hq, hk, hv, hkc, hvc, hp, 2, 1.0f, "p2", false, paging); },
            "p2: sequences 'table' must be an input of 2 values");
    paging.sequences = hp, paging.table = hkc;
    refused([&] { h.attention(hq, hk, hv, hkc, hvc, hp, 2, 1.0f, "p3", false, paging); }, "p3: page table 'kc' [1, 4, 4] must be an input");
  }
  const int o = g.attention(q, k, v, kc, vc, pos, 2, 1.0f, "att");
  g.output(o);
  EXPECT_EQ(g.tensor(o).shape, (std::vector<unsigned>{2, 4}));
  // Two heads share the one KV head. Row 0 sees position 0 only: its
  // output is v's row 0 for both heads; row 1 sees both, and with keys of
  // zeros weighs them equally.
  std::map<std::string, std::vector<float>> caches;
  const std::vector<float> in_v = {1.0f, 2.0f, 3.0f, 5.0f};
  auto run = [&](std::vector<float> p) {
    return reference(g, {{"q", std::vector<float>(16, 1.0f)}, {"k", std::vector<float>(8, 0.0f)}, {"v", in_v}, {"pos", p}}, &caches);
  };
  const std::vector<float> y = run({0, 1})[static_cast<std::size_t>(o)];
  EXPECT_EQ(y, (std::vector<float>{1, 2, 1, 2, 2, 3.5f, 2, 3.5f}));
  EXPECT_EQ(std::vector<float>(caches.at("vc").begin(), caches.at("vc").begin() + 4), in_v);
  // The next rows, at positions 2 and 3, see the first two in the cache:
  // row 0 weighs three values (1, 3, 1) by 1/3 rounded to BF16.
  const std::vector<float> z = run({2, 3})[static_cast<std::size_t>(o)];
  EXPECT_EQ(z[0], 5 * 0.333984375f);
  refused([&] { run({3, 4}); }, "att: positions 'pos' start at 3");
  refused([&] { run({1, 3}); }, "att: positions 'pos' [1] is 3, not 2");
}

TEST(Compiler, AnRmsNormThatOnlyAMatmulReadsBecomesItsPrologue) {
  // x -> rmsnorm -> matmul: the norm's group goes, the matmul's takes it;
  // a norm read twice, or an output, keeps its node; the HBM plan keeps x
  // live until the matmul that norms it.
  Graph g;
  const int x = g.input("x", {4, 32});
  const int w = g.weight("w", {32, 16}, std::vector<float>(512, 0.5f), DType::bf16);
  const int nw = g.weight("nw", {32}, std::vector<float>(32, 1.0f));
  const int n1 = g.rmsnorm(x, nw, 1e-6f, "n1");
  const int m1 = g.matmul(n1, w, DType::bf16, "m1");
  const int n2 = g.rmsnorm(x, nw, 1e-6f, "n2");
  const int m2 = g.matmul(n2, w, DType::bf16, "m2");
  const int twice = g.binary(OpKind::add, m2, g.matmul(n2, w, DType::bf16, "m3"), "sum");
  const int n4 = g.rmsnorm(x, nw, 1e-6f, "n4");
  g.output(n4);
  g.output(g.binary(OpKind::add, g.matmul(n4, w, DType::bf16, "m4"), twice, "all"));
  g.output(m1);
  std::vector<Group> groups = fuse(g);
  const std::size_t before = groups.size();
  EXPECT_EQ(fuse_prologues(g, groups), 1u);
  EXPECT_EQ(groups.size(), before - 1);
  for (const Group& grp : groups) {
    const std::string& anchor = g.ops()[static_cast<std::size_t>(grp.ops[0])].name;
    EXPECT_NE(anchor, "n1");
    EXPECT_EQ(grp.prologue >= 0, anchor == "m1") << anchor;
  }
  const HbmPlan plan = plan_hbm(g, groups, 2);
  EXPECT_EQ(plan.find(n1), nullptr);  // stored nowhere
  EXPECT_NE(plan.find(n2), nullptr);
  // Up to 64 rows: past them each column part would norm every row.
  for (const unsigned rows : {64u, 65u}) {
    Graph h;
    const int hn = h.rmsnorm(h.input("x", {rows, 32}), h.weight("nw", {32}, std::vector<float>(32, 1.0f)), 1e-6f, "n");
    h.output(h.matmul(hn, h.weight("w", {32, 16}, std::vector<float>(512, 0.5f), DType::bf16), DType::bf16, "m"));
    std::vector<Group> hg = fuse(h);
    EXPECT_EQ(fuse_prologues(h, hg), rows <= 64 ? 1u : 0u) << rows << " rows";
  }
  // Nor where A's rows would fill more than half the scratchpad: 64 rows
  // of 8192 (FP32 and BF16: 3 MiB) against 16 rows (768 KiB).
  const Target t;
  for (const unsigned rows : {16u, 64u}) {
    Graph h;
    const int hn = h.rmsnorm(h.input("x", {rows, 8192}), h.weight("nw", {8192}, std::vector<float>(8192, 1.0f)), 1e-6f, "n");
    h.output(h.matmul(hn, h.weight("w", {8192, 16}, std::vector<float>(8192 * 16, 0.5f), DType::bf16), DType::bf16, "m"));
    std::vector<Group> hg = fuse(h);
    EXPECT_EQ(fuse_prologues(h, hg, t.spm_end - t.spm_base), rows == 16 ? 1u : 0u) << rows << " rows of 8192";
  }
}

TEST(Compiler, ANormARouterAndOthersReadIsTheRoutersPrologueAndStoredByIt) {
  // rmsnorm -> cast -> router matmul -> top k, the cast's rows read by a
  // later op too: the router's node norms and casts them and stores them
  // (kept), live until that reader; read by something before the router,
  // or by two matmuls without a route, the norm keeps its node.
  Graph g;
  const int x = g.input("x", {6, 32});
  const int w = g.weight("w", {32, 8}, std::vector<float>(256, 0.5f), DType::bf16);
  const int nw = g.weight("nw", {32}, std::vector<float>(32, 1.0f));
  const int xb = g.cast(g.rmsnorm(x, nw, 1e-6f, "n1"), DType::bf16, "xb");
  g.output(g.route(g.matmul(xb, w, DType::bf16, "router"), 2, true, "route"));
  g.output(g.unary(OpKind::exp, xb, "later"));
  const int yb = g.cast(g.rmsnorm(x, nw, 1e-6f, "n2"), DType::bf16, "yb");
  const int early = g.unary(OpKind::exp, yb, "earlier");
  g.output(g.route(g.matmul(yb, w, DType::bf16, "router2"), 2, true, "route2"));
  g.output(g.matmul(early, w, DType::bf16, "m"));
  std::vector<Group> groups = fuse(g);
  EXPECT_EQ(fuse_routes(g, groups), 2u);
  const std::size_t before = groups.size();
  EXPECT_EQ(fuse_prologues(g, groups), 1u);
  ASSERT_EQ(groups.size(), before - 1);
  std::size_t router = groups.size(), later = groups.size();
  for (std::size_t k = 0; k < groups.size(); ++k) {
    const std::string& anchor = g.ops()[static_cast<std::size_t>(groups[k].ops[0])].name;
    EXPECT_NE(anchor, "n1");
    if (anchor == "router") router = k;
    if (anchor == "later") later = k;
    EXPECT_EQ(groups[k].kept >= 0, anchor == "router") << anchor;
    EXPECT_EQ(groups[k].prologue >= 0, anchor == "router") << anchor;
  }
  ASSERT_LT(router, groups.size());
  EXPECT_EQ(groups[router].kept, xb);
  const HbmPlan plan = plan_hbm(g, groups, 2);
  const HbmSlot* s = plan.find(xb);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->first, router);
  EXPECT_EQ(s->last, later);
  for (const HbmSlot& o : plan.slots) {  // nothing else lies in its place while it is live
    if (o.tensor != xb && o.stack == s->stack && o.first <= s->last && s->first <= o.last) {
      EXPECT_TRUE(o.offset >= s->offset + s->bytes || s->offset >= o.offset + o.bytes) << g.tensor(o.tensor).name;
    }
  }
}

TEST(Compiler, ARoutersTopKRunsInItsMatmulsNodeOnWholeRows) {
  // matmul -> route: one group ending with the route, tiled by whole rows;
  // a route whose logits something else reads too, or a grouped one, keeps
  // its own node.
  Graph g;
  const int x = g.input("x", {6, 32});
  const int w = g.weight("w", {32, 8}, std::vector<float>(256, 0.5f), DType::bf16);
  const int logits = g.matmul(x, w, DType::bf16, "router");
  g.output(g.route(logits, 2, true, "route"));
  const int shared = g.matmul(x, w, DType::bf16, "shared");
  g.output(g.route(shared, 2, true, "route2"));
  g.output(g.unary(OpKind::exp, shared, "also"));
  std::vector<Group> groups = fuse(g);
  const std::size_t before = groups.size();
  EXPECT_EQ(fuse_routes(g, groups), 1u);
  ASSERT_EQ(groups.size(), before - 1);
  EXPECT_EQ(groups[0].ops.size(), 2u);
  EXPECT_EQ(g.ops()[static_cast<std::size_t>(groups[0].ops[1])].name, "route");
  Target t;
  const Tiling tl = tile(g, groups[0], t);
  for (const Part& p : tl.parts) EXPECT_EQ(p.c1 - p.c0, 8u);  // whole rows of the 8 logits
  EXPECT_EQ(tl.nb, 8u);
}

TEST(Compiler, CollectivesAreCheckedStandAloneAndTheirReferenceSumsInTheEnginesOrder) {
  // all_reduce and all_gather: their operands checked by name; each its
  // own group (no chain joins it, its output stays in its operand's
  // format), one part on tile 0; reference_spmd sums as the engines'
  // ring and tree do, each addition rounded to the format, and gathers
  // in chip order; reference() refuses a collective of several chips.
  {
    Graph g;
    const int i = g.argmax(g.input("s", {2, 3}));
    EXPECT_THROW(g.all_reduce(i, 2), std::invalid_argument);  // i32
    EXPECT_THROW(g.all_reduce(g.input("x", {2}), 0), std::invalid_argument);
    EXPECT_THROW(g.all_gather(g.input("y", {2}), 65), std::invalid_argument);
    EXPECT_EQ(g.tensor(g.all_gather(i, 3)).shape, (std::vector<unsigned>{6}));  // bytes: any format
  }
  const unsigned chips = 3, n = 40;
  Graph g;
  const int x = g.input("x", {4, 10});
  const int part = g.cast(g.unary(OpKind::gelu, x), DType::bf16, "part");
  const int ring = g.all_reduce(part, chips, false, false, "ring");
  const int tree = g.all_reduce(part, chips, true, true, "tree");
  const int both = g.binary(OpKind::add, g.unary(OpKind::relu, ring), tree, "both");
  const int rows = g.all_gather(both, chips, false, "rows");
  g.output(g.matmul(rows, g.weight("w", {10, 16}, ramp(160), DType::bf16), DType::bf16, "mm"));
  std::vector<Group> groups = fuse(g);
  narrow_storage(g, groups);
  EXPECT_EQ(g.tensor(rows).dtype, DType::f32) << "an all-gather's output stays as its operand is, though only a matmul reads it";
  for (const Group& grp : groups) {
    const OpKind k = g.ops()[static_cast<std::size_t>(grp.ops[0])].kind;
    if (!is_collective(k)) continue;
    EXPECT_EQ(grp.ops.size(), 1u) << name(k);
    const Tiling t = tile(g, grp, Target{});
    ASSERT_EQ(t.parts.size(), 1u);
    EXPECT_EQ(t.parts[0].tile, 0u);
    expect_exact_cover(g, grp, t, 8);
  }
  std::vector<std::map<std::string, std::vector<float>>> in;
  for (unsigned c = 0; c < chips; ++c) {
    std::vector<float> v(n);
    for (unsigned i = 0; i < n; ++i) v[i] = 0.37f * static_cast<float>(c + 1) + 0.011f * static_cast<float>(i) - 0.2f;
    in.push_back({{"x", v}});
  }
  const auto v = reference_spmd({&g, &g, &g}, in);
  auto bf16 = [](float f) { return static_cast<float>(tessera::num::quantize(tessera::num::Format::BF16, f)); };
  for (unsigned i = 0; i < n; ++i) {
    const float p[3] = {v[0][part][i], v[1][part][i], v[2][part][i]};
    // Ring: element i in chunk i / 14, summed from chip chunk + 1 round to the chunk's chip.
    const unsigned k = i / ((n + chips - 1) / chips);
    const float r = bf16(bf16(p[(k + 1) % 3] + p[(k + 2) % 3]) + p[k]);
    const float t = bf16(bf16(p[0] + p[1]) + p[2]);  // binomial to chip 0: (0 + 1) + 2
    for (unsigned c = 0; c < chips; ++c) {
      EXPECT_EQ(v[c][ring][i], r) << "chip " << c << " element " << i;
      EXPECT_EQ(v[c][tree][i], t) << "chip " << c << " element " << i;
    }
  }
  for (unsigned c = 0; c < chips; ++c)
    for (unsigned k = 0; k < chips; ++k)
      EXPECT_TRUE(std::equal(v[k][both].begin(), v[k][both].end(), v[c][rows].begin() + k * n)) << "chip " << k << "'s rows on chip " << c;
  EXPECT_THROW(reference(g, in[0]), std::invalid_argument);
  EXPECT_THROW(reference_spmd({&g, &g}, {in[0], in[1]}), std::invalid_argument);  // a collective of 3 chips on 2
  Graph fewer;
  fewer.output(fewer.all_reduce(fewer.input("x", {4, 10}), chips));
  EXPECT_THROW(reference_spmd({&g, &fewer, &g}, in), std::invalid_argument);
  // all_to_all: chip j's block c is chip c's block j (blocks of the first
  // dimension, any format); a dimension of other blocks and a pulled
  // weight refused by name.
  Graph bad, a;
  EXPECT_THROW(bad.all_to_all(bad.input("odd", {4, 2}), chips), std::invalid_argument);
  EXPECT_THROW(bad.all_to_all(bad.weight("w", {3, 2}, ramp(6)), chips, true), std::invalid_argument);
  const int swap = a.all_to_all(a.input("z", {6, 2}), chips, false, "swap");
  a.output(swap);
  std::vector<std::map<std::string, std::vector<float>>> zin;
  for (unsigned c = 0; c < chips; ++c) {
    std::vector<float> z(12);
    for (unsigned i = 0; i < 12; ++i) z[i] = static_cast<float>(100 * c + i);
    zin.push_back({{"z", z}});
  }
  const auto s = reference_spmd({&a, &a, &a}, zin);
  for (unsigned j = 0; j < chips; ++j)
    for (unsigned c = 0; c < chips; ++c)
      for (unsigned e = 0; e < 4; ++e) EXPECT_EQ(s[j][swap][c * 4 + e], zin[c]["z"][j * 4 + e]) << "chip " << j << " block " << c;
}

TEST(Compiler, ExpertParallelDispatchPacksRowsByTheirExpertsChipsAndIsChecked) {
  // Three rows, top 2 of four experts over two chips (expert e on chip e
  // mod 2): row 0 chooses experts 0 and 2 (both chip 0's), row 1 experts 1
  // and 2 (both chips), row 2 experts 3 and 1 (chip 1's). Chip 0's three
  // slots (as many as rows: none dropped) take rows 0 and 1, chip 1's rows
  // 1 and 2; with one slot a chip, row 1 is dropped on chip 0 and row 2 on
  // chip 1.
  Graph g;
  const int logits = g.input("logits", {3, 4});
  const int x = g.input("x", {3, 2});
  const int r = g.route(logits, 2, false, "route");
  const int full = g.dispatch(x, r, 2, 0, "full"), one = g.dispatch(x, r, 2, 1, "one");
  const int choices = g.dispatch_route(r, 2, 0, "choices"), one_choice = g.dispatch_route(r, 2, 1, "one_choice");
  const int y = g.input("y", {6, 2}), y1 = g.input("y1", {2, 2});
  const int back = g.combine(y, r, 2, 0, "back"), back1 = g.combine(y1, r, 2, 1, "back1");
  EXPECT_EQ(g.tensor(full).shape, (std::vector<unsigned>{6, 2}));
  EXPECT_EQ(g.tensor(choices).shape, (std::vector<unsigned>{2, 2, 3, 2}));
  EXPECT_EQ(g.tensor(back).shape, (std::vector<unsigned>{3, 2}));
  for (int t : {full, one, choices, one_choice, back, back1}) g.output(t);
  const std::vector<float> l = {4, 0, 3, 0, 0, 4, 3, 0, 0, 3, 0, 4};
  const std::vector<float> xv = {1, 2, 3, 4, 5, 6};
  const std::vector<float> yv = {10, 11, 12, 13, 14, 15, 20, 21, 22, 23, 24, 25}, y1v = {30, 31, 40, 41};
  auto v = reference(g, {{"logits", l}, {"x", xv}, {"y", yv}, {"y1", y1v}});
  auto at = [&](int t) { return v[static_cast<std::size_t>(t)]; };
  EXPECT_EQ(at(full), (std::vector<float>{1, 2, 3, 4, 0, 0, 3, 4, 5, 6, 0, 0}));
  EXPECT_EQ(at(one), (std::vector<float>{1, 2, 3, 4}));
  // Block j: its slots' ids, then their gates (the logits: gates as they
  // are); an empty slot chooses expert (j + 1) mod 2 for all k, gate 0.
  EXPECT_EQ(at(choices), (std::vector<float>{0, 2, 1, 2, 1, 1, 4, 3, 4, 3, 0, 0, 1, 2, 3, 1, 0, 0, 4, 3, 4, 3, 0, 0}));
  EXPECT_EQ(at(one_choice), (std::vector<float>{0, 2, 4, 3, 1, 2, 4, 3}));
  // Row 0: chip 0's slot 0; row 1: chip 0's slot 1 + chip 1's slot 0; row 2: chip 1's slot 1.
  EXPECT_EQ(at(back), (std::vector<float>{10, 11, 12 + 20, 13 + 21, 22, 23}));
  EXPECT_EQ(at(back1), (std::vector<float>{30, 31, 40, 41, 0, 0}));

  const int xb = g.cast(g.input("rows", {6, 8}), DType::bf16, "rows_b");
  const int w1 = g.weight("w1", {2, 8, 16}, std::vector<float>(256, 0.5f), DType::bf16);
  const int w2 = g.weight("w2", {2, 16, 8}, std::vector<float>(256, 0.5f), DType::bf16);
  refused([&] { g.dispatch(x, r, 3, 0, "d3"); }, "d3: 3 chips (2 to 64, dividing the 4 experts)");
  refused([&] { g.dispatch(x, r, 2, 129, "d4"); }, "d4: capacity 129 (2 chips' slots at most 256 in all)");
  refused([&] { g.dispatch(x, x, 2, 0, "d5"); }, "d5: 'x' is no route()'s output");
  refused([&] { g.dispatch(g.input("x4", {4, 2}), r, 2, 0, "d6"); }, "d6: x 'x4' [4, 2] must be 2-D with the route's 3 rows");
  refused([&] { g.combine(x, r, 2, 0, "c1"); }, "c1: y 'x' f32 [3, 2] must be f32 [6, D]");
  refused([&] { g.moe_local(xb, r, w1, w1, w2, 0, "m1"); }, "m1: 'route' is no dispatch_route()'s output");
  refused([&] { g.moe_local(xb, choices, w1, w1, w2, 2, "m2"); }, "m2: chip 2 of 2");
  refused([&] { g.moe_local(xb, one_choice, w1, w1, w2, 0, "m3"); }, "m3: x 'rows_b' has 6 rows, the route 'one_choice' 2");
  const int wide = g.weight("wide", {4, 8, 16}, std::vector<float>(512, 0.5f), DType::bf16);
  refused([&] { g.moe_local(xb, choices, wide, wide, w2, 0, "m4"); }, "m4: 'wide' bf16 [4, 8, 16] must be a bf16 weight [E, D, F] (E 2");
  g.output(g.moe_local(xb, choices, w1, w1, w2, 1, "mine"));
}
