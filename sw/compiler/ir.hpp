// The model-graph IR that the compiler lowers to tile programs: tensors
// (inputs, weights, intermediates) and operations on them, in the order
// they run. A front end (the built-in model, an ONNX file, a Hugging Face
// configuration) builds one with Graph's calls; passes.hpp tiles it over
// the tiles, fuses elementwise chains into their producers and plans its
// memory; executable.hpp emits it as an rt::Graph and runs it.
//
// Tensors are row-major. The chip's engines see a tensor as rows x cols:
// cols is the last dimension, rows the product of the others. Activations
// are FP32; a weight is stored in its own format (a matmul's B in BF16,
// FP16, E4M3 or E5M2, norm weights and biases in FP32); cast() makes a
// tensor of another format, which its consumers read back as FP32 on the
// fly (the DMA engine casts).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engines/num/formats.hpp"

namespace tessera::compiler {

enum class DType : std::uint8_t { f32, bf16, f16, e4m3, e5m2, i32 };
const char* name(DType t);
unsigned bytes(DType t);
num::Format format(DType t);  // i32: INT32
// Values as `dt` stores them, little-endian (rounded to nearest even,
// saturating), and those bytes' values back.
std::vector<std::uint8_t> encode(const std::vector<float>& v, DType dt);
std::vector<float> decode(const std::vector<std::uint8_t>& b, DType dt);

enum class OpKind : std::uint8_t {
  matmul,                                                        // a (.., M x K) . b (K x N), a's format cast on the fly
  add, sub, mul, max, min,                                       // binary: b of a's shape, or broadcast (broadcasts_to; mul: per_row too)
  swiglu,                                                        // silu(a) * b, same shape
  relu, relu2, exp, log, tanh, sigmoid, silu, gelu, neg, abs, rsqrt, recip,  // unary
  rmsnorm, layernorm, softmax, rope,                             // rows: over the last dimension
  cast,                                                          // to `to`, and read back as FP32 by consumers
  argmax,                                                        // over the last dimension: INT32 indices
  reshape,                                                       // the same elements in another shape (a copy)
  reduce_sum, reduce_max,                                        // over the last dimension (pairwise sum, as the unit adds)
  move,                                                          // copies of elements from the inputs (Op::moves)
  route,                                                         // a router's top-k experts and their gates (Graph::route)
  moe,                                                           // the chosen experts' SwiGLU FFNs, gated and summed (Graph::moe)
  gather,                                                        // rows of a table by indices the chip holds (Graph::gather_rows)
  attention,                                                     // causal attention over a KV cache (Graph::attention)
  all_reduce, all_gather, all_to_all,                            // across the chips that run the graph (Graph::all_reduce)
  dispatch, dispatch_route, combine,                             // expert parallelism's packing by chip (Graph::dispatch)
};
const char* name(OpKind k);
bool is_unary(OpKind k);
bool is_binary(OpKind k);   // add .. min, swiglu
bool is_rowwise(OpKind k);  // rmsnorm, layernorm, softmax, rope
// A value per row: argmax, reduce_sum, reduce_max (the output drops the last dimension).
inline bool is_reduction(OpKind k) { return k == OpKind::argmax || k == OpKind::reduce_sum || k == OpKind::reduce_max; }
// Ops whose parts are rows of their input, not of their output: reductions, reshape, route.
inline bool tiles_input(OpKind k) { return is_reduction(k) || k == OpKind::reshape || k == OpKind::route; }
// A collective: every chip of a system runs the graph (one executable a
// chip) and the chips' communication engines combine their values.
inline bool is_collective(OpKind k) { return k == OpKind::all_reduce || k == OpKind::all_gather || k == OpKind::all_to_all; }
// Ops that neither start nor join an elementwise chain.
inline bool chains(OpKind k) {
  return !tiles_input(k) && k != OpKind::move && k != OpKind::gather && k != OpKind::attention && !is_collective(k) &&
         k != OpKind::dispatch && k != OpKind::dispatch_route;
}
// Block-scaled FP8 (matmul_scaled): B's blocks are kScaleBlock x
// kScaleBlock, A's groups 1 x kScaleBlock along K.
constexpr unsigned kScaleBlock = 128;
// An elementwise operation: what fusion may put after a producer.
inline bool is_elementwise(OpKind k) { return is_unary(k) || is_binary(k) || k == OpKind::cast; }

// state: kept on the device from run to run (a KV cache, Graph::kv_cache).
enum class Role : std::uint8_t { input, weight, intermediate, state };

struct Op;
// A matmul_scaled(): a matmul whose third input is B's block scales.
bool block_scaled(const Op& op);

struct Tensor {
  std::string name;
  std::vector<unsigned> shape;
  DType dtype = DType::f32;
  Role role = Role::intermediate;
  std::vector<float> values;  // a weight's: each element as its format holds it (none: shape only)
  std::uint64_t elements() const;
  // A weight given by its shape alone (Graph::weight without values): for
  // a timing-only device (rt::Device::timing_only), which needs none.
  bool shape_only() const { return role == Role::weight && values.empty(); }
  unsigned cols() const { return shape.empty() ? 1 : shape.back(); }
  std::uint64_t rows() const { return cols() ? elements() / cols() : 0; }
};

// A copy of `count` runs of `len` elements from op input `src` to the
// output (offsets and strides in elements, row-major): run i goes from
// from + i * from_stride to to + i * to_stride. A transpose, a slice, a
// concatenation or a gather is a list of these, run by the DMA engines.
struct Move {
  unsigned src = 0;
  std::uint64_t from = 0, to = 0;
  unsigned len = 1, count = 1;
  std::uint64_t from_stride = 0, to_stride = 0;
};

struct Op {
  OpKind kind = OpKind::add;
  std::string name;
  std::vector<int> in;  // tensor ids
  int out = -1;
  DType format = DType::bf16;  // matmul: the tensor core's input format; cast: the target
  float eps = 1e-6f;           // rmsnorm, layernorm
  unsigned head_dim = 0;       // rope: pairs rotate within each head of this many columns
  unsigned position = 0;       // rope: the first row's position (row r at position + r / rows per position)
  unsigned rows_per_position = 1;  // rope: rows that share a position
  std::vector<Move> moves;         // move
  unsigned k = 0;                  // route: experts per token
  bool gate_softmax = true;        // route: gates are the softmax of the k chosen logits (else those values)
  unsigned slices = 0;             // moe: the compiler's split of F (the order the chip sums in; 0: not compiled, as 1)
  std::vector<unsigned> slice_chips;  // moe: by slice, the chip that computes it (empty: all one chip's)
  unsigned expert_chips = 0;          // moe: above 1, expert e on chip e mod expert_chips, every slice of it (expert parallelism)
  unsigned moe_chunk = 0;             // moe: w1's and w3's rows summed in chunks of this many (block-scaled: each chunk's sum added; 0: whole)
  unsigned groups = 0, topk_group = 0;  // route: group-limited (route_grouped), 0: plain
  float route_scale = 1;                // route_grouped: the gates' factor
  bool normalize = false;               // route_grouped: the gates divided by their sum first
  bool plane_copy = false;              // move: a plane of a route (route_indices, route_values)
  unsigned heads = 0;                   // attention: query heads
  float scale = 1;                      // attention: the scores' factor
  bool rotary = false;                  // attention: q and k rotated at their positions first
  unsigned k_col = 0, v_col = 0;        // attention: k's and v's first column in their tensors (attention_qkv)
  unsigned page = 0;                    // attention over paged caches: positions per page (0: one sequence, unpaged)
  unsigned chips = 0;                   // all_reduce, all_gather: the chips of the system that run the graph
  bool tree = false;                    // all_reduce: the engines' binomial tree (else their ring)
  bool pull = false;                    // all_reduce, all_gather, all_to_all: each chip pulls its peers' data (else they push it)
  unsigned capacity = 0;                // dispatch, dispatch_route, combine: slots a chip (Graph::dispatch)
  unsigned ep_chip = 0, ep_chips = 0;   // moe (moe_local): ep_chips above 0, this chip's experts of ep_chips' (e mod ep_chips = ep_chip)
};

// Attention over paged KV caches for several sequences in one step (a
// batch, as a serving engine keeps them): row r belongs to sequence
// sequences[r] (an input of the step's T rows, whole numbers below S; a
// sequence's rows together, at consecutive positions), and a sequence's
// position x lives in page table[s][x / page] of the caches (table an
// input S x pages of whole numbers below the caches' capacity / page;
// page divides the capacity). Positions are then per row.
struct Paging {
  int sequences = -1, table = -1;
  unsigned page = 0;
};

// One chip's part of a model laid out over a system of `chips` as
// Megatron lays it out (tensor parallel): every chip builds and runs its
// shard of each step, the collectives (Graph::all_reduce) adding the
// chips' partial sums (hf::llama_step, model::model_graph). With
// `experts`, as DeepSeek lays it out instead: every chip its own rows
// (sequences) through the whole model but the experts, expert e on chip e
// mod chips, the rows dispatched to the experts' chips and back
// (Graph::dispatch) in `capacity` slots a chip (0: the step's rows).
struct Shard {
  unsigned chip = 0, chips = 1;
  bool experts = false;
  unsigned capacity = 0;
};

// Whether b's values repeat over a as numpy broadcasts them: b has a's
// trailing dimensions, or one element (b[i % b.elements()] goes with a[i]).
bool broadcasts_to(const Tensor& b, const Tensor& a);
// Whether b holds one value per row of a (and does not broadcast as
// above): a's shape with the last dimension 1 (a's last above 1, at least
// two dimensions); b[i / a.cols()] goes with a[i].
// Only mul takes such an operand (the vector unit scales rows).
bool per_row(const Tensor& b, const Tensor& a);

// n values uniform in [-scale/2, scale/2) from a seed (a linear
// congruential generator: the same on every host): seeded weights and inputs.
std::vector<float> seeded_values(std::size_t n, std::uint32_t seed, float scale);

// Builds a graph; every call checks its operands and throws
// std::invalid_argument naming the operation and what is wrong.
class Graph {
 public:
  int input(const std::string& name, std::vector<unsigned> shape);
  // A weight: `values` rounded to `dtype` (round to nearest even); a
  // matmul's B in BF16 by default, anything else FP32. Without values, a
  // weight of that shape only (Tensor::shape_only), which only a
  // timing-only device runs: the executable places it and writes nothing.
  // weight_scaled() likewise.
  int weight(const std::string& name, std::vector<unsigned> shape, std::vector<float> values, DType dtype = DType::f32);
  int matmul(int a, int b, DType format = DType::bf16, const std::string& name = "");
  // Batched: b G x K x N (G matrices, a weight or not) and a's rows in G
  // equal blocks of M (a G x M x K, or any shape whose rows G divides):
  // block g of the output's rows is a's block g times b's matrix g, each
  // as matmul() computes it (the attention's heads each through a matrix
  // of their own: DeepSeek-V3's absorbed latent attention). matmul() with
  // such a b; matmul_scaled() takes one too (scales G x K / 128 x
  // ceil(N / 128)). See matmul_dims().
  // Block-scaled FP8, as DeepSeek-V3 trains and serves: b (K x N) holds
  // E4M3 or E5M2 codes and `b_scales` (K / 128 x ceil(N / 128), FP32) a
  // scale per 128 x 128 block (a weight_scaled()'s pair, or a checkpoint's
  // weight and weight_scale_inv); a's rows are cast to b's format on the fly
  // in groups of 128 along K, each group scaled so its largest magnitude
  // maps to the format's largest value (num::block_quantize). The tensor
  // core sums each group's products in FP32, multiplies that by the two
  // scales and adds it to an FP32 sum over the groups in order
  // (num::gemm_block_scaled over all of K). K must be a multiple of 128.
  int matmul_scaled(int a, int b, int b_scales, const std::string& name = "");
  // A K x N weight quantized to `dtype` (E4M3 or E5M2) in 128 x 128 blocks:
  // the codes' tensor `name` and the scales' tensor `name`.scales, for
  // matmul_scaled(); or E x K x N, each of the E matrices so (scales E x
  // K / 128 x ceil(N / 128)), for moe_scaled().
  std::pair<int, int> weight_scaled(const std::string& name, std::vector<unsigned> shape, const std::vector<float>& values,
                                    DType dtype = DType::e4m3);
  int binary(OpKind k, int a, int b, const std::string& name = "");
  int unary(OpKind k, int x, const std::string& name = "");
  int rmsnorm(int x, int weight, float eps = 1e-6f, const std::string& name = "");
  int layernorm(int x, int gamma, int beta, float eps = 1e-5f, const std::string& name = "");
  int softmax(int x, const std::string& name = "");
  // Rotary embedding of x (.., C) in heads of `head_dim` columns; row r at
  // position `position` + r / rows_per_position.
  int rope(int x, unsigned head_dim, unsigned position, unsigned rows_per_position = 1, const std::string& name = "");
  // The same at a position known at run time: row r at positions[0] + r /
  // rows_per_position, positions an input of rows / rows_per_position
  // whole numbers one after another (the chip reads the first).
  int rope_at(int x, unsigned head_dim, int positions, unsigned rows_per_position = 1, const std::string& name = "");
  int cast(int x, DType to, const std::string& name = "");
  int argmax(int x, const std::string& name = "");
  // kind: argmax, reduce_sum or reduce_max.
  int reduce(OpKind kind, int x, const std::string& name = "");
  int reshape(int x, std::vector<unsigned> shape, const std::string& name = "");
  // A tensor of `shape` made of copies from `inputs` (all of one format);
  // every output element must be written by exactly one move.
  int move(std::vector<int> inputs, std::vector<unsigned> shape, std::vector<Move> moves, const std::string& name = "");
  // A KV cache: state kept on the device from run to run (and shared by
  // executables that name it alike, Options::state): `kv_heads` x
  // `capacity` positions x `dim` values, BF16. At most kPool positions,
  // 65535 where an attention reads it unpaged (the attention's word for
  // them; a paged pool's high half goes in TKP_PAGED's).
  static constexpr unsigned kPool = 1u << 24;
  int kv_cache(const std::string& name, unsigned kv_heads, unsigned capacity, unsigned dim);
  // Causal attention over KV caches (of one sequence; of several with
  // `paging`). q is T x (H dh), k T x (KV dh), v
  // T x (KV dv) (FP32: the new rows' queries, keys and values); kcache and
  // vcache are kv_cache()s of KV heads of dh and dv values. The rows are at
  // positions p .. p + T - 1, p = positions[0] (an input of T whole
  // numbers, each one more than the one before, read on the chip; p + T
  // at most the caches' capacity). The new K and V rows are appended to the
  // caches (rounded to BF16); for head h (KV head h / (H / KV)) the output's
  // columns h dv .. are softmax(scale * bf16(q_h) . K^T, row r seeing
  // positions up to p + r) rounded to BF16, times V: FP32 sums on the
  // tensor core, the vector unit's softmax. Output T x (H dv), FP32.
  // `rotary`: q's and k's rows are rotated first (the vector unit's rope,
  // interleaved pairs, each row at its position), in FP32 before rounding.
  // Rows of k and v (and of a fused QKV tensor: attention_qkv) hold at
  // most kRowWord values (the program kernel's 16-bit strides); q's rows,
  // packed, any number (DeepSeek-V3's 128 absorbed heads: 73728).
  static constexpr unsigned kRowWord = 65535;
  int attention(int q, int k, int v, int kcache, int vcache, int positions, unsigned heads, float scale,
                const std::string& name = "", bool rotary = false, const Paging& paging = {});
  // The same with q, k and v as the columns of one tensor (a fused QKV
  // projection): T x (H dh + KV dh + KV dv), the queries, then the keys,
  // then the values.
  int attention_qkv(int qkv, int kcache, int vcache, int positions, unsigned heads, float scale, bool rotary,
                    const std::string& name = "", const Paging& paging = {});
  // A mixture-of-experts router's decision: for each row of `logits`
  // (.., E) the k largest (ties to the lower expert) and their gates, the
  // softmax of those k values (`softmax_gates`) or the values as they are.
  // The output [2, rows, k] holds the experts' indices (plane 0, INT32) and
  // the gates (plane 1, FP32 bits); only moe() reads it, and as an output it
  // reads back as the indices (as floats) and then the gates.
  int route(int logits, unsigned k, bool softmax_gates = true, const std::string& name = "");
  // A route()'s experts [rows, k] (INT32) or its gates [rows, k] (FP32):
  // a copy of that plane (ONNX's TopK reads both).
  int route_indices(int route, const std::string& name = "");
  int route_values(int route, const std::string& name = "");
  // An embedding lookup: row indices[i] of `table` (rows x D) as row i of
  // the output (indices' shape + [D], the table's format). The indices are
  // INT32 (an argmax's, a route's) or FP32 holding whole numbers (an
  // input); they are read on the chip, where one out of range fails the op.
  int gather_rows(int table, int indices, const std::string& name = "");
  // DeepSeek-V3's group-limited routing (noaux_tc), computed by the tile
  // cores: each row of `choice` (.., E) in `groups` groups of E / groups,
  // a group scored by the sum of its two largest values, the `topk_group`
  // best groups kept and every other expert counted as 0.0, then the k
  // largest (ties to the lower index); gates are `weights`' values (same
  // shape) for them, divided by their sum + 1e-20 if `normalize`, times
  // `scale`. The output is route()'s.
  int route_grouped(int choice, int weights, unsigned k, unsigned groups, unsigned topk_group, float scale, bool normalize,
                    const std::string& name = "");
  // The experts a route() chose, run on x (rows x D, stored BF16: a cast's
  // output): for each row and each of its k choices e with gate g,
  // g * (silu(x.w1[e]) * (x.w3[e])).w2[e] in BF16 on the tensor core (FP32
  // accumulation, the product cast to BF16 before w2), summed over the
  // choices. w1 and w3 are [E, D, F], w2 [E, F, D], BF16 weights. Only the
  // chosen experts' weights are read.
  int moe(int x, int route, int w1, int w3, int w2, const std::string& name = "");
  // The same with block-scaled FP8 experts (weight_scaled()'s pairs of
  // [E, D, F] and [E, F, D] codes, E4M3 or E5M2, and their [E, D / 128, F /
  // 128] and [E, F / 128, D / 128] scales): x's rows are cast to the
  // codes' format in groups of 128 columns (num::block_quantize), and the
  // SwiGLU's product so before w2, instead of to BF16; each GEMM sums each
  // group's products in FP32 and scales them (num::gemm_block_scaled over
  // a slice's columns, or its rows for w2). D and F multiples of 128.
  int moe_scaled(int x, int route, int w1, int w1_scales, int w3, int w3_scales, int w2, int w2_scales,
                 const std::string& name = "");
  // The compiler's split of a moe op's hidden layer into `slices` slices
  // (each summed into the output in turn): fixes the order of its sums.
  // Over several chips (`chips`, by slice: which computes it), each chip
  // sums its slices' planes first, then the chips' sums are added in order.
  // `chunk`: the slices stream their weights in chunks of D (Op::moe_chunk).
  // `expert_chips` above 1 (with `chips` empty): the experts spread over
  // that many chips instead, expert e on chip e mod expert_chips with all
  // its slices; each chip sums all its planes, a plane of a choice another
  // chip runs adding zeros, then the chips' sums in order.
  void split_experts(int op, unsigned slices, std::vector<unsigned> chips = {}, unsigned chunk = 0, unsigned expert_chips = 0);
  // Collectives, for a graph that every chip of a system of `chips` runs
  // (SPMD: an executable on each chip, compiler::run_together; the
  // reference: reference_spmd). The chips' communication engines move the
  // data over the links; the host takes no part.
  // all_reduce: every chip gets the element-wise sum of the chips' x (f32,
  // bf16 or e4m3, the sum in that format), each addition in FP32 rounded
  // to the format, in the order the engines' algorithm fixes (ring: the
  // elements in `chips` chunks, chunk c summed from chip c + 1 round to
  // chip c; tree: binomial to chip 0, then broadcast;
  // ip/c2c/comm_reference.hpp).
  int all_reduce(int x, unsigned chips, bool tree = false, bool pull = false, const std::string& name = "");
  // all_gather: every chip gets the chips' x one after another along the
  // first dimension (chip c's rows at c times x's first dimension).
  int all_gather(int x, unsigned chips, bool pull = false, const std::string& name = "");
  // all_to_all: x's first dimension in `chips` equal blocks, block j of
  // chip c's x becoming block c of chip j's result (the engines' direct
  // all-to-all; any format: bytes). Push writes into every chip's result,
  // pull reads every chip's x: the result (push) or x (pull) lies at one
  // address on every chip (Options::symmetric), so a pulled x is no weight.
  int all_to_all(int x, unsigned chips, bool pull = false, const std::string& name = "");
  // Expert parallelism (DeepSeek's data-parallel attention beside
  // expert-parallel experts), for a graph every chip of a system of
  // `chips` runs, expert e on chip e mod chips: each chip sends a row of
  // its x to every chip that one of the row's choices (a route()'s) is on,
  // in the next of that chip's `capacity` slots (0: x's rows; at least
  // those never drop one; rows in order, a row past the last slot dropped
  // there: its choices on that chip add nothing, as GShard drops tokens).
  // chips * capacity at most 256 (the experts' kernel's rows); the chips'
  // graphs may have rows of their own counts, not capacities.
  // dispatch: [chips * capacity, D] in x's format, slot i of block j the
  // row of x that took it, zeros where none did (an all_to_all sends
  // block j to chip j).
  int dispatch(int x, int route, unsigned chips, unsigned capacity = 0, const std::string& name = "");
  // dispatch_route: the slots' choices, [chips, 2, capacity, k] (block j:
  // its slots' expert ids, then their gates, as the route has them; an
  // empty slot's every choice expert (j + 1) mod chips, another chip's,
  // with gate 0): what moe_local reads once an all_to_all has brought it.
  int dispatch_route(int route, unsigned chips, unsigned capacity = 0, const std::string& name = "");
  // moe_local: the experts of this chip (`chip`) on the slots that the
  // chips dispatched to it: x the all_to_all'd dispatch() [chips *
  // capacity, D] (bf16), route the all_to_all'd dispatch_route(), w1, w3,
  // w2 this chip's experts (e / chips for e mod chips = chip: [E / chips,
  // D, F] and [E / chips, F, D]). A slot's output is the sum over all its
  // choices as moe() sums them, this chip's first (in order), the others'
  // zeros after them.
  int moe_local(int x, int route, int w1, int w3, int w2, unsigned chip, const std::string& name = "");
  // The same with block-scaled FP8 experts (moe_scaled()'s codes and scales, this chip's).
  int moe_local_scaled(int x, int route, int w1, int w1_scales, int w3, int w3_scales, int w2, int w2_scales, unsigned chip,
                       const std::string& name = "");
  // combine: row t of the chip's x back, from y (the all_to_all'd
  // moe_local() outputs, [chips * capacity, D] f32): the FP32 sum, in chip
  // order, of the rows of y in the slots that row t took, then zeros up to
  // min(k, chips) terms [T, D]: what moe() with split_experts(..,
  // expert_chips = chips) gives on the chip's rows, where no row was
  // dropped (each chip's choices first, every zero last: the same sums
  // but for the sign of an exact zero).
  int combine(int y, int route, unsigned chips, unsigned capacity = 0, const std::string& name = "");
  // A MoE layer expert parallel on this chip (`chip` of `chips`): x's rows
  // (bf16) and their route dispatched (dispatch and dispatch_route, an
  // all_to_all each: "<name>.dispatch", ".sent", ".dispatch_route",
  // ".sent_route"), this chip's experts w (moe_local, or moe_local_scaled
  // with their `scales`: "<name>") over the slots, their sums brought back
  // ("<name>.sent_back") and combined ("<name>_back", the [T, D] f32
  // returned); `pull`: the all-to-alls pulled.
  int moe_dispatched(int x, int route, std::array<int, 3> w, std::vector<int> scales, unsigned chips, unsigned chip,
                     unsigned capacity, const std::string& name, bool pull = false);
  // Marks a tensor as an output of the graph (read back after a run).
  void output(int t);

  const std::vector<Tensor>& tensors() const { return tensors_; }
  const std::vector<Op>& ops() const { return ops_; }
  const std::vector<int>& outputs() const { return outputs_; }
  const Tensor& tensor(int id) const { return tensors_.at(static_cast<std::size_t>(id)); }
  // The op that makes tensor t (-1: an input or a weight).
  int producer(int t) const;
  // The ops that read tensor t.
  std::vector<int> consumers(int t) const;
  bool is_output(int t) const;
  // Stores an intermediate in a narrower format than FP32: for the
  // compiler's storage pass (narrow_storage), where every reader rounds it
  // to that format anyway, so no result changes.
  void store_as(int t, DType dtype);

 private:
  int add_tensor(Tensor t);
  int add_op(Op op, std::vector<unsigned> out_shape, DType out_dtype);
  int route_plane(int route, unsigned plane, const std::string& name);
  int moe_op(int x, int route, std::array<int, 3> w, std::vector<int> scales, const std::string& name, int ep_chip = -1);
  // A dispatch op's route (a route()'s output) and capacity, checked.
  unsigned dispatch_capacity(const char* what, int route, unsigned chips, unsigned capacity, const std::string& name);
  Op attention_op(int kcache, int vcache, int positions, unsigned heads, float scale, std::uint64_t T, const Paging& paging,
                  const std::string& n) const;
  const Tensor& operand(int t, const char* what) const;
  std::vector<Tensor> tensors_;
  std::vector<Op> ops_;
  std::vector<int> outputs_;
};

// A matmul's B as `batches` matrices of K x N (Graph::matmul): 1 for a
// 2-D b; a's rows in `batches` blocks of M, block g times matrix g.
struct MatmulDims {
  unsigned batches = 1, K = 0, N = 0;
  std::uint64_t M = 0;
  bool batched() const { return batches > 1; }
};
MatmulDims matmul_dims(const Graph& g, const Op& op);

}  // namespace tessera::compiler
