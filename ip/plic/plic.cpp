#include "plic/plic.hpp"

#include "common/log.hpp"
#include "common/registry.hpp"
#include "plic_regs.hpp"

namespace tessera::plic {

namespace R = regs::plic;

void Plic::Config::visit(Params& p) {
  p("sources", sources, "interrupt sources (ids 1..sources)");
  p("contexts", contexts, "hart contexts (outputs)");
  p("priority_bits", priority_bits, "implemented bits of each priority");
}

void Plic::Config::validate(const Params& p) const {
  if (sources == 0 || sources > 1023) p.fail("sources", "must be between 1 and 1023");
  if (contexts == 0 || contexts > 64) p.fail("contexts", "must be between 1 and 64");
  if (priority_bits == 0 || priority_bits > 32) p.fail("priority_bits", "must be between 1 and 32");
}

Plic::Plic(const sc_core::sc_module_name& n, const Config& c)
    : MmioTarget(n, R::kBlock), source_in(c.sources + 1), context_out(c.contexts), config_(c),
      in_service_(c.sources + 1, false) {
  std::vector<IrqIn*> inputs{nullptr};  // source 0 does not exist
  for (unsigned s = 1; s <= c.sources; ++s) {
    source_in[s].set_handler([this, s](bool level) { input_changed(s, level); });
    inputs.push_back(&source_in[s]);
  }
  expose_irq_in("src", inputs);
  expose_irq_out("context", context_out);
  regs_.limit_count(R::PRIORITY, c.sources + 1);
  regs_.limit_count(R::PENDING, (c.sources + 32) / 32);
  regs_.limit_count(R::ENABLE, c.contexts * 32);
  regs_.limit_count(R::THRESHOLD, c.contexts);
  regs_.limit_count(R::CLAIM, c.contexts);

  const std::uint64_t prio_mask = c.priority_bits >= 32 ? 0xffffffffu : (1u << c.priority_bits) - 1;
  regs_.on_write(R::PRIORITY, [this, prio_mask](RegisterBank::Write& w) {
    w.next = w.index == 0 ? 0 : (w.next & prio_mask);
    regs_.set(R::PRIORITY, w.next, w.index);
    update();
    return true;
  });
  regs_.on_write(R::ENABLE, [this](RegisterBank::Write& w) {
    // Bits of sources that do not exist (and source 0) read as zero.
    const unsigned word = w.index % 32;
    std::uint64_t valid = 0;
    for (unsigned b = 0; b < 32; ++b) {
      unsigned src = word * 32 + b;
      if (src != 0 && src <= config_.sources) valid |= 1ull << b;
    }
    w.next &= valid;
    regs_.set(R::ENABLE, w.next, w.index);
    update();
    return true;
  });
  regs_.on_write(R::THRESHOLD, [this, prio_mask](RegisterBank::Write& w) {
    w.next &= prio_mask;
    regs_.set(R::THRESHOLD, w.next, w.index);
    update();
    return true;
  });
  regs_.on_read(R::PENDING, [this](unsigned word, bool) {
    std::uint64_t v = 0;
    for (unsigned b = 0; b < 32; ++b)
      if (pending(word * 32 + b)) v |= 1ull << b;
    return v;
  });
  regs_.on_read(R::CLAIM, [this](unsigned ctx, bool debug) -> std::uint64_t {
    const unsigned src = best(ctx);
    if (src && !debug) {
      in_service_[src] = true;
      ++claims_;
      update();
    }
    return src;
  });
  regs_.on_write(R::CLAIM, [this](RegisterBank::Write& w) {
    const auto src = static_cast<unsigned>(w.data);
    // The specification ignores completions of sources not enabled for the
    // context; we also flag them, as they hint at a driver bug.
    if (src == 0 || src > config_.sources || !enabled(w.index, src)) {
      log::guest_error(path(), "plic/complete", "completion of source {} not enabled for context {} ignored", src,
                       w.index);
      return true;
    }
    in_service_[src] = false;
    ++completions_;
    update();
    return true;
  });
}

bool Plic::pending(unsigned src) const {
  return src != 0 && src <= config_.sources && source_in[src].level() && !in_service_[src];
}

bool Plic::enabled(unsigned ctx, unsigned src) const {
  return (regs_.get(R::ENABLE, ctx * 32 + src / 32) >> (src % 32)) & 1;
}

unsigned Plic::best(unsigned ctx) const {
  const std::uint64_t threshold = regs_.get(R::THRESHOLD, ctx);
  unsigned best = 0;
  std::uint64_t best_prio = threshold;
  for (unsigned s = 1; s <= config_.sources; ++s) {
    if (!pending(s) || !enabled(ctx, s)) continue;
    const std::uint64_t prio = regs_.get(R::PRIORITY, s);
    if (prio > best_prio) best = s, best_prio = prio;
  }
  return best;
}

void Plic::input_changed(unsigned, bool) { update(); }

void Plic::update() {
  for (unsigned c = 0; c < config_.contexts; ++c) context_out[c].write(best(c) != 0);
}

void Plic::report_stats(nlohmann::ordered_json& out) const {
  MmioTarget::report_stats(out);
  out["claims"] = claims_;
  out["completions"] = completions_;
}

TESSERA_REGISTER_IP("plic", Plic, "RISC-V PLIC: priorities, pending, enables, threshold, claim/complete", R::kBlock.window);

}  // namespace tessera::plic
