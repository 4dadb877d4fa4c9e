// The chip-to-chip fabric: a chip's SerDes link ports and the switch that
// routes between them. Attached to the chip's NoC, it answers the global
// window: chip c's own addresses seen from anywhere in the system are
//
//   kGlobalBase + (c << kChipShift) + local address      (c < 64)
//
// An access that arrives from the NoC (offset = chip << 40 | local) goes,
// when the chip is this one, back into the NoC with the local address
// (loopback); otherwise out of the port the routing table names for that
// chip, as a request message over the link (a header, plus the data of a
// write) to the next chip's fabric, which does the same: into its NoC, or
// on to the next link. The response (a header, plus the data of a read)
// comes back the same way, hop by hop: each hop is a timed message
// (cut.hpp) that the next fabric serves when its last FLIT arrives, so a
// chip's fabric never calls into another chip, and the chips of a system
// can live in different processes. Each hop's messages really are cut
// into FLITs with CRC-32, checked and replayed (link.hpp), so injected
// errors test that the data survives. Forwarding chips do not cross their
// NoC (store and forward in the fabric's switch). Every message pays
// `switch_latency` each time it enters a fabric, from the NoC or a link.
//
// The system builder (platform/system.hpp) gives each fabric its chip
// number, connects ports and fills the routing tables; a chip alone is
// chip 0 of 1 and only loops back.
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <tlm_utils/simple_initiator_socket.h>
#include <tlm_utils/simple_target_socket.h>
#include <vector>

#include "common/config.hpp"
#include "common/instant_gate.hpp"
#include "common/power.hpp"
#include "common/waves.hpp"
#include "common/regs.hpp"
#include "c2c/comm.hpp"
#include "c2c/cut.hpp"
#include "c2c/link.hpp"

namespace tessera::c2c {

// The default global window (platform/t1.json's c2c instance). A fabric
// derives its own from its instance: base, and size = kMaxChips << shift.
inline constexpr std::uint64_t kGlobalBase = 0x1000'0000'0000ull;
inline constexpr unsigned kChipShift = 40;
inline constexpr unsigned kMaxPorts = 8;
// Chip `chip`'s `local` address in a global window at `base`, each chip's
// share 1 << `shift` bytes (the default window without them).
inline constexpr std::uint64_t global_address(unsigned chip, std::uint64_t local, std::uint64_t base = kGlobalBase,
                                              unsigned shift = kChipShift) {
  return base + (static_cast<std::uint64_t>(chip) << shift) + local;
}

class C2c : public Ip {
 public:
  struct Config {
    unsigned ports = 4;
    LinkConfig link;
    sc_core::sc_time switch_latency{10, sc_core::SC_NS};
    // Faults at given times, "port:lane3@10us, port:down@2us": a lane fails
    // or the link drops, then retrains. "port:flit123": the 124th FLIT
    // transmission out of that port is corrupted.
    std::string faults;
    CommConfig comm;
    bool rtl = false;  // "impl": "rtl": each link's layer (framing, CRC, replay) is the RTL (ip/c2c/rtl)
    std::uint64_t global_base = kGlobalBase;  // the instance's base
    unsigned chip_shift = kChipShift;         // log2 of each chip's share of the window (its size / kMaxChips)
    void visit(Params& p);
    void validate(const Params& p) const;
    std::vector<Fact> facts() const {
      return {{"GLOBAL_BASE", global_base, "the global window: every chip's memory, from every chip"},
              {"CHIP_SHIFT", chip_shift, "chip k's memory is at GLOBAL_BASE + (k << CHIP_SHIFT) + local"},
              {"MAX_CHIPS", kMaxChips, "chips the global window holds"}};
    }
    // Chip `chip`'s `local` address as every chip sees it.
    std::uint64_t global_address(unsigned chip, std::uint64_t local) const {
      return c2c::global_address(chip, local, global_base, chip_shift);
    }
  };

  tlm_utils::simple_target_socket<C2c> noc_target;        // the global window, from this chip's NoC
  tlm_utils::simple_initiator_socket<C2c> noc_initiator;  // into this chip's NoC
  IrqOut irq_out;

  C2c(const sc_core::sc_module_name& n, const Config& c);
  ~C2c() override;

  // System wiring, elaboration only.
  void set_identity(unsigned chip, unsigned chips);
  // Joins port `port` to `peer`'s port `peer_port` (both ends; one call).
  void connect(unsigned port, C2c& peer, unsigned peer_port);
  // Joins port `port` to port `peer_port` of chip `peer_chip`, which lives
  // in another process (its fabric's configuration `peer_config`); that
  // process joins the other end the same way.
  void connect_remote(unsigned port, unsigned peer_chip, unsigned peer_port, const Config& peer_config);
  // Where messages for other chips go (the system's; none: to the peers directly).
  void set_cut(Cut* cut) { cut_ = cut; }
  // A message for this fabric, served when it arrives (Cut::post, Cut::deliver).
  void receive(Message&& m);
  void set_route(unsigned chip, unsigned port);
  int route_of(unsigned chip) const { return chip < routes_.size() ? routes_[chip] : -1; }

  unsigned chip() const { return chip_; }
  unsigned chips() const { return chips_; }
  const Config& config() const { return config_; }
  // Per port: each direction's counters (nullptr when unconnected; the
  // incoming ones count what has arrived), and the link's state.
  const ChannelStats* tx_stats(unsigned port) const;
  const ChannelStats* rx_stats(unsigned port) const;
  const LinkState* link_state(unsigned port) const;
  // Fault injection now (also through PORT_CTRL and PORT_INJECT).
  void fail_lane(unsigned port, unsigned lane, sc_core::sc_time at);
  void link_down(unsigned port, sc_core::sc_time at);
  void inject_error(unsigned port, std::uint64_t attempt);

  CommEngine& comm() { return *ce_; }
  void report_stats(nlohmann::ordered_json& out) const override;
  void report_limits(nlohmann::ordered_json& out) const override;

 private:
  friend class CommEngine;
  class Regs;
  struct Port {
    bool connected = false;
    C2c* peer = nullptr;  // in this process; nullptr when the peer lives in another
    unsigned peer_chip = 0, peer_port = 0;
    ChannelStats rx;      // what has arrived
    std::shared_ptr<LinkState> state;
    std::unique_ptr<Channel> tx;
    unsigned last_state = 0;
    waves::Id w_state = waves::kNone, w_width = waves::kNone;  // links group
  };
  std::vector<std::unique_ptr<LinkLayerRtl>> rtl_links_;  // "impl": "rtl": this side's transmitters
  void b_transport(tlm::tlm_generic_payload& trans, sc_core::sc_time& delay);
  unsigned transport_dbg(tlm::tlm_generic_payload& trans);
  // Carries `trans` towards chip `dest` (local address `local`) from this fabric.
  void route(tlm::tlm_generic_payload& trans, unsigned dest, std::uint64_t local, sc_core::sc_time& delay);
  // Messages: out to the peer of a port, served when they arrive.
  void post(const Port& via, Message&& m);
  void serve_inbox();                 // the inbox's thread: responses to their requesters, requests to workers
  struct Worker {
    sc_core::sc_event go;
    Message msg;
  };
  void work(Worker* w);               // a worker's thread: serves one request after another
  void serve_request(Message& m);     // the far side of a request: into this chip, or on to the next
  void fault(unsigned port, std::uint64_t lane, sc_core::sc_time at, sc_core::sc_time retrain, bool tell_peer);
  unsigned route_dbg(tlm::tlm_generic_payload& trans, unsigned dest, std::uint64_t local, unsigned hops);
  void schedule_changes(unsigned port, sc_core::sc_time start, sc_core::sc_time end);
  void start_of_simulation() override;
  void on_change();
  static std::unique_ptr<LinkLayerRtl> make_link_rtl(const std::string& name, const sc_core::sc_time& beat, const std::string& fst);
  void update_irq();
  unsigned port_state(unsigned p) const;
  void charge_link(const Port& p, std::uint64_t attempts_before, const sc_core::sc_time& start,
                   const sc_core::sc_time& end);

  Config config_;
  unsigned chip_ = 0, chips_ = 1;
  std::vector<Port> ports_;
  std::vector<int> routes_;
  std::vector<std::pair<unsigned, std::uint64_t>> pending_errors_;  // from "faults", applied on connection
  std::unique_ptr<Regs> regs_;
  std::unique_ptr<CommEngine> ce_;
  power::Meter* meter_ = &power::meter(name());
  sc_core::sc_event_queue changes_;
  std::uint64_t local_ = 0, remote_ = 0, forwarded_ = 0, incoming_ = 0, no_route_ = 0, link_errors_ = 0;
  Cut* cut_ = nullptr;
  struct MessageLater {  // the inbox's order: a min-heap on Message::operator<
    bool operator()(const Message& a, const Message& b) const { return b < a; }
  };
  std::vector<Message> inbox_;  // a heap (MessageLater)
  sc_core::sc_event inbox_event_;
  struct Pending {  // a request waiting for its response
    sc_core::sc_event event;
    bool done = false, lost = false;
    unsigned status = 0;
    std::vector<std::uint8_t> data;
  };
  std::map<std::uint64_t, Pending> pending_;  // by tag
  std::deque<Worker> workers_;
  std::vector<Worker*> idle_workers_;
  std::uint64_t next_tag_ = 0, next_seq_ = 0;
  // Workers of one instant go into the NoC, and send their responses, in
  // the order their requests arrived (sending chip, its sequence), not in
  // the order SystemC ran them (instant_gate.hpp).
  InstantGate gate_;
};

}  // namespace tessera::c2c
