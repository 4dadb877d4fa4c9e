// tessera-vp: parse options, check the platform description, elaborate,
// load firmware, run, report. Exit codes: the guest's own (test finisher,
// HTIF), 0 on a normal end, 2 on a bad command line, platform file or ELF,
// 3 when the run ends abnormally (--max-time reached, a model error),
// 4 when --strict is on and the guest made an error.
#include <boost/program_options.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <systemc>

#include "common/input.hpp"
#include "common/log.hpp"
#include "common/sim.hpp"
#include "common/trace.hpp"
#include "common/units.hpp"
#include "common/waves.hpp"
#include "power/power_manager.hpp"
#include "rtl/waves_fst.hpp"
#include "elf.hpp"
#include "demo.hpp"
#include "platform.hpp"
#include "riscv/gdb_server.hpp"
#include "riscv/riscv_cpu.hpp"
#include "spec.hpp"
#include "system.hpp"

namespace po = boost::program_options;
using namespace tessera;

namespace {

// SystemC prints its banner before sc_main runs; only the environment
// stops it, so set it during static initialisation.
const bool kNoBanner = ::setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 0) == 0;

struct Options {
  std::string platform, firmware, stats, gen_header, gen_linker, max_time, signature;
  unsigned gdb_port = 0;
  bool gdb_wait = false;
  std::vector<std::string> sets, logs, chip_firmware;
  bool dump_config = false, strict = false, quiet = false, list_types = false;
  std::string checker;
  std::string trace, trace_categories, trace_sockets, waves, waves_preset, waves_window;
};

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

std::string default_platform() {
  const char* dir = std::getenv("TESSERA_PLATFORM_DIR");
  return std::string(dir ? dir : TESSERA_PLATFORM_DIR) + "/t1.json";
}

int usage_error(const std::string& msg) {
  std::cerr << "tessera-vp: error: " << msg << "\n(see tessera-vp --help)\n";
  return sim::kExitUsage;
}

// Bad platform files, ELF files and --set values: one line, exit code 2.
int input_error(const ConfigError& e) {
  std::cerr << "tessera-vp: error: " << e.what() << "\n";
  return sim::kExitUsage;
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
  if (!out) throw ConfigError(path + ": cannot write");
}

void list_types() {
  for (const auto& [name, type] : IpRegistry::get().all()) {
    std::cout << name << ": " << type.doc << "\n";
    Params p("(defaults)", name, nlohmann::json(), 4096);
    try {
      (void)type.parse(p);
    } catch (const ConfigError&) {
      // Some defaults are not valid on their own (a memory needs a size).
    }
    for (auto it = p.effective().begin(); it != p.effective().end(); ++it)
      std::cout << "  " << it.key() << " = " << it.value().dump() << "  (" << p.docs()[it.key()].get<std::string>()
                << ")\n";
  }
}

}  // namespace

int sc_main(int argc, char** argv) {
  // The main job: no arguments at all, or `demo` and its own options.
  if (argc == 1) return tessera::model::demo_main(argc, argv);
  if (std::string(argv[1]) == "demo") return tessera::model::demo_main(argc - 1, argv + 1);
  Options o;
  po::options_description desc(
      "Usage: tessera-vp [options]\n"
      "       tessera-vp demo [--tiny] [--prompt N] [--decode N] [--seed S] [--set inst.key=value]\n\n"
      "Runs the Tessera T1 virtual platform. With no arguments at all it runs the\n"
      "main job: an MoE decoder prefilled and decoded on the T1 through the host\n"
      "runtime and its firmware, checked against a host FP32 reference (the same\n"
      "as `tessera-vp demo`). With options it elaborates the platform and runs the\n"
      "firmware given (default: the hello-world firmware).\n\nOptions");
  // clang-format off
  desc.add_options()
    ("help,h", "print this help")
    ("version", "print the version")
    ("platform,p", po::value(&o.platform)->default_value(default_platform()), "platform or system description (JSON); a system runs the firmware on every chip")
    ("firmware,f", po::value(&o.firmware), "ELF file to load; its entry point is the boot processor's reset PC "
                                           "(default: the hello-world firmware of this build; none: no firmware)")
    ("chip-firmware", po::value(&o.chip_firmware)->composing(), "in a system: K=ELF runs ELF on chip K instead of --firmware (repeatable)")
    ("set,s", po::value(&o.sets)->composing(), "override a platform value: instance.key=value (repeatable)")
    ("dump-config", po::bool_switch(&o.dump_config), "print the effective configuration as JSON and exit")
    ("list-types", po::bool_switch(&o.list_types), "list the IP types with their parameters and defaults")
    ("log", po::value(&o.logs)->composing(), "verbosity: LEVEL or instance=LEVEL (quiet, error, warning, info, debug, trace)")
    ("strict", po::bool_switch(&o.strict), "any guest error makes the run fail (exit code 4)")
    ("max-time", po::value(&o.max_time), "stop after this much simulated time (exit code 3), e.g. 10ms")
    ("stats", po::value(&o.stats), "write statistics as JSON to this file")
    ("signature", po::value(&o.signature), "at the end, dump memory from begin_signature to end_signature "
                                           "(riscv-arch-test format)")
    ("gdb", po::value(&o.gdb_port), "GDB remote server on localhost:PORT; every hart is a thread")
    ("gdb-wait", po::bool_switch(&o.gdb_wait), "with --gdb: halt at reset until GDB connects")
    ("gen-header", po::value(&o.gen_header), "write the firmware memory-map header and exit")
    ("gen-linker", po::value(&o.gen_linker), "write the linker-script symbols and exit")
    ("protocol-checker", po::value(&o.checker), "on|off: TLM-2.0 protocol checker on every binding")
    ("trace", po::value(&o.trace), "write a Chrome/Perfetto trace (JSON) of the run to this file")
    ("trace-categories", po::value(&o.trace_categories), "what --trace records, comma-separated: tlm, dma, kernel, "
                                                          "tensor, vector, hbm, link, power (default: all)")
    ("trace-sockets", po::value(&o.trace_sockets), "TLM connections whose transactions --trace records, comma-separated "
                                                    "instance names or connections (cp, cp_bus_initiator, bus_noc)")
    ("waves", po::value(&o.waves), "write model-level waveforms to this file (FILE.vcd or FILE.fst)")
    ("waves-preset", po::value(&o.waves_preset), "what --waves records, comma-separated: irq, engines, clocks, power, "
                                                  "links, rtl (the RTL blocks' own FST files), all (default: all)")
    ("waves-window", po::value(&o.waves_window), "record --waves only from..to, e.g. 10us..20us")
    ("quiet,q", po::bool_switch(&o.quiet), "no memory map and no summary");
  // clang-format on
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(argc, argv).options(desc).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    return usage_error(e.what());
  }
  if (vm.count("help")) {
    std::cout << desc << "\n";
    return 0;
  }
  if (vm.count("version")) {
    std::cout << "tessera-vp " << TESSERA_VERSION << " (SystemC " << sc_core::sc_release() << ")\n";
    return 0;
  }
  if (o.list_types) {
    list_types();
    return 0;
  }

  log::install_handler();
  log::set_strict(o.strict);
  try {
    for (const auto& l : o.logs) {
      auto eq = l.find('=');
      if (eq == std::string::npos) log::set_level("", log::parse_level(l));
      else log::set_level(l.substr(0, eq), log::parse_level(l.substr(eq + 1)));
    }
  } catch (const std::invalid_argument& e) {
    return usage_error(std::string("--log: ") + e.what());
  }
  sc_core::sc_time max_time = sc_core::SC_ZERO_TIME;
  if (!o.max_time.empty()) try {
      max_time = parse_time(o.max_time);
    } catch (const UnitError& e) {
      return usage_error(std::string("--max-time: ") + e.what());
    }
  if (vm.count("gdb") && (o.gdb_port == 0 || o.gdb_port > 65535))
    return usage_error(fmt::format("--gdb {}: a TCP port is 1 to 65535", o.gdb_port));
  // Outputs written at the end are opened now: a run never ends in a file it cannot write.
  for (const auto& [flag, path] : {std::pair{"--stats", o.stats}, std::pair{"--signature", o.signature}})
    if (!path.empty()) {
      std::ofstream probe(path, std::ios::app);
      if (!probe) return usage_error(fmt::format("{} {}: cannot write the file", flag, cut(path)));
    }
  bool checker = TESSERA_CHECKER_DEFAULT;
  if (!o.checker.empty()) {
    if (o.checker != "on" && o.checker != "off") return usage_error("--protocol-checker: expected on or off");
    checker = o.checker == "on";
  }

  // Inputs first: nothing elaborates until the platform and the ELF are good.
  PlatformSpec spec;
  std::optional<SystemSpec> system_spec;
  std::optional<ElfImage> elf;
  std::map<unsigned, ElfImage> chip_elfs;
  if (!vm.count("firmware") && std::ifstream(TESSERA_DEFAULT_FIRMWARE)) o.firmware = TESSERA_DEFAULT_FIRMWARE;
  if (o.firmware == "none") o.firmware.clear();
  try {
    if (!o.firmware.empty()) elf = ElfImage::read(o.firmware);
    nlohmann::json raw = PlatformSpec::read(o.platform);
    // HTIF lives at the firmware's tohost symbol unless the platform says where.
    auto place_htif = [&](nlohmann::json& r) {
      if (elf && elf->symbol("tohost") && r.contains("instances") && r["instances"].is_array())
        for (auto& i : r["instances"])
          if (i.is_object() && i.value("type", "") == "htif" && !i.contains("base"))
            i["base"] = format_hex(*elf->symbol("tohost"));
    };
    if (SystemSpec::is_system(raw)) {
      system_spec = SystemSpec::parse(o.platform, raw, o.sets, place_htif);
      for (const std::string& cf : o.chip_firmware) {
        const auto eq = cf.find('=');
        unsigned k = 0;
        try {
          if (eq == std::string::npos || eq == 0) throw UnitError("");
          k = static_cast<unsigned>(parse_uint(cf.substr(0, eq)));
        } catch (const UnitError&) {
          return usage_error("--chip-firmware " + cf + ": expected CHIP=ELF, e.g. 2=fw.elf");
        }
        if (k >= system_spec->chips)
          return usage_error(fmt::format("--chip-firmware {}: there is no chip {} ({} chips)", cf, k, system_spec->chips));
        chip_elfs.emplace(k, ElfImage::read(cf.substr(eq + 1)));
      }
    } else {
      if (!o.chip_firmware.empty()) return usage_error("--chip-firmware: " + o.platform + " is one chip, not a system");
      for (const auto& s : o.sets) PlatformSpec::apply_set(raw, o.platform, s);
      place_htif(raw);
      spec = PlatformSpec::parse(o.platform, raw);
    }
  } catch (const ConfigError& e) {  // also ElfError
    return input_error(e);
  } catch (const std::exception& e) {  // a bad input no check above foresaw: still one line and exit 2
    return input_error(ConfigError(std::string("bad input: ") + e.what()));
  }
  const PlatformSpec& chip_spec = system_spec ? system_spec->chip_specs.front() : spec;
  if (o.dump_config) {
    if (system_spec) {
      nlohmann::ordered_json out;
      out["system"] = system_spec->name;
      out["topology"] = system_spec->topology;
      out["chips"] = system_spec->chips;
      out["links"] = nlohmann::ordered_json::array();
      for (const LinkSpec& l : system_spec->links) out["links"].push_back({l.a, l.port_a, l.b, l.port_b});
      out["chip"] = nlohmann::ordered_json::array();
      for (const PlatformSpec& c : system_spec->chip_specs) out["chip"].push_back(c.effective());
      std::cout << out.dump(2) << "\n";
    } else {
      std::cout << spec.effective().dump(2) << "\n";
    }
    return 0;
  }
  if (!o.gen_header.empty() || !o.gen_linker.empty()) {
    try {
      if (!o.gen_header.empty()) write_file(o.gen_header, chip_spec.c_header());
      if (!o.gen_linker.empty()) write_file(o.gen_linker, chip_spec.linker_symbols());
    } catch (const ConfigError& e) {
      return input_error(e);
    }
    return 0;
  }

  // Traces and waves open before anything elaborates: the IPs declare their signals as they are built.
  rtl::install_waves_fst();
  try {
    if (!o.trace.empty()) {
      trace::Options t;
      t.file = o.trace;
      t.categories = split_list(o.trace_categories);
      t.sockets = split_list(o.trace_sockets);
      trace::open(t);
    } else if (!o.trace_categories.empty() || !o.trace_sockets.empty()) {
      return usage_error("--trace-categories and --trace-sockets need --trace FILE.json");
    }
    if (!o.waves.empty()) {
      waves::Options w;
      w.file = o.waves;
      w.groups = split_list(o.waves_preset);
      if (!o.waves_window.empty()) waves::parse_window(o.waves_window, w);
      waves::open(w);
    } else if (!o.waves_preset.empty() || !o.waves_window.empty()) {
      return usage_error("--waves-preset and --waves-window need --waves FILE.vcd");
    }
  } catch (const std::runtime_error& e) {
    return usage_error(e.what());
  }

  // One platform, or a system of chips; `chips` lists them either way.
  std::unique_ptr<Platform> single;
  std::unique_ptr<System> system;
  std::vector<Platform*> chips;
  try {
    if (system_spec) {
      system = std::make_unique<System>(*system_spec, checker);
      for (unsigned k = 0; k < system->size(); ++k) chips.push_back(&system->chip(k));
    } else {
      single = std::make_unique<Platform>(spec.name.c_str(), spec, checker);
      chips.push_back(single.get());
    }
    for (unsigned k = 0; k < chips.size(); ++k) {
      auto own = chip_elfs.find(k);
      if (own != chip_elfs.end()) chips[k]->load(own->second);
      else if (elf) chips[k]->load(*elf);
    }
    if (!o.signature.empty() && !(elf && elf->symbol("begin_signature") && elf->symbol("end_signature")))
      throw ConfigError("--signature: the firmware has no begin_signature and end_signature symbols");
  } catch (const ConfigError& e) {  // also ElfError
    return input_error(e);
  }
  // Names that only the built platform can check.
  for (const std::string& msg : {log::unknown_paths(), trace::unmatched_sockets()})
    if (!msg.empty()) return usage_error(msg);
  Platform* platform = chips.front();
  std::unique_ptr<riscv::GdbServer> gdb;
  if (vm.count("gdb")) {
    try {
      gdb = std::make_unique<riscv::GdbServer>(o.gdb_port);
    } catch (const std::runtime_error& e) {
      return usage_error(e.what());
    }
    for (Platform* c : chips)
      for (const InstanceSpec& s : c->spec().instances)
        if (auto* cpu = c->get<riscv::RiscvCpu>(s.name)) {
          gdb->add_hart(cpu);
          cpu->attach_debugger(gdb.get(), o.gdb_wait);
        }
    if (gdb->harts().empty()) return usage_error("--gdb: the platform has no processor");
    std::cerr << fmt::format("GDB server on localhost:{}{}\n", o.gdb_port, o.gdb_wait ? ", waiting for a connection" : "");
  }
  if (!o.quiet) {
    if (system_spec) std::cerr << system_spec->describe() << "Each chip:\n";
    std::cerr << platform->memory_map();
    if (elf)
      std::cerr << fmt::format("Firmware {} (RV{}), entry {:#x}{}\n", elf->file, elf->xlen, elf->entry,
                               chips.size() > 1 ? fmt::format(", on each of the {} chips", chips.size()) : "");
  }

  const auto wall_start = std::chrono::steady_clock::now();
  int code = sim::kExitOk;
  std::string end = "finished";
  try {
    if (max_time > sc_core::SC_ZERO_TIME) sc_core::sc_start(max_time);
    else sc_core::sc_start();
    for (Platform* c : chips)
      if (!c->load_error().empty()) {
        std::cerr << "tessera-vp: error: " << c->load_error() << "\n";
        return sim::kExitUsage;
      }
    if (sim::exit_code()) {
      code = *sim::exit_code();
      end = sim::exit_reason();
    } else if (max_time > sc_core::SC_ZERO_TIME && sc_core::sc_pending_activity()) {
      code = sim::kExitAbnormal;
      end = "--max-time " + o.max_time + " reached";
    } else {
      // Nothing can happen any more. A hart asleep in wfi then waits for
      // an interrupt that cannot come: a deadlock, not a clean end (that is
      // the test finisher, HTIF, or --max-time).
      std::string asleep;
      for (Platform* c : chips)
        for (const InstanceSpec& s : c->spec().instances)
          if (auto* cpu = c->get<riscv::RiscvCpu>(s.name); cpu && cpu->asleep())
            asleep += (asleep.empty() ? "" : ", ") + std::string(cpu->name());
      if (asleep.empty()) {
        end = "nothing left to simulate";
      } else {
        code = sim::kExitAbnormal;
        end = "deadlock: nothing left to simulate while " + asleep + " sleep" + (asleep.find(',') == std::string::npos ? "s" : "") +
              " in wfi with no interrupt that can wake " + (asleep.find(',') == std::string::npos ? "it" : "them");
      }
    }
  } catch (const sc_core::sc_report& r) {
    code = sim::kExitAbnormal;
    end = std::string("simulation error: ") + r.what();
  } catch (const std::exception& e) {
    code = sim::kExitAbnormal;
    end = std::string("simulation error: ") + e.what();
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  for (Platform* c : chips)
    for (const InstanceSpec& s : c->spec().instances)
      if (auto* pm = c->get<PowerManager>(s.name)) pm->publish();
  if (!o.waves.empty() && !waves::close()) std::cerr << "tessera-vp: warning: cannot write " << o.waves << "\n";
  trace::close();
  if (gdb) gdb->exited(code);
  if (!o.signature.empty()) {
    const std::uint64_t begin = *elf->symbol("begin_signature"), end = *elf->symbol("end_signature");
    std::vector<std::uint8_t> bytes(end > begin ? end - begin : 0);
    platform->debug_read(begin, bytes.data(), bytes.size());
    std::ofstream out(o.signature);
    for (std::size_t i = 0; i + 4 <= bytes.size(); i += 4)
      out << fmt::format("{:02x}{:02x}{:02x}{:02x}\n", bytes[i + 3], bytes[i + 2], bytes[i + 1], bytes[i]);
    if (!out) std::cerr << "tessera-vp: warning: cannot write " << o.signature << "\n";
  }
  if (code == 0 && log::strict() && log::guest_error_count() > 0) {
    code = sim::kExitStrict;
    end += fmt::format("; --strict: {} guest error(s)", log::guest_error_count());
  }

  nlohmann::ordered_json stats;
  stats["platform"] = system_spec ? system_spec->name : spec.name;
  stats["simulated_time_s"] = sim::end_time().to_seconds();
  stats["wall_time_s"] = wall;
  stats["exit_code"] = code;
  stats["end"] = end;
  stats["guest_errors"] = log::guest_error_count();
  stats["protocol_violations"] = system ? system->protocol_violations() : platform->protocol_violations();
  stats["ips"] = system ? system->stats() : platform->stats();
  if (!o.stats.empty()) {
    std::ofstream out(o.stats);
    out << stats.dump(2) << "\n";
    if (!out) {
      std::cerr << "tessera-vp: error: cannot write " << o.stats << "\n";
      if (code == 0) code = sim::kExitAbnormal;
    }
  }
  if (!o.quiet) {
    std::cerr << fmt::format("\n=== tessera-vp summary ===\nend: {}\nexit code: {}\nsimulated time: {}\nwall time: {:.3f} s\n"
                             "guest errors: {}\n",
                             end, code, sim::end_time().to_string(), wall, log::guest_error_count());
    // Counters that moved; instances where nothing did are counted, not
    // listed (--stats FILE has every counter).
    unsigned idle = 0;
    for (auto it = stats["ips"].begin(); it != stats["ips"].end(); ++it) {
      std::string line;
      for (auto kv = it.value().begin(); kv != it.value().end(); ++kv)
        if (!(kv.value().is_number() && kv.value().get<double>() == 0))
          line += fmt::format("{}{}={}", line.empty() ? "" : " ", kv.key(), kv.value().dump());
      if (line.empty()) ++idle;
      else std::cerr << fmt::format("  {:<16} {}\n", it.key(), line);
    }
    if (idle) std::cerr << fmt::format("  ({} idle instances not shown; --stats FILE has every counter)\n", idle);
  }
  std::fflush(stdout);
  return code;
}
