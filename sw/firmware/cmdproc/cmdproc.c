/* The CP firmware's command processor: serves the host's command ring
 * (sw/runtime/include/tessera/protocol.h, sw/runtime/README.md) for ever.
 *
 * Every command is checked before anything happens: an unknown opcode, a
 * tile mask naming tiles the chip lacks, an address outside HBM, a size
 * that does not fit a scratchpad, a tile still busy: each ends the command
 * with an error completion naming the problem, and the firmware serves the
 * next one. LOAD copies a kernel image from HBM into tiles' scratchpads with
 * each tile's DMA. LAUNCH resets the tiles' engines and semaphores, starts
 * their cores, and sleeps (wfi) until every core has stopped or the
 * watchdog (the CLINT timer) fires; a fault, a nonzero exit code or a
 * timeout (the cores are halted) is reported with the tile and the cause;
 * a failed launch that names its collective group gives up the chip's
 * collectives over it (the engine's CE_ABORT). COLLECTIVE hands a
 * collective to the chip's communication engine, one at a time, and
 * completes when the engine has finished it (its interrupt wakes the CP).
 * Errors are also logged on the UART. */
#include <stdio.h>
#include <string.h>

#include "bsp.h"
#include "tessera/protocol.h"
#include "tile_regs.h"
#ifdef TESSERA_C2C_CSR_BASE
#include "c2c_regs.h"
#define C2C(reg) (TESSERA_C2C_CSR_BASE + C2C_##reg##_OFFSET)
#endif

/* The platform's facts, from its generated header: the tiles (in order),
 * their interrupts, the tile core's local map, the CLINT's timebase. */
#define TILE_CSR(n) TESSERA_##n##_CSR_BASE,
#define TILE_IRQ(n) TESSERA_##n##_IRQ,
static const uintptr_t tile_regs[] = {TESSERA_TYPE_TILE_LIST(TILE_CSR)};
static const unsigned tile_irqs[] = {TESSERA_TYPE_TILE_LIST(TILE_IRQ)};
#define TILES TESSERA_TYPE_TILE_COUNT
#define SPM_BYTES TESSERA_TILE0_SIZE
#define HBM_LO TESSERA_HBM0_BASE
#define HBM_HI (TESSERA_HBM3_BASE + TESSERA_HBM3_SIZE)
#define LOCAL_SPM ((uint32_t)TESSERA_TYPE_TILE_LOCAL_SPM)
#define MTIME_PER_S ((uint64_t)TESSERA_CLINT_TIMEBASE_HZ)

static inline void tile_w(unsigned t, uint32_t off, uint32_t v) { mmio_write32(tile_regs[t] + off, v); }
static inline uint32_t tile_r(unsigned t, uint32_t off) { return mmio_read32(tile_regs[t] + off); }
#define TW(t, reg, v) tile_w((t), TILE_##reg##_OFFSET, (v))
#define TR(t, reg) tile_r((t), TILE_##reg##_OFFSET)

static volatile uint32_t bells, tile_news, timer_fired;

static void on_mailbox(unsigned source) {
  (void)source;
  const uint32_t b = mailbox_doorbells();
  mailbox_acknowledge(b);
  bells |= b;
}

static void on_tile(unsigned source) {
  unsigned t = 0;
  while (t + 1 < TILES && tile_irqs[t] != source) ++t;
  TW(t, IRQ_ENABLE, 0); /* the main loop reads the core's state */
  tile_news |= 1u << t;
}

#ifdef TESSERA_C2C_CSR_BASE
static void on_c2c(unsigned source) {
  (void)source;
  mmio_write32(C2C(IRQ_STATUS), mmio_read32(C2C(IRQ_STATUS))); /* the main loop reads the engine's state */
}
#endif

static void on_timer(void) {
  clint_set_timer(UINT64_MAX);
  timer_fired = 1;
}

/* Sleeps until an interrupt has been taken (interrupts are masked while
 * the caller checks its condition, so none is missed). */
static void sleep_once(void) {
  __asm__ volatile("wfi");
  csr_set(mstatus, MSTATUS_MIE);
  csr_clear(mstatus, MSTATUS_MIE);
}

static volatile uint8_t* hbm(uint64_t offset) { return (volatile uint8_t*)(uintptr_t)(HBM_LO + offset); }

static int in_hbm(uint64_t addr, uint64_t size) { return addr >= HBM_LO && addr <= HBM_HI && size <= HBM_HI - addr; }

static void fail(struct tp_completion* r, uint32_t status, uint32_t tile, uint32_t detail, uint32_t detail2) {
  static const char* const names[] = {"ok",           "bad opcode",   "bad tile mask", "bad pointer",
                                      "bad size",     "DMA error",    "kernel fault",  "kernel error",
                                      "timeout",      "tile busy",    "collective failed"};
  r->status = status;
  r->tile = tile;
  r->detail = detail;
  r->detail2 = detail2;
  printf("cmdproc: command %u (opcode %u): %s (tile %u, %#x, %#x)\n", (unsigned)r->id, (unsigned)r->opcode,
         status < sizeof names / sizeof names[0] ? names[status] : "?", (unsigned)tile, (unsigned)detail,
         (unsigned)detail2);
}

/* The mask names only tiles the chip has, and none of them runs a kernel. */
static int check_tiles(const struct tp_command* c, struct tp_completion* r) {
  if (!c->tiles || (TILES < 32 && (c->tiles >> TILES))) {
    fail(r, TP_BAD_TILE, 0, c->tiles, TILES);
    return 0;
  }
  for (unsigned t = 0; t < TILES; ++t)
    if ((c->tiles >> t & 1) && (TR(t, CORE_STATUS) & TILE_CORE_STATUS_STATE_MASK) == 1) {
      fail(r, TP_BUSY_TILE, t, 0, 0);
      return 0;
    }
  return 1;
}

static void load(const struct tp_command* c, struct tp_completion* r) {
  if (!check_tiles(c, r)) return;
  if (!in_hbm(c->addr, c->size)) return fail(r, TP_BAD_POINTER, 0, (uint32_t)c->addr, (uint32_t)(c->addr >> 32));
  if (!c->size || c->offset > SPM_BYTES || c->size > SPM_BYTES - c->offset)
    return fail(r, TP_BAD_SIZE, 0, c->size, c->offset);
  for (unsigned t = 0; t < TILES; ++t) {
    if (!(c->tiles >> t & 1)) continue;
    TW(t, CTRL, TILE_CTRL_DRESET_MASK);
    TW(t, DMA_ID, c->id);
    TW(t, DMA_SRC_LO, (uint32_t)c->addr);
    TW(t, DMA_SRC_HI, (uint32_t)(c->addr >> 32));
    TW(t, DMA_DST_LO, c->offset);
    TW(t, DMA_DST_HI, 0);
    TW(t, DMA_FLAGS, TILE_DMA_FLAGS_DST_LOCAL_MASK);
    TW(t, DMA_LEN0, c->size);
    TW(t, DMA_COUNT1, 1);
    TW(t, DMA_COUNT2, 1);
    TW(t, DMA_SSTRIDE1, 0);
    TW(t, DMA_SSTRIDE2, 0);
    TW(t, DMA_DSTRIDE1, 0);
    TW(t, DMA_DSTRIDE2, 0);
    TW(t, DMA_GROUP, 0);
    TW(t, DMA_SEM, 0);
    TW(t, DMA_PUSH, 1);
  }
  for (unsigned t = 0; t < TILES; ++t) {
    if (!(c->tiles >> t & 1)) continue;
    uint32_t s;
    while ((s = TR(t, DMA_STATUS)) & TILE_DMA_STATUS_BUSY_MASK) {
    }
    if (s & TILE_DMA_STATUS_ERROR_MASK && r->status == TP_OK) fail(r, TP_DMA_ERROR, t, TR(t, DMA_ERROR_CODE), 0);
    TW(t, CTRL, TILE_CTRL_DRESET_MASK);
    TW(t, IRQ_STATUS, ~0u);
  }
}

/* Launches in flight: started, not yet completed. */
#define MAX_INFLIGHT 8
static struct inflight {
  int used;
  struct tp_completion r;
  uint32_t tiles, stream, timeout;
  uint64_t deadline;
  uint32_t collective; /* a collective: the engine's CE_COMPLETED count that ends it (tiles is 0) */
  uint32_t group;      /* a launch: the chips its collectives span (tp_command.group), or 0 */
} flights[MAX_INFLIGHT];
static uint32_t collectives_posted; /* collectives given to the engine */
static uint32_t collectives_failed; /* of those, failed (the engine's CE_COMPLETED counts the others) */
static uint32_t busy_tiles; /* tiles owned by launches in flight */
static uint32_t posted;     /* completions written */

static void post(const struct tp_completion* in) {
  struct tp_completion r = *in;
  r.mtime = clint_mtime();
  volatile uint64_t* out = (volatile uint64_t*)hbm(TP_CPL_RING + (posted % TP_RING_ENTRIES) * sizeof r);
  uint64_t words[sizeof r / 8];
  memcpy(words, &r, sizeof r);
  for (unsigned i = 0; i < sizeof r / 8; ++i) out[i] = words[i];
  ++posted;
  __asm__ volatile("fence" ::: "memory");
  *(volatile uint32_t*)hbm(TP_COMPLETED) = posted;
  mailbox_ring(TP_BELL_COMPLETIONS);
}

static int tile_running(unsigned t) { return (TR(t, CORE_STATUS) & TILE_CORE_STATUS_STATE_MASK) == 1; }
/* Stopped with a fault or a nonzero exit code. */
static int tile_failed(unsigned t) {
  const uint32_t state = TR(t, CORE_STATUS) & TILE_CORE_STATUS_STATE_MASK;
  return state == 3 || (state == 2 && TR(t, CORE_EXIT));
}

/* Starts a launch; 0 if it was refused (r says why). */
static int launch(const struct tp_command* c, struct tp_completion* r, struct inflight* f) {
  if (!check_tiles(c, r)) return 0;
  if (c->entry < LOCAL_SPM || c->entry - LOCAL_SPM >= SPM_BYTES) return fail(r, TP_BAD_POINTER, 0, c->entry, 0), 0;
  if (c->nargs > 16) return fail(r, TP_BAD_SIZE, 0, c->nargs, 16), 0;
  f->timeout = c->timeout_us ? c->timeout_us : TP_DEFAULT_TIMEOUT_US;
  for (unsigned t = 0; t < TILES; ++t) {
    if (!(c->tiles >> t & 1)) continue;
    /* A clean tile: empty queues, no errors, semaphores at zero. */
    TW(t, CTRL, TILE_CTRL_RESET_MASK | TILE_CTRL_VRESET_MASK | TILE_CTRL_DRESET_MASK | TILE_CTRL_SEMRESET_MASK);
    TW(t, IRQ_STATUS, ~0u);
    TW(t, CORE_IRQ_ENABLE, 0);
    for (unsigned i = 0; i < 16; ++i) tile_w(t, TILE_CORE_ARG_OFFSET + 4 * i, i < c->nargs ? c->args[i] : 0);
    TW(t, CORE_EXIT, 0);
    TW(t, CORE_PC, c->entry);
  }
  f->deadline = clint_mtime() + (uint64_t)f->timeout * MTIME_PER_S / 1000000u;
  for (unsigned t = 0; t < TILES; ++t) {
    if (!(c->tiles >> t & 1)) continue;
    TW(t, IRQ_ENABLE, TILE_IRQ_ENABLE_CORE_DONE_MASK | TILE_IRQ_ENABLE_CORE_FAULT_MASK);
    TW(t, CORE_CTRL, TILE_CORE_CTRL_START_MASK);
  }
  f->used = 1;
  f->r = *r;
  f->tiles = c->tiles;
  f->stream = c->stream;
  f->group = c->group;
  busy_tiles |= c->tiles;
  return 1;
}

/* Posts a collective to the communication engine; 0 if refused. */
static int collective(const struct tp_command* c, struct tp_completion* r, struct inflight* f) {
#ifdef TESSERA_C2C_CSR_BASE
  mmio_write32(C2C(CE_ERROR), 0);
  mmio_write32(C2C(CE_OP), c->entry);
  mmio_write32(C2C(CE_ID), c->id);
  *(volatile uint64_t*)C2C(CE_SRC) = c->addr;
  *(volatile uint64_t*)C2C(CE_DST) = (uint64_t)c->args[1] << 32 | c->args[0];
  *(volatile uint64_t*)C2C(CE_COUNT) = (uint64_t)c->args[3] << 32 | c->args[2];
  *(volatile uint64_t*)C2C(CE_TABLE) = (uint64_t)c->args[5] << 32 | c->args[4];
  *(volatile uint64_t*)C2C(CE_SIGNAL) = 0;
  mmio_write32(C2C(CE_PUSH), 1);
  /* Refused, or failed at once (a chip of its group gave up: CE_ERROR_ADDR names it). */
  if (mmio_read32(C2C(CE_ERROR)))
    return fail(r, TP_COMM_ERROR, 0, mmio_read32(C2C(CE_ERROR)), (uint32_t)*(volatile uint64_t*)C2C(CE_ERROR_ADDR)), 0;
  f->used = 1;
  f->r = *r;
  f->tiles = 0;
  f->stream = c->stream;
  f->group = 0;
  f->timeout = 0;
  f->deadline = UINT64_MAX;
  f->collective = ++collectives_posted;
  return 1;
#else
  (void)f;
  return fail(r, TP_COMM_ERROR, 0, 0, 0), 0;
#endif
}

/* Completes the launches whose cores have all stopped, or whose watchdog
 * has fired; re-arms the interrupts of the tiles still running. Returns
 * how many completed. */
static unsigned reap(void) {
  unsigned n = 0;
  const uint64_t now = clint_mtime();
  for (unsigned i = 0; i < MAX_INFLIGHT; ++i) {
    struct inflight* f = &flights[i];
    if (!f->used) continue;
#ifdef TESSERA_C2C_CSR_BASE
    if (f->collective) {
      /* The engine runs collectives in order: this one is done when its
       * count is reached, or failed when the engine names it. */
      const uint32_t error = mmio_read32(C2C(CE_ERROR));
      if (error && mmio_read32(C2C(CE_ERROR_ID)) == f->r.id) {
        fail(&f->r, TP_COMM_ERROR, 0, error, (uint32_t)*(volatile uint64_t*)C2C(CE_ERROR_ADDR));
        mmio_write32(C2C(CE_ERROR), 0);
        ++collectives_failed;
      } else if ((int32_t)(mmio_read32(C2C(CE_COMPLETED)) + collectives_failed - f->collective) < 0) {
        continue;
      }
      f->used = 0;
      f->collective = 0;
      post(&f->r);
      ++n;
      continue;
    }
#endif
    int running = -1;
    for (unsigned t = 0; t < TILES && running < 0; ++t)
      if ((f->tiles >> t & 1) && tile_running(t)) running = (int)t;
    if (running >= 0 && now < f->deadline) {
      /* A tile of the launch that stopped with a fault or an error ends it:
       * the others are halted (they may be waiting for it, as a graph's
       * tiles at their barriers do). */
      int failed = 0;
      for (unsigned t = 0; t < TILES; ++t)
        if ((f->tiles >> t & 1) && (tile_news >> t & 1) && !tile_running(t) && tile_failed(t)) failed = 1;
      if (failed) {
        for (unsigned t = 0; t < TILES; ++t)
          if ((f->tiles >> t & 1) && tile_running(t)) TW(t, CORE_CTRL, TILE_CORE_CTRL_HALT_MASK);
        running = -1;
      } else {
        for (unsigned t = 0; t < TILES; ++t)
          if ((f->tiles >> t & 1) && (tile_news >> t & 1)) {
            tile_news &= ~(1u << t);
            TW(t, IRQ_STATUS, ~0u);
            TW(t, IRQ_ENABLE, TILE_IRQ_ENABLE_CORE_DONE_MASK | TILE_IRQ_ENABLE_CORE_FAULT_MASK);
          }
        continue;
      }
    }
    if (running >= 0) {
      for (unsigned t = 0; t < TILES; ++t)
        if (f->tiles >> t & 1) TW(t, CORE_CTRL, TILE_CORE_CTRL_HALT_MASK);
      fail(&f->r, TP_TIMEOUT, (uint32_t)running, f->timeout, 0);
    }
    for (unsigned t = 0; t < TILES; ++t) {
      if (!(f->tiles >> t & 1)) continue;
      TW(t, IRQ_ENABLE, 0);
      TW(t, IRQ_STATUS, ~0u);
      tile_news &= ~(1u << t);
      if (f->r.status != TP_OK) continue;
      const uint32_t state = TR(t, CORE_STATUS) & TILE_CORE_STATUS_STATE_MASK;
      if (state == 3) fail(&f->r, TP_KERNEL_FAULT, t, TR(t, CORE_FAULT_CAUSE), TR(t, CORE_FAULT_PC));
      else if (state == 2 && TR(t, CORE_EXIT)) fail(&f->r, TP_KERNEL_ERROR, t, TR(t, CORE_EXIT), 0);
    }
    busy_tiles &= ~f->tiles;
#ifdef TESSERA_C2C_CSR_BASE
    /* A failed launch gives up the chip's collectives over its group: the
     * group's other chips, waiting in one for this chip or about to post
     * one, fail theirs at once (else they would wait for their watchdogs). */
    if (f->r.status != TP_OK && f->group) mmio_write32(C2C(CE_ABORT), f->group);
#endif
    f->used = 0;
    post(&f->r);
    ++n;
  }
  return n;
}

/* Whether command c may start now: commands of a stream run one after the
 * other, and a command waits for the tiles it names to be free. */
static int may_issue(const struct tp_command* c) {
  int free_slot = 0;
  for (unsigned i = 0; i < MAX_INFLIGHT; ++i) {
    if (!flights[i].used) {
      free_slot = 1;
      continue;
    }
    if (flights[i].stream == c->stream) return 0;
    /* One host collective in the engine at a time: the CP tells a failed
     * one by the engine's last error (CE_ERROR_ID), and two failing at
     * once (a chip of their group gave up) would leave the first's fate
     * unknown. */
    if (c->opcode == TP_COLLECTIVE && flights[i].collective) return 0;
  }
  if ((c->opcode == TP_LOAD || c->opcode == TP_LAUNCH) && (c->tiles & busy_tiles)) return 0;
  return (c->opcode != TP_LAUNCH && c->opcode != TP_COLLECTIVE) || free_slot;
}

/* The earliest watchdog deadline in flight (UINT64_MAX: none). */
static uint64_t next_deadline(void) {
  uint64_t d = UINT64_MAX;
  for (unsigned i = 0; i < MAX_INFLIGHT; ++i)
    if (flights[i].used && flights[i].deadline < d) d = flights[i].deadline;
  return d;
}

int main(void) {
  uart_init();
  trap_set_external_handler(TESSERA_MAILBOX_IRQ, on_mailbox);
  plic_enable(TESSERA_MAILBOX_IRQ, 1);
  for (unsigned t = 0; t < TILES; ++t) {
    TW(t, IRQ_ENABLE, 0);
    trap_set_external_handler(tile_irqs[t], on_tile);
    plic_enable(tile_irqs[t], 1);
  }
#ifdef TESSERA_C2C_CSR_BASE
  trap_set_external_handler(TESSERA_C2C_IRQ, on_c2c);
  plic_enable(TESSERA_C2C_IRQ, 1);
  mmio_write32(C2C(IRQ_ENABLE), C2C_IRQ_STATUS_CE_DONE_MASK | C2C_IRQ_STATUS_CE_ERROR_MASK);
#endif
  trap_set_timer_handler(on_timer);
  clint_set_timer(UINT64_MAX);
  mailbox_enable_irq(true, false);
  csr_set(mie, MIP_MEIP | MIP_MTIP);

  volatile uint32_t* produced = (volatile uint32_t*)hbm(TP_PRODUCED);
  *(volatile uint32_t*)hbm(TP_COMPLETED) = 0;
  *(volatile uint32_t*)hbm(TP_READY) = TP_VERSION;
  mailbox_ring(TP_BELL_READY);
  uint32_t issued = 0;
  for (;;) {
    bells = 0;
    timer_fired = 0;
    unsigned progress = reap();
    /* Issue commands in ring order while they may start. */
    while (issued != *produced) {
      struct tp_command c;
      const volatile uint8_t* slot = hbm(TP_CMD_RING + (issued % TP_RING_ENTRIES) * sizeof c);
      uint64_t words[sizeof c / 8];
      for (unsigned i = 0; i < sizeof c / 8; ++i) words[i] = ((const volatile uint64_t*)slot)[i];
      memcpy(&c, words, sizeof c);
      if (!may_issue(&c)) break;
      ++issued;
      ++progress;
      struct tp_completion r;
      memset(&r, 0, sizeof r);
      r.id = c.id;
      r.opcode = c.opcode;
      switch (c.opcode) {
        case TP_NOP: post(&r); break;
        case TP_LOAD: load(&c, &r); post(&r); break;
        case TP_LAUNCH: {
          struct inflight* f = 0;
          for (unsigned i = 0; i < MAX_INFLIGHT && !f; ++i)
            if (!flights[i].used) f = &flights[i];
          if (!launch(&c, &r, f)) post(&r);
          break;
        }
        case TP_COLLECTIVE: {
          struct inflight* f = 0;
          for (unsigned i = 0; i < MAX_INFLIGHT && !f; ++i)
            if (!flights[i].used) f = &flights[i];
          if (!collective(&c, &r, f)) post(&r);
          break;
        }
        default: fail(&r, TP_BAD_OPCODE, 0, c.opcode, 0); post(&r); break;
      }
    }
    if (progress) continue;
    /* Nothing could move: sleep until a doorbell, a tile or a watchdog.
     * Interrupts are masked here, so news after the checks still wake
     * the wfi. */
    clint_set_timer(next_deadline());
    sleep_once();
  }
}
