/* A tile kernel of your own: z = x + y over FP32 vectors in HBM, a slice
 * per tile. It streams the slice through its scratchpad in chunks: the DMA
 * brings a chunk of x and of y in, the vector unit adds them, the DMA takes
 * the sum out; hardware semaphores chain the three, so the core only
 * queues work and waits at the end.
 *
 * Arguments (CORE_ARG words): 0-1 x, 2-3 y, 4-5 z (global addresses of
 * this tile's slice), 6 elements. Exit codes: 0 done, 2 bad arguments,
 * 3 an engine error. */
#include "tessera_kernel.h"

#define CHUNK 4096u /* elements: 16 KiB per operand */
#define X 0x10000u  /* scratchpad offsets */
#define Y (X + 4 * CHUNK)
#define Z (Y + 4 * CHUNK)
enum { LOADED = 0, ADDED = 1, STORED = 2 };

static void dma(uint64_t src, uint64_t dst, uint32_t flags, uint32_t bytes, uint32_t sem) {
  struct tk_dma d = {0};
  d.src = src, d.dst = dst, d.flags = flags, d.len0 = bytes, d.sem = sem;
  tk_dma_push(&d);
}

int main(void) {
  const uint64_t x = tk_arg64(0), y = tk_arg64(2), z = tk_arg64(4);
  const uint32_t n = tk_arg(6);
  if (n == 0) return 2;
  for (uint32_t at = 0; at < n; at += CHUNK) {
    const uint32_t m = n - at < CHUNK ? n - at : CHUNK;
    /* The previous chunk's sum must be out before its buffers are reused. */
    dma(x + 4ull * at, X, TK_DMA_DST_LOCAL, 4 * m, TK_SEM(at ? STORED : TK_NONE, TK_NONE, TK_NONE));
    dma(y + 4ull * at, Y, TK_DMA_DST_LOCAL, 4 * m, TK_SEM(TK_NONE, LOADED, TK_NONE));
    struct tk_vec v = {0};
    v.op = TK_VADD, v.rows = 1, v.cols = m, v.src0 = X, v.src1 = Y, v.dst = Z;
    v.sem = TK_SEM(LOADED, ADDED, TK_NONE);
    tk_vec_push(&v);
    dma(Z, z + 4ull * at, TK_DMA_SRC_LOCAL, 4 * m, TK_SEM(ADDED, STORED, TK_NONE));
  }
  return tk_drain() ? 3 : 0;
}
