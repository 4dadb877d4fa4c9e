/* The first thing the T1 runs: greet on the UART, say who is running, end
 * the run with exit code 0. */
#include <stdio.h>

#include "bsp.h"

int main(void) {
  uart_init();
  const unsigned long misa = csr_read(misa);
  char ext[27] = {0};
  for (int i = 0, n = 0; i < 26; ++i)
    if (misa & (1ul << i)) ext[n++] = (char)('A' + i);
  printf("Hello from the Tessera T1 control processor!\n");
  printf("hart %lu, RV%d%s, running at mtime %llu\n", csr_read(mhartid), __riscv_xlen, ext,
         (unsigned long long)clint_mtime());
  return 0;
}
