/* The host rings, the CP answers: each request is a doorbell with words in
 * the mailbox; the firmware sends every word back plus one and rings the
 * host. Sleeps in wfi between requests (interrupt-driven through the PLIC).
 * Ends after three requests. */
#include <stdio.h>

#include "bsp.h"

static volatile bool bell;

static void on_mailbox(unsigned source) {
  (void)source;
  mailbox_acknowledge(mailbox_doorbells());
  bell = true;
}

int main(void) {
  uart_init();
  trap_set_external_handler(TESSERA_MAILBOX_IRQ, on_mailbox);
  plic_enable(TESSERA_MAILBOX_IRQ, 1);
  mailbox_enable_irq(true, false);
  csr_set(mie, MIP_MEIP);
  unsigned served = 0;
  while (served < 3) {
    /* Sleep with interrupts masked so a doorbell between the check and the
     * wfi still wakes us; it is taken once they are unmasked. */
    while (!bell) {
      __asm__ volatile("wfi");
      csr_set(mstatus, MSTATUS_MIE);
      csr_clear(mstatus, MSTATUS_MIE);
    }
    bell = false;
    for (uint32_t w; mailbox_receive(&w);) mailbox_send(w + 1);
    mailbox_ring(1);
    ++served;
  }
  printf("mailbox: served %u requests\n", served);
  return 0;
}
