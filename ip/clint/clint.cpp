#include "clint/clint.hpp"

#include "clint_regs.hpp"
#include "common/registry.hpp"

namespace tessera::clint {

namespace R = regs::clint;

void Clint::Config::visit(Params& p) {
  p("harts", harts, "number of harts served");
  p("timebase", timebase, "frequency at which mtime counts");
}

void Clint::Config::validate(const Params& p) const {
  if (harts == 0 || harts > R::kRegs[R::MSIP].count) p.fail("harts", "must be between 1 and 4095");
  if (timebase.value > 1e12) p.fail("timebase", "must be at most 1THz");
  if (timebase.value != static_cast<double>(static_cast<std::uint64_t>(timebase.value)))
    p.fail("timebase", "must be a whole number of Hz (firmware counts it in Hz)");
}

Clint::Clint(const sc_core::sc_module_name& n, const Config& c)
    : MmioTarget(n, R::kBlock), msip_out(c.harts), mtip_out(c.harts), config_(c), period_(c.timebase.period()) {
  expose_irq_out("msip", msip_out);
  expose_irq_out("mtip", mtip_out);
  regs_.limit_count(R::MSIP, c.harts);
  regs_.limit_count(R::MTIMECMP, c.harts);

  regs_.on_write(R::MSIP, [this](RegisterBank::Write& w) {
    msip_out[w.index].write(w.next & R::MSIP_f::MSIP_MASK);
    return true;
  });
  regs_.on_read(R::MTIME, [this](unsigned, bool) { return ticks_at(now()); });
  regs_.on_write(R::MTIME, [this](RegisterBank::Write& w) {
    // The write replaces the written bytes of the running count.
    std::uint64_t current = ticks_at(now());
    std::uint64_t value = (current & ~w.mask) | w.data;
    offset_ += static_cast<std::int64_t>(value - current);
    for (unsigned h = 0; h < config_.harts; ++h) update_timer(h);
    return true;
  });
  regs_.on_write(R::MTIMECMP, [this](RegisterBank::Write& w) {
    regs_.set(R::MTIMECMP, w.next, w.index);
    update_timer(w.index);
    return true;
  });

  for (unsigned h = 0; h < c.harts; ++h) {
    timer_events_.push_back(std::make_unique<sc_core::sc_event>());
    sc_core::sc_spawn_options opt;
    opt.spawn_method();
    opt.set_sensitivity(timer_events_.back().get());
    opt.dont_initialize();
    sc_core::sc_spawn([this, h] { update_timer(h); }, sc_core::sc_gen_unique_name("timer"), &opt);
  }
}

std::uint64_t Clint::ticks_at(const sc_core::sc_time& t) const {
  return static_cast<std::uint64_t>(t.value() / period_.value()) + static_cast<std::uint64_t>(offset_);
}

void Clint::update_timer(unsigned hart) {
  const std::uint64_t cmp = regs_.get(R::MTIMECMP, hart);
  const sc_core::sc_time t = now();
  const std::uint64_t ticks = ticks_at(t);
  mtip_out[hart].write(ticks >= cmp);
  timer_events_[hart]->cancel();
  if (ticks >= cmp) return;
  // Wake up when the count reaches cmp (if that is representable).
  const std::uint64_t remaining = cmp - ticks;
  const double when = (static_cast<double>(t.value() / period_.value()) + static_cast<double>(remaining)) *
                      static_cast<double>(period_.value());
  if (when >= 9.0e18) return;  // centuries away: never
  const sc_core::sc_time at = sc_core::sc_time::from_value(static_cast<sc_dt::uint64>(when));
  const sc_core::sc_time base = sc_core::sc_time_stamp();
  timer_events_[hart]->notify(at > base ? at - base : sc_core::SC_ZERO_TIME);
}

TESSERA_REGISTER_IP("clint", Clint, "SiFive CLINT: msip, mtimecmp, mtime", R::kBlock.window);

}  // namespace tessera::clint
