// The roofline of a chip: the least time a piece of work can take on each
// of the resources it needs, and which one binds. The limits come from
// what each IP says it can do at most (Ip::report_limits, from its own
// parameters: `--set` moves them) and from the network-on-chip's routes
// between the memories and the tiles; the work is what the IPs' counters
// (Platform::stats) say was done between two snapshots. Nothing is typed in.
//
// Resources, each as seconds = work / capacity:
//   compute     the busiest tile's MACs in each format / its tensor core's
//               peak in that format (array MACs per cycle x array clock)
//   vector      the busiest tile's vector lane ops / its lanes' rate, plus
//               its special-function ops / theirs (the unit does one, then
//               the other)
//   hbm         the busiest stack's bytes / its peak (every data bus busy)
//   tile ports  the busiest tile's DMA bytes to and from global memory /
//               its DMA engine's port
//   noc ports   the busiest node's flits into or out of the network (its
//               endpoint's link, a flit per cycle each way): a tile's, an
//               HBM stack's, the communication engine's
//   noc cut     bytes read from the stacks / the NoC's capacity from the
//               stacks to the tiles, and bytes written likewise the other way
//               (the larger of the two): one link's bandwidth / the share of
//               uniform stack-to-tile traffic its busiest link carries
//   host port   the larger direction's bytes / the host link's bandwidth
//   links       the busiest chip-to-chip port's FLITs sent / its rate
//   reduction   the communication engine's reduced bytes / its ALU's rate
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tessera {

class Platform;

namespace roofline {

struct Limits {
  unsigned tiles = 0, stacks = 0;
  std::map<std::string, double> tile_macs_per_s;  // one tile's tensor core, per format (bf16, fp16, fp8, int8)
  double tile_vector_ops_per_s = 0, tile_special_ops_per_s = 0;  // one tile's vector unit
  double tile_dma_bytes_per_s = 0;                // one tile's DMA engine's port (both ways together)
  double port_bytes_per_s = 0, port_flits_per_s = 0;  // a node's NoC link, each way
  double stack_bytes_per_s = 0;                   // one HBM stack (the slowest, if they differ)
  double cut_read_bytes_per_s = 0;                // the NoC, stacks to tiles
  double cut_write_bytes_per_s = 0;               // tiles to stacks
  std::string cut_link;                           // the busiest link of the reads ("node 12 south")
  double host_bytes_per_s = 0;                    // each way; 0: no host port
  double link_bytes_per_s = 0;                    // one chip-to-chip port, each way; 0: no links
  double link_flits_per_s = 0;                    // the same in FLITs
  double reduce_bytes_per_s = 0;                  // the communication engine's reduction ALU
  // The chip's totals: all tiles in a format, all stacks.
  double macs_per_s(const std::string& format) const;
  double hbm_bytes_per_s() const { return stacks * stack_bytes_per_s; }
  nlohmann::ordered_json json() const;
  // Every field as it is (json() reports totals): to carry a chip's limits
  // to another process and back.
  nlohmann::ordered_json save() const;
  static Limits load(const nlohmann::ordered_json& j);
};

// Of an elaborated chip.
Limits limits(const Platform& p);

struct Bound {
  std::string resource;  // compute, vector, hbm, tile ports, noc ports, noc cut, host port, links, reduction
  double seconds = 0;
  std::string where;     // the busiest one: "tile3", "hbm0", "node 12 out", "port 1", ...
};

struct Report {
  std::vector<Bound> bounds;  // in the order above; links and reduction only where the chip has them
  double seconds() const;     // the binding one's
  const Bound& binding() const;
  nlohmann::ordered_json json(double achieved_s) const;  // bounds, binding, achieved / bound
};

// The work between two Platform::stats snapshots of the chip.
Report bound(const Limits& l, const nlohmann::ordered_json& before, const nlohmann::ordered_json& after);

}  // namespace roofline
}  // namespace tessera
