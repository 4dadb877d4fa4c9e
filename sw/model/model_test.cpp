// A tiny MoE decoder end to end on the virtual T1: prefill and greedy
// decode, every step's logits against the host FP32 reference, the same
// tokens, the experts the router chose agreeing with the reference's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>

#include "compiled.hpp"
#include "model.hpp"
#include "serve.hpp"

using namespace tessera;
using namespace tessera::model;

namespace {
// The tiny configuration the tests share: 2 layers, d_model 64, 8 heads, 4 experts, vocabulary 256.
Config tiny() {
  Config c;
  c.layers = 2, c.d_model = 64, c.heads = 8, c.experts = 4, c.hidden = 128, c.hidden_chunk = 64, c.vocab = 256;
  c.context = 32, c.seed = 7;
  return c;
}

// The FP8 configuration the tests share: 2 layers, d_model 128 (whole
// 128-column blocks), 2 heads, 4 experts of 256, vocabulary 1024.
Config small_fp8() {
  Config c;
  c.layers = 2, c.d_model = 128, c.heads = 2, c.experts = 4, c.hidden = 256, c.hidden_chunk = 128, c.vocab = 1024;
  c.context = 32, c.seed = 5, c.fp8 = true;
  return c;
}

// The device's tensor-core MACs so far in FP8 and in BF16, over its tiles.
std::pair<std::uint64_t, std::uint64_t> tensor_macs(rt::Device& dev) {
  std::uint64_t fp8 = 0, bf16 = 0;
  const auto s = dev.stats();
  for (unsigned t = 0; t < dev.tiles(); ++t) {
    fp8 += s["device.tile" + std::to_string(t)]["tensor_macs_fp8"].get<std::uint64_t>();
    bf16 += s["device.tile" + std::to_string(t)]["tensor_macs_bf16"].get<std::uint64_t>();
  }
  return {fp8, bf16};
}

// The tiny configuration as a step of graphs with the experts on the
// device, holding `sequences` sequences at once.
Config tiny_batched(unsigned sequences) {
  Config c = tiny();
  c.device_dispatch = c.graph = true;
  c.max_sequences = sequences;
  return c;
}

// Prefills `prompt` and decodes greedily for `steps` - 1 more steps on the
// device and in the reference; returns the worst relative logit error of
// any step. The device's greedy choice must be the argmax of its logits.
template <class Model>
double compare_steps(const Config& c, Model& m, Reference& ref, std::vector<std::uint32_t> tokens, unsigned steps,
                     unsigned* disagreements, std::vector<std::uint32_t>* chosen = nullptr) {
  unsigned pos = 0;
  double worst = 0;
  for (unsigned step = 0; step < steps; ++step) {
    std::vector<std::vector<std::uint32_t>> routes;
    std::uint32_t next = 0;
    const auto logits = m.step(tokens, pos, &next, &routes);
    const auto want = ref.step(tokens, pos, routes, disagreements);
    EXPECT_EQ(logits.size(), want.size());
    double err = 0, scale = 0;
    for (std::size_t i = 0; i < want.size() && i < logits.size(); ++i)
      err = std::max(err, double(std::fabs(logits[i] - want[i]))), scale = std::max(scale, double(std::fabs(want[i])));
    worst = std::max(worst, err / scale);
    const auto last = logits.end() - c.vocab;
    EXPECT_EQ(next, static_cast<std::uint32_t>(std::max_element(last, logits.end()) - last)) << "step " << step;
    pos += static_cast<unsigned>(tokens.size());
    tokens = {next};
    if (chosen) chosen->push_back(next);
  }
  return worst;
}
}  // namespace

TEST(Model, TinyMoeDecoderMatchesTheHostReference) {
  Config c = tiny();
  const Weights w = Weights::random(c);
  rt::Device dev;
  DeviceModel m(dev, c, w);
  Reference ref(c, w);
  unsigned disagreements = 0;
  const double worst = compare_steps(c, m, ref, {1, 17, 42, 200, 5}, 4, &disagreements);
  std::printf("tiny MoE: 5-token prefill + 3 decode steps, max relative logit error %.3g, routing disagreements %u\n",
              worst, disagreements);
  // BF16 activations into every GEMM against an FP32 reference.
  EXPECT_LT(worst, 0.03);
  EXPECT_LE(disagreements, 1u);
  EXPECT_GT(m.profile().attention, 0);
  EXPECT_GT(m.profile().experts, 0);
  const auto s = dev.stats();
  std::uint64_t macs = 0;
  for (unsigned t = 0; t < 8; ++t) macs += s["device.tile" + std::to_string(t)]["tensor_macs_bf16"].get<std::uint64_t>();
  EXPECT_GT(macs, 0u);
}

#include "speculative.hpp"

TEST(Model, SpeculativeDecodingGivesTheGreedyTokens) {
  Config c;
  c.layers = 2, c.d_model = 64, c.heads = 8, c.experts = 4, c.hidden = 128, c.hidden_chunk = 64, c.vocab = 256;
  c.context = 48, c.seed = 11;
  const Weights w = Weights::random(c);
  Config dc;
  const Weights dw = first_layer_draft(c, w, dc);
  rt::Device dev;
  DeviceModel target(dev, c, w), same(dev, c, w), draft(dev, dc, dw);
  const std::vector<std::uint32_t> prompt = {3, 141, 59, 26, 53};
  const unsigned n = 8, k = 3;
  const Decoded plain = greedy(dev, target, prompt, n);
  ASSERT_EQ(plain.tokens.size(), n);
  EXPECT_EQ(plain.target_steps, n);
  // A draft that is the target itself: every proposal is accepted.
  const Decoded perfect = speculative(dev, target, same, prompt, n, k);
  EXPECT_EQ(perfect.tokens, plain.tokens);
  EXPECT_EQ(perfect.accepted, perfect.proposed);
  EXPECT_LE(perfect.target_steps, 1 + (n - 1 + k) / (k + 1)) << "k + 1 tokens per target step";
  EXPECT_LT(perfect.target_steps, plain.target_steps);
  // The one-layer draft: the same tokens, whatever it guesses.
  const Decoded spec = speculative(dev, target, draft, prompt, n, k);
  EXPECT_EQ(spec.tokens, plain.tokens);
  EXPECT_LE(spec.accepted, spec.proposed);
  // The draft steered to an acceptance rate: 1 accepts everything, 0 nothing, same tokens always.
  Steering all{1.0, 5, &plain.tokens}, none{0.0, 5, &plain.tokens};
  const Decoded sure = speculative(dev, target, draft, prompt, n, k, &all);
  EXPECT_EQ(sure.tokens, plain.tokens);
  EXPECT_EQ(sure.accepted, sure.proposed);
  EXPECT_EQ(sure.target_steps, perfect.target_steps) << "as good as the target itself";
  const Decoded never = speculative(dev, target, draft, prompt, n, k, &none);
  EXPECT_EQ(never.tokens, plain.tokens);
  EXPECT_EQ(never.accepted, 0u);
  EXPECT_EQ(never.target_steps, plain.target_steps);
  // A small draft of its own (a quarter of the width, one layer): a few
  // percent of the weights, the same tokens, and steered like the other.
  Config sc;
  const Weights sw = small_draft(c, sc);
  EXPECT_EQ(sc.vocab, c.vocab);
  EXPECT_EQ(sc.layers, 1u);
  EXPECT_EQ(sc.d_model, c.d_model / 4);
  EXPECT_LT(sw.count() * 10, w.count()) << sw.count() << " weights against " << w.count();
  CompiledModel small(dev, sc, sw);
  const Decoded cheap = speculative(dev, target, small, prompt, n, k);
  EXPECT_EQ(cheap.tokens, plain.tokens);
  const Decoded cheap_sure = speculative(dev, target, small, prompt, n, k, &all);
  EXPECT_EQ(cheap_sure.tokens, plain.tokens);
  EXPECT_EQ(cheap_sure.target_steps, perfect.target_steps);
  EXPECT_LT(cheap_sure.draft_seconds, sure.draft_seconds) << "the small draft's steps cost less than the one-layer draft's";
  std::printf("speculative (k=%u): perfect draft %u target steps, %.1f us vs plain %u steps, %.1f us; "
              "one-layer draft acceptance %.2f, %u target steps, %.1f us\n",
              k, perfect.target_steps, perfect.seconds * 1e6, plain.target_steps, plain.seconds * 1e6, spec.acceptance(),
              spec.target_steps, spec.seconds * 1e6);
}

TEST(Model, Fp8OptionRunsTheSameModelWithinItsBound) {
  const Config c = small_fp8();
  const Weights w = Weights::random(c);
  rt::Device dev;
  DeviceModel m(dev, c, w);
  Reference ref(c, w);
  unsigned disagreements = 0;
  const double worst = compare_steps(c, m, ref, {9, 99, 999, 5}, 3, &disagreements);
  std::printf("tiny MoE in FP8: max relative logit error %.3g, routing disagreements %u\n", worst, disagreements);
  // The weights are the FP8 values on both sides; the device also rounds
  // the GEMMs' activations to E4M3 (2^-4 relative steps).
  EXPECT_LT(worst, 0.15);
  const auto [fp8, bf16] = tensor_macs(dev);
  EXPECT_GT(fp8, bf16) << "the projections, experts and head run in FP8; attention and the router in BF16";
}

TEST(Model, TheCompiledModelInFp8GivesTheHandWrittenTokensAndLogits) {
  // FP8 compiled (matmul_scaled projections and LM head, moe_scaled
  // experts) and DeviceModel's hand-written FP8 programs: the same casts
  // (activations in 1 x 128 groups, E4M3 codes with their blocks' scales);
  // the experts' sums differ in order only (the compiled kernel scales
  // each slice's plane by its gate before the combine adds them, the
  // hand-written programs accumulate the chunks first), so here the same
  // tokens and the prompt's logits to the bit, a decode step's within a
  // few units in the last place (2 ULP once in 3 steps when this landed),
  // within the FP8 bound of the FP32 reference, the tensor cores mostly
  // in FP8; and the compiled steps take far less virtual time.
  const Config c = small_fp8();
  const Weights w = Weights::random(c);
  rt::Device dev;
  CompiledModel compiled(dev, c, w);
  DeviceModel hand(dev, c, w);
  Reference ref(c, w);
  const std::vector<std::uint32_t> prompt = {9, 99, 999, 5};
  unsigned disagreements = 0;
  const auto before = tensor_macs(dev);
  const double worst = compare_steps(c, compiled, ref, prompt, 4, &disagreements);
  const auto after = tensor_macs(dev);
  const std::uint64_t fp8 = after.first - before.first, bf16 = after.second - before.second;
  std::printf("compiled FP8 tiny MoE: max relative logit error %.3g, routing disagreements %u\n", worst, disagreements);
  EXPECT_LT(worst, 0.15);
  EXPECT_GT(fp8, bf16) << "the projections, experts and head in FP8; attention and the router in BF16";
  std::vector<std::uint32_t> tokens = prompt;
  unsigned pos = 0, identical = 0;
  for (unsigned step = 0; step < 4; ++step) {
    std::uint32_t na = 0, nb = 0;
    const double t0 = dev.simulated_seconds();
    const std::vector<float> a = compiled.step(tokens, pos, &na, nullptr);
    const double t1 = dev.simulated_seconds();
    const std::vector<float> b = hand.step(tokens, pos, &nb, nullptr);
    const double t2 = dev.simulated_seconds();
    ASSERT_EQ(a.size(), b.size());
    double diff = 0, scale = 0;
    for (std::size_t i = 0; i < a.size(); ++i)
      diff = std::max(diff, double(std::fabs(a[i] - b[i]))), scale = std::max(scale, double(std::fabs(b[i])));
    identical += std::memcmp(a.data(), b.data(), 4 * a.size()) == 0;
    if (step == 0) {
      EXPECT_EQ(diff, 0.0) << "the prompt's step: the same logits, bit for bit";
    }
    EXPECT_LT(diff, 1e-6 * scale) << "step " << step << ": a few units in the last place at most";
    EXPECT_EQ(na, nb);
    EXPECT_LT(t1 - t0, 0.5 * (t2 - t1)) << "step " << step << ": compiled " << t1 - t0 << " s, hand-written " << t2 - t1 << " s";
    pos += static_cast<unsigned>(tokens.size());
    tokens = {na};
  }
  std::printf("compiled FP8 against hand-written FP8: %u of 4 steps' logits bit for bit, the others within 1e-6\n", identical);
}

TEST(Model, ExpertsDispatchedOnTheDeviceGiveTheSameLogits) {
  Config c = tiny();
  c.device_dispatch = true;
  const Weights w = Weights::random(c);
  rt::Device dev;
  DeviceModel m(dev, c, w);
  Reference ref(c, w);
  unsigned disagreements = 0;
  const double worst = compare_steps(c, m, ref, {1, 17, 42, 200, 5}, 3, &disagreements);
  std::printf("tiny MoE, experts dispatched on the device: max relative logit error %.3g\n", worst);
  // The same seed and steps as the host-dispatched test: the same arithmetic, the same error.
  EXPECT_LT(worst, 0.03);
  EXPECT_EQ(disagreements, 0u);
  EXPECT_GT(dev.stats()["device.tile0"]["kernels_done"].get<std::uint64_t>(), 0u);
}

// A step as one graph: the same operations as the device-dispatched
// launches, so bit-identical logits and tokens, with one launch a step
// instead of one a phase (and less simulated time).
TEST(Model, AStepAsOneGraphGivesTheLaunchesLogitsBitForBit) {
  Config c = tiny();
  c.device_dispatch = true;
  Config g = c;
  g.graph = true;
  const Weights w = Weights::random(c);
  rt::Device dev;
  DeviceModel launches(dev, c, w), graph(dev, g, w);
  std::vector<std::uint32_t> tokens = {1, 17, 42, 200, 5};
  unsigned pos = 0;
  double t_launches = 0, t_graph = 0;
  for (unsigned step = 0; step < 3; ++step) {
    std::uint32_t a = 0, b = 0;
    std::vector<std::vector<std::uint32_t>> ra, rb;
    double t0 = dev.simulated_seconds();
    const auto la = launches.step(tokens, pos, &a, &ra);
    t_launches += dev.simulated_seconds() - t0;
    t0 = dev.simulated_seconds();
    const auto lb = graph.step(tokens, pos, &b, &rb);
    t_graph += dev.simulated_seconds() - t0;
    ASSERT_EQ(la.size(), lb.size());
    EXPECT_EQ(std::memcmp(la.data(), lb.data(), la.size() * 4), 0) << "step " << step;
    EXPECT_EQ(a, b) << "step " << step;
    EXPECT_EQ(ra, rb) << "step " << step << ": the routes read back with the token";
    pos += static_cast<unsigned>(tokens.size());
    tokens = {a};
  }
  std::printf("tiny MoE, 3 steps: %.1f us with a launch per phase, %.1f us as a graph a step\n", t_launches * 1e6,
              t_graph * 1e6);
  EXPECT_LT(t_graph, t_launches);
  const Profile& p = graph.profile();
  EXPECT_GT(p.attention, 0);
  EXPECT_GT(p.experts, 0);
  EXPECT_GT(p.head, 0);
  EXPECT_GT(p.upload, 0);
  // The phases' times come from the device's marks, scaled to the launch: with the host's I/O they make the steps.
  EXPECT_NEAR(p.total(), t_graph, 1e-9);
  c.graph = true;
  c.device_dispatch = false;
  EXPECT_THROW(DeviceModel(dev, c, w), rt::UsageError) << "a graph needs the experts dispatched on the device";
}

// Batching: three sequences (prompts of 5, 3 and 4 tokens; or `prompts`)
// prefilled in one step and decoded together give bit for bit the logits
// and tokens of runs of one sequence each (on `single`, as sequence
// `single_seq` or, where it is negative, as its own); each sequence keeps
// its own paged KV cache. Every row's arithmetic is its own (GEMMs, norms,
// the experts' slices), so nothing may differ.
// `tolerance` above 0: each logit within that of the single run's, relative
// to the row's largest magnitude (else bit for bit).
void batch_gives_single_runs(const Config& c, Model& single, int single_seq, Model& batched,
                             const std::vector<std::vector<std::uint32_t>>& prompts = {{1, 17, 42, 200, 5}, {9, 8, 7}, {250, 3, 99, 64}},
                             float tolerance = 0) {
  auto same = [&](const float* got, const std::vector<float>& want) {
    if (tolerance == 0) return std::memcmp(got, want.data(), c.vocab * 4) == 0;
    float most = 0, worst = 0;
    for (unsigned v = 0; v < c.vocab; ++v) most = std::max(most, std::fabs(want[v])), worst = std::max(worst, std::fabs(got[v] - want[v]));
    return worst <= tolerance * most;
  };
  const unsigned n = static_cast<unsigned>(prompts.size());
  const unsigned steps = 4;  // the prefill, then three decode steps
  // One sequence at a time: its logits per step (the last row's), its tokens.
  std::vector<std::vector<std::vector<float>>> want(n);
  std::vector<std::vector<std::uint32_t>> want_tokens(n);
  for (unsigned b = 0; b < n; ++b) {
    std::vector<std::uint32_t> tokens = prompts[b];
    unsigned pos = 0;
    for (unsigned step = 0; step < steps; ++step) {
      std::vector<std::uint32_t> next;
      const auto logits = single.step({{single_seq < 0 ? b : static_cast<unsigned>(single_seq), tokens, pos}}, &next, nullptr);
      want[b].emplace_back(logits.end() - c.vocab, logits.end());
      want_tokens[b].push_back(next.at(0));
      pos += static_cast<unsigned>(tokens.size());
      tokens = {next[0]};
    }
  }
  std::vector<Model::Seq> batch;
  for (unsigned b = 0; b < n; ++b) batch.push_back({b, prompts[b], 0});
  for (unsigned step = 0; step < steps; ++step) {
    std::vector<std::uint32_t> next;
    std::vector<std::vector<std::uint32_t>> routes;
    const auto logits = batched.step(batch, &next, &routes);
    ASSERT_EQ(next.size(), n);
    unsigned row = 0;
    for (unsigned b = 0; b < n; ++b) {
      row += static_cast<unsigned>(batch[b].tokens.size());
      EXPECT_TRUE(same(&logits[std::size_t{row - 1} * c.vocab], want[b][step])) << "sequence " << b << ", step " << step;
      EXPECT_EQ(next[b], want_tokens[b][step]) << "sequence " << b << ", step " << step;
      batch[b].pos += static_cast<unsigned>(batch[b].tokens.size());
      batch[b].tokens = {next[b]};
    }
    EXPECT_EQ(routes.size(), c.layers);
    EXPECT_EQ(routes[0].size(), 2u * row) << "two experts a token";
  }
  // The sequences' own positions: one may run on while another restarts.
  batched.release(1);
  std::vector<std::uint32_t> next;
  const auto again = batched.step({{1, prompts[1], 0}, {2, {want_tokens[2][steps - 1]}, batch[2].pos}}, &next, nullptr);
  EXPECT_TRUE(same(&again[2ull * c.vocab], want[1][0])) << "sequence 1 afresh";
  EXPECT_THROW(batched.step({{c.max_sequences, {1}, 0}}, &next, nullptr), rt::UsageError) << "past max_sequences";
  EXPECT_THROW(batched.step({{0, {1}, 0}, {0, {2}, 0}}, &next, nullptr), rt::UsageError) << "a sequence twice";
  EXPECT_THROW(batched.step({{0, {1}, 90}}, &next, nullptr), rt::UsageError) << "past the context";
  EXPECT_THROW(batched.step({{0, {1}, 20}}, &next, nullptr), rt::UsageError) << "a gap after what sequence 0 holds";
}

TEST(Model, ABatchGivesTheTokensOfSingleSequenceRuns) {
  const Config c = tiny_batched(3);
  const Weights w = Weights::random(c);
  rt::Device dev;
  DeviceModel single(dev, c, w), batched(dev, c, w);
  batch_gives_single_runs(c, single, -1, batched);
}

// The compiled model over paged caches for three sequences (a graph per
// step length, each row's sequence and the page tables among its inputs),
// and the compiled model of one sequence (unpaged caches), on one device.
struct CompiledPair {
  static Config sequences(Config c, unsigned n) {
    c.max_sequences = n;
    return c;
  }
  const Config paged = sequences(tiny(), 3), one = tiny();
  const Weights w = Weights::random(paged);
  rt::Device dev;
  CompiledModel batched{dev, paged, w}, single{dev, one, w};
};

TEST(Model, ACompiledBatchGivesTheTokensOfTheUnpagedModelsSingleRuns) {
  // Each prompt run on the one-sequence model afresh.
  CompiledPair m;
  batch_gives_single_runs(m.paged, m.single, 0, m.batched);
}

// The tiny model data parallel on the ring of four (`sequences` at most at
// once, over paged caches), and its one-sequence model on chip 0.
struct DataParallelRing {
  static rt::Device::Options ring() {
    rt::Device::Options o;
    o.platform = rt::Device::system_platform(4);
    return o;
  }
  static std::vector<rt::Device*> chips_of(rt::Cluster& c) {
    std::vector<rt::Device*> all;
    for (unsigned k = 0; k < c.chips(); ++k) all.push_back(&c.chip(k));
    return all;
  }
  explicit DataParallelRing(unsigned sequences) : paged(CompiledPair::sequences(tiny(), sequences)) {}
  const Config paged, one = tiny();
  const Weights w = Weights::random(paged);
  rt::Cluster cluster{ring()};
  const std::vector<rt::Device*> all = chips_of(cluster);
  DataParallel dp{all, paged, w};
  CompiledModel single{*all[0], one, w};
};

TEST(Model, DataParallelOverFourChipsGivesEachSequenceItsSingleRunsBits) {
  // Six sequences over the ring of four (chips 0 and 1 two each, as their
  // sequences 0 and 1, over paged caches), each chip's step launched before
  // any is waited for: every sequence's logits and tokens are those of its
  // runs alone on one chip's one-sequence model, bit for bit; every chip
  // computes; the batch's steps take less virtual time than on one chip.
  DataParallelRing m(8);
  const Config& paged = m.paged;
  const std::vector<rt::Device*>& all = m.all;
  rt::Cluster& cluster = m.cluster;
  DataParallel& dp = m.dp;
  CompiledModel& single = m.single;
  const Weights& w = m.w;
  CompiledModel batched(*all[0], paged, w);
  ASSERT_EQ(dp.chips(), 4u);
  const std::vector<std::vector<std::uint32_t>> prompts = {{1, 17, 42, 200, 5}, {9, 8, 7},    {250, 3, 99, 64},
                                                           {4, 4},              {77, 1, 2, 3, 9, 11}, {31}};
  const auto before = cluster.stats();
  batch_gives_single_runs(paged, single, 0, dp, prompts);
  const auto after = cluster.stats();
  for (unsigned k = 0; k < 4; ++k) {
    std::uint64_t macs = 0;
    for (unsigned t = 0; t < all[k]->tiles(); ++t) {
      const std::string tile = "chip" + std::to_string(k) + ".tile" + std::to_string(t);
      macs += after[tile]["tensor_macs_bf16"].get<std::uint64_t>() - before[tile]["tensor_macs_bf16"].get<std::uint64_t>();
    }
    EXPECT_GT(macs, 0u) << "chip " << k << " ran its sequences";
  }
  // A batch one chip's share of which is bad runs on no chip, and the
  // refusal names the sequence as the batch does.
  auto macs = [&] {
    std::uint64_t m = 0;
    const auto st = cluster.stats();
    for (unsigned k = 0; k < 4; ++k)
      for (unsigned t = 0; t < all[k]->tiles(); ++t) m += st["chip" + std::to_string(k) + ".tile" + std::to_string(t)]["tensor_macs_bf16"].get<std::uint64_t>();
    return m;
  };
  const std::uint64_t m0 = macs();
  try {
    dp.step({{0, {1, 2}, 0}, {1, {3}, 0}, {6, {paged.vocab}, 0}}, nullptr, nullptr);
    ADD_FAILURE() << "a token outside the vocabulary was taken";
  } catch (const rt::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("the batch's sequence 6: chip 2's sequence 1"), std::string::npos) << e.what();
  }
  EXPECT_THROW(dp.step({{0, {1}, 0}, {4, {1}, 0}, {0, {1}, 0}}, nullptr, nullptr), rt::UsageError) << "sequence 0 twice";
  EXPECT_EQ(macs(), m0) << "a refused batch ran on some chip";
  // A decode step of the six, here and on one chip.
  std::vector<Model::Seq> prefill, step;
  for (unsigned b = 0; b < 6; ++b) prefill.push_back({b, prompts[b], 0}), step.push_back({b, {7}, static_cast<unsigned>(prompts[b].size())});
  double spread = 0, alone = 0;
  for (auto [m, took] : {std::pair<Model*, double*>{&dp, &spread}, {&batched, &alone}}) {
    m->step(prefill, nullptr, nullptr);
    const double t0 = all[0]->simulated_seconds();
    m->step(step, nullptr, nullptr);
    *took = all[0]->simulated_seconds() - t0;
  }
  std::printf("a decode step of 6 sequences: %.2f us data parallel on 4 chips, %.2f us on one\n", spread * 1e6, alone * 1e6);
  EXPECT_LT(spread, alone);
  EXPECT_THROW(DataParallel({}, paged, w), rt::UsageError);
}

TEST(Model, ExpertParallelOverFourChipsGivesEachSequenceItsTokens) {
  // DataParallel with experts on the ring of four (DeepSeek's layout): each
  // chip runs its own sequences through the whole model but the experts,
  // of which it holds one (expert e on chip e mod 4), every layer's rows
  // going to their experts' chips and back by all-to-alls. Six sequences
  // (chips 0 and 1 two each), then three (chip 3 with none: it still
  // serves the others' rows): every sequence's tokens those of its runs
  // alone on one chip, its logits within 1e-5 of theirs (the experts' sums
  // in the chips' order: measured, all but one of the 36 rows bit for bit,
  // that one within 2.0e-6); the all-to-alls' time in the
  // profile; each chip holds its expert alone; what the layout does not
  // take is refused by name.
  DataParallelRing m(8);
  DataParallel ep(m.all, m.paged, m.w, true);
  EXPECT_TRUE(ep.expert_parallel());
  EXPECT_EQ(ep.max_step_tokens(), 64u) << "256 slots over four chips";
  const std::vector<std::vector<std::uint32_t>> six = {{1, 17, 42, 200, 5}, {9, 8, 7}, {250, 3, 99, 64}, {4, 4}, {77, 1, 2, 3, 9, 11}, {31}};
  batch_gives_single_runs(m.paged, m.single, 0, ep, six, 1e-5f);
  for (unsigned b = 0; b < 8; ++b) ep.release(b);
  batch_gives_single_runs(m.paged, m.single, 0, ep, {{5, 6, 7}, {100, 101, 102}, {8}}, 1e-5f);
  EXPECT_GT(ep.profile().comm, 0.0) << "the all-to-alls' nodes";
  EXPECT_LT(ep.replica(0).weight_bytes(), m.single.weight_bytes()) << "one expert of four on each chip";
  auto refused = [&](const Config& bad, const std::string& words) {
    try {
      DataParallel bad_ep(m.all, bad, m.w, true);
      ADD_FAILURE() << "accepted: " << words;
    } catch (const rt::UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  Config fp8 = m.paged;
  fp8.fp8 = true;
  refused(fp8, "expert parallel over 4 chips: FP8 experts are not dispatched");
  Config six_experts = m.paged;
  six_experts.experts = 6;
  refused(six_experts, "6 experts do not divide over the chips");
  Config twelve = m.paged;  // sequences 0, 4 and 8 on chip 0
  twelve.max_sequences = 12;
  DataParallel more(m.all, twelve, m.w, true);
  try {
    more.step({{0, std::vector<std::uint32_t>(22, 3), 0}, {4, std::vector<std::uint32_t>(22, 3), 0}, {8, std::vector<std::uint32_t>(22, 3), 0}},
              nullptr, nullptr);
    ADD_FAILURE() << "a chip's share of 66 tokens was taken";
  } catch (const rt::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("a chip's share of 66 tokens in an expert-parallel step over 4 chips (at most 64"), std::string::npos)
        << e.what();
  }
}

// Serving: five requests, three arriving together (their prompts do not
// fit one step, so one is prefilled over two), two later (one after the
// device went idle), at most three at once: every request gets its
// outputs, each exactly what greedy decoding of its prompt alone gives.
void serving_gives_greedy_tokens(rt::Device& dev, const Config& c, Model& m, Model& alone) {
  std::vector<Request> reqs(5);
  for (unsigned i = 0; i < 5; ++i) {
    for (unsigned t = 0; t < 25 - 3 * i; ++t) reqs[i].prompt.push_back((t * 37 + i * 11) % c.vocab);
    reqs[i].outputs = 3 + i;
  }
  reqs[0].arrival = reqs[1].arrival = reqs[2].arrival = 0;
  reqs[3].arrival = 50e-6, reqs[4].arrival = 5e-3;  // the last after everything else is done
  auto energy = [] { return 0.0; };
  // (A second run on the same device gives the same tokens; its times differ
  // a little, the device's state having moved on: the pages' order, the
  // memories' open rows. Cli.DemoServes... repeats a run in a fresh process.)
  const Served a = serve(dev, m, reqs, energy), b = serve(dev, m, reqs, energy);
  EXPECT_EQ(a.tokens, b.tokens);
  unsigned outputs = 0;
  for (unsigned i = 0; i < 5; ++i) {
    std::vector<std::uint32_t> want, tokens = reqs[i].prompt;
    unsigned pos = 0;
    for (unsigned k = 0; k < reqs[i].outputs; ++k) {
      std::uint32_t next = 0;
      alone.step(tokens, pos, &next, nullptr);
      want.push_back(next);
      pos += static_cast<unsigned>(tokens.size());
      tokens = {next};
    }
    EXPECT_EQ(a.tokens[i], want) << "request " << i;
    EXPECT_GT(a.ttft[i], 0) << "request " << i;
    EXPECT_GT(a.tpot[i], 0) << "request " << i;
    outputs += reqs[i].outputs;
  }
  EXPECT_EQ(a.output_tokens, outputs);
  EXPECT_GT(a.seconds, 5e-3) << "the last request came at 5 ms";
  EXPECT_GT(a.idle, 0) << "nothing ran before it came: the clock skipped there";
  EXPECT_LT(a.idle, a.seconds);
  EXPECT_GT(a.ttft[2], a.ttft[0]) << "the third prompt waited for room in a step";
  std::printf("served 5 requests in %.1f us, %u steps; TTFT %.1f .. %.1f us\n", a.seconds * 1e6, a.steps,
              quantile(a.ttft, 0) * 1e6, quantile(a.ttft, 1) * 1e6);
  reqs[1].arrival = -1;
  EXPECT_THROW(serve(dev, m, reqs, energy), rt::UsageError) << "out of arrival order";
}

TEST(Model, ServingBatchesRequestsAsTheyArriveAndGivesEachItsGreedyTokens) {
  const Config c = tiny_batched(3);
  const Weights w = Weights::random(c);
  rt::Device dev;
  DeviceModel m(dev, c, w), alone(dev, c, w);
  serving_gives_greedy_tokens(dev, c, m, alone);
}

TEST(Model, ServingTheCompiledModelGivesEachRequestItsGreedyTokens) {
  // The same requests on the paged model (its graphs compiled as the
  // scheduler's step lengths come), against the one-sequence model.
  CompiledPair m;
  serving_gives_greedy_tokens(m.dev, m.paged, m.batched, m.single);
}

TEST(Model, ServingTheDataParallelModelGivesEachRequestItsGreedyTokens) {
  // The same requests on the ring of four, data parallel (each request's
  // sequence on its chip), against the one-sequence model on chip 0.
  DataParallelRing m(3);
  serving_gives_greedy_tokens(*m.all[0], m.paged, m.dp, m.single);
}

TEST(Model, ATraceFileGivesItsRequestsOrRefusesItsBadLinesByNumber) {
  const std::string f = testing::TempDir() + "model_trace.csv";
  auto write = [&](const std::string& text) { std::ofstream(f) << text; };
  write("arrival_s, prompt_tokens, output_tokens\r\n# comment\n\n0,5,2\n1.5e-4 , 7 , 1\n0.001,250,6\n");
  const std::vector<Request> r = trace_requests(f, 256, 100, 9);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[1].arrival, 1.5e-4);
  EXPECT_EQ(r[1].prompt.size(), 7u);
  EXPECT_EQ(r[2].outputs, 6u);
  for (const Request& q : r)
    for (std::uint32_t t : q.prompt) EXPECT_LT(t, 100u);
  EXPECT_EQ(trace_requests(f, 256, 100, 9)[2].prompt, r[2].prompt);  // seeded
  EXPECT_NE(trace_requests(f, 256, 100, 10)[2].prompt, r[2].prompt);
  auto refusal = [&](const std::string& text) {
    write(text);
    try {
      trace_requests(f, 64, 100, 1);
    } catch (const rt::UsageError& e) {
      return std::string(e.what()).substr(f.size());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(refusal("0,5\n"), ":1: 2 fields; a request is arrival_s,prompt_tokens,output_tokens");
  EXPECT_EQ(refusal("0,5,2\n-1,5,2\n"), ":2: arrival '-1' is not a time in seconds (0 to 1e6)");
  EXPECT_EQ(refusal("0.5,5,2\n0.25,5,2\n"), ":2: arrival 0.25 s comes before the line above's 0.5 s (a trace is in arrival order)");
  EXPECT_EQ(refusal("0,0,2\n"), ":1: prompt_tokens '0' is not a count from 1 to the context's 64");
  EXPECT_EQ(refusal("0,5,2.5\n"), ":1: output_tokens '2.5' is not a count from 1 to the context's 64");
  EXPECT_EQ(refusal("0,60,5\n"), ":1: a prompt of 60 and 5 outputs do not fit the context of 64");
  EXPECT_EQ(refusal("nan,5,2\n"), ":1: arrival 'nan' is not a time in seconds (0 to 1e6)");
  EXPECT_EQ(refusal("# only a comment\n"), ": no requests");
  EXPECT_THROW(trace_requests(f + ".missing", 64, 100, 1), rt::UsageError);
}

// Expert parallel on the four-chip ring: expert e on chip e % 4, routed rows
// out and results back through the communication engines. The same model
// and prompt as the single-chip test above: the same error bound, and
// every chip's tiles ran experts.
TEST(Model, ExpertParallelOnFourChipsMatchesTheHostReference) {
  Config c = tiny();
  const Weights w = Weights::random(c);
  rt::Device::Options o;
  o.platform = rt::Device::default_platform().substr(0, rt::Device::default_platform().rfind('/')) + "/t1x4-ring.json";
  o.sets = {"noc.model=packet"};
  rt::Cluster cluster(o);
  std::vector<rt::Device*> chips;
  for (unsigned k = 0; k < cluster.chips(); ++k) chips.push_back(&cluster.chip(k));
  DeviceModel m(chips, c, w);
  Reference ref(c, w);
  unsigned disagreements = 0;
  const double worst = compare_steps(c, m, ref, {1, 17, 42, 200, 5}, 4, &disagreements);
  std::printf("tiny MoE on 4 chips: max relative logit error %.3g, routing disagreements %u, %.1f us in exchanges\n", worst,
              disagreements, m.profile().comm * 1e6);
  EXPECT_LT(worst, 0.03);
  EXPECT_LE(disagreements, 1u);
  EXPECT_GT(m.profile().comm, 0);
  const auto s = cluster.stats();
  for (unsigned k = 0; k < 4; ++k) {
    std::uint64_t macs = 0;
    for (unsigned t = 0; t < 8; ++t)
      macs += s["chip" + std::to_string(k) + ".tile" + std::to_string(t)]["tensor_macs_bf16"].get<std::uint64_t>();
    EXPECT_GT(macs, 0u) << "chip " << k << " ran experts";
    EXPECT_GE(s["chip" + std::to_string(k) + ".c2c"]["ce_collectives"].get<std::uint64_t>(), 2u * 2 * 4) << k;
  }
}

TEST(Model, TheCompiledModelGivesTheHandWrittenOnesTokensWithinTheBound) {
  // The same model built as a compiler graph (compiled.hpp) and run with a
  // launch a step over its KV caches: every step's logits within the bound
  // of the FP32 reference, the device's argmax its greedy choice, and the
  // same tokens as DeviceModel's hand-written programs.
  const Config c = tiny();
  const Weights w = Weights::random(c);
  rt::Device dev;
  CompiledModel compiled(dev, c, w);
  DeviceModel hand(dev, c, w);
  Reference r1(c, w), r2(c, w);
  unsigned d1 = 0, d2 = 0;
  std::vector<std::uint32_t> a, b;
  const double worst = compare_steps(c, compiled, r1, {1, 17, 42, 200, 5}, 8, &d1, &a);
  compare_steps(c, hand, r2, {1, 17, 42, 200, 5}, 8, &d2, &b);
  std::printf("compiled tiny MoE: 5-token prefill + 7 decode steps, max relative logit error %.3g, routing disagreements %u\n",
              worst, d1);
  EXPECT_LT(worst, 0.03);
  EXPECT_LE(d1, 1u);
  EXPECT_EQ(a, b);
  const Profile& p = compiled.profile();
  EXPECT_GT(p.attention, 0);
  EXPECT_GT(p.experts, 0);
  EXPECT_GT(p.head, 0);
  EXPECT_EQ(p.bounds.at("step").binding.empty(), false);
  // Two graphs (the prompt's length and one token), sharing the caches.
  EXPECT_EQ(compiled.executable(1).state().at("layer0.k_cache").address, compiled.executable(5).state().at("layer0.k_cache").address);
  // Bad steps are refused by name; the device serves on.
  EXPECT_THROW(compiled.step({c.vocab}, 13, nullptr, nullptr), rt::UsageError);
  EXPECT_THROW(compiled.step({1}, c.context, nullptr, nullptr), rt::UsageError);
  Config fp8 = c;
  fp8.fp8 = true;
  EXPECT_THROW(CompiledModel(dev, fp8, w), rt::UsageError) << "FP8 blocks of 128 columns, d_model 64";
  EXPECT_THROW(compiled.step({1}, 13, nullptr, nullptr), rt::UsageError) << "position 12 skipped";
  std::uint32_t next = 0;
  compiled.step({3}, 12, &next, nullptr);
  EXPECT_LT(next, c.vocab);
}

namespace {

// The compiled model on a system's chips in `layout` against the same
// model compiled for its chip 0 alone: the same tokens over eight steps,
// every step within the bound of the FP32 reference, every chip's tiles
// computing; a bad step refused and the chips serving on. Gives the
// weights both hold and the all-reduces' time a step.
struct OnChips {
  std::uint64_t many_bytes = 0, one_bytes = 0;
  double comm_per_step = 0;
};
OnChips compiled_on_chips(rt::Cluster& cluster, const Config& c, const Weights& w, CompiledModel::Layout layout, const char* what) {
  std::vector<rt::Device*> all;
  for (unsigned k = 0; k < cluster.chips(); ++k) all.push_back(&cluster.chip(k));
  CompiledModel one(*all[0], c, w), many(all, c, w, layout);
  EXPECT_EQ(many.chips(), cluster.chips());
  Reference r1(c, w), r2(c, w);
  unsigned d1 = 0, d2 = 0;
  std::vector<std::uint32_t> a, b;
  const auto before = cluster.stats();
  const double worst = compare_steps(c, many, r1, {1, 17, 42, 200, 5}, 8, &d1, &a);
  const auto after = cluster.stats();
  compare_steps(c, one, r2, {1, 17, 42, 200, 5}, 8, &d2, &b);
  std::printf("compiled tiny MoE on %u chips (%s): max relative logit error %.3g, routing disagreements %u; %.2f us of kernels a "
              "step, %.2f of them all-reduces (one chip %.2f); weights %.1f KB over the chips (one chip %.1f)\n",
              many.chips(), what, worst, d1, many.profile().kernels * 1e6 / 8, many.profile().comm * 1e6 / 8,
              one.profile().kernels * 1e6 / 8, many.weight_bytes() / 1e3, one.weight_bytes() / 1e3);
  EXPECT_LT(worst, 0.03);
  EXPECT_LE(d1, 1u);
  EXPECT_EQ(a, b);
  for (unsigned k = 0; k < many.chips(); ++k) {
    std::uint64_t macs = 0;
    for (unsigned t = 0; t < 8; ++t) {
      const std::string tile = "chip" + std::to_string(k) + ".tile" + std::to_string(t);
      macs += after[tile]["tensor_macs_bf16"].get<std::uint64_t>() - before[tile]["tensor_macs_bf16"].get<std::uint64_t>();
    }
    EXPECT_GT(macs, 0u) << "chip " << k << " computed";
  }
  EXPECT_THROW(many.step({c.vocab}, 13, nullptr, nullptr), rt::UsageError);
  std::uint32_t next = 0;
  many.step({3}, 12, &next, nullptr);
  EXPECT_LT(next, c.vocab);
  return {many.weight_bytes(), one.weight_bytes(), many.profile().comm / 8};
}

// Spread: the first `chips` chips of a system take experts (and the
// matmuls that gain), each holding its share of their weights.
void spread_on_chips(const std::string& system, unsigned chips) {
  Config c = tiny();
  c.experts = chips;  // every chip takes experts
  const Weights w = Weights::random(c);
  rt::Device::Options o;
  o.platform = rt::Device::default_platform().substr(0, rt::Device::default_platform().rfind('/')) + "/" + system;
  rt::Cluster cluster(o);
  const OnChips r = compiled_on_chips(cluster, c, w, CompiledModel::Layout::spread, "spread");
  // Each chip holds its slices of the experts: over all chips the same
  // bytes as one chip holding them all.
  EXPECT_EQ(r.many_bytes, r.one_bytes);
}

}  // namespace

TEST(Model, TheCompiledModelOnFourChipsGivesTheOneChipTokens) { spread_on_chips("t1x4-ring.json", 4); }

TEST(Model, TheCompiledModelInMegatronsLayoutGivesTheOneChipTokens) {
  // CompiledModel::Layout::all_reduce on the ring of four: every chip runs
  // its shard of each step (2 of the 8 heads with their caches, 32 of each
  // expert's 128 hidden columns, 64 of the 256 vocabulary columns), the
  // chips' engines all-reducing Wo's and the experts' partial sums. The
  // one chip's tokens, every step within the bound of the FP32
  // reference, the host's next token the argmax of the logits put
  // together; every chip computes; each chip holds its shard (the
  // embedding, router and norms on every chip); configurations the layout
  // does not take are refused by name, and a bad step leaves the chips
  // serving.
  const Config c = tiny();
  const Weights w = Weights::random(c);
  rt::Device::Options o;
  o.platform = rt::Device::system_platform(4);
  rt::Cluster cluster(o);
  const OnChips r = compiled_on_chips(cluster, c, w, CompiledModel::Layout::all_reduce, "Megatron's layout");
  EXPECT_GT(r.comm_per_step, 0.0) << "the all-reduces' nodes";
  // The four shards together hold about one chip's weights (measured 633.9
  // KB against 609.0: the embedding, router and norms on every chip), not
  // four copies.
  EXPECT_GT(r.many_bytes, r.one_bytes);
  EXPECT_LT(r.many_bytes, r.one_bytes * 5 / 4);
  std::vector<rt::Device*> all;
  for (unsigned k = 0; k < cluster.chips(); ++k) all.push_back(&cluster.chip(k));
  auto refused = [&](const Config& bad, const std::vector<rt::Device*>& chips, const std::string& words) {
    try {
      CompiledModel m(chips, bad, w, CompiledModel::Layout::all_reduce);
      m.executable(1);
      ADD_FAILURE() << "accepted: " << words;
    } catch (const rt::UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  Config odd = c;
  odd.heads = 2;
  refused(odd, all, "tensor parallel over 4 chips with all-reduce: 2 heads do not divide over the chips");
  Config fp8 = c;
  fp8.fp8 = true, fp8.d_model = 128, fp8.hidden = 256;
  refused(fp8, all, "FP8 weights are not sharded (BF16 only)");
  refused(c, {all[0], all[1]}, "the all-reduce layout runs on every chip of a system (2 of 4 given)");
}
TEST(Model, TheCompiledModelOnEightChipsGivesTheOneChipTokens) { spread_on_chips("t1x8-torus.json", 8); }
