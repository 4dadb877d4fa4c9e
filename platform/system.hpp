// A system of chips: N copies of a chip platform, each with its own CP and
// firmware, joined by the link ports of their chip-to-chip fabrics. A
// system file is JSON:
//
//   { "system": "t1x4-ring", "doc": "...", "chip": "t1.json", "chips": 4,
//     "topology": "ring",            ring | torus | full | list
//     "torus": [4, 2],               torus only: width and height
//     "links": [[0, 0, 1, 1], ...],  list only: chip, port, chip, port
//     "fabric": {"lanes": 16, ...} } parameters for every chip's fabric
//
// Ports: a ring joins port 0 of chip k to port 1 of chip k+1; a torus
// joins port 0 (east) to port 1 (west) of the next chip in x, port 2
// (north) to port 3 (south) of the next in y; fully connected gives chip a
// its port b (b < a) or b - 1 (b > a) towards chip b. Routing takes the
// fewest hops; where ports tie, chip k takes the (k mod n)-th of them.
// Chip k's instances are "chipK.name"; its memory is at
// c2c::global_address(k, local) from every chip.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "platform.hpp"

namespace tessera {

namespace c2c {
class C2c;
class Cut;
}

struct LinkSpec {
  unsigned a, port_a, b, port_b;
};

struct SystemSpec {
  std::string file, name, doc, chip_file, topology;
  unsigned chips = 1;
  std::string fabric;               // the fabric instance of the chip file
  std::vector<LinkSpec> links;
  std::vector<PlatformSpec> chip_specs;    // one per chip
  std::vector<std::vector<int>> routes;    // [from][to]: first port, -1 for itself

  static bool is_system(const nlohmann::json& raw) { return raw.is_object() && raw.contains("system"); }
  // `sets`: "chipK.instance.key=value" for chip K, "instance.key=value" for
  // every chip. `fixup` may adjust each chip's raw description before it is
  // checked. Throws ConfigError naming the file, the chip and the key.
  static SystemSpec parse(const std::string& file, const nlohmann::json& raw, const std::vector<std::string>& sets,
                          const std::function<void(nlohmann::json&)>& fixup = {});
  std::string describe() const;  // topology and links, one paragraph
};

// Builds every chip (top-level modules "chip0", "chip1", ...), gives each
// fabric its identity and routes, and connects the links. Each chip is its
// own exit domain (sim::set_domains).
//
// Spread over processes (MPI ranks), each process builds only the chips it
// holds (`owner[k] == rank`); a link between chips of two processes is
// joined at each end to the other's number (c2c::C2c::connect_remote), and
// what crosses it goes through the cut (c2c/cut.hpp).
class System {
 public:
  System(const SystemSpec& spec, bool protocol_checker, std::vector<unsigned> owner = {}, unsigned rank = 0);
  ~System();
  unsigned size() const { return static_cast<unsigned>(chips_.size()); }  // every chip, held here or not
  bool holds(unsigned k) const { return k < chips_.size() && chips_[k] != nullptr; }
  Platform& chip(unsigned k) { return *chips_.at(k); }
  c2c::C2c& fabric(unsigned k) { return *fabrics_.at(k); }
  c2c::Cut& cut() { return *cut_; }
  // The smallest latency of any link: no message crosses a link sooner, so
  // processes may run that far apart (the windows of a run).
  sc_core::sc_time lookahead() const { return lookahead_; }
  const SystemSpec& spec() const { return spec_; }
  void load(const ElfImage& elf);  // the same firmware on every chip
  std::string load_error() const;
  nlohmann::ordered_json stats() const;  // instance "chipK.name" -> counters
  std::uint64_t protocol_violations() const;

 private:
  const SystemSpec& spec_;
  sc_core::sc_time lookahead_;  // asked at every window: found once
  std::unique_ptr<c2c::Cut> cut_;
  std::vector<std::unique_ptr<Platform>> chips_;  // nullptr: held by another process
  std::vector<c2c::C2c*> fabrics_;
};

}  // namespace tessera
