/* A small program for debugger tests: a function to step into, a loop,
 * and a global to watch. */
#include <stdio.h>

#include "bsp.h"

volatile int counter;

static int __attribute__((noinline)) square(int x) { return x * x; }

int main(void) {
  uart_init();
  int total = 0;
  for (int i = 0; i < 5; ++i) {
    total += square(i);
    counter = total;
  }
  printf("gdb demo: total %d\n", total);
  return total == 30 ? 0 : 1;
}
