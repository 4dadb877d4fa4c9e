// How close compiled graphs come to the chip's own bounds: a few blocks of
// the shapes LLM steps have (a decode row, a prefill of 256 rows), each
// compiled (sw/compiler) and run on the default T1 with one launch; prints
// the simulated time of the launch, the roofline's bound of the work it
// did (platform/roofline.hpp), achieved / bound and the binding resource.
// Every output is checked against the host reference bit for bit; each
// node's (fused group's) time follows its graph's line.
//
//   bench_compiler [--set inst.key=value]...
#include <fmt/format.h>

#include <cstring>
#include <iostream>

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

}  // namespace

int main(int argc, char** argv) {
  rt::Device::Options o;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--set") == 0 && i + 1 < argc) o.sets.push_back(argv[++i]);
    else {
      std::cerr << "usage: bench_compiler [--set inst.key=value]...\n";
      return 2;
    }
  }
  rt::Device dev(o);
  const rt::Kernel program = dev.load_kernel(data_file(DataKind::kernels, "program.elf"), (1u << dev.tiles()) - 1);
  struct Case {
    std::string name;
    Graph g;
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
  fmt::print("{:<42} {:>6} {:>6} {:>10} {:>10} {:>8}  {}\n", "graph", "nodes", "tiles", "took us", "bound us",
             "of bound", "binding");
  int status = 0;
  for (Case& c : cases) {
    const Tensor& x = c.g.tensor(0);
    const std::map<std::string, std::vector<float>> in{{x.name, seeded_values(x.elements(), 9, 2.0f)}};
    Executable ex(dev, program, std::move(c.g));
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
    const roofline::Report& r = ex.last_bound();
    fmt::print("{:<42} {:>6} {:>6} {:>10.2f} {:>10.2f} {:>7.1f}%  {} ({})\n", c.name, ex.groups().size(), tiles,
               ex.last_seconds() * 1e6, r.seconds() * 1e6, 100 * r.seconds() / ex.last_seconds(), r.binding().resource,
               r.binding().where);
    const std::vector<double> nodes = ex.node_seconds();
    for (std::size_t k = 0; k < nodes.size(); ++k)
      fmt::print("    {:<50} {:>8.2f} us\n", ex.device_graph().nodes()[k].name, nodes[k] * 1e6);
  }
  return status;
}
