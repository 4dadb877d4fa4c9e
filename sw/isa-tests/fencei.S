/* Self-modifying code: instructions written by stores run after FENCE.I
 * (and, in this model, even without it), also when the old instruction
 * had been executed and decoded before. */
#include "test.h"
TEST_BEGIN
  CHECK(1); call patchable; EXPECT(a0, 1)             /* the original: li a0, 1 */
  /* Write "li a0, 42" (addi a0, zero, 42) over it, as two halfwords. */
  CHECK(2); la t0, patchable; li t1, 0x02a00513
  sh t1, 0(t0); srli t1, t1, 16; sh t1, 2(t0)
  fence.i; call patchable; EXPECT(a0, 42)
  /* Once more, to 7, with a 32-bit store where alignment allows. */
  CHECK(3); la t0, patchable; li t1, 0x00700513; andi t2, t0, 3; bnez t2, 1f
  sw t1, 0(t0); j 2f
1: sh t1, 0(t0); srli t1, t1, 16; sh t1, 2(t0)
2: fence.i; call patchable; EXPECT(a0, 7)
  /* And to 9 without FENCE.I: the decoded instruction is checked against
   * memory on every execution. */
  CHECK(4); la t0, patchable; li t1, 0x00900513
  sh t1, 0(t0); srli t1, t1, 16; sh t1, 2(t0)
  call patchable; EXPECT(a0, 9)
TEST_END
  .section .text.patch, "awx"
  .option push
  .option norvc
  .align 2
patchable:
  li a0, 1
  ret
  .option pop
