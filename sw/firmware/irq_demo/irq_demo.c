/* Interrupt-driven firmware: timer ticks from the CLINT every 100 us and
 * UART receive interrupts through the PLIC; the core sleeps in wfi in
 * between. Ends after five ticks and one received line. */
#include <stdio.h>

#include "bsp.h"

#define TICK (TESSERA_CLINT_TIMEBASE_HZ / 10000u) /* mtime ticks in 100 us */

static volatile unsigned ticks;
static char line[80];
static volatile unsigned length;
static volatile bool line_done;

static void on_timer(void) {
  ++ticks;
  printf("tick %u\n", ticks);
  clint_set_timer(ticks < 5 ? clint_mtime() + TICK : UINT64_MAX);
}

static void on_uart(unsigned source) {
  (void)source;
  while (uart_rx_ready()) {
    const char c = (char)uart_getc();
    if (c == '\n') line_done = true;
    else if (length < sizeof line - 1) line[length++] = c;
  }
}

int main(void) {
  uart_init();
  printf("irq demo: waiting for 5 timer ticks and a line on the UART\n");
  trap_set_timer_handler(on_timer);
  trap_set_external_handler(TESSERA_UART0_IRQ, on_uart);
  plic_enable(TESSERA_UART0_IRQ, 1);
  uart_enable_rx_irq(true);
  clint_set_timer(clint_mtime() + TICK);
  csr_set(mie, MIP_MTIP | MIP_MEIP);
  csr_set(mstatus, MSTATUS_MIE);
  while (ticks < 5 || !line_done) __asm__ volatile("wfi");
  csr_clear(mstatus, MSTATUS_MIE);
  line[length] = 0;
  printf("received: %s\n", line);
  return 0;
}
