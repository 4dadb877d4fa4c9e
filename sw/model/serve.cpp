#include "serve.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <random>

namespace tessera::model {

std::vector<Request> poisson_requests(unsigned n, double rate, unsigned prompt_min, unsigned prompt_max, unsigned out_min,
                                      unsigned out_max, unsigned vocab, std::uint64_t seed) {
  if (!(rate > 0)) throw rt::UsageError(fmt::format("serve: a rate of {} requests/s", rate));
  if (!prompt_min || prompt_min > prompt_max || !out_min || out_min > out_max || !vocab)
    throw rt::UsageError("serve: prompt and output lengths must be at least 1, min no more than max");
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> gap(rate);
  std::vector<Request> out(n);
  double t = 0;
  for (Request& r : out) {
    t += gap(rng);
    r.arrival = t;
    const unsigned len = prompt_min + static_cast<unsigned>(rng() % (prompt_max - prompt_min + 1));
    for (unsigned i = 0; i < len; ++i) r.prompt.push_back(static_cast<std::uint32_t>(rng() % vocab));
    r.outputs = out_min + static_cast<unsigned>(rng() % (out_max - out_min + 1));
  }
  return out;
}

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t at = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::min(v.size() - 1, at ? at - 1 : 0)];
}

Served serve(rt::Device& dev, DeviceModel& m, const std::vector<Request>& requests, const std::function<double()>& energy) {
  constexpr unsigned kBudget = 64;  // tokens a step
  const Config& c = m.config();
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const Request& r = requests[i];
    if (r.prompt.empty() || !r.outputs || r.prompt.size() + r.outputs > c.context)
      throw rt::UsageError(fmt::format("serve: request {} has a prompt of {} and {} outputs (the context holds {})", i,
                                       r.prompt.size(), r.outputs, c.context));
    if (i && r.arrival < requests[i - 1].arrival) throw rt::UsageError("serve: requests must come in arrival order");
  }
  Served s;
  const std::size_t n = requests.size();
  s.tokens.assign(n, {});
  s.ttft.assign(n, 0), s.tpot.assign(n, 0);
  struct Active {
    std::size_t req;
    unsigned seq, pos = 0;  // pos: positions done (prompt, then generated tokens fed back)
    std::uint32_t last = 0;
    double first = 0;
  };
  std::vector<Active> active;
  std::deque<std::size_t> waiting;
  std::vector<unsigned> free_seqs;
  for (unsigned q = c.max_sequences; q-- > 0;) free_seqs.push_back(q);
  const double start = dev.simulated_seconds(), j0 = energy();
  std::size_t arrived = 0, done = 0;
  auto now = [&] { return dev.simulated_seconds() - start + s.idle; };
  while (done < n) {
    while (arrived < n && requests[arrived].arrival <= now()) waiting.push_back(arrived++);
    if (active.empty() && waiting.empty()) {
      s.idle += requests[arrived].arrival - now();
      continue;
    }
    for (; !waiting.empty() && !free_seqs.empty(); waiting.pop_front()) {
      active.push_back({waiting.front(), free_seqs.back()});
      free_seqs.pop_back();
    }
    // The step: every decoding sequence's token, then prompts (or the rest
    // of one) while the step has room, oldest first.
    std::vector<DeviceModel::Seq> batch;
    std::vector<std::size_t> who;  // index into active, by batch entry
    unsigned room = kBudget;
    for (std::size_t a = 0; a < active.size(); ++a) {
      const Request& r = requests[active[a].req];
      if (active[a].pos < r.prompt.size()) continue;
      batch.push_back({active[a].seq, {active[a].last}, active[a].pos}), who.push_back(a), --room;
    }
    for (std::size_t a = 0; a < active.size() && room; ++a) {
      const Request& r = requests[active[a].req];
      if (active[a].pos >= r.prompt.size()) continue;
      const unsigned take = std::min<unsigned>(room, static_cast<unsigned>(r.prompt.size()) - active[a].pos);
      batch.push_back({active[a].seq, std::vector<std::uint32_t>(r.prompt.begin() + active[a].pos,
                                                                 r.prompt.begin() + active[a].pos + take),
                       active[a].pos});
      who.push_back(a), room -= take;
    }
    std::vector<std::uint32_t> next;
    m.step(batch, &next, nullptr);
    ++s.steps;
    const double t = now();
    std::vector<std::size_t> finished;
    for (std::size_t i = 0; i < batch.size(); ++i) {
      Active& a = active[who[i]];
      const Request& r = requests[a.req];
      const bool prompt = a.pos < r.prompt.size();
      a.pos += static_cast<unsigned>(batch[i].tokens.size());
      if (prompt) s.prompt_tokens += static_cast<unsigned>(batch[i].tokens.size());
      if (prompt && a.pos < r.prompt.size()) continue;  // more of the prompt to come
      if (prompt) a.first = t, s.ttft[a.req] = t - r.arrival;
      s.tokens[a.req].push_back(next[i]);
      ++s.output_tokens;
      a.last = next[i];
      if (s.tokens[a.req].size() == r.outputs) {
        if (r.outputs > 1) s.tpot[a.req] = (t - a.first) / (r.outputs - 1);
        finished.push_back(who[i]);
      }
    }
    std::sort(finished.rbegin(), finished.rend());
    for (std::size_t a : finished) {
      m.release(active[a].seq);
      free_seqs.push_back(active[a].seq);
      active.erase(active.begin() + static_cast<std::ptrdiff_t>(a));
      ++done;
    }
  }
  s.seconds = now(), s.joules = energy() - j0;
  return s;
}

}  // namespace tessera::model
