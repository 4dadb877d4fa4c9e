/* Zicsr: the six CSR instructions, machine information registers, access
 * rules (a CSR that does not exist, a write to a read-only CSR: illegal
 * instruction with the instruction in mtval), counters. */
#include "test.h"
TEST_BEGIN
  CHECK(1); li t1, 0x1234; csrw mscratch, t1; csrr t0, mscratch; EXPECT(t0, 0x1234)
  CHECK(2); li t1, 0x0f; csrrs t0, mscratch, t1; EXPECT(t0, 0x1234); csrr t0, mscratch; EXPECT(t0, 0x123f)
  CHECK(3); li t1, 0x30; csrrc t0, mscratch, t1; csrr t0, mscratch; EXPECT(t0, 0x120f)
  CHECK(4); csrrwi t0, mscratch, 5; EXPECT(t0, 0x120f); csrr t0, mscratch; EXPECT(t0, 5)
  CHECK(5); csrrsi t0, mscratch, 0x18; csrr t0, mscratch; EXPECT(t0, 0x1d)
  CHECK(6); csrrci t0, mscratch, 1; csrr t0, mscratch; EXPECT(t0, 0x1c)
  /* misa: MXL and the extensions A, C, D, F, I, M, U. */
#if __riscv_xlen == 64
  CHECK(7); csrr t0, misa; EXPECT(t0, 0x800000000010112d)
  CHECK(8); csrr t0, mstatus; srli t0, t0, 32; andi t0, t0, 3; EXPECT(t0, 2)  /* UXL = 64 */
#else
  CHECK(7); csrr t0, misa; EXPECT(t0, 0x4010112d)
#endif
  CHECK(9); csrr t0, mhartid; EXPECT(t0, 0)
  CHECK(10); csrr t0, mvendorid; EXPECT(t0, 0)
  /* misa is WARL: writes are ignored. */
  CHECK(11); csrr t1, misa; csrw misa, zero; csrr t0, misa; EXPECT_REG(t0, t1)
  /* mepc ignores bit 0; mtvec keeps mode 0 or 1. */
  CHECK(12); li t1, 0x80000003; csrw mepc, t1; csrr t0, mepc; EXPECT(t0, 0x80000002)
  CHECK(13); csrr a0, mtvec; li t1, 0x80000003; csrw mtvec, t1; csrr t0, mtvec; csrw mtvec, a0; EXPECT(t0, 0x80000000)
  /* Illegal: no such CSR (mtval holds the instruction), write to read-only. */
  CHECK(14); EXPECT_TRAP(2, 1f); 2: csrr t0, 0x7ff; j test_fail
1: la t1, 2b; EXPECT_REG(s7, t1); lhu t2, 0(t1); lhu t3, 2(t1); slli t3, t3, 16; or t2, t2, t3; EXPECT_REG(s9, t2)
  CHECK(15); EXPECT_TRAP(2, 1f); csrw mhartid, zero; j test_fail
1:
  CHECK(16); EXPECT_TRAP(2, 1f); csrw cycle, zero; j test_fail
1:
  CHECK(17); csrr t0, mhartid; csrrs t0, mhartid, zero   /* reading a read-only CSR is fine */
  /* Counters move forward; minstret counts instructions exactly. */
  CHECK(18); csrr t1, cycle; nop; nop; csrr t2, cycle; bleu t2, t1, test_fail
  CHECK(19); csrr t1, instret; nop; nop; csrr t2, instret; sub t0, t2, t1; EXPECT(t0, 3)
  CHECK(20); csrr t1, minstret; addi t0, t1, 0; EXPECT_REG(t0, t1)
  CHECK(21); li t1, 1000; csrw minstret, t1; csrr t0, minstret; EXPECT(t0, 1000)  /* the write wins over its own retirement */
  CHECK(22); csrr t1, time; li t0, 0; 1: addi t0, t0, 1; li t2, 2000; blt t0, t2, 1b; csrr t2, time; bleu t2, t1, test_fail
#if __riscv_xlen == 32
  CHECK(23); csrr t0, cycleh; csrr t0, mcycleh; csrr t0, timeh
#else
  CHECK(23); EXPECT_TRAP(2, 1f); csrr t0, cycleh; j test_fail
1:
#endif
  /* medeleg/mideleg exist as WARL zero. */
  CHECK(24); li t1, -1; csrw medeleg, t1; csrr t0, medeleg; EXPECT(t0, 0)
  /* mie keeps only the implemented interrupt bits; mip follows the lines. */
  CHECK(25); li t1, -1; csrw mie, t1; csrr t0, mie; EXPECT(t0, 0x888); csrw mie, zero
  CHECK(26); csrr t0, mip; EXPECT(t0, 0)
TEST_END
