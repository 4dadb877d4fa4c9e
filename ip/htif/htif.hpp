// HTIF: Spike's host-target interface as the RISC-V ISA tests use it.
// Writing tohost with device 0 and payload (code << 1) | 1 ends the run
// with `code` (an ISA test's failing test number); device 1 command 1 prints
// a character. A 64-bit write acts at once; a program with 32-bit stores
// acts when it writes the upper word (riscv-tests write the lower word
// first). After acting, tohost reads zero again. Not modelled: the syscall
// proxy (device 0 with an even payload), console input.
#pragma once

#include <string>

#include "common/config.hpp"
#include "common/regs.hpp"
#include "common/sink.hpp"

namespace tessera::htif {

class Htif : public MmioTarget {
 public:
  struct Config {
    std::string console = "stdout";  // stdout, stderr, none or a file
    void visit(Params& p);
    void validate(const Params& p) const {}
  };
  Htif(const sc_core::sc_module_name& n, const Config& c);

  const std::string& console_output() const { return console_.written(); }

 private:
  void command(std::uint64_t value);

  CharSink console_;
};

}  // namespace tessera::htif
