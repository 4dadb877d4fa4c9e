/* Drivers for the T1's standard peripherals, on the generated headers. */
#include "bsp.h"
#include "clint_regs.h"
#include "mailbox_regs.h"
#include "plic_regs.h"
#include "uart16550_regs.h"

#define UART(reg) (TESSERA_UART0_BASE + UART16550_##reg##_OFFSET)

void uart_init(void) {
  mmio_write8(UART(LCR), UART16550_LCR_DLAB_MASK | 3); /* 8N1, divisor follows */
  mmio_write8(UART(DLL), 1);
  mmio_write8(UART(DLM), 0);
  mmio_write8(UART(LCR), 3);
  mmio_write8(UART(FCR), UART16550_FCR_FIFOE_MASK | UART16550_FCR_RFIFOR_MASK | UART16550_FCR_XFIFOR_MASK);
}

void uart_putc(char c) {
  while (!(mmio_read8(UART(LSR)) & UART16550_LSR_THRE_MASK)) {
  }
  mmio_write8(UART(THR), (uint8_t)c);
}

bool uart_rx_ready(void) { return mmio_read8(UART(LSR)) & UART16550_LSR_DR_MASK; }

int uart_getc(void) {
  while (!uart_rx_ready()) {
  }
  return mmio_read8(UART(RBR));
}

void uart_enable_rx_irq(bool on) { mmio_write8(UART(IER), on ? UART16550_IER_ERBFI_MASK : 0); }

uint64_t clint_mtime(void) {
#if __riscv_xlen == 64
  return *(volatile uint64_t*)(TESSERA_CLINT_BASE + CLINT_MTIME_OFFSET);
#else
  uint32_t hi, lo;
  do {
    hi = mmio_read32(TESSERA_CLINT_BASE + CLINT_MTIME_OFFSET + 4);
    lo = mmio_read32(TESSERA_CLINT_BASE + CLINT_MTIME_OFFSET);
  } while (hi != mmio_read32(TESSERA_CLINT_BASE + CLINT_MTIME_OFFSET + 4));
  return ((uint64_t)hi << 32) | lo;
#endif
}

void clint_set_timer(uint64_t when) {
  const uintptr_t cmp = TESSERA_CLINT_BASE + CLINT_MTIMECMP_OFFSET;
#if __riscv_xlen == 64
  *(volatile uint64_t*)cmp = when;
#else
  mmio_write32(cmp + 4, 0xffffffffu); /* no spurious match while the halves change */
  mmio_write32(cmp, (uint32_t)when);
  mmio_write32(cmp + 4, (uint32_t)(when >> 32));
#endif
}

void plic_enable(unsigned source, unsigned priority) {
  mmio_write32(TESSERA_PLIC_BASE + PLIC_PRIORITY_OFFSET + 4 * source, priority);
  const uintptr_t en = TESSERA_PLIC_BASE + PLIC_ENABLE_OFFSET + 4 * (source / 32);
  mmio_write32(en, mmio_read32(en) | (1u << (source % 32)));
}

unsigned plic_claim(void) { return mmio_read32(TESSERA_PLIC_BASE + PLIC_CLAIM_OFFSET); }

void plic_complete(unsigned source) { mmio_write32(TESSERA_PLIC_BASE + PLIC_CLAIM_OFFSET, source); }

#define MAILBOX(reg) (TESSERA_MAILBOX_BASE + MAILBOX_##reg##_OFFSET)

bool mailbox_send(uint32_t word) {
  if (mmio_read32(MAILBOX(STATUS)) & MAILBOX_STATUS_TX_FULL_MASK) return false;
  mmio_write32(MAILBOX(TX_DATA), word);
  return true;
}

bool mailbox_receive(uint32_t* word) {
  if (mmio_read32(MAILBOX(STATUS)) & MAILBOX_STATUS_RX_EMPTY_MASK) return false;
  *word = mmio_read32(MAILBOX(RX_DATA));
  return true;
}

void mailbox_ring(uint32_t doorbells) { mmio_write32(MAILBOX(DOORBELL_RING), doorbells); }
uint32_t mailbox_doorbells(void) { return mmio_read32(MAILBOX(DOORBELL)); }
void mailbox_acknowledge(uint32_t doorbells) { mmio_write32(MAILBOX(DOORBELL), doorbells); }

void mailbox_enable_irq(bool doorbell, bool rx_not_empty) {
  mmio_write32(MAILBOX(IRQ_ENABLE), (doorbell ? MAILBOX_IRQ_ENABLE_DOORBELL_MASK : 0) |
                                        (rx_not_empty ? MAILBOX_IRQ_ENABLE_RX_NOT_EMPTY_MASK : 0));
}
