// RISC-V instruction decoding for RV32/RV64 IMAC + Zicsr + Zifencei.
// Compressed instructions are expanded at decode time into the operation
// of the base instruction they stand for, so execution knows one set of
// operations; `len` says how far the pc moves.
#pragma once

#include <cstdint>

namespace tessera::riscv {

// clang-format off
#define TESSERA_RISCV_OPS(X) \
  X(ILLEGAL) \
  X(LUI) X(AUIPC) X(JAL) X(JALR) \
  X(BEQ) X(BNE) X(BLT) X(BGE) X(BLTU) X(BGEU) \
  X(LB) X(LH) X(LW) X(LD) X(LBU) X(LHU) X(LWU) \
  X(SB) X(SH) X(SW) X(SD) \
  X(ADDI) X(SLTI) X(SLTIU) X(XORI) X(ORI) X(ANDI) X(SLLI) X(SRLI) X(SRAI) \
  X(ADD) X(SUB) X(SLL) X(SLT) X(SLTU) X(XOR) X(SRL) X(SRA) X(OR) X(AND) \
  X(ADDIW) X(SLLIW) X(SRLIW) X(SRAIW) X(ADDW) X(SUBW) X(SLLW) X(SRLW) X(SRAW) \
  X(FENCE) X(FENCE_I) X(ECALL) X(EBREAK) X(MRET) X(WFI) \
  X(CSRRW) X(CSRRS) X(CSRRC) X(CSRRWI) X(CSRRSI) X(CSRRCI) \
  X(MUL) X(MULH) X(MULHSU) X(MULHU) X(DIV) X(DIVU) X(REM) X(REMU) \
  X(MULW) X(DIVW) X(DIVUW) X(REMW) X(REMUW) \
  X(LR_W) X(SC_W) X(AMOSWAP_W) X(AMOADD_W) X(AMOXOR_W) X(AMOAND_W) X(AMOOR_W) \
  X(AMOMIN_W) X(AMOMAX_W) X(AMOMINU_W) X(AMOMAXU_W) \
  X(LR_D) X(SC_D) X(AMOSWAP_D) X(AMOADD_D) X(AMOXOR_D) X(AMOAND_D) X(AMOOR_D) \
  X(AMOMIN_D) X(AMOMAX_D) X(AMOMINU_D) X(AMOMAXU_D)
// clang-format on

enum class Op : std::uint8_t {
#define TESSERA_X(name) name,
  TESSERA_RISCV_OPS(TESSERA_X)
#undef TESSERA_X
      COUNT
};

const char* op_name(Op op);

// What an instruction costs, for the timing model.
enum class OpClass : std::uint8_t { alu, branch, jump, load, store, mul, div, csr, atomic, system };
OpClass op_class(Op op);

struct Decoded {
  Op op = Op::ILLEGAL;
  std::uint8_t rd = 0, rs1 = 0, rs2 = 0;
  std::uint8_t len = 4;  // 2 for a compressed instruction
  std::int64_t imm = 0;  // sign-extended immediate, shift amount or CSR number
  std::uint32_t raw = 0;
};

// `xlen` is 32 or 64: it decides which encodings exist.
Decoded decode(std::uint32_t raw, unsigned xlen);

// "addi a0, a0, 1" (compressed instructions show as what they expand to,
// with a "c." prefix).
const char* reg_name(unsigned r);

}  // namespace tessera::riscv
