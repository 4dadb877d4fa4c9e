#include "hbm/hbm.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

#include "common/log.hpp"
#include "common/sim.hpp"
#include "common/registry.hpp"
#include "hbm_regs.hpp"

namespace tessera::hbm {

namespace R = regs::hbm;

namespace {
unsigned log2_exact(std::uint64_t v) {
  unsigned b = 0;
  while ((1ull << b) < v) ++b;
  return (1ull << b) == v ? b : ~0u;
}
}  // namespace

// ---- address map --------------------------------------------------------------

AddressMap::AddressMap(const std::string& layout, const Org& org, unsigned burst_bytes, bool xor_hash)
    : org_(org), xor_(xor_hash) {
  std::map<char, unsigned> need = {{'O', log2_exact(burst_bytes)},
                                   {'C', log2_exact(org.row_bytes / burst_bytes)},
                                   {'G', log2_exact(org.bank_groups)},
                                   {'B', log2_exact(org.banks)},
                                   {'P', log2_exact(org.pseudo_channels)},
                                   {'H', log2_exact(org.channels)},
                                   {'S', log2_exact(org.stacks)},
                                   {'D', log2_exact(org.stack_ids)},
                                   {'R', log2_exact(org.rows)}};
  for (const auto& [k, v] : need)
    if (v == ~0u) throw std::invalid_argument(fmt::format("the organisation's {} count is not a power of two", k));
  std::map<char, unsigned> got;
  std::istringstream in(layout);
  for (std::string tok; in >> tok;) {
    if (tok.size() < 2 || !need.count(tok[0]))
      throw std::invalid_argument("\"" + tok + "\" is not a field (O, C, G, B, D, P, H, S, R followed by a bit count)");
    unsigned bits = 0;
    try {
      bits = static_cast<unsigned>(std::stoul(tok.substr(1)));
    } catch (const std::exception&) {
      throw std::invalid_argument("\"" + tok + "\" has no bit count");
    }
    fields_.push_back({tok[0], bits, slot(tok[0])});
    got[tok[0]] += bits;
  }
  if (fields_.empty() || fields_[0].kind != 'O') throw std::invalid_argument("must start with the burst offset O");
  for (const auto& [k, v] : need)
    if (got[k] != v)
      throw std::invalid_argument(fmt::format("{} needs {} bits for this organisation, the layout gives {}", k, v, got[k]));
  capacity_ = 1;
  for (const Field& f : fields_) capacity_ <<= f.bits;
  // Where each field's bits come from in the address and go to in its value.
  unsigned from = 0, filled[kKinds] = {};
  for (Field& f : fields_) {
    f.from = from;
    f.to = filled[f.slot];
    f.mask = f.bits >= 64 ? ~0ull : (1ull << f.bits) - 1;
    from += f.bits;
    filled[f.slot] += f.bits;
  }
}

Location AddressMap::decode(std::uint64_t addr) const {
  std::uint64_t v[kKinds] = {};
  for (const Field& f : fields_) v[f.slot] |= ((addr >> f.from) & f.mask) << f.to;
  constexpr unsigned R = slot('R'), C = slot('C'), G = slot('G'), B = slot('B'), D = slot('D'), S = slot('S'), H = slot('H'),
                     P = slot('P');
  Location l;
  l.row = v[R];
  l.col = v[C];
  l.bg = static_cast<unsigned>(v[G]);
  l.bank = static_cast<unsigned>(v[B]);
  l.sid = static_cast<unsigned>(v[D]);
  if (xor_) {
    l.bg ^= static_cast<unsigned>(l.row & (org_.bank_groups - 1));
    l.bank ^= static_cast<unsigned>((l.row / org_.bank_groups) & (org_.banks - 1));
  }
  l.pc = static_cast<unsigned>((v[S] * org_.channels + v[H]) * org_.pseudo_channels + v[P]);
  return l;
}

// ---- configuration ---------------------------------------------------------------

void Hbm::Config::visit(Params& p) {
  p("timing", timing, "timing file (relative to the platform file)");
  p("stacks", org.stacks, "stacks");
  p("channels", org.channels, "channels per stack");
  p("pseudo_channels", org.pseudo_channels, "pseudo-channels per channel");
  p("bank_groups", org.bank_groups, "bank groups per pseudo-channel");
  p("stack_ids", org.stack_ids, "stack IDs (dies) a pseudo-channel's banks are spread over, each with its bank groups (address field D)");
  p("banks", org.banks, "banks per bank group");
  p.size("row_bytes", org.row_bytes, "bytes per row");
  p("rows", org.rows, "rows per bank");
  p("address_map", address_map, "address bits from the least significant: O C G B P H S R fields");
  p("xor_hash", xor_hash, "XOR bank and bank-group bits with the lowest row bits");
  p("mode", mode, "detailed (command level) or fast (latency and bandwidth)");
  p("fast_bank_wait", fast_bank_wait, "fast mode: share of a busy bank's wait that delays a burst (calibrated against detailed)");
  p("read_queue", ctrl.read_queue, "read queue depth per pseudo-channel");
  p("write_queue", ctrl.write_queue, "write queue depth per pseudo-channel");
  p("scheduler", ctrl.scheduler, "frfcfs or fcfs");
  p("page_policy", ctrl.page_policy, "open, closed or adaptive");
  p("write_high", ctrl.write_high, "writes queued that start a write drain");
  p("write_low", ctrl.write_low, "writes queued that end a write drain");
  p("refresh", ctrl.refresh, "all_bank, per_bank or off");
  p("refresh_stagger", ctrl.refresh_stagger,
    "none (the stack's pseudo-channels refresh at once) or stack (in turn, spread over the interval in bit-reversed order)");
  p("refresh_postpone", ctrl.refresh_postpone, "refreshes that may be postponed while requests wait");
  p("frontend", ctrl.frontend, "controller overhead from arrival to the queue, in cycles");
  p("command_bus", ctrl.command_bus, "shared (a row and a column command bus per channel, as JEDEC) or per_pc (a command a cycle per pseudo-channel)");
  p("act_cycles", ctrl.act_cycles, "cycles an ACT holds its command bus (HBM2: 2)");
  p("queues", ctrl.queues, "split (a read and a write queue, writes drained between the watermarks) or unified (one FR-FCFS queue)");
  p("write_response", ctrl.write_response, "posted (a write is answered once its queue takes it) or on_write (once its data is in the DRAM)");
  p("interface_limit", ctrl.interface_limit, "each pseudo-channel's controller takes one request and gives one response a cycle");
  p("read_inflight", read_inflight, "read transactions the stack holds at once (0: no limit); more wait to be accepted");
  p("write_inflight", write_inflight, "write transactions the stack holds at once (0: no limit)");
  p("check", ctrl.check, "check every command against every timing constraint");
  p("ecc", ecc, "SECDED: correct single-bit errors, report double-bit errors");
  p("ecc_single_rate", ecc_single_rate, "probability of a single-bit error per 64-bit word read");
  p("ecc_double_rate", ecc_double_rate, "probability of a double-bit error per 64-bit word read");
  p("seed", seed, "seed of the error injection");
  p.size("page_size", page_size, "allocation granule of the backing store");
  size = p.instance_size();
  // Derived configuration, as every IP derives it: here, in visit().
  try {
    t = Timing::load(p.resolve(timing));
  } catch (const ConfigError& e) {
    p.fail("timing", e.what());
  }
}

void Hbm::Config::validate(const Params& p) const {
  if (mode != "detailed" && mode != "fast") p.fail("mode", "must be detailed or fast");
  if (fast_bank_wait < 0 || fast_bank_wait > 1) p.fail("fast_bank_wait", "must be between 0 and 1");
  if (ctrl.scheduler != "frfcfs" && ctrl.scheduler != "fcfs") p.fail("scheduler", "must be frfcfs or fcfs");
  if (ctrl.page_policy != "open" && ctrl.page_policy != "closed" && ctrl.page_policy != "adaptive")
    p.fail("page_policy", "must be open, closed or adaptive");
  if (ctrl.refresh != "all_bank" && ctrl.refresh != "per_bank" && ctrl.refresh != "off")
    p.fail("refresh", "must be all_bank, per_bank or off");
  if (ctrl.refresh_stagger != "stack" && ctrl.refresh_stagger != "none") p.fail("refresh_stagger", "must be none or stack");
  if (ctrl.read_queue == 0 || ctrl.write_queue == 0) p.fail("read_queue", "queues need room for one request");
  if (ctrl.command_bus != "shared" && ctrl.command_bus != "per_pc") p.fail("command_bus", "must be shared or per_pc");
  if (ctrl.queues != "split" && ctrl.queues != "unified") p.fail("queues", "must be split or unified");
  if (ctrl.write_response != "posted" && ctrl.write_response != "on_write")
    p.fail("write_response", "must be posted or on_write");
  if (mode == "fast" && ctrl.write_response != "posted")
    p.fail("write_response", "fast mode answers writes when the controller takes them (posted); on_write needs mode detailed");
  if (ctrl.act_cycles == 0 || ctrl.act_cycles > 4) p.fail("act_cycles", "must be 1 to 4");
  if (ctrl.write_low >= ctrl.write_high || ctrl.write_high > ctrl.write_queue)
    p.fail("write_high", "needs write_low < write_high <= write_queue");
  if (ecc_single_rate < 0 || ecc_single_rate > 1 || ecc_double_rate < 0 || ecc_double_rate > 1)
    p.fail("ecc_single_rate", "rates are probabilities between 0 and 1");
  AddressMap m;
  try {
    m = AddressMap(address_map, org, t.burst_bytes(), xor_hash);
  } catch (const std::invalid_argument& e) {
    p.fail("address_map", e.what());
  }
  if (page_size < 64 || page_size > (1ull << 30) || (page_size & (page_size - 1)))
    p.fail("page_size", "must be a power of two from 64 bytes to 1GiB");
  if (size != m.capacity())
    p.fail("size", fmt::format("the organisation holds {} bytes ({}), the instance says {}", m.capacity(),
                               format_size(m.capacity()), size));
}

// ---- CSRs ------------------------------------------------------------------------

class Hbm::Regs : public MmioTarget {
 public:
  Regs(const sc_core::sc_module_name& n, Hbm& s) : MmioTarget(n, R::kBlock), stack_(s) {
    const Org& o = s.config_.org;
    namespace F = R::CONFIG_f;
    regs_.set(R::CONFIG, o.channels << F::CHANNELS_SHIFT | o.pseudo_channels << F::PCS_SHIFT |
                             o.banks_per_pc() << F::BANKS_SHIFT | o.stacks << F::STACKS_SHIFT |
                             (s.config_.mode == "fast" ? F::FAST_MASK : 0));
    regs_.on_read(R::READ_BYTES, [this](unsigned, bool) { return stack_.bytes_read_; });
    regs_.on_read(R::WRITE_BYTES, [this](unsigned, bool) { return stack_.bytes_written_; });
    regs_.on_read(R::ROW_HITS, [this](unsigned, bool) { return stack_.totals().hits; });
    regs_.on_read(R::ROW_MISSES, [this](unsigned, bool) { return stack_.totals().misses; });
    regs_.on_read(R::ROW_CONFLICTS, [this](unsigned, bool) { return stack_.totals().conflicts; });
    regs_.on_read(R::REFRESHES, [this](unsigned, bool) { return stack_.totals().refreshes; });
    regs_.on_read(R::ECC_CORRECTED, [this](unsigned, bool) { return stack_.ecc_corrected_; });
    regs_.on_read(R::ECC_UNCORRECTED, [this](unsigned, bool) { return stack_.ecc_uncorrected_; });
    for (unsigned r : {R::ERR_STATUS, R::IRQ_ENABLE})
      regs_.on_write(r, [this, r](RegisterBank::Write& w) {
        regs_.set(r, w.next);
        update_irq();
        return true;
      });
    regs_.on_write(R::INJECT, [this](RegisterBank::Write& w) {
      if (w.data != 1 && w.data != 2) {
        log::guest_error(path(), "hbm/inject", "INJECT takes 1 or 2 (bits to flip), not {}", w.data);
        return false;
      }
      stack_.inject(regs_.get(R::INJECT_ADDR), static_cast<unsigned>(w.data));
      return true;
    });
  }
  void log_error(std::uint64_t addr, bool uncorrected) {
    std::uint64_t st = regs_.get(R::ERR_STATUS);
    if (uncorrected && !(st & R::ERR_STATUS_f::UNCORRECTED_MASK)) {
      regs_.set(R::ERR_ADDR, addr);
      st |= R::ERR_STATUS_f::UNCORRECTED_MASK;
    }
    if (!uncorrected) st |= R::ERR_STATUS_f::CORRECTED_MASK;
    regs_.set(R::ERR_STATUS, st);
    update_irq();
  }
  void update_irq() {
    stack_.irq_out.write((regs_.get(R::IRQ_ENABLE) & R::IRQ_ENABLE_f::UNCORRECTED_MASK) &&
                         (regs_.get(R::ERR_STATUS) & R::ERR_STATUS_f::UNCORRECTED_MASK));
  }

 private:
  Hbm& stack_;
};

// ---- the stack ----------------------------------------------------------------------

Hbm::Hbm(const sc_core::sc_module_name& n, const Config& c)
    : Ip(n), mem_target("mem_target"), config_(c), fast_mode_(c.mode == "fast"), refresh_off_(c.ctrl.refresh == "off"),
      per_bank_refresh_(c.ctrl.refresh == "per_bank"), map_(c.address_map, c.org, c.t.burst_bytes(), c.xor_hash),
      tck_(std::max<std::uint64_t>(1, sc_core::sc_time(c.t.tck_ns, sc_core::SC_NS).value())), store_(c.page_size),
      rng_(c.seed) {
  mem_target.register_b_transport(this, &Hbm::b_transport);
  mem_target.register_transport_dbg(this, &Hbm::transport_dbg);
  expose_target("mem_target", mem_target, c.size);
  regs_ = std::make_unique<Regs>("regs", *this);
  expose_target("csr_target", regs_->csr_target, R::kBlock.window);
  expose_irq_out("irq_out", irq_out);

  const unsigned pcs = c.org.pcs();
  fast_.resize(pcs);
  std::shared_ptr<CommandBus> bus;  // a channel's pseudo-channels are consecutive
  for (unsigned pc = 0; pc < pcs; ++pc) {
    channels_.push_back(std::make_unique<PseudoChannel>(c.t, c.org, c.ctrl, [](Request& r) {
      auto* txn = static_cast<Txn*>(r.owner);
      if (--txn->remaining == 0) txn->done.notify(sc_core::SC_ZERO_TIME);
    }));
    channels_.back()->set_meter(meter_, clk_, tck_);
    channels_.back()->set_refresh_turn(pc, pcs);
    if (c.ctrl.command_bus == "shared") {
      if (pc % c.org.pseudo_channels == 0) bus = std::make_shared<CommandBus>();
      channels_.back()->set_command_bus(bus);
    }
    channels_.back()->set_track(fmt::format("{}.pc{}", path(), pc));
    wake_.push_back(std::make_unique<sc_core::sc_event>());
    sc_core::sc_spawn_options opt;
    opt.spawn_method();
    opt.set_sensitivity(wake_.back().get());
    opt.dont_initialize();
    sc_core::sc_spawn([this, pc] { kick(pc); }, sc_core::sc_gen_unique_name("pc"), &opt);
    FastChannel& f = fast_[pc];
    f.bank_ready.assign(c.org.banks_per_pc(), 0);
    f.pre_ready.assign(c.org.banks_per_pc(), 0);
    f.opened.assign(c.org.banks_per_pc(), 0);
    f.open_row.assign(c.org.banks_per_pc(), -1);
    f.window.resize(c.ctrl.read_queue + 1);
    f.refresh_due = Timing::first_refresh(per_bank_refresh_ ? c.t.refisb(c.org.banks_per_pc()) : c.t.tREFI, pc, pcs,
                                          c.ctrl.refresh_stagger == "stack");
  }
}

Hbm::~Hbm() = default;

tlm::tlm_target_socket<>& Hbm::csr_target() { return regs_->csr_target; }

unsigned Hbm::bus_group(unsigned pc) const {
  // In a system's windowed run the pseudo-channels that share a channel's
  // command buses step together in index order, so which takes a bus cycle
  // does not depend on which one's process SystemC ran first at an edge.
  return sim::windowed() && shared_bus_ ? config_.org.pseudo_channels : 1;
}

void Hbm::advance(unsigned pc, std::uint64_t cycle) {
  const unsigned group = bus_group(pc), first = pc - pc % group;
  for (unsigned q = first; q < first + group; ++q) channels_[q]->advance(cycle);
}

void Hbm::kick(unsigned pc) {
  advance(pc, cycle_of(sc_core::sc_time_stamp()));
  const unsigned group = bus_group(pc), first = pc - pc % group;
  for (unsigned q = first; q < first + group; ++q) {
    const std::uint64_t next = channels_[q]->next_event();
    if (next == ~0ull) continue;
    const sc_core::sc_time at = clk_->edge(next, tck_);
    wake_[q]->notify(at > sc_core::sc_time_stamp() ? at - sc_core::sc_time_stamp() : sc_core::SC_ZERO_TIME);
  }
}

bool Hbm::check_ecc(std::uint64_t addr, unsigned len) {
  if (!config_.ecc) return true;
  if (injected_.empty() && config_.ecc_single_rate <= 0 && config_.ecc_double_rate <= 0) return true;  // nothing to find
  bool ok = true;
  for (std::uint64_t a = addr & ~std::uint64_t(kEccWord - 1); a < addr + len; a += kEccWord) {
    unsigned bits = 0;
    if (auto it = injected_.find(a); it != injected_.end()) bits = it->second;
    if (!bits && config_.ecc_double_rate > 0 && std::uniform_real_distribution<double>(0, 1)(rng_) < config_.ecc_double_rate)
      bits = 2;
    if (!bits && config_.ecc_single_rate > 0 && std::uniform_real_distribution<double>(0, 1)(rng_) < config_.ecc_single_rate)
      bits = 1;
    if (bits == 1) {
      ++ecc_corrected_;  // corrected on the fly: the data returned is right
      regs_->log_error(a, false);
    } else if (bits >= 2) {
      ++ecc_uncorrected_;
      regs_->log_error(a, true);
      log::guest_error(path(), "hbm/ecc", "uncorrectable ECC error at offset {:#x}", a);
      ok = false;
    }
  }
  return ok;
}

void Hbm::b_transport(tlm::tlm_generic_payload& trans, sc_core::sc_time& delay) {
  const std::uint64_t addr = trans.get_address();
  const unsigned len = trans.get_data_length();
  if (trans.get_byte_enable_ptr()) {
    log::guest_error(path(), "hbm/be", "byte enables are not supported (no write data mask)");
    trans.set_response_status(tlm::TLM_BYTE_ENABLE_ERROR_RESPONSE);
    return;
  }
  if (trans.get_streaming_width() < len) {
    trans.set_response_status(tlm::TLM_BURST_ERROR_RESPONSE);
    return;
  }
  if (addr >= config_.size || len > config_.size - addr || len == 0) {
    log::guest_error(path(), "hbm/range", "access of {} bytes at offset {:#x} leaves the stack", len, addr);
    trans.set_response_status(tlm::TLM_ADDRESS_ERROR_RESPONSE);
    return;
  }
  if (!trans.is_read() && !trans.is_write()) {
    trans.set_response_status(tlm::TLM_OK_RESPONSE);
    return;
  }
  // Data first (byte-exact, in the sparse store), then time.
  move_data(trans);
  bool ok = true;
  const sc_core::sc_time now = sc_core::sc_time_stamp(), arrival = now + delay;
  if (trans.is_read()) {
    ok = check_ecc(addr, len);
    bytes_read_ += len;
    meter_->charge(energy::read_byte, len, arrival);
  } else {
    bytes_written_ += len;
    meter_->charge(energy::write_byte, len, arrival);
    // Writing a whole 64-bit word writes its check bits anew.
    if (!injected_.empty())
      for (std::uint64_t a = (addr + kEccWord - 1) & ~std::uint64_t(kEccWord - 1); a + kEccWord <= addr + len;
           a += kEccWord)
        injected_.erase(a);
  }
  if (!seen_) first_ = arrival, seen_ = true;
  if (fast_mode_) {
    fast(trans, now, delay);
    last_ = std::max(last_, now + delay);
  } else {
    detailed(trans, delay);
    last_ = std::max(last_, sc_core::sc_time_stamp() + delay);
  }
  trans.set_response_status(ok ? tlm::TLM_OK_RESPONSE : tlm::TLM_GENERIC_ERROR_RESPONSE);
}

void Hbm::detailed(tlm::tlm_generic_payload& trans, sc_core::sc_time& delay) {
  // Arrive: requests enter the controllers at the initiator's local time,
  // once the stack has room for another transaction of the kind.
  sc_core::wait(delay);
  delay = sc_core::SC_ZERO_TIME;
  const bool write = trans.is_write();
  const unsigned limit = write ? config_.write_inflight : config_.read_inflight;
  unsigned& held = write ? writes_held_ : reads_held_;
  if (limit && held >= limit) {
    // Accepted in arrival order: the transaction that leaves hands its slot
    // to the oldest one waiting (held stays as it is).
    sc_core::sc_event slot;
    waiting_[write].push_back(&slot);
    sc_core::wait(slot);
  } else {
    ++held;
  }
  peak_held_[write] = std::max(peak_held_[write], held);
  const std::uint64_t now = cycle_of(sc_core::sc_time_stamp());
  const unsigned bb = config_.t.burst_bytes();
  const std::uint64_t addr = trans.get_address(), end = addr + trans.get_data_length();
  Txn txn;
  std::vector<unsigned> touched;
  for (std::uint64_t a = addr & ~std::uint64_t(bb - 1); a < end; a += bb) {
    Request r;
    r.write = trans.is_write();
    r.loc = map_.decode(a);
    r.arrival = now;
    r.id = next_id_++;
    r.owner = &txn;
    ++txn.remaining;
    advance(r.loc.pc, now);
    channels_[r.loc.pc]->enqueue(r);
    if (std::find(touched.begin(), touched.end(), r.loc.pc) == touched.end()) touched.push_back(r.loc.pc);
  }
  for (unsigned pc : touched) kick(pc);
  while (txn.remaining) sc_core::wait(txn.done);

  if (waiting_[write].empty()) {
    --held;
  } else {
    waiting_[write].front()->notify(sc_core::SC_ZERO_TIME);
    waiting_[write].pop_front();
  }
}

void Hbm::fast(tlm::tlm_generic_payload& trans, const sc_core::sc_time& now, sc_core::sc_time& delay) {
  const Timing& t = config_.t;
  const bool write = trans.is_write();
  std::uint64_t arrival = cycle_of(now + delay);
  // The stack holds at most `limit` transactions of the kind: this one is
  // accepted once the first of the last `limit` is done, as the detailed
  // mode makes it wait.
  const unsigned limit = write ? config_.write_inflight : config_.read_inflight;
  auto& held = fast_held_[write];
  if (limit && held.size() >= limit) {
    arrival = std::max(arrival, held.top());
    held.pop();
  }
  const unsigned bb = t.burst_bytes();
  const std::uint64_t addr = trans.get_address(), end = addr + trans.get_data_length();
  const std::uint64_t start = arrival + config_.ctrl.frontend;
  std::uint64_t done = start;
  for (std::uint64_t a = addr & ~std::uint64_t(bb - 1); a < end; a += bb) {
    const Location l = map_.decode(a);
    FastChannel& f = fast_[l.pc];
    fast_refresh(f, start);
    fast_idle_writes(f, start);
    if (write) {
      // Posted: the write is answered once held; the controller writes it
      // when the reads leave the bus idle or the held writes reach the
      // high watermark (then down to the low one), as the detailed one does.
      // The write queue holds write_queue bursts, held or booked and not
      // yet written: when it is full the write enters (and is answered)
      // once enough booked ones have issued, and the requests behind it
      // wait for it (the controller takes its requests in order).
      std::uint64_t enter = std::max(start, f.in_order);
      auto& q = f.booked_writes;
      auto issued = [&] { q.erase(std::remove_if(q.begin(), q.end(), [&](std::uint64_t c) { return c <= enter; }), q.end()); };
      issued();
      const std::size_t n = f.writes.size() + q.size(), depth = config_.ctrl.write_queue;
      if (n >= depth) {
        std::nth_element(q.begin(), q.begin() + static_cast<std::ptrdiff_t>(n - depth), q.end());
        enter = std::max(enter, q[n - depth]);
        issued();
        f.in_order = enter;
      }
      done = std::max(done, enter);
      f.writes.push_back({l, enter});
      if (f.writes.size() >= config_.ctrl.write_high) fast_drain(f, enter, config_.ctrl.write_low);
      continue;
    }
    // The read queue holds read_queue bursts: one enters when the
    // earliest of the last read_queue leaves (and the requests behind it
    // wait for it).
    const std::uint64_t slot = f.reads_booked < config_.ctrl.read_queue ? 0 : f.queue_free();
    if (slot > start) f.in_order = std::max(f.in_order, slot);
    const std::uint64_t enter = std::max(start, f.in_order);
    const std::uint64_t cas = fast_burst(f, l, false, enter);
    f.queue(cas, config_.ctrl.read_queue);
    done = std::max(done, cas + t.tCL + t.tDQSCK + t.tBURST);
  }
  if (limit) held.push(done);
  delay = clk_->edge(done, tck_) - now;
}

void Hbm::fast_refresh(FastChannel& f, std::uint64_t cycle) {
  // All-bank: every tREFI the channel closes its banks and stops for tRFCab;
  // what was booked after the refresh falls due moves behind it. Per-bank:
  // every tREFISB the next bank in turn closes and stops for tRFCpb while
  // the others carry on.
  const Timing& t = config_.t;
  if (refresh_off_) return;
  const unsigned banks = static_cast<unsigned>(f.bank_ready.size());
  const std::uint64_t period = per_bank_refresh_ ? t.refisb(banks) : t.tREFI;
  const unsigned tRFC = per_bank_refresh_ ? t.tRFCpb : t.tRFCab;
  // A long idle stretch: the refreshes that fell due long before `cycle`
  // leave nothing behind them but the banks they closed; they are counted
  // in bulk.
  if (f.refresh_due + 4 * period < cycle) {
    const std::uint64_t skip = (cycle - f.refresh_due) / period - 2;
    meter_->charge(energy::refresh, static_cast<double>(skip), clk_->edge(f.refresh_due, tck_),
                   clk_->edge(f.refresh_due + (skip - 1) * period + tRFC, tck_));
    if (!per_bank_refresh_ || skip >= banks) std::fill(f.open_row.begin(), f.open_row.end(), -1);
    else
      for (std::uint64_t k = 0; k < skip; ++k) f.open_row[(f.refresh_bank + k) % banks] = -1;
    f.refreshes += skip;
    f.refresh_bank = static_cast<unsigned>((f.refresh_bank + skip) % banks);
    f.refresh_due += skip * period;
  }
  while (f.refresh_due <= cycle) {
    const std::uint64_t due = f.refresh_due;
    if (per_bank_refresh_) {
      const unsigned b = f.refresh_bank;
      // An open row is precharged first.
      const std::uint64_t from = f.open_row[b] >= 0 ? std::max(due, f.pre_ready[b]) + t.tRP : std::max(due, f.bank_ready[b]);
      f.bank_ready[b] = std::max(f.bank_ready[b], from + tRFC);
      f.open_row[b] = -1;
      f.refresh_bank = (b + 1) % banks;
    } else {
      for (std::uint64_t* k : {&f.bus_free, &f.act_bucket, &f.cmd_bucket}) *k = std::max(*k, due) + tRFC;
      std::fill(f.open_row.begin(), f.open_row.end(), -1);
      for (auto& r : f.bank_ready) r = std::max(r, f.act_bucket);
    }
    f.refresh_due += period;
    ++f.refreshes;
    meter_->charge(energy::refresh, 1, clk_->edge(due + tRFC, tck_));
  }
}

void Hbm::fast_idle_writes(FastChannel& f, std::uint64_t cycle) {
  // The detailed controller writes when no read waits: here, while the
  // data bus and the last read are done before `cycle`.
  f.now = cycle;
  while (!f.writes.empty() && std::max(f.bus_free, f.last_read + config_.t.tCL) <= cycle) fast_write_one(f);
}

void Hbm::fast_drain(FastChannel& f, std::uint64_t cycle, std::size_t down_to) {
  // The reads booked past `cycle` are still queued there: the detailed
  // controller writes before them. Their bus time stays booked, so the
  // drained writes are booked after them; but the queue slots they hold
  // free as if written first (`ahead`: the reads' share of the bus).
  f.now = cycle;
  f.ahead = f.last_read >= cycle ? std::min(f.bus_free, f.last_read + config_.t.tCCD_S) - cycle : 0;
  while (f.writes.size() > down_to) fast_write_one(f);
  f.ahead = 0;
}

void Hbm::fast_write_one(FastChannel& f) {
  // While it writes the controller does nothing else, so each write is
  // chosen as the detailed one chooses it: FR-FCFS over the held writes
  // (the one whose WR can go first, a row hit on a tie, then the oldest),
  // each bank waited for in full and the activations at the times they
  // issue.
  std::size_t pick = 0;
  FastPlan best;
  for (std::size_t i = 0; i < f.writes.size(); ++i) {
    const FastPlan p = fast_plan(f, f.writes[i].loc, true, std::max(f.writes[i].arrival, f.bus_free), true);
    if (i == 0 || p.cas < best.cas || (p.cas == best.cas && p.commands < best.commands)) best = p, pick = i;
  }
  const Location l = f.writes[pick].loc;
  f.writes.erase(f.writes.begin() + static_cast<std::ptrdiff_t>(pick));
  fast_commit(f, l, true, best, true);
}

std::uint64_t Hbm::fast_burst(FastChannel& f, const Location& l, bool write, std::uint64_t start) {
  return fast_commit(f, l, write, fast_plan(f, l, write, start, false), false);
}

Hbm::FastPlan Hbm::fast_plan(const FastChannel& f, const Location& l, bool write, std::uint64_t start,
                             bool in_drain) const {
  const Timing& t = config_.t;
  const unsigned b = l.flat_bank(config_.org);
  // Throughput: buckets for the data bus, the activation rate (tRRD_S,
  // tFAW) and the command bus (one command a cycle) advance by what each
  // burst uses, so a busy bank delays its own burst, not the ones behind.
  // Latency: the burst's own ACT/RD chain against its bank.
  FastPlan p;
  if (f.open_row[b] == static_cast<std::int64_t>(l.row)) {
    p.cas = std::max(start, f.opened[b] + (write ? t.tRCDWR : t.tRCDRD));  // the row may still be opening
  } else {
    // Outside a drain a busy bank (tRC, tRAS, a write's recovery) is
    // waited for only a fraction of the time: the detailed scheduler
    // serves other banks meanwhile. The fraction (fast_bank_wait) is
    // calibrated against the detailed mode. A drain while reads wait has
    // only the held writes to choose from: there the wait is whole. With
    // no read waiting the writes are served as the reads are.
    const double w = in_drain && f.last_read >= f.now ? 1.0 : config_.fast_bank_wait;
    auto wait_for = [&](std::uint64_t ready) {
      return start + static_cast<std::uint64_t>(w * static_cast<double>(std::max(start, ready) - start));
    };
    p.act = wait_for(f.bank_ready[b]);
    if (f.open_row[b] >= 0) {
      p.act = std::max(p.act, wait_for(f.pre_ready[b])) + t.tRP;
      p.commands = 3;
    } else {
      p.commands = 2;
    }
    p.act_slot = std::max(f.act_bucket, start);
    p.act = std::max(p.act, p.act_slot);
    p.cas = p.act + (write ? t.tRCDWR : t.tRCDRD);
  }
  p.cmd_slot = std::max(f.cmd_bucket, start);
  // Turnaround: a write waits tRTW after the last read, a read tCWL +
  // tBURST + tWTR after the last write (a floor for every column command
  // of the new direction), and each change of direction takes that gap,
  // less a burst's tCCD, from the data bus's capacity.
  p.turn = f.any && f.writing != write;
  std::uint64_t bus_free = f.bus_free, floor = f.floor;
  if (p.turn) {
    const std::uint64_t gap = write ? t.tRTW : t.tCWL + t.tBURST + t.tWTR_S;
    floor = (write ? f.last_read : f.last_write) + gap;
    bus_free += gap - std::min<std::uint64_t>(gap, t.tCCD_S);
  }
  p.bus_slot = std::max(bus_free, start);
  p.floor = floor;
  p.cas = std::max({p.cas, p.bus_slot, p.cmd_slot + p.commands - 1, floor});
  return p;
}

std::uint64_t Hbm::fast_commit(FastChannel& f, const Location& l, bool write, const FastPlan& p, bool in_drain) {
  const Timing& t = config_.t;
  const unsigned b = l.flat_bank(config_.org);
  if (p.commands == 1) {
    ++f.hits;
  } else {
    ++(p.commands == 3 ? f.conflicts : f.misses);
    // In a drain the activations are at the times they issue; elsewhere
    // the bucket moves by the slot the burst took.
    f.act_bucket = (in_drain ? p.act : p.act_slot) + std::max<std::uint64_t>(t.tRRD_S, (t.tFAW + 3) / 4);
    f.bank_ready[b] = p.act + t.tRC;
    f.pre_ready[b] = p.act + t.tRAS;
    f.open_row[b] = static_cast<std::int64_t>(l.row);
    f.opened[b] = p.act;
    meter_->charge(energy::activate, 1, clk_->edge(p.act, tck_));
  }
  f.cmd_bucket = p.cmd_slot + p.commands;
  f.bus_free = p.bus_slot + t.tCCD_S;
  f.floor = p.floor;
  // A write keeps its bank from precharging until its data is in.
  if (write) {
    f.pre_ready[b] = std::max(f.pre_ready[b], p.cas + t.tCWL + t.tBURST + t.tWR);
    f.bank_ready[b] = std::max(f.bank_ready[b], f.pre_ready[b] + t.tRP);
  }
  if (write) f.booked_writes.push_back(p.cas - std::min(f.ahead, p.cas));
  std::uint64_t& last = write ? f.last_write : f.last_read;
  last = std::max(last, p.cas);
  if (p.turn) ++f.turnarounds;
  f.writing = write;
  f.any = true;
  f.busy += t.tBURST;
  ++(write ? f.writes_done : f.reads);
  return p.cas;
}

void Hbm::move_data(tlm::tlm_generic_payload& trans) {
  if (trans.is_read()) store_.read(trans.get_address(), trans.get_data_ptr(), trans.get_data_length());
  else store_.write(trans.get_address(), trans.get_data_ptr(), trans.get_data_length());
}

unsigned Hbm::transport_dbg(tlm::tlm_generic_payload& trans) {
  const std::uint64_t addr = trans.get_address();
  if (addr >= config_.size || !(trans.is_read() || trans.is_write())) return 0;
  const unsigned len = static_cast<unsigned>(std::min<std::uint64_t>(trans.get_data_length(), config_.size - addr));
  const unsigned asked = trans.get_data_length();
  trans.set_data_length(len);
  move_data(trans);
  trans.set_data_length(asked);
  trans.set_response_status(tlm::TLM_OK_RESPONSE);
  return len;
}

Hbm::Totals Hbm::totals() const {
  Totals s;
  for (const auto& c : channels_) {
    const ChannelStats& x = c->stats();
    s.reads += x.reads;
    s.writes += x.writes;
    s.hits += x.row_hits;
    s.misses += x.row_misses;
    s.conflicts += x.row_conflicts;
    s.refreshes += x.refreshes;
    s.refresh_cycles += x.refresh_cycles;
    s.violations += x.violations;
    s.busy_cycles += x.busy_cycles;
    s.turnarounds += x.turnarounds;
  }
  for (const FastChannel& f : fast_) {
    s.reads += f.reads;
    s.writes += f.writes_done;
    s.hits += f.hits;
    s.misses += f.misses;
    s.conflicts += f.conflicts;
    s.refreshes += f.refreshes;
    s.refresh_cycles += f.refreshes * (per_bank_refresh_ ? config_.t.tRFCpb : config_.t.tRFCab);
    s.busy_cycles += f.busy;
    s.turnarounds += f.turnarounds;
  }
  return s;
}

double Hbm::peak_bytes_per_s() const { return config_.t.peak_bytes_per_s() * config_.org.pcs(); }

void Hbm::report_limits(nlohmann::ordered_json& out) const { out["bytes_per_s"] = peak_bytes_per_s(); }

void Hbm::report_stats(nlohmann::ordered_json& out) const {
  const Totals s = totals();
  const double window = (last_ - first_).to_seconds();
  const double peak = peak_bytes_per_s();
  out["mode"] = config_.mode;
  out["bytes_read"] = bytes_read_;
  out["bytes_written"] = bytes_written_;
  out["bursts_read"] = s.reads;
  out["bursts_written"] = s.writes;
  out["bandwidth_GBps"] = window > 0 ? (bytes_read_ + bytes_written_) / window / 1e9 : 0.0;
  out["peak_GBps"] = peak / 1e9;
  out["efficiency"] = window > 0 ? (bytes_read_ + bytes_written_) / window / peak : 0.0;
  const double bursts = static_cast<double>(s.hits + s.misses + s.conflicts);
  out["row_hit_rate"] = bursts ? s.hits / bursts : 0.0;
  out["row_miss_rate"] = bursts ? s.misses / bursts : 0.0;
  out["row_conflict_rate"] = bursts ? s.conflicts / bursts : 0.0;
  out["turnarounds"] = s.turnarounds;
  out["refreshes"] = s.refreshes;
  out["refresh_time_ns"] = s.refresh_cycles * config_.t.tck_ns;
  out["timing_violations"] = s.violations;
  out["ecc_corrected"] = ecc_corrected_;
  out["ecc_uncorrected"] = ecc_uncorrected_;
  out["peak_reads_in_flight"] = peak_held_[0];
  out["peak_writes_in_flight"] = peak_held_[1];
  // Latency percentiles over all pseudo-channels (detailed mode).
  std::vector<std::uint64_t> hist;
  std::uint64_t n = 0, max = 0;
  double area = 0;
  std::uint64_t span = 0;
  std::vector<std::uint64_t> per_bank(config_.org.banks_per_pc(), 0);
  for (const auto& c : channels_) {
    const ChannelStats& x = c->stats();
    if (hist.empty()) hist.assign(x.latency_histogram.size(), 0);
    // Each request served counts one latency: a channel that served none
    // (every one in fast mode) has an empty histogram to skip.
    if (x.reads + x.writes)
      for (std::size_t i = 0; i < hist.size(); ++i) hist[i] += x.latency_histogram[i], n += x.latency_histogram[i];
    max = std::max(max, x.latency_max);
    area += x.queue_area;
    span = std::max(span, x.last_cycle);
    for (std::size_t b = 0; b < per_bank.size(); ++b) per_bank[b] += x.activations[b];
  }
  auto percentile = [&](double p) {
    std::uint64_t want = static_cast<std::uint64_t>(std::ceil(p * n)), seen = 0;
    for (std::size_t i = 0; i < hist.size(); ++i)
      if ((seen += hist[i]) >= want && want) return i * config_.t.tck_ns;
    return max * config_.t.tck_ns;
  };
  if (n) {
    out["latency_ns"] = {{"p50", percentile(0.5)}, {"p90", percentile(0.9)}, {"p99", percentile(0.99)},
                         {"max", max * config_.t.tck_ns}};
    out["queue_occupancy_avg"] = span ? area / static_cast<double>(span) / channels_.size() : 0.0;
    out["activations_per_bank"] = per_bank;  // summed over pseudo-channels
  }
}

TESSERA_REGISTER_IP("hbm", Hbm, "HBM3 stacks: command-level controllers per pseudo-channel, ECC, statistics");

}  // namespace tessera::hbm
