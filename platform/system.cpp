#include "system.hpp"

#include <fmt/format.h>

#include <deque>
#include <filesystem>
#include <set>

#include "common/input.hpp"
#include "common/sim.hpp"
#include "c2c/c2c.hpp"
#include "c2c/cut.hpp"

namespace tessera {
namespace {

[[noreturn]] void fail(const std::string& file, const std::string& what) {
  throw ConfigError(file + ": " + what);  // elaboration-only
}

unsigned count_of(const nlohmann::json& j, const std::string& file, const std::string& key) {
  if (!j.is_number_integer() || j.get<long long>() < 0 || j.get<long long>() > 1000000)
    fail(file, key + ": expected a whole number, got " + cut(j.dump()));
  return j.get<unsigned>();
}

}  // namespace

SystemSpec SystemSpec::parse(const std::string& file, const nlohmann::json& raw, const std::vector<std::string>& sets,
                             const std::function<void(nlohmann::json&)>& fixup) {
  SystemSpec s;
  s.file = file;
  for (auto it = raw.begin(); it != raw.end(); ++it) {
    static const std::set<std::string> known = {"system", "doc", "chip", "chips", "topology", "torus", "links", "fabric"};
    if (!known.count(it.key()))
      fail(file, it.key() + ": unknown key (known: system, doc, chip, chips, topology, torus, links, fabric)");
  }
  if (!raw.contains("system") || !raw["system"].is_string()) fail(file, "system: expected the system's name as a string");
  s.name = raw["system"].get<std::string>();
  if (raw.contains("doc") && !raw["doc"].is_string()) fail(file, "doc: expected a string, got " + cut(raw["doc"].dump()));
  s.doc = raw.value("doc", "");
  if (!raw.contains("chip") || !raw["chip"].is_string()) fail(file, "chip: expected the chip's platform file");
  const std::filesystem::path chip = raw["chip"].get<std::string>();
  s.chip_file = (chip.is_absolute() ? chip : std::filesystem::path(file).parent_path() / chip).lexically_normal().string();
  if (!raw.contains("chips")) fail(file, "chips: missing (how many chips)");
  s.chips = count_of(raw["chips"], file, "chips");
  if (s.chips < 1 || s.chips > c2c::kMaxChips)
    fail(file, fmt::format("chips: {} chips; a system has 1 to {}", s.chips, c2c::kMaxChips));
  if (raw.contains("topology") && !raw["topology"].is_string())
    fail(file, "topology: expected ring, torus, full or list, got " + cut(raw["topology"].dump()));
  s.topology = raw.value("topology", "ring");

  // The links of the topology.
  auto link = [&](unsigned a, unsigned pa, unsigned b, unsigned pb) { s.links.push_back({a, pa, b, pb}); };
  if (s.topology == "ring") {
    if (s.chips == 2) link(0, 0, 1, 1), link(1, 0, 0, 1);
    else if (s.chips > 2)
      for (unsigned k = 0; k < s.chips; ++k) link(k, 0, (k + 1) % s.chips, 1);
  } else if (s.topology == "torus") {
    const auto& t = raw.contains("torus") ? raw["torus"] : nlohmann::json();
    if (!t.is_array() || t.size() != 2) fail(file, "torus: expected [width, height]");
    const unsigned w = count_of(t[0], file, "torus[0]"), h = count_of(t[1], file, "torus[1]");
    if (w < 2 || h < 2 || w * h != s.chips)
      fail(file, fmt::format("torus: {} x {} must be at least 2 x 2 and hold the {} chips", w, h, s.chips));
    for (unsigned y = 0; y < h; ++y)
      for (unsigned x = 0; x < w; ++x) {
        const unsigned k = y * w + x;
        link(k, 0, y * w + (x + 1) % w, 1);
        link(k, 2, ((y + 1) % h) * w + x, 3);
      }
  } else if (s.topology == "full") {
    for (unsigned a = 0; a < s.chips; ++a)
      for (unsigned b = a + 1; b < s.chips; ++b) link(a, b - 1, b, a);
  } else if (s.topology == "list") {
    const auto& l = raw.contains("links") ? raw["links"] : nlohmann::json();
    if (!l.is_array()) fail(file, "links: expected a list of [chip, port, chip, port]");
    for (std::size_t i = 0; i < l.size(); ++i) {
      const std::string where = fmt::format("links[{}]", i);
      if (!l[i].is_array() || l[i].size() != 4) fail(file, where + ": expected [chip, port, chip, port]");
      link(count_of(l[i][0], file, where), count_of(l[i][1], file, where), count_of(l[i][2], file, where),
           count_of(l[i][3], file, where));
    }
  } else {
    fail(file, "topology: \"" + cut(s.topology) + "\" is not ring, torus, full or list");
  }
  if (s.topology != "torus" && raw.contains("torus")) fail(file, "torus: only for topology \"torus\"");
  if (s.topology != "list" && raw.contains("links")) fail(file, "links: only for topology \"list\"");

  // Each chip's description: the chip file, the fabric's parameters, the overrides.
  const nlohmann::json chip_raw = PlatformSpec::read(s.chip_file);
  if (chip_raw.contains("instances") && chip_raw["instances"].is_array())
    for (const auto& i : chip_raw["instances"])
      if (i.is_object() && i.contains("type") && i["type"] == "c2c" && i.contains("name") && i["name"].is_string()) {
        if (!s.fabric.empty()) fail(file, "chip " + s.chip_file + " has two chip-to-chip fabrics (type c2c)");
        s.fabric = i["name"].get<std::string>();
      }
  if (s.fabric.empty() && s.chips > 1) fail(file, "chip: " + s.chip_file + " has no chip-to-chip fabric (an instance of type c2c)");
  s.chip_specs.reserve(s.chips);
  for (unsigned k = 0; k < s.chips; ++k) {
    nlohmann::json c = chip_raw;
    if (raw.contains("fabric")) {
      if (!raw["fabric"].is_object()) fail(file, "fabric: expected an object of the fabric's parameters");
      for (auto& i : c["instances"])
        if (i.is_object() && i.contains("name") && i["name"] == s.fabric)
          for (auto it = raw["fabric"].begin(); it != raw["fabric"].end(); ++it) i["params"][it.key()] = it.value();
    }
    try {
      for (const std::string& set : sets) {
        const auto dot = set.find('.');
        if (set.rfind("chip", 0) == 0 && dot != std::string::npos && dot > 4 &&
            std::all_of(set.begin() + 4, set.begin() + static_cast<std::ptrdiff_t>(dot),
                        [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)); })) {
          const std::string index = set.substr(4, dot - 4);
          if (index.size() > 6 || std::stoul(index) >= s.chips)
            fail(file, fmt::format("--set {}: there is no chip {} ({} chips)", cut(set), cut(index, 12), s.chips));
          const unsigned target = static_cast<unsigned>(std::stoul(index));
          if (target == k) PlatformSpec::apply_set(c, s.chip_file, set.substr(dot + 1));
        } else {
          PlatformSpec::apply_set(c, s.chip_file, set);
        }
      }
      if (fixup) fixup(c);
      s.chip_specs.push_back(PlatformSpec::parse(s.chip_file, c));
    } catch (const ConfigError& e) {
      if (s.chips == 1) throw;
      throw ConfigError(fmt::format("{}: chip {}: {}", file, k, e.what()));  // elaboration-only
    }
  }

  // Ports exist and carry one link each.
  unsigned ports = 0;
  if (!s.fabric.empty())
    for (const auto& i : s.chip_specs[0].instances)
      if (i.name == s.fabric) ports = std::any_cast<std::shared_ptr<const c2c::C2c::Config>>(i.config)->ports;
  std::set<std::pair<unsigned, unsigned>> used;
  for (std::size_t i = 0; i < s.links.size(); ++i) {
    const LinkSpec& l = s.links[i];
    for (auto [c, p] : {std::pair{l.a, l.port_a}, std::pair{l.b, l.port_b}}) {
      if (c >= s.chips) fail(file, fmt::format("link {}: there is no chip {} ({} chips)", i, c, s.chips));
      if (p >= ports)
        fail(file, fmt::format("link {}: chip {} has no port {} (its fabric {} has {} ports; the {} topology needs more)",
                               i, c, p, s.fabric, ports, s.topology));
      if (!used.insert({c, p}).second) fail(file, fmt::format("link {}: port {} of chip {} already has a link", i, p, c));
    }
    if (l.a == l.b) fail(file, fmt::format("link {}: joins chip {} to itself", i, l.a));
  }

  // Fewest hops. Where several ports start a shortest way, chip `from`
  // takes the (from mod n)-th of them in port order, so neighbours take
  // different ways (on a ring, the chip opposite is reached one way from
  // even chips and the other way from odd ones).
  std::vector<std::vector<std::pair<unsigned, unsigned>>> out(s.chips);  // (port, neighbour)
  for (const LinkSpec& l : s.links) out[l.a].emplace_back(l.port_a, l.b), out[l.b].emplace_back(l.port_b, l.a);
  for (auto& o : out) std::sort(o.begin(), o.end());
  std::vector<std::vector<unsigned>> dist(s.chips, std::vector<unsigned>(s.chips, ~0u));
  for (unsigned from = 0; from < s.chips; ++from) {
    std::deque<unsigned> queue{from};
    dist[from][from] = 0;
    while (!queue.empty()) {
      const unsigned c = queue.front();
      queue.pop_front();
      for (auto [port, next] : out[c])
        if (dist[from][next] == ~0u) dist[from][next] = dist[from][c] + 1, queue.push_back(next);
    }
  }
  s.routes.assign(s.chips, std::vector<int>(s.chips, -1));
  for (unsigned from = 0; from < s.chips; ++from)
    for (unsigned to = 0; to < s.chips; ++to) {
      if (dist[from][to] == ~0u) fail(file, fmt::format("chip {} cannot reach chip {}: the links leave them apart", from, to));
      if (from == to) continue;
      std::vector<unsigned> ports;
      for (auto [port, next] : out[from])
        if (dist[next][to] + 1 == dist[from][to] && (ports.empty() || ports.back() != port)) ports.push_back(port);
      s.routes[from][to] = static_cast<int>(ports[from % ports.size()]);
    }
  return s;
}

std::string SystemSpec::describe() const {
  std::string o = fmt::format("System {} ({}): {} chips of {}, {}", name, file, chips, chip_file, topology);
  if (!links.empty()) {
    o += "; links";
    for (const LinkSpec& l : links) o += fmt::format(" {}.{}-{}.{}", l.a, l.port_a, l.b, l.port_b);
  }
  const InstanceSpec* f = fabric.empty() || chip_specs.empty() ? nullptr : chip_specs.front().find(fabric);
  if (f) {
    const auto& c = *std::any_cast<std::shared_ptr<const c2c::C2c::Config>>(f->config);
    o += fmt::format("\nChip k's memory is at {:#x} + (k << {}) + its local address, from every chip.\n", c.global_base,
                     c.chip_shift);
  } else {
    o += "\n";
  }
  return o;
}

System::System(const SystemSpec& spec, bool protocol_checker, std::vector<unsigned> owner, unsigned rank)
    : spec_(spec), lookahead_(sc_core::sc_max_time()) {
  for (const LinkSpec& l : spec_.links)
    for (unsigned k : {l.a, l.b}) {
      const InstanceSpec* f = spec_.chip_specs[k].find(spec_.fabric);
      lookahead_ = std::min(lookahead_, std::any_cast<std::shared_ptr<const c2c::C2c::Config>>(f->config)->link.latency);
    }
  if (owner.empty()) owner.assign(spec.chips, rank);
  cut_ = std::make_unique<c2c::Cut>(owner, rank);
  std::vector<std::string> names;
  for (unsigned k = 0; k < spec.chips; ++k) names.push_back(fmt::format("chip{}", k));
  sim::set_domains(names);
  for (unsigned k = 0; k < spec.chips; ++k) {
    if (!cut_->local(k)) {
      chips_.push_back(nullptr);
      fabrics_.push_back(nullptr);
      continue;
    }
    chips_.push_back(std::make_unique<Platform>(names[k].c_str(), spec.chip_specs[k], protocol_checker));
    c2c::C2c* f = spec.fabric.empty() ? nullptr : chips_.back()->get<c2c::C2c>(spec.fabric);
    if (f) {
      f->set_identity(k, spec.chips);
      for (unsigned to = 0; to < spec.chips; ++to)
        if (spec.routes[k][to] >= 0) f->set_route(to, static_cast<unsigned>(spec.routes[k][to]));
      f->set_cut(cut_.get());
      cut_->add(k, f);
    }
    fabrics_.push_back(f);
  }
  auto config_of = [&](unsigned k) -> const c2c::C2c::Config& {
    return *std::any_cast<std::shared_ptr<const c2c::C2c::Config>>(spec.chip_specs[k].find(spec.fabric)->config);
  };
  for (const LinkSpec& l : spec.links) {
    const bool a = cut_->local(l.a), b = cut_->local(l.b);
    if (a && b) fabrics_.at(l.a)->connect(l.port_a, *fabrics_.at(l.b), l.port_b);
    else if (a) fabrics_.at(l.a)->connect_remote(l.port_a, l.b, l.port_b, config_of(l.b));
    else if (b) fabrics_.at(l.b)->connect_remote(l.port_b, l.a, l.port_a, config_of(l.a));
  }
}

System::~System() = default;

void System::load(const ElfImage& elf) {
  for (auto& c : chips_)
    if (c) c->load(elf);
}

std::string System::load_error() const {
  for (const auto& c : chips_)
    if (c && !c->load_error().empty()) return c->load_error();
  return "";
}

nlohmann::ordered_json System::stats() const {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (unsigned k = 0; k < chips_.size(); ++k) {
    if (!chips_[k]) continue;
    const nlohmann::ordered_json s = chips_[k]->stats();
    for (auto it = s.begin(); it != s.end(); ++it) out[it.key()] = it.value();
  }
  return out;
}

std::uint64_t System::protocol_violations() const {
  std::uint64_t n = 0;
  for (const auto& c : chips_)
    if (c) n += c->protocol_violations();
  return n;
}

}  // namespace tessera
