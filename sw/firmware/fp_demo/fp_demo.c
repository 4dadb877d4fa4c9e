/* Floating point on the CP, built as any RV64GC firmware is (hard-float
 * ABI, picolibc's printf and libm): correctly rounded operations, the
 * rounding modes and exception flags through <fenv.h>, and timer
 * interrupts whose handler computes in FP while main does, which the
 * BSP's trap entry must keep apart. */
#include <fenv.h>
#include <math.h>
#include <stdio.h>

#include "bsp.h"

#define TICK (TESSERA_CLINT_TIMEBASE_HZ / 100000u) /* 10 us */

static volatile unsigned ticks;
static volatile double handler_acc = 1.0;

static void on_timer(void) {
  handler_acc = handler_acc * 1.0000001 + 0.5; /* FP registers in the handler */
  ++ticks;
  clint_set_timer(ticks < 20 ? clint_mtime() + TICK : UINT64_MAX);
}

/* The harmonic sum, in order: the same on every IEEE 754 machine. */
__attribute__((noinline)) static double harmonic(unsigned n) {
  double s = 0;
  for (unsigned i = 1; i <= n; ++i) s += 1.0 / i;
  return s;
}

int main(void) {
  uart_init();
  volatile double two = 2, one = 1, three = 3;
  printf("sqrt(2) = %.17g\n", sqrt(two));
  printf("1/3 = %.17g, as float %.9g\n", one / three, (double)((float)one / (float)three));
  fesetround(FE_UPWARD);
  printf("1/3 rounded up = %.17g\n", one / three);
  fesetround(FE_TONEAREST);
  feclearexcept(FE_ALL_EXCEPT);
  volatile double r = one / three;
  (void)r;
  printf("inexact %d, overflow %d\n", fetestexcept(FE_INEXACT) != 0, fetestexcept(FE_OVERFLOW) != 0);
  printf("exp(1) = %.15g, sin(1) = %.15g\n", exp(one), sin(one));

  /* The same sum without and with interrupts in between. */
  const double quiet = harmonic(20000);
  trap_set_timer_handler(on_timer);
  clint_set_timer(clint_mtime() + TICK);
  csr_set(mie, MIP_MTIP);
  csr_set(mstatus, MSTATUS_MIE);
  double noisy = 0;
  while (ticks < 20) noisy = harmonic(20000);
  csr_clear(mstatus, MSTATUS_MIE);
  printf("H(20000) = %.17g, %s with %u interrupts\n", quiet, noisy == quiet ? "the same" : "DIFFERENT", ticks);
  return noisy == quiet ? 0 : 1;
}
