#include "roofline.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "noc/noc.hpp"
#include "noc/noc_ip.hpp"
#include "platform.hpp"

namespace tessera::roofline {

namespace {

const char* const kFormats[] = {"bf16", "fp16", "fp8", "int8"};

double number(const nlohmann::ordered_json& j, const std::string& key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
}

// A counter's growth between two snapshots of one instance's statistics.
double grown(const nlohmann::ordered_json& before, const nlohmann::ordered_json& after, const std::string& ip,
             const std::string& key) {
  const auto a = after.find(ip);
  if (a == after.end()) return 0;
  const auto b = before.find(ip);
  return number(*a, key) - (b == before.end() ? 0.0 : number(*b, key));
}

const char* port_name(unsigned port) {
  static const char* const names[] = {"ejection", "east", "west", "north", "south"};
  return port < 5 ? names[port] : "?";
}

}  // namespace

double Limits::macs_per_s(const std::string& format) const {
  const auto it = tile_macs_per_s.find(format);
  return it == tile_macs_per_s.end() ? 0.0 : tiles * it->second;
}

nlohmann::ordered_json Limits::json() const {
  nlohmann::ordered_json macs = nlohmann::ordered_json::object();
  for (const char* f : kFormats) macs[f] = macs_per_s(f);
  return {{"tiles", tiles},
          {"macs_per_s", macs},
          {"vector_ops_per_s", tiles * tile_vector_ops_per_s},
          {"vector_special_ops_per_s", tiles * tile_special_ops_per_s},
          {"tile_dma_bytes_per_s", tile_dma_bytes_per_s},
          {"noc_port_bytes_per_s", port_bytes_per_s},
          {"stacks", stacks},
          {"hbm_bytes_per_s", hbm_bytes_per_s()},
          {"noc_cut_read_bytes_per_s", cut_read_bytes_per_s},
          {"noc_cut_write_bytes_per_s", cut_write_bytes_per_s},
          {"noc_cut_link", cut_link},
          {"host_bytes_per_s", host_bytes_per_s},
          {"link_bytes_per_s", link_bytes_per_s},
          {"reduce_bytes_per_s", reduce_bytes_per_s}};
}

namespace {
// The fields, named once for save() and load().
template <class L, class F>
void each_field(L& l, F f) {
  f("tiles", l.tiles);
  f("stacks", l.stacks);
  f("tile_macs_per_s", l.tile_macs_per_s);
  f("tile_vector_ops_per_s", l.tile_vector_ops_per_s);
  f("tile_special_ops_per_s", l.tile_special_ops_per_s);
  f("tile_dma_bytes_per_s", l.tile_dma_bytes_per_s);
  f("port_bytes_per_s", l.port_bytes_per_s);
  f("port_flits_per_s", l.port_flits_per_s);
  f("stack_bytes_per_s", l.stack_bytes_per_s);
  f("cut_read_bytes_per_s", l.cut_read_bytes_per_s);
  f("cut_write_bytes_per_s", l.cut_write_bytes_per_s);
  f("cut_link", l.cut_link);
  f("host_bytes_per_s", l.host_bytes_per_s);
  f("link_bytes_per_s", l.link_bytes_per_s);
  f("link_flits_per_s", l.link_flits_per_s);
  f("reduce_bytes_per_s", l.reduce_bytes_per_s);
}
}  // namespace

nlohmann::ordered_json Limits::save() const {
  nlohmann::ordered_json j;
  each_field(*this, [&](const char* key, const auto& v) { j[key] = v; });
  return j;
}

Limits Limits::load(const nlohmann::ordered_json& j) {
  Limits l;
  each_field(l, [&](const char* key, auto& v) { j.at(key).get_to(v); });
  return l;
}

Limits limits(const Platform& p) {
  Limits l;
  const nlohmann::ordered_json all = p.limits();
  std::vector<unsigned> tile_nodes, stack_nodes;
  std::string noc;
  double noc_link = 0, noc_flits = 0;
  for (const auto& [name, e] : all.items()) {
    const std::string type = e["type"].get<std::string>();
    if (type == "tile") {
      ++l.tiles;
      for (const char* f : kFormats) {
        const double v = number(e["macs_per_s"], f);
        l.tile_macs_per_s[f] = l.tiles == 1 ? v : std::min(l.tile_macs_per_s[f], v);
      }
      const nlohmann::ordered_json& tile = e;  // (a lambda may not capture a structured binding in C++17)
      auto slowest = [&](double& have, const char* key) {
        const double v = number(tile, key);
        have = l.tiles == 1 ? v : std::min(have, v);
      };
      slowest(l.tile_vector_ops_per_s, "vector_ops_per_s");
      slowest(l.tile_special_ops_per_s, "vector_special_ops_per_s");
      if (e.contains("node")) tile_nodes.push_back(e["node"].get<unsigned>()), noc = e["noc"].get<std::string>();
    } else if (type == "hbm") {
      ++l.stacks;
      const double v = number(e, "bytes_per_s");
      l.stack_bytes_per_s = l.stacks == 1 ? v : std::min(l.stack_bytes_per_s, v);
      if (e.contains("node")) stack_nodes.push_back(e["node"].get<unsigned>());
    } else if (type == "host_port") {
      l.host_bytes_per_s = number(e, "bytes_per_s");
    } else if (type == "c2c") {
      l.link_bytes_per_s = number(e, "port_bytes_per_s");
      l.link_flits_per_s = number(e, "port_flits_per_s");
      l.reduce_bytes_per_s = number(e, "reduce_bytes_per_s");
    } else if (type == "noc") {
      noc_link = number(e, "link_bytes_per_s");
      noc_flits = number(e, "link_flits_per_s");
    }
  }
  for (const auto& [name, e] : all.items())
    if (e["type"] == "tile") {
      const double dma = number(e, "dma_bytes_per_s");
      l.tile_dma_bytes_per_s = l.tile_dma_bytes_per_s == 0 ? dma : std::min(l.tile_dma_bytes_per_s, dma);
    }
  l.port_bytes_per_s = noc_link;
  l.port_flits_per_s = noc_flits;
  // The network between the stacks and the tiles, by its own routes.
  if (const auto* n = noc.empty() ? nullptr : p.get<noc::Noc>(noc); n && !stack_nodes.empty()) {
    const noc::NocConfig& c = n->config().net;
    const noc::CutShare read = noc::cut_share(c, stack_nodes, tile_nodes);
    const noc::CutShare write = noc::cut_share(c, tile_nodes, stack_nodes);
    if (read.share > 0) l.cut_read_bytes_per_s = noc_link / read.share;
    if (write.share > 0) l.cut_write_bytes_per_s = noc_link / write.share;
    l.cut_link = fmt::format("node {} {}", read.node, port_name(read.port));
  }
  return l;
}

double Report::seconds() const { return bounds.empty() ? 0.0 : binding().seconds; }

const Bound& Report::binding() const {
  return *std::max_element(bounds.begin(), bounds.end(),
                           [](const Bound& a, const Bound& b) { return a.seconds < b.seconds; });
}

nlohmann::ordered_json Report::json(double achieved_s) const {
  nlohmann::ordered_json b = nlohmann::ordered_json::object();
  for (const Bound& x : bounds) b[x.resource] = x.seconds;
  const double s = seconds();
  return {{"bounds_s", b},
          {"binding", bounds.empty() ? std::string() : binding().resource},
          {"binding_where", bounds.empty() ? std::string() : binding().where},
          {"bound_s", s},
          {"achieved_s", achieved_s},
          {"achieved_over_bound", achieved_s > 0 ? s / achieved_s : 0.0}};
}

Report bound(const Limits& l, const nlohmann::ordered_json& before, const nlohmann::ordered_json& after) {
  Bound compute{"compute", 0, ""}, vector{"vector", 0, ""}, hbm{"hbm", 0, ""}, ports{"tile ports", 0, ""},
      nodes{"noc ports", 0, ""}, host{"host port", 0, ""}, links{"links", 0, ""}, reduce{"reduction", 0, ""};
  // Keeps the longest, and where it is.
  auto raise = [](Bound& b, double seconds, const std::string& where) {
    if (seconds > b.seconds) b.seconds = seconds, b.where = where;
  };
  double read = 0, written = 0;
  for (const auto& [name, s] : after.items()) {
    const std::string instance = name.substr(name.rfind('.') + 1);  // "device.tile3": tile3
    if (s.contains("tensor_macs_bf16")) {  // a tile
      double t = 0;
      for (const char* f : kFormats) {
        const double macs = grown(before, after, name, std::string("tensor_macs_") + f);
        const double peak = l.tile_macs_per_s.count(f) ? l.tile_macs_per_s.at(f) : 0.0;
        if (macs > 0 && peak > 0) t += macs / peak;
      }
      raise(compute, t, instance);
      double v = 0;
      if (l.tile_vector_ops_per_s > 0) v += grown(before, after, name, "vector_lane_ops") / l.tile_vector_ops_per_s;
      if (l.tile_special_ops_per_s > 0)
        v += grown(before, after, name, "vector_special_function_ops") / l.tile_special_ops_per_s;
      raise(vector, v, instance);
      if (l.tile_dma_bytes_per_s > 0)
        raise(ports, grown(before, after, name, "dma_global_bytes") / l.tile_dma_bytes_per_s, instance);
    } else if (s.contains("peak_GBps") && s.contains("bytes_read")) {  // an HBM stack
      const double r = grown(before, after, name, "bytes_read"), w = grown(before, after, name, "bytes_written");
      read += r;
      written += w;
      if (l.stack_bytes_per_s > 0) raise(hbm, (r + w) / l.stack_bytes_per_s, instance);
    } else if (s.contains("bytes_to_device") && s.contains("busy_to_device_ns")) {  // the host port
      if (l.host_bytes_per_s > 0) {
        raise(host, grown(before, after, name, "bytes_to_device") / l.host_bytes_per_s, "to the device");
        raise(host, grown(before, after, name, "bytes_to_host") / l.host_bytes_per_s, "to the host");
      }
    } else if (s.contains("node_injected_flits") && l.port_flits_per_s > 0) {  // the network's endpoints
      for (const char* key : {"node_injected_flits", "node_ejected_flits"}) {
        const auto& now = s[key];
        const auto b = before.find(name);
        for (std::size_t i = 0; i < now.size(); ++i) {
          const double was = b != before.end() && b->contains(key) && i < (*b)[key].size() ? (*b)[key][i].get<double>() : 0;
          raise(nodes, (now[i].get<double>() - was) / l.port_flits_per_s,
                fmt::format("node {} {}", i, key[5] == 'i' ? "out" : "in"));
        }
      }
    } else if (s.contains("ce_collectives")) {  // chip-to-chip ports: FLITs sent (headers and replays included)
      for (unsigned i = 0; l.link_flits_per_s > 0 && s.contains(fmt::format("port{}_tx_flits", i)); ++i)
        raise(links, grown(before, after, name, fmt::format("port{}_tx_flits", i)) / l.link_flits_per_s,
              fmt::format("port {}", i));
      if (l.reduce_bytes_per_s > 0) raise(reduce, grown(before, after, name, "ce_bytes_reduced") / l.reduce_bytes_per_s, instance);
    }
  }
  Bound cut{"noc cut", 0, ""};
  if (l.cut_read_bytes_per_s > 0) raise(cut, read / l.cut_read_bytes_per_s, l.cut_link);
  if (l.cut_write_bytes_per_s > 0) raise(cut, written / l.cut_write_bytes_per_s, "tiles to stacks");
  Report r;
  r.bounds = {compute, vector, hbm, ports, nodes, cut, host};
  if (l.link_bytes_per_s > 0) r.bounds.push_back(links);
  if (l.reduce_bytes_per_s > 0) r.bounds.push_back(reduce);
  return r;
}

}  // namespace tessera::roofline
