// RISC-V instruction decoding for RV32/RV64 IMAFDC + Zicsr + Zifencei.
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
  X(FENCE) X(FENCE_I) X(ECALL) X(EBREAK) X(MRET) X(WFI) X(SRET) X(SFENCE_VMA) \
  X(CSRRW) X(CSRRS) X(CSRRC) X(CSRRWI) X(CSRRSI) X(CSRRCI) \
  X(MUL) X(MULH) X(MULHSU) X(MULHU) X(DIV) X(DIVU) X(REM) X(REMU) \
  X(MULW) X(DIVW) X(DIVUW) X(REMW) X(REMUW) \
  X(LR_W) X(SC_W) X(AMOSWAP_W) X(AMOADD_W) X(AMOXOR_W) X(AMOAND_W) X(AMOOR_W) \
  X(AMOMIN_W) X(AMOMAX_W) X(AMOMINU_W) X(AMOMAXU_W) \
  X(LR_D) X(SC_D) X(AMOSWAP_D) X(AMOADD_D) X(AMOXOR_D) X(AMOAND_D) X(AMOOR_D) \
  X(AMOMIN_D) X(AMOMAX_D) X(AMOMINU_D) X(AMOMAXU_D) \
  X(FLW) X(FSW) X(FLD) X(FSD) \
  X(FMADD_S) X(FMSUB_S) X(FNMSUB_S) X(FNMADD_S) X(FADD_S) X(FSUB_S) X(FMUL_S) X(FDIV_S) X(FSQRT_S) \
  X(FSGNJ_S) X(FSGNJN_S) X(FSGNJX_S) X(FMIN_S) X(FMAX_S) X(FEQ_S) X(FLT_S) X(FLE_S) X(FCLASS_S) \
  X(FCVT_W_S) X(FCVT_WU_S) X(FCVT_L_S) X(FCVT_LU_S) X(FCVT_S_W) X(FCVT_S_WU) X(FCVT_S_L) X(FCVT_S_LU) \
  X(FMV_X_W) X(FMV_W_X) \
  X(FMADD_D) X(FMSUB_D) X(FNMSUB_D) X(FNMADD_D) X(FADD_D) X(FSUB_D) X(FMUL_D) X(FDIV_D) X(FSQRT_D) \
  X(FSGNJ_D) X(FSGNJN_D) X(FSGNJX_D) X(FMIN_D) X(FMAX_D) X(FEQ_D) X(FLT_D) X(FLE_D) X(FCLASS_D) \
  X(FCVT_W_D) X(FCVT_WU_D) X(FCVT_L_D) X(FCVT_LU_D) X(FCVT_D_W) X(FCVT_D_WU) X(FCVT_D_L) X(FCVT_D_LU) \
  X(FMV_X_D) X(FMV_D_X) X(FCVT_S_D) X(FCVT_D_S)
// clang-format on

enum class Op : std::uint8_t {
#define TESSERA_X(name) name,
  TESSERA_RISCV_OPS(TESSERA_X)
#undef TESSERA_X
      COUNT
};

const char* op_name(Op op);

// What an instruction costs, for the timing model (FP loads and stores
// count as loads and stores; fpu is the F/D arithmetic but division and
// square root, which are fdiv).
enum class OpClass : std::uint8_t { alu, branch, jump, load, store, mul, div, csr, atomic, system, fpu, fdiv };
constexpr unsigned kOpClasses = 12;
OpClass op_class(Op op);

// F and D: which instructions they are, which operands are FP registers
// (rs2 and rs3 always are where used), and whether the instruction needs D
// (binary64 operands or result; the others are F's).
inline bool is_fp(Op op) { return op >= Op::FLW; }
bool is_double(Op op);
bool fp_rd(Op op);   // rd is an f register
bool fp_rs1(Op op);  // rs1 is an f register

struct Decoded {
  Op op = Op::ILLEGAL;
  std::uint8_t rd = 0, rs1 = 0, rs2 = 0;
  std::uint8_t len = 4;  // 2 for a compressed instruction
  std::uint8_t rs3 = 0;  // the fused multiply-adds' third operand
  std::uint8_t rm = 0;   // the rounding-mode field (7: frm)
  std::int64_t imm = 0;  // sign-extended immediate, shift amount or CSR number
  std::uint32_t raw = 0;
};

// `xlen` is 32 or 64: it decides which encodings exist.
Decoded decode(std::uint32_t raw, unsigned xlen);

// "addi a0, a0, 1" (compressed instructions show as what they expand to,
// with a "c." prefix).
const char* reg_name(unsigned r);
const char* freg_name(unsigned r);

}  // namespace tessera::riscv
