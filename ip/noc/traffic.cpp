#include "noc/traffic.hpp"

#include <algorithm>
#include <cmath>

namespace tessera::noc {
namespace {
unsigned log2u(unsigned n) {
  unsigned b = 0;
  while ((1u << b) < n) ++b;
  return b;
}
}  // namespace

namespace {
// In the order of Pattern.
constexpr const char* kPatterns[] = {"uniform", "transpose", "bitcomp", "bitrev", "shuffle",
                                     "tornado", "neighbor", "hotspot", "fanout"};
enum class Pattern { uniform, transpose, bitcomp, bitrev, shuffle, tornado, neighbor, hotspot, fanout, unknown };
Pattern pattern_of(const std::string& p) {
  for (unsigned i = 0; i < std::size(kPatterns); ++i)
    if (p == kPatterns[i]) return static_cast<Pattern>(i);
  return Pattern::unknown;
}
}  // namespace

bool known_pattern(const std::string& p) { return pattern_of(p) != Pattern::unknown; }

std::string pattern_names() {
  std::string list;
  for (const char* name : kPatterns) list += (list.empty() ? "" : ", ") + std::string(name);
  return list;
}

namespace {
int destination(Pattern pattern, unsigned src, const NocConfig& c, const std::vector<unsigned>& hotspots,
                std::mt19937_64& rng, bool self_traffic) {
  const unsigned n = c.nodes();
  const unsigned x = src % c.width, y = src / c.width;
  unsigned d = src;
  switch (pattern) {
    case Pattern::uniform:
      if (self_traffic) return static_cast<int>((static_cast<unsigned __int128>(rng()) * n) >> 64);
      d = static_cast<unsigned>((static_cast<unsigned __int128>(rng()) * (n - 1)) >> 64);
      if (d >= src) ++d;
      return static_cast<int>(d);
    case Pattern::hotspot:
      if (hotspots.empty()) return -1;
      d = hotspots[rng() % hotspots.size()];
      break;
    case Pattern::fanout:  // the hotspots answer everyone: a memory row serving its readers
      if (std::find(hotspots.begin(), hotspots.end(), src) == hotspots.end()) return -1;
      d = static_cast<unsigned>((static_cast<unsigned __int128>(rng()) * (n - 1)) >> 64);
      if (d >= src) ++d;
      return static_cast<int>(d);
    case Pattern::transpose: d = (x % c.height) * c.width + (y % c.width); break;
    case Pattern::bitcomp: d = ~src & (n - 1); break;
    case Pattern::bitrev: {
      const unsigned bits = log2u(n);
      d = 0;
      for (unsigned b = 0; b < bits; ++b)
        if (src & (1u << b)) d |= 1u << (bits - 1 - b);
      break;
    }
    case Pattern::shuffle: {
      const unsigned bits = log2u(n);
      d = ((src << 1) | (src >> (bits - 1))) & (n - 1);
      break;
    }
    case Pattern::tornado: d = y * c.width + (x + (c.width + 1) / 2 - 1) % c.width; break;
    case Pattern::neighbor: d = y * c.width + (x + 1) % c.width; break;
    case Pattern::unknown: return -1;
  }
  if (d >= n || d == src) return -1;
  return static_cast<int>(d);
}
}  // namespace

int destination(const std::string& pattern, unsigned src, const NocConfig& c, const std::vector<unsigned>& hotspots,
                std::mt19937_64& rng, bool self_traffic) {
  return destination(pattern_of(pattern), src, c, hotspots, rng, self_traffic);
}

TrafficResult run_traffic(Network& net, const TrafficConfig& t) {
  const NocConfig& c = net.config();
  const Pattern pattern = pattern_of(t.pattern);
  std::mt19937_64 rng(t.seed);
  const std::uint64_t begin = t.warmup, end = t.warmup + t.measure;
  std::uint64_t measured = 0, measured_done = 0, accepted_flits = 0, id = 0;
  // Latencies as a histogram (exact average and p99, constant cost per packet).
  std::vector<std::uint64_t> latency_count;
  double hops = 0, latency_sum = 0;
  net.on_delivered([&](Packet& p) {
    if (p.delivered >= begin && p.delivered < end) accepted_flits += p.flits;
    if (!p.measured) return;
    ++measured_done;
    const std::uint64_t l = p.delivered - p.created;
    if (l >= latency_count.size()) latency_count.resize(l + 1 + l / 2, 0);
    ++latency_count[l];
    latency_sum += static_cast<double>(l);
    hops += p.hops;
  });
  unsigned sources = 0;
  for (unsigned s = 0; s < c.nodes(); ++s) sources += destination(pattern, s, c, t.hotspots, rng, t.self_traffic) >= 0 ? 1 : 0;
  // Bernoulli injection per node and cycle, drawn as geometric gaps so a
  // cycle costs only the nodes that inject in it.
  const double prob = std::min(1.0, t.rate / t.packet_flits);
  // Inverse transform: failures before the first success, floor(ln(u) / ln(1 - p))
  // for u uniform in (0, 1] (53 bits).
  const double inv_log_q = prob > 0 && prob < 1 ? 1.0 / std::log1p(-prob) : 0.0;
  const auto gap = [&](std::mt19937_64& g) -> std::uint64_t {
    if (inv_log_q == 0.0) return 0;
    const double u = static_cast<double>((g() >> 11) + 1) * 0x1p-53;
    return static_cast<std::uint64_t>(std::log(u) * inv_log_q);
  };
  std::vector<std::uint64_t> next(c.nodes());
  for (auto& n : next) n = prob > 0 ? gap(rng) : ~0ull;
  std::uint64_t cycle = 0;
  for (; cycle < end + t.drain_limit; ++cycle) {
    for (unsigned s = 0; s < c.nodes(); ++s) {
      if (next[s] != cycle) continue;
      next[s] = cycle + 1 + gap(rng);
      const int d = destination(pattern, s, c, t.hotspots, rng, t.self_traffic);
      if (d < 0) continue;
      Packet p;
      p.id = id++;
      p.src = s;
      p.dst = static_cast<unsigned>(d);
      p.flits = t.packet_flits;
      p.created = cycle;
      p.measured = cycle >= begin && cycle < end;
      measured += p.measured;
      net.offer(p);
    }
    net.run_until(cycle);
    if (cycle >= end && measured_done == measured) break;
  }
  TrafficResult r;
  r.cycles = cycle;
  r.packets = measured;
  r.drained = measured_done == measured;
  const double window = static_cast<double>(t.measure) * std::max(1u, sources);
  r.offered = static_cast<double>(measured) * t.packet_flits / window;
  r.accepted = static_cast<double>(accepted_flits) / window;
  if (measured_done) {
    r.latency_avg = latency_sum / static_cast<double>(measured_done);
    // The element a sorted list would hold at index min(n - 1, n * 99 / 100).
    const std::uint64_t rank = std::min(measured_done - 1, measured_done * 99 / 100);
    std::uint64_t seen = 0;
    for (std::size_t l = 0; l < latency_count.size(); ++l) {
      seen += latency_count[l];
      if (seen > rank) {
        r.latency_p99 = static_cast<double>(l);
        break;
      }
    }
    r.hops_avg = hops / static_cast<double>(measured_done);
  }
  r.saturated = !r.drained || r.accepted < 0.95 * r.offered;
  return r;
}

double uniform_hops(const NocConfig& c, bool self_traffic) {
  double sum = 0;
  const unsigned n = c.nodes();
  for (unsigned s = 0; s < n; ++s)
    for (unsigned d = 0; d < n; ++d)
      if (s != d) sum += Network::hops(c, s, d);
  return sum / (static_cast<double>(n) * (self_traffic ? n : n - 1));
}

}  // namespace tessera::noc
