// How close compiled graphs come to the chip's own bounds: a few blocks of
// the shapes LLM steps have (a decode row, a prefill of 256 rows), each
// compiled (sw/compiler) and run on the default T1 with one launch; prints
// the simulated time of the launch, the roofline's bound of the work it
// did (platform/roofline.hpp), achieved / bound and the binding resource.
// Every output is checked against the host reference bit for bit; each
// node's (fused group's) time follows its graph's line. Then: heads each
// through a matrix of their own (the absorbed latent attention's), as one
// batched matmul and as a move and a matmul a head; a decode step's
// attention over long caches (Llama-3-8B's heads on one chip, Llama-3-70B's
// on one of eight, DeepSeek-V3's absorbed), H / KV heads x their width.
//
//   bench_compiler [--phases N] [--set inst.key=value]...
//
// --phases N (1 to 64, default 1): each graph's measured launch again N - 1
// times, the k-th after k register reads through the host port (each a
// round trip: its start moves by about a microsecond a read, against the
// HBM's refresh among others), and the least and most of the N times: a
// single launch's time carries a few percent of such phase (bench/README.md).
//
// `bench_compiler moe [--chips N]` instead: one MoE layer (the main job's
// experts: 8 of 512 x 512, top 2) for the rows of a system of N chips (4
// or 8), laid out three ways and run at once on every chip: expert
// parallel (every chip its own rows, dispatched by an all-to-all to the
// chips of their experts and combined back: Graph::dispatch), pushed and
// pulled; Megatron's (every chip all rows over its 1/N of each expert's
// hidden columns, the sums all-reduced); and every row on one chip. Each
// against the rows a chip holds, checked against reference_spmd bit for bit.
#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>

#include "common/paths.hpp"
#include "executable.hpp"
#include "reference.hpp"

using namespace tessera;
using namespace tessera::compiler;

namespace {

// rmsnorm -> up (d x f) -> gelu -> down (f x d) + x, in `fmt`.
Graph ffn(unsigned rows, unsigned d, unsigned f, DType fmt) {
  Graph g;
  const int x = g.input("x", {rows, d});
  const int n = g.rmsnorm(x, g.weight("norm", {d}, seeded_values(d, 1, 2.0f)));
  const int h = g.unary(OpKind::gelu, g.matmul(n, g.weight("up", {d, f}, seeded_values(std::size_t{d} * f, 2, 0.2f), fmt), fmt));
  g.output(g.binary(OpKind::add, g.matmul(h, g.weight("down", {f, d}, seeded_values(std::size_t{f} * d, 3, 0.1f), fmt), fmt), x, "y"));
  return g;
}

// The same in block-scaled FP8 (E4M3 codes, a scale per 128 x 128 block;
// the activations cast in 1 x 128 groups), as DeepSeek-V3 runs its Linears.
Graph ffn_scaled(unsigned rows, unsigned d, unsigned f) {
  Graph g;
  const int x = g.input("x", {rows, d});
  const int n = g.rmsnorm(x, g.weight("norm", {d}, seeded_values(d, 1, 2.0f)));
  const auto [up, su] = g.weight_scaled("up", {d, f}, seeded_values(std::size_t{d} * f, 2, 0.2f));
  const auto [down, sd] = g.weight_scaled("down", {f, d}, seeded_values(std::size_t{f} * d, 3, 0.1f));
  const int h = g.unary(OpKind::gelu, g.matmul_scaled(n, up, su));
  g.output(g.binary(OpKind::add, g.matmul_scaled(h, down, sd), x, "y"));
  return g;
}

// The LM head and the greedy token.
Graph head(unsigned rows, unsigned d, unsigned vocab) {
  Graph g;
  const int x = g.input("x", {rows, d});
  const int logits = g.matmul(x, g.weight("lm_head", {d, vocab}, seeded_values(std::size_t{d} * vocab, 4, 0.2f), DType::bf16),
                              DType::bf16, "logits");
  g.output(logits);
  g.output(g.argmax(logits, "token"));
  return g;
}

// Each of `h` blocks of `rows` rows through a matrix of its own (k x n,
// BF16), as the absorbed latent attention's heads go through W_UK: one
// batched matmul, or (`per_head`) a move and a matmul a head, as the IR
// ran them before it had a batched matmul.
Graph own_matrices(unsigned h, unsigned rows, unsigned k, unsigned n, bool per_head) {
  Graph g;
  const int x = g.input("x", {h, rows, k});
  const std::vector<float> w = seeded_values(std::size_t{h} * k * n, 5, 0.2f);
  if (!per_head) {
    g.output(g.matmul(x, g.weight("w", {h, k, n}, w, DType::bf16), DType::bf16, "heads"));
    return g;
  }
  for (unsigned b = 0; b < h; ++b) {
    const int xb = g.move({x}, {rows, k}, {{0, std::uint64_t{b} * rows * k, 0, rows * k, 1, 0, 0}}, fmt::format("x{}", b));
    const auto wb = w.begin() + static_cast<std::ptrdiff_t>(std::size_t{b} * k * n);
    g.output(g.matmul(xb, g.weight(fmt::format("w{}", b), {k, n}, std::vector<float>(wb, wb + std::ptrdiff_t(std::size_t{k} * n)), DType::bf16),
                      DType::bf16, fmt::format("head{}", b)));
  }
  return g;
}

// One decode step's attention: `seqs` rows at position `at` over KV
// caches (zeros: the time does not hang on their values), H heads of dh
// over KV heads (keys of dh, values of dv); one sequence unpaged, or each
// row its own sequence over pages of 16 positions, its pages in order in
// the pool (`in_order`) or interleaved with the other sequences' (as
// sequences that grow together get them). Its inputs.
Graph attention(unsigned H, unsigned KV, unsigned dh, unsigned dv, unsigned at, unsigned seqs,
                std::map<std::string, std::vector<float>>& in, bool in_order = false) {
  constexpr unsigned page = 16;
  const unsigned pages = (at + page) / page + 1, C = seqs > 1 ? seqs * pages * page : at + 1;
  Graph g;
  const int q = g.input("q", {seqs, H * dh}), k = g.input("k", {seqs, KV * dh}), v = g.input("v", {seqs, KV * dv});
  const int pos = g.input("positions", {seqs});
  Paging paging;
  if (seqs > 1) paging.sequences = g.input("sequences", {seqs}), paging.table = g.input("pages", {seqs, pages}), paging.page = page;
  const int kc = g.kv_cache("cache.k", KV, C, dh), vc = g.kv_cache("cache.v", KV, C, dv);
  g.output(g.attention(q, k, v, kc, vc, pos, H, 0.088f, "attention", false, paging));
  in = {{"q", seeded_values(std::size_t{seqs} * H * dh, 6, 1.0f)},
        {"k", seeded_values(std::size_t{seqs} * KV * dh, 7, 1.0f)},
        {"v", seeded_values(std::size_t{seqs} * KV * dv, 8, 1.0f)},
        {"positions", std::vector<float>(seqs, static_cast<float>(at))}};
  if (seqs > 1) {
    for (unsigned s = 0; s < seqs; ++s) in["sequences"].push_back(static_cast<float>(s));
    for (unsigned s = 0; s < seqs; ++s)
      for (unsigned i = 0; i < pages; ++i) in["pages"].push_back(static_cast<float>(in_order ? s * pages + i : i * seqs + s));
  }
  return g;
}

// Each group's (fused ops') time in the last run, a line each, named by its ops.
std::string group_times(const Executable& ex) {
  const std::vector<double> seconds = ex.node_seconds();
  std::string s;
  for (std::size_t k = 0; k < seconds.size(); ++k) {
    std::string name;
    for (int o : ex.groups()[k].ops) name += (name.empty() ? "" : "+") + ex.graph().ops()[static_cast<std::size_t>(o)].name;
    s += fmt::format("    {:<50} {:>8.2f} us\n", name, seconds[k] * 1e6);
  }
  return s;
}

// The MoE layer's shapes, and its weights' values (expert-major [E, a, b]).
constexpr unsigned kD = 512, kF = 512, kE = 8, kK = 2;
const std::vector<float>& expert_weights(int which) {
  static const std::vector<float> w[3] = {seeded_values(std::size_t{kE} * kD * kF, 31, 0.1f),
                                          seeded_values(std::size_t{kE} * kD * kF, 32, 0.1f),
                                          seeded_values(std::size_t{kE} * kF * kD, 33, 0.1f)};
  return w[which];
}

enum class Layout { expert_parallel, megatron, one_chip };

// Chip c's graph of the layer over `rows` rows: its experts (expert
// parallel), its columns of every expert (Megatron's) or all of them.
Graph moe_layer(Layout l, unsigned c, unsigned N, unsigned rows, bool pull) {
  Graph g;
  const int x = g.input("x", {rows, kD});
  const int logits = g.matmul(x, g.weight("router", {kD, kE}, seeded_values(std::size_t{kD} * kE, 30, 0.5f)), DType::bf16, "logits");
  const int route = g.route(logits, kK, true, "route"), xb = g.cast(x, DType::bf16, "xb");
  // Experts `first`, `first` + `step`, ..., of each weight, and of those
  // the hidden columns [f0, f1) (w1, w3) or rows (w2).
  auto part = [&](int which, unsigned first, unsigned step, unsigned f0, unsigned f1) {
    const std::vector<float>& all = expert_weights(which);
    std::vector<float> v;
    for (unsigned e = first; e < kE; e += step)
      for (unsigned a = 0; a < (which == 2 ? f1 - f0 : kD); ++a)
        for (unsigned b = 0; b < (which == 2 ? kD : f1 - f0); ++b)
          v.push_back(which == 2 ? all[(std::size_t{e} * kF + f0 + a) * kD + b] : all[(std::size_t{e} * kD + a) * kF + f0 + b]);
    const unsigned experts = (kE - first + step - 1) / step, f = f1 - f0;
    return g.weight(fmt::format("w{}", which == 2 ? 2 : which ? 3 : 1),
                    which == 2 ? std::vector<unsigned>{experts, f, kD} : std::vector<unsigned>{experts, kD, f}, std::move(v), DType::bf16);
  };
  if (l == Layout::expert_parallel) {
    g.output(g.moe_dispatched(xb, route, {part(0, c, N, 0, kF), part(1, c, N, 0, kF), part(2, c, N, 0, kF)}, {}, N, c, 0, "experts", pull));
  } else if (l == Layout::megatron) {
    const unsigned f0 = kF / N * c, f1 = f0 + kF / N;
    g.output(g.all_reduce(g.moe(xb, route, part(0, 0, 1, f0, f1), part(1, 0, 1, f0, f1), part(2, 0, 1, f0, f1)), N, false, pull, "y"));
  } else {
    g.output(g.moe(xb, route, part(0, 0, 1, 0, kF), part(1, 0, 1, 0, kF), part(2, 0, 1, 0, kF), "y"));
  }
  return g;
}

int moe_study(unsigned N, const std::vector<std::string>& sets) {
  rt::Device::Options o;
  o.platform = rt::Device::system_platform(N);
  o.sets = sets;
  rt::Cluster cluster(o);
  std::vector<rt::Device*> chips;
  std::vector<rt::Kernel> programs;
  for (unsigned c = 0; c < N; ++c) {
    chips.push_back(&cluster.chip(c));
    programs.push_back(cluster.chip(c).load_kernel(data_file(DataKind::kernels, "program.elf"), (1u << cluster.chip(c).tiles()) - 1));
  }
  fmt::print("One MoE layer ({} experts of {} x {}, top {}, BF16) for the rows of {} chips; us for the layer (the slowest chip's "
             "launch), tokens/s of the system\n",
             kE, kD, kF, kK, N);
  fmt::print("{:>10} {:>20} {:>20} {:>20} {:>20}\n", "rows/chip", "expert par. push", "expert par. pull", "Megatron (ring)",
             "one chip");
  int status = 0;
  std::string nodes[4];
  const unsigned most = TKP_MOE_MAX_T / N;  // rows a chip: the experts' kernel takes N x most (one chip, all of them)
  for (unsigned B : {1u, 4u, 16u, most}) {
    std::string line = fmt::format("{:>10}", B);
    const std::vector<float> all = seeded_values(std::size_t{N} * B * kD, 40, 2.0f);
    for (int k = 0; k < 4; ++k) {
      const Layout l = k < 2 ? Layout::expert_parallel : k == 2 ? Layout::megatron : Layout::one_chip;
      const unsigned n = l == Layout::one_chip ? 1 : N, rows = l == Layout::expert_parallel ? B : N * B;
      Options opts;
      if (n > 1) opts.symmetric = std::make_shared<SymmetricStore>(chips);
      std::vector<Graph> graphs;
      std::vector<std::unique_ptr<Executable>> owned;
      std::vector<Executable*> execs;
      std::vector<std::map<std::string, std::vector<float>>> in;
      for (unsigned c = 0; c < n; ++c) {
        graphs.push_back(moe_layer(l, c, N, rows, k == 1));
        owned.push_back(std::make_unique<Executable>(*chips[c], programs[c], graphs.back(), opts));
        execs.push_back(owned.back().get());
        const std::size_t at = l == Layout::expert_parallel ? std::size_t{c} * B * kD : 0;
        in.push_back({{"x", std::vector<float>(all.begin() + static_cast<std::ptrdiff_t>(at),
                                               all.begin() + static_cast<std::ptrdiff_t>(at + std::size_t{rows} * kD))}});
      }
      // The first launch also fetches the programs; the second is the one measured.
      auto run = [&] { return n > 1 ? run_together(execs, in) : std::vector<std::map<std::string, std::vector<float>>>{execs[0]->run(in[0])}; };
      run();
      const auto out = run();
      std::vector<const Graph*> compiled;
      for (const Executable* e : execs) compiled.push_back(&e->graph());
      const auto ref = reference_spmd(compiled, in);
      double slowest = 0;
      for (unsigned c = 0; c < n; ++c) {
        slowest = std::max(slowest, execs[c]->last_seconds());
        const int y = compiled[c]->outputs()[0];
        const std::vector<float>& want = ref[c][static_cast<std::size_t>(y)];
        if (std::memcmp(out[c].at(compiled[c]->tensor(y).name).data(), want.data(), want.size() * 4) != 0) {
          std::cerr << fmt::format("{} rows a chip, layout {}: chip {}'s output differs from the reference\n", B, k, c);
          status = 1;
        }
      }
      line += fmt::format(" {:>10.2f} ({:>7.0f})", slowest * 1e6, N * B / slowest);
      if (B == most && k != 1) {  // where the largest batch's time goes: chip 0's nodes
        nodes[k] = group_times(*execs[0]);
      }
    }
    fmt::print("{}\n", line);
  }
  const char* names[4] = {"expert parallel, pushed", "", "Megatron", "one chip"};
  for (int k : {0, 2, 3}) fmt::print("{} rows a chip, {}, chip 0's nodes:\n{}", most, names[k], nodes[k]);
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  rt::Device::Options o;
  bool moe = false;
  unsigned chips = 4, phases = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--set") == 0 && i + 1 < argc) o.sets.push_back(argv[++i]);
    else if (!moe && std::strcmp(argv[i], "--phases") == 0 && i + 1 < argc) {
      char* end = nullptr;
      const unsigned long n = std::strtoul(argv[++i], &end, 10);
      if (*end || n < 1 || n > 64) {
        std::cerr << "bench_compiler: --phases takes 1 to 64, not '" << argv[i] << "'\n";
        return 2;
      }
      phases = static_cast<unsigned>(n);
    }
    else if (i == 1 && std::strcmp(argv[i], "moe") == 0) moe = true;
    else if (moe && std::strcmp(argv[i], "--chips") == 0 && i + 1 < argc && (std::strcmp(argv[i + 1], "4") == 0 || std::strcmp(argv[i + 1], "8") == 0))
      chips = static_cast<unsigned>(std::atoi(argv[++i]));
    else {
      std::cerr << "usage: bench_compiler [--phases N] [--set inst.key=value]...\n       bench_compiler moe [--chips 4|8] [--set inst.key=value]...\n";
      return 2;
    }
  }
  if (moe) return moe_study(chips, o.sets);
  rt::Device dev(o);
  const rt::Kernel program = dev.load_kernel(data_file(DataKind::kernels, "program.elf"), (1u << dev.tiles()) - 1);
  struct Case {
    std::string name;
    Graph g;
    std::map<std::string, std::vector<float>> in;  // none: the first tensor's, seeded
  };
  std::vector<Case> cases;
  cases.push_back({"FFN decode, 1 x 512 x 2048, BF16", ffn(1, 512, 2048, DType::bf16)});
  cases.push_back({"FFN decode, 1 x 512 x 2048, E4M3", ffn(1, 512, 2048, DType::e4m3)});
  cases.push_back({"FFN decode, 1 x 512 x 2048, FP8 blocks", ffn_scaled(1, 512, 2048)});
  cases.push_back({"FFN decode, 8 x 512 x 2048, BF16", ffn(8, 512, 2048, DType::bf16)});
  cases.push_back({"FFN prefill, 256 x 512 x 2048, BF16", ffn(256, 512, 2048, DType::bf16)});
  cases.push_back({"FFN prefill, 256 x 512 x 2048, FP8 blocks", ffn_scaled(256, 512, 2048)});
  cases.push_back({"LM head + argmax, 1 x 512 x 4096", head(1, 512, 4096)});
  cases.push_back({"LM head + argmax, 256 x 512 x 4096", head(256, 512, 4096)});
  cases.push_back({"8 heads' own 128 x 512, 1 row, batched", own_matrices(8, 1, 128, 512, false)});
  cases.push_back({"8 heads' own 128 x 512, 1 row, a head a node", own_matrices(8, 1, 128, 512, true)});
  cases.push_back({"32 heads' own 128 x 512, 16 rows, batched", own_matrices(32, 16, 128, 512, false)});
  cases.push_back({"32 heads' own 128 x 512, 16 rows, a head a node", own_matrices(32, 16, 128, 512, true)});
  std::map<std::string, std::vector<float>> in;
  Graph a = attention(32, 8, 128, 128, 2048, 1, in);
  cases.push_back({"attention 32/8 x 128, 1 row at 2048", std::move(a), in});
  a = attention(32, 8, 128, 128, 512, 16, in);
  cases.push_back({"attention 32/8 x 128, 16 rows at 512, paged", std::move(a), in});
  a = attention(32, 8, 128, 128, 512, 16, in, true);
  cases.push_back({"attention 32/8 x 128, 16 rows at 512, paged in order", std::move(a), in});
  a = attention(8, 1, 128, 128, 256, 64, in);
  cases.push_back({"attention 8/1 x 128, 64 rows at 256, paged", std::move(a), in});
  a = attention(128, 1, 576, 512, 512, 1, in);
  cases.push_back({"attention 128/1 x 576/512, 1 row at 512", std::move(a), in});
  fmt::print("{:<42} {:>6} {:>6} {:>10} {:>10} {:>8}  {}{}\n", "graph", "nodes", "tiles", "took us", "bound us",
             "of bound", "binding", phases > 1 ? fmt::format("   over {} phases", phases) : "");
  int status = 0;
  for (Case& c : cases) {
    const Tensor& x = c.g.tensor(0);
    const std::map<std::string, std::vector<float>> in =
        c.in.empty() ? std::map<std::string, std::vector<float>>{{x.name, seeded_values(x.elements(), 9, 2.0f)}} : c.in;
    Executable ex(dev, program, std::move(c.g));
    for (const auto& [name, buffer] : ex.state()) dev.write(buffer, std::vector<std::uint8_t>(buffer.size).data(), buffer.size);  // the reference's zeros
    ex.run(in);  // the first launch also fetches the programs; the second is the one measured
    const auto out = ex.run(in);
    const std::vector<std::vector<float>> ref = reference(ex.graph(), in);
    for (int t : ex.graph().outputs())
      if (std::memcmp(out.at(ex.graph().tensor(t).name).data(), ref[static_cast<std::size_t>(t)].data(),
                      ref[static_cast<std::size_t>(t)].size() * 4) != 0) {
        std::cerr << c.name << ": '" << ex.graph().tensor(t).name << "' differs from the reference\n";
        status = 1;
      }
    unsigned tiles = 0;
    for (const Tiling& t : ex.tilings()) tiles = std::max(tiles, static_cast<unsigned>(t.parts.size()));
    const roofline::Report r = ex.last_bound();
    const double took = ex.last_seconds();
    const std::string nodes = group_times(ex);
    // The same launch at other phases: k host round trips before the k-th.
    double least = took, most = took;
    for (unsigned k = 1; k < phases; ++k) {
      for (unsigned j = 0; j < k; ++j) dev.read32(dev.fabric_registers());
      ex.run(in);
      least = std::min(least, ex.last_seconds()), most = std::max(most, ex.last_seconds());
    }
    fmt::print("{:<42} {:>6} {:>6} {:>10.2f} {:>10.2f} {:>7.1f}%  {} ({}){}\n", c.name, ex.groups().size(), tiles, took * 1e6,
               r.seconds() * 1e6, 100 * r.seconds() / took, r.binding().resource, r.binding().where,
               phases > 1 ? fmt::format("   {:.2f} to {:.2f} us ({:.1f}%)", least * 1e6, most * 1e6, 100 * (most - least) / least) : "");
    fmt::print("{}", nodes);
  }
  return status;
}
