/* Trap entry: saves every register in a struct trap_frame on the stack,
 * calls trap_handler(frame) in C, restores (mepc may have been changed)
 * and returns with mret. Works for RV32 and RV64. Built with F/D, it also
 * saves what C handlers may change there: the caller-saved FP registers
 * and fcsr, after the frame. */
#if __riscv_xlen == 64
#define REG_S sd
#define REG_L ld
#define REGBYTES 8
#else
#define REG_S sw
#define REG_L lw
#define REGBYTES 4
#endif
#ifdef __riscv_flen
#define FP_AREA (36 * REGBYTES)
#define FRAME ((36 * REGBYTES + 21 * 8 + 15) & ~15)
/* ft0-ft7 (f0-f7), fa0-fa7 (f10-f17), ft8-ft11 (f28-f31). */
#define FP_REGS(X) X(0, f0) X(1, f1) X(2, f2) X(3, f3) X(4, f4) X(5, f5) X(6, f6) X(7, f7) \
  X(8, f10) X(9, f11) X(10, f12) X(11, f13) X(12, f14) X(13, f15) X(14, f16) X(15, f17) \
  X(16, f28) X(17, f29) X(18, f30) X(19, f31)
#define FSAVE(i, f) fsd f, FP_AREA + i * 8(sp);
#define FLOAD(i, f) fld f, FP_AREA + i * 8(sp);
#else
#define FRAME (36 * REGBYTES)
#endif

	.section .text.trap, "ax"
	.align	4
	.global trap_entry
trap_entry:
	addi	sp, sp, -FRAME
	REG_S	x1, 1*REGBYTES(sp)
	REG_S	x3, 3*REGBYTES(sp)
	REG_S	x4, 4*REGBYTES(sp)
	REG_S	x5, 5*REGBYTES(sp)
	addi	x5, sp, FRAME
	REG_S	x5, 2*REGBYTES(sp)
	REG_S	x6, 6*REGBYTES(sp)
	REG_S	x7, 7*REGBYTES(sp)
	REG_S	x8, 8*REGBYTES(sp)
	REG_S	x9, 9*REGBYTES(sp)
	REG_S	x10, 10*REGBYTES(sp)
	REG_S	x11, 11*REGBYTES(sp)
	REG_S	x12, 12*REGBYTES(sp)
	REG_S	x13, 13*REGBYTES(sp)
	REG_S	x14, 14*REGBYTES(sp)
	REG_S	x15, 15*REGBYTES(sp)
	REG_S	x16, 16*REGBYTES(sp)
	REG_S	x17, 17*REGBYTES(sp)
	REG_S	x18, 18*REGBYTES(sp)
	REG_S	x19, 19*REGBYTES(sp)
	REG_S	x20, 20*REGBYTES(sp)
	REG_S	x21, 21*REGBYTES(sp)
	REG_S	x22, 22*REGBYTES(sp)
	REG_S	x23, 23*REGBYTES(sp)
	REG_S	x24, 24*REGBYTES(sp)
	REG_S	x25, 25*REGBYTES(sp)
	REG_S	x26, 26*REGBYTES(sp)
	REG_S	x27, 27*REGBYTES(sp)
	REG_S	x28, 28*REGBYTES(sp)
	REG_S	x29, 29*REGBYTES(sp)
	REG_S	x30, 30*REGBYTES(sp)
	REG_S	x31, 31*REGBYTES(sp)
	csrr	t0, mepc
	REG_S	t0, 32*REGBYTES(sp)
	csrr	t0, mcause
	REG_S	t0, 33*REGBYTES(sp)
	csrr	t0, mtval
	REG_S	t0, 34*REGBYTES(sp)
#ifdef __riscv_flen
	FP_REGS(FSAVE)
	frcsr	t0
	sw	t0, FP_AREA + 20 * 8(sp)
#endif
	mv	a0, sp
	call	trap_handler
#ifdef __riscv_flen
	FP_REGS(FLOAD)
	lw	t0, FP_AREA + 20 * 8(sp)
	fscsr	t0
#endif
	REG_L	t0, 32*REGBYTES(sp)
	csrw	mepc, t0
	REG_L	x1, 1*REGBYTES(sp)
	REG_L	x3, 3*REGBYTES(sp)
	REG_L	x4, 4*REGBYTES(sp)
	REG_L	x5, 5*REGBYTES(sp)
	REG_L	x6, 6*REGBYTES(sp)
	REG_L	x7, 7*REGBYTES(sp)
	REG_L	x8, 8*REGBYTES(sp)
	REG_L	x9, 9*REGBYTES(sp)
	REG_L	x10, 10*REGBYTES(sp)
	REG_L	x11, 11*REGBYTES(sp)
	REG_L	x12, 12*REGBYTES(sp)
	REG_L	x13, 13*REGBYTES(sp)
	REG_L	x14, 14*REGBYTES(sp)
	REG_L	x15, 15*REGBYTES(sp)
	REG_L	x16, 16*REGBYTES(sp)
	REG_L	x17, 17*REGBYTES(sp)
	REG_L	x18, 18*REGBYTES(sp)
	REG_L	x19, 19*REGBYTES(sp)
	REG_L	x20, 20*REGBYTES(sp)
	REG_L	x21, 21*REGBYTES(sp)
	REG_L	x22, 22*REGBYTES(sp)
	REG_L	x23, 23*REGBYTES(sp)
	REG_L	x24, 24*REGBYTES(sp)
	REG_L	x25, 25*REGBYTES(sp)
	REG_L	x26, 26*REGBYTES(sp)
	REG_L	x27, 27*REGBYTES(sp)
	REG_L	x28, 28*REGBYTES(sp)
	REG_L	x29, 29*REGBYTES(sp)
	REG_L	x30, 30*REGBYTES(sp)
	REG_L	x31, 31*REGBYTES(sp)
	REG_L	x2, 2*REGBYTES(sp)
	mret
