/* PMP: 16 entries (pmpaddr16 and up read 0; odd pmpcfg are illegal on
 * RV64), R=0 W=1 reserved, NA4, TOR and NAPOT regions enforced on U's
 * loads, stores and fetches (access faults with the address in mtval),
 * an access partly inside an entry, no matching entry (S/U fail, M
 * succeeds), MPRV applying U's permissions to M's data accesses, X taken
 * from code U has already run, and a
 * locked entry that binds M and ignores writes (last: locks hold until
 * reset).
 *
 * Entries: 0 OFF with pmpaddr0 = nx_page (the base of TOR entry 1);
 * 1 TOR up to the end of nx_page, RW; 2 NA4 on word_ro, R; 3 NAPOT over
 * everything, RWX. */
#include "test.h"

#define NA4 0x10
#define TOR 0x08
#define NAPOT 0x18
#define LOCK 0x80
#define MPRV 0x20000

#define CFG_ENTRIES(e0, e1, e2, e3) li t0, (e0) | ((e1) << 8) | ((e2) << 16) | ((e3) << 24); csrw pmpcfg0, t0

TEST_BEGIN
  CHECK(1); li t1, 0x12345678; csrw pmpaddr15, t1; csrr t0, pmpaddr15; EXPECT_REG(t0, t1); csrw pmpaddr15, zero
#if __riscv_xlen == 64
  CHECK(2); EXPECT_TRAP(2, 1f); csrr t0, pmpcfg1; j test_fail
1:
#endif
  CHECK(3); li t1, 0x12345678; csrw 0x3c0, t1; csrr t0, 0x3c0; EXPECT(t0, 0)   /* pmpaddr16: not implemented */
  /* R=0 W=1 is reserved: W is dropped (entry 4, in pmpcfg1 on RV32, pmpcfg0 on RV64). */
#if __riscv_xlen == 64
  CHECK(4); li t0, 0x1e << 32; csrs pmpcfg0, t0; csrr t0, pmpcfg0; srli t0, t0, 32; andi t0, t0, 0xff; EXPECT(t0, 0x1c)
  li t0, 0xff << 32; csrc pmpcfg0, t0
#else
  CHECK(4); li t0, 0x1e; csrw pmpcfg1, t0; csrr t0, pmpcfg1; EXPECT(t0, 0x1c); csrw pmpcfg1, zero
#endif
  /* The regions. */
  la t0, nx_page; srli t0, t0, 2; csrw pmpaddr0, t0
  la t0, nx_page + 4096; srli t0, t0, 2; csrw pmpaddr1, t0
  la t0, word_ro; srli t0, t0, 2; csrw pmpaddr2, t0
  li t0, -1; csrw pmpaddr3, t0
  CFG_ENTRIES(0, TOR | 3, NA4 | 1, NAPOT | 7)
  CHECK(5); EXPECT_TRAP(8, 1f); ENTER_U(2f)                 /* U: RW in nx_page, R on word_ro */
2: la a0, nx_page; li t1, 77; sw t1, 8(a0); lw t0, 8(a0); la a1, word_ro; lw t2, 0(a1); ecall
1: EXPECT(t0, 77); EXPECT(t2, 0x5a5a5a5a)
  CHECK(6); EXPECT_TRAP(7, 1f); ENTER_U(2f)                 /* U may not store to word_ro */
2: la a1, word_ro; sw zero, 0(a1); j test_fail
1: la t1, word_ro; EXPECT_REG(s9, t1)
  CHECK(7); EXPECT_TRAP(1, 1f); ENTER_U(2f)                 /* nor execute in nx_page */
2: la a0, nx_page; jr a0
1: la t1, nx_page; EXPECT_REG(s9, t1)
#if __riscv_xlen == 64
  CHECK(8); EXPECT_TRAP(5, 1f); ENTER_U(2f)                 /* 4 bytes in word_ro, 4 outside: fails */
2: la a1, word_ro; lh t0, 2(a1); lw t0, 4(a1); ld t0, 0(a1); j test_fail
1: la t1, word_ro; EXPECT_REG(s9, t1)
#endif
  CHECK(9); la a1, word_ro; li t1, 0x5a5a5a5a; sw t1, 0(a1); lw t0, 0(a1); EXPECT_REG(t0, t1)  /* M: not locked, allowed */
  /* MPRV with MPP = U: M's stores get U's permissions. */
  CHECK(10); li t0, MPRV; csrs mstatus, t0; li t0, 0x1800; csrc mstatus, t0; EXPECT_TRAP(7, 1f)
  la a1, word_ro; lw t2, 0(a1); sw zero, 0(a1); j test_fail
1: li t0, MPRV; csrc mstatus, t0; EXPECT(t2, 0x5a5a5a5a)
  /* No entry matches: U fails (its fetch, here), M succeeds. */
  CHECK(11); CFG_ENTRIES(0, TOR | 3, NA4 | 1, 0); EXPECT_TRAP(1, 1f); ENTER_U(2f)
2: j test_fail
1: la t1, 2b; EXPECT_REG(s9, t1); la a0, nx_page; lw t0, 8(a0); EXPECT(t0, 77)
  /* Code U has run loses X: the next run of the same instruction faults
   * (decoded instructions and remembered pages do not outlive a PMP write). */
  CHECK(12); CFG_ENTRIES(0, TOR | 3, NA4 | 1, NAPOT | 7); EXPECT_TRAP(8, 1f); ENTER_U(ucode)
1: la t0, ucode; srli t0, t0, 2; ori t0, t0, 0x1ff; csrw pmpaddr2, t0   /* NAPOT: ucode's 4 KiB page */
  CFG_ENTRIES(0, TOR | 3, NAPOT | 3, NAPOT | 7); EXPECT_TRAP(1, 1f); ENTER_U(ucode)
1: la t1, ucode; EXPECT_REG(s9, t1)
  la t0, word_ro; srli t0, t0, 2; csrw pmpaddr2, t0
  /* A locked entry binds M, and its configuration and address ignore writes. */
  CHECK(13); CFG_ENTRIES(0, TOR | 3, LOCK | NA4 | 1, NAPOT | 7); EXPECT_TRAP(7, 1f)
  la a1, word_ro; sw zero, 0(a1); j test_fail
1: CFG_ENTRIES(0, TOR | 3, NAPOT | 7, NAPOT | 7); csrr t0, pmpcfg0; srli t0, t0, 16; andi t0, t0, 0xff
  EXPECT(t0, LOCK | NA4 | 1)
  CHECK(14); csrr t1, pmpaddr2; csrw pmpaddr2, zero; csrr t0, pmpaddr2; EXPECT_REG(t0, t1)
TEST_END

  .data
  .align 12
nx_page: .space 4096
  .align 3
word_ro: .word 0x5a5a5a5a, 0

  .section .text.ucode, "ax"
  .align 12
ucode:
  ecall
  .align 12
