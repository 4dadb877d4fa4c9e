// Tile programs from the host: a list of DMA transfers, tensor-core GEMMs,
// vector operations and semaphore steps that the `program` kernel
// (sw/kernels/program) runs on a tile, each operation pushed to its
// engine with its semaphores (wait on one, signal up to two), so the
// hardware orders the pipeline. Device::run() loads nothing: the program
// kernel must already be on the tiles (Device::load_kernel).
//
// Scratchpad addresses are offsets; TKP_PROGRAM_OFFSET and above (the
// last 64 KiB) hold the program itself, and the first 64 KiB the kernel's
// image and stack: buffers go in between.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tessera/runtime.hpp"
#include "tessera_program.h"
#include "tile_regs.h"

namespace tessera::rt {

// The formats' register codes (CMD_FORMAT.INPUT, VCMD_FORMAT, DMA_FLAGS)
// and the VCMD_OP numbers, named and numbered as tile.regs.json has them.
#define TESSERA_RT_VALUE_(NAME, name, value) name = value,
enum class Fmt : std::uint32_t { TILE_FORMAT_VALUES(TESSERA_RT_VALUE_) };
enum class VecOp : std::uint32_t { TILE_VECTOR_OP_VALUES(TESSERA_RT_VALUE_) };
#undef TESSERA_RT_VALUE_

// A command's semaphores: -1 for none.
struct Sem {
  int wait = -1, signal = -1, signal2 = -1;
};

class TileProgram {
 public:
  struct Dma {
    std::uint64_t src = 0, dst = 0;
    bool src_local = false, dst_local = false;
    std::uint32_t len0 = 0, count1 = 1, count2 = 1;  // elements (bytes without a cast)
    std::uint32_t sstride1 = 0, sstride2 = 0, dstride1 = 0, dstride2 = 0;
    bool cast = false, saturate = true, stochastic = false;
    Fmt from = Fmt::fp32, to = Fmt::fp32;
    std::uint32_t group = 0;
    std::uint64_t scales = 0;
    bool scales_local = false, e8m0 = false;
    std::uint32_t seed = 0;
  };
  struct Gemm {
    std::uint32_t m = 0, n = 0, k = 0, a = 0, b = 0, c = 0, lda = 0, ldb = 0, ldc = 0;
    Fmt input = Fmt::bf16;
    bool accumulate = false, trans_a = false, trans_b = false;
    bool block_scaled = false, e8m0 = false;
    std::uint32_t sa = 0, sb = 0, group = 0;
  };
  struct Vec {
    VecOp op = VecOp::add;
    std::uint32_t rows = 1, cols = 0, src0 = 0, src1 = 0, src2 = 0, dst = 0, k = 1, position = 0;
    float eps = 1e-6f;
    Fmt format = Fmt::bf16;
    bool saturate = true, stochastic = false, e8m0 = false;
    std::uint32_t group = 0, aux = 0, seed = 0;
    bool relative_position = false;  // position + the last position() read (TKP_POSITION)
  };

  TileProgram& dma(const Dma& d, Sem s = {});
  // Contiguous copies, and rows of `row_bytes` `stride` apart in global memory.
  TileProgram& load(std::uint64_t global, std::uint32_t local, std::uint32_t bytes, Sem s = {});
  TileProgram& store(std::uint32_t local, std::uint64_t global, std::uint32_t bytes, Sem s = {});
  TileProgram& load_rows(std::uint64_t global, std::uint32_t stride, std::uint32_t local, std::uint32_t rows,
                         std::uint32_t row_bytes, Sem s = {});
  TileProgram& store_rows(std::uint32_t local, std::uint64_t global, std::uint32_t stride, std::uint32_t rows,
                          std::uint32_t row_bytes, Sem s = {});
  TileProgram& gemm(const Gemm& g, Sem s = {});
  TileProgram& vec(const Vec& v, Sem s = {});
  TileProgram& wait(unsigned sem);
  TileProgram& signal(unsigned sem, std::uint32_t tile_regs = 0);  // 0: this tile
  TileProgram& drain();
  // The last DMA at or after operation `from` also signals `sem` when it
  // has finished (the queue runs in order: so has every DMA before it);
  // false where there is none or it signals two already.
  bool signal_last_dma(unsigned sem, std::size_t from = 0);
  // This tile's share of the MoE experts dispatched on the tiles, each
  // expert split in slices of its hidden layer: the 13 to 19 words the
  // program kernel's moe_experts() takes (sw/kernels/program/program.c;
  // MoeSplit below plans them).
  TileProgram& moe(const std::vector<std::uint32_t>& args);
  // Expert parallelism's dispatch or combine from a router's output
  // (TKP_DISPATCH): the 13 words the program kernel's dispatch() takes.
  TileProgram& dispatch(const std::vector<std::uint32_t>& args);
  // A router's group-limited top-k on this tile's core (DeepSeek-V3's
  // noaux_tc): the 8 words the program kernel's route_grouped() takes.
  TileProgram& route(const std::vector<std::uint32_t>& args);
  // Rows of a table picked by indices in global memory (an embedding
  // lookup): the 10 words the program kernel's gather_rows() takes.
  TileProgram& gather(const std::vector<std::uint32_t>& args);
  // Causal attention of some heads over a KV cache at a position the chip
  // holds (TKP_ATTN): the 22 words the program kernel's attention() takes.
  TileProgram& attention(const std::vector<std::uint32_t>& args);
  // The next attention's rows are sequences, each over its own pages of
  // the KV cache (TKP_PAGED): the 8 words the program kernel's paged() takes.
  TileProgram& paged(const std::vector<std::uint32_t>& args);
  // The next attention's K and V caches lie in stripes (TKP_KV_STRIPES):
  // the 18 words the program kernel's striped() takes.
  TileProgram& kv_stripes(const std::vector<std::uint32_t>& args);
  // The core reads a position held at `global` (FP32 holding a whole
  // number, or INT32) for the vector ops after it with relative_position.
  TileProgram& position(std::uint64_t global, bool as_float);
  // A collective on the chip's communication engine (TKP_COLLECTIVE):
  // `ce_op` as Device::collective takes it (TP_CE_*), `src` and `dst` local
  // addresses, `count` elements (all-gather: this chip's share); the core
  // posts it through the fabric's registers (Device::fabric_registers) and
  // sleeps until the engine writes `signal` (semaphore `sem` of this tile,
  // Device::semaphore). Every chip of the system must post the same one.
  // `table`: an all-to-all's (the engine's per-chip table, local address).
  TileProgram& collective(std::uint32_t ce_op, std::uint64_t src, std::uint64_t dst, std::uint64_t count, std::uint64_t fabric_regs,
                          std::uint64_t signal, unsigned sem, std::uint64_t table = 0);
  // An operation as it is, unchecked (for tests of the program kernel).
  TileProgram& raw(const tkp_op& o) {
    ops_.push_back(o);
    return *this;
  }

  const std::vector<tkp_op>& ops() const { return ops_; }

  // In a Graph: the first `n` operations may be pushed before the barrier
  // that opens this program's node has closed (prefetches: the tile loads
  // them while it waits for the others). Each must be a DMA into this
  // tile's scratchpad that waits on no semaphore, and must read only what
  // no node of the graph writes (weights): the caller's promise.
  // Device::instantiate refuses other operations, naming them.
  TileProgram& early(std::size_t n) {
    early_ = n;
    return *this;
  }
  std::size_t early() const { return early_; }

 private:
  // An operation of `kind` whose words are `args` (least to most of them).
  TileProgram& words(std::uint32_t kind, const char* what, const std::vector<std::uint32_t>& args, std::size_t least,
                     std::size_t most);
  std::vector<tkp_op> ops_;
  std::size_t early_ = 0;
};

// A graph of tile programs, as CUDA Graphs have kernels: nodes, each a
// tile program per tile (a phase of a model), that the device runs one
// after another with one launch and no host round trip between them. Node
// k + 1 starts on any tile once node k has finished on every tile of the
// graph: the tiles meet at a barrier (semaphores signalled over the NoC)
// between nodes; a program's early operations (TileProgram::early) load
// while its tile waits there. Device::instantiate() puts it in HBM once;
// Device::launch_graph() runs it; a failing operation comes back as a DeviceError
// naming its node. Programs in a graph may be longer than TKP_MAX_OPS and
// must leave the semaphores TKP_FETCH_SEM, TKP_BARRIER_SEM and the one
// below it alone.
class Graph {
 public:
  struct Node {
    std::string name;
    std::vector<std::pair<unsigned, TileProgram>> per_tile;  // (tile, program); tiles without one just meet
  };
  Graph& node(std::string name, std::vector<std::pair<unsigned, TileProgram>> per_tile);
  const std::vector<Node>& nodes() const { return nodes_; }

 private:
  std::vector<Node> nodes_;
};

// A graph on a device: its programs in HBM, and what names its failures.
struct GraphExec {
  Buffer programs;                        // the program table, and the programs of the tiles near its stack
  std::vector<Buffer> near;               // the other tiles' programs, each in the stack nearest them
  std::uint32_t tiles = 0;                // the tiles it runs on (bit i: tile i)
  unsigned harts = 0;                     // the program table's length
  unsigned timer = 0;                     // the tile whose marks time the nodes
  std::vector<std::string> names;         // by node
  std::vector<std::vector<std::uint32_t>> starts;  // by tile: where each node's operations begin
};

// How moe_experts() (TKP_MOE) spreads experts over the tiles: each
// expert's hidden layer in `slices` slices of hidden / slices columns,
// slice s in HBM stack stacks[s % stacks.size()] (the stacks some tile is
// nearest, ascending), run by a tile near that stack. `slices` is the
// least multiple of the stacks' count, at least `min_slices`, that divides
// the hidden layer and whose buffers for `tokens` tokens fit a scratchpad
// (tkp_moe_scratch), or else streamed in chunks (`chunk` below);
// UsageError, naming the sizes, where none does.
struct MoeSplit {
  std::vector<unsigned> stacks;
  unsigned slices = 0;
  // Where no count's slices fit whole: the fewest slices whose weights
  // stream in chunks (tkp_moe_chunked_scratch), `chunk` columns of the
  // model a chunk (dividing d_model; block-scaled, a multiple of 128),
  // `block` rows a unit (the largest that fits); moe_experts()'s word 14
  // is chunk | block << 16. 0: whole.
  unsigned chunk = 0, block = 0;
  // By tile: moe_experts()'s words 11 (its stack's index in `stacks`) and
  // 12 (R | r << 16: the tiles near that stack, and this one's lane).
  std::vector<std::pair<std::uint32_t, std::uint32_t>> words;
  // With `chips` above 1 the same split on each of that many chips like
  // `dev`, the slices a multiple of every chip's stacks (moe_experts()'s
  // word 10 then counts the stacks of all chips, word 11 chip c's q as c Q + q).
  // `block_scaled`: FP8 weights in 128 x 128 blocks (moe_experts()'s
  // word 13 f), each slice's columns a multiple of 128.
  static MoeSplit plan(const Device& dev, unsigned tiles, unsigned experts, unsigned hidden, unsigned d_model,
                       unsigned tokens, unsigned min_slices = 1, unsigned chips = 1, bool block_scaled = false);
};

}  // namespace tessera::rt
