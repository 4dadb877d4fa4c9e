#include "session.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <sstream>
#include <systemc>

#include "common/input.hpp"
#include "common/log.hpp"
#include "common/paths.hpp"
#include "common/sim.hpp"
#include "common/trace.hpp"
#include "common/units.hpp"
#include "common/waves.hpp"
#include "c2c/cut.hpp"
#include "elf.hpp"
#include "platform.hpp"
#include "ranks.hpp"
#include "power/power_manager.hpp"
#include "riscv/gdb_server.hpp"
#include "riscv/riscv_cpu.hpp"
#include "rtl/waves_fst.hpp"
#include "spec.hpp"
#include "system.hpp"
#include "tile/tile.hpp"

namespace tessera {

SessionError::SessionError(const std::string& what, bool usage) : std::runtime_error(what), usage_(usage) {}
int SessionError::code() const { return sim::kExitUsage; }

namespace {

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::string item;
  for (char c : text + ",") {
    if (c == ',') {
      if (!item.empty()) out.push_back(item);
      item.clear();
    } else if (c != ' ') {
      item += c;
    }
  }
  return out;
}

void write_file(const std::string& path, const std::string& text) {
  // Rewrite only on change, so builds that depend on the file stay put.
  {
    std::ifstream in(path);
    std::string old((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (in && old == text) return;
  }
  std::ofstream out(path);
  out << text;
  if (!out) throw SessionError(path + ": cannot write", false);
}

[[noreturn]] void usage(const std::string& msg) { throw SessionError(msg, true); }

bool g_elaborated = false;  // a SystemC simulation elaborates once per process

}  // namespace

struct Session::Impl {
  SessionOptions o;
  std::string file, name;
  PlatformSpec spec;                     // one chip
  std::optional<SystemSpec> system_spec;  // or a system
  std::optional<ElfImage> elf;
  std::map<unsigned, ElfImage> chip_elfs;
  struct Load {
    std::string what;
    std::uint64_t addr;
    std::vector<std::uint8_t> bytes;
  };
  std::vector<Load> loads;       // --load
  std::vector<std::pair<std::string, ElfImage>> kernels;  // --kernel
  std::vector<std::uint8_t> dtb;  // --boot
  sc_core::sc_time max_time = sc_core::SC_ZERO_TIME;
  std::unique_ptr<Platform> single;
  std::unique_ptr<System> system;
  std::vector<Platform*> chips;      // the chips this process holds
  std::vector<unsigned> chip_ids;    // and their numbers in the system
  std::vector<unsigned> owner;       // over ranks: chip k lives on rank owner[k]
  unsigned rank() const { return o.ranks ? o.ranks->rank() : 0; }
  std::unique_ptr<riscv::GdbServer> gdb, gdb_tiles;
  bool outputs_open = false, closed = false;

  const PlatformSpec& chip_spec(unsigned k) const { return system_spec ? system_spec->chip_specs.at(k) : spec; }

  void options() {
    if (o.reports) log::install_handler();
    log::set_strict(o.strict);
    try {
      for (const auto& l : o.logs) {
        auto eq = l.find('=');
        if (eq == std::string::npos) log::set_level("", log::parse_level(l));
        else log::set_level(l.substr(0, eq), log::parse_level(l.substr(eq + 1)));
      }
    } catch (const std::invalid_argument& e) {
      usage(std::string("--log: ") + e.what());
    }
    if (!o.max_time.empty()) try {
        max_time = parse_time(o.max_time);
      } catch (const UnitError& e) {
        usage(std::string("--max-time: ") + e.what());
      }
    if (o.gdb_port && (*o.gdb_port < 1 || *o.gdb_port > 65535))
      usage(fmt::format("--gdb {}: a TCP port is 1 to 65535", *o.gdb_port));
    if (o.gdb_tiles_port && (*o.gdb_tiles_port < 1 || *o.gdb_tiles_port > 65535))
      usage(fmt::format("--gdb-tiles {}: a TCP port is 1 to 65535", *o.gdb_tiles_port));
    if (o.gdb_port && o.gdb_tiles_port && *o.gdb_port == *o.gdb_tiles_port)
      usage("--gdb and --gdb-tiles: two servers need two ports");
    // Outputs written at the end are opened now: a run never ends in a file it cannot write.
    for (const auto& [flag, path] : {std::pair{"--stats", o.stats}, std::pair{"--signature", o.signature}})
      if (!path.empty()) {
        std::ofstream probe(path, std::ios::app);
        if (!probe) usage(fmt::format("{} {}: cannot write the file", flag, cut(path)));
      }
    if (o.trace.empty() && (!o.trace_categories.empty() || !o.trace_sockets.empty()))
      usage("--trace-categories and --trace-sockets need --trace FILE.json");
    if (o.waves.empty() && (!o.waves_preset.empty() || !o.waves_window.empty()))
      usage("--waves-preset and --waves-window need --waves FILE.vcd");
  }

  void inputs() {
    file = o.platform.empty() ? default_platform() : o.platform;
    if (!o.firmware.empty()) elf = ElfImage::read(o.firmware);
    nlohmann::json raw = PlatformSpec::read(file);
    // HTIF lives at the firmware's tohost symbol unless the platform says where.
    auto place_htif = [&](nlohmann::json& r) {
      if (elf && elf->symbol("tohost") && r.contains("instances") && r["instances"].is_array())
        for (auto& i : r["instances"])
          if (i.is_object() && i.value("type", "") == "htif" && !i.contains("base"))
            i["base"] = format_hex(*elf->symbol("tohost"));
    };
    if (SystemSpec::is_system(raw)) {
      system_spec = SystemSpec::parse(file, raw, o.sets, place_htif);
      name = system_spec->name;
      for (const std::string& cf : o.chip_firmware) {
        const auto eq = cf.find('=');
        unsigned k = 0;
        try {
          if (eq == std::string::npos || eq == 0) throw UnitError("");
          k = static_cast<unsigned>(parse_uint(cf.substr(0, eq)));
        } catch (const UnitError&) {
          usage("--chip-firmware " + cut(cf) + ": expected CHIP=ELF, e.g. 2=fw.elf");
        }
        if (k >= system_spec->chips)
          usage(fmt::format("--chip-firmware {}: there is no chip {} ({} chips)", cut(cf), k, system_spec->chips));
        chip_elfs.emplace(k, ElfImage::read(cf.substr(eq + 1)));
      }
    } else {
      if (!o.chip_firmware.empty()) usage("--chip-firmware: " + file + " is one chip, not a system");
      if (o.ranks) usage(fmt::format("mpirun -np {}: {} is one chip; ranks split a system of chips", o.ranks->size(), file));
      for (const auto& s : o.sets) PlatformSpec::apply_set(raw, file, s);
      place_htif(raw);
      spec = PlatformSpec::parse(file, raw);
      name = spec.name;
    }
    if (!o.placement.empty() && !o.ranks) usage("--placement: the chips are placed on MPI ranks; run under mpirun");
    if (system_spec) place();
    if ((!o.loads.empty() || o.boot || !o.dtb.empty() || !o.kernels.empty()) && system_spec)
      usage("--load, --boot, --dtb and --kernel: " + file + " is a system; they start one chip");
    for (const std::string& k : o.kernels) {
      const auto eq = k.find('=');
      if (eq == std::string::npos || eq == 0) usage("--kernel " + cut(k) + ": expected TILE=ELF, e.g. tile0=gemm.elf");
      const std::string tile = k.substr(0, eq);
      const InstanceSpec* t = spec.find(tile);
      if (!t || t->type != "tile") usage("--kernel " + cut(k) + ": " + file + " has no tile named " + cut(tile));
      for (const auto& [other, e] : kernels)
        if (other == tile) usage("--kernel " + cut(k) + ": a second kernel for " + tile);
      kernels.emplace_back(tile, ElfImage::read(k.substr(eq + 1)));
    }
    for (const std::string& l : o.loads) {
      const auto at = l.rfind('@');
      std::uint64_t addr = 0;
      try {
        if (at == std::string::npos || at == 0) throw UnitError("");
        addr = parse_uint(l.substr(at + 1));
      } catch (const UnitError&) {
        usage("--load " + cut(l) + ": expected FILE@ADDRESS, e.g. u-boot.bin@0x80200000");
      }
      const std::string path = l.substr(0, at);
      std::ifstream in(path, std::ios::binary);
      if (!in) usage("--load " + cut(l) + ": cannot read " + cut(path));
      std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (bytes.empty()) usage("--load " + cut(l) + ": " + cut(path) + " is empty");
      loads.push_back(Load{"--load " + cut(path), addr, std::move(bytes)});
    }
    if (!o.dtb.empty()) {
      std::ifstream in(o.dtb, std::ios::binary);
      if (!in) usage("--dtb " + cut(o.dtb) + ": cannot read the file");
      dtb.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
      if (dtb.size() < 4 || dtb[0] != 0xd0 || dtb[1] != 0x0d || dtb[2] != 0xfe || dtb[3] != 0xed)
        usage("--dtb " + cut(o.dtb) + ": not a flattened device tree (no magic 0xd00dfeed)");
    } else if (o.boot) {
      try {
        dtb = compile_device_tree(spec.device_tree());
      } catch (const ConfigError& e) {
        usage(e.what());
      }
    }
    if ((o.boot || !o.dtb.empty()) && !elf && loads.empty()) usage("--boot: nothing to start (give --firmware or --load)");
    // Programs built for other facts are refused before anything elaborates.
    for (unsigned k = 0; k < (system_spec ? system_spec->chips : 1); ++k) {
      auto own = chip_elfs.find(k);
      if (own != chip_elfs.end()) check_facts(chip_spec(k), own->second);
      else if (elf) check_facts(chip_spec(k), *elf);
    }
  }

  // Which rank holds each chip: --placement, else round robin.
  void place() {
    const unsigned n = system_spec->chips, ranks = o.ranks ? o.ranks->size() : 1;
    owner.assign(n, 0);
    if (!o.ranks) return;
    if (o.placement.empty()) {
      for (unsigned k = 0; k < n; ++k) owner[k] = k % ranks;
    } else {
      const std::vector<std::string> items = split_list(o.placement);
      if (items.size() != n)
        usage(fmt::format("--placement {}: {} ranks given for {} chips (one per chip, comma-separated)", cut(o.placement),
                          items.size(), n));
      for (unsigned k = 0; k < n; ++k) {
        char* end = nullptr;
        const unsigned long r = std::strtoul(items[k].c_str(), &end, 10);
        if (items[k].empty() || *end || r >= ranks)
          usage(fmt::format("--placement: chip {} on \"{}\": ranks are 0 to {}", k, cut(items[k]), ranks - 1));
        owner[k] = static_cast<unsigned>(r);
      }
    }
    for (unsigned r = 0; r < ranks; ++r)
      if (std::find(owner.begin(), owner.end(), r) == owner.end())
        usage(fmt::format("mpirun -np {}: rank {} would hold no chip ({} chips{})", ranks, r, n,
                          o.placement.empty() ? "" : " placed by --placement"));
  }

  // Every rank must run the same system: its effective description, the
  // placement and the firmware. A rank whose inputs differ from rank 0's
  // (another copy of a file on another host) ends every rank, each of which
  // sees every rank's fingerprint, with one line.
  void check_same_inputs(const nlohmann::ordered_json& effective) {
    std::uint64_t h = 1469598103934665603ull;  // FNV-1a
    auto mix = [&](const void* p, std::size_t n) {
      const auto* b = static_cast<const std::uint8_t*>(p);
      for (std::size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
    };
    const std::string text = effective.dump();
    mix(text.data(), text.size());
    mix(owner.data(), owner.size() * sizeof(unsigned));
    auto mix_elf = [&](const ElfImage& x) {
      for (const auto& seg : x.segments) {
        mix(&seg.addr, 8);
        mix(&seg.memsz, 8);
        mix(seg.data.data(), seg.data.size());
      }
    };
    if (elf) mix_elf(*elf);
    for (const auto& [k, x] : chip_elfs) {
      mix(&k, sizeof k);
      mix_elf(x);
    }
    std::vector<std::vector<std::uint8_t>> out(o.ranks->size(), std::vector<std::uint8_t>(8));
    for (auto& v : out) std::memcpy(v.data(), &h, 8);
    const auto in = o.ranks->exchange(out);
    std::uint64_t first = 0;
    std::memcpy(&first, in.at(0).data(), 8);
    for (unsigned r = 1; r < in.size(); ++r) {
      std::uint64_t theirs = 0;
      if (in[r].size() == 8) std::memcpy(&theirs, in[r].data(), 8);
      if (theirs != first)
        usage(fmt::format("mpirun -np {}: rank {} runs another system, placement or firmware than rank 0 ({} and the "
                          "firmware must be the same on every rank)",
                          o.ranks->size(), r, file));
    }
  }

  // An output file per rank over MPI: FILE.vcd -> FILE.rank1.vcd.
  std::string per_rank(const std::string& file) const {
    if (!o.ranks || file.empty()) return file;
    const auto dot = file.rfind('.');
    const auto slash = file.rfind('/');
    const std::string r = fmt::format(".rank{}", rank());
    if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return file + r;
    return file.substr(0, dot) + r + file.substr(dot);
  }

  void open_outputs() {
    rtl::install_waves_fst();
    try {
      if (!o.trace.empty()) {
        trace::Options t;
        t.file = per_rank(o.trace);
        t.categories = split_list(o.trace_categories);
        t.sockets = split_list(o.trace_sockets);
        trace::open(t);
      }
      if (!o.waves.empty()) {
        waves::Options w;
        w.file = per_rank(o.waves);
        w.groups = split_list(o.waves_preset);
        if (!o.waves_window.empty()) waves::parse_window(o.waves_window, w);
        waves::open(w);
      }
    } catch (const std::runtime_error& e) {
      usage(e.what());
    }
    outputs_open = true;
  }

  void build() {
    if (g_elaborated) throw SessionError("one session per process: a SystemC simulation elaborates once", false);
    g_elaborated = true;
    sim::reset();
    sim::set_timing_only(o.timing_only);
    if (system_spec) {
      system = std::make_unique<System>(*system_spec, o.protocol_checker, owner, rank());
      for (unsigned k = 0; k < system->size(); ++k)
        if (system->holds(k)) chips.push_back(&system->chip(k)), chip_ids.push_back(k);
    } else {
      single = std::make_unique<Platform>((o.top.empty() ? spec.name : o.top).c_str(), spec, o.protocol_checker);
      chips.push_back(single.get());
      chip_ids.push_back(0);
    }
    for (unsigned i = 0; i < chips.size(); ++i) {
      auto own = chip_elfs.find(chip_ids[i]);
      if (own != chip_elfs.end()) chips[i]->load(own->second);
      else if (elf) chips[i]->load(*elf);
    }
    for (Load& l : loads) chips.front()->load_image(l.what, l.addr, std::move(l.bytes));
    // Kernels on their own (no firmware): the CP idles and the run ends with them.
    const bool kernels_only = !elf && loads.empty();
    for (const auto& [tile, k] : kernels) chips.front()->start_kernel(tile, k, kernels_only);
    if (!kernels.empty() && kernels_only) chips.front()->idle_boot_processor();
    if (o.boot || !o.dtb.empty()) {
      // The ELF's entry, else the first image's; fw_dynamic's next stage: the first image apart from that.
      const std::uint64_t entry = elf ? elf->entry : loads.front().addr;
      std::uint64_t next = 0;
      for (const Load& l : loads)
        if (l.addr != entry && !next) next = l.addr;
      chips.front()->boot_vector(entry, next, dtb);
    }
    if (!o.signature.empty() && !(elf && elf->symbol("begin_signature") && elf->symbol("end_signature")))
      throw ConfigError("--signature: the firmware has no begin_signature and end_signature symbols");
    // Names that only the built platform can check.
    for (const std::string& msg : {log::unknown_paths(), trace::unmatched_sockets()})
      if (!msg.empty()) usage(msg);
  }

  std::unique_ptr<riscv::GdbServer> open_gdb(int port) {
    try {
      return std::make_unique<riscv::GdbServer>(static_cast<unsigned>(port));
    } catch (const std::runtime_error& e) {
      usage(e.what());
    }
  }

  // Over MPI ranks the debugger serves the processors of the rank that
  // holds chip 0 (one port on one host).
  bool holds_chip0() const { return !chip_ids.empty() && chip_ids.front() == 0; }

  void attach_gdb() {
    if (!o.gdb_port || !holds_chip0()) return;
    gdb = open_gdb(*o.gdb_port);
    for (Platform* c : chips)
      for (const InstanceSpec& s : c->spec().instances)
        if (auto* cpu = c->get<riscv::RiscvCpu>(s.name)) {
          gdb->add_hart(cpu);
          cpu->attach_debugger(gdb.get(), o.gdb_wait);
        }
    if (gdb->harts().empty()) usage("--gdb: the platform has no processor");
    std::fprintf(stderr, "GDB server on localhost:%d%s\n", *o.gdb_port, o.gdb_wait ? ", waiting for a connection" : "");
  }

  // The tiles' RV32 cores on a server of their own (GDB cannot mix RV32 and
  // RV64 threads in one target): each core a thread; with --gdb-wait the
  // first one waits for the debugger at time 0.
  void attach_gdb_tiles() {
    if (!o.gdb_tiles_port || !holds_chip0()) return;
    gdb_tiles = open_gdb(*o.gdb_tiles_port);
    for (Platform* c : chips)
      for (const InstanceSpec& s : c->spec().instances)
        if (auto* t = c->get<tile::Tile>(s.name); t && t->core()) {
          t->core()->attach_debugger(gdb_tiles.get(), o.gdb_wait && gdb_tiles->harts().empty());
          gdb_tiles->add_hart(t->core());
        }
    if (gdb_tiles->harts().empty()) usage("--gdb-tiles: the platform has no tile with a core");
    std::fprintf(stderr, "GDB server for the tile cores on localhost:%d (%zu threads)%s\n", *o.gdb_tiles_port,
                 gdb_tiles->harts().size(), o.gdb_wait ? ", waiting for a connection" : "");
  }

  // Nothing can happen any more. A hart asleep in wfi then waits for an
  // interrupt that cannot come: a deadlock, not a clean end (that is the
  // test finisher, HTIF, or --max-time).
  // A system runs window by window, each as long as its links' lookahead:
  // an exit ends the run at the end of its window (sim::windowed), and over
  // MPI ranks the processes exchange at each window's end what crossed the
  // cut, the exits and whether anything is left to do. Returns whether
  // anything is left to simulate anywhere.
  struct Elsewhere {  // a rank that stopped at once (a load error, a model error)
    int code = 0;
    std::string end;
    bool input_error = false;
  };
  std::optional<Elsewhere> stopped_elsewhere;
  std::uint64_t windows = 0, exchanged_bytes = 0;
  double waited_s = 0;

  bool run_windows() {
    sim::set_windowed(true);
    const sc_core::sc_time w = system->lookahead();
    for (;;) {
      const sc_core::sc_time now = sc_core::sc_time_stamp();
      sc_core::sc_time end = sc_core::sc_max_time() - now < w ? sc_core::sc_max_time() : now + w;
      if (max_time > sc_core::SC_ZERO_TIME && end > max_time) end = max_time;
      if (end > now) sc_core::sc_start(end - now, sc_core::SC_RUN_TO_TIME);
      ++windows;
      const bool stopped = sc_core::sc_get_status() == sc_core::SC_STOPPED;
      bool pending = sc_core::sc_pending_activity(), messages = false;
      if (o.ranks) exchange(stopped, pending, messages, nullptr);
      else sim::take_exits();  // already noted
      if (stopped || stopped_elsewhere || sim::windowed_end()) return pending;
      if (max_time > sc_core::SC_ZERO_TIME && sc_core::sc_time_stamp() >= max_time) return pending;
      if (!pending && !messages) return false;
    }
  }

  // One exchange among the ranks: this rank's state (stopped, pending, its
  // chips' exits), what crossed the cut, and, from a front end that drives
  // time itself, `front[r]` for rank r. Returns what each rank's front end
  // sent this one.
  std::vector<std::vector<std::uint8_t>> exchange(bool stopped, bool& pending, bool& messages,
                                                  const std::vector<std::vector<std::uint8_t>>* front) {
    std::vector<std::uint8_t> status;
    auto put = [&](const void* p, std::size_t n) {
      const auto* b = static_cast<const std::uint8_t*>(p);
      status.insert(status.end(), b, b + n);
    };
    auto put_text = [&](const std::string& t) {
      const std::uint32_t n = static_cast<std::uint32_t>(t.size());
      put(&n, 4);
      put(t.data(), n);
    };
    // This rank's state: stopped at once (and why), pending, the exits of its chips.
    std::string why;
    std::int32_t code = 0;
    std::uint8_t input = 0;
    if (stopped) {
      for (Platform* c : chips)
        if (!c->load_error().empty() && why.empty()) why = c->load_error(), code = sim::kExitUsage, input = 1;
      if (why.empty()) why = sim::exit_reason(), code = sim::exit_code().value_or(sim::kExitAbnormal);
    }
    std::vector<std::vector<c2c::Message>> outbox = system->cut().take_outbox();
    bool sends = false;
    for (const auto& box : outbox) sends = sends || !box.empty();
    const std::uint8_t flags = (stopped ? 1 : 0) | (pending ? 2 : 0) | (input ? 4 : 0) | (sends ? 8 : 0);
    put(&flags, 1);
    put(&code, 4);
    put_text(why);
    const std::vector<sim::DomainExit> exits = sim::take_exits();
    const std::uint32_t n = static_cast<std::uint32_t>(exits.size());
    put(&n, 4);
    for (const sim::DomainExit& e : exits) {
      put(&e.domain, 4);
      put(&e.code, 4);
      put(&e.when, 8);
      put_text(e.reason);
    }
    std::vector<std::vector<std::uint8_t>> out(o.ranks->size(), status);
    for (unsigned r = 0; r < out.size(); ++r) {
      const std::uint32_t count = r < outbox.size() ? static_cast<std::uint32_t>(outbox[r].size()) : 0;
      out[r].insert(out[r].end(), reinterpret_cast<const std::uint8_t*>(&count), reinterpret_cast<const std::uint8_t*>(&count) + 4);
      for (std::uint32_t i = 0; i < count; ++i) outbox[r][i].append_to(out[r]);
      const std::uint64_t bytes = front && r < front->size() ? (*front)[r].size() : 0;
      out[r].insert(out[r].end(), reinterpret_cast<const std::uint8_t*>(&bytes), reinterpret_cast<const std::uint8_t*>(&bytes) + 8);
      if (bytes) out[r].insert(out[r].end(), (*front)[r].begin(), (*front)[r].end());
    }
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<std::vector<std::uint8_t>> in = o.ranks->exchange(out);
    waited_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::vector<c2c::Message> arrived;
    std::vector<std::vector<std::uint8_t>> fronts(in.size());
    for (unsigned r = 0; r < in.size(); ++r) {
      exchanged_bytes += r == rank() ? 0 : in[r].size();
      const std::uint8_t* p = in[r].data();
      const std::uint8_t* e = p + in[r].size();
      auto get = [&](void* v, std::size_t k) {
        if (static_cast<std::size_t>(e - p) < k) throw std::runtime_error(fmt::format("rank {} sent a short window", r));
        std::memcpy(v, p, k);
        p += k;
      };
      auto get_text = [&] {
        std::uint32_t k = 0;
        get(&k, 4);
        std::string t(k, '\0');
        get(t.data(), k);
        return t;
      };
      std::uint8_t f = 0;
      std::int32_t c = 0;
      get(&f, 1);
      get(&c, 4);
      const std::string text = get_text();
      if ((f & 1) && r != rank() && !stopped_elsewhere && !stopped)
        stopped_elsewhere = Elsewhere{c, fmt::format("rank {}: {}", r, text), (f & 4) != 0};
      pending = pending || (f & 2);
      messages = messages || (f & 8);  // sent by any rank to any: every rank decides alike
      std::uint32_t k = 0;
      get(&k, 4);
      for (std::uint32_t i = 0; i < k; ++i) {
        sim::DomainExit x;
        get(&x.domain, 4);
        get(&x.code, 4);
        get(&x.when, 8);
        x.reason = get_text();
        if (r != rank()) sim::note_exit(x);
      }
      std::uint32_t count = 0;
      get(&count, 4);
      for (std::uint32_t i = 0; i < count; ++i) {
        c2c::Message m;
        if (!c2c::Message::parse(p, e, m)) throw std::runtime_error(fmt::format("rank {} sent a malformed link message", r));
        arrived.push_back(std::move(m));
      }
      std::uint64_t bytes = 0;
      get(&bytes, 8);
      if (static_cast<std::uint64_t>(e - p) != bytes) throw std::runtime_error(fmt::format("rank {} sent a malformed window", r));
      fronts[r].assign(p, e);
    }
    system->cut().deliver(arrived);
    return fronts;
  }

  // Over MPI ranks: rank 0 gathers every rank's counters into one report,
  // the instances in chip order, as one process would list them.
  void merge_ranks(nlohmann::ordered_json& stats) {
    nlohmann::ordered_json mine;
    mine["ips"] = stats["ips"];
    mine["guest_errors"] = stats["guest_errors"];
    mine["protocol_violations"] = stats["protocol_violations"];
    mine["exchanged_bytes"] = exchanged_bytes;
    mine["waited_s"] = waited_s;
    const std::string text = mine.dump();
    std::vector<std::vector<std::uint8_t>> out(o.ranks->size());
    out[0].assign(text.begin(), text.end());
    const auto in = o.ranks->exchange(out);
    if (rank() != 0) return;
    std::vector<nlohmann::ordered_json> of(in.size());
    std::uint64_t errors = 0, violations = 0, bytes = 0;
    double waited = 0;
    for (unsigned r = 0; r < in.size(); ++r) {
      of[r] = nlohmann::ordered_json::parse(std::string(in[r].begin(), in[r].end()));
      errors += of[r]["guest_errors"].get<std::uint64_t>();
      violations += of[r]["protocol_violations"].get<std::uint64_t>();
      bytes += of[r]["exchanged_bytes"].get<std::uint64_t>();
      waited = std::max(waited, of[r]["waited_s"].get<double>());
    }
    nlohmann::ordered_json ips = nlohmann::ordered_json::object();
    for (unsigned k = 0; k < owner.size(); ++k) {
      const std::string prefix = fmt::format("chip{}.", k);
      const nlohmann::ordered_json& from = of[owner[k]]["ips"];
      for (auto it = from.begin(); it != from.end(); ++it)
        if (it.key().rfind(prefix, 0) == 0) ips[it.key()] = it.value();
    }
    stats["guest_errors"] = errors;
    stats["protocol_violations"] = violations;
    stats["ips"] = ips;
    stats["ranks"] = {{"ranks", o.ranks->size()},
                      {"lookahead_ns", system->lookahead().to_seconds() * 1e9},
                      {"windows", windows},
                      {"exchanged_bytes", bytes},
                      {"longest_wait_s", waited}};
  }

  void ended_quiet(RunResult& r) const {
    std::string asleep;
    for (Platform* c : chips)
      for (const InstanceSpec& s : c->spec().instances)
        if (auto* cpu = c->get<riscv::RiscvCpu>(s.name); cpu && cpu->asleep())
          asleep += (asleep.empty() ? "" : ", ") + std::string(cpu->name());
    if (asleep.empty()) {
      r.end = "nothing left to simulate";
      return;
    }
    const bool one = asleep.find(',') == std::string::npos;
    r.code = sim::kExitAbnormal;
    r.end = "deadlock: nothing left to simulate while " + asleep + (one ? " sleeps" : " sleep") +
            " in wfi with no interrupt that can wake " + (one ? "it" : "them");
  }

  void close_outputs() {
    if (closed || !outputs_open) return;
    closed = true;
    for (Platform* c : chips)
      for (const InstanceSpec& s : c->spec().instances)
        if (auto* pm = c->get<power::PowerManager>(s.name)) pm->publish();
    if (!waves::close() && !o.waves.empty()) std::fprintf(stderr, "tessera-vp: warning: cannot write %s\n", o.waves.c_str());
    trace::close();
  }

  void dump_signature() const {
    const std::uint64_t begin = *elf->symbol("begin_signature"), end = *elf->symbol("end_signature");
    std::vector<std::uint8_t> bytes(end > begin ? end - begin : 0);
    chips.front()->debug_read(begin, bytes.data(), bytes.size());
    std::ofstream out(o.signature);
    for (std::size_t i = 0; i + 4 <= bytes.size(); i += 4)
      out << fmt::format("{:02x}{:02x}{:02x}{:02x}\n", bytes[i + 3], bytes[i + 2], bytes[i + 1], bytes[i]);
    if (!out) std::fprintf(stderr, "tessera-vp: warning: cannot write %s\n", o.signature.c_str());
  }
};

Session::Session(const SessionOptions& options) : impl_(std::make_unique<Impl>()) {
  impl_->o = options;
  impl_->options();
  try {
    impl_->inputs();
  } catch (const SessionError&) {
    throw;
  } catch (const ConfigError& e) {  // also ElfError
    throw SessionError(e.what(), false);
  } catch (const std::exception& e) {  // a bad input no check foresaw: still one line
    throw SessionError(std::string("bad input: ") + e.what(), false);
  }
}

Session::~Session() {
  if (impl_) impl_->close_outputs();
}

std::string Session::default_platform() { return data_file(DataKind::platforms, "t1.json"); }
std::string Session::default_firmware() { return data_file(DataKind::firmware, "hello.elf"); }
std::string Session::program_dir() { return tessera::program_dir(); }

std::string Session::trace_categories() { return trace::categories(); }

std::string Session::list_types() {
  std::ostringstream out;
  for (const auto& [name, type] : IpRegistry::get().all()) {
    out << name << ": " << type.doc << "\n";
    Params p("(defaults)", name, nlohmann::json(), 4096);
    try {
      (void)type.parse(p);
    } catch (const ConfigError&) {
      // Some defaults are not valid on their own (a memory needs a size).
    }
    for (auto it = p.effective().begin(); it != p.effective().end(); ++it)
      out << "  " << it.key() << " = " << it.value().dump() << "  (" << p.docs()[it.key()].get<std::string>() << ")\n";
  }
  return out.str();
}

bool Session::is_system() const { return impl_->system_spec.has_value(); }
const std::string& Session::file() const { return impl_->file; }
unsigned Session::chips() const { return impl_->system_spec ? impl_->system_spec->chips : 1; }
const PlatformSpec& Session::chip_spec(unsigned k) const { return impl_->chip_spec(k); }

std::string Session::device_tree() const { return impl_->chip_spec(0).device_tree(); }

nlohmann::ordered_json Session::effective() const {
  if (!impl_->system_spec) return impl_->spec.effective();
  const SystemSpec& s = *impl_->system_spec;
  nlohmann::ordered_json out;
  out["system"] = s.name;
  out["topology"] = s.topology;
  out["chips"] = s.chips;
  out["links"] = nlohmann::ordered_json::array();
  for (const LinkSpec& l : s.links) out["links"].push_back({l.a, l.port_a, l.b, l.port_b});
  out["chip"] = nlohmann::ordered_json::array();
  for (const PlatformSpec& c : s.chip_specs) out["chip"].push_back(c.effective());
  return out;
}

void Session::write_header(const std::string& path) const { write_file(path, impl_->chip_spec(0).c_header()); }
void Session::write_linker(const std::string& path) const { write_file(path, impl_->chip_spec(0).linker_symbols()); }

void Session::elaborate() {
  Impl& s = *impl_;
  if (s.o.ranks && s.system_spec) s.check_same_inputs(effective());
  // Traces and waves open before anything elaborates: the IPs declare their signals as they are built.
  s.open_outputs();
  try {
    s.build();
  } catch (const SessionError&) {
    throw;
  } catch (const ConfigError& e) {  // also ElfError
    throw SessionError(e.what(), false);
  }
  s.attach_gdb();
  s.attach_gdb_tiles();
  // A system runs in windows from the start (sim::windowed: the order of
  // same-instant events that depends on the chip alone).
  if (s.system) sim::set_windowed(true);
}

Platform& Session::chip(unsigned k) { return *impl_->chips.at(k); }

unsigned Session::ranks() const { return impl_->o.ranks ? impl_->o.ranks->size() : 1; }
unsigned Session::owner(unsigned chip) const { return impl_->owner.empty() ? 0 : impl_->owner.at(chip); }

Platform* Session::held(unsigned chip) {
  Impl& s = *impl_;
  for (std::size_t i = 0; i < s.chips.size(); ++i)
    if (s.chip_ids[i] == chip) return s.chips[i];
  return nullptr;
}

std::vector<std::vector<std::uint8_t>> Session::exchange(const std::vector<std::vector<std::uint8_t>>& out) {
  Impl& s = *impl_;
  sim::set_windowed(true);
  if (!s.o.ranks) {
    sim::take_exits();  // already noted
    return out;
  }
  bool pending = false, messages = false;
  return s.exchange(sc_core::sc_get_status() == sc_core::SC_STOPPED, pending, messages, &out);
}

void Session::advance() {
  Impl& s = *impl_;
  sim::set_windowed(true);
  const sc_core::sc_time w = s.system ? s.system->lookahead() : sc_core::sc_time(100, sc_core::SC_NS);
  sc_core::sc_start(w, sc_core::SC_RUN_TO_TIME);
  ++s.windows;
}

std::string Session::halted() const {
  const Impl& s = *impl_;
  if (s.stopped_elsewhere) return s.stopped_elsewhere->end;
  for (Platform* c : s.chips)
    if (!c->load_error().empty()) return c->load_error();
  if (sc_core::sc_get_status() == sc_core::SC_STOPPED || sim::windowed_end()) return sim::exit_reason();
  return {};
}

void Session::abort(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  if (impl_->o.ranks) impl_->o.ranks->abort(code);
  std::_Exit(code);
}

nlohmann::ordered_json Session::rank_report() const {
  const Impl& s = *impl_;
  return {{"ranks", s.o.ranks ? s.o.ranks->size() : 1},
          {"lookahead_ns", s.system ? s.system->lookahead().to_seconds() * 1e9 : 0.0},
          {"windows", s.windows},
          {"exchanged_bytes", s.exchanged_bytes},
          {"waited_s", s.waited_s}};
}
System* Session::system() { return impl_->system.get(); }
unsigned Session::rank() const { return impl_->rank(); }

std::string Session::describe() const {
  const Impl& s = *impl_;
  std::string out;
  if (s.system_spec) out += s.system_spec->describe() + "Each chip:\n";
  out += s.chips.front()->memory_map();
  if (s.elf)
    out += fmt::format("Firmware {} (RV{}), entry {:#x}{}\n", s.elf->file, s.elf->xlen, s.elf->entry,
                       s.chips.size() > 1 ? fmt::format(", on each of the {} chips", s.chips.size()) : "");
  return out;
}

RunResult Session::run() {
  Impl& s = *impl_;
  RunResult r;
  r.end = "finished";
  // Over ranks, each elaborates its own chips first: the run's wall time
  // starts when every rank is ready.
  if (s.o.ranks) s.o.ranks->exchange(std::vector<std::vector<std::uint8_t>>(s.o.ranks->size()));
  const auto wall_start = std::chrono::steady_clock::now();
  try {
    bool pending = false;
    if (s.system) {
      pending = s.run_windows();
    } else {
      if (s.max_time > sc_core::SC_ZERO_TIME) sc_core::sc_start(s.max_time);
      else sc_core::sc_start();
      pending = sc_core::sc_pending_activity();
    }
    if (s.stopped_elsewhere) {
      r.code = s.stopped_elsewhere->code;
      r.end = s.stopped_elsewhere->end;
      r.input_error = s.stopped_elsewhere->input_error;
      r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
      return r;
    }
    for (Platform* c : s.chips)
      if (!c->load_error().empty()) {
        r.code = sim::kExitUsage;
        r.end = c->load_error();
        r.input_error = true;
        return r;
      }
    if (sim::exit_code()) {
      r.code = *sim::exit_code();
      r.end = sim::exit_reason();
    } else if (s.max_time > sc_core::SC_ZERO_TIME && pending) {
      r.code = sim::kExitAbnormal;
      r.end = "--max-time " + s.o.max_time + " reached";
    } else {
      s.ended_quiet(r);
    }
  } catch (const sc_core::sc_report& e) {
    r.code = sim::kExitAbnormal;
    r.end = std::string("simulation error: ") + e.what();
  } catch (const std::exception& e) {
    r.code = sim::kExitAbnormal;
    r.end = std::string("simulation error: ") + e.what();
  }
  // Over ranks, one that failed alone cannot meet the others at the next
  // window: it ends them all, with its line.
  if (s.o.ranks && r.code == sim::kExitAbnormal && r.end.rfind("simulation error: ", 0) == 0) {
    std::fprintf(stderr, "tessera-vp: error: rank %u: %s\n", s.rank(), r.end.c_str());
    s.o.ranks->abort(r.code);
  }
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  return r;
}

nlohmann::ordered_json Session::finish(RunResult& r) {
  Impl& s = *impl_;
  s.close_outputs();
  if (s.gdb) s.gdb->exited(r.code);
  if (s.gdb_tiles) s.gdb_tiles->exited(r.code);
  if (!s.o.signature.empty() && s.holds_chip0()) s.dump_signature();  // chip 0's, by its rank
  if (r.code == 0 && log::strict() && log::guest_error_count() > 0) {
    r.code = sim::kExitStrict;
    r.end += fmt::format("; --strict: {} guest error(s)", log::guest_error_count());
  }
  nlohmann::ordered_json stats;
  stats["platform"] = s.name;
  stats["simulated_time_s"] = sim::end_time().to_seconds();
  stats["wall_time_s"] = r.wall_s;
  stats["exit_code"] = r.code;
  stats["end"] = r.end;
  stats["guest_errors"] = log::guest_error_count();
  stats["protocol_violations"] = s.system ? s.system->protocol_violations() : s.single->protocol_violations();
  stats["ips"] = s.system ? s.system->stats() : s.single->stats();
  if (s.o.ranks) s.merge_ranks(stats);
  if (!s.o.stats.empty() && s.rank() == 0) {
    std::ofstream out(s.o.stats);
    out << stats.dump(2) << "\n";
    if (!out) {
      std::fprintf(stderr, "tessera-vp: error: cannot write %s\n", s.o.stats.c_str());
      if (r.code == 0) {
        r.code = sim::kExitAbnormal;
        stats["exit_code"] = r.code;
      }
    }
  }
  return stats;
}

std::string Session::summary(const nlohmann::ordered_json& stats) {
  std::string out = fmt::format(
      "\n=== tessera-vp summary ===\nend: {}\nexit code: {}\nsimulated time: {}\nwall time: {:.3f} s\nguest errors: {}\n",
      stats["end"].get<std::string>(), stats["exit_code"].get<int>(), sim::end_time().to_string(),
      stats["wall_time_s"].get<double>(), stats["guest_errors"].get<std::uint64_t>());
  // Counters that moved; instances where nothing did are counted, not
  // listed (--stats FILE has every counter).
  unsigned idle = 0;
  for (auto it = stats["ips"].begin(); it != stats["ips"].end(); ++it) {
    std::string line;
    for (auto kv = it.value().begin(); kv != it.value().end(); ++kv)
      if (!(kv.value().is_number() && kv.value().get<double>() == 0))
        line += fmt::format("{}{}={}", line.empty() ? "" : " ", kv.key(), kv.value().dump());
    if (line.empty()) ++idle;
    else out += fmt::format("  {:<16} {}\n", it.key(), line);
  }
  if (idle) out += fmt::format("  ({} idle instances not shown; --stats FILE has every counter)\n", idle);
  return out;
}

}  // namespace tessera
