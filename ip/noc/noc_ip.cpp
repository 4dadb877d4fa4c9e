#include "noc/noc_ip.hpp"

#include "common/sim.hpp"

#include "common/log.hpp"
#include "common/registry.hpp"

namespace tessera::noc {

const power::Event kFlitHop = power::declare_event("noc_flit_hop", "noc", 25, "a flit through one router");

void Noc::Config::visit(Params& p) {
  p("topology", net.topology, "mesh, torus or ring");
  p("width", net.width, "routers in x");
  p("height", net.height, "routers in y");
  p("routing", net.routing, "xy or west_first");
  p("vcs", net.vcs, "virtual channels per port");
  p("buffer", net.buffer, "flits per virtual channel");
  p("classes", net.classes, "message classes (2: requests and responses)");
  p("rc", net.rc, "route computation, cycles");
  p("va", net.va, "VC allocation, cycles");
  p("sa", net.sa, "switch allocation, cycles");
  p("st", net.st, "switch traversal, cycles");
  p("link", net.link, "link traversal, cycles");
  p("inject", net.inject, "the injection channel (node to router), cycles");
  p("eject", net.eject, "the ejection channel (router to node), cycles");
  p("credit_delay", net.credit_delay, "credit return, cycles");
  p("sa_allocator", net.sa_allocator, "switch allocation: separable (input-first round robin), islip or wavefront (flit level)");
  p("sa_iterations", net.sa_iterations, "iSLIP's rounds of request, grant and accept");
  p("vc_release", net.vc_release, "a VC frees when its tail leaves (tail) or when the tail's credit returns (credit, BookSim; flit level)");
  p("flit_bytes", net.flit_bytes, "bytes per flit");
  p("header_bytes", net.header_bytes, "header bytes in a head flit");
  p("model", model, "flit (cycle-accurate) or packet (fast)");
  p("clock", clock, "network clock");
  p("bus_node", bus_node, "node of the system bus (the CP)");
}

void Noc::Config::validate(const Params& p) const {
  std::string key;
  if (const std::string e = net.check(&key); !e.empty()) p.fail(key, e);
  if (model != "flit" && model != "packet") p.fail("model", "must be flit or packet");
  if (bus_node >= net.nodes()) p.fail("bus_node", "is not a node of the network");
}

Noc::Noc(const sc_core::sc_module_name& n, const Config& c)
    : Ip(n), initiator_side("initiator_side"), target_side("target_side"), config_(c),
      period_(std::max<std::uint64_t>(1, c.clock.period().value())) {
  if (c.model == "packet") net_ = std::make_unique<PacketNetwork>(c.net);
  else net_ = std::make_unique<FlitNetwork>(c.net);
  net_->on_delivered([this](Packet& p) {
    auto it = waiting_.find(p.id);
    if (it == waiting_.end()) return;
    it->second->done = true;
    it->second->delivered = p.delivered;
    it->second->event.notify(sc_core::SC_ZERO_TIME);
    waiting_.erase(it);
  });
  net_->on_scheduled([this](Packet& p) {
    auto it = waiting_.find(p.id);
    if (it == waiting_.end()) return;
    it->second->scheduled = true;
    it->second->delivered = p.delivered;
  });
  initiator_side.register_b_transport(this, &Noc::b_transport);
  initiator_side.register_transport_dbg(this, &Noc::transport_dbg);
  if (c.model != "packet") {
    SC_HAS_PROCESS(Noc);
    SC_THREAD(engine);
  }
}

void Noc::attach_initiator(unsigned node) { initiator_nodes_.push_back(node); }

void Noc::attach_target(unsigned node, std::uint64_t base, std::uint64_t size, const std::string& name) {
  targets_.push_back({node, base, size, name});
}

const Noc::Target* Noc::decode(std::uint64_t addr, unsigned& index) const {
  for (unsigned i = 0; i < targets_.size(); ++i)
    if (addr >= targets_[i].base && addr - targets_[i].base < targets_[i].size) {
      index = i;
      return &targets_[i];
    }
  return nullptr;
}

void Noc::engine() {
  for (;;) {
    if (net_->idle()) sc_core::wait(kick_);
    if (!sim::windowed()) {
      net_->run_until(now_cycle());
      if (!net_->idle()) sc_core::wait(clk_->span(sc_core::sc_time::from_value(period_)));
      continue;
    }
    // A system's windowed run: each cycle is stepped at its edge, never
    // before, and a packet offered at an edge enters at the next one
    // (entry_cycle()), so what a cycle carries does not depend on which of
    // the processes at that edge ran first.
    const std::uint64_t begun = next_cycle() - 1;
    net_->run_until(begun);
    if (!net_->idle()) {
      const sc_core::sc_time next = clk_->edge(begun + 1, period_);
      sc_core::wait(next > sc_core::sc_time_stamp() ? next - sc_core::sc_time_stamp() : sc_core::SC_ZERO_TIME);
    }
  }
}

void Noc::carry(unsigned src, unsigned dst, unsigned payload_bytes, unsigned cls, std::uint64_t order) {
  Packet p;
  p.order = order;
  p.id = next_id_++;
  p.src = src;
  p.dst = dst;
  p.cls = cls;
  p.flits = config_.net.flits_for(payload_bytes);
  p.created = entry_cycle();
  // Energy: every flit through every router on its way (hops + 1 of them).
  const sc_core::sc_time start = sc_core::sc_time_stamp();
  struct Charge {
    power::Meter* m;
    double flit_hops;
    sc_core::sc_time start;
    ~Charge() { m->charge(kFlitHop, flit_hops, start, sc_core::sc_time_stamp()); }
  } charge{meter_, double(p.flits) * (Network::hops(config_.net, src, dst) + 1), start};
  if (src == dst) {  // the same node: through the router once
    sc_core::wait(clk_->span(sc_core::sc_time::from_value(period_ * (config_.net.per_hop() + p.flits - 1))));
    return;
  }
  Wait w;
  waiting_[p.id] = &w;
  if (p.created > 0) net_->run_until(p.created - 1);
  net_->offer(p);
  const std::uint64_t at = net_->scheduled_delivery();
  auto step_to = [&](std::uint64_t cycle) {
    const sc_core::sc_time t = clk_->edge(cycle, period_);
    if (t > sc_core::sc_time_stamp()) sc_core::wait(t - sc_core::sc_time_stamp());
    net_->run_until(cycle);
  };
  if (at != ~0ull) {  // packet level: known at once
    waiting_.erase(p.id);
    step_to(at);
    return;
  }
  if (packet_level_) {
    // Held back in its source's backlog (a queue far longer than the
    // network's latency): computed when the queue ahead of it has drained
    // near the present, then delivered.
    while (!w.scheduled && !w.done) step_to(std::max(net_->next_release(), net_->cycle()));
    if (!w.done) step_to(w.delivered);
    return;
  }
  kick_.notify(sc_core::SC_ZERO_TIME);
  while (!w.done) sc_core::wait(w.event);
  // The tail leaves the destination router a few cycles after it won the switch.
  const sc_core::sc_time t = clk_->edge(w.delivered, period_);
  if (t > sc_core::sc_time_stamp()) sc_core::wait(t - sc_core::sc_time_stamp());
}

void Noc::b_transport(int id, tlm::tlm_generic_payload& trans, sc_core::sc_time& delay) {
  sc_core::wait(delay);  // packets enter the network at the initiator's local time
  delay = sc_core::SC_ZERO_TIME;
  const std::uint64_t addr = trans.get_address();
  unsigned index = 0;
  const Target* t = decode(addr, index);
  if (!t) {
    ++errors_;
    log::guest_error(path(), "noc/hole", "{} at {:#x}: no target attached there", trans.is_read() ? "read" : "write", addr);
    trans.set_response_status(tlm::TLM_ADDRESS_ERROR_RESPONSE);
    return;
  }
  ++transactions_;
  const unsigned src = initiator_nodes_.at(static_cast<unsigned>(id)), len = trans.get_data_length();
  // Packets of one instant in address order: the same whichever initiator
  // ran first then (initiators of one node, or answers from one target to
  // several that asked for one address at once: by initiator).
  const std::uint64_t order = addr << 1 | (trans.is_write() ? 1 : 0), who = static_cast<std::uint64_t>(id);
  gate_.pass(std::uint64_t(src) << 56 | order, who);
  carry(src, t->node, trans.is_write() ? len : 0, 0, order);
  trans.set_address(addr - t->base);
  sc_core::sc_time d = sc_core::SC_ZERO_TIME;
  if (target_gates_.size() <= index) target_gates_.resize(index + 1);
  if (!target_gates_[index]) target_gates_[index] = std::make_unique<InstantGate>();
  target_gates_[index]->pass(std::uint64_t(src) << 56 | order, who);
  target_side[index]->b_transport(trans, d);
  trans.set_address(addr);
  sc_core::wait(d);
  if (trans.get_response_status() != tlm::TLM_OK_RESPONSE) ++errors_;
  gate_.pass(std::uint64_t(t->node) << 56 | order, who);
  carry(t->node, src, trans.is_read() ? len : 0, config_.net.classes > 1 ? 1 : 0, order);
}

unsigned Noc::transport_dbg(int, tlm::tlm_generic_payload& trans) {
  const std::uint64_t addr = trans.get_address();
  unsigned index = 0;
  const Target* t = decode(addr, index);
  if (!t) return 0;
  trans.set_address(addr - t->base);
  const unsigned n = target_side[index]->transport_dbg(trans);
  trans.set_address(addr);
  return n;
}

TESSERA_REGISTER_IP("noc", Noc, "network-on-chip: mesh, torus or ring, flit or packet level");

void Noc::report_limits(nlohmann::ordered_json& out) const {
  out["link_bytes_per_s"] = static_cast<double>(config_.net.flit_bytes) * config_.clock.value;  // a flit per cycle
  out["link_flits_per_s"] = config_.clock.value;
}

void Noc::report_stats(nlohmann::ordered_json& out) const {
  out["model"] = config_.model;
  out["transactions"] = transactions_;
  out["errors"] = errors_;
  std::uint64_t flits = 0, credit = 0, alloc = 0;
  for (const RouterStats& r : net_->routers()) flits += r.flits, credit += r.credit_stalls, alloc += r.allocation_stalls;
  out["router_flits"] = flits;
  // Each node's endpoint: flits it sent into the network and took out.
  nlohmann::ordered_json in = nlohmann::ordered_json::array(), out_of = nlohmann::ordered_json::array();
  for (const RouterStats& r : net_->routers()) in.push_back(r.injected_flits), out_of.push_back(r.ejected_flits);
  out["node_injected_flits"] = in;
  out["node_ejected_flits"] = out_of;
  out["credit_stalls"] = credit;
  out["allocation_stalls"] = alloc;
  const double cycles = static_cast<double>(net_->cycle());
  double busiest = 0, total = 0;
  unsigned links = 0;
  const NocConfig& c = net_->config();
  for (unsigned node = 0; node < c.nodes(); ++node)
    for (unsigned port = kEast; port < kPorts; ++port) {
      if (Network::neighbour(c, node, port) < 0) continue;
      const double f = static_cast<double>(net_->links()[node * kPorts + port].flits);
      ++links;
      total += f;
      busiest = std::max(busiest, cycles > 0 ? f / cycles : 0.0);
    }
  out["busiest_link_utilisation"] = busiest;
  // Flits per link per cycle over the links the topology has.
  out["link_utilisation"] = cycles > 0 && links ? total / (cycles * links) : 0.0;
}

}  // namespace tessera::noc
