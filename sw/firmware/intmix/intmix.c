/* A compute-bound integer mix for speed measurements and for checking that
 * fast simulation modes do not change the answer: CRC-32, quicksort, an
 * integer matrix product and recursive calls, ITERATIONS times. Prints a
 * checksum that does not depend on the simulation mode. */
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

static uint8_t bytes[1024];
static int32_t values[256];
static int32_t A[N][N], B[N][N], C[N][N];

int main(void) {
  uart_init();
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
