// Llama-family models from a Hugging Face config.json, as graphs of the
// compiler's IR (sw/compiler): the prefill of a prompt, computing every
// position's logits, with the model's own weights (safetensors.hpp) or
// seeded ones.
//
// Per layer, as transformers' LlamaForCausalLM computes it: RMSNorm,
// Q/K/V projections, rotary embedding (rotate_half, theta and llama3
// rope_scaling from the config: the cos/sin tables are made on the host for
// the prompt's positions), grouped-query attention (each head's scores
// against its KV head, causal mask, softmax), the output projection and
// residual, RMSNorm, SwiGLU MLP and residual; the final norm and the LM
// head (tied embeddings where the config says so). Matmuls in BF16 on the
// tensor core. Mixtral (model_type "mixtral"): the MLP is a sparse MoE
// block, as MixtralSparseMoeBlock computes it: a router (BF16 logits), the
// top num_experts_per_tok experts with the softmax of their logits as
// gates (softmax, top-k and renormalising, in one), each expert a SwiGLU
// FFN (w1 gate, w3 up, w2 down); only the chosen experts run (the
// compiler's route and moe ops). Qwen2 and Qwen2-MoE: biases on Q, K and
// V; Qwen2MoeSparseMoeBlock's top k of the softmax over all experts (as
// they are, or renormalised: norm_topk_prob), plus a shared expert gated
// by sigmoid(x.w), on the layers decoder_sparse_step and mlp_only_layers
// make sparse. DeepSeek-V3: multi-head latent attention (MLA), absorbed
// over its low-rank compressed KV cache (kv_b_proj's key rows folded into
// the queries, its value rows applied after the attention, each a batched
// matmul, a matrix a head; every head attending to one cached [latent ;
// rotary key], the latent its value), yarn rope, the first
// layers dense, then noaux_tc routing (group-limited, on the tile cores)
// over its routed experts plus shared experts.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ir.hpp"
#include "safetensors.hpp"

namespace tessera::hf {

struct LlamaConfig {
  std::string model_type = "llama";
  unsigned hidden = 0, layers = 0, heads = 0, kv_heads = 0, intermediate = 0, vocab = 0, head_dim = 0;
  double rope_theta = 10000, rms_eps = 1e-6;
  bool tie_embeddings = false;
  // rope_scaling of type llama3 (Llama 3.1): factor 1 means none.
  double rope_factor = 1, low_freq_factor = 1, high_freq_factor = 4;
  unsigned original_context = 8192;
  // The attention's sliding window (0: none); Q, K and V projections with
  // biases (Qwen2).
  unsigned sliding_window = 0;
  bool qkv_bias = false;
  // Mixture of experts (Mixtral, Qwen2-MoE): experts per sparse layer and
  // chosen per token (0: dense MLPs only), each expert's hidden size, the
  // shared expert's (0: none; Qwen2-MoE's, gated by a sigmoid), whether
  // the k gates are renormalised to sum to 1 (else they are the softmax
  // over all experts), and which layers are sparse: every
  // decoder_sparse_step-th, less mlp_only_layers.
  unsigned experts = 0, experts_per_token = 0, expert_intermediate = 0, shared_intermediate = 0;
  bool norm_topk_prob = true;
  unsigned decoder_sparse_step = 1;
  std::vector<unsigned> mlp_only_layers;
  // DeepSeek-V3: the first first_dense layers dense, then every
  // moe_layer_freq-th sparse; routing noaux_tc (route_grouped: sigmoid
  // scores, the correction bias for choosing, n_group groups of which
  // topk_group are kept, gates normalised and times routed_scale);
  // n_shared shared experts of expert_intermediate each, ungated.
  unsigned first_dense = 0, moe_layer_freq = 1, groups = 0, topk_group = 0;
  double routed_scale = 1;
  // Multi-head latent attention (DeepSeek-V3): Q through a rank-q_lora
  // bottleneck with its own RMSNorm (0: a plain q_proj), K and V from a
  // rank-kv_lora latent (its RMSNorm, then kv_b_proj) plus one rotary key
  // of qk_rope columns shared by the heads, rotated in interleaved pairs.
  bool mla = false;
  unsigned q_lora = 0, kv_lora = 0, qk_nope = 0, qk_rope = 0, v_head = 0;
  // yarn rope_scaling (DeepSeek-V3): factor in rope_factor, the correction
  // range's rotations, and the mscales.
  bool yarn = false;
  double beta_fast = 32, beta_slow = 1, mscale = 1, mscale_all_dim = 0;
  unsigned rope_dim() const { return mla ? qk_rope : head_dim; }
  // The attention's softmax scale (yarn's mscale squared in it) and the
  // factor on the rotary cos and sin (yarn's).
  double attention_scale() const;
  double rope_mscale() const;
  bool sparse(unsigned layer) const;
  // The weights' elements of the embedding, the first `layers` layers (0:
  // all), the final norm and the LM head: what a functional run holds on
  // the host.
  std::uint64_t parameters(unsigned layers = 0) const;
  // Of those, the routed experts' (their three Linears; what expert
  // parallelism spreads over the chips).
  std::uint64_t routed_parameters(unsigned layers = 0) const;
  // A sparse layer's weights by Hugging Face name: the router, and expert
  // e's `which` ("gate", "up" or "down") projection.
  std::string router(unsigned layer) const;
  std::string expert(unsigned layer, unsigned e, const char* which) const;
  // Reads a config.json; throws FormatError naming the file and the key.
  static LlamaConfig parse(const nlohmann::json& j, const std::string& file);
  static LlamaConfig load(const std::string& file);
  // The inverse frequencies of the rotary embedding (head_dim / 2 of them).
  std::vector<double> inv_freq() const;
};

// A weight by its Hugging Face name and shape ([out, in] for a Linear's).
using WeightSource = std::function<std::vector<float>(const std::string& name, const std::vector<std::uint64_t>& shape)>;
// Weights from a model's safetensors (a file, a folder or an index); a
// missing tensor or a shape other than the config's is refused by name.
// An F8_E4M3 weight is multiplied by its scales: DeepSeek-V3's
// <name>_scale_inv (a factor per 128 x 128 block), or a <name>_scale (one
// factor, or one per output row); without either, its codes' values.
WeightSource weights_from(const SafeTensors& st);
// That multiplication, in place (checked: the scales' shape names the tensor).
void scale_fp8(const SafeTensors& st, const TensorInfo& t, std::vector<float>& v);
// A weight's <name>_scale_inv, checked to hold one factor per 128 x 128 block.
std::vector<float> block_scales(const SafeTensors& st, const TensorInfo& t);
// Seeded weights: the same name and seed give the same values.
WeightSource seeded_weights(std::uint32_t seed);
// Weights of their shapes alone, no values (compiler::Tensor::shape_only):
// the graph a timing-only device runs at full size, without the host
// holding or computing any weight (the rotary tables neither).
WeightSource shape_only();
// A Linear weight [out, in] stored as DeepSeek-V3 stores it, E4M3 codes
// (their values) with a factor per 128 x 128 block (<name>_scale_inv):
// fills both and says true; false for any other weight.
using Fp8Source = std::function<bool(const std::string& name, const std::vector<std::uint64_t>& shape, std::vector<float>& codes,
                                     std::vector<float>& scales)>;
Fp8Source fp8_blocks_from(const SafeTensors& st);

// The prefill of a prompt of `tokens`' length (positions 0..T-1; the
// tokens themselves are the graph's input "tokens": llama_inputs) over the
// first `layers` layers (0: all): the graph's output "logits" is T x vocab, and a MoE
// model's "layer<l>.route" each layer's choices (route(): T x k experts,
// then their gates).
// With `fp8`, the Linears whose weights it gives and whose inputs are
// whole 128s (MLA's rotary ones where their reordered rows stay inside
// their 128-row blocks; kv_b_proj's heads where the latent and a head's
// key and value rows are whole 128s) run block-scaled on the tensor core (compiler::Graph::matmul_scaled: the codes and scales as
// stored, the activations cast in 1 x 128 groups), as DeepSeek-V3 serves
// them; so do a sparse layer's experts where it gives every expert's three
// and the hidden and expert sizes are whole 128s (Graph::moe_scaled).
compiler::Graph llama_prefill(const LlamaConfig& c, const WeightSource& w, const std::vector<std::uint32_t>& tokens,
                              unsigned layers = 0, const Fp8Source& fp8 = {});
// A step of `rows` new tokens (the graph's input "tokens") at positions
// given at run time (its input "positions": llama_inputs) over KV caches of
// `context` positions per layer ("layer<l>.k_cache" and "layer<l>.v_cache", state the
// executables of one sequence share: compiler::Options::state): the
// prefill is a step of the prompt's length at 0, each decode step one of a
// row. Outputs as llama_prefill's, for the step's rows. With `sequences`
// above 1 the caches hold that many sequences, `context` positions each
// in pages (kv_pages, compiler::Paging), and the step's rows may be any
// sequences' tokens at their own positions (llama_batch_inputs): a prefill
// of one sequence, or a decode step of a row per sequence (a batch). A
// context past one page is paged for one sequence too (its inputs then
// llama_batch_inputs's).
// With `seeded_routes`, a sparse layer's router still runs, but its
// experts are chosen (and gated) by the graph's input
// "layer<l>.route_seed" (rows x experts scores, route_seeds()) instead of
// its logits: routing that does not follow the data, the same with data
// and in the timing-only mode (whose logits are seeded values), so that a
// MoE model's timing-only run takes the data run's time.
//
// With `shard` of several chips, chip `shard.chip`'s graph of the step in
// Megatron's tensor-parallel layout, which every chip of the system runs
// on its own shard (compiler::run_together): its heads' columns of Q, K and
// V (H / chips query heads; KV / chips KV heads, or where the chips
// outnumber the KV heads, the one KV head its query heads read, computed
// on each chip that reads it) and their KV caches, its columns of the
// MLP's gate and up projections, the matching rows of o_proj and
// down_proj, whose partial sums the chips' communication engines
// all-reduce ("layer<l>.attention_sum", "layer<l>.mlp_sum": FP32, the
// ring), and its columns of the LM head, its output "logits.part" (T x
// vocab / chips: shard_logits puts the chips' parts together). A MoE
// layer likewise: the router and its routes on every chip alike, every
// expert's (and the shared experts') intermediate columns split over the
// chips, the experts' partial sums all-reduced ("layer<l>.mlp_sum"); an
// MLA layer its H / chips heads' rows of q_b_proj and kv_b_proj (the
// latent computed and cached whole on every chip, its heads absorbing
// their rows of kv_b_proj) and their columns of o_proj. The Linears split over the chips are
// BF16 (one a checkpoint stores in FP8 blocks is refused; those every
// chip computes whole may be FP8); head, KV-head, intermediate or
// vocabulary counts the chips do not divide are refused (shard_refusal).
// With `shard.experts`, DeepSeek's layout instead: every chip the whole
// step on its own rows but the MoE layers' routed experts, of which it
// holds expert e for e mod chips = its number (BF16 or FP8 blocks, as
// stored); each MoE layer's rows go to their experts' chips and back by
// all-to-alls (compiler::Graph::dispatch, `shard.capacity` slots a chip,
// 0: the step's rows); the shared experts and dense layers whole on every
// chip; where the chips divide the vocabulary, the LM head by vocabulary
// (every chip's rows gathered, its columns of their logits, the output
// "logits.part": expert_logits), else whole on each chip's rows (the
// output "logits"); expert_refusal.
using compiler::Shard;
// Why `c`'s first `layers` layers (0: all) do not shard over `chips`
// chips as Shard lays them out; empty where they do.
std::string shard_refusal(const LlamaConfig& c, unsigned chips, unsigned layers = 0);
// Why `c`'s first `layers` layers do not spread their experts over
// `chips` chips as Shard::experts lays them out (every chip the rest
// whole on its own rows, expert e on chip e mod chips, the rows
// dispatched by all-to-alls); empty where they do.
std::string expert_refusal(const LlamaConfig& c, unsigned chips, unsigned layers = 0);
// Whether Shard::experts over `chips` chips runs the LM head by vocabulary
// (the chips divide it), else whole on each chip's rows.
bool expert_head_by_vocab(const LlamaConfig& c, unsigned chips);
// A sequence's share of llama_step's KV caches: one page of `context`
// positions where the attention's word for a page holds it (65535), else
// `pages` pages of `page` positions (whole 256s, at most 65280), the
// sequence's positions in order through its page table
// (llama_batch_inputs).
struct KvPages {
  unsigned page, pages;
  // Whether a step of `sequences` pages its caches (llama_batch_inputs'
  // inputs, not llama_inputs').
  bool paged(unsigned sequences) const { return sequences > 1 || pages > 1; }
};
KvPages kv_pages(unsigned context);
// The most rows a llama_step of `sequences` over caches of `context`
// positions each takes: as many as its attention's scratchpad holds, all
// one sequence's at the end of its cache (compiler::attention_rows; 0:
// not one).
unsigned llama_step_rows(const LlamaConfig& c, unsigned context, unsigned sequences = 1);
compiler::Graph llama_step(const LlamaConfig& c, const WeightSource& w, unsigned rows, unsigned context, unsigned layers = 0,
                           const Fp8Source& fp8 = {}, unsigned sequences = 1, bool seeded_routes = false, const Shard& shard = {});
// A step's T x vocab logits from each chip's "logits.part" (a Shard's
// output; outputs[k] chip k's), chip k's columns k vocab / chips ...
std::vector<float> shard_logits(const std::vector<std::map<std::string, std::vector<float>>>& outputs, unsigned vocab);
// Shard::experts' logits by vocabulary: each chip's "logits.part" holds
// its columns of every chip's rows (chip order), so chip k's T x vocab
// logits are rows k T .. of shard_logits's.
std::vector<std::vector<float>> expert_logits(const std::vector<std::map<std::string, std::vector<float>>>& outputs, unsigned vocab);
// The graph's inputs for a step: its tokens (the graph's "tokens", as FP32
// whole numbers, gathered from the embedding table on the chip) and their
// positions from `position` on.
std::map<std::string, std::vector<float>> llama_inputs(const std::vector<std::uint32_t>& tokens, unsigned position = 0);
// A seeded_routes step's scores: each sparse layer's of the first `layers`
// (0: all) "layer<l>.route_seed", `rows` x experts values uniform in
// [0, 1) from `seed` (give each step its own), added to `inputs`.
void route_seeds(const LlamaConfig& c, unsigned layers, unsigned rows, std::uint64_t seed,
                 std::map<std::string, std::vector<float>>& inputs);
// A step of llama_step(..., context, ..., sequences)'s: row r is sequence
// of[r]'s token tokens[r] at positions[r] (a sequence's rows together, in
// order), each sequence's pages (kv_pages(context)) in order.
std::map<std::string, std::vector<float>> llama_batch_inputs(const std::vector<std::uint32_t>& tokens, const std::vector<unsigned>& positions,
                                                             const std::vector<unsigned>& of, unsigned sequences, unsigned context);
// The same on the host in FP32, with the weights as the chip holds them
// (rounded to BF16, norms in FP32) and activations unrounded. A MoE model
// routes each token to its own top k unless `routes` (by layer, T x k
// experts: chip_routes()) gives the chip's choices: then it follows those,
// their gates the softmax of its own FP32 logits, and counts in
// `disagreements` the (token, layer) pairs whose top k it would have chosen
// otherwise (a near tie that BF16 rounding tips).
std::vector<float> llama_reference(const LlamaConfig& c, const WeightSource& w, const std::vector<std::uint32_t>& tokens,
                                   unsigned layers = 0, const std::vector<std::vector<std::uint32_t>>* routes = nullptr,
                                   unsigned* disagreements = nullptr);
// The experts the chip chose, by layer, from a prefill's outputs.
std::vector<std::vector<std::uint32_t>> chip_routes(const LlamaConfig& c, const std::map<std::string, std::vector<float>>& outputs,
                                                    unsigned layers = 0);

}  // namespace tessera::hf
