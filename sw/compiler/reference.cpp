#include "reference.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <stdexcept>

#include "engines/num/accumulate.hpp"
#include "engines/num/vector_ops.hpp"
#include "c2c/comm_reference.hpp"

namespace tessera::compiler {

void check_inputs(const Graph& g, const std::map<std::string, std::vector<float>>& inputs) {
  for (const auto& [name, v] : inputs) {
    bool known = false;
    for (const Tensor& t : g.tensors()) known |= t.role == Role::input && t.name == name;
    if (!known) throw std::invalid_argument(fmt::format("run: the graph has no input '{}'", name));
  }
  for (const Tensor& t : g.tensors()) {
    if (t.role != Role::input) continue;
    const auto it = inputs.find(t.name);
    if (it == inputs.end()) throw std::invalid_argument(fmt::format("run: input '{}' is missing", t.name));
    if (it->second.size() != t.elements())
      throw std::invalid_argument(
          fmt::format("run: input '{}' needs {} values, not {}", t.name, t.elements(), it->second.size()));
  }
  for (const Op& op : g.ops()) {
    const bool rope = op.kind == OpKind::rope && op.in.size() > 1;
    if (op.kind != OpKind::attention && !rope) continue;
    if (op.page) {
      attention_segments(g, op, inputs);  // checks them
      continue;
    }
    const Tensor& P = g.tensor(op.in[rope ? 1 : 5]);
    const std::vector<float>& p = inputs.at(P.name);
    const unsigned C = rope ? 1u << 24 : g.tensor(op.in[3]).shape[1];
    if (!(p[0] >= 0) || p[0] != std::floor(p[0]) || p[0] + static_cast<float>(p.size()) > static_cast<float>(C))
      throw std::invalid_argument(fmt::format("run: {}: positions '{}' start at {}; {} rows need {} to {} in a cache of {}", op.name,
                                              P.name, p[0], p.size(), 0, C - p.size(), C));
    for (std::size_t r = 1; r < p.size(); ++r)
      if (p[r] != p[0] + static_cast<float>(r))
        throw std::invalid_argument(fmt::format("run: {}: positions '{}' [{}] is {}, not {} (one after another)", op.name, P.name, r,
                                                p[r], p[0] + static_cast<float>(r)));
  }
}

std::vector<Segment> attention_segments(const Graph& g, const Op& op, const std::map<std::string, std::vector<float>>& inputs) {
  const Tensor &P = g.tensor(op.in[5]), &Sq = g.tensor(op.in[6]), &Tb = g.tensor(op.in[7]);
  const std::vector<float>&pos = inputs.at(P.name), &seq = inputs.at(Sq.name), &table = inputs.at(Tb.name);
  const unsigned S = Tb.shape[0], pages = Tb.shape[1], page = op.page, pool = g.tensor(op.in[3]).shape[1] / page;
  auto bad = [&](const std::string& what) { return std::invalid_argument(fmt::format("run: {}: {}", op.name, what)); };
  auto whole = [](float x, float below) { return x >= 0 && x < below && x == std::floor(x); };
  std::vector<Segment> segs;
  std::vector<int> seen(S, -1);
  for (std::size_t r = 0; r < pos.size(); ++r) {
    if (!whole(pos[r], 16777216.0f)) throw bad(fmt::format("positions '{}' [{}] is {}, not a whole number", P.name, r, pos[r]));
    if (!whole(seq[r], static_cast<float>(S)))
      throw bad(fmt::format("sequences '{}' [{}] is {}, not a sequence of the page table's {}", Sq.name, r, seq[r], S));
    const unsigned s = static_cast<unsigned>(seq[r]), x = static_cast<unsigned>(pos[r]);
    if (!segs.empty() && segs.back().sequence == s && segs.back().position + segs.back().rows == x) {
      ++segs.back().rows;
      continue;
    }
    if (seen[s] >= 0)
      throw bad(fmt::format("sequence {}'s rows are not together at consecutive positions (row {} at position {})", s, r, x));
    seen[s] = static_cast<int>(segs.size());
    segs.push_back({s, static_cast<unsigned>(r), 1, x});
  }
  // Each segment's pages: in the pool, and a page a segment writes touched by no other.
  std::map<unsigned, std::size_t> owner;
  for (std::size_t i = 0; i < segs.size(); ++i) {
    const Segment& sg = segs[i];
    if (sg.position + sg.rows > pages * page)
      throw bad(fmt::format("sequence {} at positions {} to {} is past its {} pages of {}", sg.sequence, sg.position,
                            sg.position + sg.rows - 1, pages, page));
    for (unsigned x = 0; x < sg.position + sg.rows; x += page) {
      const float e = table[std::size_t{sg.sequence} * pages + x / page];
      if (!whole(e, static_cast<float>(pool)))
        throw bad(fmt::format("page table '{}' [{}][{}] is {}, not a page of the cache's {}", Tb.name, sg.sequence, x / page, e, pool));
    }
  }
  for (int pass = 0; pass < 2; ++pass)  // the pages written, then every page touched
    for (std::size_t i = 0; i < segs.size(); ++i) {
      const Segment& sg = segs[i];
      const unsigned first = pass ? 0 : sg.position / page, end = (sg.position + sg.rows + page - 1) / page;
      for (unsigned x = first; x < end; ++x) {
        const unsigned phys = static_cast<unsigned>(table[std::size_t{sg.sequence} * pages + x]);
        const auto [it, fresh] = owner.emplace(phys, i);
        if (!fresh && it->second != i)
          throw bad(fmt::format("page {} is written by sequence {} and used by sequence {} in the same step", phys,
                                segs[pass ? it->second : i].sequence, segs[pass ? i : it->second].sequence));
      }
    }
  return segs;
}

namespace {

// moe: each row's chosen experts in the order the chip sums them. For
// expert e and hidden slice s (the split's slices, `slices` of F / slices
// columns each): h1 = x.w1[e][:, s], h3 = x.w3[e][:, s] (FP32 sums, one
// product at a time), a = bf16(silu(h1) * h3), y = a.w2[e][s, :], times
// the gate; the plane of choice j and slice s added to the row's sum in
// the order j = 0.., s = 0... (over several chips: each chip's slices so,
// then the chips' sums in order; the experts spread over the chips, each
// chip's every slice, zeros for a choice whose expert is another chip's).
// The slices split F as the compiler does
// (moe_slices), so the sums' order is the chip's.
// route_grouped as the tile core computes it (program.c's route_grouped):
// floats compared as values (ties to the lower index), sums in FP32.
void route_grouped(const Op& op, const std::vector<float>& choice, const std::vector<float>& weights, unsigned rows, unsigned E,
                   std::vector<float>& y) {
  const unsigned k = op.k, G = op.groups, per = E / G;
  for (unsigned r = 0; r < rows; ++r) {
    const float* c = choice.data() + std::size_t{r} * E;
    std::vector<float> score(G);
    std::vector<bool> kept(G, false);
    for (unsigned g = 0; g < G; ++g) {
      unsigned b1 = g * per;
      for (unsigned j = g * per; j < (g + 1) * per; ++j)
        if (c[j] > c[b1]) b1 = j;
      unsigned b2 = E;
      for (unsigned j = g * per; j < (g + 1) * per; ++j)
        if (j != b1 && (b2 == E || c[j] > c[b2])) b2 = j;
      score[g] = per > 1 ? c[b1] + c[b2] : c[b1];
    }
    for (unsigned n = 0; n < op.topk_group; ++n) {
      unsigned best = G;
      for (unsigned g = 0; g < G; ++g)
        if (!kept[g] && (best == G || score[g] > score[best])) best = g;
      kept[best] = true;
    }
    std::vector<float> masked(E);
    for (unsigned e = 0; e < E; ++e) masked[e] = kept[e / per] ? c[e] : 0.0f;
    std::vector<float> val(k);
    std::vector<unsigned> idx(k);
    num::vec::topk(masked.data(), E, k, val.data(), idx.data());
    float sum = 0.0f;
    for (unsigned j = 0; j < k; ++j) sum += weights[std::size_t{r} * E + idx[j]];
    const float denom = sum + 1e-20f;
    for (unsigned j = 0; j < k; ++j) {
      float gate = weights[std::size_t{r} * E + idx[j]];
      if (op.normalize) gate = gate / denom;
      y[std::size_t{r} * k + j] = static_cast<float>(idx[j]);
      y[(std::size_t{rows} + r) * k + j] = gate * op.route_scale;
    }
  }
}

// Expert parallelism's slots (Graph::dispatch): by row t and chip j, the
// slot of j's `capacity` that row t took (-1: none), rows in order, a row
// going to every chip one of its choices is on (expert e on chip e mod N).
std::vector<int> dispatch_slots(const Op& op, const std::vector<float>& route, unsigned T) {
  const unsigned N = op.chips, K = op.k;
  std::vector<int> slot(std::size_t{T} * N, -1);
  std::vector<unsigned> fill(N, 0);
  for (unsigned t = 0; t < T; ++t) {
    std::vector<bool> on(N, false);
    for (unsigned k = 0; k < K; ++k) on[static_cast<unsigned>(route[std::size_t{t} * K + k]) % N] = true;
    for (unsigned j = 0; j < N; ++j)
      if (on[j] && fill[j] < op.capacity) slot[std::size_t{t} * N + j] = static_cast<int>(fill[j]++);
  }
  return slot;
}

// dispatch, dispatch_route, combine as the program kernel's dispatch()
// computes them (they move values; combine adds in chip order).
std::vector<float> dispatch_reference(const Graph& g, const Op& op, const std::vector<float>& x, const std::vector<float>& route) {
  const unsigned N = op.chips, C = op.capacity, K = op.k;
  const unsigned T = g.tensor(op.in[op.kind == OpKind::dispatch_route ? 0 : 1]).shape[1];
  const std::vector<int> slot = dispatch_slots(op, route, T);
  if (op.kind == OpKind::dispatch_route) {
    std::vector<float> y(std::size_t{N} * 2 * C * K);
    for (unsigned j = 0; j < N; ++j)
      for (unsigned i = 0; i < C; ++i)
        for (unsigned k = 0; k < K; ++k) y[(std::size_t{j} * 2 * C + i) * K + k] = static_cast<float>((j + 1) % N);
    for (unsigned t = 0; t < T; ++t)
      for (unsigned j = 0; j < N; ++j)
        if (const int i = slot[std::size_t{t} * N + j]; i >= 0)
          for (unsigned k = 0; k < K; ++k) {
            y[(std::size_t{j} * 2 * C + static_cast<unsigned>(i)) * K + k] = route[std::size_t{t} * K + k];
            y[(std::size_t{j} * 2 * C + C + static_cast<unsigned>(i)) * K + k] = route[(std::size_t{T} + t) * K + k];
          }
    return y;
  }
  const std::size_t D = g.tensor(op.in[0]).cols();
  if (op.kind == OpKind::dispatch) {
    std::vector<float> y(std::size_t{N} * C * D, 0.0f);
    for (unsigned t = 0; t < T; ++t)
      for (unsigned j = 0; j < N; ++j)
        if (const int i = slot[std::size_t{t} * N + j]; i >= 0)
          std::copy_n(x.begin() + static_cast<std::ptrdiff_t>(t * D), D, y.begin() + static_cast<std::ptrdiff_t>((std::size_t{j} * C + static_cast<unsigned>(i)) * D));
    return y;
  }
  // combine: min(k, N) planes, a row's parts in chip order then zeros, added in turn.
  std::vector<float> y(std::size_t{T} * D, 0.0f);
  const unsigned P = std::min(K, N);
  for (unsigned t = 0; t < T; ++t) {
    unsigned q = 0;
    for (unsigned j = 0; j < N; ++j)
      if (const int i = slot[std::size_t{t} * N + j]; i >= 0) {
        for (std::size_t d = 0; d < D; ++d) {
          const float p = x[(std::size_t{j} * C + static_cast<unsigned>(i)) * D + d];
          y[t * D + d] = q ? y[t * D + d] + p : p;
        }
        ++q;
      }
    for (; q < P; ++q)
      for (std::size_t d = 0; d < D; ++d) y[t * D + d] = q ? y[t * D + d] + 0.0f : 0.0f;
  }
  return y;
}

std::vector<float> moe_reference(const Graph& g, const Op& op, const std::vector<float>& x, const std::vector<float>& routed) {
  namespace vec = num::vec;
  const Tensor &X = g.tensor(op.in[0]), &W1 = g.tensor(op.in[2]), &W3 = g.tensor(op.in[3]), &W2 = g.tensor(op.in[4]);
  const unsigned T = static_cast<unsigned>(X.rows()), D = X.cols(), F = W1.shape[2], K = op.k;
  // moe_local: the route in blocks of `capacity` rows (ids, then gates),
  // read as one; expert e is this chip's e / ep_chips where e mod ep_chips
  // is this chip, every other expert's choices adding zeros.
  std::vector<float> blocked;
  if (op.ep_chips) {
    const unsigned RB = op.capacity;
    blocked.resize(routed.size());
    for (unsigned b = 0; b < T / RB; ++b)
      for (unsigned i = 0; i < RB * K; ++i) {
        blocked[std::size_t{b} * RB * K + i] = routed[std::size_t{b} * 2 * RB * K + i];
        blocked[std::size_t{T} * K + std::size_t{b} * RB * K + i] = routed[std::size_t{b} * 2 * RB * K + RB * K + i];
      }
  }
  const std::vector<float>& route = op.ep_chips ? blocked : routed;
  const unsigned EP = std::max(1u, op.ep_chips), E = W1.shape[0] * EP;
  auto mine = [&](unsigned e) { return !op.ep_chips || e % EP == op.ep_chip; };
  const unsigned S = std::max(1u, op.slices), Fs = F / S;
  const bool scaled = block_scaled(op);
  // planes[(j * S + s) * T + t]: choice j's slice s of row t.
  std::vector<std::vector<float>> planes(std::size_t{K} * S * T);
  for (unsigned e = 0; e < E; ++e) {
    if (!mine(e)) continue;
    const unsigned we = e / EP;  // its weights
    std::vector<std::pair<unsigned, unsigned>> rows;  // (t, j), in the kernel's order
    for (unsigned t = 0; t < T; ++t)
      for (unsigned j = 0; j < K; ++j)
        if (static_cast<unsigned>(route[std::size_t{t} * K + j]) == e) rows.emplace_back(t, j);
    if (rows.empty()) continue;
    const unsigned m = static_cast<unsigned>(rows.size());
    std::vector<double> a(std::size_t{m} * D);
    for (unsigned i = 0; i < m; ++i)
      for (unsigned d = 0; d < D; ++d) a[std::size_t{i} * D + d] = x[std::size_t{rows[i].first} * D + d];
    for (unsigned s = 0; s < S; ++s) {
      std::vector<double> b1(std::size_t{D} * Fs), b3(b1.size()), b2(std::size_t{Fs} * D), h1, h3, y;
      for (unsigned d = 0; d < D; ++d)
        for (unsigned f = 0; f < Fs; ++f) {
          b1[std::size_t{d} * Fs + f] = W1.values[(std::size_t{we} * D + d) * F + s * Fs + f];
          b3[std::size_t{d} * Fs + f] = W3.values[(std::size_t{we} * D + d) * F + s * Fs + f];
          b2[std::size_t{f} * D + d] = W2.values[(std::size_t{we} * F + s * Fs + f) * D + d];
        }
      if (scaled) {
        // Block-scaled: x's rows and the SwiGLU's product cast in 1 x 128
        // groups (the DMA engine's and the vector unit's casts), the
        // slice's codes with their blocks' scales.
        const num::Format f = format(W1.dtype);
        num::Convert conv;
        conv.saturate = true;
        auto codes = [&](const std::vector<double>& w, unsigned rows, unsigned cols, int scales, unsigned r0, unsigned c0) {
          const Tensor& S = g.tensor(scales);
          num::BlockQuantized q;
          q.format = f, q.rows = rows, q.cols = cols, q.block_rows = q.block_cols = kScaleBlock;
          q.codes.resize(w.size());
          for (std::size_t i = 0; i < w.size(); ++i) q.codes[i] = static_cast<std::uint8_t>(num::encode(f, w[i], conv));
          for (unsigned r = 0; r < rows / kScaleBlock; ++r)
            for (unsigned c = 0; c < cols / kScaleBlock; ++c)
              q.scales.push_back(S.values[(std::size_t{we} * S.shape[1] + r0 + r) * S.shape[2] + c0 + c]);
          return q;
        };
        auto groups = [&](const std::vector<float>& rows, unsigned cols) {
          return num::block_quantize(rows.data(), m, cols, f, num::ScaleFormat::FP32, 1, kScaleBlock, conv);
        };
        // Streamed in chunks of D (Op::moe_chunk), each chunk's sum is
        // added to the FP32 sums of those before, as the tensor core's
        // accumulating GEMMs add them.
        const std::vector<float> af(a.begin(), a.end());
        const unsigned Dc = op.moe_chunk ? op.moe_chunk : D;
        auto up = [&](const std::vector<double>& b, int scales, std::vector<double>& h) {
          h.assign(std::size_t{m} * Fs, 0.0);
          for (unsigned c0 = 0; c0 < D; c0 += Dc) {
            std::vector<float> ac(std::size_t{m} * Dc);
            for (unsigned i = 0; i < m; ++i) std::copy_n(af.begin() + std::size_t{i} * D + c0, Dc, ac.begin() + std::size_t{i} * Dc);
            const std::vector<double> bc(b.begin() + std::ptrdiff_t{c0} * Fs, b.begin() + std::ptrdiff_t{c0 + Dc} * Fs);
            std::vector<double> part;
            num::gemm_block_scaled(groups(ac, Dc), codes(bc, Dc, Fs, scales, c0 / kScaleBlock, s * Fs / kScaleBlock), part);
            for (std::size_t i = 0; i < h.size(); ++i)
              h[i] = c0 ? static_cast<float>(h[i]) + static_cast<float>(part[i]) : static_cast<float>(part[i]);
          }
        };
        up(b1, op.in[5], h1);
        up(b3, op.in[6], h3);
        std::vector<float> act(h1.size());
        for (std::size_t i = 0; i < act.size(); ++i) act[i] = vec::swiglu(static_cast<float>(h1[i]), static_cast<float>(h3[i]));
        num::gemm_block_scaled(groups(act, Fs), codes(b2, Fs, D, op.in[7], s * Fs / kScaleBlock, 0), y);
      } else {
        num::gemm(a, b1, h1, m, Fs, D, num::Accumulation{});
        num::gemm(a, b3, h3, m, Fs, D, num::Accumulation{});
        std::vector<double> act(h1.size());
        for (std::size_t i = 0; i < act.size(); ++i)
          act[i] = num::quantize(num::Format::BF16, vec::swiglu(static_cast<float>(h1[i]), static_cast<float>(h3[i])));
        num::gemm(act, b2, y, m, D, Fs, num::Accumulation{});
      }
      for (unsigned i = 0; i < m; ++i) {
        const auto [t, j] = rows[i];
        const float gate = route[(std::size_t{T} + t) * K + j];
        std::vector<float>& p = planes[(std::size_t{j} * S + s) * T + t];
        p.resize(D);
        for (unsigned d = 0; d < D; ++d) p[d] = static_cast<float>(y[std::size_t{i} * D + d]) * gate;
      }
    }
  }
  // Each chip's planes summed (all of them, on one chip), then the chips' sums.
  // Experts spread over the chips: every chip has every slice's planes, a
  // choice's zeros where another chip runs its expert.
  unsigned C = std::max(1u, op.expert_chips);
  for (unsigned c : op.slice_chips) C = std::max(C, c + 1);
  const std::vector<float> zeros(D, 0.0f);
  std::vector<float> out(std::size_t{T} * D), sum(D);
  std::vector<unsigned> order(K);  // the row's choices in the order its sum takes them
  for (unsigned t = 0; t < T; ++t)
    for (unsigned c = 0; c < C; ++c) {
      // moe_local: the chip's own choices first (in order), then the others' zeros.
      std::iota(order.begin(), order.end(), 0u);
      if (op.ep_chips)
        std::stable_partition(order.begin(), order.end(), [&](unsigned j) { return mine(static_cast<unsigned>(route[std::size_t{t} * K + j])); });
      bool first = true;
      for (unsigned q = 0; q < K * S; ++q) {
        if (!op.slice_chips.empty() && op.slice_chips[q % S] != c) continue;
        const unsigned j = order[q / S], e = static_cast<unsigned>(route[std::size_t{t} * K + j]);
        const bool theirs = (op.expert_chips > 1 && e % op.expert_chips != c) || !mine(e);
        const std::vector<float>& p = theirs ? zeros : planes[(std::size_t{j} * S + q % S) * T + t];
        for (unsigned d = 0; d < D; ++d) sum[d] = first ? p[d] : sum[d] + p[d];
        first = false;
      }
      for (unsigned d = 0; d < D; ++d) out[std::size_t{t} * D + d] = c ? out[std::size_t{t} * D + d] + sum[d] : sum[d];
    }
  return out;
}

// attention: each segment's heads as the program kernel's attention()
// computes them.
std::vector<float> attention_reference(const Graph& g, const Op& op, const std::vector<std::vector<float>>& v,
                                       const std::map<std::string, std::vector<float>>& inputs, std::vector<float>& kcache,
                                       std::vector<float>& vcache) {
  namespace vec = num::vec;
  const Tensor &KC = g.tensor(op.in[3]), &VC = g.tensor(op.in[4]);
  const unsigned H = op.heads, KVh = KC.shape[0], C = KC.shape[1], dh = KC.shape[2], dv = VC.shape[2];
  const std::vector<float> &q = v[static_cast<std::size_t>(op.in[0])], &k = v[static_cast<std::size_t>(op.in[1])],
                           &vv = v[static_cast<std::size_t>(op.in[2])];
  const unsigned T = static_cast<unsigned>(g.tensor(op.in[0]).rows());
  const std::vector<Segment> segs =
      op.page ? attention_segments(g, op, inputs)
              : std::vector<Segment>{{0, 0, T, static_cast<unsigned>(v[static_cast<std::size_t>(op.in[5])][0])}};
  // Rows of q, k and v: their tensors' columns from the op's first ones.
  const std::size_t qs = g.tensor(op.in[0]).cols(), ks = g.tensor(op.in[1]).cols(), vs = g.tensor(op.in[2]).cols();
  auto bf16 = [](float x) { return static_cast<double>(num::quantize(num::Format::BF16, x)); };
  // A head's row, rotated at its position where the op says so.
  auto row = [&](const std::vector<float>& src, std::size_t at, unsigned width, unsigned position) {
    std::vector<float> r(src.begin() + static_cast<std::ptrdiff_t>(at), src.begin() + static_cast<std::ptrdiff_t>(at + width));
    if (op.rotary) vec::rope(r.data(), width, position);
    return r;
  };
  std::vector<float> out(std::size_t{T} * H * dv);
  for (const Segment& sg : segs) {
    const unsigned p = sg.position, Ts = sg.rows, r0 = sg.row, n = p + Ts;
    // A position's row of the caches: through the sequence's page table.
    auto slot = [&](unsigned x) -> std::size_t {
      if (!op.page) return x;
      const Tensor& Tb = g.tensor(op.in[7]);
      const float e = v[static_cast<std::size_t>(op.in[7])][std::size_t{sg.sequence} * Tb.shape[1] + x / op.page];
      return static_cast<std::size_t>(e) * op.page + x % op.page;
    };
    // The new rows into the caches, rounded.
    for (unsigned j = 0; j < KVh; ++j)
      for (unsigned t = 0; t < Ts; ++t) {
        const std::vector<float> kr = row(k, (r0 + t) * ks + op.k_col + std::size_t{j} * dh, dh, p + t);
        for (unsigned d = 0; d < dh; ++d) kcache[(std::size_t{j} * C + slot(p + t)) * dh + d] = static_cast<float>(bf16(kr[d]));
        for (unsigned d = 0; d < dv; ++d)
          vcache[(std::size_t{j} * C + slot(p + t)) * dv + d] =
              static_cast<float>(bf16(vv[(r0 + t) * vs + op.v_col + std::size_t{j} * dv + d]));
      }
    for (unsigned h = 0; h < H; ++h) {
      const unsigned j = h / (H / KVh);
      std::vector<double> a(std::size_t{Ts} * dh), kt(std::size_t{dh} * n), pv(std::size_t{n} * dv), s, o;
      for (unsigned t = 0; t < Ts; ++t) {
        const std::vector<float> qr = row(q, (r0 + t) * qs + std::size_t{h} * dh, dh, p + t);
        for (unsigned d = 0; d < dh; ++d) a[std::size_t{t} * dh + d] = bf16(qr[d]);
      }
      for (unsigned c = 0; c < n; ++c) {
        for (unsigned d = 0; d < dh; ++d) kt[std::size_t{d} * n + c] = kcache[(std::size_t{j} * C + slot(c)) * dh + d];
        for (unsigned d = 0; d < dv; ++d) pv[std::size_t{c} * dv + d] = vcache[(std::size_t{j} * C + slot(c)) * dv + d];
      }
      num::gemm(a, kt, s, Ts, n, dh, num::Accumulation{});
      std::vector<double> probs(s.size());
      for (unsigned t = 0; t < Ts; ++t) {
        std::vector<float> r(n);
        for (unsigned c = 0; c < n; ++c)
          r[c] = (c > p + t ? -std::numeric_limits<float>::infinity() : static_cast<float>(s[std::size_t{t} * n + c])) * op.scale;
        vec::softmax(r.data(), n);
        for (unsigned c = 0; c < n; ++c) probs[std::size_t{t} * n + c] = bf16(r[c]);
      }
      num::gemm(probs, pv, o, Ts, dv, n, num::Accumulation{});
      for (unsigned t = 0; t < Ts; ++t)
        for (unsigned d = 0; d < dv; ++d)
          out[(std::size_t{r0 + t} * H + h) * dv + d] = static_cast<float>(o[std::size_t{t} * dv + d]);
    }
  }
  return out;
}


// One chip's values before the first op: its inputs, the weights, its
// caches (zeros where `state` has none yet).
std::vector<std::vector<float>> start_values(const Graph& g, const std::map<std::string, std::vector<float>>& inputs,
                                             std::map<std::string, std::vector<float>>& state) {
  check_inputs(g, inputs);
  for (const Tensor& t : g.tensors())
    if (t.role == Role::state) {
      std::vector<float>& s = state[t.name];
      if (s.size() != t.elements()) s.assign(t.elements(), 0.0f);
    }
  std::vector<std::vector<float>> v(g.tensors().size());
  for (std::size_t i = 0; i < g.tensors().size(); ++i) {
    const Tensor& t = g.tensors()[i];
    if (t.role == Role::input) v[i] = inputs.at(t.name);
    if (t.shape_only())
      throw std::invalid_argument(fmt::format("reference: weight '{}' has a shape but no values (a timing-only graph computes nothing)", t.name));
    if (t.role == Role::weight) v[i] = t.values;
  }
  return v;
}

// The values of op's output on one chip (not a collective's).
void run_op(const Graph& g, const Op& op, std::vector<std::vector<float>>& v, const std::map<std::string, std::vector<float>>& inputs,
            std::map<std::string, std::vector<float>>* state) {
  namespace vec = num::vec;
  {
    const Tensor& out = g.tensor(op.out);
    const std::vector<float>& x = v[static_cast<std::size_t>(op.in[0])];
    const std::size_t cols = g.tensor(op.in[0]).cols(), rows = g.tensor(op.in[0]).rows();
    std::vector<float> y(out.elements());
    switch (op.kind) {
      case OpKind::matmul: {
        // Batch by batch (one for a 2-D b): a's rows [g M, g M + M) times b's matrix g.
        const MatmulDims d = matmul_dims(g, op);
        const unsigned K = d.K, N = d.N, M = static_cast<unsigned>(d.M);
        const std::vector<float>& bv = v[static_cast<std::size_t>(op.in[1])];
        num::Convert conv;
        conv.saturate = true;
        for (unsigned b = 0; b < d.batches; ++b) {
          const float* xa = x.data() + std::size_t{b} * M * K;
          const float* xb = bv.data() + std::size_t{b} * K * N;
          float* yc = y.data() + std::size_t{b} * M * N;
          std::vector<double> c;
          if (block_scaled(op)) {
            // A's rows in 1 x 128 groups as the DMA engine casts them; B's
            // codes and block scales as they are.
            const num::BlockQuantized qa = num::block_quantize(xa, M, K, format(op.format), num::ScaleFormat::FP32, 1, kScaleBlock, conv);
            num::BlockQuantized qb;
            qb.format = format(op.format), qb.rows = K, qb.cols = N, qb.block_rows = qb.block_cols = kScaleBlock;
            qb.codes.resize(std::size_t{K} * N);
            for (std::size_t i = 0; i < qb.codes.size(); ++i)
              qb.codes[i] = static_cast<std::uint8_t>(num::encode(qb.format, xb[i], conv));
            const std::vector<float>& sv = v[static_cast<std::size_t>(op.in[2])];
            const std::size_t per = sv.size() / d.batches;
            qb.scales.assign(sv.begin() + static_cast<std::ptrdiff_t>(b * per), sv.begin() + static_cast<std::ptrdiff_t>((b + 1) * per));
            num::gemm_block_scaled(qa, qb, c);
          } else {
            auto q = [&](const float* s, std::size_t n) {
              std::vector<double> e(n);
              for (std::size_t i = 0; i < n; ++i) e[i] = num::quantize(format(op.format), s[i], conv);
              return e;
            };
            num::gemm(q(xa, std::size_t{M} * K), q(xb, std::size_t{K} * N), c, M, N, K, num::Accumulation{});
          }
          for (std::size_t i = 0; i < c.size(); ++i) yc[i] = static_cast<float>(c[i]);
        }
        break;
      }
      case OpKind::rmsnorm: case OpKind::layernorm: case OpKind::softmax: case OpKind::rope:
        y = x;
        for (std::size_t r = 0; r < rows; ++r) {
          float* row = y.data() + r * cols;
          if (op.kind == OpKind::rmsnorm)
            vec::rmsnorm(row, v[static_cast<std::size_t>(op.in[1])].data(), static_cast<unsigned>(cols), op.eps);
          else if (op.kind == OpKind::layernorm)
            vec::layernorm(row, v[static_cast<std::size_t>(op.in[1])].data(), v[static_cast<std::size_t>(op.in[2])].data(),
                           static_cast<unsigned>(cols), op.eps);
          else if (op.kind == OpKind::softmax)
            vec::softmax(row, static_cast<unsigned>(cols));
          else
            for (std::size_t h = 0; h < cols; h += op.head_dim)
              vec::rope(row + h, op.head_dim,
                        (op.in.size() > 1 ? static_cast<unsigned>(v[static_cast<std::size_t>(op.in[1])][0]) : op.position) +
                            static_cast<unsigned>(r / op.rows_per_position));
        }
        break;
      case OpKind::cast: {
        num::Convert conv;
        conv.saturate = true;
        for (std::size_t i = 0; i < y.size(); ++i) y[i] = static_cast<float>(num::quantize(format(op.format), x[i], conv));
        break;
      }
      case OpKind::reshape: y = x; break;
      case OpKind::move:
        for (const Move& m : op.moves)
          for (std::uint64_t i = 0; i < m.count; ++i)
            std::copy_n(v[static_cast<std::size_t>(op.in[m.src])].begin() + static_cast<std::ptrdiff_t>(m.from + i * m.from_stride),
                        m.len, y.begin() + static_cast<std::ptrdiff_t>(m.to + i * m.to_stride));
        break;
      case OpKind::reduce_sum:
        for (std::size_t r = 0; r < rows; ++r) y[r] = vec::sum(x.data() + r * cols, static_cast<unsigned>(cols));
        break;
      case OpKind::reduce_max:
        for (std::size_t r = 0; r < rows; ++r) y[r] = *std::max_element(x.data() + r * cols, x.data() + (r + 1) * cols);
        break;
      case OpKind::route: {
        // Plane 0: the experts (as floats), plane 1: the gates.
        const unsigned k = op.k, E = static_cast<unsigned>(cols);
        if (op.groups) {
          route_grouped(op, x, v[static_cast<std::size_t>(op.in[1])], static_cast<unsigned>(rows), E, y);
          break;
        }
        std::vector<float> val(k);
        std::vector<unsigned> idx(k);
        for (std::size_t r = 0; r < rows; ++r) {
          vec::topk(x.data() + r * cols, E, k, val.data(), idx.data());
          if (op.gate_softmax) vec::softmax(val.data(), k);
          for (unsigned j = 0; j < k; ++j) y[r * k + j] = static_cast<float>(idx[j]), y[(rows + r) * k + j] = val[j];
        }
        break;
      }
      case OpKind::moe: y = moe_reference(g, op, x, v[static_cast<std::size_t>(op.in[1])]); break;
      case OpKind::dispatch: case OpKind::combine:
        y = dispatch_reference(g, op, x, v[static_cast<std::size_t>(op.in[1])]);
        break;
      case OpKind::dispatch_route: y = dispatch_reference(g, op, {}, x); break;
      case OpKind::attention:
        y = attention_reference(g, op, v, inputs, state->at(g.tensor(op.in[3]).name), state->at(g.tensor(op.in[4]).name));
        break;
      case OpKind::gather: {
        const std::vector<float>& idx = v[static_cast<std::size_t>(op.in[1])];
        const Tensor& Tb = g.tensor(op.in[0]);
        const std::size_t D = Tb.cols();
        for (std::size_t i = 0; i < idx.size(); ++i) {
          const float r = idx[i];
          if (!(r >= 0) || r >= static_cast<float>(Tb.rows()) || r != std::floor(r))
            throw std::invalid_argument(fmt::format("run: {}: index {} of a table of {} rows", op.name, r, Tb.rows()));
          std::copy_n(x.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(r) * D), D, y.begin() + static_cast<std::ptrdiff_t>(i * D));
        }
        break;
      }
      case OpKind::argmax:
        for (std::size_t r = 0; r < rows; ++r) y[r] = static_cast<float>(vec::argmax(x.data() + r * cols, static_cast<unsigned>(cols)));
        break;
      default:
        if (is_binary(op.kind)) {
          const std::vector<float>& b = v[static_cast<std::size_t>(op.in[1])];
          const bool row = per_row(g.tensor(op.in[1]), g.tensor(op.in[0]));
          for (std::size_t i = 0; i < y.size(); ++i) {
            const float p = x[i], s = row ? b[i / cols] : b[i % b.size()];
            switch (op.kind) {
              case OpKind::add: y[i] = p + s; break;
              case OpKind::sub: y[i] = p - s; break;
              case OpKind::mul: y[i] = p * s; break;
              case OpKind::max: y[i] = std::max(p, s); break;
              case OpKind::min: y[i] = std::min(p, s); break;
              default: y[i] = vec::swiglu(p, s); break;
            }
          }
        } else {
          for (std::size_t i = 0; i < y.size(); ++i) {
            const float p = x[i];
            switch (op.kind) {
              case OpKind::relu: y[i] = vec::relu(p); break;
              case OpKind::relu2: y[i] = vec::relu2(p); break;
              case OpKind::exp: y[i] = vec::exp(p); break;
              case OpKind::log: y[i] = vec::log(p); break;
              case OpKind::tanh: y[i] = vec::tanh(p); break;
              case OpKind::sigmoid: y[i] = vec::sigmoid(p); break;
              case OpKind::silu: y[i] = vec::silu(p); break;
              case OpKind::gelu: y[i] = vec::gelu(p); break;
              case OpKind::neg: y[i] = -p; break;
              case OpKind::abs: y[i] = std::fabs(p); break;
              case OpKind::rsqrt: y[i] = vec::rsqrt(p); break;
              default: y[i] = vec::recip(p); break;
            }
          }
        }
    }
    v[static_cast<std::size_t>(op.out)] = std::move(y);
  }
}

// A collective's output on every chip from each chip's operand (values
// as the operand's format holds them), as the engines compute it.
void run_collective(const Graph& g, const Op& op, std::vector<std::vector<std::vector<float>>>& v) {
  const std::size_t in = static_cast<std::size_t>(op.in[0]), out = static_cast<std::size_t>(op.out);
  const DType dt = g.tensor(op.in[0]).dtype;
  if (op.kind == OpKind::all_gather) {
    std::vector<float> all;
    for (const auto& chip : v) all.insert(all.end(), chip[in].begin(), chip[in].end());
    for (auto& chip : v) chip[out] = all;
    return;
  }
  if (op.kind == OpKind::all_to_all) {  // chip j's block c from chip c's block j
    const std::size_t N = v.size(), block = v[0][in].size() / N;
    std::vector<std::vector<float>> got(N, std::vector<float>(block * N));
    for (std::size_t c = 0; c < N; ++c)
      for (std::size_t j = 0; j < N; ++j)
        std::copy_n(v[c][in].begin() + std::ptrdiff_t(j * block), block, got[j].begin() + std::ptrdiff_t(c * block));
    for (std::size_t j = 0; j < N; ++j) v[j][out] = std::move(got[j]);
    return;
  }
  const c2c::CommType t = dt == DType::bf16 ? c2c::CommType::bf16 : dt == DType::e4m3 ? c2c::CommType::e4m3 : c2c::CommType::fp32;
  const std::uint64_t n = g.tensor(op.in[0]).elements();
  std::vector<std::vector<std::uint8_t>> each;
  for (const auto& chip : v) each.push_back(encode(chip[in], dt));
  const std::vector<std::uint8_t> sum = op.tree ? c2c::reference::tree_all_reduce(t, each, n) : c2c::reference::ring_all_reduce(t, each, n);
  const std::vector<float> values = decode(sum, dt);
  for (auto& chip : v) chip[out] = values;
}

}  // namespace

std::vector<std::vector<float>> reference(const Graph& g, const std::map<std::string, std::vector<float>>& inputs,
                                          std::map<std::string, std::vector<float>>* state) {
  for (const Op& op : g.ops())
    if (is_collective(op.kind) && op.chips != 1)
      throw std::invalid_argument(fmt::format("reference: {} '{}' combines {} chips' values: reference_spmd computes it", name(op.kind),
                                              op.name, op.chips));
  return reference_spmd({&g}, {inputs}, state ? std::vector<std::map<std::string, std::vector<float>>*>{state}
                                              : std::vector<std::map<std::string, std::vector<float>>*>{})[0];
}

std::vector<std::vector<std::vector<float>>> reference_spmd(const std::vector<const Graph*>& graphs,
                                                            const std::vector<std::map<std::string, std::vector<float>>>& inputs,
                                                            std::vector<std::map<std::string, std::vector<float>>*> states) {
  const std::size_t chips = graphs.size();
  if (chips == 0) throw std::invalid_argument("reference: no chip's graph");
  if (inputs.size() != chips) throw std::invalid_argument(fmt::format("reference: {} chips' graphs, {} chips' inputs", chips, inputs.size()));
  const Graph& g = *graphs[0];
  for (std::size_t c = 1; c < chips; ++c) {  // the same ops on every chip
    const Graph& h = *graphs[c];
    bool same = h.ops().size() == g.ops().size() && h.tensors().size() == g.tensors().size();
    for (std::size_t i = 0; same && i < g.ops().size(); ++i) same = h.ops()[i].kind == g.ops()[i].kind && h.ops()[i].in == g.ops()[i].in;
    for (std::size_t i = 0; same && i < g.tensors().size(); ++i)
      same = h.tensors()[i].shape == g.tensors()[i].shape && h.tensors()[i].dtype == g.tensors()[i].dtype;
    if (!same) throw std::invalid_argument(fmt::format("reference: chip {}'s graph has other ops or tensors than chip 0's", c));
  }
  for (const Op& op : g.ops())
    if (is_collective(op.kind) && op.chips != chips)
      throw std::invalid_argument(fmt::format("reference: {} '{}' combines {} chips' values; graphs for {} given", name(op.kind), op.name,
                                              op.chips, chips));
  std::vector<std::map<std::string, std::vector<float>>> own(chips);
  if (states.empty())
    for (auto& s : own) states.push_back(&s);
  if (states.size() != chips) throw std::invalid_argument(fmt::format("reference: {} chips' graphs, {} chips' state", chips, states.size()));
  std::vector<std::vector<std::vector<float>>> v;
  for (std::size_t c = 0; c < chips; ++c) v.push_back(start_values(*graphs[c], inputs[c], *states[c]));
  for (std::size_t i = 0; i < g.ops().size(); ++i) {
    if (is_collective(g.ops()[i].kind)) {
      run_collective(g, g.ops()[i], v);
      continue;
    }
    for (std::size_t c = 0; c < chips; ++c) run_op(*graphs[c], graphs[c]->ops()[i], v[c], inputs[c], states[c]);
  }
  return v;
}

}  // namespace tessera::compiler
