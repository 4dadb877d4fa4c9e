/* Sdtrig: four mcontrol6 triggers (tinfo), tselect WARL, execute, load
 * and store matches raising breakpoint exceptions before the instruction
 * or access (mepc, and mtval the address), hit0, NAPOT ranges and >=,
 * the mode bits (a U trigger fires in U, not in M), tcontrol.MTE (M-mode
 * triggers only with it; a trap into M clears it and mret restores it),
 * and unsupported types reading back as disabled. */
#include "test.h"

#define TDATA1_TYPE(v) ((v) << (XLEN_BYTES * 8 - 4))
#define MC6 TDATA1_TYPE(6)
#define LOAD 1
#define STORE 2
#define EXEC 4
#define U 8
#define M 64
#define NAPOT (1 << 7)
#define GE (2 << 7)
#define HIT0 (1 << 22)
#define MTE 8

TEST_BEGIN
  CHECK(1); csrr t0, tinfo; EXPECT(t0, (1 << 6) | (1 << 15))
  CHECK(2); li t1, 3; csrw tselect, t1; csrr t0, tselect; EXPECT(t0, 3); li t1, 4; csrw tselect, t1
  csrr t0, tselect; EXPECT(t0, 3); csrw tselect, zero                        /* only 0..3 */
  CHECK(3); li t1, TDATA1_TYPE(2) | EXEC | M; csrw tdata1, t1; csrr t0, tdata1; li t1, TDATA1_TYPE(15)
  EXPECT_REG(t0, t1)                                                          /* type 2: not here, disabled */
  CHECK(4); li t0, MTE; csrw tcontrol, t0
  /* An execute trigger: the breakpoint exception comes before the instruction. */
  la t1, 2f; csrw tdata2, t1; li t1, MC6 | EXEC | M; csrw tdata1, t1; EXPECT_TRAP(3, 1f)
  li a0, 7
2: li a0, 9; j test_fail
1: la t1, 2b; EXPECT_REG(s7, t1); EXPECT_REG(s9, t1); EXPECT(a0, 7)
  csrr t0, tdata1; li t1, HIT0; and t0, t0, t1; EXPECT(t0, HIT0)              /* hit0 */
  csrr t0, tcontrol; andi t0, t0, MTE; EXPECT(t0, MTE)                       /* mret restored MTE (from MPTE) */
  csrw tdata1, zero
  /* A store trigger on an 8-byte NAPOT range: a store inside it traps and writes nothing. */
  CHECK(5); la a1, data; addi t1, a1, 3; csrw tdata2, t1; li t1, MC6 | STORE | M | NAPOT; csrw tdata1, t1
  li t1, 5; sw t1, 8(a1)                                                     /* outside: fine */
  EXPECT_TRAP(3, 1f); li t1, 6; sw t1, 4(a1); j test_fail
1: addi t1, a1, 4; EXPECT_REG(s9, t1); lw t0, 4(a1); EXPECT(t0, 0); lw t0, 8(a1); EXPECT(t0, 5)
  lw t0, 4(a1)                                                               /* a load does not match a store trigger */
  csrw tdata1, zero
  /* A load trigger with >=: any load at or above the address. */
  CHECK(6); addi t1, a1, 8; csrw tdata2, t1; li t1, MC6 | LOAD | M | GE; csrw tdata1, t1
  lw t0, 0(a1); EXPECT_TRAP(3, 1f); lw t0, 12(a1); j test_fail
1: addi t1, a1, 12; EXPECT_REG(s9, t1)
  /* Without tcontrol.MTE, M-mode triggers stay quiet. */
  CHECK(7); csrw tcontrol, zero; lw t0, 12(a1); li t0, MTE; csrw tcontrol, t0; csrw tdata1, zero
  /* A U-mode trigger fires in U, not in M. */
  CHECK(8); li t0, 1; csrw tselect, t0; la t1, 3f; csrw tdata2, t1; li t1, MC6 | EXEC | U; csrw tdata1, t1
  jal ra, 3f                                                                  /* M runs it: no trap */
  EXPECT_TRAP(3, 1f); ENTER_U(3f)
1: la t1, 3f; EXPECT_REG(s9, t1); csrw tdata1, zero; csrw tselect, zero
  j test_pass
3: ret
TEST_END

  .data
  .align 3
data: .dword 0, 0
