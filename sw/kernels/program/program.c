/* Runs a tile program (tessera_program.h): copies it from global memory
 * into the scratchpad's last 64 KiB, then pushes its operations in order,
 * each to its engine's queue with its semaphores, and waits until every
 * engine is idle.
 *
 * Arguments (CORE_ARG words): 0-1 the program's global address, 2 its
 * number of operations; or, with word 2 = 0xffffffff, 0-1 a table of
 * programs indexed by the core's mhartid (16 bytes each: address lo, hi,
 * count, 0) and 3 the table's length, so one launch runs a different
 * program on each tile; with word 2 = 0xfffffffd, the same table for a
 * graph (the runtime's Graph): a program may then be longer than
 * TKP_MAX_OPS (it is streamed through the program area in halves, the next
 * fetched while the current one runs), a failure's exit code names the
 * operation: code | (index + 1) << 8, and the word at TKP_CURSOR_OFFSET
 * holds the index of the operation the core is at (for a fault or a
 * timeout); with word 2 = 0xfffffffe, the MoE
 * experts below. Exit codes: 0 done, 2 a bad program (too long, an
 * unknown kind, a semaphore number past 15, a bad barrier or mark), 3 an
 * engine error (the tile's error registers say which command: ids are
 * operation indices). */
#include "tessera_kernel.h"
#include "tessera_program.h"

static uint32_t op_index; /* the operation being pushed: its engine command's id */

static void dma(const struct tkp_op* o) {
  struct tk_dma d = {0};
  d.id = op_index;
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

#define ARG64(a, i) ((a)[i] | (uint64_t)(a)[(i) + 1] << 32)
static int moe_experts(const uint32_t* a) {
  const uint64_t router = ARG64(a, 0), rows = ARG64(a, 3), table = ARG64(a, 5), y0 = ARG64(a, 13);
  const uint32_t D = a[7], F = a[8], fc = a[9], E = a[10] & 0xffff, T = a[10] >> 16;
  const uint32_t tiles = a[11], stride = a[15];
  uint32_t hart;
  __asm__ volatile("csrr %0, mhartid" : "=r"(hart));
  const uint32_t tile = hart - a[12];
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

static int barrier(const struct tkp_op* o) {
  const uint32_t n = o->w[0], self = o->w[1], sem = o->w[2];
  if (!n || n > TKP_BARRIER_MAX || self >= n || sem > 15) return 2;
  if (tk_drain()) return 3;
  for (uint32_t i = 0; i < n; ++i)
    if (i != self) tk_remote_signal(o->w[3 + i], sem);
  for (uint32_t i = 1; i < n; ++i)
    if (tk_sem_wait(sem)) return 3;
  return 0;
}

static int mark(const struct tkp_op* o) {
  if (o->w[0] < TKP_MARKS_OFFSET || o->w[0] > TKP_MARKS_OFFSET + 8 * (TKP_MARKS_MAX - 1) || o->w[0] % 8) return 2;
  uint32_t lo, hi, again;
  do {
    __asm__ volatile("csrr %0, cycleh" : "=r"(hi));
    __asm__ volatile("csrr %0, cycle" : "=r"(lo));
    __asm__ volatile("csrr %0, cycleh" : "=r"(again));
  } while (hi != again);
  volatile uint32_t* at = (volatile uint32_t*)tk_ptr(o->w[0]);
  at[0] = lo;
  at[1] = hi;
  return 0;
}

/* Runs one operation; nonzero: the exit code. */
static int run_op(const struct tkp_op* o) {
  switch (o->kind) {
    case TKP_DMA: dma(o); return 0;
    case TKP_GEMM: gemm(o); return 0;
    case TKP_VEC: vec(o); return 0;
    case TKP_WAIT:
      if (o->w[0] > 15) return 2;
      return tk_sem_wait(o->w[0]) ? 3 : 0;
    case TKP_SIGNAL:
      if (o->w[1] > 15) return 2;
      if (o->w[0]) tk_remote_signal(o->w[0], o->w[1]);
      else tk_sem_signal(o->w[1], 1);
      return 0;
    case TKP_DRAIN: return tk_drain() ? 3 : 0;
    case TKP_BARRIER: return barrier(o);
    case TKP_MARK: return mark(o);
    case TKP_MOE: return moe_experts(o->w);
    default: return 2;
  }
}

/* The operation an engine error belongs to (its engine's error id), or
 * `at` when no engine names one. */
static uint32_t failed_op(uint32_t at) {
  if (TK_R(STATUS) & TILE_STATUS_ERROR_MASK) return TK_R(ERROR_ID);
  if (TK_R(VSTATUS) & TILE_VSTATUS_ERROR_MASK) return TK_R(VERROR_ID);
  if (TK_R(DMA_STATUS) & TILE_DMA_STATUS_ERROR_MASK) return TK_R(DMA_ERROR_ID);
  return at;
}

/* A graph's program: any length, streamed through the program area in
 * halves of TKP_MAX_OPS / 2 operations; the fetch of the next half runs
 * while the current one does (signalling TKP_FETCH_SEM). */
#define HALF (TKP_MAX_OPS / 2u)
static int run_long(uint64_t program, uint32_t count) {
  struct tkp_op* area = (struct tkp_op*)tk_ptr(TKP_PROGRAM_OFFSET);
  volatile uint32_t* cursor = (volatile uint32_t*)tk_ptr(TKP_CURSOR_OFFSET);
  struct tk_dma fetch = {0};
  fetch.flags = TK_DMA_DST_LOCAL;
  fetch.src = program, fetch.dst = TKP_PROGRAM_OFFSET;
  fetch.len0 = (count < HALF ? count : HALF) * (uint32_t)sizeof(struct tkp_op);
  tk_dma_push(&fetch);
  if (tk_drain()) return 3 | 1u << 8;
  for (uint32_t base = 0; base < count; base += HALF) {
    const uint32_t half = base / HALF % 2, n = count - base < HALF ? count - base : HALF;
    if (base) {
      if (tk_sem_wait(TKP_FETCH_SEM)) return 3 | (failed_op(base) + 1) << 8;
    }
    if (base + HALF < count) {
      const uint32_t next = count - base - HALF < HALF ? count - base - HALF : HALF;
      fetch.src = program + (uint64_t)(base + HALF) * sizeof(struct tkp_op);
      fetch.dst = TKP_PROGRAM_OFFSET + (1 - half) * HALF * (uint32_t)sizeof(struct tkp_op);
      fetch.len0 = next * (uint32_t)sizeof(struct tkp_op);
      fetch.sem = TK_SEM(TK_NONE, TKP_FETCH_SEM, TK_NONE);
      fetch.id = base + HALF;
      tk_dma_push(&fetch);
    }
    const struct tkp_op* ops = area + half * HALF;
    for (uint32_t j = 0; j < n; ++j) {
      const uint32_t i = base + j;
      *cursor = i;
      op_index = i;
      TK_W(CMD_ID, i), TK_W(VCMD_ID, i);
      if (ops[j].kind == TKP_END) return tk_drain() ? 3 | (failed_op(i) + 1) << 8 : 0;
      const int r = run_op(&ops[j]);
      if (r) return r | (r == 3 ? failed_op(i) + 1 : i + 1) << 8;
    }
  }
  return tk_drain() ? 3 | (failed_op(count) + 1) << 8 : 0;
}

int main(void) {
  uint64_t program = tk_arg64(0);
  uint32_t count = tk_arg(2);
  if (count == 0xfffffffeu) {
    uint32_t a[16];
    for (unsigned i = 0; i < 16; ++i) a[i] = tk_arg(i);
    return moe_experts(a);
  }
  const int graph = count == 0xfffffffdu;
  if (count == 0xffffffffu || graph) {
    uint32_t hart;
    __asm__ volatile("csrr %0, mhartid" : "=r"(hart));
    if (hart >= tk_arg(3)) return 2;
    struct tk_dma e = {0};
    e.src = program + 16ull * hart, e.dst = tk_off(entry), e.flags = TK_DMA_DST_LOCAL, e.len0 = 16;
    tk_dma_push(&e);
    if (tk_drain()) return 3;
    program = entry[0] | (uint64_t)entry[1] << 32;
    count = entry[2];
    if (graph) return run_long(program, count);
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
    op_index = i;
    TK_W(CMD_ID, i), TK_W(VCMD_ID, i);
    if (o->kind == TKP_END) break;
    const int r = run_op(o);
    if (r) return r;
  }
  return tk_drain() ? 3 : 0;
}
