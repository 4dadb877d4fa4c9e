/* F and D against another implementation: every F/D instruction that
 * computes, in each static rounding mode and with the dynamic one (frm),
 * on a few thousand operands biased to the hard cases (ties, subnormals,
 * the edges of the range, signed zeros, infinities, signalling and quiet
 * NaNs, binary32 values that are not NaN-boxed). Each line of output is an
 * instruction, its rounding mode and a hash of every result's bits and
 * fflags; tests/system runs the same program on the virtual CP and on
 * QEMU's user-mode emulator (whose floating point is SoftFloat's) and
 * compares the lines.
 *
 * No C library: the two ports (fpu_diff_tessera.S, fpu_diff_linux.S)
 * provide _start, put(const char*, unsigned) and stop(int). */
#include <stdint.h>

void put(const char* s, unsigned n);
void stop(int code) __attribute__((noreturn));

#if __riscv_xlen == 64
#define LX "ld"
#define SX "sd"
#else
#define LX "lw"
#define SX "sw"
#endif

/* The operands and results of one instruction: three FP operands (64 bits
 * each, binary32 ones NaN-boxed or not), an integer operand, the result
 * (FP or integer), fflags after, and frm before. */
static struct {
  uint64_t f[3];
  uintptr_t x;
  uint64_t result;
  uint32_t flags, frm;
} io;

#define PRELUDE "lw t0, 44(%0)\n fsrm t0\n fld ft0, 0(%0)\n fld ft1, 8(%0)\n fld ft2, 16(%0)\n " LX " t1, 24(%0)\n fsflags zero\n "
#define FRES "\n fsd ft3, 32(%0)\n frflags t0\n sw t0, 40(%0)"
#define XRES "\n " SX " t2, 32(%0)\n frflags t0\n sw t0, 40(%0)"
#define ASM(body) __asm__ volatile(PRELUDE body : : "r"(&io) : "t0", "t1", "t2", "ft0", "ft1", "ft2", "ft3", "memory")

/* Shapes: FP result from FP operands (1, 2 or 3), integer result, FP
 * result from an integer. RM is "" (dynamic) or ", rne" and the others. */
#define F1(fn, insn, rm) static void fn(void) { ASM(insn " ft3, ft0" rm FRES); }
#define F2(fn, insn, rm) static void fn(void) { ASM(insn " ft3, ft0, ft1" rm FRES); }
#define F3(fn, insn, rm) static void fn(void) { ASM(insn " ft3, ft0, ft1, ft2" rm FRES); }
#define XF(fn, insn, rm) static void fn(void) { ASM(insn " t2, ft0" rm XRES); }
#define XFF(fn, insn, rm) static void fn(void) { ASM(insn " t2, ft0, ft1" rm XRES); }
#define FX(fn, insn, rm) static void fn(void) { ASM(insn " ft3, t1" rm FRES); }

enum { kS = 0, kD = 1, kInt = 2 };
struct op {
  const char* name;
  void (*fn)(void);
  unsigned in;  /* operand format: kS, kD, or kInt (the integer operand) */
};

/* Each rounding instruction in six forms. */
#define ROUNDED(SHAPE, id, insn, in)                                                           \
  SHAPE(id##_dyn, insn, "") SHAPE(id##_rne, insn, ", rne") SHAPE(id##_rtz, insn, ", rtz")     \
  SHAPE(id##_rdn, insn, ", rdn") SHAPE(id##_rup, insn, ", rup") SHAPE(id##_rmm, insn, ", rmm")
#define ROUNDED_ENTRIES(id, insn, in)                                                          \
  {insn ".dyn", id##_dyn, in}, {insn ".rne", id##_rne, in}, {insn ".rtz", id##_rtz, in},       \
  {insn ".rdn", id##_rdn, in}, {insn ".rup", id##_rup, in}, {insn ".rmm", id##_rmm, in},

#define EACH_FORMAT(X, Y, K)                                                                    \
  X(F2, fadd_##Y, "fadd." #Y, K) X(F2, fsub_##Y, "fsub." #Y, K)                          \
  X(F2, fmul_##Y, "fmul." #Y, K) X(F2, fdiv_##Y, "fdiv." #Y, K)                          \
  X(F1, fsqrt_##Y, "fsqrt." #Y, K)                                                          \
  X(F3, fmadd_##Y, "fmadd." #Y, K) X(F3, fmsub_##Y, "fmsub." #Y, K)                      \
  X(F3, fnmsub_##Y, "fnmsub." #Y, K) X(F3, fnmadd_##Y, "fnmadd." #Y, K)                  \
  X(XF, fcvt_w_##Y, "fcvt.w." #Y, K) X(XF, fcvt_wu_##Y, "fcvt.wu." #Y, K)

#define DECLARE(SHAPE, id, insn, in) ROUNDED(SHAPE, id, insn, in)
#define ENTRY(SHAPE, id, insn, in) ROUNDED_ENTRIES(id, insn, in)
EACH_FORMAT(DECLARE, s, kS)
EACH_FORMAT(DECLARE, d, kD)
ROUNDED(F1, fcvt_s_d, "fcvt.s.d", kD)
ROUNDED(FX, fcvt_s_w, "fcvt.s.w", kInt)
ROUNDED(FX, fcvt_s_wu, "fcvt.s.wu", kInt)
#if __riscv_xlen == 64
#define EACH_FORMAT64(X, Y, K)                                                                  \
  X(XF, fcvt_l_##Y, "fcvt.l." #Y, K) X(XF, fcvt_lu_##Y, "fcvt.lu." #Y, K)                \
  X(FX, fcvt_##Y##_l, "fcvt." #Y ".l", kInt) X(FX, fcvt_##Y##_lu, "fcvt." #Y ".lu", kInt)
EACH_FORMAT64(DECLARE, s, kS)
EACH_FORMAT64(DECLARE, d, kD)
XF(fmv_x_d, "fmv.x.d", "")
FX(fmv_d_x, "fmv.d.x", "")
#endif

/* The instructions without a rounding mode. */
#define UNROUNDED(X, Y, K)                                                                      \
  X(F2, fmin_##Y, "fmin." #Y, K) X(F2, fmax_##Y, "fmax." #Y, K)                          \
  X(F2, fsgnj_##Y, "fsgnj." #Y, K) X(F2, fsgnjn_##Y, "fsgnjn." #Y, K)                    \
  X(F2, fsgnjx_##Y, "fsgnjx." #Y, K) X(XFF, feq_##Y, "feq." #Y, K)                       \
  X(XFF, flt_##Y, "flt." #Y, K) X(XFF, fle_##Y, "fle." #Y, K)                            \
  X(XF, fclass_##Y, "fclass." #Y, K)
#define DECLARE1(SHAPE, id, insn, in) SHAPE(id, insn, "")
#define ENTRY1(SHAPE, id, insn, in) {insn, id, in},
UNROUNDED(DECLARE1, s, kS)
UNROUNDED(DECLARE1, d, kD)
XF(fmv_x_w, "fmv.x.w", "")
FX(fmv_w_x, "fmv.w.x", "")
/* Exact conversions: the assembler takes no rounding mode for them. */
F1(fcvt_d_s, "fcvt.d.s", "")
FX(fcvt_d_w, "fcvt.d.w", "")
FX(fcvt_d_wu, "fcvt.d.wu", "")

static const struct op ops[] = {
    EACH_FORMAT(ENTRY, s, kS) EACH_FORMAT(ENTRY, d, kD)
    ROUNDED_ENTRIES(fcvt_s_d, "fcvt.s.d", kD)
    ROUNDED_ENTRIES(fcvt_s_w, "fcvt.s.w", kInt) ROUNDED_ENTRIES(fcvt_s_wu, "fcvt.s.wu", kInt)
#if __riscv_xlen == 64
    EACH_FORMAT64(ENTRY, s, kS) EACH_FORMAT64(ENTRY, d, kD)
    {"fmv.x.d", fmv_x_d, kD}, {"fmv.d.x", fmv_d_x, kInt},
#endif
    UNROUNDED(ENTRY1, s, kS) UNROUNDED(ENTRY1, d, kD)
    {"fmv.x.w", fmv_x_w, kS}, {"fmv.w.x", fmv_w_x, kInt},
    {"fcvt.d.s", fcvt_d_s, kS}, {"fcvt.d.w", fcvt_d_w, kInt}, {"fcvt.d.wu", fcvt_d_wu, kInt},
};

/* ---- operands ---- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) {
  uint64_t x = rng_state;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return rng_state = x;
}

/* A value of the format with `mant` significand bits and `bits` in all. */
static uint64_t pick(unsigned bits, unsigned mant) {
  const uint64_t r = rnd(), sign = (r >> 40 & 1) << (bits - 1);
  const uint64_t mmask = (1ull << mant) - 1, m = rnd() & mmask;
  const uint64_t emask = (bits == 32 ? 0xffull : 0x7ffull), bias = emask >> 1;
  const uint64_t one = bias << mant, all = bits == 64 ? ~0ull : (1ull << bits) - 1;
  switch ((uint32_t)r % 10) {
    case 0: return rnd() & all;
    case 1: return (one ^ (m & 0xff)) | sign;                                   /* near 1 */
    case 2: return (((emask - 1) << mant) | (mmask - (m & 0xfff))) | sign;       /* near overflow */
    case 3: return (m >> (r >> 20 & 15)) | sign;                                /* subnormal */
    case 4: return ((1ull << mant) + (m & 0xfff)) | sign;                       /* near the smallest normal */
    case 5: return ((one + (((uint32_t)(r >> 8) % 64) << mant)) ^ (m & 0xf)) | sign;      /* powers of two, nearby */
    case 6: {
      const uint64_t nan_q = (emask << mant) | (1ull << (mant - 1)), nan_s = (emask << mant) | 1;
      const uint64_t specials[6] = {0, 1ull << (bits - 1), emask << mant, (emask << mant) | sign,
                                    nan_q | (m & 0xff), nan_s | (m & 0xff)};
      return specials[(uint32_t)(r >> 8) % 6];
    }
    case 7: return ((one + (((uint32_t)(r >> 8) % 4) << mant)) | (m & ~0xfull)) | sign;  /* values with ties near */
    case 8: {                                                                  /* small integers, halves */
      const uint32_t k = (uint32_t)(r >> 8) % 200;
      unsigned e = 0;
      while (k >> (e + 1)) ++e;
      if (!k) return sign;
      return ((bias + e - 1) << mant | ((k << mant >> e) & mmask)) | sign;
    }
    default: return ((((uint32_t)(r >> 8) % (uint32_t)(emask - 1)) + 1) << mant | m) | sign;       /* any normal */
  }
}

static uint64_t pick_s(void) {
  const uint64_t v = pick(32, 23);
  return ((uint32_t)rnd() % 16) ? v | 0xffffffff00000000ull : v | (rnd() << 32); /* now and then not NaN-boxed */
}

static uintptr_t pick_int(void) {
  const uint64_t r = rnd();
  switch ((uint32_t)r % 6) {
    case 0: return (uintptr_t)rnd();
    case 1: return (uintptr_t)(rnd() >> (r >> 8 & 63));
    case 2: return (uintptr_t)-(intptr_t)(rnd() >> (r >> 8 & 63));
    case 3: {
      const uint64_t specials[6] = {0, 1, ~0ull, 0x7fffffffull, 0x80000000ull, 0x8000000000000000ull};
      return (uintptr_t)specials[(uint32_t)(r >> 8) % 6];
    }
    case 4: return (uintptr_t)((uint32_t)(r >> 8) % 2001) - 1000;
    default: return (uintptr_t)(1ull << ((uint32_t)(r >> 8) % 64)) + (uintptr_t)((uint32_t)(r >> 20) % 3) - 1;
  }
}

/* What the compiler may call without a C library. */
void* memcpy(void* d, const void* s, unsigned long n) {
  for (unsigned long i = 0; i < n; ++i) ((char*)d)[i] = ((const char*)s)[i];
  return d;
}
void* memset(void* d, int c, unsigned long n) {
  for (unsigned long i = 0; i < n; ++i) ((char*)d)[i] = (char)c;
  return d;
}

/* ---- output ---- */

static unsigned len(const char* s) {
  unsigned n = 0;
  while (s[n]) ++n;
  return n;
}

static void put_hex(uint64_t v) {
  char b[17];
  for (int i = 15; i >= 0; --i, v >>= 4) b[i] = "0123456789abcdef"[v & 15];
  b[16] = '\n';
  put(b, 17);
}

#define VECTORS 1500

int run(void) {
  for (unsigned i = 0; i < sizeof ops / sizeof ops[0]; ++i) {
    uint64_t hash = 0xcbf29ce484222325ull;
    for (unsigned v = 0; v < VECTORS; ++v) {
      for (unsigned k = 0; k < 3; ++k) io.f[k] = ops[i].in == kD ? pick(64, 52) : pick_s();
      io.x = pick_int();
      io.frm = (uint32_t)rnd() % 5;
      io.result = 0;
      ops[i].fn();
      const uint64_t words[2] = {io.result, io.flags};
      for (unsigned w = 0; w < 2; ++w)
        for (unsigned b = 0; b < 8; ++b) hash = (hash ^ ((words[w] >> (8 * b)) & 0xff)) * 0x100000001b3ull;
    }
    put(ops[i].name, len(ops[i].name));
    put(" ", 1);
    put_hex(hash);
  }
  return 0;
}
