/* Start-up code of a tile kernel: stack, .bss, the fault handler, the
 * core's interrupt enabled in mie only (wfi wakes, no trap is taken), then
 * main(); its return value goes to CORE_EXIT, which stops the core. Any
 * trap is a fault: mepc, mtval and mcause go to CORE_FAULT_*, the last
 * write stops the core. */
#include "tile_regs.h"

#define TK_REGS 0x01000000

  .section .text.start, "ax"
  .globl _start
_start:
  .option push
  .option norelax
  la gp, __global_pointer$
  .option pop
  la sp, __stack_top
  la t0, __bss_start
  la t1, __bss_end
1:
  bgeu t0, t1, 2f
  sw zero, 0(t0)
  addi t0, t0, 4
  j 1b
2:
  la t0, tk_fault
  csrw mtvec, t0
  li t0, 0x800
  csrw mie, t0
  call main
  li t0, TK_REGS
  sw a0, TILE_CORE_EXIT_OFFSET(t0)
3:
  j 3b

  .align 2
tk_fault:
  li t0, TK_REGS
  csrr t1, mepc
  sw t1, TILE_CORE_FAULT_PC_OFFSET(t0)
  csrr t1, mtval
  sw t1, TILE_CORE_FAULT_TVAL_OFFSET(t0)
  csrr t1, mcause
  sw t1, TILE_CORE_FAULT_CAUSE_OFFSET(t0)
4:
  j 4b
