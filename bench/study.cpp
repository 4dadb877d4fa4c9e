// Studies that answer one question each with a table, a CSV and an SVG plot
// (issue 10, section 4). Usage: bench_study fp8-accumulation|activations|spec-decode|expert-parallel|energy-batch|
// power-headroom|llm-scale [--out DIR]
//   fp8-accumulation  GEMM error against K for E4M3 inputs with FP32
//                     accumulation, the limited accumulation of current
//                     FP8 tensor cores (13 mantissa bits kept, truncating),
//                     and limited accumulation promoted into FP32 every 128
//                     products (the tensor core's arithmetic, engines/num/)
//   activations       an FFN layer on one tile with SwiGLU, ReLU^2 or GELU at
//                     three special-function throughputs (the vector unit's
//                     sfu_ratio: lane ops per special-function op): time,
//                     energy of the tile and its utilisation
//   spec-decode       tokens per second of speculative decoding against the
//                     draft length k (1, 2, 4, 8) and the acceptance rate
//                     (the draft's own, and the draft steered to 0.5, 0.7,
//                     0.9), next to plain greedy decoding, on the default
//                     model compiled with a small compiled draft of its own:
//                     `tessera-vp demo --compiled --draft small --speculate k
//                     [--acceptance A]`, one run each
//   expert-parallel   decode tokens/s of the MoE decoder on 1, 4 and 8 chips
//                     (experts spread over the chips) against batch size,
//                     hand-written with a launch a phase (expert e on chip
//                     e % C, all-to-alls: `tessera-vp demo --launches --chips
//                     C --batch B`) and compiled (each layer's experts in
//                     slices over every chip's tiles, a launch a step:
//                     `tessera-vp demo --compiled --chips C --batch B`), next
//                     to data parallel (each chip the whole model and its
//                     share of the sequences: `... --data-parallel`)
//   energy-batch      decode tokens/s and energy per token of the MoE decoder
//                     (BF16, one chip, compiled, a launch a step) at batch 1
//                     to 64, the leakage's share and the run's share of its
//                     roofline bound: `tessera-vp demo --batch B --prompt 8 --decode 8`
//   power-headroom    a fused MoE layer on four chips (compute, HBM and links
//                     busy at once) under caps from 50% to 120% of the sum of
//                     the domains' peaks: the manager's control loop against
//                     clocks fixed so the worst case fits (reserved headroom);
//                     throughput, which domain throttles, energy per token,
//                     the share of the roofline's bound each run reaches
//   llm-scale         Hugging Face LLMs (sw/hf/configs; default
//                     Llama-3-70B and DeepSeek-V3) decoding in the
//                     timing-only mode on 8 to 64 chips at batch 1 to 64
//                     (--models, --layers, --chips, --batches; --ranks R
//                     runs each under mpirun -np R): time per output token,
//                     tokens/s and per chip, energy per token, the share of
//                     the roofline's bound and the binding resource, chip
//                     0's weights, the simulator's wall time per token; the
//                     compiler's parallelism (`tessera-vp demo --hf-config
//                     CONFIG --prompt 1 --decode 1 --batch B --chips C
//                     --timing-only`, one run each)
// The chip-to-chip one, push versus pull against message size and
// notification latency, is `bench_comm push-vs-pull`.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "common/power.hpp"
#include "engines/num/accumulate.hpp"
#include "engines/num/formats.hpp"
#include "power/power_manager.hpp"
#include "svg.hpp"
#include "tessera/program.hpp"
#include "tessera/runtime.hpp"

using namespace tessera;

namespace {

// Writes DIR/NAME.csv and DIR/NAME.svg and says so.
void write_outputs(const std::string& dir, const std::string& name, const std::string& csv, const std::string& title,
                   const std::string& xlabel, const std::string& ylabel, const std::vector<bench::Series>& series,
                   bool logx, bool logy) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  std::ofstream out(dir + "/" + name + ".csv");
  if (!(out << csv)) {
    fmt::print(stderr, "bench_study: cannot write {}/{}.csv\n", dir, name);
    std::exit(1);
  }
  bench::write_svg(dir + "/" + name + ".svg", title, xlabel, ylabel, series, logx, logy);
  fmt::print("(wrote {0}/{1}.csv and {0}/{1}.svg)\n", dir, name);
}

int fp8_accumulation(const std::string& dir) {
  const unsigned m = 16, n = 16;
  const char* names[3] = {"FP32 accumulation", "limited (13 bits)", "limited, promoted every 128"};
  num::Accumulation acc[3];
  acc[1].kind = acc[2].kind = num::Accumulation::Kind::limited;
  acc[2].promote_every = 128;
  std::vector<bench::Series> series(3);
  for (int i = 0; i < 3; ++i) series[i].name = names[i];
  std::string csv = "k,fp32_max_rel,limited_max_rel,promoted_max_rel,fp32_mean_rel,limited_mean_rel,promoted_mean_rel\n";
  fmt::print("E4M3 x E4M3 GEMM, {} x {} outputs, inputs uniform in [0.1, 2) (one sign: the sums grow with K)\n", m, n);
  fmt::print("{:>7} {:>14} {:>14} {:>14}   (max relative error against exact products summed in double)\n", "K",
             names[0], "limited", "promoted/128");
  for (unsigned k = 128; k <= 16384; k *= 2) {
    std::mt19937_64 rng(k);
    std::uniform_real_distribution<double> u(0.1, 2.0);
    std::vector<double> a(std::size_t{m} * k), b(std::size_t{k} * n), exact(m * n, 0.0);
    for (auto& v : a) v = num::quantize(num::Format::E4M3, u(rng));
    for (auto& v : b) v = num::quantize(num::Format::E4M3, u(rng));
    for (unsigned i = 0; i < m; ++i)
      for (unsigned p = 0; p < k; ++p)
        for (unsigned j = 0; j < n; ++j) exact[i * n + j] += a[i * k + p] * b[p * n + j];
    double worst[3], mean[3];
    for (int e = 0; e < 3; ++e) {
      std::vector<double> c(m * n, 0.0);
      num::gemm(a, b, c, m, n, k, acc[e]);
      worst[e] = mean[e] = 0;
      for (unsigned i = 0; i < m * n; ++i) {
        const double r = std::fabs(c[i] - exact[i]) / exact[i];
        worst[e] = std::max(worst[e], r);
        mean[e] += r / (m * n);
      }
      series[e].points.emplace_back(k, std::max(worst[e], 1e-9));
    }
    fmt::print("{:>7} {:>14.3e} {:>14.3e} {:>14.3e}\n", k, worst[0], worst[1], worst[2]);
    csv += fmt::format("{},{},{},{},{},{},{}\n", k, worst[0], worst[1], worst[2], mean[0], mean[1], mean[2]);
  }
  fmt::print("Limited accumulation drops the low bits of every product once the running sum outgrows them: its error\n"
             "grows about linearly with K. Promoting every 128 products keeps each partial sum short: the error stays near\n"
             "its K = 128 value (below 1.2e-3) whatever K, though well above FP32 accumulation's.\n");
  write_outputs(dir, "fp8_accumulation", csv, "E4M3 GEMM: max relative error against K", "K (products per output)",
                "max relative error", series, true, true);
  return 0;
}

// One FFN on tile 0 (T x D by D x F, the activation, by F x D, BF16 into
// FP32): prints "microseconds,tile_microjoules,tensor_busy,vector_busy,
// bound_microseconds,binding" (the roofline's bound of the work it did).
int activation_run(const std::string& act, unsigned ratio) {
  const unsigned T = 64, D = 256, F = 512;
  rt::Device::Options o;
  o.sets = {"noc.model=packet", "hbm0.mode=fast", "hbm1.mode=fast", "hbm2.mode=fast", "hbm3.mode=fast",
            fmt::format("tile0.sfu_ratio={}", ratio)};
  rt::Device dev(o);
  const rt::Kernel program = dev.load_kernel(std::string(TESSERA_KERNEL_DIR) + "/program.elf", 1);
  std::mt19937_64 rng(7);
  std::normal_distribution<float> g(0.0f, 0.05f);
  auto upload = [&](std::size_t n) {
    std::vector<std::uint16_t> v(n);
    for (auto& x : v) x = static_cast<std::uint16_t>(num::encode(num::Format::BF16, g(rng) * 20));
    const rt::Buffer b = dev.alloc(2 * n);
    dev.write(b, v.data(), 2 * n);
    return b;
  };
  const rt::Buffer x = upload(T * D), w1 = upload(D * F), w3 = upload(D * F), w2 = upload(F * D), y = dev.alloc(4 * T * D);
  using rt::TileProgram;
  using rt::VecOp;
  auto gemm = [](unsigned m, unsigned n, unsigned k, std::uint32_t a, std::uint32_t b, std::uint32_t c) {
    TileProgram::Gemm gm;
    gm.m = m, gm.n = n, gm.k = k, gm.a = a, gm.b = b, gm.c = c;
    return gm;
  };
  auto vec = [](VecOp op, unsigned rows, unsigned cols, std::uint32_t s0, std::uint32_t s1, std::uint32_t d) {
    TileProgram::Vec v;
    v.op = op, v.rows = rows, v.cols = cols, v.src0 = s0, v.src1 = s1, v.dst = d;
    return v;
  };
  const std::uint32_t X = 0x10000, W1 = X + 2 * T * D, W3 = W1 + 2 * D * F, W2 = W3 + 2 * D * F, H1 = W2 + 2 * F * D;
  const std::uint32_t H3 = H1 + 4 * T * F, GA = H3 + 4 * T * F, Y = GA + 2 * T * F;
  const bool swiglu = act == "swiglu";
  TileProgram p;
  p.load(x.address, X, 2 * T * D).load(w1.address, W1, 2 * D * F).load(w2.address, W2, 2 * F * D);
  if (swiglu) p.load(w3.address, W3, 2 * D * F);
  p.drain().gemm(gemm(T, F, D, X, W1, H1));
  if (swiglu) p.gemm(gemm(T, F, D, X, W3, H3));
  p.drain();
  if (swiglu) p.vec(vec(VecOp::swiglu, T, F, H1, H3, H1));
  else p.vec(vec(act == "relu2" ? VecOp::relu2 : VecOp::gelu, T, F, H1, 0, H1));
  TileProgram::Vec cast = vec(VecOp::cast_to, T, F, H1, 0, GA);
  cast.format = rt::Fmt::bf16;
  p.drain().vec(cast).drain().gemm(gemm(T, D, F, GA, W2, Y)).drain().store(Y, y.address, 4 * T * D).drain();
  const auto before = dev.stats();
  power::Meter& m = power::meter("device.x");
  const double j0 = m.dynamic_joules(power::kTiles), t0 = dev.simulated_seconds();
  dev.wait(dev.run(program, p, 1));
  const double took = dev.simulated_seconds() - t0, joules = m.dynamic_joules(power::kTiles) - j0;
  const auto after = dev.stats();
  auto busy = [&](const char* k) {
    return (after["device.tile0"][k].get<double>() - before["device.tile0"][k].get<double>()) / 1.5e9 / took;
  };
  const roofline::Report bound = dev.roofline(before, after);
  std::printf("%.3f,%.4f,%.4f,%.4f,%.3f,%s\n", took * 1e6, joules * 1e6, busy("tensor_busy_cycles"),
              busy("vector_busy_cycles"), bound.seconds() * 1e6, bound.binding().resource.c_str());
  return 0;
}

int activations(const std::string& self, const std::string& dir) {
  const char* acts[] = {"swiglu", "relu2", "gelu"};
  const unsigned ratios[] = {4, 16, 64};
  std::vector<bench::Series> series;
  std::string csv = "activation,sfu_ratio,us,tile_dynamic_uJ,tensor_busy,vector_busy,bound_us,binding\n";
  fmt::print("FFN on one tile: 64 tokens, d 256, hidden 512, BF16 in, FP32 out (dynamic energy of the tile only);\n"
             "bound: the roofline's least time for the same work (platform/roofline.hpp)\n");
  fmt::print("{:>8} {:>10} {:>10} {:>12} {:>12} {:>12} {:>10} {:>9}  {}\n", "act", "sfu_ratio", "us", "tile uJ",
             "tensor busy", "vector busy", "bound us", "of bound", "binding");
  for (const char* a : acts) {
    series.push_back({a, {}});
    for (unsigned r : ratios) {
      const std::string cmd = fmt::format("{} --run {} {}", self, a, r);
      std::FILE* p = popen(cmd.c_str(), "r");
      char line[256] = {};
      double us = 0, uj = 0, tb = 0, vb = 0, bus = 0;
      char binding[64] = {};
      bool got = false;
      while (p && std::fgets(line, sizeof line, p))
        got |= std::sscanf(line, "%lf,%lf,%lf,%lf,%lf,%63[^\n]", &us, &uj, &tb, &vb, &bus, binding) == 6;
      if (!p || pclose(p) != 0 || !got) {
        std::fprintf(stderr, "bench_study: `%s` failed\n", cmd.c_str());
        return 1;
      }
      fmt::print("{:>8} {:>10} {:>10.2f} {:>12.3f} {:>11.1f}% {:>11.1f}% {:>10.2f} {:>8.1f}%  {}\n", a, r, us, uj,
                 100 * tb, 100 * vb, bus, us > 0 ? 100 * bus / us : 0.0, binding);
      csv += fmt::format("{},{},{},{},{},{},{},{}\n", a, r, us, uj, tb, vb, bus, binding);
      series.back().points.emplace_back(r, us);
    }
  }
  fmt::print("SwiGLU pays a third GEMM (x W3) and a SiLU per element; ReLU^2 needs no special function at all, so a slow\n"
             "special-function unit costs it nothing; GELU's tanh puts it in between.\n");
  write_outputs(dir, "activations", csv, "FFN time against special-function throughput", "lane ops per special op",
                "microseconds", series, true, false);
  return 0;
}

// One `tessera-vp demo --tiny` speculative run: acceptance, speculative and
// plain tokens/s (false when it failed).
struct SpecCosts {
  double c = 0, verify = 0, measured = 0, expected = 0;  // draft and verifying steps in plain steps; decode speed-ups
  double with_v = 0;                                     // the analytic speed-up with the verifying step's own cost
  double a = 0;                                          // the per-token acceptance the analytic speed-up takes
};
bool spec_run(unsigned k, double steer, unsigned prompt, unsigned decode, double& acceptance, double& spec_tps,
              double& plain_tps, SpecCosts& costs) {
  std::string cmd =
      fmt::format("{} demo --compiled --draft small --speculate {} --prompt {} --decode {}", TESSERA_VP, k, prompt, decode);
  if (steer >= 0) cmd += fmt::format(" --acceptance {}", steer);
  std::FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return false;
  char line[1024];
  double spec_us = 0, plain_us = 0, speedup = 0;
  unsigned steps = 0, plain_steps = 0;
  acceptance = -1;
  while (std::fgets(line, sizeof line, p)) {
    if (const char* at = std::strstr(line, "): acceptance ")) std::sscanf(at, "): acceptance %lf", &acceptance);
    std::sscanf(line, "target steps %u against %u plain; virtual time %lf us against %lf us plain: speed-up %lfx", &steps,
                &plain_steps, &spec_us, &plain_us, &speedup);
    if (const char* at = std::strstr(line, "(c = ")) std::sscanf(at, "(c = %lf", &costs.c);
    if (const char* at = std::strstr(line, "verifying ")) std::sscanf(at, "verifying %*u tokens %*f us (%lf plain steps)", &costs.verify);
    if (const char* at = std::strstr(line, "), a = ")) std::sscanf(at, "), a = %lf", &costs.a);
    if (const char* at = std::strstr(line, "measured ")) std::sscanf(at, "measured %lfx", &costs.measured);
    if (const char* at = std::strstr(line, "(1 + k c) ")) std::sscanf(at, "(1 + k c) %lfx", &costs.expected);
    if (const char* at = std::strstr(line, "(v + k c): ")) std::sscanf(at, "(v + k c): %lfx", &costs.with_v);
  }
  if (pclose(p) != 0 || acceptance < 0 || spec_us <= 0) {
    std::fprintf(stderr, "bench_study: `%s` failed or printed no result\n", cmd.c_str());
    return false;
  }
  spec_tps = decode / (spec_us * 1e-6), plain_tps = decode / (plain_us * 1e-6);
  return true;
}

int spec_decode(const std::string& dir) {
  const unsigned prompt = 16, decode = 48;
  const double steered[] = {0.5, 0.7, 0.9};
  std::vector<bench::Series> series(2 + std::size(steered));
  series[0].name = "small draft, its own";
  for (std::size_t i = 0; i < std::size(steered); ++i) series[1 + i].name = fmt::format("draft steered to {:.1f}", steered[i]);
  series.back().name = "plain greedy";
  std::string csv = "k,draft,measured_acceptance,spec_tokens_per_s,plain_tokens_per_s,speedup,draft_cost,verify_cost,"
                    "decode_speedup,analytic_speedup,analytic_speedup_with_verify\n";
  csv.replace(csv.find("draft_cost"), 0, "per_token_acceptance,");
  fmt::print("Speculative decoding, the default model compiled (4 layers), a small compiled draft of its own (1 layer,\n"
             "a quarter of the width, seeded weights), {} tokens decoded after a {}-token prompt; the draft as it is,\n"
             "then steered to a per-token acceptance rate (its proposals replaced by the target's choice with that\n"
             "probability: a better draft at this draft's cost)\n", decode, prompt);
  fmt::print("{:>3} {:>10} {:>11} {:>14} {:>14} {:>9} {:>7} {:>7} {:>7} {:>9} {:>9} {:>9}\n", "k", "draft", "acceptance", "spec tok/s",
             "plain tok/s", "speed-up", "a", "c", "verify", "decode", "analytic", "with v");
  double c_sum = 0, v_sum = 0, worst_gap = 0, worst_gap_v = 0;
  unsigned runs = 0;
  auto one = [&](unsigned k, double steer, std::size_t s) {
    double acc = 0, spec = 0, plain = 0;
    SpecCosts costs;
    if (!spec_run(k, steer, prompt, decode, acc, spec, plain, costs)) return false;
    const std::string draft = steer < 0 ? "own" : fmt::format("{:.1f}", steer);
    fmt::print("{:>3} {:>10} {:>11.2f} {:>14.0f} {:>14.0f} {:>8.2f}x {:>7.3f} {:>7.3f} {:>7.2f} {:>8.2f}x {:>8.2f}x {:>8.2f}x\n", k,
               draft, acc, spec, plain, spec / plain, costs.a, costs.c, costs.verify, costs.measured, costs.expected, costs.with_v);
    csv += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{}\n", k, draft, acc, spec, plain, spec / plain, costs.a, costs.c,
                       costs.verify, costs.measured, costs.expected, costs.with_v);
    c_sum += costs.c, v_sum += costs.verify, ++runs;
    if (costs.expected > 0) worst_gap = std::max(worst_gap, std::fabs(costs.measured / costs.expected - 1));
    if (costs.with_v > 0) worst_gap_v = std::max(worst_gap_v, std::fabs(costs.measured / costs.with_v - 1));
    series[s].points.emplace_back(k, spec);
    if (s == 0) series.back().points.emplace_back(k, plain);
    return true;
  };
  for (unsigned k : {1u, 2u, 4u, 8u})
    if (!one(k, -1, 0)) return 1;
  for (std::size_t i = 0; i < std::size(steered); ++i)
    for (unsigned k : {1u, 2u, 4u, 8u})
      if (!one(k, steered[i], 1 + i)) return 1;
  fmt::print("Measured here: a draft step costs {:.2f} of a plain decoding step on average (c), a verifying step of\n"
             "k + 1 tokens {:.2f} plain steps (v); the measured decode speed-ups lie within {:.0f}% of the analytic\n"
             "(1 - a^(k+1)) / (1 - a) / (v + k c) and within {:.0f}% of the classic (1 - a^(k+1)) / (1 - a) / (1 + k c),\n"
             "a being the per-token acceptance that gives the accepted proposals a round measured (the classic form\n"
             "counts a verifying step as one plain step; this MoE's wakes more experts). The draft's own random\n"
             "weights agree with the target by chance only.\n",
             runs ? c_sum / runs : 0.0, runs ? v_sum / runs : 0.0, 100 * worst_gap_v, 100 * worst_gap);
  write_outputs(dir, "spec_decode", csv, "Speculative decoding: tokens/s against draft length and acceptance",
                "draft length k", "tokens per second (virtual)", series, false, false);
  return 0;
}


// ---- expert-parallel -----------------------------------------------------

// One `tessera-vp demo STACK --chips C --batch B` run (STACK --launches or
// --compiled): decode tokens/s, its share of the roofline's bound, and the
// share of the time the exchanges between chips took (the hand-written
// all-to-alls; false when it failed).
bool ep_run(const std::string& stack, unsigned chips, unsigned batch, unsigned prompt, unsigned decode, double& tps,
            double& of_bound, double& exchanges) {
  const std::string cmd = fmt::format("{} demo {} --chips {} --batch {} --prompt {} --decode {}", TESSERA_VP, stack, chips,
                                      batch, prompt, decode);
  std::FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return false;
  char line[4096];
  tps = of_bound = -1, exchanges = 0;
  while (std::fgets(line, sizeof line, p)) {
    if (const char* at = std::strstr(line, " tokens/s)")) {
      const char* from = at;
      while (from > line && from[-1] != ' ') --from;
      tps = std::atof(from);
    }
    if (const char* at = std::strstr(line, "; decode ")) {
      if (const char* pc = std::strstr(at, "): ")) std::sscanf(pc, "): %lf%%", &of_bound);
    }
    if (const char* at = std::strstr(line, "dispatch and combine between chips ")) {
      std::sscanf(at, "dispatch and combine between chips %lf%%", &exchanges);
    }
  }
  if (pclose(p) != 0 || tps < 0 || of_bound < 0) {
    std::fprintf(stderr, "bench_study: `%s` failed or printed no result\n", cmd.c_str());
    return false;
  }
  return true;
}

int expert_parallel(const std::string& dir) {
  const unsigned prompt = 8, decode = 8;
  const unsigned chip_counts[] = {1, 4, 8}, batches[] = {1, 8, 32};
  struct Stack {
    const char *flag, *name, *what;
    const char* one_chip;  // the flag on one chip, where it differs
  };
  const Stack stacks[] = {
      {"--launches", "hand-written", "expert e on chip e % C, rows exchanged by all-to-alls, a launch per phase on every chip", nullptr},
      {"--compiled", "compiled", "each layer's experts in slices over every chip's tiles (steps of up to 64 rows), a launch a step", nullptr},
      {"--compiled --data-parallel", "data parallel",
       "each chip the whole model and sequence s on chip s % C, every chip's step launched at once (one chip: compiled)", "--compiled"}};
  std::vector<bench::Series> series;
  std::string csv = "stack,chips,batch,decode_tokens_per_s,percent_of_bound,percent_in_exchanges\n";
  for (const Stack& st : stacks) {
    fmt::print("Expert parallelism, {}: the default MoE decoder, {}\n(`tessera-vp demo {} --chips C --batch B`, {}-token "
               "prompts, {} decode steps); decode tokens/s\n",
               st.name, st.what, st.flag, prompt, decode);
    fmt::print("{:>6} {:>6} {:>12} {:>12} {:>12}\n", "chips", "batch", "tokens/s", "% of bound", "% exchanges");
    std::map<unsigned, double> single;
    for (unsigned chips : chip_counts) {
      bench::Series& line = series.emplace_back();
      line.name = fmt::format("{}, {} chip{}", st.name, chips, chips > 1 ? "s" : "");
      for (unsigned b : batches) {
        double tps = 0, bound = 0, ex = 0;
        if (!ep_run(chips == 1 && st.one_chip ? st.one_chip : st.flag, chips, b, prompt, decode, tps, bound, ex)) return 1;
        if (chips == 1) single[b] = tps;
        fmt::print("{:>6} {:>6} {:>12.0f} {:>11.1f}% {:>11.0f}%{}\n", chips, b, tps, bound, ex,
                   chips > 1 && single.count(b) ? fmt::format("  ({:.2f}x one chip)", tps / single[b]) : "");
        csv += fmt::format("{},{},{},{},{},{}\n", st.name, chips, b, tps, bound, ex);
        line.points.emplace_back(b, tps);
      }
    }
  }
  write_outputs(dir, "expert_parallel", csv, "Expert parallelism: decode tokens/s against batch size", "batch (sequences)",
                "tokens per second (virtual)", series, true, true);
  return 0;
}

// ---- energy-batch -------------------------------------------------------
// The default MoE decoder (BF16, one chip, compiled) decoding B
// sequences at once: `tessera-vp demo --batch B --prompt 8 --decode 8`.
struct BatchRun {
  double tps = -1, uj = -1, watts = -1, leakage = -1, of_bound = -1;
};
bool batch_run(unsigned batch, BatchRun& r) {
  const std::string cmd = fmt::format("{} demo --batch {} --prompt 8 --decode 8", TESSERA_VP, batch);
  std::FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return false;
  char line[4096];
  while (std::fgets(line, sizeof line, p)) {
    if (const char* at = std::strstr(line, " tokens/s)")) {
      const char* from = at;
      while (from > line && from[-1] != ' ') --from;
      r.tps = std::atof(from);
    }
    if (const char* at = std::strstr(line, "energy: prefill ")) {
      if (const char* d = std::strstr(at, ", decode ")) std::sscanf(d, ", decode %lf uJ/token", &r.uj);
      if (const char* w = std::strstr(at, "average power ")) std::sscanf(w, "average power %lf W", &r.watts);
      if (const char* l = std::strstr(at, "leakage ")) std::sscanf(l, "leakage %lf%%", &r.leakage);
    }
    if (const char* at = std::strstr(line, "; decode ")) {
      if (const char* pc = std::strstr(at, "): ")) std::sscanf(pc, "): %lf%%", &r.of_bound);
    }
  }
  if (pclose(p) != 0 || r.tps < 0 || r.uj < 0 || r.watts < 0 || r.leakage < 0 || r.of_bound < 0) {
    std::fprintf(stderr, "bench_study: `%s` failed or printed no result\n", cmd.c_str());
    return false;
  }
  return true;
}

int energy_batch(const std::string& dir) {
  const unsigned batches[] = {1, 2, 4, 8, 16, 32, 64};
  std::vector<bench::Series> series(2);
  series[0].name = "energy per token", series[1].name = "of it leakage";
  std::string csv = "batch,decode_tokens_per_s,uj_per_token,leakage_uj_per_token,average_w,percent_of_bound\n";
  fmt::print("Energy per token against batch size: the default MoE decoder, BF16, one chip, compiled\n"
             "(`tessera-vp demo --batch B --prompt 8 --decode 8`); decode figures\n");
  fmt::print("{:>6} {:>10} {:>8} {:>11} {:>11} {:>10} {:>8} {:>11}\n", "batch", "tokens/s", "speedup", "uJ/token", "leakage uJ",
             "dynamic uJ", "W", "% of bound");
  double single = 0;
  for (unsigned b : batches) {
    BatchRun r;
    if (!batch_run(b, r)) return 1;
    if (b == 1) single = r.tps;
    // The leakage share of the run's average power, applied to its energy per token.
    const double leak = r.uj * r.leakage / 100;
    fmt::print("{:>6} {:>10.0f} {:>7.1f}x {:>11.1f} {:>11.1f} {:>10.1f} {:>8.2f} {:>10.1f}%\n", b, r.tps, r.tps / single, r.uj, leak,
               r.uj - leak, r.watts, r.of_bound);
    csv += fmt::format("{},{},{},{},{},{}\n", b, r.tps, r.uj, leak, r.watts, r.of_bound);
    series[0].points.emplace_back(b, r.uj), series[1].points.emplace_back(b, leak);
  }
  write_outputs(dir, "energy_batch", csv, "Energy per decoded token against batch size", "batch (sequences)",
                "uJ per token (virtual)", series, true, true);
  return 0;
}

// ---- power-headroom ----------------------------------------------------
// A fused MoE layer on four chips (platform/t1x4-ring.json), compute, HBM
// and links busy at once: each of a chip's 8 tiles streams expert weight
// blocks from HBM while its tensor core multiplies the previous block
// (DMA and tensor core overlap), and the chip's engine runs the layer's
// all-to-all over the links meanwhile. One run prints a JSON line.
constexpr unsigned kHrChips = 4, kHrTokens = 128, kHrD = 256, kHrSteps = 24, kHrLayers = 2;
constexpr std::uint64_t kHrPeerBytes = 2 << 20;

int headroom_run(const std::vector<std::string>& sets) {
  rt::Device::Options o;
  o.platform = std::string(TESSERA_PLATFORM_DIR) + "/t1x4-ring.json";
  o.sets = sets;
  for (unsigned h = 0; h < 4; ++h) o.sets.push_back(fmt::format("hbm{}.mode=fast", h));
  o.sets.push_back("noc.model=packet");
  rt::Cluster cluster(o);
  using rt::TileProgram;
  std::vector<rt::Kernel> kernels;
  std::vector<rt::Buffer> x, weights, a2a_in, a2a_out, tables;
  std::vector<std::vector<std::pair<unsigned, TileProgram>>> programs(kHrChips);
  const std::uint32_t X = 0x10000, B0 = 0x20000, B1 = 0x40000, C = 0x60000, wblock = 2 * kHrD * kHrD;  // the kernel below 64 KiB
  for (unsigned k = 0; k < kHrChips; ++k) {
    rt::Device& d = cluster.chip(k);
    kernels.push_back(d.load_kernel(std::string(TESSERA_KERNEL_DIR) + "/program.elf", 0xff));
    std::vector<std::uint16_t> ones(kHrTokens * kHrD, 0x3f80);  // BF16 1.0
    x.push_back(d.alloc(2 * kHrTokens * kHrD, k % 4));
    d.write(x.back(), ones.data(), 2 * kHrTokens * kHrD);
    // Each tile's expert blocks in its own stack, so all four stacks work.
    for (unsigned t = 0; t < 8; ++t) {
      weights.push_back(d.alloc(std::uint64_t(wblock) * kHrSteps, t % 4));
      const std::uint64_t mine = weights.back().address;
      TileProgram p;
      p.load(x.back().address, X, 2 * kHrTokens * kHrD).load(mine, B0, wblock).drain();
      for (unsigned s = 0; s < kHrSteps; ++s) {
        const std::uint32_t cur = s % 2 ? B1 : B0, next = s % 2 ? B0 : B1;
        if (s + 1 < kHrSteps) p.load(mine + std::uint64_t(wblock) * (s + 1), next, wblock);
        TileProgram::Gemm g;
        g.m = kHrTokens, g.n = kHrD, g.k = kHrD, g.a = X, g.b = cur, g.c = C;
        p.gemm(g).drain();
      }
      p.store(C, x.back().address, 2 * kHrTokens).drain();
      programs[k].emplace_back(t, p);
    }
    a2a_in.push_back(d.alloc(kHrPeerBytes * kHrChips, 1));
    a2a_out.push_back(d.alloc(kHrPeerBytes * kHrChips, 2));
    std::vector<std::uint64_t> t(6 * kHrChips, 0);
    for (unsigned q = 0; q < kHrChips; ++q) {
      if (q == k) continue;
      std::uint64_t* e = &t[6 * q];
      e[0] = kHrPeerBytes * q, e[1] = kHrPeerBytes, e[2] = kHrPeerBytes * k;
      e[3] = kHrPeerBytes * q, e[4] = kHrPeerBytes, e[5] = kHrPeerBytes * k;
    }
    tables.push_back(d.alloc(t.size() * 8, 3));
    d.write(tables.back(), t.data(), t.size() * 8);
  }
  const double t0 = cluster.simulated_seconds();
  std::vector<nlohmann::ordered_json> before(kHrChips);
  for (unsigned k = 0; k < kHrChips; ++k) before[k] = cluster.chip(k).stats();
  std::vector<double> j0(kHrChips);
  for (unsigned k = 0; k < kHrChips; ++k) j0[k] = power::meter(fmt::format("chip{}.x", k)).total_joules(sc_core::sc_time(t0, sc_core::SC_SEC));
  for (unsigned l = 0; l < kHrLayers; ++l) {
    std::vector<rt::Event> work, comm;
    for (unsigned k = 0; k < kHrChips; ++k) {
      work.push_back(cluster.chip(k).run(kernels[k], programs[k]));
      comm.push_back(cluster.chip(k).collective(TP_CE_ALL_TO_ALL | TP_CE_DIRECT | TP_CE_PUSH | TP_CE_BF16, a2a_in[k],
                                                a2a_out[k], 0, &tables[k]));
    }
    for (unsigned k = 0; k < kHrChips; ++k) cluster.chip(k).wait(work[k]), cluster.chip(k).wait(comm[k]);
  }
  const double t1 = cluster.simulated_seconds();
  const auto stats = cluster.stats();
  nlohmann::ordered_json out;
  out["seconds"] = t1 - t0;
  // The roofline's bound of the busiest chip's work, at the platform's
  // nominal clocks (what a cap's lower clocks are measured against).
  roofline::Report bound;
  for (unsigned k = 0; k < kHrChips; ++k) {
    const roofline::Report r = cluster.chip(k).roofline(before[k], cluster.chip(k).stats());
    if (k == 0 || r.seconds() > bound.seconds()) bound = r;
  }
  out["bound_seconds"] = bound.seconds();
  out["binding"] = bound.binding().resource + ", " + bound.binding().where;
  out["tokens"] = kHrLayers * kHrTokens * 8 * kHrChips;
  double joules = 0;
  for (unsigned k = 0; k < kHrChips; ++k)
    joules += power::meter(fmt::format("chip{}.x", k)).total_joules(sc_core::sc_time(t1, sc_core::SC_SEC)) - j0[k];
  out["joules"] = joules;
  // Chip 0: its power per window and domain (leakage included), its P-states.
  power::Meter& m = power::meter("chip0.x");
  const double w = m.window().to_seconds();
  const auto first = static_cast<std::size_t>(t0 / w), last = static_cast<std::size_t>(t1 / w);
  std::array<std::vector<double>, power::kMaxDomains> leak;
  for (unsigned d = 0; d < power::domain_count(); ++d) leak[d] = m.static_watts(static_cast<power::Domain>(d));
  nlohmann::ordered_json peak = nlohmann::ordered_json::object(), windows = nlohmann::ordered_json::array();
  for (std::size_t i = first; i < last && i < m.windows().size(); ++i) {
    double total = 0;
    for (unsigned d = 0; d < power::domain_count(); ++d) {
      const double p = m.windows()[i][d] / w + leak[d][i];
      const std::string n = power::domain_name(d);
      peak[n] = std::max(peak.value(n, 0.0), p);
      peak[n + "_dynamic"] = std::max(peak.value(n + "_dynamic", 0.0), m.windows()[i][d] / w);
      total += p;
    }
    windows.push_back(total);
  }
  out["peak_w"] = peak;
  out["window_w"] = windows;
  const auto& p = stats["chip0.power"];
  for (unsigned d = 0; d < power::domain_count(); ++d) {
    const std::string n = power::domain_name(d);
    out["throttles"][n] = p[n + "_throttles"];
    out["residency"][n] = p[n + "_pstate_residency"];
  }
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

nlohmann::json headroom_child(const std::string& self, const std::vector<std::string>& sets) {
  std::string cmd = self + " --headroom-run";
  for (const auto& s : sets) cmd += " " + s;
  std::FILE* p = popen(cmd.c_str(), "r");
  std::string text;
  char buf[4096];
  while (p && std::fgets(buf, sizeof buf, p)) text += buf;
  if (!p || pclose(p) != 0) throw std::runtime_error("`" + cmd + "` failed");
  const auto at = text.rfind("{\"seconds\"");
  if (at == std::string::npos) throw std::runtime_error("`" + cmd + "` printed no result");
  return nlohmann::json::parse(text.substr(at));
}

int power_headroom(const std::string& self, const std::string& dir) {
  using power::kDomains;
  const power::PowerManager::Config defaults;
  const char* const names[] = {"tiles", "noc", "hbm", "links", "cp"};
  fmt::print("Power headroom: a fused MoE layer on 4 chips (t1x4-ring), per chip 8 tiles streaming expert blocks\n"
             "from HBM into their tensor cores while the engine runs an all-to-all ({} KiB per peer), {} layers\n",
             kHrPeerBytes >> 10, kHrLayers);
  const nlohmann::json free_run = headroom_child(self, {});
  double sum_peaks = 0;
  fmt::print("uncapped: {:.2f} us; chip 0's peak per domain over 1 us windows:", free_run["seconds"].get<double>() * 1e6);
  for (const char* n : names) {
    sum_peaks += free_run["peak_w"][n].get<double>();
    fmt::print(" {} {:.2f} W", n, free_run["peak_w"][n].get<double>());
  }
  fmt::print("; sum {:.2f} W\n", sum_peaks);
  fmt::print("the roofline's bound of the busiest chip's work, at nominal clocks: {:.2f} us ({}); uncapped: {:.1f}% of it\n",
             free_run["bound_seconds"].get<double>() * 1e6, free_run["binding"].get<std::string>(),
             100 * free_run["bound_seconds"].get<double>() / free_run["seconds"].get<double>());
  // Reserving headroom: clocks fixed so that every domain at its peak at
  // once stays under the cap (the same greedy as the manager's loop: the
  // step that saves the most first), no control loop.
  auto reserved = [&](double cap) {
    std::array<unsigned, kDomains> s{};
    auto peak = [&](unsigned d, unsigned i) {
      const auto& ps = defaults.pstates[d];
      const double r = ps[i].volts / ps[0].volts;
      const double dyn = free_run["peak_w"][std::string(names[d]) + "_dynamic"].get<double>();
      return dyn * ps[i].scale * r * r + (free_run["peak_w"][names[d]].get<double>() - dyn) * r * r;
    };
    for (;;) {
      double sum = 0;
      for (unsigned d = 0; d < kDomains; ++d) sum += peak(d, s[d]);
      if (sum <= cap) break;
      unsigned best = kDomains;
      double saving = 0;
      for (unsigned d = 0; d < kDomains; ++d)
        if (s[d] + 1 < defaults.pstates[d].size() && peak(d, s[d]) - peak(d, s[d] + 1) > saving)
          saving = peak(d, s[d]) - peak(d, s[d] + 1), best = d;
      if (best == kDomains) break;
      ++s[best];
    }
    return s;
  };
  const double tokens = free_run["tokens"].get<double>();
  std::string csv = "cap_percent,cap_w,policy,us,of_bound,tokens_per_s,uj_per_token,chip0_avg_w,chip0_max_avg_w";
  for (const char* n : names) csv += fmt::format(",{0}_throttles,{0}_mean_clock", n);
  csv += "\n";
  std::vector<bench::Series> series = {{"dynamic (cap + control loop)", {}}, {"reserved (clocks fixed for the worst case)", {}}};
  std::vector<bench::Series> energy = series;
  fmt::print("{:>5} {:>7} {:>9} {:>9} {:>8} {:>11} {:>9} {:>8} {:>8}  {}\n", "cap", "cap W", "policy", "us", "of bound",
             "Mtok/s", "uJ/tok", "avg W", "max10 W", "mean clock (throttles) tiles/noc/hbm/links/cp");
  for (int pct = 50; pct <= 120; pct += 10) {
    const double cap = sum_peaks * pct / 100.0;
    for (int policy = 0; policy < 2; ++policy) {
      std::vector<std::string> sets;
      if (policy == 0) sets.push_back(fmt::format("power.cap_w={}", cap));
      else {
        const auto s = reserved(cap);
        for (unsigned d = 0; d < kDomains; ++d) sets.push_back(fmt::format("power.pstate_{}={}", names[d], s[d]));
      }
      const nlohmann::json r = headroom_child(self, sets);
      const double secs = r["seconds"].get<double>(), joules = r["joules"].get<double>();
      const auto& win = r["window_w"];
      double avg = 0, worst = 0;
      for (const auto& x : win) avg += x.get<double>();
      avg /= std::max<std::size_t>(1, win.size());
      const std::size_t span = 10 * 6;  // ten response times of the loop (1 us window + 5 us slowest transition)
      for (std::size_t i = 0; i + span <= win.size(); ++i) {
        double sum = 0;
        for (std::size_t k = i; k < i + span; ++k) sum += win[k].get<double>();
        worst = std::max(worst, sum / span);
      }
      std::string clocks;
      const double of_bound = r["bound_seconds"].get<double>() / secs;
      csv += fmt::format("{},{},{},{},{},{},{},{},{}", pct, cap, policy ? "reserved" : "dynamic", secs * 1e6, of_bound,
                         tokens / secs, joules / tokens * 1e6, avg, worst);
      for (unsigned d = 0; d < kDomains; ++d) {
        double clock = 0;
        const auto& res = r["residency"][names[d]];
        for (std::size_t i = 0; i < res.size(); ++i) clock += res[i].get<double>() * defaults.pstates[d][i].scale;
        clocks += fmt::format("{}{:.2f}({})", d ? " " : "", clock, r["throttles"][names[d]].get<int>());
        csv += fmt::format(",{},{}", r["throttles"][names[d]].get<int>(), clock);
      }
      csv += "\n";
      fmt::print("{:>4}% {:>7.2f} {:>9} {:>9.2f} {:>7.1f}% {:>11.3f} {:>9.3f} {:>8.2f} {:>8.2f}  {}\n", pct, cap,
                 policy ? "reserved" : "dynamic", secs * 1e6, 100 * of_bound, tokens / secs / 1e6, joules / tokens * 1e6,
                 avg, worst, clocks);
      series[policy].points.emplace_back(pct, tokens / secs / 1e6);
      energy[policy].points.emplace_back(pct, joules / tokens * 1e6);
    }
  }
  fmt::print("'max10 W': chip 0's highest average over any 60 us (ten of the loop's response times); the mean\n"
             "clock is the time-weighted frequency fraction over the whole run, with the loop's throttle count.\n");
  write_outputs(dir, "power_headroom", csv, "Fused MoE layer under a power cap (4 chips)", "cap, % of the sum of domain peaks",
                "million tokens per second", series, false, false);
  bench::write_svg(dir + "/power_headroom_energy.svg", "Fused MoE layer under a power cap: energy", "cap, % of the sum of domain peaks",
                   "microjoules per token (4 chips)", energy, false, false);
  fmt::print("(wrote {}/power_headroom_energy.svg)\n", dir);
  return 0;
}
// ---- llm-scale ----------------------------------------------------------
// Hugging Face LLMs decoding at full size in the timing-only mode on
// systems of chips (issue 18, section 5): for each model, chip count and
// batch, one decode step after a one-token prompt per sequence,
// `tessera-vp demo --hf-config CONFIG [--layers L] --prompt 1 --decode 1
// --batch B --chips C --timing-only [--routing seeded]` (seeded routing
// for models with experts, so the timing is the data run's), under
// `mpirun -np R` where --ranks says so. The parallelism is the given
// one, never the demo's own choice: --parallel spread (the default:
// matmuls by columns over the chips, experts by slices or by expert,
// attention by heads; with --groups G, the demo's --groups G, data
// parallel over G groups of C / G chips, each so, for the chip counts
// and batches G divides) or --parallel all-reduce (Megatron's shards,
// the row-split sums all-reduced by the chips' engines; with --groups G,
// in each group over its own chips).
struct ScaleRun {
  double step_us = -1, tps = -1, per_chip = -1, uj = -1, of_bound = -1, wall_s = -1, gb = -1, gb0 = -1;
  std::string binding;
};

bool scale_run(const std::string& cmd, ScaleRun& r) {
  std::FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return false;
  char line[8192];
  std::string last;
  while (std::fgets(line, sizeof line, p)) {
    last = line;
    if (std::strncmp(line, "decode of ", 10) == 0) {
      if (const char* at = std::strstr(line, " nodes a step, ")) std::sscanf(at, " nodes a step, %lf", &r.step_us);
      if (const char* at = std::strstr(line, " us a step (")) std::sscanf(at, " us a step (%lf tokens/s, %lf per chip", &r.tps, &r.per_chip);
      if (const char* at = std::strstr(line, " us/token (")) std::sscanf(at, " us/token (%lf tokens/s, %lf per chip", &r.tps, &r.per_chip);
    }
    if (std::strncmp(line, "decode roofline: ", 17) == 0) {
      if (const char* at = std::strstr(line, " (")) {
        char what[256] = {0};
        if (std::sscanf(at, " (%255[^)])", what) == 1) {
          r.binding = what;
          const std::size_t b = r.binding.rfind(" binding");
          if (b != std::string::npos) r.binding.erase(b);
        }
      }
      if (const char* at = std::strstr(line, "): ")) std::sscanf(at, "): %lf%%", &r.of_bound);
    }
    if (const char* at = std::strstr(line, "energy: prefill "))
      if (const char* d = std::strstr(at, ", decode ")) std::sscanf(d, ", decode %lf uJ/token", &r.uj);
    if (const char* at = std::strstr(line, "simulator wall time: "))
      if (const char* d = std::strstr(at, ", decode ")) std::sscanf(d, ", decode %lf s/", &r.wall_s);
    if (const char* at = std::strstr(line, " GB of weights placed in HBM over "))
      if (const char* o = std::strstr(at, " chips (")) {
        const char* from = at;
        while (from > line && from[-1] != ' ') --from;
        r.gb = std::atof(from);
        std::sscanf(o, " chips (%lf GB on chip 0", &r.gb0);
      }
  }
  if (pclose(p) != 0 || r.step_us < 0 || r.tps < 0 || r.uj < 0 || r.of_bound < 0 || r.wall_s < 0) {
    std::fprintf(stderr, "bench_study: `%s` failed or printed no result: %s", cmd.c_str(), last.c_str());
    return false;
  }
  return true;
}

// Numbers from a comma-separated list.
std::vector<unsigned> numbers(const std::string& list) {
  std::vector<unsigned> r;
  for (std::size_t at = 0; at <= list.size();) {
    const std::size_t end = std::min(list.find(',', at), list.size());
    const std::string n = list.substr(at, end - at);
    char* rest = nullptr;
    const unsigned long v = std::strtoul(n.c_str(), &rest, 10);
    if (n.empty() || *rest || !v) return {};
    r.push_back(static_cast<unsigned>(v));
    at = end + 1;
  }
  return r;
}

int llm_scale(const std::map<std::string, std::string>& opt, const std::string& dir) {
  auto get = [&](const char* k, const char* d) { const auto it = opt.find(k); return it == opt.end() ? std::string(d) : it->second; };
  const std::string list = get("models", "llama-3-70b,deepseek-v3");
  std::vector<std::string> models;
  for (std::size_t at = 0;;) {
    const std::size_t end = std::min(list.find(',', at), list.size());
    models.push_back(list.substr(at, end - at));
    if (models.back().empty()) {
      std::fprintf(stderr, "bench_study llm-scale: --models takes config names (sw/hf/configs) or paths, comma-separated\n");
      return 2;
    }
    if (end == list.size()) break;
    at = end + 1;
  }
  const std::vector<unsigned> chips = numbers(get("chips", "8,16,32,64")), batches = numbers(get("batches", "1,2,4,8,16,32,64"));
  const std::vector<unsigned> ranks = numbers(get("ranks", "1")), groups = numbers(get("groups", "1"));
  const std::string layers = get("layers", ""), parallel = get("parallel", "spread");
  if (chips.empty() || batches.empty() || ranks.size() != 1 || groups.size() != 1 || (!layers.empty() && numbers(layers).size() != 1)) {
    std::fprintf(stderr, "bench_study llm-scale: --chips, --batches and --ranks take counts above zero (1,2,...), --layers and "
                         "--groups one\n");
    return 2;
  }
  if (parallel != "spread" && parallel != "all-reduce") {
    std::fprintf(stderr, "bench_study llm-scale: --parallel takes spread or all-reduce\n");
    return 2;
  }
  const bool all_reduce = parallel == "all-reduce";
  std::vector<std::pair<std::string, bool>> configs;  // each model's file, and whether it has experts
  for (const std::string& m : models) {
    const std::string config = m.find('/') != std::string::npos ? m : std::string(TESSERA_HF_CONFIGS) + "/" + m + ".json";
    std::ifstream in(config);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (text.empty()) {
      std::fprintf(stderr, "bench_study llm-scale: cannot read %s\n", config.c_str());
      return 2;
    }
    configs.emplace_back(config, text.find("\"n_routed_experts\"") != std::string::npos ||
                                     text.find("\"num_local_experts\"") != std::string::npos ||
                                     text.find("\"num_experts\"") != std::string::npos);
  }
  std::vector<bench::Series> series;
  std::string csv = "model,layers,chips,groups,parallelism,batch,step_us,tokens_per_s,tokens_per_s_per_chip,mj_per_token,percent_of_bound,binding,"
                    "weights_gb,chip0_gb,sim_s_per_step,sim_s_per_token\n";
  fmt::print("Decode at full size in the timing-only mode (issue 18, section 5): one step after a one-token prompt a sequence,\n"
             "`tessera-vp demo --hf-config CONFIG{} --prompt 1 --decode 1 --batch B --chips C{} --timing-only`{}\n",
             layers.empty() ? "" : " --layers " + layers,
             (groups[0] > 1 ? fmt::format(" --groups {}", groups[0]) : std::string()) + (all_reduce ? " --all-reduce" : ""),
             ranks[0] > 1 ? fmt::format(" on {} MPI ranks", ranks[0]) : "");
  fmt::print("{:<16} {:>5} {:>5} {:>10} {:>10} {:>9} {:>9} {:>9}  {:<22} {:>8} {:>10}\n", "model", "chips", "batch", "TPOT us",
             "tokens/s", "per chip", "mJ/token", "% bound", "binding", "GB chip0", "sim s/tok");
  int rc = 0;
  for (std::size_t mi = 0; mi < models.size(); ++mi) {
    const std::string& m = models[mi];
    const auto& [config, experts] = configs[mi];
    for (unsigned c : chips) {
      const unsigned g = groups[0];
      series.push_back({fmt::format("{}, {} chips{}{}", m, c, g > 1 ? fmt::format(" in {} groups", g) : "", all_reduce ? ", all-reduce" : ""), {}});
      for (unsigned b : batches) {
        if (c % g || b % g) {
          fmt::print("{:<16} {:>5} {:>5}  (not run: {} groups divide not both {} chips and {} sequences)\n", m, c, b, g, c, b);
          continue;
        }
        const std::string cmd = fmt::format(
            "{}{} demo --hf-config {}{} --prompt 1 --decode 1 --batch {} --chips {}{}{} --timing-only{}",
            ranks[0] > 1 ? fmt::format("OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --oversubscribe -np {} ", ranks[0]) : "",
            TESSERA_VP, config, layers.empty() ? "" : " --layers " + layers, b, c, g > 1 ? fmt::format(" --groups {}", g) : "",
            all_reduce ? " --parallel all-reduce" : " --parallel spread", experts ? " --routing seeded" : "");
        ScaleRun r;
        if (!scale_run(cmd, r)) {
          rc = 1;
          continue;
        }
        fmt::print("{:<16} {:>5} {:>5} {:>10.2f} {:>10.1f} {:>9.2f} {:>9.2f} {:>8.1f}%  {:<22} {:>8.2f} {:>10.2f}\n", m, c, b, r.step_us,
                   r.tps, r.per_chip, r.uj / 1000, r.of_bound, r.binding, r.gb0, r.wall_s / b);
        std::fflush(stdout);  // a run can take many minutes: each row as it comes
        csv += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", m, layers.empty() ? "all" : layers, c, g, parallel, b, r.step_us, r.tps,
                           r.per_chip, r.uj / 1000, r.of_bound, r.binding, r.gb, r.gb0, r.wall_s, r.wall_s / b);
        series.back().points.emplace_back(b, r.per_chip);
      }
    }
  }
  write_outputs(dir, "llm_scale", csv, "Decode at full size: tokens/s per chip against batch size", "batch (sequences)",
                "tokens per second per chip (virtual)", series, true, true);
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  std::string what, dir = ".";
  if (argc == 4 && std::string(argv[1]) == "--run") return activation_run(argv[2], static_cast<unsigned>(std::atoi(argv[3])));
  if (argc >= 2 && std::string(argv[1]) == "--headroom-run") return headroom_run(std::vector<std::string>(argv + 2, argv + argc));
  std::map<std::string, std::string> scale;  // llm-scale's options
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--out" && i + 1 < argc) dir = argv[++i];
    else if ((a == "--models" || a == "--chips" || a == "--batches" || a == "--layers" || a == "--ranks" || a == "--groups" ||
              a == "--parallel") &&
             i + 1 < argc)
      scale[a.substr(2)] = argv[++i];
    else if (what.empty()) what = a;
    else what = "?";
  }
  if (!scale.empty() && what != "llm-scale") what = "?";
  if (what == "llm-scale") return llm_scale(scale, dir);
  if (what == "fp8-accumulation") return fp8_accumulation(dir);
  if (what == "spec-decode") return spec_decode(dir);
  if (what == "expert-parallel") return expert_parallel(dir);
  if (what == "energy-batch") return energy_batch(dir);
  if (what == "activations") return activations(argv[0], dir);
  if (what == "power-headroom") {
    try {
      return power_headroom(argv[0], dir);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "bench_study: %s\n", e.what());
      return 1;
    }
  }
  std::fprintf(stderr, "usage: bench_study fp8-accumulation|activations|spec-decode|expert-parallel|energy-batch|power-headroom [--out DIR]\n"
                       "       bench_study llm-scale [--models NAME,...] [--layers L] [--chips C,...] [--batches B,...] [--groups G] [--parallel spread|all-reduce] [--ranks R] [--out DIR]\n");
  return 2;
}
