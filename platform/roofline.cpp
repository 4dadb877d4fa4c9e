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
          {"tile_port_bytes_per_s", tile_port_bytes_per_s},
          {"tile_dma_bytes_per_s", tile_dma_bytes_per_s},
          {"stacks", stacks},
          {"hbm_bytes_per_s", hbm_bytes_per_s()},
          {"noc_cut_read_bytes_per_s", cut_read_bytes_per_s},
          {"noc_cut_write_bytes_per_s", cut_write_bytes_per_s},
          {"noc_cut_link", cut_link},
          {"host_bytes_per_s", host_bytes_per_s},
          {"link_bytes_per_s", link_bytes_per_s}};
}

Limits limits(const Platform& p) {
  Limits l;
  const nlohmann::ordered_json all = p.limits();
  std::vector<unsigned> tile_nodes, stack_nodes;
  std::string noc;
  double noc_link = 0;
  for (const auto& [name, e] : all.items()) {
    const std::string type = e["type"].get<std::string>();
    if (type == "tile") {
      ++l.tiles;
      for (const char* f : kFormats) {
        const double v = number(e["macs_per_s"], f);
        l.tile_macs_per_s[f] = l.tiles == 1 ? v : std::min(l.tile_macs_per_s[f], v);
      }
      auto slowest = [&](double& have, const char* key) {
        const double v = number(e, key);
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
    } else if (type == "noc") {
      noc_link = number(e, "link_bytes_per_s");
    }
  }
  // A tile's ports: its DMA engine's, and its NoC link's each way.
  for (const auto& [name, e] : all.items())
    if (e["type"] == "tile") {
      const double dma = number(e, "dma_bytes_per_s");
      l.tile_dma_bytes_per_s = l.tile_dma_bytes_per_s == 0 ? dma : std::min(l.tile_dma_bytes_per_s, dma);
      if (e.contains("node")) l.tile_port_bytes_per_s = noc_link;
    }
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
          {"bound_s", s},
          {"achieved_s", achieved_s},
          {"achieved_over_bound", achieved_s > 0 ? s / achieved_s : 0.0}};
}

Report bound(const Limits& l, const nlohmann::ordered_json& before, const nlohmann::ordered_json& after) {
  double compute = 0, vector = 0, hbm = 0, ports = 0, read = 0, written = 0, host = 0, links = 0;
  for (const auto& [name, s] : after.items()) {
    if (s.contains("tensor_macs_bf16")) {  // a tile
      double t = 0;
      for (const char* f : kFormats) {
        const double macs = grown(before, after, name, std::string("tensor_macs_") + f);
        const double peak = l.tile_macs_per_s.count(f) ? l.tile_macs_per_s.at(f) : 0.0;
        if (macs > 0 && peak > 0) t += macs / peak;
      }
      compute = std::max(compute, t);
      double v = 0;
      if (l.tile_vector_ops_per_s > 0) v += grown(before, after, name, "vector_lane_ops") / l.tile_vector_ops_per_s;
      if (l.tile_special_ops_per_s > 0)
        v += grown(before, after, name, "vector_special_function_ops") / l.tile_special_ops_per_s;
      vector = std::max(vector, v);
      if (l.tile_dma_bytes_per_s > 0)
        ports = std::max(ports, grown(before, after, name, "dma_global_bytes") / l.tile_dma_bytes_per_s);
      if (l.tile_port_bytes_per_s > 0)
        ports = std::max(ports, std::max(grown(before, after, name, "dma_global_read_bytes"),
                                         grown(before, after, name, "dma_global_written_bytes")) /
                                    l.tile_port_bytes_per_s);
    } else if (s.contains("peak_GBps") && s.contains("bytes_read")) {  // an HBM stack
      const double r = grown(before, after, name, "bytes_read"), w = grown(before, after, name, "bytes_written");
      read += r;
      written += w;
      if (l.stack_bytes_per_s > 0) hbm = std::max(hbm, (r + w) / l.stack_bytes_per_s);
    } else if (s.contains("bytes_to_device") && s.contains("busy_to_device_ns")) {  // the host port
      if (l.host_bytes_per_s > 0)
        host = std::max(grown(before, after, name, "bytes_to_device"), grown(before, after, name, "bytes_to_host")) /
               l.host_bytes_per_s;
    } else if (s.contains("ce_collectives")) {  // chip-to-chip ports: FLITs sent (headers and replays included)
      for (unsigned i = 0; l.link_flits_per_s > 0 && s.contains(fmt::format("port{}_tx_flits", i)); ++i)
        links = std::max(links, grown(before, after, name, fmt::format("port{}_tx_flits", i)) / l.link_flits_per_s);
    }
  }
  const double cut = std::max(l.cut_read_bytes_per_s > 0 ? read / l.cut_read_bytes_per_s : 0.0,
                              l.cut_write_bytes_per_s > 0 ? written / l.cut_write_bytes_per_s : 0.0);
  Report r;
  r.bounds = {{"compute", compute}, {"vector", vector}, {"hbm", hbm}, {"tile ports", ports}, {"noc cut", cut}, {"host port", host}};
  if (l.link_bytes_per_s > 0) r.bounds.push_back({"links", links});
  return r;
}

}  // namespace tessera::roofline
