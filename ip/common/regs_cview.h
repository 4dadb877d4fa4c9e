/* The C compiler's view of a register description: reggen emits a table of
 * these built only from the firmware header's macros, so a test can check
 * that the C header and the C++ table agree. */
#ifndef TESSERA_REGS_CVIEW_H
#define TESSERA_REGS_CVIEW_H

#ifdef __cplusplus
extern "C" {
#endif

struct tessera_reg_cview {
  const char* name;
  unsigned long long offset, size, count, stride, reset;
};

struct tessera_field_cview {
  const char* reg;
  const char* name;
  unsigned long long shift, mask;
};

struct tessera_value_cview {
  const char* enumeration;
  const char* name;
  unsigned long long value;
};

#ifdef __cplusplus
}
#endif

#endif
