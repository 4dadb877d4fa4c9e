/* A guest-fuzz campaign: firmware that does what a broken or hostile
 * program might, so the simulator can show that nothing a guest does
 * crashes, hangs or exhausts it.
 *
 * The seed comes in on the UART in decimal digits (--set uart0.rx=FILE
 * --set uart0.rx_interval=300us, so that they arrive after start-up), 1 if
 * none arrives within 1 ms. Then:
 *   phase A: MMIO_ACCESSES random reads and writes (1, 2, 4 or 8 bytes,
 *            random offsets and values) over every register window of the
 *            generated memory map (TESSERA_WINDOWS): the engines get random
 *            commands, the tile cores random start addresses. Memories,
 *            the test finisher and HTIF are left out: writing them is not
 *            MMIO, or ends the run. Each fault is skipped.
 *   phase B: random instructions. Blocks of random words (wfi and writes
 *            of mtvec left out, so the campaign goes on) run with random
 *            registers, biased towards the register windows; every trap
 *            starts a fresh block, and a timer interrupt 20 us on ends a
 *            block that loops. It runs until --max-time ends it.
 * Prints one line per phase; the run's documented end is --max-time
 * (exit code 3). */
#include <stdio.h>
#include <string.h>

#include "bsp.h"

#ifndef MMIO_ACCESSES
#define MMIO_ACCESSES 20000
#endif
#define BLOCK_WORDS 64

struct window {
  const char* name;
  const char* type;
  uint64_t base, size;
};

#define WINDOW(name, type, base, size) {#name, type, base, size},
static const struct window all_windows[] = {TESSERA_WINDOWS(WINDOW)};
#define N_ALL (sizeof all_windows / sizeof all_windows[0])

static struct window windows[N_ALL];
static unsigned n_windows;
static uint64_t rng;
static unsigned long faults, episodes;

static uint64_t next(void) { /* xorshift64* */
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return rng * 0x2545F4914F6CDD1Dull;
}

static bool is(const char* a, const char* b) { return strcmp(a, b) == 0; }

static void pick_windows(void) {
  for (unsigned i = 0; i < N_ALL; ++i) {
    const struct window* w = &all_windows[i];
    const bool primary = w->size != 0;
    if (is(w->type, "ram") || is(w->type, "rom") || is(w->type, "sparse_memory") || is(w->type, "test_finisher") ||
        is(w->type, "htif"))
      continue;
    if (primary && (is(w->type, "hbm") || is(w->type, "c2c"))) continue; /* memory windows, not registers */
    windows[n_windows] = *w;
    if (!primary) windows[n_windows].size = 0x1000; /* a further socket: its size is not in the map */
    ++n_windows;
  }
}

static uint64_t random_address(unsigned bytes) {
  const struct window* w = &windows[next() % n_windows];
  return w->base + (next() % w->size & ~(uint64_t)(bytes - 1));
}

static bool skip_fault(struct trap_frame* f) {
  ++faults;
  const uint16_t low = *(volatile uint16_t*)f->mepc;
  f->mepc += (low & 3) == 3 ? 4 : 2;
  return true;
}

static void phase_a(void) {
  trap_set_exception_handler(skip_fault);
  for (unsigned i = 0; i < MMIO_ACCESSES; ++i) {
    const unsigned bytes = 1u << (next() % 4);
    const uint64_t a = random_address(bytes), v = next();
    const bool write = (next() & 3) != 0;
    switch (bytes | (write ? 16 : 0)) {
      case 1: (void)*(volatile uint8_t*)a; break;
      case 2: (void)*(volatile uint16_t*)a; break;
      case 4: (void)*(volatile uint32_t*)a; break;
      case 8: (void)*(volatile uint64_t*)a; break;
      case 17: *(volatile uint8_t*)a = (uint8_t)v; break;
      case 18: *(volatile uint16_t*)a = (uint16_t)v; break;
      case 20: *(volatile uint32_t*)a = (uint32_t)v; break;
      default: *(volatile uint64_t*)a = v; break;
    }
  }
  printf("guest-fuzz: phase A: %u MMIO accesses over %u windows, %lu faults\n", MMIO_ACCESSES, n_windows, faults);
}

/* Phase B's state, used by fuzz_vector (below). */
uint32_t fuzz_code[BLOCK_WORDS] __attribute__((aligned(8)));
uint64_t fuzz_regs[32];
uint64_t fuzz_stack[512] __attribute__((aligned(16)));

static uint32_t random_instruction(void) {
  for (;;) {
    const uint32_t w = (uint32_t)next();
    if (w == 0x10500073u) continue;                                            /* wfi */
    if ((w & 0x7f) == 0x73 && (w >> 20) == 0x305 && ((w >> 12) & 3)) continue; /* csr* mtvec */
    return w;
  }
}

/* Called by fuzz_vector on every trap of phase B: a fresh block and fresh
 * registers; returns where to go. */
uint64_t fuzz_next(void) {
  ++episodes;
  for (unsigned i = 0; i < BLOCK_WORDS; ++i) fuzz_code[i] = random_instruction();
  for (unsigned r = 1; r < 32; ++r) {
    const uint64_t v = next();
    switch (v % 4) {
      case 0: fuzz_regs[r] = random_address(8) - (v >> 8) % 2048; break; /* near a register window */
      case 1: fuzz_regs[r] = (v >> 16) % 4096; break;
      default: fuzz_regs[r] = next(); break;
    }
  }
  clint_set_timer(clint_mtime() + 200); /* a block that loops is ended by the timer */
  csr_set(mie, MIP_MTIP);
  __asm__ volatile("fence.i" ::: "memory");
  return (uint64_t)(uintptr_t)fuzz_code;
}

extern void fuzz_vector(void);
__asm__(
    "  .section .text.fuzz_vector, \"ax\"\n"
    "  .align 4\n"
    "  .global fuzz_vector\n"
    "fuzz_vector:\n"
    "  .option push\n"
    "  .option norelax\n"
    "  la gp, __global_pointer$\n"
    "  .option pop\n"
    "  la sp, fuzz_stack + 4096\n"
    "  la t0, fuzz_vector\n" /* the block may have moved it: back here */
    "  csrw mtvec, t0\n"
    "  call fuzz_next\n"
    "  csrw mepc, a0\n"
    "  li t0, 0x1880\n" /* MPP = M, MPIE: interrupts on after mret */
    "  csrs mstatus, t0\n"
    "  la x31, fuzz_regs\n"
    "  ld x1, 8(x31)\n  ld x2, 16(x31)\n  ld x3, 24(x31)\n  ld x4, 32(x31)\n  ld x5, 40(x31)\n"
    "  ld x6, 48(x31)\n  ld x7, 56(x31)\n  ld x8, 64(x31)\n  ld x9, 72(x31)\n  ld x10, 80(x31)\n"
    "  ld x11, 88(x31)\n  ld x12, 96(x31)\n  ld x13, 104(x31)\n  ld x14, 112(x31)\n  ld x15, 120(x31)\n"
    "  ld x16, 128(x31)\n  ld x17, 136(x31)\n  ld x18, 144(x31)\n  ld x19, 152(x31)\n  ld x20, 160(x31)\n"
    "  ld x21, 168(x31)\n  ld x22, 176(x31)\n  ld x23, 184(x31)\n  ld x24, 192(x31)\n  ld x25, 200(x31)\n"
    "  ld x26, 208(x31)\n  ld x27, 216(x31)\n  ld x28, 224(x31)\n  ld x29, 232(x31)\n  ld x30, 240(x31)\n"
    "  ld x31, 248(x31)\n"
    "  mret\n"
    "  .text\n");

static uint64_t read_seed(void) {
  uint64_t seed = 0;
  unsigned digits = 0;
  for (uint64_t deadline = clint_mtime() + 10000; clint_mtime() < deadline;) {
    if (!uart_rx_ready()) continue;
    const int c = uart_getc();
    if (c >= '0' && c <= '9') {
      seed = seed * 10 + (uint64_t)(c - '0');
      ++digits;
      deadline = clint_mtime() + 10000;
    } else if (digits) {
      break;
    }
  }
  return digits ? seed : 1;
}

int main(void) {
  uart_init();
  const uint64_t seed = read_seed();
  rng = seed * 0x9E3779B97F4A7C15ull + 1;
  pick_windows();
  printf("guest-fuzz: seed %lu\n", (unsigned long)seed);
  phase_a();
  printf("guest-fuzz: phase B: random instructions until --max-time\n");
  csr_write(mtvec, (uintptr_t)fuzz_vector);
  __asm__ volatile("ecall"); /* the first trap starts the first block */
  return 0;
}
