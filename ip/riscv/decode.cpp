#include "riscv/decode.hpp"

namespace tessera::riscv {
namespace {

constexpr std::uint32_t bits(std::uint32_t v, unsigned hi, unsigned lo) { return (v >> lo) & ((1u << (hi - lo + 1)) - 1); }
constexpr std::int64_t sext(std::uint64_t v, unsigned width) {
  const std::uint64_t m = 1ull << (width - 1);
  return static_cast<std::int64_t>((v ^ m) - m);
}

Decoded make(Op op, unsigned rd, unsigned rs1, unsigned rs2, std::int64_t imm) {
  Decoded d;
  d.op = op;
  d.rd = static_cast<std::uint8_t>(rd);
  d.rs1 = static_cast<std::uint8_t>(rs1);
  d.rs2 = static_cast<std::uint8_t>(rs2);
  d.imm = imm;
  return d;
}

Decoded make_fp(Op op, unsigned rd, unsigned rs1, unsigned rs2, unsigned rm, unsigned rs3 = 0) {
  Decoded d = make(op, rd, rs1, rs2, 0);
  d.rm = static_cast<std::uint8_t>(rm);
  d.rs3 = static_cast<std::uint8_t>(rs3);
  return d;
}

// OP-FP (0x53): funct7's low bit is the format (0 S, 1 D).
Decoded decode_op_fp(std::uint32_t r, unsigned xlen) {
  const unsigned rd = bits(r, 11, 7), f3 = bits(r, 14, 12), rs1 = bits(r, 19, 15), rs2 = bits(r, 24, 20);
  const unsigned f7 = bits(r, 31, 25);
  const bool dbl = f7 & 1, rv64 = xlen == 64;
  auto pick = [dbl](Op s, Op d) { return dbl ? d : s; };
  const Decoded illegal{};
  switch (f7 & ~1u) {
    case 0x00: return make_fp(pick(Op::FADD_S, Op::FADD_D), rd, rs1, rs2, f3);
    case 0x04: return make_fp(pick(Op::FSUB_S, Op::FSUB_D), rd, rs1, rs2, f3);
    case 0x08: return make_fp(pick(Op::FMUL_S, Op::FMUL_D), rd, rs1, rs2, f3);
    case 0x0c: return make_fp(pick(Op::FDIV_S, Op::FDIV_D), rd, rs1, rs2, f3);
    case 0x2c: return rs2 == 0 ? make_fp(pick(Op::FSQRT_S, Op::FSQRT_D), rd, rs1, 0, f3) : illegal;
    case 0x10: {
      const Op s[3] = {Op::FSGNJ_S, Op::FSGNJN_S, Op::FSGNJX_S}, d[3] = {Op::FSGNJ_D, Op::FSGNJN_D, Op::FSGNJX_D};
      return f3 < 3 ? make_fp(dbl ? d[f3] : s[f3], rd, rs1, rs2, 0) : illegal;
    }
    case 0x14:
      if (f3 > 1) return illegal;
      return make_fp(f3 ? pick(Op::FMAX_S, Op::FMAX_D) : pick(Op::FMIN_S, Op::FMIN_D), rd, rs1, rs2, 0);
    case 0x20:  // fcvt.s.d, fcvt.d.s
      if (!dbl && rs2 == 1) return make_fp(Op::FCVT_S_D, rd, rs1, 0, f3);
      if (dbl && rs2 == 0) return make_fp(Op::FCVT_D_S, rd, rs1, 0, f3);
      return illegal;
    case 0x50: {
      const Op s[3] = {Op::FLE_S, Op::FLT_S, Op::FEQ_S}, d[3] = {Op::FLE_D, Op::FLT_D, Op::FEQ_D};
      return f3 < 3 ? make_fp(dbl ? d[f3] : s[f3], rd, rs1, rs2, 0) : illegal;
    }
    case 0x60: {
      const Op s[4] = {Op::FCVT_W_S, Op::FCVT_WU_S, Op::FCVT_L_S, Op::FCVT_LU_S};
      const Op d[4] = {Op::FCVT_W_D, Op::FCVT_WU_D, Op::FCVT_L_D, Op::FCVT_LU_D};
      if (rs2 > 3 || (rs2 > 1 && !rv64)) return illegal;
      return make_fp(dbl ? d[rs2] : s[rs2], rd, rs1, 0, f3);
    }
    case 0x68: {
      const Op s[4] = {Op::FCVT_S_W, Op::FCVT_S_WU, Op::FCVT_S_L, Op::FCVT_S_LU};
      const Op d[4] = {Op::FCVT_D_W, Op::FCVT_D_WU, Op::FCVT_D_L, Op::FCVT_D_LU};
      if (rs2 > 3 || (rs2 > 1 && !rv64)) return illegal;
      return make_fp(dbl ? d[rs2] : s[rs2], rd, rs1, 0, f3);
    }
    case 0x70:
      if (rs2 != 0) return illegal;
      if (f3 == 1) return make_fp(pick(Op::FCLASS_S, Op::FCLASS_D), rd, rs1, 0, 0);
      if (f3 == 0 && (!dbl || rv64)) return make_fp(pick(Op::FMV_X_W, Op::FMV_X_D), rd, rs1, 0, 0);
      return illegal;
    case 0x78:
      if (rs2 != 0 || f3 != 0 || (dbl && !rv64)) return illegal;
      return make_fp(pick(Op::FMV_W_X, Op::FMV_D_X), rd, rs1, 0, 0);
  }
  return illegal;
}

Decoded decode32(std::uint32_t r, unsigned xlen) {
  const unsigned rd = bits(r, 11, 7), f3 = bits(r, 14, 12), rs1 = bits(r, 19, 15), rs2 = bits(r, 24, 20);
  const unsigned f7 = bits(r, 31, 25);
  const bool rv64 = xlen == 64;
  const std::int64_t i_imm = sext(r >> 20, 12);
  const std::int64_t s_imm = sext((bits(r, 31, 25) << 5) | bits(r, 11, 7), 12);
  const std::int64_t b_imm =
      sext((bits(r, 31, 31) << 12) | (bits(r, 7, 7) << 11) | (bits(r, 30, 25) << 5) | (bits(r, 11, 8) << 1), 13);
  const std::int64_t u_imm = sext(r & 0xfffff000u, 32);
  const std::int64_t j_imm =
      sext((bits(r, 31, 31) << 20) | (bits(r, 19, 12) << 12) | (bits(r, 20, 20) << 11) | (bits(r, 30, 21) << 1), 21);
  const Decoded illegal{};
  switch (r & 0x7f) {
    case 0x37: return make(Op::LUI, rd, 0, 0, u_imm);
    case 0x17: return make(Op::AUIPC, rd, 0, 0, u_imm);
    case 0x6f: return make(Op::JAL, rd, 0, 0, j_imm);
    case 0x67: return f3 == 0 ? make(Op::JALR, rd, rs1, 0, i_imm) : illegal;
    case 0x63: {
      static const Op ops[8] = {Op::BEQ, Op::BNE, Op::ILLEGAL, Op::ILLEGAL, Op::BLT, Op::BGE, Op::BLTU, Op::BGEU};
      return ops[f3] == Op::ILLEGAL ? illegal : make(ops[f3], 0, rs1, rs2, b_imm);
    }
    case 0x03: {
      static const Op ops[8] = {Op::LB, Op::LH, Op::LW, Op::LD, Op::LBU, Op::LHU, Op::LWU, Op::ILLEGAL};
      if (ops[f3] == Op::ILLEGAL || (!rv64 && (ops[f3] == Op::LD || ops[f3] == Op::LWU))) return illegal;
      return make(ops[f3], rd, rs1, 0, i_imm);
    }
    case 0x23: {
      static const Op ops[8] = {Op::SB, Op::SH, Op::SW, Op::SD, Op::ILLEGAL, Op::ILLEGAL, Op::ILLEGAL, Op::ILLEGAL};
      if (ops[f3] == Op::ILLEGAL || (!rv64 && ops[f3] == Op::SD)) return illegal;
      return make(ops[f3], 0, rs1, rs2, s_imm);
    }
    case 0x13: {
      const unsigned shamt = rv64 ? bits(r, 25, 20) : bits(r, 24, 20);
      const unsigned high = rv64 ? bits(r, 31, 26) << 1 : f7;  // funct6 (RV64) or funct7 (RV32)
      switch (f3) {
        case 0: return make(Op::ADDI, rd, rs1, 0, i_imm);
        case 2: return make(Op::SLTI, rd, rs1, 0, i_imm);
        case 3: return make(Op::SLTIU, rd, rs1, 0, i_imm);
        case 4: return make(Op::XORI, rd, rs1, 0, i_imm);
        case 6: return make(Op::ORI, rd, rs1, 0, i_imm);
        case 7: return make(Op::ANDI, rd, rs1, 0, i_imm);
        case 1: return high == 0 ? make(Op::SLLI, rd, rs1, 0, shamt) : illegal;
        case 5:
          if (high == 0) return make(Op::SRLI, rd, rs1, 0, shamt);
          if (high == 0x20) return make(Op::SRAI, rd, rs1, 0, shamt);
          return illegal;
      }
      return illegal;
    }
    case 0x33: {
      if (f7 == 0x01) {
        static const Op ops[8] = {Op::MUL, Op::MULH, Op::MULHSU, Op::MULHU, Op::DIV, Op::DIVU, Op::REM, Op::REMU};
        return make(ops[f3], rd, rs1, rs2, 0);
      }
      if (f7 == 0x00) {
        static const Op ops[8] = {Op::ADD, Op::SLL, Op::SLT, Op::SLTU, Op::XOR, Op::SRL, Op::OR, Op::AND};
        return make(ops[f3], rd, rs1, rs2, 0);
      }
      if (f7 == 0x20 && f3 == 0) return make(Op::SUB, rd, rs1, rs2, 0);
      if (f7 == 0x20 && f3 == 5) return make(Op::SRA, rd, rs1, rs2, 0);
      return illegal;
    }
    case 0x1b: {
      if (!rv64) return illegal;
      if (f3 == 0) return make(Op::ADDIW, rd, rs1, 0, i_imm);
      if (f3 == 1 && f7 == 0) return make(Op::SLLIW, rd, rs1, 0, rs2);
      if (f3 == 5 && f7 == 0) return make(Op::SRLIW, rd, rs1, 0, rs2);
      if (f3 == 5 && f7 == 0x20) return make(Op::SRAIW, rd, rs1, 0, rs2);
      return illegal;
    }
    case 0x3b: {
      if (!rv64) return illegal;
      if (f7 == 0x01) {
        static const Op ops[8] = {Op::MULW,  Op::ILLEGAL, Op::ILLEGAL, Op::ILLEGAL,
                                  Op::DIVW, Op::DIVUW,   Op::REMW,    Op::REMUW};
        return ops[f3] == Op::ILLEGAL ? illegal : make(ops[f3], rd, rs1, rs2, 0);
      }
      if (f7 == 0 && f3 == 0) return make(Op::ADDW, rd, rs1, rs2, 0);
      if (f7 == 0x20 && f3 == 0) return make(Op::SUBW, rd, rs1, rs2, 0);
      if (f7 == 0 && f3 == 1) return make(Op::SLLW, rd, rs1, rs2, 0);
      if (f7 == 0 && f3 == 5) return make(Op::SRLW, rd, rs1, rs2, 0);
      if (f7 == 0x20 && f3 == 5) return make(Op::SRAW, rd, rs1, rs2, 0);
      return illegal;
    }
    case 0x07:  // LOAD-FP
      if (f3 == 2) return make(Op::FLW, rd, rs1, 0, i_imm);
      if (f3 == 3) return make(Op::FLD, rd, rs1, 0, i_imm);
      return illegal;
    case 0x27:  // STORE-FP
      if (f3 == 2) return make(Op::FSW, 0, rs1, rs2, s_imm);
      if (f3 == 3) return make(Op::FSD, 0, rs1, rs2, s_imm);
      return illegal;
    case 0x43: case 0x47: case 0x4b: case 0x4f: {
      const unsigned fmt = bits(r, 26, 25);
      if (fmt > 1) return illegal;
      static const Op s[4] = {Op::FMADD_S, Op::FMSUB_S, Op::FNMSUB_S, Op::FNMADD_S};
      static const Op d[4] = {Op::FMADD_D, Op::FMSUB_D, Op::FNMSUB_D, Op::FNMADD_D};
      const unsigned k = ((r & 0x7f) - 0x43) >> 2;
      return make_fp(fmt ? d[k] : s[k], rd, rs1, rs2, f3, bits(r, 31, 27));
    }
    case 0x53: return decode_op_fp(r, xlen);
    case 0x0f:
      if (f3 == 0) return make(Op::FENCE, 0, 0, 0, 0);
      if (f3 == 1) return make(Op::FENCE_I, 0, 0, 0, 0);
      return illegal;
    case 0x73:
      switch (f3) {
        case 0:
          if (r == 0x00000073) return make(Op::ECALL, 0, 0, 0, 0);
          if (r == 0x00100073) return make(Op::EBREAK, 0, 0, 0, 0);
          if (r == 0x30200073) return make(Op::MRET, 0, 0, 0, 0);
          if (r == 0x10500073) return make(Op::WFI, 0, 0, 0, 0);
          if (r == 0x10200073) return make(Op::SRET, 0, 0, 0, 0);
          if (f7 == 0x09 && rd == 0) return make(Op::SFENCE_VMA, 0, rs1, rs2, 0);
          return illegal;
        case 1: return make(Op::CSRRW, rd, rs1, 0, r >> 20);
        case 2: return make(Op::CSRRS, rd, rs1, 0, r >> 20);
        case 3: return make(Op::CSRRC, rd, rs1, 0, r >> 20);
        case 5: return make(Op::CSRRWI, rd, rs1, 0, r >> 20);
        case 6: return make(Op::CSRRSI, rd, rs1, 0, r >> 20);
        case 7: return make(Op::CSRRCI, rd, rs1, 0, r >> 20);
      }
      return illegal;
    case 0x2f: {
      if (f3 != 2 && !(f3 == 3 && rv64)) return illegal;
      const bool d = f3 == 3;
      switch (bits(r, 31, 27)) {
        case 0x02: return rs2 == 0 ? make(d ? Op::LR_D : Op::LR_W, rd, rs1, 0, 0) : illegal;
        case 0x03: return make(d ? Op::SC_D : Op::SC_W, rd, rs1, rs2, 0);
        case 0x01: return make(d ? Op::AMOSWAP_D : Op::AMOSWAP_W, rd, rs1, rs2, 0);
        case 0x00: return make(d ? Op::AMOADD_D : Op::AMOADD_W, rd, rs1, rs2, 0);
        case 0x04: return make(d ? Op::AMOXOR_D : Op::AMOXOR_W, rd, rs1, rs2, 0);
        case 0x0c: return make(d ? Op::AMOAND_D : Op::AMOAND_W, rd, rs1, rs2, 0);
        case 0x08: return make(d ? Op::AMOOR_D : Op::AMOOR_W, rd, rs1, rs2, 0);
        case 0x10: return make(d ? Op::AMOMIN_D : Op::AMOMIN_W, rd, rs1, rs2, 0);
        case 0x14: return make(d ? Op::AMOMAX_D : Op::AMOMAX_W, rd, rs1, rs2, 0);
        case 0x18: return make(d ? Op::AMOMINU_D : Op::AMOMINU_W, rd, rs1, rs2, 0);
        case 0x1c: return make(d ? Op::AMOMAXU_D : Op::AMOMAXU_W, rd, rs1, rs2, 0);
      }
      return illegal;
    }
  }
  return illegal;
}

Decoded decode16(std::uint32_t r, unsigned xlen) {
  const bool rv64 = xlen == 64;
  const unsigned f3 = bits(r, 15, 13);
  const unsigned rd = bits(r, 11, 7), rs2 = bits(r, 6, 2);
  const unsigned rdp = 8 + bits(r, 4, 2), rs1p = 8 + bits(r, 9, 7);
  const std::int64_t ci_imm = sext((bits(r, 12, 12) << 5) | bits(r, 6, 2), 6);
  const unsigned shamt = (bits(r, 12, 12) << 5) | bits(r, 6, 2);
  const Decoded illegal{};
  switch (r & 3) {
    case 0:
      switch (f3) {
        case 0: {
          const unsigned imm = (bits(r, 12, 11) << 4) | (bits(r, 10, 7) << 6) | (bits(r, 6, 6) << 2) | (bits(r, 5, 5) << 3);
          return imm ? make(Op::ADDI, rdp, 2, 0, imm) : illegal;
        }
        case 1: return make(Op::FLD, rdp, rs1p, 0, (bits(r, 12, 10) << 3) | (bits(r, 6, 5) << 6));
        case 2: return make(Op::LW, rdp, rs1p, 0, (bits(r, 12, 10) << 3) | (bits(r, 6, 6) << 2) | (bits(r, 5, 5) << 6));
        case 3:
          if (rv64) return make(Op::LD, rdp, rs1p, 0, (bits(r, 12, 10) << 3) | (bits(r, 6, 5) << 6));
          return make(Op::FLW, rdp, rs1p, 0, (bits(r, 12, 10) << 3) | (bits(r, 6, 6) << 2) | (bits(r, 5, 5) << 6));
        case 5: return make(Op::FSD, 0, rs1p, rdp, (bits(r, 12, 10) << 3) | (bits(r, 6, 5) << 6));
        case 6: return make(Op::SW, 0, rs1p, rdp, (bits(r, 12, 10) << 3) | (bits(r, 6, 6) << 2) | (bits(r, 5, 5) << 6));
        case 7:
          if (rv64) return make(Op::SD, 0, rs1p, rdp, (bits(r, 12, 10) << 3) | (bits(r, 6, 5) << 6));
          return make(Op::FSW, 0, rs1p, rdp, (bits(r, 12, 10) << 3) | (bits(r, 6, 6) << 2) | (bits(r, 5, 5) << 6));
      }
      return illegal;
    case 1:
      switch (f3) {
        case 0: return make(Op::ADDI, rd, rd, 0, ci_imm);
        case 1:
          if (rv64) return rd ? make(Op::ADDIW, rd, rd, 0, ci_imm) : illegal;
          [[fallthrough]];
        case 5: {
          const std::int64_t off = sext((bits(r, 12, 12) << 11) | (bits(r, 11, 11) << 4) | (bits(r, 10, 9) << 8) |
                                            (bits(r, 8, 8) << 10) | (bits(r, 7, 7) << 6) | (bits(r, 6, 6) << 7) |
                                            (bits(r, 5, 3) << 1) | (bits(r, 2, 2) << 5),
                                        12);
          return make(Op::JAL, f3 == 1 ? 1 : 0, 0, 0, off);
        }
        case 2: return make(Op::ADDI, rd, 0, 0, ci_imm);
        case 3:
          if (rd == 2) {
            const std::int64_t imm = sext((bits(r, 12, 12) << 9) | (bits(r, 6, 6) << 4) | (bits(r, 5, 5) << 6) |
                                              (bits(r, 4, 3) << 7) | (bits(r, 2, 2) << 5),
                                          10);
            return imm ? make(Op::ADDI, 2, 2, 0, imm) : illegal;
          } else {
            const std::int64_t imm = sext((bits(r, 12, 12) << 17) | (bits(r, 6, 2) << 12), 18);
            return imm ? make(Op::LUI, rd, 0, 0, imm) : illegal;
          }
        case 4:
          switch (bits(r, 11, 10)) {
            case 0: return (rv64 || !bits(r, 12, 12)) ? make(Op::SRLI, rs1p, rs1p, 0, shamt) : illegal;
            case 1: return (rv64 || !bits(r, 12, 12)) ? make(Op::SRAI, rs1p, rs1p, 0, shamt) : illegal;
            case 2: return make(Op::ANDI, rs1p, rs1p, 0, ci_imm);
            case 3: {
              static const Op ops[8] = {Op::SUB, Op::XOR, Op::OR, Op::AND, Op::SUBW, Op::ADDW, Op::ILLEGAL, Op::ILLEGAL};
              const Op op = ops[(bits(r, 12, 12) << 2) | bits(r, 6, 5)];
              if (op == Op::ILLEGAL || (!rv64 && bits(r, 12, 12))) return illegal;
              return make(op, rs1p, rs1p, rdp, 0);
            }
          }
          return illegal;
        case 6:
        case 7: {
          const std::int64_t off = sext((bits(r, 12, 12) << 8) | (bits(r, 11, 10) << 3) | (bits(r, 6, 5) << 6) |
                                            (bits(r, 4, 3) << 1) | (bits(r, 2, 2) << 5),
                                        9);
          return make(f3 == 6 ? Op::BEQ : Op::BNE, 0, rs1p, 0, off);
        }
      }
      return illegal;
    case 2:
      switch (f3) {
        case 0: return (rv64 || !bits(r, 12, 12)) ? make(Op::SLLI, rd, rd, 0, shamt) : illegal;
        case 1: return make(Op::FLD, rd, 2, 0, (bits(r, 12, 12) << 5) | (bits(r, 6, 5) << 3) | (bits(r, 4, 2) << 6));
        case 2:
          return rd ? make(Op::LW, rd, 2, 0, (bits(r, 12, 12) << 5) | (bits(r, 6, 4) << 2) | (bits(r, 3, 2) << 6)) : illegal;
        case 3:
          if (!rv64) return make(Op::FLW, rd, 2, 0, (bits(r, 12, 12) << 5) | (bits(r, 6, 4) << 2) | (bits(r, 3, 2) << 6));
          return rd ? make(Op::LD, rd, 2, 0, (bits(r, 12, 12) << 5) | (bits(r, 6, 5) << 3) | (bits(r, 4, 2) << 6))
                    : illegal;
        case 4:
          if (!bits(r, 12, 12)) {
            if (rs2 == 0) return rd ? make(Op::JALR, 0, rd, 0, 0) : illegal;
            return make(Op::ADD, rd, 0, rs2, 0);
          }
          if (rd == 0 && rs2 == 0) return make(Op::EBREAK, 0, 0, 0, 0);
          if (rs2 == 0) return make(Op::JALR, 1, rd, 0, 0);
          return make(Op::ADD, rd, rd, rs2, 0);
        case 5: return make(Op::FSD, 0, 2, rs2, (bits(r, 12, 10) << 3) | (bits(r, 9, 7) << 6));
        case 6: return make(Op::SW, 0, 2, rs2, (bits(r, 12, 9) << 2) | (bits(r, 8, 7) << 6));
        case 7:
          if (!rv64) return make(Op::FSW, 0, 2, rs2, (bits(r, 12, 9) << 2) | (bits(r, 8, 7) << 6));
          return make(Op::SD, 0, 2, rs2, (bits(r, 12, 10) << 3) | (bits(r, 9, 7) << 6));
      }
      return illegal;
  }
  return illegal;
}

const char* const kOpNames[] = {
#define TESSERA_X(name) #name,
    TESSERA_RISCV_OPS(TESSERA_X)
#undef TESSERA_X
};

}  // namespace

Decoded decode(std::uint32_t raw, unsigned xlen) {
  Decoded d;
  if ((raw & 3) == 3) {
    d = decode32(raw, xlen);
    d.len = 4;
  } else {
    raw &= 0xffff;
    d = decode16(raw, xlen);
    d.len = 2;
  }
  d.raw = raw;
  return d;
}

const char* op_name(Op op) { return kOpNames[static_cast<unsigned>(op)]; }

OpClass op_class(Op op) {
  switch (op) {
    case Op::BEQ: case Op::BNE: case Op::BLT: case Op::BGE: case Op::BLTU: case Op::BGEU: return OpClass::branch;
    case Op::JAL: case Op::JALR: return OpClass::jump;
    case Op::LB: case Op::LH: case Op::LW: case Op::LD: case Op::LBU: case Op::LHU: case Op::LWU: return OpClass::load;
    case Op::SB: case Op::SH: case Op::SW: case Op::SD: return OpClass::store;
    case Op::MUL: case Op::MULH: case Op::MULHSU: case Op::MULHU: case Op::MULW: return OpClass::mul;
    case Op::DIV: case Op::DIVU: case Op::REM: case Op::REMU: case Op::DIVW: case Op::DIVUW: case Op::REMW:
    case Op::REMUW: return OpClass::div;
    case Op::CSRRW: case Op::CSRRS: case Op::CSRRC: case Op::CSRRWI: case Op::CSRRSI: case Op::CSRRCI:
      return OpClass::csr;
    case Op::FENCE: case Op::FENCE_I: case Op::ECALL: case Op::EBREAK: case Op::MRET: case Op::WFI:
    case Op::SRET: case Op::SFENCE_VMA: case Op::ILLEGAL: return OpClass::system;
    case Op::FLW: case Op::FLD: return OpClass::load;
    case Op::FSW: case Op::FSD: return OpClass::store;
    case Op::FDIV_S: case Op::FSQRT_S: case Op::FDIV_D: case Op::FSQRT_D: return OpClass::fdiv;
    default:
      if (is_fp(op)) return OpClass::fpu;
      return op >= Op::LR_W ? OpClass::atomic : OpClass::alu;
  }
}

bool is_double(Op op) {
  return op == Op::FLD || op == Op::FSD || op >= Op::FMADD_D;
}

bool fp_rd(Op op) {
  switch (op) {
    case Op::FSW: case Op::FSD: case Op::FEQ_S: case Op::FLT_S: case Op::FLE_S: case Op::FCLASS_S:
    case Op::FCVT_W_S: case Op::FCVT_WU_S: case Op::FCVT_L_S: case Op::FCVT_LU_S: case Op::FMV_X_W:
    case Op::FEQ_D: case Op::FLT_D: case Op::FLE_D: case Op::FCLASS_D: case Op::FCVT_W_D: case Op::FCVT_WU_D:
    case Op::FCVT_L_D: case Op::FCVT_LU_D: case Op::FMV_X_D:
      return false;
    default: return is_fp(op);
  }
}

bool fp_rs1(Op op) {
  switch (op) {
    case Op::FLW: case Op::FSW: case Op::FLD: case Op::FSD: case Op::FCVT_S_W: case Op::FCVT_S_WU:
    case Op::FCVT_S_L: case Op::FCVT_S_LU: case Op::FMV_W_X: case Op::FCVT_D_W: case Op::FCVT_D_WU:
    case Op::FCVT_D_L: case Op::FCVT_D_LU: case Op::FMV_D_X:
      return false;
    default: return is_fp(op);
  }
}

const char* reg_name(unsigned r) {
  static const char* const names[32] = {"zero", "ra", "sp", "gp", "tp",  "t0",  "t1", "t2", "s0", "s1", "a0",
                                        "a1",   "a2", "a3", "a4", "a5",  "a6",  "a7", "s2", "s3", "s4", "s5",
                                        "s6",   "s7", "s8", "s9", "s10", "s11", "t3", "t4", "t5", "t6"};
  return names[r & 31];
}

const char* freg_name(unsigned r) {
  static const char* const names[32] = {"ft0", "ft1", "ft2",  "ft3",  "ft4", "ft5", "ft6",  "ft7",
                                        "fs0", "fs1", "fa0",  "fa1",  "fa2", "fa3", "fa4",  "fa5",
                                        "fa6", "fa7", "fs2",  "fs3",  "fs4", "fs5", "fs6",  "fs7",
                                        "fs8", "fs9", "fs10", "fs11", "ft8", "ft9", "ft10", "ft11"};
  return names[r & 31];
}

}  // namespace tessera::riscv
