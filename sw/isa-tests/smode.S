/* S mode: misa, MPP = S, ecall from S, what S may not touch, the sstatus,
 * sie and sip views, medeleg/mideleg (WARL masks, exceptions and
 * interrupts delegated to S, never taken in M), sret (SPP, SPIE; illegal
 * in U and under TSR), TVM, TW, scounteren, mret clearing MPRV. Traps
 * that reach S go to s_trap, which checks scause like the harness's M
 * handler and resumes at s8 in S mode. */
#include "test.h"

/* S: continue at label in U mode (SPIE cleared: sret leaves SIE off). */
#define S_ENTER_U(label) la t0, label; csrw sepc, t0; li t0, 0x120; csrc sstatus, t0; sret
#define MPP_MASK 0x1800
#define SPP 0x100
#define SIE 0x2
#define SPIE 0x20
#define MPRV 0x20000
#define SUM 0x40000
#define TVM 0x100000
#define TW 0x200000
#define TSR 0x400000

TEST_BEGIN
  la t0, s_trap; csrw stvec, t0
  CHECK(1); csrr t0, misa; li t1, (1 << 18) | (1 << 20); and t0, t0, t1; EXPECT(t0, (1 << 18) | (1 << 20))
  CHECK(2); li t1, MPP_MASK; csrc mstatus, t1; li t1, 0x800; csrs mstatus, t1; csrr t0, mstatus; li t1, MPP_MASK
  and t0, t0, t1; EXPECT(t0, 0x800)
  /* ecall from S reaches M with cause 9 (nothing delegated yet). */
  CHECK(3); EXPECT_TRAP(9, 1f); ENTER_S(2f)
2: ecall; j test_fail
1: csrr t0, mcause; EXPECT(t0, 9)
  /* S cannot read M CSRs or run mret. */
  CHECK(4); EXPECT_TRAP(2, 1f); ENTER_S(2f)
2: csrr t0, mstatus; j test_fail
1:
  CHECK(5); EXPECT_TRAP(2, 1f); ENTER_S(2f)
2: mret; j test_fail
1:
  /* sstatus is a view of mstatus: SUM and SIE show, MIE and MPP do not. */
  CHECK(6); li t1, SUM | SIE | 0x8; csrs mstatus, t1; csrr t0, sstatus; li t1, SUM | SIE | 0x8 | MPP_MASK
  and t0, t0, t1; EXPECT(t0, SUM | SIE); li t1, SUM | SIE | 0x8; csrc mstatus, t1
  CHECK(7); li t1, SPIE; csrs sstatus, t1; csrr t0, mstatus; andi t0, t0, SPIE; EXPECT(t0, SPIE); csrc sstatus, t1
  /* WARL masks. */
  CHECK(8); li t1, -1; csrw medeleg, t1; csrr t0, medeleg; EXPECT(t0, 0xb3ff)
  CHECK(9); li t1, -1; csrw mideleg, t1; csrr t0, mideleg; EXPECT(t0, 0x222)
  CHECK(10); li t1, -1; csrw mie, t1; csrr t0, mie; EXPECT(t0, 0xaaa); csrr t0, sie; EXPECT(t0, 0x222); csrw mie, zero
  csrw mideleg, zero
  /* Delegated exceptions: ecall from U to S, then S's ecall (not delegated) back to M. */
  CHECK(11); li t0, 1 << 8; csrw medeleg, t0; EXPECT_TRAP(9, 1f); ENTER_S(2f)
2: li s10, 8; la s8, 3f; S_ENTER_U(4f)
4: ecall; j test_fail
3: li t0, 8; csrr t1, scause; bne t0, t1, test_fail; andi t0, s6, SPP; bnez t0, test_fail  /* from U: SPP = U */
  li s10, 9; la s8, 1f; ecall; j test_fail
1: csrr t0, mcause; EXPECT(t0, 9)
  /* An illegal instruction in S, delegated, goes to S with the bits in stval. */
  CHECK(12); li t0, 1 << 2; csrw medeleg, t0; EXPECT_TRAP(9, 1f); ENTER_S(2f)
2: li s10, 2; la s8, 3f; .word 0xffffffff; j test_fail
3: EXPECT(s9, 0xffffffff); andi t0, s6, SPP; beqz t0, test_fail  /* from S: SPP = S */
  /* sret in U is illegal (delegated: back in S); sret in S under TSR is too (to M, undelegated). */
  li s10, 2; la s8, 3f; S_ENTER_U(4f)
4: sret; j test_fail
3: li s10, 9; la s8, 1f; ecall; j test_fail
1: csrw medeleg, zero
  CHECK(13); li t0, TSR; csrs mstatus, t0; EXPECT_TRAP(2, 1f); ENTER_S(2f)
2: sret; j test_fail
1: li t0, TSR; csrc mstatus, t0
  /* TVM: satp and sfence.vma are illegal in S; TW: so is wfi. */
  CHECK(14); li t0, TVM; csrs mstatus, t0; EXPECT_TRAP(2, 1f); ENTER_S(2f)
2: csrr t0, satp; j test_fail
1:
  CHECK(15); EXPECT_TRAP(2, 1f); ENTER_S(2f)
2: sfence.vma; j test_fail
1: li t0, TVM; csrc mstatus, t0
  CHECK(16); li t0, TW; csrs mstatus, t0; EXPECT_TRAP(2, 1f); ENTER_S(2f)
2: wfi; j test_fail
1: li t0, TW; csrc mstatus, t0
  CHECK(17); EXPECT_TRAP(9, 1f); ENTER_S(2f)    /* without TVM both are fine in S */
2: csrr t0, satp; sfence.vma; ecall; j test_fail
1:
  /* sret: SIE = SPIE, SPIE = 1, to SPP's mode at sepc. */
  CHECK(18); EXPECT_TRAP(9, 1f); ENTER_S(2f)
2: li t0, SPIE | SPP; csrs sstatus, t0; li t0, SIE; csrc sstatus, t0; la t0, 3f; csrw sepc, t0; sret; j test_fail
3: csrr t0, sstatus; andi t0, t0, SIE | SPIE | SPP; EXPECT(t0, SIE | SPIE); li t0, SIE; csrc sstatus, t0; ecall
1:
  /* Counters in U need mcounteren and scounteren; in S, mcounteren. */
  CHECK(19); li t0, 7; csrw mcounteren, t0; csrw scounteren, zero; EXPECT_TRAP(2, 1f); ENTER_S(2f)
2: S_ENTER_U(3f)
3: rdcycle t0; j test_fail
1:
  CHECK(20); li t0, 7; csrw scounteren, t0; EXPECT_TRAP(8, 1f); ENTER_S(2f)
2: S_ENTER_U(3f)
3: rdcycle t0; rdtime t0; ecall; j test_fail
1:
  CHECK(21); csrw mcounteren, zero; EXPECT_TRAP(2, 1f); ENTER_S(2f)
2: rdcycle t0; j test_fail
1:
  /* Interrupts. A pending, enabled, undelegated interrupt traps to M from S
   * whatever MIE says. */
  CHECK(22); li t0, 1 << 5; csrw mie, t0; EXPECT_TRAP(IRQ(5), 1f); csrs mip, t0; ENTER_S(2f)
2: j test_fail
1: li t0, 1 << 5; csrc mip, t0; csrw mie, zero
  /* Delegated: not taken in M even with MIE, taken in S with SIE. */
  CHECK(23); li t0, 1 << 5; csrw mideleg, t0; csrw mie, t0; csrs mip, t0; csrsi mstatus, 8; nop; nop
  csrci mstatus, 8; EXPECT_TRAP(9, 1f); ENTER_S(2f)
2: li s10, IRQ(5); la s8, 3f; csrsi sstatus, SIE; nop; j test_fail
3: csrr t0, sip; andi t0, t0, 1 << 5; EXPECT(t0, 1 << 5); li s10, 9; la s8, 1f; ecall
1: li t0, 1 << 5; csrc mip, t0
  /* S sets its own software interrupt through sip when delegated. */
  CHECK(24); li t0, 2; csrw mideleg, t0; csrw mie, t0; EXPECT_TRAP(9, 1f); ENTER_S(2f)
2: li s10, IRQ(1); la s8, 3f; csrsi sstatus, SIE; csrsi sip, 2; nop; j test_fail
3: csrci sip, 2; csrr t0, sip; EXPECT(t0, 0); li s10, 9; la s8, 1f; ecall
1: csrw mideleg, zero; csrw mie, zero
  /* mret to S clears MPRV. */
  CHECK(25); li t0, MPRV; csrs mstatus, t0; EXPECT_TRAP(9, 1f); ENTER_S(2f)
2: ecall
1: csrr t0, mstatus; li t1, MPRV; and t0, t0, t1; EXPECT(t0, 0)
  /* A delegated ecall from S stays in S. */
  CHECK(26); li t0, 1 << 9; csrw medeleg, t0; EXPECT_TRAP(9, 1f); ENTER_S(2f)
2: li s10, 9; la s8, 3f; ecall; j test_fail
3: csrr t0, scause; EXPECT(t0, 9)
  li s10, 2; la s8, 1f; csrr t0, mstatus; j test_fail   /* back to M: an illegal instruction, not delegated */
1: csrw medeleg, zero
TEST_END

S_TRAP_HANDLER
