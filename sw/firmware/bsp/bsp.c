/* stdout/stdin over the UART, exit through the test finisher, and the C
 * side of trap handling. */
#include <stdio.h>

#include "bsp.h"
#include "test_finisher_regs.h"

/* The platform facts this program was built for (the generated header's
 * TESSERA_FACTS): the loader refuses a platform whose facts differ. */
__attribute__((used, retain)) const char tessera_platform_facts[] = TESSERA_FACTS;

static int bsp_putc(char c, FILE* f) {
  (void)f;
  uart_putc(c);
  return (unsigned char)c;
}

static int bsp_getc(FILE* f) {
  (void)f;
  return uart_getc();
}

static FILE bsp_stdio = FDEV_SETUP_STREAM(bsp_putc, bsp_getc, NULL, _FDEV_SETUP_RW);
FILE* const stdin = &bsp_stdio;
FILE* const stdout = &bsp_stdio;
FILE* const stderr = &bsp_stdio;

void _exit(int code) {
  const uint32_t status = code == 0 ? TEST_FINISHER_STATUS_PASS
                                    : (((uint32_t)code << TEST_FINISHER_FINISHER_CODE_SHIFT) | TEST_FINISHER_STATUS_FAIL);
  mmio_write32(TESSERA_FINISHER_BASE + TEST_FINISHER_FINISHER_OFFSET, status);
  for (;;) __asm__ volatile("wfi");
}

static void (*timer_handler)(void);
static irq_handler_t external_handlers[TESSERA_PLIC_SIZE ? 64 : 1];
static bool (*exception_handler)(struct trap_frame*);

void trap_set_timer_handler(void (*handler)(void)) { timer_handler = handler; }
void trap_set_external_handler(unsigned source, irq_handler_t handler) {
  if (source < sizeof external_handlers / sizeof external_handlers[0]) external_handlers[source] = handler;
}
void trap_set_exception_handler(bool (*handler)(struct trap_frame*)) { exception_handler = handler; }

static const char* const exception_names[] = {
    "instruction address misaligned", "instruction access fault", "illegal instruction",
    "breakpoint",                     "load address misaligned",  "load access fault",
    "store/AMO address misaligned",   "store/AMO access fault",   "ecall from U-mode",
    "ecall from S-mode",              "reserved",                 "ecall from M-mode"};

void trap_handler(struct trap_frame* f) {
  const uintptr_t cause = f->mcause;
  if ((intptr_t)cause < 0) {
    switch (cause & 0xff) {
      case 7:
        if (timer_handler) timer_handler();
        else clint_set_timer(UINT64_MAX);
        return;
      case 11:
        for (unsigned src; (src = plic_claim()) != 0;) {
          if (src < sizeof external_handlers / sizeof external_handlers[0] && external_handlers[src])
            external_handlers[src](src);
          plic_complete(src);
        }
        return;
      default:
        return;
    }
  }
  if (exception_handler && exception_handler(f)) return;
  printf("firmware: unhandled exception: %s (mcause %lu) at mepc %#lx, mtval %#lx\n",
         cause < 12 ? exception_names[cause] : "reserved", (unsigned long)cause, (unsigned long)f->mepc,
         (unsigned long)f->mtval);
  _exit(0x80 + (int)cause);
}
