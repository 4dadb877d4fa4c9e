// Firmware on the virtual T1, through the real tessera-vp: the hello-world
// and the interrupt-driven firmware produce their expected output; programs
// that misbehave end in a clean report, never a crash.
#include <gtest/gtest.h>


#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "vp_run.hpp"

namespace {

using namespace tessera::testing;

const std::string kFirmware = TESSERA_FIRMWARE_DIR;

}  // namespace

TEST(Firmware, HelloWorld) {
  Outcome r = run("--firmware " + kFirmware + "/hello.elf");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.substr(0, r.out.find("running at")),
            "Hello from the Tessera T1 control processor!\nhart 0, RV64ACDFIMSU, ");
  EXPECT_TRUE(r.err.empty()) << r.err;
}

// Firmware built for RV64GC with the hard-float ABI: picolibc's printf and
// libm, <fenv.h> rounding modes and flags, and timer interrupts whose
// handler computes in FP while main does (the BSP saves the FP registers).
TEST(Firmware, FloatingPointWithTheHardFloatAbi) {
  Outcome r = run("--firmware " + kFirmware + "/fp_demo.elf --max-time 100ms");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "sqrt(2) = 1.4142135623730951\n"
            "1/3 = 0.3333333333333333, as float 0.333333343\n"
            "1/3 rounded up = 0.33333333333333337\n"
            "inexact 1, overflow 0\n"
            "exp(1) = 2.71828182845905, sin(1) = 0.841470984807897\n"
            "H(20000) = 10.48072821722932, the same with 20 interrupts\n");
}

// Every F/D instruction that computes, in every rounding mode, on
// thousands of operands chosen for the hard cases: the CP's results and
// fflags hash the same as QEMU's (SoftFloat's), line for line.
TEST(Firmware, FloatingPointAgreesWithQemuBitForBit) {
  const std::string isa = kFirmware + "/../isa-tests";
  for (const std::string xlen : {"64", "32"}) {
    const std::string qemu = "qemu-riscv" + xlen;
    if (std::system(("command -v " + qemu + " >/dev/null 2>&1").c_str()) != 0)
      GTEST_SKIP() << qemu << " is not installed (Debian's qemu-user; ./tools/test installs it)";
    const std::string want = local("qemu" + xlen);
    ASSERT_EQ(std::system(("timeout 120 " + qemu + " " + isa + "/rv" + xlen + "-fpu_diff_linux.elf >" + want).c_str()), 0);
    Outcome r = run("--firmware " + isa + "/rv" + xlen + "-fpu_diff.elf --set cp.xlen=" + xlen + " --max-time 10s");
    EXPECT_EQ(r.code, 0) << r.err;
    const std::string reference = slurp(want);
    EXPECT_GT(std::count(reference.begin(), reference.end(), '\n'), xlen == "64" ? 220 : 170);
    std::istringstream a(r.out), b(reference);
    for (std::string mine, theirs; std::getline(b, theirs);) {
      std::getline(a, mine);
      EXPECT_EQ(mine, theirs) << "RV" << xlen << ": the first word is the instruction and its rounding mode";
    }
  }
}

// Debian's firmware, unmodified: OpenSBI's fw_jump with U-Boot in S mode,
// booted as QEMU boots them (a device tree generated from the platform,
// a0 = hart id, a1 = its address), U-Boot's commands typed at its prompt.
namespace {
const std::string kOpenSbi = "/usr/lib/riscv64-linux-gnu/opensbi/generic/fw_jump.elf";
const std::string kUbootS = "/usr/lib/u-boot/qemu-riscv64_smode/u-boot.bin";
const std::string kUbootM = "/usr/lib/u-boot/qemu-riscv64/u-boot.bin";
const std::string kBoot = " --boot --set cpram.size=256MiB --set 'uart0.rx_prompt==> '";
}  // namespace

TEST(Firmware, OpenSbiBootsUbootToItsPrompt) {
  for (const std::string& f : {kOpenSbi, kUbootS})
    if (::access(f.c_str(), R_OK) != 0) GTEST_SKIP() << f << " is missing (Debian's opensbi and u-boot-qemu; ./tools/test installs them)";
  std::ofstream(local("rx")) << "version\nmd.l 0x80200000 4\nprintenv bootdelay\npoweroff\n";
  Outcome r = run("--firmware " + kOpenSbi + " --load " + kUbootS + "@0x80200000" + kBoot + " --set uart0.rx=" +
                  local("rx") + " --max-time 10s");
  EXPECT_EQ(r.code, 0) << "poweroff ends the run through OpenSBI's SBI reset and the test device: " << r.err;
  r.out.erase(std::remove(r.out.begin(), r.out.end(), '\r'), r.out.end());  // U-Boot ends its lines with CR LF
  for (const char* want : {"OpenSBI v1.1", "Platform Name             : Tessera t1", "Boot HART Base ISA        : rv64imafdc",
                           "Boot HART PMP Count       : 16", "Domain0 Next Mode         : S-mode",
                           "U-Boot 2023.01", "CPU:   rv64imafdc_zicsr_zifencei", "DRAM:  256 MiB",
                           "=> version\nU-Boot 2023.01",
                           "=> md.l 0x80200000 4\n80200000: 84ae822a 00000193 00085297 db02b283",
                           "=> printenv bootdelay\nbootdelay=2\n", "=> poweroff\npoweroff ..."})
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
  EXPECT_TRUE(r.err.empty()) << r.err;
}

TEST(Firmware, UbootInMachineModeOnItsOwn) {
  if (::access(kUbootM.c_str(), R_OK) != 0) GTEST_SKIP() << kUbootM << " is missing (./tools/test installs u-boot-qemu)";
  std::ofstream(local("rx")) << "bdinfo\n";
  Outcome r = run("--load " + kUbootM + "@0x80000000" + kBoot + " --set uart0.rx=" + local("rx") + " --max-time 2600ms");
  EXPECT_EQ(r.code, 3) << "it runs until --max-time: " << r.err;
  r.out.erase(std::remove(r.out.begin(), r.out.end(), '\r'), r.out.end());
  for (const char* want : {"U-Boot 2023.01", "Hit any key to stop autoboot", "=> bdinfo\nboot_params = ",
                           "-> size     = 0x0000000010000000"})
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
}

TEST(Firmware, InterruptDrivenTimerAndUartReceive) {
  std::ofstream(local("rx")) << "hello tessera\n";
  Outcome r = run("--firmware " + kFirmware + "/irq_demo.elf --set uart0.rx=" + local("rx") + " --max-time 10ms --strict");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "irq demo: waiting for 5 timer ticks and a line on the UART\n"
            "tick 1\ntick 2\ntick 3\ntick 4\ntick 5\n"
            "received: hello tessera\n");
}

TEST(Firmware, SameOutputAndTimeWhateverTheQuantum) {
  std::ofstream(local("rx")) << "x\n";
  std::string first;
  for (const char* q : {"0", "100ns", "1us", "100us"}) {
    Outcome r = run("--firmware " + kFirmware + "/irq_demo.elf --set uart0.rx=" + local("rx") + " --set cp.quantum=" + q +
                    " --max-time 10ms");
    EXPECT_EQ(r.code, 0) << q << ": " << r.err;
    if (first.empty()) first = r.out;
    EXPECT_EQ(r.out, first) << "quantum " << q;
  }
}

#include <nlohmann/json.hpp>

// The integer mix in S mode through Sv39 computes what it computes in M mode.
TEST(Firmware, PagingDoesNotChangeTheAnswer) {
  Outcome m = run("--firmware " + kFirmware + "/intmix_rv64.elf");
  Outcome s = run("--firmware " + kFirmware + "/intmix_sv39.elf --stats " + local("stats.json"));
  EXPECT_EQ(m.code, 0) << m.err;
  EXPECT_EQ(s.code, 0) << s.err;
  EXPECT_EQ(s.out, m.out);
  EXPECT_NE(s.out.find("intmix: 5 iterations, checksum"), std::string::npos) << s.out;
  const nlohmann::json st = nlohmann::json::parse(slurp(local("stats.json")));
  EXPECT_GT(st["ips"]["t1.cp"]["page_walks"].get<std::uint64_t>(), 0u) << "it did translate";
}

TEST(Firmware, FastModesDoNotChangeTheAnswer) {
  for (const char* xlen : {"64", "32"}) {
    const std::string elf = kFirmware + "/intmix_rv" + xlen + ".elf";
    nlohmann::json first;
    std::string first_out;
    for (const char* mode : {"--set cp.dmi=false --set cp.quantum=0", "--set cp.dmi=true --set cp.quantum=1us",
                             "--set cp.dmi=true --set cp.quantum=100us"}) {
      Outcome r = run("--firmware " + elf + " --set cp.xlen=" + xlen + " " + mode + " --stats " + local("stats.json"));
      ASSERT_EQ(r.code, 0) << mode << ": " << r.err;
      const nlohmann::json s = nlohmann::json::parse(slurp(local("stats.json")));
      const nlohmann::json& cp = s["ips"]["t1.cp"];
      if (first.is_null()) {
        first = s;
        first_out = r.out;
        EXPECT_GT(cp["instructions"].get<std::uint64_t>(), 100000u) << "a real workload";
        continue;
      }
      EXPECT_EQ(r.out, first_out) << "RV" << xlen << " " << mode;
      EXPECT_EQ(cp["instructions"], first["ips"]["t1.cp"]["instructions"]) << "RV" << xlen << " " << mode;
      EXPECT_EQ(cp["cycles"], first["ips"]["t1.cp"]["cycles"]) << "RV" << xlen << " " << mode;
      const double t = s["simulated_time_s"].get<double>(), t0 = first["simulated_time_s"].get<double>();
      EXPECT_NEAR(t, t0, 0.01 * t0) << "RV" << xlen << " " << mode;
    }
    const auto dmi = first["ips"]["t1.cp"]["dmi_accesses"].get<std::uint64_t>();
    EXPECT_EQ(dmi, 0u) << "the first mode goes through b_transport for everything";
  }
}

TEST(Firmware, JumpIntoNothingEndsInTheFirmwaresHandler) {
  Outcome r = run("--firmware " + kFirmware + "/misbehave1.elf");
  EXPECT_EQ(r.code, 0x81) << r.err;
  EXPECT_EQ(r.out,
            "jumping into nothing\n"
            "firmware: unhandled exception: instruction access fault (mcause 1) at mepc 0x40000000, mtval 0x40000000\n");
}

TEST(Firmware, StoreToRomEndsInTheFirmwaresHandler) {
  Outcome r = run("--firmware " + kFirmware + "/misbehave2.elf");
  EXPECT_EQ(r.code, 0x87) << r.err;
  EXPECT_NE(r.out.find("store/AMO access fault (mcause 7)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("mtval 0x1000\n"), std::string::npos) << r.out;
}

TEST(Firmware, IllegalInstructionStormHandledByFirmware) {
  Outcome r = run("--firmware " + kFirmware + "/misbehave3.elf --stats " + local("stats.json"));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "survived 1000 illegal instructions\n");
  const nlohmann::json s = nlohmann::json::parse(slurp(local("stats.json")));
  EXPECT_EQ(s["ips"]["t1.cp"]["traps"], 1000);
}

TEST(Firmware, HbmFromTheCpWithEccErrorAndTrafficGenerator) {
  Outcome r = run("--firmware " + kFirmware + "/hbm_demo.elf --stats " + local("stats.json"));
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("hbm: 8 KiB written and read back, 0 mismatches; stack 0 counted 8192 bytes read, 8192 written\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("hbm: uncorrectable error: 1 load fault, 1 interrupt, logged at 0x100; neighbours intact, "
                       "rewritten burst reads back\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("traffic generator: 4194304 bytes in "), std::string::npos) << r.out;
  const nlohmann::json s = nlohmann::json::parse(slurp(local("stats.json")));
  EXPECT_EQ(s["ips"]["t1.hbm0"]["timing_violations"], 0);
  EXPECT_EQ(s["ips"]["t1.hbm0"]["ecc_uncorrected"], 1);
  EXPECT_EQ(s["ips"]["t1.tgen0"]["requests"], 1024);
}

TEST(Firmware, CpDrivesTile0TensorCoreWithInterrupts) {
  Outcome r = run("--firmware " + kFirmware + "/tile_gemm.elf --stats " + local("stats.json"));
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("tile0: 16x24x32 BF16 GEMM: 1 done interrupt, 0 of 384 results wrong, 1 commands completed\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("tile0: refused command 2 with code 3 (flagged), 1 error interrupt; reset clears it\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("tile0: after reset, 2 commands completed\n"), std::string::npos) << r.out;
  const nlohmann::json s = nlohmann::json::parse(slurp(local("stats.json")));
  EXPECT_EQ(s["ips"]["t1.tile0"]["tensor_macs_bf16"], 2 * 16 * 24 * 32);
  EXPECT_EQ(s["ips"]["t1.tile0"]["tensor_errors"], 1);
  EXPECT_EQ(s["ips"]["t1.tile0"]["spm_engine_stream_bytes_written"], 2 * 16 * 24 * 4);
}

// Four chips, each with its own CP running the same firmware: tokens through
// every chip's HBM, a 4 KiB block to the next chip and back; the run ends
// when the last chip's firmware does. With a corrupted FLIT and a failed
// lane on the link between chips 1 and 0, the data still arrives and that
// link runs at x8.
TEST(Firmware, ChipsOfARingPassTokensThroughEachOthersHbm) {
  const std::string ring = std::string(TESSERA_SOURCE_DIR) + "/platform/t1x4-ring.json";
  for (const bool faults : {false, true}) {
    Outcome r = run("-p " + ring + " --firmware " + kFirmware + "/c2c_ring.elf" +
                    (faults ? " --set chip1.c2c.faults=1:flit3,1:lane2@20us" : ""));
    EXPECT_EQ(r.code, 0) << r.err << r.out;
    for (int k = 0; k < 4; ++k) {
      const std::string me = "[chip" + std::to_string(k) + "] chip " + std::to_string(k);
      EXPECT_NE(r.out.find(me + " of 4: the tokens of all 4 chips arrived"), std::string::npos) << r.out;
      EXPECT_NE(r.out.find(me + ": 4 KiB to chip " + std::to_string((k + 1) % 4)), std::string::npos) << r.out;
    }
    std::size_t clean = 0;
    for (std::size_t p = 0; (p = r.out.find(", 0 mismatches", p)) != std::string::npos; ++p) ++clean;
    EXPECT_EQ(clean, 4u) << r.out;
    EXPECT_NE(r.out.find("[chip1] chip 1 port 1: to chip 0, " + std::string(faults ? "8" : "16") + " lanes"),
              std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("[chip0] chip 0 port 0: to chip 1, " + std::string(faults ? "8" : "16") + " lanes"),
              std::string::npos)
        << r.out;
  }
  Outcome alone = run("--firmware " + kFirmware + "/c2c_ring.elf");
  EXPECT_EQ(alone.code, 0) << alone.err;
  EXPECT_NE(alone.out.find("chip 0 of 1: the tokens of all 1 chips arrived"), std::string::npos) << alone.out;
  EXPECT_NE(alone.out.find("chip 0: 4 KiB to chip 0 in"), std::string::npos) << alone.out;
}

// The largest system: 64 chips on an 8 x 8 torus, each writing a token into
// every chip's HBM over up to eight link hops, then 4 KiB to the next chip.
TEST(Firmware, SixtyFourChipsOnATorusReachEveryChip) {
  Outcome r = run("-p " + std::string(TESSERA_SOURCE_DIR) + "/platform/t1x64-torus.json --firmware " + kFirmware +
                  "/c2c_ring.elf");
  EXPECT_EQ(r.code, 0) << r.err;
  std::size_t arrived = 0, clean = 0;
  for (std::size_t p = 0; (p = r.out.find(" of 64: the tokens of all 64 chips arrived", p)) != std::string::npos; ++p) ++arrived;
  for (std::size_t p = 0; (p = r.out.find(", 0 mismatches", p)) != std::string::npos; ++p) ++clean;
  EXPECT_EQ(arrived, 64u) << r.out;
  EXPECT_EQ(clean, 64u) << r.out;
  EXPECT_NE(r.out.find("[chip63] chip 63: 4 KiB to chip 0 in"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[chip63] chip 63 port 2: to chip 7, 16 lanes"), std::string::npos) << r.out;
}

// The communication engine from firmware on every chip: an FP32 all-reduce
// whose completion interrupts each CP and signals tile 0's semaphore, then
// a pull all-to-all with a size for every pair of chips; on the ring of
// four and the torus of eight.
TEST(Firmware, EveryChipsFirmwareDrivesItsCommunicationEngine) {
  for (const auto& [file, chips] : {std::pair<const char*, int>{"t1x4-ring.json", 4}, {"t1x8-torus.json", 8}}) {
    Outcome r = run("-p " + std::string(TESSERA_SOURCE_DIR) + "/platform/" + file + " --firmware " + kFirmware +
                    "/c2c_collectives.elf");
    EXPECT_EQ(r.code, 0) << r.err << r.out;
    for (int k = 0; k < chips; ++k) {
      const std::string me = "[chip" + std::to_string(k) + "] chip " + std::to_string(k) + ": ";
      EXPECT_NE(r.out.find(me + "all-reduce of 4099 floats on " + std::to_string(chips) + " chips in"), std::string::npos)
          << r.out;
      EXPECT_NE(r.out.find(me + "all-to-all (pull) received"), std::string::npos) << r.out;
    }
    std::size_t good = 0;
    for (std::size_t p = 0; (p = r.out.find(": 0 wrong, 1 interrupt, tile 0 semaphore 1", p)) != std::string::npos; ++p) ++good;
    EXPECT_EQ(good, std::size_t(chips)) << r.out;
    good = 0;
    for (std::size_t p = 0; (p = r.out.find(": 0 wrong; engine errors 0 (code 0)", p)) != std::string::npos; ++p) ++good;
    EXPECT_EQ(good, std::size_t(chips)) << r.out;
  }
}

TEST(Firmware, EachChipOfASystemCanRunItsOwnImage) {
  const std::string ring = std::string(TESSERA_SOURCE_DIR) + "/platform/t1x4-ring.json";
  Outcome r = run("-p " + ring + " --firmware " + kFirmware + "/hello.elf --chip-firmware 2=" + kFirmware +
                  "/intmix_rv64.elf");
  EXPECT_EQ(r.code, 0) << r.err;
  for (int k : {0, 1, 3})
    EXPECT_NE(r.out.find("[chip" + std::to_string(k) + "] Hello from the Tessera T1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[chip2] intmix: 5 iterations"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("[chip2] Hello"), std::string::npos) << r.out;
  Outcome bad = run("-p " + ring + " --chip-firmware 7=" + kFirmware + "/hello.elf");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("there is no chip 7 (4 chips)"), std::string::npos) << bad.err;
  Outcome single = run("--chip-firmware 0=" + kFirmware + "/hello.elf");
  EXPECT_EQ(single.code, 2);
  EXPECT_NE(single.err.find("is one chip, not a system"), std::string::npos) << single.err;
}

#include <nlohmann/json.hpp>

// The power model charges every IP's activity: its event counts equal the
// IPs' own counters, and its energy is exactly those counts times the
// energy per event (the platform's defaults), plus leakage over the run.
TEST(Firmware, PowerModelChargesEveryIpsActivity) {
  const double pj_mac_bf16 = 0.25, pj_spm = 0.15, pj_flit_hop = 25, pj_hbm_byte = 31, pj_cp = 25, pj_tile = 10;
  const double pj_act = 900, pj_refresh = 30000, pj_vec = 0.6, pj_special = 2.5;
  for (const char* fw : {"tile_gemm.elf", "hbm_demo.elf"}) {
    Outcome r = run("--firmware " + kFirmware + "/" + fw + " --stats " + local("stats.json"));
    ASSERT_EQ(r.code, 0) << r.err;
    const auto s = nlohmann::json::parse(slurp(local("stats.json")));
    const auto& ips = s["ips"];
    const auto& p = ips["t1.power"];
    double macs = 0, tile_instr = 0, vec = 0, special = 0, read = 0, written = 0;
    for (int t = 0; t < 8; ++t) {
      const auto& k = ips["t1.tile" + std::to_string(t)];
      macs += k["tensor_macs_bf16"].get<double>();
      vec += k["vector_lane_ops"].get<double>();
      special += k["vector_special_function_ops"].get<double>();
      if (k.contains("core_instructions")) tile_instr += k["core_instructions"].get<double>();
    }
    for (int h = 0; h < 4; ++h) {
      read += ips["t1.hbm" + std::to_string(h)]["bytes_read"].get<double>();
      written += ips["t1.hbm" + std::to_string(h)]["bytes_written"].get<double>();
    }
    EXPECT_EQ(p["events_mac_bf16"].get<double>(), macs) << fw;
    EXPECT_EQ(p["events_vector_op"].get<double>(), vec) << fw;
    EXPECT_EQ(p["events_tile_instruction"].get<double>(), tile_instr) << fw;
    EXPECT_EQ(p["events_hbm_read_byte"].get<double>(), read) << fw;
    EXPECT_EQ(p["events_hbm_write_byte"].get<double>(), written) << fw;
    EXPECT_EQ(p["events_cp_instruction"].get<double>(), ips["t1.cp"]["instructions"].get<double>()) << fw;
    EXPECT_GT(p["events_noc_flit_hop"].get<double>(), 0) << fw;
    const double tiles = macs * pj_mac_bf16 + vec * pj_vec + special * pj_special +
                         p["events_spm_byte"].get<double>() * pj_spm + tile_instr * pj_tile;
    EXPECT_DOUBLE_EQ(p["tiles_dynamic_j"].get<double>(), tiles * 1e-12) << fw;
    EXPECT_DOUBLE_EQ(p["noc_dynamic_j"].get<double>(), p["events_noc_flit_hop"].get<double>() * pj_flit_hop * 1e-12);
    EXPECT_DOUBLE_EQ(p["hbm_dynamic_j"].get<double>(),
                     ((read + written) * pj_hbm_byte + p["events_hbm_activate"].get<double>() * pj_act +
                      p["events_hbm_refresh"].get<double>() * pj_refresh) * 1e-12);
    EXPECT_DOUBLE_EQ(p["cp_dynamic_j"].get<double>(), p["events_cp_instruction"].get<double>() * pj_cp * 1e-12);
    const double seconds = s["simulated_time_s"].get<double>();
    EXPECT_NEAR(p["tiles_static_j"].get<double>(), 2.4 * seconds, 1e-9);
    double total = 0;
    for (const char* d : {"tiles", "noc", "hbm", "links", "cp"})
      total += p[std::string(d) + "_dynamic_j"].get<double>() + p[std::string(d) + "_static_j"].get<double>();
    EXPECT_DOUBLE_EQ(p["total_j"].get<double>(), total);
    EXPECT_GT(std::string(fw) == "hbm_demo.elf" ? read : macs, 0) << fw;
  }
}

// The power manager from firmware: P-state tables, a transition timed on
// mtime, the over-cap interrupt, telemetry, and the loop taking over.
TEST(Firmware, PowerManagerFromFirmware) {
  Outcome r = run("--firmware " + kFirmware + "/power_demo.elf --stats " + local("stats.json"));
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("power: tiles P0 1.000@750mV P1 0.900@720mV P2 0.800@690mV P3 0.700@660mV P4 0.600@630mV P5 0.500@600mV, transition 1000 ns\n"),
            std::string::npos) << r.out;
  EXPECT_NE(r.out.find("power: tiles P3 after 1000 ns: 700 per mille, 660 mV\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("power: over the 1 W cap: interrupt after 2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("power: ok\n"), std::string::npos) << r.out;
  const nlohmann::json s = nlohmann::json::parse(slurp(local("stats.json")));
  const auto& p = s["ips"]["t1.power"];
  EXPECT_EQ(p["overcap_events"], 1);
  EXPECT_GT(p["throttles"].get<int>(), 0);
  EXPECT_EQ(p["tiles_transitions"].get<int>(), 1 + p["tiles_throttles"].get<int>()) << "firmware's one, then the loop's";
  // Leakage follows the voltages: the tiles ran part of the run at 0.66 V or less.
  EXPECT_LT(p["tiles_static_j"].get<double>(), 2.4 * s["simulated_time_s"].get<double>());
}

// A domain's P-state sets its models' pace: the traffic generator's 4 MiB
// through the NoC take twice as long with the NoC at half its clock, and
// longer with the HBM at half of its own.
TEST(Firmware, ADomainsClockSetsItsModelsPace) {
  auto traffic_ns = [](const std::string& set) {
    Outcome r = run("--firmware " + kFirmware + "/hbm_demo.elf" + set);
    EXPECT_EQ(r.code, 0) << set << r.err;
    const auto at = r.out.find("traffic generator: 4194304 bytes in ");
    return at == std::string::npos ? 0.0 : std::stod(r.out.substr(at + 36));
  };
  const double full = traffic_ns(""), noc = traffic_ns(" --set power.pstate_noc=3"),
               hbm = traffic_ns(" --set power.pstate_hbm=3");
  ASSERT_GT(full, 0);
  EXPECT_NEAR(noc / full, 2.0, 0.05) << "the NoC at 0.5 of its clock";
  EXPECT_GT(hbm, full * 1.02) << "the HBM at 0.5 of its clock";
  EXPECT_LT(hbm, noc) << "this traffic is the NoC's to carry";
}

// The links' layer from RTL ("impl": "rtl" on every fabric): the ring's
// tokens and blocks go through the Verilated link layer of each port, a
// FLIT corrupted on chip 1's port 1 is refused for its CRC and replayed,
// and every chip's data arrives intact.
TEST(Firmware, ChipsTalkThroughTheLinkLayerRtl) {
  const std::string ring = std::string(TESSERA_SOURCE_DIR) + "/platform/t1x4-ring.json";
  Outcome r = run("-p " + ring + " --firmware " + kFirmware + "/c2c_ring.elf --set c2c.impl=rtl --set chip1.c2c.faults=1:flit3" +
                  " --stats " + local("stats.json"));
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  std::size_t clean = 0;
  for (std::size_t p = 0; (p = r.out.find(", 0 mismatches", p)) != std::string::npos; ++p) ++clean;
  EXPECT_EQ(clean, 4u) << r.out;
  const nlohmann::json s = nlohmann::json::parse(slurp(local("stats.json")));
  EXPECT_EQ(s["ips"]["chip1.c2c"]["port1_crc_errors_out"], 1);
  EXPECT_EQ(s["ips"]["chip1.c2c"]["port1_replays"], 1);
  EXPECT_EQ(s["ips"]["chip0.c2c"]["port0_crc_errors_out"], 0);
}
