/* The A extension: every AMO's result and memory effect, LR/SC success
 * and failure, and misaligned atomics. */
#include "test.h"
#define TEST_AMO(n, op, mem0, operand, new_mem)                     \
  CHECK(n); la a0, word; li t1, mem0; sw t1, 0(a0); li t2, operand; \
  op t0, t2, (a0); lw t3, 0(a0);                                    \
  EXPECT(t0, mem0); EXPECT(t3, new_mem)
TEST_BEGIN
  TEST_AMO(1, amoswap.w, 5, 9, 9)
  TEST_AMO(2, amoadd.w, 5, 9, 14)
  TEST_AMO(3, amoxor.w, 0xff, 0x0f, 0xf0)
  TEST_AMO(4, amoand.w, 0xff, 0x0f, 0x0f)
  TEST_AMO(5, amoor.w, 0xf0, 0x0f, 0xff)
  TEST_AMO(6, amomin.w, -5, 3, -5)
  TEST_AMO(7, amomax.w, -5, 3, 3)
  TEST_AMO(8, amominu.w, -5, 3, 3)
  TEST_AMO(9, amomaxu.w, -5, 3, -5)
  /* LR/SC: success writes and returns 0; a second SC fails and returns 1. */
  CHECK(10); la a0, word; li t1, 41; sw t1, 0(a0);
  lr.w t0, (a0); addi t0, t0, 1; sc.w t1, t0, (a0); EXPECT(t1, 0); lw t2, 0(a0); EXPECT(t2, 42)
  CHECK(11); li t0, 7; sc.w t1, t0, (a0); EXPECT(t1, 1); lw t2, 0(a0); EXPECT(t2, 42)
  /* An SC to another address than the reservation fails. */
  CHECK(12); lr.w t0, (a0); addi a1, a0, 8; sc.w t1, t0, (a1); EXPECT(t1, 1)
  /* Misaligned atomics: store/AMO misaligned (6), LR load misaligned (4). */
  CHECK(13); EXPECT_TRAP(6, 1f); addi a1, a0, 2; amoadd.w t0, t0, (a1); j test_fail
1: EXPECT_REG(s9, a1)
  CHECK(14); EXPECT_TRAP(4, 1f); addi a1, a0, 1; lr.w t0, (a1); j test_fail
1:
  /* An AMO on read-only memory faults as a store. */
  CHECK(15); EXPECT_TRAP(7, 1f); li a1, 0x1000; amoor.w t0, t0, (a1); j test_fail
1:
#if __riscv_xlen == 64
  CHECK(16); la a0, dword; li t1, 0x100000000; sd t1, 0(a0); li t2, 1; amoadd.d t0, t2, (a0);
  ld t3, 0(a0); EXPECT(t0, 0x100000000); EXPECT(t3, 0x100000001)
  CHECK(17); la a0, word; li t1, -1; sw t1, 0(a0); amoadd.w t0, zero, (a0); EXPECT(t0, -1)  /* sign-extended */
  CHECK(18); la a0, dword; lr.d t0, (a0); sc.d t1, zero, (a0); EXPECT(t1, 0); ld t2, 0(a0); EXPECT(t2, 0)
  CHECK(19); la a0, dword; li t1, -3; sd t1, 0(a0); li t2, 2; amominu.d t0, t2, (a0); ld t3, 0(a0); EXPECT(t3, 2)
#define TEST_AMO_D(n, op, mem0, operand, new_mem)                    \
  CHECK(n); la a0, dword; li t1, mem0; sd t1, 0(a0); li t2, operand; \
  op t0, t2, (a0); ld t3, 0(a0);                                     \
  EXPECT(t0, mem0); EXPECT(t3, new_mem)
  TEST_AMO_D(20, amoswap.d, 0x100000005, 9, 9)
  TEST_AMO_D(21, amoxor.d, 0xff00000000, 0x0f00000000, 0xf000000000)
  TEST_AMO_D(22, amoand.d, 0xff00000000, 0x0f00000000, 0x0f00000000)
  TEST_AMO_D(23, amoor.d, 0xf000000000, 0x0f00000000, 0xff00000000)
  TEST_AMO_D(24, amomin.d, -0x100000000, 3, -0x100000000)
  TEST_AMO_D(25, amomax.d, -0x100000000, 3, 3)
  TEST_AMO_D(26, amomaxu.d, -5, 3, -5)
  TEST_AMO_D(27, amoadd.d, 0xffffffff, 1, 0x100000000)
#endif
TEST_END
  .data
  .align 3
word: .word 0, 0, 0, 0
dword: .dword 0
