/* Tile programs: a list of engine operations that the `program` kernel
 * (sw/kernels/program) runs on a tile, built by the host (the runtime's
 * tessera::rt::TileProgram) or by firmware. Each operation is pushed to
 * its engine's queue with its semaphores, so a whole pipeline (loads,
 * GEMMs, vector ops, stores) is ordered by the hardware; the core only
 * sleeps in the queues and at TKP_WAIT. Shared by C and C++. */
#ifndef TESSERA_PROGRAM_H
#define TESSERA_PROGRAM_H

#include <stdint.h>

enum tkp_kind {
  TKP_END = 0,
  TKP_DMA = 1,    /* w: src lo/hi, dst lo/hi, flags, len0, count1, count2, sstride1, sstride2,
                     dstride1, dstride2, group, scales lo/hi, seed */
  TKP_GEMM = 2,   /* w: m, n, k, a, b, c, lda, ldb, ldc, CMD_FORMAT bits, promote, sa, sb, group */
  TKP_VEC = 3,    /* w: op, rows, cols, src0, src1, src2, dst, k, position, eps bits, VCMD_FORMAT bits,
                     group, aux, seed, flags (bit 0: the position is relative to the last TKP_POSITION's) */
  TKP_WAIT = 4,   /* the core takes one from semaphore w[0] (asleep until it can) */
  TKP_SIGNAL = 5, /* the core signals semaphore w[1] of the tile whose registers are at w[0]
                     (a global address; 0: this tile) */
  TKP_DRAIN = 6,  /* the core waits until every engine is idle */
  TKP_BARRIER = 7, /* drain, then a barrier of w[0] tiles (at most TKP_BARRIER_MAX), this one being number w[1]:
                      each signals semaphore w[2] of every other (whose registers are at the global addresses
                      w[3 + i]) and takes w[0] - 1 from its own. Two barriers in a row must use different
                      semaphores (tiles can be one barrier apart): graphs alternate TKP_BARRIER_SEM and the one below.
                      In a graph's program its `sem` word says more: bits 0-7 the number of operations after it
                      that the tile pushes once it has signalled and before it waits (TKP_BARRIER_EARLY: the next
                      node's prefetches, DMAs into its scratchpad that wait on no semaphore; past the program area's half they
                      run after it instead), bits 16-25 a mark
                      slot + 1 (0: none) whose TKP_MARK the core writes when the barrier has closed */
  TKP_MARK = 8,    /* the core writes its cycle counter (64 bits) at scratchpad offset w[0], one of the
                      TKP_MARKS_MAX slots at TKP_MARKS_OFFSET */
  TKP_MOE = 9,     /* this tile's share of the MoE experts dispatched on the device: w[0..18] as the program
                      kernel describes them (sw/kernels/program/program.c); uses semaphores 0-6, left at zero */
  TKP_ROUTE = 10,  /* a router's group-limited top-k on the core (DeepSeek-V3's noaux_tc), on rows in the
                      scratchpad: w[0..7] as the program kernel describes them (route_grouped) */
  TKP_GATHER = 11, /* rows of a table in global memory picked by indices the chip holds (an embedding
                      lookup): w[0..9] as the program kernel describes them (gather_rows) */
  TKP_POSITION = 13, /* the core reads a position the chip holds (w[0..1] its global address; w[2] bit 0: FP32
                        holding a whole number, else INT32) for the vector ops after it whose position is
                        relative (TKP_VEC flags bit 0): rotary embeddings at a position known at run time */
  TKP_ATTN = 12,   /* causal attention of some heads over a KV cache in global memory, at positions the chip
                      holds, the new K/V rows appended: w[0..21] as the program kernel describes them (attention) */
  TKP_PAGED = 14,  /* the next TKP_ATTN's rows are sequences over paged KV caches: w[0..7] as the program
                      kernel describes them (paged) */
  TKP_COLLECTIVE = 15, /* the core posts a collective to its chip's communication engine and sleeps until the
                          engine signals semaphore w[10] (the engine's signal address w[8..9]: that semaphore's,
                          as the engine addresses it); w[0] CE_OP, w[1..2] source, w[3..4] destination, w[5..6]
                          count, w[7] the fabric's registers (as the core addresses them), w[11..12] the all-to-all's table; a collective the engine
                          fails fails the operation (exit 4) */
  TKP_DISPATCH = 16, /* expert parallelism's dispatch and combine, from a router's output in global memory: w[0..12] as
                        the program kernel describes them (dispatch) */
  TKP_KV_STRIPES = 17, /* the next TKP_ATTN's K and V caches lie in stripes, each a buffer of its own (in an HBM stack
                          of its own): w[0..17] as the program kernel describes them (striped) */
};
#define TKP_KV_STRIPES_MAX 4u
#define TKP_BARRIER_MAX 19u
#define TKP_BARRIER_EARLY(sem) ((sem) & 0xffu)
#define TKP_BARRIER_MARK(sem) ((sem) >> 16 & 0x3ffu) /* slot + 1 */
/* Semaphores of long programs (more than TKP_MAX_OPS operations, streamed
 * into the program area in halves): the fetch of the next half signals
 * TKP_FETCH_SEM; graphs' barriers use TKP_BARRIER_SEM and TKP_BARRIER_SEM - 1.
 * Their operations must leave these three alone. */
#define TKP_FETCH_SEM 15u
#define TKP_BARRIER_SEM 14u

struct tkp_op { /* 96 bytes */
  uint32_t kind;
  uint32_t sem; /* TK_SEM(wait, signal, signal2) for the engine operations */
  uint32_t w[22];
};

/* TKP_MOE's limits and the scratchpad it uses: its lists and slice table
 * just below the program area (TKP_MOE_LISTS bytes), and from offset
 * 0x10000 (the kernel's buffer area) two of each pipelined buffer for a
 * block of rows (TKP_MOE_BLOCK of a slice's tokens at a time; a slice's
 * weights load once for all its blocks) of D columns and slices of Fs
 * hidden columns. The host plans its split with tkp_moe_scratch(); the
 * kernel lays its buffers out in this order and refuses (exit 2) a split
 * that does not fit (and a D or Fs over 16384, which never does). */
#define TKP_MOE_MAX_T 256u       /* tokens */
#define TKP_MOE_BLOCK 64u        /* rows a slice computes at once */
#define TKP_MOE_MAX_K 8u         /* experts per token */
#define TKP_MOE_MAX_SLICES 1024u /* experts x slices */
#define TKP_MOE_ROUND(b) (((b) + 255u) & ~(uint64_t)255u)
#define TKP_MOE_SCALE_BLOCK 128u /* FP8 experts: weights' blocks TKP_MOE_SCALE_BLOCK square, rows' groups as wide */
#define TKP_MOE_LISTS                                                                                  \
  (5 * TKP_MOE_ROUND(4ull * TKP_MOE_MAX_K * TKP_MOE_MAX_T) + TKP_MOE_ROUND(4ull * 8 * TKP_MOE_MAX_SLICES) + \
   5 * TKP_MOE_ROUND(4ull * TKP_MOE_MAX_SLICES))
static inline uint64_t tkp_moe_scratch(uint64_t T, uint64_t D, uint64_t Fs, int fp8) {
  const uint64_t B = T < TKP_MOE_BLOCK ? T : TKP_MOE_BLOCK, eb = fp8 ? 1 : 2;
  /* FP8: a slice's weights are its codes and then its 128 x 128 blocks'
   * FP32 scales; rows cast on the way in carry a scale per 128 columns. */
  const uint64_t w = eb * D * Fs + (fp8 ? 4 * (D / TKP_MOE_SCALE_BLOCK) * (Fs / TKP_MOE_SCALE_BLOCK) : 0);
  return TKP_MOE_LISTS +
         2 * (TKP_MOE_ROUND(eb * B * D) + (fp8 ? TKP_MOE_ROUND(4 * B * (D / TKP_MOE_SCALE_BLOCK)) : 0) + 3 * TKP_MOE_ROUND(w) + TKP_MOE_ROUND(4 * B * D)) +
         2 * TKP_MOE_ROUND(4 * B * Fs) + TKP_MOE_ROUND(eb * B * Fs) + (fp8 ? TKP_MOE_ROUND(4 * B * (Fs / TKP_MOE_SCALE_BLOCK)) : 0);
}

/* TKP_MOE in chunks (word 14: Dc | B << 16, Dc dividing D, B at most
 * TKP_MOE_BLOCK): for a slice too wide to load whole (a large D). A unit
 * (B of a slice's rows) streams its slice's weights through a ring of
 * TKP_MOE_RING chunk buffers: w1's and w3's rows in chunks of Dc (their
 * products summed in FP32), then w2 in chunks of Dc columns (the host
 * stores a slice's w2 chunk by chunk: D / Dc matrices of Fs x Dc), each
 * chunk's output rows scaled and stored as it comes. A slice's weights
 * stream again for each block of its rows. From 0x10000: the unit's rows
 * (B x D BF16; block-scaled FP8 experts, with Dc a multiple of 128: then
 * the rows cast to FP8 as D / Dc planes of B x Dc codes and their scales,
 * a scale per 128 columns), the ring (Dc x Fs each, FP8: codes then their
 * blocks' scales), H1 and H3 (B x Fs FP32), the SwiGLU's output (B x Fs;
 * FP8: and its scales) and TKP_MOE_OUTS output chunks (B x Dc
 * FP32; as many as let the loads run ahead of the stores). */
#define TKP_MOE_RING 4u
#define TKP_MOE_OUTS 2u
static inline uint64_t tkp_moe_chunked_scratch(uint64_t B, uint64_t D, uint64_t Fs, uint64_t Dc, int fp8) {
  const uint64_t eb = fp8 ? 1 : 2, chunk = eb * Dc * Fs + (fp8 ? 4 * (Dc / TKP_MOE_SCALE_BLOCK) * (Fs / TKP_MOE_SCALE_BLOCK) : 0);
  return TKP_MOE_LISTS + TKP_MOE_ROUND(2 * B * D) +
         (fp8 ? TKP_MOE_ROUND(B * D) + TKP_MOE_ROUND(4 * B * (D / TKP_MOE_SCALE_BLOCK)) : 0) + TKP_MOE_RING * TKP_MOE_ROUND(chunk) +
         2 * TKP_MOE_ROUND(4 * B * Fs) + TKP_MOE_ROUND(eb * B * Fs) + (fp8 ? TKP_MOE_ROUND(4 * B * (Fs / TKP_MOE_SCALE_BLOCK)) : 0) +
         TKP_MOE_OUTS * TKP_MOE_ROUND(4 * B * Dc);
}

/* TKP_ATTN's scratchpad from offset 0x10000, for T rows (with `table`
 * page-table entries: TKP_PAGED's S x pages, else 1): the rows' positions,
 * sequences, the page tables and the rows' scales; then for a group of
 * segments of R rows in all, the longest over n positions, run for g
 * heads that share a KV head: their queries and new keys side by side
 * (FP32 and BF16), their outputs (FP32), their scores (FP32, g R x n;
 * the probabilities cast to BF16 over them) and, where g > 1, the score
 * rows' scales; then
 * per segment of Ts rows over n positions of heads of dh (K) and dv (V)
 * values: its cached K and its V (BF16), or where those do not fit, its
 * stream's buffers (below). The kernel runs fewer heads at once where g
 * do not fit, and refuses (exit 2) a segment that does not fit alone for
 * one head. */
static inline uint64_t tkp_attn_fixed(uint64_t T, uint64_t table) { return 3 * TKP_MOE_ROUND(4 * T) + TKP_MOE_ROUND(4 * table); }
static inline uint64_t tkp_attn_group(uint64_t R, uint64_t n, uint64_t dh, uint64_t dv, uint64_t g) {
  return TKP_MOE_ROUND(4 * R * (g + 1) * dh) + TKP_MOE_ROUND(2 * R * (g + 1) * dh) + TKP_MOE_ROUND(4 * g * R * dv) +
         TKP_MOE_ROUND(4 * g * R * n) + (g > 1 ? TKP_MOE_ROUND(4 * g * R) : 0);
}
static inline uint64_t tkp_attn_segment(uint64_t Ts, uint64_t n, uint64_t dh, uint64_t dv) {
  return TKP_MOE_ROUND(2 * (n - Ts) * dh) + TKP_MOE_ROUND(2 * n * dv);
}
/* A segment whose cached rows do not fit instead streams them through two
 * buffers each of K and V of tkp_attn_block(dh, dv) positions, its new V
 * rows apart (its scores whole, as any segment's): TKP_ATTN_BLOCK for
 * heads of 128 values or more, twice as many each time the heads halve
 * (a block's K at most 16 KiB of BF16), so that a narrow head's blocks
 * are not all per-block cost. */
#define TKP_ATTN_BLOCK 64u
static inline uint32_t tkp_attn_block(uint64_t dh, uint64_t dv) {
  const uint64_t w = dh > dv ? dh : dv;
  uint32_t b = TKP_ATTN_BLOCK;
  while (b < (1u << 14) && 4ull * b * w <= 2ull * TKP_ATTN_BLOCK * 128) b *= 2; /* (bounded: w 0 ends too) */
  return b;
}
static inline uint64_t tkp_attn_stream(uint64_t Ts, uint64_t dh, uint64_t dv) {
  const uint64_t b = tkp_attn_block(dh, dv);
  return 2 * TKP_MOE_ROUND(2 * b * dh) + 2 * TKP_MOE_ROUND(2 * b * dv) + TKP_MOE_ROUND(2 * Ts * dv);
}
/* The less of the two a segment of Ts rows over n positions needs. */
static inline uint64_t tkp_attn_least(uint64_t Ts, uint64_t n, uint64_t dh, uint64_t dv) {
  const uint64_t whole = tkp_attn_segment(Ts, n, dh, dv), streamed = tkp_attn_stream(Ts, dh, dv);
  return whole < streamed ? whole : streamed;
}
static inline uint64_t tkp_attn_scratch(uint64_t T, uint64_t Ts, uint64_t n, uint64_t dh, uint64_t dv, uint64_t table) {
  return tkp_attn_fixed(T, table) + tkp_attn_group(Ts, n, dh, dv, 1) + tkp_attn_least(Ts, n, dh, dv);
}

#define TKP_MAX_OPS 640u                 /* 60 KiB of program */
#define TKP_PROGRAM_OFFSET 0x1f0000u     /* where the kernel keeps it: the scratchpad's last 64 KiB */
#define TKP_MARKS_OFFSET 0x1ff000u       /* the last 4 KiB of that: not program (graphs put their marks there) */
#define TKP_MARKS_MAX 511u
#define TKP_CURSOR_OFFSET (TKP_MARKS_OFFSET + 8u * TKP_MARKS_MAX) /* a graph's program: the operation it is at */
#define TKP_POSITION_OFFSET (TKP_CURSOR_OFFSET + 4u) /* TKP_POSITION's word, read there */

#ifdef __cplusplus
static_assert(sizeof(struct tkp_op) == 96, "an operation is 96 bytes");
#else
_Static_assert(sizeof(struct tkp_op) == 96, "an operation is 96 bytes");
#endif

#endif
