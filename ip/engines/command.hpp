// What the tile's engines share in their command registers
// (engine.regs.json, which each engine's own description includes): the
// element formats by register code and the semaphore fields. Each engine
// decodes its own commands (tensor::decode, vector::decode, dma::decode)
// from its registers in the tile's bank.
#pragma once

#include <cctype>
#include <cstdint>
#include <string>
#include <vector>

#include "common/log.hpp"
#include "common/regs.hpp"
#include "engines/num/formats.hpp"

namespace tessera::engine {

struct Semaphores {
  unsigned wait = 0, signal = 0, signal2 = 0;  // 0 none, i + 1 semaphore i
};
// The semaphore fields (engine.regs.json's "sem") of a part's register.
Semaphores semaphores(const IncludedRegs& r, unsigned reg);

// A format's register code as the number format it names. A code the
// description does not name stays unknown (code + 16): the engine refuses it
// by number.
num::Format format_of(std::uint64_t code);

// The codes of an enum of a register description (the one place their
// numbers are written) as an engine's own enum, matched by name: FP32 is
// num::name() "fp32", SCALE_ROWS is vector::name() "scale_rows". Every
// code the description names must name one of the engine's `n` values;
// codes it does not name map to E(n).
template <class E>
std::vector<E> by_name(const EnumDesc& d, unsigned n, const char* (*name)(E)) {
  std::vector<E> table;
  for (unsigned k = 0; k < d.num_values; ++k) {
    const EnumValueDesc& v = d.values[k];
    std::string lower = v.name;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    unsigned i = 0;
    while (i < n && lower != name(static_cast<E>(i))) ++i;
    if (i == n) log::internal("engine", "the register description's {} {} names nothing the engine knows", d.name, v.name);
    if (table.size() <= v.value) table.resize(v.value + 1, static_cast<E>(n));
    table[v.value] = static_cast<E>(i);
  }
  return table;
}

}  // namespace tessera::engine
