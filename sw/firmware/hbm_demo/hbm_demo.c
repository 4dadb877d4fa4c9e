/* The CP and HBM: a pattern written and read back through stack 0, the
 * stack's counters, an uncorrectable ECC error planted through its CSRs
 * (the load faults, the firmware's handler sees the error log and the
 * interrupt), and a traffic-generator run started and timed by firmware. */
#include <stdio.h>

#include "bsp.h"
#include "hbm_regs.h"
#include "traffic_gen_regs.h"

#define HBM_CSR(reg) (TESSERA_HBM0_CSR_BASE + HBM_##reg##_OFFSET)
#define TGEN(reg) (TESSERA_TGEN0_BASE + TRAFFIC_GEN_##reg##_OFFSET)

static volatile unsigned faults;
static volatile unsigned hbm_irqs;

static bool on_fault(struct trap_frame* f) {
  if (f->mcause != 5) return false; /* load access fault */
  ++faults;
  f->mepc += 4; /* skip the load (an uncompressed ld) */
  return true;
}

static void on_hbm(unsigned source) {
  (void)source;
  ++hbm_irqs;
  mmio_write32(HBM_CSR(ERR_STATUS), HBM_ERR_STATUS_UNCORRECTED_MASK); /* acknowledge */
}

static uint64_t read64(uintptr_t a) { return *(volatile uint64_t*)a; }

int main(void) {
  uart_init();
  volatile uint64_t* hbm = (volatile uint64_t*)TESSERA_HBM0_BASE;
  for (unsigned i = 0; i < 1024; ++i) hbm[i] = 0x9e3779b97f4a7c15ull * (i + 1);
  unsigned bad = 0;
  for (unsigned i = 0; i < 1024; ++i) bad += hbm[i] != 0x9e3779b97f4a7c15ull * (i + 1);
  printf("hbm: 8 KiB written and read back, %u mismatches; stack 0 counted %lu bytes read, %lu written\n", bad,
         (unsigned long)read64(HBM_CSR(READ_BYTES)), (unsigned long)read64(HBM_CSR(WRITE_BYTES)));

  trap_set_exception_handler(on_fault);
  trap_set_external_handler(TESSERA_HBM0_IRQ, on_hbm);
  plic_enable(TESSERA_HBM0_IRQ, 1);
  mmio_write32(HBM_CSR(IRQ_ENABLE), HBM_IRQ_ENABLE_UNCORRECTED_MASK);
  csr_set(mie, MIP_MEIP);
  csr_set(mstatus, MSTATUS_MIE);
  *(volatile uint64_t*)HBM_CSR(INJECT_ADDR) = 0x100;
  mmio_write32(HBM_CSR(INJECT), 2);
  uint64_t v;
  __asm__ volatile(".option push\n.option norvc\nld %0, 0(%1)\n.option pop" : "=r"(v) : "r"(&hbm[0x100 / 8]) : "memory");
  const unsigned seen_faults = faults, seen_irqs = hbm_irqs;
  const unsigned long logged = (unsigned long)read64(HBM_CSR(ERR_ADDR));
  /* The error stays in the cells until the burst is written again; the
   * bursts around it were never touched. */
  const bool neighbours = hbm[0xe0 / 8] == 0x9e3779b97f4a7c15ull * 29 && hbm[0x120 / 8] == 0x9e3779b97f4a7c15ull * 37;
  for (unsigned i = 0x100 / 8; i < 0x120 / 8; ++i) hbm[i] = 0x9e3779b97f4a7c15ull * (i + 1);
  const bool rewritten = hbm[0x100 / 8] == 0x9e3779b97f4a7c15ull * 33;
  printf("hbm: uncorrectable error: %u load fault, %u interrupt, logged at %#lx; neighbours %s, rewritten burst %s\n",
         seen_faults, seen_irqs, logged, neighbours ? "intact" : "CORRUPT", rewritten ? "reads back" : "FAILS");

  /* 1024 sequential 4 KiB reads, 8 in flight, from stack 0. */
  *(volatile uint64_t*)TGEN(BASE) = TESSERA_HBM0_BASE;
  *(volatile uint64_t*)TGEN(SIZE) = 64ull << 20;
  mmio_write32(TGEN(PATTERN), 0);
  mmio_write32(TGEN(REQ_BYTES), 4096);
  mmio_write32(TGEN(COUNT), 1024);
  mmio_write32(TGEN(OUTSTANDING), 8);
  mmio_write32(TGEN(CTRL), TRAFFIC_GEN_CTRL_START_MASK);
  while (!(mmio_read32(TGEN(STATUS)) & TRAFFIC_GEN_STATUS_DONE_MASK)) {
  }
  const uint64_t bytes = read64(TGEN(BYTES)), ns = read64(TGEN(ELAPSED_NS));
  printf("traffic generator: %lu bytes in %lu ns\n", (unsigned long)bytes, (unsigned long)ns);
  return bad || faults != 1 || hbm_irqs != 1 || !neighbours || !rewritten ? 1 : 0;
}
