/* F and D: mstatus.FS (off: every FP instruction and FP CSR is illegal;
 * writes make it dirty, with SD), fcsr/frm/fflags, reserved rounding modes
 * in the instruction and in frm, loads, stores and moves that keep NaN
 * payloads, NaN boxing, fflags accumulating, the saturating conversions,
 * and the compressed FP loads and stores. The arithmetic itself is
 * compared with QEMU's bit for bit (fpu_diff.c). Run three times: with
 * F and D (the default), with F only (cp.extensions=imafc) and without
 * (imac), reading misa to know which. */
#include "test.h"

#define FS_INITIAL 0x2000
#define FS_MASK 0x6000

/* Loads the 32-bit pattern `v` into f register `f` (through memory: the
 * same on RV32 and RV64). */
#define FLI_S(f, v) li t1, v; la t2, scratch; sw t1, 0(t2); flw f, 0(t2)
/* The low and high words of a 64-bit f register into t0 and t1. */
#define FGET(f) la t2, scratch; fsd f, 0(t2); lw t0, 0(t2); lw t1, 4(t2)

TEST_BEGIN
  csrr s0, misa
  andi s1, s0, 0x20          /* F */
  andi s2, s0, 0x08          /* D */
  beqz s1, no_f

  /* FS is off at reset: FP instructions and FP CSRs are illegal. */
  CHECK(1); EXPECT_TRAP(2, 1f); 2: fadd.s ft0, ft1, ft2; j test_fail
1: la t1, 2b; lhu t2, 0(t1); lhu t3, 2(t1); slli t3, t3, 16; or t2, t2, t3; EXPECT_REG(s9, t2)
  CHECK(2); EXPECT_TRAP(2, 1f); csrr t0, fflags; j test_fail
1:
  CHECK(3); EXPECT_TRAP(2, 1f); flw ft0, 0(sp); j test_fail
1:
  /* Initial: usable, not dirty; an FP write makes it dirty, with SD. */
  CHECK(4); li t0, FS_INITIAL; csrs mstatus, t0; csrr t0, mstatus; li t1, FS_MASK; and t0, t0, t1
  EXPECT(t0, FS_INITIAL); csrr t0, mstatus; bltz t0, test_fail
  CHECK(5); csrr t0, fflags; csrr t0, mstatus; li t1, FS_MASK; and t0, t0, t1; EXPECT(t0, FS_INITIAL)  /* a read: clean */
  CHECK(6); fmv.w.x ft0, zero; csrr t0, mstatus; li t1, FS_MASK; and t0, t0, t1; EXPECT(t0, FS_MASK)
  csrr t0, mstatus; bgez t0, test_fail                                                       /* SD */
  CHECK(7); li t0, FS_MASK; csrc mstatus, t0; li t0, FS_INITIAL; csrs mstatus, t0; csrwi fflags, 0
  csrr t0, mstatus; li t1, FS_MASK; and t0, t0, t1; EXPECT(t0, FS_MASK)                      /* a CSR write: dirty */

  /* fcsr = frm << 5 | fflags. */
  CHECK(8); li t1, 0xff; csrw fcsr, t1; csrr t0, fflags; EXPECT(t0, 0x1f); csrr t0, frm; EXPECT(t0, 7)
  CHECK(9); csrwi frm, 2; csrr t0, fcsr; EXPECT(t0, 0x5f); csrrw t0, fcsr, zero; EXPECT(t0, 0x5f)
  csrr t0, fcsr; EXPECT(t0, 0)

  /* Rounding modes in the instruction and in frm; reserved ones are illegal. */
  FLI_S(fa0, 0x3f800000); FLI_S(fa1, 0x40400000)        /* 1.0f, 3.0f */
  CHECK(10); fdiv.s fa2, fa0, fa1, rne; fmv.x.w t0, fa2; EXPECT(t0, 0x3eaaaaab)
  CHECK(11); fdiv.s fa2, fa0, fa1, rtz; fmv.x.w t0, fa2; EXPECT(t0, 0x3eaaaaaa)
  CHECK(12); fdiv.s fa2, fa0, fa1, rdn; fmv.x.w t0, fa2; EXPECT(t0, 0x3eaaaaaa)
  CHECK(13); fdiv.s fa2, fa0, fa1, rup; fmv.x.w t0, fa2; EXPECT(t0, 0x3eaaaaab)
  CHECK(14); csrwi frm, 1; fdiv.s fa2, fa0, fa1; fmv.x.w t0, fa2; EXPECT(t0, 0x3eaaaaaa)     /* dynamic: RTZ */
  CHECK(15); EXPECT_TRAP(2, 1f); .word 0x0020d053; j test_fail   /* fadd.s ft0, ft1, ft2 with rm = 5 */
1: EXPECT(s9, 0x0020d053)
  CHECK(16); csrwi frm, 5; EXPECT_TRAP(2, 1f); fadd.s ft0, ft1, ft2; j test_fail
1: fsgnj.s ft0, ft1, ft2                                 /* no rounding: fine with frm = 5 */
  CHECK(17); csrwi frm, 7; EXPECT_TRAP(2, 1f); fcvt.w.s t0, fa0; j test_fail
1: csrwi frm, 0

  /* fflags accumulate until cleared. */
  CHECK(18); csrwi fflags, 0; fdiv.s fa2, fa0, fa1; csrr t0, fflags; EXPECT(t0, 0x01)        /* NX */
  FLI_S(fa3, 0)
  CHECK(19); fdiv.s fa2, fa0, fa3; csrr t0, fflags; EXPECT(t0, 0x09); fmv.x.w t0, fa2; EXPECT(t0, 0x7f800000)  /* DZ */
  CHECK(20); fdiv.s fa2, fa3, fa3; csrr t0, fflags; EXPECT(t0, 0x19); fmv.x.w t0, fa2; EXPECT(t0, 0x7fc00000)  /* NV */
  CHECK(21); csrrci t0, fflags, 0x1f; EXPECT(t0, 0x19); csrr t0, fflags; EXPECT(t0, 0)

  /* Loads, stores and moves keep the bits, NaN payloads included. */
  CHECK(22); FLI_S(ft4, 0x7f800001); la t2, scratch; fsw ft4, 8(t2); lw t0, 8(t2); EXPECT(t0, 0x7f800001)
  csrr t0, fflags; EXPECT(t0, 0)
  CHECK(23); fmv.x.w t0, ft4; EXPECT(t0, 0x7f800001)
  CHECK(24); li t1, 0xffc01234; fmv.w.x ft5, t1; fmv.x.w t0, ft5; EXPECT(t0, -0x3fedcc)  /* 0xffc01234 sign-extended */
  /* fsgnj.s of a signalling NaN moves it unchanged and raises nothing. */
  CHECK(25); fsgnjn.s ft6, ft4, ft4; fmv.x.w t0, ft6; EXPECT(t0, -0x7fffff)  /* 0xff800001 sign-extended */
  csrr t0, fflags; EXPECT(t0, 0)

  /* Saturating conversions. */
  CHECK(26); FLI_S(ft7, 0x7fc00000); fcvt.w.s t0, ft7; EXPECT(t0, 0x7fffffff); csrr t0, fflags; EXPECT(t0, 0x10)
  CHECK(27); csrwi fflags, 0; FLI_S(ft7, 0xbf800000); fcvt.wu.s t0, ft7; EXPECT(t0, 0); csrr t0, fflags; EXPECT(t0, 0x10)
  CHECK(28); csrwi fflags, 0; FLI_S(ft7, 0x4f800000); fcvt.wu.s t0, ft7; li t1, -1; EXPECT_REG(t0, t1)  /* 2^32: sign-extended all ones */
  csrwi fflags, 0

  beqz s2, f_only

  /* With D: binary32 values are NaN-boxed; an unboxed one reads as the canonical NaN. */
  CHECK(30); FLI_S(ft0, 0x3f800000); FGET(ft0); EXPECT(t0, 0x3f800000); EXPECT(t1, -1)
  CHECK(31); la t2, one_d; fld ft1, 0(t2); fadd.s ft2, ft1, ft1; fmv.x.w t0, ft2; EXPECT(t0, 0x7fc00000)
  csrr t0, fflags; EXPECT(t0, 0)
  CHECK(32); fcvt.s.d ft2, ft1; fmv.x.w t0, ft2; EXPECT(t0, 0x3f800000)
  CHECK(33); fcvt.d.s ft3, ft0; FGET(ft3); EXPECT(t0, 0); EXPECT(t1, 0x3ff00000)
  /* 0.1 rounds differently in binary32 by mode. */
  CHECK(34); la t2, tenth_d; fld ft1, 0(t2); fcvt.s.d ft2, ft1, rtz; fmv.x.w t0, ft2; EXPECT(t0, 0x3dcccccc)
  fcvt.s.d ft2, ft1, rne; fmv.x.w t0, ft2; EXPECT(t0, 0x3dcccccd); csrr t0, fflags; EXPECT(t0, 0x01)
  /* Compressed FP loads and stores (c.fld, c.fsd, c.fldsp, c.fsdsp). */
  CHECK(35); la a0, one_d; c.fld fs0, 0(a0); la a1, scratch; c.fsd fs0, 8(a1); lw t0, 12(a1); EXPECT(t0, 0x3ff00000)
  CHECK(36); la sp, stack_top; addi sp, sp, -16; c.fsdsp fs0, 0(sp); c.fldsp fs1, 0(sp); addi sp, sp, 16; FGET(fs1); EXPECT(t1, 0x3ff00000)
#if __riscv_xlen == 32
  /* RV32: c.flw and c.fsw. */
  CHECK(37); la a0, scratch; li t1, 0x40490fdb; sw t1, 0(a0); c.flw fs0, 0(a0); c.fsw fs0, 4(a0); lw t0, 4(a0)
  EXPECT(t0, 0x40490fdb)
#endif
  j test_pass

f_only:
  /* F without D: D instructions are illegal; FLEN is 32. */
  CHECK(40); EXPECT_TRAP(2, 1f); fadd.d ft0, ft1, ft2; j test_fail
1:
  CHECK(41); EXPECT_TRAP(2, 1f); fld ft0, 0(sp); j test_fail
1:
  CHECK(42); FLI_S(ft0, 0x3f800000); fadd.s ft1, ft0, ft0; fmv.x.w t0, ft1; EXPECT(t0, 0x40000000)
  j test_pass

no_f:
  /* Without F: FP instructions are illegal whatever mstatus says, and FS stays off. */
  CHECK(50); li t0, FS_MASK; csrs mstatus, t0; csrr t0, mstatus; li t1, FS_MASK; and t0, t0, t1; EXPECT(t0, 0)
  CHECK(51); EXPECT_TRAP(2, 1f); fadd.s ft0, ft1, ft2; j test_fail
1:
  CHECK(52); EXPECT_TRAP(2, 1f); csrr t0, fcsr; j test_fail
1:
  j test_pass
TEST_END

  .data
  .align 3
one_d: .dword 0x3ff0000000000000
tenth_d: .dword 0x3fb999999999999a
scratch: .dword 0, 0
  .space 64
stack_top:
