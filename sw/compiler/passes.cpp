#include "passes.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>

namespace tessera::compiler {

namespace {

// The tensor an op of a chain reads besides `running` (-1: none).
int other_operand(const Op& op, int running) {
  for (int t : op.in)
    if (t != running) return t;
  return -1;
}

bool reads(const Op& op, int t) { return std::find(op.in.begin(), op.in.end(), t) != op.in.end(); }

}  // namespace

std::vector<Group> fuse(const Graph& g, bool enabled) {
  const std::vector<Op>& ops = g.ops();
  std::vector<int> group_of(ops.size(), -1);
  std::vector<Group> groups;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    if (group_of[i] >= 0) continue;
    Group grp;
    grp.ops.push_back(static_cast<int>(i));
    group_of[i] = static_cast<int>(groups.size());
    int running = ops[i].out;
    // A chain grows while the running value has one reader, an elementwise
    // op of the value's size (not one it broadcasts into) whose other
    // operand exists before the group starts (an input, a
    // weight, or an earlier group's output), and the value is no output.
    // A cast ends the chain (its codes are what is stored); argmax and reshape neither
    // takes nor gives a chain.
    while (enabled && chains(ops[i].kind) && ops[static_cast<std::size_t>(grp.ops.back())].kind != OpKind::cast &&
           !g.is_output(running)) {
      const std::vector<int> readers = g.consumers(running);
      if (readers.size() != 1) break;
      const Op& next = ops[static_cast<std::size_t>(readers[0])];
      if (!is_elementwise(next.kind) || !chains(next.kind)) break;
      if (g.tensor(next.out).elements() != g.tensor(running).elements()) break;  // the value itself broadcasts
      const int other = other_operand(next, running);
      if (other >= 0 && g.producer(other) >= static_cast<int>(i)) break;  // computed after the chain starts
      grp.ops.push_back(readers[0]);
      group_of[static_cast<std::size_t>(readers[0])] = static_cast<int>(groups.size());
      running = next.out;
    }
    grp.out = running;
    groups.push_back(std::move(grp));
  }
  return groups;
}

namespace {
constexpr std::uint64_t kPrologueRows = 64;
constexpr unsigned kResidentRows = 64;  // a resident-B matmul's row blocks (Tiling::resident)
}  // namespace

unsigned fuse_prologues(const Graph& g, std::vector<Group>& groups, std::uint64_t room) {
  unsigned made = 0;
  auto group_of = [&](int op) {
    for (std::size_t j = 0; j < groups.size(); ++j)
      if (std::find(groups[j].ops.begin(), groups[j].ops.end(), op) != groups[j].ops.end()) return j;
    return groups.size();
  };
  for (std::size_t k = 0; k + 1 < groups.size(); ++k) {
    const Group& n = groups[k];
    const Op& norm = g.ops()[static_cast<std::size_t>(n.ops[0])];
    if (n.ops.size() > 2 || norm.kind != OpKind::rmsnorm || g.is_output(n.out)) continue;
    // A cast after it gives what the matmul's cast of A would.
    const Op* cast = n.ops.size() == 2 ? &g.ops()[static_cast<std::size_t>(n.ops[1])] : nullptr;
    if (cast && (cast->kind != OpKind::cast || cast->in[0] != norm.out)) continue;
    const std::vector<int> readers = g.consumers(n.out);
    if (readers.empty()) continue;
    // The matmul that takes it: the only reader, or (read by more) the one
    // whose node ends with a router's top k, every other reader after it.
    std::size_t j = groups.size();
    for (int r : readers) {
      const std::size_t at = group_of(r);
      if (at == groups.size() || groups[at].ops[0] != r) continue;
      const Group& m = groups[at];
      const Op& mm = g.ops()[static_cast<std::size_t>(r)];
      const bool routed = g.ops()[static_cast<std::size_t>(m.ops.back())].kind == OpKind::route;
      const bool scaled = mm.kind == OpKind::matmul && block_scaled(mm);  // A cast in groups with scales: nothing kept, no cast before
      if (mm.kind == OpKind::matmul && !matmul_dims(g, mm).batched() && mm.in[0] == n.out && mm.in[1] != n.out && m.prologue < 0 &&
          (!cast || (cast->format == mm.format && !scaled)) && (readers.size() == 1 || (routed && !scaled))) {
        j = at;
        break;
      }
    }
    if (j == groups.size() || j <= k) continue;
    // Past a block of rows, a prologue that the matmul's column parts each
    // run on every row costs more than a node of its own (each tile loading
    // all of A in FP32 and norming it): the 256-token prompt's QKV and LM
    // head 1873.8 -> 1819.4 us unfused; a 64-row batch step 1071.1 -> 1066.1
    // fused. Whole-row parts (a router's) norm each row once: fused always.
    const bool whole_rows = g.ops()[static_cast<std::size_t>(groups[j].ops.back())].kind == OpKind::route;
    if (!whole_rows && g.tensor(norm.out).rows() > kPrologueRows) continue;
    {
      const Op& mm = g.ops()[static_cast<std::size_t>(groups[j].ops[0])];
      const std::uint64_t K = g.tensor(norm.out).cols(), rows = g.tensor(norm.out).rows();
      if (room && rows * K * (4 + bytes(mm.format)) + K * 4 > room / 2) continue;
    }
    bool later = true;
    for (int r : readers) later &= group_of(r) >= j;
    if (!later) continue;
    groups[j].prologue = n.ops[0];
    if (readers.size() > 1) groups[j].kept = n.out;
    groups.erase(groups.begin() + static_cast<std::ptrdiff_t>(k));
    --k, ++made;
  }
  return made;
}

unsigned fuse_routes(const Graph& g, std::vector<Group>& groups) {
  unsigned made = 0;
  for (std::size_t k = 0; k + 1 < groups.size(); ++k) {
    Group& m = groups[k];
    const Op& mm = g.ops()[static_cast<std::size_t>(m.ops[0])];
    if (mm.kind != OpKind::matmul || matmul_dims(g, mm).batched() || g.is_output(m.out)) continue;
    // The matmul alone, or with an elementwise chain on its logits (no cast:
    // the top k takes them in FP32).
    bool plain = true;
    for (std::size_t j = 1; j < m.ops.size(); ++j) {
      const OpKind kind = g.ops()[static_cast<std::size_t>(m.ops[j])].kind;
      plain = plain && (is_unary(kind) || is_binary(kind));
    }
    if (!plain) continue;
    const std::vector<int> readers = g.consumers(m.out);
    if (readers.size() != 1) continue;
    const Op& r = g.ops()[static_cast<std::size_t>(readers[0])];
    if (r.kind != OpKind::route || r.groups) continue;
    for (std::size_t j = k + 1; j < groups.size(); ++j)
      if (groups[j].ops[0] == readers[0]) {
        if (groups[j].ops.size() != 1) break;
        m.ops.push_back(readers[0]);
        m.out = groups[j].out;
        groups.erase(groups.begin() + static_cast<std::ptrdiff_t>(j));
        ++made;
        break;
      }
  }
  return made;
}

std::vector<int> side_operands(const Graph& g, const Group& grp) {
  std::vector<int> sides;
  const Op& anchor = g.ops()[static_cast<std::size_t>(grp.ops[0])];
  int running = anchor.out;
  sides.push_back(is_binary(anchor.kind) ? (anchor.in[1] == anchor.in[0] ? -1 : anchor.in[1]) : -1);
  for (std::size_t j = 1; j < grp.ops.size(); ++j) {
    const Op& op = g.ops()[static_cast<std::size_t>(grp.ops[j])];
    sides.push_back(other_operand(op, running));
    running = op.out;
  }
  return sides;
}

std::vector<int> narrow_storage(Graph& g, const std::vector<Group>& groups) {
  std::vector<int> narrowed;
  for (const Group& grp : groups) {
    const int t = grp.out;
    const OpKind anchor = g.ops()[static_cast<std::size_t>(grp.ops[0])].kind;
    if (g.tensor(t).dtype != DType::f32 || g.is_output(t) || anchor == OpKind::reshape || anchor == OpKind::move ||
        anchor == OpKind::moe || anchor == OpKind::gather || anchor == OpKind::attention || is_collective(anchor) ||
        anchor == OpKind::dispatch || anchor == OpKind::dispatch_route || anchor == OpKind::combine)
      continue;  // copies of bytes, or sums the combine (or the attention kernel, or the engines) store as they are
    const std::vector<int> readers = g.consumers(t);
    std::optional<DType> fmt;
    bool ok = !readers.empty();
    for (int r : readers) {
      const Op& op = g.ops()[static_cast<std::size_t>(r)];
      // (A block-scaled matmul scales its groups from the FP32 values.)
      ok &= op.kind == OpKind::matmul && !block_scaled(op) && (!fmt || *fmt == op.format);
      fmt = op.format;
    }
    if (!ok) continue;
    g.store_as(t, *fmt);
    narrowed.push_back(t);
  }
  return narrowed;
}

std::uint32_t SpmPlan::at(const std::string& name) const {
  for (const SpmBuffer& b : buffers)
    if (b.name == name) return b.offset;
  throw std::logic_error(fmt::format("compiler: the scratchpad plan has no buffer '{}'", name));
}

SpmPlan plan_spm(const Graph& g, const Group& grp, const Tiling& t, std::uint32_t base) {
  SpmPlan p;
  p.end = base;
  auto add = [&](std::string name, std::uint64_t bytes) {
    const std::uint64_t at = (std::uint64_t{p.end} + 63) / 64 * 64;  // a bank row apart
    const std::uint64_t end = at + bytes;
    if (end > std::numeric_limits<std::uint32_t>::max()) throw std::length_error("compiler: scratchpad plan past 4 GiB");
    p.buffers.push_back({std::move(name), static_cast<std::uint32_t>(at), static_cast<std::uint32_t>(bytes)});
    p.end = static_cast<std::uint32_t>(end);
  };
  const Op& anchor = g.ops()[static_cast<std::size_t>(grp.ops[0])];
  const std::vector<int> sides = side_operands(g, grp);
  const std::uint64_t block = std::uint64_t{t.mb} * t.nb;
  const Tensor& out = g.tensor(grp.out);
  if (anchor.kind == OpKind::matmul) {
    const unsigned K = matmul_dims(g, anchor).K, eb = bytes(anchor.format);
    if (t.resident) {  // A's blocks in turn, the part's whole panel of B, C's blocks in turn
      for (int k = 0; k < 2; ++k) add(fmt::format("a{}", k), std::uint64_t{t.mb} * K * eb);
      add("b0", std::uint64_t{K} * t.nb * eb);
      for (int k = 0; k < 2; ++k) add(fmt::format("c{}", k), block * 4);
      for (std::size_t j = 0; j < sides.size(); ++j)
        if (sides[j] >= 0)
          for (int k = 0; k < 2; ++k) add(fmt::format("s{}.{}", j, k), block * 4);
      if (out.dtype != DType::f32)
        for (int k = 0; k < 2; ++k) add(fmt::format("o{}", k), block * bytes(out.dtype));
      return p;
    }
    add("a", std::uint64_t{t.mb} * K * eb);
    if (grp.prologue >= 0) {  // A's rows in FP32 and the norm's weight, normed and cast into "a"
      add("px", std::uint64_t{t.mb} * K * 4);
      add("pw", std::uint64_t{K} * 4);
    }
    for (int k = 0; k < 2; ++k) add(fmt::format("b{}", k), std::uint64_t{t.kb} * t.nb * eb);
    if (block_scaled(anchor)) {  // A's group scales; B's block scales, a pair of buffers like B's
      const std::uint64_t kg = K / kScaleBlock, ng = (t.nb + kScaleBlock - 1) / kScaleBlock;
      add("sa", std::uint64_t{t.mb} * kg * 4);
      for (int k = 0; k < 2; ++k) add(fmt::format("sb{}", k), kg * ng * 4);
    }
    for (int k = 0; k < 2; ++k) add(fmt::format("c{}", k), block * 4);
    const Op& last = g.ops()[static_cast<std::size_t>(grp.ops.back())];
    if (last.kind == OpKind::route) {  // its epilogue: the top k's values and indices, the gates
      add("rt", std::uint64_t{t.mb} * last.k * 8);
      add("rg", std::uint64_t{t.mb} * last.k * 4);
      for (std::size_t j = 0; j < sides.size(); ++j)  // an elementwise chain's before the top k
        if (sides[j] >= 0)
          for (int k = 0; k < 2; ++k) add(fmt::format("s{}.{}", j, k), block * 4);
      return p;
    }
  } else if (anchor.kind == OpKind::reshape || anchor.kind == OpKind::move || anchor.kind == OpKind::gather ||
             anchor.kind == OpKind::attention || is_collective(anchor.kind) || anchor.kind == OpKind::dispatch ||
             anchor.kind == OpKind::dispatch_route) {
    return p;  // memory to memory (a gather's indices, an attention's blocks: the kernel's own buffers; a collective: the engines')
  } else if (anchor.kind == OpKind::route) {
    // The logits, the top-k values and indices, the gates.
    add("x0", block * 4);
    if (anchor.groups) add("w0", block * 4);  // route_grouped's weights
    add("o0", std::uint64_t{t.mb} * anchor.k * 8);
    add("g0", std::uint64_t{t.mb} * anchor.k * 4);
    return p;
  } else if (anchor.kind == OpKind::moe) {
    // The combine: the sum (p0) and each other plane's block (a choice's
    // slice; spread by expert, every slice's on every chip and then the
    // peers' sums), all loaded before the adds; then the chain after it
    // (a residual), its side operands below.
    const unsigned planes = anchor.k * std::max(1u, anchor.slices) + (anchor.expert_chips > 1 ? anchor.expert_chips - 1 : 0);
    for (unsigned q = 0; q < planes; ++q) add(fmt::format("p{}", q), block * 4);
  } else if (anchor.kind == OpKind::combine) {  // a row's parts (at most k, one a chip), summed as a moe op's planes are
    for (unsigned q = 0; q < std::min(anchor.k, anchor.chips); ++q) add(fmt::format("p{}", q), block * 4);
  } else if (is_reduction(anchor.kind)) {
    for (int k = 0; k < 2; ++k) add(fmt::format("x{}", k), block * 4);
    for (int k = 0; k < 2; ++k) add(fmt::format("o{}", k), std::uint64_t{t.mb} * 4);
    return p;
  } else {
    for (int k = 0; k < 2; ++k) add(fmt::format("x{}", k), block * 4);
  }
  // Side operands (one that broadcasts is doubled in place), and the
  // row ops' weights, once per part.
  for (std::size_t j = 0; j < sides.size(); ++j)
    if (sides[j] >= 0)
      for (int k = 0; k < 2; ++k) add(fmt::format("s{}.{}", j, k), block * 4);
  for (std::size_t j = 0; j < grp.ops.size(); ++j) {
    const Op& op = g.ops()[static_cast<std::size_t>(grp.ops[j])];
    if (op.kind == OpKind::rmsnorm || op.kind == OpKind::layernorm)
      for (std::size_t w = 1; w < op.in.size(); ++w) add(fmt::format("w{}.{}", j, w), std::uint64_t{t.nb} * 4);
  }
  if (out.dtype != DType::f32)
    for (int k = 0; k < 2; ++k) add(fmt::format("o{}", k), block * bytes(out.dtype));
  return p;
}

namespace {

// Splits [0, n) into `parts` ranges as even as `align` allows (empty ones dropped).
std::vector<std::pair<unsigned, unsigned>> split(unsigned n, unsigned parts, unsigned align) {
  std::vector<std::pair<unsigned, unsigned>> r;
  const unsigned units = (n + align - 1) / align;
  parts = std::max(1u, std::min(parts, units));
  unsigned at = 0;
  for (unsigned i = 0; i < parts; ++i) {
    const unsigned end = i + 1 == parts ? n : std::min(n, (units * (i + 1) / parts) * align);
    if (end > at) r.emplace_back(at, end);
    at = end;
  }
  return r;
}

}  // namespace

Tiling tile(const Graph& g, const Group& grp, const Target& tgt, Columns window) {
  const Op& anchor = g.ops()[static_cast<std::size_t>(grp.ops[0])];
  if (anchor.kind == OpKind::move) {
    // Parts are ranges of the moves, of about equal bytes, on as many tiles.
    Tiling t;
    t.mb = t.nb = 1;
    std::uint64_t total = 0;
    for (const Move& m : anchor.moves) total += std::uint64_t{m.len} * m.count;
    const unsigned parts = std::min<unsigned>(tgt.tiles, static_cast<unsigned>(anchor.moves.size()));
    std::uint64_t done = 0;
    unsigned r0 = 0;
    for (unsigned k = 0; k < anchor.moves.size(); ++k) {
      done += std::uint64_t{anchor.moves[k].len} * anchor.moves[k].count;
      const bool last = k + 1 == anchor.moves.size();
      if (last || done * parts >= total * (t.parts.size() + 1)) {
        t.parts.push_back({static_cast<unsigned>(t.parts.size()), r0, k + 1, 0, 0});
        r0 = k + 1;
      }
    }
    return t;
  }
  if (is_collective(anchor.kind)) {
    // One part, on tile 0: its core posts the collective to the chip's
    // communication engine and sleeps until the engine signals it.
    Tiling t;
    t.mb = t.nb = 1;
    const Tensor& out = g.tensor(anchor.out);
    t.parts.push_back({0, 0, static_cast<unsigned>(out.rows()), 0, out.cols()});
    return t;
  }
  if (anchor.kind == OpKind::gather || anchor.kind == OpKind::dispatch || anchor.kind == OpKind::dispatch_route) {
    // Parts are ranges of the indices (a dispatch's slots, a dispatch_route's blocks), as even as the tiles allow.
    Tiling t;
    t.mb = t.nb = 1;
    const unsigned n = static_cast<unsigned>(anchor.kind == OpKind::gather ? g.tensor(anchor.in[1]).elements() : g.tensor(anchor.out).shape[0]);
    for (const auto& [r0, r1] : split(n, tgt.tiles, 1)) t.parts.push_back({static_cast<unsigned>(t.parts.size()), r0, r1, 0, 0});
    return t;
  }
  if (anchor.kind == OpKind::attention) {
    // Parts are ranges of the heads (r0, r1), as even as the tiles allow;
    // over paged caches (rows of several sequences) tiles left over take
    // ranges of the rows too (c0, c1: a part runs the segments that start
    // in its rows), and where the rows can fill the tiles the heads split
    // no finer than their KV heads (the kernel loads a sequence's cached
    // rows once for a part's heads that share a KV head).
    Tiling t;
    t.mb = t.nb = 1;
    // With a window (its share on one chip of several: tile_chips), the
    // heads [c0, c1) only.
    const unsigned T = static_cast<unsigned>(g.tensor(anchor.in[0]).rows());
    const unsigned first = window.c1 ? window.c0 : 0, heads = window.c1 ? window.c1 - window.c0 : anchor.heads;
    if (window.c1 > anchor.heads || !heads) throw std::logic_error("compiler: a tiling's heads lie past its attention's");
    const unsigned group = anchor.heads / g.tensor(anchor.in[3]).shape[0];
    const unsigned kv_heads = (first + heads - 1) / group - first / group + 1;  // those the window's heads read
    const unsigned hg = anchor.page ? std::min({heads, tgt.tiles, std::max(kv_heads, (tgt.tiles + T - 1) / T)})
                                    : std::min(heads, tgt.tiles);
    const unsigned rg = anchor.page ? std::max(1u, std::min(T, tgt.tiles / hg)) : 1;
    for (const auto& [h0, h1] : split(heads, hg, 1))
      for (const auto& [a, b] : split(T, rg, 1)) t.parts.push_back({static_cast<unsigned>(t.parts.size()), first + h0, first + h1, a, b});
    return t;
  }
  // The rows x cols the parts cover: the anchor's output (an argmax's input).
  const Tensor& view =
      g.tensor(tiles_input(anchor.kind) ? anchor.in[0] : anchor.out);
  const unsigned rows = static_cast<unsigned>(view.rows());
  if (window.c1 > view.cols() || window.c0 > window.c1) throw std::logic_error("compiler: a tiling's columns lie past its output's");
  const unsigned col0 = window.c1 ? window.c0 : 0, cols = window.c1 ? window.c1 - window.c0 : view.cols();
  bool full_rows = tiles_input(anchor.kind);
  for (int o : grp.ops) full_rows |= is_rowwise(g.ops()[static_cast<std::size_t>(o)].kind) || g.ops()[static_cast<std::size_t>(o)].kind == OpKind::route;
  const std::vector<int> sides = side_operands(g, grp);
  unsigned n_sides = 0;
  for (int s : sides) n_sides += s >= 0;
  const unsigned K = anchor.kind == OpKind::matmul ? g.tensor(anchor.in[0]).cols() : 0;
  const unsigned eb = anchor.kind == OpKind::matmul ? bytes(anchor.format) : 4;
  // A block-scaled matmul: each GEMM takes all of K (its sum over the
  // groups is one FP32 accumulation) and whole 128-column blocks of B.
  const bool scaled = anchor.kind == OpKind::matmul && block_scaled(anchor);
  const unsigned col_align = scaled ? kScaleBlock : anchor.kind == OpKind::matmul ? 16 : 1;
  const unsigned nb_align = scaled ? kScaleBlock : 16;
  // A batched matmul: parts of whole batches (each block of rows meets one
  // matrix of B), each batch's matrix streamed for its rows.
  const unsigned batch_rows = anchor.kind == OpKind::matmul ? static_cast<unsigned>(matmul_dims(g, anchor).M) : 0;
  const bool batched = anchor.kind == OpKind::matmul && matmul_dims(g, anchor).batched();

  // The grid: tm row ranges x tn column ranges, the one whose slowest tile
  // (its bytes through its port, its MACs) and whose reads and writes
  // through the NoC's cut take the least time; within 5% of that, the one
  // whose slowest tile is quickest (these are bounds: a tile's DMA stream
  // rarely reaches its port's, and more streams hide latency better).
  Tiling best;
  double best_s = std::numeric_limits<double>::infinity(), best_slowest = best_s;
  for (unsigned tm = 1; tm <= tgt.tiles; ++tm)
    for (unsigned tn = 1; tn <= (full_rows ? 1 : tgt.tiles / tm); ++tn) {
      const auto rr = split(rows, tm, batched ? batch_rows : 1), cc = split(cols, tn, col_align);
      double slowest = 0, reads = 0, writes = 0;
      for (const auto& [r0, r1] : rr)
        for (const auto& [c0, c1] : cc) {
          const double m = r1 - r0, n = c1 - c0;
          double in = m * n * 4 * n_sides, s = 0;
          if (anchor.kind == OpKind::matmul) {
            const double mats = batched ? m / batch_rows : 1, per = m / mats;  // B's matrices the part meets, rows each
            in += m * K * 4 + mats * K * n * eb;
            s = mats * std::ceil(K / 64.0) * std::ceil(n / 64.0) * std::max(per, 64.0) * 64 * 64 / tgt.tile_macs_per_s;
          } else {
            in += m * n * 4;
          }
          reads += in, writes += m * n * 4;
          slowest = std::max(slowest, std::max(s, (in + m * n * 4) / tgt.tile_bytes_per_s));
        }
      const double time = std::max({slowest, reads / tgt.cut_read_bytes_per_s, writes / tgt.cut_write_bytes_per_s});
      if (time < best_s * 0.95 || (time <= best_s * 1.05 && slowest < best_slowest)) {
        best_s = std::min(best_s, time), best_slowest = slowest;
        best = Tiling{};
        best.seconds = time;
        unsigned tile = 0;
        for (const auto& [r0, r1] : rr)
          for (const auto& [c0, c1] : cc) best.parts.push_back({tile++, r0, r1, col0 + c0, col0 + c1});
      }
    }
  // Blocks: as large as the scratchpad takes, multi-buffered.
  unsigned max_r = 0, max_c = 0;
  for (const Part& p : best.parts) max_r = std::max(max_r, p.r1 - p.r0), max_c = std::max(max_c, p.c1 - p.c0);
  // Row groups in at least four blocks where they have the rows, so loads,
  // vector ops and stores overlap, but no block under 4 KiB of its first
  // operand where the part has that (below it a block's commands cost the
  // tile more than its transfers take: a decode step's combine of 8 rows
  // in 2-row blocks of 64 columns took four times as long as in one; 16
  // KiB cost batch 64 the overlap of its 8-row parts). A matmul's blocks overlap
  // across K chunks, and its B streams once a row block: as many rows as fit.
  best.nb = full_rows ? max_c : std::min(max_c, 512u);
  best.mb = std::min(max_r, anchor.kind == OpKind::matmul ? 256u : 64u);
  if (batched) best.mb = std::min(best.mb, batch_rows);
  if (anchor.kind != OpKind::matmul) {
    const unsigned min_rows = (4096 + 4 * best.nb - 1) / (4 * best.nb);
    best.mb = std::max(1u, std::min(best.mb, std::max((max_r + 3) / 4, std::min(max_r, min_rows))));
  }
  best.kb = K ? (scaled ? K : std::min(K, 512u)) : 0;
  const std::uint32_t room = tgt.spm_end - tgt.spm_base;
  for (;;) {
    if (plan_spm(g, grp, best, 0).end <= room) break;
    if (best.kb > 64 && !scaled) best.kb = (best.kb / 2 + 15) / 16 * 16;
    // (Block-scaled: K stays whole, so narrower B blocks before fewer rows,
    // or B would stream once for every few rows.)
    else if (scaled && !full_rows && best.nb > nb_align) best.nb = (best.nb / 2 + nb_align - 1) / nb_align * nb_align;
    else if (best.mb > 1) best.mb = (best.mb + 1) / 2;
    else if (!full_rows && best.nb > nb_align) best.nb = (best.nb / 2 + nb_align - 1) / nb_align * nb_align;
    else
      throw std::invalid_argument(fmt::format("compiler: {} '{}': a row of {} columns does not fit the scratchpad's {} KiB",
                                              name(anchor.kind), anchor.name, cols, room / 1024));
  }
  // A B that would stream as one chunk of 64 KiB or more streams in four
  // along K (of 64 rows at least), so the GEMMs overlap its loads (a decode
  // step's QKV ran its whole GEMM after its whole load) and a prologue's
  // loads queue behind a quarter of it, not all. (Smaller chunks cost their
  // descriptors' round trips more than the overlap gains: a router's 8 KiB.)
  if (K && !scaled && best.kb >= K && best.nb >= max_c && K >= 128 && std::uint64_t{K} * max_c * eb >= 64 * 1024)
    best.kb = std::max(64u, (K / 4 + 15) / 16 * 16);
  // Past 64 rows a part's whole panel of a weight stays in the scratchpad
  // where it fits, and its rows run in blocks of 64 that overlap one
  // another's loads, GEMMs and stores: a single row block's store ran
  // after all of its arithmetic, and the store (into one stack) and A's
  // load (from one) each bind a 256-token prompt's projections. (Not
  // block-scaled, nor after a prologue or before a top k, whose emitters
  // keep one row block's buffers.)
  if (anchor.kind == OpKind::matmul && !scaled && !batched && g.tensor(anchor.in[1]).role == Role::weight && grp.prologue < 0 &&
      g.ops()[static_cast<std::size_t>(grp.ops.back())].kind != OpKind::route && max_r > kResidentRows) {
    Tiling r = best;
    r.resident = true, r.mb = kResidentRows, r.nb = max_c;
    r.kb = K >= 128 ? std::max(64u, (K / 4 + 15) / 16 * 16) : K;
    if (plan_spm(g, grp, r, 0).end <= room) best = r;
  }
  return best;
}

std::vector<Tiling> tile_chips(const Graph& g, const Group& grp, const Target& tgt, unsigned chips, bool where_faster) {
  const Op& anchor = g.ops()[static_cast<std::size_t>(grp.ops[0])];
  if (chips > 1 && anchor.kind == OpKind::attention && grp.ops.size() == 1 && !where_faster) {
    // Whole KV heads a chip, with their query heads (the tile that runs a
    // KV head's first query head appends the new rows to its cache), over
    // up to KV chips; a chip beyond them has no part.
    const unsigned KV = g.tensor(anchor.in[3]).shape[0], per = anchor.heads / KV;
    std::vector<Tiling> by_chip;
    for (const auto& [k0, k1] : split(KV, chips, 1)) by_chip.push_back(tile(g, grp, tgt, {k0 * per, k1 * per}));
    by_chip.resize(chips);
    return by_chip;
  }
  if (chips < 2 || anchor.kind != OpKind::matmul || matmul_dims(g, anchor).batched() || g.tensor(anchor.in[1]).role != Role::weight)
    return {};
  for (int o : grp.ops) {
    const OpKind k = g.ops()[static_cast<std::size_t>(o)].kind;
    if (is_rowwise(k) || k == OpKind::route) return {};  // its rows whole on one tile
  }
  const unsigned align = block_scaled(anchor) ? kScaleBlock : 16, cols = g.tensor(anchor.out).cols();
  if (cols / align < chips) return {};  // not a unit of columns for every chip
  std::vector<Tiling> by_chip;
  const auto ranges = split(cols, chips, align);
  for (const auto& [c0, c1] : ranges) by_chip.push_back(tile(g, grp, tgt, {c0, c1}));
  if (where_faster) {
    // The device pushes A to each peer once with the hand-over; the peers'
    // tiles write their columns back (and read as many of the side
    // operands'), FP32 as the tiler counts them; all of it crosses the
    // device's ports, counted as through one link.
    const double rows = static_cast<double>(g.tensor(anchor.out).rows()), K = g.tensor(anchor.in[0]).cols();
    double spread = by_chip[0].seconds, over_links = 0;
    for (std::size_t c = 1; c < by_chip.size(); ++c) {
      spread = std::max(spread, by_chip[c].seconds);
      over_links += rows * (K + 2.0 * (ranges[c].second - ranges[c].first)) * 4;
    }
    const double link = tgt.link_bytes_per_s > 0 ? tgt.link_bytes_per_s : tgt.cut_read_bytes_per_s;
    spread += over_links / link + tgt.handover_s + tgt.handover_peer_s * static_cast<double>(chips - 1);
    if (spread >= tile(g, grp, tgt).seconds) return {};
  }
  return by_chip;
}

Stripes stripe_outputs(const Graph& g, const std::vector<Group>& groups, const std::set<std::size_t>& whole, unsigned stacks,
                       const std::vector<Tiling>& tilings) {
  constexpr std::uint64_t kWide = 1 << 20;   // a row reduction's input striped from here
  constexpr std::uint64_t kHeads = 1 << 18;  // an attention's output likewise
  Stripes r;
  for (std::size_t gi = 0; gi < groups.size(); ++gi) {
    const int t = groups[gi].out;
    const OpKind anchor = t < 0 ? OpKind::matmul : g.ops()[static_cast<std::size_t>(groups[gi].ops[0])].kind;
    if (t < 0 || whole.count(gi)) continue;
    if (anchor == OpKind::matmul && matmul_dims(g, g.ops()[static_cast<std::size_t>(groups[gi].ops[0])]).batched()) continue;
    const std::vector<int> readers = g.consumers(t);
    const Tensor& T = g.tensor(t);
    const bool rows_op = is_rowwise(anchor) || is_elementwise(anchor);  // stored by blocks of whole or part rows
    if (anchor == OpKind::attention || ((anchor == OpKind::matmul || rows_op) && readers.size() == 1)) {
      // Read only as the A of matmuls anchoring groups kept on the chip.
      bool ok = !readers.empty() && !g.is_output(t) && stacks > 1 && T.elements() * bytes(T.dtype) >= kHeads &&
                (anchor != OpKind::attention || (groups[gi].ops.size() == 1 && gi < tilings.size())) && groups[gi].kept < 0;
      for (int rd : readers) {
        const Op& op = g.ops()[static_cast<std::size_t>(rd)];
        ok &= op.kind == OpKind::matmul && !block_scaled(op) && !matmul_dims(g, op).batched() && op.in[0] == t && op.in[1] != t;
        const auto own = std::find_if(groups.begin(), groups.end(), [&](const Group& x) { return x.ops[0] == rd; });
        ok &= own != groups.end() && !whole.count(static_cast<std::size_t>(own - groups.begin())) && own->prologue < 0;
      }
      if (ok && anchor == OpKind::attention) {
        // The parts' head ranges, in order, grouped into up to `stacks` stripes.
        std::set<unsigned> starts;
        for (const Part& p : tilings[gi].parts) starts.insert(p.r0);
        const std::vector<unsigned> heads(starts.begin(), starts.end());
        const unsigned dv = T.cols() / g.ops()[static_cast<std::size_t>(groups[gi].ops[0])].heads;
        std::vector<unsigned> c0;
        for (const auto& [a, b] : split(static_cast<unsigned>(heads.size()), stacks, 1)) c0.push_back(heads[a] * dv);
        if (c0.size() > 1) r[t] = c0;
        continue;
      }
      if (ok && T.cols() >= 16 * stacks) {  // a matmul's or a row op's: stripes of 16-column units
        std::vector<unsigned> c0;
        for (const auto& [a, b] : split(T.cols(), stacks, 16)) c0.push_back(a);
        r[t] = c0;
        continue;
      }
      if (anchor == OpKind::attention) continue;
    }
    if (anchor != OpKind::matmul) continue;
    const bool reduced = std::all_of(readers.begin(), readers.end(), [&](int rd) {
      const Op& op = g.ops()[static_cast<std::size_t>(rd)];
      return is_reduction(op.kind) && op.in.size() == 1 && op.in[0] == t;
    });
    if (reduced && stacks > 1 && T.elements() * bytes(T.dtype) >= kWide && T.cols() >= 16 * stacks) {
      std::vector<unsigned> c0;
      for (const auto& [a, b] : split(T.cols(), stacks, 16)) c0.push_back(a);
      r[t] = c0;
      continue;
    }
    if (g.is_output(t)) continue;
    std::optional<std::vector<unsigned>> cuts;
    bool ok = !readers.empty();
    for (int rd : readers) {
      const Op& op = g.ops()[static_cast<std::size_t>(rd)];
      // Q, K and V all this tensor, each at its own columns and nothing else of the op.
      ok &= op.kind == OpKind::attention && op.in[0] == t && op.in[1] == t && op.in[2] == t && 0 < op.k_col &&
            op.k_col < op.v_col && op.v_col < g.tensor(t).cols();
      for (std::size_t i = 3; ok && i < op.in.size(); ++i) ok &= op.in[i] != t;
      if (!ok) break;
      const std::vector<unsigned> c = {0, op.k_col, op.v_col};
      ok &= !cuts || *cuts == c;
      cuts = c;
    }
    if (ok) r[t] = *cuts;
  }
  return r;
}

const HbmSlot* HbmPlan::find(int tensor, unsigned stripe) const {
  for (const HbmSlot& s : slots)
    if (s.tensor == tensor && s.stripe == stripe) return &s;
  return nullptr;
}

HbmPlan plan_hbm(const Graph& g, const std::vector<Group>& groups, unsigned stacks, const Stripes& stripes) {
  HbmPlan plan;
  plan.arena.assign(std::max(1u, stacks), 0);
  const unsigned end = static_cast<unsigned>(groups.size());
  for (unsigned k = 0; k < groups.size(); ++k)
    for (const int stored : {groups[k].out, groups[k].kept}) {
      if (stored < 0) continue;
      const Tensor& T = g.tensor(stored);
      HbmSlot s;
      s.tensor = stored;
      s.bytes = (T.elements() * bytes(T.dtype) + 63) / 64 * 64;
      s.first = s.last = k;
      if (g.is_output(s.tensor)) s.last = end;
      for (unsigned j = k + 1; j < groups.size(); ++j) {
        for (int o : groups[j].ops)
          if (reads(g.ops()[static_cast<std::size_t>(o)], s.tensor)) s.last = std::max(s.last, j);
        if (groups[j].prologue >= 0 && reads(g.ops()[static_cast<std::size_t>(groups[j].prologue)], s.tensor)) s.last = std::max(s.last, j);
      }
      const auto striped = stripes.find(stored);
      if (striped == stripes.end()) {
        plan.slots.push_back(s);
        continue;
      }
      const std::vector<unsigned>& c0 = striped->second;
      for (unsigned i = 0; i < c0.size(); ++i) {
        s.stripe = i, s.col0 = c0[i], s.cols = (i + 1 < c0.size() ? c0[i + 1] : T.cols()) - c0[i];
        s.bytes = (T.rows() * s.cols * bytes(T.dtype) + 63) / 64 * 64;
        plan.slots.push_back(s);
      }
    }
  // Largest first, each at the lowest offset of the least filled stack
  // where nothing live at the same time lies.
  std::vector<std::size_t> order(plan.slots.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return plan.slots[a].bytes > plan.slots[b].bytes; });
  std::vector<bool> placed(plan.slots.size(), false);
  for (std::size_t i : order) {
    HbmSlot& s = plan.slots[i];
    // (The least filled stack that holds no other stripe of the tensor yet,
    // where there is one.)
    std::vector<bool> taken(plan.arena.size(), false);
    unsigned n_taken = 0;
    for (std::size_t j = 0; j < plan.slots.size(); ++j)
      if (placed[j] && plan.slots[j].tensor == s.tensor && !taken[plan.slots[j].stack]) taken[plan.slots[j].stack] = true, ++n_taken;
    if (n_taken == taken.size()) taken.assign(taken.size(), false);
    s.stack = 0;
    for (unsigned k = 0; k < plan.arena.size(); ++k)
      if (!taken[k] && (taken[s.stack] || plan.arena[k] < plan.arena[s.stack])) s.stack = k;
    std::vector<std::pair<std::uint64_t, std::uint64_t>> busy;
    for (std::size_t j = 0; j < plan.slots.size(); ++j) {
      const HbmSlot& o = plan.slots[j];
      if (placed[j] && o.stack == s.stack && o.first <= s.last && s.first <= o.last) busy.emplace_back(o.offset, o.offset + o.bytes);
    }
    std::sort(busy.begin(), busy.end());
    std::uint64_t at = 0;
    for (const auto& [b0, b1] : busy) {
      if (at + s.bytes <= b0) break;
      at = std::max(at, b1);
    }
    s.offset = at;
    placed[i] = true;
    plan.arena[s.stack] = std::max(plan.arena[s.stack], at + s.bytes);
  }
  return plan;
}

}  // namespace tessera::compiler
