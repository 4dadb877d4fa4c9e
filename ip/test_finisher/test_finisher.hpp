// Test finisher: the SiFive test device. A write of 0x5555 ends the run
// with exit code 0, (code << 16) | 0x3333 with `code` (a failure never
// exits 0: code 0 becomes 1). Reset (0x7777) is not modelled; other values
// are guest errors answered TLM_COMMAND_ERROR_RESPONSE.
#pragma once

#include "common/config.hpp"
#include "common/regs.hpp"

namespace tessera::test_finisher {

class TestFinisher : public MmioTarget {
 public:
  struct Config {
    void visit(Params&) {}
    void validate(const Params&) const {}
  };
  TestFinisher(const sc_core::sc_module_name& n, const Config& c);
};

}  // namespace tessera::test_finisher
