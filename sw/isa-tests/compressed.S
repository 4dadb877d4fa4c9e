/* The C extension: each compressed instruction does what it expands to. */
#include "test.h"
TEST_BEGIN
  .option push
  .option rvc
  CHECK(1); li a0, 0; c.li a0, -3; EXPECT(a0, -3)
  CHECK(2); c.li a0, 5; c.addi a0, 7; EXPECT(a0, 12)
  CHECK(3); c.lui a0, 0x1f; EXPECT(a0, 0x1f000)
  CHECK(4); c.li a0, 9; c.mv a1, a0; EXPECT(a1, 9)
  CHECK(5); c.li a0, 9; c.li a1, 4; c.add a0, a1; EXPECT(a0, 13)
  CHECK(6); c.li a0, 9; c.li a1, 4; c.sub a0, a1; EXPECT(a0, 5)
  CHECK(7); c.li a0, 12; c.li a1, 10; c.and a0, a1; EXPECT(a0, 8)
  CHECK(8); c.li a0, 12; c.li a1, 10; c.or a0, a1; EXPECT(a0, 14)
  CHECK(9); c.li a0, 12; c.li a1, 10; c.xor a0, a1; EXPECT(a0, 6)
  CHECK(10); c.li a0, 1; c.slli a0, 4; EXPECT(a0, 16)
  CHECK(11); c.li a0, -16; c.srai a0, 2; EXPECT(a0, -4)
  CHECK(12); c.li a0, 16; c.srli a0, 2; EXPECT(a0, 4)
  CHECK(13); c.li a0, 31; c.andi a0, 6; EXPECT(a0, 6)
  CHECK(14); mv s0, sp; c.addi16sp sp, -64; sub t0, s0, sp; EXPECT(t0, 64); c.addi16sp sp, 64
  CHECK(15); c.addi4spn a0, sp, 8; addi t0, sp, 8; EXPECT_REG(a0, t0)
  CHECK(16); la sp, stack_top; c.li a0, 11; c.swsp a0, 4(sp); c.lwsp a1, 4(sp); EXPECT(a1, 11)
  CHECK(17); la s0, stack_top; addi s0, s0, -32; c.li a0, 13; c.sw a0, 8(s0); c.lw a1, 8(s0); EXPECT(a1, 13)
  CHECK(18); c.li a0, 0; c.beqz a0, 1f; j test_fail; 1:
  CHECK(19); c.li a0, 1; c.bnez a0, 1f; j test_fail; 1:
  CHECK(20); c.j 1f; j test_fail; 1:
  CHECK(21); la a0, 1f; c.jr a0; j test_fail; 1:
  CHECK(22); la a0, 2f; c.jalr a0; 1: j 3f; 2: la t0, 1b; EXPECT_REG(ra, t0); ret; 3:
#if __riscv_xlen == 64
  CHECK(23); li a0, 0x7fffffff; c.addiw a0, 1; EXPECT(a0, 0xffffffff80000000)
  CHECK(24); la s0, stack_top; addi s0, s0, -32; li a0, 0x0123456789abcdef; c.sd a0, 16(s0); c.ld a1, 16(s0); EXPECT_REG(a0, a1)
  CHECK(25); la sp, stack_top; li a0, -7; c.sdsp a0, 8(sp); c.ldsp a1, 8(sp); EXPECT(a1, -7)
  CHECK(26); li a0, 0x7fffffff; li a1, 1; c.addw a0, a1; EXPECT(a0, 0xffffffff80000000)
  CHECK(27); li a0, 0; li a1, 1; c.subw a0, a1; EXPECT(a0, -1)
#else
  CHECK(23); la a0, 2f; c.jal 2f; 1: j 3f; 2: la t0, 1b; EXPECT_REG(ra, t0); ret; 3:
#endif
  /* A 16-bit instruction followed by a 32-bit one at a 2-byte boundary. */
  CHECK(28); c.li a0, 1; addi a0, a0, 1; c.addi a0, 1; EXPECT(a0, 3)
  .option pop
TEST_END
  .data
  .align 4
  .space 128
stack_top:
  .space 128
