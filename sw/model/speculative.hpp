// Speculative decoding on the virtual T1: a draft model proposes k tokens
// one at a time, the target checks them all in one step (k + 1 tokens),
// keeps the longest prefix it agrees with and adds its own next token. With
// greedy choices the output is exactly plain greedy decoding's; what
// changes is the number of target steps, hence the virtual time.
#pragma once

#include <cstdint>
#include <vector>

#include "model.hpp"

namespace tessera::model {

// The draft used by default: the target's embedding, first layer, final
// norm and LM head (a one-layer model that skips the other layers).
Weights first_layer_draft(const Config& target, const Weights& w, Config& draft);
// A small draft of the target's vocabulary, as serving systems pair a
// model with (a few percent of its weights): one layer, a quarter of the
// width, the heads, the experts' hidden layer, its own seeded weights (a
// random model agrees with the target by chance; steer it to an
// acceptance rate).
Weights small_draft(const Config& target, Config& draft);

struct Decoded {
  std::vector<std::uint32_t> tokens;  // generated after the prompt
  double seconds = 0;                 // virtual time of the generation (prefill included)
  unsigned target_steps = 0, draft_steps = 0, proposed = 0, accepted = 0;
  // The virtual time of the steps after the prompt's: the target's (plain
  // decoding's steps, or the verifying ones) and the draft's.
  double target_seconds = 0, draft_seconds = 0;
  double acceptance() const { return proposed ? static_cast<double>(accepted) / proposed : 0.0; }
};

// Plain greedy decoding of `n` tokens after `prompt`.
Decoded greedy(rt::Device& dev, Model& target, const std::vector<std::uint32_t>& prompt, unsigned n);
// A draft whose acceptance is an input: the draft model still runs (its
// time is real), but each token it proposes is replaced by the target's
// own greedy choice there (`reference`, from plain decoding) with
// probability `rate`, else by another token: the acceptance of a better or
// worse draft, at this draft's cost. Seeded, so runs repeat.
struct Steering {
  double rate = 0;
  std::uint64_t seed = 1;
  const std::vector<std::uint32_t>* reference = nullptr;
};

// Speculative greedy decoding with drafts of `k` tokens (steered when
// `steer` is given).
Decoded speculative(rt::Device& dev, Model& target, Model& draft, const std::vector<std::uint32_t>& prompt,
                    unsigned n, unsigned k, const Steering* steer = nullptr);

}  // namespace tessera::model
