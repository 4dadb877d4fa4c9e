#include "common/router.hpp"

#include <algorithm>

#include "common/log.hpp"
#include "common/units.hpp"

namespace tessera {

Router::Router(const sc_core::sc_module_name& n, const Config& c)
    : Ip(n), target_socket("target_socket"), initiator_socket("initiator_socket"), config_(c) {
  target_socket.register_b_transport(this, &Router::b_transport);
  target_socket.register_transport_dbg(this, &Router::transport_dbg);
  target_socket.register_get_direct_mem_ptr(this, &Router::get_direct_mem_ptr);
  initiator_socket.register_invalidate_direct_mem_ptr(this, &Router::invalidate_direct_mem_ptr);
}

void Router::map(unsigned port, std::uint64_t base, std::uint64_t size, const std::string& name,
                 std::uint64_t offset, bool overlay) {
  if (size == 0) throw ConfigError(name + ": size 0 cannot be mapped");  // elaboration-only
  if (base + (size - 1) < base) throw ConfigError(name + ": range wraps around the address space");
  Range r{base, size, offset, port, name, overlay};
  for (const Range& o : ranges_) {
    bool overlap = r.base <= o.last() && o.base <= r.last();
    if (overlap && r.overlay == o.overlay)
      throw ConfigError(fmt::format("{} [{:#x}, {:#x}] overlaps {} [{:#x}, {:#x}]", name, r.base, r.last(), o.name,
                                    o.base, o.last()));  // elaboration-only
  }
  ranges_.push_back(r);
  rebuild();
}

void Router::rebuild() {
  // Start from the plain ranges, then punch each overlay into them.
  table_.clear();
  for (const Range& r : ranges_)
    if (!r.overlay) table_.push_back(r);
  for (const Range& ov : ranges_) {
    if (!ov.overlay) continue;
    std::vector<Range> next;
    for (const Range& r : table_) {
      if (ov.base > r.last() || r.base > ov.last()) {
        next.push_back(r);
        continue;
      }
      if (r.base < ov.base) {
        Range left = r;
        left.size = ov.base - r.base;
        next.push_back(left);
      }
      if (r.last() > ov.last()) {
        Range right = r;
        right.base = ov.last() + 1;
        right.offset = r.offset + (right.base - r.base);
        right.size = r.last() - ov.last();
        next.push_back(right);
      }
    }
    next.push_back(ov);
    table_ = std::move(next);
  }
  std::sort(table_.begin(), table_.end(), [](const Range& a, const Range& b) { return a.base < b.base; });
}

const Router::Range* Router::decode(std::uint64_t addr) const {
  auto it = std::upper_bound(table_.begin(), table_.end(), addr,
                             [](std::uint64_t a, const Range& r) { return a < r.base; });
  if (it == table_.begin()) return nullptr;
  --it;
  return addr <= it->last() ? &*it : nullptr;
}

const Router::Range* Router::route(tlm::tlm_generic_payload& trans, bool debug) {
  const std::uint64_t addr = trans.get_address();
  const std::uint64_t len = std::max<std::uint64_t>(trans.get_data_length(), 1);
  const Range* r = decode(addr);
  // The whole access must fall into one range (streaming accesses only
  // need their streaming window to).
  std::uint64_t span = std::min<std::uint64_t>(len, std::max<unsigned>(trans.get_streaming_width(), 1));
  if (!r || addr + (span - 1) > r->last()) {
    if (!debug) {
      ++unmapped_;
      log::guest_error(path(), "router/hole", "{} of {} bytes at {:#x}: {}", trans.is_read() ? "read" : "write", len,
                       addr, r ? "crosses the end of " + r->name : std::string("no target there"));
    }
    trans.set_response_status(tlm::TLM_ADDRESS_ERROR_RESPONSE);
    return nullptr;
  }
  trans.set_address(addr - r->base + r->offset);
  return r;
}

void Router::b_transport(int, tlm::tlm_generic_payload& trans, sc_core::sc_time& delay) {
  const std::uint64_t addr = trans.get_address();
  const Range* r = route(trans, false);
  if (!r) return;
  ++routed_;
  delay += config_.latency;
  initiator_socket[r->port]->b_transport(trans, delay);
  trans.set_address(addr);
}

unsigned Router::transport_dbg(int, tlm::tlm_generic_payload& trans) {
  const std::uint64_t addr = trans.get_address();
  const Range* r = decode(addr);
  if (!r) {
    trans.set_response_status(tlm::TLM_ADDRESS_ERROR_RESPONSE);
    return 0;
  }
  // A debug access may be cut at the end of the range: the caller gets
  // back how many bytes were done and continues from there.
  const unsigned len = trans.get_data_length();
  const unsigned fit = static_cast<unsigned>(std::min<std::uint64_t>(len, r->last() - addr + 1));
  trans.set_address(addr - r->base + r->offset);
  trans.set_data_length(fit);
  unsigned done = initiator_socket[r->port]->transport_dbg(trans);
  trans.set_data_length(len);
  trans.set_address(addr);
  return done;
}

bool Router::get_direct_mem_ptr(int, tlm::tlm_generic_payload& trans, tlm::tlm_dmi& dmi) {
  const std::uint64_t addr = trans.get_address();
  const Range* r = decode(addr);
  if (!r) {
    // Deny for exactly the hole around the address.
    std::uint64_t lo = 0, hi = ~0ull;
    for (const Range& t : table_) {
      if (t.last() < addr) lo = t.last() + 1;
      else if (t.base > addr) {
        hi = t.base - 1;
        break;
      }
    }
    dmi.set_start_address(lo);
    dmi.set_end_address(hi);
    return false;
  }
  trans.set_address(addr - r->base + r->offset);
  bool ok = initiator_socket[r->port]->get_direct_mem_ptr(trans, dmi);
  trans.set_address(addr);
  // Target-relative [start, end] back to global, clipped to this range.
  const std::uint64_t lo = r->offset, hi = r->offset + (r->size - 1);
  std::uint64_t start = std::max<std::uint64_t>(dmi.get_start_address(), lo);
  std::uint64_t end = std::min<std::uint64_t>(dmi.get_end_address(), hi);
  if (ok) {
    dmi.set_dmi_ptr(dmi.get_dmi_ptr() + (start - dmi.get_start_address()));
    ++dmi_grants_;
  }
  dmi.set_start_address(start - r->offset + r->base);
  dmi.set_end_address(end - r->offset + r->base);
  return ok;
}

void Router::invalidate_direct_mem_ptr(int port, sc_dt::uint64 start, sc_dt::uint64 end) {
  ++invalidations_;
  for (const Range& r : table_) {
    if (r.port != static_cast<unsigned>(port)) continue;
    const std::uint64_t lo = std::max<std::uint64_t>(start, r.offset);
    const std::uint64_t hi = std::min<std::uint64_t>(end, r.offset + (r.size - 1));
    if (lo > hi) continue;
    for (unsigned i = 0; i < target_socket.size(); ++i)
      target_socket[i]->invalidate_direct_mem_ptr(lo - r.offset + r.base, hi - r.offset + r.base);
  }
}

void Router::report_stats(nlohmann::ordered_json& out) const {
  out["routed"] = routed_;
  out["unmapped_accesses"] = unmapped_;
  out["dmi_grants"] = dmi_grants_;
  out["dmi_invalidations"] = invalidations_;
}

}  // namespace tessera
