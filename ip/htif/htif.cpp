#include "htif/htif.hpp"

#include "common/log.hpp"
#include "common/registry.hpp"
#include "common/sim.hpp"
#include "htif_regs.hpp"

namespace tessera::htif {

namespace R = regs::htif;

void Htif::Config::visit(Params& p) {
  p("console", console, "where console output goes: stdout, stderr, none, or a file");
}

Htif::Htif(const sc_core::sc_module_name& n, const Config& c)
    : MmioTarget(n, R::kBlock), console_(c.console, std::string(name()) + ".console") {
  regs_.on_write(R::TOHOST, [this](RegisterBank::Write& w) {
    const bool complete = (w.mask >> 32) != 0;  // the upper word was written
    if (complete && w.next != 0) {
      command(w.next);
      w.next = 0;
    }
    return true;
  });
}

void Htif::command(std::uint64_t v) {
  const unsigned device = static_cast<unsigned>(v >> 56);
  const unsigned cmd = static_cast<unsigned>((v >> 48) & 0xff);
  const std::uint64_t payload = v & R::TOHOST_f::PAYLOAD_MASK;
  if (device == 0 && (payload & 1)) {
    const std::uint64_t code = payload >> 1;
    if (code == 0) {
      sim::request_exit(0, path(), "pass", now());
    } else {
      std::fprintf(stderr, "tessera: %s: FAIL: test %llu\n", path().c_str(), static_cast<unsigned long long>(code));
      sim::request_exit(static_cast<int>(code > 255 ? 255 : code), path(), "fail: test " + std::to_string(code), now());
    }
    return;
  }
  if (device == 1 && cmd == 1) {
    console_.put(static_cast<char>(payload & 0xff));
    regs_.set(R::FROMHOST, (1ull << 56) | (1ull << 48));
    return;
  }
  log::unimplemented(path(), "htif/command", "device {} command {} (payload {:#x}) not modelled", device, cmd, payload);
}

TESSERA_REGISTER_IP("htif", Htif, "Spike HTIF tohost/fromhost: exit codes and console", R::kBlock.window, true);

}  // namespace tessera::htif
