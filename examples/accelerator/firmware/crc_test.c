/* The CRC engine's test on the virtual chip: a pattern in HBM stack 0, its
 * CRC and a copy to stack 1 made by the engine, checked against software;
 * the standard check value; and a run over an address nothing answers,
 * which must end in ERROR naming that address rather than a hang. The exit
 * code says which check failed (0: all passed). */
#include <stdio.h>
#include <string.h>

#include "bsp.h"
#include "crc_driver.h"

#define LEN (64u * 1024u)

int main(void) {
  uart_init();
  crc_init();

  /* The standard check value of CRC-32: "123456789" -> 0xCBF43926. */
  uint8_t* hbm = (uint8_t*)(uintptr_t)TESSERA_HBM0_BASE;
  memcpy(hbm, "123456789", 9);
  uint32_t crc = 0;
  if (crc_run(TESSERA_HBM0_BASE, 0, 9, &crc, 0) != 0 || crc != 0xCBF43926u) {
    printf("crc: check value %#lx, expected 0xcbf43926\n", (unsigned long)crc);
    return 1;
  }

  for (uint32_t i = 0; i < LEN; ++i) hbm[i] = (uint8_t)(i * 7 + (i >> 8));
  const uint32_t expected = crc32_soft(hbm, LEN);
  uint8_t* copy = (uint8_t*)(uintptr_t)TESSERA_HBM1_BASE;
  memset(copy, 0, LEN);
  if (crc_run(TESSERA_HBM0_BASE, TESSERA_HBM1_BASE, LEN, &crc, 0) != 0) {
    printf("crc: the run failed\n");
    return 2;
  }
  if (crc != expected) {
    printf("crc: %#lx from the engine, %#lx in software\n", (unsigned long)crc, (unsigned long)expected);
    return 3;
  }
  if (memcmp(copy, hbm, LEN) != 0) {
    printf("crc: the copy differs\n");
    return 4;
  }
  const uint64_t cycles = crc_cycles();
  const unsigned long centi = (unsigned long)(100ull * LEN / (cycles ? cycles : 1)); /* bytes per 100 cycles */
  printf("crc: 64 KiB checked and copied in %lu engine cycles (%lu.%02lu bytes/cycle), crc %#lx\n",
         (unsigned long)cycles, centi / 100, centi % 100, (unsigned long)crc);

  /* Nothing is mapped at 0x7000_0000: the engine must stop there with ERROR. */
  uint64_t at = 0;
  if (crc_run(0x70000000u, 0, 4096, &crc, &at) != -1 || at != 0x70000000u) {
    printf("crc: a run over unmapped memory did not fail where it should (at %#lx)\n", (unsigned long)at);
    return 5;
  }
  printf("crc: a run over unmapped memory stopped at %#lx, as it should\n", (unsigned long)at);
  printf("crc: all checks passed\n");
  return 0;
}
