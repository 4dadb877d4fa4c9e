/* The communication engine driven by firmware on every chip of a system:
 * an FP32 ring all-reduce (push) whose completion interrupts the CP and
 * signals tile 0's semaphore 0, then a pull all-to-all with a different
 * number of bytes for each pair of chips. Every chip checks what it got
 * against what the others must have sent, and prints it. */
#include <stdio.h>

#include "bsp.h"
#include "c2c_regs.h"
#include "tile_regs.h"

#define C2C(reg) (TESSERA_C2C_CSR_BASE + C2C_##reg##_OFFSET)
#define SRC (TESSERA_HBM0_BASE + 0x100000)
#define DST (TESSERA_HBM0_BASE + 0x200000)
#define TABLE (TESSERA_HBM0_BASE + 0x300000)
#define ELEMENTS 4099 /* not a multiple of the chip count */

static volatile unsigned done_irqs, error_irqs;

static void on_c2c(unsigned source) {
  (void)source;
  const uint32_t status = mmio_read32(C2C(IRQ_STATUS));
  if (status & C2C_IRQ_STATUS_CE_DONE_MASK) ++done_irqs;
  if (status & C2C_IRQ_STATUS_CE_ERROR_MASK) ++error_irqs;
  mmio_write32(C2C(IRQ_STATUS), status); /* acknowledge */
}

static void write64(uintptr_t a, uint64_t v) { *(volatile uint64_t*)a = v; }

static void post(unsigned op, unsigned algo, unsigned mode, uint64_t src, uint64_t dst, uint64_t count, uint64_t table,
                 uint64_t signal, uint32_t id) {
  mmio_write32(C2C(CE_OP), op << C2C_CE_OP_OP_SHIFT | algo << C2C_CE_OP_ALGO_SHIFT | mode << C2C_CE_OP_MODE_SHIFT);
  mmio_write32(C2C(CE_ID), id);
  write64(C2C(CE_SRC), src);
  write64(C2C(CE_DST), dst);
  write64(C2C(CE_COUNT), count);
  write64(C2C(CE_TABLE), table);
  write64(C2C(CE_SIGNAL), signal);
  mmio_write32(C2C(CE_PUSH), 1);
}

/* Bytes chip s sends chip d in the all-to-all. */
static uint64_t pair_bytes(unsigned s, unsigned d) { return 64u * (s + 1) + 32u * d; }
static uint8_t pair_byte(unsigned s, unsigned d, uint64_t i) { return (uint8_t)(s * 16 + d + i * 7); }

int main(void) {
  uart_init();
  const uint32_t id = mmio_read32(C2C(CHIP));
  const unsigned me = id & 0xff, chips = (id >> 8) & 0xff;
  trap_set_external_handler(TESSERA_C2C_IRQ, on_c2c);
  plic_enable(TESSERA_C2C_IRQ, 1);
  mmio_write32(C2C(IRQ_ENABLE), C2C_IRQ_STATUS_CE_DONE_MASK | C2C_IRQ_STATUS_CE_ERROR_MASK);
  csr_set(mie, MIP_MEIP);
  csr_set(mstatus, MSTATUS_MIE);

  /* All-reduce: chip k holds (k + 1) * (i % 7 + 1); the sum is exact in FP32. */
  volatile float* src = (volatile float*)SRC;
  volatile float* dst = (volatile float*)DST;
  for (unsigned i = 0; i < ELEMENTS; ++i) src[i] = (float)((me + 1) * (i % 7 + 1));
  const uint64_t signal = TESSERA_TILE0_CSR_BASE + TILE_SEM_OFFSET; /* tile 0's semaphore 0 */
  const uint64_t t0 = clint_mtime();
  post(1, 0, 0, SRC, DST, ELEMENTS, 0, signal, 100 + me);
  while (done_irqs + error_irqs == 0) __asm__ volatile("wfi");
  const uint64_t t1 = clint_mtime();
  unsigned bad = 0;
  const float total = (float)(chips * (chips + 1) / 2);
  for (unsigned i = 0; i < ELEMENTS; ++i) bad += dst[i] != total * (float)(i % 7 + 1);
  printf("chip %u: all-reduce of %u floats on %u chips in %lu ns: %u wrong, %u interrupt, tile 0 semaphore %u\n", me,
         ELEMENTS, chips, (unsigned long)((t1 - t0) * 100), bad, done_irqs,
         (unsigned)mmio_read32(TESSERA_TILE0_CSR_BASE + TILE_SEM_OFFSET));

  /* All-to-all, pull, per-pair sizes; slices packed in chip order. */
  volatile uint8_t* out = (volatile uint8_t*)SRC;
  volatile uint64_t* table = (volatile uint64_t*)TABLE;
  uint64_t send_at = 0, recv_at = 0;
  for (unsigned p = 0; p < chips; ++p) {
    uint64_t peer_dst = 0, peer_src = 0; /* where my slice lands in p's dst; where p keeps mine in its src */
    for (unsigned j = 0; j < me; ++j) peer_dst += pair_bytes(j, p);
    for (unsigned j = 0; j < me; ++j) peer_src += pair_bytes(p, j);
    for (uint64_t i = 0; i < pair_bytes(me, p); ++i) out[send_at + i] = pair_byte(me, p, i);
    table[6 * p + 0] = send_at;
    table[6 * p + 1] = pair_bytes(me, p);
    table[6 * p + 2] = peer_dst;
    table[6 * p + 3] = recv_at;
    table[6 * p + 4] = pair_bytes(p, me);
    table[6 * p + 5] = peer_src;
    send_at += pair_bytes(me, p);
    recv_at += pair_bytes(p, me);
  }
  const unsigned before = done_irqs;
  post(5, 2, 1, SRC, DST, 0, TABLE, 0, 200 + me);
  while (done_irqs == before && error_irqs == 0) __asm__ volatile("wfi");
  volatile uint8_t* in = (volatile uint8_t*)DST;
  unsigned wrong = 0;
  uint64_t at = 0;
  for (unsigned s = 0; s < chips; ++s)
    for (uint64_t i = 0; i < pair_bytes(s, me); ++i) wrong += in[at++] != pair_byte(s, me, i);
  printf("chip %u: all-to-all (pull) received %lu bytes from %u chips: %u wrong; engine errors %u (code %u)\n", me,
         (unsigned long)at, chips, wrong, error_irqs, (unsigned)mmio_read32(C2C(CE_ERROR)));
  return bad || wrong || error_irqs ? 1 : 0;
}
