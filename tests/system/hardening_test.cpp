// What an adversarial user does to tessera-vp, class by class: inputs of the
// wrong kind (directories, devices, JSON of the wrong type, numbers out of
// range), ELF files that would exhaust the host, silently accepted
// mistakes, a guest that deadlocks, a guest-fuzz campaign of random MMIO
// and random instructions, and runs repeated byte for byte. Each bad input
// must end in one line naming what is wrong and exit code 2; no guest
// program may crash, hang or exhaust the simulator.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cstring>
#include <fstream>
#include <regex>

#include "elf_builder.hpp"
#include "vp_run.hpp"

using namespace tessera::testing;

namespace {

const std::string kPlatforms = std::string(TESSERA_SOURCE_DIR) + "/platform";
const std::string kT1 = kPlatforms + "/t1.json";
const std::string kFirmware = TESSERA_FIRMWARE_DIR;

std::string write(const std::string& name, const std::string& text) {
  std::ofstream(local(name)) << text;
  return local(name);
}

// A bad input: exit 2, and stderr is one line that contains `what` (a
// command-line mistake may add the pointer to --help).
void expect_refused(const std::string& args, const std::string& what) {
  const Outcome r = run(args);
  EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
  EXPECT_NE(r.err.find(what), std::string::npos) << args << "\n" << r.err;
  const std::string help = "(see tessera-vp --help)\n";
  const bool hint = r.err.size() > help.size() && r.err.compare(r.err.size() - help.size(), help.size(), help) == 0;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), hint ? 2 : 1) << "one line: " << r.err;
}

// The largest resident set of the processes this test has run, in MiB.
double max_child_rss_mib() {
  rusage u{};
  ::getrusage(RUSAGE_CHILDREN, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}

std::string platform_with(const std::string& instances_json) {
  return write("platform.json", R"({"platform": "p", "instances": [)" + instances_json + "]}");
}

}  // namespace

// Class 1: inputs of the wrong kind.
TEST(Hardening, DirectoriesAndDevicesWhereFilesBelongAreRefused) {
  expect_refused("-p /tmp", "/tmp: the platform file is a directory");
  expect_refused("-p /dev/zero", "/dev/zero: the platform file is not a regular file");
  expect_refused("-p " + kT1 + " --firmware /tmp", "/tmp: the program is a directory");
  expect_refused("-p " + kT1 + " --firmware /dev/zero", "/dev/zero: the program is not a regular file");
  expect_refused("-p " + kT1 + " --set hbm0.timing=/dev/zero", "hbm0.timing: /dev/zero: the HBM timing file is not a regular file");
  expect_refused("-p " + kT1 + " --set uart0.rx=/tmp", "uart0.rx: /tmp: the UART's input is a directory");
  const std::string sys = write("sys.json", R"({"system": "s", "chip": "/tmp", "chips": 2})");
  expect_refused("-p " + sys, "/tmp: the platform file is a directory");
  expect_refused("-p " + kPlatforms + "/t1x4-ring.json --chip-firmware 1=/dev/zero",
                 "/dev/zero: the program is not a regular file");
}

TEST(Hardening, JsonOfTheWrongTypeAndNumbersOutOfRangeAreRefused) {
  expect_refused("-p " + platform_with(R"({"name": "r", "type": "ram", "base": 0, "size": "4KiB", "doc": 5})"),
                 "r.doc: expected a string, got 5");
  expect_refused("-p " + platform_with(R"({"name": "r", "type": "ram", "base": 0, "size": "4KiB", "impl": 1})"),
                 "r.impl: expected a string, got 1");
  expect_refused("-p " + platform_with(R"({"name": "r", "type": "ram", "base": 0, "size": 1e400})"),
                 "malformed JSON: number overflow");
  expect_refused("-p " + kT1 + " --set uart0.fifo_depth=1e400", "--set uart0.fifo_depth=1e400: 1e400 is out of range");
  expect_refused("-p " + kT1 + " --set cp.quantum=1e300s", "cp.quantum: \"1e300s\" is longer than the simulator's longest time");
  expect_refused("-p " + kT1 + " --set cp.clock=1e-300GHz", "cp.clock: \"1e-300GHz\" lies outside 1Hz to 1PHz");
  const std::string ring = kPlatforms + "/t1x4-ring.json";
  expect_refused("-p " + ring + " --set chip99999999999999999999.uart0.tx=none", "there is no chip 9999999999");
  expect_refused("-p " + ring + " --set chip7.uart0.tx=none", "there is no chip 7 (4 chips)");
  const std::string numeric = write("sys.json", R"({"system": "s", "chip": ")" + kT1 + R"(", "chips": 2, "topology": 3})");
  expect_refused("-p " + numeric, "topology: expected ring, torus, full or list, got 3");
  const std::string doc = write("sys2.json", R"({"system": "s", "chip": ")" + kT1 + R"(", "chips": 2, "doc": []})");
  expect_refused("-p " + doc, "doc: expected a string, got []");
}

TEST(Hardening, LongValuesAreCutInMessages) {
  const std::string huge(5000, 'x');
  const Outcome r = run("-p " + kT1 + " --set uart0.tx=" + huge + " --set cp.clock=" + huge);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_LT(r.err.size(), 400u) << r.err;
  EXPECT_NE(r.err.find("characters)"), std::string::npos) << r.err;
}

// Class 2: ELF files that would exhaust the host.
TEST(Hardening, ElfSegmentsThatWrapOrAreHugeAreRefusedBeforeAnythingIsAllocated) {
  ElfSpec wrap;
  wrap.segments.push_back({0xfffffffffffff000ull, words({0x0000006f}), 0x2000});
  write_elf(local("wrap.elf"), build_elf(wrap));
  expect_refused("-p " + kT1 + " --firmware " + local("wrap.elf"), "segment 0 wraps around the address space");
  ElfSpec huge;
  huge.segments.push_back({0x80000000, words({0x0000006f}), 1ull << 50});
  write_elf(local("huge.elf"), build_elf(huge));
  expect_refused("-p " + kT1 + " --firmware " + local("huge.elf"), "segment 0 at 0x80000000 is 1125899906842624 bytes");
  EXPECT_LT(max_child_rss_mib(), 200) << "refused before any host memory was allocated for it";
  // Segments that name the same file bytes (here the second names the
  // whole file): the image would hold each copy, up to 1024 times the file.
  ElfSpec shared;
  shared.segments.push_back({0x80000000, std::vector<std::uint8_t>(4096, 0x13), 4096});
  shared.segments.push_back({0x80010000, words({0x0000006f}), 4});
  std::vector<std::uint8_t> bytes = build_elf(shared);
  Elf64_Phdr ph;
  std::memcpy(&ph, bytes.data() + sizeof(Elf64_Ehdr) + sizeof(Elf64_Phdr), sizeof ph);
  ph.p_offset = 0;
  ph.p_filesz = ph.p_memsz = bytes.size();
  std::memcpy(bytes.data() + sizeof(Elf64_Ehdr) + sizeof(Elf64_Phdr), &ph, sizeof ph);
  write_elf(local("shared.elf"), bytes);
  expect_refused("-p " + kT1 + " --firmware " + local("shared.elf"), "more than the file's");
}

TEST(Hardening, GigabytesOfZerosCostNoHostMemory) {
  const std::string p = write("sparse.json", R"({"platform": "p", "boot": "cp", "instances": [
      {"name": "cp", "type": "riscv", "params": {"reset_pc": "0x8000_0000"}},
      {"name": "ram", "type": "ram", "base": "0x8000_0000", "size": "64KiB"},
      {"name": "big", "type": "sparse_memory", "base": "0x10_0000_0000", "size": "64GiB"}]})");
  ElfSpec big;  // the program in RAM, 8 GiB of bss in the sparse memory: loading writes nothing there
  big.segments.push_back({0x80000000, words({0x10500073, 0xffdff06f}), 8});
  big.segments.push_back({0x1000000000ull, {}, 8ull << 30});
  write_elf(local("big.elf"), build_elf(big));
  const Outcome r = run("-p " + p + " --firmware " + local("big.elf") + " --max-time 10us --stats " + local("stats.json"));
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_NE(slurp(local("stats.json")).find("\"host_bytes_allocated\": 0"), std::string::npos) << slurp(local("stats.json"));
  EXPECT_LT(max_child_rss_mib(), 200) << "the zeros of a segment are not held on the host";
}

// Class 5: mistakes that used to pass silently.
TEST(Hardening, HtifOverAnotherDevicesRegistersIsRefused) {
  expect_refused("-p " + kT1 + " --set htif.base=0x1000_0000",
                 "htif.base: [0x10000000, 0x1000000f] lies over uart0 [0x10000000, 0x100000ff], which is no memory");
  ElfSpec tohost;  // the program's tohost symbol names the UART
  tohost.segments.push_back({0x80000000, words({0x0000006f}), 4});
  tohost.symbols.push_back({"tohost", 0x10000000});
  write_elf(local("tohost.elf"), build_elf(tohost));
  expect_refused("-p " + kT1 + " --firmware " + local("tohost.elf"), "htif.base: [0x10000000, 0x1000000f] lies over uart0");
}

TEST(Hardening, SilentlyAcceptedMistakesAreErrors) {
  expect_refused("-p " + platform_with(R"({"name": "mem", "type": "ram", "base": 0, "size": "4KiB"},
                                         {"name": "MEM", "type": "ram", "base": "64KiB", "size": "4KiB"})"),
                 "MEM.name: another instance's name differs from it only in case");
  expect_refused("-p " + kT1 + " --set noc.header_bytes=64", "noc.header_bytes: header_bytes must fit in one (head) flit");
  expect_refused("-p " + kT1 + " --set hbm0.page_size=3000", "hbm0.page_size: must be a power of two");
  expect_refused("-p " + kT1 + " --gdb 70000", "--gdb 70000: a TCP port is 1 to 65535");
  expect_refused("-p " + kT1 + " --gdb 0", "--gdb 0: a TCP port is 1 to 65535");
  expect_refused("-p " + kT1 + " --stats /nonexistent/dir/stats.json", "--stats /nonexistent/dir/stats.json: cannot write");
  expect_refused("-p " + kT1 + " --trace " + local("t.json") + " --trace-sockets nosuch",
                 "--trace-sockets: no connection named nosuch (connections:");
  expect_refused("-p " + kT1 + " --log t1.nosuch=debug", "--log: no instance named t1.nosuch");
  EXPECT_EQ(run("-p " + kT1 + " --log t1.uart0=debug --log t1=info --max-time 1us").code, 3) << "real names still work";
}

// Class 6: a guest that can never wake.
TEST(Hardening, AHartAsleepWithNothingToWakeItIsADeadlock) {
  ElfSpec sleeper;  // csrw mie, zero; wfi; j .-4
  sleeper.segments.push_back({0x80000000, words({0x30401073, 0x10500073, 0xffdff06f}), 12});
  write_elf(local("sleeper.elf"), build_elf(sleeper));
  const Outcome r = run_vp("-p " + kT1 + " --firmware " + local("sleeper.elf"), false);
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_NE(r.err.find("deadlock: nothing left to simulate while t1.cp sleeps in wfi"), std::string::npos) << r.err;
}

// A guest that does everything wrong at once: random MMIO over every
// register window, then random instructions. Each seed ends at --max-time
// (exit code 3), in bounded host memory.
TEST(Hardening, GuestFuzzCampaignEndsAtMaxTimeInBoundedMemory) {
  for (const char* seed : {"1", "2", "3", "4"}) {
    SCOPED_TRACE(std::string("seed ") + seed);
    write(std::string("seed") + seed, std::string(seed) + "\n");
    const Outcome r = run_vp("-p " + kT1 + " --firmware " + kFirmware + "/guest_fuzz.elf --set uart0.rx=" +
                                 local(std::string("seed") + seed) + " --set uart0.rx_interval=300us --max-time 30ms",
                             false);
    EXPECT_EQ(r.code, 3) << r.err.substr(r.err.size() > 3000 ? r.err.size() - 3000 : 0);
    EXPECT_NE(r.err.find("end: --max-time 30ms reached"), std::string::npos) << r.err.substr(0, 2000);
    EXPECT_NE(r.out.find(std::string("guest-fuzz: seed ") + seed + "\n"), std::string::npos) << r.out.substr(0, 500);
    EXPECT_NE(r.out.find("phase B: random instructions"), std::string::npos) << "phase A ran to its end";
    std::smatch m;
    ASSERT_TRUE(std::regex_search(r.err, m, std::regex("t1\\.cp +instructions=(\\d+) cycles=\\d+ traps=(\\d+)"))) << r.err;
    EXPECT_GT(std::stoull(m[1]), 1000000u) << "the CP kept executing";
    EXPECT_GT(std::stoull(m[2]), 15000u) << "faults were taken and survived";
  }
  EXPECT_LT(max_child_rss_mib(), 512) << "host memory stays bounded";
}

// Determinism: the same inputs give the same files, byte for byte, but for
// the wall clock.
namespace {
std::string without_wall_clock(const std::string& text) {
  std::string out;
  std::istringstream in(text);
  bool in_date = false;
  for (std::string line; std::getline(in, line);) {
    if (line.find("$date") != std::string::npos) in_date = true;  // VCD header
    if (!in_date && line.find("wall_time") == std::string::npos) out += line + "\n";
    if (in_date && line.find("$end") != std::string::npos) in_date = false;
  }
  return out;
}

void expect_repeatable(const std::string& args_before_outputs) {
  std::string files[2][3];
  for (int run_no = 0; run_no < 2; ++run_no) {
    const std::string stem = local("run" + std::to_string(run_no));
    const Outcome r = run_vp(args_before_outputs + " --stats " + stem + ".stats.json --trace " + stem + ".trace.json --waves " +
                          stem + ".vcd", false);
    ASSERT_EQ(r.code, 0) << r.err;
    const char* ext[] = {".stats.json", ".trace.json", ".vcd"};
    for (int f = 0; f < 3; ++f) files[run_no][f] = without_wall_clock(slurp(stem + ext[f]));
  }
  for (int f = 0; f < 3; ++f) {
    EXPECT_GT(files[0][f].size(), 100u) << "file " << f << " was written";
    EXPECT_TRUE(files[0][f] == files[1][f]) << "file " << f << " differs between two runs";
  }
}
}  // namespace

TEST(Hardening, TheTinyMainJobRepeatsByteForByte) { expect_repeatable("demo --tiny --prompt 4 --decode 3"); }

TEST(Hardening, FirmwareRunsRepeatByteForByte) {
  expect_repeatable("-p " + kT1 + " --firmware " + kFirmware + "/tile_gemm.elf");
}
