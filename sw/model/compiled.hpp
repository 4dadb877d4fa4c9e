// The main job's model (Config, Weights: model.hpp) as a graph of the
// compiler's IR (sw/compiler), built from the model's definition and
// compiled for one chip or a system's, instead of DeviceModel's hand-written tile
// programs. Per layer: RMSNorm, the Q, K and V projections (one matmul),
// attention over the layer's KV caches with Q and K rotated at the step's
// positions (read on the chip), Wo and the residual, RMSNorm (its BF16
// copy the router's and the experts' input), the router, its
// top-2 and the chosen experts' SwiGLU FFNs (compiler::moe), the residual;
// then the final RMSNorm, the LM head and the argmax. A step of T tokens
// is one compiled graph and one launch; the graphs of every step length
// (the prompt's, then one a token) share the caches. BF16. With
// Config::max_sequences above 1 a step holds several sequences (a batch),
// each over its own pages of the caches (KvPages: the host keeps the page
// tables and passes them with the step, the chip's attention follows them).
#pragma once

#include <algorithm>
#include <map>
#include <memory>
#include <vector>

#include "executable.hpp"
#include "model.hpp"
#include "tessera_program.h"

namespace tessera::model {

// The graph of a step of `rows` tokens (inputs "tokens" and "positions";
// with Config::max_sequences above 1 also "sequences", each row's, and
// "pages", the page tables; outputs "logits" rows x vocab, "next" the
// argmax of each row, and "layer<l>.route" each layer's experts and gates).
// FP8 (Config::fp8): the projections, the LM head and the experts
// block-scaled (matmul_scaled, moe_scaled) on the weights' E4M3 codes and
// block scales, as DeviceModel runs them; the router stays BF16.
// With `shard` of several chips (CompiledModel::Layout::all_reduce),
// chip shard.chip's graph in Megatron's layout: its heads' columns of Q,
// K and V (heads / chips heads) and their caches, those rows of Wo, its
// hidden / chips columns of every expert's w1 and w3 and those rows of
// w2, the partial sums of Wo and of the experts added on every chip by
// FP32 ring all-reduces ("layer<l>.wo_sum", "layer<l>.experts_sum"); the
// router and its routes on every chip alike; its vocab / chips columns of
// the LM head ("logits.part") with their argmax ("next.part") and maximum
// ("max.part"), which the host puts together. BF16 only.
// With `shard.experts` (DataParallel's expert parallelism), chip
// shard.chip's graph as DeepSeek lays it out: the whole model on the
// chip's own rows but its experts (e mod chips = chip), each layer's rows
// dispatched to the chips of their experts and their sums brought back by
// all-to-alls (Graph::moe_dispatched, "layer<l>.experts.sent" ...), `capacity`
// slots a chip; with no rows, the experts alone over one row of zeros
// (input "idle"): a chip with no sequence in the step still serves the
// others' rows. BF16 only.
compiler::Graph model_graph(const Config& c, const Weights& w, unsigned rows, const compiler::Shard& shard = {});
// Throws rt::UsageError naming why the experts do not spread by expert
// over `chips` chips with all-to-alls (FP8, experts the chips do not divide).
void check_expert_parallel(const Config& c, unsigned chips);
// Throws rt::UsageError naming what the graph cannot take (FP8 needs
// d_model and hidden in whole 128-column blocks; a shard over several
// chips BF16 and heads, hidden and vocabulary the chips divide).
void check_compilable(const Config& c, unsigned chips = 1);

class CompiledModel : public Model {
 public:
  // Throws rt::UsageError for a configuration it does not build (check_compilable).
  CompiledModel(rt::Device& dev, const Config& c, const Weights& w);
  // On the chips of a system, in one of two layouts. spread: chips[0]
  // runs the model; the tiles of every chip up to as many as there are
  // experts take a share of each layer's experts, and the matmuls that
  // gain from it their columns (compiler::Options::peers). all_reduce:
  // every chip of the system runs its shard of each step (model_graph's
  // Shard; compiled per chip, started together as compiler::run_together
  // does), the chips' communication engines all-reducing the partial sums
  // from the tile programs; the host puts the chips' logits together.
  enum class Layout { spread, all_reduce };
  CompiledModel(const std::vector<rt::Device*>& chips, const Config& c, const Weights& w, Layout layout = Layout::spread);
  // One chip of DataParallel's expert parallelism: its steps are
  // model_graph's with `experts` (shard.experts set), compiled with the
  // system's `symmetric` store, each for the step's rows and the capacity
  // set_capacity() last gave; a step of no sequences runs the idle graph.
  CompiledModel(rt::Device& dev, const Config& c, const Weights& w, const compiler::Shard& experts,
                std::shared_ptr<compiler::SymmetricStore> symmetric);
  void set_capacity(unsigned c) { capacity_ = c; }
  ~CompiledModel() override;
  using Model::step;
  std::vector<float> step(const std::vector<Seq>& batch, std::vector<std::uint32_t>* next,
                          std::vector<std::vector<std::uint32_t>>* routes) override;
  // step() in two halves, so that several chips' models run a step at once
  // (DataParallel): start() admits the batch and queues its launch,
  // finish() waits for it and gives what step() gives.
  void start(const std::vector<Seq>& batch);
  // finish() in two: wait() for the launch (its outputs' reads then
  // posted, rt::Device::read_post), collect() for the reads, giving what
  // finish() gives; the reads of several chips waited for in turn overlap.
  void wait();
  std::vector<float> collect(std::vector<std::uint32_t>* next, std::vector<std::vector<std::uint32_t>>* routes);
  // Throws what start() would refuse the batch for (rt::UsageError), runs nothing.
  void check(const std::vector<Seq>& batch) const {
    std::vector<std::uint32_t> tokens;
    pages_.check(batch, tokens);
  }
  std::vector<float> finish(std::vector<std::uint32_t>* next, std::vector<std::vector<std::uint32_t>>* routes);
  void release(unsigned seq) override { pages_.release(seq); }
  // Where the time went: each node's time in its phase's bucket (attention,
  // wo, router, experts, combine, head, embed, argmax), the rest of each
  // step (the launch, the inputs written, the outputs read) in host_io;
  // `bounds["step"]` the launches against their roofline.
  const Profile& profile() const override { return profile_; }
  const Config& config() const override { return c_; }
  // A step's tokens: as many as the experts' kernel takes (TKP_MOE_MAX_T, 256).
  unsigned max_step_tokens() const override { return pages_.max_tokens(); }
  // The compiled step of `rows` tokens (compiled on first use; all_reduce:
  // chip 0's, every chip's compiled with it; expert parallel: for the
  // capacity set).
  compiler::Executable& executable(unsigned rows);
  Layout layout() const { return layout_; }
  // The steps compiled so far, and the bytes of weights they hold on the
  // device (one copy of each weight per layout their tilings ask for).
  std::size_t steps() const { return layout_ == Layout::all_reduce ? shards_[0].steps.size() : steps_.size(); }
  unsigned chips() const { return layout_ == Layout::all_reduce ? static_cast<unsigned>(shards_.size()) : 1 + static_cast<unsigned>(peers_.size()); }
  std::uint64_t weight_bytes() const {  // on every chip
    std::uint64_t b = weights_->bytes();
    for (const compiler::Options::Peer& p : peers_) b += p.weights->bytes();
    for (std::size_t k = 1; k < shards_.size(); ++k) b += shards_[k].weights->bytes();
    return b;
  }

 private:
  // The step between start() and finish(): its sequences' parts, its rows,
  // its executable and its simulated start.
  struct Started {
    std::vector<KvPages::Part> parts;
    unsigned rows = 0;
    compiler::Executable* ex = nullptr;
    std::vector<compiler::Executable*> shards;                     // all_reduce: every chip's (ex chip 0's)
    std::vector<std::map<std::string, std::vector<float>>> outputs;  // and their outputs
    double t0 = 0;
  };
  std::unique_ptr<Started> started_;

  rt::Device& dev_;
  const Config& c_;
  const Weights& w_;
  rt::Kernel program_;
  std::vector<compiler::Options::Peer> peers_;  // the other chips that take experts, each with its weights
  KvPages pages_;
  std::map<unsigned, std::unique_ptr<compiler::Executable>> steps_;
  // all_reduce: every chip's program, weights, caches and steps (chip 0's
  // steps in steps_, its weights in weights_), the rings' buffers at one
  // address on every chip.
  Layout layout_ = Layout::spread;
  compiler::Shard experts_;  // expert parallel: this chip's (experts set)
  unsigned capacity_ = 0;
  struct ShardChip {
    rt::Device* dev = nullptr;
    rt::Kernel program;
    std::shared_ptr<compiler::WeightStore> weights;
    std::map<std::string, rt::Buffer> caches;
    std::map<unsigned, std::unique_ptr<compiler::Executable>> steps;
  };
  std::vector<ShardChip> shards_;
  std::shared_ptr<compiler::SymmetricStore> symmetric_;
  std::map<std::string, rt::Buffer> caches_;
  std::shared_ptr<compiler::WeightStore> weights_;  // one copy for the steps of every length
  Profile profile_;
};

// Data parallel: a CompiledModel on each chip of a system, each holding
// the whole model (its own copy of the weights) and its own KV caches;
// sequence s runs on chip s mod N, as its sequence s / N there. A step's
// sequences go to their chips and every chip's graph runs at once (the
// host starts each chip's step, then finishes each), no data crossing
// between the chips. For batches: throughput grows with the chips where
// the model fits one chip (the experts' and matmuls' spreading over a
// system, CompiledModel's, is for one sequence or a model too large).
//
// With `experts` (expert parallelism, as DeepSeek lays a model out): each
// chip holds only its experts (e mod N = chip, model_graph's
// Shard::experts), and every layer's rows go to their experts' chips and
// back by all-to-alls; every chip runs every step (one with no sequence
// of the step serves the others' rows), the chips' slots as many as the
// most rows any chip has in the step (none dropped), at most 256 / N a
// chip (the experts' kernel's rows: max_step_tokens()).
class DataParallel : public Model {
 public:
  DataParallel(const std::vector<rt::Device*>& chips, const Config& c, const Weights& w, bool experts = false);
  ~DataParallel() override;
  using Model::step;
  std::vector<float> step(const std::vector<Seq>& batch, std::vector<std::uint32_t>* next,
                          std::vector<std::vector<std::uint32_t>>* routes) override;
  void release(unsigned seq) override;
  // The busiest chip's (the one whose steps took the longest in all).
  const Profile& profile() const override;
  const Config& config() const override { return c_; }
  // One chip's: a step's share of each chip (its sequences' tokens) must
  // fit a step of that chip's model, which refuses more (rt::UsageError).
  unsigned max_step_tokens() const override {
    return experts_ ? std::min(replicas_[0]->max_step_tokens(), TKP_MOE_MAX_T / chips()) : replicas_[0]->max_step_tokens();
  }
  bool expert_parallel() const { return experts_; }
  // Compiles, on each chip, the step its share of `batch` makes (the
  // sequences' ids and token counts; nothing runs).
  void prepare(const std::vector<Seq>& batch);
  unsigned chips() const { return static_cast<unsigned>(replicas_.size()); }
  const CompiledModel& replica(unsigned k) const { return *replicas_.at(k); }

 private:
  // The batch's sequences by chip, renumbered as that chip's, and each one's index in the batch.
  std::vector<std::vector<Seq>> split(const std::vector<Seq>& batch, std::vector<std::vector<std::size_t>>* index) const;
  // The most rows a chip has in a split batch (at least 1: expert
  // parallelism's slots a chip), and each chip's.
  unsigned slots(const std::vector<std::vector<Seq>>& by, std::vector<unsigned>* rows) const;
  const Config& c_;
  Config local_;  // a chip's: max_sequences its share
  bool experts_ = false;
  std::shared_ptr<compiler::SymmetricStore> symmetric_;  // expert parallel: the all-to-alls' buffers
  std::vector<rt::Device*> chips_;
  std::vector<std::unique_ptr<CompiledModel>> replicas_;
};

}  // namespace tessera::model
