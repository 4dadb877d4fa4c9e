// The network-on-chip as a TLM-2.0 interconnect: initiators bind to
// `initiator_side` and targets to `target_side` (in the order they are
// attached to their mesh nodes); a b_transport becomes a request packet
// (header, plus the data for a write) from the initiator's node to the
// target's, the target's b_transport at the far end, and a response packet
// (header, plus the data for a read) back. The target's response status
// travels back unchanged, so an address error at the far end reaches the
// initiator. Requests and responses use separate message classes.
// Timing: the flit-level model runs cycle by cycle at `clock` while
// packets are in flight (a SystemC thread that sleeps when the network is
// empty); the packet-level model computes each packet's delivery at once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <tlm_utils/multi_passthrough_initiator_socket.h>
#include <tlm_utils/multi_passthrough_target_socket.h>
#include <unordered_map>
#include <vector>

#include "common/config.hpp"
#include "common/instant_gate.hpp"
#include "common/sim.hpp"
#include "common/ip.hpp"
#include "common/power.hpp"
#include "common/units.hpp"
#include "noc/noc.hpp"

namespace tessera::noc {

class Noc : public Ip {
 public:
  tlm_utils::multi_passthrough_target_socket<Noc, 32, tlm::tlm_base_protocol_types, 0, sc_core::SC_ZERO_OR_MORE_BOUND>
      initiator_side;
  tlm_utils::multi_passthrough_initiator_socket<Noc, 32, tlm::tlm_base_protocol_types, 0, sc_core::SC_ZERO_OR_MORE_BOUND>
      target_side;

  struct Config {
    NocConfig net;
    std::string model = "flit";  // flit, packet
    Hertz clock{2e9};
    unsigned bus_node = 0;        // where the platform's system bus (the CP) attaches
    Config() { net.classes = 2; }
    void visit(Params& p);
    void validate(const Params& p) const;
  };

  Noc(const sc_core::sc_module_name& n, const Config& c);

  // Attach in binding order. Elaboration only.
  void attach_initiator(unsigned node);
  void attach_target(unsigned node, std::uint64_t base, std::uint64_t size, const std::string& name);

  Network& network() { return *net_; }
  const Config& config() const { return config_; }
  void report_stats(nlohmann::ordered_json& out) const override;
  void report_limits(nlohmann::ordered_json& out) const override;

 private:
  struct Target {
    unsigned node;
    std::uint64_t base, size;
    std::string name;
  };
  struct Wait {
    sc_core::sc_event event;
    bool done = false, scheduled = false;
    std::uint64_t delivered = 0;
  };
  void b_transport(int id, tlm::tlm_generic_payload& trans, sc_core::sc_time& delay);
  unsigned transport_dbg(int id, tlm::tlm_generic_payload& trans);
  // Sends a packet now and returns once its tail has left the destination router.
  void carry(unsigned src, unsigned dst, unsigned payload_bytes, unsigned cls, std::uint64_t order);
  const Target* decode(std::uint64_t addr, unsigned& index) const;
  void engine();
  std::uint64_t now_cycle() const { return clk_->cycle(sc_core::sc_time_stamp(), period_); }
  // The first cycle that begins after now. In a system's windowed run
  // (sim::windowed()) a packet offered now enters the network then,
  // whether or not the network has already stepped the cycle that begins
  // now: processes that run at the same instant run in an order SystemC
  // leaves open, and it differs when the chips are spread over processes.
  // A chip alone keeps the zero-load latency from the cycle at or after now.
  std::uint64_t next_cycle() const { return clk_->nominal(sc_core::sc_time_stamp()) / period_ + 1; }
  std::uint64_t entry_cycle() const { return sim::windowed() ? next_cycle() : now_cycle(); }

  Config config_;
  bool packet_level_ = config_.model == "packet";  // after config_, which it reads
  std::unique_ptr<Network> net_;
  std::uint64_t period_;
  // Transactions of one instant enter the network, and reach each target,
  // in address order (instant_gate.hpp).
  InstantGate gate_;
  std::vector<std::unique_ptr<InstantGate>> target_gates_;
  std::vector<unsigned> initiator_nodes_;
  std::vector<Target> targets_;
  std::unordered_map<std::uint64_t, Wait*> waiting_;
  std::uint64_t next_id_ = 0;
  sc_core::sc_event kick_;
  std::uint64_t transactions_ = 0, errors_ = 0;
  power::Meter* meter_ = &power::meter(name());
  power::Clock* clk_ = &meter_->clock(power::kNoc);  // DVFS: the NoC domain
};

}  // namespace tessera::noc
