#include "serve.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <deque>
#include <fstream>
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

std::vector<Request> trace_requests(const std::string& file, unsigned context, unsigned vocab, std::uint64_t seed) {
  std::ifstream in(file);
  if (!in) throw rt::UsageError(fmt::format("{}: cannot be read", file));
  if (!vocab) throw rt::UsageError("serve: a vocabulary of 0 tokens");
  std::vector<Request> out;
  std::string line;
  bool seen = false;  // a line that is no comment
  for (unsigned n = 1; std::getline(in, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    auto bad = [&](const std::string& why) { return rt::UsageError(fmt::format("{}:{}: {}", file, n, why)); };
    std::vector<std::string> f;
    for (std::size_t at = 0;;) {
      const std::size_t comma = line.find(',', at);
      std::string v = line.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
      v.erase(0, v.find_first_not_of(" \t"));
      v.erase(v.find_last_not_of(" \t") + 1);
      f.push_back(v);
      if (comma == std::string::npos) break;
      at = comma + 1;
    }
    const bool first_line = !seen;
    seen = true;
    char* end = nullptr;
    std::strtod(f[0].c_str(), &end);
    if (first_line && f.size() == 3 && (f[0].empty() || *end)) continue;  // the column names (no number first)
    if (f.size() != 3) throw bad(fmt::format("{} fields; a request is arrival_s,prompt_tokens,output_tokens", f.size()));
    const double arrival = std::strtod(f[0].c_str(), &end);
    if (f[0].empty() || *end || !std::isfinite(arrival) || arrival < 0 || arrival > 1e6)
      throw bad(fmt::format("arrival '{}' is not a time in seconds (0 to 1e6)", f[0]));
    if (!out.empty() && arrival < out.back().arrival)
      throw bad(fmt::format("arrival {} s comes before the line above's {} s (a trace is in arrival order)", arrival,
                            out.back().arrival));
    auto count = [&](const std::string& v, const char* what) {
      const unsigned long long x = std::strtoull(v.c_str(), &end, 10);
      if (v.empty() || *end || v[0] == '-' || !x || x > context)
        throw bad(fmt::format("{} '{}' is not a count from 1 to the context's {}", what, v, context));
      return static_cast<unsigned>(x);
    };
    const unsigned prompt = count(f[1], "prompt_tokens"), outputs = count(f[2], "output_tokens");
    if (prompt + outputs > context)
      throw bad(fmt::format("a prompt of {} and {} outputs do not fit the context of {}", prompt, outputs, context));
    if (out.size() >= 1000000) throw bad("more than 1000000 requests");
    Request r;
    r.arrival = arrival, r.outputs = outputs;
    std::mt19937_64 rng(seed * 0x9e3779b97f4a7c15ull + out.size());
    for (unsigned i = 0; i < prompt; ++i) r.prompt.push_back(static_cast<std::uint32_t>(rng() % vocab));
    out.push_back(std::move(r));
  }
  if (out.empty()) throw rt::UsageError(fmt::format("{}: no requests", file));
  return out;
}

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t at = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::min(v.size() - 1, at ? at - 1 : 0)];
}

Served serve(rt::Device& dev, Model& m, const std::vector<Request>& requests, const std::function<double()>& energy) {
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
    std::vector<Model::Seq> batch;
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
