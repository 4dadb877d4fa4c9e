/* Two harts share memory: each adds 1000 with amoadd and 1000 with LR/SC
 * loops to one counter; hart 0 waits for both and checks 4000. SC failures
 * (another hart's store cleared the reservation) are counted and must have
 * happened. Run on tests/system/smp.json (two harts, a small quantum). */
#include "test.h"
TEST_BEGIN
  csrr a0, mhartid
  la a1, counter
  la a2, done
  la a4, sc_failures
  li a3, 1000
1: li t0, 1; amoadd.w zero, t0, (a1)
  addi a3, a3, -1; bnez a3, 1b
  li a3, 1000
2: lr.w t0, (a1); addi t0, t0, 1; sc.w t1, t0, (a1); beqz t1, 3f
  li t2, 1; amoadd.w zero, t2, (a4); j 2b
3: addi a3, a3, -1; bnez a3, 2b
  li t0, 1; amoadd.w zero, t0, (a2)
  bnez a0, park
  CHECK(1)
4: lw t0, 0(a2); li t1, 2; bne t0, t1, 4b
  lw t0, 0(a1); EXPECT(t0, 4000)
  CHECK(2); lw t0, 0(a4); beqz t0, test_fail
  j test_pass
park: wfi; j park
TEST_END
  .data
  .align 3
counter: .word 0
done: .word 0
sc_failures: .word 0
