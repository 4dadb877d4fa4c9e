#include "hbm/timing_checker.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace tessera::hbm {

TimingChecker::TimingChecker(const Timing& t, const Org& o) : t_(t), org_(o), banks_(o.banks_per_pc()) {}

std::int64_t TimingChecker::last_in_bg(unsigned bg, std::int64_t Bank::*field) const {
  std::int64_t v = kNever;
  for (unsigned b = bg * org_.banks; b < (bg + 1) * org_.banks; ++b) v = std::max(v, banks_[b].*field);
  return v;
}

std::int64_t TimingChecker::last_any(std::int64_t Bank::*field) const {
  std::int64_t v = kNever;
  for (const Bank& b : banks_) v = std::max(v, b.*field);
  return v;
}

std::string TimingChecker::check(Cmd cmd, unsigned bank, std::uint64_t row, std::uint64_t cycle) const {
  const auto c = static_cast<std::int64_t>(cycle);
  const Bank& b = banks_[bank];
  const unsigned bg = bg_of(bank);
  // The first broken constraint: its name, the command it counts from, the gap.
  const char* broken = nullptr;
  std::int64_t from = 0;
  unsigned gap = 0;
  auto need = [&](std::int64_t since, unsigned g, const char* name) {
    if (since != kNever && c < since + static_cast<std::int64_t>(g)) {
      broken = name;
      from = since;
      gap = g;
      return false;
    }
    return true;
  };
  auto report = [&]() -> std::string {
    if (!broken) return "";
    return fmt::format("{} to bank {} at cycle {} breaks {} ({} cycles after cycle {}, {} needed)", cmd_name(cmd), bank,
                       cycle, broken, c - from, from, gap);
  };
  const unsigned wr_to_rd_l = t_.tCWL + t_.tBURST + t_.tWTR_L, wr_to_rd_s = t_.tCWL + t_.tBURST + t_.tWTR_S;
  switch (cmd) {
    case Cmd::ACT:
      if (b.open) return fmt::format("ACT to bank {} at cycle {}: the bank is open", bank, cycle);
      if (!need(b.act, t_.tRC, "tRC") || !need(b.pre, t_.tRP, "tRP")) return report();
      for (unsigned o = 0; o < banks_.size(); ++o) {
        if (o == bank) continue;
        const bool same_bg = bg_of(o) == bg;
        if (!need(banks_[o].act, same_bg ? t_.tRRD_L : t_.tRRD_S, same_bg ? "tRRD_L" : "tRRD_S")) return report();
      }
      if (acts_.size() == 4 && !need(acts_.front(), t_.tFAW, "tFAW")) return report();
      need(refab_, t_.tRFCab, "tRFCab") && need(b.refpb, t_.tRFCpb, "tRFCpb");
      return report();
    case Cmd::RD:
    case Cmd::WR: {
      if (!b.open || b.row != row)
        return fmt::format("{} to bank {} row {} at cycle {}: that row is not open", cmd_name(cmd), bank, row, cycle);
      const bool rd = cmd == Cmd::RD;
      if (!need(b.act, rd ? t_.tRCDRD : t_.tRCDWR, rd ? "tRCDRD" : "tRCDWR")) return report();
      for (unsigned o = 0; o < banks_.size(); ++o) {
        const bool same_bg = bg_of(o) == bg;
        const bool other_sid = o / org_.banks_per_sid() != bank / org_.banks_per_sid();
        const unsigned ccd = other_sid ? t_.ccdr() : same_bg ? t_.tCCD_L : t_.tCCD_S;
        const char* ccd_name = other_sid ? "tCCDR" : same_bg ? "tCCD_L" : "tCCD_S";
        const Bank& x = banks_[o];
        const bool ok = rd ? need(x.rd, ccd, ccd_name) &&
                                 need(x.wr, same_bg ? wr_to_rd_l : wr_to_rd_s, same_bg ? "tWTR_L" : "tWTR_S")
                           : need(x.wr, ccd, ccd_name) && need(x.rd, t_.tRTW, "tRTW");
        if (!ok) return report();
      }
      return "";
    }
    case Cmd::PRE:
      need(b.act, t_.tRAS, "tRAS") && need(b.rd, t_.tRTP, "tRTP") && need(b.wr, t_.tCWL + t_.tBURST + t_.tWR, "tWR");
      return report();
    case Cmd::REFAB:
      for (unsigned o = 0; o < banks_.size(); ++o) {
        if (banks_[o].open) return fmt::format("REFab at cycle {}: bank {} is open", cycle, o);
        if (!need(banks_[o].pre, t_.tRP, "tRP") || !need(banks_[o].refpb, t_.tRFCpb, "tRFCpb")) return report();
      }
      need(refab_, t_.tRFCab, "tRFCab");
      return report();
    case Cmd::REFPB:
      if (b.open) return fmt::format("REFpb to bank {} at cycle {}: the bank is open", bank, cycle);
      need(b.pre, t_.tRP, "tRP") && need(b.refpb, t_.tRFCpb, "tRFCpb") && need(refab_, t_.tRFCab, "tRFCab") &&
          need(refpb_any_, t_.tRREFD, "tRREFD");
      return report();
  }
  return "";
}

void TimingChecker::record(Cmd cmd, unsigned bank, std::uint64_t row, std::uint64_t cycle) {
  const auto c = static_cast<std::int64_t>(cycle);
  Bank& b = banks_[bank];
  switch (cmd) {
    case Cmd::ACT:
      b.open = true;
      b.row = row;
      b.act = c;
      acts_.push_back(c);
      if (acts_.size() > 4) acts_.pop_front();
      break;
    case Cmd::RD: b.rd = c; break;
    case Cmd::WR: b.wr = c; break;
    case Cmd::PRE:
      b.open = false;
      b.pre = c;
      break;
    case Cmd::REFAB: refab_ = c; break;
    case Cmd::REFPB:
      b.refpb = c;
      refpb_any_ = c;
      break;
  }
}

}  // namespace tessera::hbm
