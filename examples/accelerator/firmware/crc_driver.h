/* The CRC engine's driver: what firmware uses instead of poking registers.
 * Addresses and the interrupt come from the platform header made from the
 * platform file (TESSERA_CRC0_*), the register layout from the header the
 * register generator made from crc_engine.regs.json. */
#ifndef CRC_DRIVER_H
#define CRC_DRIVER_H

#include <stdbool.h>
#include <stdint.h>

/* Installs the interrupt handler and enables the engine's interrupt. */
void crc_init(void);
/* Runs the engine over [src, src + len), copying to dst unless it is 0, and
 * sleeps until its interrupt says it is done. Returns 0 and the CRC in
 * *crc, or -1 if an access failed (*failed_at says where). */
int crc_run(uint64_t src, uint64_t dst, uint32_t len, uint32_t* crc, uint64_t* failed_at);
/* Engine cycles of the last run. */
uint64_t crc_cycles(void);
/* The same CRC in software, for checking. */
uint32_t crc32_soft(const void* data, uint32_t len);

#endif
