#include "speculative.hpp"

#include <random>

#include <algorithm>

namespace tessera::model {

Weights first_layer_draft(const Config& target, const Weights& w, Config& draft) {
  draft = target;
  draft.layers = 1;
  Weights d;
  d.embedding = w.embedding;
  d.layers.push_back(w.layers.at(0));
  d.final_norm = w.final_norm;
  d.lm_head = w.lm_head;
  return d;
}

Weights small_draft(const Config& target, Config& draft) {
  draft = target;
  draft.layers = 1;
  draft.d_model = std::max(2u, target.d_model / 4);
  draft.heads = std::max(1u, target.heads / 4);
  draft.hidden = std::max(1u, target.hidden / 4);
  draft.hidden_chunk = std::min(draft.hidden, target.hidden_chunk);
  draft.seed = target.seed * 0x9e3779b97f4a7c15ull + 1;
  const std::string why = draft.check();
  if (!why.empty()) throw rt::UsageError("model: the small draft of this model: " + why);
  return Weights::random(draft);
}

namespace {
std::uint32_t argmax_row(const std::vector<float>& logits, std::size_t row, unsigned vocab) {
  const auto first = logits.begin() + static_cast<std::ptrdiff_t>(row * vocab);
  return static_cast<std::uint32_t>(std::max_element(first, first + vocab) - first);
}
}  // namespace

Decoded greedy(rt::Device& dev, Model& target, const std::vector<std::uint32_t>& prompt, unsigned n) {
  Decoded d;
  const double t0 = dev.simulated_seconds();
  std::uint32_t next = 0;
  target.step(prompt, 0, &next, nullptr);
  ++d.target_steps;
  unsigned pos = static_cast<unsigned>(prompt.size());
  while (d.tokens.size() < n) {
    d.tokens.push_back(next);
    if (d.tokens.size() == n) break;
    const double s0 = dev.simulated_seconds();
    target.step({next}, pos++, &next, nullptr);
    d.target_seconds += dev.simulated_seconds() - s0;
    ++d.target_steps;
  }
  d.seconds = dev.simulated_seconds() - t0;
  return d;
}

Decoded speculative(rt::Device& dev, Model& target, Model& draft, const std::vector<std::uint32_t>& prompt,
                    unsigned n, unsigned k, const Steering* steer) {
  Decoded d;
  std::mt19937_64 rng(steer ? steer->seed : 0);
  const unsigned vocab = target.config().vocab;
  const double t0 = dev.simulated_seconds();
  std::uint32_t cur = 0, ignored = 0;
  target.step(prompt, 0, &cur, nullptr);  // the first generated token
  draft.step(prompt, 0, &ignored, nullptr);
  ++d.target_steps, ++d.draft_steps;
  unsigned pos = static_cast<unsigned>(prompt.size());  // where `cur` goes
  std::vector<std::uint32_t> behind;                    // accepted tokens the draft has not seen yet
  d.tokens.push_back(cur);
  while (d.tokens.size() < n) {
    // The draft proposes up to k tokens (never past what is still wanted).
    const unsigned want = std::min<unsigned>(k, n - static_cast<unsigned>(d.tokens.size()));
    std::vector<std::uint32_t> proposal;
    std::vector<std::uint32_t> input = behind;
    input.push_back(cur);
    unsigned dpos = pos - static_cast<unsigned>(behind.size());
    for (unsigned i = 0; i < want; ++i) {
      std::uint32_t t = 0;
      const double s0 = dev.simulated_seconds();
      draft.step(input, dpos, &t, nullptr);
      d.draft_seconds += dev.simulated_seconds() - s0;
      ++d.draft_steps;
      if (steer && steer->reference) {
        // Output index of this proposal: after the tokens so far and the proposals before it.
        const std::size_t at = d.tokens.size() + i;
        const bool known = at < steer->reference->size();
        const std::uint32_t right = known ? (*steer->reference)[at] : 0;
        const bool hit = std::uniform_real_distribution<double>(0, 1)(rng) < steer->rate;
        const auto other = static_cast<std::uint32_t>(1 + rng() % (vocab - 1));
        t = known && hit ? right : (right + other) % vocab;
      }
      dpos += static_cast<unsigned>(input.size());
      proposal.push_back(t);
      input = {t};
    }
    // The target checks cur and the proposal in one step.
    std::vector<std::uint32_t> block = {cur};
    block.insert(block.end(), proposal.begin(), proposal.end());
    std::uint32_t last = 0;
    const double s0 = dev.simulated_seconds();
    const std::vector<float> logits = target.step(block, pos, &last, nullptr);
    d.target_seconds += dev.simulated_seconds() - s0;
    ++d.target_steps;
    d.proposed += want;
    unsigned agreed = 0;
    while (agreed < want && proposal[agreed] == argmax_row(logits, agreed, vocab)) ++agreed;
    d.accepted += agreed;
    for (unsigned i = 0; i < agreed && d.tokens.size() < n; ++i) d.tokens.push_back(proposal[i]);
    const std::uint32_t mine = argmax_row(logits, agreed, vocab);
    if (d.tokens.size() < n) d.tokens.push_back(mine);
    // The draft has seen cur and proposal[0 .. want - 2]; all of the accepted
    // ones but the last proposal when everything was accepted.
    behind.clear();
    if (agreed == want && want > 0) behind.push_back(proposal[want - 1]);
    pos += agreed + 1;
    cur = mine;
  }
  d.seconds = dev.simulated_seconds() - t0;
  return d;
}

}  // namespace tessera::model
