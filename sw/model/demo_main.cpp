// The main job: a small Llama-style MoE decoder on a virtual T1 through the
// host runtime. Prefills a prompt, decodes greedily, checks every step's
// logits against the host FP32 reference, and reports tokens, virtual time
// per token, utilisation, HBM bandwidth and where the time went. Run by
// tessera-vp with no arguments (or `tessera-vp demo ...`) and by
// tessera-demo.
#include <fmt/format.h>

#include <chrono>
#include <numeric>
#include <memory>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "hf_demo.hpp"
#include "demo.hpp"
#include "ranks.hpp"
#include "spec.hpp"
#include <fstream>

#include "compiled.hpp"
#include "model.hpp"
#include "serve.hpp"
#include "speculative.hpp"

using namespace tessera;

namespace {
int usage(const char* why) {
  std::fprintf(stderr, "tessera demo: %s\nusage: tessera-vp demo [--tiny] [--fp8] [--launches] [--device-dispatch] [--compiled | --hand-written] [--batch B] [--serve RATE [--requests N] | --serve-from TRACE.csv] [--chips 1|4|8|16|32|64 [--data-parallel | --expert-parallel | --all-reduce]] [--prompt N (1-256)] [--decode N] [--seed S] [--speculate K [--acceptance A] [--draft first-layer|small]] [--trace FILE.json] [--waves FILE.vcd] [--stats FILE.json] [--set inst.key=value ...] [--placement R,R,... (under mpirun)]\n       tessera-vp demo --hf-config FILE.json [--weights FILE|DIR] [--layers N] [--prompt N] [--decode N] [--seed S] [--batch B] [--chips 1|4|8|16|32|64 [--parallel auto|spread|all-reduce|expert] [--groups G]] [--check] [--timing-only] [--routing model|seeded] [--set inst.key=value ...]\n", why);
  return 2;
}
bool number(const char* s, unsigned& out) {
  char* end = nullptr;
  const unsigned long v = std::strtoul(s, &end, 10);
  if (!*s || *end || v > 100000) return false;
  out = static_cast<unsigned>(v);
  return true;
}
}  // namespace

int tessera::model::demo_main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--hf-config") == 0) return hf::demo_main(argc, argv);  // a Hugging Face model instead
  model::Config c;
  unsigned prompt = 32, decode = 32, seed = 1, speculate = 0, chips = 1;
  bool launches = false;  // a launch per phase, waited for, instead of a graph per step
  bool data_parallel = false;  // --data-parallel: each chip the whole model and its share of the sequences
  bool all_reduce = false;     // --all-reduce: each chip its shard of every step (Megatron's layout)
  bool expert_parallel = false;  // --expert-parallel: data parallel, each chip its experts, rows dispatched by all-to-alls
  // The model compiled from its graph (sw/compiler, compiled.hpp): the
  // default, in BF16 or FP8, on one chip or several, for one sequence, a
  // batch, serving and speculative decoding; DeviceModel's hand-written
  // programs where --hand-written says, and for the study modes of those
  // programs (--launches, --device-dispatch).
  bool compiled = false, hand_written = false;
  unsigned batch = 1;     // sequences decoded at once
  double serve_rate = 0;  // --serve: requests a second
  std::string serve_from;  // --serve-from: a trace of requests
  unsigned requests = 32;
  double acceptance = -1;  // steer the draft to this acceptance (speculative.hpp); < 0: the draft as it is
  std::string draft_kind = "first-layer";  // --draft: the target's first layer, or a small model of its own
  rt::Device::Options opt;
  std::string stats_file;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](unsigned& out) { return i + 1 < argc && number(argv[++i], out); };
    if (a == "--tiny") c.layers = 2, c.d_model = 128, c.heads = 8, c.experts = 4, c.hidden = 256, c.vocab = 512, c.context = 64;
    else if (a == "--prompt") { if (!value(prompt)) return usage("--prompt takes a number of tokens"); }
    else if (a == "--decode") { if (!value(decode)) return usage("--decode takes a number of tokens"); }
    else if (a == "--fp8") c.fp8 = true;
    else if (a == "--device-dispatch") c.device_dispatch = true;
    else if (a == "--launches") launches = true;
    else if (a == "--compiled") compiled = true;
    else if (a == "--hand-written") hand_written = true;
    else if (a == "--batch") { if (!value(batch) || !batch || batch > 64) return usage("--batch takes 1 to 64 sequences"); }
    else if (a == "--serve") {
      char* end = nullptr;
      if (i + 1 >= argc || (serve_rate = std::strtod(argv[++i], &end), *end) || !(serve_rate > 0 && serve_rate <= 1e9))
        return usage("--serve takes a rate of requests a second (above 0)");
    }
    else if (a == "--serve-from") {
      if (i + 1 >= argc) return usage("--serve-from takes a trace file (CSV: arrival_s,prompt_tokens,output_tokens)");
      serve_from = argv[++i];
    }
    else if (a == "--requests") { if (!value(requests) || !requests) return usage("--requests takes a number of requests"); }
    else if (a == "--seed") { if (!value(seed)) return usage("--seed takes a number"); }
    else if (a == "--speculate") { if (!value(speculate) || !speculate || speculate > 16) return usage("--speculate takes a draft length of 1 to 16"); }
    else if (a == "--acceptance") {
      char* end = nullptr;
      if (i + 1 >= argc || (acceptance = std::strtod(argv[++i], &end), *end) || !(acceptance >= 0 && acceptance <= 1))
        return usage("--acceptance takes a rate from 0 to 1");
    }
    else if (a == "--draft") {
      if (i + 1 >= argc || ((draft_kind = argv[++i]) != "first-layer" && draft_kind != "small"))
        return usage("--draft takes first-layer (the target's first layer, its LM head) or small (a model of a quarter of the width, one layer)");
    }
    else if (a == "--chips") { if (!value(chips) || (chips != 1 && chips != 4 && chips != 8 && chips != 16 && chips != 32 && chips != 64)) return usage("--chips takes 1, 4 (platform/t1x4-ring.json), 8, 16, 32 or 64 (platform/t1xN-torus.json)"); }
    else if (a == "--data-parallel") data_parallel = true;
    else if (a == "--all-reduce") all_reduce = true;
    else if (a == "--expert-parallel") expert_parallel = true;
    else if (a == "--trace") { if (i + 1 >= argc) return usage("--trace takes a file (FILE.json)"); opt.trace = argv[++i]; }
    else if (a == "--waves") { if (i + 1 >= argc) return usage("--waves takes a file (FILE.vcd)"); opt.waves = argv[++i]; }
    else if (a == "--stats") { if (i + 1 >= argc) return usage("--stats takes a file (FILE.json)"); stats_file = argv[++i]; }
    else if (a == "--placement") { if (i + 1 >= argc) return usage("--placement takes each chip's rank, comma-separated (0,0,1,1,...)"); opt.placement = argv[++i]; }
    else if (a == "--set") { if (i + 1 >= argc) return usage("--set takes inst.key=value"); opt.sets.push_back(argv[++i]); }
    else return usage(("unknown option " + a).c_str());
  }
  c.seed = seed;
  // Long full-system runs take the fast models unless told otherwise: the
  // packet-level NoC and the calibrated HBM (`--set noc.model=flit`,
  // `--set hbm0.mode=detailed` ... choose the detailed ones).
  try {
    opt.sets = PlatformSpec::fast_models(rt::Device::default_platform(), opt.sets);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tessera demo: %s\n", e.what());
    return 2;
  }
  if (!prompt || prompt > 256) return usage("--prompt must be 1 to 256 tokens (longer than a step takes, 64 hand-written, 256 compiled: prefilled in steps)");
  if (!stats_file.empty() && !std::ofstream(stats_file, std::ios::app)) return usage("--stats: cannot write the file");
  if (chips == 1 && launched_ranks() > 1)
    return usage("under mpirun the main job spreads a system's chips over the ranks (--chips 4 to 64); one chip runs in "
                 "one process, without mpirun");
  if (chips > 1 && speculate) return usage("--speculate runs on one chip");
  if (expert_parallel && chips == 1) return usage("--expert-parallel spreads the experts over a system's chips (--chips 4 to 64)");
  if (expert_parallel && all_reduce) return usage("--all-reduce or --expert-parallel, not both");
  if (expert_parallel && hand_written) return usage("--expert-parallel runs the compiled model (not --hand-written)");
  data_parallel = data_parallel || expert_parallel;  // each chip its own sequences, as with --data-parallel
  if (data_parallel && chips == 1) return usage("--data-parallel spreads a batch's sequences over a system's chips (--chips 4 to 64)");
  if (data_parallel && hand_written) return usage("--data-parallel runs the compiled model (not --hand-written)");
  if (all_reduce && chips == 1) return usage("--all-reduce lays each step out over a system's chips (--chips 4 to 64)");
  if (all_reduce && data_parallel) return usage("--all-reduce or --data-parallel, not both");
  if (all_reduce && hand_written) return usage("--all-reduce runs the compiled model (not --hand-written)");
  if (!opt.placement.empty() && (chips == 1 || launched_ranks() < 2))
    return usage("--placement places a system's chips (--chips 4 to 64) on the ranks of an mpirun");
  if (batch > 1 && speculate) return usage("--speculate decodes one sequence (no --batch)");
  if (draft_kind != "first-layer" && !speculate) return usage("--draft goes with --speculate");
  if (serve_rate > 0 && !serve_from.empty()) return usage("--serve and --serve-from: one stream of requests at a time");
  std::vector<model::Request> trace;  // --serve-from's requests
  if (!serve_from.empty()) {
    try {
      trace = model::trace_requests(serve_from, c.context, c.vocab, seed);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "tessera demo: %s\n", e.what());
      return 2;
    }
  }
  const bool serving = serve_rate > 0 || !trace.empty();
  if (serving && speculate) return usage("--serve and --speculate do not go together");
  if (serving && batch == 1) batch = 16;  // serving: up to 16 requests at once unless --batch says
  if (serve_rate > 0 && c.context < 64) return usage("--serve needs a context of 64 (prompts and outputs up to 32 each)");
  c.max_sequences = batch;
  if (acceptance >= 0 && !speculate) return usage("--acceptance needs --speculate K");
  if (compiled && hand_written) return usage("--compiled or --hand-written, not both");
  const bool compilable = !launches && !c.device_dispatch;
  if (compiled && !compilable) return usage("--compiled runs the graph as one launch a step (not with --launches or --device-dispatch)");
  compiled = compiled || (compilable && !hand_written);
  if (data_parallel && !compiled) return usage("--data-parallel runs the compiled model (not with --launches or --device-dispatch)");
  if (all_reduce && !compiled) return usage("--all-reduce runs the compiled model (not with --launches or --device-dispatch)");
  if (chips > 1 && c.device_dispatch) return usage("--device-dispatch runs on one chip (on several the host dispatches)");
  // A step is one graph where it can be (BF16 on one chip: the tiles
  // dispatch the experts); --launches, FP8 and several chips run a launch
  // per phase.
  if (!launches && !c.fp8 && chips == 1 && !compiled) c.graph = c.device_dispatch = true;
  if (chips > 1) opt.platform = rt::Device::system_platform(chips);
  if (prompt + decode > c.context) return usage("prompt + decode must fit the context");
  try {
    if (all_reduce) model::check_compilable(c, chips);
    if (expert_parallel) model::check_expert_parallel(c, chips);
  } catch (const rt::UsageError& e) {
    return usage(e.what());
  }
  const auto wall0 = std::chrono::steady_clock::now();
  try {
    // The chips first: under mpirun, the ranks other than 0 serve theirs
    // from here on and print nothing.
    rt::Chips system_chips(opt, chips > 1);
    const std::vector<rt::Device*>& devices = system_chips.all;
    rt::Cluster* const cluster = system_chips.cluster.get();
    std::printf("Tessera T1: MoE decoder, %u layers, d_model %u, %u heads, %u experts (top-2, SwiGLU %u), vocabulary %u, %s\n",
                c.layers, c.d_model, c.heads, c.experts, c.hidden, c.vocab,
                c.fp8 ? "FP8 weights and GEMM inputs (E4M3, block scales)" : "BF16");
    if (compiled)
      std::printf("compiled from the model's graph (sw/compiler): each step one launch of its compiled graph, the experts "
                  "dispatched by the tiles, attention over KV caches on the tiles\n");
    else
      std::printf("experts dispatched by the %s; %s\n", c.device_dispatch ? "tiles (from the router's output)" : "host (it reads the router's choices)",
                  c.graph ? "each step one graph: its phases run on the device with barriers between them, one launch a step"
                          : "a launch per phase, each waited for by the host");
    if (expert_parallel)
      std::printf("%u chips (%s), expert parallel as DeepSeek lays it out (--expert-parallel): each chip its own sequences "
                  "(sequence s on chip s %% %u) through the whole model but the experts, of which it holds expert e for e %% %u = "
                  "its number; each layer's rows go to their experts' chips and their sums come back by the chips' engines' "
                  "all-to-alls, 3 a layer, from the tile programs; every chip runs every step\n",
                  chips, opt.platform.substr(opt.platform.rfind('/') + 1).c_str(), chips, chips);
    else if (data_parallel)
      std::printf("%u chips (%s), data parallel: each chip the whole model (its own copy of the weights, its own KV caches) "
                  "and sequence s on chip s %% %u; every chip's step launched at once, nothing exchanged between them\n",
                  chips, opt.platform.substr(opt.platform.rfind('/') + 1).c_str(), chips);
    else if (all_reduce)
      std::printf("%u chips (%s), tensor parallel as Megatron lays it out (--all-reduce): every chip runs each step on its shard, "
                  "%u heads with their caches, its %u of every expert's %u hidden columns and its %u vocabulary columns of the LM "
                  "head; the chips' communication engines all-reduce the partial sums of Wo and of the experts, 2 a layer, from the "
                  "tile programs\n",
                  chips, opt.platform.substr(opt.platform.rfind('/') + 1).c_str(), c.heads / chips, c.hidden / chips, c.hidden,
                  c.vocab / chips);
    else if (chips > 1 && compiled)
      std::printf("%u chips (%s): each layer's experts split in slices over the tiles of chips 0-%u (tensor parallel), chip 0 "
                  "pushing the rows to them and their tiles sending their sums back, the chips handing over through each other's "
                  "semaphores%s\n",
                  chips, opt.platform.substr(opt.platform.rfind('/') + 1).c_str(), std::min(chips, c.experts) - 1,
                  c.fp8 ? " (in FP8 only where the experts' hidden layer has a 128-column block for every HBM stack of those chips; "
                          "else on chip 0)"
                        : "");
    else if (chips > 1)
      std::printf("%u chips (%s): expert parallel, expert e on chip e %% %u; routed rows go out and results come back "
                  "through the chips' communication engines (all-to-all, push)\n",
                  chips, opt.platform.substr(opt.platform.rfind('/') + 1).c_str(), chips);
    std::string models;
    for (const auto& s : opt.sets) models += (models.empty() ? "" : ", ") + s;
    std::printf("platform settings: %s\n", models.c_str());
    const model::Weights w = model::Weights::random(c);
    rt::Device& dev = *devices[0];
    const double boot = dev.simulated_seconds();
    // Prompts prefilled in one step: as many as a step of `most` tokens
    // holds, that many on each chip where the sequences spread over the
    // chips (data parallel: consecutive sequences take turns over the
    // chips, so each chip's share of such a group is one of its steps).
    auto prefilled_together = [&](unsigned most) { return std::max(1u, most / prompt) * (data_parallel ? chips : 1); };
    std::unique_ptr<model::Model> m;
    if (compiled) {
      // Compiled (and its weights uploaded) before the prompt: the steps of
      // the prefill's lengths and of the decode steps' (one token a sequence).
      std::unique_ptr<model::CompiledModel> cm;
      std::unique_ptr<model::DataParallel> dp;
      if (data_parallel) dp = std::make_unique<model::DataParallel>(devices, c, w, expert_parallel);
      else
        cm = std::make_unique<model::CompiledModel>(devices, c, w, all_reduce ? model::CompiledModel::Layout::all_reduce
                                                                              : model::CompiledModel::Layout::spread);
      // The step of `rows` tokens of each of sequences b0 .. b1 - 1.
      auto prepare = [&](unsigned b0, unsigned b1, unsigned rows) {
        if (cm) return static_cast<void>(cm->executable((b1 - b0) * rows));
        std::vector<model::Model::Seq> seqs;
        for (unsigned b = b0; b < b1; ++b) seqs.push_back({b, std::vector<std::uint32_t>(rows, 0), 0});
        dp->prepare(seqs);
      };
      if (!serving && !speculate) {
        const unsigned most = cm ? cm->max_step_tokens() : dp->max_step_tokens();
        const unsigned group = prompt > most ? 0 : prefilled_together(most);
        for (unsigned b = 0; prompt > most && b < batch; ++b) {
          prepare(b, b + 1, most);
          if (prompt % most) prepare(b, b + 1, prompt % most);
        }
        for (unsigned b = 0; group && b < batch; b += group) prepare(b, std::min(batch, b + group), prompt);
        if (decode) prepare(0, batch, 1);
      }
      if (cm) m = std::move(cm);
      else m = std::move(dp);
    } else {
      m = std::make_unique<model::DeviceModel>(devices, c, w);
    }
    const double loaded = dev.simulated_seconds();
    if (speculate) {
      // Plain greedy decoding against speculative decoding with a one-layer
      // draft (the target's first layer, or a small model of its own): the
      // same tokens, fewer target steps.
      model::Config dc;
      const model::Weights dw = draft_kind == "small" ? model::small_draft(c, dc) : model::first_layer_draft(c, w, dc);
      const std::string what = draft_kind == "small" ? fmt::format("small draft: 1 layer, d_model {}, {} heads, {} experts of {} hidden, "
                                                                  "{:.1f} M weights against the target's {:.1f} M",
                                                                  dc.d_model, dc.heads, dc.experts, dc.hidden, dw.count() / 1e6, w.count() / 1e6)
                                                    : std::string("one-layer draft");
      std::unique_ptr<model::Model> draft;
      if (compiled) draft = std::make_unique<model::CompiledModel>(dev, dc, dw);
      else draft = std::make_unique<model::DeviceModel>(dev, dc, dw);
      std::vector<std::uint32_t> p(prompt);
      for (unsigned i = 0; i < prompt; ++i) p[i] = (i * 2654435761u + seed) % c.vocab;
      const model::Decoded plain = model::greedy(dev, *m, p, decode);
      model::Steering steer;
      steer.rate = acceptance, steer.seed = seed, steer.reference = &plain.tokens;
      const model::Decoded spec = model::speculative(dev, *m, *draft, p, decode, speculate, acceptance >= 0 ? &steer : nullptr);
      std::printf("speculative decoding, draft length %u (%s): acceptance %.2f (%u of %u proposals)\n", speculate,
                  acceptance >= 0 ? fmt::format("{} steered to {:.2f}", what, acceptance).c_str() : what.c_str(),
                  spec.acceptance(), spec.accepted, spec.proposed);
      std::printf("target steps %u against %u plain; virtual time %.1f us against %.1f us plain: speed-up %.2fx\n",
                  spec.target_steps, plain.target_steps, spec.seconds * 1e6, plain.seconds * 1e6,
                  plain.seconds / spec.seconds);
      // Against the analytic expectation: with acceptance a and a draft step
      // costing c plain steps, a verifying step yields (1 - a^(k+1)) / (1 - a)
      // tokens for the cost of 1 + k c plain steps.
      const double step = plain.target_seconds / std::max(1u, plain.target_steps - 1);
      const double c_draft = spec.draft_seconds / std::max(1u, spec.draft_steps - 1) / step;
      const double verify = spec.target_seconds / std::max(1u, spec.target_steps - 1) / step;
      // The formula's a is the chance each proposal is right given the ones
      // before it were: the per-token rate whose rounds accept, on average,
      // a + a^2 + ... + a^k proposals, as measured.
      const double k = speculate, per_round = static_cast<double>(spec.accepted) / std::max(1u, spec.target_steps - 1);
      auto accepted_at = [&](double x) {
        double sum = 0, p = 1;
        for (unsigned i = 0; i < speculate; ++i) p *= x, sum += p;
        return sum;
      };
      double lo = 0, hi = 1;
      for (int i = 0; i < 60; ++i) (accepted_at((lo + hi) / 2) < per_round ? lo : hi) = (lo + hi) / 2;
      const double a = (lo + hi) / 2;
      const double expected = (a < 1 - 1e-9 ? (1 - std::pow(a, k + 1)) / (1 - a) : k + 1) / (1 + k * c_draft);
      const double measured = (plain.target_seconds) / (spec.target_seconds + spec.draft_seconds);
      std::printf("step costs: plain decoding %.1f us; draft %.1f us (c = %.3f of a plain step); verifying %u tokens %.1f us "
                  "(%.2f plain steps)\n", step * 1e6, c_draft * step * 1e6, c_draft, speculate + 1, verify * step * 1e6, verify);
      std::printf("decode speed-up (after the prompt): measured %.2fx, analytic (1 - a^(k+1)) / (1 - a) / (1 + k c) "
                  "%.2fx (%+.0f%%), a = %.3f a token (%.2f proposals accepted a round)\n",
                  measured, expected, 100 * (measured / expected - 1), a, per_round);
      // The same with the verifying step at its own cost (v plain steps: a
      // MoE verifying k + 1 tokens wakes more experts than one token does).
      const double with_v = (a < 1 - 1e-9 ? (1 - std::pow(a, k + 1)) / (1 - a) : k + 1) / (verify + k * c_draft);
      std::printf("analytic with the verifying step's cost, (1 - a^(k+1)) / (1 - a) / (v + k c): %.2fx (the run %+.0f%%)\n",
                  with_v, 100 * (measured / with_v - 1));
      std::printf("tokens identical to plain greedy decoding: %s\n", spec.tokens == plain.tokens ? "yes" : "NO");
      return spec.tokens == plain.tokens ? 0 : 1;
    }
    // B sequences (sequence 0's prompt is the one a single run takes), each
    // checked against its own reference.
    std::vector<model::Reference> refs;
    std::vector<std::vector<std::uint32_t>> prompts(batch);
    for (unsigned b = 0; b < batch; ++b) {
      refs.emplace_back(c, w);
      for (unsigned i = 0; i < prompt; ++i) prompts[b].push_back((i * 2654435761u + seed + 7919u * b) % c.vocab);
    }
    const std::vector<std::uint32_t> tokens_in = prompts[0];
    std::printf("prompt:");
    for (auto t : prompts[0]) std::printf(" %u", t);
    std::printf("\n");
    if (batch > 1 && !serving)
      std::printf("batch of %u sequences (their own prompts and paged KV caches): prefilled %u at a time, decoded together\n",
                  batch, prefilled_together(m->max_step_tokens()));
    unsigned disagreements = 0;
    double worst = 0, prefill_s = 0, decode_s = 0, prefill_j = 0, decode_j = 0;
    // Energy of every chip (dynamic from the IPs' activity, leakage over time), in joules.
    auto energy = [&] {
      double j = 0;
      for (rt::Device* d : devices) j += d->energy().joules;
      return j;
    };
    if (serving) {
      // Continuous batching of a seeded Poisson stream of requests, or of a trace's (serve.hpp).
      const auto reqs = trace.empty() ? model::poisson_requests(requests, serve_rate, 8, 32, 8, 32, c.vocab, seed) : trace;
      if (trace.empty()) {
        std::printf("serving %u requests arriving at %.0f a second (Poisson, seed %u; prompts of 8-32 tokens, 8-32 outputs), "
                    "up to %u at once, 64 tokens a step\n", requests, serve_rate, seed, batch);
      } else {
        std::size_t p0 = ~std::size_t{0}, p1 = 0;
        unsigned o0 = ~0u, o1 = 0;
        for (const model::Request& r : reqs)
          p0 = std::min(p0, r.prompt.size()), p1 = std::max(p1, r.prompt.size()), o0 = std::min(o0, r.outputs), o1 = std::max(o1, r.outputs);
        std::printf("serving %zu requests from %s over %.1f us (prompts of %zu-%zu tokens, %u-%u outputs; seeded tokens, seed %u), "
                    "up to %u at once, 64 tokens a step\n",
                    reqs.size(), serve_from.c_str(), reqs.back().arrival * 1e6, p0, p1, o0, o1, seed, batch);
      }
      model::Served sv = model::serve(dev, *m, reqs, energy);
      // The idle stretches the serving loop skipped: the chips leak through them.
      double leakage_w = 0;
      for (rt::Device* d : devices)
        for (double w : d->energy().static_watts) leakage_w += w;
      sv.joules += leakage_w * sv.idle;
      std::printf("served in %.1f us of virtual time (%.1f us of it idle, skipped), %u steps: %.0f output tokens/s (%u "
                  "outputs, %u prompt tokens); energy %.1f uJ per output token (idle leakage included)\n",
                  sv.seconds * 1e6, sv.idle * 1e6, sv.steps, sv.tokens_per_s(), sv.output_tokens, sv.prompt_tokens,
                  sv.output_tokens ? sv.joules * 1e6 / sv.output_tokens : 0.0);
      std::printf("time to first token: p50 %.1f us, p99 %.1f us; time per output token: p50 %.1f us, p99 %.1f us\n",
                  model::quantile(sv.ttft, 0.5) * 1e6, model::quantile(sv.ttft, 0.99) * 1e6,
                  model::quantile(sv.tpot, 0.5) * 1e6, model::quantile(sv.tpot, 0.99) * 1e6);
      std::printf("wall time %.1f s\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count());
      return 0;
    }
    std::vector<std::uint32_t> out;
    // The work of prefill and of decode against the roofline: every chip's
    // counters before prefill, between the two, and at the end.
    std::vector<nlohmann::ordered_json> at_prefill(devices.size()), at_decode(devices.size()), at_end(devices.size());
    auto snapshot = [&](std::vector<nlohmann::ordered_json>& at) {
      for (std::size_t k = 0; k < devices.size(); ++k) at[k] = devices[k]->stats();
    };
    // The chip whose work is bound the longest (its name in `where` on several chips).
    auto bound_of = [&](const std::vector<nlohmann::ordered_json>& from, const std::vector<nlohmann::ordered_json>& to) {
      roofline::Report worst;
      for (std::size_t k = 0; k < devices.size(); ++k) {
        roofline::Report r = devices[k]->roofline(from[k], to[k]);
        if (devices.size() > 1)
          for (roofline::Bound& b : r.bounds) b.where = fmt::format("chip {} {}", k, b.where);
        if (k == 0 || r.seconds() > worst.seconds()) worst = r;
      }
      return worst;
    };
    // Prefill (the sequences in groups of at most a step's tokens, 64
    // hand-written, 256 compiled), then `decode` steps of every sequence at
    // once; the last step's tokens are not kept.
    const unsigned most = m->max_step_tokens();
    std::vector<unsigned> pos(batch, 0);
    std::vector<std::uint32_t> last(batch);
    auto run = [&](const std::vector<model::Model::Seq>& step, bool prefilling) {
      std::vector<std::vector<std::uint32_t>> routes;
      std::vector<std::uint32_t> next;
      const double t0 = dev.simulated_seconds(), j0 = energy();
      const auto logits = batch > 1 ? m->step(step, &next, &routes) : m->step(step[0].tokens, step[0].pos, &last[0], &routes);
      if (batch == 1) next = {last[0]};
      (prefilling ? prefill_s : decode_s) += dev.simulated_seconds() - t0;
      (prefilling ? prefill_j : decode_j) += energy() - j0;
      unsigned row = 0;
      for (std::size_t i = 0; i < step.size(); ++i) {
        const unsigned b = step[i].seq, rows = static_cast<unsigned>(step[i].tokens.size());
        std::vector<std::vector<std::uint32_t>> own(routes.size());
        for (std::size_t l = 0; l < routes.size(); ++l)
          own[l].assign(routes[l].begin() + 2 * row, routes[l].begin() + 2 * (row + rows));
        const auto want = refs[b].step(step[i].tokens, step[i].pos, own, &disagreements);
        double err = 0, scale = 0;
        for (std::size_t k = 0; k < want.size(); ++k) {
          const float got = logits[std::size_t{row} * c.vocab + k];
          err = std::max(err, double(std::fabs(got - want[k]))), scale = std::max(scale, double(std::fabs(want[k])));
        }
        worst = std::max(worst, err / scale);
        pos[b] += rows;
        last[b] = next[i];
        row += rows;
      }
    };
    snapshot(at_prefill);
    if (prompt > most) {
      // A long prompt: each sequence's in steps of `most` tokens.
      for (unsigned b = 0; b < batch; ++b)
        for (unsigned at = 0; at < prompt; at += most) {
          const unsigned n = std::min(most, prompt - at);
          run({{b, std::vector<std::uint32_t>(prompts[b].begin() + at, prompts[b].begin() + at + n), at}}, true);
        }
    }
    for (unsigned b0 = 0; b0 < batch && prompt <= most;) {
      std::vector<model::Model::Seq> group;
      for (const unsigned n = prefilled_together(most); b0 < batch && group.size() < n; ++b0) group.push_back({b0, prompts[b0], 0});
      run(group, true);
    }
    if (decode) out.push_back(last[0]);
    snapshot(at_decode);
    for (unsigned step = 1; step <= decode; ++step) {
      std::vector<model::Model::Seq> all;
      for (unsigned b = 0; b < batch; ++b) all.push_back({b, {last[b]}, pos[b]});
      run(all, false);
      if (step < decode) out.push_back(last[0]);
    }
    std::printf("decoded:");
    for (auto t : out) std::printf(" %u", t);
    std::printf("\n");
    // BF16 rounds the GEMMs' activations in steps of 2^-8 relative, E4M3 in 2^-3.
    const double bound = c.fp8 ? 0.15 : 0.05;
    std::printf("logits vs host FP32 reference: max relative error %.3g (bound %.2g for %s), routing disagreements %u\n",
                worst, bound, c.fp8 ? "FP8" : "BF16", disagreements);
    snapshot(at_end);
    if (!decode) at_decode = at_end;
    const roofline::Report prefill_bound = bound_of(at_prefill, at_decode), decode_bound = bound_of(at_decode, at_end);
    const auto s = cluster ? cluster->stats() : dev.stats();
    const double total = dev.simulated_seconds() - loaded;
    double tensor = 0, vector = 0, core = 0, dma = 0, dma_bytes = 0, hbm_bytes = 0, link_bytes = 0;
    const unsigned all_tiles = dev.tiles() * static_cast<unsigned>(devices.size());
    for (unsigned k = 0; k < devices.size(); ++k) {
      const std::string chip = cluster ? "chip" + std::to_string(k) + "." : "device.";
      for (unsigned t = 0; t < dev.tiles(); ++t) {
        const auto& q = s[chip + "tile" + std::to_string(t)];
        tensor += q["tensor_busy_cycles"].get<double>() / 1.5e9;
        vector += q["vector_busy_cycles"].get<double>() / 1.5e9;
        core += q["core_cycles"].get<double>() / 1e9;
        dma += q["dma_busy_cycles"].get<double>() / 1.5e9;
        dma_bytes += q["dma_global_bytes"].get<double>();
      }
      for (unsigned h = 0; h < 4; ++h) {
        const std::string q = chip + "hbm" + std::to_string(h);
        if (s.contains(q)) hbm_bytes += s[q]["bytes_read"].get<double>() + s[q]["bytes_written"].get<double>();
      }
      if (s.contains(chip + "c2c"))
        for (auto it = s[chip + "c2c"].begin(); it != s[chip + "c2c"].end(); ++it)
          if (it.key().size() > 9 && it.key().substr(it.key().size() - 9) == "_tx_bytes") link_bytes += it.value().get<double>();
    }
    const auto& p = m->profile();
    // Per token: prefill over every prompt token; decode per step, which is
    // each sequence's time per output token (a batch's steps make one token
    // of every sequence).
    const unsigned prompt_tokens = prompt * batch;
    std::printf("virtual time: boot %.1f us, weights %.1f us; prefill %.1f us (%.2f us/token), decode %.1f us (%.1f us/token%s, %.0f tokens/s)\n",
                boot * 1e6, (loaded - boot) * 1e6, prefill_s * 1e6, prefill_s * 1e6 / prompt_tokens, decode_s * 1e6,
                decode ? decode_s * 1e6 / decode : 0.0, batch > 1 ? fmt::format(" of each of {} sequences", batch).c_str() : "",
                decode ? decode * batch / decode_s : 0.0);
    if (const auto* dp = dynamic_cast<const model::DataParallel*>(m.get())) {
      std::uint64_t most = 0;
      for (unsigned k = 0; k < dp->chips(); ++k) most = std::max(most, dp->replica(k).weight_bytes());
      std::printf("compiled steps: %zu graphs on chip 0 (a step length each), up to %.2f MB of weights on each of %u chips\n",
                  dp->replica(0).steps(), most / 1e6, dp->chips());
    }
    if (const auto* cm = dynamic_cast<const model::CompiledModel*>(m.get())) {
      // The weights in BF16 (norms FP32), once: what the graphs' layouts hold against.
      const double d = c.d_model, once = 2 * (2 * c.vocab * d + c.layers * (4 * d * d + d * c.experts + 3 * c.experts * d * c.hidden)) +
                                         4 * d * (2 * c.layers + 1);
      std::printf("compiled steps: %zu graphs (a step length each%s) holding %.2f MB of weights %s (the weights once: %.2f MB)\n",
                  cm->steps(), cm->chips() > 1 && cm->layout() == model::CompiledModel::Layout::all_reduce ? ", a shard on every chip" : "",
                  cm->weight_bytes() / 1e6, cm->chips() > 1 ? fmt::format("over the {} chips", cm->chips()).c_str() : "on the device",
                  once / 1e6);
    }
    {
      // Average power per domain over the whole run (boot and weights included).
      const rt::Device::Energy first = dev.energy();
      std::vector<double> dyn(first.domains.size(), 0.0), stat(first.domains.size(), 0.0);
      for (rt::Device* chip : devices) {
        const rt::Device::Energy e = chip->energy();
        for (std::size_t d = 0; d < dyn.size(); ++d) dyn[d] += e.dynamic_joules[d], stat[d] += e.static_watts[d];
      }
      const double seconds = dev.simulated_seconds();
      std::string per;
      double watts = 0;
      for (std::size_t d = 0; d < dyn.size(); ++d) {
        const double w = dyn[d] / seconds + stat[d];
        watts += w;
        per += fmt::format("{}{} {:.2f}", per.empty() ? "" : ", ", first.domains[d], w);
      }
      std::printf("energy: prefill %.1f uJ/token, decode %.1f uJ/token; average power %.2f W (%s W; leakage %.0f%%)\n",
                  prefill_j * 1e6 / prompt_tokens, decode ? decode_j * 1e6 / (decode * batch) : 0.0, watts, per.c_str(),
                  100 * (watts - std::accumulate(dyn.begin(), dyn.end(), 0.0) / seconds) / watts);
    }
    std::printf("utilisation over %u tiles%s: tensor cores %.1f%%, vector units %.1f%%, tile cores running kernels %.1f%%\n",
                all_tiles, devices.size() > 1 ? fmt::format(" of {} chips", devices.size()).c_str() : "",
                100 * tensor / (total * all_tiles), 100 * vector / (total * all_tiles), 100 * core / (total * all_tiles));
    std::printf("HBM: %.1f MB moved, %.2f GB/s; tile DMA over the NoC %.1f MB\n", hbm_bytes / 1e6, hbm_bytes / total / 1e9,
                dma_bytes / 1e6);
    const std::string noc = cluster ? "chip0.noc" : "device.noc";
    if (s.contains(noc))
      std::printf("NoC%s (%s level): links carried %.1f%% of their flit capacity on average, the busiest %.1f%%\n",
                  cluster ? " of chip 0" : "", s[noc]["model"].get<std::string>().c_str(),
                  100 * s[noc]["link_utilisation"].get<double>(), 100 * s[noc]["busiest_link_utilisation"].get<double>());
    if (cluster)
      std::printf("chip-to-chip: %.2f MB over the SerDes links (messages, headers included), %.1f us in the exchanges\n",
                  link_bytes / 1e6, p.comm * 1e6);
    std::printf("while kernels ran, the tiles' time went to: tensor core %.0f%%, vector unit %.0f%%, DMA (HBM and NoC) %.0f%% "
                "(they overlap)\n",
                core > 0 ? 100 * tensor / core : 0.0, core > 0 ? 100 * vector / core : 0.0, core > 0 ? 100 * dma / core : 0.0);
    std::printf("where the time went: attention %.0f%%, Wo %.0f%%, router %.0f%%, experts %.0f%%, %scombine %.0f%%, head %.0f%%, "
                "embed+argmax %.0f%%, host I/O %.0f%%%s; of the phases, kernels ran %.0f%% of the time, launches and "
                "synchronisation (firmware, host) the rest\n",
                100 * p.attention / total, 100 * p.wo / total, 100 * p.router / total, 100 * p.experts / total,
                cluster ? fmt::format("dispatch and combine between chips {:.0f}%, ", 100 * p.comm / total).c_str() : "",
                100 * p.combine / total, 100 * p.head / total, 100 * (p.embed + p.argmax) / total, 100 * p.host_io / total,
                p.upload > 0 ? fmt::format(" (the graphs' upload {:.0f}%)", 100 * p.upload / total).c_str() : "",
                100 * p.kernels / (p.total() - p.host_io));
    {
      const roofline::Limits& l = dev.limits();
      std::printf("roofline%s: compute %.1f TMAC/s BF16, %.1f FP8, vector %.0f G lane ops/s (%u tiles); HBM %.0f GB/s (%u "
                  "stacks); NoC ports %.0f GB/s each way; NoC from the stacks to the tiles %.0f GB/s (busiest link %s), back "
                  "%.0f GB/s; host port %.0f GB/s%s\n",
                  cluster ? " of each chip" : "", l.macs_per_s("bf16") / 1e12, l.macs_per_s("fp8") / 1e12,
                  l.tiles * l.tile_vector_ops_per_s / 1e9, l.tiles,
                  l.hbm_bytes_per_s() / 1e9, l.stacks, l.port_bytes_per_s / 1e9, l.cut_read_bytes_per_s / 1e9,
                  l.cut_link.c_str(), l.cut_write_bytes_per_s / 1e9, l.host_bytes_per_s / 1e9,
                  l.link_bytes_per_s > 0 ? fmt::format("; links {:.1f} GB/s per port", l.link_bytes_per_s / 1e9).c_str() : "");
      auto against = [](const char* what, const roofline::Report& r, double took, unsigned tokens) {
        return fmt::format("{} {:.2f} us/token against a bound of {:.2f} ({}, {}): {:.1f}% of the bound", what,
                           took * 1e6 / tokens, r.seconds() * 1e6 / tokens, r.binding().resource, r.binding().where,
                           took > 0 ? 100 * r.seconds() / took : 0.0);
      };
      std::printf("%s%s\n", against("prefill", prefill_bound, prefill_s, prompt_tokens).c_str(),
                  decode ? ("; " + against("decode", decode_bound, decode_s, decode)).c_str() : "");
      std::string phases;
      for (const auto& [name, b] : p.bounds)
        phases += fmt::format("{}{} {:.0f}% ({})", phases.empty() ? "" : ", ", name,
                              b.achieved > 0 ? 100 * b.bound / b.achieved : 0.0, b.binding_resource());
      std::printf("phases against their bounds (binding resource%s): %s\n", cluster ? ", chip 0" : "", phases.c_str());
    }
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
    std::printf("wall time %.1f s\n", wall);
    if (!stats_file.empty()) {  // the run's figures and every IP's counters, as tessera-vp --stats writes them
      nlohmann::ordered_json j;
      j["job"] = "demo";
      j["prompt"] = tokens_in;
      j["decoded"] = out;
      j["max_relative_error"] = worst;
      j["routing_disagreements"] = disagreements;
      j["simulated_time_s"] = dev.simulated_seconds();
      j["batch"] = batch;
      j["chips"] = chips;
      j["parallelism"] = expert_parallel ? "data and experts (all-to-all)" : data_parallel ? "data" : chips == 1 ? "none" : all_reduce ? "tensor (all-reduce)" : compiled ? "experts and matmuls" : "experts";
      j["prefill_s"] = prefill_s;
      j["decode_s"] = decode_s;
      j["prefill_j"] = prefill_j;
      j["decode_j"] = decode_j;
      j["wall_time_s"] = wall;
      nlohmann::ordered_json phases = nlohmann::ordered_json::object();
      for (const auto& [name, b] : p.bounds)
        phases[name] = {{"achieved_s", b.achieved}, {"bound_s", b.bound}, {"binding", b.binding_resource()},
                        {"bounds_s", b.by_resource}};
      j["roofline"] = {{"limits", dev.limits().json()},
                       {"prefill", prefill_bound.json(prefill_s)},
                       {"decode", decode_bound.json(decode_s)},
                       {"phases", phases}};
      j["ips"] = s;
      // A system's synchronisation: windows of the links' latency, and over
      // MPI ranks the bytes exchanged and each rank's time waiting for the others.
      if (cluster) j["ranks"] = cluster->synchronisation();
      std::ofstream f(stats_file);
      f << j.dump(2) << "\n";
      if (!f) {
        std::fprintf(stderr, "tessera demo: cannot write %s\n", stats_file.c_str());
        return 2;
      }
    }
    if (!(worst <= bound)) {
      std::fprintf(stderr, "tessera demo: the device's logits are off by %.3g (relative), above the %s bound %.2g\n",
                   worst, c.fp8 ? "FP8" : "BF16", bound);
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tessera demo: %s\n", e.what());
    return 1;
  }
}
