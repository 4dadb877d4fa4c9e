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
 * timeout). Exit codes: 0 done, 2 a bad program (too long, an
 * unknown kind, a semaphore number past 15, a bad barrier or mark), 3 an
 * engine error (the tile's error registers say which command: ids are
 * operation indices), 4 a collective the communication engine failed. */
#include "c2c_regs.h"
#include "tessera_kernel.h"
#include "tessera_program.h"

static uint32_t op_index; /* the operation being pushed: its engine command's id */
static uint32_t base_position; /* the last TKP_POSITION's: relative vector positions add it */

static inline __attribute__((always_inline)) void dma(const struct tkp_op* o) {
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
  TK_W(VCMD_POSITION, (o->w[14] & 1) ? o->w[8] + base_position : o->w[8]);
  TK_W(VCMD_EPS, o->w[9]);
  TK_W(VCMD_FORMAT, o->w[10]);
  TK_W(VCMD_GROUP, o->w[11]);
  TK_W(VCMD_AUX, o->w[12]);
  TK_W(VCMD_SEED, o->w[13]);
  TK_W(VCMD_SEM, o->sem);
  TK_W(VCMD_PUSH, 1);
}

static uint32_t entry[4];

/* MoE experts decided on the device (BF16), each expert split in S slices
 * of its hidden layer: slice s is columns [s Fs, (s + 1) Fs) of w1 and w3
 * and the same rows of w2, each a contiguous matrix of its own (the host
 * places slice s in HBM stack s % stacks). Every tile reads the router's
 * output (T x K expert ids, then T x K FP32 gates), lists the active
 * experts in order, and takes the slices of its stack (s % stacks = its
 * stack) of active expert a whose lane (a m + s / stacks) % R is its own
 * (m = S / stacks; R tiles share the stack, this one being lane r). For
 * each slice it gathers the expert's tokens' rows, runs the SwiGLU FFN over
 * the slice's columns, the down projection of those, scales the rows by
 * their gates and writes them to the slice's partial sums P_s[k][t] (FP32
 * rows of D: the slice's share of token t's output from its slot-k
 * expert); the combine adds the slices. A slice's rows run in blocks of
 * up to TKP_MOE_BLOCK, its weights loaded once for them all. Pipelined: the
 * next block's rows (and at a slice's first block its weights) load while
 * this one computes (two buffers of each), the engines ordered
 * by semaphores 0-6 (left at zero). Words: 0-1 the router's output, 2-3 the
 * normed rows (T x D BF16), 4-5 the slices' table (w1, w3, w2 and P_s
 * addresses, by expert, then slice), 6 D, 7 Fs, 8 E | T << 16, 9 S, 10
 * stacks, 11 this tile's stack, 12 R | r << 16, 13 K (experts per token;
 * 0: 2) | f << 16. With f an FP8 format (TK_E4M3, TK_E5M2; 0: BF16) the
 * weights are block-scaled: each slice's matrix is its codes followed by
 * an FP32 scale per 128 x 128 block (row-major by block), the gathered
 * rows are cast to f in groups of 128 columns on the way in (the DMA
 * engine, a scale per group), the SwiGLU's output so by the vector unit,
 * and the GEMMs sum each group's products and scale them (D and Fs
 * multiples of 128). Word 14, where not 0, is Dc | B << 16: the weights
 * stream in chunks (moe_chunked()). Word 15, where above 1, is C | c << 16:
 * the experts spread over C chips (expert parallelism), this one c: it
 * runs the experts e with e mod C = c, its table holding theirs (by e / C,
 * then slice), and stores zeros (from words 16-17: T x D FP32 zeros in
 * global memory) into its slices' rows P_s[k][t] whose slot-k expert is
 * another chip's, so that each chip's planes add up to its share. With
 * bit 30 of word 15 set, a token's choices of this chip's experts take its
 * first slots, in order (the planes of slot k are its k-th such choice's),
 * the others its last, and a slice has min(K, the table's experts) planes
 * (no token has more choices here): its zeros then lie in long runs of tokens, a store
 * each (a choice's plane of zeros where its expert is another's cost a
 * store every few tokens: 163 us of a layer's 256 slots against ...). Word 18,
 * where not 0, is RB: the router's output comes in T / RB blocks of RB
 * rows, each its ids and then its gates (a dispatch's route, TKP_DISPATCH
 * mode 1, as an all-to-all brought it). Limits
 * and scratchpad use: TKP_MOE_* in tessera_program.h. */
#define ARG64(a, i) ((a)[i] | (uint64_t)(a)[(i) + 1] << 32)
#define MOE_MAX_T TKP_MOE_MAX_T
#define MOE_MAX_K TKP_MOE_MAX_K
#define MOE_MAX_SLICES TKP_MOE_MAX_SLICES /* E x S */
#define SB TKP_MOE_SCALE_BLOCK
enum { SEM_W1 = 0, SEM_W3, SEM_W2, SEM_G, SEM_V, SEM_D, SEM_Z };

/* TKP_MOE in chunks (tkp_moe_chunked_scratch): the units (B of an item's
 * rows) one after another, each a stream of 3 C chunks (w1 and w3 chunk c
 * in turn, then w2's chunks) through the ring. The loads run up to
 * TKP_MOE_RING - 1 chunks ahead of the arithmetic; every command waits
 * only on commands pushed before it, so no queue waits on one not yet
 * pushed. Semaphores: LOADED (a chunk in, taken by its GEMM, or for w2's
 * first chunk by the cast to BF16, which also needs the SwiGLU), FREE (a
 * ring slot's GEMM done: the load TKP_MOE_RING later may start), XF (the
 * unit's SwiGLU, after the last GEMM that reads its rows: the next unit's
 * rows may load), G, V, D, Z (as in moe_experts). A w2 chunk's output
 * buffer is used again TKP_MOE_OUTS chunks on: that chunk's load is pushed
 * after this one's stores (the DMA queue keeps the order), which waited
 * for their arithmetic. */
enum { CS_LOADED = 0, CS_FREE, CS_XF, CS_G, CS_V, CS_D, CS_Z };
struct moe_chunks {
  uint64_t rows;
  uint32_t D, Fs, Dc, C, B, T, S, f8; /* f8: the experts' FP8 format (block-scaled), 0: BF16 */
  uint32_t X8, SA, SG;                 /* FP8: the rows cast chunk by chunk, their scales, the SwiGLU's scales */
  const uint32_t *table, *expert, *first, *count, *item_a, *item_s, *token, *slot, *scale;
  uint32_t items, XB, ring[TKP_MOE_RING], H1, H3, G16, YC[TKP_MOE_OUTS];
};
/* Where a cursor over the units' chunks stands: item ui, its rows from ub
 * (n of them), chunk k of the unit, unit u. */
struct moe_at {
  uint32_t ui, ub, n, k, u;
};
static void moe_at_rows(const struct moe_chunks* m, struct moe_at* c) {
  if (c->ui < m->items) {
    const uint32_t left = m->count[m->item_a[c->ui]] - c->ub;
    c->n = left < m->B ? left : m->B;
  }
}
static void moe_at_next(const struct moe_chunks* m, struct moe_at* c) {
  if (++c->k < 3 * m->C) return;
  c->k = 0, ++c->u, c->ub += c->n;
  if (c->ub == m->count[m->item_a[c->ui]]) ++c->ui, c->ub = 0;
  moe_at_rows(m, c);
}
static const uint32_t* moe_slice(const struct moe_chunks* m, uint32_t ui) {
  return &m->table[8 * (m->expert[m->item_a[ui]] * m->S + m->item_s[ui])];
}

__attribute__((noinline)) static int moe_chunked(const struct moe_chunks* m) {
  const uint32_t C = m->C, D = m->D, Fs = m->Fs, Dc = m->Dc;
  /* A chunk: its codes, and block-scaled its 128 x 128 blocks' scales. */
  const uint32_t eb = m->f8 ? 1 : 2, codes = eb * Dc * Fs, chunk = codes + (m->f8 ? 4 * (Dc / SB) * (Fs / SB) : 0);
  const enum tk_format in = m->f8 ? (enum tk_format)m->f8 : TK_BF16;
  struct moe_at ld = {0}, at = {0};
  moe_at_rows(m, &ld), moe_at_rows(m, &at);
  /* Pushed so far: chunk loads, w2 chunks' stores, units' SwiGLUs. */
  uint32_t loaded = 0, stored = 0, swiglus = 0;
  for (uint32_t j = 0; at.ui < m->items; ++j, moe_at_next(m, &at)) {
    /* The loads up to TKP_MOE_RING - 1 chunks ahead; a w2 chunk's only
     * once the stores of the one TKP_MOE_OUTS back are pushed, a unit's rows once
     * the SwiGLU of the unit before (the last reader of the rows' buffer)
     * is: a queue never waits on a command that is not yet pushed, while
     * the core may be asleep pushing into a full one. */
    while (ld.ui < m->items && loaded < j + TKP_MOE_RING) {
      if (ld.k >= 2 * C && ld.u * C + (ld.k - 2 * C) >= stored + TKP_MOE_OUTS) break;
      if (ld.k == 0 && ld.u > swiglus) break;
      const uint32_t x = m->item_a[ld.ui];
      struct tk_dma g = {0};
      g.id = op_index, g.flags = TK_DMA_DST_LOCAL;
      if (ld.k == 0) { /* the unit's rows, consecutive tokens in one load, once the unit before has done with them */
        const uint32_t* tok = &m->token[m->first[x] + ld.ub];
        for (uint32_t q = 0, run; q < ld.n; q += run) {
          run = 1;
          while (q + run < ld.n && tok[q + run] == tok[q] + run) ++run;
          g.src = m->rows + 2ull * tok[q] * D, g.dst = m->XB + 2 * q * D, g.len0 = 2 * D * run;
          g.sem = q == 0 && ld.u > 0 ? TK_SEM(CS_XF, TK_NONE, TK_NONE) : 0;
          tk_dma_push(&g);
        }
        if (m->f8) { /* cast to FP8 chunk by chunk (C planes of n x Dc codes), a scale per 128 columns */
          struct tk_dma cast = {0};
          cast.id = op_index, cast.flags = TK_DMA_SRC_LOCAL | TK_DMA_DST_LOCAL | TK_DMA_SCALES_LOCAL | tk_dma_cast(TK_BF16, in);
          cast.src = m->XB, cast.dst = m->X8, cast.scales = m->SA, cast.group = SB, cast.len0 = Dc;
          cast.count1 = ld.n, cast.sstride1 = 2 * D, cast.dstride1 = Dc, cast.count2 = C, cast.sstride2 = 2 * Dc, cast.dstride2 = ld.n * Dc;
          tk_dma_push(&cast);
        }
      }
      const uint32_t* w = moe_slice(m, ld.ui);
      const uint32_t which = ld.k < 2 * C ? (ld.k & 1) : 2, c = ld.k < 2 * C ? ld.k / 2 : ld.k - 2 * C;
      g.src = (w[2 * which] | (uint64_t)w[2 * which + 1] << 32) + (uint64_t)chunk * c;
      g.dst = m->ring[loaded % TKP_MOE_RING], g.len0 = chunk;
      g.sem = TK_SEM(loaded >= TKP_MOE_RING ? CS_FREE : TK_NONE, CS_LOADED, TK_NONE);
      tk_dma_push(&g);
      ++loaded, moe_at_next(m, &ld);
    }
    const uint32_t x = m->item_a[at.ui], n = at.n, slot_buf = m->ring[j % TKP_MOE_RING];
    struct tk_gemm g = {0};
    g.id = op_index, g.input = in, g.m = n, g.b = slot_buf;
    g.block_scaled = m->f8 != 0, g.group = m->f8 ? SB : 0, g.sb = slot_buf + codes;
    if (at.k < 2 * C) { /* H1 or H3 += the rows' chunk c times w1's or w3's */
      const uint32_t c = at.k / 2, last = at.k == 2 * C - 1;
      g.n = Fs, g.k = Dc, g.c = (at.k & 1) ? m->H3 : m->H1;
      if (m->f8) g.a = m->X8 + c * n * Dc, g.sa = m->SA + 4 * c * n * (Dc / SB);
      else g.a = m->XB + 2 * c * Dc, g.lda = D;
      g.accumulate = c > 0, g.sem = TK_SEM(CS_LOADED, CS_FREE, last ? CS_G : TK_NONE);
      tk_gemm_push(&g);
      if (last) {
        struct tk_vec v = {0};
        v.id = op_index, v.op = TK_VSWIGLU, v.rows = n, v.cols = Fs, v.src0 = m->H1, v.src1 = m->H3, v.dst = m->H1;
        v.sem = TK_SEM(CS_G, CS_XF, TK_NONE);
        tk_vec_push(&v);
        ++swiglus;
        v.op = TK_VCAST_TO, v.src1 = 0, v.dst = m->G16, v.format = in, v.sem = TK_SEM(CS_LOADED, CS_V, TK_NONE);
        if (m->f8) v.group = SB, v.aux = m->SG;
        tk_vec_push(&v);
      }
      continue;
    }
    /* Output columns [c Dc, (c + 1) Dc): the SwiGLU's rows times w2's
     * chunk, scaled by the gates, stored into the slice's partial sums. */
    const uint32_t c = at.k - 2 * C, b = at.u * C + c, y = m->YC[b % TKP_MOE_OUTS];
    g.n = Dc, g.k = Fs, g.a = m->G16, g.sa = m->SG, g.c = y;
    g.sem = TK_SEM(c == 0 ? CS_V : CS_LOADED, CS_FREE, CS_D);
    tk_gemm_push(&g);
    struct tk_vec sc = {0};
    sc.id = op_index, sc.op = TK_VSCALE_ROWS, sc.rows = n, sc.cols = Dc, sc.src0 = y, sc.src1 = tk_off(&m->scale[m->first[x] + at.ub]);
    sc.dst = y, sc.sem = TK_SEM(CS_D, CS_Z, TK_NONE);
    tk_vec_push(&sc);
    const uint32_t* w = moe_slice(m, at.ui);
    const uint64_t partials = w[6] | (uint64_t)w[7] << 32;
    const uint32_t first = m->first[x] + at.ub;
    for (uint32_t q = 0, run; q < n; q += run) { /* consecutive tokens of one slot: one 2D store */
      run = 1;
      while (q + run < n && m->slot[first + q + run] == m->slot[first + q] && m->token[first + q + run] == m->token[first + q] + run) ++run;
      struct tk_dma o = {0};
      o.id = op_index, o.flags = TK_DMA_SRC_LOCAL, o.len0 = 4 * Dc, o.count1 = run, o.sstride1 = 4 * Dc, o.dstride1 = 4 * D;
      o.src = y + 4 * q * Dc;
      o.dst = partials + (((uint64_t)m->slot[first + q] * m->T + m->token[first + q]) * D + (uint64_t)c * Dc) * 4;
      if (q == 0) o.sem = TK_SEM(CS_Z, TK_NONE, TK_NONE);
      tk_dma_push(&o);
    }
    ++stored;
  }
  if (tk_drain()) return 3;
  /* Left at zero: the ring's last credits and the last unit's XF. */
  while (tk_sem_try(CS_FREE)) {
  }
  while (tk_sem_try(CS_XF)) {
  }
  return 0;
}

/* Whether token t's plane of slot k holds zeros (its slot-k choice is
 * another chip's expert; compact: it has at most k choices of this chip's). */
static inline int moe_zero(const uint32_t* choice, uint32_t t, uint32_t k, uint32_t K, uint32_t EC, uint32_t ec, uint32_t compact) {
  if (!compact) return choice[t * K + k] % EC != ec;
  uint32_t own = 0;
  for (uint32_t j = 0; j < K; ++j) own += choice[t * K + j] % EC == ec;
  return own <= k;
}

__attribute__((noinline)) static int moe_experts(const uint32_t* a) {
  const uint64_t router = ARG64(a, 0), rows = ARG64(a, 2), table = ARG64(a, 4);
  const uint32_t D = a[6], Fs = a[7], E = a[8] & 0xffff, T = a[8] >> 16, S = a[9], stacks = a[10], me = a[11];
  const uint32_t R = a[12] & 0xffff, r = a[12] >> 16, K = (a[13] & 0xffff) ? (a[13] & 0xffff) : 2, f8 = a[13] >> 16;
  const uint32_t EC = (a[15] & 0xffff) > 1 ? (a[15] & 0xffff) : 1, ec = (a[15] & 0xffff) > 1 ? (a[15] >> 16) & 0x3fff : 0;
  const uint32_t compact = EC > 1 && (a[15] >> 30 & 1); /* a token's own choices first */
  const uint32_t EL = (E + EC - 1) / EC; /* the table's experts */
  const uint64_t zeros = ARG64(a, 16);
  const uint32_t RB = a[18];
  if ((RB && T % RB) || !T || T > MOE_MAX_T || !E || E > MOE_MAX_SLICES || !S || !stacks || S % stacks || EL * S > MOE_MAX_SLICES || me >= stacks ||
      !R || r >= R || !D || !Fs || K > MOE_MAX_K || K > E || ec >= EC || (EC > 1 && !zeros))
    return 2;
  if (D > 0x4000u || Fs > 0x4000u) return 2; /* none that wide fits; the layout's sums then stay in 32 bits */
  if (f8 && ((f8 != TK_E4M3 && f8 != TK_E5M2) || D % SB || Fs % SB)) return 2;
  const uint32_t Dc = a[14] & 0xffff, Bc = a[14] >> 16; /* in chunks (tkp_moe_chunked_scratch) */
  if (Dc && (D % Dc || (f8 && Dc % SB) || !Bc || Bc > TKP_MOE_BLOCK)) return 2;
  const uint32_t m = S / stacks;
  /* The bookkeeping lives in the scratchpad, not in .bss (which the
   * start-up code clears at every launch, word by word): the lists just
   * below the program area, the buffers from 0x10000. */
  const uint32_t lists = TKP_PROGRAM_OFFSET - (uint32_t)TKP_MOE_LISTS;
  uint32_t top = lists;
#define MOE_BUF(bytes) (top += ((bytes) + 255u) & ~255u, top - (((bytes) + 255u) & ~255u))
#define MOE_ARRAY(words) ((uint32_t*)tk_ptr(MOE_BUF(4u * (words))))
  uint32_t* const moe_choice = MOE_ARRAY(MOE_MAX_K * MOE_MAX_T);
  uint32_t* const moe_gate = MOE_ARRAY(MOE_MAX_K * MOE_MAX_T);
  uint32_t* const moe_token = MOE_ARRAY(MOE_MAX_K * MOE_MAX_T);
  uint32_t* const moe_slot = MOE_ARRAY(MOE_MAX_K * MOE_MAX_T);
  uint32_t* const moe_scale = MOE_ARRAY(MOE_MAX_K * MOE_MAX_T);
  uint32_t* const moe_table = MOE_ARRAY(8 * MOE_MAX_SLICES);
  uint32_t* const moe_expert = MOE_ARRAY(MOE_MAX_SLICES);
  uint32_t* const moe_first = MOE_ARRAY(MOE_MAX_SLICES);
  uint32_t* const moe_count = MOE_ARRAY(MOE_MAX_SLICES);
  uint32_t* const moe_item_a = MOE_ARRAY(MOE_MAX_SLICES);
  uint32_t* const moe_item_s = MOE_ARRAY(MOE_MAX_SLICES);
  struct tk_dma r0 = {0};
  r0.id = op_index, r0.flags = TK_DMA_DST_LOCAL;
  if (RB) { /* by block: its ids, then its gates */
    r0.len0 = 4 * K * RB, r0.count1 = T / RB, r0.sstride1 = 8 * K * RB, r0.dstride1 = 4 * K * RB;
    r0.src = router, r0.dst = tk_off(moe_choice);
    tk_dma_push(&r0);
    r0.src = router + 4ull * K * RB, r0.dst = tk_off(moe_gate);
    tk_dma_push(&r0);
    r0.count1 = r0.sstride1 = r0.dstride1 = 0;
  } else {
    r0.src = router, r0.dst = tk_off(moe_choice), r0.len0 = 4 * K * T;
    tk_dma_push(&r0);
    r0.src = router + 4ull * K * T, r0.dst = tk_off(moe_gate);
    tk_dma_push(&r0);
  }
  r0.src = table, r0.dst = tk_off(moe_table), r0.len0 = 32 * EL * S;
  tk_dma_push(&r0);
  if (tk_drain()) return 3;
  top = 0x10000;
  /* A slice's rows run in blocks of up to B: the pipeline's units. */
  const uint32_t B = Dc ? (T < Bc ? T : Bc) : T < TKP_MOE_BLOCK ? T : TKP_MOE_BLOCK;
  struct moe_chunks mc;
  if (Dc) { /* in this order, as tkp_moe_chunked_scratch() counts them */
    const uint32_t eb = f8 ? 1 : 2;
    mc.XB = MOE_BUF(2 * B * D);
    mc.X8 = f8 ? MOE_BUF(B * D) : 0, mc.SA = f8 ? MOE_BUF(4 * B * (D / SB)) : 0;
    for (unsigned i = 0; i < TKP_MOE_RING; ++i) mc.ring[i] = MOE_BUF(eb * Dc * Fs + (f8 ? 4 * (Dc / SB) * (Fs / SB) : 0));
    mc.H1 = MOE_BUF(4 * B * Fs), mc.H3 = MOE_BUF(4 * B * Fs), mc.G16 = MOE_BUF(eb * B * Fs);
    mc.SG = f8 ? MOE_BUF(4 * B * (Fs / SB)) : 0;
    for (unsigned i = 0; i < TKP_MOE_OUTS; ++i) mc.YC[i] = MOE_BUF(4 * B * Dc);
  }
  /* Else in this order, as tkp_moe_scratch() counts them. */
  const uint32_t eb = f8 ? 1 : 2, codes = eb * D * Fs, wbytes = codes + (f8 ? 4 * (D / SB) * (Fs / SB) : 0);
  const enum tk_format in = f8 ? (enum tk_format)f8 : TK_BF16;
  uint32_t XB[2] = {0}, SA[2] = {0}, W1[2] = {0}, W3[2] = {0}, W2[2] = {0}, Y[2] = {0}, H1 = 0, H3 = 0, G16 = 0, SG = 0;
  if (!Dc) {
    for (unsigned p = 0; p < 2; ++p) {
      XB[p] = MOE_BUF(eb * B * D), SA[p] = f8 ? MOE_BUF(4 * B * (D / SB)) : 0;
      W1[p] = MOE_BUF(wbytes), W3[p] = MOE_BUF(wbytes), W2[p] = MOE_BUF(wbytes), Y[p] = MOE_BUF(4 * B * D);
    }
    H1 = MOE_BUF(4 * B * Fs), H3 = MOE_BUF(4 * B * Fs), G16 = MOE_BUF(eb * B * Fs);
    SG = f8 ? MOE_BUF(4 * B * (Fs / SB)) : 0;
  }
  if (top > lists) return 2;
  /* The active experts in order, each with its (token, slot, gate) list in
   * token order: a counting sort (one pass to count each expert's choices,
   * one to place them), the item lists holding the counts and the next
   * places until the items take them. A pass per expert cost E T K steps
   * (a 256-token prompt over 8 experts: 46 us of the tile core a layer). */
  uint32_t* const count = moe_item_a;
  uint32_t* const place = moe_item_s;
  for (uint32_t e = 0; e < E; ++e) count[e] = 0;
  for (uint32_t i = 0; i < K * T; ++i) {
    const uint32_t c = moe_choice[i];
    if (c >= E) return 2;
    ++count[c];
  }
  uint32_t active = 0, at = 0;
  for (uint32_t e = 0; e < E; ++e) {
    place[e] = at;
    if (count[e] && e % EC == ec) moe_expert[active] = e / EC, moe_first[active] = at, moe_count[active] = count[e], ++active;
    at += count[e];
  }
  /* This tile's first item (the items' order below) is known now: its
   * first weight loads while the lists are placed, and where the rows run
   * in several blocks (a prompt: the lists take about as long to place as
   * the three weights to load) the other two as well; else those load
   * after its rows, as every slice's, under its first GEMM. */
  const uint32_t ahead = T > TKP_MOE_BLOCK;
  uint32_t early = Dc != 0; /* in chunks: the stream starts below */
  for (uint32_t x = 0; x < active && !early; ++x)
    for (uint32_t j = 0; j < m; ++j)
      if ((x * m + j) % R == r) {
        const uint32_t* w = &moe_table[8 * (moe_expert[x] * S + j * stacks + me)];
        struct tk_dma g = {0};
        g.id = op_index, g.flags = TK_DMA_DST_LOCAL, g.len0 = wbytes;
        g.src = w[0] | (uint64_t)w[1] << 32, g.dst = W1[0];  /* its rows' last load signals SEM_W1 */
        tk_dma_push(&g);
        if (ahead) {
          g.src = w[2] | (uint64_t)w[3] << 32, g.dst = W3[0], g.sem = TK_SEM(TK_NONE, SEM_W3, TK_NONE);
          tk_dma_push(&g);
          g.src = w[4] | (uint64_t)w[5] << 32, g.dst = W2[0], g.sem = TK_SEM(TK_NONE, SEM_W2, TK_NONE);
          tk_dma_push(&g);
        }
        early = 1;
        break;
      }
  for (uint32_t t = 0, i = 0; t < T; ++t)
    for (uint32_t k = 0, own = 0; k < K; ++k, ++i) {
      const uint32_t p = place[moe_choice[i]]++;
      moe_token[p] = t, moe_slot[p] = compact && moe_choice[i] % EC == ec ? own++ : k, moe_scale[p] = moe_gate[i];
    }
  uint32_t items = 0;
  for (uint32_t x = 0; x < active; ++x)
    for (uint32_t j = 0; j < m; ++j)
      if ((x * m + j) % R == r) moe_item_a[items] = x, moe_item_s[items] = j * stacks + me, ++items;
  /* Spread over chips: zeros into this stack's slices' rows of the
   * choices other chips run, a slice's plane of a slot by each of the
   * stack's lanes in turn (a run of consecutive tokens one store; the
   * zeros, words 16-17, in the tile's own stack). Compact: a slice has
   * P = min(K, EL) planes, no slot having more choices here. */
  const uint32_t P = compact && EL < K ? EL : K;
  if (EC > 1)
    for (uint32_t q = r; q < m * P; q += R) {
      const uint32_t j = q / P, k = q % P;
      const uint32_t* w = &moe_table[8 * (j * stacks + me)]; /* every expert's slice shares its planes */
      const uint64_t planes = w[6] | (uint64_t)w[7] << 32;
      for (uint32_t t = 0, run; t < T; t += run) {
        run = 1;
        if (!moe_zero(moe_choice, t, k, K, EC, ec, compact)) continue;
        while (t + run < T && moe_zero(moe_choice, t + run, k, K, EC, ec, compact)) ++run;
        struct tk_dma z = {0};
        z.id = op_index, z.src = zeros, z.dst = planes + ((uint64_t)k * T + t) * D * 4, z.len0 = 4 * D * run;
        tk_dma_push(&z);
      }
    }
  if (!items) return tk_drain() ? 3 : 0;
  if (Dc) {
    mc.rows = rows, mc.D = D, mc.Fs = Fs, mc.Dc = Dc, mc.C = D / Dc, mc.B = B, mc.T = T, mc.S = S, mc.f8 = f8;
    mc.table = moe_table, mc.expert = moe_expert, mc.first = moe_first, mc.count = moe_count, mc.item_a = moe_item_a;
    mc.item_s = moe_item_s, mc.token = moe_token, mc.slot = moe_slot, mc.scale = moe_scale, mc.items = items;
    return moe_chunked(&mc);
  }
  /* Unit u loads into buffers u & 1, a slice's weights (at its first
   * block; the first unit's loaded above in part or whole, its last row
   * signalling for w1) into buffers (its item) & 1; the DMA queue's order keeps a load
   * behind the stores of the unit two back, which wait for its arithmetic. */
  uint32_t ui = 0, ub = 0;                      /* the unit to load: item ui, its rows from ub */
  uint32_t pi = 0, pb = 0, pn = 0, pp = 0, prev = 0; /* the unit before (stored after the loads) */
  for (uint32_t u = 0;; ++u) {
    const uint32_t x = ui < items ? moe_item_a[ui] : 0, p = u & 1, wp = ui & 1;
    const uint32_t n = ui < items ? (moe_count[x] - ub < B ? moe_count[x] - ub : B) : 0, whole = ub == 0;
    if (ui < items) {
      const uint32_t* w = &moe_table[8 * (moe_expert[x] * S + moe_item_s[ui])];
      struct tk_dma g = {0};
      g.id = op_index, g.flags = TK_DMA_DST_LOCAL, g.len0 = 2 * D;
      if (f8) g.flags |= TK_DMA_SCALES_LOCAL | tk_dma_cast(TK_BF16, in), g.len0 = D, g.group = SB;
      /* Consecutive tokens' rows (BF16) in one load. */
      const uint32_t* tok = &moe_token[moe_first[x] + ub];
      for (uint32_t q = 0, run; q < n; q += run) {
        run = 1;
        while (!f8 && q + run < n && tok[q + run] == tok[q] + run) ++run;
        g.src = rows + 2ull * tok[q] * D, g.dst = XB[p] + eb * q * D, g.len0 = f8 ? D : 2 * D * run;
        g.scales = f8 ? SA[p] + 4 * q * (D / SB) : 0;
        if (q + run == n && (!whole || u == 0)) g.sem = TK_SEM(TK_NONE, SEM_W1, TK_NONE);
        tk_dma_push(&g);
      }
      if (whole && (u > 0 || !ahead)) {
        g.flags = TK_DMA_DST_LOCAL, g.group = 0, g.scales = 0;
        g.len0 = wbytes;
        g.src = w[0] | (uint64_t)w[1] << 32, g.dst = W1[wp], g.sem = TK_SEM(TK_NONE, SEM_W1, TK_NONE);
        if (u > 0) tk_dma_push(&g);
        g.src = w[2] | (uint64_t)w[3] << 32, g.dst = W3[wp], g.sem = TK_SEM(TK_NONE, SEM_W3, TK_NONE);
        tk_dma_push(&g);
        g.src = w[4] | (uint64_t)w[5] << 32, g.dst = W2[wp], g.sem = TK_SEM(TK_NONE, SEM_W2, TK_NONE);
        tk_dma_push(&g);
      }
    }
    if (prev) {
      const uint32_t* w = &moe_table[8 * (moe_expert[moe_item_a[pi]] * S + moe_item_s[pi])];
      const uint64_t partials = w[6] | (uint64_t)w[7] << 32;
      /* Consecutive tokens of one slot: one store. */
      const uint32_t at2 = moe_first[moe_item_a[pi]] + pb;
      for (uint32_t q = 0, run; q < pn; q += run) {
        run = 1;
        while (q + run < pn && moe_slot[at2 + q + run] == moe_slot[at2 + q] && moe_token[at2 + q + run] == moe_token[at2 + q] + run) ++run;
        struct tk_dma o = {0};
        o.id = op_index, o.flags = TK_DMA_SRC_LOCAL, o.len0 = 4 * D * run, o.src = Y[pp] + 4 * q * D;
        o.dst = partials + ((uint64_t)moe_slot[at2 + q] * T + moe_token[at2 + q]) * D * 4;
        if (q == 0) o.sem = TK_SEM(SEM_Z, TK_NONE, TK_NONE);
        tk_dma_push(&o);
      }
    }
    if (ui == items) break;
    /* The unit's arithmetic, each engine waiting for what it needs (a
     * slice's later blocks for their rows only). */
    struct tk_gemm g = {0};
    g.id = op_index, g.m = n, g.n = Fs, g.k = D, g.a = XB[p], g.b = W1[wp], g.c = H1, g.input = in;
    g.block_scaled = f8 != 0, g.group = f8 ? SB : 0, g.sa = SA[p], g.sb = W1[wp] + codes;
    g.sem = TK_SEM(SEM_W1, TK_NONE, TK_NONE);
    tk_gemm_push(&g);
    g.b = W3[wp], g.sb = W3[wp] + codes, g.c = H3, g.sem = TK_SEM(whole ? SEM_W3 : TK_NONE, SEM_G, TK_NONE);
    tk_gemm_push(&g);
    struct tk_vec v = {0};
    v.id = op_index, v.op = TK_VSWIGLU, v.rows = n, v.cols = Fs, v.src0 = H1, v.src1 = H3, v.dst = H1;
    v.sem = TK_SEM(SEM_G, TK_NONE, TK_NONE);
    tk_vec_push(&v);
    v.op = TK_VCAST_TO, v.src0 = H1, v.src1 = 0, v.dst = G16, v.format = in;
    if (f8) v.group = SB, v.aux = SG;
    v.sem = TK_SEM(whole ? SEM_W2 : TK_NONE, SEM_V, TK_NONE);
    tk_vec_push(&v);
    struct tk_gemm down = {0};
    down.id = op_index, down.m = n, down.n = D, down.k = Fs, down.a = G16, down.b = W2[wp], down.c = Y[p];
    down.input = in, down.sem = TK_SEM(SEM_V, SEM_D, TK_NONE);
    down.block_scaled = f8 != 0, down.group = f8 ? SB : 0, down.sa = SG, down.sb = W2[wp] + codes;
    tk_gemm_push(&down);
    struct tk_vec sc = {0};
    sc.id = op_index, sc.op = TK_VSCALE_ROWS, sc.rows = n, sc.cols = D, sc.src0 = Y[p];
    sc.src1 = tk_off(&moe_scale[moe_first[x] + ub]), sc.dst = Y[p], sc.sem = TK_SEM(SEM_D, SEM_Z, TK_NONE);
    tk_vec_push(&sc);
    pi = ui, pb = ub, pn = n, pp = p, prev = 1;
    ub += n;
    if (ub == moe_count[x]) ++ui, ub = 0;
  }
  return tk_drain() ? 3 : 0;
}

/* A router's decision in software (TKP_ROUTE), DeepSeek-V3's noaux_tc
 * method, on `rows` rows in the scratchpad. Each row of `choice` (FP32, E
 * values) is cut in G groups of E / G experts; a group's score is the sum
 * of its two largest values (its one value if it has one); the TG best
 * groups are kept (ties to the lower group) and every expert outside them
 * counts as 0.0 (as masked_fill does); the k largest then (ties to the
 * lower expert) are the choices. Their gates are `weights`' values for them
 * (the same row's), divided by their sum + 1e-20 where flags bit 0 says
 * so, times `scale`. Writes rows x k indices at `out` and rows x k gates
 * after them. Floats are compared by their bits (a total order for all but
 * NaN) and summed in software (no FPU on the tile core). Words: 0 choice,
 * 1 weights, 2 out (scratchpad offsets), 3 rows, 4 E, 5 k | G << 8 | TG << 16,
 * 6 scale (FP32 bits), 7 flags. */
static uint32_t order_key(uint32_t b) { return (b & 0x80000000u) ? ~b : b | 0x80000000u; }
union bits {
  uint32_t u;
  float f;
};

__attribute__((noinline)) static int route_grouped(const uint32_t* w) {
  const uint32_t rows = w[3], E = w[4], k = w[5] & 0xff, G = (w[5] >> 8) & 0xff, TG = (w[5] >> 16) & 0xff;
  if (!rows || rows > TKP_MOE_MAX_T || !E || E > TKP_MOE_MAX_SLICES || !k || k > TKP_MOE_MAX_K || !G || G > 64 || E % G || !TG ||
      TG > G || k > E)
    return 2;
  const uint32_t in_bytes = 4 * rows * E, end = TKP_PROGRAM_OFFSET;
  if (w[0] < 0x10000u || w[0] > end - in_bytes || w[1] < 0x10000u || w[1] > end - in_bytes || w[2] < 0x10000u ||
      w[2] > end - 8 * rows * k)
    return 2;
  const uint32_t* choice = (const uint32_t*)tk_ptr(w[0]);
  const uint32_t* weights = (const uint32_t*)tk_ptr(w[1]);
  uint32_t* ids = (uint32_t*)tk_ptr(w[2]);
  uint32_t* gates = ids + rows * k;
  const uint32_t per = E / G;
  union bits scale;
  scale.u = w[6];
  for (uint32_t r = 0; r < rows; ++r) {
    const uint32_t* c = choice + r * E;
    uint32_t group_key[64], kept[64];
    for (uint32_t g = 0; g < G; ++g) {
      uint32_t b1 = 0, b2 = 0, k1 = 0, k2 = 0;  /* the two largest (keys never 0 but for a NaN) */
      for (uint32_t j = g * per; j < (g + 1) * per; ++j) {
        const uint32_t key = order_key(c[j]);
        if (key > k1) k2 = k1, b2 = b1, k1 = key, b1 = c[j];
        else if (key > k2) k2 = key, b2 = c[j];
      }
      union bits x, y;
      x.u = b1, y.u = b2;
      if (per > 1) x.f = x.f + y.f;
      group_key[g] = order_key(x.u);
      kept[g] = 0;
    }
    for (uint32_t n = 0; n < TG; ++n) {
      uint32_t best = G;
      for (uint32_t g = 0; g < G; ++g)
        if (!kept[g] && (best == G || group_key[g] > group_key[best])) best = g;
      kept[best] = 1;
    }
    uint32_t top_key[TKP_MOE_MAX_K], top[TKP_MOE_MAX_K], have = 0;
    for (uint32_t e = 0; e < E; ++e) {
      const uint32_t key = kept[e / per] ? order_key(c[e]) : 0x80000000u; /* 0.0 outside the kept groups */
      if (have == k && key <= top_key[k - 1]) continue;
      uint32_t p = have < k ? have++ : k - 1;
      while (p > 0 && key > top_key[p - 1]) top_key[p] = top_key[p - 1], top[p] = top[p - 1], --p;
      top_key[p] = key, top[p] = e;
    }
    union bits sum;
    sum.f = 0.0f;
    for (uint32_t j = 0; j < k; ++j) {
      union bits v;
      v.u = weights[r * E + top[j]];
      sum.f = sum.f + v.f;
    }
    const float denom = sum.f + 1e-20f;
    for (uint32_t j = 0; j < k; ++j) {
      union bits v;
      v.u = weights[r * E + top[j]];
      if (w[7] & 1) v.f = v.f / denom;
      v.f = v.f * scale.f;
      ids[r * k + j] = top[j];
      gates[r * k + j] = v.u;
    }
  }
  return 0;
}

/* A whole number from 0 to 2^24 held as FP32 (as_float) or as it is, in
 * place; 0 when it is not one. The FP32 case reads the bits with integer
 * operations (the core has no FPU: a comparison and two conversions in
 * software cost it hundreds of cycles a value): +0 and -0 are 0; else the
 * sign clear, the exponent from 0 to 23 and no fraction bits below the
 * point (NaN, infinities, subnormals and fractions are not whole). */
static int whole(uint32_t* u, uint32_t as_float) {
  if (!as_float) return 1;
  const uint32_t b = *u;
  if (!(b << 1)) {
    *u = 0;
    return 1;
  }
  const uint32_t e = b >> 23; /* the biased exponent where the sign is clear */
  if (e < 127 || e > 127 + 23) return 0;
  const uint32_t below = 23 - (e - 127), m = (b & 0x7fffffu) | 0x800000u;
  if (m & ((1u << below) - 1)) return 0;
  *u = m >> below;
  return 1;
}

/* Rows of a table picked by indices (TKP_GATHER): indices i0 .. i0 + n - 1
 * of the list at `index` (global memory; INT32, or FP32 holding whole
 * numbers where w[9] bit 0 says so) are read into the scratchpad, each
 * checked against the table's `rows`, and row index[i] of `table` (rows
 * of `row_bytes`) is copied to row i of `out` by the DMA engine, memory to
 * memory. An index out of range (or not a whole number) fails the
 * operation (exit 2). Words: 0-1 table, 2-3 index, 4-5 out (global
 * addresses), 6 rows, 7 row_bytes, 8 i0 | n << 16 (n at most 4096), 9 flags. */
__attribute__((noinline)) static int gather_rows(const uint32_t* w) {
  const uint64_t table = ARG64(w, 0), index = ARG64(w, 2), out = ARG64(w, 4);
  const uint32_t rows = w[6], row_bytes = w[7], i0 = w[8] & 0xffff, n = w[8] >> 16, as_float = w[9] & 1;
  if (!rows || !row_bytes || !n || n > 4096) return 2;
  uint32_t* idx = (uint32_t*)tk_ptr(0x10000);  /* the buffer area's start: 16 KiB at most */
  struct tk_dma d = {0};
  d.id = op_index, d.flags = TK_DMA_DST_LOCAL, d.src = index + 4ull * i0, d.dst = tk_off(idx), d.len0 = 4 * n;
  tk_dma_push(&d);
  if (tk_drain()) return 3;
  for (uint32_t i = 0; i < n; ++i) {
    uint32_t r = idx[i];
    if (!whole(&r, as_float) || r >= rows) return 2;
    struct tk_dma c = {0};
    c.id = op_index, c.src = table + (uint64_t)r * row_bytes, c.dst = out + (uint64_t)(i0 + i) * row_bytes, c.len0 = row_bytes;
    tk_dma_push(&c);
  }
  return 0;
}

/* Expert parallelism's dispatch and combine (TKP_DISPATCH) on a system
 * of N chips, expert e on chip e mod N, from a router's output in global
 * memory (T x K expert ids, then T x K FP32 gates): row t goes to every
 * chip j that one of its choices is on, taking j's next free slot of C
 * (rows in order; past the C-th a row is dropped there). Modes: 0 rows:
 * slot s = j C + i of `out` (s in the part [i0, i1)) is the row of `src`
 * (rows of row_bytes) that took it, zeros where none did; 1 route: `out`
 * is N blocks of [2][C][K] (each block's slots' K expert ids, then their
 * gates: the rows' own; an empty slot's every choice expert (j + 1) mod N,
 * another chip's, with gate 0), the part's blocks [i0, i1); 2
 * planes: `out` is P = min(K, N) planes of T rows, plane q's row t (t in
 * the part) the row j C + (t's slot on j) of `src` for the q-th chip j (in
 * chip order) that holds a slot of t, zeros past the last. Consecutive
 * rows that stay consecutive move in one copy, memory to memory. Words:
 * 0-1 the route, 2-3 src, 4-5 out, 6-7 zeros (at least max(T, N C) rows of
 * zeros, or N C K words), 8 T | K << 16, 9 N | C << 16, 10 mode, 11
 * row_bytes, 12 i0 | i1 << 16. N C at most TKP_MOE_MAX_T. The core reads
 * each word of its scratchpad in several cycles: the table is built from
 * each row's chips alone (at most K), and no slot is cleared. */
#define DISPATCH_SCRATCH 0x10000u
__attribute__((noinline)) static int dispatch(const uint32_t* w) {
  const uint64_t route = ARG64(w, 0), src = ARG64(w, 2), out = ARG64(w, 4), zeros = ARG64(w, 6);
  const uint32_t T = w[8] & 0xffff, K = w[8] >> 16, N = w[9] & 0xffff, C = w[9] >> 16, mode = w[10], rb = w[11];
  const uint32_t i0 = w[12] & 0xffff, i1 = w[12] >> 16, P = K < N ? K : N;
  if (!T || T > TKP_MOE_MAX_T || !K || K > TKP_MOE_MAX_K || N < 2 || N > 64 || !C || N * C > TKP_MOE_MAX_T || mode > 2 ||
      (mode != 1 && !rb) || !zeros || i0 > i1 || i1 > (mode == 2 ? T : mode == 1 ? N : N * C))
    return 2;
  uint32_t* const ids = (uint32_t*)tk_ptr(DISPATCH_SCRATCH);
  uint32_t* const gates = ids + TKP_MOE_MAX_K * TKP_MOE_MAX_T;
  uint32_t* const who = gates + TKP_MOE_MAX_K * TKP_MOE_MAX_T; /* by slot below its chip's fill: the row that took it */
  uint32_t* const fill = who + TKP_MOE_MAX_T;                  /* by chip: its slots taken */
  uint32_t* const block = fill + 64;                           /* mode 1: the route's N blocks */
  struct tk_dma d = {0};
  d.id = op_index, d.flags = TK_DMA_DST_LOCAL, d.src = route, d.dst = tk_off(ids), d.len0 = 4 * T * K;
  tk_dma_push(&d);
  if (mode == 1) {
    d.src = route + 4ull * T * K, d.dst = tk_off(gates);
    tk_dma_push(&d);
  }
  if (tk_drain()) return 3;
  const uint32_t mask = (N & (N - 1)) ? 0 : N - 1; /* N a power of two: e mod N by a mask */
  for (uint32_t j = 0; j < N; ++j) fill[j] = 0;
  /* mode 2: by plane, a pending copy's rows, its first source row + 1 (0:
   * zeros) and its first row of the plane (kept in registers' reach). */
  uint32_t run[TKP_MOE_MAX_K] = {0}, run_src[TKP_MOE_MAX_K] = {0}, run_dst[TKP_MOE_MAX_K] = {0};
#define DISPATCH_FLUSH(q)                                                                     \
  do {                                                                                       \
    if (run[q]) {                                                                            \
      struct tk_dma c = {0};                                                                 \
      c.id = op_index, c.len0 = rb * run[q];                                                 \
      c.src = run_src[q] ? src + (uint64_t)(run_src[q] - 1) * rb : zeros;                    \
      c.dst = out + ((uint64_t)(q) * T + run_dst[q]) * rb;                                   \
      tk_dma_push(&c);                                                                       \
      run[q] = 0;                                                                            \
    }                                                                                        \
  } while (0)
  const uint32_t last = mode == 2 ? i1 : T;
  for (uint32_t t = 0; t < last; ++t) {
    /* The row's chips, ascending, each once (at most K). */
    uint32_t chips[TKP_MOE_MAX_K], n = 0;
    for (uint32_t k = 0; k < K; ++k) {
      const uint32_t e = ids[t * K + k], j = mask ? e & mask : e % N;
      uint32_t p = n;
      while (p > 0 && chips[p - 1] > j) --p;
      if (p > 0 && chips[p - 1] == j) continue;
      for (uint32_t q = n; q > p; --q) chips[q] = chips[q - 1];
      chips[p] = j, ++n;
    }
    uint32_t q = 0; /* mode 2: the row's next plane */
    for (uint32_t x = 0; x < n; ++x) {
      const uint32_t j = chips[x], f = fill[j];
      if (f == C) continue; /* dropped there */
      who[j * C + f] = t, fill[j] = f + 1;
      if (mode != 2 || t < i0) continue;
      const uint32_t from = j * C + f + 1;
      if (run[q] && run_src[q] && run_src[q] + run[q] == from) {
        ++run[q];
      } else {
        DISPATCH_FLUSH(q);
        run[q] = 1, run_src[q] = from, run_dst[q] = t;
      }
      ++q;
    }
    if (mode != 2 || t < i0) continue;
    for (; q < P; ++q) { /* zeros past the row's last chip */
      if (run[q] && !run_src[q]) {
        ++run[q];
      } else {
        DISPATCH_FLUSH(q);
        run[q] = 1, run_src[q] = 0, run_dst[q] = t;
      }
    }
  }
  if (mode == 2) {
    for (uint32_t q = 0; q < P; ++q) DISPATCH_FLUSH(q);
    return 0;
  }
#undef DISPATCH_FLUSH
  if (mode == 0) {
    for (uint32_t s = i0, n; s < i1; s += n) { /* consecutive rows one copy, as are empty slots */
      const uint32_t j = s / C, i = s - j * C, end = (j + 1) * C < i1 ? (j + 1) * C : i1;
      n = 1;
      if (i < fill[j]) {
        while (s + n < end && i + n < fill[j] && who[s + n] == who[s] + n) ++n;
      } else {
        n = end - s;
      }
      struct tk_dma c = {0};
      c.id = op_index, c.len0 = rb * n, c.src = i < fill[j] ? src + (uint64_t)who[s] * rb : zeros, c.dst = out + (uint64_t)s * rb;
      tk_dma_push(&c);
    }
    return 0;
  }
  for (uint32_t j = i0; j < i1; ++j) {
    uint32_t *b = block + (j - i0) * 2 * C * K, *g = b + C * K;
    for (uint32_t i = 0; i < C; ++i, b += K, g += K) {
      if (i < fill[j]) {
        const uint32_t* from = ids + who[j * C + i] * K;
        for (uint32_t k = 0; k < K; ++k) b[k] = from[k], g[k] = from[TKP_MOE_MAX_K * TKP_MOE_MAX_T + k];
      } else {
        for (uint32_t k = 0; k < K; ++k) b[k] = j + 1 == N ? 0 : j + 1, g[k] = 0;
      }
    }
  }
  struct tk_dma o = {0};
  o.id = op_index, o.flags = TK_DMA_SRC_LOCAL, o.src = tk_off(block), o.dst = out + 8ull * i0 * C * K, o.len0 = 8 * (i1 - i0) * C * K;
  tk_dma_push(&o);
  return tk_drain() ? 3 : 0;
}

/* TKP_PAGED's words, for the next TKP_ATTN (which clears them). */
static struct {
  uint32_t on, page, pages, S, as_float, r0, r1, pool_hi;
  uint64_t seqs, table;
} paging;

/* TKP_PAGED: the next TKP_ATTN's rows belong to sequences, each with its
 * own paged KV cache. Words: 0-1 the rows' sequences (T values), 2-3 the
 * page tables (S rows of `pages` entries: a sequence's physical pages in
 * position order), both in global memory, INT32 or FP32 holding whole
 * numbers where w[6] bit 0 says so; 4 page (positions per page) | pages
 * << 16; 5 S; 6 flags | the high half of the pool's positions << 16 (the
 * attention's word 16 has the low half); 7 r0 | r1 << 16: this tile runs the segments (runs
 * of rows of one sequence at consecutive positions) that start in rows
 * [r0, r1). Checked by the attention. */
__attribute__((noinline)) static int paged(const uint32_t* w) {
  paging.seqs = ARG64(w, 0), paging.table = ARG64(w, 2);
  paging.page = w[4] & 0xffff, paging.pages = w[4] >> 16, paging.S = w[5], paging.as_float = w[6] & 1, paging.pool_hi = w[6] >> 16;
  paging.r0 = w[7] & 0xffff, paging.r1 = w[7] >> 16, paging.on = 1;
  return 0;
}

/* TKP_KV_STRIPES's words, for the next TKP_ATTN (which clears them). */
static struct {
  uint32_t n, unit, cap;
  uint64_t k[TKP_KV_STRIPES_MAX], v[TKP_KV_STRIPES_MAX];
} kv_stripes;

/* TKP_KV_STRIPES: the next TKP_ATTN's K and V caches lie in n stripes
 * (a power of two, at most TKP_KV_STRIPES_MAX), each in a buffer of its
 * own: position x of KV head j is in block b = x / unit (a power of two),
 * kept by stripe (b + j) % n at its position (b / n) unit + x % unit of
 * `cap` (whole blocks) a KV head. Words: 0 n | unit << 8; 1 cap; 2-9 K's
 * stripes' addresses, 10-17 V's (64 bits each). Checked by the
 * attention. */
__attribute__((noinline)) static int striped(const uint32_t* w) {
  kv_stripes.n = w[0] & 0xff, kv_stripes.unit = w[0] >> 8, kv_stripes.cap = w[1];
  for (uint32_t s = 0; s < TKP_KV_STRIPES_MAX; ++s) kv_stripes.k[s] = ARG64(w, 2 + 2 * s), kv_stripes.v[s] = ARG64(w, 10 + 2 * s);
  return 0;
}

/* A KV cache as the attention addresses it: one buffer (n 1, cap its
 * positions) or stripes (TKP_KV_STRIPES: n and the block's positions,
 * 1 << shift, powers of two, so that a position's place costs the core
 * no division). */
struct kv_cache {
  const uint64_t* base;
  uint32_t n, nshift, shift, cap, width; /* n = 1 << nshift; width: values a position (BF16) */
};

/* Where position x of KV head j lies, and how many positions from it
 * follow it there (to its block's end). */
static uint64_t kv_at(const struct kv_cache* c, uint32_t j, uint32_t x, uint32_t* run) {
  if (c->n == 1) {
    *run = c->cap - x;
    return c->base[0] + 2ull * ((uint64_t)j * c->cap + x) * c->width;
  }
  const uint32_t b = x >> c->shift, off = x & ((1u << c->shift) - 1);
  *run = (1u << c->shift) - off;
  return c->base[(b + j) & (c->n - 1)] + 2ull * ((uint64_t)j * c->cap + ((b >> c->nshift) << c->shift) + off) * c->width;
}

/* Positions [at, b1) of a sequence (PT its page table, pages of `page`
 * positions): how many from `at` lie one after another in KV head j's
 * cache from *addr on: to the end of the page, and of pages that follow
 * it in the pool, within the block. */
static uint32_t kv_run(const struct kv_cache* c, uint32_t j, const uint32_t* PT, uint32_t page, uint32_t at, uint32_t b1,
                       uint64_t* addr) {
  const uint32_t off = at % page, phys = PT[at / page] * page + off;
  uint32_t run;
  *addr = kv_at(c, j, phys, &run);
  if (run > b1 - at) run = b1 - at;
  uint32_t n_at = page - off < run ? page - off : run;
  while (n_at < run && PT[(at + n_at) / page] * page == phys + n_at) n_at += page < run - n_at ? page : run - n_at;
  return n_at;
}

/* TKP_ATTN's load of positions [b0, b1) of KV head j from cache c (pages
 * of `page` positions, PT the sequence's page table, an unpaged cache
 * one page) to the scratchpad at `dst`: a DMA a run of positions one
 * after another in the cache (kv_run), the first waiting on `wait`, the
 * last signalling `signal`. */
static void att_rows(const struct kv_cache* cache, uint32_t j, const uint32_t* PT, uint32_t page, uint32_t b0, uint32_t b1,
                     uint32_t dst, int wait, int signal) {
  struct tk_dma c = {0};
  c.id = op_index, c.flags = TK_DMA_DST_LOCAL;
  for (uint32_t at = b0; at < b1;) {
    uint64_t src;
    const uint32_t n_at = kv_run(cache, j, PT, page, at, b1, &src);
    c.src = src, c.dst = dst + 2 * (at - b0) * cache->width, c.len0 = 2 * n_at * cache->width;
    c.sem = TK_SEM(at == b0 ? wait : TK_NONE, at + n_at == b1 ? signal : TK_NONE, TK_NONE);
    tk_dma_push(&c);
    at += n_at;
  }
}

/* Causal attention over a KV cache (TKP_ATTN), for heads [h0, h1) of H
 * on this tile: T new rows, row r at position positions[r] (read from the
 * chip: INT32, or FP32 holding a whole number where flags bit 0 says so).
 * Without TKP_PAGED before it the rows are one sequence at p .. p + T - 1
 * (p = positions[0]) over a cache of C positions; with it they are
 * segments of sequences, each over its own pages of the cache (a pool of
 * C / page pages per KV head), and this tile runs the segments starting
 * in its rows. For a segment of Ts rows at p and head h (KV head j = h /
 * (H / KV)):
 *   K = the sequence's cached rows 0 .. p - 1 of head j (BF16) and the new
 *       rows of k's head j cast to BF16; V the same from v and the V cache;
 *   S = Q.K^T in FP32 (Q: q's head h cast to BF16), the new rows' block
 *       added to the causal mask (0, or -inf above the diagonal), each row
 *       scaled by its scale, softmax over the p + Ts columns;
 *   out's head h = bf16(S).V (FP32).
 * With flags bit 1, the new Q and K rows are rotated first (the vector
 * unit's rope, each row at its position) in FP32, then rounded. The tile
 * whose heads include j's first (h % (H / KV) == 0) appends the new K and V
 * rows (BF16) to the cache's pages. Words: 0-1 q's first query (rows of
 * T, q stride elements apart, H heads of dh), 2-3 k's first key (k stride
 * apart, KV heads of dh), 4-5 v's first value (v stride apart, KV heads of
 * dv), all FP32; 6-7 the K cache (KV x C x dh), 8-9 the V cache (KV x C x
 * dv), BF16 (with TKP_KV_STRIPES before it, the caches lie in its stripes
 * instead); 10-11 positions; 12-13 the constants (T scales, the T x T
 * mask, then -inf as many times as a sequence's positions plus T, FP32);
 * 14-15 out (T x H dv, FP32; rows os dv apart, head h at h dv); 16 T | C << 16; 17 H | KV << 16; 18 dh | dv
 * << 16; 19 h0 | h1 << 16; 20 flags (bit 0 positions in FP32, bit 1
 * rotary) | os << 2 (14 bits, 0: H; a stripe of the output: out then
 * lies where its head 0 would) | v stride << 16; 21 q stride (0: H dh,
 * q packed, a row of any width) | k stride << 16. A position past
 * the sequence's cache, a sequence or page out of range, or a value that
 * is not a whole number fails the operation (exit 2); so does a segment
 * too long for the scratchpad. Heads run in sets sharing a KV head (each
 * segment's cached rows loaded once for the set), each set over its
 * segments in groups (below). */
__attribute__((noinline)) static int attention(const uint32_t* w) {
  const uint64_t q = ARG64(w, 0), k = ARG64(w, 2), v = ARG64(w, 4), kc = ARG64(w, 6), vc = ARG64(w, 8), pos = ARG64(w, 10);
  const uint64_t consts = ARG64(w, 12), out = ARG64(w, 14);
  const uint32_t T = w[16] & 0xffff, C = w[16] >> 16 | (paging.on ? paging.pool_hi << 16 : 0), H = w[17] & 0xffff, KV = w[17] >> 16;
  const uint32_t dh = w[18] & 0xffff, dv = w[18] >> 16;
  const uint32_t h0 = w[19] & 0xffff, h1 = w[19] >> 16, as_float = w[20] & 1, rotary = w[20] >> 1 & 1;
  const uint32_t qs = (w[21] & 0xffff) ? (w[21] & 0xffff) : H * dh, ks = w[21] >> 16, vs = w[20] >> 16, os = (w[20] >> 2 & 0x3fff) ? (w[20] >> 2 & 0x3fff) : H;
  const uint32_t is_paged = paging.on;
  paging.on = 0;
  const uint32_t page = is_paged ? paging.page : C, pages = is_paged ? paging.pages : 1, S = is_paged ? paging.S : 1;
  const uint32_t ra = is_paged ? paging.r0 : 0, rb = is_paged ? paging.r1 : 1;
  /* The caches: a buffer each, or TKP_KV_STRIPES's stripes. */
  const uint64_t kc_one = kc, vc_one = vc;
  struct kv_cache KC = {&kc_one, 1, 0, 0, C, dh}, VC = {&vc_one, 1, 0, 0, C, dv};
  uint32_t stripes_ok = 1;
  if (kv_stripes.n) {
    const uint32_t n = kv_stripes.n, unit = kv_stripes.unit;
    uint32_t shift = 0, nshift = 0;
    while (shift < 31 && !(unit >> shift & 1)) ++shift;
    while (nshift < 31 && !(n >> nshift & 1)) ++nshift;
    KC.base = kv_stripes.k, VC.base = kv_stripes.v, KC.n = VC.n = n, KC.nshift = VC.nshift = nshift;
    KC.shift = VC.shift = shift, KC.cap = VC.cap = kv_stripes.cap;
    kv_stripes.n = 0;
    /* n a power of two up to the most, whole blocks, the last position's block in every stripe's room */
    stripes_ok = n <= TKP_KV_STRIPES_MAX && !(n & (n - 1)) && unit && !(unit & (unit - 1)) && !(KC.cap & (unit - 1)) &&
                 ((uint64_t)(((C - 1) >> shift) >> nshift) + 1) << shift <= KC.cap;
  }
  if (!T || !C || !H || !KV || H % KV || !dh || !dv || h0 >= h1 || h1 > H || qs < H * dh || ks < KV * dh || vs < KV * dv ||
      (rotary && dh % 2) || !page || !pages || C % page || !S || rb > T || (uint64_t)S * pages > 65536 || !stripes_ok)
    return 2;
  const uint32_t cap = pages * page; /* a sequence's positions */
  /* A segment's cached K and V rows load whole (att_rows), K's first on
   * even tiles and V's on odd ones: where the two caches lie in
   * different stacks (the compiler places state round robin over them),
   * tiles that all read K's, then V's, would leave one stack's port idle
   * at a time. */
  uint32_t hart;
  __asm__ volatile("csrr %0, mhartid" : "=r"(hart));
  const uint32_t kv_first = hart & 1; /* 0: K first */
  if (0x10000u + tkp_attn_fixed(T, (uint64_t)S * pages) > TKP_PROGRAM_OFFSET) return 2;
  uint32_t top = 0x10000;
#define ATT_BUF(bytes) (top += ((bytes) + 255u) & ~255u, top - (((bytes) + 255u) & ~255u))
  /* One sequence: its position, sequence 0 and page 0 (the whole cache). */
  uint32_t one_seq = 0, one_page = 0;
  uint32_t* const POS = (uint32_t*)tk_ptr(ATT_BUF(4 * (is_paged ? T : 1)));
  uint32_t* const SEQ = is_paged ? (uint32_t*)tk_ptr(ATT_BUF(4 * T)) : &one_seq;
  uint32_t* const TABLE = is_paged ? (uint32_t*)tk_ptr(ATT_BUF(4 * S * pages)) : &one_page;
  const uint32_t SC = ATT_BUF(4 * T);
  struct tk_dma d = {0};
  d.id = op_index, d.flags = TK_DMA_DST_LOCAL, d.src = pos, d.dst = tk_off(POS), d.len0 = 4 * (is_paged ? T : 1);
  tk_dma_push(&d);
  d.src = consts, d.dst = SC, d.len0 = 4 * T;
  tk_dma_push(&d);
  if (is_paged) {
    d.src = paging.seqs, d.dst = tk_off(SEQ), d.len0 = 4 * T;
    tk_dma_push(&d);
    d.src = paging.table, d.dst = tk_off(TABLE), d.len0 = 4 * S * pages;
    tk_dma_push(&d);
  }
  if (tk_drain()) return 3;
  for (uint32_t r = 0; r < (is_paged ? T : 1); ++r)
    if (!whole(&POS[r], as_float) || (is_paged && (!whole(&SEQ[r], paging.as_float) || SEQ[r] >= S))) return 2;
  const uint32_t fixed = top, group = H / KV, cast = tk_dma_cast(TK_FP32, TK_BF16) | TK_DMA_DST_LOCAL;
  /* A segment starts at row r unless r continues the one before; its rows. */
#define ATT_STARTS(r) (!is_paged || !(r) || SEQ[r] != SEQ[(r) - 1] || POS[r] != POS[(r) - 1] + 1)
#define ATT_ROWS(r, Ts) \
  for (Ts = is_paged ? 1 : T; (r) + Ts < T && SEQ[(r) + Ts] == SEQ[r] && POS[(r) + Ts] == POS[r] + Ts; ++Ts)
  /* Every segment checked before anything runs. The scratchpad a segment
   * needs grows with its rows and its width (its cached part is at most
   * its width), so the longest rows and the widest width bound every
   * segment's: one bound checks them all where it fits (the 64-bit sums
   * cost the core more than the rest of a segment's checks), else each
   * segment is checked on its own. */
  uint32_t segments = 0, most_rows = 0, most_n = 0;
  for (uint32_t r0 = ra; r0 < rb; ++r0) {
    if (!ATT_STARTS(r0)) continue;
    uint32_t Ts;
    ATT_ROWS(r0, Ts);
    const uint32_t p = POS[r0], n = p + Ts;
    if (p > cap || Ts > cap - p) return 2;
    ++segments, most_rows = Ts > most_rows ? Ts : most_rows, most_n = n > most_n ? n : most_n;
    uint32_t* const PT = TABLE + SEQ[r0] * pages;
    for (uint32_t i = 0; i * page < n; ++i)
      if (!whole(&PT[i], is_paged ? paging.as_float : 0) || PT[i] >= C / page) return 2;
  }
  const uint64_t table_words = (uint64_t)S * pages;
  /* (A segment's least room: its cached rows whole, or streamed.) */
  const uint64_t whole_bound = tkp_attn_segment(0, most_n, dh, dv), stream_bound = tkp_attn_stream(most_rows, dh, dv);
  const uint64_t least_bound = whole_bound < stream_bound ? whole_bound : stream_bound;
  if (segments && 0x10000u + tkp_attn_fixed(T, table_words) + tkp_attn_group(most_rows, most_n, dh, dv, 1) + least_bound >
                      TKP_PROGRAM_OFFSET)
    for (uint32_t r0 = ra; r0 < rb; ++r0) {
      if (!ATT_STARTS(r0)) continue;
      uint32_t Ts;
      ATT_ROWS(r0, Ts);
      if (0x10000u + tkp_attn_scratch(T, Ts, POS[r0] + Ts, dh, dv, table_words) > TKP_PROGRAM_OFFSET) return 2;
    }
  /* Heads in sets that share a KV head (up to gmax of them, as many as
   * the scratchpad holds with the longest segment at the widest width):
   * a set loads each segment's cached keys and values once for all its
   * heads. A group of segments (as many as the scratchpad holds,
   * ATT_GROUP at most) runs as one: its rows' queries (the set's heads,
   * side by side in q) and new keys load in one DMA each, row t's
   * queries and key side by side (one rotation turns them all: they share
   * the position); each segment's scores go to its block of one matrix as
   * wide as the group's longest segment (the block's rows head by head,
   * each head's rows in order), whose other columns hold -inf (a row of
   * the constants), so that one scaling, one softmax and one cast serve
   * the group (the -inf columns weigh 0, exactly); each segment's P.V
   * reads its block; the stores write the group's outputs. The engines
   * are ordered by semaphores (left at zero): the group's new keys' load
   * signals A_KEYS, which the first rotation waits for (the rotations run
   * under the values' and the mask's loads); each segment's last load
   * signals A_LOADED, which its rotations' cast waits for before it
   * signals A_ROTATED (without rotation the scores wait for A_LOADED);
   * the last segment's last score GEMM A_SCORED (the tensor core runs
   * them in order); the cast A_WEIGHED; the last P.V A_DONE, which the
   * stores wait for. The group drains before the next reuses the
   * buffers. */
  enum { A_LOADED = 0, A_ROTATED, A_SCORED, A_WEIGHED, A_DONE, A_KEYS, A_KBLK, A_KFREE, A_VBLK, A_VFREE };
  enum { ATT_GROUP = 32 };
  struct {
    uint32_t r0, Ts, p, VB, KN, VN, streamed;
  } seg[ATT_GROUP];
  const uint64_t minus_inf = consts + 4ull * (T + (uint64_t)T * T); /* cap + T of them */
  uint32_t gmax = h1 - h0 < group ? h1 - h0 : group;
  while (gmax > 1 && fixed + tkp_attn_group(most_rows, most_n, dh, dv, gmax) + least_bound > TKP_PROGRAM_OFFSET) --gmax;
  /* Where the fullest group the rows could form (every row, the widest
   * width, ATT_GROUP segments each as wide) fits, no group ends for room:
   * each group takes ATT_GROUP segments, and no segment's size is summed. */
  const uint32_t most_segments = segments < ATT_GROUP ? segments : ATT_GROUP;
  const int roomy = fixed + tkp_attn_group(T, most_n, dh, dv, gmax) + most_segments * tkp_attn_segment(0, most_n, dh, dv) <=
                    TKP_PROGRAM_OFFSET;
  const uint32_t* const scales = (const uint32_t*)tk_ptr(SC);
  for (uint32_t h = h0, gh = 1; h < h1; h += gh) {
    const uint32_t j = h / group, set_end = (j + 1) * group < h1 ? (j + 1) * group : h1;
    gh = set_end - h < gmax ? set_end - h : gmax;
    const uint32_t g1 = gh + 1; /* a row's queries and its key */
    /* A streamed segment's block buffers (as tkp_attn_stream counts them). */
    const uint32_t BLK = tkp_attn_block(dh, dv), KBLK = (2 * BLK * dh + 255u) & ~255u, VBLK = (2 * BLK * dv + 255u) & ~255u;
    for (uint32_t r0 = ra; r0 < rb;) {
      /* The group: segments from r0 while the scratchpad holds them. */
      uint32_t count = 0, first = 0, rows = 0, wide = 0;
      uint64_t segs_bytes = 0;
      for (; r0 < rb && count < ATT_GROUP; ++r0) {
        if (!ATT_STARTS(r0)) continue;
        uint32_t Ts;
        ATT_ROWS(r0, Ts);
        const uint32_t p = POS[r0], n = p + Ts, w2 = n > wide ? n : wide;
        if (!count) first = r0;
        uint32_t streamed = 0; /* (a roomy group's segments all fit whole) */
        if (!roomy) {
          streamed = fixed + tkp_attn_group(Ts, n, dh, dv, gh) + tkp_attn_segment(Ts, n, dh, dv) > TKP_PROGRAM_OFFSET;
          if (count && streamed) break; /* it runs alone, in the next group */
          const uint64_t more = segs_bytes + tkp_attn_segment(Ts, n, dh, dv);
          if (count && fixed + tkp_attn_group(r0 + Ts - first, w2, dh, dv, gh) + more > TKP_PROGRAM_OFFSET) break; /* the next group's */
          segs_bytes = more;
        }
        seg[count].r0 = r0, seg[count].Ts = Ts, seg[count].p = p, seg[count].streamed = streamed;
        ++count, rows = r0 + Ts - first, wide = w2;
        if (streamed) {
          ++r0;
          break;
        }
      }
      if (!count) break; /* only the last group's continuing rows were left */
      top = fixed;
      const uint32_t R = rows * gh; /* the scores' rows */
      const uint32_t QKF = ATT_BUF(4 * rows * g1 * dh), QKB = ATT_BUF(2 * rows * g1 * dh), O = ATT_BUF(4 * R * dv);
      /* (The probabilities' BF16 copy lies over the scores it is cast
       * from: the vector unit reads its source before it writes.) */
      const uint32_t SS = ATT_BUF(4 * R * wide), PB = SS, SCL = gh > 1 ? ATT_BUF(4 * R) : SC + 4 * first;
      /* The scores' matrix all -inf where a segment is narrower than it
       * (the segments write theirs over it; at most T rows a load, which
       * the constants' -inf cover), the group's queries and new keys side
       * by side: FP32 to rotate, or cast into place. */
      struct tk_dma l = {0};
      uint32_t ragged = 0; /* a segment narrower than the matrix: the -inf needed */
      for (uint32_t i = 0; i < count; ++i) ragged |= seg[i].p + seg[i].Ts < wide;
      l.id = op_index, l.flags = TK_DMA_DST_LOCAL, l.src = minus_inf, l.len0 = 4 * wide;
      l.sstride1 = 4, l.dstride1 = 4 * wide; /* (a stride of 0 would mean packed) */
      for (uint32_t at = 0; ragged && at < R; at += T) {
        l.dst = SS + 4 * at * wide, l.count1 = R - at < T ? R - at : T;
        tk_dma_push(&l);
      }
      const uint32_t eb = rotary ? 4 : 2; /* the loaded rows' element bytes */
      l.flags = rotary ? TK_DMA_DST_LOCAL : cast, l.src = q + 4ull * (first * qs + h * dh), l.dst = rotary ? QKF : QKB;
      l.len0 = rotary ? 4 * gh * dh : gh * dh, l.count1 = rows, l.sstride1 = 4 * qs, l.dstride1 = eb * g1 * dh;
      tk_dma_push(&l);
      l.src = k + 4ull * (first * ks + j * dh), l.dst += eb * gh * dh, l.len0 = rotary ? 4 * dh : dh, l.sstride1 = 4 * ks;
      if (rotary) l.sem = TK_SEM(TK_NONE, A_KEYS, TK_NONE);
      tk_dma_push(&l);
      l.sem = 0;
      int scored = 0; /* a score GEMM pushed */
      for (uint32_t i = 0; i < count; ++i) {
        const uint32_t Ts = seg[i].Ts, p = seg[i].p, n = p + Ts, u = seg[i].r0 - first, r = seg[i].r0;
        const uint32_t* const PT = TABLE + SEQ[r] * pages;
        const uint32_t streamed = seg[i].streamed, S_i = SS + 4 * u * gh * wide;
        /* Whole: the cached K (p rows) and V with the new rows after it (n
         * rows); streamed: two blocks each of K and V, and the new V rows. */
        const uint32_t KB = ATT_BUF(streamed ? 2 * KBLK : 2 * p * dh), VB = ATT_BUF(streamed ? 2 * VBLK : 2 * n * dv);
        const uint32_t VN = streamed ? ATT_BUF(2 * Ts * dv) : VB + 2 * p * dv;
        const uint32_t QK = QKB + 2 * u * g1 * dh; /* row t's queries at QK + 2 t g1 dh, its key 2 gh dh after */
        seg[i].VB = VB, seg[i].VN = VN, seg[i].KN = QK + 2 * gh * dh;
        /* The new V rows cast into place, the cached rows page by page
         * (streamed: the first two blocks of K), the mask (each head's
         * rows); the last of them (the mask, else the last cached V rows,
         * else the new V rows) signals. */
        l.flags = cast, l.src = v + 4ull * (r * vs + j * dv), l.dst = VN, l.len0 = dv, l.count1 = Ts;
        l.sstride1 = 4 * vs, l.dstride1 = 2 * dv;
        if ((streamed || !p) && Ts == 1) l.sem = TK_SEM(TK_NONE, A_LOADED, TK_NONE);
        tk_dma_push(&l);
        l.sem = 0;
        const uint32_t blocks = streamed ? (p + BLK - 1) / BLK : 0;
        for (uint32_t b = 0; b < blocks && b < 2; ++b)
          att_rows(&KC, j, PT, page, b * BLK, p < (b + 1) * BLK ? p : (b + 1) * BLK,
                   KB + b * KBLK, TK_NONE, A_KBLK);
        for (uint32_t x = 0; x < 2 && !streamed && p; ++x) { /* whole: K and V, in the tile's order */
          const uint32_t is_v = x ^ kv_first;
          att_rows(is_v ? &VC : &KC, j, PT, page, 0, p, is_v ? VB : KB, TK_NONE,
                   x && Ts == 1 ? A_LOADED : TK_NONE);
        }
        for (uint32_t e = 0; Ts > 1 && e < gh; ++e) {
          struct tk_dma m = {0};
          m.id = op_index, m.flags = TK_DMA_DST_LOCAL, m.src = consts + 4ull * (T + r * T + r), m.dst = S_i + 4 * (e * Ts * wide + p);
          m.len0 = 4 * Ts, m.count1 = Ts, m.sstride1 = 4 * T, m.dstride1 = 4 * wide;
          if (e + 1 == gh) m.sem = TK_SEM(TK_NONE, A_LOADED, TK_NONE);
          tk_dma_push(&m);
        }
        uint32_t ready = A_LOADED; /* what the scores wait for */
        if (rotary) { /* each row's queries and key at its position, then rounded into place */
          struct tk_vec x = {0};
          x.id = op_index, x.op = TK_VROPE, x.rows = g1, x.cols = dh, x.sem = TK_SEM(i ? TK_NONE : A_KEYS, TK_NONE, TK_NONE);
          for (uint32_t t = 0; t < Ts; ++t) {
            x.src0 = x.dst = QKF + 4 * (u + t) * g1 * dh, x.position = p + t;
            tk_vec_push(&x);
            x.sem = TK_SEM(TK_NONE, TK_NONE, TK_NONE);
          }
          x.op = TK_VCAST_TO, x.rows = g1 * Ts, x.format = TK_BF16, x.src0 = QKF + 4 * u * g1 * dh, x.dst = QK;
          x.sem = TK_SEM(A_LOADED, A_ROTATED, TK_NONE);
          tk_vec_push(&x);
          ready = A_ROTATED;
        }
        /* The scores, head by head (one GEMM for the set's heads where the
         * segment has one row: its queries lie one after another): the
         * cached columns, then the new ones onto the mask. */
        const uint32_t gemms = Ts == 1 ? 1 : gh;
        struct tk_gemm g = {0};
        g.id = op_index, g.input = TK_BF16, g.trans_b = 1, g.k = dh, g.m = Ts == 1 ? gh : Ts, g.lda = Ts == 1 ? dh : g1 * dh;
        g.ldc = wide;
        if (streamed) {
          /* The new columns first (they wait for the queries), then block
           * by block (each waits for its K; the block two on loads into
           * the buffer its last GEMM frees), then the first two blocks of
           * V load. */
          for (uint32_t e = 0; e < gemms; ++e) {
            g.a = QK + 2 * e * dh, g.n = Ts, g.b = seg[i].KN, g.ldb = g1 * dh, g.c = S_i + 4 * (e * Ts * wide + p), g.accumulate = Ts > 1;
            g.sem = TK_SEM(e ? TK_NONE : (int)ready, !blocks && e + 1 == gemms ? A_SCORED : TK_NONE, TK_NONE);
            tk_gemm_push(&g);
          }
          for (uint32_t b = 0; b < blocks; ++b) {
            const uint32_t b0 = b * BLK, b1 = p < b0 + BLK ? p : b0 + BLK;
            for (uint32_t e = 0; e < gemms; ++e) {
              const int last = e + 1 == gemms;
              g.a = QK + 2 * e * dh, g.n = b1 - b0, g.b = KB + (b & 1) * KBLK, g.ldb = 0, g.c = S_i + 4 * (e * Ts * wide + b0);
              g.accumulate = 0;
              g.sem = TK_SEM(e ? TK_NONE : A_KBLK, last && b + 2 < blocks ? A_KFREE : TK_NONE, last && b + 1 == blocks ? A_SCORED : TK_NONE);
              tk_gemm_push(&g);
            }
            if (b + 2 < blocks)
              att_rows(&KC, j, PT, page, b0 + 2 * BLK, p < b1 + 2 * BLK ? p : b1 + 2 * BLK,
                       KB + (b & 1) * KBLK, A_KFREE, A_KBLK);
          }
          for (uint32_t b = 0; b < blocks && b < 2; ++b)
            att_rows(&VC, j, PT, page, b * BLK, p < (b + 1) * BLK ? p : (b + 1) * BLK,
                     VB + b * VBLK, TK_NONE, A_VBLK);
        }
        for (uint32_t e = 0; e < (streamed ? 0 : gemms); ++e) {
          g.a = QK + 2 * e * dh, g.accumulate = 0;
          g.sem = TK_SEM(scored ? TK_NONE : (int)ready, TK_NONE, TK_NONE);
          if (p) {
            g.n = p, g.b = KB, g.ldb = 0, g.c = S_i + 4 * e * Ts * wide;
            tk_gemm_push(&g);
            scored = 1, g.sem = TK_SEM(TK_NONE, TK_NONE, TK_NONE);
          }
          g.n = Ts, g.b = seg[i].KN, g.ldb = g1 * dh, g.c = S_i + 4 * (e * Ts * wide + p), g.accumulate = Ts > 1;
          if (i + 1 == count && e + 1 == gemms) g.sem = TK_SEM(scored ? TK_NONE : (int)ready, A_SCORED, TK_NONE);
          tk_gemm_push(&g);
          scored = 1;
        }
        scored = 0; /* the next segment's scores wait for its own loads */
        /* The rows' scales where a set shares them (else the constants'). */
        for (uint32_t e = 0; gh > 1 && e < gh; ++e)
          for (uint32_t t = 0; t < Ts; ++t) ((uint32_t*)tk_ptr(SCL))[u * gh + e * Ts + t] = scales[first + u + t];
      }
      /* Every row scaled, its softmax, rounded to BF16: once for the group. */
      struct tk_vec x = {0};
      x.id = op_index, x.op = TK_VSCALE_ROWS, x.rows = R, x.cols = wide, x.src0 = SS, x.src1 = SCL, x.dst = SS;
      x.sem = TK_SEM(A_SCORED, TK_NONE, TK_NONE);
      tk_vec_push(&x);
      x.op = TK_VSOFTMAX, x.src1 = 0, x.sem = TK_SEM(TK_NONE, TK_NONE, TK_NONE);
      tk_vec_push(&x);
      /* (A streamed segment's: once its first V block is in, the cast's
       * signal frees its P.V.) */
      const uint32_t v_blocks = seg[0].streamed ? (seg[0].p + BLK - 1) / BLK : 0;
      x.op = TK_VCAST_TO, x.dst = PB, x.format = TK_BF16, x.sem = TK_SEM(v_blocks ? A_VBLK : TK_NONE, A_WEIGHED, TK_NONE);
      tk_vec_push(&x);
      for (uint32_t i = 0; i < count; ++i) { /* each segment's P.V, its heads' rows at once */
        const uint32_t u = seg[i].r0 - first, p = seg[i].p;
        struct tk_gemm o = {0};
        o.id = op_index, o.input = TK_BF16, o.m = gh * seg[i].Ts, o.n = dv, o.k = p + seg[i].Ts, o.a = PB + 2 * u * gh * wide;
        o.lda = wide, o.b = seg[i].VB, o.c = O + 4 * u * gh * dv;
        o.sem = TK_SEM(i ? TK_NONE : A_WEIGHED, i + 1 == count ? A_DONE : TK_NONE, TK_NONE);
        if (seg[i].streamed) {
          /* Block by block into the sums (FP32, added in position order as
           * one GEMM adds them), each block's V loaded into the buffer the
           * one two before frees; the new rows last. */
          for (uint32_t b = 0; b < v_blocks; ++b) {
            const uint32_t b0 = b * BLK, b1 = p < b0 + BLK ? p : b0 + BLK;
            o.k = b1 - b0, o.a = PB + 2 * (u * gh * wide + b0), o.b = seg[i].VB + (b & 1) * VBLK, o.accumulate = b > 0;
            o.sem = TK_SEM(b ? A_VBLK : A_WEIGHED, b + 2 < v_blocks ? A_VFREE : TK_NONE, TK_NONE);
            tk_gemm_push(&o);
            if (b + 2 < v_blocks)
              att_rows(&VC, j, TABLE + SEQ[seg[i].r0] * pages, page, b0 + 2 * BLK,
                       p < b1 + 2 * BLK ? p : b1 + 2 * BLK, seg[i].VB + (b & 1) * VBLK, A_VFREE, A_VBLK);
          }
          o.k = seg[i].Ts, o.a = PB + 2 * (u * gh * wide + p), o.b = seg[i].VN, o.accumulate = v_blocks > 0;
          o.sem = TK_SEM(v_blocks ? TK_NONE : A_WEIGHED, A_DONE, TK_NONE);
        }
        tk_gemm_push(&o);
      }
      /* The group's outputs once its last P.V is done (the DMA runs its
       * queue in order: the first store waits): a run of one-row segments
       * in one store (a row's heads lie side by side in O as in out),
       * a longer segment's rows head by head in one; then (the tile
       * holding the KV head's first query head) each segment's new rows
       * into their pages. */
      struct tk_dma st = {0};
      st.id = op_index, st.flags = TK_DMA_SRC_LOCAL, st.sem = TK_SEM(A_DONE, TK_NONE, TK_NONE);
      for (uint32_t i = 0; i < count;) {
        const uint32_t u = seg[i].r0 - first, Ts = seg[i].Ts;
        uint32_t run = 1;
        while (Ts == 1 && i + run < count && seg[i + run].Ts == 1 && seg[i + run].r0 == seg[i].r0 + run) ++run;
        st.src = O + 4 * u * gh * dv, st.dst = out + 4ull * ((uint64_t)seg[i].r0 * os + h) * dv, st.dstride1 = 4 * os * dv;
        if (Ts == 1) {
          st.len0 = 4 * gh * dv, st.count1 = run, st.sstride1 = 4 * gh * dv, st.count2 = 1, st.sstride2 = st.dstride2 = 0;
        } else {
          st.len0 = 4 * dv, st.count1 = Ts, st.sstride1 = 4 * dv, st.count2 = gh, st.sstride2 = 4 * Ts * dv, st.dstride2 = 4 * dv;
        }
        tk_dma_push(&st);
        st.sem = 0, i += run;
      }
      for (uint32_t i = 0; i < count && h % group == 0; ++i) {
        const uint32_t Ts = seg[i].Ts, p = seg[i].p, n = p + Ts;
        const uint32_t* const PT = TABLE + SEQ[seg[i].r0] * pages;
        for (uint32_t at = p; at < n;) {
          uint64_t ka, va;
          const uint32_t n_at = kv_run(&VC, j, PT, page, at, at + kv_run(&KC, j, PT, page, at, n, &ka), &va);
          struct tk_dma a = {0};
          a.id = op_index, a.flags = TK_DMA_SRC_LOCAL, a.src = seg[i].KN + 2 * (at - p) * g1 * dh, a.dst = ka;
          a.len0 = 2 * dh, a.count1 = n_at, a.sstride1 = 2 * g1 * dh, a.dstride1 = 2 * dh;
          tk_dma_push(&a);
          a.src = seg[i].VN + 2 * (at - p) * dv, a.dst = va, a.len0 = 2 * n_at * dv, a.count1 = 1;
          a.sstride1 = a.dstride1 = 0;
          tk_dma_push(&a);
          at += n_at;
        }
      }
      if (tk_drain()) return 3;
    }
  }
#undef ATT_STARTS
#undef ATT_ROWS
#undef ATT_BUF
  return 0;
}

/* TKP_POSITION: the word at w[0..1] (INT32, or FP32 holding a whole number
 * from 0 to 2^24 where w[2] bit 0 says so) becomes the base of relative
 * vector positions; anything else fails the operation (exit 2). */
__attribute__((noinline)) static int position(const uint32_t* w) {
  volatile uint32_t* at = (volatile uint32_t*)tk_ptr(TKP_POSITION_OFFSET);
  struct tk_dma d = {0};
  d.id = op_index, d.flags = TK_DMA_DST_LOCAL, d.src = ARG64(w, 0), d.dst = TKP_POSITION_OFFSET, d.len0 = 4;
  tk_dma_push(&d);
  if (tk_drain()) return 3;
  uint32_t p = *at;
  if (!whole(&p, w[2] & 1)) return 2;
  base_position = p;
  return 0;
}

static void mark_at(uint32_t offset) {
  uint32_t lo, hi, again;
  do {
    __asm__ volatile("csrr %0, cycleh" : "=r"(hi));
    __asm__ volatile("csrr %0, cycle" : "=r"(lo));
    __asm__ volatile("csrr %0, cycleh" : "=r"(again));
  } while (hi != again);
  volatile uint32_t* at = (volatile uint32_t*)tk_ptr(offset);
  at[0] = lo;
  at[1] = hi;
}

static int mark(const struct tkp_op* o) {
  if (o->w[0] < TKP_MARKS_OFFSET || o->w[0] > TKP_MARKS_OFFSET + 8 * (TKP_MARKS_MAX - 1) || o->w[0] % 8) return 2;
  mark_at(o->w[0]);
  return 0;
}

static uint32_t in_graph; /* run_long runs the program: a barrier may push early operations */
static uint32_t half_end; /* run_long: the index past the last operation in the program area */

/* A barrier's second half: takes n - 1 from its semaphore, then writes
 * its mark (slot + 1; 0: none). */
static int barrier_close(uint32_t n, uint32_t sem, uint32_t slot) {
  for (uint32_t i = 1; i < n; ++i)
    if (tk_sem_wait(sem)) return 3;
  if (slot) mark_at(TKP_MARKS_OFFSET + 8 * (slot - 1));
  return 0;
}

/* A barrier. Its early operations (the next node's prefetches: DMAs into
 * the scratchpad that wait on no semaphore) are pushed once the tile has
 * drained and signalled, before it waits, so they load while it waits for
 * the others; it returns minus their count (run_long skips them). Where
 * they lie past the program area's half (its next half may still be on
 * its way) they run after the barrier, as the operations they are. */
__attribute__((noinline)) static int barrier(const struct tkp_op* o) {
  const uint32_t n = o->w[0], self = o->w[1], sem = o->w[2];
  const uint32_t early = TKP_BARRIER_EARLY(o->sem), slot = TKP_BARRIER_MARK(o->sem);
  if (!n || n > TKP_BARRIER_MAX || self >= n || sem > 15 || slot > TKP_MARKS_MAX || (o->sem & 0xfc00ff00u) ||
      (early && !in_graph))
    return 2;
  const uint32_t at = op_index, pushed = op_index + 1 + early <= half_end ? early : 0;
  for (uint32_t e = 1; e <= pushed; ++e)
    if (o[e].kind != TKP_DMA || (o[e].sem & 0xffu)) {
      op_index = at + e;
      return 2;
    }
  if (tk_drain()) return 3;
  for (uint32_t i = 0; i < n; ++i)
    if (i != self) tk_remote_signal(o->w[3 + i], sem);
  for (uint32_t e = 1; e <= pushed; ++e) op_index = at + e, dma(&o[e]);
  op_index = at;
  if (barrier_close(n, sem, slot)) return 3;
  return -(int)pushed;
}

/* TKP_COLLECTIVE: the collective posted through the fabric's CE_*
 * registers (every chip's core posts the same one), then the core sleeps
 * until the engine signals; the engine's error fails the operation. */
__attribute__((noinline)) static int collective(const uint32_t* w) {
  const uint32_t c2c = w[7], sem = w[10];
  if (sem > 15) return 2;
#define CE_W(reg, v) (*(volatile uint32_t*)(uintptr_t)(c2c + C2C_##reg##_OFFSET) = (v))
  CE_W(CE_ERROR, 0);
  CE_W(CE_OP, w[0]);
  CE_W(CE_SRC, w[1]), *(volatile uint32_t*)(uintptr_t)(c2c + C2C_CE_SRC_OFFSET + 4) = w[2];
  CE_W(CE_DST, w[3]), *(volatile uint32_t*)(uintptr_t)(c2c + C2C_CE_DST_OFFSET + 4) = w[4];
  CE_W(CE_COUNT, w[5]), *(volatile uint32_t*)(uintptr_t)(c2c + C2C_CE_COUNT_OFFSET + 4) = w[6];
  CE_W(CE_TABLE, w[11]), *(volatile uint32_t*)(uintptr_t)(c2c + C2C_CE_TABLE_OFFSET + 4) = w[12];
  CE_W(CE_SIGNAL, w[8]), *(volatile uint32_t*)(uintptr_t)(c2c + C2C_CE_SIGNAL_OFFSET + 4) = w[9];
  CE_W(CE_PUSH, 1);
#undef CE_W
  if (tk_sem_wait(sem)) return 3;
  return *(volatile uint32_t*)(uintptr_t)(c2c + C2C_CE_ERROR_OFFSET) ? 4 : 0;
}

/* Runs one operation; nonzero: the exit code. The core pushes every
 * operation through here, so it must stay lean: the big operations above
 * are kept out of line (inlined, their register saves would run for every
 * operation: one inlined gather made small graphs' nodes 25% slower). */
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
    case TKP_ROUTE: return route_grouped(o->w);
    case TKP_GATHER: return gather_rows(o->w);
    case TKP_ATTN: return attention(o->w);
    case TKP_PAGED: return paged(o->w);
    case TKP_KV_STRIPES: return striped(o->w);
    case TKP_POSITION: return position(o->w);
    case TKP_COLLECTIVE: return collective(o->w);
    case TKP_DISPATCH: return dispatch(o->w);
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
  in_graph = 1;
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
    const struct tkp_op* o = area + half * HALF;
    const struct tkp_op* const end = o + n;
    half_end = base + n;
    for (uint32_t i = base; o < end; ++o, ++i) {
      *cursor = i;
      op_index = i;
      TK_W(CMD_ID, i), TK_W(VCMD_ID, i);
      if (o->kind == TKP_END) return tk_drain() ? 3 | (failed_op(i) + 1) << 8 : 0;
      const int r = run_op(o);
      if (r) {
        if (r > 0) return r | (r == 3 ? failed_op(i) + 1 : op_index + 1) << 8;
        o += -r, i += (uint32_t)-r; /* a barrier that pushed its early operations */
      }
    }
  }
  return tk_drain() ? 3 | (failed_op(count) + 1) << 8 : 0;
}

int main(void) {
  uint64_t program = tk_arg64(0);
  uint32_t count = tk_arg(2);
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
