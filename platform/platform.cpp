#include "platform.hpp"

#include <cstring>

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "common/log.hpp"
#include "common/sim.hpp"
#include "common/memory.hpp"
#include "common/payload.hpp"
#include "common/trace.hpp"
#include "common/waves.hpp"
#include "noc/noc_ip.hpp"
#include "riscv/riscv_cpu.hpp"
#include "tile/tile.hpp"
#include "common/units.hpp"

namespace tessera {

Platform::Platform(const sc_core::sc_module_name& n, const PlatformSpec& spec, bool protocol_checker)
    : sc_core::sc_module(n), spec_(spec), checker_(protocol_checker), debug_port_("debug_port"), tie_off_("tie_off") {
  bus_ = std::make_unique<Router>("bus", Router::Config{});
  connect(debug_port_, bus_->target_socket, "debug_port");
  // Build everything first: attachments may name a network declared later.
  for (const InstanceSpec& s : spec.instances) ips_.emplace_back(s.name, s.ip->build(s.name.c_str(), s.config));

  unsigned port = 0;
  // Each network-on-chip hangs off the bus at its bus node: the bus sends it
  // the ranges of everything attached to it, with their global addresses.
  std::map<std::string, unsigned> noc_port;
  for (const InstanceSpec& s : spec.instances)
    if (auto* noc = get<noc::Noc>(s.name)) {
      connect(bus_->initiator_socket, noc->initiator_side, "bus_" + s.name);
      noc->attach_initiator(noc->config().bus_node);
      noc_port[s.name] = port++;
    }
  for (const InstanceSpec& s : spec.instances) {
    Ip* ip = find(s.name);
    noc::Noc* via = s.attach.empty() ? nullptr : get<noc::Noc>(s.attach);
    unsigned node = s.attach_node;
    if (via && s.attach_x >= 0) {
      const auto& net = via->config().net;
      if (static_cast<unsigned>(s.attach_x) >= net.width || static_cast<unsigned>(s.attach_y) >= net.height)
        throw ConfigError(fmt::format("{}: {}.attach: {} has no router at ({}, {})", spec.file, s.name, s.attach,
                                      s.attach_x, s.attach_y));  // elaboration-only
      node = static_cast<unsigned>(s.attach_y) * net.width + static_cast<unsigned>(s.attach_x);
    }
    if (via && node >= via->config().net.nodes())
      throw ConfigError(spec.file + ": " + s.name + ".attach: " + s.attach + " has no node " +
                        std::to_string(node));  // elaboration-only
    if (via) attach_node_[s.name] = node;
    bool first = true;
    for (const auto& [tname, target] : ip->targets()) {
      // The first socket at "base"; others where "targets" puts them.
      bool mapped = first && s.base.has_value();
      std::uint64_t base = mapped ? *s.base : 0;
      const std::uint64_t size = first ? s.size : target.size;
      for (const auto& [port_name, b] : s.targets)
        if (port_name == tname) mapped = true, base = b;
      first = false;
      if (!mapped) {
        tie_off_.bind(*target.socket);  // reachable through target()
        continue;
      }
      const std::string range = tname == ip->targets().front().first ? s.name : s.name + "." + tname;
      try {
        if (via) {
          via->attach_target(node, base, size, range);
          connect(via->target_side, *target.socket, s.name + "_" + tname);
          bus_->map(noc_port[s.attach], base, size, range, base, s.ip->overlay);
        } else {
          connect(bus_->initiator_socket, *target.socket, s.name + "_" + tname);
          bus_->map(port++, base, size, range, 0, s.ip->overlay);
        }
      } catch (const ConfigError& e) {
        throw ConfigError(spec.file + ": " + s.name + ".base: " + e.what());  // elaboration-only
      }
    }
    for (const auto& extra : s.targets) {
      const std::string& port_name = extra.first;
      const auto& ts = ip->targets();
      if (std::none_of(ts.begin(), ts.end(), [&](const auto& t) { return t.first == port_name; }))
        throw ConfigError(spec.file + ": " + s.name + ".targets." + port_name + ": " + s.name +
                          " has no such target socket");  // elaboration-only
    }
    for (const auto& [iname, socket] : ip->initiators()) {
      if (via) {
        via->attach_initiator(node);
        connect(*socket, via->initiator_side, s.name + "_" + iname);
      } else {
        connect(*socket, bus_->target_socket, s.name + "_" + iname);
      }
    }
  }
  check_overlays();
  wire_irqs();
}

Platform::~Platform() = default;

// An overlay (HTIF's tohost) lies inside a memory, never over another
// device's registers, where it would carve a hole in them.
void Platform::check_overlays() const {
  for (const InstanceSpec& o : spec_.instances) {
    if (!o.ip->overlay || !o.base) continue;
    for (const InstanceSpec& s : spec_.instances)
      if (!s.ip->overlay && s.base && *s.base <= o.last() && *o.base <= s.last() && !get<Memory>(s.name))
        throw ConfigError(fmt::format("{}: {}.base: [{:#x}, {:#x}] lies over {} [{:#x}, {:#x}], which is no memory; "
                                      "a {} (placed by its base or by the firmware's tohost symbol) must lie inside "
                                      "a memory or in free space",
                                      spec_.file, o.name, *o.base, o.last(), s.name, *s.base, s.last(),
                                      o.type));  // elaboration-only
  }
}

void Platform::wire_irqs() {
  for (const InstanceSpec& s : spec_.instances) {
    Ip* from = find(s.name);
    for (const IrqWire& w : s.irqs) {
      const std::string where = spec_.file + ": " + s.name + ".irq." + w.from.text + ": ";
      IrqOut* out = from->irq_out(w.from.port, w.from.index);
      if (!out)
        throw ConfigError(where + s.name + " has no interrupt output \"" + w.from.text + "\" (outputs: " +
                          from->irq_ports(true) + ")");  // elaboration-only
      Ip* to = find(w.to.instance);
      IrqIn* in = to->irq_in(w.to.port, w.to.index);
      if (!in)
        throw ConfigError(where + "\"" + w.to.text + "\" is wired to nothing (" + w.to.instance +
                          " inputs: " + to->irq_ports(false) + ")");  // elaboration-only
      if (in->driven()) throw ConfigError(where + "\"" + w.to.text + "\" already has a driver");  // elaboration-only
      out->bind(*in);
      if (waves::on() && !out->observed()) {
        const waves::Id id = waves::declare(waves::irq, from->path(), w.from.text, 1);
        if (id != waves::kNone) {
          waves::change(id, out->read(), sc_core::SC_ZERO_TIME);
          out->observe([id](bool level) { waves::change(id, level); });
        }
      }
    }
  }
}

Ip* Platform::find(const std::string& instance) const {
  for (const auto& [name, ip] : ips_)
    if (name == instance) return ip.get();
  return nullptr;
}

tlm::tlm_fw_transport_if<>& Platform::target(const std::string& instance, const std::string& port) {
  Ip* ip = find(instance);
  if (ip)
    for (const auto& [name, t] : ip->targets())
      if (name == port) return *t.socket->get_base_export().operator->();
  throw ConfigError("no target socket " + instance + "." + port);
}

std::uint64_t Platform::debug(tlm::tlm_command cmd, std::uint64_t addr, void* data, std::uint64_t len) {
  std::uint64_t done = 0;
  while (done < len) {
    tlm::tlm_generic_payload t;
    const unsigned chunk = static_cast<unsigned>(std::min<std::uint64_t>(len - done, 1u << 20));
    set_access(t, cmd, addr + done, static_cast<unsigned char*>(data) + done, chunk);
    const unsigned n = debug_port_->transport_dbg(t);
    done += n;
    if (n == 0) break;
  }
  return done;
}

tlm::tlm_response_status Platform::transport(tlm::tlm_command cmd, std::uint64_t addr, void* data, unsigned len,
                                             sc_core::sc_time& delay) {
  tlm::tlm_generic_payload t;
  set_access(t, cmd, addr, data, len);
  debug_port_->b_transport(t, delay);
  return t.get_response_status();
}

void check_facts(const PlatformSpec& spec, const ElfImage& elf) {
  if (const auto facts = elf.string_at("tessera_platform_facts"))
    if (const std::string why = spec.facts_mismatch(*facts); !why.empty())
      throw ElfError(fmt::format("{}: {}", elf.file, why));
}

void Platform::load(const ElfImage& elf) {
  // A program built against this build's platform header carries its facts
  // (the BSP's tessera_platform_facts): a platform that differs would put
  // its timeouts or its global addresses silently wrong.
  check_facts(spec_, elf);
  if (!spec_.boot.empty()) {
    auto* cpu = get<riscv::RiscvCpu>(spec_.boot);
    if (cpu->config().xlen != elf.xlen)
      throw ElfError(fmt::format("{}: an RV{} program cannot run on {} (RV{})", elf.file, elf.xlen, spec_.boot,
                                 cpu->config().xlen));
    cpu->set_reset_pc(elf.entry);
  }
  for (const auto& seg : elf.segments)
    check_in_memory(fmt::format("{}: segment", elf.file), seg.addr, seg.memsz);
  pending_elf_ = &elf;
}

void Platform::check_in_memory(const std::string& what, std::uint64_t addr, std::uint64_t size) const {
  std::uint64_t a = addr;
  const std::uint64_t end = addr + size;  // exclusive; callers refused wrap-around
  while (a < end) {
    const Router::Range* r = bus_->decode(a);
    const Ip* ip = r ? find(r->name.substr(0, r->name.find('.'))) : nullptr;
    // Memories, and overlays such as HTIF's tohost inside a program's data.
    if (!ip || !(dynamic_cast<const Memory*>(ip) || r->overlay))
      throw ElfError(fmt::format("{} [{:#x}, {:#x}) lies outside any memory ({} at {:#x})", what, addr, end,
                                 r ? r->name + " is no memory" : std::string("nothing"), a));
    if (r->last() >= end - 1) break;
    a = r->last() + 1;
  }
}

void Platform::load_image(const std::string& what, std::uint64_t addr, std::vector<std::uint8_t> bytes) {
  if (bytes.empty()) return;
  if (addr + bytes.size() < addr) throw ElfError(fmt::format("{}: [{:#x}, +{:#x}) wraps around", what, addr, bytes.size()));
  check_in_memory(what, addr, bytes.size());
  images_.push_back(Image{what, addr, std::move(bytes)});
}

void Platform::boot_vector(std::uint64_t entry, std::uint64_t next, const std::vector<std::uint8_t>& dtb) {
  if (spec_.boot.empty()) throw ConfigError(spec_.file + ": --boot needs a boot processor (the platform's \"boot\")");
  auto* cpu = get<riscv::RiscvCpu>(spec_.boot);
  const std::uint64_t at = cpu->config().reset_pc;
  const bool rv64 = cpu->config().xlen == 64;
  // auipc t0, 0; csrr a0, mhartid; l[dw] a1, 32(t0); l[dw] a2, 40(t0)... in the
  // words below: the DTB's address at +32, fw_dynamic_info's at +40, entry at +48.
  const std::uint32_t ld = rv64 ? 3 : 2;
  auto load = [&](unsigned rd, unsigned off) { return (off << 20) | (5u << 15) | (ld << 12) | (rd << 7) | 0x03u; };
  const std::uint32_t code[8] = {0x00000297u, 0xf1402573u, load(11, 32), load(12, 40), load(5, 48), 0x00028067u, 0, 0};
  const std::uint64_t dtb_at = at + 64, info_at = (dtb_at + dtb.size() + 7) & ~7ull;
  std::vector<std::uint8_t> rom(64, 0);
  std::memcpy(rom.data(), code, sizeof code);
  auto put = [&](std::size_t off, std::uint64_t v) { std::memcpy(rom.data() + off, &v, rv64 ? 8 : 4); };
  if (!rv64) {  // 32-bit words: re-encode the loads for 4-byte slots at +32, +36, +40
    const std::uint32_t code32[6] = {0x00000297u, 0xf1402573u, load(11, 32), load(12, 36), load(5, 40), 0x00028067u};
    std::memcpy(rom.data(), code32, sizeof code32);
    put(32, dtb_at), put(36, info_at), put(40, entry);
  } else {
    put(32, dtb_at), put(40, info_at), put(48, entry);
  }
  rom.insert(rom.end(), dtb.begin(), dtb.end());
  rom.resize(info_at - at, 0);
  // OpenSBI's struct fw_dynamic_info: magic "OSBI", version 2, next_addr,
  // next_mode (1: S), options, boot_hart (-1: any).
  const std::uint64_t info[6] = {0x4942534f, 2, next, 1, 0, ~0ull};
  for (std::uint64_t v : info) {
    const std::size_t off = rom.size();
    rom.resize(off + (rv64 ? 8 : 4));
    put(off, v);
  }
  try {
    check_in_memory("--boot: the reset vector and device tree", at, rom.size());
  } catch (const ElfError& e) {
    throw ConfigError(e.what());
  }
  images_.push_back(Image{"--boot: the reset vector and device tree", at, std::move(rom)});
  cpu->set_reset_pc(at);
}

void Platform::load_kernel(const std::string& name, const ElfImage& elf) {
  tile::Tile* tile = get<tile::Tile>(name);
  if (!tile) throw ConfigError(fmt::format("{}: no tile instance named \"{}\" in {}", elf.file, name, spec_.file));
  if (!tile->core()) throw ConfigError(fmt::format("{}: tile {} has no core (its \"core\" parameter is false)", elf.file, name));
  if (elf.xlen != 32)
    throw ElfError(fmt::format("{}: an RV{} program cannot run on {}'s RV32 core", elf.file, elf.xlen, name));
  const std::uint64_t lo = tile::Tile::kLocalSpm, hi = lo + tile->scratchpad().size();
  for (const auto& seg : elf.segments)
    if (seg.addr < lo || seg.addr + seg.memsz > hi)
      throw ElfError(fmt::format("{}: segment [{:#x}, {:#x}) lies outside {}'s scratchpad, [{:#x}, {:#x}) in its core's map",
                                 elf.file, seg.addr, seg.addr + seg.memsz, name, lo, hi));
  for (const auto& seg : elf.segments) {
    std::uint8_t* at = tile->scratchpad().data() + (seg.addr - lo);
    std::copy(seg.data.begin(), seg.data.end(), at);
    std::fill(at + seg.data.size(), at + seg.memsz, 0);
  }
  tile->set_core_pc(elf.entry);
}

void Platform::start_kernel(const std::string& name, const ElfImage& elf, bool end_run) {
  load_kernel(name, elf);
  kernels_.push_back(name);
  kernels_end_run_ = kernels_end_run_ || end_run;
}

void Platform::idle_boot_processor() {
  if (spec_.boot.empty()) return;
  const std::uint64_t pc = get<riscv::RiscvCpu>(spec_.boot)->config().reset_pc;
  for (const InstanceSpec& s : spec_.instances)
    if (s.base && pc >= *s.base && pc <= s.last() && dynamic_cast<const Memory*>(find(s.name))) {
      write_idle_loop(s.name, pc - *s.base);
      return;
    }
  throw ConfigError(fmt::format("{}: no memory at {}'s reset PC {:#x} for an idle loop", spec_.file, spec_.boot, pc));
}

void Platform::run_kernels() {
  for (const std::string& name : kernels_) get<tile::Tile>(name)->start_core();
  if (!kernels_end_run_) return;
  int code = 0;
  for (const std::string& name : kernels_) {
    tile::Tile* t = get<tile::Tile>(name);
    sc_core::wait(t->core_stopped());
    if (!code) code = t->core_faulted() ? 1 : static_cast<int>(t->core_exit());
  }
  sim::request_exit(code, name(), kernels_.size() == 1 ? "the kernel stopped" : "every kernel stopped",
                    sc_core::sc_time_stamp());
}

void Platform::start_of_simulation() {
  if (!kernels_.empty()) sc_core::sc_spawn([this] { run_kernels(); }, "kernels");
  if (pending_elf_ && !write_elf(*pending_elf_)) return;
  for (const Image& im : images_)  // after the ELF: a --load over a segment wins
    if (debug_write(im.addr, im.bytes.data(), im.bytes.size()) != im.bytes.size()) {
      load_error_ = fmt::format("{} [{:#x}, {:#x}) could not be written", im.what, im.addr, im.addr + im.bytes.size());
      sc_core::sc_stop();
      return;
    }
}

bool Platform::write_elf(const ElfImage& elf) {
  // The file's bytes, then the zeros up to memsz in pieces, written only
  // where the memory does not read as zero already: a large bss costs no
  // host memory (a sparse memory's untouched pages stay unallocated).
  static const std::vector<std::uint8_t> zeros(1 << 20, 0);
  std::vector<std::uint8_t> now(zeros.size());
  for (const auto& seg : elf.segments)
    for (std::uint64_t off = 0; off < seg.memsz;) {
      const bool file_part = off < seg.data.size();
      const std::uint64_t n = file_part ? seg.data.size() - off : std::min<std::uint64_t>(seg.memsz - off, zeros.size());
      std::uint64_t done = n;
      if (file_part) done = debug_write(seg.addr + off, seg.data.data() + off, n);
      else if (debug_read(seg.addr + off, now.data(), n) != n || std::memcmp(now.data(), zeros.data(), n) != 0)
        done = debug_write(seg.addr + off, zeros.data(), n);
      if (done != n) {
        load_error_ = fmt::format("{}: segment [{:#x}, {:#x}) lies outside any memory (nothing at {:#x})", elf.file,
                                  seg.addr, seg.addr + seg.memsz, seg.addr + off + done);
        sc_core::sc_stop();
        return false;
      }
      off += n;
    }
  return true;
}

void Platform::write_idle_loop(const std::string& memory, std::uint64_t offset) {
  const std::uint32_t idle[] = {0x10500073, 0xffdff06f};  // wfi; j -4
  tlm::tlm_generic_payload t;
  set_access(t, tlm::TLM_WRITE_COMMAND, offset, const_cast<std::uint32_t*>(idle), sizeof idle);
  if (target(memory, "mem_target").transport_dbg(t) != sizeof idle)
    throw ConfigError(fmt::format("{}: no room for an idle loop at offset {:#x}", memory, offset));  // elaboration-only
}

std::string Platform::memory_map() const {
  std::string o = fmt::format("Memory map of {} ({}):\n", spec_.name, spec_.file);
  for (const Router::Range& r : bus_->decode_table()) {
    const InstanceSpec* s = spec_.find(r.name.substr(0, r.name.find('.')));
    o += fmt::format("  {:#018x} - {:#018x}  {:>8}  {:<16} {}{}\n", r.base, r.last(), format_size(r.size), r.name, s->type,
                     s->attach.empty() ? "" : fmt::format(" (via {} node {})", s->attach, attach_node_.at(s->name)));
  }
  return o;
}

nlohmann::ordered_json Platform::stats(const std::string& prefix) const {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  auto add = [&](const Ip& ip) {
    if (!prefix.empty() && std::string(ip.basename()).rfind(prefix, 0) != 0) return;
    nlohmann::ordered_json s = nlohmann::ordered_json::object();
    ip.report_stats(s);
    if (!s.empty()) out[ip.name()] = s;
  };
  add(*bus_);
  for (const auto& [name, ip] : ips_) add(*ip);
  return out;
}

nlohmann::ordered_json Platform::limits() const {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (const InstanceSpec& s : spec_.instances) {
    const Ip* ip = find(s.name);
    if (!ip) continue;
    nlohmann::ordered_json l = nlohmann::ordered_json::object();
    ip->report_limits(l);
    if (l.empty()) continue;
    nlohmann::ordered_json e = {{"instance", s.name}, {"type", s.type}};
    if (auto it = attach_node_.find(s.name); it != attach_node_.end()) e["noc"] = s.attach, e["node"] = it->second;
    e.update(l);
    out[ip->name()] = e;
  }
  return out;
}

std::uint64_t Platform::protocol_violations() const {
  std::uint64_t n = 0;
  for (const auto& c : checkers_) n += c->violations();
  return n;
}

}  // namespace tessera
