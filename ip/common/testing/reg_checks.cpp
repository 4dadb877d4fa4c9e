#include "common/testing/reg_checks.hpp"

#include "common/payload.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

namespace tessera::testing {

void expect_c_view_matches(const RegBlockDesc& desc, const tessera_reg_cview* regs, const tessera_field_cview* fields,
                           const tessera_value_cview* values) {
  unsigned n = 0;
  for (; regs[n].name; ++n) {
    ASSERT_LT(n, desc.num_regs) << "the C header has more registers than the C++ table";
    const RegDesc& d = desc.regs[n];
    EXPECT_STREQ(regs[n].name, d.name);
    EXPECT_EQ(regs[n].offset, d.offset) << d.name;
    EXPECT_EQ(regs[n].size, d.size) << d.name;
    EXPECT_EQ(regs[n].count, d.count) << d.name;
    if (d.count > 1) EXPECT_EQ(regs[n].stride, d.stride) << d.name;
    EXPECT_EQ(regs[n].reset, d.reset) << d.name;
  }
  EXPECT_EQ(n, desc.num_regs);
  unsigned f = 0;
  for (unsigned r = 0; r < desc.num_regs; ++r)
    for (unsigned i = 0; i < desc.regs[r].num_fields; ++i, ++f) {
      ASSERT_TRUE(fields[f].name) << "the C header lacks field " << desc.regs[r].fields[i].name;
      EXPECT_STREQ(fields[f].reg, desc.regs[r].name);
      EXPECT_STREQ(fields[f].name, desc.regs[r].fields[i].name);
      EXPECT_EQ(fields[f].shift, desc.regs[r].fields[i].lsb);
      EXPECT_EQ(fields[f].mask, desc.regs[r].fields[i].mask());
    }
  EXPECT_EQ(fields[f].name, nullptr) << "the C header has more fields than the C++ table";
  unsigned v = 0;
  for (unsigned e = 0; e < desc.num_enums; ++e)
    for (unsigned i = 0; i < desc.enums[e]->num_values; ++i, ++v) {
      const EnumValueDesc& d = desc.enums[e]->values[i];
      ASSERT_TRUE(values[v].name) << "the C header lacks value " << d.name << " of " << desc.enums[e]->name;
      EXPECT_STREQ(values[v].enumeration, desc.enums[e]->name);
      EXPECT_STREQ(values[v].name, d.name);
      EXPECT_EQ(values[v].value, d.value) << d.name;
    }
  EXPECT_EQ(values[v].name, nullptr) << "the C header has more values than the C++ table";
}

tlm::tlm_response_status access(tlm::tlm_fw_transport_if<>& target, tlm::tlm_command cmd, std::uint64_t addr,
                                void* data, unsigned len, sc_core::sc_time* delay) {
  tlm::tlm_generic_payload t;
  set_access(t, cmd, addr, data, len);
  sc_core::sc_time local = sc_core::SC_ZERO_TIME;
  target.b_transport(t, delay ? *delay : local);
  return t.get_response_status();
}

std::uint64_t read(tlm::tlm_fw_transport_if<>& target, std::uint64_t addr, unsigned len) {
  std::uint64_t v = 0;
  EXPECT_EQ(access(target, tlm::TLM_READ_COMMAND, addr, &v, len), tlm::TLM_OK_RESPONSE)
      << "read at " << std::hex << addr;
  return v;
}

void write(tlm::tlm_fw_transport_if<>& target, std::uint64_t addr, std::uint64_t value, unsigned len) {
  EXPECT_EQ(access(target, tlm::TLM_WRITE_COMMAND, addr, &value, len), tlm::TLM_OK_RESPONSE)
      << "write at " << std::hex << addr;
}

std::uint64_t read_dbg(tlm::tlm_fw_transport_if<>& target, std::uint64_t addr, unsigned len) {
  std::uint64_t v = 0;
  tlm::tlm_generic_payload t;
  set_access(t, tlm::TLM_READ_COMMAND, addr, &v, len);
  EXPECT_EQ(target.transport_dbg(t), len) << "debug read at " << std::hex << addr;
  return v;
}

void expect_reset_and_access(tlm::tlm_fw_transport_if<>& target, std::uint64_t base, const RegBlockDesc& desc,
                             std::initializer_list<const char*> skip) {
  auto skipped = [&](const char* name) {
    for (const char* s : skip)
      if (std::strcmp(s, name) == 0) return true;
    return false;
  };
  auto shared = [&](unsigned r, std::uint64_t off) {
    for (unsigned o = 0; o < desc.num_regs; ++o) {
      if (o == r) continue;
      const RegDesc& d = desc.regs[o];
      for (unsigned e = 0; e < d.count; ++e)
        if (d.offset + e * d.stride == off) return true;
    }
    return false;
  };
  for (unsigned r = 0; r < desc.num_regs; ++r) {
    const RegDesc& d = desc.regs[r];
    if (d.bank[0]) continue;  // banked registers are tested by their model's tests
    // First and last element of arrays.
    for (unsigned e : {0u, d.count - 1}) {
      const std::uint64_t off = d.offset + e * d.stride;
      if (e > 0) {  // the model may implement fewer elements than the window holds
        std::uint64_t probe = 0;
        tlm::tlm_generic_payload t;
        set_access(t, tlm::TLM_READ_COMMAND, base + off, &probe, d.size);
        if (target.transport_dbg(t) == 0) continue;
      }
      if (readable(d.access) && !skipped(d.name))
        EXPECT_EQ(read_dbg(target, base + off, d.size), d.reset) << d.name << "[" << e << "] reset value";
      if (shared(r, off)) continue;
      std::uint64_t v = 0;
      if (d.access == Access::RO)
        EXPECT_EQ(access(target, tlm::TLM_WRITE_COMMAND, base + off, &v, d.size), tlm::TLM_COMMAND_ERROR_RESPONSE)
            << "write to read-only " << d.name;
      if (d.access == Access::WO)
        EXPECT_EQ(access(target, tlm::TLM_READ_COMMAND, base + off, &v, d.size), tlm::TLM_COMMAND_ERROR_RESPONSE)
            << "read of write-only " << d.name;
    }
  }
}

}  // namespace tessera::testing
