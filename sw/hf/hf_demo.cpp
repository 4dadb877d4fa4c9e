// tessera-vp demo --hf-config FILE.json [--weights FILE|DIR] [--layers N]
//                 [--prompt N] [--decode N] [--seed S] [--check]
//                 [--timing-only] [--set inst.key=value]...
// Builds the model's prefill from its config.json (llama.hpp) with its
// safetensors weights or seeded ones, compiles it (sw/compiler) and runs it
// on the T1 with one launch; prints the greedy next token, the simulated
// time per prompt token and the launch against its roofline (a MoE
// model's prompt longer than 256 tokens in steps of 256, over the KV
// caches, the experts' kernel taking 256 rows a step). --decode N
// then decodes N tokens greedily, one compiled step a token over the KV
// caches the prefill filled (one launch a step). --check compares every
// logit (the prompt's and each decoded token's) with the FP32 host
// reference (bound 5e-2, as the main job's). --timing-only runs the
// config's shapes without weights on a timing-only device (README.md,
// timing only). Exit codes: 0, 1 (--check failed), 2 (a bad option, config
// or weights file, in one line), 3 (a device error).
#include "hf_demo.hpp"

#include <unistd.h>

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstring>
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
int fail(const std::string& why) {
  std::cerr << "tessera demo: " << why << "\n";
  return 2;
}
}  // namespace

int demo_main(int argc, char** argv) {
  std::string config, weights;
  unsigned layers = 0, prompt = 16, seed = 1, decode = 0;
  bool check = false, timing = false;
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
    else if (a == "--set" && more) opt.sets.push_back(argv[++i]);
    else if (a == "--check") check = true;
    else if (a == "--timing-only") timing = true;
    else return fail(fmt::format("'{}' is not an option of demo --hf-config (--weights, --layers, --prompt, --decode, --seed, --check, "
                                 "--timing-only, --set)", a));
  }
  if (timing && check) return fail("--timing-only computes no logits: --check has nothing to compare");
  if (timing && !weights.empty()) return fail("--timing-only runs the config's shapes without weights: drop --weights");
  opt.timing_only = timing;
  LlamaConfig c;
  std::unique_ptr<SafeTensors> st;
  WeightSource w = timing ? shape_only() : seeded_weights(seed);
  Fp8Source fp8;  // a checkpoint's block-scaled FP8 Linears, run as such
  compiler::Graph g, tail, step;
  unsigned chunk = 0, rest = 0;  // prefill steps of `chunk` tokens, the last of `rest` where it is shorter
  std::vector<std::uint32_t> tokens;
  try {
    // The fast models unless the user chooses (PlatformSpec::fast_models).
    opt.sets = PlatformSpec::fast_models(rt::Device::default_platform(), opt.sets);
    c = LlamaConfig::load(config);
    if (!weights.empty()) st = std::make_unique<SafeTensors>(SafeTensors::open(weights)), w = weights_from(*st), fp8 = fp8_blocks_from(*st);
    std::mt19937 rng(seed);
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
    chunk = sparse ? std::min(prompt, kChunk) : prompt, rest = prompt % chunk;
    const std::uint64_t params = c.parameters(layers), need = params * 4 * 2 * (1 + (decode ? 1 : 0) + (rest ? 1 : 0));
    const std::uint64_t host = static_cast<std::uint64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<std::uint64_t>(sysconf(_SC_PAGE_SIZE));
    if (need > host / 2 && !timing)
      return fail(fmt::format("{}: {} of {} layers hold {:.3g} G weights, {:.1f} GB on the host in FP32 twice over, more than half "
                              "of this host's {:.1f} GB; run fewer layers (--layers), or at full size in the timing-only mode "
                              "(--timing-only)",
                              config, layers ? std::min(layers, c.layers) : c.layers, c.layers, params / 1e9, need / 1e9, host / 1e9));
    const unsigned context = prompt + decode;
    g = llama_step(c, w, chunk, context, layers, fp8);
    if (rest) tail = llama_step(c, w, rest, context, layers, fp8);
    if (decode) step = llama_step(c, w, 1, context, layers, fp8);
  } catch (const std::exception& e) {
    return fail(e.what());
  }
  const unsigned run_layers = layers ? std::min(layers, c.layers) : c.layers;
  try {
    rt::Device dev(opt);
    const rt::Kernel program = dev.load_kernel(data_file(DataKind::kernels, "program.elf"), (1u << dev.tiles()) - 1);
    compiler::Executable ex(dev, program, std::move(g));
    std::unique_ptr<compiler::Executable> last_chunk;
    if (rest) {
      compiler::Options shared;
      shared.state = ex.state(), shared.weights = ex.weights();  // the prefill's caches and weights
      last_chunk = std::make_unique<compiler::Executable>(dev, program, std::move(tail), shared);
    }
    // The prompt in steps of `chunk` tokens (one step unless it is longer).
    std::vector<float> logits;
    std::vector<std::vector<std::uint32_t>> routes;  // the chip's by layer (a MoE model's), the prompt's and then each decoded token's
    double prefill_s = 0, prefill_bound = 0;
    roofline::Report r;
    // The energy and the simulator's own time of each phase.
    using Clock = std::chrono::steady_clock;
    const double j0 = dev.energy().joules;
    const Clock::time_point w0 = Clock::now();
    for (unsigned at = 0; at < prompt; at += chunk) {
      const unsigned n = std::min(chunk, prompt - at);
      compiler::Executable& x = n == chunk ? ex : *last_chunk;
      const std::map<std::string, std::vector<float>> o =
          x.run(llama_inputs(std::vector<std::uint32_t>(tokens.begin() + at, tokens.begin() + at + n), at));
      logits.insert(logits.end(), o.at("logits").begin(), o.at("logits").end());
      const std::vector<std::vector<std::uint32_t>> step_routes = chip_routes(c, o, layers);
      if (routes.empty()) routes.resize(step_routes.size());
      for (std::size_t l = 0; l < step_routes.size(); ++l) routes[l].insert(routes[l].end(), step_routes[l].begin(), step_routes[l].end());
      prefill_s += x.last_seconds(), prefill_bound += x.last_bound().seconds();
      if (at == 0) r = x.last_bound();
    }
    const double prefill_j = dev.energy().joules - j0, prefill_wall = std::chrono::duration<double>(Clock::now() - w0).count();
    double decode_j = 0, decode_wall = 0, decode_s = 0;
    auto greedy = [&](const std::vector<float>& l) {
      const float* last = l.data() + l.size() - c.vocab;
      return static_cast<std::uint32_t>(std::max_element(last, last + c.vocab) - last);
    };
    const std::uint32_t next = greedy(logits);
    unsigned scaled = 0, scaled_experts = 0;
    for (const compiler::Op& op : ex.graph().ops())
      if (compiler::block_scaled(op)) ++(op.kind == compiler::OpKind::moe ? scaled_experts : scaled);
    std::cout << fmt::format("{} ({}), {} of {} layers, {} weights: hidden {}, {} heads ({} KV), head_dim {}, vocabulary {}{}\n",
                             config, c.model_type, run_layers, c.layers, weights.empty() ? "seeded" : weights, c.hidden,
                             c.heads, c.kv_heads, c.head_dim, c.vocab,
                             c.experts ? fmt::format(", {} experts of {} hidden, top {}{}", c.experts, c.expert_intermediate,
                                                     c.experts_per_token,
                                                     c.shared_intermediate ? fmt::format(", a shared expert of {}", c.shared_intermediate)
                                                                           : std::string())
                                       : std::string());
    std::cout << fmt::format("prefill of {} tokens{}: {} nodes, {:.2f} us simulated ({:.2f} us/token); next token {}\n", prompt,
                             prompt > chunk ? fmt::format(" in steps of {}", chunk) : std::string(), ex.groups().size(),
                             prefill_s * 1e6, prefill_s * 1e6 / prompt, next);
    if (scaled || scaled_experts)
      std::cout << fmt::format("FP8: {} Linears{} block-scaled on the tensor core (the checkpoint's E4M3 codes and 128 x 128 scales, "
                               "activations cast in 1 x 128 groups); the rest in BF16\n", scaled,
                               scaled_experts ? fmt::format(" and {} layers' experts", scaled_experts) : "");
    std::cout << fmt::format("roofline: bound {:.2f} us ({}, {}{}): {:.1f}% of it\n", prefill_bound * 1e6, r.binding().resource,
                             r.binding().where, prompt > chunk ? " in the first step" : "", 100 * prefill_bound / prefill_s);
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
    std::vector<std::uint32_t> sequence = tokens;
    sequence.push_back(next);
    if (decode) {
      compiler::Options shared;
      shared.state = ex.state(), shared.weights = ex.weights();  // the prefill's caches and weights
      compiler::Executable dx(dev, program, std::move(step), shared);
      double took = 0, bound = 0;
      std::map<std::string, double> binding;  // the seconds each resource bound
      const double dj0 = dev.energy().joules;
      const Clock::time_point dw0 = Clock::now();
      for (unsigned i = 0; i < decode; ++i) {
        const std::map<std::string, std::vector<float>> o = dx.run(llama_inputs({sequence.back()}, prompt + i));
        took += dx.last_seconds(), bound += dx.last_bound().seconds();
        binding[dx.last_bound().binding().resource] += dx.last_bound().seconds();
        logits.insert(logits.end(), o.at("logits").begin(), o.at("logits").end());
        const std::vector<std::vector<std::uint32_t>> r = chip_routes(c, o, layers);
        for (std::size_t l = 0; l < routes.size(); ++l) routes[l].insert(routes[l].end(), r[l].begin(), r[l].end());
        if (i + 1 < decode) sequence.push_back(greedy(o.at("logits")));
      }
      decode_s = took, decode_j = dev.energy().joules - dj0, decode_wall = std::chrono::duration<double>(Clock::now() - dw0).count();
      std::string decoded;
      for (std::size_t k = prompt; k < sequence.size(); ++k) decoded += fmt::format("{}{}", k > prompt ? " " : "", sequence[k]);
      std::cout << fmt::format("decode of {} tokens: {} nodes a step, {:.2f} us/token ({:.0f} tokens/s); decoded: {}\n", decode,
                               dx.groups().size(), took * 1e6 / decode, decode / took, decoded);
      const auto most = std::max_element(binding.begin(), binding.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
      std::cout << fmt::format("decode roofline: bound {:.2f} us/token ({} binding): {:.1f}% of it\n", bound * 1e6 / decode,
                               most->first, 100 * bound / took);
    }
    // Exactly (a timing-only run's are those of the same run with data).
    std::cout << fmt::format("simulated: prefill {} ps{}\n", std::llround(prefill_s * 1e12),
                             decode ? fmt::format(", decode {} ps", std::llround(decode_s * 1e12)) : "");
    std::cout << fmt::format("energy: prefill {:.2f} uJ/token{}; simulator wall time: prefill {:.2f} s ({:.3f} s/token){}\n",
                             prefill_j * 1e6 / prompt, decode ? fmt::format(", decode {:.2f} uJ/token", decode_j * 1e6 / decode) : "",
                             prefill_wall, prefill_wall / prompt,
                             decode ? fmt::format(", decode {:.3f} s/token", decode_wall / decode) : "");
    if (timing)
      std::cout << fmt::format("timing only: the tensor cores computed no products (seeded results); {:.2f} GB of weights placed in "
                               "HBM and never written\n", static_cast<double>(ex.weights()->bytes()) / 1e9);
    if (check) {
      // A MoE model's reference follows the chip's routes (and counts where its own FP32 top k differs).
      std::vector<std::uint32_t> fed(sequence.begin(), sequence.begin() + prompt + decode);
      unsigned sparse_layers = 0;
      for (unsigned l = 0; l < run_layers; ++l) sparse_layers += c.sparse(l);
      unsigned disagree = 0;
      const std::vector<float> ref = llama_reference(c, w, fed, layers, c.experts ? &routes : nullptr, &disagree);
      double worst = 0, scale = 0;
      for (std::size_t i = 0; i < ref.size(); ++i)
        worst = std::max(worst, std::fabs(double(logits[i]) - ref[i])), scale = std::max(scale, std::fabs(double(ref[i])));
      // BF16 operands: 5e-2 (the main job's bound); E4M3 ones (a
      // checkpoint's block-scaled Linears) keep 3 mantissa bits, not 8: 1e-1.
      const double bound = scaled || scaled_experts ? 1e-1 : 5e-2;
      const bool ok = worst <= bound * scale;
      std::cout << fmt::format("check: max relative logit error {:.3g} against the FP32 reference (bound {}){}: {}\n",
                               worst / scale, scaled || scaled_experts ? "1e-1" : "5e-2",
                               c.experts ? fmt::format(", on the chip's routes ({} of {} token-layer routes differ from its own)",
                                                       disagree, std::size_t{prompt + decode} * sparse_layers)
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
