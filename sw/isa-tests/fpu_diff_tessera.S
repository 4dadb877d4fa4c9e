/* fpu_diff on the virtual CP: M mode, the FPU switched on (mstatus.FS),
 * output on the UART, the exit code through the test finisher. */
#include "tessera_platform.h"
  .section .text.init, "ax"
  .global _start
_start:
  la sp, stack_top
  li t0, 0x2000
  csrs mstatus, t0
  call run
  tail stop

  .text
  .global put
put:                      /* a0: bytes, a1: how many */
  li t0, TESSERA_UART0_BASE
1:beqz a1, 3f
2:lbu t1, 5(t0)           /* LSR: wait for THRE */
  andi t1, t1, 0x20
  beqz t1, 2b
  lbu t1, 0(a0)
  sb t1, 0(t0)
  addi a0, a0, 1
  addi a1, a1, -1
  j 1b
3:ret

  .global stop
stop:                     /* SiFive test finisher: pass, or (code << 16) | fail */
  li t0, TESSERA_FINISHER_BASE
  li t1, 0x5555
  beqz a0, 1f
  slli t1, a0, 16
  li t2, 0x3333
  or t1, t1, t2
1:sw t1, 0(t0)
2:wfi
  j 2b

  .bss
  .align 4
  .space 16384
stack_top:
