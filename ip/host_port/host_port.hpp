// The host port: the chip's PCIe-like link to the host, attached to the
// NoC at a node. The host runtime's accesses to device memory come in on
// `host_target` (not mapped on the chip; reachable through
// Platform::target) and go out on `noc_initiator` with the global address
// unchanged. Timing: each access occupies the link for bytes / `bandwidth`
// in its direction (reads and writes apart, as a full-duplex link), after
// the ones before it, plus `latency` each way; the NoC and the target add
// theirs. Several accesses in flight (the runtime keeps up to 32) share the
// link's bandwidth.
#pragma once

#include <tlm_utils/simple_initiator_socket.h>
#include <tlm_utils/simple_target_socket.h>

#include "common/config.hpp"
#include "common/ip.hpp"
#include "common/units.hpp"

namespace tessera::host_port {

class HostPort : public Ip {
 public:
  struct Config {
    double bandwidth = 64e9;  // bytes per second each way (PCIe 5.0 x16)
    sc_core::sc_time latency = sc_core::sc_time(500, sc_core::SC_NS);
    void visit(Params& p);
    void validate(const Params& p) const;
  };

  tlm_utils::simple_target_socket<HostPort> host_target;
  tlm_utils::simple_initiator_socket<HostPort> noc_initiator;

  HostPort(const sc_core::sc_module_name& n, const Config& c);
  void report_stats(nlohmann::ordered_json& out) const override;
  void report_limits(nlohmann::ordered_json& out) const override;

 private:
  void b_transport(tlm::tlm_generic_payload& trans, sc_core::sc_time& delay);
  unsigned transport_dbg(tlm::tlm_generic_payload& trans);

  Config config_;
  sc_core::sc_time free_[2];  // when each direction of the link is free (0: to the device, 1: to the host)
  std::uint64_t transactions_ = 0, bytes_in_ = 0, bytes_out_ = 0, errors_ = 0;
  sc_core::sc_time busy_[2];
};

}  // namespace tessera::host_port
