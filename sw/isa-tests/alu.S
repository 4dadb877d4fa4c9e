/* Integer computational instructions (RV32I/RV64I) with edge values. */
#include "test.h"
TEST_BEGIN
  TEST_RR(1, add, 3, 1, 2)
  TEST_RR(2, add, 0, -1, 1)
  TEST_RR(3, sub, -1, 0, 1)
  TEST_RR(4, sub, 0, -5, -5)
  TEST_RR(5, and, 0x0f00, 0xff00, 0x0ff0)
  TEST_RR(6, or, 0xfff0, 0xff00, 0x0ff0)
  TEST_RR(7, xor, 0xf0f0, 0xff00, 0x0ff0)
  TEST_RR(8, slt, 1, -1, 0)
  TEST_RR(9, slt, 0, 0, -1)
  TEST_RR(10, sltu, 0, -1, 0)
  TEST_RR(11, sltu, 1, 0, -1)
  TEST_RR(12, sll, 0x80, 1, 7)
  TEST_RR(13, srl, 1, 0x80, 7)
  TEST_RR(14, sra, -1, -2, 1)
  TEST_RI(15, addi, 0x7ff, 0, 0x7ff)
  TEST_RI(16, addi, -2048, 0, -2048)
  TEST_RI(17, slti, 1, -5, -4)
  TEST_RI(18, sltiu, 1, 5, -1)
  TEST_RI(19, xori, -1, 0, -1)
  TEST_RI(20, ori, 0x7ff, 0x700, 0xff)
  TEST_RI(21, andi, 0x0f, 0xff, 0x0f)
  TEST_RI(22, slli, 0x400, 1, 10)
  TEST_RI(23, srai, -1, -1, 5)
  TEST_RR_SAME(24, add, 14, 7)
  TEST_ZERO_DEST(25, add, 1, 2)
  CHECK(26); lui t0, 0x12345; EXPECT(t0, 0x12345000)
  CHECK(27); lui t0, 0x80000;
#if __riscv_xlen == 64
  EXPECT(t0, 0xffffffff80000000)
#else
  EXPECT(t0, 0x80000000)
#endif
  CHECK(28); 1: auipc t0, 0; la t1, 1b; EXPECT_REG(t0, t1)
#if __riscv_xlen == 64
  TEST_RR(30, sll, 0x8000000000000000, 1, 63)
  TEST_RR(31, sll, 1, 1, 64)           /* only the low 6 bits count */
  TEST_RR(32, srl, 1, 0x8000000000000000, 63)
  TEST_RR(33, sra, -1, 0x8000000000000000, 63)
  TEST_RI(34, srli, 0x7fffffffffffffff, -1, 1)
  TEST_RR(35, addw, 0xffffffff80000000, 0x7fffffff, 1)
  TEST_RR(36, subw, 0x7fffffff, 0x80000000, 1)
  TEST_RI(37, addiw, -1, 0xffffffff, 0)
  TEST_RI(38, slliw, 0xffffffff80000000, 1, 31)
  TEST_RI(39, srliw, 1, 0x80000000, 31)
  TEST_RI(40, sraiw, -1, 0x80000000, 31)
  TEST_RR(41, sllw, 0xffffffff80000000, 1, 31)
  TEST_RR(42, srlw, 0x7fffffff, -1, 1)
  TEST_RR(43, sraw, 0xffffffffc0000000, 0x80000000, 1)
  TEST_RR(44, sllw, 2, 1, 33)          /* low 5 bits */
#else
  TEST_RR(30, sll, 0x80000000, 1, 31)
  TEST_RR(31, sll, 1, 1, 32)           /* only the low 5 bits count */
  TEST_RR(32, sra, -1, 0x80000000, 31)
  TEST_RI(33, srli, 0x7fffffff, -1, 1)
#endif
TEST_END
