/* The power manager from firmware: list each domain's P-states, take the
 * P-states over, slow the tiles down and time the transition, then set a
 * cap below the chip's leakage and sleep until the over-cap interrupt.
 * Prints what it measured; ends with 0 when everything behaved as the
 * registers promise, 1 otherwise. */
#include <stdio.h>

#include "bsp.h"
#include "power_regs.h"

#define PWR(reg) (TESSERA_POWER_BASE + POWER_##reg##_OFFSET)
#define PWR_AT(reg, i) (PWR(reg) + 4u * (i))

static const char* const names[] = {"tiles", "noc", "hbm", "links", "cp"};
static volatile unsigned overcaps;

static void on_power(unsigned source) {
  (void)source;
  const uint32_t status = mmio_read32(PWR(IRQ_STATUS));
  if (status & POWER_IRQ_STATUS_OVERCAP_MASK) ++overcaps;
  mmio_write32(PWR(IRQ_STATUS), status);
}

static uint64_t read64(uintptr_t a) { return mmio_read32(a) | ((uint64_t)mmio_read32(a + 4) << 32); }

int main(void) {
  uart_init();
  int bad = 0;
  if (mmio_read32(PWR(ID)) != POWER_ID_RESET) {
    printf("power: no power manager at %#x\n", TESSERA_POWER_BASE);
    return 1;
  }
  const unsigned domains = mmio_read32(PWR(INFO)) & POWER_INFO_DOMAINS_MASK;
  for (unsigned d = 0; d < domains && d < 5; ++d) {
    const unsigned n = (mmio_read32(PWR_AT(PSTATE, d)) & POWER_PSTATE_COUNT_MASK) >> POWER_PSTATE_COUNT_SHIFT;
    printf("power: %-5s", names[d]);
    for (unsigned s = 0; s < n; ++s) {
      const uint32_t e = mmio_read32(PWR_AT(PSTATE_TABLE, d * 8 + s));
      printf(" P%u %u.%03u@%umV", s, (e & 0xffff) / 1000, (e & 0xffff) % 1000, e >> 16);
    }
    printf(", transition %u ns\n", mmio_read32(PWR_AT(TRANSITION_NS, d)));
  }

  /* Firmware takes the P-states: the tiles to P3, timed on mtime (10 MHz). */
  mmio_write32(PWR(CTRL), POWER_CTRL_FIRMWARE_MASK);
  const uint64_t t0 = clint_mtime();
  mmio_write32(PWR_AT(PSTATE_REQ, 0), 3);
  if (!(mmio_read32(PWR_AT(PSTATE, 0)) & POWER_PSTATE_BUSY_MASK)) ++bad, printf("power: no transition under way\n");
  while (mmio_read32(PWR_AT(PSTATE, 0)) & POWER_PSTATE_BUSY_MASK) {
  }
  const uint64_t took_ns = (clint_mtime() - t0) * 100;
  const unsigned freq = mmio_read32(PWR_AT(FREQ_PERMILLE, 0)), mv = mmio_read32(PWR_AT(VOLTAGE_MV, 0));
  printf("power: tiles P%u after %llu ns: %u per mille, %u mV\n", mmio_read32(PWR_AT(PSTATE, 0)) & POWER_PSTATE_CURRENT_MASK,
         (unsigned long long)took_ns, freq, mv);
  if (took_ns + 100 < mmio_read32(PWR_AT(TRANSITION_NS, 0))) ++bad, printf("power: the transition was too quick\n");
  if (freq != (mmio_read32(PWR_AT(PSTATE_TABLE, 3)) & 0xffff)) ++bad, printf("power: the clock is not P3's\n");

  /* A cap below the leakage: over it at once; the interrupt after 20 us. */
  trap_set_external_handler(TESSERA_POWER_IRQ, on_power);
  plic_enable(TESSERA_POWER_IRQ, 1);
  mmio_write32(PWR(IRQ_ENABLE), POWER_IRQ_STATUS_OVERCAP_MASK);
  mmio_write32(PWR(OVERCAP_NS), 20000);
  mmio_write32(PWR(CAP_MW), 1000);
  const uint64_t c0 = clint_mtime();
  csr_set(mie, MIP_MEIP);
  csr_set(mstatus, MSTATUS_MIE);
  while (!overcaps) __asm__ volatile("wfi");
  csr_clear(mstatus, MSTATUS_MIE);
  const uint64_t waited_ns = (clint_mtime() - c0) * 100;
  printf("power: over the 1 W cap: interrupt after %llu ns, chip %u mW in the last window (window %u ns)\n",
         (unsigned long long)waited_ns, mmio_read32(PWR(POWER_MW)), mmio_read32(PWR(WINDOW_NS)));
  if (waited_ns < 20000) ++bad, printf("power: the interrupt came too early\n");
  if (mmio_read32(PWR(OVERCAP_EVENTS)) != 1) ++bad, printf("power: OVERCAP_EVENTS is not 1\n");
  for (unsigned d = 0; d < domains && d < 5; ++d)
    printf("power: %-5s %6u mW, %8llu nJ so far, %u throttles\n", names[d], mmio_read32(PWR_AT(DOMAIN_POWER_MW, d)),
           (unsigned long long)read64(PWR(DOMAIN_ENERGY_NJ) + 8u * d), mmio_read32(PWR_AT(DOMAIN_THROTTLES, d)));
  printf("power: %llu uJ so far, %u throttles (firmware holds the P-states)\n", (unsigned long long)read64(PWR(ENERGY_UJ)),
         mmio_read32(PWR(THROTTLES)));
  if (mmio_read32(PWR(THROTTLES)) != 0) ++bad, printf("power: the loop moved a P-state firmware holds\n");
  /* The loop owns the P-states again: it must throttle now (the cap is below leakage). */
  mmio_write32(PWR(CTRL), 0);
  const uint64_t l0 = clint_mtime();
  while (mmio_read32(PWR(THROTTLES)) == 0 && clint_mtime() - l0 < 1000) {
  }
  printf("power: the loop throttled %u times within %llu ns\n", mmio_read32(PWR(THROTTLES)),
         (unsigned long long)((clint_mtime() - l0) * 100));
  if (mmio_read32(PWR(THROTTLES)) == 0) ++bad;
  printf("power: %s\n", bad ? "FAILED" : "ok");
  return bad ? 1 : 0;
}
