/* Every chip of a system writes a token into every chip's HBM (its own
 * through the fabric's loopback, the others over the SerDes links, with
 * the chip number in the upper address bits), then waits for the tokens of
 * all chips in its own HBM; then it copies 4 KiB to the next chip and reads
 * them back, timed; and prints what its link ports counted. On one chip
 * alone it does the same with itself. */
#include <stdio.h>

#include "bsp.h"
#include "c2c_regs.h"

#define C2C(reg) (TESSERA_C2C_CSR_BASE + C2C_##reg##_OFFSET)
#define GLOBAL(chip, local) (TESSERA_C2C_GLOBAL_BASE + ((uint64_t)(chip) << TESSERA_C2C_CHIP_SHIFT) + (uint64_t)(local))
#define SLOTS (TESSERA_HBM0_BASE + 0x1000)   /* one 8-byte slot per chip */
#define BLOCK (TESSERA_HBM0_BASE + 0x10000)  /* 4 KiB from the previous chip */
#define MTIME_NS (1000000000u / TESSERA_CLINT_TIMEBASE_HZ) /* ns per mtime tick */

static uint64_t token(unsigned from, unsigned to) { return 0x70c0000000000000ull | (uint64_t)from << 8 | to; }

int main(void) {
  uart_init();
  const uint32_t id = mmio_read32(C2C(CHIP));
  const unsigned me = id & 0xff, chips = (id >> 8) & 0xff, ports = (id >> 16) & 0xff;
  for (unsigned k = 0; k < chips; ++k) *(volatile uint64_t*)GLOBAL(k, SLOTS + 8 * me) = token(me, k);
  volatile uint64_t* slots = (volatile uint64_t*)SLOTS;
  for (unsigned k = 0; k < chips; ++k)
    while (slots[k] != token(k, me)) {
    }
  printf("chip %u of %u: the tokens of all %u chips arrived\n", me, chips, chips);

  const unsigned next = (me + 1) % chips;
  volatile uint64_t* remote = (volatile uint64_t*)GLOBAL(next, BLOCK);
  const uint64_t t0 = clint_mtime();
  for (unsigned i = 0; i < 512; ++i) remote[i] = token(me, i);
  const uint64_t t1 = clint_mtime();
  unsigned bad = 0;
  for (unsigned i = 0; i < 512; ++i) bad += remote[i] != token(me, i);
  const uint64_t t2 = clint_mtime();
  printf("chip %u: 4 KiB to chip %u in %lu ns, read back in %lu ns, %u mismatches\n", me, next,
         (unsigned long)((t1 - t0) * MTIME_NS), (unsigned long)((t2 - t1) * MTIME_NS), bad);
  for (unsigned p = 0; p < ports; ++p) {
    const uint32_t state = mmio_read32(C2C(PORT_STATE) + 4 * p);
    if (!(state & C2C_PORT_STATE_CONNECTED_MASK)) continue;
    printf("chip %u port %u: to chip %u, %u lanes, %lu FLITs out, %lu in\n", me, p,
           (unsigned)((state & C2C_PORT_STATE_PEER_CHIP_MASK) >> C2C_PORT_STATE_PEER_CHIP_SHIFT),
           (unsigned)((state & C2C_PORT_STATE_WIDTH_MASK) >> C2C_PORT_STATE_WIDTH_SHIFT),
           (unsigned long)*(volatile uint64_t*)(uintptr_t)(C2C(PORT_TX_FLITS) + 8 * p),
           (unsigned long)*(volatile uint64_t*)(uintptr_t)(C2C(PORT_RX_FLITS) + 8 * p));
  }
  return bad ? 1 : 0;
}
