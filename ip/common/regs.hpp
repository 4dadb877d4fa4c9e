// A register bank built from a generated register description, and the
// MMIO target base that puts one behind a TLM socket.
//
// Plain RW/RO/WO/W1C/W1S registers need no code. A model adds callbacks
// only where a register does something: on_read computes a value (it is
// told when the read is a debug read and must then have no side effect),
// on_write sees the value about to be stored and may change it or reject
// the write. Bad accesses become TLM error responses, never crashes:
//   no register at the offset          TLM_ADDRESS_ERROR_RESPONSE
//   wrong size, misaligned, burst      TLM_BURST_ERROR_RESPONSE
//   byte enables other than all-on     TLM_BYTE_ENABLE_ERROR_RESPONSE
//   read of WO, write of RO, rejected  TLM_COMMAND_ERROR_RESPONSE
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <tlm>
#include <tlm_utils/simple_target_socket.h>
#include <vector>

#include "common/ip.hpp"
#include "common/regs_desc.hpp"

namespace tessera {

class RegisterBank {
 public:
  struct Write {
    unsigned index;        // element of a register array
    std::uint64_t old;     // value before the write
    std::uint64_t data;    // bytes written, in place, others zero
    std::uint64_t mask;    // which bits the access wrote
    std::uint64_t& next;   // value to be stored; the callback may change it
  };
  using ReadFn = std::function<std::uint64_t(unsigned index, bool debug)>;
  using WriteFn = std::function<bool(Write&)>;  // false: reject (command error)

  RegisterBank(std::string path, const RegBlockDesc& desc);

  const RegBlockDesc& desc() const { return desc_; }
  std::uint64_t get(unsigned reg, unsigned index = 0) const { return values_[reg][index]; }
  void set(unsigned reg, std::uint64_t v, unsigned index = 0) { values_[reg][index] = v & desc_.regs[reg].width_mask(); }
  void on_read(unsigned reg, ReadFn f) { reads_[reg] = std::move(f); }
  void on_write(unsigned reg, WriteFn f) { writes_[reg] = std::move(f); }
  // Registers with bank "name" answer only while the selector returns true;
  // unbanked registers at the same offset answer otherwise.
  void set_bank_selector(const std::string& bank, std::function<bool()> f) { selectors_[bank] = std::move(f); }
  // Elements beyond `n` of a register array answer as holes (a PLIC
  // configured with fewer sources than its window allows).
  void limit_count(unsigned reg, unsigned n) { active_[reg] = n; }
  void reset();

  // Handles a whole transaction; returns the response status it set.
  tlm::tlm_response_status access(tlm::tlm_generic_payload& trans, bool debug);
  // transport_dbg: any range, register by register, without side effects.
  unsigned debug_access(tlm::tlm_generic_payload& trans);

  std::uint64_t reads() const { return reads_done_; }
  std::uint64_t writes() const { return writes_done_; }

 private:
  struct Hit {
    unsigned reg, index;
    std::uint64_t byte;  // offset of the access inside the register
  };
  // Finds the register for an access; false if none covers the offset.
  bool decode(std::uint64_t offset, bool is_read, Hit& hit, bool& wrong_direction) const;
  bool bank_active(const RegDesc& r) const;

  std::string path_;
  const RegBlockDesc& desc_;
  std::vector<std::vector<std::uint64_t>> values_;
  std::vector<ReadFn> reads_;
  std::vector<WriteFn> writes_;
  std::vector<unsigned> active_;
  std::map<std::string, std::function<bool()>> selectors_;
  std::uint64_t reads_done_ = 0, writes_done_ = 0;
};

// An IP that is a register bank behind one target socket (csr_target).
// Registers of a part that another description includes (reggen
// "include"): an engine's command registers in the tile's window. The
// part's own table (regs::<part>) names them; the including block's bank
// holds their values. Matched by offset and name when made.
class IncludedRegs {
 public:
  IncludedRegs(const RegisterBank& bank, const RegBlockDesc& part);
  std::uint64_t get(unsigned part_reg) const { return bank_.get(map_[part_reg]); }
  const RegBlockDesc& part() const { return part_; }
  // The value of field `name` of register `part_reg` (an internal error if it has none).
  std::uint64_t field(unsigned part_reg, const char* name) const;

 private:
  const RegisterBank& bank_;
  const RegBlockDesc& part_;
  std::vector<unsigned> map_;
};

class MmioTarget : public Ip {
 public:
  tlm_utils::simple_target_socket<MmioTarget> csr_target;

  MmioTarget(const sc_core::sc_module_name& n, const RegBlockDesc& desc, sc_core::sc_time latency = sc_core::SC_ZERO_TIME);

  void report_stats(nlohmann::ordered_json& out) const override;

  // What csr_target does, for a block's own initiators inside its IP (a
  // tile core reaching its tile's registers without crossing the NoC).
  void b_transport(tlm::tlm_generic_payload& trans, sc_core::sc_time& delay);
  unsigned transport_dbg(tlm::tlm_generic_payload& trans);

 protected:
  // The initiator's local time during a b_transport (from a thread,
  // b_transport has brought simulation time there first).
  sc_core::sc_time now() const { return sc_core::sc_time_stamp() + delay_; }

  RegisterBank regs_;

 private:
  sc_core::sc_time latency_;
  sc_core::sc_time delay_ = sc_core::SC_ZERO_TIME;
};

}  // namespace tessera
