/* Firmware that misbehaves on purpose, one way per build (MISBEHAVE):
 *   1 jump into unmapped memory      -> instruction access fault
 *   2 store to the boot ROM          -> store access fault
 *   3 an illegal-instruction storm   -> 1000 traps, each skipped by the
 *                                       firmware's own handler, then exit 0
 * Faults 1 and 2 reach the BSP's handler, which reports them and exits
 * with 0x80 + cause; the simulator only ever sees a clean run. */
#include <stdio.h>

#include "bsp.h"

static unsigned skipped;

static bool __attribute__((unused)) skip_illegal(struct trap_frame* f) {
  if (f->mcause != 2) return false;
  ++skipped;
  f->mepc += (f->mtval & 3) == 3 ? 4 : 2;
  return true;
}

int main(void) {
  uart_init();
#if MISBEHAVE == 1
  printf("jumping into nothing\n");
  ((void (*)(void))0x40000000)();
#elif MISBEHAVE == 2
  printf("storing to the boot ROM\n");
  *(volatile uint32_t*)TESSERA_BOOTROM_BASE = 1;
#elif MISBEHAVE == 3
  trap_set_exception_handler(skip_illegal);
  for (int i = 0; i < 1000; ++i) __asm__ volatile(".word 0xffffffff");
  printf("survived %u illegal instructions\n", skipped);
  return skipped == 1000 ? 0 : 1;
#endif
  return 0;
}
