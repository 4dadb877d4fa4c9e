// Synthetic traffic for network studies: the standard patterns, Bernoulli
// injection at a rate in flits per node and cycle, warm-up, measurement
// and drain phases, and the figures BookSim-style studies report.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "noc/noc.hpp"

namespace tessera::noc {

struct TrafficConfig {
  std::string pattern = "uniform";  // one of pattern_names()
  double rate = 0.1;                // offered flits per node per cycle
  unsigned packet_flits = 1;
  std::uint64_t warmup = 1000, measure = 5000, drain_limit = 20000;
  std::vector<unsigned> hotspots;
  unsigned seed = 1;
  bool self_traffic = false;  // uniform: a node may send to itself too (as BookSim's uniform does)
};

struct TrafficResult {
  double offered = 0, accepted = 0;  // flits per node per cycle
  double latency_avg = 0, latency_p99 = 0, hops_avg = 0;
  std::uint64_t packets = 0, cycles = 0;
  bool drained = false;
  bool saturated = false;
};

// The destination of a packet from `src`; -1 when the pattern sends nothing
// from there (a fixed point of a permutation).
int destination(const std::string& pattern, unsigned src, const NocConfig& c, const std::vector<unsigned>& hotspots,
                std::mt19937_64& rng, bool self_traffic = false);
// Whether `pattern` names a pattern; pattern_names() lists them ("uniform,
// transpose, ..."). hotspot: every node sends to the hotspots; fanout: the
// hotspots send to every other node (a memory row answering its readers).
bool known_pattern(const std::string& pattern);
std::string pattern_names();

TrafficResult run_traffic(Network& net, const TrafficConfig& t);

// Average hop count of uniform random traffic (source != destination, or
// with self-traffic any destination) on the network, by enumeration.
double uniform_hops(const NocConfig& c, bool self_traffic = false);

}  // namespace tessera::noc
