/* A kernel to debug: fills a table in the scratchpad and sums it, for the
 * GDB test of the tile cores (tests/system/gdb_test.cpp).
 * CORE_EXIT: 0 when the sum is right (204), 1 otherwise. */
#include <stdint.h>

volatile uint32_t table[8];
volatile uint32_t total;

__attribute__((noinline)) static uint32_t square(uint32_t i) { return i * i; }

int main(void) {
  for (uint32_t i = 0; i < 8; ++i) table[i] = square(i + 1);
  uint32_t s = 0;
  for (uint32_t i = 0; i < 8; ++i) s += table[i];
  total = s;
  return s == 204 ? 0 : 1;
}
