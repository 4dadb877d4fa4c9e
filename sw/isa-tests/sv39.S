/* Sv39 (RV64; on RV32 satp takes Bare only): satp's modes, S mode running
 * through a 1 GiB page, 4 KiB pages aliasing one frame, read-only pages,
 * A and D clear (page faults: software sets them), U pages and SUM, X-only
 * pages and MXR, invalid PTEs, a misaligned superpage, non-canonical
 * addresses, U mode fetching only from U pages, MPRV translating M's data
 * accesses, SFENCE.VMA after a PTE changes, and a page fault delegated to
 * S. Faults go to the harness's M handler (mcause, mtval in s9) unless
 * delegated. */
#include "test.h"

#define S_ENTER_U(va) li t0, va; csrw sepc, t0; li t0, 0x120; csrc sstatus, t0; sret
/* t0 = the leaf or pointer PTE for physical address `reg` with flags. */
#define PTE(reg, flags) srli reg, reg, 12; slli reg, reg, 10; ori reg, reg, flags
#define VA(page) (0x40000000 + (page) * 0x1000)
#define SUM 0x40000
#define MXR 0x80000
#define MPRV 0x20000

TEST_BEGIN
#if __riscv_xlen == 32
  CHECK(1); li t0, 0x80000001; csrw satp, t0; csrr t0, satp; EXPECT(t0, 0)   /* Sv32 is not implemented */
  CHECK(2); li t0, 0x1234; csrw satp, t0; csrr t0, satp; EXPECT(t0, 0x1234)  /* Bare keeps the PPN */
  csrw satp, zero
#else
  CHECK(1); li t0, 9; slli t0, t0, 60; csrw satp, t0; csrr t0, satp; EXPECT(t0, 0)   /* Sv48: no effect */
  /* The tables: root[2] a 1 GiB page at 0x80000000 (RWX, A, D) for the
   * code; root[1] -> l1; l1[0] -> l0; l1[1] a misaligned 2 MiB leaf. */
  la a0, root; la a1, l1; la a2, l0
  li t0, 0x80000000; PTE(t0, 0xcf); sd t0, 16(a0)
  mv t0, a1; PTE(t0, 0x01); sd t0, 8(a0)
  mv t0, a2; PTE(t0, 0x01); sd t0, 0(a1)
  la t0, data_a; PTE(t0, 0xc7); sd t0, 8(a1)
  /* l0: A RW A D; B R A; C RW (A clear); D RW A (D clear); E U RW A D;
   * F X A; G invalid; H U RX A (code_u). */
  la t0, data_a; PTE(t0, 0xc7); sd t0, 0(a2)
  la t0, data_a; PTE(t0, 0x43); sd t0, 8(a2)
  la t0, data_a; PTE(t0, 0x07); sd t0, 16(a2)
  la t0, data_a; PTE(t0, 0x47); sd t0, 24(a2)
  la t0, data_a; PTE(t0, 0xd7); sd t0, 32(a2)
  la t0, data_a; PTE(t0, 0x49); sd t0, 40(a2)
  sd zero, 48(a2)
  la t0, code_u; PTE(t0, 0x5b); sd t0, 56(a2)
  CHECK(2); li t1, 8; slli t1, t1, 60; srli t0, a0, 12; or t1, t1, t0; csrw satp, t1; csrr t0, satp
  EXPECT_REG(t0, t1)
  /* S through page A, read back through its alias B. */
  CHECK(3); EXPECT_TRAP(9, 1f); ENTER_S(2f)
2: li a3, VA(0); li t1, 0x1234; sd t1, 0(a3); li a4, VA(1); ld t0, 0(a4)
  .global s_mode_stored      /* (for the GDB test: memory there is virtual) */
s_mode_stored: ecall
1: EXPECT(t0, 0x1234); la t1, data_a; ld t0, 0(t1); EXPECT(t0, 0x1234)
  CHECK(4); EXPECT_TRAP(15, 1f); ENTER_S(2f)                 /* B is read-only */
2: li a4, VA(1); sd zero, 0(a4); j test_fail
1: EXPECT(s9, VA(1))
  CHECK(5); EXPECT_TRAP(13, 1f); ENTER_S(2f)                 /* C: A clear */
2: li a4, VA(2); ld t0, 0(a4); j test_fail
1: EXPECT(s9, VA(2))
  CHECK(6); EXPECT_TRAP(15, 1f); ENTER_S(2f)                 /* D: a load is fine, a store faults (D clear) */
2: li a4, VA(3); ld t0, 0(a4); sd t0, 0(a4); j test_fail
1: EXPECT(s9, VA(3)); EXPECT(t0, 0x1234)
  CHECK(7); EXPECT_TRAP(13, 1f); ENTER_S(2f)                 /* E: a U page; S loads fault without SUM */
2: li a4, VA(4); ld t0, 0(a4); j test_fail
1:
  CHECK(8); li t0, SUM; csrs mstatus, t0; EXPECT_TRAP(9, 1f); ENTER_S(2f)
2: li a4, VA(4); li t0, 0; ld t0, 0(a4); ecall
1: EXPECT(t0, 0x1234)
  CHECK(9); EXPECT_TRAP(12, 1f); ENTER_S(2f)                 /* S never executes from a U page */
2: li a4, VA(4); jr a4
1: EXPECT(s9, VA(4)); li t0, SUM; csrc mstatus, t0
  CHECK(10); EXPECT_TRAP(13, 1f); ENTER_S(2f)                /* F: execute-only; MXR makes it readable */
2: li a4, VA(5); ld t0, 0(a4); j test_fail
1:
  CHECK(11); li t0, MXR; csrs mstatus, t0; EXPECT_TRAP(9, 1f); ENTER_S(2f)
2: li a4, VA(5); li t0, 0; ld t0, 0(a4); ecall
1: EXPECT(t0, 0x1234); li t0, MXR; csrc mstatus, t0
  CHECK(12); EXPECT_TRAP(13, 1f); ENTER_S(2f)                /* G: invalid */
2: li a4, VA(6); ld t0, 0(a4); j test_fail
1: EXPECT(s9, VA(6))
  CHECK(13); EXPECT_TRAP(13, 1f); ENTER_S(2f)                /* a misaligned 2 MiB page */
2: li a4, 0x40200000; ld t0, 0(a4); j test_fail
1: EXPECT(s9, 0x40200000)
  CHECK(14); EXPECT_TRAP(13, 1f); ENTER_S(2f)                /* not canonical: bit 38 set, 63..39 clear */
2: li a4, 0x4000000000; ld t0, 0(a4); j test_fail
1:
  /* U fetches from its own page H; not from the code's page (no U bit). */
  CHECK(15); EXPECT_TRAP(8, 1f); ENTER_S(2f)
2: S_ENTER_U(VA(7))
1: EXPECT(s7, VA(7))
  CHECK(16); EXPECT_TRAP(12, 1f); ENTER_S(2f)
2: la a5, 3f; csrw sepc, a5; li t0, 0x120; csrc sstatus, t0; sret
3: j test_fail
1: la t1, 3b; EXPECT_REG(s9, t1)
  /* MPRV with MPP = S: M's loads and stores translate. */
  CHECK(17); li t0, MPRV | 0x800; csrs mstatus, t0; li t0, 0x1000; csrc mstatus, t0; li a4, VA(0); ld t0, 0(a4)
  li t1, MPRV; csrc mstatus, t1; EXPECT(t0, 0x1234)
  /* A PTE changed: SFENCE.VMA, then the new frame. */
  CHECK(18); la t1, data_b; li t0, 0x5678; sd t0, 0(t1); la t0, data_b; PTE(t0, 0xc7); sd t0, 0(a2)
  EXPECT_TRAP(9, 1f); ENTER_S(2f)
2: sfence.vma; li a4, VA(0); ld t0, 0(a4); ecall
1: EXPECT(t0, 0x5678)
  /* A load page fault delegated to S. */
  CHECK(19); la t0, s_trap; csrw stvec, t0; li t0, 1 << 13; csrw medeleg, t0; EXPECT_TRAP(9, 1f); ENTER_S(2f)
2: li s10, 13; la s8, 3f; li a4, VA(2); ld t0, 0(a4); j test_fail
3: csrr t0, scause; EXPECT(t0, 13); EXPECT(s9, VA(2)); li s10, 9; la s8, 1f; ecall
1: csrw medeleg, zero
  /* Bare again: S accesses are physical. */
  CHECK(20); csrw satp, zero; EXPECT_TRAP(9, 1f); ENTER_S(2f)
2: la a4, data_b; ld t0, 0(a4); ecall
1: EXPECT(t0, 0x5678)
#endif
TEST_END

S_TRAP_HANDLER

  .section .text.upage, "ax"
  .align 12
code_u:                       /* U mode's page (H) */
  ecall
  j code_u

  .data
  .align 12
root: .space 4096
l1: .space 4096
l0: .space 4096
data_a: .space 4096
data_b: .space 4096
