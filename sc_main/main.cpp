// tessera-vp: parses options and hands them to a Session (platform/
// session.hpp), which checks the inputs, elaborates, loads, runs and
// reports. Exit codes: the guest's own (test finisher, HTIF), 0 on a normal
// end, 2 on a bad command line, platform file or ELF, 3 when the run ends
// abnormally (--max-time reached, a deadlock, a model error), 4 when
// --strict is on and the guest made an error. With no arguments, or
// `demo`, it runs the main job: the program tessera-demo, beside it.
#include <unistd.h>

#include <boost/program_options.hpp>
#include <cstdlib>
#include <iostream>
#include <systemc>

#include "ranks.hpp"
#include "session.hpp"

namespace po = boost::program_options;

namespace {

// SystemC prints its banner before sc_main runs; only the environment
// stops it, so set it during static initialisation.
const bool kNoBanner = ::setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 0) == 0;

// The main job and ONNX models are applications of the runtime, not part
// of the simulator: run their program (tessera-demo, tessera-onnx) from
// this program's folder (an installed tree) or from the build tree.
int run_program(const char* program, const char* built, int argc, char** argv) {
  std::vector<std::string> places = {tessera::Session::program_dir() + "/" + program, built};
  std::vector<char*> args = {const_cast<char*>(program)};
  for (int i = 1; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  for (const std::string& p : places)
    if (::access(p.c_str(), X_OK) == 0) ::execv(p.c_str(), args.data());
  std::cerr << "tessera-vp: error: " << program << " is missing (looked for " << places[0] << " and " << places[1]
            << "; build the " << program << " target)\n";
  return 2;
}
int run_demo(int argc, char** argv) { return run_program("tessera-demo", TESSERA_DEMO, argc, argv); }

}  // namespace

int sc_main(int argc, char** argv) {
  // Over ranks, tessera-vp runs firmware on a system, and the main job its
  // systems (demo --chips: the runtime's Cluster spreads them); an ONNX
  // model runs on one chip, in one process.
  if (tessera::launched_ranks() > 1 && argc > 1 && std::string(argv[1]) == "run") {
    if (tessera::launched_rank() == 0)
      std::cerr << "tessera-vp: error: run: a model runs on one chip, in one process (run it without mpirun)\n";
    return 2;
  }
  if (argc == 1) return run_demo(1, argv);
  if (std::string(argv[1]) == "demo") return run_demo(argc - 1, argv + 1);
  if (std::string(argv[1]) == "run") return run_program("tessera-onnx", TESSERA_ONNX, argc - 1, argv + 1);
  tessera::SessionOptions o;
  std::string firmware, gen_header, gen_linker, checker;
  int gdb = 0, gdb_tiles = 0;
  bool dump_config = false, dump_dts = false, quiet = false, list_types = false;
  po::options_description desc(
      "Usage: tessera-vp [options] [FIRMWARE.elf]\n"
      "       tessera-vp demo [--tiny] [--prompt N] [--decode N] [--seed S] [--set inst.key=value]\n"
      "       tessera-vp run MODEL.onnx [--input NAME=FILE.pb]... [--output DIR] [--check SET_DIR]\n\n"
      "Runs the Tessera T1 virtual platform. With no arguments at all it runs the\n"
      "main job: an MoE decoder prefilled and decoded on the T1 through the host\n"
      "runtime and its firmware, checked against a host FP32 reference (the same\n"
      "as `tessera-vp demo`). With options it elaborates the platform and runs the\n"
      "firmware given (default: the hello-world firmware).\n\nOptions");
  // clang-format off
  desc.add_options()
    ("help,h", "print this help")
    ("version", "print the version")
    ("platform,p", po::value(&o.platform)->default_value(tessera::Session::default_platform()), "platform or system description (JSON); a system runs the firmware on every chip")
    ("firmware,f", po::value(&firmware), "ELF file to load (also the one positional argument); its entry point is the boot processor's reset PC "
                                         "(default: the hello-world firmware of this build; none: no firmware)")
    ("chip-firmware", po::value(&o.chip_firmware)->composing(), "in a system: K=ELF runs ELF on chip K instead of --firmware (repeatable)")
    ("set,s", po::value(&o.sets)->composing(), "override a platform value: instance.key=value (repeatable)")
    ("load", po::value(&o.loads)->composing(), "FILE@ADDRESS: put a raw binary at that address, e.g. u-boot.bin@0x80200000 (repeatable)")
    ("boot", po::bool_switch(&o.boot), "start as QEMU does: a reset vector at the boot processor's reset PC passes a0 = hart id, "
                                       "a1 = the device tree (generated from the platform with dtc), a2 = OpenSBI's fw_dynamic_info, "
                                       "and jumps to the firmware's entry (or the first --load)")
    ("dtb", po::value(&o.dtb), "with --boot: pass this device tree blob instead of the generated one (implies --boot)")
    ("dump-dts", po::bool_switch(&dump_dts), "print the platform's device tree source and exit")
    ("dump-config", po::bool_switch(&dump_config), "print the effective configuration as JSON and exit")
    ("list-types", po::bool_switch(&list_types), "list the IP types with their parameters and defaults")
    ("log", po::value(&o.logs)->composing(), "verbosity: LEVEL or instance=LEVEL (quiet, error, warning, info, debug, trace)")
    ("strict", po::bool_switch(&o.strict), "any guest error makes the run fail (exit code 4)")
    ("timing-only", po::bool_switch(&o.timing_only), "the tensor cores take their time but compute no products "
                                                       "(seeded results): timing, traffic and energy of full-size models")
    ("max-time", po::value(&o.max_time), "stop after this much simulated time (exit code 3), e.g. 10ms")
    ("stats", po::value(&o.stats), "write statistics as JSON to this file")
    ("placement", po::value(&o.placement), "under mpirun: the rank of each chip of the system, comma-separated "
                                            "(default: round robin, chip k on rank k mod ranks)")
    ("signature", po::value(&o.signature), "at the end, dump memory from begin_signature to end_signature "
                                           "(riscv-arch-test format)")
    ("gdb", po::value(&gdb), "GDB remote server on localhost:PORT; every hart is a thread")
    ("gdb-wait", po::bool_switch(&o.gdb_wait), "with --gdb or --gdb-tiles: halt at reset until GDB connects")
    ("gdb-tiles", po::value(&gdb_tiles), "a second GDB server, on localhost:PORT, for the tiles' RV32 cores (each a thread)")
    ("kernel", po::value(&o.kernels)->composing(), "TILE=ELF: load a tile kernel and start it at time 0 (repeatable); "
                                                   "without --firmware the CP idles and the run ends with the kernels")
    ("gen-header", po::value(&gen_header), "write the firmware memory-map header and exit")
    ("gen-linker", po::value(&gen_linker), "write the linker-script symbols and exit")
    ("protocol-checker", po::value(&checker), "on|off: TLM-2.0 protocol checker on every binding")
    ("trace", po::value(&o.trace), "write a Chrome/Perfetto trace (JSON) of the run to this file")
    ("trace-categories", po::value(&o.trace_categories), ("what --trace records, comma-separated: " +
                                                          tessera::Session::trace_categories() + " (default: all)").c_str())
    ("trace-sockets", po::value(&o.trace_sockets), "TLM connections whose transactions --trace records, comma-separated "
                                                    "instance names or connections (cp, cp_bus_initiator, bus_noc)")
    ("waves", po::value(&o.waves), "write model-level waveforms to this file (FILE.vcd or FILE.fst)")
    ("waves-preset", po::value(&o.waves_preset), "what --waves records, comma-separated: irq, engines, clocks, power, "
                                                  "links, rtl (the RTL blocks' own FST files), all (default: all)")
    ("waves-window", po::value(&o.waves_window), "record --waves only from..to, e.g. 10us..20us")
    ("quiet,q", po::bool_switch(&quiet), "no memory map and no summary");
  // clang-format on
  po::variables_map vm;
  try {
    // The firmware may also come as the one positional argument; any further one is an error.
    po::positional_options_description positional;
    positional.add("firmware", 1);
    po::store(po::command_line_parser(argc, argv).options(desc).positional(positional).run(), vm);
    po::notify(vm);
    if (!checker.empty() && checker != "on" && checker != "off")
      throw po::error("--protocol-checker: expected on or off");
  } catch (const po::error& e) {
    std::cerr << "tessera-vp: error: " << e.what() << "\n(see tessera-vp --help)\n";
    return 2;
  }
  if (vm.count("help")) {
    std::cout << desc << "\n";
    return 0;
  }
  if (vm.count("version")) {
    std::cout << "tessera-vp " << TESSERA_VERSION << " (SystemC " << sc_core::sc_release() << ")\n";
    return 0;
  }
  if (list_types) {
    std::cout << tessera::Session::list_types();
    return 0;
  }
  const bool runs = !dump_config && !dump_dts && gen_header.empty() && gen_linker.empty();  // the default firmware only for a run
  if (const std::string hello = tessera::Session::default_firmware();
      !vm.count("firmware") && runs && o.loads.empty() && o.kernels.empty() && ::access(hello.c_str(), R_OK) == 0)
    firmware = hello;
  if (firmware != "none") o.firmware = firmware;
  if (vm.count("gdb")) o.gdb_port = gdb;
  if (vm.count("gdb-tiles")) o.gdb_tiles_port = gdb_tiles;
  o.protocol_checker = checker.empty() ? TESSERA_CHECKER_DEFAULT : checker == "on";
  o.reports = true;
  // Under mpirun each rank runs the chips it is given (platform/ranks.hpp).
  std::string mpi_error;
  std::unique_ptr<tessera::Ranks> ranks = tessera::open_ranks(&argc, &argv, mpi_error);
  if (!mpi_error.empty()) {
    std::cerr << "tessera-vp: error: " << mpi_error << "\n";
    return 2;
  }
  o.ranks = ranks.get();
  const bool first = !ranks || ranks->rank() == 0;  // the rank that speaks for all
  try {
    tessera::Session session(o);
    if (dump_config) {
      std::cout << session.effective().dump(2) << "\n";
      return 0;
    }
    if (dump_dts) {
      std::cout << session.device_tree();
      return 0;
    }
    if (!gen_header.empty() || !gen_linker.empty()) {
      if (!gen_header.empty()) session.write_header(gen_header);
      if (!gen_linker.empty()) session.write_linker(gen_linker);
      return 0;
    }
    session.elaborate();
    if (!quiet && first) std::cerr << session.describe();
    tessera::RunResult r = session.run();
    if (r.input_error) {
      if (first) std::cerr << "tessera-vp: error: " << r.end << "\n";
      return r.code;
    }
    const auto stats = session.finish(r);
    if (!quiet && first) std::cerr << tessera::Session::summary(stats);
    std::fflush(stdout);
    return r.code;
  } catch (const tessera::SessionError& e) {
    // Every rank reads the same inputs and refuses them alike: one line.
    if (first) std::cerr << "tessera-vp: error: " << e.what() << (e.usage() ? "\n(see tessera-vp --help)\n" : "\n");
    return e.code();
  } catch (const std::exception& e) {  // one rank alone failed: end them all
    std::cerr << "tessera-vp: error: rank " << (ranks ? ranks->rank() : 0) << ": " << e.what() << "\n";
    if (ranks) ranks->abort(3);
    return 3;
  }
}
