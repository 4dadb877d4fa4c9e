#include "test_finisher/test_finisher.hpp"

#include "common/log.hpp"
#include "common/registry.hpp"
#include "common/sim.hpp"
#include "test_finisher_regs.hpp"

namespace tessera::test_finisher {

namespace R = regs::test_finisher;

TestFinisher::TestFinisher(const sc_core::sc_module_name& n, const Config&) : MmioTarget(n, R::kBlock) {
  regs_.on_write(R::FINISHER, [this](RegisterBank::Write& w) {
    const auto status = static_cast<R::Status>(w.data & R::FINISHER_f::STATUS_MASK);
    const auto code = static_cast<int>((w.data & R::FINISHER_f::CODE_MASK) >> R::FINISHER_f::CODE_SHIFT);
    switch (status) {
      case R::Status::PASS: sim::request_exit(0, path(), "pass", now()); return true;
      case R::Status::FAIL: sim::request_exit(code ? code : 1, path(), "fail with code " + std::to_string(code), now()); return true;
      case R::Status::RESET: log::unimplemented(path(), "finisher/reset", "reset request ignored"); return true;
      default:
        log::guest_error(path(), "finisher/value", "unknown command {:#x}", w.data);
        return false;
    }
  });
}

TESSERA_REGISTER_IP("test_finisher", TestFinisher, "SiFive test device: pass/fail exit codes", R::kBlock.window);

}  // namespace tessera::test_finisher
