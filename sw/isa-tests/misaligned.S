/* With misaligned=emulate, misaligned loads and stores are performed. */
#include "test.h"
TEST_BEGIN
  la a0, buffer
  CHECK(1); li t1, 0x11223344; sw t1, 1(a0); lw t0, 1(a0); EXPECT(t0, 0x11223344)
  CHECK(2); lbu t0, 1(a0); EXPECT(t0, 0x44)
  CHECK(3); lh t0, 3(a0); EXPECT(t0, 0x1122)
#if __riscv_xlen == 64
  CHECK(4); li t1, 0x0102030405060708; sd t1, 3(a0); ld t0, 3(a0); EXPECT_REG(t0, t1)
#endif
  /* Atomics must still be aligned. */
  CHECK(5); EXPECT_TRAP(6, 1f); addi a1, a0, 1; amoswap.w t0, t0, (a1); j test_fail
1:
TEST_END
  .data
  .align 4
buffer: .space 32
