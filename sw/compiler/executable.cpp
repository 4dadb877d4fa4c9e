#include "executable.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <set>
#include <stdexcept>

#include "reference.hpp"

namespace tessera::compiler {

using rt::Fmt;
using rt::Sem;
using rt::TileProgram;
using rt::VecOp;

namespace {

// The tile semaphores a node's programs use (the graph's own are 13-15):
constexpr int kLoaded = 0;  // a load is done: the GEMM or vector op that reads it may start
constexpr int kFreed = 1;   // a GEMM is done with its B buffer: the load two chunks on may start
constexpr int kGemmed = 2;  // a block's last GEMM is done: its epilogue (or its store) may start
constexpr int kDone = 3;    // a block's last vector op is done: its store may start
constexpr int kPrologue = 4;  // a matmul's prologue: A's rows loaded, then normed and cast
constexpr int kKept = 5;      // the prologue's rows cast: their store (a kept prologue's) may start
constexpr int kAFree = 6;     // a resident-B matmul's row block's GEMMs are done: A's block two on may load
constexpr unsigned kCommSem = 10;  // a collective's tile: the communication engine's signal that it is done
// Collectives whose result lies at one address on every chip
// (Options::symmetric): the engines' ring writes into the next chip's
// destination at its own destination's address, a pushed all-to-all into
// every chip's. A pulled all-to-all reads every chip's operand at its own
// operand's address: that lies at one address on every chip.
bool symmetric_result(const Op& op) {
  return op.chips > 1 && (op.kind == OpKind::all_to_all ? !op.pull : is_collective(op.kind) && !op.tree);
}
bool symmetric_operand(const Op& op) { return op.chips > 1 && op.kind == OpKind::all_to_all && op.pull; }
constexpr unsigned kChipSem = 12;
// The device's tile 0 counts the peers' parts done on a semaphore of its
// own: on kChipSem, where it also waits for the peers it hands over to to
// run, a part done on one peer could stand in for another peer's "I run",
// and the hand-over signalled before that peer's launch had cleared its
// semaphores was lost (a system of 32 chips hung in its LM head's gather).
constexpr unsigned kChipDoneSem = 11;
static_assert(kScaleBlock == TKP_MOE_SCALE_BLOCK, "the experts' kernel and matmul_scaled take blocks of one size");  // the chips' hand-over of a moe op (Options::peers)

Fmt fmt_of(DType t) {
  switch (t) {
    case DType::f32: return Fmt::fp32;
    case DType::bf16: return Fmt::bf16;
    case DType::f16: return Fmt::fp16;
    case DType::e4m3: return Fmt::e4m3;
    case DType::e5m2: return Fmt::e5m2;
    case DType::i32: return Fmt::int32;
  }
  return Fmt::fp32;
}

VecOp vec_of(OpKind k) {
  switch (k) {
    case OpKind::add: return VecOp::add;
    case OpKind::sub: return VecOp::sub;
    case OpKind::mul: return VecOp::mul;
    case OpKind::max: return VecOp::max;
    case OpKind::min: return VecOp::min;
    case OpKind::swiglu: return VecOp::swiglu;
    case OpKind::relu: return VecOp::relu;
    case OpKind::relu2: return VecOp::relu2;
    case OpKind::exp: return VecOp::exp;
    case OpKind::log: return VecOp::log;
    case OpKind::tanh: return VecOp::tanh;
    case OpKind::sigmoid: return VecOp::sigmoid;
    case OpKind::silu: return VecOp::silu;
    case OpKind::gelu: return VecOp::gelu;
    case OpKind::neg: return VecOp::neg;
    case OpKind::abs: return VecOp::abs;
    case OpKind::rsqrt: return VecOp::rsqrt;
    case OpKind::recip: return VecOp::recip;
    case OpKind::rmsnorm: return VecOp::rmsnorm;
    case OpKind::layernorm: return VecOp::layernorm;
    case OpKind::softmax: return VecOp::softmax;
    case OpKind::rope: return VecOp::rope;
    case OpKind::cast: return VecOp::cast_to;
    case OpKind::argmax: return VecOp::argmax;
    case OpKind::reduce_sum: return VecOp::sum;
    case OpKind::reduce_max: return VecOp::rmax;
    case OpKind::matmul: case OpKind::reshape: case OpKind::move: case OpKind::route: case OpKind::moe: case OpKind::gather:
    case OpKind::attention: case OpKind::all_reduce: case OpKind::all_gather: case OpKind::all_to_all: case OpKind::dispatch:
    case OpKind::dispatch_route: case OpKind::combine: break;
  }
  throw std::logic_error("compiler: matmul and reshape are no vector operations");
}


// Rows x cols of a global matrix (rows `pitch` bytes apart, elements of
// `from`) into packed rows of `to` at a scratchpad offset.
TileProgram::Dma block_dma(std::uint64_t src, std::uint32_t pitch, DType from, std::uint32_t dst, DType to, unsigned rows,
                           unsigned cols) {
  TileProgram::Dma d;
  d.src = src, d.dst = dst, d.dst_local = true, d.count1 = rows, d.sstride1 = rows > 1 ? pitch : 0;
  if (from == to) {
    d.len0 = cols * bytes(from);
  } else {
    d.cast = true, d.from = fmt_of(from), d.to = fmt_of(to), d.len0 = cols;
  }
  return d;
}
void load_block(TileProgram& p, std::uint64_t src, std::uint32_t pitch, DType from, std::uint32_t dst, DType to,
                unsigned rows, unsigned cols, Sem s = {}) {
  p.dma(block_dma(src, pitch, from, dst, to, rows, cols), s);
}

}  // namespace

namespace {
// The program kernel's buffer area in a tile's scratchpad (every device's).
Target kernel_area() {
  Target t;
  t.spm_base = 0x10000, t.spm_end = TKP_PROGRAM_OFFSET;
  return t;
}
}  // namespace

bool attention_fits(unsigned T, unsigned n, unsigned dh, unsigned dv, std::uint64_t table) {
  const Target t = kernel_area();
  return t.spm_base + tkp_attn_scratch(T, T, n, dh, dv, table) <= t.spm_end;
}

unsigned attention_rows(unsigned n, unsigned dh, unsigned dv, std::uint64_t table) {
  unsigned lo = 0, hi = n;  // the scratch grows with the rows: the last that fits
  while (lo < hi) {
    const unsigned mid = hi - (hi - lo) / 2;
    if (attention_fits(mid, n, dh, dv, table)) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

Target target(const rt::Device& dev, unsigned tiles) {
  const roofline::Limits& l = dev.limits();
  Target t = kernel_area();
  t.tiles = tiles ? std::min(tiles, dev.tiles()) : dev.tiles();
  if (l.tile_dma_bytes_per_s > 0) t.tile_bytes_per_s = l.tile_dma_bytes_per_s;
  const auto m = l.tile_macs_per_s.find("bf16");
  if (m != l.tile_macs_per_s.end() && m->second > 0) t.tile_macs_per_s = m->second;
  if (l.cut_read_bytes_per_s > 0) t.cut_read_bytes_per_s = l.cut_read_bytes_per_s;
  if (l.cut_write_bytes_per_s > 0) t.cut_write_bytes_per_s = l.cut_write_bytes_per_s;
  t.link_bytes_per_s = l.link_bytes_per_s;
  return t;
}

namespace {

// Where a chip's planes of a moe op lie (choice j, slice s, its slices':
// P = K S of them on one chip): each stack's slices' planes in one buffer,
// a plane apart (`stride`), so that the combine loads a block of all of a
// stack's planes with one descriptor (its chunks in flight together) into
// consecutive scratchpad slots. `slot` maps the sum's order (j, then s)
// to the slot. With peers, the device's runs end with one of the peers'
// sums.
struct Planes {
  struct Run {
    std::uint64_t base = 0;  // the first plane
    unsigned planes = 0;
  };
  std::vector<Run> runs;  // by stack, their slots one after another
  std::vector<unsigned> slot;
  std::uint64_t stride = 0;
};

// A matmul's B columns on a tile: the values in its format, and for a
// block-scaled one the scales of those columns' blocks.
struct Panel {
  rt::Buffer b, scales;
};
// Where a matmul part's panel is kept: (group, first column, first
// matrix). Row parts of a matmul share their columns' panel; a batched
// one's parts each hold their own matrices, in the stack near their tile.
using PanelKey = std::tuple<std::size_t, unsigned, unsigned>;
PanelKey panel_key(const Graph& g, const Op& mm, std::size_t gi, const Part& p) {
  const MatmulDims d = matmul_dims(g, mm);
  return {gi, p.c0, d.batched() ? static_cast<unsigned>(p.r0 / d.M) : 0u};
}

// A KV cache on the device (Options::stripe_caches): n stripes, block b of
// `unit` positions of KV head j in stripe (b + j) mod n at its position
// (b / n) unit + x mod unit of `cap` a KV head (one stripe: unit and cap
// the cache's positions).
struct CacheStripes {
  unsigned n = 1, unit = 0, cap = 0, heads = 0;  // heads: the device's
  std::vector<rt::Buffer> parts;                 // by stripe
};

}  // namespace

struct Executable::Impl {
  std::vector<std::pair<rt::Device*, rt::Buffer>> owned;  // on the device or a peer
  std::map<int, rt::Buffer> plain;                          // inputs and weights, as they are
  std::map<int, CacheStripes> caches;                       // by state tensor: the device's cache
  std::map<int, rt::Buffer> a2a_tables;                     // by all_to_all op: the engine's table
  std::map<PanelKey, Panel> panels;                           // a matmul's B columns (on its part's chip)
  std::map<std::size_t, std::vector<Tiling>> split;           // by group spread over the chips (Options::split_matmuls): by chip
  std::vector<rt::Buffer> arenas;                           // by stack: the groups' outputs
  std::vector<rt::GraphExec> execs;  // the graph in launches of at most kNodesPerLaunch nodes, whole groups each
  std::vector<std::size_t> node_group;  // by device node: its group (a moe group runs as two nodes, three with peers; a spread matmul as two)
  struct PeerExec {
    std::size_t peer = 0;  // in Executable::peers_
    rt::GraphExec exec;
  };
  std::vector<std::vector<PeerExec>> peer_execs;  // by launch: the peers with work in it, their share of its groups
  std::vector<std::uint32_t> handovers;           // by launch: the groups it hands over to the peers
  std::vector<rt::Buffer> ones;           // by chip (0 the device): a word holding 1, what signals a semaphore
  unsigned tiles = 0;                     // the tiles a node spans
  // Each launch's watchdog (0: the device's default, TP_DEFAULT_TIMEOUT_US):
  // a graph whose weights take more than that at 1 GB/s gets that long,
  // so a full-size model's step is not taken for a hung one (1 GB/s is
  // about a 250th of the default T1's NoC cut).
  std::uint32_t watchdog_us = 0;
  std::vector<std::vector<double>> exec_seconds;  // by launch of the last run: its nodes' seconds, read as it ended
  std::vector<std::size_t> collective_launch;     // by collective op, in graph order: the launch it runs in
  unsigned first_chip = 0;                        // its collectives' group's first chip (Options::first_chip)
  // Its launches' group (TP_LAUNCH_GROUP of the chips its collectives
  // span; 0: none): a failed launch gives up the chip's collectives.
  std::uint32_t group = 0;
  // A run between start() and finish(): the chips' counters at its start,
  // its simulated start, the current launch's events (the device's, the peers').
  bool running = false;
  std::vector<nlohmann::ordered_json> before;
  double t0 = 0;
  rt::Event launched;
  std::vector<rt::Event> peer_launched;
  // The outputs as fetch() reads them: all but the striped ones, and each
  // striped one's stripes (by tensor).
  struct Fetched {
    std::vector<std::uint8_t> all;
    std::map<int, std::vector<std::vector<std::uint8_t>>> parts;
  };
  Fetched fetched;
  // By moe op: its split over the tiles, its slice table on each chip, and
  // where the planes (choice j, slice s) of its sums lie (on the device).
  struct Moe {
    unsigned chips = 1;  // over which its slices spread (the device, then its peers)
    bool by_expert = false;  // over the chips by expert (e on chip e mod chips), each chip every slice of its own
    rt::MoeSplit split;
    std::vector<rt::Buffer> tables;  // by chip
    Planes planes;
    // By peer: the rows and the router's output the device pushes to it,
    // and its slices' planes (summed on the peer into the device's run of
    // the peers' sums).
    struct Copy {
      rt::Buffer rows, route;
      Planes planes;
    };
    std::vector<Copy> copies;
  };
  std::map<int, Moe> moe;
  // By chip and stack: zeros for the moe ops spread by expert (the largest
  // T x D FP32 of them, in each stack their tiles read from) and the
  // dispatch ops (in the stack near tile 0).
  std::map<std::pair<unsigned, unsigned>, rt::Buffer> zeros;
  std::map<int, Planes> combine;  // by combine op: its planes (a row's parts from the chips its slots took, in chip order)
  // Chip c's zeros in `stack`, at least `bytes` of them.
  const rt::Buffer& zeros_of(rt::Device& d, unsigned c, std::uint64_t bytes, unsigned stack) {
    rt::Buffer& z = zeros[{c, stack}];
    if (z.size < bytes) {
      z = alloc(d, bytes, stack);
      d.write(z, std::vector<std::uint8_t>(bytes, 0).data(), bytes);
    }
    return z;
  }
  std::map<int, std::vector<rt::Buffer>> attention;  // by attention op, by stack: its constants (T scales, then the T x T causal mask)
  // An attention spread over the chips by heads (tile_chips): by (op, peer
  // chip), its constants in each of the peer's stacks; by (cache, peer
  // chip), where the peer's copy of the cache would hold KV head 0 (it
  // holds only its own KV heads).
  std::map<std::pair<int, unsigned>, std::vector<rt::Buffer>> peer_attention;
  std::map<std::pair<int, unsigned>, std::uint64_t> peer_cache;
  // The inputs side by side in one buffer, and the outputs in another, so
  // that a run writes the one and reads the other in one transfer each.
  rt::Buffer inputs, outputs;
  std::map<int, std::uint64_t> at;  // an input's or output's offset in its buffer

  rt::Buffer alloc(rt::Device& d, std::uint64_t bytes, unsigned stack) {
    owned.emplace_back(&d, d.alloc(std::max<std::uint64_t>(bytes, 64), stack));
    return owned.back().second;
  }
  void free_all(rt::Device& dev, const std::vector<Options::Peer>& peers) {
    for (const rt::GraphExec& x : execs) dev.free(x);
    for (const std::vector<PeerExec>& launch : peer_execs)
      for (const PeerExec& x : launch) peers[x.peer].dev->free(x.exec);
    for (const auto& [d, b] : owned) d->free(b);
  }
};

namespace {

// Where a column of a tensor lies: the matrix (of its stripe, where it is
// striped: stripe_outputs) holding it, its first column and its width
// (cols 0: the whole tensor, at `address`).
struct Place {
  std::uint64_t address = 0;
  unsigned col0 = 0, cols = 0;
};

// Builds one group's tile programs.
class Emitter {
 public:
  Emitter(const Graph& g, const Group& grp, std::size_t gi, const Tiling& t, const SpmPlan& spm,
          std::function<std::uint64_t(int)> addr, const std::map<PanelKey, Panel>& panels)
      : g_(g), grp_(grp), gi_(gi), t_(t), spm_(spm), addr_(std::move(addr)), panels_(panels),
        sides_(side_operands(g, grp)), out_(g.tensor(grp.out)),
        value_(g.ops()[static_cast<std::size_t>(grp.ops.back())].kind == OpKind::route
                   ? g.tensor(g.ops()[static_cast<std::size_t>(grp.ops.back())].in[0])
                   : out_) {}

  // The part's program, after what `prog` holds already.
  TileProgram part(const Part& p, TileProgram prog = {}) {
    const Op& anchor = op(0);
    if (anchor.kind == OpKind::rope && anchor.in.size() > 1)  // its position from the chip, for the part's rope ops
      prog.position(addr_(anchor.in[1]), g_.tensor(anchor.in[1]).dtype == DType::f32);
    if (anchor.kind == OpKind::matmul) {
      matmul(prog, p);
    } else if (anchor.kind == OpKind::move) {  // the part's moves, memory to memory
      const unsigned eb = bytes(out_.dtype);
      for (unsigned k = p.r0; k < p.r1; ++k) {
        const Move& m = anchor.moves[k];
        TileProgram::Dma d;
        d.src = addr_(anchor.in[m.src]) + m.from * eb, d.dst = addr_(grp_.out) + m.to * eb;
        d.len0 = m.len * eb, d.count1 = m.count;
        d.sstride1 = static_cast<std::uint32_t>(m.from_stride * eb), d.dstride1 = static_cast<std::uint32_t>(m.to_stride * eb);
        prog.dma(d);
      }
    } else if (anchor.kind == OpKind::gather) {  // the kernel reads the indices and copies the rows
      const Tensor &Tb = g_.tensor(anchor.in[0]), &I = g_.tensor(anchor.in[1]);
      const std::uint64_t table = addr_(anchor.in[0]), index = addr_(anchor.in[1]), out = addr_(grp_.out);
      for (unsigned i0 = p.r0; i0 < p.r1; i0 += 4096) {
        const unsigned n = std::min(4096u, p.r1 - i0);
        prog.gather({rt::lo(table), rt::hi(table), rt::lo(index), rt::hi(index), rt::lo(out), rt::hi(out),
                     static_cast<std::uint32_t>(Tb.rows()), Tb.cols() * bytes(Tb.dtype), i0 | n << 16, I.dtype == DType::f32 ? 1u : 0u});
      }
    } else if (anchor.kind == OpKind::attention) {  // the kernel reads the position, runs the part's heads
      const Tensor &Q = g_.tensor(anchor.in[0]), &KC = g_.tensor(anchor.in[3]), &VC = g_.tensor(anchor.in[4]);
      const Tensor& P = g_.tensor(anchor.in[5]);
      const Tensor &K = g_.tensor(anchor.in[1]), &V = g_.tensor(anchor.in[2]);
      std::vector<std::uint32_t> w;
      const unsigned col[6] = {0, anchor.k_col, anchor.v_col, 0, 0, 0};
      unsigned pitch[3] = {Q.cols(), K.cols(), V.cols()};  // elements between q's, k's and v's rows
      for (int i = 0; i < 6; ++i) {
        const int t = anchor.in[static_cast<std::size_t>(i)];
        std::uint64_t a = 0;
        if (const Place at = place(t, col[i]); at.cols) {  // Q, K or V in a stripe of its own
          a = at.address + 4ull * (col[i] - at.col0), pitch[i] = at.cols;
        } else {
          a = addr_(t) + 4ull * col[i];
        }
        w.push_back(rt::lo(a)), w.push_back(rt::hi(a));
      }
      // The output: where it is striped, the part's heads' stripe, given as
      // where head 0 would lie with the stripe's pitch (in heads).
      std::uint64_t out = 0;
      unsigned out_heads = 0;  // 0: H
      const unsigned dv = out_.cols() / anchor.heads;
      if (const Place at = place(grp_.out, p.r0 * dv); at.cols) {
        if (p.r1 * dv > at.col0 + at.cols) throw std::logic_error(fmt::format("attention '{}': a part's heads cross a stripe", anchor.name));
        out = at.address - 4ull * at.col0, out_heads = at.cols / dv;
      } else {
        out = addr_(grp_.out);
      }
      const std::uint64_t consts = attention_consts_.at(p.tile);
      w.insert(w.end(), {rt::lo(consts), rt::hi(consts), rt::lo(out), rt::hi(out)});
      w.push_back(static_cast<std::uint32_t>(Q.rows()) | (KC.shape[1] & 0xffff) << 16);  // (a pool's high half: TKP_PAGED's)
      w.push_back(anchor.heads | KC.shape[0] << 16);
      w.push_back(KC.shape[2] | VC.shape[2] << 16);
      w.push_back(p.r0 | p.r1 << 16);
      w.push_back((P.dtype == DType::f32 ? 1u : 0u) | (anchor.rotary ? 2u : 0u) | out_heads << 2 | pitch[2] << 16);
      // (q's rows packed and wider than the word: 0, which the kernel takes as H dh.)
      const unsigned dh = KC.shape[2];
      if (pitch[0] > 0xffff && pitch[0] != anchor.heads * dh)
        throw std::logic_error(fmt::format("attention '{}': q's rows {} values apart, past the kernel's word", anchor.name, pitch[0]));
      w.push_back((pitch[0] > 0xffff ? 0 : pitch[0]) | pitch[1] << 16);
      if (const CacheStripes* ks = striped(anchor.in[3])) {  // the caches' stripes
        const CacheStripes* vs = striped(anchor.in[4]);
        if (!vs || vs->n != ks->n || vs->unit != ks->unit || vs->cap != ks->cap)
          throw std::logic_error(fmt::format("attention '{}': its K and V caches are striped differently", anchor.name));
        std::vector<std::uint32_t> words = {ks->n | ks->unit << 8, ks->cap};
        for (const CacheStripes* c : {ks, vs})
          for (unsigned i = 0; i < TKP_KV_STRIPES_MAX; ++i) {
            const std::uint64_t a = i < c->n ? c->parts[i].address : 0;
            words.push_back(rt::lo(a)), words.push_back(rt::hi(a));
          }
        prog.kv_stripes(words);
      }
      if (anchor.page) {  // the rows' sequences and their page tables
        const Tensor &Sq = g_.tensor(anchor.in[6]), &Tb = g_.tensor(anchor.in[7]);
        const std::uint64_t seqs = addr_(anchor.in[6]), table = addr_(anchor.in[7]);
        prog.paged({rt::lo(seqs), rt::hi(seqs), rt::lo(table), rt::hi(table), anchor.page | Tb.shape[1] << 16, Tb.shape[0],
                    (Sq.dtype == DType::f32 ? 1u : 0u) | (KC.shape[1] >> 16) << 16, p.c0 | p.c1 << 16});
      }
      prog.attention(w);
    } else if (is_collective(anchor.kind)) {  // the chip's engine moves the data; the core sleeps
      const Tensor& X = g_.tensor(anchor.in[0]);
      const unsigned eb = bytes(X.dtype);
      std::uint32_t op = anchor.kind == OpKind::all_reduce ? TP_CE_ALL_REDUCE : anchor.kind == OpKind::all_gather ? TP_CE_ALL_GATHER : TP_CE_ALL_TO_ALL;
      op |= (anchor.kind == OpKind::all_to_all ? TP_CE_DIRECT : anchor.tree ? TP_CE_TREE : TP_CE_RING) | (anchor.pull ? TP_CE_PULL : TP_CE_PUSH);
      op |= eb == 4 ? TP_CE_FP32 : eb == 2 ? TP_CE_BF16 : TP_CE_E4M3;  // all-gather, all-to-all: bytes only
      if (group_chips_) op |= TP_CE_GROUP(group_first_, group_chips_);    // a group of the system's chips
      prog.collective(op, addr_(anchor.in[0]), addr_(grp_.out), X.elements(), fabric_regs_, comm_signal_, kCommSem, a2a_table_);
    } else if (anchor.kind == OpKind::dispatch || anchor.kind == OpKind::dispatch_route) {  // the core places the rows or their choices
      prog.dispatch(dispatch_words(anchor, anchor.kind == OpKind::dispatch ? 0 : 1, p.r0, p.r1));
    } else if (anchor.kind == OpKind::route) {
      route(prog, p);
    } else if (anchor.kind == OpKind::moe || anchor.kind == OpKind::combine) {
      combine(prog, p);
    } else if (anchor.kind == OpKind::reshape) {  // the part's rows, memory to memory
      const Tensor& X = g_.tensor(anchor.in[0]);
      const std::uint64_t row = std::uint64_t{X.cols()} * bytes(X.dtype);
      TileProgram::Dma d;
      d.src = addr_(anchor.in[0]) + p.r0 * row, d.dst = addr_(grp_.out) + p.r0 * row;
      d.len0 = static_cast<std::uint32_t>((p.r1 - p.r0) * row);
      prog.dma(d);
    } else {
      rows(prog, p);
    }
    flush(prog);
    return prog;
  }

 private:
  const Op& op(std::size_t j) const { return g_.ops()[static_cast<std::size_t>(grp_.ops[j])]; }

  // A side operand's block (rows m0.., columns n0..) into its buffer; `s`
  // goes with the last descriptor. An operand that broadcasts (its values
  // repeat every `period` elements of the block's rows) loads one period
  // and doubles it in the scratchpad, a local copy each time.
  void load_side(TileProgram& p, std::size_t j, unsigned par, unsigned m0, unsigned mr, unsigned n0, unsigned nr,
                 Sem s = {}) {
    const Tensor& T = g_.tensor(sides_[j]);
    const std::uint32_t dst = spm_.at(fmt::format("s{}.{}", j, par));
    const unsigned cols = value_.cols(), eb = bytes(T.dtype);
    std::vector<TileProgram::Dma> d;
    std::uint64_t have = 0, want = std::uint64_t{mr} * nr * 4;  // bytes in place, and needed
    if (per_row(T, value_)) {  // the block's rows' values, one each (the vector unit scales rows by them)
      d.push_back(block_dma(addr_(sides_[j]) + std::uint64_t{m0} * eb, 0, T.dtype, dst, DType::f32, 1, mr));
      have = want = std::uint64_t{mr} * 4;
    } else if (T.elements() == value_.elements()) {
      d.push_back(block_dma(addr_(sides_[j]) + (std::uint64_t{m0} * cols + n0) * eb, cols * eb, T.dtype, dst, DType::f32, mr, nr));
      have = want;
    } else if (T.elements() == 1) {
      d.push_back(block_dma(addr_(sides_[j]), 0, T.dtype, dst, DType::f32, 1, 1));
      have = 4;
    } else {  // T's rows repeat: block row i is T's row (m0 + i) % rows
      const unsigned rows = static_cast<unsigned>(T.rows());
      for (unsigned i = 0; i < std::min(mr, rows);) {
        const unsigned r = (m0 + i) % rows, run = std::min(std::min(mr, rows) - i, rows - r);
        d.push_back(block_dma(addr_(sides_[j]) + (std::uint64_t{r} * cols + n0) * eb, cols * eb, T.dtype,
                              dst + i * nr * 4, DType::f32, run, nr));
        i += run;
      }
      have = std::uint64_t{std::min(mr, rows)} * nr * 4;
    }
    for (; have < want; have *= 2) {
      TileProgram::Dma c;
      c.src = dst, c.src_local = true, c.dst = dst + have, c.dst_local = true;
      c.len0 = static_cast<std::uint32_t>(std::min(have, want - have));
      d.push_back(c);
    }
    for (std::size_t i = 0; i < d.size(); ++i) p.dma(d[i], i + 1 == d.size() ? s : Sem{});
  }
  unsigned out_cols() const { return out_.cols(); }

  // The vector ops of the chain after (and including, unless a matmul) the
  // anchor, on a block of mr x nr in `run`; the first waits `wait`, the last
  // signals kDone. Returns where the block's result is (run, or the cast's codes).
  std::uint32_t chain(TileProgram& p, std::size_t from, std::uint32_t run, unsigned par, unsigned row0, unsigned mr,
                      unsigned nr, int wait, std::size_t end = ~std::size_t{0}) {
    std::vector<TileProgram::Vec> v;
    std::uint32_t result = run;
    const std::size_t stop = std::min(end, grp_.ops.size());
    for (std::size_t j = from; j < stop; ++j) {
      const Op& o = op(j);
      TileProgram::Vec c;
      c.op = vec_of(o.kind), c.rows = mr, c.cols = nr, c.src0 = run, c.dst = run, c.eps = o.eps;
      if (is_binary(o.kind)) {
        const std::uint32_t side = sides_[j] >= 0 ? spm_.at(fmt::format("s{}.{}", j, par)) : run;
        // The running value is the op's first operand, or its second.
        const int running = j == 0 ? o.in[0] : op(j - 1).out;
        if (j == 0 || o.in[0] == running) c.src0 = run, c.src1 = side;
        else c.src0 = side, c.src1 = run;
        if (sides_[j] >= 0 && per_row(g_.tensor(sides_[j]), g_.tensor(o.out))) c.op = VecOp::scale_rows, c.src0 = run, c.src1 = side;
      } else if (o.kind == OpKind::rmsnorm || o.kind == OpKind::layernorm) {
        c.src1 = spm_.at(fmt::format("w{}.1", j));
        if (o.kind == OpKind::layernorm) c.src2 = spm_.at(fmt::format("w{}.2", j));
      } else if (o.kind == OpKind::cast) {
        c.format = fmt_of(o.format), c.dst = result = spm_.at(fmt::format("o{}", par));
      } else if (o.kind == OpKind::rope) {
        // Rows that share a position, in heads of head_dim columns.
        const unsigned heads = nr / o.head_dim;
        for (unsigned r = 0; r < mr;) {
          const unsigned pos = (row0 + r) / o.rows_per_position;
          const unsigned n = std::min(mr - r, (pos + 1) * o.rows_per_position - (row0 + r));
          TileProgram::Vec q = c;
          q.rows = n * heads, q.cols = o.head_dim, q.src0 = q.dst = run + r * nr * 4, q.position = o.position + pos;
          q.relative_position = o.in.size() > 1;
          v.push_back(q);
          r += n;
        }
        continue;
      }
      v.push_back(c);
    }
    if (stop == grp_.ops.size() && out_.dtype != DType::f32 && op(grp_.ops.size() - 1).kind != OpKind::cast) {  // stored narrower
      TileProgram::Vec c;
      c.op = VecOp::cast_to, c.rows = mr, c.cols = nr, c.src0 = run, c.format = fmt_of(out_.dtype);
      c.dst = result = spm_.at(fmt::format("o{}", par));
      v.push_back(c);
    }
    for (std::size_t i = 0; i < v.size(); ++i)
      p.vec(v[i], Sem{i == 0 ? wait : -1, i + 1 == v.size() ? kDone : -1});
    return result;
  }

  void store_later(std::uint32_t local, unsigned m0, unsigned mr, unsigned n0, unsigned nr, int wait) {
    const unsigned eb = bytes(out_.dtype);
    pending_ = [=, this](TileProgram& p) {
      if (!place(grp_.out, n0).cols) {
        p.store_rows(local, addr_(grp_.out) + (std::uint64_t{m0} * out_cols() + n0) * eb, out_cols() * eb, mr, nr * eb, Sem{wait});
        return;
      }
      // Striped: the block's columns in each stripe they cross, one store each.
      for (unsigned c = n0; c < n0 + nr;) {
        const Place at = place(grp_.out, c);
        const unsigned w = std::min(n0 + nr, at.col0 + at.cols) - c;
        TileProgram::Dma d;
        d.src = local + (c - n0) * eb, d.src_local = true, d.sstride1 = nr * eb;
        d.dst = at.address + (std::uint64_t{m0} * at.cols + (c - at.col0)) * eb, d.dstride1 = at.cols * eb;
        d.len0 = w * eb, d.count1 = mr;
        p.dma(d, c == n0 ? Sem{wait} : Sem{});
        c += w;
      }
    };
  }
  Place place(int t, unsigned col) const { return place_ ? place_(t, col) : Place{}; }
  // A cache of the device's in more than one stripe (else none).
  const CacheStripes* striped(int t) const {
    if (!caches_) return nullptr;
    const auto c = caches_->find(t);
    return c != caches_->end() && c->second.n > 1 ? &c->second : nullptr;
  }
  // Rows m0.. (mr) x columns n0.. (nr) of tensor t, cast to `to`, as
  // packed rows at `dst`: a descriptor per stripe they cross where t is
  // striped, the first waiting as `s` says, the last signalling.
  void load_rows(TileProgram& p, int t, unsigned m0, unsigned mr, unsigned n0, unsigned nr, std::uint32_t dst, DType to, Sem s) {
    const Tensor& X = g_.tensor(t);
    const unsigned eb = bytes(X.dtype), ob = bytes(to);
    if (!place(t, n0).cols) {
      load_block(p, addr_(t) + (std::uint64_t{m0} * X.cols() + n0) * eb, X.cols() * eb, X.dtype, dst, to, mr, nr, s);
      return;
    }
    for (unsigned c = n0; c < n0 + nr;) {
      const Place at = place(t, c);
      const unsigned w = std::min(n0 + nr, at.col0 + at.cols) - c;
      TileProgram::Dma d = block_dma(at.address + (std::uint64_t{m0} * at.cols + (c - at.col0)) * eb, at.cols * eb, X.dtype,
                                     dst + (c - n0) * ob, to, mr, w);
      d.dstride1 = nr * ob;
      const bool last = c + w == n0 + nr;
      p.dma(d, Sem{c == n0 ? s.wait : -1, last ? s.signal : -1, last ? s.signal2 : -1});
      c += w;
    }
  }
  void flush(TileProgram& p) {
    if (pending_) pending_(p);
    pending_ = nullptr;
  }

  // A matmul whose part's B panel stays in the scratchpad (Tiling::resident):
  // it loads once, in chunks along K under the first row block's GEMMs;
  // A's row blocks load into a0 and a1 in turn, each behind the block
  // before's GEMMs (the ones two back freeing its buffer, kAFree), and each
  // block's store queues behind the next block's loads.
  void matmul_resident(TileProgram& p, const Part& part) {
    const Op& mm = op(0);
    const unsigned K = g_.tensor(mm.in[1]).shape[0], eb = bytes(mm.format), W = part.c1 - part.c0;
    const std::uint64_t b_addr = panels_.at(panel_key(g_, op(0), gi_, part)).b.address;
    const std::uint32_t pitch = W * eb, b0 = spm_.at("b0");
    const unsigned nk = (K + t_.kb - 1) / t_.kb, R = (part.r1 - part.r0 + t_.mb - 1) / t_.mb;
    const bool epilogue = grp_.ops.size() > 1 || out_.dtype != DType::f32;
    auto chunk = [&](unsigned kc, Sem s) {
      const unsigned k0 = kc * t_.kb, kr = std::min(t_.kb, K - k0);
      load_block(p, b_addr + std::uint64_t{k0} * pitch, pitch, mm.format, b0 + k0 * pitch, mm.format, kr, W, s);
    };
    // B's first chunk early (as matmul()); A's first block then signals for it.
    const bool early = p.ops().empty();
    if (early) {
      chunk(0, Sem{});
      p.early(p.ops().size());
    }
    for (unsigned r = 0; r < R; ++r) {
      const unsigned m0 = part.r0 + r * t_.mb, mr = std::min(t_.mb, part.r1 - m0), par = r % 2;
      for (std::size_t s = 1; s < sides_.size(); ++s)
        if (sides_[s] >= 0) load_side(p, s, par, m0, mr, part.c0, W);
      load_rows(p, mm.in[0], m0, mr, 0, K, spm_.at(fmt::format("a{}", par)), mm.format,
                Sem{r >= 2 ? kAFree : -1, r > 0 || early ? kLoaded : -1});
      flush(p);  // the block before's store
      const std::uint32_t c = spm_.at(fmt::format("c{}", par));
      for (unsigned kc = 0; kc < nk; ++kc) {
        const unsigned k0 = kc * t_.kb, kr = std::min(t_.kb, K - k0);
        if (r == 0 && (kc > 0 || !early)) chunk(kc, Sem{-1, kLoaded});
        TileProgram::Gemm gm;
        gm.m = mr, gm.n = W, gm.k = kr, gm.a = spm_.at(fmt::format("a{}", par)) + k0 * eb, gm.lda = K;
        gm.b = b0 + k0 * pitch, gm.ldb = W, gm.c = c, gm.input = fmt_of(mm.format), gm.accumulate = kc > 0;
        const bool last = kc + 1 == nk;
        p.gemm(gm, Sem{r == 0 || kc == 0 ? kLoaded : -1, last ? kGemmed : -1, last && r + 2 < R ? kAFree : -1});
      }
      const std::uint32_t result = epilogue ? chain(p, 1, c, par, m0, mr, W, kGemmed) : c;
      store_later(result, m0, mr, part.c0, W, epilogue ? kDone : kGemmed);
    }
  }

  void matmul(TileProgram& p, const Part& part) {
    if (t_.resident) return matmul_resident(p, part);
    const Op& mm = op(0);
    const Tensor &A = g_.tensor(mm.in[0]), &B = g_.tensor(mm.in[1]);
    const MatmulDims dims = matmul_dims(g_, mm);
    const unsigned K = dims.K, N = dims.N, eb = bytes(mm.format);
    // Block-scaled: A cast in groups with its scales in "sa"; each GEMM all
    // of K (the tiling's kb), B's block scales loaded beside B's columns.
    const bool scaled = block_scaled(mm);
    // Batched: the part's rows are whole batches (tile()); a row block lies
    // in one, whose matrix of B (and its scales) the loads read: bo and so,
    // the batch's offsets in B's panel (or B) and in its scales' panel.
    const unsigned M = static_cast<unsigned>(dims.M);
    auto block_end = [&](unsigned m0) { return std::min(part.r1, dims.batched() ? (m0 / M + 1) * M : part.r1); };
    std::uint64_t bo = 0, so = 0;
    unsigned first = 0;  // B's first matrix where it lies (a weight's panel holds the part's matrices only)
    std::uint64_t b_addr;
    std::uint32_t b_pitch;
    unsigned b_col0 = 0;
    DType b_from = mm.format;
    if (B.role == Role::weight) {
      b_addr = panels_.at(panel_key(g_, mm, gi_, part)).b.address, b_pitch = (part.c1 - part.c0) * eb, b_col0 = part.c0;
      first = dims.batched() ? part.r0 / M : 0;  // the panel's first matrix
    } else {
      b_addr = addr_(mm.in[1]), b_pitch = N * bytes(B.dtype), b_from = B.dtype;
    }
    const unsigned nk = (K + t_.kb - 1) / t_.kb;
    unsigned row_blocks = 0;
    for (unsigned m0 = part.r0; m0 < part.r1; m0 = std::min(m0 + t_.mb, block_end(m0))) ++row_blocks;
    const unsigned blocks = row_blocks * ((part.c1 - part.c0 + t_.nb - 1) / t_.nb);
    const unsigned pcols = (part.c1 - part.c0 + kScaleBlock - 1) / kScaleBlock;  // a block-scaled panel's blocks a row
    auto batch_of = [&](unsigned m0) {
      const unsigned b = dims.batched() ? m0 / M - first : 0;
      bo = std::uint64_t{b} * K * b_pitch, so = std::uint64_t{b} * (K / kScaleBlock) * pcols * 4;
    };
    const unsigned total = blocks * nk;
    const bool routed = op(grp_.ops.size() - 1).kind == OpKind::route;  // the group ends with a router's top k
    const bool epilogue = !routed && (grp_.ops.size() > 1 || out_.dtype != DType::f32);
    // B's first chunk (and its scales) of a weight: its loads open the
    // program, early (TileProgram::early), so the tile loads it while it
    // waits at the barrier before this node. They signal nothing; the last
    // load before the first GEMM, behind them in the queue, signals for them.
    auto load_chunk = [&](unsigned i, unsigned n0, unsigned nr, unsigned k0, unsigned kr, bool signal) {
      const int freed_first = i >= 2 ? kFreed : -1;
      std::uint32_t sb = 0;
      if (scaled) {  // the blocks of columns n0 .. n0 + nr (whole blocks: n0 - c0 a multiple of 128)
        const unsigned bc = (n0 - part.c0) / kScaleBlock;
        sb = spm_.at(fmt::format("sb{}", i % 2));
        p.load_rows(panels_.at(panel_key(g_, mm, gi_, part)).scales.address + so + bc * 4, pcols * 4, sb, K / kScaleBlock,
                    (nr + kScaleBlock - 1) / kScaleBlock * 4, Sem{freed_first});
      }
      load_block(p, b_addr + bo + std::uint64_t{k0} * b_pitch + std::uint64_t{n0 - b_col0} * bytes(b_from), b_pitch, b_from,
                 spm_.at(fmt::format("b{}", i % 2)), mm.format, kr, nr, Sem{scaled ? -1 : freed_first, signal ? kLoaded : -1});
      return sb;
    };
    const bool early = B.role == Role::weight && p.ops().empty();
    batch_of(part.r0);
    if (early) {
      load_chunk(0, part.c0, std::min(t_.nb, part.c1 - part.c0), 0, std::min(t_.kb, K), false);
      p.early(p.ops().size());
    }
    unsigned i = 0, j = 0;
    for (unsigned m0 = part.r0, mr = 0; m0 < part.r1; m0 += mr) {
      mr = std::min(t_.mb, block_end(m0) - m0);
      batch_of(m0);
      if (m0 != part.r0) flush(p), p.drain();  // A's buffer is reused
      if (grp_.prologue >= 0) {
        // A's rows as the norm's input (FP32), normed and cast into "a" on
        // the vector unit; the first GEMM waits (the core, at kPrologue; or,
        // after an early chunk, the GEMM itself).
        const Op& norm = g_.ops()[static_cast<std::size_t>(grp_.prologue)];
        const Tensor& X = g_.tensor(norm.in[0]);
        if (m0 == part.r0) load_block(p, addr_(norm.in[1]), 0, DType::f32, spm_.at("pw"), DType::f32, 1, K);
        load_block(p, addr_(norm.in[0]) + std::uint64_t{m0} * K * bytes(X.dtype), K * bytes(X.dtype), X.dtype, spm_.at("px"),
                   DType::f32, mr, K, Sem{-1, kPrologue});
        TileProgram::Vec v;
        v.op = VecOp::rmsnorm, v.rows = mr, v.cols = K, v.src0 = v.dst = spm_.at("px"), v.src1 = spm_.at("pw"), v.eps = norm.eps;
        p.vec(v, Sem{kPrologue});
        v.op = VecOp::cast_to, v.src1 = 0, v.dst = spm_.at("a"), v.format = fmt_of(mm.format);
        if (scaled) v.group = kScaleBlock, v.aux = spm_.at("sa");
        p.vec(v, Sem{-1, kPrologue, grp_.kept >= 0 ? kKept : -1});
        if (grp_.kept >= 0) {  // the rows other groups read: as cast ("a"), or in FP32 ("px")
          const Tensor& kept = g_.tensor(grp_.kept);
          const unsigned kb = bytes(kept.dtype);
          p.store_rows(kept.dtype == DType::f32 ? spm_.at("px") : spm_.at("a"), addr_(grp_.kept) + std::uint64_t{m0} * K * kb, K * kb,
                       mr, K * kb, Sem{kKept});
        }
      } else if (scaled) {
        TileProgram::Dma d = block_dma(addr_(mm.in[0]) + std::uint64_t{m0} * K * bytes(A.dtype), K * bytes(A.dtype), A.dtype,
                                       spm_.at("a"), mm.format, mr, K);
        d.group = kScaleBlock, d.scales = spm_.at("sa"), d.scales_local = true;
        p.dma(d);
      } else {
        load_rows(p, mm.in[0], m0, mr, 0, K, spm_.at("a"), mm.format, Sem{});
      }
      bool waited = grp_.prologue < 0;
      for (unsigned n0 = part.c0; n0 < part.c1; n0 += t_.nb, ++j) {
        const unsigned nr = std::min(t_.nb, part.c1 - n0), par = j % 2;
        for (std::size_t s = 1; s < sides_.size(); ++s)
          if (sides_[s] >= 0) load_side(p, s, par, m0, mr, n0, nr);
        const std::uint32_t c = spm_.at(fmt::format("c{}", par));
        for (unsigned kc = 0; kc < nk; ++kc, ++i) {
          if (kc == 2) flush(p);  // the last block's store, behind this block's first loads
          const unsigned k0 = kc * t_.kb, kr = std::min(t_.kb, K - k0);
          const std::uint32_t b = spm_.at(fmt::format("b{}", i % 2));
          std::uint32_t sb = scaled ? spm_.at(fmt::format("sb{}", i % 2)) : 0;
          // The first GEMM after an early chunk waits for the prologue's cast
          // (its input loads queued behind the chunk) or for the last load
          // before it, made to signal.
          int ready = kLoaded;
          if (i > 0 || !early) sb = load_chunk(i, n0, nr, k0, kr, true);
          else if (grp_.prologue >= 0) ready = kPrologue, waited = true;
          else if (!p.signal_last_dma(kLoaded, p.early()))
            throw std::logic_error("matmul: no load after the early chunk to signal for it");
          TileProgram::Gemm gm;
          gm.m = mr, gm.n = nr, gm.k = kr, gm.a = spm_.at("a") + k0 * eb, gm.lda = K, gm.b = b, gm.c = c;
          gm.input = fmt_of(mm.format), gm.accumulate = kc > 0;
          if (scaled) gm.block_scaled = true, gm.sa = spm_.at("sa"), gm.sb = sb, gm.group = kScaleBlock;
          if (!waited) p.wait(kPrologue), waited = true;  // A is normed and cast
          const int freed = i + 2 < total ? kFreed : -1, last = kc + 1 == nk ? kGemmed : -1;
          p.gemm(gm, Sem{ready, freed >= 0 ? freed : last, freed >= 0 ? last : -1});
        }
        flush(p);
        if (routed) {  // whole rows: the chain on the logits, if any, their top k and its gates, each plane's rows stored
          const std::size_t last = grp_.ops.size() - 1;
          const std::uint32_t logits = last > 1 ? chain(p, 1, c, par, m0, mr, nr, kGemmed, last) : c;
          top_k(p, op(last), logits, spm_.at("rt"), spm_.at("rg"), m0, mr, nr, static_cast<unsigned>(g_.tensor(mm.in[0]).rows()),
                last > 1 ? kDone : kGemmed);
          continue;
        }
        const std::uint32_t result = epilogue ? chain(p, 1, c, par, m0, mr, nr, kGemmed) : c;
        store_later(result, m0, mr, n0, nr, epilogue ? kDone : kGemmed);
      }
    }
  }

  // The router's top-k on the part's rows: the experts' indices to plane
  // 0, the gates (the softmax of the k values, or the values) to plane 1.
  // A route's top k of mr rows of `cols` logits at `src` (once `wait` is
  // signalled): the values and indices at `top`, the gates (their softmax,
  // where the op asks) at `gates`; each plane's rows stored in the output.
  void top_k(TileProgram& p, const Op& o, std::uint32_t src, std::uint32_t top, std::uint32_t gates, unsigned m0, unsigned mr,
             unsigned cols, unsigned T, int wait) {
    const unsigned k = o.k;
    if (!o.gate_softmax) gates = top;
    TileProgram::Vec v;
    v.op = VecOp::topk, v.rows = mr, v.cols = cols, v.k = k, v.src0 = src, v.dst = top;
    p.vec(v, Sem{wait, o.gate_softmax ? -1 : kDone});
    if (o.gate_softmax) {
      TileProgram::Vec sm;
      sm.op = VecOp::softmax, sm.rows = mr, sm.cols = k, sm.src0 = top, sm.dst = gates;
      p.vec(sm, Sem{-1, kDone});
    }
    p.store(top + mr * k * 4, addr_(grp_.out) + std::uint64_t{m0} * k * 4, mr * k * 4, Sem{kDone});
    p.store(gates, addr_(grp_.out) + (std::uint64_t{T} + m0) * k * 4, mr * k * 4);
  }

  void route(TileProgram& p, const Part& part) {
    const Op& o = op(0);
    const Tensor& L = g_.tensor(o.in[0]);
    const unsigned E = L.cols(), k = o.k, T = static_cast<unsigned>(L.rows());
    const std::uint32_t x = spm_.at("x0"), top = spm_.at("o0"), gates = o.gate_softmax ? spm_.at("g0") : top;
    for (unsigned m0 = part.r0; m0 < part.r1; m0 += t_.mb) {
      const unsigned mr = std::min(t_.mb, part.r1 - m0);
      if (o.groups) {  // route_grouped: on the core, once the rows are in
        const std::uint32_t wts = spm_.at("w0");
        load_block(p, addr_(o.in[0]) + std::uint64_t{m0} * E * 4, E * 4, L.dtype, x, DType::f32, mr, E);
        load_block(p, addr_(o.in[1]) + std::uint64_t{m0} * E * 4, E * 4, DType::f32, wts, DType::f32, mr, E, Sem{-1, kLoaded});
        p.wait(kLoaded);
        std::uint32_t scale;
        std::memcpy(&scale, &o.route_scale, 4);
        p.route({x, wts, top, mr, E, k | o.groups << 8 | o.topk_group << 16, scale, o.normalize ? 1u : 0u});
        p.store(top, addr_(grp_.out) + std::uint64_t{m0} * k * 4, mr * k * 4);
        p.store(top + mr * k * 4, addr_(grp_.out) + (std::uint64_t{T} + m0) * k * 4, mr * k * 4);
        p.drain();
        continue;
      }
      load_block(p, addr_(o.in[0]) + std::uint64_t{m0} * E * 4, E * 4, L.dtype, x, DType::f32, mr, E, Sem{-1, kLoaded});
      top_k(p, o, x, top, gates, m0, mr, E, T, kLoaded);
      p.drain();
    }
  }

  // A block of every plane of `pl` at `at` (a descriptor per run, `tile`'s
  // own run first; the queue runs in order, so the last one signals kLoaded
  // where `signal` says), added into slot 0 in the sum's order, the last add signalling
  // `done`. The sum is in scratchpad buffer p0.
  void add_planes(TileProgram& p, const Planes& pl, unsigned tile, std::uint64_t at, unsigned D, unsigned mr, unsigned nr, bool signal,
                  int done) {
    const unsigned P = static_cast<unsigned>(pl.slot.size());
    auto slot = [&](unsigned q) { return spm_.at(fmt::format("p{}", pl.slot[q])); };
    // Each tile starts at a run (a stack) of its own: the tiles' loads
    // spread over the stacks' ports rather than queue at each in turn.
    std::vector<unsigned> first(pl.runs.size(), 0);
    for (std::size_t r = 1; r < pl.runs.size(); ++r) first[r] = first[r - 1] + pl.runs[r - 1].planes;
    const std::size_t R = pl.runs.size();
    for (std::size_t i = 0; i < R; ++i) {
      const std::size_t r = (i + tile) % R;
      const Planes::Run& run = pl.runs[r];
      TileProgram::Dma d = block_dma(run.base + at, D * 4, DType::f32, spm_.at(fmt::format("p{}", first[r])), DType::f32, mr, nr);
      if (run.planes > 1) {
        d.count2 = run.planes, d.sstride2 = static_cast<std::uint32_t>(pl.stride);
        d.dstride1 = nr * 4, d.dstride2 = spm_.at("p1") - spm_.at("p0");
      }
      p.dma(d, i + 1 == R && signal ? Sem{-1, kLoaded} : Sem{});
    }
    for (unsigned q = 1; q < P; ++q) {
      TileProgram::Vec v;
      v.op = VecOp::add, v.rows = mr, v.cols = nr, v.src0 = slot(0), v.src1 = slot(q);
      v.dst = v.src0;
      p.vec(v, Sem{q == 1 ? kLoaded : -1, q + 1 == P ? done : -1});
    }
  }

 public:
  // The program kernel's dispatch() words for a dispatch, dispatch_route
  // or combine op (mode 0, 1, 2) over the part [i0, i1); a combine's
  // source is its y, its output the planes (Planes) it sums.
  std::vector<std::uint32_t> dispatch_words(const Op& o, unsigned mode, unsigned i0, unsigned i1) const {
    const int route = o.kind == OpKind::dispatch_route ? o.in[0] : o.in[1];
    const Tensor& R = g_.tensor(route);
    const std::uint64_t r = addr_(route), src = o.kind == OpKind::dispatch_route ? 0 : addr_(o.in[0]);
    const std::uint64_t out = mode == 2 ? planes_->runs.at(0).base : addr_(o.out);
    const unsigned rb = o.kind == OpKind::dispatch_route ? 0 : g_.tensor(o.in[0]).cols() * bytes(g_.tensor(o.in[0]).dtype);
    return {rt::lo(r), rt::hi(r), rt::lo(src), rt::hi(src), rt::lo(out), rt::hi(out), rt::lo(zeros_), rt::hi(zeros_),
            R.shape[1] | o.k << 16, o.chips | o.capacity << 16, mode, rb, i0 | i1 << 16};
  }

  // A peer's share of a moe op's sums: each block of the part, the peer's
  // planes `pl` added (add_planes), stored at `out` (the device's plane
  // for this peer's sums, a global address).
  void peer_sum(TileProgram& p, const Part& part, const Planes& pl, std::uint64_t out) {
    const unsigned D = out_cols(), P = static_cast<unsigned>(pl.slot.size());
    for (unsigned m0 = part.r0; m0 < part.r1; m0 += t_.mb)
      for (unsigned n0 = part.c0; n0 < part.c1; n0 += t_.nb) {
        const unsigned mr = std::min(t_.mb, part.r1 - m0), nr = std::min(t_.nb, part.c1 - n0);
        const std::uint64_t at = (std::uint64_t{m0} * D + n0) * 4;
        add_planes(p, pl, part.tile, at, D, mr, nr, true, kDone);
        p.store_rows(spm_.at("p0"), out + at, D * 4, mr, nr * 4, Sem{P > 1 ? kDone : kLoaded});
        p.drain();  // the buffers are reused
      }
  }

 private:
  // A moe op's sums: each block of the part, every plane loaded and added
  // (add_planes), the chain after it (a residual), stored.
  void combine(TileProgram& p, const Part& part) {
    const unsigned D = out_cols(), P = static_cast<unsigned>(planes_->slot.size());
    const bool chained = grp_.ops.size() > 1;  // a chain after the sum (a residual): its operands load last
    int loads = 0;  // the chain's side operands
    for (std::size_t j = 1; j < sides_.size(); ++j) loads += sides_[j] >= 0;
    for (unsigned m0 = part.r0; m0 < part.r1; m0 += t_.mb)
      for (unsigned n0 = part.c0; n0 < part.c1; n0 += t_.nb) {
        const unsigned mr = std::min(t_.mb, part.r1 - m0), nr = std::min(t_.nb, part.c1 - n0);
        const std::uint64_t at = (std::uint64_t{m0} * D + n0) * 4;
        add_planes(p, *planes_, part.tile, at, D, mr, nr, P > 1 || !loads, chained ? -1 : kDone);
        std::uint32_t result = spm_.at("p0");
        if (chained) {
          // The side operands (each its last descriptor signalling), then the
          // chain on the sum: it waits for each of them (for the one plane
          // where there are none and nothing to add).
          for (std::size_t j = 1; j < sides_.size(); ++j)
            if (sides_[j] >= 0) load_side(p, j, 0, m0, mr, n0, nr, Sem{-1, kLoaded});
          for (int k = 1; k < loads; ++k) p.wait(kLoaded);
          result = chain(p, 1, result, 0, m0, mr, nr, loads || P == 1 ? kLoaded : -1);
        }
        p.store_rows(result, addr_(grp_.out) + at, D * 4, mr, nr * 4, Sem{P > 1 || chained ? kDone : kLoaded});
        p.drain();  // the buffers are reused
      }
  }

  void rows(TileProgram& p, const Part& part) {
    const Op& anchor = op(0);
    const Tensor& X = g_.tensor(anchor.in[0]);
    // The row ops' weights, once.
    for (std::size_t j = 0; j < grp_.ops.size(); ++j) {
      const Op& o = op(j);
      if (o.kind == OpKind::rmsnorm || o.kind == OpKind::layernorm)
        for (std::size_t w = 1; w < o.in.size(); ++w)
          load_block(p, addr_(o.in[w]), 0, DType::f32, spm_.at(fmt::format("w{}.{}", j, w)), DType::f32, 1, X.cols());
    }
    std::vector<std::size_t> sides;  // the ops that read a side operand
    for (std::size_t s = 0; s < sides_.size(); ++s)
      if (sides_[s] >= 0) sides.push_back(s);
    unsigned j = 0;
    for (unsigned m0 = part.r0; m0 < part.r1; m0 += t_.mb)
      for (unsigned n0 = part.c0; n0 < part.c1; n0 += t_.nb, ++j) {
        const unsigned mr = std::min(t_.mb, part.r1 - m0), nr = std::min(t_.nb, part.c1 - n0), par = j % 2;
        const std::uint32_t x = spm_.at(fmt::format("x{}", par));
        load_rows(p, anchor.in[0], m0, mr, n0, nr, x, DType::f32, sides.empty() ? Sem{-1, kLoaded} : Sem{});
        for (std::size_t s = 0; s < sides.size(); ++s)
          load_side(p, sides[s], par, m0, mr, n0, nr, s + 1 == sides.size() ? Sem{-1, kLoaded} : Sem{});
        flush(p);
        if (is_reduction(anchor.kind)) {
          TileProgram::Vec c;
          c.op = vec_of(anchor.kind), c.rows = mr, c.cols = nr, c.src0 = x, c.dst = spm_.at(fmt::format("o{}", par));
          p.vec(c, Sem{kLoaded, kDone});
          pending_ = [=, this](TileProgram& q) {
            q.store(c.dst, addr_(grp_.out) + std::uint64_t{m0} * 4, mr * 4, Sem{kDone});
          };
          continue;
        }
        const std::uint32_t result = chain(p, 0, x, par, m0, mr, nr, kLoaded);
        store_later(result, m0, mr, n0, nr, kDone);
      }
  }

  const Graph& g_;
  const Group& grp_;
  std::size_t gi_;
  const Tiling& t_;
  const SpmPlan& spm_;
  std::function<std::uint64_t(int)> addr_;
  const std::map<PanelKey, Panel>& panels_;
  std::vector<int> sides_;
  const Tensor& out_;
  const Tensor& value_;  // what the chain computes: out_, or where the group ends with a top k, the logits it takes
  std::function<void(TileProgram&)> pending_;

 public:
  const Planes* planes_ = nullptr;  // a moe group's: where its planes lie (a combine's: the chips')
  std::uint64_t zeros_ = 0;         // the chip's zeros (Impl::zeros), for dispatch ops
  std::function<Place(int, unsigned)> place_;  // a striped tensor's columns (cols 0 for any other)
  std::vector<std::uint64_t> attention_consts_;          // an attention group's constants, by tile (its stack's copy)
  const std::map<int, CacheStripes>* caches_ = nullptr;  // the device's caches (a peer's lie in one stripe each)
  // A collective's: the fabric's registers and the engine's signal (the
  // posting tile's kCommSem), as the chip addresses them.
  std::uint64_t fabric_regs_ = 0, comm_signal_ = 0;
  std::uint64_t a2a_table_ = 0;  // an all-to-all's table (the engine's six words a chip)
  unsigned group_first_ = 0, group_chips_ = 0;  // the chips a collective spans (0: the system's)
};

}  // namespace

WeightStore::~WeightStore() {
  try {
    for (const auto& [key, b] : held_) dev_.free(b);
  } catch (...) {  // a device that failed may refuse; nothing to do then
  }
}

rt::Buffer WeightStore::get(const std::string& key, unsigned stack, std::uint64_t bytes,
                            const std::function<std::vector<std::uint8_t>()>& data) {
  const auto it = held_.find(key);
  if (it != held_.end()) return it->second;
  const rt::Buffer b = dev_.alloc(std::max<std::uint64_t>(bytes, 64), stack);
  if (!dev_.timing_only()) {
    const std::vector<std::uint8_t> d = data();
    if (d.size() != bytes) throw std::logic_error(fmt::format("compiler: weight layout '{}' is {} bytes, not {}", key, d.size(), bytes));
    dev_.preload(b, d.data(), d.size());  // resident before the steps run (untimed)
  }
  bytes_ += b.size;
  return held_[key] = b;
}

SymmetricStore::SymmetricStore(std::vector<rt::Device*> chips) : chips_(std::move(chips)) {
  if (chips_.empty() || !chips_[0]) throw std::invalid_argument("SymmetricStore: no chips");
  const unsigned first = chips_[0]->chip(), system = chips_[0]->chips();
  for (unsigned c = 0; c < chips_.size(); ++c)
    if (!chips_[c] || chips_[c]->chip() != first + c || chips_[c]->chips() != system)
      throw std::invalid_argument(fmt::format("SymmetricStore: entry {} is not chip {} of a system of {}", c, first + c, system));
}

unsigned SymmetricStore::first() const { return chips_[0]->chip(); }

SymmetricStore::~SymmetricStore() {
  for (const auto& [key, bufs] : held_)
    for (unsigned c = 0; c < bufs.size(); ++c) chips_[c]->free(bufs[c]);
}

rt::Buffer SymmetricStore::get(const std::string& key, unsigned chip, std::uint64_t bytes, unsigned stack) {
  if (chip < first() || chip - first() >= chips_.size())
    throw std::invalid_argument(fmt::format("SymmetricStore: chip {}, not one of chips {} to {}", chip, first(), first() + chips() - 1));
  chip -= first();
  auto it = held_.find(key);
  if (it == held_.end()) it = held_.emplace(key, rt::Device::alloc_symmetric(chips_, bytes, stack)).first;
  if (it->second[chip].size < bytes)
    throw std::invalid_argument(fmt::format("SymmetricStore: '{}' holds {} bytes, {} asked", key, it->second[chip].size, bytes));
  return it->second[chip];
}

namespace {

// A weight's name and a hash of its values (FNV-1a over their bits, a
// value at a time): what a WeightStore key starts with.
std::string weight_key(const Tensor& t) {
  std::uint64_t h = 1469598103934665603ull;
  for (float v : t.values) {
    std::uint32_t u;
    std::memcpy(&u, &v, 4);
    h = (h ^ u) * 1099511628211ull;
  }
  return fmt::format("{}#{:016x}", t.name, h);
}

}  // namespace

Executable::Executable(rt::Device& dev, const rt::Kernel& program, Graph g, const Options& o)
    : dev_(dev), program_(program), g_(std::move(g)),
      weights_(o.weights ? o.weights : std::make_shared<WeightStore>(dev)), impl_(std::make_unique<Impl>()) {
  if (g_.outputs().empty()) throw std::invalid_argument("compiler: the graph has no outputs");
  if (!dev_.timing_only())
    for (const Tensor& t : g_.tensors())
      if (t.shape_only())
        throw std::invalid_argument(fmt::format("compiler: weight '{}' has a shape but no values: only a timing-only device "
                                                "(rt::Device::Options::timing_only) runs such a graph", t.name));
  const Target tgt = target(dev_, o.tiles);
  {
    std::uint64_t weight_bytes = 0;
    for (const Tensor& t : g_.tensors())
      if (t.role == Role::weight) weight_bytes += t.elements() * bytes(t.dtype);
    const std::uint64_t us = weight_bytes / 1000;  // at 1 GB/s
    if (us > TP_DEFAULT_TIMEOUT_US) impl_->watchdog_us = static_cast<std::uint32_t>(std::min<std::uint64_t>(us, 0xffffffffu));
  }
  // The peers: chips of the device's system, each like the device.
  for (std::size_t k = 0; k < o.peers.size(); ++k) {
    Options::Peer p = o.peers[k];
    if (!p.dev) throw std::invalid_argument(fmt::format("compiler: peer {} is no device", k));
    if (p.dev->chips() != dev_.chips() || p.dev->chip() == dev_.chip() || p.dev->chip() >= dev_.chips())
      throw std::invalid_argument(fmt::format("compiler: peer {} is chip {} of {}; the device is chip {} of {} (peers are the other "
                                              "chips of its system)", k, p.dev->chip(), p.dev->chips(), dev_.chip(), dev_.chips()));
    for (const Options::Peer& q : peers_)
      if (q.dev->chip() == p.dev->chip()) throw std::invalid_argument(fmt::format("compiler: chip {} is a peer twice", p.dev->chip()));
    if (p.dev->tiles() < tgt.tiles || p.dev->hbm_stacks() != dev_.hbm_stacks())
      throw std::invalid_argument(fmt::format("compiler: peer chip {} has {} tiles and {} stacks; the device's work needs {} and {}",
                                              p.dev->chip(), p.dev->tiles(), p.dev->hbm_stacks(), tgt.tiles, dev_.hbm_stacks()));
    for (unsigned t = 0; t < tgt.tiles; ++t)
      if (p.dev->stack_near(t) != dev_.stack_near(t))
        throw std::invalid_argument(fmt::format("compiler: peer chip {}'s tile {} is nearest stack {}, the device's {}", p.dev->chip(),
                                                t, p.dev->stack_near(t), dev_.stack_near(t)));
    if (!p.weights) p.weights = std::make_shared<WeightStore>(*p.dev);
    peers_.push_back(std::move(p));
  }
  const unsigned chips = 1 + static_cast<unsigned>(peers_.size());
  auto chip_dev = [&](unsigned c) -> rt::Device& { return c ? *peers_[c - 1].dev : dev_; };
  // Collectives: the graph runs on every chip of the system, an executable
  // a chip (run_together), so none has peers.
  for (const Op& op : g_.ops()) {
    if (!is_collective(op.kind)) continue;
    const unsigned first = o.first_chip;
    if (std::uint64_t{first} + op.chips > dev_.chips() || dev_.chip() < first || dev_.chip() - first >= op.chips)
      throw std::invalid_argument(fmt::format("compiler: {} '{}' combines {} chips' values from chip {} on (Options::first_chip); the "
                                              "device is chip {} of a system of {}", name(op.kind), op.name, op.chips, first, dev_.chip(),
                                              dev_.chips()));
    impl_->first_chip = first;
    impl_->group = std::max(impl_->group, TP_LAUNCH_GROUP(first, op.chips));  // (the most chips: CHIPS is the top byte)
    if (!peers_.empty())
      throw std::invalid_argument(fmt::format("compiler: {} '{}': a graph with collectives runs on every chip of the system, an "
                                              "executable a chip (run_together), without peers", name(op.kind), op.name));
    if ((symmetric_result(op) || symmetric_operand(op)) && !symmetric_) {
      if (!o.symmetric || o.symmetric->chips() != op.chips || o.symmetric->first() != first)
        throw std::invalid_argument(fmt::format("compiler: {} '{}' {} needs Options::symmetric, a SymmetricStore of the group's {} "
                                                "chips from chip {} (its {} at one address on every chip)", name(op.kind), op.name,
                                                op.kind == OpKind::all_to_all ? (op.pull ? "pulled" : "pushed") : "over a ring",
                                                op.chips, first, symmetric_operand(op) ? "operand" : "destination"));
      symmetric_ = o.symmetric;
    }
    if (symmetric_operand(op) && g_.tensor(op.in[0]).role == Role::weight)
      throw std::invalid_argument(fmt::format("compiler: {} '{}' pulls a weight, which lies at no one address on every chip", name(op.kind),
                                              op.name));
  }
  groups_ = fuse(g_, o.fuse);
  if (o.narrow) narrow_storage(g_, groups_);
  if (o.fuse) fuse_routes(g_, groups_), fuse_prologues(g_, groups_, tgt.spm_end - tgt.spm_base);
  // Each moe op's split of its experts over the tiles (the kernel's), at
  // least as many slices as spread one token's choices over every tile.
  // With peers, an op of up to a block of rows (TKP_MOE_BLOCK) spreads its
  // slices over every chip; a longer one stays on the device: past a block
  // each tile gathers and stores its experts' rows one by one however thin
  // its slices, and the chips' sums only add traffic (a 256-token prompt of
  // the main job on four chips: 9.38 us/token spread, 8.40 on one chip).
  for (std::size_t i = 0; i < g_.ops().size(); ++i) {
    const Op& op = g_.ops()[i];
    if (op.kind != OpKind::moe) continue;
    const Tensor &X = g_.tensor(op.in[0]), &W1 = g_.tensor(op.in[2]);
    Impl::Moe& m = impl_->moe[static_cast<int>(i)];
    m.chips = X.rows() <= TKP_MOE_BLOCK && !op.ep_chips ? chips : 1;
    // Block-scaled experts split in whole 128-column blocks: as many
    // slices as there are blocks at most, and over the chips only where
    // each gets a block per stack. Where no such split over the chips
    // exists (a slice of every expert per stack of every chip passes the
    // kernel's table: DeepSeek-V3's 256 experts), the experts spread by
    // expert instead where the chips divide them (expert e on chip e mod
    // C, every slice of it: expert parallelism), else they stay on the
    // device (the demo's `experts:` line says where they run).
    const bool scaled = block_scaled(op);
    const unsigned blocks = W1.shape[2] / kScaleBlock, E = W1.shape[0];
    auto plan = [&](unsigned c, unsigned experts) {
      const unsigned want = (c * tgt.tiles + op.k - 1) / op.k;
      return rt::MoeSplit::plan(dev_, tgt.tiles, experts, W1.shape[2], X.cols(), static_cast<unsigned>(X.rows()),
                                scaled ? std::min(want, blocks) : want, c, scaled);
    };
    try {
      m.split = plan(1, E);
      if (m.chips > 1) {
        bool spread = false;
        try {
          const rt::MoeSplit wide = plan(m.chips, E);
          spread = wide.stacks.size() == m.split.stacks.size();  // else fewer stacks a chip than on one chip alone
          if (spread) m.split = wide;
        } catch (const rt::UsageError&) {
        }
        if (!spread && E % m.chips == 0) {
          try {
            const rt::MoeSplit mine = plan(1, E / m.chips);
            spread = m.by_expert = mine.stacks.size() == m.split.stacks.size();
            if (spread) m.split = mine;
          } catch (const rt::UsageError&) {
          }
        }
        if (!spread) m.chips = 1;
      }
    } catch (const rt::UsageError& e) {
      throw std::invalid_argument(fmt::format("compiler: moe '{}': {}", op.name, e.what()));
    }
    g_.split_experts(static_cast<int>(i), m.split.slices, {}, m.split.chunk, m.by_expert ? m.chips : 0);
  }
  for (const Group& grp : groups_) tilings_.push_back(tile(g_, grp, tgt));
  if (o.split_matmuls != Options::Split::never && chips > 1)
    for (std::size_t gi = 0; gi < groups_.size(); ++gi) {
      std::vector<Tiling> by_chip = tile_chips(g_, groups_[gi], tgt, chips, o.split_matmuls == Options::Split::where_faster);
      if (by_chip.empty()) continue;
      tilings_[gi] = by_chip[0];
      impl_->split[gi] = std::move(by_chip);
    }
  // A group's tilings by chip: the device's alone unless it is spread.
  auto chip_tilings = [&](std::size_t gi) {
    std::vector<const Tiling*> r;
    const auto it = impl_->split.find(gi);
    if (it == impl_->split.end()) r.push_back(&tilings_[gi]);
    else
      for (const Tiling& t : it->second) r.push_back(&t);
    return r;
  };
  Stripes stripes;
  if (o.stripe) {
    std::set<std::size_t> spread;
    for (const auto& [gi, by_chip] : impl_->split) spread.insert(gi);
    stripes = stripe_outputs(g_, groups_, spread, dev_.hbm_stacks(), tilings_);
  }
  hbm_ = plan_hbm(g_, groups_, dev_.hbm_stacks(), stripes);
  try {
    // The inputs (FP32) and the outputs, each set packed in a buffer of its
    // own, 64 bytes apart (a striped output in its stripes: stripe_outputs).
    std::uint64_t in_bytes = 0, out_bytes = 0;
    for (std::size_t i = 0; i < g_.tensors().size(); ++i) {
      const Tensor& t = g_.tensors()[i];
      std::uint64_t* end = t.role == Role::input ? &in_bytes : g_.is_output(static_cast<int>(i)) ? &out_bytes : nullptr;
      if (!end || stripes.count(static_cast<int>(i))) continue;
      impl_->at[static_cast<int>(i)] = *end;
      *end += (t.elements() * (t.role == Role::input ? 4 : bytes(t.dtype)) + 63) / 64 * 64;
    }
    bool pulled_input = false;  // a pulled all-to-all's operand among the inputs: they too at one address on every chip
    for (const Op& op : g_.ops()) pulled_input |= symmetric_operand(op) && g_.tensor(op.in[0]).role == Role::input;
    if (in_bytes)
      impl_->inputs = pulled_input ? symmetric_->get(fmt::format("inputs|{}", in_bytes), dev_.chip(), in_bytes, 0) : impl_->alloc(dev_, in_bytes, 0);
    if (out_bytes)  // (at one address on every chip where a ring's result may be among them)
      impl_->outputs = symmetric_ ? symmetric_->get(fmt::format("outputs|{}", out_bytes), dev_.chip(), out_bytes, 0)
                                  : impl_->alloc(dev_, out_bytes, 0);
    // (Keyed by the op's name: the chips' graphs may differ elsewhere, as
    // an expert-parallel step's on a chip with no rows does, and still meet
    // at their collectives.)
    for (const Op& op : g_.ops()) {  // such a result, or a pulled intermediate, that is no output: a symmetric buffer of its own
      const int t = symmetric_result(op) ? op.out : symmetric_operand(op) ? op.in[0] : -1;
      if (t < 0 || g_.is_output(t) || g_.tensor(t).role != Role::intermediate) continue;
      const Tensor& T = g_.tensor(t);
      impl_->plain[t] = symmetric_->get(fmt::format("{}|{}|{}", op.name, t == op.out ? "result" : "operand", T.elements() * bytes(T.dtype)),
                                        dev_.chip(), T.elements() * bytes(T.dtype), 0);
    }
    // Each all-to-all's table: for chip p, its block of this chip's operand
    // to block `chip` of p's result (push), and p's block `chip` of its
    // operand into block p of this chip's result (pull).
    for (std::size_t i = 0; i < g_.ops().size(); ++i) {
      const Op& op = g_.ops()[i];
      if (op.kind != OpKind::all_to_all) continue;
      const Tensor& X = g_.tensor(op.in[0]);
      const std::uint64_t block = X.elements() * bytes(X.dtype) / op.chips, me = dev_.chip() - impl_->first_chip;  // its rank
      std::vector<std::uint64_t> words;
      for (std::uint64_t p = 0; p < op.chips; ++p) words.insert(words.end(), {p * block, block, me * block, p * block, block, me * block});
      const rt::Buffer& table = impl_->a2a_tables[static_cast<int>(i)] = impl_->alloc(dev_, words.size() * 8, 0);
      dev_.write(table, words.data(), words.size() * 8);
    }
    for (const auto& [i, off] : impl_->at) {
      const Tensor& t = g_.tensor(i);
      const rt::Buffer& whole = t.role == Role::input ? impl_->inputs : impl_->outputs;
      impl_->plain[i] = rt::Buffer{whole.address + off, t.elements() * (t.role == Role::input ? 4 : bytes(t.dtype)), whole.chip};
    }
    // Weights as they are, round robin over the stacks.
    std::set<int> anchors;  // ops that anchor a group
    for (const Group& grp : groups_) anchors.insert(grp.ops[0]);
    // A cache of an attention spread over the chips by heads: the KV heads
    // [k0, k1) chip c keeps of it (chip 0 the first; k1 0: none, or no
    // such cache).
    auto kept_heads = [&](int t, unsigned c) -> std::pair<unsigned, unsigned> {
      for (const auto& [gi, by_chip] : impl_->split) {
        const Op& a = g_.ops()[static_cast<std::size_t>(groups_[gi].ops[0])];
        if (a.kind != OpKind::attention || (a.in[3] != t && a.in[4] != t)) continue;
        if (by_chip[c].parts.empty()) return {0, 0};
        const unsigned per = a.heads / g_.tensor(a.in[3]).shape[0];
        unsigned h0 = a.heads, h1 = 0;
        for (const Part& p : by_chip[c].parts) h0 = std::min(h0, p.r0), h1 = std::max(h1, p.r1);
        return {h0 / per, (h1 + per - 1) / per};
      }
      return {0, 0};
    };
    unsigned next = 0;
    // A state buffer of `need` bytes on chip `d` named `key`: the one
    // Options::state shares, or one of its own in `stack`.
    auto state_buffer = [&](const std::string& key, std::uint64_t need, rt::Device& d, unsigned stack) {
      const auto shared = o.state.find(key);
      if (shared != o.state.end() && (shared->second.size < need || shared->second.chip != d.chip()))
        throw std::invalid_argument(fmt::format("compiler: state '{}' needs {} bytes on chip {}; the buffer given holds {} on chip {}", key,
                                                need, d.chip(), shared->second.size, shared->second.chip));
      const rt::Buffer b = shared != o.state.end() ? shared->second : impl_->alloc(d, need, stack % d.hbm_stacks());
      return state_[key] = b;
    };
    for (std::size_t i = 0; i < g_.tensors().size(); ++i) {
      const Tensor& t = g_.tensors()[i];
      if (t.role == Role::intermediate || t.role == Role::input) continue;
      // Experts' weights only moe ops read are laid out in slices below, a
      // matmul's B by the tiles' columns: neither needs the weight as it is.
      const std::vector<int> readers = g_.consumers(static_cast<int>(i));
      auto laid_out = [&](int r) {
        const Op& op = g_.ops()[static_cast<std::size_t>(r)];
        return op.kind == OpKind::moe ||
               (op.kind == OpKind::matmul && anchors.count(r) && op.in[0] != static_cast<int>(i) &&
                (op.in[1] == static_cast<int>(i) || (block_scaled(op) && op.in[2] == static_cast<int>(i))));
      };
      if (t.role == Role::weight && !readers.empty() && std::all_of(readers.begin(), readers.end(), laid_out)) continue;
      if (t.role == Role::state) {  // shared, or a buffer (a buffer a stripe) of its own
        // (A cache spread over the chips by heads: the device's KV heads only.)
        const unsigned kept = kept_heads(static_cast<int>(i), 0).second;
        CacheStripes c;
        c.heads = kept ? kept : t.shape[0];
        const unsigned C = t.shape[1];
        unsigned stacks = std::min(dev_.hbm_stacks(), TKP_KV_STRIPES_MAX);
        while (stacks & (stacks - 1)) stacks &= stacks - 1;  // a power of two (the kernel's)
        if (o.state.count(t.name)) {  // as the executable sharing it has it
          while (c.n < TKP_KV_STRIPES_MAX && o.state.count(fmt::format("{}#{}", t.name, c.n))) ++c.n;
        } else if (o.stripe_caches && C >= std::uint64_t{kKvStripe} * stacks) {
          c.n = stacks;
        }
        c.unit = c.n > 1 ? kKvStripe : C;
        c.cap = c.n > 1 ? (C / c.unit + (C % c.unit ? 1 : 0) + c.n - 1) / c.n * c.unit : C;
        const std::uint64_t need = std::uint64_t{c.heads} * c.cap * t.shape[2] * bytes(t.dtype);
        // Round robin over the stacks, a cache's stripes in the stacks after
        // its first (so stripe k of K's cache and of V's lie apart).
        const unsigned first = o.state.count(t.name) ? 0 : next++;
        for (unsigned k = 0; k < c.n; ++k)
          c.parts.push_back(state_buffer(k ? fmt::format("{}#{}", t.name, k) : t.name, need, dev_, first + k));
        impl_->plain[static_cast<int>(i)] = c.parts[0];
        impl_->caches[static_cast<int>(i)] = std::move(c);
        continue;
      }
      const unsigned stack = next++ % dev_.hbm_stacks();
      impl_->plain[static_cast<int>(i)] = weights_->get(fmt::format("{}|{}|{}", weight_key(t), name(t.dtype), stack), stack,
                                                        t.elements() * bytes(t.dtype), [&] { return encode(t.values, t.dtype); });
    }
    for (std::uint64_t bytes_ : hbm_.arena) impl_->arenas.push_back(impl_->alloc(dev_, bytes_, static_cast<unsigned>(impl_->arenas.size())));
    // An attention spread over the chips by heads: on each peer with heads,
    // its KV heads' part of each cache, state of its own named
    // "<cache>@<chip>" (shared by executables as the device's is:
    // Options::state), as the device's holds only its own.
    for (const auto& [gi, by_chip] : impl_->split) {
      const Op& a = g_.ops()[static_cast<std::size_t>(groups_[gi].ops[0])];
      if (a.kind != OpKind::attention) continue;
      for (unsigned c = 1; c < by_chip.size(); ++c)
        for (const int t : {a.in[3], a.in[4]}) {
          const auto [k0, k1] = kept_heads(t, c);
          if (k1 == 0) continue;
          const Tensor& T = g_.tensor(t);
          const std::uint64_t head = std::uint64_t{T.shape[1]} * T.shape[2] * bytes(T.dtype), need = head * (k1 - k0);
          const std::string key = fmt::format("{}@{}", T.name, chip_dev(c).chip());
          const rt::Buffer b = state_buffer(key, need, chip_dev(c), o.state.count(key) ? 0 : next++);
          impl_->peer_cache[{t, c}] = b.address - head * k0;
        }
    }
    // A matmul's weight per tile: its part's columns in the matmul's
    // format, near the tile.
    for (std::size_t gi = 0; gi < groups_.size(); ++gi) {
      const Group& grp = groups_[gi];
      const Op& anchor = g_.ops()[static_cast<std::size_t>(grp.ops[0])];
      if (anchor.kind == OpKind::matmul && g_.tensor(anchor.in[1]).role == Role::weight) {
        const Tensor& B = g_.tensor(anchor.in[1]);
        const MatmulDims dims = matmul_dims(g_, anchor);
        const std::string key = weight_key(B);
        const std::vector<const Tiling*> by_chip = chip_tilings(gi);
        for (unsigned c = 0; c < by_chip.size(); ++c) {
          for (const Part& p : by_chip[c]->parts) {
            const PanelKey at = panel_key(g_, anchor, gi, p);
            if (impl_->panels.count(at)) continue;
            const unsigned stack = chip_dev(c).stack_near(p.tile);
            WeightStore& store = c ? *peers_[c - 1].weights : *weights_;
            // Batched: the part's matrices [b0, b1) only, their rows one after another.
            const unsigned b0 = std::get<2>(at), b1 = dims.batched() ? static_cast<unsigned>(p.r1 / dims.M) : 1;
            const std::string batches = dims.batched() ? fmt::format("|matrices {}-{}", b0, b1) : "";
            const std::uint64_t K = std::uint64_t{b1 - b0} * dims.K, N = dims.N, k0 = std::uint64_t{b0} * dims.K;
            impl_->panels[at].b =
                store.get(fmt::format("{}|{}|columns {}-{}{}|{}", key, name(anchor.format), p.c0, p.c1, batches, stack), stack,
                              K * (p.c1 - p.c0) * bytes(anchor.format), [&] {
                  std::vector<float> panel;
                  panel.reserve(K * (p.c1 - p.c0));
                  for (std::uint64_t k = k0; k < k0 + K; ++k)
                    panel.insert(panel.end(), B.values.begin() + static_cast<std::ptrdiff_t>(k * N + p.c0),
                                 B.values.begin() + static_cast<std::ptrdiff_t>(k * N + p.c1));
                  return encode(panel, anchor.format);
                });
            if (block_scaled(anchor)) {  // the scales of the panel's blocks: K / 128 rows of them
              const Tensor& S = g_.tensor(anchor.in[2]);
              const unsigned bc0 = p.c0 / kScaleBlock, bc1 = (p.c1 + kScaleBlock - 1) / kScaleBlock, bcols = S.shape.back();
              const unsigned r0 = b0 * (dims.K / kScaleBlock), r1 = r0 + (b1 - b0) * (dims.K / kScaleBlock);
              impl_->panels[at].scales =
                  store.get(fmt::format("{}|blocks {}-{}{}|{}", weight_key(S), bc0, bc1, batches, stack), stack,
                                std::uint64_t{r1 - r0} * (bc1 - bc0) * 4, [&] {
                    std::vector<float> panel;
                    for (unsigned r = r0; r < r1; ++r)
                      panel.insert(panel.end(), S.values.begin() + std::size_t{r} * bcols + bc0, S.values.begin() + std::size_t{r} * bcols + bc1);
                    return encode(panel, DType::f32);
                  });
            }
          }
        }
      }
    }
    // A moe op's experts in slices near the tiles that run them (spread
    // over C chips of Q stacks: slice s on chip (s mod C Q) / Q), the
    // planes of each chip's slices on that chip (per slice: K x T rows of
    // D, FP32; the device's also hold the peers' sums) and a slice table on
    // each chip (its own slices' weights and planes, zeros for the others').
    for (auto& [index, m] : impl_->moe) {
      const Op& op = g_.ops()[static_cast<std::size_t>(index)];
      const Tensor &X = g_.tensor(op.in[0]), &W1 = g_.tensor(op.in[2]), &W3 = g_.tensor(op.in[3]), &W2 = g_.tensor(op.in[4]);
      const unsigned E = W1.shape[0], D = X.cols(), F = W1.shape[2], T = static_cast<unsigned>(X.rows());
      const bool scaled = block_scaled(op);
      const unsigned S = m.split.slices, Fs = F / S, Q = static_cast<unsigned>(m.split.stacks.size());
      // Chip c holds slices c Q + q + k C Q (k < S / C Q): slice s's K
      // planes (the kernel writes choice j a plane after choice 0) in stack
      // q's buffer of chip c's from plane k K. The sum's order on a chip:
      // choice j, then its slices in order (k, then q). By expert, every
      // chip holds every slice (of its own experts) so. Expert parallel
      // (a slot's own choices first): K = min(k, the chip's experts), as
      // no slot has more choices on the chip (Mixtral's top 2 of 8 over
      // eight chips: one plane, where k planes were half zeros).
      const unsigned K = op.ep_chips ? std::min(op.k, W1.shape[0]) : op.k;
      const unsigned over = m.by_expert ? 1 : m.chips, mine = S / (over * Q), per_stack = mine * K;
      std::vector<std::vector<std::uint64_t>> partials(m.chips, std::vector<std::uint64_t>(S, 0));  // by chip, by slice
      std::vector<unsigned> homes(S);
      for (unsigned c = 0; c < m.chips; ++c) {
        Planes pl;
        pl.stride = 4ull * T * D;
        for (unsigned q = 0; q < Q; ++q) {
          const rt::Buffer b = impl_->alloc(chip_dev(c), per_stack * pl.stride, m.split.stacks[q]);
          pl.runs.push_back({b.address, per_stack});
          for (unsigned k = 0; k < mine; ++k) {
            const unsigned sl = (m.by_expert ? 0 : c * Q) + q + k * over * Q;
            partials[c][sl] = b.address + std::uint64_t{k} * K * pl.stride, homes[sl] = c;
          }
        }
        if (m.by_expert || op.ep_chips)  // a buffer a stack, for every op
          for (unsigned stack : m.split.stacks) impl_->zeros_of(chip_dev(c), c, 4ull * T * D, stack);
        for (unsigned j = 0; j < K; ++j)
          for (unsigned k = 0; k < mine; ++k)
            for (unsigned q = 0; q < Q; ++q) pl.slot.push_back(q * per_stack + k * K + j);
        if (c == 0 && m.chips > 1) {  // then the peers' sums
          const rt::Buffer b = impl_->alloc(dev_, (m.chips - 1) * pl.stride, m.split.stacks[0]);
          pl.runs.push_back({b.address, m.chips - 1});
          for (unsigned k = 0; k + 1 < m.chips; ++k) pl.slot.push_back(Q * per_stack + k);
        }
        if (c == 0) {
          m.planes = std::move(pl);
        } else {
          Impl::Moe::Copy cp;
          cp.rows = impl_->alloc(chip_dev(c), 2ull * T * D, m.split.stacks[0]);
          cp.route = impl_->alloc(chip_dev(c), 8ull * op.k * T, m.split.stacks[0]);
          cp.planes = std::move(pl);
          m.copies.push_back(std::move(cp));
        }
      }
      if (m.chips > 1 && !m.by_expert) g_.split_experts(index, S, homes, m.split.chunk);
      std::vector<std::vector<std::uint32_t>> tables(m.chips);
      std::string keys[3] = {weight_key(W1), weight_key(W3), weight_key(W2)};
      if (scaled)
        for (std::size_t k = 0; k < 3; ++k) keys[k] += "|" + weight_key(g_.tensor(op.in[5 + k]));
      for (unsigned e = 0; e < E; ++e)
        for (unsigned sl = 0; sl < S; ++sl) {
          // Expert e's slice sl: w1's and w3's columns, w2's rows; block
          // scaled, the codes and then their blocks' scales (FP32).
          // Streamed in chunks (MoeSplit::chunk), w2's rows chunk by chunk:
          // D / Dc matrices of Fs x Dc.
          const unsigned Dc = m.split.chunk;
          auto slice = [&](int which) {
            std::vector<float> w(std::size_t{D} * Fs);
            const auto w2 = W2.values.begin() + static_cast<std::ptrdiff_t>((std::size_t{e} * F + std::size_t{sl} * Fs) * D);
            if (which == 2 && Dc) {
              for (unsigned c = 0, i = 0; c < D / Dc; ++c)
                for (unsigned f = 0; f < Fs; ++f)
                  for (unsigned d = 0; d < Dc; ++d) w[i++] = w2[static_cast<std::ptrdiff_t>(std::size_t{f} * D + c * Dc + d)];
            } else if (which == 2) {
              std::copy_n(w2, std::size_t{Fs} * D, w.begin());
            } else {
              const Tensor& W = which ? W3 : W1;
              for (unsigned d = 0; d < D; ++d)
                for (unsigned f = 0; f < Fs; ++f) w[std::size_t{d} * Fs + f] = W.values[(std::size_t{e} * D + d) * F + sl * Fs + f];
            }
            if (!scaled) return encode(w, W1.dtype);
            // Block-scaled: the codes, then the scales of their 128 x 128
            // blocks (FP32, row-major); in chunks, each chunk's codes and
            // then its blocks' scales.
            const Tensor& S = g_.tensor(op.in[5 + static_cast<std::size_t>(which)]);
            const unsigned rows = (which == 2 ? Fs : D) / kScaleBlock, cols = (which == 2 ? D : Fs) / kScaleBlock;
            const unsigned r0 = which == 2 ? sl * Fs / kScaleBlock : 0, c0 = which == 2 ? 0 : sl * Fs / kScaleBlock;
            const unsigned chunks = Dc ? D / Dc : 1, per = Dc ? Dc / kScaleBlock : 0;  // per: a chunk's blocks along D
            std::vector<std::uint8_t> bytes_;
            for (unsigned c = 0; c < chunks; ++c) {
              const std::size_t n = w.size() / chunks;
              const std::vector<std::uint8_t> codes_ = encode(std::vector<float>(w.begin() + static_cast<std::ptrdiff_t>(c * n),
                                                                                 w.begin() + static_cast<std::ptrdiff_t>((c + 1) * n)),
                                                              W1.dtype);
              std::vector<float> sc;
              for (unsigned r = 0; r < rows; ++r)
                for (unsigned b = 0; b < cols; ++b) {
                  const bool in_chunk = !Dc || (which == 2 ? b / per : r / per) == c;
                  if (in_chunk) sc.push_back(S.values[(std::size_t{e} * S.shape[1] + r0 + r) * S.shape[2] + c0 + b]);
                }
              const std::vector<std::uint8_t> scales_ = encode(sc, DType::f32);
              bytes_.insert(bytes_.end(), codes_.begin(), codes_.end());
              bytes_.insert(bytes_.end(), scales_.begin(), scales_.end());
            }
            return bytes_;
          };
          const std::uint64_t slice_bytes =
              std::uint64_t{D} * Fs * bytes(W1.dtype) + (scaled ? std::uint64_t{D / kScaleBlock} * (Fs / kScaleBlock) * 4 : 0);
          // By expert, only its chip's table has it (at e / C); else every
          // chip's, zeros where the slice is another chip's.
          const unsigned stack = m.split.stacks[sl % Q], home = m.by_expert ? e % m.chips : homes[sl];
          WeightStore& store = home ? *peers_[home - 1].weights : *weights_;
          for (unsigned c = 0; c < m.chips; ++c) {
            if (m.by_expert && c != home) continue;
            for (int which = 0; which < 3; ++which) {
              const std::uint64_t a =
                  c != home ? 0
                            : store.get(fmt::format("{}|expert {} slice {} of {}{}|{}", keys[which], e, sl, S,
                                                    (which == 2 || scaled) && Dc ? fmt::format(" in chunks of {}", Dc) : "", stack),
                                        stack,
                                        slice_bytes, [&] { return slice(which); }).address;
              tables[c].push_back(rt::lo(a)), tables[c].push_back(rt::hi(a));
            }
            const std::uint64_t a = c == home ? partials[c][sl] : 0;
            tables[c].push_back(rt::lo(a)), tables[c].push_back(rt::hi(a));
          }
        }
      for (unsigned c = 0; c < m.chips; ++c) {
        m.tables.push_back(impl_->alloc(chip_dev(c), tables[c].size() * 4, m.split.stacks[0]));
        chip_dev(c).write(m.tables[c], tables[c].data(), tables[c].size() * 4);
      }
    }
    // Expert parallelism's dispatch ops: zeros for their empty slots and
    // rows, and a combine's planes (a chip's each, T x D FP32, in one buffer).
    for (std::size_t i = 0; i < g_.ops().size(); ++i) {
      const Op& op = g_.ops()[i];
      if (op.kind == OpKind::dispatch_route) impl_->zeros_of(dev_, 0, 4ull * op.chips * op.capacity * op.k, dev_.stack_near(0));
      if (op.kind != OpKind::dispatch && op.kind != OpKind::combine) continue;
      const Tensor& X = g_.tensor(op.in[0]);
      const std::uint64_t row = std::uint64_t{X.cols()} * bytes(X.dtype), T = g_.tensor(op.in[1]).shape[1];
      impl_->zeros_of(dev_, 0, row * std::max<std::uint64_t>(T, std::uint64_t{op.chips} * op.capacity), dev_.stack_near(0));
      if (op.kind == OpKind::combine) {  // min(k, chips) planes: a row's parts in chip order, then zeros
        Planes& pl = impl_->combine[static_cast<int>(i)];
        const unsigned P = std::min(op.k, op.chips);
        pl.stride = T * row;
        pl.runs.push_back({impl_->alloc(dev_, P * pl.stride, dev_.stack_near(0)).address, P});
        for (unsigned q = 0; q < P; ++q) pl.slot.push_back(q);
      }
    }
    if (chips > 1)
      for (unsigned c = 0; c < chips; ++c) {
        const std::vector<std::uint32_t> ones(tgt.tiles, 1);
        impl_->ones.push_back(impl_->alloc(chip_dev(c), 4ull * tgt.tiles, 0));
        chip_dev(c).write(impl_->ones[c], ones.data(), 4ull * tgt.tiles);
      }
    // An attention's constants: the rows' scales, the causal mask of the
    // new rows (0, or -inf above the diagonal), a row of -inf; its worst
    // case (the whole cache) must fit the kernel's scratchpad.
    for (std::size_t i = 0; i < g_.ops().size(); ++i) {
      const Op& op = g_.ops()[i];
      if (op.kind != OpKind::attention) continue;
      const Tensor &KC = g_.tensor(op.in[3]), &VC = g_.tensor(op.in[4]);
      const unsigned T = static_cast<unsigned>(g_.tensor(op.in[0]).rows());
      // The worst case: every row one sequence's, at the end of its cache.
      const Tensor* Tb = op.page ? &g_.tensor(op.in[7]) : nullptr;
      const unsigned n = Tb ? Tb->shape[1] * op.page : KC.shape[1];
      if (!attention_fits(T, n, KC.shape[2], VC.shape[2], Tb ? Tb->elements() : 1))
        throw std::invalid_argument(fmt::format("compiler: attention '{}': {} rows over a cache of {} positions do not fit the "
                                                "scratchpad's {} KiB",
                                                op.name, T, n, (tgt.spm_end - tgt.spm_base) / 1024));
      // The scales, the T x T mask, then n + T of -inf (the kernel fills
      // a group's scores with them, a row from each next one).
      const float inf = std::numeric_limits<float>::infinity();
      std::vector<float> c(T, op.scale);
      for (unsigned r = 0; r < T; ++r)
        for (unsigned col = 0; col < T; ++col) c.push_back(col > r ? -inf : 0.0f);
      c.resize(c.size() + n + T, -inf);
      // A copy in every stack, each tile reading its nearest: every tile
      // reads the mask whole (a 256-row prompt's is 256 KiB).
      std::vector<rt::Buffer>& copies = impl_->attention[static_cast<int>(i)];
      for (unsigned s = 0; s < dev_.hbm_stacks(); ++s) {
        copies.push_back(impl_->alloc(dev_, c.size() * 4, s));
        dev_.write(copies.back(), c.data(), c.size() * 4);
      }
      // And in every stack of each peer with heads of it.
      for (const auto& [gi, by_chip] : impl_->split) {
        if (groups_[gi].ops[0] != static_cast<int>(i)) continue;
        for (unsigned p = 1; p < by_chip.size(); ++p) {
          if (by_chip[p].parts.empty()) continue;
          std::vector<rt::Buffer>& there = impl_->peer_attention[{static_cast<int>(i), p}];
          for (unsigned s = 0; s < chip_dev(p).hbm_stacks(); ++s) {
            there.push_back(impl_->alloc(chip_dev(p), c.size() * 4, s));
            chip_dev(p).write(there.back(), c.data(), c.size() * 4);
          }
        }
      }
    }
    auto addr = [this](int t) -> std::uint64_t {
      const auto it = impl_->plain.find(t);
      if (it != impl_->plain.end()) return it->second.address;
      const HbmSlot* s = hbm_.find(t);
      if (!s) throw std::logic_error(fmt::format("compiler: tensor '{}' has no place in HBM", g_.tensor(t).name));
      if (s->cols) throw std::logic_error(fmt::format("compiler: tensor '{}' lies in stripes: no one address", g_.tensor(t).name));
      return impl_->arenas[s->stack].address + s->offset;
    };
    auto place = [this](int t, unsigned col) -> Place {
      if (impl_->plain.count(t)) return {};
      for (unsigned i = 0;; ++i) {
        const HbmSlot* s = hbm_.find(t, i);
        if (!s || !s->cols) return {};
        if (col >= s->col0 && col < s->col0 + s->cols) return {impl_->arenas[s->stack].address + s->offset, s->col0, s->cols};
      }
    };
    impl_->tiles = tgt.tiles;
    // A device graph holds at most TKP_MARKS_MAX - 1 nodes: a longer one
    // runs as several launches, one after another, each of whole groups
    // (a launch clears the semaphores through which a group's nodes and
    // the peers' hand over). Each launch's first hand-over waits for the
    // peers' tiles to run, as the graph's first does.
    constexpr std::size_t kNodesPerLaunch = TKP_MARKS_MAX - 1;
    std::vector<std::size_t> launch_of(groups_.size());
    {
      std::size_t launch = 0, held = 0;
      for (std::size_t gi = 0; gi < groups_.size(); ++gi) {
        const Op& a = g_.ops()[static_cast<std::size_t>(groups_[gi].ops[0])];
        const std::size_t nodes = impl_->split.count(gi) || a.kind == OpKind::combine ? 2
                                  : a.kind != OpKind::moe                                 ? 1
                                  : impl_->moe.at(groups_[gi].ops[0]).chips > 1          ? 3
                                                                                          : 2;
        if (held && held + nodes > kNodesPerLaunch) ++launch, held = 0;
        launch_of[gi] = launch, held += nodes;
      }
    }
    const std::size_t launches = groups_.empty() ? 0 : launch_of.back() + 1;
    // (run_together runs every chip's launches in step: each collective in
    // the same launch on every chip.)
    for (std::size_t gi = 0; gi < groups_.size(); ++gi)
      if (is_collective(g_.ops()[static_cast<std::size_t>(groups_[gi].ops[0])].kind)) impl_->collective_launch.push_back(launch_of[gi]);
    std::vector<std::size_t> first_node(launches + 1, 0);  // by launch: its first device node
    impl_->handovers.assign(launches, 0);
    // By launch and peer: its share of the moe ops and the spread matmuls.
    std::vector<std::vector<rt::Graph>> peer_launches(launches, std::vector<rt::Graph>(peers_.size()));
    auto copy = [](TileProgram& p, std::uint64_t from, std::uint64_t to, std::uint32_t bytes) {
      TileProgram::Dma d;
      d.src = from, d.dst = to, d.len0 = bytes;
      p.dma(d);
    };
    // Semaphore kChipSem of every tile of chip c, from chip `from`: one
    // descriptor where their registers lie evenly apart.
    auto signal_all = [&](TileProgram& p, unsigned from, unsigned c) {
      const std::uint64_t s0 = chip_dev(c).semaphore(0, kChipSem);
      const std::uint64_t step = tgt.tiles > 1 ? chip_dev(c).semaphore(1, kChipSem) - s0 : 0;
      bool even = step > 0 && step <= 0xffffffffu;
      for (unsigned u = 2; u < tgt.tiles && even; ++u) even = chip_dev(c).semaphore(u, kChipSem) == s0 + u * step;
      TileProgram::Dma d;
      d.src = impl_->ones[from].address, d.dst = s0, d.len0 = 4;
      if (even) {
        d.count1 = tgt.tiles, d.sstride1 = 4, d.dstride1 = static_cast<std::uint32_t>(step);
        p.dma(d);
      } else {
        for (unsigned u = 0; u < tgt.tiles; ++u) d.dst = chip_dev(c).semaphore(u, kChipSem), p.dma(d);
      }
    };
    auto signaller = [&](unsigned c) { return (c - 1) % tgt.tiles; };
    bool handed_over = false;  // an op earlier in this launch (moe or spread matmul) ran on the peers too
    // At a launch's first hand-over, device tile t waits until every tile
    // of every peer it signals (of chips 1 .. over - 1) runs, before it
    // signals any: the peers' "I run" share its semaphore, and a signal to
    // a peer whose launch has not yet cleared its semaphores would be lost.
    auto await_peers = [&](TileProgram& p, unsigned t, unsigned over) {
      if (handed_over) return;
      for (unsigned c = 1; c < over; ++c)
        if (signaller(c) == t)
          for (unsigned i = 0; i < tgt.tiles; ++i) p.wait(kChipSem);
    };
    for (std::size_t gi = 0; gi < groups_.size(); ++gi) {
      const Group& grp = groups_[gi];
      const std::size_t launch = launch_of[gi];
      if (gi && launch != launch_of[gi - 1]) handed_over = false, first_node[launch] = dgraph_.nodes().size();
      std::vector<rt::Graph>& peer_graphs = peer_launches[launch];
      const SpmPlan spm = plan_spm(g_, grp, tilings_[gi], tgt.spm_base);
      Emitter e(g_, grp, gi, tilings_[gi], spm, addr, impl_->panels);
      e.place_ = place, e.caches_ = &impl_->caches;
      if (impl_->attention.count(grp.ops[0]))
        for (unsigned t = 0; t < tgt.tiles; ++t)
          e.attention_consts_.push_back(impl_->attention.at(grp.ops[0]).at(dev_.stack_near(t)).address);
      const Op& anchor = g_.ops()[static_cast<std::size_t>(grp.ops[0])];
      if (is_collective(anchor.kind)) {
        e.fabric_regs_ = dev_.fabric_registers(), e.comm_signal_ = dev_.semaphore(tilings_[gi].parts.at(0).tile, kCommSem);
        if (anchor.chips != dev_.chips()) e.group_first_ = impl_->first_chip, e.group_chips_ = anchor.chips;
      }
      if (anchor.kind == OpKind::all_to_all) e.a2a_table_ = impl_->a2a_tables.at(grp.ops[0]).address;
      if (const auto z = impl_->zeros.find({0, dev_.stack_near(0)}); z != impl_->zeros.end()) e.zeros_ = z->second.address;
      std::string name = anchor.name;
      if (grp.prologue >= 0) name = g_.ops()[static_cast<std::size_t>(grp.prologue)].name + ">" + name;
      for (std::size_t j = 1; j < grp.ops.size(); ++j) name += "+" + g_.ops()[static_cast<std::size_t>(grp.ops[j])].name;
      if (const auto spread = impl_->split.find(gi); spread != impl_->split.end()) {
        // A matmul over the chips: chip c's tiles compute its columns
        // (tile_chips) from its own panels of B, reading A from a copy (below)
        // and any side operand where it lies on the device, and writing
        // their columns of the output there. The device hands the op over
        // as for a moe op: a tile of its per peer signals each of the peer's tiles
        // (after, at the first hand-over, each of them has signalled that
        // it runs), every one of which waits for that whether it has a
        // part or not; each peer tile with a part drains its stores, then
        // signals the device's tile 0, whose node ".gather" waits for them
        // all before the next node reads the output.
        //
        // What every peer tile reads whole, A (or its prologue's operands:
        // the RMSNorm's input and weights), the device's signalling tile
        // pushes to the peer with the hand-over, one copy a peer: pulled by
        // each peer tile, the same bytes crossed the device's links once
        // for every tile (on eight chips a decode row of the LM head's A
        // took a peer tile 4.6 us to read, against 1.5 us on the device).
        //
        // An attention spread by heads: each chip runs its heads over its
        // own part of the caches (Impl::peer_cache), its tiles reading
        // their heads' columns of Q, K and V, the positions and the pages
        // on the device; nothing is pushed.
        const std::vector<Tiling>& by_chip = spread->second;
        const bool heads = anchor.kind == OpKind::attention;
        // (With a prologue, A is its output, stored nowhere: its operands.)
        const std::vector<int> whole = heads                 ? std::vector<int>{}
                                       : grp.prologue >= 0 ? g_.ops()[static_cast<std::size_t>(grp.prologue)].in
                                                           : std::vector<int>{anchor.in[0]};
        std::vector<std::map<int, std::uint64_t>> pushed(chips);  // by peer: tensor -> its copy there
        std::map<unsigned, TileProgram> first;  // by device tile: the hand-over, before its part
        for (unsigned c = 1; c < chips; ++c) {
          if (!first.count(signaller(c))) await_peers(first[signaller(c)], signaller(c), chips);
          TileProgram& p = first[signaller(c)];
          for (int t : whole) {
            const Tensor& tensor = g_.tensor(t);
            const std::uint64_t n = tensor.elements() * (tensor.role == Role::input ? 4 : bytes(tensor.dtype));
            const rt::Buffer b = impl_->alloc(chip_dev(c), n, chip_dev(c).stack_near(0));
            copy(p, addr(t), chip_dev(c).global(b), static_cast<std::uint32_t>(n));
            pushed[c][t] = b.address;
          }
          signal_all(p, 0, c);
        }
        std::vector<std::pair<unsigned, TileProgram>> mine;
        for (const Part& p : by_chip[0].parts) {
          const auto f = first.find(p.tile);
          TileProgram before;
          if (f != first.end()) before = std::move(f->second), first.erase(f);
          mine.emplace_back(p.tile, e.part(p, std::move(before)));
        }
        for (auto& [t, p] : first) mine.emplace_back(t, std::move(p));
        dgraph_.node(name, std::move(mine));
        impl_->node_group.push_back(gi);
        const std::uint64_t back = dev_.semaphore(0, kChipDoneSem);
        std::size_t peer_parts = 0;
        for (unsigned c = 1; c < chips; ++c) {
          const Tiling& tc = by_chip[c];
          const SpmPlan spm_c = plan_spm(g_, grp, tc, tgt.spm_base);
          auto remote = [&](int t) {
            const auto at = pushed[c].find(t);
            if (at != pushed[c].end()) return at->second;
            const auto cache = impl_->peer_cache.find({t, c});
            return cache != impl_->peer_cache.end() ? cache->second : dev_.global(rt::Buffer{addr(t), 0, dev_.chip()});
          };
          Emitter ec(g_, grp, gi, tc, spm_c, remote, impl_->panels);
          ec.place_ = [&](int t, unsigned col) {  // a striped operand's stripe, on the device
            Place at = place(t, col);
            if (at.cols) at.address = dev_.global(rt::Buffer{at.address, 0, dev_.chip()});
            return at;
          };
          if (heads && !tc.parts.empty())
            for (unsigned t = 0; t < tgt.tiles; ++t)
              ec.attention_consts_.push_back(impl_->peer_attention.at({grp.ops[0], c}).at(chip_dev(c).stack_near(t)).address);
          const std::uint64_t ready = dev_.semaphore(signaller(c), kChipSem);
          std::vector<std::pair<unsigned, TileProgram>> share;
          for (unsigned t = 0; t < tgt.tiles; ++t) {
            TileProgram p;
            if (!handed_over) copy(p, impl_->ones[c].address, ready, 4);
            p.wait(kChipSem);
            for (const Part& part : tc.parts)
              if (part.tile == t) {
                p = ec.part(part, std::move(p));
                p.drain();
                copy(p, impl_->ones[c].address, back, 4);
                ++peer_parts;
              }
            share.emplace_back(t, std::move(p));
          }
          peer_graphs[c - 1].node(name, std::move(share));
        }
        TileProgram gather;
        for (std::size_t i = 0; i < peer_parts; ++i) gather.wait(kChipDoneSem);
        dgraph_.node(name + ".gather", {{0u, std::move(gather)}});
        impl_->node_group.push_back(gi);
        handed_over = true;
        ++impl_->handovers[launch];
        continue;
      }
      if (anchor.kind == OpKind::moe) {
        // The experts on every tile (the program kernel's moe_experts()),
        // then the combine. With peers, every chip's tiles take their
        // slices. Once the rows and the router's choices are there, a tile
        // of the device's per peer (tile (c - 1) mod tiles for peer c)
        // pushes them to the peer and signals each of its tiles (at the
        // first moe op, after each of those has signalled that it runs: a
        // launch clears a tile's semaphores). The peer's tiles compute
        // their slices into planes of their own; a node of the peer's sums
        // them as the combine's tiling has it into the device's plane of
        // that peer's sums, each tile then signalling the device's tile 0;
        // a node of the device's (".gather") waits for them all before the
        // combine adds its own planes, then the peers' sums.
        const Impl::Moe& m = impl_->moe.at(grp.ops[0]);
        const Tensor &X = g_.tensor(anchor.in[0]), &W1 = g_.tensor(anchor.in[2]);
        const std::uint64_t route = addr(anchor.in[1]), x = addr(anchor.in[0]);
        const unsigned Q = static_cast<unsigned>(m.split.stacks.size()), T = static_cast<unsigned>(X.rows()), D = X.cols();
        auto words = [&](unsigned c, unsigned t) {
          const std::uint64_t r = c ? m.copies[c - 1].route.address : route, xs = c ? m.copies[c - 1].rows.address : x;
          const std::uint64_t tb = m.tables[c].address;
          const unsigned over = m.by_expert ? 1 : m.chips;
          std::vector<std::uint32_t> w{rt::lo(r), rt::hi(r), rt::lo(xs), rt::hi(xs), rt::lo(tb), rt::hi(tb), D,
                                       W1.shape[2] / m.split.slices, W1.shape[0] * std::max(1u, anchor.ep_chips) | T << 16,
                                       m.split.slices, over * Q,
                                       (m.by_expert ? 0 : c * Q) + m.split.words[t].first, m.split.words[t].second,
                                       anchor.k | (block_scaled(anchor) ? static_cast<std::uint32_t>(fmt_of(W1.dtype)) << 16 : 0),
                                       m.split.chunk | m.split.block << 16};
          // Spread by expert: word 15 C | c << 16, 16-17 the zeros in the tile's stack.
          const std::uint64_t z = m.by_expert || anchor.ep_chips ? impl_->zeros.at({c, m.split.stacks[m.split.words[t].first]}).address : 0;
          if (m.by_expert) w.insert(w.end(), {m.chips | c << 16, rt::lo(z), rt::hi(z)});
          if (anchor.ep_chips)  // this chip's experts, each slot's own choices first (bit 30), the route in blocks (word 18)
            w.insert(w.end(), {anchor.ep_chips | anchor.ep_chip << 16 | 1u << 30, rt::lo(z), rt::hi(z), anchor.capacity});
          return w;
        };
        std::vector<std::pair<unsigned, TileProgram>> experts;
        for (unsigned t = 0; t < tgt.tiles; ++t) {
          TileProgram p;
          await_peers(p, t, m.chips);
          for (unsigned c = 1; c < m.chips; ++c) {
            if (signaller(c) != t) continue;
            copy(p, x, chip_dev(c).global(m.copies[c - 1].rows), 2 * T * D);
            copy(p, route, chip_dev(c).global(m.copies[c - 1].route), 8 * anchor.k * T);
            signal_all(p, 0, c);
          }
          p.moe(words(0, t));
          experts.emplace_back(t, std::move(p));
        }
        dgraph_.node(name + ".experts", std::move(experts));
        impl_->node_group.push_back(gi);
        if (m.chips > 1) {
          const std::vector<Part>& parts = tilings_[gi].parts;
          TileProgram gather;
          for (std::size_t i = 0; i < (m.chips - 1) * parts.size(); ++i) gather.wait(kChipDoneSem);
          dgraph_.node(name + ".gather", {{0u, std::move(gather)}});
          impl_->node_group.push_back(gi);
          const std::uint64_t back = dev_.semaphore(0, kChipDoneSem);
          const std::uint64_t sums = dev_.global(rt::Buffer{m.planes.runs.back().base, 0, dev_.chip()});
          for (unsigned c = 1; c < m.chips; ++c) {
            const std::uint64_t ready = dev_.semaphore(signaller(c), kChipSem);
            std::vector<std::pair<unsigned, TileProgram>> share, sum;
            for (unsigned t = 0; t < tgt.tiles; ++t) {
              TileProgram p;
              if (!handed_over) copy(p, impl_->ones[c].address, ready, 4);
              p.wait(kChipSem).moe(words(c, t));
              share.emplace_back(t, std::move(p));
            }
            // The peer's planes summed as the combine's tiling has it, into
            // the device's plane of this peer's sums; each tile then signals.
            for (const Part& part : parts) {
              TileProgram p;
              e.peer_sum(p, part, m.copies[c - 1].planes, sums + (c - 1) * m.planes.stride);
              copy(p, impl_->ones[c].address, back, 4);
              sum.emplace_back(part.tile, std::move(p));
            }
            peer_graphs[c - 1].node(name + ".experts", std::move(share));
            peer_graphs[c - 1].node(name + ".sum", std::move(sum));
          }
          handed_over = true;
          ++impl_->handovers[launch];
        }
        e.planes_ = &m.planes;
        name += ".combine";
      }
      if (anchor.kind == OpKind::combine) {
        // The rows the chip's slots brought back, into planes (the
        // program kernel's dispatch(), its rows over the tiles: a row's
        // parts in chip order, then zeros), then the planes summed as a
        // moe op's are.
        e.planes_ = &impl_->combine.at(grp.ops[0]);
        const unsigned T = static_cast<unsigned>(g_.tensor(anchor.out).rows()), n = std::min(T, tgt.tiles);
        std::vector<std::pair<unsigned, TileProgram>> planes;
        for (unsigned t = 0; t < n; ++t) {
          TileProgram p;
          p.dispatch(e.dispatch_words(anchor, 2, T * t / n, T * (t + 1) / n));
          planes.emplace_back(t, std::move(p));
        }
        dgraph_.node(name + ".planes", std::move(planes));
        impl_->node_group.push_back(gi);
      }
      std::vector<std::pair<unsigned, TileProgram>> per_tile;
      for (const Part& p : tilings_[gi].parts) per_tile.emplace_back(p.tile, e.part(p));
      dgraph_.node(name, std::move(per_tile));
      impl_->node_group.push_back(gi);
    }
    first_node[launches] = dgraph_.nodes().size();
    for (std::size_t k = 0; k < launches; ++k) {
      rt::Graph part;
      for (std::size_t j = first_node[k]; j < first_node[k + 1]; ++j) part.node(dgraph_.nodes()[j].name, dgraph_.nodes()[j].per_tile);
      impl_->execs.push_back(dev_.instantiate(part));
      impl_->peer_execs.emplace_back();
      for (std::size_t p = 0; p < peers_.size(); ++p)
        if (!peer_launches[k][p].nodes().empty())
          impl_->peer_execs.back().push_back({p, peers_[p].dev->instantiate(peer_launches[k][p])});
    }
  } catch (...) {
    impl_->free_all(dev_, peers_);
    throw;
  }
}

Executable::~Executable() {
  try {
    impl_->free_all(dev_, peers_);
  } catch (...) {  // a device that failed may refuse; nothing to do then
  }
}

std::map<std::string, std::vector<float>> Executable::run(const std::map<std::string, std::vector<float>>& inputs) {
  start(inputs);
  return finish();
}

void Executable::start(const std::map<std::string, std::vector<float>>& inputs) {
  if (impl_->running) throw std::logic_error("Executable::start: the last run was not finished");
  check_inputs(g_, inputs);
  if (impl_->inputs.size) {  // every input in place, written in one transfer
    std::vector<std::uint8_t> staged(impl_->inputs.size, 0);
    for (const auto& [id, off] : impl_->at)
      if (g_.tensor(id).role == Role::input) {
        const std::vector<float>& v = inputs.at(g_.tensor(id).name);
        std::memcpy(staged.data() + off, v.data(), v.size() * 4);
      }
    dev_.write(impl_->inputs, staged.data(), staged.size());
  }
  impl_->before = {dev_.stats()};
  for (const Options::Peer& p : peers_) impl_->before.push_back(p.dev->stats());
  impl_->t0 = dev_.simulated_seconds();
  impl_->exec_seconds.assign(impl_->execs.size(), {});
  launch(0);
  impl_->running = true;
}

void Executable::launch(std::size_t k) {
  // The launch queued on the device, then its share on each peer with work
  // in it (see the hand-over in the constructor).
  impl_->launched = dev_.launch_graph(program_, impl_->execs[k], impl_->watchdog_us, {}, impl_->group);
  impl_->peer_launched.clear();
  for (const Impl::PeerExec& x : impl_->peer_execs[k])
    impl_->peer_launched.push_back(peers_[x.peer].dev->launch_graph(peers_[x.peer].program, x.exec, impl_->watchdog_us));
}

std::map<std::string, std::vector<float>> Executable::finish() {
  wait();
  fetch();
  dev_.wait_io();
  return outputs();
}

void Executable::wait() {
  if (!impl_->running) throw std::logic_error("Executable::wait: no run was started");
  impl_->running = false;
  // A graph of several launches runs them one after the other, each one's
  // node marks read before the next is queued (a launch's marks are where
  // the next one writes its own): a host round trip per launch.
  for (std::size_t k = 0; k < impl_->execs.size(); ++k) {
    if (k) launch(k);
    wait_launch(k);
  }
  waited();
}

void Executable::wait_launch(std::size_t k) {
  try {
    dev_.wait(impl_->launched);
  } catch (const rt::DeviceError&) {
    // The peers' tiles wait for the device's: every hand-over of the
    // launch given to them at once, and they are waited for (whatever
    // they then make of the rows), so that no launch of theirs outlives
    // the run.
    for (const Impl::PeerExec& x : impl_->peer_execs[k])
      for (unsigned t = 0; t < impl_->tiles; ++t)
        peers_[x.peer].dev->write32(peers_[x.peer].dev->semaphore(t, kChipSem), impl_->handovers[k]);
    for (std::size_t j = 0; j < impl_->peer_launched.size(); ++j) {
      try {
        peers_[impl_->peer_execs[k][j].peer].dev->wait(impl_->peer_launched[j]);
      } catch (const rt::DeviceError&) {
      }
    }
    throw;
  }
  for (std::size_t j = 0; j < impl_->peer_launched.size(); ++j)
    peers_[impl_->peer_execs[k][j].peer].dev->wait(impl_->peer_launched[j]);
  if (impl_->execs.size() > 1) impl_->exec_seconds[k] = dev_.node_seconds(impl_->execs[k]);
}

void Executable::waited() {
  last_seconds_ = dev_.simulated_seconds() - impl_->t0;
  last_bound_ = dev_.roofline(impl_->before[0], dev_.stats());
  for (std::size_t k = 0; k < peers_.size(); ++k) {
    roofline::Report r = peers_[k].dev->roofline(impl_->before[k + 1], peers_[k].dev->stats());
    if (r.seconds() > last_bound_.seconds()) last_bound_ = std::move(r);
  }
}

void Executable::fetch() {
  // Every output but the striped ones in one transfer, a striped one a
  // stripe at a time; posted, so that several chips' reads overlap.
  Impl::Fetched& f = impl_->fetched;
  f.all.assign(impl_->outputs.size, 0);
  f.parts.clear();
  for (int t : g_.outputs())
    if (!impl_->at.count(t))
      for (unsigned i = 0; const HbmSlot* s = hbm_.find(t, i); ++i)
        f.parts[t].emplace_back(g_.tensor(t).rows() * s->cols * bytes(g_.tensor(t).dtype));
  if (!f.all.empty()) dev_.read_post(impl_->outputs, f.all.data(), f.all.size());
  for (int t : g_.outputs()) {
    if (impl_->at.count(t)) continue;
    std::vector<std::vector<std::uint8_t>>& parts = f.parts.at(t);
    for (unsigned i = 0; i < parts.size(); ++i) {
      const HbmSlot* s = hbm_.find(t, i);
      dev_.read_post(impl_->arenas[s->stack], parts[i].data(), parts[i].size(), s->offset);
    }
  }
}

std::map<std::string, std::vector<float>> Executable::outputs() {
  const Impl::Fetched& f = impl_->fetched;
  std::map<std::string, std::vector<float>> out;
  for (int t : g_.outputs()) {
    const Tensor& T = g_.tensor(t);
    std::vector<std::uint8_t> striped;  // a striped output's rows put together
    if (!impl_->at.count(t)) {
      const unsigned eb = bytes(T.dtype), rows = static_cast<unsigned>(T.rows());
      striped.resize(T.elements() * eb);
      const std::vector<std::vector<std::uint8_t>>& parts = f.parts.at(t);
      for (unsigned i = 0; i < parts.size(); ++i) {
        const HbmSlot* s = hbm_.find(t, i);
        for (unsigned r = 0; r < rows; ++r)
          std::memcpy(striped.data() + (std::uint64_t{r} * T.cols() + s->col0) * eb, parts[i].data() + std::uint64_t{r} * s->cols * eb,
                      std::uint64_t{s->cols} * eb);
      }
    }
    const std::uint8_t* raw = striped.empty() ? f.all.data() + impl_->at.at(t) : striped.data();
    std::vector<float> v(T.elements());
    const int maker = g_.producer(t);
    const bool route = maker >= 0 && g_.ops()[static_cast<std::size_t>(maker)].kind == OpKind::route;
    for (std::size_t i = 0; i < v.size(); ++i) {
      std::uint32_t code = 0;
      std::memcpy(&code, raw + i * bytes(T.dtype), bytes(T.dtype));
      if (T.dtype == DType::f32 || (route && i >= v.size() / 2)) std::memcpy(&v[i], &code, 4);  // a route's gates
      else if (T.dtype == DType::i32) v[i] = static_cast<float>(code);
      else v[i] = static_cast<float>(num::decode(format(T.dtype), code));
    }
    out[T.name] = std::move(v);
  }
  return out;
}

namespace {

// Cache c's position x of KV head j: its stripe and its first element
// there (CacheStripes).
std::pair<unsigned, std::uint64_t> cache_at(const CacheStripes& c, unsigned j, unsigned x, unsigned dim) {
  const unsigned b = x / c.unit;
  return {(b + j) % c.n, (std::uint64_t{j} * c.cap + std::uint64_t{b / c.n} * c.unit + x % c.unit) * dim};
}

// The graph's cache `name` (its tensor) and how the device holds it;
// `values`, where given, must be its size there.
std::pair<const Tensor*, const CacheStripes*> find_cache(const Graph& g, const std::map<int, CacheStripes>& caches,
                                                         const std::string& name, const std::size_t* values = nullptr) {
  for (const auto& [t, c] : caches) {
    const Tensor& T = g.tensor(t);
    if (T.name != name) continue;
    if (values && *values != std::size_t{c.heads} * T.shape[1] * T.shape[2])
      throw std::invalid_argument(fmt::format("cache '{}': {} values given for {} heads x {} positions x {} on the device", name,
                                              *values, c.heads, T.shape[1], T.shape[2]));
    return {&T, &c};
  }
  throw std::invalid_argument(fmt::format("'{}' is no KV cache of this graph", name));
}

}  // namespace

void Executable::write_cache(const std::string& name, const std::vector<std::uint16_t>& bits) {
  const std::size_t n = bits.size();
  const auto [T, c] = find_cache(g_, impl_->caches, name, &n);
  const unsigned C = T->shape[1], dim = T->shape[2];
  std::vector<std::vector<std::uint16_t>> parts(c->n, std::vector<std::uint16_t>(std::size_t{c->heads} * c->cap * dim));
  for (unsigned j = 0; j < c->heads; ++j)
    for (unsigned x = 0; x < C; x += c->unit) {
      const auto [s, at] = cache_at(*c, j, x, dim);
      const auto from = bits.begin() + static_cast<std::ptrdiff_t>((std::uint64_t{j} * C + x) * dim);
      std::copy(from, from + static_cast<std::ptrdiff_t>(std::min(c->unit, C - x) * dim), parts[s].begin() + static_cast<std::ptrdiff_t>(at));
    }
  for (unsigned s = 0; s < c->n; ++s) dev_.write(c->parts[s], parts[s].data(), 2 * parts[s].size());
}

std::vector<std::uint16_t> Executable::read_cache(const std::string& name) const {
  const auto [T, c] = find_cache(g_, impl_->caches, name);
  const unsigned C = T->shape[1], dim = T->shape[2];
  std::vector<std::vector<std::uint16_t>> parts(c->n, std::vector<std::uint16_t>(std::size_t{c->heads} * c->cap * dim));
  for (unsigned s = 0; s < c->n; ++s) dev_.read(c->parts[s], parts[s].data(), 2 * parts[s].size());
  std::vector<std::uint16_t> bits(std::size_t{c->heads} * C * dim);
  for (unsigned j = 0; j < c->heads; ++j)
    for (unsigned x = 0; x < C; x += c->unit) {
      const auto [s, at] = cache_at(*c, j, x, dim);
      const auto from = parts[s].begin() + static_cast<std::ptrdiff_t>(at);
      std::copy(from, from + static_cast<std::ptrdiff_t>(std::min(c->unit, C - x) * dim),
                bits.begin() + static_cast<std::ptrdiff_t>((std::uint64_t{j} * C + x) * dim));
    }
  return bits;
}

std::vector<double> Executable::node_seconds() const {
  std::vector<double> s(groups_.size(), 0.0);
  std::size_t node = 0;
  for (std::size_t k = 0; k < impl_->execs.size(); ++k) {
    // The last launch's marks are on the device; earlier ones' were read as they ran .
    const bool last = k + 1 == impl_->execs.size();
    const std::vector<double> t = last ? dev_.node_seconds(impl_->execs[k]) : impl_->exec_seconds.at(k);
    for (std::size_t n = 0; n < impl_->execs[k].names.size(); ++n, ++node)
      if (n < t.size()) s[impl_->node_group[node]] += t[n];
  }
  return s;
}

std::size_t Executable::device_ops() const {
  std::size_t n = 0;
  for (const rt::Graph::Node& node : dgraph_.nodes())
    for (const auto& [t, p] : node.per_tile) n += p.ops().size();
  return n;
}

std::vector<float> side_by_side(const std::vector<std::map<std::string, std::vector<float>>>& outputs, const std::string& name,
                                unsigned cols) {
  const std::size_t N = outputs.size();
  if (!N || cols % N) throw std::invalid_argument(fmt::format("side_by_side: {} chips' '{}' of {} columns", N, name, cols));
  const std::size_t each = cols / N, T = outputs[0].at(name).size() / each;
  std::vector<float> out(T * cols);
  for (std::size_t k = 0; k < N; ++k) {
    const std::vector<float>& p = outputs[k].at(name);
    if (p.size() != T * each)
      throw std::invalid_argument(fmt::format("side_by_side: chip {}'s '{}' holds {} values, not {}", k, name, p.size(), T * each));
    for (std::size_t t = 0; t < T; ++t) std::copy_n(p.begin() + std::ptrdiff_t(t * each), each, out.begin() + std::ptrdiff_t(t * cols + k * each));
  }
  return out;
}

std::vector<std::map<std::string, std::vector<float>>> run_together(const std::vector<Executable*>& execs,
                                                                    const std::vector<std::map<std::string, std::vector<float>>>& inputs) {
  if (execs.empty() || inputs.size() != execs.size())
    throw std::invalid_argument(fmt::format("run_together: {} executables, {} chips' inputs", execs.size(), inputs.size()));
  const unsigned chips = execs[0]->device().chips();
  std::vector<bool> seen(chips, false);
  for (const Executable* x : execs) {
    const rt::Device& d = x->device();
    if (d.chips() != chips || seen[d.chip()])
      throw std::invalid_argument(fmt::format("run_together: chip {} of {} given twice, or from another system", d.chip(), d.chips()));
    seen[d.chip()] = true;
  }
  // Each collective's group, whole: an executable on every chip of it.
  for (const Executable* x : execs)
    for (const Op& op : x->graph().ops()) {
      if (!is_collective(op.kind)) continue;
      const unsigned first = x->impl_->first_chip;
      for (unsigned c = first; c < first + op.chips; ++c)
        if (!seen[c])
          throw std::invalid_argument(fmt::format("run_together: chip {}'s {} '{}' spans chips {} to {}, and chip {} has no executable "
                                                  "here (one on every chip of the group)", x->device().chip(), name(op.kind), op.name,
                                                  first, first + op.chips - 1, c));
    }
  // A graph past a launch's nodes runs as several launches on every chip,
  // in step: launch k + 1 is posted on every chip once every chip's
  // launch k is over, so each collective must lie in the same launch on
  // every chip.
  const Executable::Impl& first = *execs[0]->impl_;
  for (const Executable* x : execs)
    if (x->impl_->execs.size() != first.execs.size() || x->impl_->collective_launch != first.collective_launch)
      throw std::invalid_argument(fmt::format(
          "run_together: chip {}'s graph runs as {} launches with its collectives in launches {}, chip {}'s as {} with them in {}: "
          "each collective must be in the same launch on every chip", x->device().chip(), x->impl_->execs.size(),
          fmt::join(x->impl_->collective_launch, ", "), execs[0]->device().chip(), first.execs.size(),
          fmt::join(first.collective_launch, ", ")));
  std::size_t started = 0;
  std::exception_ptr error;
  // The error to report: the first, unless it says only that a chip of the
  // group gave up its collectives (a consequence) and a later one is why.
  auto consequence = [](const std::exception_ptr& e) {
    try {
      std::rethrow_exception(e);
    } catch (const rt::DeviceError& d) {
      return d.gave_up >= 0;
    } catch (...) {
      return false;
    }
  };
  auto keep = [&](std::exception_ptr e) {
    if (!error || (consequence(error) && !consequence(e))) error = std::move(e);
  };
  try {
    for (std::size_t k = 0; k < execs.size(); ++k) {
      rt::Device& d = execs[k]->device();
      d.hold_io();
      ++started;
      execs[k]->start(inputs[k]);
      d.send_io();
    }
    for (Executable* x : execs) x->device().wait_io();
  } catch (...) {
    error = std::current_exception();
  }
  // Every started chip waited for, launch by launch (after an error, the
  // launch under way only), its outputs' reads posted; then collected.
  std::vector<bool> live(started);  // by chip: launch l queued (a start() that threw queued none)
  for (std::size_t k = 0; k < started; ++k) live[k] = execs[k]->impl_->running, execs[k]->impl_->running = false;
  const std::size_t launches = first.execs.size();
  for (std::size_t l = 0; l < launches && (l == 0 || !error); ++l) {  // (launch 0: whatever start() queued)
    if (l) {  // (no error so far: every chip ran launch l - 1)
      std::fill(live.begin(), live.end(), false);
      try {
        for (std::size_t k = 0; k < started; ++k) {
          rt::Device& d = execs[k]->device();
          d.hold_io();
          execs[k]->launch(l);
          d.send_io();
          live[k] = true;
        }
        for (std::size_t k = 0; k < started; ++k) execs[k]->device().wait_io();
      } catch (...) {
        error = std::current_exception();
      }
    }
    // A chip whose part of launch l could not be posted gives up its
    // collectives (as its CP does when a launch fails): the chips waiting
    // for it in theirs fail at once, not at their watchdogs.
    for (std::size_t k = 0; k < execs.size() && error; ++k)
      if ((k >= started || !live[k]) && execs[k]->impl_->group) {
        try {
          execs[k]->device().abort_collectives(execs[k]->impl_->group);
        } catch (...) {
        }
      }
    for (std::size_t k = 0; k < started; ++k) {
      try {
        if (error) execs[k]->device().wait_io();
        if (live[k]) execs[k]->wait_launch(l);
      } catch (...) {
        keep(std::current_exception());
      }
    }
  }
  // After a failure every chip's launches are over: their engines forget
  // the aborts and start their notifications and staging halves afresh,
  // each group's chips alike (a new round each time, so that a notice
  // still travelling is ignored), and the next run finds them in step.
  if (error) {
    const std::uint32_t round = rt::Device::new_round();
    for (Executable* x : execs)
      if (x->impl_->group) {
        try {
          x->device().reset_collectives(round);
        } catch (...) {
        }
      }
  }
  std::vector<bool> ran(execs.size(), false);
  for (std::size_t k = 0; k < started && !error; ++k) {
    try {
      execs[k]->waited();
      execs[k]->fetch();
      ran[k] = true;
    } catch (...) {
      keep(std::current_exception());
    }
  }
  std::vector<std::map<std::string, std::vector<float>>> out(execs.size());
  for (std::size_t k = 0; k < started; ++k) {
    try {
      execs[k]->device().wait_io();
      if (ran[k]) out[k] = execs[k]->outputs();
    } catch (...) {
      keep(std::current_exception());
    }
  }
  if (error) std::rethrow_exception(error);
  return out;
}

}  // namespace tessera::compiler
