// A small Llama-style MoE decoder on the virtual T1, and its host FP32
// reference. Weights are seeded random BF16 made by the program (nothing
// is downloaded). The device runs it with tile programs (sw/kernels/program)
// through the host runtime:
//   per step (a block of T new tokens at positions pos .. pos + T - 1):
//     embed       DMA rows of the BF16 table into x (cast to FP32)
//     per layer:
//       attention  one head per tile (heads round-robin over tiles):
//                  RMSNorm, Q K V projections, RoPE, per sequence the new
//                  K/V rows appended to its KV cache's pages in HBM, causal
//                  attention over the cache, the head's output columns
//       Wo         output columns split over tiles, added to x
//       router     RMSNorm, router logits, top-2, softmax of the two
//       experts    each expert on a tile (round-robin) takes its tokens:
//                  SwiGLU FFN in hidden chunks, scaled by the gate,
//                  written to its slot's row of Y0 / Y1
//       combine    x += Y0 + Y1
//     head         final RMSNorm, the vocabulary split over tiles
//     argmax       of each sequence's last logits, a sequence per tile
// With Config::graph a step is one rt::Graph: the phases run back to back
// on the tiles with barriers between them and the experts dispatched on
// the tiles (each expert in slices of its hidden layer, over all tiles);
// the host reads the logits, the tokens and the routing at the end.
// Otherwise the host waits between phases (a launch per phase) and reads
// back the router's choices to dispatch the experts. A step may hold
// several sequences (a batch), each with its own paged KV cache.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tessera/program.hpp"
#include "tessera/runtime.hpp"

namespace tessera::model {

struct Config {
  unsigned layers = 4, d_model = 512, heads = 8, experts = 8, top_k = 2, hidden = 512, vocab = 4096, context = 256;
  unsigned hidden_chunk = 256;  // expert hidden columns per pass through the scratchpad
  std::uint64_t seed = 1;
  // FP8: the projection, expert and LM-head weights are E4M3 with an FP32
  // scale per 128 x 128 block, and the activations going into those GEMMs
  // are cast to E4M3 with a scale per 1 x 128 group (on the fly).
  bool fp8 = false;
  // The tiles find their experts' tokens from the router's output (BF16
  // only) instead of the host reading the choices and dispatching.
  bool device_dispatch = false;
  // A step is one graph (rt::Graph): its phases run on the device one after
  // another with a barrier between them and one launch, with no host round
  // trip (needs device_dispatch, one chip).
  bool graph = false;
  // Sequences the device holds at once (each its own paged KV cache).
  unsigned max_sequences = 1;
  unsigned head_dim() const { return d_model / heads; }
  std::string check() const;  // empty when the device runner can take it
};

// A weight matrix (rows x cols, row-major): BF16 codes, or E4M3 codes with
// an FP32 scale per 128 x 128 block; `values` holds what each element is
// worth (the reference multiplies by these).
struct Matrix {
  unsigned rows = 0, cols = 0;
  bool fp8 = false;
  std::vector<std::uint16_t> bf16;
  std::vector<std::uint8_t> codes;
  std::vector<float> scales;  // (rows / 128) x ceil(cols / 128)
  std::vector<float> values;
  unsigned block_cols() const { return (cols + 127) / 128; }
};

// Host copies of the weights (norm weights FP32).
struct Weights {
  Matrix embedding;  // vocab x d, BF16
  struct Layer {
    std::vector<float> attn_norm, ffn_norm;  // d
    Matrix wq, wk, wv, wo;                   // d x d
    Matrix router;                           // d x experts, BF16
    std::vector<Matrix> w1, w3, w2;          // per expert: d x hidden, d x hidden, hidden x d
  };
  std::vector<Layer> layers;
  std::vector<float> final_norm;  // d
  Matrix lm_head;                 // d x vocab
  static Weights random(const Config& c);
  std::uint64_t count() const;  // how many weights (every matrix and norm)
};

// The host FP32 reference: the same model in float, weights as their BF16
// values, activations unrounded. Routing follows the device's choices when
// given (so logits compare step by step).
class Reference {
 public:
  Reference(const Config& c, const Weights& w);
  // Logits (T x vocab) for `tokens` at positions pos.. ; `routes` (T x top_k
  // expert ids per layer, or empty) forces the experts.
  std::vector<float> step(const std::vector<std::uint32_t>& tokens, unsigned pos,
                          const std::vector<std::vector<std::uint32_t>>& routes, unsigned* route_disagreements);

 private:
  const Config& c_;
  const Weights& w_;
  std::vector<std::vector<float>> kcache_, vcache_;  // per layer: heads x context x head_dim
};

// A phase's time against its roofline (platform/roofline.hpp), summed over
// its runs: what it took, the sum of each run's bound, each resource's
// seconds, and the bound seconds each resource was the binding one for.
struct PhaseBound {
  double achieved = 0, bound = 0;
  std::map<std::string, double> by_resource, binding;
  void add(const roofline::Report& r, double took);
  std::string binding_resource() const;  // the one that bound the most time
};

// Where the device's time went, in simulated seconds.
struct Profile {
  double embed = 0, attention = 0, wo = 0, router = 0, experts = 0, combine = 0, head = 0, argmax = 0;
  double comm = 0;      // several chips: dispatching tokens to the experts' chips and their results back
  double host_io = 0;   // the mask upload, the router's choices and the logits read back
  double kernels = 0;   // the longest tile's kernel time per phase (per graph, in graph mode), summed
  double upload = 0;    // graph mode: the steps' graphs written to the device (included in host_io)
  double total() const { return embed + attention + wo + router + experts + comm + combine + head + argmax + host_io; }
  std::map<std::string, PhaseBound> bounds;  // by phase: embed, attention, wo, router, experts, combine, head, argmax, comm
};

// A model on the device, as the demo, serving and speculative decoding
// drive it (DeviceModel's hand-written programs, or CompiledModel's graphs).
class Model {
 public:
  // A sequence's tokens in a step, at positions pos.. of its own KV cache
  // (sequence ids below Config::max_sequences; position 0 starts a
  // sequence afresh).
  struct Seq {
    unsigned seq = 0;
    std::vector<std::uint32_t> tokens;
    unsigned pos = 0;
  };
  virtual ~Model() = default;
  // Runs T tokens of sequence 0 at positions pos.. (a batch of one);
  // returns the logits (T x vocab) and the device's argmax of the last row;
  // `routes` gets the experts chosen (2 per token, per layer).
  std::vector<float> step(const std::vector<std::uint32_t>& tokens, unsigned pos, std::uint32_t* next,
                          std::vector<std::vector<std::uint32_t>>* routes);
  // A batch: several sequences' tokens in one step (max_step_tokens() at
  // most in all). Returns the logits of every token, in the batch's order; `next`
  // gets each sequence's greedy token, `routes` the experts chosen per
  // layer (2 per token, in the batch's order).
  virtual std::vector<float> step(const std::vector<Seq>& batch, std::vector<std::uint32_t>* next,
                                  std::vector<std::vector<std::uint32_t>>* routes) = 0;
  // Gives a finished sequence's pages back.
  virtual void release(unsigned seq) = 0;
  virtual const Profile& profile() const = 0;
  virtual const Config& config() const = 0;
  // The most tokens a step takes (all its sequences' together).
  virtual unsigned max_step_tokens() const = 0;
};

// The host's page tables of a paged KV cache, as a serving scheduler keeps
// them: each sequence's pages of kPage positions, in position order, from
// a pool of max_sequences x ceil(context / kPage).
class KvPages {
 public:
  static constexpr unsigned kPage = 64;
  static constexpr unsigned kMaxTokens = 64;  // a step's tokens (the hand-written programs')
  explicit KvPages(const Config& c, unsigned max_tokens = kMaxTokens);
  // A batch's rows: `rows` tokens of sequence `seq` from row `row0`, at `pos`.
  struct Part {
    unsigned seq, row0, rows, pos;
  };
  // Checks a batch against the configuration (sequence ids, each once,
  // tokens in the vocabulary, positions inside the context and no gap
  // after what a sequence holds), gives each sequence the pages its
  // positions need (position 0 releases its old ones first) and returns
  // its parts and tokens. Throws rt::UsageError naming what is wrong.
  std::vector<Part> admit(const std::vector<Model::Seq>& batch, std::vector<std::uint32_t>& tokens);
  // admit()'s checks alone: throws what admit() would, changes nothing.
  std::vector<Part> check(const std::vector<Model::Seq>& batch, std::vector<std::uint32_t>& tokens) const;
  void release(unsigned seq);
  const std::vector<unsigned>& pages(unsigned seq) const { return pages_.at(seq); }
  unsigned max_tokens() const { return max_tokens_; }
  unsigned pool() const { return pool_; }
  unsigned per_sequence() const { return per_sequence_; }  // pages a sequence's context needs

 private:
  const Config& c_;
  unsigned max_tokens_, pool_ = 0, per_sequence_ = 0;
  std::vector<std::vector<unsigned>> pages_;  // by sequence
  std::vector<unsigned> held_;                // by sequence: the positions its last step left written
  std::vector<unsigned> free_;
};

class DeviceModel : public Model {
 public:
  DeviceModel(rt::Device& dev, const Config& c, const Weights& w);
  // Expert parallel over a system of chips: chip 0 runs the model, expert e
  // lives on chip e % chips; each layer's routed rows go to the experts'
  // chips and their results come back through the communication engines
  // (all-to-all, push).
  DeviceModel(const std::vector<rt::Device*>& chips, const Config& c, const Weights& w);
  using Model::step;
  std::vector<float> step(const std::vector<Seq>& batch, std::vector<std::uint32_t>* next,
                          std::vector<std::vector<std::uint32_t>>* routes) override;
  void release(unsigned seq) override { pages_.release(seq); }
  const Profile& profile() const override { return profile_; }
  const Config& config() const override { return c_; }
  unsigned max_step_tokens() const override { return pages_.max_tokens(); }

 private:
  // A matrix on the device: its codes and (FP8) its block scales.
  struct DevMatrix {
    rt::Buffer data, scales;
    unsigned rows = 0, cols = 0;
    bool fp8 = false;
  };
  struct LayerBuffers {
    rt::Buffer attn_norm, ffn_norm;
    std::vector<rt::Buffer> kv;  // by head, in the stack nearest its tile: its KV cache's pool of pages
    rt::Buffer expert_table;  // device dispatch: (w1, w3, w2) addresses of each expert's slices
    std::vector<DevMatrix> wq, wk, wv;  // by head: its columns, near its tile
    std::vector<DevMatrix> wo;          // by tile: its output columns, near it
    DevMatrix router;
    std::vector<DevMatrix> w1, w3, w2;
  };
  DevMatrix upload(const Matrix& m, rt::Device& d, int stack = -1);  // stack -1: the next, round robin
  DevMatrix upload(const Matrix& m) { return upload(m, dev_); }
  // One expert over n rows: row i from rows[i] (BF16), its result (FP32,
  // scaled by the gate at gates[i] when given) to outs[i].
  void expert_program(rt::TileProgram& g, const LayerBuffers& L, unsigned e, const std::vector<std::uint64_t>& rows,
                      const std::vector<std::uint64_t>& gates, const std::vector<std::uint64_t>& outs);
  // The experts of a layer on several chips; `chosen` as the router wrote it.
  void experts_across_chips(const LayerBuffers& L, const std::vector<std::uint32_t>& chosen, unsigned T);
  // Loads rows [r0, r0 + rows) x columns [c0, c0 + cols) of a matrix into
  // the scratchpad (and its scales, FP8); the GEMM that uses it as B.
  struct Slice {
    std::uint32_t data = 0, scales = 0;
  };
  Slice load_b(rt::TileProgram& g, const DevMatrix& m, unsigned r0, unsigned rows, unsigned c0, unsigned cols,
               std::uint32_t data, std::uint32_t scales);
  // C (m x n) = A . B with A's codes (BF16, or E4M3 with scales `sa`).
  void matmul(rt::TileProgram& g, unsigned m, unsigned n, unsigned k, std::uint32_t a, std::uint32_t sa,
              const Slice& b, std::uint32_t c, bool accumulate = false);
  // Turns FP32 rows into the GEMMs' A operand (BF16, or E4M3 with 1 x 128 scales).
  void to_a(rt::TileProgram& g, unsigned rows, unsigned cols, std::uint32_t src, std::uint32_t dst, std::uint32_t sa);
  // Runs a phase (one launch, waited for), or in graph mode adds it to the
  // step's graph.
  double run_phase(std::vector<std::pair<std::uint32_t, rt::TileProgram>>& programs, double& bucket, const char* name);
  // Adds the longest of `tiles`' kernel times since `before` (stats) to the
  // profile, and the phase's time against its roofline.
  void count_kernels(const nlohmann::ordered_json& before, double took, const std::vector<unsigned>& tiles,
                     const char* phase);

  rt::Device& dev_;
  std::vector<rt::Device*> chips_;  // chip 0 is dev_
  std::vector<rt::Kernel> chip_programs_;  // the program kernel on each chip
  std::string prefix_;              // of dev_'s statistics ("device." or "chip0.")
  rt::Buffer send_, gates_, recv_, out_, ret_;  // several chips: rows out and back (same address on every chip)
  std::vector<rt::Buffer> tables_;  // several chips: all-to-all tables, per chip
  const Config& c_;
  rt::Kernel program_;
  unsigned tiles_;
  unsigned next_stack_ = 0;
  // Expert dispatch on the device: the tiles pick their experts' tokens
  // from the router's output; each expert in moe_slices_ slices of its
  // hidden layer, slice s in stack moe_stacks_[s % size], run by a tile
  // near that stack; their partial sums in partials_ (by slice: slot, token).
  void plan_experts();
  rt::TileProgram experts_on_tile(const LayerBuffers& L, unsigned t, unsigned T) const;
  bool device_dispatch_ = false;
  unsigned moe_slices_ = 0;
  std::vector<unsigned> moe_stacks_;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> moe_words_;  // by tile: its stack's index, lanes | lane << 16
  std::vector<rt::Buffer> partials_;
  bool graph_mode_ = false;       // Config::graph, where it applies
  rt::Graph* graph_ = nullptr;    // the step's graph being built (graph mode)
  std::vector<double*> graph_buckets_;  // by node: where its time goes
  std::string node_prefix_;       // "layer2." while a layer's phases are built
  DevMatrix embedding_, lm_head_;
  std::vector<DevMatrix> lm_panels_;  // the LM head by tile (its columns j * vocab / tiles ..), when it splits so
  rt::Buffer final_norm_, x_, hb_, attn_, y0_, y1_, logits_, topk_, mask_, qscale_, next_;
  std::vector<LayerBuffers> layers_;
  KvPages pages_;  // each sequence's KV cache pages
  Profile profile_;
};

}  // namespace tessera::model
