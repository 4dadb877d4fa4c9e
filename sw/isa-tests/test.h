/* The ISA test harness: each test program is a list of numbered checks.
 * The number of the check being run is in gp; the first failing check ends
 * the run through HTIF with tohost = (gp << 1) | 1, so tessera-vp exits with
 * that number; passing everything writes tohost = 1 (exit code 0).
 *
 * PMP entry 0 allows every access (PMP_ALLOW_ALL, at the start).
 *
 * Traps: a check that expects a trap sets EXPECT_TRAP(cause, resume); the
 * handler checks mcause, keeps mepc in s7 and mtval in s9, and resumes at
 * `resume` in M mode with interrupts disabled. Any other trap fails the
 * current check. IRQ(n) is the mcause of interrupt n.
 *
 * Registers t0..t4 and a0..a7 are scratch for the checks; s7..s11 and t5,
 * t6 belong to the harness. */
#ifndef TESSERA_ISA_TEST_H
#define TESSERA_ISA_TEST_H

#if __riscv_xlen == 64
#define STORE_X sd
#define LOAD_X ld
#define XLEN_BYTES 8
#else
#define STORE_X sw
#define LOAD_X lw
#define XLEN_BYTES 4
#endif

#define TEST_BEGIN                  \
  .section .text.init, "ax";        \
  .global _start;                   \
  _start:                           \
  PMP_ALLOW_ALL;                    \
  la t0, harness_trap;              \
  csrw mtvec, t0;                   \
  li s10, -1;                       \
  li gp, 0;

/* With PMP, S and U may access nothing until an entry allows it: entry 0
 * allows everything (NAPOT over all addresses, RWX), as the official
 * tests' start-up does; a hart without PMP CSRs skips it by trapping. */
#define PMP_ALLOW_ALL               \
  la t0, 1f;                        \
  csrw mtvec, t0;                   \
  li t0, -1;                        \
  csrw pmpaddr0, t0;                \
  li t0, 0x1f;                      \
  csrw pmpcfg0, t0;                 \
  .align 2;                         \
1:

#define TEST_END                    \
  j test_pass;                      \
  .section .text.harness, "ax";     \
  .align 2;                         \
harness_trap:                       \
  csrr t5, mcause;                  \
  bne t5, s10, test_fail;           \
  csrr s7, mepc;                    \
  csrr s9, mtval;                   \
  csrw mepc, s8;                    \
  li s10, -1;                       \
  li t5, 0x1800;                    \
  csrs mstatus, t5;                 \
  li t5, 0x80;                      \
  csrc mstatus, t5;                 \
  mret;                             \
test_fail:                          \
  slli t5, gp, 1;                   \
  ori t5, t5, 1;                    \
  j 1f;                             \
test_pass:                          \
  li t5, 1;                         \
1:                                  \
  la t6, tohost;                    \
  HTIF_WRITE(t5, t6);               \
2: j 2b;                            \
  .section .tohost, "aw", @progbits; \
  .align 6;                         \
  .global tohost;                   \
tohost: .dword 0;                   \
  .global fromhost;                 \
fromhost: .dword 0;

#if __riscv_xlen == 64
#define HTIF_WRITE(v, a) sd v, 0(a)
#else
#define HTIF_WRITE(v, a) sw v, 0(a); sw zero, 4(a)
#endif

#define CHECK(n) li gp, n
/* Fails the current check unless reg == expected. */
#define EXPECT(reg, expected) li t6, expected; bne reg, t6, test_fail
#define EXPECT_REG(reg, other) bne reg, other, test_fail

/* Register-register: rd = op(a, b). */
#define TEST_RR(n, op, expected, a, b) \
  CHECK(n); li t1, a; li t2, b; op t0, t1, t2; EXPECT(t0, expected)
/* Register-immediate. */
#define TEST_RI(n, op, expected, a, imm) \
  CHECK(n); li t1, a; op t0, t1, imm; EXPECT(t0, expected)
/* The same with rd equal to rs1, and with x0 as the destination. */
#define TEST_RR_SAME(n, op, expected, a) \
  CHECK(n); li t1, a; op t1, t1, t1; EXPECT(t1, expected)
#define TEST_ZERO_DEST(n, op, a, b) \
  CHECK(n); li t1, a; li t2, b; op x0, t1, t2; bnez x0, test_fail

#if __riscv_xlen == 64
#define IRQ(n) (0x8000000000000000 | (n))
#else
#define IRQ(n) (0x80000000 | (n))
#endif

/* Enters U mode at `label`. */
#define ENTER_U(label) la t0, label; csrw mepc, t0; li t0, 0x1800; csrc mstatus, t0; mret
/* Enters S mode at `label`. */
#define ENTER_S(label) la t0, label; csrw mepc, t0; li t0, 0x1800; csrc mstatus, t0; li t0, 0x800; csrs mstatus, t0; mret

/* S mode's trap handler, for traps delegated to S (set stvec to s_trap):
 * like the M handler, the expected cause in s10, then resume at s8 in S
 * with SIE off (s6: sstatus at the trap, s7: sepc, s9: stval). */
#define S_TRAP_HANDLER              \
  .text;                            \
  .align 2;                         \
s_trap:                             \
  csrr t5, scause;                  \
  bne t5, s10, test_fail;           \
  csrr s6, sstatus;                 \
  csrr s7, sepc;                    \
  csrr s9, stval;                   \
  csrw sepc, s8;                    \
  li s10, -1;                       \
  li t5, 0x100;                     \
  csrs sstatus, t5;                 \
  li t5, 0x20;                      \
  csrc sstatus, t5;                 \
  sret

/* The next instruction must trap with `cause`; execution resumes at label. */
#define EXPECT_TRAP(cause, resume) li s10, cause; la s8, resume

#endif
