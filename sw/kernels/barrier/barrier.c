/* Tiles meeting at a barrier: tile `self` of `tiles` first works for a
 * while (longer the higher its number), then writes self + 1 into its slot
 * of a table in global memory, meets the others at the barrier, reads the
 * whole table and writes the sum into slot tiles + self. Every tile sees
 * 1 + 2 + ... + tiles only if no tile passed the barrier before every
 * other had written its slot.
 *
 * Arguments (CORE_ARG words): 0 self, 1 tiles, 2-3 the table (global), 4
 * tile 0's register window (global), 5 the windows' stride, 6 work per
 * tile number (loop iterations). Exit codes: 0 done, 2 bad arguments,
 * 3 an engine error. */
#include "tessera_kernel.h"

#define BARRIER_SEM 15
#define MAX_TILES 64

static uint32_t table[2 * MAX_TILES];

static int copy(uint64_t src, uint64_t dst, uint32_t flags, uint32_t bytes) {
  struct tk_dma d = {0};
  d.src = src, d.dst = dst, d.flags = flags, d.len0 = bytes;
  tk_dma_push(&d);
  return tk_drain();
}

int main(void) {
  const uint32_t self = tk_arg(0), tiles = tk_arg(1), regs0 = tk_arg(4), stride = tk_arg(5), work = tk_arg(6);
  const uint64_t slots = tk_arg64(2);
  if (!tiles || tiles > MAX_TILES || self >= tiles) return 2;
  for (volatile uint32_t i = 0; i < self * work; ++i) {
  }
  table[0] = self + 1;
  if (copy(tk_off(&table[0]), slots + 4 * self, TK_DMA_SRC_LOCAL, 4)) return 3;
  if (tk_barrier(BARRIER_SEM, self, tiles, regs0, stride)) return 3;
  if (copy(slots, tk_off(table), TK_DMA_DST_LOCAL, 4 * tiles)) return 3;
  uint32_t sum = 0;
  for (uint32_t i = 0; i < tiles; ++i) sum += table[i];
  table[0] = sum;
  return copy(tk_off(&table[0]), slots + 4 * (tiles + self), TK_DMA_SRC_LOCAL, 4) ? 3 : 0;
}
