#include "c2c/c2c.hpp"

#include "rtl/link_rtl.hpp"

#include <fmt/format.h>

#include <cstring>

#include "c2c_regs.hpp"
#include "common/log.hpp"
#include "common/registry.hpp"

namespace tessera::c2c {

const power::Event kLinkBit = power::declare_event("link_bit", "links", 3, "a bit on a SerDes link's wire (FLIT overhead and replays included)");

namespace R = regs::c2c;

namespace {

struct Fault {
  unsigned port = 0;
  enum Kind { lane, down, flit } kind = lane;
  unsigned lane_index = 0;
  std::uint64_t flit_number = 0;
  sc_core::sc_time at;
};

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// "0:lane3@10us, 1:down@2us, 0:flit17"; throws UnitError with what is wrong.
std::vector<Fault> parse_faults(const std::string& text) {
  std::vector<Fault> out;
  std::size_t p = 0;
  while (p < text.size()) {
    const auto comma = text.find(',', p);
    const std::string item = trim(text.substr(p, comma == std::string::npos ? std::string::npos : comma - p));
    p = comma == std::string::npos ? text.size() : comma + 1;
    if (item.empty()) continue;
    const auto colon = item.find(':');
    if (colon == std::string::npos) throw UnitError("\"" + item + "\": expected PORT:lane<N>@TIME, PORT:down@TIME or PORT:flit<N>");
    Fault f;
    f.port = static_cast<unsigned>(parse_uint(item.substr(0, colon)));
    const std::string what = item.substr(colon + 1);
    const auto at = what.find('@');
    if (what.rfind("flit", 0) == 0) {
      f.kind = Fault::flit;
      f.flit_number = parse_uint(what.substr(4));
    } else if (what.rfind("lane", 0) == 0 && at != std::string::npos) {
      f.kind = Fault::lane;
      f.lane_index = static_cast<unsigned>(parse_uint(what.substr(4, at - 4)));
      f.at = parse_time(what.substr(at + 1));
    } else if (what.rfind("down", 0) == 0 && at == 4) {
      f.kind = Fault::down;
      f.at = parse_time(what.substr(at + 1));
    } else {
      throw UnitError("\"" + item + "\": expected PORT:lane<N>@TIME, PORT:down@TIME or PORT:flit<N>");
    }
    out.push_back(f);
  }
  return out;
}

}  // namespace

void C2c::Config::visit(Params& p) {
  rtl = p.impl() == "rtl";
  if (p.instance_base()) global_base = *p.instance_base();
  if (p.instance_size()) {  // kMaxChips shares of a power of two each
    const std::uint64_t share = p.instance_size() / kMaxChips;
    chip_shift = 0;
    while (chip_shift < 63 && (1ull << chip_shift) < share) ++chip_shift;
  }
  p("ports", ports, "SerDes link ports (at most 8)");
  p("lanes", link.lanes, "lanes per link, each direction");
  p("lane_gbps", link.lane_gbps, "raw signalling rate per lane, Gb/s (112: a 112G PAM4 SerDes)");
  p("encoding_overhead", link.encoding_overhead,
    "fraction of the raw rate taken by line coding and FEC (0.0551: RS(544,514) FEC, 1 - 514/544)");
  p("flit_bytes", link.flit_bytes, "FLIT size on the wire, header and CRC-32 included");
  p("flit_header", link.flit_header, "FLIT header bytes (type, flags, sequence, length)");
  p("message_header", link.message_header, "bytes of a request or response header (command, address, length, tag)");
  p("latency", link.latency, "one way: PHY, FEC and wire");
  p("retrain", link.retrain, "link training after a fault");
  p("credits", link.credits, "FLIT buffers at each receiver");
  p("replay_buffer", link.replay_buffer, "FLITs each sender keeps until they are acknowledged");
  p("ber", link.ber, "random bit error rate on the wire");
  p("seed", link.seed, "seed of the random bit errors");
  p("switch_latency", switch_latency, "through the fabric's switch, each time a message enters it (from the NoC or a link)");
  p("faults", faults, "scheduled faults: PORT:lane<N>@TIME, PORT:down@TIME, PORT:flit<N> (comma-separated)");
  p.size("comm_staging", comm.staging, "communication engine: staging buffer (an SRAM in the fabric)");
  p("comm_chunk", comm.chunk, "communication engine: bytes per transfer");
  p("comm_outstanding", comm.outstanding, "communication engine: transfers in flight");
  p("notify_latency", comm.notify_latency, "push: from a notification's arrival to the waiting engine seeing it");
  p("poll_interval", comm.poll_interval, "pull: between polls of a producer that is not ready");
  p("comm_reduce_gbps", comm.reduce_gbps, "communication engine: reduction throughput, GB/s");
  p("comm_staging_gbps", comm.staging_gbps, "communication engine: staging buffer bandwidth, GB/s");
  p("comm_queue", comm.queue, "communication engine: collectives that may wait behind the running one");
}

void C2c::Config::validate(const Params& p) const {
  if (p.instance_size() && p.instance_size() != std::uint64_t(kMaxChips) << chip_shift)
    p.fail("size", fmt::format("the global window holds {} chips of a power of two bytes each: {:#x} is not such a size",
                               kMaxChips, p.instance_size()));
  if (global_base & ((1ull << chip_shift) - 1))
    p.fail("base", fmt::format("the global window must be aligned to a chip's share ({:#x})", 1ull << chip_shift));
  if (ports < 1 || ports > kMaxPorts) p.fail("ports", "must be between 1 and 8");
  if (rtl && (link.flit_bytes != 256 || link.flit_header != 8))
    p.fail("flit_bytes", "impl rtl: the link layer RTL frames 256-byte FLITs with an 8-byte header");
  if (rtl)
    for (const Fault& f : parse_faults(faults))
      if (f.kind != Fault::flit)
        p.fail("faults", "impl rtl: the link layer RTL takes corrupted FLITs (PORT:flitN), not failing lanes or links");
  if (const std::string e = link.check(); !e.empty()) p.fail("lanes", e);
  if (const std::string e = comm.check(); !e.empty()) p.fail("comm_staging", e);
  try {
    for (const Fault& f : parse_faults(faults)) {
      if (f.port >= ports) p.fail("faults", fmt::format("port {} does not exist ({} ports)", f.port, ports));
      if (f.kind == Fault::lane && f.lane_index >= link.lanes)
        p.fail("faults", fmt::format("lane {} does not exist ({} lanes)", f.lane_index, link.lanes));
    }
  } catch (const UnitError& e) {
    p.fail("faults", e.what());
  }
}

class C2c::Regs : public MmioTarget {
 public:
  Regs(const sc_core::sc_module_name& n, C2c& c) : MmioTarget(n, R::kBlock), c_(c) {
    for (unsigned r : {R::PORT_STATE, R::PORT_LANES, R::PORT_CTRL, R::PORT_INJECT, R::PORT_TX_FLITS, R::PORT_RX_FLITS,
                       R::PORT_TX_ATTEMPTS, R::PORT_REPLAYS, R::PORT_CRC_ERRORS, R::PORT_RETRAINS, R::PORT_TX_BYTES})
      regs_.limit_count(r, c.config_.ports);
    regs_.on_read(R::CHIP, [this](unsigned, bool) -> std::uint64_t {
      return c_.chip_ | (c_.chips_ << 8) | (c_.config_.ports << 16);
    });
    regs_.on_read(R::PORT_STATE, [this](unsigned i, bool) -> std::uint64_t {
      const Port& p = c_.ports_[i];
      if (!p.connected) return 0;
      const sc_core::sc_time t = now();
      return c_.port_state(i) | (p.state->width(t) << 8) | (p.peer_chip << 16) | (p.peer_port << 24) | (1u << 31);
    });
    regs_.on_read(R::PORT_LANES, [this](unsigned i, bool) -> std::uint64_t {
      const Port& p = c_.ports_[i];
      return p.connected ? p.state->lanes_ok(now()) : 0;
    });
    auto counter = [this](unsigned reg, auto get) {
      regs_.on_read(reg, [this, get](unsigned i, bool) -> std::uint64_t { return get(i); });
    };
    counter(R::PORT_TX_FLITS, [this](unsigned i) { return c_.tx_stats(i) ? c_.tx_stats(i)->flits : 0; });
    counter(R::PORT_RX_FLITS, [this](unsigned i) { return c_.rx_stats(i) ? c_.rx_stats(i)->flits : 0; });
    counter(R::PORT_TX_ATTEMPTS, [this](unsigned i) { return c_.tx_stats(i) ? c_.tx_stats(i)->attempts : 0; });
    counter(R::PORT_REPLAYS, [this](unsigned i) { return c_.tx_stats(i) ? c_.tx_stats(i)->replays : 0; });
    counter(R::PORT_CRC_ERRORS, [this](unsigned i) { return c_.rx_stats(i) ? c_.rx_stats(i)->crc_errors : 0; });
    counter(R::PORT_TX_BYTES, [this](unsigned i) { return c_.tx_stats(i) ? c_.tx_stats(i)->payload_bytes : 0; });
    counter(R::PORT_RETRAINS, [this](unsigned i) -> std::uint64_t {
      const LinkState* s = c_.link_state(i);
      if (!s) return 0;
      std::uint64_t n = 0;
      for (const auto& e : s->events()) n += e.start <= now();
      return n;
    });
    regs_.on_write(R::PORT_CTRL, [this](RegisterBank::Write& w) {
      if (!c_.ports_[w.index].connected) {
        log::guest_error(c_.path(), "c2c/unconnected", "PORT_CTRL[{}] written, but port {} has no link", w.index, w.index);
        return true;
      }
      if (w.data & R::PORT_CTRL_f::FAIL_LANE_MASK) {
        const unsigned lane = static_cast<unsigned>((w.data & R::PORT_CTRL_f::LANE_MASK) >> R::PORT_CTRL_f::LANE_SHIFT);
        if (lane >= c_.config_.link.lanes) {
          log::guest_error(c_.path(), "c2c/lane", "PORT_CTRL[{}]: lane {} does not exist ({} lanes)", w.index, lane,
                           c_.config_.link.lanes);
          return false;
        }
        // Both ends retrain once the far end knows, a link latency on
        // (the same wherever the far chip is simulated).
        c_.fail_lane(w.index, lane, now() + c_.config_.link.latency);
      } else if (w.data & R::PORT_CTRL_f::RETRAIN_MASK) {
        c_.link_down(w.index, now() + c_.config_.link.latency);
      }
      return true;
    });
    regs_.on_write(R::PORT_INJECT, [this](RegisterBank::Write& w) {
      if (!c_.ports_[w.index].connected) {
        log::guest_error(c_.path(), "c2c/unconnected", "PORT_INJECT[{}] written, but port {} has no link", w.index, w.index);
        return true;
      }
      c_.inject_error(w.index, w.data);
      return true;
    });
    regs_.on_write(R::CE_PUSH, [this](RegisterBank::Write&) {
      Collective c;
      const std::uint64_t op = regs_.get(R::CE_OP);
      c.op = static_cast<CommOp>((op & R::CE_OP_f::OP_MASK) >> R::CE_OP_f::OP_SHIFT);
      c.algo = static_cast<CommAlgo>((op & R::CE_OP_f::ALGO_MASK) >> R::CE_OP_f::ALGO_SHIFT);
      c.mode = static_cast<CommMode>((op & R::CE_OP_f::MODE_MASK) >> R::CE_OP_f::MODE_SHIFT);
      c.type = static_cast<CommType>((op & R::CE_OP_f::TYPE_MASK) >> R::CE_OP_f::TYPE_SHIFT);
      c.peer = static_cast<unsigned>((op & R::CE_OP_f::PEER_MASK) >> R::CE_OP_f::PEER_SHIFT);
      c.first = static_cast<unsigned>((op & R::CE_OP_f::FIRST_MASK) >> R::CE_OP_f::FIRST_SHIFT);
      c.chips = static_cast<unsigned>((op & R::CE_OP_f::CHIPS_MASK) >> R::CE_OP_f::CHIPS_SHIFT);
      c.id = static_cast<std::uint32_t>(regs_.get(R::CE_ID));
      c.src = regs_.get(R::CE_SRC);
      c.dst = regs_.get(R::CE_DST);
      c.count = regs_.get(R::CE_COUNT);
      c.table = regs_.get(R::CE_TABLE);
      c.signal = regs_.get(R::CE_SIGNAL);
      if (!c_.ce_->submit(c)) {
        log::guest_error(c_.path(), "comm/queue-full", "CE_PUSH of collective {} with {} queued; refused", c.id,
                         c_.config_.comm.queue);
        raise(R::IRQ_STATUS_f::CE_ERROR_MASK);
      }
      return true;
    });
    regs_.on_read(R::CE_STATUS, [this](unsigned, bool) -> std::uint64_t {
      return (c_.ce_->busy() ? 1 : 0) | (std::uint64_t(c_.ce_->queued()) << 8);
    });
    regs_.on_read(R::CE_COMPLETED, [this](unsigned, bool) -> std::uint64_t { return c_.ce_->completed(); });
    regs_.on_read(R::CE_ERROR, [this](unsigned, bool) -> std::uint64_t { return c_.ce_->error(); });
    regs_.on_read(R::CE_ERROR_ID, [this](unsigned, bool) -> std::uint64_t { return c_.ce_->error_id(); });
    regs_.on_read(R::CE_ERROR_ADDR, [this](unsigned, bool) -> std::uint64_t { return c_.ce_->error_addr(); });
    regs_.on_write(R::CE_ERROR, [this](RegisterBank::Write&) {
      c_.ce_->clear_error();
      return true;
    });
    regs_.on_write(R::CE_ABORT, [this](RegisterBank::Write& w) {
      if (w.data & R::CE_ABORT_f::ABORT_MASK)
        c_.ce_->give_up(static_cast<unsigned>((w.data & R::CE_ABORT_f::FIRST_MASK) >> R::CE_ABORT_f::FIRST_SHIFT),
                      static_cast<unsigned>((w.data & R::CE_ABORT_f::CHIPS_MASK) >> R::CE_ABORT_f::CHIPS_SHIFT));
      return true;
    });
    regs_.on_write(R::CE_RESET, [this](RegisterBank::Write& w) {
      if (!c_.ce_->reset(static_cast<std::uint32_t>(w.data)))
        log::guest_error(c_.path(), "comm/reset-busy", "CE_RESET while a collective runs or waits: it fails (code 9) and the "
                                                       "engine resets after it");
      return true;
    });
    for (unsigned r : {R::IRQ_STATUS, R::IRQ_ENABLE})
      regs_.on_write(r, [this, r](RegisterBank::Write& w) {
        regs_.set(r, w.next);
        c_.update_irq();
        return true;
      });
  }
  void raise(std::uint64_t bits) {
    regs_.set(R::IRQ_STATUS, regs_.get(R::IRQ_STATUS) | bits);
    c_.update_irq();
  }
  void set(unsigned reg, std::uint64_t v) { regs_.set(reg, v); }
  std::uint64_t get(unsigned reg) const { return regs_.get(reg); }

 private:
  C2c& c_;
};

C2c::C2c(const sc_core::sc_module_name& n, const Config& c)
    : Ip(n), noc_target("noc_target"), noc_initiator("noc_initiator"), config_(c), ports_(c.ports) {
  regs_ = std::make_unique<Regs>("regs", *this);
  ce_ = std::make_unique<CommEngine>("comm", *this, c.comm);
  ce_->on_done([this](const Collective&, bool ok) {
    regs_->raise(ok ? R::IRQ_STATUS_f::CE_DONE_MASK : R::IRQ_STATUS_f::CE_ERROR_MASK);
  });
  noc_target.register_b_transport(this, &C2c::b_transport);
  noc_target.register_transport_dbg(this, &C2c::transport_dbg);
  expose_target("noc_target", noc_target, std::uint64_t(kMaxChips) << c.chip_shift);
  expose_target("csr_target", regs_->csr_target, R::kBlock.window);
  expose_initiator("noc_initiator", noc_initiator);
  expose_irq_out("irq_out", irq_out);
  routes_.assign(1, -1);
  for (const Fault& f : parse_faults(c.faults))
    if (f.kind == Fault::flit) pending_errors_.emplace_back(f.port, f.flit_number);
  SC_HAS_PROCESS(C2c);
  SC_METHOD(on_change);
  sensitive << changes_;
  dont_initialize();
  SC_THREAD(serve_inbox);
}

C2c::~C2c() = default;

void C2c::set_identity(unsigned chip, unsigned chips) {
  chip_ = chip;
  chips_ = chips;
  routes_.assign(chips, -1);
}

void C2c::set_route(unsigned chip, unsigned port) { routes_.at(chip) = static_cast<int>(port); }

namespace {

// The link layer RTL's transactor behind the model's interface.
class RtlLinkLayer : public LinkLayerRtl {
 public:
  RtlLinkLayer(const std::string& name, const sc_core::sc_time& beat, const std::string& fst)
      : rtl_(name.c_str(), beat, 8, fst) {}
  Outcome carry(const std::vector<std::vector<std::uint8_t>>& payloads, const std::set<std::uint64_t>& corrupt) override {
    std::vector<rtl::LinkRtl::Flit> flits(payloads.size());
    for (std::size_t i = 0; i < payloads.size(); ++i) flits[i] = {payloads[i], i + 1 == payloads.size()};
    const rtl::LinkRtl::Result r = rtl_.send(flits, corrupt);
    Outcome o;
    o.transmissions = r.sent;
    o.crc_errors = r.crc_errors;
    o.naks = r.naks;
    for (const auto& f : r.delivered) {
      std::uint16_t plen = 0;
      std::memcpy(&plen, &f[4], 2);
      o.delivered.emplace_back(f.begin() + rtl::LinkRtl::kHeader, f.begin() + rtl::LinkRtl::kHeader + plen);
    }
    return o;
  }

 private:
  rtl::LinkRtl rtl_;
};

}  // namespace

std::unique_ptr<LinkLayerRtl> C2c::make_link_rtl(const std::string& name, const sc_core::sc_time& beat, const std::string& fst) {
  return std::make_unique<RtlLinkLayer>(name, beat, fst);
}

void C2c::connect(unsigned port, C2c& peer, unsigned peer_port) {
  Port& a = ports_.at(port);
  Port& b = peer.ports_.at(peer_port);
  if (a.connected || b.connected)
    throw ConfigError(fmt::format("{} port {} or {} port {} is connected twice", path(), port, peer.path(),
                                  peer_port));  // elaboration-only
  auto state = std::make_shared<LinkState>(std::min(config_.link.lanes, peer.config_.link.lanes));
  a.connected = b.connected = true;
  a.peer = &peer;
  a.peer_chip = peer.chip_;
  a.peer_port = peer_port;
  b.peer = this;
  b.peer_chip = chip_;
  b.peer_port = port;
  a.state = b.state = state;
  // Each direction's random errors have their own stream, fixed by the seed and the ends.
  a.tx = std::make_unique<Channel>(config_.link, *state, config_.link.seed * 1000003 + chip_ * 64 + port);
  b.tx = std::make_unique<Channel>(peer.config_.link, *state, peer.config_.link.seed * 1000003 + peer.chip_ * 64 + peer_port);
  a.tx->set_clock(&meter_->clock(power::kLinks));
  b.tx->set_clock(&peer.meter_->clock(power::kLinks));
  a.tx->set_track(fmt::format("{}.port{}", path(), port));
  b.tx->set_track(fmt::format("{}.port{}", peer.path(), peer_port));
  // "impl": "rtl": each side's transmitter is the link layer RTL, clocked so a
  // FLIT takes its time on the full-width link (32 beats of 8 bytes).
  for (C2c* side : {this, &peer}) {
    if (!side->config_.rtl) continue;
    const unsigned p = side == this ? port : peer_port;
    const sc_core::sc_time beat(side->config_.link.flit_seconds(side->config_.link.lanes) / 32, sc_core::SC_SEC);
    std::string name = fmt::format("{}_port{}_link_rtl", side->path(), p);
    std::replace(name.begin(), name.end(), '.', '_');
    side->rtl_links_.push_back(make_link_rtl(name, beat, waves::companion(side->path() + ".port" + std::to_string(p), ".fst")));
    (side == this ? a : b).tx->set_rtl(side->rtl_links_.back().get());
  }
  a.last_state = b.last_state = 2;
  for (C2c* side : {this, &peer}) {
    const unsigned p = side == this ? port : peer_port;
    for (const Fault& f : parse_faults(side->config_.faults)) {
      if (f.port != p) continue;
      if (f.kind == Fault::lane) state->fail_lane(f.lane_index, f.at, side->config_.link.retrain);
      else if (f.kind == Fault::down) state->link_down(f.at, side->config_.link.retrain);
    }
    for (const auto& [ep, n] : side->pending_errors_)
      if (ep == p) side->ports_[p].tx->inject_error(n);
  }
}

void C2c::connect_remote(unsigned port, unsigned peer_chip, unsigned peer_port, const Config& peer_config) {
  Port& a = ports_.at(port);
  if (a.connected) throw ConfigError(fmt::format("{} port {} is connected twice", path(), port));  // elaboration-only
  // This end's copy of the link's state: the far process keeps the other,
  // built from the same faults, and each end tells the other of faults
  // raised later (PORT_CTRL), a link latency ahead.
  auto state = std::make_shared<LinkState>(std::min(config_.link.lanes, peer_config.link.lanes));
  a.connected = true;
  a.peer = nullptr;
  a.peer_chip = peer_chip;
  a.peer_port = peer_port;
  a.state = state;
  a.tx = std::make_unique<Channel>(config_.link, *state, config_.link.seed * 1000003 + chip_ * 64 + port);
  a.tx->set_clock(&meter_->clock(power::kLinks));
  a.tx->set_track(fmt::format("{}.port{}", path(), port));
  if (config_.rtl) {
    const sc_core::sc_time beat(config_.link.flit_seconds(config_.link.lanes) / 32, sc_core::SC_SEC);
    std::string name = fmt::format("{}_port{}_link_rtl", path(), port);
    std::replace(name.begin(), name.end(), '.', '_');
    rtl_links_.push_back(make_link_rtl(name, beat, waves::companion(path() + ".port" + std::to_string(port), ".fst")));
    a.tx->set_rtl(rtl_links_.back().get());
  }
  a.last_state = 2;
  for (const auto& [cfg, p] : {std::pair<const Config*, unsigned>{&config_, port}, {&peer_config, peer_port}})
    for (const Fault& f : parse_faults(cfg->faults)) {
      if (f.port != p) continue;
      if (f.kind == Fault::lane) state->fail_lane(f.lane_index, f.at, cfg->link.retrain);
      else if (f.kind == Fault::down) state->link_down(f.at, cfg->link.retrain);
    }
  for (const auto& [ep, n] : pending_errors_)
    if (ep == port) a.tx->inject_error(n);
}

void C2c::schedule_changes(unsigned port, sc_core::sc_time start, sc_core::sc_time end) {
  // Both ends look at their ports again when a training window opens and closes.
  if (!sc_core::sc_is_running()) return;  // start_of_simulation() schedules what elaboration set up
  const sc_core::sc_time now = sc_core::sc_time_stamp();
  for (const sc_core::sc_time& t : {start, end})
    if (t >= now) {
      changes_.notify(t - now);
      if (ports_[port].peer) ports_[port].peer->changes_.notify(t - now);
    }
}

void C2c::start_of_simulation() {
  for (unsigned i = 0; i < ports_.size(); ++i) {
    Port& p = ports_[i];
    if (!p.state) continue;
    p.w_state = waves::declare(waves::links, fmt::format("{}.port{}", path(), i), "state", 2);
    p.w_width = waves::declare(waves::links, fmt::format("{}.port{}", path(), i), "lanes", 8);
    waves::change(p.w_state, port_state(i), sc_core::SC_ZERO_TIME);
    waves::change(p.w_width, p.state->width(sc_core::SC_ZERO_TIME), sc_core::SC_ZERO_TIME);
  }
  for (const Port& p : ports_)
    if (p.state)
      for (const auto& e : p.state->events())
        for (const sc_core::sc_time& t : {e.start, e.end}) changes_.notify(t);
}

unsigned C2c::port_state(unsigned i) const {
  const Port& p = ports_[i];
  if (!p.state) return 0;
  switch (p.state->state(sc_core::sc_time_stamp())) {
    case LinkState::State::down: return 0;
    case LinkState::State::training: return 1;
    case LinkState::State::active: return 2;
  }
  return 0;
}

void C2c::on_change() {
  std::uint64_t bits = 0;
  for (unsigned i = 0; i < ports_.size(); ++i) {
    const unsigned s = port_state(i);
    if (ports_[i].state && s != ports_[i].last_state) {
      log::info(path(), "port {} is now {} ({} lanes)", i, s == 2 ? "active" : s == 1 ? "training" : "down",
                ports_[i].state->width(sc_core::sc_time_stamp()));
      ports_[i].last_state = s;
      bits |= 1u << i;
      waves::change(ports_[i].w_state, s);
      waves::change(ports_[i].w_width, ports_[i].state->width(sc_core::sc_time_stamp()));
    }
  }
  if (bits) regs_->raise(bits << R::IRQ_STATUS_f::STATE_CHANGE_SHIFT);
}

void C2c::charge_link(const Port& p, std::uint64_t attempts_before, const sc_core::sc_time& start,
                      const sc_core::sc_time& end) {
  // Every transmission's bits on the wire: FLIT overhead and replays included.
  const double bits = double(p.tx->stats().attempts - attempts_before) * config_.link.flit_bytes * 8.0;
  meter_->charge(kLinkBit, bits, start, std::max(start, end));
}

void C2c::update_irq() { irq_out.write(regs_->get(R::IRQ_STATUS) & regs_->get(R::IRQ_ENABLE)); }

void C2c::fail_lane(unsigned port, unsigned lane, sc_core::sc_time at) { fault(port, lane, at, config_.link.retrain, true); }

void C2c::link_down(unsigned port, sc_core::sc_time at) { fault(port, ~0ull, at, config_.link.retrain, true); }

void C2c::fault(unsigned port, std::uint64_t lane, sc_core::sc_time at, sc_core::sc_time retrain, bool tell_peer) {
  Port& p = ports_.at(port);
  if (!p.state) return;
  // The far end keeps its own copy of the link's state when it lives in
  // another process: it hears of the fault no sooner than a link latency on.
  if (tell_peer && !p.peer && sc_core::sc_is_running()) at = std::max(at, sc_core::sc_time_stamp() + config_.link.latency);
  if (lane == ~0ull) p.state->link_down(at, retrain);
  else p.state->fail_lane(static_cast<unsigned>(lane), at, retrain);
  schedule_changes(port, at, at + retrain);
  if (tell_peer && !p.peer) {
    Message m;
    m.kind = Message::fault;
    m.from_chip = chip_;
    m.to_chip = p.peer_chip;
    m.to_port = p.peer_port;
    m.local = lane;
    m.tag = retrain.value();
    m.seq = next_seq_++;
    m.at = at.value();
    post(p, std::move(m));
  }
}

void C2c::inject_error(unsigned port, std::uint64_t attempt) {
  Port& p = ports_.at(port);
  if (p.tx) p.tx->inject_error(attempt);
}

const ChannelStats* C2c::tx_stats(unsigned port) const {
  return port < ports_.size() && ports_[port].tx ? &ports_[port].tx->stats() : nullptr;
}

const ChannelStats* C2c::rx_stats(unsigned port) const {
  return port < ports_.size() && ports_[port].connected ? &ports_[port].rx : nullptr;
}

const LinkState* C2c::link_state(unsigned port) const {
  return port < ports_.size() ? ports_[port].state.get() : nullptr;
}

void C2c::b_transport(tlm::tlm_generic_payload& trans, sc_core::sc_time& delay) {
  const std::uint64_t offset = trans.get_address();
  const unsigned dest = static_cast<unsigned>(offset >> config_.chip_shift);
  const std::uint64_t local = offset & ((1ull << config_.chip_shift) - 1);
  if (dest == chip_) ++local_;
  else ++remote_;
  delay += config_.switch_latency;  // through this fabric's switch; each fabric on the way adds its own
  route(trans, dest, local, delay);
  trans.set_address(offset);
}

void C2c::route(tlm::tlm_generic_payload& trans, unsigned dest, std::uint64_t local, sc_core::sc_time& delay) {
  if (dest == chip_ && local >= kFabricLocal) {  // the fabric's own memory: staging buffer and flags
    trans.set_address(local);
    ce_->access(trans, local - kFabricLocal, delay, false);
    return;
  }
  if (dest == chip_) {  // this chip: into the NoC with the local address
    trans.set_address(local);
    noc_initiator->b_transport(trans, delay);
    delay += config_.switch_latency;  // the response enters the fabric
    return;
  }
  const int out = route_of(dest);
  if (out < 0 || !ports_[static_cast<unsigned>(out)].connected) {
    ++no_route_;
    log::guest_error(path(), "c2c/no-route", "{} of chip {} (local {:#x}): {} (a system of {} chip{})",
                     trans.is_read() ? "read" : "write", dest, local,
                     dest >= chips_ ? "no such chip" : "no link leads there", chips_, chips_ == 1 ? "" : "s");
    regs_->set(R::NO_ROUTE_CHIP, dest);
    regs_->raise(R::IRQ_STATUS_f::NO_ROUTE_MASK);
    trans.set_response_status(tlm::TLM_ADDRESS_ERROR_RESPONSE);
    return;
  }
  Port& p = ports_[static_cast<unsigned>(out)];
  const LinkConfig& lc = config_.link;
  const unsigned len = trans.get_data_length(), hdr = lc.message_header;
  const bool write = trans.is_write();
  // Request: header (command, global address, length) and a write's data.
  std::vector<std::uint8_t> msg(hdr + (write ? len : 0), 0), rx(msg.size());
  msg[0] = write ? 1 : 0;
  const std::uint64_t global = config_.global_address(dest, local);
  std::memcpy(&msg[8], &global, 8);
  std::memcpy(&msg[4], &len, 4);
  if (write) std::memcpy(&msg[hdr], trans.get_data_ptr(), len);
  bool ok = true;
  const ChannelStats before = p.tx->stats();
  const sc_core::sc_time sent = p.tx->send(msg.data(), msg.size(), rx.data(), sc_core::sc_time_stamp() + delay, ok);
  if (p.tx->stats().crc_errors != before.crc_errors) regs_->raise(R::IRQ_STATUS_f::CRC_ERROR_MASK);
  charge_link(p, before.attempts, sc_core::sc_time_stamp() + delay, sent);
  if (!ok) {
    ++link_errors_;
    log::guest_error(path(), "c2c/link-down", "{} of chip {} (local {:#x}): port {} has no working lane",
                     write ? "write" : "read", dest, local, out);
    trans.set_response_status(tlm::TLM_GENERIC_ERROR_RESPONSE);
    return;
  }
  // The far side serves what it received when its last FLIT arrives; this
  // thread waits for the response.
  Message m;
  m.kind = Message::request;
  m.write = write;
  m.from_chip = chip_;
  m.to_chip = p.peer_chip;
  m.to_port = p.peer_port;
  m.dest = dest;
  m.local = local;
  m.len = len;
  m.tag = next_tag_++;
  m.seq = next_seq_++;
  m.at = sent.value();
  m.flits = p.tx->stats().flits - before.flits;
  m.crc_errors = p.tx->stats().crc_errors - before.crc_errors;
  if (write) m.data.assign(rx.begin() + hdr, rx.end());
  const std::uint64_t tag = m.tag;
  Pending& w = pending_[tag];
  post(p, std::move(m));
  while (!w.done) sc_core::wait(w.event);
  if (w.lost) {
    ++link_errors_;
    log::guest_error(path(), "c2c/link-down",
                     "response to a {} of chip {} (local {:#x}) lost: port {} of chip {} has no working lane",
                     write ? "write" : "read", dest, local, p.peer_port, p.peer_chip);
    trans.set_response_status(tlm::TLM_GENERIC_ERROR_RESPONSE);
  } else {
    trans.set_response_status(static_cast<tlm::tlm_response_status>(static_cast<int>(w.status) - 8));
    if (!write && trans.is_response_ok()) std::memcpy(trans.get_data_ptr(), w.data.data(), len);
  }
  pending_.erase(tag);
  delay = config_.switch_latency;  // the response enters this fabric
}

void C2c::post(const Port& via, Message&& m) {
  if (cut_) cut_->post(std::move(m));
  else via.peer->receive(std::move(m));  // a fabric outside a system: its peers are in this process
}

void C2c::receive(Message&& m) {
  const std::uint64_t now = sc_core::sc_time_stamp().value();
  if (m.at < now)
    throw std::runtime_error(fmt::format("{}: a link message from chip {} arrives at {} ps, before the present ({} ps)",
                                         path(), m.from_chip, m.at, now));
  const std::uint64_t at = m.at;
  inbox_.push_back(std::move(m));
  std::push_heap(inbox_.begin(), inbox_.end(), MessageLater{});
  inbox_event_.notify(sc_core::sc_time::from_value(at - now));
}

void C2c::serve_inbox() {
  for (;;) {
    sc_core::wait(inbox_event_);
    const std::uint64_t now = sc_core::sc_time_stamp().value();
    while (!inbox_.empty() && inbox_.front().at <= now) {
      std::pop_heap(inbox_.begin(), inbox_.end(), MessageLater{});
      Message m = std::move(inbox_.back());
      inbox_.pop_back();
      Port& p = ports_.at(m.to_port);
      p.rx.messages += m.kind != Message::fault;
      p.rx.flits += m.flits;
      p.rx.crc_errors += m.crc_errors;
      if (m.kind == Message::fault) {
        fault(m.to_port, m.local, sc_core::sc_time::from_value(m.at), sc_core::sc_time::from_value(m.tag), false);
      } else if (m.kind == Message::response) {
        const auto it = pending_.find(m.tag);
        if (it == pending_.end()) continue;  // cannot happen: one response per request
        Pending& w = it->second;
        w.done = true;
        w.lost = m.lost;
        w.status = m.status;
        w.data = std::move(m.data);
        w.event.notify();
      } else if (!idle_workers_.empty()) {
        Worker* w = idle_workers_.back();
        idle_workers_.pop_back();
        w->msg = std::move(m);
        w->go.notify();
      } else {  // a new worker serves it at once, then waits for more
        Worker* w = &workers_.emplace_back();
        w->msg = std::move(m);
        sc_core::sc_spawn_options o;
        o.set_stack_size(64 * 1024);
        sc_core::sc_spawn([this, w] { work(w); }, fmt::format("worker{}", workers_.size() - 1).c_str(), &o);
      }
    }
    if (!inbox_.empty()) inbox_event_.notify(sc_core::sc_time::from_value(inbox_.front().at - now));
  }
}

void C2c::work(Worker* w) {
  for (;;) {
    serve_request(w->msg);
    idle_workers_.push_back(w);
    sc_core::wait(w->go);
  }
}

void C2c::serve_request(Message& m) {
  ++incoming_;
  if (chip_ != m.dest) ++forwarded_;
  // The far side works on what it received.
  std::vector<std::uint8_t> data = m.write ? std::move(m.data) : std::vector<std::uint8_t>(m.len, 0);
  tlm::tlm_generic_payload trans;
  trans.set_command(m.write ? tlm::TLM_WRITE_COMMAND : tlm::TLM_READ_COMMAND);
  trans.set_data_ptr(data.data());
  trans.set_data_length(m.len);
  trans.set_streaming_width(m.len);
  trans.set_byte_enable_ptr(nullptr);
  trans.set_dmi_allowed(false);
  trans.set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);
  // Through this fabric's switch, then into the NoC (or on over the next
  // link) in the order of arrival: the NoC would wait out an annotated
  // delay itself, and requests waking at one instant leave a wait in an
  // order SystemC does not fix.
  sc_core::wait(config_.switch_latency);
  gate_.pass(m.from_chip, m.seq);
  sc_core::sc_time far = sc_core::SC_ZERO_TIME;
  route(trans, m.dest, m.local, far);
  // Response: header (status) and a read's data, back over the other direction.
  Port& back = ports_.at(m.to_port);
  const LinkConfig& lc = config_.link;
  const unsigned hdr = lc.message_header;
  const bool carries = !m.write && trans.is_response_ok();
  std::vector<std::uint8_t> resp(hdr + (carries ? m.len : 0), 0);
  resp[0] = static_cast<std::uint8_t>(trans.get_response_status() + 8);
  if (carries) std::memcpy(&resp[hdr], data.data(), m.len);
  gate_.pass(m.from_chip, m.seq);
  const ChannelStats before = back.tx->stats();
  const sc_core::sc_time ready = sc_core::sc_time_stamp() + far;
  bool ok = true;
  const sc_core::sc_time returned = back.tx->send(resp.data(), resp.size(), resp.data(), ready, ok);
  if (back.tx->stats().crc_errors != before.crc_errors) regs_->raise(R::IRQ_STATUS_f::CRC_ERROR_MASK);
  charge_link(back, before.attempts, ready, returned);
  Message r;
  r.kind = Message::response;
  r.from_chip = chip_;
  r.to_chip = m.from_chip;
  r.to_port = back.peer_port;
  r.tag = m.tag;
  r.seq = next_seq_++;
  r.status = static_cast<std::uint8_t>(trans.get_response_status() + 8);
  r.flits = back.tx->stats().flits - before.flits;
  r.crc_errors = back.tx->stats().crc_errors - before.crc_errors;
  if (ok) {
    r.at = returned.value();
    if (carries) r.data.assign(resp.begin() + hdr, resp.end());
  } else {  // the requester learns of it when the response would have come
    r.lost = 1;
    r.at = (ready + lc.latency).value();
  }
  post(back, std::move(r));
}

unsigned C2c::transport_dbg(tlm::tlm_generic_payload& trans) {
  const std::uint64_t offset = trans.get_address();
  const unsigned shift = config_.chip_shift;
  const unsigned n = route_dbg(trans, static_cast<unsigned>(offset >> shift), offset & ((1ull << shift) - 1), 0);
  trans.set_address(offset);
  return n;
}

unsigned C2c::route_dbg(tlm::tlm_generic_payload& trans, unsigned dest, std::uint64_t local, unsigned hops) {
  if (dest == chip_ && local >= kFabricLocal) {
    trans.set_address(local);
    sc_core::sc_time none;
    ce_->access(trans, local - kFabricLocal, none, true);
    return trans.is_response_ok() ? trans.get_data_length() : 0;
  }
  if (dest == chip_) {
    trans.set_address(local);
    return noc_initiator->transport_dbg(trans);
  }
  const int out = route_of(dest);
  if (out < 0 || !ports_[static_cast<unsigned>(out)].peer || hops > kMaxChips) return 0;
  const Port& p = ports_[static_cast<unsigned>(out)];
  return p.peer->route_dbg(trans, dest, local, hops + 1);
}

void C2c::report_limits(nlohmann::ordered_json& out) const {
  // One port's link each way, FLITs back to back on all its lanes (headers included).
  out["port_flits_per_s"] = 1.0 / config_.link.flit_seconds(config_.link.lanes);
  out["port_bytes_per_s"] = config_.link.flit_bytes / config_.link.flit_seconds(config_.link.lanes);
  out["ports"] = config_.ports;
  out["reduce_bytes_per_s"] = config_.comm.reduce_gbps * 1e9;  // the communication engine's reduction ALU
}

void C2c::report_stats(nlohmann::ordered_json& out) const {
  out["chip"] = chip_;
  out["loopback"] = local_;
  out["remote"] = remote_;
  out["incoming"] = incoming_;
  out["forwarded"] = forwarded_;
  out["no_route"] = no_route_;
  out["link_errors"] = link_errors_;
  const CommEngine::Stats& ce = ce_->stats();
  out["ce_collectives"] = ce.collectives;
  out["ce_bytes_sent"] = ce.bytes_sent;
  out["ce_bytes_read_remote"] = ce.bytes_read_remote;
  out["ce_bytes_reduced"] = ce.bytes_reduced;
  out["ce_notifications"] = ce.notifications;
  out["ce_polls"] = ce.polls;
  out["ce_busy_ns"] = ce.busy.to_seconds() * 1e9;
  const double now = sc_core::sc_time_stamp().to_seconds();
  for (unsigned i = 0; i < ports_.size(); ++i) {
    const Port& p = ports_[i];
    if (!p.tx) continue;
    const ChannelStats& s = p.tx->stats();
    const std::string k = fmt::format("port{}_", i);
    out[k + "tx_bytes"] = s.payload_bytes;
    out[k + "tx_flits"] = s.flits;
    out[k + "replays"] = s.replays;
    out[k + "crc_errors_out"] = s.crc_errors;
    out[k + "busy_ns"] = s.busy.to_seconds() * 1e9;
    out[k + "idle_ns"] = std::max(0.0, now - s.busy.to_seconds()) * 1e9;
    out[k + "utilisation"] = now > 0 ? s.busy.to_seconds() / now : 0.0;
    out[k + "retrains"] = p.state->events().size();
  }
}

TESSERA_REGISTER_IP("c2c", C2c, "chip-to-chip fabric: SerDes link ports (lanes, FLITs, CRC, replay, credits) and routing");
// "impl": "rtl": the links' layer co-simulated from its RTL.
TESSERA_REGISTER_IMPL("c2c", C2c, "rtl");

}  // namespace tessera::c2c
