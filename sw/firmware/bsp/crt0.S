/* Reset entry of CP firmware: the FPU (if built with one), global
 * pointer, stack, trap vector, data
 * copied from its load address, bss cleared, thread pointer for picolibc's
 * TLS, then main() and exit() with its result. */
	.section .text.init.enter, "ax"
	.global _start
_start:
#ifdef __riscv_flen
	/* Built with F/D: the FPU on (mstatus.FS = initial), fcsr cleared. */
	li	t0, 0x2000
	csrs	mstatus, t0
	fscsr	zero
#endif
	.option push
	.option norelax
	la	gp, __global_pointer$
	.option pop
	la	sp, __stack
	la	t0, trap_entry
	csrw	mtvec, t0
	la	a0, __data_start
	la	a1, __data_source
	la	a2, __data_size
	call	memcpy
	la	a0, __bss_start
	li	a1, 0
	la	a2, __bss_size
	call	memset
	la	tp, __tls_base
	call	main
	call	exit
1:	j	1b
