/* Tiled, double-buffered GEMM on one tile: C (M x N, FP32) = A (M x K) .
 * B (K x N), all in global memory (HBM), row-major.
 *
 *   BF16 mode: A and B are BF16.
 *   FP8 mode:  A is FP32 (activations), cast to E4M3 on the fly by the DMA
 *              with one scale per 1 x 128 group; B is E4M3 (weights,
 *              quantized offline) with one FP32 scale per 128 x 128 block,
 *              (K/128) x (N/128) of them, row-major.
 *   E4M3 mode: A and B are E4M3, unscaled, into FP32.
 *   INT8 mode: A and B are INT8, into INT32 (C holds INT32).
 *
 * C is computed in TM x TN tiles, each over K in steps of TK. Operand
 * buffers come in two sets: while the tensor core works on one, the DMA
 * fills the other. The core only queues work; hardware semaphores order it:
 *   READY[b]  the DMA has filled buffer set b      (DMA -> GEMM)
 *   FREE[b]   the GEMM has finished with set b      (GEMM -> DMA)
 *   CDONE[c]  C tile buffer c is complete           (GEMM -> DMA out)
 *   CFREE[c]  C tile buffer c has been written out  (DMA out -> core)
 *
 * Arguments (CORE_ARG words): 0-1 A, 2-3 B, 4-5 C (global addresses),
 * 6 M, 7 N, 8 K, 9 mode (0 BF16, 1 FP8, 2 E4M3, 3 INT8), 10-11 B's scales
 * (FP8 mode).
 * Exit codes: 0 done, 2 a shape that is not whole tiles or an unknown mode,
 * 3 an engine error. */
#include "tessera_kernel.h"

#define TM 64u
#define TN 128u
#define TK 256u
#define GROUP 128u

enum { READY = 0, FREE = 2, CDONE = 4, CFREE = 6 };

/* Scratchpad layout (offsets): two operand sets, two C tiles. */
#define SET0 0x10000u
#define SET_BYTES 0x18800u
#define A_OFF 0x0u     /* TM x TK, BF16 (32 KiB) or E4M3 */
#define B_OFF 0x8000u  /* TK x TN, BF16 (64 KiB) or E4M3 */
#define SA_OFF 0x18000u /* A's scales, TM x TK/GROUP FP32 */
#define SB_OFF 0x18400u /* B's scales, TK/GROUP x TN/GROUP FP32 */
#define C0 (SET0 + 2 * SET_BYTES)
#define C_BYTES (TM * TN * 4u)

static uint32_t next_id;

static void copy_out(uint64_t c, uint32_t n, uint32_t mi, uint32_t ni, unsigned cb) {
  struct tk_dma d = {0};
  d.src = C0 + cb * C_BYTES;
  d.flags = TK_DMA_SRC_LOCAL;
  d.dst = c + ((uint64_t)mi * n + ni) * 4;
  d.len0 = TN * 4;
  d.count1 = TM;
  d.dstride1 = n * 4;
  d.sem = TK_SEM(CDONE + cb, CFREE + cb, TK_NONE);
  d.id = next_id++;
  tk_dma_push(&d);
}

int main(void) {
  const uint64_t a = tk_arg64(0), b = tk_arg64(2), c = tk_arg64(4), bs = tk_arg64(10);
  const uint32_t m = tk_arg(6), n = tk_arg(7), k = tk_arg(8), mode = tk_arg(9);
  if (!m || !n || !k || m % TM || n % TN || k % TK || mode > 3) return 2;
  const uint32_t fp8 = mode == 1, bytes8 = mode >= 2; /* block-scaled FP8; plain 8-bit operands */
  const uint32_t ea = fp8 ? 4 : bytes8 ? 1 : 2, eb = fp8 || bytes8 ? 1 : 2; /* bytes per element in global memory */
  for (unsigned s = 0; s < 2; ++s) {
    tk_sem_signal(FREE + s, 1);
    tk_sem_signal(CFREE + s, 1);
  }
  unsigned step = 0, tile = 0;
  int pending_out = 0;
  uint32_t out_mi = 0, out_ni = 0;
  unsigned out_cb = 0;
  for (uint32_t mi = 0; mi < m; mi += TM)
    for (uint32_t ni = 0; ni < n; ni += TN, ++tile) {
      const unsigned cb = tile & 1;
      for (uint32_t kk = 0; kk < k; kk += TK, ++step) {
        const unsigned set = step & 1;
        const uint32_t base = SET0 + set * SET_BYTES;
        /* A's rows of this step; in FP8 mode cast with 1 x 128 scales. */
        struct tk_dma da = {0};
        da.src = a + ((uint64_t)mi * k + kk) * ea;
        da.dst = base + A_OFF;
        da.flags = TK_DMA_DST_LOCAL;
        da.len0 = TK * (fp8 ? 1 : ea); /* elements when cast, else bytes */
        da.count1 = TM;
        da.sstride1 = k * ea;
        if (fp8) {
          da.flags |= tk_dma_cast(TK_FP32, TK_E4M3) | TK_DMA_SCALES_LOCAL;
          da.group = GROUP;
          da.scales = base + SA_OFF;
        }
        da.sem = TK_SEM(FREE + set, TK_NONE, TK_NONE);
        da.id = next_id++;
        tk_dma_push(&da);
        /* B's block of this step (and its scales). The queue is in order:
         * the last descriptor of the set says the set is ready. */
        struct tk_dma db = {0};
        db.src = b + ((uint64_t)kk * n + ni) * eb;
        db.dst = base + B_OFF;
        db.flags = TK_DMA_DST_LOCAL;
        db.len0 = TN * eb;
        db.count1 = TK;
        db.sstride1 = n * eb;
        db.sem = fp8 ? TK_SEM(TK_NONE, TK_NONE, TK_NONE) : TK_SEM(TK_NONE, READY + set, TK_NONE);
        db.id = next_id++;
        tk_dma_push(&db);
        if (fp8) {
          struct tk_dma ds = {0};
          ds.src = bs + ((uint64_t)(kk / GROUP) * (n / GROUP) + ni / GROUP) * 4;
          ds.dst = base + SB_OFF;
          ds.flags = TK_DMA_DST_LOCAL;
          ds.len0 = TN / GROUP * 4;
          ds.count1 = TK / GROUP;
          ds.sstride1 = n / GROUP * 4;
          ds.sem = TK_SEM(TK_NONE, READY + set, TK_NONE);
          ds.id = next_id++;
          tk_dma_push(&ds);
        }
        /* The previous tile's copy-out goes behind this step's loads, so
         * they need not wait for it. */
        if (pending_out) {
          copy_out(c, n, out_mi, out_ni, out_cb);
          pending_out = 0;
        }
        /* A C buffer is reused once its copy from two tiles ago is out. */
        if (kk == 0 && tk_sem_wait(CFREE + cb)) return 3;
        struct tk_gemm g = {0};
        g.m = TM, g.n = TN, g.k = TK;
        g.a = base + A_OFF, g.b = base + B_OFF, g.c = C0 + cb * C_BYTES;
        g.input = fp8 || mode == 2 ? TK_E4M3 : mode == 3 ? TK_INT8 : TK_BF16;
        g.accumulate = kk > 0;
        g.block_scaled = fp8;
        g.sa = base + SA_OFF, g.sb = base + SB_OFF, g.group = GROUP;
        g.sem = TK_SEM(READY + set, FREE + set, kk + TK == k ? (int)(CDONE + cb) : TK_NONE);
        g.id = next_id++;
        tk_gemm_push(&g);
      }
      pending_out = 1, out_mi = mi, out_ni = ni, out_cb = cb;
    }
  copy_out(c, n, out_mi, out_ni, out_cb);
  if (tk_sem_wait(CFREE) || tk_sem_wait(CFREE + 1)) return 3;
  return tk_drain() ? 3 : 0;
}
