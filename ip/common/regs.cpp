#include "common/regs.hpp"

#include <cstring>

#include "common/log.hpp"

namespace tessera {

RegisterBank::RegisterBank(std::string path, const RegBlockDesc& desc)
    : path_(std::move(path)), desc_(desc), values_(desc.num_regs), reads_(desc.num_regs),
      writes_(desc.num_regs), active_(desc.num_regs) {
  for (unsigned r = 0; r < desc.num_regs; ++r) {
    values_[r].assign(desc.regs[r].count, 0);
    active_[r] = desc.regs[r].count;
  }
  reset();
}

void RegisterBank::reset() {
  for (unsigned r = 0; r < desc_.num_regs; ++r)
    for (auto& v : values_[r]) v = desc_.regs[r].reset;
}

bool RegisterBank::bank_active(const RegDesc& r) const {
  auto it = selectors_.find(r.bank);
  return it != selectors_.end() && it->second();
}

bool RegisterBank::decode(std::uint64_t offset, bool is_read, Hit& hit, bool& wrong_direction) const {
  // A banked register beats an unbanked one at the same offset while its
  // bank is selected; a register of the access's direction beats one that
  // only covers the other direction.
  bool found = false, found_banked = false;
  wrong_direction = false;
  for (unsigned r = 0; r < desc_.num_regs; ++r) {
    const RegDesc& d = desc_.regs[r];
    if (offset < d.offset) continue;
    std::uint64_t rel = offset - d.offset;
    std::uint64_t index = d.count > 1 ? rel / d.stride : 0;
    std::uint64_t byte = d.count > 1 ? rel % d.stride : rel;
    if (index >= active_[r] || byte >= d.size) continue;
    bool banked = d.bank[0] != '\0';
    if (banked && !bank_active(d)) continue;
    bool right_way = is_read ? readable(d.access) : writable(d.access);
    if (!right_way) {
      if (!found) wrong_direction = true;
      continue;
    }
    if (found && (found_banked || !banked)) continue;
    hit = Hit{r, static_cast<unsigned>(index), byte};
    found = true;
    found_banked = banked;
    wrong_direction = false;
  }
  return found;
}

unsigned RegisterBank::debug_access(tlm::tlm_generic_payload& trans) {
  // Byte by byte over whatever registers the range covers (loaders write
  // whole sections, debuggers read memory windows): bytes of holes read as
  // zero and ignore writes; a range with no register at all is refused.
  // No side effects.
  const std::uint64_t addr = trans.get_address();
  unsigned char* data = trans.get_data_ptr();
  unsigned hits = 0;
  for (unsigned i = 0; i < trans.get_data_length(); ++i) {
    Hit hit{};
    bool wrong = false;
    if (!decode(addr + i, trans.is_read(), hit, wrong)) {
      if (trans.is_read()) data[i] = 0;
      continue;
    }
    ++hits;
    const RegDesc& d = desc_.regs[hit.reg];
    std::uint64_t& stored = values_[hit.reg][hit.index];
    const unsigned shift = static_cast<unsigned>(hit.byte * 8);
    if (trans.is_read()) {
      const std::uint64_t v = reads_[hit.reg] ? reads_[hit.reg](hit.index, true) & d.width_mask() : stored;
      data[i] = static_cast<unsigned char>(v >> shift);
    } else {
      stored = (stored & ~(0xffull << shift)) | (static_cast<std::uint64_t>(data[i]) << shift);
    }
  }
  if (hits == 0) {  // nothing there at all
    trans.set_response_status(tlm::TLM_ADDRESS_ERROR_RESPONSE);
    return 0;
  }
  trans.set_response_status(tlm::TLM_OK_RESPONSE);
  return trans.get_data_length();
}

tlm::tlm_response_status RegisterBank::access(tlm::tlm_generic_payload& trans, bool debug) {
  auto respond = [&](tlm::tlm_response_status s) {
    trans.set_response_status(s);
    return s;
  };
  const std::uint64_t addr = trans.get_address();
  const unsigned len = trans.get_data_length();
  const bool is_read = trans.is_read();
  if (!is_read && !trans.is_write()) return respond(tlm::TLM_OK_RESPONSE);  // IGNORE command

  Hit hit{};
  bool wrong_direction = false;
  if (!decode(addr, is_read, hit, wrong_direction)) {
    if (wrong_direction) {
      if (!debug)
        log::guest_error(path_, "regs/direction", "{} of {}-only register at offset {:#x}", is_read ? "read" : "write",
                         is_read ? "write" : "read", addr);
      return respond(tlm::TLM_COMMAND_ERROR_RESPONSE);
    }
    if (!debug) log::guest_error(path_, "regs/hole", "{} at offset {:#x}: no register there", is_read ? "read" : "write", addr);
    return respond(tlm::TLM_ADDRESS_ERROR_RESPONSE);
  }
  const RegDesc& d = desc_.regs[hit.reg];

  if (trans.get_byte_enable_ptr()) {
    const unsigned char* be = trans.get_byte_enable_ptr();
    unsigned be_len = trans.get_byte_enable_length();
    for (unsigned i = 0; i < len; ++i)
      if (be_len == 0 || be[i % be_len] != TLM_BYTE_ENABLED) {
        if (!debug) log::guest_error(path_, "regs/be", "byte enables on register {} are not supported", d.name);
        return respond(tlm::TLM_BYTE_ENABLE_ERROR_RESPONSE);
      }
  }
  bool size_ok = len >= d.min_access && len <= d.size && (len & (len - 1)) == 0 && hit.byte % len == 0 &&
                 trans.get_streaming_width() >= len;
  if (!size_ok && !debug) {
    log::guest_error(path_, "regs/size", "{}-byte {} of register {} at offset {:#x} (it takes {} to {} bytes, aligned)",
                     len, is_read ? "read" : "write", d.name, addr, d.min_access, d.size);
    return respond(tlm::TLM_BURST_ERROR_RESPONSE);
  }
  // Debug accesses may cover any part of one register.
  if (debug && (len == 0 || hit.byte + len > d.size)) return respond(tlm::TLM_BURST_ERROR_RESPONSE);

  const unsigned shift = static_cast<unsigned>(hit.byte * 8);
  const std::uint64_t access_mask = (len >= 8 ? ~0ull : ((1ull << (len * 8)) - 1)) << shift;
  std::uint64_t& stored = values_[hit.reg][hit.index];
  unsigned char* data = trans.get_data_ptr();

  if (is_read) {
    std::uint64_t v = reads_[hit.reg] ? reads_[hit.reg](hit.index, debug) & d.width_mask() : stored;
    std::uint64_t part = v >> shift;
    std::memcpy(data, &part, len);  // little-endian host, as the guest
    if (!debug) ++reads_done_;
    return respond(tlm::TLM_OK_RESPONSE);
  }

  std::uint64_t raw = 0;
  std::memcpy(&raw, data, len);
  const std::uint64_t written = (raw << shift) & access_mask;
  if (debug) {  // a loader or debugger sets the raw value, no side effects
    stored = (stored & ~access_mask) | written;
    return respond(tlm::TLM_OK_RESPONSE);
  }
  std::uint64_t next = stored;
  const std::uint64_t rw = d.mask_of(Access::RW) | d.mask_of(Access::WO);
  next = (next & ~(rw & access_mask)) | (written & rw);
  next &= ~(written & d.mask_of(Access::W1C));
  next |= written & d.mask_of(Access::W1S);
  Write w{hit.index, stored, written, access_mask, next};
  if (writes_[hit.reg] && !writes_[hit.reg](w)) {
    log::guest_error(path_, "regs/rejected", "write of {:#x} to register {} rejected", written >> shift, d.name);
    return respond(tlm::TLM_COMMAND_ERROR_RESPONSE);
  }
  stored = next & d.width_mask();
  ++writes_done_;
  return respond(tlm::TLM_OK_RESPONSE);
}

MmioTarget::MmioTarget(const sc_core::sc_module_name& n, const RegBlockDesc& desc, sc_core::sc_time latency)
    : Ip(n), csr_target("csr_target"), regs_(name(), desc), latency_(latency) {
  csr_target.register_b_transport(this, &MmioTarget::b_transport);
  csr_target.register_transport_dbg(this, &MmioTarget::transport_dbg);
  expose_target("csr_target", csr_target, desc.window);
}

void MmioTarget::b_transport(tlm::tlm_generic_payload& trans, sc_core::sc_time& delay) {
  // A register acts at the initiator's local time: a write that starts an
  // engine starts it then, and a read sees the state of then, not of
  // wherever simulation time has got to (which depends on how far a
  // temporally decoupled initiator ran ahead, and so on every other event).
  // (Called from outside a thread, as a test may, the access is at the
  // annotated time without waiting for it: now() tells it.)
  if (delay != sc_core::SC_ZERO_TIME && sc_core::sc_get_current_process_handle().proc_kind() == sc_core::SC_THREAD_PROC_) {
    sc_core::wait(delay);
    delay = sc_core::SC_ZERO_TIME;
  }
  delay_ = delay;
  regs_.access(trans, false);
  delay_ = sc_core::SC_ZERO_TIME;
  delay += latency_;
}

unsigned MmioTarget::transport_dbg(tlm::tlm_generic_payload& trans) { return regs_.debug_access(trans); }

void MmioTarget::report_stats(nlohmann::ordered_json& out) const {
  out["register_reads"] = regs_.reads();
  out["register_writes"] = regs_.writes();
}

IncludedRegs::IncludedRegs(const RegisterBank& bank, const RegBlockDesc& part) : bank_(bank), part_(part) {
  const RegBlockDesc& all = bank.desc();
  for (std::uint32_t i = 0; i < part.num_regs; ++i) {
    std::uint32_t k = 0;
    while (k < all.num_regs && !(all.regs[k].offset == part.regs[i].offset && std::strcmp(all.regs[k].name, part.regs[i].name) == 0))
      ++k;
    if (k == all.num_regs)  // elaboration-only
      log::internal(part.name, "register {} is not in block {} (its description must include {}'s)", part.regs[i].name,
                    all.name, part.name);
    map_.push_back(k);
  }
}

std::uint64_t IncludedRegs::field(unsigned part_reg, const char* name) const {
  const RegDesc& r = part_.regs[part_reg];
  for (std::uint32_t f = 0; f < r.num_fields; ++f)
    if (std::strcmp(r.fields[f].name, name) == 0) return (get(part_reg) & r.fields[f].mask()) >> r.fields[f].lsb;
  log::internal(part_.name, "register {} has no field {}", r.name, name);
}

}  // namespace tessera
