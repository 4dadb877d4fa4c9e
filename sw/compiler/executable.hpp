// A compiled graph on a device: the passes (passes.hpp) run, their plan
// bound to the device's memory, every group emitted as a node of one
// rt::Graph (a tile program per tile, its loads, GEMMs and vector ops
// ordered by the tile's semaphores so the next block's operands load
// under the current block's arithmetic), instantiated once. run() writes
// the inputs, launches the graph (one command: no host round trip per op),
// waits and reads the outputs. A graph of more nodes than a device graph
// holds (TKP_MARKS_MAX - 1) runs as several of whole groups, one after
// another (each waited for, its node marks read before the next).
//
// Emission per group and tile, on its part's blocks:
//   matmul   A's rows (cast to the format on the fly) once per row block;
//            B in chunks of kb x nb, double-buffered (a chunk loads while
//            the one before it multiplies; a weight's first chunk early,
//            under the barrier before the node); C in FP32, double-buffered so a
//            block's epilogue (the fused ops) and store overlap the next
//            block's GEMMs;
//   others   the operands' blocks double-buffered, the chain's vector ops
//            in place, the store of a block behind the next block's loads.
// A weight a matmul reads is laid out per tile: each part's columns as a
// panel in the HBM stack nearest the tile (rt::Device::stack_near).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ir.hpp"
#include "passes.hpp"
#include "tessera/program.hpp"
#include "tessera/runtime.hpp"

namespace tessera::compiler {

// Weights on a device by their layout, shared by the executables given the
// same store (a model's step graphs of several lengths hold one copy): an
// executable takes a weight laid out as it needs from here, or writes it
// and keeps it here. The key holds the weight's name, a hash of its
// values and the layout (format, columns or slice, stack), so graphs with
// other weights under the same names never share. The buffers are freed
// with the store, when its last holder goes.
class WeightStore {
 public:
  explicit WeightStore(rt::Device& dev) : dev_(dev) {}
  ~WeightStore();
  WeightStore(const WeightStore&) = delete;
  WeightStore& operator=(const WeightStore&) = delete;
  // The buffer under `key`; where there is none, a new one of `bytes` in
  // `stack`, `data()` (that many bytes) written to it; on a timing-only
  // device (rt::Device::timing_only) nothing is made or written.
  rt::Buffer get(const std::string& key, unsigned stack, std::uint64_t bytes, const std::function<std::vector<std::uint8_t>()>& data);
  std::uint64_t bytes() const { return bytes_; }  // held on the device
  std::size_t uploads() const { return held_.size(); }

 private:
  rt::Device& dev_;
  std::map<std::string, rt::Buffer> held_;
  std::uint64_t bytes_ = 0;
};

// Buffers at one local address on every chip of a system
// (rt::Device::alloc_symmetric), by key, for the executables of a graph
// with collectives (one a chip: Options::symmetric): the engines' ring
// writes each chip's share of the result straight into the next chip's
// destination, at the address of its own. Executables that share a store
// and name a collective alike share its buffer (they run one at a time).
// Freed with the store, when its last holder goes.
class SymmetricStore {
 public:
  // The chips of a group (consecutive chips of one system, in chip order:
  // every chip of the system, or Options::first_chip's group).
  explicit SymmetricStore(std::vector<rt::Device*> chips);
  ~SymmetricStore();
  SymmetricStore(const SymmetricStore&) = delete;
  SymmetricStore& operator=(const SymmetricStore&) = delete;
  // Chip `chip`'s buffer under `key` (made on every chip the first time).
  rt::Buffer get(const std::string& key, unsigned chip, std::uint64_t bytes, unsigned stack);
  unsigned chips() const { return static_cast<unsigned>(chips_.size()); }
  unsigned first() const;  // the group's first chip

 private:
  std::vector<rt::Device*> chips_;
  std::map<std::string, std::vector<rt::Buffer>> held_;
};

// A striped KV cache's blocks (Options::stripe_caches), in positions.
constexpr unsigned kKvStripe = 256;

struct Options {
  bool fuse = true;
  bool narrow = true;  // narrow_storage: intermediates only matmuls read, in their format
  bool stripe = true;  // stripe_outputs: a QKV projection's output in a stack per Q, K and V
  // A KV cache of at least kKvStripe positions a stack in a stripe per
  // HBM stack (n of them: as many as the stacks, up to 4, a power of two):
  // block b of kKvStripe positions of KV head j in stripe (b + j) mod n,
  // so that its readers draw on every stack's port. A peer chip's part of
  // a cache spread over the chips by heads lies in one buffer.
  bool stripe_caches = true;
  unsigned tiles = 0;  // tiles to use (0: all of the device's)
  // A graph whose collectives span some chips of the system (op.chips
  // of them, a group: chips first_chip .. first_chip + chips - 1, each
  // chip of it running its graph, a communicator as NCCL has them): the
  // group's first chip. Its collectives' ranks are chip - first_chip;
  // Options::symmetric then holds the group's chips. Default: 0, with
  // op.chips the system's, every chip.
  unsigned first_chip = 0;
  // State (KV caches) by name that another executable holds
  // (Executable::state()): this one uses those buffers, so runs of both
  // share the caches (a prefill's graph, then a decode step's). A state
  // tensor not named here gets a buffer of its own (a striped cache a
  // buffer a stripe: "<name>" its first, "<name>#<s>" stripe s).
  std::map<std::string, rt::Buffer> state;
  // Where the weights go (and come from, where another executable put them
  // there already); none: a store of this executable's own.
  std::shared_ptr<WeightStore> weights;
  // Other chips of the device's system (rt::Cluster) that share the work:
  // each moe op's experts are split over their tiles and the device's
  // (tensor parallel: every chip holds its share of every expert's
  // slices); the rows and the router's choices stay on the device, each
  // chip's tiles read them and write their sums there, and the tiles of
  // the chips hand the op over through each other's semaphores, the host
  // not involved. Everything else runs on the device.
  struct Peer {
    rt::Device* dev = nullptr;
    rt::Kernel program;                    // the program kernel, loaded on its tiles
    std::shared_ptr<WeightStore> weights;  // its weights (none: a store of this executable's own)
  };
  std::vector<Peer> peers;
  // With peers, each matmul on a weight also spreads over the chips, by
  // columns (tensor parallel: passes.hpp tile_chips): each chip holds its
  // columns of B and its tiles compute them, reading A from the copy the
  // device pushes with the hand-over and writing their columns of the
  // output on the device; the device hands each such op over as it does a
  // moe op's, and waits for every peer's tiles before the next node. What a model whose weights outgrow
  // one chip (a full-size LLM) runs on; the rest of the graph stays on the
  // device. `always`: every such matmul (a full-size LLM, whose weights
  // must spread); `where_faster`: only those the tiler's estimate says
  // gain (passes.hpp tile_chips), the rest on the device.
  enum class Split { never, always, where_faster };
  Split split_matmuls = Split::never;
  // A graph with collectives over several chips (Graph::all_reduce,
  // all_gather; run_together): where the ring's destinations and the
  // outputs lie, at one address on every chip. Required for a ring.
  std::shared_ptr<SymmetricStore> symmetric;
};

// The tiler's view of a device, from its roofline limits.
Target target(const rt::Device& dev, unsigned tiles = 0);

// Whether an attention step of T rows over a cache of n positions a
// sequence (keys of dh values, values of dv; a page table of `table`
// entries, 1 unpaged) fits the program kernel's scratchpad in its worst
// case, every row one sequence's at the end of its cache: what an
// Executable compiles, else refuses by name.
bool attention_fits(unsigned T, unsigned n, unsigned dh, unsigned dv, std::uint64_t table);
// The most rows such a step takes (0: not even one).
unsigned attention_rows(unsigned n, unsigned dh, unsigned dv, std::uint64_t table);

class Executable {
 public:
  // Compiles `g` for `dev`; `program` is the program kernel loaded on the
  // device's tiles (rt::Device::load_kernel of program.elf). Throws
  // std::invalid_argument for a graph it cannot compile, naming the op.
  Executable(rt::Device& dev, const rt::Kernel& program, Graph g, const Options& o = {});
  ~Executable();
  Executable(const Executable&) = delete;
  Executable& operator=(const Executable&) = delete;

  // Runs the graph: `inputs` by name, FP32; returns the outputs by name
  // (as reference() gives them). A failing op throws rt::DeviceError naming
  // its node (the group's first op) and tile; the device serves on. With
  // peers, each chip's graph is launched (the device's first) and waited
  // for, launch by launch where the graph runs as several.
  std::map<std::string, std::vector<float>> run(const std::map<std::string, std::vector<float>>& inputs);
  // run() in two halves, so that the graphs of several chips run at once
  // (data parallel: each chip its own executable): start() writes the
  // inputs and queues the (first) launch; finish() waits for it (and runs
  // the graph's further launches) and reads the outputs. A start() must be
  // finished before the next; the errors are run()'s, from finish().
  void start(const std::map<std::string, std::vector<float>>& inputs);
  std::map<std::string, std::vector<float>> finish();
  // finish() in three: wait() for the launches (last_seconds(),
  // last_bound() then hold), fetch() posts the outputs' reads
  // (rt::Device::read_post), and after the device's wait_io(), outputs()
  // gives them; several chips' fetches overlap.
  void wait();
  void fetch();
  std::map<std::string, std::vector<float>> outputs();

  rt::Device& device() const { return dev_; }
  const Graph& graph() const { return g_; }
  const std::vector<Group>& groups() const { return groups_; }
  const std::vector<Tiling>& tilings() const { return tilings_; }
  const HbmPlan& hbm() const { return hbm_; }
  const rt::Graph& device_graph() const { return dgraph_; }
  // Each group's time in the last run, simulated seconds (a moe group runs
  // as two device nodes, its experts and its combine, three with peers,
  // and a matmul spread over the chips as two, its share and the wait for
  // the peers: their sum).
  std::vector<double> node_seconds() const;
  // The last run's launch: its simulated seconds, and its roofline (the
  // bound each resource sets on the work it did, and the binding one; with
  // peers, the chip's whose bound is the longest).
  double last_seconds() const { return last_seconds_; }
  const roofline::Report& last_bound() const { return last_bound_; }
  // The ops of each tile's program, summed over the nodes.
  std::size_t device_ops() const;
  // Its state tensors' buffers by name (to share with Options::state; they
  // live as long as the executable that allocated them).
  const std::map<std::string, rt::Buffer>& state() const { return state_; }
  // KV cache `name`'s values on the device, BF16 bits in the graph's
  // layout (KV heads x positions x values; of an attention spread over
  // the chips by heads, the device's heads), wherever its stripes lie.
  // Throws std::invalid_argument for a name that is no cache or bits of
  // the wrong size.
  void write_cache(const std::string& name, const std::vector<std::uint16_t>& bits);
  std::vector<std::uint16_t> read_cache(const std::string& name) const;
  // Its weights' store (to share with Options::weights).
  const std::shared_ptr<WeightStore>& weights() const { return weights_; }

 private:
  struct Impl;
  void launch(std::size_t k);       // queues launch k of the graph on the device and its peers
  void wait_launch(std::size_t k);  // waits for launch k on the device and its peers
  void waited();                    // the run's last_seconds() and last_bound(), once its launches are over
  friend std::vector<std::map<std::string, std::vector<float>>> run_together(
      const std::vector<Executable*>& execs, const std::vector<std::map<std::string, std::vector<float>>>& inputs);
  rt::Device& dev_;
  rt::Kernel program_;
  Graph g_;
  std::vector<Group> groups_;
  std::vector<Tiling> tilings_;
  HbmPlan hbm_;
  rt::Graph dgraph_;
  double last_seconds_ = 0;
  roofline::Report last_bound_;
  std::map<std::string, rt::Buffer> state_;
  std::shared_ptr<WeightStore> weights_;
  std::vector<Options::Peer> peers_;  // each with its weights' store
  std::shared_ptr<SymmetricStore> symmetric_;  // where its ring collectives' destinations lie
  std::unique_ptr<Impl> impl_;
};

// The chips' outputs `name` (chip k's T x cols / N, from run_together's
// result) side by side as T x cols, chip k's columns k cols / N ..: a
// tensor parallel shard's columns of the logits put together (throws
// std::invalid_argument where the parts do not make that).
std::vector<float> side_by_side(const std::vector<std::map<std::string, std::vector<float>>>& outputs, const std::string& name,
                                unsigned cols);
// Runs a graph with collectives (Graph::all_reduce, all_gather): one
// executable of it on each chip of the system, or of each group its
// collectives span (Options::first_chip; several groups at once, each
// whole), execs[k] with inputs[k], all at once. Each chip's inputs and launch are posted before any is
// waited for (the chips' engines wait for each other in every
// collective), then each chip is waited for and its outputs read. A graph
// of several launches (past a launch's nodes) runs them in step: launch k
// + 1 posted on every chip once every chip's launch k is over, each
// collective in the same launch on every chip (else refused, before any
// chip starts). A chip whose launch fails gives up its collectives over
// its group (its CP's CE_ABORT; the host's where it could not post the
// chip's part), so the group's other chips fail theirs at once, not at
// their watchdogs; once every chip's run is over their engines are reset
// (rt::Device::reset_collectives), and the next run finds them in step.
// The first chip's error goes up, or the first that is not only a chip
// giving up (rt::DeviceError::gave_up); after an error no further launch
// starts.
std::vector<std::map<std::string, std::vector<float>>> run_together(const std::vector<Executable*>& execs,
                                                                    const std::vector<std::map<std::string, std::vector<float>>>& inputs);

}  // namespace tessera::compiler
