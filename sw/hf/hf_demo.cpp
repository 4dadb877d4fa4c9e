// tessera-vp demo --hf-config FILE.json [--weights FILE|DIR] [--layers N]
//                 [--prompt N] [--decode N] [--seed S] [--batch B] [--context N]
//                 [--check] [--timing-only] [--routing model|seeded] [--set inst.key=value]...
// Builds the model's prefill from its config.json (llama.hpp) with its
// safetensors weights or seeded ones, compiles it (sw/compiler) and runs it
// on the T1 with one launch; prints the greedy next token, the simulated
// time per prompt token and the launch against its roofline (a MoE
// model's prompt longer than 256 tokens in steps of 256, over the KV
// caches, the experts' kernel taking 256 rows a step; any prompt in steps
// of the rows its attention's scratchpad holds over the context). --decode N
// then decodes N tokens greedily, one compiled step a token over the KV
// caches the prefill filled (one launch a step). --check compares every
// logit (the prompt's and each decoded token's) with the FP32 host
// reference (bound 5e-2, as the main job's). --batch B prefills B
// sequences (seeded prompts) together and decodes them a row each per step
// over paged KV caches. --timing-only runs the config's shapes without
// weights on a timing-only device (README.md, timing only); with
// --context N its prompt starts N positions into the KV caches (as if a
// prefill had filled them, which it does not time), so a decode step's
// attention reads a context of N + the prompt. --routing
// seeded chooses a MoE layer's experts by seeded scores instead of its
// router's logits (the router still runs): routing that does not follow
// the data, so a timing-only run of a MoE model takes the data run's
// time. --chips N runs on a system of N T1s (4: a ring, 8 to 64: a
// torus), in one of two layouts (--parallel; auto, the default, takes
// all-reduce wherever the model's layers shard over a group's chips,
// else spread). spread: every matmul on a weight
// spreads its columns over the chips and each chip holds its columns
// (tensor parallel, compiler::Options::split_matmuls), a MoE layer's
// experts likewise, attention by heads (each chip keeping its KV heads'
// caches); the rest of the step runs on chip 0. --groups G splits the
// chips and the batch into G groups (data parallel), each group's first
// chip running its sequences' steps with the group's other chips as its
// peers, every group's step started before any is waited for.
// all-reduce (--all-reduce is --parallel all-reduce) runs Megatron's
// tensor parallel layout: every chip runs the step on its shard (llama.hpp's Shard: its
// heads and their caches, its columns of Q, K, V, gate and up, those rows
// of o_proj and down_proj, every expert's share of its intermediate
// columns in a MoE layer, its vocabulary columns of the LM head), the
// chips' communication engines all-reducing the partial sums and
// the host reading each chip's vocabulary columns of the logits
// (compiler::Graph::all_reduce); no chip pushes activations to another.
// With --groups G, each group of N / G chips so (its collectives over its
// own chips: compiler::Options::first_chip), data parallel over the
// groups.
// expert (--parallel expert) lays a MoE model out as DeepSeek does: every
// chip its own share of the batch's sequences through the whole model
// but the routed experts, of which it holds expert e for e mod N = its
// number, each MoE layer's rows going to their experts' chips and back by
// the chips' engines' all-to-alls (llama.hpp's Shard::experts), the LM
// head by vocabulary where the chips divide it (every chip's rows
// gathered, each chip computing its columns of their logits); every
// chip's step started before any is waited for. Exit codes: 0, 1 (--check failed), 2 (a bad option, config
// or weights file, in one line), 3 (a device error).
#include "hf_demo.hpp"

#include <unistd.h>

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <iostream>
#include <memory>
#include <random>

#include "common/paths.hpp"
#include "executable.hpp"
#include "spec.hpp"
#include "llama.hpp"

namespace tessera::hf {

namespace {
constexpr unsigned kChunk = TKP_MOE_MAX_T;  // prompt tokens a MoE prefill step takes at most (the experts' kernel's rows)
constexpr unsigned kBatchRows = 256;        // rows a dense model's batched prefill step takes at most (its attention's scratchpad)
int fail(const std::string& why) {
  std::cerr << "tessera demo: " << why << "\n";
  return 2;
}
}  // namespace

int demo_main(int argc, char** argv) {
  std::string config, weights;
  unsigned layers = 0, prompt = 16, seed = 1, decode = 0, batch = 1, chips = 1, groups = 1, start = 0;
  bool check = false, timing = false, seeded_routes = false, all_reduce = false;
  std::string parallel = "auto";  // --parallel: auto, spread, all-reduce or expert
  std::string why_spread;         // auto: why the model does not shard
  rt::Device::Options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool more = i + 1 < argc;
    auto number = [&](unsigned& out) {
      char* end;
      const unsigned long v = std::strtoul(argv[++i], &end, 10);
      if (*end || !*argv[i] || v > (1u << 20)) return false;
      out = static_cast<unsigned>(v);
      return true;
    };
    if (a == "--hf-config" && more) config = argv[++i];
    else if (a == "--weights" && more) weights = argv[++i];
    else if (a == "--layers" && more) { if (!number(layers) || !layers) return fail("--layers takes a number of layers above 0"); }
    else if (a == "--prompt" && more) { if (!number(prompt) || !prompt || prompt > 1024) return fail("--prompt takes 1 to 1024 tokens"); }
    else if (a == "--decode" && more) { if (!number(decode) || decode > 1024) return fail("--decode takes 0 to 1024 tokens"); }
    else if (a == "--seed" && more) { if (!number(seed)) return fail("--seed takes a number"); }
    else if (a == "--context" && more) { if (!number(start)) return fail("--context takes 0 to 1048576 positions"); }
    else if (a == "--batch" && more) { if (!number(batch) || !batch || batch > 64) return fail("--batch takes 1 to 64 sequences"); }
    else if (a == "--chips" && more) { if (!number(chips) || !chips) return fail("--chips takes 1, 4, 8, 16, 32 or 64"); }
    else if (a == "--groups" && more) { if (!number(groups) || !groups) return fail("--groups takes a number of groups of chips above 0"); }
    else if (a == "--set" && more) opt.sets.push_back(argv[++i]);
    else if (a == "--check") check = true;
    else if (a == "--all-reduce") parallel = "all-reduce";
    else if (a == "--parallel" && more) {
      parallel = argv[++i];
      if (parallel != "auto" && parallel != "spread" && parallel != "all-reduce" && parallel != "expert")
        return fail(fmt::format("--parallel takes auto, spread, all-reduce or expert, not '{}'", parallel));
    }
    else if (a == "--timing-only") timing = true;
    else if (a == "--routing" && more) {
      const std::string r = argv[++i];
      if (r != "model" && r != "seeded") return fail(fmt::format("--routing takes model or seeded, not '{}'", r));
      seeded_routes = r == "seeded";
    } else return fail(fmt::format("'{}' is not an option of demo --hf-config (--weights, --layers, --prompt, --decode, --seed, --batch, "
                                   "--context, --chips, --groups, --parallel, --all-reduce, --check, --timing-only, --routing, --set)", a));
  }
  if (batch > 1 && !decode) return fail("--batch decodes its sequences together: give --decode N");
  if (chips % groups || batch % groups)
    return fail(fmt::format("--groups {}: the groups take equal shares of the chips ({}) and of the batch's sequences ({}); {} does "
                            "not divide both", groups, chips, batch, groups));
  if (parallel == "all-reduce" && chips == 1) return fail("--all-reduce spreads each step over a system's chips: give --chips N");
  if (parallel == "all-reduce" && chips / groups == 1)
    return fail(fmt::format("--all-reduce spreads each step over its group's chips: {} groups over {} chips leave one chip a group", groups, chips));
  const bool expert = parallel == "expert";  // each chip its sequences and its experts: a group of one chip each
  if (expert && chips == 1) return fail("--parallel expert spreads the experts over a system's chips: give --chips N");
  if (expert && groups > 1) return fail("--parallel expert: every chip runs its own sequences (a group each); it takes no --groups");
  if (expert && batch % chips)
    return fail(fmt::format("--parallel expert: each of the {} chips takes an equal share of the batch's {} sequences", chips, batch));
  if (expert) groups = chips;
  if (timing && check) return fail("--timing-only computes no logits: --check has nothing to compare");
  if (start && !timing)
    return fail("--context N starts the prompt N positions into caches that no prefill filled: only --timing-only, which computes "
                "no values, takes it");
  if (timing && !weights.empty()) return fail("--timing-only runs the config's shapes without weights: drop --weights");
  if (seeded_routes && check)
    return fail("--routing seeded gates the experts by seeded scores, not the model's: --check has no reference to compare with");
  opt.timing_only = timing;
  const unsigned context = start + prompt + decode;
  LlamaConfig c;
  std::unique_ptr<SafeTensors> st;
  WeightSource w = timing ? shape_only() : seeded_weights(seed);
  Fp8Source fp8;  // a checkpoint's block-scaled FP8 Linears, run as such
  compiler::Graph g, tail, step;
  std::vector<compiler::Graph> shard_g, shard_tail, shard_step;  // --all-reduce, --parallel expert: chip k's graph of each
  unsigned chunk = 0, rest = 0;  // prefill steps of `chunk` tokens, the last of `rest` where it is shorter
  std::vector<std::vector<std::uint32_t>> prompts;  // each sequence's
  try {
    // The fast models unless the user chooses (PlatformSpec::fast_models).
    opt.sets = PlatformSpec::fast_models(rt::Device::default_platform(), opt.sets);
    if (chips > 1) opt.platform = rt::Device::system_platform(chips);
    c = LlamaConfig::load(config);
    if (!weights.empty()) st = std::make_unique<SafeTensors>(SafeTensors::open(weights)), w = weights_from(*st), fp8 = fp8_blocks_from(*st);
    std::mt19937 rng(seed);
    prompts.resize(batch);
    for (std::vector<std::uint32_t>& tokens : prompts)
      for (unsigned t = 0; t < prompt; ++t) tokens.push_back(static_cast<std::uint32_t>(rng() % c.vocab));
    // A functional run holds every weight on the host in FP32, about twice
    // per compiled graph (the graph's copy and the chip's layout; the
    // decode step is a second graph): refuse at once what this host cannot
    // hold rather than fill its memory for minutes.
    // A MoE model's prompt longer than kChunk prefills kChunk tokens at a
    // time (the experts' kernel takes TKP_MOE_MAX_T rows a step), its remainder a graph
    // of its own.
    bool sparse = false;
    for (unsigned l = 0; l < (layers ? std::min(layers, c.layers) : c.layers); ++l) sparse |= c.sparse(l);
    if (seeded_routes && !sparse) return fail(fmt::format("--routing seeded: {} has no MoE layer among the layers run", config));
    // A batch prefills its sequences together, each step a chunk of every
    // sequence's prompt (a sequence's rows together): the chunk shrinks so
    // a step keeps to the experts' kTokens rows, or to kBatchRows, and to
    // the rows its attention's scratchpad holds over the context (a dense
    // model's prompt too).
    const unsigned share = batch / groups;  // a group's sequences
    // (Expert parallel: the experts' kernel takes every chip's slots, as
    // many as a chip's rows: kChunk / chips a chip.)
    const unsigned most = std::min(sparse ? kChunk / (expert ? chips : 1) : share > 1 ? kBatchRows : prompt,
                                   llama_step_rows(c, context, share));
    if (expert)
      if (const std::string why = expert_refusal(c, chips, layers); !why.empty())
        return fail(fmt::format("--parallel expert: {}: {}", config, why));
    if (expert && share > most)
      return fail(fmt::format("--parallel expert: {} sequences a chip, more than the {} rows a chip's step takes over {} chips (the "
                              "experts' kernel's {})", share, most, chips, kChunk));
    chunk = std::max(1u, std::min(prompt, most / share)), rest = prompt % chunk;
    // (Expert parallel: each chip's graphs hold the model but the routed
    // experts and the LM head where its vocabulary divides, and its share
    // of those.)
    const std::uint64_t params = c.parameters(layers), routed = c.routed_parameters(layers);
    const std::uint64_t head = expert && !c.tie_embeddings && expert_head_by_vocab(c, chips) ? std::uint64_t{c.vocab} * c.hidden : 0;
    const std::uint64_t per_group = expert ? params - (routed + head) + (routed + head) / chips : params;
    const std::uint64_t need = per_group * 4 * 2 * (1 + (decode ? 1 : 0) + (rest ? 1 : 0)) * groups;
    const std::uint64_t host = static_cast<std::uint64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<std::uint64_t>(sysconf(_SC_PAGE_SIZE));
    if (need > host / 2 && !timing)
      return fail(fmt::format("{}: {} of {} layers hold {:.3g} G weights, {:.1f} GB on the host in FP32 twice over, more than half "
                              "of this host's {:.1f} GB; run fewer layers (--layers), or at full size in the timing-only mode "
                              "(--timing-only)",
                              config, layers ? std::min(layers, c.layers) : c.layers, c.layers, params / 1e9, need / 1e9, host / 1e9));
    // A batch's caches hold the context per sequence (kv_pages); each
    // sequence prefills alone, and a decode step takes a row of each.
    // --parallel auto: Megatron's shards wherever the model's layers shard
    // over a group's chips (faster than spreading from the group's first
    // chip in every case measured: sw/hf/README.md), else spread.
    if (chips / groups > 1 && parallel == "auto") why_spread = shard_refusal(c, chips / groups, layers);
    all_reduce = parallel == "all-reduce" || (parallel == "auto" && chips / groups > 1 && why_spread.empty());
    try {
      for (unsigned k = 0; k < (all_reduce ? chips / groups : 0); ++k) {  // a group's (every group's alike)
        const Shard sh{k, chips / groups};
        shard_g.push_back(llama_step(c, w, chunk * share, context, layers, fp8, share, seeded_routes, sh));
        if (rest) shard_tail.push_back(llama_step(c, w, rest * share, context, layers, fp8, share, seeded_routes, sh));
        if (decode) shard_step.push_back(llama_step(c, w, share, context, layers, fp8, share, seeded_routes, sh));
      }
    } catch (const std::invalid_argument& e) {  // (a checkpoint's FP8 Linears, which only its weights tell)
      if (parallel != "auto") throw;
      why_spread = e.what(), all_reduce = false;
      shard_g.clear(), shard_tail.clear(), shard_step.clear();
    }
    for (unsigned k = 0; k < (expert ? chips : 0); ++k) {  // every chip its experts, its sequences' rows
      const Shard sh{k, chips, true, 0};
      shard_g.push_back(llama_step(c, w, chunk * share, context, layers, fp8, share, seeded_routes, sh));
      if (rest) shard_tail.push_back(llama_step(c, w, rest * share, context, layers, fp8, share, seeded_routes, sh));
      if (decode) shard_step.push_back(llama_step(c, w, share, context, layers, fp8, share, seeded_routes, sh));
    }
    if (!all_reduce && !expert) {
      g = llama_step(c, w, chunk * share, context, layers, fp8, share, seeded_routes);
      if (rest) tail = llama_step(c, w, rest * share, context, layers, fp8, share, seeded_routes);
      if (decode) step = llama_step(c, w, share, context, layers, fp8, share, seeded_routes);
    }
  } catch (const std::exception& e) {
    return fail(e.what());
  }
  const unsigned run_layers = layers ? std::min(layers, c.layers) : c.layers;
  try {
    // One chip, or a system's: chip 0 runs the step, the others (peers)
    // take their columns of every matmul and their slices of the experts.
    rt::Chips system_chips(opt, chips > 1);
    const std::vector<rt::Device*>& devices = system_chips.all;
    rt::Device& dev = *devices[0];
    auto load_program = [](rt::Device& d) { return d.load_kernel(data_file(DataKind::kernels, "program.elf"), (1u << d.tiles()) - 1); };
    std::vector<rt::Kernel> programs;
    for (rt::Device* d : devices) programs.push_back(load_program(*d));
    // Data parallel over `groups` groups of chips (--groups): group k the
    // chips k per .. (k + 1) per - 1, its first running the step with the
    // others as its peers, and the sequences k share .. (k + 1) share - 1.
    const unsigned per = chips / groups, share = batch / groups;
    // A group's executables of each phase, by chip: its first chip's, then
    // (--all-reduce) each other chip's of its shard.
    enum class Phase { prefill, tail, decode };
    struct Group {
      compiler::Options system;               // the peers, each with its weights (shared by every step's graph)
      std::vector<compiler::Options> shared;  // by chip: with the prefill's caches and weights
      std::vector<std::unique_ptr<compiler::Executable>> ex, tail, step;
      std::vector<std::unique_ptr<compiler::Executable>>& of(Phase p) { return p == Phase::prefill ? ex : p == Phase::tail ? tail : step; }
    };
    std::vector<Group> gs(groups);
    // --all-reduce: every chip of a group its shard's executables, the
    // group's collectives over its own chips, their rings' buffers at one
    // address on each of them.
    for (unsigned k = 0; k < (all_reduce ? groups : 0); ++k) {
      Group& gr = gs[k];
      compiler::Options o;
      o.symmetric = std::make_shared<compiler::SymmetricStore>(
          std::vector<rt::Device*>(devices.begin() + std::ptrdiff_t(k * per), devices.begin() + std::ptrdiff_t((k + 1) * per)));
      o.first_chip = k * per;
      const bool last = k + 1 == groups;  // (the other groups take copies of the shards' graphs)
      for (unsigned j = 0; j < per; ++j) {
        const unsigned d = k * per + j;
        gr.ex.push_back(std::make_unique<compiler::Executable>(*devices[d], programs[d], last ? std::move(shard_g[j]) : shard_g[j], o));
        gr.shared.push_back(o);
        gr.shared[j].state = gr.ex[j]->state(), gr.shared[j].weights = gr.ex[j]->weights();
        if (rest)
          gr.tail.push_back(std::make_unique<compiler::Executable>(*devices[d], programs[d], last ? std::move(shard_tail[j]) : shard_tail[j],
                                                                   gr.shared[j]));
      }
    }
    if (expert) {  // a group of one chip each, its own graphs; the all-to-alls' buffers at one address on every chip
      compiler::Options o;
      o.symmetric = std::make_shared<compiler::SymmetricStore>(devices);
      for (unsigned k = 0; k < chips; ++k) {
        Group& gr = gs[k];
        gr.system = o;
        gr.ex.push_back(std::make_unique<compiler::Executable>(*devices[k], programs[k], std::move(shard_g[k]), o));
        gr.shared = {o};
        gr.shared[0].state = gr.ex[0]->state(), gr.shared[0].weights = gr.ex[0]->weights();
        if (rest) gr.tail.push_back(std::make_unique<compiler::Executable>(*devices[k], programs[k], std::move(shard_tail[k]), gr.shared[0]));
      }
    }
    for (unsigned k = 0; k < (all_reduce || expert ? 0 : groups); ++k) {
      Group& gr = gs[k];
      gr.system.split_matmuls = compiler::Options::Split::always;
      for (unsigned j = 1; j < per; ++j) {
        rt::Device& d = *devices[k * per + j];
        gr.system.peers.push_back({&d, programs[k * per + j], std::make_shared<compiler::WeightStore>(d)});
      }
      rt::Device& d = *devices[k * per];
      const bool last = k + 1 == groups;
      gr.ex.push_back(std::make_unique<compiler::Executable>(d, programs[k * per], last ? std::move(g) : g, gr.system));
      gr.shared = {gr.system};
      gr.shared[0].state = gr.ex[0]->state(), gr.shared[0].weights = gr.ex[0]->weights();  // the prefill's caches and weights
      if (rest) gr.tail.push_back(std::make_unique<compiler::Executable>(d, programs[k * per], last ? std::move(tail) : tail, gr.shared[0]));
    }
    compiler::Executable& ex = *gs[0].ex[0];
    auto energy = [&] {
      double j = 0;
      for (rt::Device* d : devices) j += d->energy().joules;
      return j;
    };
    // One step of every group (each group's executable `pick` gives, with
    // its inputs): its outputs by group, the step's simulated seconds and
    // the busiest group's bound. One group runs as run() does; several
    // are started before any is waited for (a group of one chip: its
    // inputs and launch posted as one request) and their outputs read at
    // once, the step taking from the first start to the last group's end.
    // --all-reduce: every chip's shard run together (compiler::run_together),
    // every group's at once, the step taking the slowest chip's time, each
    // group's logits from its chips' columns.
    auto run_step = [&](Phase phase, const std::function<std::map<std::string, std::vector<float>>(unsigned)>& in, double& seconds,
                        roofline::Report& bound) {
      auto pick = [&](Group& gr) -> compiler::Executable& { return *gr.of(phase)[0]; };
      std::vector<std::map<std::string, std::vector<float>>> out(groups);
      if (all_reduce) {
        std::vector<compiler::Executable*> xs;
        std::vector<std::map<std::string, std::vector<float>>> ins;
        for (unsigned k = 0; k < groups; ++k) {
          const std::map<std::string, std::vector<float>> group_in = in(k);
          for (const auto& x : gs[k].of(phase)) xs.push_back(x.get()), ins.push_back(group_in);
        }
        const auto each = compiler::run_together(xs, ins);
        for (unsigned k = 0; k < groups; ++k) {
          const std::vector<std::map<std::string, std::vector<float>>> mine(each.begin() + std::ptrdiff_t(k * per),
                                                                            each.begin() + std::ptrdiff_t((k + 1) * per));
          out[k] = mine[0];
          out[k]["logits"] = shard_logits(mine, c.vocab);  // the group's chips' columns, read at once
        }
        seconds = 0;
        for (const compiler::Executable* x : xs)
          if (x->last_seconds() > seconds) seconds = x->last_seconds(), bound = x->last_bound();
        return out;
      }
      if (groups == 1) {
        compiler::Executable& x = pick(gs[0]);
        out[0] = x.run(in(0));
        seconds = x.last_seconds(), bound = x.last_bound();
        return out;
      }
      // (A group with peers starts as run() does, its device's launch
      // before its peers': a launch clears its chip's semaphores, through
      // which the peers hand over, and a posted launch could come after
      // theirs.)
      const double t0 = dev.simulated_seconds();
      for (unsigned k = 0; k < groups; ++k) {
        rt::Device& d = *devices[k * per];
        if (per == 1) d.hold_io();
        pick(gs[k]).start(in(k));
        if (per == 1) d.send_io();
      }
      for (unsigned k = 0; k < groups && per == 1; ++k) devices[k * per]->wait_io();
      for (unsigned k = 0; k < groups; ++k) pick(gs[k]).wait();
      seconds = dev.simulated_seconds() - t0;
      for (unsigned k = 0; k < groups; ++k) {
        compiler::Executable& x = pick(gs[k]);
        if (k == 0 || x.last_bound().seconds() > bound.seconds()) bound = x.last_bound();
        x.fetch();
      }
      for (unsigned k = 0; k < groups; ++k) devices[k * per]->wait_io(), out[k] = pick(gs[k]).outputs();
      if (expert && out[0].count("logits.part")) {  // the LM head by vocabulary: each chip's rows from every chip's columns
        std::vector<std::vector<float>> each = expert_logits(out, c.vocab);
        for (unsigned k = 0; k < groups; ++k) out[k]["logits"] = std::move(each[k]);
      }
      return out;
    };
    // Each sequence's prompt in steps of `chunk` tokens (one step unless it is longer).
    std::vector<std::vector<float>> logits(batch);  // by sequence
    // The chip's routes by sequence and layer (a MoE model's), the prompt's and then each decoded token's.
    std::vector<std::vector<std::vector<std::uint32_t>>> routes(batch);
    std::uint64_t steps = 0;  // each step's seeded scores (--routing seeded) its own
    auto inputs = [&](const std::vector<std::uint32_t>& t, const std::vector<unsigned>& at, const std::vector<unsigned>& of) {
      std::map<std::string, std::vector<float>> in = kv_pages(context).paged(share) ? llama_batch_inputs(t, at, of, share, context)
                                                                                : llama_inputs(t, at[0]);
      if (seeded_routes) route_seeds(c, layers, static_cast<unsigned>(t.size()), (std::uint64_t{seed} << 32) + steps++, in);
      return in;
    };
    double prefill_s = 0, prefill_bound = 0;
    roofline::Report r;
    // The energy and the simulator's own time of each phase.
    using Clock = std::chrono::steady_clock;
    const double j0 = energy();
    const Clock::time_point w0 = Clock::now();
    for (unsigned at = 0; at < prompt; at += chunk) {
      const unsigned n = std::min(chunk, prompt - at);
      double took = 0;
      roofline::Report b;
      const auto outs = run_step(n == chunk ? Phase::prefill : Phase::tail,
                                 [&](unsigned k) {
                                   std::vector<std::uint32_t> t;
                                   std::vector<unsigned> pos, of;
                                   for (unsigned j = 0; j < share; ++j)
                                     for (unsigned i = 0; i < n; ++i) t.push_back(prompts[k * share + j][at + i]), pos.push_back(start + at + i), of.push_back(j);
                                   return inputs(t, pos, of);
                                 },
                                 took, b);
      for (unsigned k = 0; k < groups; ++k) {
        const std::vector<float>& lo = outs[k].at("logits");
        const std::vector<std::vector<std::uint32_t>> step_routes = chip_routes(c, outs[k], layers);
        for (unsigned j = 0; j < share; ++j) {  // rows j n .. of the group's step are its sequence j's
          const unsigned sq = k * share + j;
          logits[sq].insert(logits[sq].end(), lo.begin() + std::ptrdiff_t(std::size_t{j} * n * c.vocab),
                            lo.begin() + std::ptrdiff_t(std::size_t{j + 1} * n * c.vocab));
          routes[sq].resize(step_routes.size());
          for (std::size_t l = 0; l < step_routes.size(); ++l) {
            const std::size_t rk = step_routes[l].size() / share;
            routes[sq][l].insert(routes[sq][l].end(), step_routes[l].begin() + std::ptrdiff_t(j * rk),
                                 step_routes[l].begin() + std::ptrdiff_t((j + 1) * rk));
          }
        }
      }
      prefill_s += took, prefill_bound += b.seconds();
      if (at == 0) r = b;
    }
    const unsigned prompt_tokens = prompt * batch;
    const double prefill_j = energy() - j0, prefill_wall = std::chrono::duration<double>(Clock::now() - w0).count();
    double decode_j = 0, decode_wall = 0, decode_s = 0;
    auto greedy = [&](const float* row) {
      return static_cast<std::uint32_t>(std::max_element(row, row + c.vocab) - row);
    };
    std::vector<std::vector<std::uint32_t>> sequences = prompts;
    for (unsigned sq = 0; sq < batch; ++sq) sequences[sq].push_back(greedy(logits[sq].data() + logits[sq].size() - c.vocab));
    const std::uint32_t next = sequences[0].back();
    unsigned scaled = 0, scaled_experts = 0;
    for (const compiler::Op& op : ex.graph().ops())
      if (compiler::block_scaled(op)) ++(op.kind == compiler::OpKind::moe ? scaled_experts : scaled);
    std::cout << fmt::format("{} ({}), {} of {} layers, {} weights: hidden {}, {} heads ({} KV), head_dim {}, vocabulary {}{}\n",
                             config, c.model_type, run_layers, c.layers, timing ? "no" : weights.empty() ? "seeded" : weights, c.hidden,
                             c.heads, c.kv_heads, c.head_dim, c.vocab,
                             c.experts ? fmt::format(", {} experts of {} hidden, top {}{}", c.experts, c.expert_intermediate,
                                                     c.experts_per_token,
                                                     c.shared_intermediate ? fmt::format(", a shared expert of {}", c.shared_intermediate)
                                                                           : std::string())
                                       : std::string());
    if (seeded_routes)
      std::cout << "routing: seeded (each token's experts chosen and gated by seeded scores, not by the router's logits, which are "
                   "still computed): the same with data and in the timing-only mode\n";
    auto ks = [](unsigned n) { return n == 1 ? std::string("k") : fmt::format("{} k to {} k + {}", n, n, n - 1); };
    if (expert)
      std::cout << fmt::format("{} chips ({}), expert parallel as DeepSeek lays it out (--parallel expert): chip k runs sequence{} {} "
                               "through the whole model but the routed experts, of which it holds expert e for e mod {} = k; each MoE "
                               "layer's rows go to their experts' chips and their sums come back by the chips' engines' all-to-alls, 3 a "
                               "layer, with no host round trip; {}; every chip's step started before any is waited for\n",
                               chips, opt.platform.substr(opt.platform.rfind('/') + 1), share > 1 ? "s" : "", ks(share), chips,
                               expert_head_by_vocab(c, chips)
                                   ? fmt::format("the LM head by vocabulary: every chip's rows gathered on each chip, which computes its "
                                                 "{} vocabulary columns of their logits (the host reading every chip's at once)", c.vocab / chips)
                                   : fmt::format("the LM head whole on each chip's rows ({} vocabulary columns do not divide over the "
                                                 "chips)", c.vocab));
    else if (groups > 1)
      std::cout << fmt::format("{} groups of {} chip{} (data parallel, --groups): group k runs sequence{} {} on chip{} {}{}; every "
                               "group's step is started before any is waited for\n", groups, per, per > 1 ? "s" : "",
                               share > 1 ? "s" : "", ks(share), per > 1 ? "s" : "", ks(per),
                               per == 1 ? "" : all_reduce ? ", each group's chips tensor parallel (below)"
                                                          : ", the first running the step with the others as its peers (below)");
    if (!why_spread.empty()) std::cout << "--parallel auto: spread, not Megatron's shards (" << why_spread << ")\n";
    if (all_reduce)
      std::cout << fmt::format("{}{} chips ({}), tensor parallel as Megatron lays it out ({}): every chip runs the step on its "
                               "shard, {}, its columns of Q, K, V, gate and up, those rows "
                               "of o_proj and down_proj{} and its {} vocabulary columns of the LM head (the host reads every chip's at once); the "
                               "chips' communication engines all-reduce the partial sums, 2 a layer, with no host round trip{}\n",
                               groups > 1 ? "each group's " : "", per, opt.platform.substr(opt.platform.rfind('/') + 1),
                               parallel == "auto" ? "--parallel auto: the model shards over the chips" : "--all-reduce",
                               c.mla ? fmt::format("{} query head{} (latent attention, below)", c.heads / per, c.heads / per > 1 ? "s" : "")
                                     : fmt::format("{} query heads and {} KV head{} with their caches", c.heads / per,
                                                   c.kv_heads >= per ? c.kv_heads / per : 1, c.kv_heads > per ? "s" : ""),
                               c.experts ? fmt::format(", in a MoE layer every expert's 1/{} of its intermediate columns, the routes computed "
                                                       "on every chip alike", per) : "",
                               c.vocab / per, groups > 1 ? " (each group's over its own chips)" : "");
    else if (const unsigned attention_chips = std::min(per, c.mla ? 1u : c.kv_heads); per > 1)  // (by whole KV heads: MLA's absorbed heads share one)
      std::cout << fmt::format("{}{} chips ({}): every matmul on a weight split by columns over the chips' tiles, each chip holding its "
                               "columns (tensor parallel; chip 0 pushes the activations to each peer, which writes its columns back){}; "
                               "attention by heads over {} chip{}, each keeping its KV heads' caches; the rest on {}\n",
                               groups > 1 ? "each group's " : "", per, opt.platform.substr(opt.platform.rfind('/') + 1),
                               c.experts ? ", the experts' slices likewise where they split over the chips, or the experts "
                                           "themselves (`experts:` below)" : "",
                               attention_chips, attention_chips > 1 ? "s" : "", groups > 1 ? "the group's first chip" : "chip 0");
    if (c.mla) {  // a graph's heads: a chip's shard under Megatron's layout, else all of them
      const unsigned hs = all_reduce ? c.heads / per : c.heads;
      std::cout << fmt::format("latent attention: {} head{} a graph, absorbed over the compressed cache ({} values a position a layer{}; "
                               "decompressed, its heads' keys and values would take {})\n", hs, hs > 1 ? "s" : "",
                               2 * c.kv_lora + c.qk_rope, chips > 1 ? " on every chip" : "",
                               std::uint64_t{hs} * (c.qk_nope + c.qk_rope + c.v_head));
    }
    std::cout << fmt::format("prefill of {} tokens{}{}{}: {} nodes, {:.2f} us simulated ({:.2f} us/token); next token {}{}\n", prompt,
                             start ? fmt::format(" at positions {} on", start) : std::string(),
                             batch > 1 ? fmt::format(" for each of {} sequences", batch) : std::string(),
                             prompt > chunk ? fmt::format(" in steps of {}{}", chunk, batch > 1 ? " each" : "") : std::string(), ex.groups().size(),
                             prefill_s * 1e6, prefill_s * 1e6 / prompt_tokens, next, batch > 1 ? " (sequence 0's)" : "");
    if (scaled || scaled_experts)
      std::cout << fmt::format("FP8: {} Linears{} block-scaled on the tensor core (the checkpoint's E4M3 codes and 128 x 128 scales, "
                               "activations cast in 1 x 128 groups); the rest in BF16\n", scaled,
                               scaled_experts ? fmt::format(" and {} layers' experts", scaled_experts) : "");
    // How a graph's experts run: the first moe op's split (each layer's alike).
    auto experts_split = [&](const compiler::Executable& x) -> std::string {
      for (const compiler::Op& op : x.graph().ops()) {
        if (op.kind != compiler::OpKind::moe) continue;
        const unsigned F = x.graph().tensor(op.in[2]).shape[2], S = std::max(1u, op.slices);
        return fmt::format("{} slices of {} hidden columns an expert{}, {}", S, F / S,
                           op.ep_chips           ? fmt::format(", chip 0's {} expert{} over the {} slots the chips sent it", x.graph().tensor(op.in[2]).shape[0],
                                                               x.graph().tensor(op.in[2]).shape[0] == 1 ? "" : "s", x.graph().tensor(op.in[0]).rows())
                           : op.expert_chips > 1 ? fmt::format(", the experts over {} chips (expert e on chip e mod {})", op.expert_chips,
                                                                   op.expert_chips)
                           : op.slice_chips.empty() ? ""
                                                    : fmt::format(" over {} chips", chips),
                           op.moe_chunk ? fmt::format("each streaming its weights in chunks of {} of the {} model columns", op.moe_chunk,
                                                      c.hidden)
                                        : "each loaded whole");
      }
      return {};
    };
    const std::string prefill_experts = experts_split(ex);
    if (!prefill_experts.empty()) std::cout << "experts: " << prefill_experts << "\n";
    std::cout << fmt::format("roofline: bound {:.2f} us ({}, {}{}): {:.1f}% of it\n", prefill_bound * 1e6, r.binding().resource,
                             r.binding().where, prompt > chunk || batch > 1 ? " in the first step" : "", 100 * prefill_bound / prefill_s);
    {  // where the time went: the slowest nodes
      const std::vector<double> t = ex.node_seconds();
      std::vector<std::size_t> order(t.size());
      for (std::size_t k = 0; k < order.size(); ++k) order[k] = k;
      std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return t[a] > t[b]; });
      std::string slow;
      for (std::size_t k = 0; k < std::min<std::size_t>(3, order.size()); ++k) {
        const compiler::Op& op = ex.graph().ops()[static_cast<std::size_t>(ex.groups()[order[k]].ops[0])];
        slow += fmt::format("{}{} ({}) {:.2f} us", k ? ", " : "", op.name, compiler::name(op.kind), t[order[k]] * 1e6);
      }
      std::cout << "slowest nodes: " << slow << "\n";
    }
    if (decode) {
      for (unsigned k = 0; k < (all_reduce ? groups : 0); ++k)
        for (unsigned j = 0; j < per; ++j)
          gs[k].step.push_back(std::make_unique<compiler::Executable>(*devices[k * per + j], programs[k * per + j],
                                                                      k + 1 == groups ? std::move(shard_step[j]) : shard_step[j],
                                                                      gs[k].shared[j]));
      for (unsigned k = 0; k < (expert ? chips : 0); ++k)
        gs[k].step.push_back(std::make_unique<compiler::Executable>(*devices[k], programs[k], std::move(shard_step[k]), gs[k].shared[0]));
      for (unsigned k = 0; k < (all_reduce || expert ? 0 : groups); ++k)
        gs[k].step.push_back(std::make_unique<compiler::Executable>(*devices[k * per], programs[k * per],
                                                                    k + 1 == groups ? std::move(step) : step, gs[k].shared[0]));
      compiler::Executable& dx = *gs[0].step[0];
      double took = 0, bound = 0;
      std::map<std::string, double> binding;  // the seconds each resource bound
      const double dj0 = energy();
      const Clock::time_point dw0 = Clock::now();
      for (unsigned i = 0; i < decode; ++i) {
        double step_s = 0;
        roofline::Report b;
        const auto outs = run_step(Phase::decode,
                                   [&](unsigned k) {
                                     std::vector<std::uint32_t> last(share);
                                     std::vector<unsigned> pos(share, start + prompt + i), of(share);
                                     for (unsigned j = 0; j < share; ++j) last[j] = sequences[k * share + j].back(), of[j] = j;
                                     return inputs(last, pos, of);
                                   },
                                   step_s, b);
        took += step_s, bound += b.seconds();
        binding[b.binding().resource] += b.seconds();
        for (unsigned k = 0; k < groups; ++k) {
          const std::vector<float>& lo = outs[k].at("logits");
          const std::vector<std::vector<std::uint32_t>> r = chip_routes(c, outs[k], layers);
          for (unsigned j = 0; j < share; ++j) {  // row j is the group's sequence j's
            const unsigned sq = k * share + j;
            logits[sq].insert(logits[sq].end(), lo.begin() + std::ptrdiff_t{j} * c.vocab, lo.begin() + std::ptrdiff_t{j + 1} * c.vocab);
            for (std::size_t l = 0; l < r.size(); ++l) {
              const std::size_t rk = r[l].size() / share;
              routes[sq][l].insert(routes[sq][l].end(), r[l].begin() + std::ptrdiff_t(j * rk), r[l].begin() + std::ptrdiff_t((j + 1) * rk));
            }
            if (i + 1 < decode) sequences[sq].push_back(greedy(lo.data() + std::size_t{j} * c.vocab));
          }
        }
      }
      decode_s = took, decode_j = energy() - dj0, decode_wall = std::chrono::duration<double>(Clock::now() - dw0).count();
      std::string decoded;
      for (std::size_t k = prompt; k < sequences[0].size(); ++k) decoded += fmt::format("{}{}", k > prompt ? " " : "", sequences[0][k]);
      if (batch == 1)
        std::cout << fmt::format("decode of {} tokens: {} nodes a step, {:.2f} us/token ({:.0f} tokens/s{}); decoded: {}\n", decode,
                                 dx.groups().size(), took * 1e6 / decode, decode / took,
                                 chips > 1 ? fmt::format(", {:.1f} per chip", decode / took / chips) : "", decoded);
      else
        std::cout << fmt::format("decode of {} tokens for each of {} sequences: {} nodes a step, {:.2f} us a step ({:.0f} tokens/s{}); "
                                 "sequence 0 decoded: {}\n", decode, batch, dx.groups().size(), took * 1e6 / decode,
                                 double(decode) * batch / took,
                                 chips > 1 ? fmt::format(", {:.1f} per chip", double(decode) * batch / took / chips) : "", decoded);
      const auto most = std::max_element(binding.begin(), binding.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
      std::cout << fmt::format("decode roofline: bound {:.2f} us/{} ({} binding): {:.1f}% of it\n", bound * 1e6 / decode,
                               batch > 1 ? "step" : "token", most->first, 100 * bound / took);
      if (const std::string d = experts_split(dx); !d.empty() && d != prefill_experts) std::cout << "decode's experts: " << d << "\n";
    }
    // Exactly (a timing-only run's are those of the same run with data).
    std::cout << fmt::format("simulated: prefill {} ps{}\n", std::llround(prefill_s * 1e12),
                             decode ? fmt::format(", decode {} ps", std::llround(decode_s * 1e12)) : "");
    std::cout << fmt::format("energy: prefill {:.2f} uJ/token{}; simulator wall time: prefill {:.2f} s ({:.3f} s/token){}\n",
                             prefill_j * 1e6 / prompt_tokens,
                             decode ? fmt::format(", decode {:.2f} uJ/token", decode_j * 1e6 / (decode * batch)) : "",
                             prefill_wall, prefill_wall / prompt_tokens,
                             decode ? fmt::format(", decode {:.3f} s/{}", decode_wall / decode, batch > 1 ? "step" : "token") : "");
    if (timing) {
      std::uint64_t held = 0;
      for (const Group& gr : gs) {
        for (const auto& x : gr.ex) held += x->weights()->bytes();
        for (const compiler::Options::Peer& p : gr.system.peers) held += p.weights->bytes();
      }
      std::cout << fmt::format("timing only: the tensor cores computed no products (seeded results); {:.2f} GB of weights placed in "
                               "HBM{} and never written\n", static_cast<double>(held) / 1e9,
                               chips > 1 ? fmt::format(" over {} chips ({:.2f} GB on chip 0)", chips, ex.weights()->bytes() / 1e9) : "");
    }
    if (check) {
      // A MoE model's reference follows the chip's routes (and counts where
      // its own FP32 top k differs); each sequence of a batch on its own.
      unsigned sparse_layers = 0;
      for (unsigned l = 0; l < run_layers; ++l) sparse_layers += c.sparse(l);
      unsigned disagree = 0;
      double worst = 0, scale = 0;
      for (unsigned sq = 0; sq < batch; ++sq) {
        const std::vector<std::uint32_t> fed(sequences[sq].begin(), sequences[sq].begin() + prompt + decode);
        unsigned differ = 0;
        const std::vector<float> ref = llama_reference(c, w, fed, layers, c.experts ? &routes[sq] : nullptr, &differ);
        disagree += differ;
        for (std::size_t i = 0; i < ref.size(); ++i)
          worst = std::max(worst, std::fabs(double(logits[sq][i]) - ref[i])), scale = std::max(scale, std::fabs(double(ref[i])));
      }
      // BF16 operands: 5e-2 (the main job's bound); E4M3 ones (a
      // checkpoint's block-scaled Linears) keep 3 mantissa bits, not 8: 1e-1.
      const double bound = scaled || scaled_experts ? 1e-1 : 5e-2;
      const bool ok = worst <= bound * scale;
      std::cout << fmt::format("check: max relative logit error {:.3g} against the FP32 reference (bound {}){}: {}\n",
                               worst / scale, scaled || scaled_experts ? "1e-1" : "5e-2",
                               c.experts ? fmt::format(", on the chip's routes ({} of {} token-layer routes differ from its own)",
                                                       disagree, std::size_t{prompt + decode} * batch * sparse_layers)
                                         : std::string(),
                               ok ? "ok" : "FAILED");
      if (!ok) return 1;
    }
    return 0;
  } catch (const rt::DeviceError& e) {
    std::cerr << "tessera demo: device error: " << e.what() << "\n";
    return 3;
  } catch (const std::exception& e) {
    return fail(e.what());
  }
}

}  // namespace tessera::hf
