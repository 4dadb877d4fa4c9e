/* Privilege and traps: ecall from M and U, ebreak, illegal instructions,
 * mret into U mode, what U mode may not do, counter access from U,
 * vectored mtvec, and WFI with timer, software and external interrupts. */
#include "test.h"
#include "tessera_platform.h"
#include "clint_regs.h"
#include "plic_regs.h"
#include "uart16550_regs.h"

#define MTIMECMP (TESSERA_CLINT_BASE + CLINT_MTIMECMP_OFFSET)
#define MTIME (TESSERA_CLINT_BASE + CLINT_MTIME_OFFSET)

/* mtimecmp = mtime + ticks (64-bit accesses on RV64, halves on RV32). */
#if __riscv_xlen == 64
#define TIMER_IN(ticks) li a0, MTIME; ld a1, 0(a0); addi a1, a1, ticks; li a0, MTIMECMP; sd a1, 0(a0)
#define TIMER_OFF li a0, MTIMECMP; li a1, -1; sd a1, 0(a0)
#else
#define TIMER_IN(ticks) li a0, MTIME; lw a1, 0(a0); addi a1, a1, ticks; li a0, MTIMECMP; sw a1, 0(a0); sw zero, 4(a0)
#define TIMER_OFF li a0, MTIMECMP; li a1, -1; sw a1, 4(a0); sw a1, 0(a0)
#endif

TEST_BEGIN
  CHECK(1); EXPECT_TRAP(11, 1f); 2: ecall; j test_fail
1: la t1, 2b; EXPECT_REG(s7, t1); EXPECT(s9, 0)
  CHECK(2); EXPECT_TRAP(3, 1f); 2: ebreak; j test_fail
1: la t1, 2b; EXPECT_REG(s9, t1)                 /* mtval = pc */
  CHECK(3); EXPECT_TRAP(2, 1f); .word 0; j test_fail
1: EXPECT(s9, 0)
  CHECK(4); EXPECT_TRAP(2, 1f); .word 0xffffffff; j test_fail
1: EXPECT(s9, 0xffffffff)
  CHECK(5); EXPECT_TRAP(2, 1f); sret; j test_fail     /* no S mode */
1:
  /* mret in M: MPIE -> MIE, MPP -> privilege (M), MPP becomes U. */
  CHECK(6); li t1, 0x1880; csrs mstatus, t1; la t1, 1f; csrw mepc, t1; mret; j test_fail
1: csrr t0, mstatus; andi t0, t0, 0x8; EXPECT(t0, 8); csrr t0, mstatus; li t1, 0x1800; and t0, t0, t1; EXPECT(t0, 0)
  csrci mstatus, 8
  /* MPP is WARL: S (1) is not kept. */
  CHECK(7); li t1, 0x800; csrs mstatus, t1; csrr t0, mstatus; li t1, 0x1800; and t0, t0, t1; EXPECT(t0, 0)
  /* U mode. */
  CHECK(8); EXPECT_TRAP(8, 1f); ENTER_U(2f)
2: ecall; j test_fail
1: csrr t0, mstatus; li t1, 0x1800; and t0, t0, t1; EXPECT(t0, 0)   /* trapped from U: MPP = U */
  CHECK(9); EXPECT_TRAP(2, 1f); ENTER_U(2f)
2: csrr t0, mscratch; j test_fail
1:
  CHECK(10); EXPECT_TRAP(2, 1f); ENTER_U(2f)
2: mret; j test_fail
1:
  CHECK(11); csrw mcounteren, zero; EXPECT_TRAP(2, 1f); ENTER_U(2f)
2: rdcycle t0; j test_fail
1:
  CHECK(12); li t0, 5; csrw mcounteren, t0; EXPECT_TRAP(8, 1f); ENTER_U(2f)
2: rdcycle t0; rdinstret t0; ecall; j test_fail
1:
  CHECK(13); li t0, 0x200000; csrs mstatus, t0; EXPECT_TRAP(2, 1f); ENTER_U(2f)   /* TW */
2: wfi; j test_fail
1: li t0, 0x200000; csrc mstatus, t0
  CHECK(14); la a2, data; EXPECT_TRAP(8, 1f); ENTER_U(2f)                       /* U may use memory */
2: li t0, 99; sw t0, 0(a2); ecall
1: lw t0, 0(a2); EXPECT(t0, 99)

  /* WFI with interrupts globally off: wakes on a pending enabled interrupt, no trap. */
  CHECK(20); csrci mstatus, 8; li t0, 0x80; csrw mie, t0; TIMER_IN(20); wfi
  csrr t0, mip; andi t0, t0, 0x80; EXPECT(t0, 0x80); TIMER_OFF; csrr t0, mip; EXPECT(t0, 0)
  /* The timer interrupt taken. */
  CHECK(21); EXPECT_TRAP(IRQ(7), 1f); TIMER_IN(20); csrsi mstatus, 8
2: wfi; j 2b
1: TIMER_OFF; csrr t0, mstatus; andi t0, t0, 8; EXPECT(t0, 0)
  /* Vectored: interrupt n goes to base + 4n. */
  CHECK(22); la t0, vectors; ori t0, t0, 1; csrw mtvec, t0; TIMER_IN(20); csrsi mstatus, 8
2: wfi; j 2b
vector_done:
  la t0, harness_trap; csrw mtvec, t0
  /* Software interrupt through the CLINT's msip. */
  CHECK(23); li t0, 0x8; csrw mie, t0; EXPECT_TRAP(IRQ(3), 1f); li a0, TESSERA_CLINT_BASE + CLINT_MSIP_OFFSET
  li t1, 1; sw t1, 0(a0); csrsi mstatus, 8
2: j 2b
1: li a0, TESSERA_CLINT_BASE + CLINT_MSIP_OFFSET; sw zero, 0(a0); csrr t0, mip; EXPECT(t0, 0)
  /* External interrupt: the UART's THR-empty interrupt through the PLIC. */
  CHECK(24); li a0, TESSERA_PLIC_BASE; li t1, 1; sw t1, 4 * TESSERA_UART0_IRQ(a0)
  li a1, TESSERA_PLIC_BASE + PLIC_ENABLE_OFFSET; li t1, 1 << TESSERA_UART0_IRQ; sw t1, 0(a1)
  li t0, 0x800; csrw mie, t0; EXPECT_TRAP(IRQ(11), 1f)
  li a2, TESSERA_UART0_BASE + UART16550_IER_OFFSET; li t1, UART16550_IER_ETBEI_MASK; sb t1, 0(a2)
  csrsi mstatus, 8
2: j 2b
1: li a1, TESSERA_PLIC_BASE + PLIC_CLAIM_OFFSET; lw t0, 0(a1); EXPECT(t0, TESSERA_UART0_IRQ)
  sb zero, 0(a2); sw t0, 0(a1); csrr t0, mip; EXPECT(t0, 0)
  csrw mie, zero
TEST_END

  .section .text.vectors, "ax"
  .option push
  .option norvc
  .align 6
vectors:
  .rept 7
  j test_fail
  .endr
  j vector_timer          /* entry 7: machine timer */
  .rept 8
  j test_fail
  .endr
vector_timer:
  csrr t0, mcause; EXPECT(t0, IRQ(7))
  TIMER_OFF
  la t0, vector_done; csrw mepc, t0
  li t0, 0x80; csrc mstatus, t0
  mret
  .option pop

  .data
  .align 3
data: .dword 0
