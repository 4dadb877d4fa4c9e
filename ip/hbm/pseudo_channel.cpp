#include "hbm/pseudo_channel.hpp"

#include "common/trace.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace tessera::hbm {

namespace {
const trace::Category kTrace = trace::category("hbm", "HBM commands");
}  // namespace

PseudoChannel::PseudoChannel(const Timing& t, const Org& o, const ControllerConfig& c, Done done)
    : t_(t), org_(o), cfg_(c), done_(std::move(done)), checker_(t, o), banks_(o.banks_per_pc()) {
  stats_.activations.assign(banks_.size(), 0);
  reads_.reserve(cfg_.read_queue);
  writes_.reserve(cfg_.write_queue);
  fcfs_ = cfg_.scheduler == "fcfs";
  refresh_off_ = cfg_.refresh == "off";
  per_bank_ = cfg_.refresh == "per_bank";
  closed_ = cfg_.page_policy == "closed";
  adaptive_ = cfg_.page_policy == "adaptive";
  unified_ = cfg_.queues == "unified";
  posted_ = cfg_.write_response == "posted";
  set_refresh_turn(0, 1);
}

void PseudoChannel::set_refresh_turn(unsigned index, unsigned count) {
  const std::uint64_t period = per_bank_ ? t_.refisb(static_cast<unsigned>(banks_.size())) : t_.tREFI;
  refresh_due_ = Timing::first_refresh(period, index, count, cfg_.refresh_stagger == "stack");
}

bool PseudoChannel::idle() const { return reads_.empty() && writes_.empty() && frontend_.empty() && completions_.empty(); }

void PseudoChannel::enqueue(const Request& in) {
  ++generation_;
  Request r = in;
  if (cfg_.interface_limit) {  // one request a cycle
    if (any_accept_) r.arrival = std::max(r.arrival, last_accept_ + 1);
    last_accept_ = r.arrival;
    any_accept_ = true;
  }
  account_queue(r.arrival);
  frontend_.push_back(r);
  refill();
}

void PseudoChannel::refill() {
  while (!frontend_.empty()) {
    Request& r = frontend_.front();
    auto& q = r.write && !unified_ ? writes_ : reads_;
    const unsigned depth = unified_ ? cfg_.read_queue + cfg_.write_queue : r.write ? cfg_.write_queue : cfg_.read_queue;
    if (q.size() >= depth) break;
    if (posted_ && r.write) respond(r, std::max(now_, r.arrival) + cfg_.frontend);
    q.push_back(r);
    frontend_.pop_front();
  }
}

void PseudoChannel::account_queue(std::uint64_t cycle) {
  if (cycle > stats_.last_cycle) {
    stats_.queue_area += static_cast<double>(reads_.size() + writes_.size()) * static_cast<double>(cycle - stats_.last_cycle);
    stats_.last_cycle = cycle;
  }
}

std::uint64_t PseudoChannel::earliest(Cmd cmd, unsigned bank, std::uint64_t from) const {
  const BankState& b = banks_[bank];
  std::uint64_t e = 0;
  switch (cmd) {
    case Cmd::ACT:
      e = b.next_act;
      if (faw_.size() == 4) e = std::max(e, faw_.front() + t_.tFAW);
      break;
    case Cmd::RD: e = b.next_rd; break;
    case Cmd::WR: e = b.next_wr; break;
    case Cmd::PRE: e = b.next_pre; break;
    case Cmd::REFPB: e = std::max<std::uint64_t>(b.next_act, any_refpb_ ? last_refpb_ + t_.tRREFD : 0); break;
    case Cmd::REFAB:
      for (const BankState& x : banks_) e = std::max(e, x.next_act);
      break;
  }
  e = std::max({e, now_, from});
  if (bus_) return bus_->free_at(CommandBus::row(cmd), e, cmd == Cmd::ACT ? cfg_.act_cycles : 1);
  if (any_cmd_) e = std::max(e, last_cmd_ + 1);  // one command per cycle
  return e;
}

std::uint64_t CommandBus::free_at(bool row, std::uint64_t c, unsigned len) const {
  const Window& w = bus_[row];
  for (std::uint64_t k = c; k < c + len; ++k)
    if (w.held(k)) c = k + 1, k = c - 1;  // held: start after it
  return c;
}

void CommandBus::reserve(bool row, std::uint64_t c, unsigned len) {
  Window& w = bus_[row];
  ++generation_;
  if (w.end == w.base) w.base = w.end = c, w.words.clear();
  if (c + len <= w.base) return;  // before the window: earlier than anything still asked about
  if (c < w.base) {
    len -= static_cast<unsigned>(w.base - c);
    c = w.base;
  }
  if (c + len > w.end) {
    w.end = c + len;
    w.words.resize((w.end - 1) / 64 - w.base / 64 + 1, 0);
  }
  for (std::uint64_t k = c; k < c + len; ++k) w.words[k / 64 - w.base / 64] |= 1ull << (k % 64);
  constexpr std::uint64_t kKeep = 4096;
  if (w.end - w.base > 2 * kKeep) {
    const std::uint64_t base = w.end - kKeep;
    w.words.erase(w.words.begin(), w.words.begin() + static_cast<std::ptrdiff_t>(base / 64 - w.base / 64));
    w.base = base;
  }
}

bool PseudoChannel::row_pending(unsigned bank, std::uint64_t row, const std::vector<Request>* only) const {
  for (const auto* q : {&reads_, &writes_})
    if (!only || q == only)
      for (const Request& r : *q)
        if (r.loc.flat_bank(org_) == bank && r.loc.row == row) return true;
  return false;
}

PseudoChannel::Candidate PseudoChannel::next_for(const Request& r) const {
  Candidate c;
  c.bank = r.loc.flat_bank(org_);
  const BankState& b = banks_[c.bank];
  if (b.open && b.row == r.loc.row) {
    c.cmd = r.write ? Cmd::WR : Cmd::RD;
  } else if (b.open) {
    // FR-FCFS closes no row that requests of the queue being served still
    // hit: they go first. Only that queue's: a write waiting below the
    // watermark must not keep the precharge the reads need from issuing
    // (nothing would then issue for the bank). FCFS serves the oldest
    // request whatever the others hit.
    if (!fcfs_ && row_pending(c.bank, b.row, r.write ? &writes_ : &reads_)) return Candidate{};
    c.cmd = Cmd::PRE;
  } else {
    c.cmd = Cmd::ACT;
  }
  c.cycle = earliest(c.cmd, c.bank, r.arrival + cfg_.frontend);
  c.age = r.id;
  return c;
}

bool PseudoChannel::pick(std::uint64_t, Candidate& best) {
  const std::uint64_t bus = bus_ ? bus_->generation() : 0;
  if (picked_generation_ == generation_ && picked_bus_ == bus && (!picked_found_ || now_ <= picked_.cycle)) {
    best = picked_;
    return picked_found_;
  }
  picked_found_ = pick_now(best);
  picked_ = best;
  picked_generation_ = generation_;
  picked_bus_ = bus;
  return picked_found_;
}

bool PseudoChannel::pick_now(Candidate& best) {
  best = Candidate{};
  auto better = [](const Candidate& a, const Candidate& b) {
    if (a.cycle != b.cycle) return a.cycle < b.cycle;
    const bool a_cas = a.cmd == Cmd::RD || a.cmd == Cmd::WR, b_cas = b.cmd == Cmd::RD || b.cmd == Cmd::WR;
    if (a_cas != b_cas) return a_cas;
    return a.age < b.age;
  };
  // Reads first; writes when draining above the high watermark, or when no read waits.
  if (writes_.size() >= cfg_.write_high) draining_ = true;
  if (writes_.size() <= cfg_.write_low) draining_ = false;
  const bool use_writes = !writes_.empty() && (draining_ || reads_.empty());
  const auto& q = use_writes ? writes_ : reads_;
  const std::size_t scan = fcfs_ ? std::min<std::size_t>(1, q.size()) : q.size();
  const bool per_bank = per_bank_;
  // Nothing can issue before this; a column command that can, oldest
  // first, is the best there is.
  const std::uint64_t floor = bus_ ? bus_->free_at(false, now_, 1) : std::max(now_, any_cmd_ ? last_cmd_ + 1 : 0);
  // Per bank, the oldest request of each kind (row hit, or not) decides:
  // a younger one needs the same command no sooner.
  std::uint64_t seen_hit = 0, seen_other = 0;
  for (std::size_t i = 0; i < scan; ++i) {
    const unsigned bank = q[i].loc.flat_bank(org_);
    const BankState& bs = banks_[bank];
    const bool hit = bs.open && bs.row == q[i].loc.row;
    std::uint64_t& seen = hit ? seen_hit : seen_other;
    if (bank < 64) {
      if (seen & (1ull << bank)) continue;
      seen |= 1ull << bank;
    }
    Candidate c = next_for(q[i]);
    if (c.cycle == ~0ull) continue;
    // The bank due for a per-bank refresh takes no new work once it is due.
    if (per_bank && c.bank == refresh_bank_ && c.cycle >= refresh_due_) continue;
    c.queue = use_writes ? 1 : 0;
    c.index = i;
    if (better(c, best)) best = c;
    if (best.cycle == floor && (best.cmd == Cmd::RD || best.cmd == Cmd::WR)) break;
  }
  // Pages the closed/adaptive policy wants shut.
  for (unsigned b = 0; b < banks_.size() && (closed_ || adaptive_); ++b)
    if (banks_[b].open && banks_[b].close_after && !row_pending(b, banks_[b].row)) {
      Candidate c{Cmd::PRE, b, earliest(Cmd::PRE, b), -1, 0, ~0ull};
      if (better(c, best)) best = c;
    }
  // A refresh only ever wins from the cycle it is due.
  if (refresh_off_ || (best.cycle != ~0ull && best.cycle < refresh_due_)) return best.cycle != ~0ull;
  // Refresh: an all-bank refresh closes every bank and then refreshes; a
  // per-bank one does that to one bank while the others carry on. Either
  // goes first from the moment it is due.
  Candidate r{};
  if (per_bank) {
    const unsigned b = refresh_bank_;
    r = banks_[b].open ? Candidate{Cmd::PRE, b, earliest(Cmd::PRE, b, refresh_due_), -2, 0, 0}
                       : Candidate{Cmd::REFPB, b, earliest(Cmd::REFPB, b, refresh_due_), -2, 0, 0};
  } else {
    for (unsigned b = 0; b < banks_.size() && r.cycle == ~0ull; ++b)
      if (banks_[b].open) r = Candidate{Cmd::PRE, b, earliest(Cmd::PRE, b, refresh_due_), -2, 0, 0};
    if (r.cycle == ~0ull) r = Candidate{Cmd::REFAB, 0, earliest(Cmd::REFAB, 0, refresh_due_), -2, 0, 0};
  }
  if (best.cycle == ~0ull || best.cycle >= r.cycle || (!per_bank && best.cycle >= refresh_due_)) best = r;
  return best.cycle != ~0ull;
}

void PseudoChannel::apply(Cmd cmd, unsigned bank, std::uint64_t row, std::uint64_t c) {
  BankState& b = banks_[bank];
  const unsigned bg = bank / org_.banks;
  auto raise = [](std::uint64_t& v, std::uint64_t to) { v = std::max(v, to); };
  switch (cmd) {
    case Cmd::ACT:
      b.open = true;
      b.row = row;
      raise(b.next_rd, c + t_.tRCDRD);
      raise(b.next_wr, c + t_.tRCDWR);
      raise(b.next_pre, c + t_.tRAS);
      raise(b.next_act, c + t_.tRC);
      for (unsigned o = 0; o < banks_.size(); ++o)
        if (o != bank) raise(banks_[o].next_act, c + (o / org_.banks == bg ? t_.tRRD_L : t_.tRRD_S));
      faw_.push_back(c);
      if (faw_.size() > 4) faw_.pop_front();
      ++stats_.activations[bank];
      if (meter_) meter_->charge(energy::activate, 1, clock_->edge(c, tck_));
      break;
    case Cmd::RD:
      for (unsigned o = 0; o < banks_.size(); ++o) {
        const bool other_sid = o / org_.banks_per_sid() != bank / org_.banks_per_sid();
        raise(banks_[o].next_rd, c + (other_sid ? t_.ccdr() : o / org_.banks == bg ? t_.tCCD_L : t_.tCCD_S));
        raise(banks_[o].next_wr, c + t_.tRTW);
      }
      raise(b.next_pre, c + t_.tRTP);
      break;
    case Cmd::WR:
      for (unsigned o = 0; o < banks_.size(); ++o) {
        const bool same = o / org_.banks == bg, other_sid = o / org_.banks_per_sid() != bank / org_.banks_per_sid();
        raise(banks_[o].next_wr, c + (other_sid ? t_.ccdr() : same ? t_.tCCD_L : t_.tCCD_S));
        raise(banks_[o].next_rd, c + t_.tCWL + t_.tBURST + (same ? t_.tWTR_L : t_.tWTR_S));
      }
      raise(b.next_pre, c + t_.tCWL + t_.tBURST + t_.tWR);
      break;
    case Cmd::PRE:
      b.open = false;
      b.close_after = false;
      raise(b.next_act, c + t_.tRP);
      break;
    case Cmd::REFAB:
      for (BankState& x : banks_) raise(x.next_act, c + t_.tRFCab);
      break;
    case Cmd::REFPB:
      raise(b.next_act, c + t_.tRFCpb);
      last_refpb_ = c;
      any_refpb_ = true;
      break;
  }
  const unsigned len = cmd == Cmd::ACT ? cfg_.act_cycles : 1;
  if (bus_) bus_->reserve(CommandBus::row(cmd), c, len);
  last_cmd_ = c + len - 1;
  any_cmd_ = true;
}

void PseudoChannel::issue(const Candidate& c) {
  now_ = c.cycle;
  ++generation_;
  std::uint64_t row = banks_[c.bank].row;
  Request* r = nullptr;
  if (c.queue >= 0) {
    r = &(c.queue ? writes_ : reads_)[c.index];
    row = r->loc.row;
    if (r->kind == Request::Kind::unknown)
      r->kind = c.cmd == Cmd::ACT ? Request::Kind::miss : c.cmd == Cmd::PRE ? Request::Kind::conflict : Request::Kind::hit;
  }
  if (cfg_.check) {
    const std::string e = checker_.check(c.cmd, c.bank, row, c.cycle);
    if (!e.empty()) {
      ++stats_.violations;
      if (stats_.violation_log.size() < 8) stats_.violation_log.push_back(e);
    }
    checker_.record(c.cmd, c.bank, row, c.cycle);
  }
  if (record_) issued_.push_back({c.cmd, c.bank, row, c.cycle});
  if (trace::on(kTrace) && clock_) {
    const std::uint64_t len = c.cmd == Cmd::ACT ? t_.tRCDRD : c.cmd == Cmd::PRE ? t_.tRP
                            : c.cmd == Cmd::REFAB ? t_.tRFCab : c.cmd == Cmd::REFPB ? t_.tRFCpb : t_.tBURST;
    trace::slice(kTrace, track_, cmd_name(c.cmd), clock_->edge(c.cycle, tck_), clock_->edge(c.cycle + len, tck_),
                 {{"bank", c.bank}, {"row", row}});
  }
  apply(c.cmd, c.bank, row, c.cycle);

  if (c.cmd == Cmd::REFAB || c.cmd == Cmd::REFPB) {
    ++stats_.refreshes;
    if (meter_) meter_->charge(energy::refresh, 1, clock_->edge(c.cycle, tck_));
    stats_.refresh_cycles += c.cmd == Cmd::REFAB ? t_.tRFCab : t_.tRFCpb;
    if (c.cmd == Cmd::REFPB) refresh_bank_ = (refresh_bank_ + 1) % banks_.size();
    if (refresh_owed_ > 0) --refresh_owed_;
    else refresh_due_ += c.cmd == Cmd::REFAB ? t_.tREFI : t_.refisb(static_cast<unsigned>(banks_.size()));
    return;
  }
  if (!r || (c.cmd != Cmd::RD && c.cmd != Cmd::WR)) return;
  // The column command: the request is served.
  account_queue(c.cycle);
  Request done = *r;
  done.done = c.cycle + (done.write ? t_.tCWL : t_.tCL + t_.tDQSCK) + t_.tBURST;
  stats_.busy_cycles += t_.tBURST;
  ++(done.write ? stats_.writes : stats_.reads);
  if (any_column_ && last_column_write_ != done.write) ++stats_.turnarounds;
  any_column_ = true;
  last_column_write_ = done.write;
  switch (done.kind) {
    case Request::Kind::hit: ++stats_.row_hits; break;
    case Request::Kind::miss: ++stats_.row_misses; break;
    default: ++stats_.row_conflicts; break;
  }
  const std::uint64_t lat = done.done - done.arrival;
  ++stats_.latency_histogram[std::min<std::uint64_t>(lat, stats_.latency_histogram.size() - 1)];
  stats_.latency_max = std::max(stats_.latency_max, lat);
  stats_.latency_sum += lat;
  auto& q = c.queue ? writes_ : reads_;
  q.erase(q.begin() + static_cast<std::ptrdiff_t>(c.index));
  BankState& b = banks_[c.bank];
  if (closed_) b.close_after = true;
  else if (adaptive_) b.close_after = !row_pending(c.bank, b.row);
  if (!(posted_ && done.write)) respond(done, done.done);
  refill();
}

void PseudoChannel::respond(Request r, std::uint64_t cycle) {
  if (cfg_.interface_limit) {  // one response a cycle
    if (any_response_) cycle = std::max(cycle, last_response_ + 1);
    last_response_ = cycle;
    any_response_ = true;
  }
  r.done = cycle;
  completions_.push({cycle, r});
}

void PseudoChannel::advance(std::uint64_t cycle) {
  // A long idle stretch: refreshes that fell due meanwhile are counted in
  // bulk (the banks end up closed), not issued one by one.
  if (!refresh_off_ && reads_.empty() && writes_.empty() && frontend_.empty()) {
    const std::uint64_t period = per_bank_ ? t_.refisb(static_cast<unsigned>(banks_.size())) : t_.tREFI;
    if (refresh_due_ + 4 * period < cycle) {
      ++generation_;
      const std::uint64_t skip = (cycle - refresh_due_) / period - 2;
      const unsigned tRFC = per_bank_ ? t_.tRFCpb : t_.tRFCab;
      stats_.refreshes += skip;
      stats_.refresh_cycles += skip * tRFC;
      refresh_due_ += skip * period;
      if (per_bank_) refresh_bank_ = static_cast<unsigned>((refresh_bank_ + skip) % banks_.size());
      // The last skipped refresh ended long ago: only the open rows change.
      for (unsigned b = 0; b < banks_.size(); ++b)
        if (banks_[b].open) {
          const std::uint64_t at = earliest(Cmd::PRE, b, refresh_due_ - period);
          if (cfg_.check) checker_.record(Cmd::PRE, b, banks_[b].row, at);
          apply(Cmd::PRE, b, 0, at);
        }
      now_ = std::max(now_, refresh_due_ - period);
    }
  }
  // Refreshes may be owed (postponed) while requests wait.
  while (!refresh_off_ && refresh_due_ <= cycle && refresh_owed_ < cfg_.refresh_postpone &&
         !(reads_.empty() && writes_.empty())) {
    ++generation_;
    ++refresh_owed_;
    refresh_due_ += per_bank_ ? t_.refisb(static_cast<unsigned>(banks_.size())) : t_.tREFI;
  }
  for (Candidate best; pick(now_, best) && best.cycle <= cycle;) issue(best);
  while (!completions_.empty() && completions_.top().cycle <= cycle) {
    Request r = completions_.top().r;
    completions_.pop();
    done_(r);
  }
  now_ = std::max(now_, cycle);
}

std::uint64_t PseudoChannel::next_event() const {
  std::uint64_t next = ~0ull;
  if (!completions_.empty()) next = completions_.top().cycle;
  if (!reads_.empty() || !writes_.empty()) {  // pick() answers from its last decision while that stands
    Candidate best;
    if (const_cast<PseudoChannel*>(this)->pick(now_, best)) next = std::min(next, best.cycle);
  }
  return next;
}

}  // namespace tessera::hbm
