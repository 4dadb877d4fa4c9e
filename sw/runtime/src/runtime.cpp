#include "tessera/runtime.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <deque>
#include <optional>
#include <set>
#include <systemc>

#include "common/log.hpp"
#include "common/paths.hpp"
#include "common/payload.hpp"
#include "common/sim.hpp"
#include "mailbox_regs.hpp"
#include "platform.hpp"
#include "ranks.hpp"
#include "session.hpp"
#include "system.hpp"
#include "tessera/program.hpp"
#include "c2c/c2c.hpp"
#include "c2c_regs.hpp"
#include "common/power.hpp"
#include "host.hpp"
#include "noc/noc.hpp"
#include "noc/noc_ip.hpp"
#include "tile/tile.hpp"

namespace tessera::rt {

using detail::AgentState;
using detail::HostAgent;
using detail::Link;
using detail::Step;

const char* status_name(std::uint32_t s) {
  static const char* const names[] = {"ok",           "bad opcode",   "bad tile mask", "bad pointer", "bad size",
                                      "DMA error",    "kernel fault", "kernel error",  "timeout",     "tile busy",
                                      "collective failed"};
  return s < std::size(names) ? names[s] : "unknown status";
}

namespace {

bool g_simulation_exists = false;  // a SystemC simulation elaborates once per process: one Device or Cluster

std::string default_firmware() { return data_file(DataKind::firmware, "cmdproc.elf"); }

// What the host needs to know of a chip's build, read once from the chip
// by the process that holds it (and carried to rank 0 when another does).
struct ChipFacts {
  struct Tile {
    std::uint64_t regs = 0, spm = 0;  // the register window's and the scratchpad's global addresses
    double period = 1e-9;             // the core's clock period, seconds
    unsigned hart = 0;
    bool core = false;
  };
  std::vector<Tile> tiles;            // by tile index
  std::uint64_t spm_size = 0;         // tile0's scratchpad
  std::vector<unsigned> near;         // by tile: the stack fewest hops away (Device::stack_near)
  roofline::Limits limits;
  bool c2c = false;                   // a chip-to-chip fabric, and its global window
  std::uint64_t global_base = 0;
  unsigned chip_shift = 0;
  std::uint64_t fabric_regs = 0;      // its registers (CE_*), as the chip maps them
  std::string load_error;
  std::string meter;                  // the chip's power meter

  nlohmann::ordered_json save() const {
    nlohmann::ordered_json j;
    for (const Tile& t : tiles) j["tiles"].push_back({t.regs, t.spm, t.period, t.hart, t.core});
    j["spm_size"] = spm_size;
    j["near"] = near;
    j["limits"] = limits.save();
    j["c2c"] = {c2c, global_base, chip_shift, fabric_regs};
    j["load_error"] = load_error;
    j["meter"] = meter;
    return j;
  }
  static ChipFacts load(const nlohmann::ordered_json& j) {
    ChipFacts f;
    for (const auto& t : j.value("tiles", nlohmann::ordered_json::array()))
      f.tiles.push_back({t[0].get<std::uint64_t>(), t[1].get<std::uint64_t>(), t[2].get<double>(), t[3].get<unsigned>(),
                         t[4].get<bool>()});
    f.spm_size = j.at("spm_size").get<std::uint64_t>();
    f.near = j.at("near").get<std::vector<unsigned>>();
    f.limits = roofline::Limits::load(j.at("limits"));
    f.c2c = j.at("c2c")[0].get<bool>();
    f.global_base = j.at("c2c")[1].get<std::uint64_t>();
    f.chip_shift = j.at("c2c")[2].get<unsigned>();
    f.fabric_regs = j.at("c2c")[3].get<std::uint64_t>();
    f.load_error = j.at("load_error").get<std::string>();
    f.meter = j.at("meter").get<std::string>();
    return f;
  }
};

// The HBM stacks a chip's spec lists, by base address: alloc's numbering.
std::vector<std::pair<std::uint64_t, std::uint64_t>> hbm_stacks_of(const PlatformSpec& s) {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> out;
  for (const InstanceSpec& i : s.instances)
    if (i.type == "hbm" && i.base) out.emplace_back(*i.base, i.size);
  std::sort(out.begin(), out.end());
  return out;
}

unsigned tiles_of(const PlatformSpec& s) {
  unsigned n = 0;
  for (const InstanceSpec& i : s.instances) n += i.type == "tile";
  return n;
}

// The path power::meter takes for chip `p` (any path under the chip's top).
std::string meter_of(const Platform& p) { return std::string(p.name()) + ".x"; }

ChipFacts facts_of(Platform& p) {
  ChipFacts f;
  const PlatformSpec& s = p.spec();
  const unsigned tiles = tiles_of(s);
  f.tiles.resize(tiles);
  for (unsigned t = 0; t < tiles; ++t)
    for (const InstanceSpec& i : s.instances) {
      if (i.name != "tile" + std::to_string(t)) continue;
      for (const auto& [target, base] : i.targets)
        if (target == "csr_target") f.tiles[t].regs = base;
      if (i.base) f.tiles[t].spm = *i.base;
      if (tile::Tile* tile = p.get<tile::Tile>(i.name)) {
        f.tiles[t].period = 1.0 / tile->config().core_clock.value;
        if (tile->core()) f.tiles[t].hart = tile->core()->config().hartid, f.tiles[t].core = true;
      }
    }
  if (tile::Tile* t0 = p.get<tile::Tile>("tile0")) f.spm_size = t0->scratchpad().size();
  // The tiles' and the stacks' NoC nodes, from the platform's limits: each
  // tile's nearest stack (the lowest of those tied).
  const auto stacks = hbm_stacks_of(s);
  const nlohmann::ordered_json all = p.limits();
  std::vector<int> stack_node(stacks.size(), -1);
  std::string noc;
  std::map<std::string, unsigned> tile_node;
  for (const auto& [key, e] : all.items()) {
    const std::string name = e["instance"].get<std::string>();
    if (e["type"] == "tile" && e.contains("node")) tile_node[name] = e["node"].get<unsigned>();
    if (e["type"] == "hbm" && e.contains("node"))
      for (const InstanceSpec& i : s.instances)
        if (i.name == name && i.base)
          for (std::size_t k = 0; k < stacks.size(); ++k)
            if (stacks[k].first == *i.base) stack_node[k] = e["node"].get<int>(), noc = e["noc"].get<std::string>();
  }
  const noc::Noc* n = noc.empty() ? nullptr : p.get<noc::Noc>(noc);
  f.near.assign(tiles, 0);
  for (unsigned tile = 0; tile < tiles; ++tile) {
    const auto it = tile_node.find("tile" + std::to_string(tile));
    if (!n || it == tile_node.end()) continue;
    unsigned best = ~0u;
    for (std::size_t k = 0; k < stacks.size(); ++k) {
      if (stack_node[k] < 0) continue;
      const unsigned h = noc::Network::hops(n->config().net, static_cast<unsigned>(stack_node[k]), it->second);
      if (h < best) best = h, f.near[tile] = static_cast<unsigned>(k);
    }
  }
  f.limits = roofline::limits(p);
  for (const InstanceSpec& i : s.instances)
    if (auto* c = p.get<c2c::C2c>(i.name)) {
      f.c2c = true;
      f.global_base = c->config().global_base;
      f.chip_shift = c->config().chip_shift;
      for (const auto& [target, base] : i.targets)
        if (target == "csr_target") f.fabric_regs = base;
      break;
    }
  f.load_error = p.load_error();
  f.meter = meter_of(p);
  return f;
}

// Untimed requests a chip's owner answers (Link::ask).
enum Untimed : std::uint8_t { kFacts = 0, kStats, kDebugRead, kEnergy, kRankStats, kDebugWrite, kRankSync };

Device::Energy energy_of(const std::string& meter_path) {
  power::Meter& m = power::meter(meter_path);
  Device::Energy e;
  e.joules = m.total_joules(sc_core::sc_time_stamp());
  for (unsigned d = 0; d < power::domain_count(); ++d) {
    const auto domain = static_cast<power::Domain>(d);
    e.domains.push_back(power::domain_name(d));
    e.dynamic_joules.push_back(m.dynamic_joules(domain));
    e.static_watts.push_back(m.table().static_power(domain));
  }
  return e;
}

// The owner's side of the untimed requests, on chip `p` of session `s`.
std::string answer_untimed(Session& s, Platform& p, std::uint8_t op, const std::string& arg) {
  switch (op) {
    case kFacts: return facts_of(p).save().dump();
    case kStats: return p.stats(arg).dump();
    case kDebugRead: {
      std::uint64_t addr = 0, len = 0;
      if (arg.size() != 16) throw std::runtime_error("a malformed debug read");
      std::memcpy(&addr, arg.data(), 8);
      std::memcpy(&len, arg.data() + 8, 8);
      std::string bytes(len, '\0');
      bytes.resize(p.debug_read(addr, bytes.data(), len));
      return bytes;
    }
    case kDebugWrite: {
      std::uint64_t addr = 0;
      if (arg.size() < 8) throw std::runtime_error("a malformed debug write");
      std::memcpy(&addr, arg.data(), 8);
      const std::uint64_t done = p.debug_write(addr, arg.data() + 8, arg.size() - 8);
      return std::string(reinterpret_cast<const char*>(&done), 8);
    }
    case kEnergy: {
      const Device::Energy e = energy_of(meter_of(p));
      return nlohmann::ordered_json{{"joules", e.joules}, {"domains", e.domains}, {"dynamic", e.dynamic_joules},
                                    {"static", e.static_watts}}.dump();
    }
    case kRankStats: return s.system()->stats().dump();
    case kRankSync: return s.rank_report().dump();
  }
  throw std::runtime_error(fmt::format("an unknown request ({})", op));
}

}  // namespace

struct Device::Impl {
  Options opt;
  std::unique_ptr<Session> session;  // a chip alone: its session (a Cluster's chips share the Cluster's)
  Platform* platform = nullptr;      // where this process holds the chip
  Link* link = nullptr;              // a chip of a Cluster: the host reaches it through the link
  ChipFacts facts;
  unsigned chip = 0, chips = 1;
  std::unique_ptr<HostAgent> agent;  // where this process holds the chip
  struct Stack {
    std::uint64_t base, size;
    std::map<std::uint64_t, std::uint64_t> free;  // address -> bytes
    std::map<std::uint64_t, std::uint64_t> used;
  };
  std::vector<Stack> stacks;
  unsigned tiles = 0;
  std::uint32_t next_id = 1, submitted = 0, next_stream = 1;
  std::map<std::uint32_t, tp_command> commands;  // submitted, by id
  std::set<std::uint32_t> reported;              // completions wait() has returned or thrown
  std::map<std::uint32_t, Buffer> program_buffers;  // freed once their command has completed
  std::map<std::uint32_t, GraphExec> graph_launches;  // by command id: what names a failure
  std::map<std::uint64_t, std::uint32_t> graph_last;   // a graph (its programs' address): its last completed launch

  // The HBM stacks and the tiles, from the chip's spec.
  void describe(const PlatformSpec& s) {
    for (const auto& [base, size] : hbm_stacks_of(s)) stacks.push_back({base, size, {}, {}});
    if (stacks.empty()) throw ConfigError(s.file + ": the runtime needs an HBM stack (type hbm)");
    tiles = tiles_of(s);
    stacks[0].free[stacks[0].base + TP_RESERVED] = stacks[0].size - TP_RESERVED;
    for (std::size_t i = 1; i < stacks.size(); ++i) stacks[i].free[stacks[i].base] = stacks[i].size;
  }
  // Elaboration, where this process holds the chip: the host's agent.
  void attach(Platform& p, const std::string& agent_name) {
    platform = &p;
    agent = std::make_unique<HostAgent>(agent_name.c_str(), p, stacks[0].base);
    for (const InstanceSpec& i : p.spec().instances)
      if (i.type == "host_port") {
        agent->use_port(p.target(i.name, "host_target"));
        break;
      }
  }
  const AgentState& host() const { return link ? link->state(chip) : agent->state; }
  // After the simulation started: the firmware's ready doorbell.
  void boot() {
    if (!facts.load_error.empty()) throw UsageError(facts.load_error);
    run_until([&] { return host().ready; },
              chips > 1 ? fmt::format("chip {}'s boot (the command processor's ready doorbell)", chip)
                        : std::string("its boot (the command processor's ready doorbell)"));
    if (host().version != TP_VERSION)
      throw UsageError(fmt::format("the firmware speaks protocol {:#x}, the runtime {:#x}", host().version, TP_VERSION));
  }

  // A graph launch failed on completion c's tile: which node, which
  // operation (the exit code names it; after a fault or a timeout, the
  // word the program kernel keeps at TKP_CURSOR_OFFSET).
  void name_graph_failure(const GraphExec& g, const tp_completion& c, DeviceError& error) {
    unsigned tile = c.tile;
    auto cursor = [&](unsigned t) {
      std::uint32_t at = 0;
      return debug_read(facts.tiles[t].spm + TKP_CURSOR_OFFSET, &at, 4) == 4 ? std::int64_t{at} : -1;
    };
    std::int64_t at = -1;
    if (c.status == TP_TIMEOUT) {
      // The watchdog names the first tile still running; the one to blame
      // is the first not waiting at one of the graph's barriers (node k's
      // barrier closes its part of node k; a tile pushing the next node's
      // early operations is at that barrier too).
      for (unsigned t = 0; t < g.starts.size() && at < 0; ++t) {
        if (g.starts[t].empty()) continue;
        const std::int64_t here = cursor(t);
        bool at_barrier = false;
        for (std::size_t k = 1; k < g.starts[t].size(); ++k)
          at_barrier |= here == std::int64_t{g.starts[t][k]} - 1;
        if (here >= 0 && !at_barrier) tile = t, at = here;
      }
    }
    if (tile >= g.starts.size() || g.starts[tile].empty()) return;
    if (c.status == TP_KERNEL_ERROR && c.detail >> 8) at = (c.detail >> 8) - 1;
    if (c.status == TP_KERNEL_FAULT) at = cursor(tile);
    if (at < 0) return;
    const std::vector<std::uint32_t>& starts = g.starts[tile];
    std::size_t n = 0;
    while (n + 1 < starts.size() && starts[n + 1] <= at) ++n;
    if (n >= g.names.size()) return;  // past the last node: the closing barrier
    error.node = g.names[n];
    error.op = static_cast<int>(at - starts[n]);
    static const char* const codes[] = {"", "", "a bad operation", "an engine error",
                                        "a collective the chip's communication engine failed (its CE_ERROR says why)"};
    const char* why = c.status == TP_KERNEL_ERROR && (c.detail & 0xff) < 5 ? codes[c.detail & 0xff] : "";
    // A collective the engine failed: its CE_ERROR says why; code 9, a chip
    // of the group gave up its collectives (CE_ERROR_ADDR: which).
    std::string engine;
    int gave_up = -1;
    if (c.status == TP_KERNEL_ERROR && (c.detail & 0xff) == 4 && facts.c2c && facts.fabric_regs) {
      namespace R = regs::c2c;
      std::uint32_t code = 0;
      std::uint64_t addr = 0;
      debug_read(facts.fabric_regs + R::kBlock.regs[R::CE_ERROR].offset, &code, 4);
      debug_read(facts.fabric_regs + R::kBlock.regs[R::CE_ERROR_ADDR].offset, &addr, 8);
      if (code == c2c::kCommAborted) {
        gave_up = static_cast<int>(addr);
        engine = fmt::format(": chip {} gave up its collectives (its launch failed; CE_ERROR 9)", addr);
      } else if (code) {
        engine = fmt::format(": CE_ERROR {}", code);
      }
      if (code) why = "a collective the chip's communication engine failed";
    }
    // A timeout blamed on another tile than the watchdog's first runner: say so.
    const std::string base = tile == c.tile ? std::string(error.what())
                                            : fmt::format("command {} (launch): timeout after {} us (the other tiles "
                                                          "waited at a barrier)", c.id, c.detail);
    const std::string what = fmt::format("{}; graph node {} '{}', operation {} of its program on tile {}{}{}{}", base, n,
                                         error.node, error.op, tile, *why ? ": " : "", why, engine);
    tp_completion blamed = c;
    blamed.tile = tile;
    DeviceError named(what, blamed);
    named.node = error.node;
    named.op = error.op;
    named.gave_up = gave_up;
    error = named;
  }

  // Host accesses kept (Device::hold_io) until send_io(): their steps and
  // bytes; and the requests posted and not yet waited for (wait_io).
  bool holding = false;
  std::vector<Step> held;
  std::deque<std::vector<std::uint8_t>> held_bytes;  // each held step's (stable addresses)
  struct Posted {
    std::uint64_t id;
    void* into;  // a read's destination (nullptr: writes)
    std::uint64_t len;
  };
  std::vector<Posted> posted;
  void send_held() {
    holding = false;
    if (held.empty()) return;
    posted.push_back({link->post(chip, held), nullptr, 0});
    held.clear();
    held_bytes.clear();
  }
  // Waits for the requests send_held() posted; throws the first one's error.
  void wait_posted() {
    if (posted.empty()) return;
    run_until([&] {
      for (const Posted& p : posted)
        if (!link->answered(p.id)) return false;
      return true;
    }, "the host's posted accesses");
    std::string error;
    for (const Posted& p : posted) {
      const Link::Answer a = link->take(p.id);
      if (error.empty()) error = a.error;
      if (p.into && a.error.empty()) std::memcpy(p.into, a.data.data(), std::min<std::uint64_t>(p.len, a.data.size()));
    }
    posted.clear();
    if (!error.empty()) throw UsageError(error);
  }
  // Runs the simulation until `done()` holds, failing after the timeout.
  template <class Done>
  void run_until(Done done, const std::string& what) {
    const sc_core::sc_time limit = sc_core::sc_time_stamp() + sc_core::sc_time(opt.timeout_s, sc_core::SC_SEC);
    if (holding) send_held();  // nothing waits for what is kept
    if (link) {
      // A chip of a Cluster: round by round, as every rank does.
      while (!done()) {
        if (const std::string why = link->session().halted(); !why.empty())
          throw UsageError(fmt::format("the device stopped ({}) while the host waited for {}", why, what));
        if (sc_core::sc_time_stamp() >= limit)
          throw UsageError(fmt::format("the device did not answer {} within {} s of simulated time", what, opt.timeout_s));
        link->round(true, false);
      }
      return;
    }
    while (!done()) {
      if (sim::stop_requested())
        throw UsageError(fmt::format("the device stopped ({}) while the host waited for {}", sim::exit_reason(), what));
      const sc_core::sc_time now = sc_core::sc_time_stamp();
      if (now >= limit)
        throw UsageError(fmt::format("the device did not answer {} within {} s of simulated time", what, opt.timeout_s));
      agent->on_news = [] { sc_core::sc_pause(); };
      sc_core::sc_start(limit - now, sc_core::SC_RUN_TO_TIME);
      agent->on_news = nullptr;
      if (sc_core::sc_get_status() == sc_core::SC_STOPPED && !done())
        throw UsageError(fmt::format("the device stopped ({}) while the host waited for {}", sim::exit_reason(), what));
    }
  }

  // Runs `body` in a SystemC thread (so its accesses take simulated time)
  // and the simulation until it has finished.
  void on_device(std::function<void()> body, const std::string& what) {
    bool finished = false;
    std::exception_ptr error;
    sc_core::sc_spawn([&] {
      try {
        body();
      } catch (...) {
        error = std::current_exception();
      }
      finished = true;
      sc_core::sc_pause();
    });
    run_until([&] { return finished; }, what);
    if (error) std::rethrow_exception(error);
  }

  // Host port accesses, in order, taking simulated time; a failure is a UsageError.
  void io(std::vector<Step> steps, const std::string& what) {
    if (!link) {
      on_device(
          [&] {
            for (const Step& st : steps) {
              if (st.kind == Step::mailbox) agent->mailbox_write(static_cast<unsigned>(st.addr), *static_cast<std::uint32_t*>(st.data));
              else agent->access(st.kind == Step::write ? tlm::TLM_WRITE_COMMAND : tlm::TLM_READ_COMMAND, st.addr, st.data, st.len);
            }
          },
          what);
      return;
    }
    bool reads = false;
    for (const Step& st : steps) reads |= st.kind == Step::read;
    if (holding && !reads) {  // kept, in order, to go as one request
      for (Step st : steps) {
        const std::uint64_t n = st.kind == Step::mailbox ? 4 : st.len;
        const auto* b = static_cast<const std::uint8_t*>(st.data);
        st.data = held_bytes.emplace_back(b, b + n).data();
        held.push_back(st);
      }
      return;
    }
    if (holding) send_held();
    wait_posted();  // a chip takes the host's requests in order
    const std::uint64_t id = link->post(chip, steps);
    run_until([&] { return link->answered(id); }, what);
    const Link::Answer a = link->take(id);
    if (!a.error.empty()) throw UsageError(a.error);
    std::size_t at = 0;
    for (const Step& st : steps)
      if (st.kind == Step::read) {
        std::memcpy(st.data, a.data.data() + at, st.len);
        at += st.len;
      }
  }
  // Untimed: the chip's memory as a debugger sees it; returns the bytes read.
  std::uint64_t debug_read(std::uint64_t addr, void* data, std::uint64_t len) const {
    if (!link || link->local(chip)) return platform->debug_read(addr, data, len);
    std::string arg(16, '\0');
    std::memcpy(arg.data(), &addr, 8);
    std::memcpy(arg.data() + 8, &len, 8);
    const std::string bytes = link->ask(chip, kDebugRead, arg);
    std::memcpy(data, bytes.data(), bytes.size());
    return bytes.size();
  }

  Stack& stack_of(const Buffer& b) {
    if (b.chip != chip)
      throw UsageError(fmt::format("a buffer of chip {} used on chip {} (copy it, or use its global address)", b.chip, chip));
    for (Stack& s : stacks)
      if (b.address >= s.base && b.address < s.base + s.size) return s;
    throw UsageError(fmt::format("no buffer at {:#x}", b.address));
  }
  // A collective's buffers: each one of this chip's (Cluster::collective
  // checks every chip's before it posts any).
  void check_collective(const Buffer& src, const Buffer& dst, const Buffer* table) {
    for (const Buffer* b : {&src, &dst, table})
      if (b) stack_of(*b);
  }
  void check_range(const Buffer& b, std::uint64_t bytes, std::uint64_t offset, const char* what) {
    Stack& s = stack_of(b);
    auto it = s.used.find(b.address);
    if (it == s.used.end() || it->second != b.size)
      throw UsageError(fmt::format("{}: no live buffer of {} bytes at {:#x} (freed, or never allocated)", what, b.size,
                                   b.address));
    if (offset > b.size || bytes > b.size - offset)
      throw UsageError(fmt::format("{}: {} bytes at offset {} run past the end of a {}-byte buffer", what, bytes, offset,
                                   b.size));
  }
};

std::string Device::default_platform() { return Session::default_platform(); }

std::string Device::system_platform(unsigned chips) {
  if (chips == 1) return default_platform();
  if (chips == 4) return data_file(DataKind::platforms, "t1x4-ring.json");
  if (chips == 8 || chips == 16 || chips == 32 || chips == 64) return data_file(DataKind::platforms, fmt::format("t1x{}-torus.json", chips));
  throw UsageError(fmt::format("no system of {} chips: the platforms ship 1, 4 (a ring), 8, 16, 32 and 64 (tori)", chips));
}

Device::Device() : Device(Options{}) {}

namespace {

// The session of a Device or a Cluster: the platform or system file with
// the options' overrides, the command processor's firmware on every chip,
// the trace and waves. Bad inputs are the host program's: UsageError.
std::unique_ptr<Session> open_session(const Device::Options& o, Ranks* ranks = nullptr) {
  if (g_simulation_exists) throw UsageError("one Device per process (or one Cluster): a simulated chip elaborates once");
  SessionOptions so;
  so.platform = o.platform;
  so.ranks = ranks;
  so.placement = o.placement;
  if (o.quiet) so.sets.push_back("uart0.tx=none");
  so.sets.insert(so.sets.end(), o.sets.begin(), o.sets.end());
  so.firmware = o.firmware.empty() ? default_firmware() : o.firmware;
  so.top = "device";
  so.trace = o.trace;
  so.waves = o.waves;
  so.timing_only = o.timing_only;
  try {
    return std::make_unique<Session>(so);
  } catch (const SessionError& e) {
    throw UsageError(e.what());
  }
}

// Under mpirun: the MPI ranks, opened once (and closed at exit).
Ranks* process_ranks() {
  static std::unique_ptr<Ranks> ranks;
  static bool opened = false;
  if (!opened) {
    opened = true;
    std::string error;
    ranks = open_ranks(nullptr, nullptr, error);
    if (!error.empty()) throw UsageError(error);
  }
  return ranks.get();
}

// Rank 0's live Cluster: should the host program exit() with it open, the
// other ranks are told to stop serving first (they would wait for it).
Link* g_live_link = nullptr;

void elaborate(Session& s) {
  try {
    s.elaborate();
  } catch (const SessionError& e) {
    throw UsageError(e.what());
  }
  g_simulation_exists = true;
}

}  // namespace

Device::Device(const Options& options) : impl_(std::make_unique<Impl>()) {
  Impl& d = *impl_;
  d.opt = options;
  if (launched_ranks() > 1)
    throw UsageError(fmt::format("mpirun -np {}: a Device is one chip, simulated in one process (run it without mpirun; "
                                 "rt::Cluster spreads a system of chips over ranks)", launched_ranks()));
  d.session = open_session(options);
  Session& s = *d.session;
  if (s.is_system())
    throw UsageError(s.file() + " describes a system of chips: open it with rt::Cluster, which gives a Device per chip");
  elaborate(s);
  try {
    d.describe(s.chip_spec());
  } catch (const ConfigError& e) {
    throw UsageError(e.what());
  }
  d.attach(s.chip(), "host_agent");
  d.facts = facts_of(s.chip());
  sc_core::sc_start(sc_core::SC_ZERO_TIME);
  d.boot();
}

Device::Device(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

unsigned Device::chip() const { return impl_->chip; }
unsigned Device::chips() const { return impl_->chips; }

Device::~Device() = default;

unsigned Device::tiles() const { return impl_->tiles; }

bool Device::timing_only() const { return sim::timing_only(); }

unsigned Device::hbm_stacks() const { return static_cast<unsigned>(impl_->stacks.size()); }

unsigned Device::tile_hart(unsigned t) const {
  if (t >= impl_->tiles || !impl_->facts.tiles[t].core) throw UsageError(fmt::format("tile_hart: tile {} has no core", t));
  return impl_->facts.tiles[t].hart;
}

Buffer Device::alloc(std::uint64_t bytes, unsigned stack) {
  Impl& d = *impl_;
  if (stack >= d.stacks.size())
    throw UsageError(fmt::format("alloc: HBM stack {} does not exist (the device has {})", stack, d.stacks.size()));
  if (bytes == 0) throw UsageError("alloc: zero bytes");
  const std::uint64_t size = (bytes + 4095) & ~std::uint64_t(4095);
  Impl::Stack& s = d.stacks[stack];
  for (auto it = s.free.begin(); it != s.free.end(); ++it) {
    if (it->second < size) continue;
    const std::uint64_t addr = it->first, left = it->second - size;
    s.free.erase(it);
    if (left) s.free[addr + size] = left;
    s.used[addr] = bytes;
    return Buffer{addr, bytes, d.chip};
  }
  throw UsageError(fmt::format("alloc: no {} contiguous bytes left in HBM stack {}", bytes, stack));
}

std::vector<Buffer> Device::alloc_symmetric(const std::vector<Device*>& chips, std::uint64_t bytes, unsigned stack) {
  if (chips.empty()) throw UsageError("alloc_symmetric: no chips");
  for (Device* d : chips)
    if (stack >= d->impl_->stacks.size())
      throw UsageError(fmt::format("alloc_symmetric: HBM stack {} does not exist on chip {} (it has {})", stack, d->impl_->chip,
                                   d->impl_->stacks.size()));
  if (bytes == 0) throw UsageError("alloc_symmetric: zero bytes");
  const std::uint64_t size = (bytes + 4095) & ~std::uint64_t(4095);
  // The lowest address from `from` on where chip d has `size` bytes free.
  auto first_fit = [&](const Device* d, std::uint64_t from) -> std::optional<std::uint64_t> {
    for (const auto& [addr, len] : d->impl_->stacks[stack].free) {
      const std::uint64_t at = std::max(addr, from);
      if (at < addr + len && addr + len - at >= size) return at;
    }
    return std::nullopt;
  };
  // Raised until every chip has the bytes free there (at most a pass per free range).
  std::uint64_t at = 0;
  for (bool moved = true; moved;) {
    moved = false;
    for (const Device* d : chips) {
      const std::optional<std::uint64_t> a = first_fit(d, at);
      if (!a) throw UsageError(fmt::format("alloc_symmetric: no {} contiguous bytes free at one address of HBM stack {} on every chip", bytes, stack));
      if (*a != at) at = *a, moved = true;
    }
  }
  std::vector<Buffer> out;
  for (Device* d : chips) {
    Impl::Stack& s = d->impl_->stacks[stack];
    auto it = std::prev(s.free.upper_bound(at));  // the free range holding it
    const std::uint64_t addr = it->first, len = it->second;
    s.free.erase(it);
    if (at > addr) s.free[addr] = at - addr;
    if (addr + len > at + size) s.free[at + size] = addr + len - at - size;
    s.used[at] = bytes;
    out.push_back(Buffer{at, bytes, d->impl_->chip});
  }
  return out;
}

void Device::free(const Buffer& b) {
  Impl& d = *impl_;
  Impl::Stack& s = d.stack_of(b);
  auto it = s.used.find(b.address);
  if (it == s.used.end() || it->second != b.size)
    throw UsageError(fmt::format("free: no live buffer of {} bytes at {:#x}", b.size, b.address));
  s.used.erase(it);
  std::uint64_t addr = b.address, size = (b.size + 4095) & ~std::uint64_t(4095);
  auto next = s.free.lower_bound(addr);
  if (next != s.free.end() && next->first == addr + size) {
    size += next->second;
    next = s.free.erase(next);
  }
  if (next != s.free.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == addr) {
      addr = prev->first;
      size += prev->second;
      s.free.erase(prev);
    }
  }
  s.free[addr] = size;
}

void Device::write(const Buffer& b, const void* data, std::uint64_t bytes, std::uint64_t offset) {
  impl_->check_range(b, bytes, offset, "write");
  impl_->io({{Step::write, b.address + offset, bytes, const_cast<void*>(data)}}, "a copy to the device");
}

void Device::preload(const Buffer& b, const void* data, std::uint64_t bytes, std::uint64_t offset) {
  Impl& d = *impl_;
  d.check_range(b, bytes, offset, "preload");
  std::uint64_t done = 0;
  if (!d.link || d.link->local(d.chip)) {
    done = d.platform->debug_write(b.address + offset, data, bytes);
  } else {
    std::string arg(8, '\0');
    const std::uint64_t addr = b.address + offset;
    std::memcpy(arg.data(), &addr, 8);
    arg.append(static_cast<const char*>(data), bytes);
    const std::string answer = d.link->ask(d.chip, kDebugWrite, arg);
    if (answer.size() == 8) std::memcpy(&done, answer.data(), 8);
  }
  if (done != bytes) throw UsageError(fmt::format("preload of {} bytes at {:#x}: the memory took {}", bytes, b.address + offset, done));
}

void Device::hold_io() {
  if (impl_->link) impl_->holding = true;
}

void Device::send_io() {
  if (impl_->holding) impl_->send_held();
}

void Device::wait_io() {
  if (impl_->holding) impl_->send_held();
  impl_->wait_posted();
}

void Device::read_post(const Buffer& b, void* data, std::uint64_t bytes, std::uint64_t offset) {
  Impl& d = *impl_;
  if (!d.link) return read(b, data, bytes, offset);
  d.check_range(b, bytes, offset, "read");
  if (d.holding) d.send_held();
  for (const Impl::Posted& p : d.posted)
    if (!p.into) {  // after the writes posted before it: a chip takes the host's requests in order
      d.wait_posted();
      break;
    }
  d.posted.push_back({d.link->post(d.chip, {{Step::read, b.address + offset, bytes, data}}), data, bytes});
}

void Device::read(const Buffer& b, void* data, std::uint64_t bytes, std::uint64_t offset) {
  impl_->check_range(b, bytes, offset, "read");
  impl_->io({{Step::read, b.address + offset, bytes, data}}, "a copy from the device");
}

std::uint32_t Device::read32(std::uint64_t address) {
  if (address % 4) throw UsageError(fmt::format("read32 at {:#x}: not 4-byte aligned", address));
  std::uint32_t v = 0;
  impl_->io({{Step::read, address, 4, &v}}, "a register read");
  return v;
}

void Device::write32(std::uint64_t address, std::uint32_t value) {
  if (address % 4) throw UsageError(fmt::format("write32 at {:#x}: not 4-byte aligned", address));
  impl_->io({{Step::write, address, 4, &value}}, "a register write");
}

Event Device::submit(tp_command c) {
  Impl& d = *impl_;
  if (d.submitted - d.host().completed() >= TP_RING_ENTRIES)
    d.run_until([&] { return d.submitted - d.host().completed() < TP_RING_ENTRIES; }, "room in the command ring");
  c.id = d.next_id++;
  const std::uint64_t ring = d.stacks[0].base;
  const std::uint32_t slot = d.submitted % TP_RING_ENTRIES;
  d.commands[c.id] = c;
  std::uint32_t produced = d.submitted + 1, bell = TP_BELL_COMMANDS;
  d.io({{Step::write, ring + TP_CMD_RING + slot * sizeof c, sizeof c, &c},
        {Step::write, ring + TP_PRODUCED, 4, &produced},
        {Step::mailbox, detail::M::DOORBELL_RING, 4, &bell}},
       "a command submission");
  ++d.submitted;
  return Event{c.id};
}

tp_completion Device::wait(Event e) {
  Impl& d = *impl_;
  auto cmd = d.commands.find(e.id);
  if (cmd == d.commands.end()) throw UsageError(fmt::format("wait: no command {} was submitted", e.id));
  d.run_until([&] { return d.host().completions.count(e.id) != 0; }, fmt::format("command {}", e.id));
  const tp_completion c = d.host().completions.at(e.id);
  d.reported.insert(e.id);
  if (auto b = d.program_buffers.find(e.id); b != d.program_buffers.end()) {
    free(b->second);
    d.program_buffers.erase(b);
  }
  if (c.status != TP_OK) {
    static const char* const ops[] = {"nop", "load", "launch", "collective"};
    const char* op = c.opcode < std::size(ops) ? ops[c.opcode] : "unknown";
    std::string where;
    switch (c.status) {
      case TP_KERNEL_FAULT:
        where = fmt::format(" on tile {}: mcause {:#x} at pc {:#x}", c.tile, c.detail, c.detail2);
        break;
      case TP_KERNEL_ERROR: where = fmt::format(" on tile {}: exit code {}", c.tile, c.detail); break;
      case TP_TIMEOUT: where = fmt::format(" on tile {} after {} us", c.tile, c.detail); break;
      case TP_DMA_ERROR: where = fmt::format(" on tile {}: DMA error code {}", c.tile, c.detail); break;
      case TP_BUSY_TILE: where = fmt::format(": tile {} is running a kernel", c.tile); break;
      case TP_BAD_TILE: where = fmt::format(": mask {:#x} (the device has {} tiles)", c.detail, d.tiles); break;
      case TP_COMM_ERROR:
        where = c.detail == c2c::kCommAborted
                    ? fmt::format(": chip {} gave up its collectives (the communication engine's error code {})", c.detail2,
                                  c.detail)
                : c.detail ? fmt::format(": the communication engine's error code {} (address low word {:#x})", c.detail,
                                         c.detail2)
                           : std::string(": the chip has no communication engine");
        break;
      default: where = fmt::format(" ({:#x})", c.detail); break;
    }
    DeviceError error(fmt::format("command {} ({}): {}{}", c.id, op, status_name(c.status), where), c);
    if (c.opcode == TP_COLLECTIVE && c.status == TP_COMM_ERROR && c.detail == c2c::kCommAborted)
      error.gave_up = static_cast<int>(c.detail2);
    if (auto g = d.graph_launches.find(e.id); g != d.graph_launches.end()) {
      d.name_graph_failure(g->second, c, error);
      d.graph_launches.erase(g);
    }
    throw error;
  }
  if (auto g = d.graph_launches.find(e.id); g != d.graph_launches.end()) {
    d.graph_last[g->second.programs.address] = e.id;
    d.graph_launches.erase(g);
  }
  return c;
}

void Device::synchronize() {
  Impl& d = *impl_;
  d.run_until([&] { return d.host().completed() == d.submitted; }, "every command");
  for (auto it = d.program_buffers.begin(); it != d.program_buffers.end();) {
    free(it->second);
    it = d.program_buffers.erase(it);
  }
  // Failures nobody has seen yet, the first one.
  for (const tp_completion& c : d.host().order)
    if (c.status != TP_OK && !d.reported.count(c.id)) wait(Event{c.id});
  for (const auto& [id, g] : d.graph_launches) d.graph_last[g.programs.address] = id;
  d.graph_launches.clear();
}

Kernel Device::load_kernel(const std::string& path, std::uint32_t tiles) {
  Impl& d = *impl_;
  const ElfImage elf = ElfImage::read(path);
  if (elf.xlen != 32) throw UsageError(fmt::format("{}: an RV{} program cannot run on a tile's RV32 core", path, elf.xlen));
  if (elf.segments.empty()) throw UsageError(path + ": no loadable segment");
  std::uint64_t lo = ~0ull, hi = 0;
  for (const auto& s : elf.segments) lo = std::min(lo, s.addr), hi = std::max(hi, s.addr + s.memsz);
  const std::uint64_t spm = tile::Tile::kLocalSpm, spm_size = d.facts.spm_size;
  if (lo < spm || hi > spm + spm_size)
    throw UsageError(fmt::format("{}: its image [{:#x}, {:#x}) lies outside a tile's scratchpad, [{:#x}, {:#x})", path,
                                 lo, hi, spm, spm + spm_size));
  std::vector<std::uint8_t> image(hi - lo, 0);
  for (const auto& s : elf.segments) std::copy(s.data.begin(), s.data.end(), image.begin() + (s.addr - lo));
  Kernel k;
  k.name = path.substr(path.find_last_of('/') + 1);
  k.entry = static_cast<std::uint32_t>(elf.entry);
  k.tiles = tiles;
  k.image = alloc(image.size());
  write(k.image, image.data(), image.size());
  tp_command c{};
  c.opcode = TP_LOAD;
  c.tiles = tiles;
  c.addr = k.image.address;
  c.size = static_cast<std::uint32_t>(image.size());
  c.offset = static_cast<std::uint32_t>(lo - spm);
  wait(submit(c));
  return k;
}

Stream Device::stream() { return Stream{impl_->next_stream++}; }

Event Device::launch(const Kernel& k, const std::vector<std::uint32_t>& args, std::uint32_t tiles,
                     std::uint32_t timeout_us, Stream stream, std::uint32_t group) {
  if (args.size() > 16) throw UsageError(fmt::format("launch: {} argument words; a kernel takes at most 16", args.size()));
  if (tiles & ~k.tiles)
    throw UsageError(fmt::format("launch: tiles {:#x} include tiles {} is not loaded on ({:#x})", tiles, k.name, k.tiles));
  tp_command c{};
  c.opcode = TP_LAUNCH;
  c.tiles = tiles ? tiles : k.tiles;
  c.entry = k.entry;
  c.timeout_us = timeout_us;
  c.nargs = static_cast<std::uint32_t>(args.size());
  c.stream = stream.id;
  c.group = group;
  std::copy(args.begin(), args.end(), c.args);
  return submit(c);
}

Event Device::run(const Kernel& program_kernel, const TileProgram& p, std::uint32_t tiles, std::uint32_t timeout_us,
                  Stream stream) {
  const auto& ops = p.ops();
  if (ops.size() > TKP_MAX_OPS)
    throw UsageError(fmt::format("run: a tile program holds at most {} operations, not {}", TKP_MAX_OPS, ops.size()));
  if (ops.empty()) throw UsageError("run: an empty tile program");
  const Buffer b = alloc(ops.size() * sizeof(tkp_op));
  write(b, ops.data(), ops.size() * sizeof(tkp_op));
  const Event e = launch(program_kernel, {lo(b.address), hi(b.address), static_cast<std::uint32_t>(ops.size())}, tiles,
                         timeout_us, stream);
  impl_->program_buffers[e.id] = b;
  return e;
}

Event Device::run(const Kernel& program_kernel, const std::vector<std::pair<unsigned, TileProgram>>& per_tile,
                  std::uint32_t timeout_us, Stream stream) {
  Impl& d = *impl_;
  if (per_tile.empty()) throw UsageError("run: no tile programs");
  std::vector<unsigned> hart(d.tiles);
  unsigned harts = 0;
  for (unsigned t = 0; t < d.tiles; ++t) {
    if (!d.facts.tiles[t].core) throw UsageError(fmt::format("run: tile {} has no core", t));
    hart[t] = d.facts.tiles[t].hart;
    harts = std::max(harts, hart[t] + 1);
  }
  std::uint32_t mask = 0;
  std::size_t ops = 0;
  for (const auto& [t, p] : per_tile) {
    if (t >= d.tiles) throw UsageError(fmt::format("run: tile {} does not exist (the device has {})", t, d.tiles));
    if (mask >> t & 1) throw UsageError(fmt::format("run: two programs for tile {}", t));
    if (p.ops().empty() || p.ops().size() > TKP_MAX_OPS)
      throw UsageError(fmt::format("run: tile {}'s program has {} operations (1 to {})", t, p.ops().size(), TKP_MAX_OPS));
    mask |= 1u << t;
    ops += p.ops().size();
  }
  const std::uint64_t table_bytes = 16ull * harts;
  const Buffer b = alloc(table_bytes + ops * sizeof(tkp_op));
  std::vector<std::uint8_t> bytes(table_bytes + ops * sizeof(tkp_op), 0);
  std::uint64_t at = table_bytes;
  for (const auto& [t, p] : per_tile) {
    const std::uint32_t entry[4] = {lo(b.address + at), hi(b.address + at), static_cast<std::uint32_t>(p.ops().size()), 0};
    std::memcpy(&bytes[16ull * hart[t]], entry, 16);
    std::memcpy(&bytes[at], p.ops().data(), p.ops().size() * sizeof(tkp_op));
    at += p.ops().size() * sizeof(tkp_op);
  }
  write(b, bytes.data(), bytes.size());
  const Event e = launch(program_kernel, {lo(b.address), hi(b.address), 0xffffffffu, harts}, mask, timeout_us, stream);
  d.program_buffers[e.id] = b;
  return e;
}

GraphExec Device::instantiate(const Graph& g) {
  Impl& d = *impl_;
  const auto& nodes = g.nodes();
  if (nodes.empty()) throw UsageError("instantiate: an empty graph");
  if (nodes.size() > TKP_MARKS_MAX - 1)
    throw UsageError(fmt::format("instantiate: a graph holds at most {} nodes, not {}", TKP_MARKS_MAX - 1, nodes.size()));
  GraphExec x;
  for (std::size_t k = 0; k < nodes.size(); ++k) {
    std::uint32_t seen = 0;
    for (const auto& [t, p] : nodes[k].per_tile) {
      if (t >= d.tiles)
        throw UsageError(fmt::format("instantiate: node {} '{}': tile {} does not exist (the device has {})", k,
                                     nodes[k].name, t, d.tiles));
      if (seen >> t & 1) throw UsageError(fmt::format("instantiate: node {} '{}': two programs for tile {}", k, nodes[k].name, t));
      seen |= 1u << t;
      for (std::size_t i = 0; i < p.ops().size(); ++i) {
        const tkp_op& o = p.ops()[i];
        auto reserved = [](std::uint32_t field) { return field == TKP_FETCH_SEM + 1 || field == TKP_BARRIER_SEM + 1 ||
                                                         field == TKP_BARRIER_SEM; };
        const bool bad = o.kind == TKP_END || o.kind == TKP_BARRIER || o.kind == TKP_MARK ||
                         ((o.kind == TKP_DMA || o.kind == TKP_GEMM || o.kind == TKP_VEC) &&
                          (reserved(o.sem & 0x1f) || reserved(o.sem >> 8 & 0x1f) || reserved(o.sem >> 16 & 0x1f))) ||
                         (o.kind == TKP_WAIT && reserved(o.w[0] + 1)) || (o.kind == TKP_SIGNAL && reserved(o.w[1] + 1));
        if (bad)
          throw UsageError(fmt::format("instantiate: node {} '{}', tile {}, operation {}: {}", k, nodes[k].name, t, i,
                                       o.kind == TKP_END || o.kind == TKP_BARRIER || o.kind == TKP_MARK
                                           ? "ends, barriers and marks are the graph's own"
                                           : fmt::format("semaphores {}, {} and {} are the graph's own", TKP_FETCH_SEM,
                                                         TKP_BARRIER_SEM, TKP_BARRIER_SEM - 1)));
      }
      if (p.early() > p.ops().size() || p.early() > TKP_BARRIER_EARLY(~0u))
        throw UsageError(fmt::format("instantiate: node {} '{}', tile {}: {} early operations, of {} (at most {})", k,
                                     nodes[k].name, t, p.early(), p.ops().size(), TKP_BARRIER_EARLY(~0u)));
      for (std::size_t i = 0; i < p.early(); ++i) {
        const tkp_op& o = p.ops()[i];
        if (o.kind != TKP_DMA || (o.sem & 0xff) || !(o.w[4] & TILE_DMA_FLAGS_DST_LOCAL_MASK))
          throw UsageError(fmt::format("instantiate: node {} '{}', tile {}, operation {}: an early operation must be a "
                                       "DMA into the scratchpad that waits on no semaphore",
                                       k, nodes[k].name, t, i));
      }
      x.tiles |= 1u << t;
    }
    x.names.push_back(nodes[k].name);
  }
  if (!x.tiles) throw UsageError("instantiate: no node has a tile program");
  std::vector<unsigned> members;
  for (unsigned t = 0; t < d.tiles; ++t)
    if (x.tiles >> t & 1) members.push_back(t);
  if (members.size() > TKP_BARRIER_MAX)
    throw UsageError(fmt::format("instantiate: a graph spans at most {} tiles, not {}", TKP_BARRIER_MAX, members.size()));
  x.timer = members[0];
  for (unsigned t : members) x.harts = std::max(x.harts, d.facts.tiles[t].hart + 1);
  // Each tile's program: its part of every node, then the barrier that
  // ends the node (the timing tile marks the start and each barrier).
  x.starts.assign(d.tiles, {});
  std::vector<std::vector<tkp_op>> program(d.tiles);
  auto append = [](std::vector<tkp_op>& to, std::uint32_t kind, std::initializer_list<std::uint32_t> words) {
    tkp_op o;
    std::memset(&o, 0, sizeof o);
    o.kind = kind;
    std::size_t i = 0;
    for (std::uint32_t w : words) o.w[i++] = w;
    to.push_back(o);
  };
  auto program_of = [&](std::size_t k, unsigned t) -> const TileProgram* {
    for (const auto& [tile, p] : nodes[k].per_tile)
      if (tile == t) return &p;
    return nullptr;
  };
  for (unsigned self = 0; self < members.size(); ++self) {
    const unsigned t = members[self];
    std::vector<tkp_op>& ops = program[t];
    if (t == x.timer) append(ops, TKP_MARK, {TKP_MARKS_OFFSET});
    for (std::size_t k = 0; k < nodes.size(); ++k) {
      x.starts[t].push_back(static_cast<std::uint32_t>(ops.size()));
      if (const TileProgram* p = program_of(k, t)) ops.insert(ops.end(), p->ops().begin(), p->ops().end());
      // The barrier closing node k: the next node's early operations are
      // pushed while it waits, and the timing tile marks its closing.
      const TileProgram* next = k + 1 < nodes.size() ? program_of(k + 1, t) : nullptr;
      tkp_op b;
      std::memset(&b, 0, sizeof b);
      b.kind = TKP_BARRIER;
      b.sem = static_cast<std::uint32_t>(next ? next->early() : 0) |
              (t == x.timer ? static_cast<std::uint32_t>(k + 2) << 16 : 0u);
      b.w[0] = static_cast<std::uint32_t>(members.size()), b.w[1] = self, b.w[2] = TKP_BARRIER_SEM - k % 2;
      for (std::size_t i = 0; i < members.size(); ++i) b.w[3 + i] = static_cast<std::uint32_t>(d.facts.tiles[members[i]].regs);
      ops.push_back(b);
    }
    x.starts[t].push_back(static_cast<std::uint32_t>(ops.size()));  // the end
  }
  // In HBM: each tile's program in the stack nearest it (the tiles fetch
  // their programs as they run, all at once); the table in the first
  // tile's stack, ahead of the programs there.
  const std::uint64_t table_bytes = 16ull * x.harts;
  std::map<unsigned, std::vector<unsigned>> by_stack;
  for (unsigned t : members) by_stack[stack_near(t)].push_back(t);
  const unsigned first_stack = stack_near(members[0]);
  std::map<unsigned, Buffer> buffers;
  for (const auto& [stack, tiles] : by_stack) {
    std::uint64_t bytes = stack == first_stack ? table_bytes : 0;
    for (unsigned t : tiles) bytes += program[t].size() * sizeof(tkp_op);
    buffers[stack] = alloc(bytes, stack);
    if (stack == first_stack) x.programs = buffers[stack];
    else x.near.push_back(buffers[stack]);
  }
  std::vector<std::uint8_t> table(table_bytes, 0);
  std::map<unsigned, std::vector<std::uint8_t>> images;
  for (const auto& [stack, tiles] : by_stack) {
    std::vector<std::uint8_t>& image = images[stack];
    image.assign(stack == first_stack ? table_bytes : 0, 0);
    for (unsigned t : tiles) {
      const std::uint64_t at = buffers[stack].address + image.size();
      const std::uint32_t entry[4] = {lo(at), hi(at), static_cast<std::uint32_t>(program[t].size()), 0};
      std::memcpy(&table[16ull * d.facts.tiles[t].hart], entry, 16);
      const auto* ops = reinterpret_cast<const std::uint8_t*>(program[t].data());
      image.insert(image.end(), ops, ops + program[t].size() * sizeof(tkp_op));
    }
  }
  std::memcpy(images[first_stack].data(), table.data(), table_bytes);
  for (const auto& [stack, image] : images) write(buffers[stack], image.data(), image.size());
  return x;
}

Event Device::launch_graph(const Kernel& program_kernel, const GraphExec& g, std::uint32_t timeout_us, Stream stream,
                           std::uint32_t group) {
  if (!g.tiles || !g.programs.size) throw UsageError("launch_graph: a graph that was not instantiated");
  impl_->check_range(g.programs, g.programs.size, 0, "launch_graph");
  const Event e = launch(program_kernel, {lo(g.programs.address), hi(g.programs.address), 0xfffffffdu, g.harts}, g.tiles,
                         timeout_us, stream, group);
  impl_->graph_launches[e.id] = g;
  return e;
}

void Device::free(const GraphExec& g) {
  impl_->graph_last.erase(g.programs.address);
  free(g.programs);
  for (const Buffer& b : g.near) free(b);
}

std::vector<double> Device::node_seconds(const GraphExec& g) const {
  const Impl& d = *impl_;
  if (!d.graph_last.count(g.programs.address)) throw UsageError("node_seconds: the graph has no completed launch");
  std::vector<std::uint64_t> marks(g.names.size() + 1);
  const ChipFacts::Tile& f = d.facts.tiles.at(g.timer);
  d.debug_read(f.spm + TKP_MARKS_OFFSET, marks.data(), marks.size() * 8);
  std::vector<double> out;
  for (std::size_t k = 0; k + 1 < marks.size(); ++k) out.push_back(static_cast<double>(marks[k + 1] - marks[k]) * f.period);
  return out;
}

unsigned Device::stack_near(unsigned t) const {
  const Impl& d = *impl_;
  if (t >= d.tiles) throw UsageError(fmt::format("stack_near: tile {} does not exist (the device has {})", t, d.tiles));
  return d.facts.near.at(t);
}

double Device::simulated_seconds() const { return sc_core::sc_time_stamp().to_seconds(); }

nlohmann::ordered_json Device::stats(const std::string& prefix) const {
  const Impl& d = *impl_;
  if (!d.link || d.link->local(d.chip)) return d.platform->stats(prefix);
  return nlohmann::ordered_json::parse(d.link->ask(d.chip, kStats, prefix));
}

Device::Energy Device::energy() const {
  const Impl& d = *impl_;
  if (!d.link || d.link->local(d.chip)) return energy_of(d.facts.meter);
  const auto j = nlohmann::ordered_json::parse(d.link->ask(d.chip, kEnergy, ""));
  Energy e;
  e.joules = j.at("joules").get<double>();
  e.domains = j.at("domains").get<std::vector<std::string>>();
  e.dynamic_joules = j.at("dynamic").get<std::vector<double>>();
  e.static_watts = j.at("static").get<std::vector<double>>();
  return e;
}

const roofline::Limits& Device::limits() const { return impl_->facts.limits; }

roofline::Report Device::roofline(const nlohmann::ordered_json& before, const nlohmann::ordered_json& after) const {
  return roofline::bound(limits(), before, after);
}

Event Device::collective(std::uint32_t ce_op, const Buffer& src, const Buffer& dst, std::uint64_t count,
                         const Buffer* table, Stream stream) {
  impl_->check_collective(src, dst, table);
  tp_command c{};
  c.opcode = TP_COLLECTIVE;
  c.entry = ce_op;
  c.addr = src.address;
  c.args[0] = lo(dst.address), c.args[1] = hi(dst.address);
  c.args[2] = lo(count), c.args[3] = hi(count);
  if (table) c.args[4] = lo(table->address), c.args[5] = hi(table->address);
  c.stream = stream.id;
  return submit(c);
}

std::uint64_t Device::global(const Buffer& b) const {
  // The window is the fabric's, as its instance places it.
  const ChipFacts& f = impl_->facts;
  if (f.c2c) return c2c::global_address(b.chip, b.address, f.global_base, f.chip_shift);
  throw UsageError("global: the chip has no chip-to-chip fabric (type c2c), so no global window");
}

std::uint64_t Device::fabric_registers() const {
  const ChipFacts& f = impl_->facts;
  if (!f.c2c || !f.fabric_regs) throw UsageError("fabric_registers: the chip has no chip-to-chip fabric (type c2c) with registers");
  return f.fabric_regs;
}

void Device::abort_collectives(std::uint32_t group) {
  write32(global(Buffer{fabric_registers() + regs::c2c::kBlock.regs[regs::c2c::CE_ABORT].offset, 4, impl_->chip}), group | 1u);
}

void Device::reset_collectives(std::uint32_t round) {
  write32(global(Buffer{fabric_registers() + regs::c2c::kBlock.regs[regs::c2c::CE_RESET].offset, 4, impl_->chip}), round);
}

std::uint64_t Device::semaphore(unsigned t, unsigned s) const {
  const ChipFacts& f = impl_->facts;
  if (t >= impl_->tiles) throw UsageError(fmt::format("semaphore: tile {} does not exist (the device has {})", t, impl_->tiles));
  if (s >= 16) throw UsageError(fmt::format("semaphore: a tile has semaphores 0 to 15, not {}", s));
  return global(Buffer{f.tiles[t].regs + TILE_SEM_OFFSET + 4ull * s, 4, impl_->chip});
}

// ---- systems of chips ------------------------------------------------------------

struct Cluster::Impl {
  std::unique_ptr<Session> session;
  std::unique_ptr<Link> link;
  std::vector<std::unique_ptr<Device>> devices;
};

Cluster::Cluster(const Device::Options& options) : impl_(std::make_unique<Impl>()) {
  Impl& c = *impl_;
  Ranks* ranks = launched_ranks() > 1 ? process_ranks() : nullptr;
  c.session = open_session(options, ranks);
  Session& s = *c.session;
  if (!s.is_system()) throw UsageError(s.file() + " describes one chip, not a system: open it with rt::Device");
  elaborate(s);  // over ranks, each rank its own chips
  c.link = std::make_unique<Link>(s, [&s](unsigned chip, std::uint8_t op, const std::string& arg) {
    return answer_untimed(s, *s.held(chip), op, arg);
  });
  for (unsigned k = 0; k < s.chips(); ++k) {
    auto d = std::make_unique<Device::Impl>();
    d->opt = options;
    d->chip = k;
    d->chips = s.chips();
    d->link = c.link.get();
    try {
      d->describe(s.chip_spec(k));
    } catch (const ConfigError& e) {
      throw UsageError(e.what());
    }
    if (Platform* p = s.held(k)) {
      d->attach(*p, fmt::format("host_agent_chip{}", k));
      d->facts = facts_of(*p);
      c.link->hold(k, *d->agent);
    }
    c.devices.push_back(std::unique_ptr<Device>(new Device(std::move(d))));
  }
  sc_core::sc_start(sc_core::SC_ZERO_TIME);
  if (s.rank() != 0) {
    // Another rank: it serves its chips to rank 0's host program until
    // that closes the Cluster, then ends (the program goes on on rank 0).
    c.link->serve();
    c.devices.clear();
    c.session.reset();
    std::fflush(stdout);
    std::exit(0);
  }
  try {
    for (unsigned k = 0; k < s.chips(); ++k)
      if (!c.link->local(k))
        c.devices[k]->impl_->facts = ChipFacts::load(nlohmann::ordered_json::parse(c.link->ask(k, kFacts, "")));
    for (auto& d : c.devices) d->impl_->boot();
  } catch (...) {
    c.link->round(false, true);  // the other ranks stop serving
    throw;
  }
  if (s.ranks() > 1) {
    g_live_link = c.link.get();
    static const bool registered = std::atexit([] {
      if (g_live_link) g_live_link->round(false, true);
    }) == 0;
    (void)registered;
  }
}

Cluster::~Cluster() {
  if (!impl_ || !impl_->link) return;
  if (g_live_link == impl_->link.get()) g_live_link = nullptr;
  try {
    impl_->link->round(false, true);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tessera runtime: closing the cluster: %s\n", e.what());
  }
}

unsigned Cluster::chips() const { return static_cast<unsigned>(impl_->devices.size()); }

Device& Cluster::chip(unsigned k) {
  if (k >= impl_->devices.size())
    throw UsageError(fmt::format("chip {}: the system has {} chips", k, impl_->devices.size()));
  return *impl_->devices[k];
}

std::vector<Event> Cluster::collective(std::uint32_t ce_op, const std::vector<Buffer>& src, const std::vector<Buffer>& dst,
                                       std::uint64_t count, const std::vector<Buffer>& tables) {
  const unsigned n = chips();
  if (src.size() != n || dst.size() != n || (!tables.empty() && tables.size() != n))
    throw UsageError(fmt::format("collective: one source, destination (and table) buffer per chip ({} chips)", n));
  // Every chip's buffers checked before any chip posts: a chip that posted
  // would otherwise wait in a collective the others never join (and pair
  // it with their next one).
  for (unsigned k = 0; k < n; ++k) {
    try {
      chip(k).impl_->check_collective(src[k], dst[k], tables.empty() ? nullptr : &tables[k]);
    } catch (const UsageError& e) {
      throw UsageError(fmt::format("collective: chip {}'s part: {}", k, e.what()));
    }
  }
  std::vector<Event> events;
  for (unsigned k = 0; k < n; ++k)
    events.push_back(chip(k).collective(ce_op, src[k], dst[k], count, tables.empty() ? nullptr : &tables[k]));
  return events;
}

std::uint32_t Device::new_round() {
  static std::uint32_t rounds = 0;
  return ++rounds;
}

void Cluster::wait(const std::vector<Event>& events) {
  const unsigned n = chips();
  if (events.size() != n) throw UsageError(fmt::format("wait: one event per chip ({} chips), not {}", n, events.size()));
  for (unsigned k = 0; k < n; ++k) {
    Device& d = chip(k);
    if (!d.impl_->commands.count(events[k].id)) d.wait(events[k]);  // (throws: never submitted)
    d.send_io();
  }
  // Every chip watched at once: a chip waiting in a collective for one
  // whose part failed would hold a chip-by-chip wait until the timeout.
  // A chip whose collective failed gives its collectives over the group up
  // (as its CP does for a failed launch), so that the others fail theirs at
  // once (code 9, naming it).
  std::vector<bool> done(n, false);
  std::vector<std::exception_ptr> errors(n);
  std::exception_ptr cause;
  auto arrived = [&](unsigned k) { return !done[k] && chip(k).impl_->host().completions.count(events[k].id) != 0; };
  for (unsigned left = n; left;) {
    chip(0).impl_->run_until(
        [&] {
          for (unsigned k = 0; k < n; ++k)
            if (arrived(k)) return true;
          return false;
        },
        fmt::format("the commands of a cluster wait ({} chips)", left));
    for (unsigned k = 0; k < n; ++k) {
      if (!arrived(k)) continue;
      done[k] = true, --left;
      try {
        chip(k).wait(events[k]);
      } catch (const DeviceError& e) {
        errors[k] = std::current_exception();
        if (e.gave_up >= 0) continue;  // a consequence
        if (!cause) cause = errors[k];
        const tp_command& c = chip(k).impl_->commands.at(events[k].id);
        if (c.opcode == TP_COLLECTIVE && e.status() == TP_COMM_ERROR && e.completion.detail) {
          try {
            chip(k).abort_collectives(c.entry & TP_CE_GROUP(0x3f, 0xff));
          } catch (const UsageError&) {
          }
        }
      } catch (...) {
        errors[k] = std::current_exception();
        if (!cause) cause = errors[k];
      }
    }
  }
  std::exception_ptr first;
  for (const std::exception_ptr& e : errors)
    if (e && !first) first = e;
  if (!first) return;
  // The engines start afresh (a new round on every chip) where nothing else
  // is under way; else their collectives over the group keep failing at
  // once until the host resets them (reset_collectives).
  bool idle = true;
  for (unsigned k = 0; k < n; ++k) idle &= chip(k).impl_->submitted == chip(k).impl_->host().completed();
  if (idle) {
    const std::uint32_t round = Device::new_round();
    for (unsigned k = 0; k < n; ++k) {
      try {
        chip(k).reset_collectives(round);
      } catch (const UsageError&) {
      }
    }
  }
  std::rethrow_exception(cause ? cause : first);
}

double Cluster::simulated_seconds() const { return sc_core::sc_time_stamp().to_seconds(); }

nlohmann::ordered_json Cluster::stats() const {
  Impl& c = *impl_;
  Session& s = *c.session;
  if (s.ranks() == 1) return s.system()->stats();
  // Every rank's counters, the instances in chip order, as one process lists them.
  std::vector<nlohmann::ordered_json> of(s.ranks());
  for (unsigned k = 0; k < s.chips(); ++k) {
    const unsigned r = s.owner(k);
    if (!of[r].is_null()) continue;
    of[r] = r == 0 ? s.system()->stats() : nlohmann::ordered_json::parse(c.link->ask(k, kRankStats, ""));
  }
  nlohmann::ordered_json all = nlohmann::ordered_json::object();
  for (unsigned k = 0; k < s.chips(); ++k) {
    const std::string prefix = fmt::format("chip{}.", k);
    for (auto it = of[s.owner(k)].begin(); it != of[s.owner(k)].end(); ++it)
      if (it.key().rfind(prefix, 0) == 0) all[it.key()] = it.value();
  }
  return all;
}

nlohmann::ordered_json Cluster::synchronisation() const {
  Impl& c = *impl_;
  Session& s = *c.session;
  nlohmann::ordered_json out = s.rank_report();
  if (s.ranks() == 1) return out;
  // Every rank's wait, asked of a chip it holds: the other ranks wait
  // while rank 0's host program works and while rank 0's chips alone
  // have work.
  std::vector<double> waited(s.ranks(), -1);
  waited[0] = out["waited_s"].get<double>();
  for (unsigned k = 0; k < s.chips(); ++k)
    if (waited[s.owner(k)] < 0)
      waited[s.owner(k)] = nlohmann::ordered_json::parse(c.link->ask(k, kRankSync, ""))["waited_s"].get<double>();
  out["waited_by_rank_s"] = waited;
  out["longest_wait_s"] = *std::max_element(waited.begin(), waited.end());
  return out;
}

}  // namespace tessera::rt

// A host program has its own main(). libsystemc also carries a main() that
// calls sc_main(), never used here, but the shared library still needs the
// symbol: a weak one, which any program that does define sc_main replaces.
__attribute__((weak)) int sc_main(int, char**) {
  std::fprintf(stderr, "tessera runtime: sc_main called; a host program starts at main()\n");
  return 1;
}
