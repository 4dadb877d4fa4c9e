#include "host_port/host_port.hpp"

#include "common/log.hpp"
#include "common/registry.hpp"

namespace tessera::host_port {

void HostPort::Config::visit(Params& p) {
  p("bandwidth", bandwidth, "bytes per second in each direction");
  p("latency", latency, "one-way latency of the link");
}

void HostPort::Config::validate(const Params& p) const {
  if (!(bandwidth > 0) || bandwidth > 1e13) p.fail("bandwidth", "must be above zero and at most 10 TB/s");
}

HostPort::HostPort(const sc_core::sc_module_name& n, const Config& c)
    : Ip(n), host_target("host_target"), noc_initiator("noc_initiator"), config_(c) {
  host_target.register_b_transport(this, &HostPort::b_transport);
  host_target.register_transport_dbg(this, &HostPort::transport_dbg);
  expose_target("host_target", host_target, 1);
  expose_initiator("noc_initiator", noc_initiator);
}

void HostPort::b_transport(tlm::tlm_generic_payload& trans, sc_core::sc_time& delay) {
  ++transactions_;
  const unsigned len = trans.get_data_length();
  const sc_core::sc_time wire = sc_core::sc_time(len / config_.bandwidth, sc_core::SC_SEC);
  // A write's data crosses towards the device before it; a read's after it.
  const int dir = trans.is_write() ? 0 : 1;
  const sc_core::sc_time now = sc_core::sc_time_stamp() + delay;
  const sc_core::sc_time request = now + config_.latency;  // the request reaches the chip
  if (trans.is_write()) {
    const sc_core::sc_time start = std::max(now, free_[0]);
    free_[0] = start + wire;
    busy_[0] += wire;
    delay = free_[0] + config_.latency - sc_core::sc_time_stamp();
    bytes_in_ += len;
  } else {
    delay = request - sc_core::sc_time_stamp();
  }
  noc_initiator->b_transport(trans, delay);
  if (trans.is_response_error()) ++errors_;
  if (dir == 1) {
    const sc_core::sc_time ready = sc_core::sc_time_stamp() + delay;
    const sc_core::sc_time start = std::max(ready, free_[1]);
    free_[1] = start + wire;
    busy_[1] += wire;
    delay = free_[1] + config_.latency - sc_core::sc_time_stamp();
    bytes_out_ += len;
  } else {
    delay += config_.latency;  // the completion travels back
  }
}

unsigned HostPort::transport_dbg(tlm::tlm_generic_payload& trans) { return noc_initiator->transport_dbg(trans); }

void HostPort::report_limits(nlohmann::ordered_json& out) const { out["bytes_per_s"] = config_.bandwidth; }

void HostPort::report_stats(nlohmann::ordered_json& out) const {
  out["transactions"] = transactions_;
  out["bytes_to_device"] = bytes_in_;
  out["bytes_to_host"] = bytes_out_;
  out["errors"] = errors_;
  out["busy_to_device_ns"] = busy_[0].to_seconds() * 1e9;
  out["busy_to_host_ns"] = busy_[1].to_seconds() * 1e9;
}

TESSERA_REGISTER_IP("host_port", HostPort, "the host's PCIe-like link into the NoC (bandwidth, latency)");

}  // namespace tessera::host_port
