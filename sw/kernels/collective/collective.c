/* A tile kernel that runs a collective on its chip's communication engine
 * (every chip's kernel posts the same one) and sleeps until the engine
 * signals one of this tile's semaphores: communication costs the tile no
 * compute (the engine signals the semaphore also when it fails, with
 * CE_ERROR set). Arguments:
 *   0     the engine's CE_OP word (operation, algorithm, mode, type, peer)
 *   1, 2  source (local address, low and high words)
 *   3, 4  destination
 *   5, 6  count (elements)
 *   7     the chip-to-chip fabric's registers (as this chip maps them)
 *   8     this tile's SEM registers (as this chip maps them)
 *   9     the semaphore to sleep on
 * Returns 0, or 100 + the engine's error code. */
#include "c2c_regs.h"
#include "tessera_kernel.h"

static void w32(uint32_t a, uint32_t v) { *(volatile uint32_t*)(uintptr_t)a = v; }
static uint32_t r32(uint32_t a) { return *(volatile uint32_t*)(uintptr_t)a; }
static void w64(uint32_t a, uint32_t lo, uint32_t hi) {
  w32(a, lo);
  w32(a + 4, hi);
}

int main(void) {
  const uint32_t c2c = tk_arg(7), sem = tk_arg(9);
  w32(c2c + C2C_CE_ERROR_OFFSET, 0);
  w32(c2c + C2C_CE_OP_OFFSET, tk_arg(0));
  w64(c2c + C2C_CE_SRC_OFFSET, tk_arg(1), tk_arg(2));
  w64(c2c + C2C_CE_DST_OFFSET, tk_arg(3), tk_arg(4));
  w64(c2c + C2C_CE_COUNT_OFFSET, tk_arg(5), tk_arg(6));
  w64(c2c + C2C_CE_TABLE_OFFSET, 0, 0);
  w64(c2c + C2C_CE_SIGNAL_OFFSET, tk_arg(8) + 4 * sem, 0);
  w32(c2c + C2C_CE_PUSH_OFFSET, 1);
  if (tk_sem_wait(sem)) return 99;
  const uint32_t error = r32(c2c + C2C_CE_ERROR_OFFSET);
  return error ? (int)(100 + error) : 0;
}
