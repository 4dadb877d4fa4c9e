/* Runs a tile program (tessera_program.h): copies it from global memory
 * into the scratchpad's last 64 KiB, then pushes its operations in order,
 * each to its engine's queue with its semaphores, and waits until every
 * engine is idle.
 *
 * Arguments (CORE_ARG words): 0-1 the program's global address, 2 its
 * number of operations; or, with word 2 = 0xffffffff, 0-1 a table of
 * programs indexed by the core's mhartid (16 bytes each: address lo, hi,
 * count, 0) and 3 the table's length, so one launch runs a different
 * program on each tile; with word 2 = 0xfffffffe, the MoE experts below. Exit codes: 0 done, 2 a bad program (too long, an
 * unknown kind, a semaphore number past 15), 3 an engine error (the tile's
 * error registers say which command: ids are operation indices). */
#include "tessera_kernel.h"
#include "tessera_program.h"

static void dma(const struct tkp_op* o) {
  struct tk_dma d = {0};
  d.src = o->w[0] | (uint64_t)o->w[1] << 32;
  d.dst = o->w[2] | (uint64_t)o->w[3] << 32;
  d.flags = o->w[4];
  d.len0 = o->w[5], d.count1 = o->w[6], d.count2 = o->w[7];
  d.sstride1 = o->w[8], d.sstride2 = o->w[9], d.dstride1 = o->w[10], d.dstride2 = o->w[11];
  d.group = o->w[12];
  d.scales = o->w[13] | (uint64_t)o->w[14] << 32;
  d.sem = o->sem;
  TK_W(DMA_SEED, o->w[15]);
  tk_dma_push(&d);
}

static void gemm(const struct tkp_op* o) {
  tk_wait_space(TILE_STATUS_OFFSET, TILE_IRQ_STATUS_DONE_MASK, TILE_IRQ_STATUS_ERROR_MASK);
  TK_W(CMD_M, o->w[0]);
  TK_W(CMD_N, o->w[1]);
  TK_W(CMD_K, o->w[2]);
  TK_W(CMD_A, o->w[3]);
  TK_W(CMD_B, o->w[4]);
  TK_W(CMD_C, o->w[5]);
  TK_W(CMD_LDA, o->w[6]);
  TK_W(CMD_LDB, o->w[7]);
  TK_W(CMD_LDC, o->w[8]);
  TK_W(CMD_FORMAT, o->w[9]);
  TK_W(CMD_PROMOTE, o->w[10]);
  TK_W(CMD_SA, o->w[11]);
  TK_W(CMD_SB, o->w[12]);
  TK_W(CMD_GROUP, o->w[13]);
  TK_W(CMD_SEM, o->sem);
  TK_W(CMD_PUSH, 1);
}

static void vec(const struct tkp_op* o) {
  tk_wait_space(TILE_VSTATUS_OFFSET, TILE_IRQ_STATUS_VDONE_MASK, TILE_IRQ_STATUS_VERROR_MASK);
  TK_W(VCMD_OP, o->w[0]);
  TK_W(VCMD_ROWS, o->w[1]);
  TK_W(VCMD_COLS, o->w[2]);
  TK_W(VCMD_SRC0, o->w[3]);
  TK_W(VCMD_SRC1, o->w[4]);
  TK_W(VCMD_SRC2, o->w[5]);
  TK_W(VCMD_DST, o->w[6]);
  TK_W(VCMD_K, o->w[7]);
  TK_W(VCMD_POSITION, o->w[8]);
  TK_W(VCMD_EPS, o->w[9]);
  TK_W(VCMD_FORMAT, o->w[10]);
  TK_W(VCMD_GROUP, o->w[11]);
  TK_W(VCMD_AUX, o->w[12]);
  TK_W(VCMD_SEED, o->w[13]);
  TK_W(VCMD_SEM, o->sem);
  TK_W(VCMD_PUSH, 1);
}

static uint32_t entry[4];

/* MoE experts decided on the device (BF16): each tile takes the experts
 * e = tile, tile + tiles, ..., finds the tokens the router sent to each
 * (its top-2 output), gathers their rows, runs the SwiGLU FFN in chunks of
 * the hidden layer, scales the rows by their gates and writes them to slot
 * 0 or 1 of the expert outputs. Arguments: 0-1 the router's output (T x 2
 * expert ids, then T x 2 FP32 gates), 2 = 0xfffffffe, 3-4 the normed rows
 * (T x D BF16), 5-6 a table of (w1, w3, w2) addresses per expert, 7 D,
 * 8 F, 9 the hidden chunk, 10 E | T << 16, 11 tiles, 12 tile 0's hart id,
 * 13-14 slot 0's rows, 15 bytes from slot 0 to slot 1. */
#define MOE_MAX_T 64u
static uint32_t moe_choice[2 * MOE_MAX_T], moe_gate[2 * MOE_MAX_T], moe_weights[6];
static uint32_t moe_token[2 * MOE_MAX_T], moe_slot[2 * MOE_MAX_T], moe_scale[2 * MOE_MAX_T];

static int moe_experts(void) {
  const uint64_t router = tk_arg64(0), rows = tk_arg64(3), table = tk_arg64(5), y0 = tk_arg64(13);
  const uint32_t D = tk_arg(7), F = tk_arg(8), fc = tk_arg(9), E = tk_arg(10) & 0xffff, T = tk_arg(10) >> 16;
  const uint32_t tiles = tk_arg(11), stride = tk_arg(15);
  uint32_t hart;
  __asm__ volatile("csrr %0, mhartid" : "=r"(hart));
  const uint32_t tile = hart - tk_arg(12);
  if (!T || T > MOE_MAX_T || !tiles || !fc || F % fc || tile >= tiles) return 2;
  struct tk_dma r = {0};
  r.src = router, r.dst = tk_off(moe_choice), r.flags = TK_DMA_DST_LOCAL, r.len0 = 8 * T;
  tk_dma_push(&r);
  r.src = router + 8ull * T, r.dst = tk_off(moe_gate);
  tk_dma_push(&r);
  if (tk_drain()) return 3;
  uint32_t at = 0x10000;
#define MOE_BUF(bytes) (at += ((bytes) + 255u) & ~255u, at - (((bytes) + 255u) & ~255u))
  const uint32_t XB = MOE_BUF(2 * MOE_MAX_T * D), W1 = MOE_BUF(2 * D * fc), W3 = MOE_BUF(2 * D * fc);
  const uint32_t W2 = MOE_BUF(2 * fc * D), H1 = MOE_BUF(4 * MOE_MAX_T * fc), H3 = MOE_BUF(4 * MOE_MAX_T * fc);
  const uint32_t G16 = MOE_BUF(2 * MOE_MAX_T * fc), Y = MOE_BUF(4 * MOE_MAX_T * D);
  if (at > TKP_PROGRAM_OFFSET) return 2;
  for (uint32_t e = tile; e < E; e += tiles) {
    uint32_t n = 0;
    for (uint32_t t = 0; t < T; ++t)
      for (uint32_t k = 0; k < 2; ++k)
        if (moe_choice[2 * t + k] == e) moe_token[n] = t, moe_slot[n] = k, moe_scale[n] = moe_gate[2 * t + k], ++n;
    if (!n) continue;
    struct tk_dma w = {0};
    w.src = table + 24ull * e, w.dst = tk_off(moe_weights), w.flags = TK_DMA_DST_LOCAL, w.len0 = 24;
    tk_dma_push(&w);
    for (uint32_t i = 0; i < n; ++i) {
      struct tk_dma g = {0};
      g.src = rows + 2ull * moe_token[i] * D, g.dst = XB + 2 * i * D, g.flags = TK_DMA_DST_LOCAL, g.len0 = 2 * D;
      tk_dma_push(&g);
    }
    if (tk_drain()) return 3;
    const uint64_t w1 = moe_weights[0] | (uint64_t)moe_weights[1] << 32, w3 = moe_weights[2] | (uint64_t)moe_weights[3] << 32;
    const uint64_t w2 = moe_weights[4] | (uint64_t)moe_weights[5] << 32;
    for (uint32_t c0 = 0; c0 < F; c0 += fc) {
      struct tk_dma b = {0};
      b.flags = TK_DMA_DST_LOCAL, b.len0 = 2 * fc, b.count1 = D, b.sstride1 = 2 * F;
      b.src = w1 + 2ull * c0, b.dst = W1;
      tk_dma_push(&b);
      b.src = w3 + 2ull * c0, b.dst = W3;
      tk_dma_push(&b);
      struct tk_dma d = {0};
      d.flags = TK_DMA_DST_LOCAL, d.src = w2 + 2ull * c0 * D, d.dst = W2, d.len0 = 2 * fc * D;
      tk_dma_push(&d);
      if (tk_drain()) return 3;
      struct tk_gemm g = {0};
      g.m = n, g.n = fc, g.k = D, g.a = XB, g.b = W1, g.c = H1, g.input = TK_BF16;
      tk_gemm_push(&g);
      g.b = W3, g.c = H3;
      tk_gemm_push(&g);
      if (tk_drain()) return 3;
      struct tk_vec v = {0};
      v.op = TK_VSWIGLU, v.rows = n, v.cols = fc, v.src0 = H1, v.src1 = H3, v.dst = H1;
      tk_vec_push(&v);
      v.op = TK_VCAST_TO, v.src0 = H1, v.src1 = 0, v.dst = G16, v.format = TK_BF16;
      tk_vec_push(&v);
      if (tk_drain()) return 3;
      struct tk_gemm down = {0};
      down.m = n, down.n = D, down.k = fc, down.a = G16, down.b = W2, down.c = Y, down.input = TK_BF16;
      down.accumulate = c0 > 0;
      tk_gemm_push(&down);
      if (tk_drain()) return 3;
    }
    struct tk_vec sc = {0};
    sc.op = TK_VSCALE_ROWS, sc.rows = n, sc.cols = D, sc.src0 = Y, sc.src1 = tk_off(moe_scale), sc.dst = Y;
    tk_vec_push(&sc);
    if (tk_drain()) return 3;
    for (uint32_t i = 0; i < n; ++i) {
      struct tk_dma o = {0};
      o.src = Y + 4 * i * D, o.flags = TK_DMA_SRC_LOCAL, o.len0 = 4 * D;
      o.dst = y0 + (moe_slot[i] ? stride : 0) + 4ull * moe_token[i] * D;
      tk_dma_push(&o);
    }
    if (tk_drain()) return 3;
  }
  return 0;
}

int main(void) {
  uint64_t program = tk_arg64(0);
  uint32_t count = tk_arg(2);
  if (count == 0xfffffffeu) return moe_experts();
  if (count == 0xffffffffu) {
    uint32_t hart;
    __asm__ volatile("csrr %0, mhartid" : "=r"(hart));
    if (hart >= tk_arg(3)) return 2;
    struct tk_dma e = {0};
    e.src = program + 16ull * hart, e.dst = tk_off(entry), e.flags = TK_DMA_DST_LOCAL, e.len0 = 16;
    tk_dma_push(&e);
    if (tk_drain()) return 3;
    program = entry[0] | (uint64_t)entry[1] << 32;
    count = entry[2];
  }
  if (count > TKP_MAX_OPS) return 2;
  const struct tkp_op* ops = (const struct tkp_op*)tk_ptr(TKP_PROGRAM_OFFSET);
  struct tk_dma fetch = {0};
  fetch.src = program, fetch.dst = TKP_PROGRAM_OFFSET, fetch.flags = TK_DMA_DST_LOCAL;
  fetch.len0 = count * (uint32_t)sizeof(struct tkp_op);
  if (count) {
    tk_dma_push(&fetch);
    if (tk_drain()) return 3;
  }
  for (uint32_t i = 0; i < count; ++i) {
    const struct tkp_op* o = &ops[i];
    TK_W(CMD_ID, i), TK_W(VCMD_ID, i), TK_W(DMA_ID, i);
    switch (o->kind) {
      case TKP_END: i = count; break;
      case TKP_DMA: dma(o); break;
      case TKP_GEMM: gemm(o); break;
      case TKP_VEC: vec(o); break;
      case TKP_WAIT:
        if (o->w[0] > 15 || tk_sem_wait(o->w[0])) return o->w[0] > 15 ? 2 : 3;
        break;
      case TKP_SIGNAL:
        if (o->w[1] > 15) return 2;
        if (o->w[0]) tk_remote_signal(o->w[0], o->w[1]);
        else tk_sem_signal(o->w[1], 1);
        break;
      case TKP_DRAIN:
        if (tk_drain()) return 3;
        break;
      default: return 2;
    }
  }
  return tk_drain() ? 3 : 0;
}
