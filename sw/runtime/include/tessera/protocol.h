/* The host <-> CP command protocol, shared by the host runtime (C++) and
 * the CP firmware (C). sw/runtime/README.md describes it in words.
 *
 * Memory: the first TP_RESERVED bytes of the first HBM stack belong to the
 * protocol: a ring of TP_RING_ENTRIES commands at TP_CMD_RING and a ring of
 * as many completions at TP_CPL_RING. The runtime allocates buffers above.
 *
 * Commands of one stream (`stream`) start in submission order, each after
 * the one before has completed; a command also waits until the tiles it
 * names are free. Otherwise the CP starts commands as soon as it can, in
 * ring order (a waiting command holds back the ones behind it), and
 * launches run side by side; completions come in the order they finish.
 *
 * Flow: the host writes command n into slot n % TP_RING_ENTRIES, then
 * n + 1 (the count of commands submitted) into the word at TP_PRODUCED,
 * and rings doorbell TP_BELL_COMMANDS. The CP runs commands in order, one
 * at a time; for each it writes a completion into the same slot of the
 * completion ring, then the count of completions into the word at
 * TP_COMPLETED, and rings the host's doorbell TP_BELL_COMPLETIONS.
 * Doorbells only say "look": any number of rings before a look is one.
 * At boot the CP writes TP_VERSION at TP_READY and rings TP_BELL_READY.
 * The host never has more than TP_RING_ENTRIES commands outstanding. */
#ifndef TESSERA_PROTOCOL_H
#define TESSERA_PROTOCOL_H

#include <stdint.h>

#define TP_VERSION 0x54500004u /* 'TP', 4: a launch's collective group */
#define TP_RING_ENTRIES 64u
#define TP_CMD_RING 0x0u     /* offsets from the first HBM stack's base */
#define TP_CPL_RING 0x2000u
#define TP_PRODUCED 0x4000u  /* uint32_t, written by the host */
#define TP_COMPLETED 0x4040u /* uint32_t, written by the CP */
#define TP_READY 0x4080u     /* uint32_t, written by the CP at boot */
#define TP_RESERVED 0x10000u

#define TP_BELL_COMMANDS 1u    /* host -> CP */
#define TP_BELL_COMPLETIONS 1u /* CP -> host */
#define TP_BELL_READY 2u       /* CP -> host, once at boot */

enum tp_opcode {
  TP_NOP = 0,
  TP_LOAD = 1,   /* copy `size` bytes at `addr` (HBM) to scratchpad offset `offset` of every tile in `tiles` */
  TP_LAUNCH = 2, /* start every tile in `tiles` at `entry` with `args`; complete when all have stopped */
  TP_COLLECTIVE = 3, /* post a collective to the chip's communication engine (every chip of the system posts the
                        same one); complete when the engine has finished it. `entry`: the engine's CE_OP word
                        (TP_CE_*); `addr`: source; args[0..1]: destination; args[2..3]: count; args[4..5]: the
                        all-to-all table (local addresses, low word first) */
};
/* CE_OP words for TP_COLLECTIVE: op | algo | mode | type | peer << 16 [| TP_CE_GROUP]. */
#define TP_CE_ALL_REDUCE 1u
#define TP_CE_REDUCE_SCATTER 2u
#define TP_CE_ALL_GATHER 3u
#define TP_CE_BROADCAST 4u
#define TP_CE_ALL_TO_ALL 5u
#define TP_CE_RING (0u << 4)
#define TP_CE_TREE (1u << 4)
#define TP_CE_DIRECT (2u << 4)
#define TP_CE_PUSH (0u << 6)
#define TP_CE_PULL (1u << 6)
#define TP_CE_FP32 (0u << 8)
#define TP_CE_BF16 (1u << 8)
#define TP_CE_E4M3 (2u << 8)
/* A collective over chips first .. first + chips - 1 of the system (a
   group: every chip of it posts the same one, peer a rank in it); without
   it, over every chip. */
#define TP_CE_GROUP(first, chips) ((uint32_t)(first) << 10 | (uint32_t)(chips) << 24)
/* A launch's group (tp_command.group): CE_ABORT's word, chips 0 meaning the system. */
#define TP_LAUNCH_GROUP(first, chips) (TP_CE_GROUP(first, chips) | 1u)

enum tp_status {
  TP_OK = 0,
  TP_BAD_OPCODE = 1,   /* detail: the opcode */
  TP_BAD_TILE = 2,     /* detail: the tile mask */
  TP_BAD_POINTER = 3,  /* detail: low word of the address */
  TP_BAD_SIZE = 4,     /* detail: the size */
  TP_DMA_ERROR = 5,    /* tile: which; detail: the DMA's error code */
  TP_KERNEL_FAULT = 6, /* tile: which; detail: mcause; detail2: pc */
  TP_KERNEL_ERROR = 7, /* tile: which; detail: its nonzero exit code */
  TP_TIMEOUT = 8,      /* tile: the first still running (all are halted); detail: the timeout in us */
  TP_BUSY_TILE = 9,    /* tile: which; a tile of the mask is still running a kernel */
  TP_COMM_ERROR = 10,  /* the communication engine failed the collective; detail: its code (CE_ERROR), detail2:
                          low word of the failing address; or the chip has no engine (detail 0) */
};

struct tp_command { /* 128 bytes */
  uint32_t opcode;
  uint32_t id;
  uint32_t tiles;      /* bit i: tile i */
  uint32_t timeout_us; /* LAUNCH: the watchdog; 0 means TP_DEFAULT_TIMEOUT_US */
  uint64_t addr;       /* LOAD: the image's global address */
  uint32_t size;       /* LOAD: bytes */
  uint32_t offset;     /* LOAD: scratchpad offset */
  uint32_t entry;      /* LAUNCH: the core's start pc, in its local map */
  uint32_t nargs;      /* LAUNCH: how many of args are used (<= 16) */
  uint32_t args[16];   /* LAUNCH: CORE_ARG[0..15] */
  uint32_t stream;     /* commands of a stream run in order; streams run side by side */
  uint32_t group;      /* LAUNCH: TP_LAUNCH_GROUP(first, chips), the chips its kernels' collectives span, or 0: when
                          the launch fails, the CP gives up the chip's collectives over them (the engine's CE_ABORT),
                          so that the group's other chips fail theirs at once instead of at their watchdogs */
  uint32_t reserved[4];
};

struct tp_completion { /* 32 bytes */
  uint32_t id;
  uint32_t opcode;
  uint32_t status;
  uint32_t tile;
  uint32_t detail;
  uint32_t detail2;
  uint64_t mtime; /* the CP's timer when the command completed (TESSERA_CLINT_TIMEBASE_HZ ticks per second) */
};

#define TP_DEFAULT_TIMEOUT_US 100000u

#ifdef __cplusplus
static_assert(sizeof(struct tp_command) == 128, "a command is 128 bytes");
static_assert(sizeof(struct tp_completion) == 32, "a completion is 32 bytes");
#else
_Static_assert(sizeof(struct tp_command) == 128, "a command is 128 bytes");
_Static_assert(sizeof(struct tp_completion) == 32, "a completion is 32 bytes");
#endif

#endif
