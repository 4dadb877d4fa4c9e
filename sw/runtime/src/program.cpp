#include "tessera/program.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <iterator>

#include "tile_regs.hpp"

namespace tessera::rt {

namespace R = regs::tile;

namespace {
std::uint32_t sem_word(Sem s) {
  auto f = [](int v) { return static_cast<std::uint32_t>(v + 1) & 0x1f; };
  return f(s.wait) | f(s.signal) << 8 | f(s.signal2) << 16;
}
tkp_op op(std::uint32_t kind, Sem s = {}) {
  tkp_op o;
  std::memset(&o, 0, sizeof o);
  o.kind = kind;
  o.sem = sem_word(s);
  return o;
}
}  // namespace

TileProgram& TileProgram::dma(const Dma& d, Sem s) {
  tkp_op o = op(TKP_DMA, s);
  o.w[0] = lo(d.src), o.w[1] = hi(d.src), o.w[2] = lo(d.dst), o.w[3] = hi(d.dst);
  o.w[4] = (d.src_local ? R::DMA_FLAGS_f::SRC_LOCAL_MASK : 0) | (d.dst_local ? R::DMA_FLAGS_f::DST_LOCAL_MASK : 0) |
           (d.scales_local ? R::DMA_FLAGS_f::SCALES_LOCAL_MASK : 0) | (d.cast ? R::DMA_FLAGS_f::CAST_MASK : 0) |
           (d.saturate ? R::DMA_FLAGS_f::SATURATE_MASK : 0) | (d.e8m0 ? R::DMA_FLAGS_f::SCALE_E8M0_MASK : 0) |
           (d.stochastic ? R::DMA_FLAGS_f::STOCHASTIC_MASK : 0) | static_cast<std::uint32_t>(d.from) << 8 |
           static_cast<std::uint32_t>(d.to) << 12;
  o.w[5] = d.len0, o.w[6] = d.count1, o.w[7] = d.count2;
  o.w[8] = d.sstride1, o.w[9] = d.sstride2, o.w[10] = d.dstride1, o.w[11] = d.dstride2;
  o.w[12] = d.group, o.w[13] = lo(d.scales), o.w[14] = hi(d.scales), o.w[15] = d.seed;
  ops_.push_back(o);
  return *this;
}

bool TileProgram::signal_last_dma(unsigned sem, std::size_t from) {
  for (std::size_t i = ops_.size(); i-- > from;) {
    if (ops_[i].kind != TKP_DMA) continue;
    std::uint32_t& word = ops_[i].sem;
    for (unsigned shift : {8u, 16u})
      if (!(word >> shift & 0xff)) {
        word |= (sem + 1) << shift;
        return true;
      }
    return false;
  }
  return false;
}

TileProgram& TileProgram::load(std::uint64_t global, std::uint32_t local, std::uint32_t bytes, Sem s) {
  Dma d;
  d.src = global, d.dst = local, d.dst_local = true, d.len0 = bytes;
  return dma(d, s);
}

TileProgram& TileProgram::store(std::uint32_t local, std::uint64_t global, std::uint32_t bytes, Sem s) {
  Dma d;
  d.src = local, d.src_local = true, d.dst = global, d.len0 = bytes;
  return dma(d, s);
}

TileProgram& TileProgram::load_rows(std::uint64_t global, std::uint32_t stride, std::uint32_t local,
                                    std::uint32_t rows, std::uint32_t row_bytes, Sem s) {
  Dma d;
  d.src = global, d.sstride1 = stride, d.dst = local, d.dst_local = true, d.len0 = row_bytes, d.count1 = rows;
  return dma(d, s);
}

TileProgram& TileProgram::store_rows(std::uint32_t local, std::uint64_t global, std::uint32_t stride,
                                     std::uint32_t rows, std::uint32_t row_bytes, Sem s) {
  Dma d;
  d.src = local, d.src_local = true, d.dst = global, d.dstride1 = stride, d.len0 = row_bytes, d.count1 = rows;
  return dma(d, s);
}

TileProgram& TileProgram::gemm(const Gemm& g, Sem s) {
  tkp_op o = op(TKP_GEMM, s);
  o.w[0] = g.m, o.w[1] = g.n, o.w[2] = g.k, o.w[3] = g.a, o.w[4] = g.b, o.w[5] = g.c;
  o.w[6] = g.lda, o.w[7] = g.ldb, o.w[8] = g.ldc;
  o.w[9] = static_cast<std::uint32_t>(g.input) | (g.accumulate ? R::CMD_FORMAT_f::ACCUMULATE_MASK : 0) |
           (g.trans_a ? R::CMD_FORMAT_f::TRANS_A_MASK : 0) | (g.trans_b ? R::CMD_FORMAT_f::TRANS_B_MASK : 0) |
           (g.block_scaled ? R::CMD_FORMAT_f::BLOCK_SCALED_MASK : 0) | (g.e8m0 ? R::CMD_FORMAT_f::SCALE_E8M0_MASK : 0) |
           (g.input == Fmt::int8 ? 2u << 4 : 0);
  o.w[11] = g.sa, o.w[12] = g.sb, o.w[13] = g.group;
  ops_.push_back(o);
  return *this;
}

TileProgram& TileProgram::vec(const Vec& v, Sem s) {
  tkp_op o = op(TKP_VEC, s);
  o.w[0] = static_cast<std::uint32_t>(v.op), o.w[1] = v.rows, o.w[2] = v.cols;
  o.w[3] = v.src0, o.w[4] = v.src1, o.w[5] = v.src2, o.w[6] = v.dst, o.w[7] = v.k, o.w[8] = v.position;
  std::memcpy(&o.w[9], &v.eps, 4);
  o.w[10] = static_cast<std::uint32_t>(v.format) | (v.saturate ? R::VCMD_FORMAT_f::SATURATE_MASK : 0) |
            (v.e8m0 ? R::VCMD_FORMAT_f::SCALE_E8M0_MASK : 0) | (v.stochastic ? R::VCMD_FORMAT_f::STOCHASTIC_MASK : 0);
  o.w[11] = v.group, o.w[12] = v.aux, o.w[13] = v.seed, o.w[14] = v.relative_position ? 1 : 0;
  ops_.push_back(o);
  return *this;
}

TileProgram& TileProgram::wait(unsigned sem) {
  tkp_op o = op(TKP_WAIT);
  o.w[0] = sem;
  ops_.push_back(o);
  return *this;
}

TileProgram& TileProgram::signal(unsigned sem, std::uint32_t tile_regs) {
  tkp_op o = op(TKP_SIGNAL);
  o.w[0] = tile_regs, o.w[1] = sem;
  ops_.push_back(o);
  return *this;
}

TileProgram& TileProgram::drain() {
  ops_.push_back(op(TKP_DRAIN));
  return *this;
}

TileProgram& TileProgram::words(std::uint32_t kind, const char* what, const std::vector<std::uint32_t>& args, std::size_t least,
                                std::size_t most) {
  if (args.size() < least || args.size() > most)
    throw UsageError(least == most       ? fmt::format("{}: {} words, not {}", what, least, args.size())
                     : most == least + 1 ? fmt::format("{}: {} or {} words, not {}", what, least, most, args.size())
                                         : fmt::format("{}: {} to {} words, not {}", what, least, most, args.size()));
  tkp_op o = op(kind);
  for (unsigned i = 0; i < args.size(); ++i) o.w[i] = args[i];
  ops_.push_back(o);
  return *this;
}

TileProgram& TileProgram::moe(const std::vector<std::uint32_t>& args) { return words(TKP_MOE, "moe", args, 13, 19); }
TileProgram& TileProgram::dispatch(const std::vector<std::uint32_t>& args) { return words(TKP_DISPATCH, "dispatch", args, 13, 13); }
TileProgram& TileProgram::gather(const std::vector<std::uint32_t>& args) { return words(TKP_GATHER, "gather", args, 10, 10); }
TileProgram& TileProgram::position(std::uint64_t global, bool as_float) {
  tkp_op o = op(TKP_POSITION);
  o.w[0] = lo(global), o.w[1] = hi(global), o.w[2] = as_float ? 1 : 0;
  ops_.push_back(o);
  return *this;
}

TileProgram& TileProgram::collective(std::uint32_t ce_op, std::uint64_t src, std::uint64_t dst, std::uint64_t count,
                                     std::uint64_t fabric_regs, std::uint64_t signal, unsigned sem, std::uint64_t table) {
  if (sem > 15) throw UsageError(fmt::format("collective: semaphore {} (a tile has 0 to 15)", sem));
  if (fabric_regs > 0xffffffffu) throw UsageError(fmt::format("collective: the fabric's registers at {:#x}: past a core's 32-bit reach", fabric_regs));
  tkp_op o = op(TKP_COLLECTIVE);
  const std::uint32_t w[] = {ce_op, lo(src), hi(src), lo(dst), hi(dst), lo(count), hi(count), static_cast<std::uint32_t>(fabric_regs),
                             lo(signal), hi(signal), sem, lo(table), hi(table)};
  std::copy(std::begin(w), std::end(w), o.w);
  ops_.push_back(o);
  return *this;
}

TileProgram& TileProgram::attention(const std::vector<std::uint32_t>& args) { return words(TKP_ATTN, "attention", args, 22, 22); }
TileProgram& TileProgram::paged(const std::vector<std::uint32_t>& args) { return words(TKP_PAGED, "paged", args, 8, 8); }
TileProgram& TileProgram::kv_stripes(const std::vector<std::uint32_t>& args) {
  return words(TKP_KV_STRIPES, "kv_stripes", args, 18, 18);
}
TileProgram& TileProgram::route(const std::vector<std::uint32_t>& args) { return words(TKP_ROUTE, "route", args, 8, 8); }

Graph& Graph::node(std::string name, std::vector<std::pair<unsigned, TileProgram>> per_tile) {
  nodes_.push_back({std::move(name), std::move(per_tile)});
  return *this;
}

MoeSplit MoeSplit::plan(const Device& dev, unsigned tiles, unsigned experts, unsigned hidden, unsigned d_model,
                        unsigned tokens, unsigned min_slices, unsigned chips, bool block_scaled) {
  if (!tiles || tiles > dev.tiles() || !experts || !hidden || !d_model || !tokens || tokens > TKP_MOE_MAX_T)
    throw UsageError(fmt::format("moe: {} tiles (of {}), {} experts, hidden {}, d_model {}, {} tokens (at most {})", tiles,
                                 dev.tiles(), experts, hidden, d_model, tokens, TKP_MOE_MAX_T));
  if (block_scaled && (d_model % TKP_MOE_SCALE_BLOCK || hidden % TKP_MOE_SCALE_BLOCK))
    throw UsageError(fmt::format("moe: block-scaled experts need d_model ({}) and hidden ({}) in whole {}-column blocks", d_model, hidden,
                                 TKP_MOE_SCALE_BLOCK));
  MoeSplit m;
  std::vector<unsigned> near(tiles);
  for (unsigned t = 0; t < tiles; ++t) {
    near[t] = dev.stack_near(t);
    if (std::find(m.stacks.begin(), m.stacks.end(), near[t]) == m.stacks.end()) m.stacks.push_back(near[t]);
  }
  std::sort(m.stacks.begin(), m.stacks.end());
  if (!chips) throw UsageError("moe: a split over no chips");
  // Block-scaled slices are whole 128-column blocks: with fewer blocks
  // than stacks, the slices lie in as many stacks as divide the blocks,
  // and the tiles near the others run those stacks' slices too.
  if (block_scaled) {
    const unsigned blocks = hidden / TKP_MOE_SCALE_BLOCK;
    unsigned use = static_cast<unsigned>(m.stacks.size());
    while (use > 1 && (use * chips > blocks || blocks % (use * chips))) --use;
    if (use < m.stacks.size()) {
      const std::vector<unsigned> all = m.stacks;
      m.stacks.resize(use);
      for (unsigned& n : near) n = m.stacks[static_cast<std::size_t>(std::find(all.begin(), all.end(), n) - all.begin()) % use];
    }
  }
  const unsigned Q = static_cast<unsigned>(m.stacks.size()) * chips;
  const std::uint64_t room = TKP_PROGRAM_OFFSET - 0x10000;
  const unsigned unit = block_scaled ? TKP_MOE_SCALE_BLOCK : 1;  // a slice's columns: whole blocks
  const unsigned first = (std::max(1u, min_slices) + Q - 1) / Q;
  // The slice counts to try, fewest first: multiples of Q that divide the
  // hidden layer, at most TKP_MOE_MAX_SLICES over the experts.
  std::vector<unsigned> counts;
  for (unsigned k = first; Q * k * unit <= hidden && std::uint64_t{experts} * Q * k <= TKP_MOE_MAX_SLICES; ++k)
    if (hidden % (Q * k * unit) == 0) counts.push_back(Q * k);
  // Whole slices where some count fits a scratchpad; else slices whose
  // weights stream in chunks: the largest row block (a slice's weights
  // stream once per block), the fewest slices for it, then the largest
  // chunk of D that fits (block-scaled: whole 128-column blocks), chunks
  // at least 64 columns deep where any block has them (the tensor core's
  // depth: Mixtral-8x7B's whole expert over 64 rows streamed in chunks
  // of 8 columns, 2451 us a layer, where 32-row blocks take chunks of 64).
  for (unsigned S : counts)
    if (tkp_moe_scratch(tokens, d_model, hidden / S, block_scaled) <= room) {
      m.slices = S;
      break;
    }
  for (const unsigned deep : {std::max(unit, std::min(64u, d_model)), unit})
    for (unsigned B = std::min(tokens, TKP_MOE_BLOCK); !m.slices && B; B = B > 1 ? (B + 1) / 2 : 0)
      for (unsigned S : counts) {
        for (unsigned Dc = d_model; Dc >= deep && !m.slices; Dc -= unit)
          if (d_model % Dc == 0 && tkp_moe_chunked_scratch(B, d_model, hidden / S, Dc, block_scaled) <= room)
            m.slices = S, m.chunk = Dc, m.block = B;
        if (m.slices) break;
      }
  if (!m.slices)
    throw UsageError(fmt::format("moe: no split of the experts' hidden layer ({} columns, {} experts) into a multiple of {} "
                                 "slices{}, at most {} in all, fits a scratchpad for {} tokens of {}, whole or in chunks",
                                 hidden, experts, Q, block_scaled ? " of whole 128-column blocks" : "", TKP_MOE_MAX_SLICES,
                                 tokens, d_model));
  m.words.assign(tiles, {0, 0});
  for (unsigned t = 0; t < tiles; ++t) {
    unsigned lanes = 0, lane = 0;
    for (unsigned u = 0; u < tiles; ++u)
      if (near[u] == near[t]) lane = u == t ? lanes : lane, ++lanes;
    const unsigned q = static_cast<unsigned>(std::find(m.stacks.begin(), m.stacks.end(), near[t]) - m.stacks.begin());
    m.words[t] = {q, lanes | lane << 16};
  }
  return m;
}

}  // namespace tessera::rt
