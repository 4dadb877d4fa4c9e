/* Tessera kernel SDK: what a kernel on a tile's RV32 core uses to drive its
 * tile, as inline functions over the generated register header
 * (tile_regs.h, from ip/tile/tile.regs.json).
 *
 * The core's local map: its scratchpad at TK_SPM (engine commands take
 * scratchpad offsets: tk_off(p)), its tile's registers at TK_REGS; any
 * other 32-bit address goes out over the NoC. DMA descriptors take 64-bit
 * global addresses (HBM lies above 4 GiB).
 *
 * Ordering: every engine command may wait on one hardware semaphore before
 * it starts and signal up to two when it has finished (TK_SEM(...)), so a
 * kernel can queue a whole pipeline (DMA in, GEMM, DMA out) and let the
 * hardware run it; tk_sem_wait() makes the core itself wait, asleep in wfi.
 * Queues hold TK_QUEUE_DEPTH commands; the push functions sleep while the
 * queue is full.
 *
 * A kernel is `int main(void)`; its arguments are tk_arg(i) (CORE_ARG[i],
 * 16 words, written by whoever launches it), its return value becomes
 * CORE_EXIT. Any trap is reported as a fault (CORE_FAULT_*) and stops the
 * core. */
#ifndef TESSERA_KERNEL_H
#define TESSERA_KERNEL_H

#include <stdint.h>

#include "tessera_platform.h"
#include "tile_regs.h"

#define TK_SPM ((uint32_t)TESSERA_TYPE_TILE_LOCAL_SPM) /* from the platform file's tile type */
#define TK_REGS ((uint32_t)TESSERA_TYPE_TILE_LOCAL_REGS)
#define TK_QUEUE_DEPTH 8u

/* Element formats (CMD_FORMAT.INPUT, VCMD_FORMAT, DMA_FLAGS.*_FORMAT). */
#define TK_FORMAT_(NAME, name, value) TK_##NAME = value,
enum tk_format { TILE_FORMAT_VALUES(TK_FORMAT_) };

/* A command's semaphores: wait on `w`, signal `s` and `s2` (each a
 * semaphore number 0..15, or TK_NONE). */
#define TK_NONE (-1)
#define TK_SEM(w, s, s2) \
  ((uint32_t)((w) + 1) | (uint32_t)((s) + 1) << 8 | (uint32_t)((s2) + 1) << 16)

static inline void tk_write(uint32_t off, uint32_t v) { *(volatile uint32_t*)(uintptr_t)(TK_REGS + off) = v; }
static inline uint32_t tk_read(uint32_t off) { return *(volatile uint32_t*)(uintptr_t)(TK_REGS + off); }
#define TK_W(reg, v) tk_write(TILE_##reg##_OFFSET, (v))
#define TK_R(reg) tk_read(TILE_##reg##_OFFSET)

static inline uint32_t tk_arg(unsigned i) { return tk_read(TILE_CORE_ARG_OFFSET + 4 * i); }
static inline uint64_t tk_arg64(unsigned i) { return tk_arg(i) | (uint64_t)tk_arg(i + 1) << 32; }
/* The scratchpad offset of a local pointer, for engine commands. */
static inline uint32_t tk_off(const void* p) { return (uint32_t)(uintptr_t)p - TK_SPM; }
static inline void* tk_ptr(uint32_t off) { return (void*)(uintptr_t)(TK_SPM + off); }

/* ---- sleeping until the tile has news ---------------------------------- */

/* Sleeps until one of the IRQ_STATUS bits in `mask` is set, then clears
 * them. The core's interrupt is enabled in mie but not globally, so wfi
 * wakes without taking a trap. */
static inline void tk_sleep_on(uint32_t mask) {
  TK_W(CORE_IRQ_ENABLE, mask);
  while (!(TK_R(IRQ_STATUS) & mask)) __asm__ volatile("wfi");
  TK_W(IRQ_STATUS, mask);
}

/* ---- semaphores --------------------------------------------------------- */

static inline void tk_sem_signal(unsigned s, uint32_t n) { tk_write(TILE_SEM_OFFSET + 4 * s, n); }
static inline uint32_t tk_sem_value(unsigned s) { return tk_read(TILE_SEM_OFFSET + 4 * s); }
static inline int tk_sem_try(unsigned s) { return (int)tk_read(TILE_SEM_TAKE_OFFSET + 4 * s); }
/* Takes one from semaphore s, asleep until it can. Returns nonzero if an
 * engine reported an error meanwhile (the semaphore may then never come). */
static inline uint32_t tk_engine_errors(void) {
  return TK_R(IRQ_STATUS) & (TILE_IRQ_STATUS_ERROR_MASK | TILE_IRQ_STATUS_VERROR_MASK | TILE_IRQ_STATUS_DERROR_MASK);
}
static inline int tk_sem_wait(unsigned s) {
  for (;;) {
    TK_W(IRQ_STATUS, TILE_IRQ_STATUS_SEM_MASK);
    if (tk_sem_try(s)) return 0;
    if (tk_engine_errors()) return -1;
    TK_W(CORE_IRQ_ENABLE, TILE_IRQ_STATUS_SEM_MASK | TILE_IRQ_STATUS_ERROR_MASK | TILE_IRQ_STATUS_VERROR_MASK |
                              TILE_IRQ_STATUS_DERROR_MASK);
    if (!(TK_R(IRQ_STATUS) & TILE_IRQ_STATUS_SEM_MASK)) __asm__ volatile("wfi");
  }
}

/* ---- queues --------------------------------------------------------------- */

/* Sleeps while the queue whose status register is at `status_off` is full.
 * Completions (`done`) wake it; an error bit (`err`) is left set for
 * tk_drain() and tk_sem_wait() to see. */
static inline void tk_wait_space(uint32_t status_off, uint32_t done, uint32_t err) {
  for (;;) {
    TK_W(IRQ_STATUS, done);
    if (((tk_read(status_off) & TILE_STATUS_QUEUED_MASK) >> TILE_STATUS_QUEUED_SHIFT) < TK_QUEUE_DEPTH) return;
    if (TK_R(IRQ_STATUS) & err) return; /* the push will be refused and reported */
    TK_W(CORE_IRQ_ENABLE, done | err);
    if (!(TK_R(IRQ_STATUS) & (done | err))) __asm__ volatile("wfi");
  }
}

/* ---- DMA ------------------------------------------------------------------ */

struct tk_dma {
  uint64_t src, dst;           /* global addresses, or scratchpad offsets (TK_DMA_SRC_LOCAL...) */
  uint32_t flags;              /* TILE_DMA_FLAGS_* bits; tk_dma_cast() sets the formats */
  uint32_t len0, count1, count2;
  uint32_t sstride1, sstride2, dstride1, dstride2; /* bytes, 0: packed */
  uint32_t group;              /* block-scale group (casts to or from FP8) */
  uint64_t scales;
  uint32_t sem;                /* TK_SEM(...) */
  uint32_t id;
};
#define TK_DMA_SRC_LOCAL TILE_DMA_FLAGS_SRC_LOCAL_MASK
#define TK_DMA_DST_LOCAL TILE_DMA_FLAGS_DST_LOCAL_MASK
#define TK_DMA_SCALES_LOCAL TILE_DMA_FLAGS_SCALES_LOCAL_MASK
static inline uint32_t tk_dma_cast(enum tk_format from, enum tk_format to) {
  return TILE_DMA_FLAGS_CAST_MASK | TILE_DMA_FLAGS_SATURATE_MASK | (uint32_t)from << TILE_DMA_FLAGS_SRC_FORMAT_SHIFT |
         (uint32_t)to << TILE_DMA_FLAGS_DST_FORMAT_SHIFT;
}
/* The pushes are always inlined: a caller that fills the fields from
 * constants and an operation's words then writes them straight to the
 * registers, where a call would store the command and load it back (the
 * program kernel pushes thousands; its attention ran 50% longer so). */
static inline __attribute__((always_inline)) void tk_dma_push(const struct tk_dma* d) {
  tk_wait_space(TILE_DMA_STATUS_OFFSET, TILE_IRQ_STATUS_DDONE_MASK, TILE_IRQ_STATUS_DERROR_MASK);
  TK_W(DMA_ID, d->id);
  TK_W(DMA_SRC_LO, (uint32_t)d->src);
  TK_W(DMA_SRC_HI, (uint32_t)(d->src >> 32));
  TK_W(DMA_DST_LO, (uint32_t)d->dst);
  TK_W(DMA_DST_HI, (uint32_t)(d->dst >> 32));
  TK_W(DMA_FLAGS, d->flags);
  TK_W(DMA_LEN0, d->len0);
  TK_W(DMA_COUNT1, d->count1 ? d->count1 : 1);
  TK_W(DMA_COUNT2, d->count2 ? d->count2 : 1);
  TK_W(DMA_SSTRIDE1, d->sstride1);
  TK_W(DMA_SSTRIDE2, d->sstride2);
  TK_W(DMA_DSTRIDE1, d->dstride1);
  TK_W(DMA_DSTRIDE2, d->dstride2);
  TK_W(DMA_GROUP, d->group);
  TK_W(DMA_SCALES_LO, (uint32_t)d->scales);
  TK_W(DMA_SCALES_HI, (uint32_t)(d->scales >> 32));
  TK_W(DMA_SEM, d->sem);
  TK_W(DMA_PUSH, 1);
}

/* ---- tensor core ---------------------------------------------------------- */

struct tk_gemm {
  uint32_t m, n, k;
  uint32_t a, b, c;            /* scratchpad offsets */
  uint32_t lda, ldb, ldc;      /* pitches in elements, 0: packed */
  enum tk_format input;
  int accumulate;              /* C += A.B */
  int block_scaled;            /* FP8 with scales at sa, sb (FP32), groups of `group` (0: 128) */
  int trans_a, trans_b;        /* A stored k x m, B stored n x k */
  uint32_t sa, sb, group;
  uint32_t sem;
  uint32_t id;
};
static inline __attribute__((always_inline)) void tk_gemm_push(const struct tk_gemm* g) {
  tk_wait_space(TILE_STATUS_OFFSET, TILE_IRQ_STATUS_DONE_MASK, TILE_IRQ_STATUS_ERROR_MASK);
  TK_W(CMD_ID, g->id);
  /* INT8 sums in INT32; every other input in FP32. */
  TK_W(CMD_FORMAT, (uint32_t)g->input | (g->input == TK_INT8 ? 2u << TILE_CMD_FORMAT_ACC_SHIFT : 0) |
                       (g->accumulate ? TILE_CMD_FORMAT_ACCUMULATE_MASK : 0) |
                       (g->block_scaled ? TILE_CMD_FORMAT_BLOCK_SCALED_MASK : 0) |
                       (g->trans_a ? TILE_CMD_FORMAT_TRANS_A_MASK : 0) | (g->trans_b ? TILE_CMD_FORMAT_TRANS_B_MASK : 0));
  TK_W(CMD_M, g->m);
  TK_W(CMD_N, g->n);
  TK_W(CMD_K, g->k);
  TK_W(CMD_A, g->a);
  TK_W(CMD_B, g->b);
  TK_W(CMD_C, g->c);
  TK_W(CMD_LDA, g->lda);
  TK_W(CMD_LDB, g->ldb);
  TK_W(CMD_LDC, g->ldc);
  TK_W(CMD_SA, g->sa);
  TK_W(CMD_SB, g->sb);
  TK_W(CMD_GROUP, g->group);
  TK_W(CMD_SEM, g->sem);
  TK_W(CMD_PUSH, 1);
}

/* ---- vector unit ------------------------------------------------------------ */

#define TK_VOP_(NAME, name, value) TK_V##NAME = value,
enum tk_vop { TILE_VECTOR_OP_VALUES(TK_VOP_) }; /* VCMD_OP.OP */
struct tk_vec {
  enum tk_vop op;
  uint32_t rows, cols;
  uint32_t src0, src1, src2, dst; /* scratchpad offsets, FP32 rows */
  uint32_t k, position;
  /* Casts (TK_VCAST_TO/FROM): the narrow format, saturating unless
   * `no_saturate`; with `group` > 0 FP32 scales per group at `aux`. */
  enum tk_format format;
  int no_saturate;
  uint32_t group, aux;
  uint32_t sem;
  uint32_t id;
};
static inline __attribute__((always_inline)) void tk_vec_push(const struct tk_vec* v) {
  tk_wait_space(TILE_VSTATUS_OFFSET, TILE_IRQ_STATUS_VDONE_MASK, TILE_IRQ_STATUS_VERROR_MASK);
  TK_W(VCMD_ID, v->id);
  TK_W(VCMD_OP, (uint32_t)v->op);
  TK_W(VCMD_ROWS, v->rows);
  TK_W(VCMD_COLS, v->cols);
  TK_W(VCMD_SRC0, v->src0);
  TK_W(VCMD_SRC1, v->src1);
  TK_W(VCMD_SRC2, v->src2);
  TK_W(VCMD_DST, v->dst);
  TK_W(VCMD_K, v->k);
  TK_W(VCMD_POSITION, v->position);
  TK_W(VCMD_FORMAT, (uint32_t)v->format | (v->no_saturate ? 0 : TILE_VCMD_FORMAT_SATURATE_MASK));
  TK_W(VCMD_GROUP, v->group);
  TK_W(VCMD_AUX, v->aux);
  TK_W(VCMD_SEM, v->sem);
  TK_W(VCMD_PUSH, 1);
}

/* ---- waiting for everything ---------------------------------------------- */

/* Sleeps until the DMA, the tensor core and the vector unit are idle.
 * Returns nonzero if any of them reported an error. */
static inline int tk_drain(void) {
  const uint32_t news = TILE_IRQ_STATUS_DONE_MASK | TILE_IRQ_STATUS_ERROR_MASK | TILE_IRQ_STATUS_VDONE_MASK |
                        TILE_IRQ_STATUS_VERROR_MASK | TILE_IRQ_STATUS_DDONE_MASK | TILE_IRQ_STATUS_DERROR_MASK;
  for (;;) {
    TK_W(IRQ_STATUS, news & ~(TILE_IRQ_STATUS_ERROR_MASK | TILE_IRQ_STATUS_VERROR_MASK | TILE_IRQ_STATUS_DERROR_MASK));
    const uint32_t busy = (TK_R(STATUS) | TK_R(VSTATUS) | TK_R(DMA_STATUS)) & TILE_STATUS_BUSY_MASK;
    if (!busy) return tk_engine_errors() ? -1 : 0;
    if (tk_engine_errors()) return -1;
    TK_W(CORE_IRQ_ENABLE, news);
    if (!(TK_R(IRQ_STATUS) & news)) __asm__ volatile("wfi");
  }
}

/* ---- barriers between tiles ---------------------------------------------- */

/* Signals semaphore `s` of another tile, whose registers are at the global
 * address `regs` (a 32-bit address: the tile register windows lie low). */
static inline void tk_remote_signal(uint32_t regs, unsigned s) {
  *(volatile uint32_t*)(uintptr_t)(regs + TILE_SEM_OFFSET + 4 * s) = 1;
}

/* A barrier of `tiles` tiles whose register windows are at regs0 + i *
 * stride (global addresses), this one being number `self`: each signals
 * semaphore `s` of every other, then takes tiles - 1 from its own. Returns
 * nonzero if an engine reported an error meanwhile. Semaphore `s` must be
 * used for nothing else. */
static inline int tk_barrier(unsigned s, unsigned self, unsigned tiles, uint32_t regs0, uint32_t stride) {
  for (unsigned i = 0; i < tiles; ++i)
    if (i != self) tk_remote_signal(regs0 + i * stride, s);
  for (unsigned i = 1; i < tiles; ++i)
    if (tk_sem_wait(s)) return -1;
  return 0;
}

#endif
