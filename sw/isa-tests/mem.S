/* Loads and stores of every width with sign and zero extension, and the
 * faults: misaligned accesses (with the default misaligned=trap), loads
 * from nothing, stores to ROM. */
#include "test.h"
TEST_BEGIN
  la a0, buffer
  CHECK(1); li t1, 0x12345678; sw t1, 0(a0); lw t0, 0(a0); EXPECT(t0, 0x12345678)
  CHECK(2); lbu t0, 0(a0); EXPECT(t0, 0x78)
  CHECK(3); lbu t0, 3(a0); EXPECT(t0, 0x12)
  CHECK(4); lhu t0, 2(a0); EXPECT(t0, 0x1234)
  CHECK(5); li t1, -1; sb t1, 1(a0); lw t0, 0(a0); EXPECT(t0, 0x1234ff78)
  CHECK(6); lb t0, 1(a0); EXPECT(t0, -1)
  CHECK(7); li t1, 0x8001; sh t1, 2(a0); lh t0, 2(a0); EXPECT(t0, -32767)
  CHECK(8); lhu t0, 2(a0); EXPECT(t0, 0x8001)
  CHECK(9); li t1, 0x80000000; sw t1, 4(a0); lw t0, 4(a0);
#if __riscv_xlen == 64
  EXPECT(t0, 0xffffffff80000000)
  CHECK(10); lwu t0, 4(a0); EXPECT(t0, 0x80000000)
  CHECK(11); li t1, 0x0123456789abcdef; sd t1, 8(a0); ld t0, 8(a0); EXPECT(t0, 0x0123456789abcdef)
  CHECK(12); lw t0, 12(a0); EXPECT(t0, 0x01234567)
#else
  EXPECT(t0, 0x80000000)
#endif
  CHECK(13); addi a1, a0, 16; li t1, 77; sw t1, -4(a1); lw t0, 12(a0); EXPECT(t0, 77)  /* negative offset */
  /* Misaligned: trap with the address in mtval. */
  CHECK(20); EXPECT_TRAP(4, 1f); addi a1, a0, 1; lw t0, 0(a1); j test_fail
1: EXPECT_REG(s9, a1)
  CHECK(21); EXPECT_TRAP(6, 1f); addi a1, a0, 2; sw t0, 0(a1); j test_fail
1: EXPECT_REG(s9, a1)
  CHECK(22); EXPECT_TRAP(4, 1f); addi a1, a0, 1; lh t0, 0(a1); j test_fail
1:
  /* Access faults: nothing mapped at 0x4000_0000, the boot ROM refuses stores. */
  CHECK(30); EXPECT_TRAP(5, 1f); li a1, 0x40000000; 3: lw t0, 0(a1); j test_fail
1: EXPECT_REG(s9, a1); la t1, 3b; EXPECT_REG(s7, t1)
  CHECK(31); EXPECT_TRAP(7, 1f); li a1, 0x1000; sw zero, 0(a1); j test_fail
1: EXPECT_REG(s9, a1)
  CHECK(32); li a1, 0x1000; lw t0, 0(a1)     /* but loads from it work */
TEST_END
  .data
  .align 4
buffer: .space 64
