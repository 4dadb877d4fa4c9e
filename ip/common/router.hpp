// Address router, TLM-2.0 loosely timed. Initiators bind to target_socket,
// targets to initiator_socket. Each target port is mapped at one or more
// address ranges; the router decodes b_transport, transport_dbg and
// get_direct_mem_ptr, hands the target addresses relative to its range,
// translates DMI ranges back (clipped to the range, so a DMI pointer never
// reaches past what the router would decode the same way) and passes
// invalidate_direct_mem_ptr back to every initiator. Holes answer
// TLM_ADDRESS_ERROR_RESPONSE. An overlay range (HTIF's tohost in RAM) wins
// over whatever it covers; any other overlap is a configuration error.
#pragma once

#include <cstdint>
#include <string>
#include <tlm>
#include <tlm_utils/multi_passthrough_initiator_socket.h>
#include <tlm_utils/multi_passthrough_target_socket.h>
#include <vector>

#include "common/config.hpp"
#include "common/ip.hpp"

namespace tessera {

class Router : public Ip {
 public:
  tlm_utils::multi_passthrough_target_socket<Router> target_socket;
  tlm_utils::multi_passthrough_initiator_socket<Router> initiator_socket;

  struct Config {
    sc_core::sc_time latency = sc_core::SC_ZERO_TIME;
    void visit(Params& p) { p("latency", latency, "time added to every routed transaction"); }
    void validate(const Params&) const {}
  };

  // One decoded range: addresses [base, base + size) go to target port
  // `port`, which sees them as [offset, offset + size).
  struct Range {
    std::uint64_t base, size, offset;
    unsigned port;
    std::string name;
    bool overlay;
    std::uint64_t last() const { return base + size - 1; }
  };

  Router(const sc_core::sc_module_name& n, const Config& c);

  // Maps a range to the target bound to initiator_socket[port] (ports are
  // numbered in binding order). Throws ConfigError on an overlap that
  // neither side declares as an overlay. // elaboration-only
  void map(unsigned port, std::uint64_t base, std::uint64_t size, const std::string& name,
           std::uint64_t offset = 0, bool overlay = false);

  // The flat decode table, overlays cut out of what they cover; sorted.
  const std::vector<Range>& decode_table() const { return table_; }
  const std::vector<Range>& ranges() const { return ranges_; }
  // nullptr for a hole.
  const Range* decode(std::uint64_t addr) const;

  void report_stats(nlohmann::ordered_json& out) const override;

 private:
  void b_transport(int id, tlm::tlm_generic_payload& trans, sc_core::sc_time& delay);
  unsigned transport_dbg(int id, tlm::tlm_generic_payload& trans);
  bool get_direct_mem_ptr(int id, tlm::tlm_generic_payload& trans, tlm::tlm_dmi& dmi);
  void invalidate_direct_mem_ptr(int port, sc_dt::uint64 start, sc_dt::uint64 end);
  void rebuild();
  // Decodes trans and makes its address relative; nullptr (and the
  // response set) when it does not fit one range.
  const Range* route(tlm::tlm_generic_payload& trans, bool debug);

  Config config_;
  std::vector<Range> ranges_, table_;
  std::uint64_t routed_ = 0, unmapped_ = 0, dmi_grants_ = 0, invalidations_ = 0;
};

}  // namespace tessera
