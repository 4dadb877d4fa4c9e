/* The M extension, with the edge values the specification defines:
 * division by zero and signed overflow. */
#include "test.h"
TEST_BEGIN
  TEST_RR(1, mul, 42, 6, 7)
  TEST_RR(2, mul, -42, -6, 7)
  TEST_RR(3, div, -3, -7, 2)
  TEST_RR(4, rem, -1, -7, 2)
  TEST_RR(5, divu, 3, 7, 2)
  TEST_RR(6, remu, 1, 7, 2)
  TEST_RR(7, div, -1, 5, 0)       /* by zero: all ones */
  TEST_RR(8, divu, -1, 5, 0)
  TEST_RR(9, rem, 5, 5, 0)        /* by zero: the dividend */
  TEST_RR(10, remu, 5, 5, 0)
#if __riscv_xlen == 64
  TEST_RR(11, div, 0x8000000000000000, 0x8000000000000000, -1)  /* overflow */
  TEST_RR(12, rem, 0, 0x8000000000000000, -1)
  TEST_RR(13, mulh, 0xffffffffffffffff, -1, 1)
  TEST_RR(14, mulhu, 0xfffffffffffffffe, -1, -1)
  TEST_RR(15, mulhsu, 0xffffffffffffffff, -1, -1)
  TEST_RR(16, mulh, 0x3fffffffffffffff, 0x7fffffffffffffff, 0x7fffffffffffffff)
  TEST_RR(17, mulw, 0xffffffff80000000, 0x40000000, 2)
  TEST_RR(18, divw, 0xffffffff80000000, 0x80000000, -1)
  TEST_RR(19, divuw, 0xffffffffffffffff, 5, 0)
  TEST_RR(20, remw, 0, 0x80000000, -1)
  TEST_RR(21, remuw, 1, 0x100000007, 2)
  TEST_RR(22, divw, -2, -5, 2)
#else
  TEST_RR(11, div, 0x80000000, 0x80000000, -1)
  TEST_RR(12, rem, 0, 0x80000000, -1)
  TEST_RR(13, mulh, 0xffffffff, -1, 1)
  TEST_RR(14, mulhu, 0xfffffffe, -1, -1)
  TEST_RR(15, mulhsu, 0xffffffff, -1, -1)
  TEST_RR(16, mulh, 0x3fffffff, 0x7fffffff, 0x7fffffff)
#endif
TEST_END
