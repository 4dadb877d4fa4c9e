// The hart as a platform type. Apart from riscv_cpu.cpp so the tile can
// build its core on the model without linking this registration twice.
#include "common/registry.hpp"
#include "riscv/riscv_cpu.hpp"

namespace tessera::riscv {

TESSERA_REGISTER_IP("riscv", RiscvCpu, "RISC-V hart: RV64GC (CP) or RV32IMAC (tile core), M and U modes");

}  // namespace tessera::riscv
