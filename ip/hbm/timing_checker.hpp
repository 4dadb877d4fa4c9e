// An independent check of every DRAM command against every timing
// constraint, written from the constraint table rather than from the
// scheduler's bookkeeping: the controller reports each command it issues,
// the checker answers with the first constraint it breaks (empty when
// legal). Per pseudo-channel.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "hbm/dram.hpp"

namespace tessera::hbm {

class TimingChecker {
 public:
  TimingChecker(const Timing& t, const Org& o);
  // "" if `cmd` may issue at `cycle`; otherwise the broken constraint.
  std::string check(Cmd cmd, unsigned bank, std::uint64_t row, std::uint64_t cycle) const;
  // Records a command (after check).
  void record(Cmd cmd, unsigned bank, std::uint64_t row, std::uint64_t cycle);

 private:
  static constexpr std::int64_t kNever = -(1ll << 50);
  struct Bank {
    bool open = false;
    std::uint64_t row = 0;
    std::int64_t act = kNever, pre = kNever, rd = kNever, wr = kNever, refpb = kNever;
  };
  unsigned bg_of(unsigned bank) const { return bank / org_.banks; }
  std::int64_t last_in_bg(unsigned bg, std::int64_t Bank::*field) const;
  std::int64_t last_any(std::int64_t Bank::*field) const;

  Timing t_;
  Org org_;
  std::vector<Bank> banks_;
  std::deque<std::int64_t> acts_;  // the last four ACTs, for tFAW
  std::int64_t refab_ = kNever;
  std::int64_t refpb_any_ = kNever;  // the last per-bank refresh of any bank (tRREFD)
};

}  // namespace tessera::hbm
