#include "tessera/runtime.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <optional>
#include <set>
#include <systemc>

#include "common/log.hpp"
#include "common/paths.hpp"
#include "common/payload.hpp"
#include "common/sim.hpp"
#include "mailbox_regs.hpp"
#include "platform.hpp"
#include "session.hpp"
#include "system.hpp"
#include "tessera/program.hpp"
#include "c2c/c2c.hpp"
#include "noc/noc.hpp"
#include "noc/noc_ip.hpp"
#include "tile/tile.hpp"

namespace tessera::rt {

namespace M = regs::mailbox;

const char* status_name(std::uint32_t s) {
  static const char* const names[] = {"ok",           "bad opcode",   "bad tile mask", "bad pointer", "bad size",
                                      "DMA error",    "kernel fault", "kernel error",  "timeout",     "tile busy",
                                      "collective failed"};
  return s < std::size(names) ? names[s] : "unknown status";
}

namespace {

bool g_simulation_exists = false;  // a SystemC simulation elaborates once per process: one Device or Cluster

// The host's side of the chip: the host port into the bus (HBM, through
// the NoC) and the mailbox's host window. Runs the host's accesses in
// SystemC threads so they take simulated time, and collects completions
// when the CP rings.
class HostAgent : public sc_core::sc_module {
 public:
  HostAgent(const sc_core::sc_module_name& n, Platform& p, std::uint64_t ring_base)
      : sc_core::sc_module(n), p_(p), mailbox_(p.target("mailbox", "host_target")), ring_(ring_base) {
    IrqOut* line = p.find("mailbox")->irq_out("host_irq_out", 0);
    if (!line) throw ConfigError("the platform's mailbox has no host interrupt (host_irq_out)");  // elaboration-only
    bell_in_.set_handler([this](bool level) {
      if (level) bell_.notify(sc_core::SC_ZERO_TIME);
    });
    line->bind(bell_in_);
    SC_HAS_PROCESS(HostAgent);
    SC_THREAD(collect);
  }

  // Device-memory access from a SystemC thread, through the platform's host
  // port when it has one (else the system bus): up to kInFlight chunks at
  // once, as a DMA engine on the host side would keep them.
  void access(tlm::tlm_command cmd, std::uint64_t addr, void* data, std::uint64_t len) {
    auto* bytes = static_cast<std::uint8_t*>(data);
    std::uint64_t next = 0;
    unsigned active = 0;
    std::string error;
    sc_core::sc_event finished;
    auto worker = [&] {
      while (next < len && error.empty()) {
        const std::uint64_t at = next;
        const unsigned chunk = static_cast<unsigned>(std::min<std::uint64_t>(len - at, kChunk));
        next += chunk;
        sc_core::sc_time d;
        tlm::tlm_response_status s;
        if (port_) {
          tlm::tlm_generic_payload t;
          set_access(t, cmd, addr + at, bytes + at, chunk);
          port_->b_transport(t, d);
          s = t.get_response_status();
        } else {
          s = p_.transport(cmd, addr + at, bytes + at, chunk, d);
        }
        sc_core::wait(d);
        if (s != tlm::TLM_OK_RESPONSE && error.empty())
          error = fmt::format("host port: {} of {} bytes at {:#x} failed ({})",
                              cmd == tlm::TLM_READ_COMMAND ? "read" : "write", chunk, addr + at, static_cast<int>(s));
      }
      if (--active == 0) finished.notify(sc_core::SC_ZERO_TIME);
    };
    const std::uint64_t chunks = (len + kChunk - 1) / kChunk;
    active = static_cast<unsigned>(std::min<std::uint64_t>(kInFlight, chunks));
    if (!active) return;
    for (unsigned i = 0, n = active; i < n; ++i) sc_core::sc_spawn(worker);
    while (active) sc_core::wait(finished);
    if (!error.empty()) throw UsageError(error);
  }
  void mailbox_write(unsigned reg, std::uint32_t v) { mailbox_access(tlm::TLM_WRITE_COMMAND, reg, v); }
  std::uint32_t mailbox_read(unsigned reg) { return mailbox_access(tlm::TLM_READ_COMMAND, reg, 0); }

  bool ready = false;
  std::uint32_t version = 0;
  std::uint32_t completed = 0;  // completions collected
  std::map<std::uint32_t, tp_completion> completions;
  std::vector<tp_completion> order;  // as they came
  std::function<void()> on_news;

 private:
  static constexpr unsigned kChunk = 4096, kInFlight = 32;
  tlm::tlm_fw_transport_if<>* port_ = nullptr;  // the platform's host port, if any

 public:
  void use_port(tlm::tlm_fw_transport_if<>& port) { port_ = &port; }

 private:

  std::uint32_t mailbox_access(tlm::tlm_command cmd, unsigned reg, std::uint32_t v) {
    sc_core::sc_time d;
    {
      // The payload ends before the wait: a thread the simulation leaves
      // suspended holds nothing on its stack.
      tlm::tlm_generic_payload t;
      set_access(t, cmd, M::kBlock.regs[reg].offset, &v, 4);
      mailbox_.b_transport(t, d);
    }
    sc_core::wait(d);
    return v;
  }

  void collect() {
    mailbox_write(M::IRQ_ENABLE, M::IRQ_ENABLE_f::DOORBELL_MASK);
    for (;;) {
      std::uint32_t bells = mailbox_read(M::DOORBELL);
      while (!bells) {
        sc_core::wait(bell_);
        bells = mailbox_read(M::DOORBELL);
      }
      mailbox_write(M::DOORBELL, bells);
      if (bells & TP_BELL_READY) {
        access(tlm::TLM_READ_COMMAND, ring_ + TP_READY, &version, 4);
        ready = true;
      }
      if (bells & TP_BELL_COMPLETIONS) {
        std::uint32_t count = 0;
        access(tlm::TLM_READ_COMMAND, ring_ + TP_COMPLETED, &count, 4);
        while (completed != count) {
          tp_completion c;
          access(tlm::TLM_READ_COMMAND, ring_ + TP_CPL_RING + (completed % TP_RING_ENTRIES) * sizeof c, &c,
                 sizeof c);
          completions[c.id] = c;
          order.push_back(c);
          ++completed;
        }
      }
      if (on_news) on_news();
    }
  }

  Platform& p_;
  tlm::tlm_fw_transport_if<>& mailbox_;
  std::uint64_t ring_;
  IrqIn bell_in_;
  sc_core::sc_event bell_;
};

std::string default_firmware() { return data_file(DataKind::firmware, "cmdproc.elf"); }

}  // namespace

struct Device::Impl {
  Options opt;
  std::unique_ptr<Session> session;  // a chip alone: its session (a Cluster's chips share the Cluster's)
  Platform* platform = nullptr;
  std::optional<roofline::Limits> limits;  // computed on first use
  unsigned chip = 0, chips = 1;
  std::unique_ptr<HostAgent> agent;
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
  struct TileFacts {
    std::uint64_t regs = 0, spm = 0;  // the register window's and the scratchpad's global addresses
    double period = 1e-9;             // the core's clock period, seconds
    unsigned hart = 0;
  };
  std::vector<TileFacts> tile_facts;  // by tile index
  std::map<std::uint32_t, GraphExec> graph_launches;  // by command id: what names a failure
  std::map<std::uint64_t, std::uint32_t> graph_last;   // a graph (its programs' address): its last completed launch
  mutable std::vector<unsigned> near;                   // by tile: stack_near(), computed on first use

  // Elaboration: the HBM stacks, the tiles and the host's agent of chip `p`.
  void attach(Platform& p, const PlatformSpec& s, const std::string& agent_name) {
    platform = &p;
    for (const InstanceSpec& i : s.instances) {
      if (i.type == "hbm" && i.base) stacks.push_back({*i.base, i.size, {}, {}});
      if (i.type == "tile") ++tiles;
    }
    if (stacks.empty()) throw ConfigError(s.file + ": the runtime needs an HBM stack (type hbm)");
    tile_facts.resize(tiles);
    for (unsigned t = 0; t < tiles; ++t)
      for (const InstanceSpec& i : s.instances) {
        if (i.name != "tile" + std::to_string(t)) continue;
        for (const auto& [target, base] : i.targets)
          if (target == "csr_target") tile_facts[t].regs = base;
        if (i.base) tile_facts[t].spm = *i.base;
        if (tile::Tile* tile = p.get<tile::Tile>(i.name)) {
          tile_facts[t].period = 1.0 / tile->config().core_clock.value;
          if (tile->core()) tile_facts[t].hart = tile->core()->config().hartid;
        }
      }
    std::sort(stacks.begin(), stacks.end(), [](const auto& a, const auto& b) { return a.base < b.base; });
    stacks[0].free[stacks[0].base + TP_RESERVED] = stacks[0].size - TP_RESERVED;
    for (std::size_t i = 1; i < stacks.size(); ++i) stacks[i].free[stacks[i].base] = stacks[i].size;
    agent = std::make_unique<HostAgent>(agent_name.c_str(), p, stacks[0].base);
    for (const InstanceSpec& i : s.instances)
      if (i.type == "host_port") {
        agent->use_port(p.target(i.name, "host_target"));
        break;
      }
  }
  // After the simulation started: the firmware's ready doorbell.
  void boot() {
    if (!platform->load_error().empty()) throw UsageError(platform->load_error());
    run_until([&] { return agent->ready; },
              chips > 1 ? fmt::format("chip {}'s boot (the command processor's ready doorbell)", chip)
                        : std::string("its boot (the command processor's ready doorbell)"));
    if (agent->version != TP_VERSION)
      throw UsageError(fmt::format("the firmware speaks protocol {:#x}, the runtime {:#x}", agent->version, TP_VERSION));
  }

  // A graph launch failed on completion c's tile: which node, which
  // operation (the exit code names it; after a fault or a timeout, the
  // word the program kernel keeps at TKP_CURSOR_OFFSET).
  void name_graph_failure(const GraphExec& g, const tp_completion& c, DeviceError& error) {
    unsigned tile = c.tile;
    auto cursor = [&](unsigned t) {
      std::uint32_t at = 0;
      return platform->debug_read(tile_facts[t].spm + TKP_CURSOR_OFFSET, &at, 4) == 4 ? std::int64_t{at} : -1;
    };
    std::int64_t at = -1;
    if (c.status == TP_TIMEOUT) {
      // The watchdog names the first tile still running; the one to blame
      // is the first not waiting at one of the graph's barriers (node k's
      // barrier closes its part of node k, before the timing tile's mark).
      for (unsigned t = 0; t < g.starts.size() && at < 0; ++t) {
        if (g.starts[t].empty()) continue;
        const std::int64_t here = cursor(t);
        bool at_barrier = false;
        for (std::size_t k = 1; k < g.starts[t].size(); ++k)
          at_barrier |= here == std::int64_t{g.starts[t][k]} - (t == g.timer ? 2 : 1);
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
    static const char* const codes[] = {"", "", "a bad operation", "an engine error"};
    const char* why = c.status == TP_KERNEL_ERROR && (c.detail & 0xff) < 4 ? codes[c.detail & 0xff] : "";
    // A timeout blamed on another tile than the watchdog's first runner: say so.
    const std::string base = tile == c.tile ? std::string(error.what())
                                            : fmt::format("command {} (launch): timeout after {} us (the other tiles "
                                                          "waited at a barrier)", c.id, c.detail);
    const std::string what = fmt::format("{}; graph node {} '{}', operation {} of its program on tile {}{}{}", base, n,
                                         error.node, error.op, tile, *why ? ": " : "", why);
    tp_completion blamed = c;
    blamed.tile = tile;
    DeviceError named(what, blamed);
    named.node = error.node;
    named.op = error.op;
    error = named;
  }

  // Runs the simulation until `done()` holds, failing after the timeout.
  template <class Done>
  void run_until(Done done, const std::string& what) {
    const sc_core::sc_time limit = sc_core::sc_time_stamp() + sc_core::sc_time(opt.timeout_s, sc_core::SC_SEC);
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

  Stack& stack_of(const Buffer& b) {
    if (b.chip != chip)
      throw UsageError(fmt::format("a buffer of chip {} used on chip {} (copy it, or use its global address)", b.chip, chip));
    for (Stack& s : stacks)
      if (b.address >= s.base && b.address < s.base + s.size) return s;
    throw UsageError(fmt::format("no buffer at {:#x}", b.address));
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

Device::Device() : Device(Options{}) {}

namespace {

// The session of a Device or a Cluster: the platform or system file with
// the options' overrides, the command processor's firmware on every chip,
// the trace and waves. Bad inputs are the host program's: UsageError.
std::unique_ptr<Session> open_session(const Device::Options& o) {
  if (g_simulation_exists) throw UsageError("one Device per process (or one Cluster): a simulated chip elaborates once");
  SessionOptions so;
  so.platform = o.platform;
  if (o.quiet) so.sets.push_back("uart0.tx=none");
  so.sets.insert(so.sets.end(), o.sets.begin(), o.sets.end());
  so.firmware = o.firmware.empty() ? default_firmware() : o.firmware;
  so.top = "device";
  so.trace = o.trace;
  so.waves = o.waves;
  try {
    return std::make_unique<Session>(so);
  } catch (const SessionError& e) {
    throw UsageError(e.what());
  }
}

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
  d.session = open_session(options);
  Session& s = *d.session;
  if (s.is_system())
    throw UsageError(s.file() + " describes a system of chips: open it with rt::Cluster, which gives a Device per chip");
  elaborate(s);
  d.attach(s.chip(), s.chip_spec(), "host_agent");
  sc_core::sc_start(sc_core::SC_ZERO_TIME);
  d.boot();
}

Device::Device(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

unsigned Device::chip() const { return impl_->chip; }
unsigned Device::chips() const { return impl_->chips; }

Device::~Device() = default;

unsigned Device::tiles() const { return impl_->tiles; }

unsigned Device::hbm_stacks() const { return static_cast<unsigned>(impl_->stacks.size()); }

unsigned Device::tile_hart(unsigned t) const {
  tile::Tile* tile = impl_->platform->get<tile::Tile>("tile" + std::to_string(t));
  if (!tile || !tile->core()) throw UsageError(fmt::format("tile_hart: tile {} has no core", t));
  return tile->core()->config().hartid;
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
  impl_->on_device([&] { impl_->agent->access(tlm::TLM_WRITE_COMMAND, b.address + offset, const_cast<void*>(data), bytes); },
                   "a copy to the device");
}

void Device::read(const Buffer& b, void* data, std::uint64_t bytes, std::uint64_t offset) {
  impl_->check_range(b, bytes, offset, "read");
  impl_->on_device([&] { impl_->agent->access(tlm::TLM_READ_COMMAND, b.address + offset, data, bytes); },
                   "a copy from the device");
}

std::uint32_t Device::read32(std::uint64_t address) {
  if (address % 4) throw UsageError(fmt::format("read32 at {:#x}: not 4-byte aligned", address));
  std::uint32_t v = 0;
  impl_->on_device([&] { impl_->agent->access(tlm::TLM_READ_COMMAND, address, &v, 4); }, "a register read");
  return v;
}

void Device::write32(std::uint64_t address, std::uint32_t value) {
  if (address % 4) throw UsageError(fmt::format("write32 at {:#x}: not 4-byte aligned", address));
  impl_->on_device([&] { impl_->agent->access(tlm::TLM_WRITE_COMMAND, address, &value, 4); }, "a register write");
}

Event Device::submit(tp_command c) {
  Impl& d = *impl_;
  if (d.submitted - d.agent->completed >= TP_RING_ENTRIES)
    d.run_until([&] { return d.submitted - d.agent->completed < TP_RING_ENTRIES; }, "room in the command ring");
  c.id = d.next_id++;
  const std::uint64_t ring = d.stacks[0].base;
  const std::uint32_t slot = d.submitted % TP_RING_ENTRIES;
  d.commands[c.id] = c;
  d.on_device(
      [&] {
        d.agent->access(tlm::TLM_WRITE_COMMAND, ring + TP_CMD_RING + slot * sizeof c, &c, sizeof c);
        std::uint32_t produced = d.submitted + 1;
        d.agent->access(tlm::TLM_WRITE_COMMAND, ring + TP_PRODUCED, &produced, 4);
        d.agent->mailbox_write(M::DOORBELL_RING, TP_BELL_COMMANDS);
      },
      "a command submission");
  ++d.submitted;
  return Event{c.id};
}

tp_completion Device::wait(Event e) {
  Impl& d = *impl_;
  auto cmd = d.commands.find(e.id);
  if (cmd == d.commands.end()) throw UsageError(fmt::format("wait: no command {} was submitted", e.id));
  d.run_until([&] { return d.agent->completions.count(e.id) != 0; }, fmt::format("command {}", e.id));
  const tp_completion c = d.agent->completions.at(e.id);
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
        where = c.detail ? fmt::format(": the communication engine's error code {} (address low word {:#x})", c.detail,
                                       c.detail2)
                         : std::string(": the chip has no communication engine");
        break;
      default: where = fmt::format(" ({:#x})", c.detail); break;
    }
    DeviceError error(fmt::format("command {} ({}): {}{}", c.id, op, status_name(c.status), where), c);
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
  d.run_until([&] { return d.agent->completed == d.submitted; }, "every command");
  for (auto it = d.program_buffers.begin(); it != d.program_buffers.end();) {
    free(it->second);
    it = d.program_buffers.erase(it);
  }
  // Failures nobody has seen yet, the first one.
  for (const tp_completion& c : d.agent->order)
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
  const std::uint64_t spm = tile::Tile::kLocalSpm, spm_size = d.platform->get<tile::Tile>("tile0")
                                                            ? d.platform->get<tile::Tile>("tile0")->scratchpad().size()
                                                            : 0;
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
                     std::uint32_t timeout_us, Stream stream) {
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
    tile::Tile* tile = d.platform->get<tile::Tile>("tile" + std::to_string(t));
    if (!tile || !tile->core()) throw UsageError(fmt::format("run: tile {} has no core", t));
    hart[t] = tile->core()->config().hartid;
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
  for (unsigned t : members) x.harts = std::max(x.harts, d.tile_facts[t].hart + 1);
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
  for (unsigned self = 0; self < members.size(); ++self) {
    const unsigned t = members[self];
    std::vector<tkp_op>& ops = program[t];
    if (t == x.timer) append(ops, TKP_MARK, {TKP_MARKS_OFFSET});
    for (std::size_t k = 0; k < nodes.size(); ++k) {
      x.starts[t].push_back(static_cast<std::uint32_t>(ops.size()));
      for (const auto& [tile, p] : nodes[k].per_tile)
        if (tile == t) ops.insert(ops.end(), p.ops().begin(), p.ops().end());
      tkp_op b;
      std::memset(&b, 0, sizeof b);
      b.kind = TKP_BARRIER;
      b.w[0] = static_cast<std::uint32_t>(members.size()), b.w[1] = self, b.w[2] = TKP_BARRIER_SEM - k % 2;
      for (std::size_t i = 0; i < members.size(); ++i) b.w[3 + i] = static_cast<std::uint32_t>(d.tile_facts[members[i]].regs);
      ops.push_back(b);
      if (t == x.timer) append(ops, TKP_MARK, {static_cast<std::uint32_t>(TKP_MARKS_OFFSET + 8 * (k + 1))});
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
      std::memcpy(&table[16ull * d.tile_facts[t].hart], entry, 16);
      const auto* ops = reinterpret_cast<const std::uint8_t*>(program[t].data());
      image.insert(image.end(), ops, ops + program[t].size() * sizeof(tkp_op));
    }
  }
  std::memcpy(images[first_stack].data(), table.data(), table_bytes);
  for (const auto& [stack, image] : images) write(buffers[stack], image.data(), image.size());
  return x;
}

Event Device::launch_graph(const Kernel& program_kernel, const GraphExec& g, std::uint32_t timeout_us, Stream stream) {
  if (!g.tiles || !g.programs.size) throw UsageError("launch_graph: a graph that was not instantiated");
  impl_->check_range(g.programs, g.programs.size, 0, "launch_graph");
  const Event e = launch(program_kernel, {lo(g.programs.address), hi(g.programs.address), 0xfffffffdu, g.harts}, g.tiles,
                         timeout_us, stream);
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
  const Impl::TileFacts& f = d.tile_facts.at(g.timer);
  d.platform->debug_read(f.spm + TKP_MARKS_OFFSET, marks.data(), marks.size() * 8);
  std::vector<double> out;
  for (std::size_t k = 0; k + 1 < marks.size(); ++k) out.push_back(static_cast<double>(marks[k + 1] - marks[k]) * f.period);
  return out;
}

unsigned Device::stack_near(unsigned t) const {
  const Impl& d = *impl_;
  if (t >= d.tiles) throw UsageError(fmt::format("stack_near: tile {} does not exist (the device has {})", t, d.tiles));
  if (d.near.empty()) {
    // The tiles' and the stacks' NoC nodes, from the platform's limits.
    const nlohmann::ordered_json all = d.platform->limits();
    std::vector<int> stack_node(d.stacks.size(), -1);
    std::string noc;
    std::map<std::string, unsigned> tile_node;
    for (const auto& [key, e] : all.items()) {
      const std::string name = e["instance"].get<std::string>();
      if (e["type"] == "tile" && e.contains("node")) tile_node[name] = e["node"].get<unsigned>();
      if (e["type"] == "hbm" && e.contains("node"))
        for (const InstanceSpec& i : d.platform->spec().instances)
          if (i.name == name && i.base)
            for (std::size_t k = 0; k < d.stacks.size(); ++k)
              if (d.stacks[k].base == *i.base) stack_node[k] = e["node"].get<int>(), noc = e["noc"].get<std::string>();
    }
    const noc::Noc* n = noc.empty() ? nullptr : d.platform->get<noc::Noc>(noc);
    d.near.assign(d.tiles, 0);
    for (unsigned tile = 0; tile < d.tiles; ++tile) {
      const auto it = tile_node.find("tile" + std::to_string(tile));
      if (!n || it == tile_node.end()) continue;
      const unsigned node = it->second;
      unsigned best = ~0u;
      for (std::size_t k = 0; k < d.stacks.size(); ++k) {
        if (stack_node[k] < 0) continue;
        const unsigned h = noc::Network::hops(n->config().net, static_cast<unsigned>(stack_node[k]), node);
        if (h < best) best = h, d.near[tile] = static_cast<unsigned>(k);
      }
    }
  }
  return d.near[t];
}

double Device::simulated_seconds() const { return sc_core::sc_time_stamp().to_seconds(); }

nlohmann::ordered_json Device::stats(const std::string& prefix) const { return impl_->platform->stats(prefix); }

const roofline::Limits& Device::limits() const {
  if (!impl_->limits) impl_->limits = roofline::limits(*impl_->platform);
  return *impl_->limits;
}

roofline::Report Device::roofline(const nlohmann::ordered_json& before, const nlohmann::ordered_json& after) const {
  return roofline::bound(limits(), before, after);
}

Event Device::collective(std::uint32_t ce_op, const Buffer& src, const Buffer& dst, std::uint64_t count,
                         const Buffer* table, Stream stream) {
  for (const Buffer* b : {&src, &dst, table}) {
    if (!b) continue;
    impl_->stack_of(*b);
    if (b->chip != impl_->chip)
      throw UsageError(fmt::format("collective: a buffer of chip {} given to chip {}", b->chip, impl_->chip));
  }
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
  for (const InstanceSpec& i : impl_->platform->spec().instances)
    if (auto* f = impl_->platform->get<c2c::C2c>(i.name)) return f->config().global_address(b.chip, b.address);
  throw UsageError("global: the chip has no chip-to-chip fabric (type c2c), so no global window");
}

// ---- systems of chips ------------------------------------------------------------

struct Cluster::Impl {
  std::unique_ptr<Session> session;
  std::vector<std::unique_ptr<Device>> devices;
};

Cluster::Cluster(const Device::Options& options) : impl_(std::make_unique<Impl>()) {
  Impl& c = *impl_;
  c.session = open_session(options);
  Session& s = *c.session;
  if (!s.is_system()) throw UsageError(s.file() + " describes one chip, not a system: open it with rt::Device");
  elaborate(s);
  for (unsigned k = 0; k < s.chips(); ++k) {
    auto d = std::make_unique<Device::Impl>();
    d->opt = options;
    d->chip = k;
    d->chips = s.chips();
    d->attach(s.chip(k), s.chip_spec(k), fmt::format("host_agent_chip{}", k));
    c.devices.push_back(std::unique_ptr<Device>(new Device(std::move(d))));
  }
  sc_core::sc_start(sc_core::SC_ZERO_TIME);
  for (auto& d : c.devices) d->impl_->boot();
}

Cluster::~Cluster() = default;

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
  std::vector<Event> events;
  for (unsigned k = 0; k < n; ++k)
    events.push_back(chip(k).collective(ce_op, src[k], dst[k], count, tables.empty() ? nullptr : &tables[k]));
  return events;
}

void Cluster::wait(const std::vector<Event>& events) {
  if (events.size() != chips())
    throw UsageError(fmt::format("wait: one event per chip ({} chips), not {}", chips(), events.size()));
  for (unsigned k = 0; k < chips(); ++k) chip(k).wait(events[k]);
}

double Cluster::simulated_seconds() const { return sc_core::sc_time_stamp().to_seconds(); }

nlohmann::ordered_json Cluster::stats() const { return impl_->session->system()->stats(); }

}  // namespace tessera::rt

// A host program has its own main(). libsystemc also carries a main() that
// calls sc_main(), never used here, but the shared library still needs the
// symbol: a weak one, which any program that does define sc_main replaces.
__attribute__((weak)) int sc_main(int, char**) {
  std::fprintf(stderr, "tessera runtime: sc_main called; a host program starts at main()\n");
  return 1;
}
