// Register descriptions as data. tools/reggen turns each IP's
// <block>.regs.json into a constexpr table of these; the register bank, the
// generic register tests and the documentation all read the same table.
#pragma once

#include <cstdint>

namespace tessera {

enum class Access : std::uint8_t {
  RW,   // read/write
  RO,   // read-only: a write is rejected (TLM_COMMAND_ERROR_RESPONSE)
  WO,   // write-only: a read is rejected (TLM_COMMAND_ERROR_RESPONSE)
  W1C,  // read; writing 1 clears a bit
  W1S,  // read; writing 1 sets a bit
};

constexpr bool readable(Access a) { return a != Access::WO; }
constexpr bool writable(Access a) { return a != Access::RO; }

struct FieldDesc {
  const char* name;
  std::uint8_t lsb;
  std::uint8_t width;
  Access access;
  const char* doc;

  constexpr std::uint64_t mask() const {
    return (width >= 64 ? ~0ull : ((1ull << width) - 1)) << lsb;
  }
};

struct RegDesc {
  const char* name;
  std::uint64_t offset;      // of element 0, from the start of the window
  std::uint32_t size;        // bytes: 1, 2, 4 or 8
  std::uint32_t min_access;  // smallest access size accepted (a 64-bit timer may allow 4)
  std::uint32_t count;       // elements of a register array (1 for a plain register)
  std::uint64_t stride;      // bytes between elements
  Access access;
  std::uint64_t reset;
  const char* bank;          // "" or the name of a bank selector (e.g. "dlab")
  bool side_effects;         // reading changes state (FIFO pop, claim)
  const FieldDesc* fields;
  std::uint32_t num_fields;
  const char* doc;

  constexpr std::uint64_t width_mask() const {
    return size >= 8 ? ~0ull : ((1ull << (size * 8)) - 1);
  }
  // Bits a write of this access type stores directly.
  constexpr std::uint64_t mask_of(Access a) const {
    if (num_fields == 0) return access == a ? width_mask() : 0;
    std::uint64_t m = 0;
    for (std::uint32_t i = 0; i < num_fields; ++i)
      if (fields[i].access == a) m |= fields[i].mask();
    return m;
  }
};

// A named set of values that fields take (formats, opcodes, status codes).
struct EnumValueDesc {
  const char* name;
  std::uint64_t value;
  const char* doc;
};

struct EnumDesc {
  const char* name;
  const EnumValueDesc* values;
  std::uint32_t num_values;
  const char* doc;
};

struct RegBlockDesc {
  const char* name;
  std::uint64_t window;  // bytes of address space the block occupies
  const RegDesc* regs;
  std::uint32_t num_regs;
  const char* doc;
  const EnumDesc* const* enums;
  std::uint32_t num_enums;
};

}  // namespace tessera
