// A tiny MoE decoder end to end on the virtual T1: prefill and greedy
// decode, every step's logits against the host FP32 reference, the same
// tokens, the experts the router chose agreeing with the reference's.
#include <gtest/gtest.h>

#include <cmath>

#include "model.hpp"

using namespace tessera;
using namespace tessera::model;

TEST(Model, TinyMoeDecoderMatchesTheHostReference) {
  Config c;
  c.layers = 2, c.d_model = 64, c.heads = 8, c.experts = 4, c.hidden = 128, c.hidden_chunk = 64, c.vocab = 256;
  c.context = 32, c.seed = 7;
  const Weights w = Weights::random(c);
  rt::Device dev;
  DeviceModel m(dev, c, w);
  Reference ref(c, w);
  std::vector<std::uint32_t> tokens = {1, 17, 42, 200, 5};
  unsigned pos = 0, disagreements = 0;
  double worst = 0;
  std::vector<std::uint32_t> out;
  for (unsigned step = 0; step < 4; ++step) {
    std::vector<std::vector<std::uint32_t>> routes;
    std::uint32_t next = 0;
    const auto logits = m.step(tokens, pos, &next, &routes);
    const auto want = ref.step(tokens, pos, routes, &disagreements);
    ASSERT_EQ(logits.size(), want.size());
    double err = 0, scale = 0;
    for (std::size_t i = 0; i < want.size(); ++i)
      err = std::max(err, double(std::fabs(logits[i] - want[i]))), scale = std::max(scale, double(std::fabs(want[i])));
    worst = std::max(worst, err / scale);
    // The device's greedy choice is the argmax of its own logits.
    const auto last = logits.end() - c.vocab;
    EXPECT_EQ(next, static_cast<std::uint32_t>(std::max_element(last, logits.end()) - last)) << "step " << step;
    out.push_back(next);
    pos += static_cast<unsigned>(tokens.size());
    tokens = {next};
  }
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
