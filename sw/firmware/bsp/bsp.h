/* Board support for CP firmware on the Tessera T1: MMIO access, the UART
 * (stdout and stdin through picolibc's tinystdio), CLINT timer, PLIC,
 * mailbox, trap dispatch and exit through the test finisher. Addresses and
 * register layouts come from generated headers: tessera_platform.h (from
 * platform/t1.json) and <block>_regs.h (from each IP's register
 * description). */
#ifndef TESSERA_BSP_H
#define TESSERA_BSP_H

#include <stdbool.h>
#include <stdint.h>

#include "tessera_platform.h"

static inline void mmio_write8(uintptr_t a, uint8_t v) { *(volatile uint8_t*)a = v; }
static inline uint8_t mmio_read8(uintptr_t a) { return *(volatile uint8_t*)a; }
static inline void mmio_write32(uintptr_t a, uint32_t v) { *(volatile uint32_t*)a = v; }
static inline uint32_t mmio_read32(uintptr_t a) { return *(volatile uint32_t*)a; }

#define csr_read(csr) ({ unsigned long v_; __asm__ volatile("csrr %0, " #csr : "=r"(v_)); v_; })
#define csr_write(csr, val) __asm__ volatile("csrw " #csr ", %0" ::"rK"(val))
#define csr_set(csr, val) __asm__ volatile("csrs " #csr ", %0" ::"rK"(val))
#define csr_clear(csr, val) __asm__ volatile("csrc " #csr ", %0" ::"rK"(val))

#define MSTATUS_MIE (1ul << 3)
#define MIP_MSIP (1ul << 3)
#define MIP_MTIP (1ul << 7)
#define MIP_MEIP (1ul << 11)

/* What trap_entry saves. */
struct trap_frame {
  uintptr_t x[32];
  uintptr_t mepc, mcause, mtval, pad;
};

/* UART */
void uart_init(void);
void uart_putc(char c);
bool uart_rx_ready(void);
int uart_getc(void); /* blocks */
void uart_enable_rx_irq(bool on);

/* CLINT */
uint64_t clint_mtime(void);
void clint_set_timer(uint64_t when); /* for hart 0 */

/* PLIC (context 0: hart 0, M mode) */
void plic_enable(unsigned source, unsigned priority);
unsigned plic_claim(void);
void plic_complete(unsigned source);

/* Mailbox (the CP's side): words to and from the host, doorbells. */
bool mailbox_send(uint32_t word);      /* false when the host's FIFO is full */
bool mailbox_receive(uint32_t* word);  /* false when nothing is waiting */
void mailbox_ring(uint32_t doorbells);
uint32_t mailbox_doorbells(void);      /* pending doorbells from the host */
void mailbox_acknowledge(uint32_t doorbells);
void mailbox_enable_irq(bool doorbell, bool rx_not_empty);

/* Traps: handlers the firmware installs. An exception handler returns
 * true if it dealt with the exception (it may change frame->mepc). */
typedef void (*irq_handler_t)(unsigned source);
void trap_set_timer_handler(void (*handler)(void));
void trap_set_external_handler(unsigned source, irq_handler_t handler);
void trap_set_exception_handler(bool (*handler)(struct trap_frame* frame));
void trap_handler(struct trap_frame* frame);

/* Ends the run: 0 passes, anything else fails with that exit code. */
void _exit(int code) __attribute__((noreturn));

#endif
