#include "crc_driver.h"

#include "bsp.h"
#include "crc_engine_regs.h"

#define CRC(reg) (TESSERA_CRC0_BASE + CRC_ENGINE_##reg##_OFFSET)

static volatile bool finished;

static void on_crc(unsigned source) {
  (void)source;
  finished = true;
  /* Keep DONE for crc_run to read; mask the line until the next run. */
  mmio_write32(CRC(IRQ_ENABLE), 0);
}

void crc_init(void) {
  trap_set_external_handler(TESSERA_CRC0_IRQ, on_crc);
  plic_enable(TESSERA_CRC0_IRQ, 1);
  csr_set(mie, MIP_MEIP);
  csr_set(mstatus, MSTATUS_MIE);
}

static void write64(uintptr_t a, uint64_t v) {
  mmio_write32(a, (uint32_t)v);
  mmio_write32(a + 4, (uint32_t)(v >> 32));
}

static uint64_t read64(uintptr_t a) { return mmio_read32(a) | (uint64_t)mmio_read32(a + 4) << 32; }

int crc_run(uint64_t src, uint64_t dst, uint32_t len, uint32_t* crc, uint64_t* failed_at) {
  write64(CRC(SRC), src);
  write64(CRC(DST), dst);
  mmio_write32(CRC(LEN), len);
  finished = false;
  mmio_write32(CRC(IRQ_ENABLE), CRC_ENGINE_IRQ_ENABLE_DONE_MASK);
  /* Sleep until the interrupt. Interrupts stay off between the check and
   * the wfi, or one that came in between would leave wfi waiting for
   * another; wfi wakes on a pending interrupt all the same, and the
   * handler runs when they are on again. */
  csr_clear(mstatus, MSTATUS_MIE);
  mmio_write32(CRC(CTRL), CRC_ENGINE_CTRL_START_MASK);
  while (!finished) {
    __asm__ volatile("wfi");
    csr_set(mstatus, MSTATUS_MIE);
    csr_clear(mstatus, MSTATUS_MIE);
  }
  csr_set(mstatus, MSTATUS_MIE);
  const uint32_t status = mmio_read32(CRC(STATUS));
  *crc = mmio_read32(CRC(RESULT));
  if (failed_at) *failed_at = read64(CRC(ERROR_ADDR));
  mmio_write32(CRC(CTRL), CRC_ENGINE_CTRL_ACK_MASK);
  return status & CRC_ENGINE_STATUS_ERROR_MASK ? -1 : 0;
}

uint64_t crc_cycles(void) { return read64(CRC(CYCLES)); }

uint32_t crc32_soft(const void* data, uint32_t len) {
  const uint8_t* p = data;
  uint32_t crc = ~0u;
  for (uint32_t i = 0; i < len; ++i) {
    crc ^= p[i];
    for (int b = 0; b < 8; ++b) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}
