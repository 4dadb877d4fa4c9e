// Runs the real tessera-vp binary: the golden --dump-config, every class of
// bad input (exit code 2 with one line naming file, instance and key), ELF
// loading, exit codes.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <cstring>
#include <sstream>

#include "elf_builder.hpp"
#include "vp_run.hpp"

using namespace tessera::testing;

namespace {

// Tests run in parallel in one folder: every file a test writes carries the
// test's name (local()). tessera-vp runs without -q here: the summary is checked.
Outcome vp(const std::string& args) { return run_vp(args, false); }

std::string platform_file(const std::string& name, const std::string& json) {
  std::ofstream(local(name)) << json;
  return local(name);
}

const std::string kT1 = std::string(TESSERA_SOURCE_DIR) + "/platform/t1.json";

// A command line refused before anything runs: exit 2, `why` in its line.
void expect_refused(const std::string& args, const std::string& why) {
  const Outcome r = vp(args);
  EXPECT_EQ(r.code, 2) << args;
  EXPECT_NE(r.err.find(why), std::string::npos) << args << ": " << r.err;
}


// A program that passes through HTIF: tohost = 1 at 0x80001000.
ElfSpec passing_program(unsigned xlen) {
  ElfSpec s;
  s.xlen = xlen;
  auto code = xlen == 64 ? words({0x00001297, 0x00100313, 0x0062b023, 0x0000006f})   // auipc t0,1; li t1,1; sd; j .
                         : words({0x00001297, 0x00100313, 0x0062a023, 0x0002a223, 0x0000006f});  // ...; sw; sw x0,4
  code.resize(0x1010, 0);
  s.segments.push_back({0x80000000, code, code.size()});
  s.symbols = {{"tohost", 0x80001000}, {"fromhost", 0x80001008}};
  return s;
}

// A small valid platform, varied by each bad-input test.
std::string small(const std::string& extra_instances = "", const std::string& ram_params = "{}") {
  return R"({"platform": "p", "instances": [
    {"name": "ram", "type": "ram", "base": "0x8000_0000", "size": "1MiB", "params": )" + ram_params + R"(},
    {"name": "plic", "type": "plic", "base": "0x0C00_0000", "params": {"sources": 8}},
    {"name": "finisher", "type": "test_finisher", "base": "0x10_0000"},
    {"name": "htif", "type": "htif", "params": {"console": "none"}})" + extra_instances + "]}";
}

void expect_config_error(const std::string& json, const std::string& message, const std::string& extra = "") {
  const std::string f = platform_file("bad_platform.json", json);
  Outcome r = vp("-p " + f + " " + extra);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find(message), std::string::npos) << "expected \"" << message << "\" in:\n" << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line: " << r.err;
  EXPECT_EQ(r.err.find("Memory map"), std::string::npos) << "nothing elaborated";
}

}  // namespace

TEST(Cli, OptionsWithoutFirmwareBootHelloWorld) {
  Outcome r = vp("-p " + kT1);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("Hello from the Tessera T1 control processor!\nhart 0, RV64ACDFIMSU", 0), 0u) << r.out;
  EXPECT_NE(r.err.find("0x0000000080000000 - 0x0000000080ffffff     16MiB  cpram"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("0x0000000010000000 - 0x00000000100000ff       256  uart0"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("tessera-vp summary"), std::string::npos);
}

TEST(Cli, DemoSubcommandRunsTheModelAndChecksIt) {
  Outcome r = vp("demo --tiny --prompt 4 --decode 2 --seed 3");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("MoE decoder, 2 layers, d_model 128"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("logits vs host FP32 reference: max relative error"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("us/token"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("where the time went"), std::string::npos) << r.out;
  Outcome batch = vp("demo --tiny --batch 3 --prompt 4 --decode 2 --seed 3");
  EXPECT_EQ(batch.code, 0) << batch.err;
  EXPECT_NE(batch.out.find("batch of 3 sequences"), std::string::npos) << batch.out;
  EXPECT_NE(batch.out.find("of each of 3 sequences"), std::string::npos) << batch.out;
  // Batches and serving run compiled by default (as one sequence does).
  EXPECT_NE(batch.out.find("compiled from the model's graph (sw/compiler)"), std::string::npos) << batch.out;
  // Serving a seeded stream: the same report from a fresh process, byte for byte (but the wall time).
  auto served = [&] {
    Outcome r = vp("demo --tiny --serve 20000 --requests 6 --batch 3");
    EXPECT_EQ(r.code, 0) << r.err;
    return r.out.substr(0, r.out.find("wall time"));
  };
  const std::string serve1 = served();
  EXPECT_NE(serve1.find("time to first token: p50"), std::string::npos) << serve1;
  EXPECT_NE(serve1.find("compiled from the model's graph (sw/compiler)"), std::string::npos) << serve1;
  EXPECT_EQ(serve1, served());
  expect_refused("demo --tiny --batch 65", "--batch takes 1 to 64 sequences");
  expect_refused("demo --prompt 0", "--prompt must be 1 to 256 tokens");
}

TEST(Cli, DemoServesATraceFileOrRefusesItsBadLines) {
  const std::string dir = testing::TempDir();
  std::ofstream(dir + "cli_trace.csv") << "arrival_s,prompt_tokens,output_tokens\n# two at once, one later\n0,6,3\n0,4,2\n0.0002,9,4\n";
  auto served = [&] {
    Outcome r = vp("demo --tiny --serve-from " + dir + "cli_trace.csv --batch 2");
    EXPECT_EQ(r.code, 0) << r.err;
    return r.out.substr(0, r.out.find("wall time"));
  };
  const std::string a = served();
  EXPECT_NE(a.find("serving 3 requests from " + dir + "cli_trace.csv over 200.0 us (prompts of 4-9 tokens, 2-4 outputs"),
            std::string::npos) << a;
  EXPECT_NE(a.find("(9 outputs, 19 prompt tokens)"), std::string::npos) << a;
  EXPECT_NE(a.find("time to first token: p50"), std::string::npos) << a;
  EXPECT_EQ(a, served()) << "a trace serves the same in a fresh process";
  std::ofstream(dir + "cli_bad_trace.csv") << "0,6,3\n0.1,6\n";
  Outcome bad = vp("demo --tiny --serve-from " + dir + "cli_bad_trace.csv");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("cli_bad_trace.csv:2: 2 fields; a request is arrival_s,prompt_tokens,output_tokens"), std::string::npos)
      << bad.err;
  Outcome both = vp("demo --tiny --serve 100 --serve-from " + dir + "cli_trace.csv");
  EXPECT_EQ(both.code, 2);
  EXPECT_NE(both.err.find("--serve and --serve-from: one stream of requests at a time"), std::string::npos) << both.err;
}

TEST(Cli, NoArgumentsRunsTheMainJob) {
#ifndef NDEBUG
  GTEST_SKIP() << "the default demo runs in optimised builds (the ci and release presets)";
#endif
  Outcome r = vp("");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("MoE decoder, 4 layers, d_model 512, 8 heads, 8 experts"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("decoded:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(bound 0.05 for BF16)"), std::string::npos) << r.out;
}

TEST(Cli, GoldenDumpConfig) {
  Outcome r = vp("--dump-config -p " + kT1);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, slurp(std::string(TESSERA_SOURCE_DIR) + "/tests/golden/t1.dump-config.json"))
      << "refresh with: cmake --build <build> --target update_golden";
}

TEST(Cli, SetOverridesAnyValue) {
  Outcome r = vp("--dump-config -p " + kT1 + " --set uart0.fifo_depth=32 --set cpram.size=32MiB --set clint.timebase=1MHz");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("\"fifo_depth\": 32"), std::string::npos);
  EXPECT_NE(r.out.find("\"size\": \"0x2000000\""), std::string::npos);
  EXPECT_NE(r.out.find("\"timebase\": \"1MHz\""), std::string::npos);
}

TEST(Cli, BadInputMalformedJson) {
  expect_config_error(R"({"platform": "p", "instances": [ {"name": "x",, } ]})", "bad_platform.json: malformed JSON");
}

TEST(Cli, BadInputUnknownType) {
  expect_config_error(small(R"(, {"name": "dma0", "type": "dma9000", "base": "0x1000"})"),
                      "bad_platform.json: dma0.type: unknown type \"dma9000\"");
}

TEST(Cli, BadInputOverlappingRanges) {
  expect_config_error(small(R"(, {"name": "ram2", "type": "ram", "base": "0x800F_0000", "size": "1MiB"})"),
                      "bad_platform.json: ram2.base: [0x800f0000, 0x801effff] overlaps ram [0x80000000, 0x800fffff]");
}

TEST(Cli, BadInputMissingRequiredParameter) {
  expect_config_error(small(R"(, {"name": "sram", "type": "ram", "base": "0x9000_0000"})"),
                      "bad_platform.json: sram.size: required for type ram");
}

TEST(Cli, BadInputWrongUnit) {
  expect_config_error(small("", R"({"read_latency": "5 MHz"})"),
                      "bad_platform.json: ram.read_latency: expected a time such as 30ns");
}

TEST(Cli, BadInputUnknownKey) {
  expect_config_error(small("", R"({"read_latncy": "5ns"})"), "bad_platform.json: ram.read_latncy: unknown parameter");
  expect_config_error(small(R"(, {"name": "u", "type": "uart16550", "bsae": "0x1000"})"),
                      "bad_platform.json: u.bsae: unknown key");
}

TEST(Cli, BadInputInterruptWiredToNothing) {
  expect_config_error(small(R"(, {"name": "u", "type": "uart16550", "base": "0x1000_0000", "irq": {"irq_out": "pic.src[3]"}})"),
                      "bad_platform.json: u.irq.irq_out: \"pic.src[3]\" is wired to nothing (no instance \"pic\")");
  expect_config_error(small(R"(, {"name": "u", "type": "uart16550", "base": "0x1000_0000", "irq": {"irq_out": "plic.src[9]"}})"),
                      "bad_platform.json: u.irq.irq_out: \"plic.src[9]\" is wired to nothing (plic inputs: src[9])");
  expect_config_error(small(R"(, {"name": "u", "type": "uart16550", "base": "0x1000_0000", "irq": {"tx_irq": "plic.src[3]"}})"),
                      "bad_platform.json: u.irq.tx_irq: u has no interrupt output \"tx_irq\" (outputs: irq_out)");
}

TEST(Cli, BadInputBadAttachment) {
  expect_config_error(small(R"(, {"name": "r2", "type": "ram", "base": "0x9000_0000", "size": "4KiB", "attach": "plic@3"})"),
                      "bad_platform.json: r2.attach: \"plic\" is not a network-on-chip instance of this platform");
  expect_config_error(small(R"(, {"name": "n", "type": "noc", "params": {"width": 2, "height": 2}},
      {"name": "r2", "type": "ram", "base": "0x9000_0000", "size": "4KiB", "attach": "n@9"})"),
                      "bad_platform.json: r2.attach: n has no node 9");
  expect_config_error(small(R"(, {"name": "r2", "type": "ram", "base": "0x9000_0000", "size": "4KiB", "attach": "n"})"),
                      "bad_platform.json: r2.attach: expected \"noc@node\" or \"noc@x,y\"");
  expect_config_error(small(R"(, {"name": "n", "type": "noc", "params": {"width": 2, "height": 2}},
      {"name": "r2", "type": "ram", "base": "0x9000_0000", "size": "4KiB", "attach": "n@1,2"})"),
                      "bad_platform.json: r2.attach: n has no router at (1, 2)");
}

TEST(Cli, BadInputBadSet) {
  expect_config_error(small(), "bad_platform.json has no instance named \"nosuch\"",
                      "--set nosuch.size=1");
  expect_config_error(small(), "bad_platform.json: plic.sources: must be between 1 and 1023", "--set plic.sources=0");
}

TEST(Cli, BadCommandLine) {
  Outcome r = vp("--no-such-option");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("unrecognised option '--no-such-option'"), std::string::npos) << r.err;
  r = vp("--max-time forever");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--max-time: expected a time"), std::string::npos) << r.err;
  r = vp("--log t1.uart0=loud");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("unknown log level \"loud\""), std::string::npos) << r.err;
}

TEST(Cli, LoadsElfAndMapsHtifAtTohost) {
  write_elf(local("good.elf"), build_elf(passing_program(64)));
  Outcome r = vp("-p " + kT1 + " --firmware " + local("good.elf"));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("0x0000000080001000 - 0x000000008000100f        16  htif"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("0x0000000080001010 - 0x0000000080ffffff"), std::string::npos) << "RAM around it: " << r.err;
  EXPECT_NE(r.err.find("(RV64), entry 0x80000000"), std::string::npos) << r.err;
}

namespace {
void expect_elf_error(const std::vector<std::uint8_t>& bytes, const std::string& message) {
  write_elf(local("bad.elf"), bytes);
  Outcome r = vp("-p " + kT1 + " --firmware " + local("bad.elf"));
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_EQ(r.err.rfind("tessera-vp: error: " + local("bad.elf") + ": ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(message), std::string::npos) << "expected \"" << message << "\" in:\n" << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}
}  // namespace

TEST(Cli, MalformedElfFiles) {
  ElfSpec good;
  good.segments.push_back({0x80000000, std::vector<std::uint8_t>(64, 1), 64});
  auto bytes = build_elf(good);
  expect_elf_error({'n', 'o', 'p', 'e'}, "not an ELF file");
  expect_elf_error(std::vector<std::uint8_t>(bytes.begin(), bytes.begin() + 40), "truncated");
  expect_elf_error(std::vector<std::uint8_t>(bytes.begin(), bytes.end() - 10), "truncated: segment 0");
  ElfSpec arm = good;
  arm.machine = EM_AARCH64;
  expect_elf_error(build_elf(arm), "not a RISC-V program");
  auto bad_class = bytes;
  bad_class[EI_CLASS] = 7;
  expect_elf_error(bad_class, "unknown ELF class 7");
  ElfSpec outside = good;
  outside.segments[0].addr = 0x40000000;
  expect_elf_error(build_elf(outside), "segment [0x40000000, 0x40000040) lies outside any memory (nothing at 0x40000000)");
  ElfSpec spill = good;
  spill.segments[0].addr = 0x80ffffe0;
  expect_elf_error(build_elf(spill), "lies outside any memory (nothing at 0x81000000)");
  ElfSpec into_uart = good;
  into_uart.segments[0].addr = 0x10000000;
  expect_elf_error(build_elf(into_uart), "lies outside any memory (uart0 is no memory at 0x10000000)");
  ElfSpec overlap = good;
  overlap.segments.push_back({0x80000020, std::vector<std::uint8_t>(64, 2), 64});
  expect_elf_error(build_elf(overlap), "segment 1 [0x80000020, 0x80000060) overlaps segment [0x80000000, 0x80000040)");
  expect_elf_error(build_elf(passing_program(32)), "an RV32 program cannot run on cp (RV64)");
  write_elf(local("rv32.elf"), build_elf(passing_program(32)));
  Outcome r = vp("-p " + kT1 + " --set cp.xlen=32 --firmware " + local("rv32.elf"));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("(RV32)"), std::string::npos);
}

TEST(Cli, MaxTimeWithWorkLeftIsAbnormal) {
  ElfSpec spin;
  spin.segments.push_back({0x80000000, words({0x0000006f}), 4});  // j .
  write_elf(local("spin.elf"), build_elf(spin));
  Outcome r = vp("-p " + kT1 + " --firmware " + local("spin.elf") + " --max-time 100us");
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_NE(r.err.find("--max-time 100us reached"), std::string::npos) << r.err;
}

TEST(Cli, StatsJson) {
  Outcome r = vp("-q --stats " + local("stats.json"));
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("Hello"), std::string::npos) << "the guest still prints";
  const std::string s = slurp(local("stats.json"));
  EXPECT_NE(s.find("\"t1.cpram\""), std::string::npos) << s;
  EXPECT_NE(s.find("\"exit_code\": 0"), std::string::npos) << s;
  EXPECT_TRUE(r.err.empty()) << "-q prints nothing: " << r.err;
}

TEST(Cli, JumpIntoNothingWithoutHandlerIsACleanUnhandledTrapReport) {
  ElfSpec s;
  s.segments.push_back({0x80000000, words({0x400002b7, 0x00028067}), 8});  // lui t0, 0x40000; jr t0
  write_elf(local("jump.elf"), build_elf(s));
  Outcome r = vp("-q -p " + kT1 + " --firmware " + local("jump.elf"));
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_NE(r.err.find("t1.cp: unhandled trap: instruction access fault (cause 1) at pc 0x40000000, mtval 0x40000000; "
                       "its handler at 0 then raised instruction access fault"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("x5  t0   0x0000000040000000"), std::string::npos) << "registers in the report: " << r.err;
}

TEST(Cli, InstructionTracePerCore) {
  Outcome r = vp("-q -p " + kT1 + " --log t1.cp=trace");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("t1.cp: 0x0000000080000000: "), std::string::npos) << r.err.substr(0, 2000);
  EXPECT_NE(r.err.find("auipc gp, "), std::string::npos) << r.err.substr(0, 2000);
  EXPECT_NE(r.err.find("   gp = 0x8"), std::string::npos) << "register writes: " << r.err.substr(0, 2000);
  Outcome quiet = vp("-q -p " + kT1);
  EXPECT_EQ(quiet.err.find("tessera/trace"), std::string::npos) << "off unless asked for";
}

TEST(Cli, SignatureDump) {
  ElfSpec s = passing_program(64);
  auto& code = s.segments[0].data;
  const std::uint32_t sig[] = {0x11223344, 0xaabbccdd};
  std::memcpy(code.data() + 0x800, sig, sizeof sig);
  s.symbols.emplace_back("begin_signature", 0x80000800);
  s.symbols.emplace_back("end_signature", 0x80000808);
  write_elf(local("sig.elf"), build_elf(s));
  Outcome r = vp("-q -p " + kT1 + " --firmware " + local("sig.elf") + " --signature " + local("sig.txt"));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(slurp(local("sig.txt")), "11223344\naabbccdd\n");
  write_elf(local("nosig.elf"), build_elf(passing_program(64)));
  r = vp("-q -p " + kT1 + " --firmware " + local("nosig.elf") + " --signature " + local("x.txt"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("no begin_signature"), std::string::npos) << r.err;
}

TEST(Cli, StrictTurnsGuestErrorsIntoFailure) {
  // The memory ISA test provokes bus errors on purpose and handles them.
  const std::string elf = std::string(TESSERA_TARGET_DIR) + "/isa-tests/rv64-mem.elf";
  Outcome relaxed = vp("-p " + kT1 + " --firmware " + elf);
  EXPECT_EQ(relaxed.code, 0) << relaxed.err;
  EXPECT_NE(relaxed.err.find("warning tessera/guest-error: t1.bus: read of 4 bytes at 0x40000000: no target there"),
            std::string::npos)
      << relaxed.err;
  Outcome strict = vp("-p " + kT1 + " --firmware " + elf + " --strict");
  EXPECT_EQ(strict.code, 4) << strict.err;
  EXPECT_NE(strict.err.find("--strict: 2 guest error(s)"), std::string::npos) << strict.err;
}

// --boot: a raw program (--load) starts from the reset vector with a0 = 0
// (the hart id), a1 = the generated device tree (its magic 0xd00dfeed)
// and a2 = OpenSBI's fw_dynamic_info ("OSBI"), and passes; --dump-dts
// prints a source dtc compiles; bad uses are refused with one line.
TEST(Cli, BootPassesTheHartIdTheDeviceTreeAndFwDynamicInfo) {
  // lwu t0,0(a1); li t1,0xedfe0dd0; bne t0,t1,fail; bnez a0,fail; lwu t0,0(a2); li t1,0x4942534f;
  // bne t0,t1,fail; finisher <- 0x5555; ... fail: finisher <- (7 << 16) | 0x3333
  const unsigned char program[] = {
      0x83, 0xe2, 0x05, 0x00, 0x37, 0xe3, 0x0e, 0x00, 0x05, 0x33, 0x32, 0x03, 0x13, 0x03, 0x03, 0xdd, 0x63, 0x93,
      0x62, 0x02, 0x0d, 0xe1, 0x83, 0x62, 0x06, 0x00, 0x37, 0x53, 0x42, 0x49, 0x1b, 0x03, 0xf3, 0x34, 0x63, 0x9a,
      0x62, 0x00, 0xb7, 0x02, 0x10, 0x00, 0x15, 0x63, 0x1b, 0x03, 0x53, 0x55, 0x23, 0xa0, 0x62, 0x00, 0x01, 0xa0,
      0xb7, 0x02, 0x10, 0x00, 0x37, 0x33, 0x07, 0x00, 0x1b, 0x03, 0x33, 0x33, 0x23, 0xa0, 0x62, 0x00, 0xfd, 0xb7};
  std::ofstream(local("prog.bin"), std::ios::binary).write(reinterpret_cast<const char*>(program), sizeof program);
  Outcome r = vp("-q -p " + kT1 + " --load " + local("prog.bin") + "@0x80000000 --boot --max-time 1ms");
  EXPECT_EQ(r.code, 0) << r.err;
  // --dump-dts: the source, which dtc compiles.
  r = vp("-p " + kT1 + " --dump-dts");
  EXPECT_EQ(r.code, 0) << r.err;
  for (const char* want : {"riscv,isa = \"rv64imafdc_zicsr_zifencei\"", "mmu-type = \"riscv,sv39\"",
                           "compatible = \"sifive,clint0\", \"riscv,clint0\"", "interrupts-extended = <&cpu0_intc 3 &cpu0_intc 7>",
                           "compatible = \"ns16550a\"", "stdout-path = \"/soc/serial@10000000\"",
                           "reg = <0x0 0x80000000 0x0 0x1000000>", "timebase-frequency = <10000000>"})
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
  std::ofstream(local("t1.dts")) << r.out;
  if (std::system("command -v dtc >/dev/null 2>&1") == 0) {
    EXPECT_EQ(std::system(("timeout 60 dtc -q -I dts -O dtb -o " + local("t1.dtb") + " " + local("t1.dts")).c_str()), 0);
    r = vp("-q -p " + kT1 + " --load " + local("prog.bin") + "@0x80000000 --dtb " + local("t1.dtb") + " --max-time 1ms");
    EXPECT_EQ(r.code, 0) << "--dtb FILE passes that tree: " << r.err;
  }
  // Refusals, each one line, exit 2.
  const std::pair<std::string, std::string> bad[] = {
      {"--load " + local("prog.bin"), "expected FILE@ADDRESS"},
      {"--load nothere.bin@0x80000000", "cannot read nothere.bin"},
      {"--load " + local("prog.bin") + "@0x40000000", "lies outside any memory"},
      {"--load " + local("prog.bin") + "@0x80000000 --dtb " + local("prog.bin"), "not a flattened device tree"},
      {"--firmware none --boot", "nothing to start"},
  };
  for (const auto& [args, why] : bad) {
    r = vp("-q -p " + kT1 + " " + args + " --max-time 1ms");
    EXPECT_EQ(r.code, 2) << args << ": " << r.err;
    EXPECT_NE(r.err.find(why), std::string::npos) << args << ": " << r.err;
  }
}

TEST(Cli, DemoCompiledRunsTheModelFromItsGraph) {
  // The main job compiled from its graph: the hand-written run's tokens,
  // its logits within the bound, its time against the roofline.
  auto tokens = [](const std::string& out) { return out.substr(out.find("decoded:"), out.find('\n', out.find("decoded:")) - out.find("decoded:")); };
  Outcome r = vp("demo --tiny --prompt 6 --decode 4 --seed 3");  // compiled: the default for one sequence on one chip
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("compiled from the model's graph (sw/compiler)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("logits vs host FP32 reference: max relative error"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("of the bound; decode"), std::string::npos) << r.out;
  Outcome hand = vp("demo --tiny --hand-written --prompt 6 --decode 4 --seed 3");
  EXPECT_NE(hand.out.find("experts dispatched by the tiles"), std::string::npos) << hand.out;
  EXPECT_EQ(hand.code, 0) << hand.err;
  EXPECT_EQ(tokens(r.out), tokens(hand.out));
  // A batch compiled (paged KV caches, the sequences' rows in one step):
  // sequence 0's tokens are the single run's; the steps share one copy of
  // the weights per layout.
  Outcome batch = vp("demo --tiny --compiled --batch 3 --prompt 6 --decode 4 --seed 3");
  EXPECT_EQ(batch.code, 0) << batch.err;
  EXPECT_NE(batch.out.find("compiled from the model's graph (sw/compiler)"), std::string::npos) << batch.out;
  EXPECT_NE(batch.out.find("compiled steps: 2 graphs"), std::string::npos) << batch.out;
  EXPECT_EQ(tokens(batch.out), tokens(r.out));
  // On the ring of four (compiled by default there too): each layer's
  // experts over every chip's tiles, the single chip's tokens.
  Outcome chips = vp("demo --tiny --chips 4 --prompt 6 --decode 4 --seed 3");
  EXPECT_EQ(chips.code, 0) << chips.err;
  EXPECT_NE(chips.out.find("split in slices over the tiles of chips 0-3"), std::string::npos) << chips.out;
  EXPECT_EQ(tokens(chips.out), tokens(r.out));
  // FP8 compiled by default too (block-scaled projections, head and
  // experts): the hand-written FP8 programs' tokens.
  Outcome fp8 = vp("demo --tiny --fp8 --prompt 6 --decode 4 --seed 3");
  EXPECT_EQ(fp8.code, 0) << fp8.err;
  EXPECT_NE(fp8.out.find("compiled from the model's graph (sw/compiler)"), std::string::npos) << fp8.out;
  EXPECT_NE(fp8.out.find("(bound 0.15 for FP8)"), std::string::npos) << fp8.out;
  Outcome fp8_hand = vp("demo --tiny --fp8 --hand-written --prompt 6 --decode 4 --seed 3");
  EXPECT_EQ(fp8_hand.code, 0) << fp8_hand.err;
  EXPECT_EQ(tokens(fp8.out), tokens(fp8_hand.out));
  // Data parallel on the ring of four: sequence s on chip s mod 4 with
  // the whole model, sequence 0's tokens those of the single run.
  Outcome dp = vp("demo --tiny --chips 4 --data-parallel --batch 5 --prompt 6 --decode 4 --seed 3");
  EXPECT_EQ(dp.code, 0) << dp.err;
  EXPECT_NE(dp.out.find("data parallel: each chip the whole model"), std::string::npos) << dp.out;
  EXPECT_NE(dp.out.find("of weights on each of 4 chips"), std::string::npos) << dp.out;
  // Prompts prefilled together: a chip's step of 256 tokens (42 prompts of 6) on each chip.
  EXPECT_NE(dp.out.find("prefilled 168 at a time"), std::string::npos) << dp.out;
  EXPECT_NE(dp.out.find("(bound 0.05 for BF16)"), std::string::npos) << dp.out;
  EXPECT_EQ(tokens(dp.out), tokens(r.out));
  // Megatron's layout on the ring of four (--all-reduce): every chip its
  // shard of each step, the engines all-reducing the partial sums; the
  // single run's tokens, every logit within the bound.
  Outcome ar = vp("demo --tiny --chips 4 --all-reduce --batch 2 --prompt 6 --decode 4 --seed 3");
  EXPECT_EQ(ar.code, 0) << ar.err;
  EXPECT_NE(ar.out.find("tensor parallel as Megatron lays it out (--all-reduce): every chip runs each step on its shard, 2 heads"),
            std::string::npos) << ar.out;
  EXPECT_NE(ar.out.find("compiled steps: 2 graphs (a step length each, a shard on every chip)"), std::string::npos) << ar.out;
  EXPECT_NE(ar.out.find("(bound 0.05 for BF16)"), std::string::npos) << ar.out;
  EXPECT_EQ(tokens(ar.out), tokens(r.out));
  // Expert parallel on the ring of four (--expert-parallel, DeepSeek's
  // layout): sequence s on chip s mod 4 with all but the experts, each
  // chip one of the four experts, the rows dispatched by all-to-alls; the
  // single run's tokens, about half a data-parallel chip's weights (1.25
  // MB against 2.43 measured), a chip's prefill step 64 tokens (the
  // experts' kernel's 256 rows over four chips' slots: 10 prompts of 6).
  Outcome ep = vp("demo --tiny --chips 4 --expert-parallel --batch 5 --prompt 6 --decode 4 --seed 3");
  EXPECT_EQ(ep.code, 0) << ep.err;
  EXPECT_NE(ep.out.find("expert parallel as DeepSeek lays it out (--expert-parallel)"), std::string::npos) << ep.out;
  EXPECT_NE(ep.out.find("prefilled 40 at a time"), std::string::npos) << ep.out;
  EXPECT_NE(ep.out.find("(bound 0.05 for BF16)"), std::string::npos) << ep.out;
  EXPECT_EQ(tokens(ep.out), tokens(r.out));
  auto weights_mb = [](const std::string& out) {
    const std::size_t at = out.find("up to ");
    return at == std::string::npos ? 0.0 : std::stod(out.substr(at + 6));
  };
  EXPECT_GT(weights_mb(ep.out), 0.0) << ep.out;
  EXPECT_LT(weights_mb(ep.out), 0.6 * weights_mb(dp.out)) << ep.out << dp.out;
  expect_refused("demo --tiny --chips 4 --expert-parallel --all-reduce", "--all-reduce or --expert-parallel, not both");
  expect_refused("demo --tiny --expert-parallel", "--expert-parallel spreads the experts over a system's chips");
  expect_refused("demo --tiny --chips 8 --expert-parallel", "expert parallel over 8 chips: 4 experts do not divide over the chips");
  expect_refused("demo --tiny --fp8 --chips 4 --expert-parallel", "expert parallel over 4 chips: FP8 experts are not dispatched");
  expect_refused("demo --tiny --all-reduce", "--all-reduce lays each step out over a system's chips");
  expect_refused("demo --tiny --chips 4 --all-reduce --data-parallel", "--all-reduce or --data-parallel, not both");
  expect_refused("demo --tiny --chips 16 --all-reduce", "tensor parallel over 16 chips with all-reduce: 8 heads do not divide over the chips");
  expect_refused("demo --tiny --data-parallel --batch 4", "--data-parallel spreads a batch's sequences over a system's chips");
  expect_refused("demo --tiny --chips 4 --data-parallel --hand-written", "--data-parallel runs the compiled model");
  expect_refused("demo --tiny --chips 4 --data-parallel --launches", "--data-parallel runs the compiled model");
  Outcome launches = vp("demo --tiny --compiled --launches");
  EXPECT_EQ(launches.code, 2);
  EXPECT_NE(launches.err.find("--compiled runs the graph as one launch a step"), std::string::npos) << launches.err;
  Outcome twice = vp("demo --tiny --compiled --hand-written");
  EXPECT_EQ(twice.code, 2);
  EXPECT_NE(twice.err.find("--compiled or --hand-written, not both"), std::string::npos) << twice.err;
}

TEST(Cli, DemoSpeculatesWithASmallDraftAtTheIssuesSpeed) {
  // Issue 17's figure: a draft accepted about 90% of the time (steered;
  // a = 0.87 a token in this seed's draws) decodes at least 1.5x as fast as
  // plain decoding (the decode after the prompt), within 10% of the analytic speed-up with the measured
  // step costs. The small draft (one layer, a quarter of the width) costs
  // about a fifth of a target step; the verifying step of 5 tokens 1.6-1.8
  // target steps (more experts wake).
  Outcome r = vp("demo --speculate 4 --acceptance 0.9 --draft small --decode 32 --seed 3");  // compiled: the default
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("compiled from the model's graph (sw/compiler)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("small draft: 1 layer, d_model 128"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tokens identical to plain greedy decoding: yes"), std::string::npos) << r.out;
  // The decode's speed-up (after the prompt, which both prefill once and
  // the speculative run twice, its draft's too): the whole run's was 1.70x
  // while the plain run's first steps also wrote the target's weights
  // through the host port (1.88 ms); with the weights preloaded it is 1.45x.
  double speedup = 0, decode = 0, with_v = 0, gap = 100;
  const std::size_t at = r.out.find("plain: speed-up "), de = r.out.find("(after the prompt): measured "),
                    an = r.out.find("(v + k c): ");
  ASSERT_NE(at, std::string::npos) << r.out;
  ASSERT_NE(de, std::string::npos) << r.out;
  ASSERT_NE(an, std::string::npos) << r.out;
  std::sscanf(r.out.c_str() + at, "plain: speed-up %lfx", &speedup);
  std::sscanf(r.out.c_str() + de, "(after the prompt): measured %lfx", &decode);
  std::sscanf(r.out.c_str() + an, "(v + k c): %lfx (the run %lf%%)", &with_v, &gap);
  EXPECT_GE(decode, 1.5) << r.out;
  EXPECT_GT(speedup, 1.3) << r.out;
  EXPECT_GT(with_v, 1.0) << r.out;
  EXPECT_LE(std::fabs(gap), 10.0) << r.out;
  expect_refused("demo --tiny --draft small", "--draft goes with --speculate");
  expect_refused("demo --tiny --speculate 2 --draft big", "--draft takes first-layer");
}
