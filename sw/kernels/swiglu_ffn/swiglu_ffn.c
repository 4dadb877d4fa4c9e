/* A fused SwiGLU feed-forward block on one tile:
 *   y = (silu(x . W1) * (x . W3)) . W2
 * x (T x d), W1 and W3 (d x f), W2 (f x d) are BF16 in global memory, y
 * (T x d) FP32; all row-major. Everything fits the scratchpad at once, so
 * the kernel queues the whole block and lets the semaphores order it:
 * the weights stream in while the tensor core works on what has arrived,
 * the vector unit computes silu(h1) * h3 once both GEMMs are done and casts
 * it to BF16 for the last GEMM, and the DMA writes y out when that is done.
 *
 * Arguments (CORE_ARG words): 0-1 x, 2-3 W1, 4-5 W3, 6-7 W2, 8-9 y (global
 * addresses), 10 T, 11 d, 12 f. Exit codes: 0 done, 2 sizes that do not fit
 * the scratchpad (or are zero), 3 an engine error. */
#include "tessera_kernel.h"

#define SPM_BYTES (2u << 20)

enum { W1_IN = 0, H1_DONE, W3_IN, H3_DONE, W2_IN, G_READY, Y_DONE };

static uint32_t place(uint32_t* at, uint32_t bytes) {
  const uint32_t here = *at;
  *at = (here + bytes + 255u) & ~255u;
  return here;
}

static void load(uint64_t src, uint32_t dst, uint32_t bytes, uint32_t sem, uint32_t id) {
  struct tk_dma d = {0};
  d.src = src;
  d.dst = dst;
  d.flags = TK_DMA_DST_LOCAL;
  d.len0 = bytes;
  d.sem = sem;
  d.id = id;
  tk_dma_push(&d);
}

static void gemm(uint32_t m, uint32_t n, uint32_t k, uint32_t a, uint32_t b, uint32_t c, uint32_t sem, uint32_t id) {
  struct tk_gemm g = {0};
  g.m = m, g.n = n, g.k = k, g.a = a, g.b = b, g.c = c;
  g.input = TK_BF16;
  g.sem = sem;
  g.id = id;
  tk_gemm_push(&g);
}

int main(void) {
  const uint64_t x = tk_arg64(0), w1 = tk_arg64(2), w3 = tk_arg64(4), w2 = tk_arg64(6), y = tk_arg64(8);
  const uint32_t t = tk_arg(10), d = tk_arg(11), f = tk_arg(12);
  if (!t || !d || !f || t > 4096 || d > 8192 || f > 8192) return 2;
  uint32_t at = 0x10000; /* above the kernel's image */
  const uint32_t xs = place(&at, t * d * 2), w1s = place(&at, d * f * 2), w3s = place(&at, d * f * 2);
  const uint32_t w2s = place(&at, f * d * 2), h1 = place(&at, t * f * 4), h3 = place(&at, t * f * 4);
  const uint32_t g = place(&at, t * f * 2), ys = place(&at, t * d * 4);
  if (at > SPM_BYTES) return 2;

  load(x, xs, t * d * 2, TK_SEM(TK_NONE, TK_NONE, TK_NONE), 1);
  load(w1, w1s, d * f * 2, TK_SEM(TK_NONE, W1_IN, TK_NONE), 2);
  load(w3, w3s, d * f * 2, TK_SEM(TK_NONE, W3_IN, TK_NONE), 3);
  load(w2, w2s, f * d * 2, TK_SEM(TK_NONE, W2_IN, TK_NONE), 4);
  gemm(t, f, d, xs, w1s, h1, TK_SEM(W1_IN, H1_DONE, TK_NONE), 10);
  gemm(t, f, d, xs, w3s, h3, TK_SEM(W3_IN, H3_DONE, TK_NONE), 11);

  /* silu(h1) * h3 in place of h1, once h3 is done (h1 is done before it:
   * the tensor core's queue is in order); then to BF16 once W2 is in too. */
  struct tk_vec v = {0};
  v.op = TK_VSWIGLU, v.rows = t, v.cols = f, v.src0 = h1, v.src1 = h3, v.dst = h1;
  v.sem = TK_SEM(H3_DONE, TK_NONE, TK_NONE);
  v.id = 20;
  tk_vec_push(&v);
  struct tk_vec c = {0};
  c.op = TK_VCAST_TO, c.rows = t, c.cols = f, c.src0 = h1, c.dst = g, c.format = TK_BF16;
  c.sem = TK_SEM(W2_IN, G_READY, TK_NONE);
  c.id = 21;
  tk_vec_push(&c);

  gemm(t, d, f, g, w2s, ys, TK_SEM(G_READY, Y_DONE, TK_NONE), 12);
  struct tk_dma o = {0};
  o.src = ys, o.flags = TK_DMA_SRC_LOCAL, o.dst = y, o.len0 = t * d * 4;
  o.sem = TK_SEM(Y_DONE, TK_NONE, TK_NONE);
  o.id = 5;
  tk_dma_push(&o);
  /* H1_DONE is signalled but nobody waits on it: it counts the first GEMM. */
  if (tk_drain()) return 3;
  return tk_sem_value(H1_DONE) == 1 ? 0 : 3;
}
