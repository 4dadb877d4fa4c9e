// The hart as a platform type. Apart from riscv_cpu.cpp so the tile can
// build its core on the model without linking this registration twice.
#include "common/registry.hpp"
#include "riscv/riscv_cpu.hpp"

namespace tessera::riscv {

TESSERA_REGISTER_IP("riscv", RiscvCpu, "RISC-V hart: RV64GC with S mode, Sv39 and PMP (CP) or RV32IMAC, M and U modes (tile core)");

}  // namespace tessera::riscv
