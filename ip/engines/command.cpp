#include "engines/command.hpp"

#include "engine_regs.hpp"

namespace tessera::engine {

Semaphores semaphores(const IncludedRegs& r, unsigned reg) {
  return {static_cast<unsigned>(r.field(reg, "WAIT")), static_cast<unsigned>(r.field(reg, "SIGNAL")),
          static_cast<unsigned>(r.field(reg, "SIGNAL2"))};
}

num::Format format_of(std::uint64_t code) {
  static const auto formats = by_name<num::Format>(regs::engine::kFormatEnum, num::kFormats, num::name);
  return code < formats.size() && formats[code] != static_cast<num::Format>(num::kFormats)
             ? formats[code]
             : static_cast<num::Format>(static_cast<unsigned>(code) + 16);
}

}  // namespace tessera::engine
