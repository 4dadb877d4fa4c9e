/* Firmware of your own: it copies 4 KiB within HBM and times it on the
 * CLINT, then sleeps 50 us in wfi until a timer interrupt wakes it, and
 * checks that the time it slept is what it asked for. The exit code is
 * the result (0: passed). */
#include <stdio.h>
#include <string.h>

#include "bsp.h"

#define US (TESSERA_CLINT_TIMEBASE_HZ / 1000000u) /* mtime ticks per microsecond */

static volatile bool woke;

static void on_timer(void) {
  woke = true;
  clint_set_timer(UINT64_MAX);
}

int main(void) {
  uart_init();
  uint8_t* hbm = (uint8_t*)(uintptr_t)TESSERA_HBM0_BASE;
  for (unsigned i = 0; i < 4096; ++i) hbm[i] = (uint8_t)i;
  const uint64_t t0 = clint_mtime();
  memcpy(hbm + 8192, hbm, 4096);
  const uint64_t t1 = clint_mtime();
  if (memcmp(hbm + 8192, hbm, 4096) != 0) return 1;
  printf("sleepy: 4 KiB copied within HBM in %lu us\n", (unsigned long)((t1 - t0) / US));

  trap_set_timer_handler(on_timer);
  const uint64_t start = clint_mtime();
  csr_clear(mstatus, MSTATUS_MIE);
  clint_set_timer(start + 50 * US);
  csr_set(mie, MIP_MTIP);
  while (!woke) {
    __asm__ volatile("wfi");
    csr_set(mstatus, MSTATUS_MIE); /* take the interrupt */
    csr_clear(mstatus, MSTATUS_MIE);
  }
  const uint64_t slept = (clint_mtime() - start) / US;
  printf("sleepy: slept %lu us on a 50 us timer\n", (unsigned long)slept);
  return slept >= 50 && slept < 60 ? 0 : 2;
}
