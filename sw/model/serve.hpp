// Serving on the virtual T1: requests arrive over time (a seeded Poisson
// stream, or a trace file), each with its own prompt and output length; continuous
// batching admits them as they come (their prompts prefilled in the same
// steps as the others' decoding, 64 tokens a step at most) and releases
// them when done. The report: throughput, time to first token and time
// per output token (p50, p99), energy per token. When no request is
// running or waiting the clock skips to the next arrival (simulating an
// idle chip costs host time and changes nothing the report counts but its
// leakage, which the caller adds).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model.hpp"

namespace tessera::model {

struct Request {
  double arrival = 0;  // seconds after the start
  std::vector<std::uint32_t> prompt;
  unsigned outputs = 1;  // tokens to generate
};

// `n` requests at `rate` per second (exponential gaps), prompts of
// prompt_min..prompt_max tokens and outputs of out_min..out_max, seeded.
std::vector<Request> poisson_requests(unsigned n, double rate, unsigned prompt_min, unsigned prompt_max, unsigned out_min,
                                      unsigned out_max, unsigned vocab, std::uint64_t seed);

// Requests from a trace file (CSV): one a line, "arrival_s,prompt_tokens,
// output_tokens", the arrival in seconds from the start, in order; a first
// line of column names and lines starting with '#' are skipped. Prompts
// are seeded tokens of the lengths given (request i's from seed and i).
// Each request must fit `context` (prompt + outputs). A bad line is refused
// as rt::UsageError naming the file, the line and what is wrong.
std::vector<Request> trace_requests(const std::string& file, unsigned context, unsigned vocab, std::uint64_t seed);

struct Served {
  std::vector<std::vector<std::uint32_t>> tokens;  // by request: what it generated
  std::vector<double> ttft, tpot;                  // by request: seconds (tpot: 0 for a single output)
  double seconds = 0, joules = 0;                  // from the start to the last token
  // Stretches with nothing to do (no request running or waiting): skipped,
  // not simulated; `seconds` counts them, `joules` does not (the caller
  // adds the chip's leakage over them).
  double idle = 0;
  unsigned steps = 0, output_tokens = 0, prompt_tokens = 0;
  double tokens_per_s() const { return seconds > 0 ? output_tokens / seconds : 0; }
};

// Serves the requests on `m` (its max_sequences bounds the batch).
// `energy` gives the device's joules so far (the demo's meter).
Served serve(rt::Device& dev, Model& m, const std::vector<Request>& requests, const std::function<double()>& energy);

// The q-quantile (0..1) of the values, nearest rank.
double quantile(std::vector<double> v, double q);

}  // namespace tessera::model
