// The smallest IP a plugin can bring (tests/system/plugin_test.cpp): a
// register block with a parameter. Built with tessera_add_plugin as the
// SDK's users build theirs. With CLASH defined it registers "uart16550",
// a type tessera-vp already has.
#include "common/config.hpp"
#include "common/registry.hpp"
#include "common/regs.hpp"
#include "plugin_probe_regs.hpp"

namespace probe {

namespace R = tessera::regs::plugin_probe;

class Probe : public tessera::MmioTarget {
 public:
  struct Config {
    unsigned scratch = 0;
    void visit(tessera::Params& p) { p("scratch", scratch, "SCRATCH's value at reset"); }
    void validate(const tessera::Params&) const {}
  };
  Probe(const sc_core::sc_module_name& n, const Config& c) : MmioTarget(n, R::kBlock) { regs_.set(R::SCRATCH, c.scratch); }
};

#ifdef CLASH
TESSERA_REGISTER_IP("uart16550", Probe, "a second uart16550", R::kBlock.window);
#else
TESSERA_REGISTER_IP("plugin_probe", Probe, "a register block from a plugin", R::kBlock.window);
#endif

}  // namespace probe
