/* Runs a tile program (tessera_program.h): copies it from global memory
 * into the scratchpad's last 64 KiB, then pushes its operations in order,
 * each to its engine's queue with its semaphores, and waits until every
 * engine is idle.
 *
 * Arguments (CORE_ARG words): 0-1 the program's global address, 2 its
 * number of operations; or, with word 2 = 0xffffffff, 0-1 a table of
 * programs indexed by the core's mhartid (16 bytes each: address lo, hi,
 * count, 0) and 3 the table's length, so one launch runs a different
 * program on each tile. Exit codes: 0 done, 2 a bad program (too long, an
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

int main(void) {
  uint64_t program = tk_arg64(0);
  uint32_t count = tk_arg(2);
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
