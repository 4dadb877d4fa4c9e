/* A kernel that misbehaves on request, for the runtime's and the
 * firmware's error paths. CORE_ARG[0] says how:
 *   0  return CORE_ARG[1] (a nonzero exit code is a kernel error)
 *   1  load from an address where nothing is (a load access fault)
 *   2  spin for ever (the watchdog's case)
 *   3  sleep in wfi for ever with nothing to wake it
 *   4  an illegal instruction
 *   5  write 1 + CORE_ARG[1] into word CORE_ARG[2] of this tile's
 *      scratchpad, then return 0 (a well-behaved kernel) */
#include "tessera_kernel.h"

int main(void) {
  switch (tk_arg(0)) {
    case 0: return (int)tk_arg(1);
    case 1: return (int)*(volatile uint32_t*)0x7ff00000u;
    case 2:
      for (;;) {
      }
    case 3:
      TK_W(CORE_IRQ_ENABLE, 0);
      for (;;) __asm__ volatile("wfi");
    case 4: __asm__ volatile(".word 0"); return 0;
    case 5: *(volatile uint32_t*)tk_ptr(4 * tk_arg(2)) = 1 + tk_arg(1); return 0;
    default: return 99;
  }
}
