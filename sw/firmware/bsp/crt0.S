/* Reset entry of CP firmware: global pointer, stack, trap vector, data
 * copied from its load address, bss cleared, thread pointer for picolibc's
 * TLS, then main() and exit() with its result. */
	.section .text.init.enter, "ax"
	.global _start
_start:
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
