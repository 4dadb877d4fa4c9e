// The compiler's passes over an ir::Graph, each a function of its own with
// its own tests (compiler_test.cpp):
//   fuse       elementwise chains into their producer: a group of ops that
//              runs as one node, its intermediates kept in the scratchpad;
//   tile       each group's output over the tiles (rows, columns or both,
//              picked by the bytes each tile moves and the MACs it does),
//              and the blocks each tile's part is cut into so that its
//              buffers (multi-buffered) fit in the scratchpad;
//   plan_hbm   the groups' outputs in HBM: an arena per stack, a tensor's
//              place reused once its last reader has run;
//   plan_spm   the scratchpad buffers of a group's part on a tile.
// emit (executable.hpp) turns the result into tile programs.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "ir.hpp"

namespace tessera::compiler {

// Ops that run as one node; the last one's output goes to HBM.
struct Group {
  std::vector<int> ops;  // in graph order; ops[0] the anchor (a matmul, a row op, an argmax or an elementwise op)
  int out = -1;          // the tensor the group writes
  int prologue = -1;     // a matmul's: an RMSNorm run on A's rows as they load (fuse_prologues)
  int kept = -1;         // the prologue's output where other groups read it too: stored by the parts (else nowhere)
};
std::vector<Group> fuse(const Graph& g, bool enabled = true);
// An RMSNorm (alone, or with a cast to the matmul's format after it) whose
// only reader is a matmul (as A), and no output, runs in that matmul's
// node on each tile's rows of A as they load: its group goes, the matmul's
// takes it as its prologue (up to 64 rows: past them each column part
// norming every row costs more than the node). Where other groups read it too, after the
// matmul's, and the matmul's node ends with a router's top k (each part
// whole rows: each row normed once), the parts also store it (the group's
// `kept`): a decode step's experts read the rows the router's node normed.
// Nor where A's rows, in FP32 and cast, with the norm's weight would take
// more than half of `room` (the scratchpad's buffer area; 0: no limit): the
// matmul's rows would then run in several blocks, each streaming all of B
// (Llama-3-70B's LM head at 64 rows: 2767 us fused, 1533 us unfused).
// Run after fuse_routes. Returns the prologues made.
unsigned fuse_prologues(const Graph& g, std::vector<Group>& groups, std::uint64_t room = 0);
// A router's top k (route(), not route_grouped) whose logits only it reads,
// from a matmul with nothing fused after it, runs in that matmul's node on
// each block of whole rows (the top k and the gates' softmax on the vector
// unit): its group goes, the matmul's ends with it. Returns the routes moved.
unsigned fuse_routes(const Graph& g, std::vector<Group>& groups);

// A tile's part of a group's output: rows [r0, r1) x columns [c0, c1) of
// the anchor's rows x cols view, cut into blocks of mb rows x nb columns
// (and, for a matmul, chunks of kb along K).
struct Part {
  unsigned tile = 0;
  unsigned r0 = 0, r1 = 0, c0 = 0, c1 = 0;
};
struct Tiling {
  std::vector<Part> parts;
  unsigned mb = 0, nb = 0, kb = 0;
  // A matmul on a weight whose part's B panel stays in the scratchpad: it
  // loads once (in kb chunks, under the first row block's GEMMs), nb is
  // the widest part's columns, and A's row blocks of mb are double-buffered,
  // each loading while the block before computes and the one before that
  // stores.
  bool resident = false;
  double seconds = 0;  // the grid's estimate: its slowest tile, or its reads or writes through the NoC's cut
};
// What the tiler knows of the chip; executable.hpp's target() derives it
// from the device's roofline limits (the defaults are the T1's).
struct Target {
  unsigned tiles = 8;
  std::uint32_t spm_base = 0x10000, spm_end = 0x1f0000;  // the program kernel's buffer area
  double tile_bytes_per_s = 96e9;                       // a tile's DMA port
  double tile_macs_per_s = 64 * 64 * 1.5e9;             // its tensor core (BF16)
  double cut_read_bytes_per_s = 256e9;                  // the NoC from the stacks to the tiles
  double cut_write_bytes_per_s = 256e9;                 // and back
  double link_bytes_per_s = 0;                          // a chip-to-chip port, each way (0: no links)
  // What spreading one op over the chips costs beyond its transfers: the
  // hand-over to each peer's tiles and the wait for their signals. Fitted
  // to the main job's decode on the T1 ring of four and torus of eight
  // (Wo, QKV and LM head nodes, each on one chip and spread: an op spread
  // took its share plus about 1 us plus 0.2-1.0 us a peer, A pushed).
  double handover_s = 1e-6, handover_peer_s = 0.7e-6;
};
// With a window, only the output's columns [c0, c1) (a matmul's share on
// one chip of several: tile_chips), c0 a multiple of the columns' alignment;
// for an attention, its heads [c0, c1).
struct Columns {
  unsigned c0 = 0, c1 = 0;  // c1 0: all of them
};
Tiling tile(const Graph& g, const Group& grp, const Target& t, Columns window = {});
// A matmul on a weight spread over `chips` chips (tensor parallel by
// columns): its output's columns in `chips` ranges as even as their
// alignment allows (16, or whole 128-column blocks where block-scaled),
// each tiled over a chip's tiles as tile() does; chip c's parts have
// columns of range c only, so each chip holds only its columns of B. Empty
// where the group does not split: no matmul on a weight, an op that needs
// its rows whole (a router's top k, a row op after it), or fewer units of
// columns than chips. With `where_faster`, also empty where the spread is
// not estimated faster than the device alone: the slowest chip's share
// (tile()'s estimate), plus A pushed over a link to each peer and its
// columns written back, plus the hand-over, against the group on one chip.
// An attention alone in its group spreads by heads (tensor parallel by
// heads; not with `where_faster`): whole KV heads a chip with their query
// heads, over up to KV chips (a tiling without parts for each chip beyond
// them), each chip's heads tiled over its tiles as tile() does; each chip
// keeps its KV heads' caches.
std::vector<Tiling> tile_chips(const Graph& g, const Group& grp, const Target& t, unsigned chips, bool where_faster = false);

// A buffer of the scratchpad plan.
struct SpmBuffer {
  std::string name;
  std::uint32_t offset = 0, bytes = 0;
};
struct SpmPlan {
  std::vector<SpmBuffer> buffers;
  std::uint32_t end = 0;  // one past the last byte used
  std::uint32_t at(const std::string& name) const;  // throws std::logic_error for a name it lacks
};
// The buffers a group's part needs on a tile for blocks of mb x nb (x kb):
// multi-buffered where loads overlap compute, from `base` on.
SpmPlan plan_spm(const Graph& g, const Group& grp, const Tiling& t, std::uint32_t base);
// A group's side operands: for each op after the anchor (and a binary
// anchor) the tensor it reads besides the chain's running value (-1: none).
std::vector<int> side_operands(const Graph& g, const Group& grp);

// Stores a group's FP32 output in the matmul format its readers round it
// to, where every reader is a matmul of one format and it is no output:
// half the bytes (BF16) or a quarter (FP8) to write and read, the same
// results (the producer's vector unit rounds as the reader's DMA would).
// Returns the tensors narrowed.
std::vector<int> narrow_storage(Graph& g, const std::vector<Group>& groups);

// Outputs stored in column stripes, each a row-major matrix in a stack of
// its own (plan_hbm), so that the matmul's store and its readers' loads
// spread over several stacks' ports instead of one:
// - a matmul group's output that only attention ops read, as their Q, K
//   and V at column offsets (a QKV projection), in three stripes ([0, k),
//   [k, v), [v, cols)); not a graph output;
// - a matmul group's output of 1 MiB or more that only row reductions
//   (argmax, reduce_sum, reduce_max) read, if any, a graph output or not
//   (a prompt's logits), in `stacks` stripes of whole 16-column units;
// - an intermediate of 256 KiB or more that only matmuls read, as their A
//   (not block-scaled, no prologue), made by an attention, a matmul or a
//   row op (a prompt's heads before Wo, a norm's rows before QKV): an
//   attention's in up to `stacks` stripes of whole parts' heads (its
//   `tilings`), the others' in `stacks` stripes of 16-column units.
// By tensor, the stripes' first columns (the first 0). None for a group
// in `whole` (one spread over chips: its peers write or read its columns
// as one matrix), nor for an output such a group reads.
using Stripes = std::map<int, std::vector<unsigned>>;
Stripes stripe_outputs(const Graph& g, const std::vector<Group>& groups, const std::set<std::size_t>& whole = {}, unsigned stacks = 4,
                       const std::vector<Tiling>& tilings = {});

// Where each tensor the groups write lives in HBM (a striped one: a slot
// per stripe, its columns [col0, col0 + cols)).
struct HbmSlot {
  int tensor = -1;
  unsigned stack = 0;
  std::uint64_t offset = 0, bytes = 0;
  unsigned first = 0, last = 0;  // the groups between which it is live (written by first, last read by last)
  unsigned stripe = 0, col0 = 0, cols = 0;  // cols 0: the whole tensor
};
struct HbmPlan {
  std::vector<HbmSlot> slots;
  std::vector<std::uint64_t> arena;  // bytes per stack
  const HbmSlot* find(int tensor, unsigned stripe = 0) const;
};
// Stripes of a tensor lie in different stacks where there are as many.
HbmPlan plan_hbm(const Graph& g, const std::vector<Group>& groups, unsigned stacks, const Stripes& stripes = {});

}  // namespace tessera::compiler
