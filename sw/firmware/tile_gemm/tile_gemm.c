/* The CP drives tile 0's tensor core for bring-up: BF16 operands written
 * into the tile's scratchpad over the NoC, a 16x24x32 GEMM programmed
 * through the tile's registers, the core asleep in wfi until the tile's
 * completion interrupt, C checked against the CP's own integer reference;
 * then a command whose C runs past the scratchpad, refused with its id and
 * code and an error interrupt, and a queue reset that recovers. The CP has
 * no FPU: BF16 and FP32 bits are built and read by hand (small integers
 * are exact in both). */
#include <stdio.h>

#include "bsp.h"
#include "tile_regs.h"

#define TILE(reg) (TESSERA_TILE0_CSR_BASE + TILE_##reg##_OFFSET)
#define M 16
#define N 24
#define K 32
#define A_OFF 0x0
#define B_OFF 0x1000
#define C_OFF 0x4000

static volatile unsigned done_irqs, error_irqs;

static void on_tile(unsigned source) {
  (void)source;
  const uint32_t s = mmio_read32(TILE(IRQ_STATUS));
  if (s & TILE_IRQ_STATUS_DONE_MASK) ++done_irqs;
  if (s & TILE_IRQ_STATUS_ERROR_MASK) ++error_irqs;
  mmio_write32(TILE(IRQ_STATUS), s); /* acknowledge */
}

/* FP32 bits of a small integer; BF16 is its upper half (exact below 256). */
static uint32_t f32_of_int(int v) {
  if (v == 0) return 0;
  const uint32_t sign = v < 0 ? 0x80000000u : 0, mag = (uint32_t)(v < 0 ? -v : v);
  const unsigned e = 31 - (unsigned)__builtin_clz(mag);
  return sign | ((e + 127) << 23) | ((mag << (23 - e)) & 0x7fffff);
}
static int int_of_f32(uint32_t bits) {
  if ((bits & 0x7fffffff) == 0) return 0;
  const int e = (int)((bits >> 23) & 0xff) - 127;
  const uint32_t m = (bits & 0x7fffff) | 0x800000;
  const int mag = (int)(e >= 23 ? m << (e - 23) : m >> (23 - e));
  return (bits & 0x80000000u) ? -mag : mag;
}

static int a_at(int i, int k) { return (i + 2 * k) % 7 - 3; }
static int b_at(int k, int j) { return (3 * k + j) % 5 - 2; }

static void command(uint32_t id, uint32_t m, uint32_t n, uint32_t k, uint32_t c_off) {
  mmio_write32(TILE(CMD_ID), id);
  mmio_write32(TILE(CMD_FORMAT), 1); /* BF16 inputs, FP32 accumulation */
  mmio_write32(TILE(CMD_M), m);
  mmio_write32(TILE(CMD_N), n);
  mmio_write32(TILE(CMD_K), k);
  mmio_write32(TILE(CMD_A), A_OFF);
  mmio_write32(TILE(CMD_B), B_OFF);
  mmio_write32(TILE(CMD_C), c_off);
  mmio_write32(TILE(CMD_PUSH), 1);
}

int main(void) {
  uart_init();
  trap_set_external_handler(TESSERA_TILE0_IRQ, on_tile);
  plic_enable(TESSERA_TILE0_IRQ, 1);
  csr_set(mie, MIP_MEIP);
  csr_set(mstatus, MSTATUS_MIE);
  mmio_write32(TILE(IRQ_ENABLE), TILE_IRQ_ENABLE_DONE_MASK | TILE_IRQ_ENABLE_ERROR_MASK);

  volatile uint16_t* a = (volatile uint16_t*)(TESSERA_TILE0_BASE + A_OFF);
  volatile uint16_t* b = (volatile uint16_t*)(TESSERA_TILE0_BASE + B_OFF);
  for (int i = 0; i < M; ++i)
    for (int k = 0; k < K; ++k) a[i * K + k] = (uint16_t)(f32_of_int(a_at(i, k)) >> 16);
  for (int k = 0; k < K; ++k)
    for (int j = 0; j < N; ++j) b[k * N + j] = (uint16_t)(f32_of_int(b_at(k, j)) >> 16);

  command(1, M, N, K, C_OFF);
  while (!done_irqs && !error_irqs) __asm__ volatile("wfi");
  volatile uint32_t* c = (volatile uint32_t*)(TESSERA_TILE0_BASE + C_OFF);
  unsigned bad = 0;
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      int want = 0;
      for (int k = 0; k < K; ++k) want += a_at(i, k) * b_at(k, j);
      bad += int_of_f32(c[i * N + j]) != want;
    }
  printf("tile0: %dx%dx%d BF16 GEMM: %u done interrupt, %u of %d results wrong, %u commands completed\n", M, N, K,
         done_irqs, bad, M * N, (unsigned)mmio_read32(TILE(COMPLETED)));

  command(2, 64, 64, 64, TESSERA_TILE0_SIZE - 0x1000); /* C runs past the end */
  while (!error_irqs) __asm__ volatile("wfi");
  const uint32_t id = mmio_read32(TILE(ERROR_ID)), code = mmio_read32(TILE(ERROR_CODE));
  const bool flagged = mmio_read32(TILE(STATUS)) & TILE_STATUS_ERROR_MASK;
  mmio_write32(TILE(CTRL), TILE_CTRL_RESET_MASK);
  const bool cleared = !(mmio_read32(TILE(STATUS)) & TILE_STATUS_ERROR_MASK);
  printf("tile0: refused command %u with code %u (%s), %u error interrupt; reset %s\n", (unsigned)id, (unsigned)code,
         flagged ? "flagged" : "NOT FLAGGED", error_irqs, cleared ? "clears it" : "FAILS");

  command(3, M, N, K, C_OFF + 0x2000);
  while (done_irqs < 2) __asm__ volatile("wfi");
  printf("tile0: after reset, %u commands completed\n", (unsigned)mmio_read32(TILE(COMPLETED)));
  return bad || id != 2 || code != 3 || !flagged || !cleared || mmio_read32(TILE(COMPLETED)) != 2 ? 1 : 0;
}
