/* A compute-bound integer mix for speed measurements and for checking that
 * fast simulation modes do not change the answer: CRC-32, quicksort, an
 * integer matrix product and recursive calls, ITERATIONS times. Prints a
 * checksum that does not depend on the simulation mode. With SV39, it runs
 * in S mode with paging on. */
#include <stdint.h>
#include <stdio.h>

#include "bsp.h"

#ifndef ITERATIONS
#define ITERATIONS 10
#endif

static uint32_t lcg_state = 12345;
static uint32_t lcg(void) { return lcg_state = lcg_state * 1103515245u + 12345u; }

static uint32_t crc32(const uint8_t* p, unsigned n) {
  uint32_t crc = ~0u;
  for (unsigned i = 0; i < n; ++i) {
    crc ^= p[i];
    for (int b = 0; b < 8; ++b) crc = (crc >> 1) ^ (0xedb88320u & -(crc & 1));
  }
  return ~crc;
}

static void quicksort(int32_t* a, int lo, int hi) {
  while (lo < hi) {
    const int32_t pivot = a[(lo + hi) / 2];
    int i = lo, j = hi;
    while (i <= j) {
      while (a[i] < pivot) ++i;
      while (a[j] > pivot) --j;
      if (i <= j) {
        const int32_t t = a[i];
        a[i++] = a[j];
        a[j--] = t;
      }
    }
    if (j - lo < hi - i) {
      quicksort(a, lo, j);
      lo = i;
    } else {
      quicksort(a, i, hi);
      hi = j;
    }
  }
}

#define N 16
static void matmul(const int32_t A[N][N], const int32_t B[N][N], int32_t C[N][N]) {
  for (int i = 0; i < N; ++i)
    for (int j = 0; j < N; ++j) {
      int32_t s = 0;
      for (int k = 0; k < N; ++k) s += A[i][k] * B[k][j];
      C[i][j] = s;
    }
}

static uint32_t fib(unsigned n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

#ifdef SV39
/* The rest of the program in S mode through Sv39 (RV64): identity 1 GiB
 * pages over the devices (0-1 GiB) and RAM (2-3 GiB), PMP entry 0
 * allowing everything. */
static uint64_t root[512] __attribute__((aligned(4096)));
static void enter_sv39(void) {
  root[0] = (0x0ull >> 12) << 10 | 0xcf;          /* V R W X A D */
  root[2] = (0x80000000ull >> 12) << 10 | 0xcf;
  const uint64_t satp = (8ull << 60) | ((uintptr_t)root >> 12);
  __asm__ volatile(
      "csrw pmpaddr0, %0\n csrw pmpcfg0, %1\n csrw satp, %2\n sfence.vma\n"
      "la t0, 1f\n csrw mepc, t0\n li t0, 0x1800\n csrc mstatus, t0\n li t0, 0x800\n csrs mstatus, t0\n mret\n1:\n"
      : : "r"(-1L), "r"(0x1fL), "r"(satp) : "t0", "memory");
}
#endif

static uint8_t bytes[1024];
static int32_t values[256];
static int32_t A[N][N], B[N][N], C[N][N];

int main(void) {
  uart_init();
#ifdef SV39
  enter_sv39();
#endif
  uint32_t sum = 0;
  for (int it = 0; it < ITERATIONS; ++it) {
    for (unsigned i = 0; i < sizeof bytes; ++i) bytes[i] = (uint8_t)lcg();
    sum += crc32(bytes, sizeof bytes);
    for (unsigned i = 0; i < 256; ++i) values[i] = (int32_t)lcg();
    quicksort(values, 0, 255);
    for (unsigned i = 1; i < 256; ++i)
      if (values[i - 1] > values[i]) return 1;
    sum += (uint32_t)values[128];
    for (int i = 0; i < N; ++i)
      for (int j = 0; j < N; ++j) {
        A[i][j] = (int32_t)(lcg() >> 20);
        B[i][j] = (int32_t)(lcg() >> 20);
      }
    matmul(A, B, C);
    sum += (uint32_t)C[it % N][(it * 7) % N];
    sum += fib(15);
  }
  printf("intmix: %d iterations, checksum %08lx\n", ITERATIONS, (unsigned long)sum);
  return 0;
}
