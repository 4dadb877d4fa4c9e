// Every chip fact firmware depends on (the CLINT's timebase, the global
// window and its chip shift, the tile core's local map, the tiles) is
// written once, in the platform file or the IP that owns it, and reaches
// firmware through the generated platform header. Moved with --set, the
// fact moves in the header; a program built for other facts is refused
// with a line naming the fact; and a program built for the moved facts
// (t1-moved: TESSERA_MOVED_SETS) runs on the moved platform exactly as the
// default program runs on the default one.
#include <gtest/gtest.h>

#include <regex>
#include <sstream>

#include "vp_run.hpp"

using namespace tessera::testing;

namespace {

const std::string kT1 = std::string(TESSERA_SOURCE_DIR) + "/platform/t1.json";
const std::string kRing = std::string(TESSERA_SOURCE_DIR) + "/platform/t1x4-ring.json";
const std::string kFirmware = TESSERA_FIRMWARE_DIR;

std::string moved_sets() {
  std::istringstream in(TESSERA_MOVED_SETS);
  std::string s, out;
  while (in >> s) out += " --set " + s;
  return out;
}

std::string header(const std::string& sets) {
  const Outcome r = run("-p " + kT1 + sets + " --gen-header " + local("facts.h"));
  EXPECT_EQ(r.code, 0) << r.err;
  return slurp(local("facts.h"));
}

// The times chip k's c2c_ring reports: "4 KiB to chip N in T ns, read back in U ns, 0 mismatches".
std::vector<double> ring_times(const std::string& out) {
  std::vector<double> t;
  const std::regex line(R"(in (\d+) ns, read back in (\d+) ns, 0 mismatches)");
  for (std::sregex_iterator it(out.begin(), out.end(), line), end; it != end; ++it)
    t.push_back(std::stod((*it)[1]) + std::stod((*it)[2]));
  return t;
}

}  // namespace

TEST(Facts, TheHeaderCarriesEveryFactAndSetMovesIt) {
  const std::string plain = header("");
  for (const char* fact : {"#define TESSERA_CLINT_TIMEBASE_HZ 0x989680", "#define TESSERA_C2C_GLOBAL_BASE 0x100000000000",
                           "#define TESSERA_C2C_CHIP_SHIFT 0x28", "#define TESSERA_TYPE_TILE_LOCAL_SPM 0x80000000",
                           "#define TESSERA_TYPE_TILE_LOCAL_REGS 0x1000000", "#define TESSERA_TYPE_TILE_COUNT 8",
                           "#define TESSERA_TYPE_TILE_LIST(X) X(TILE0) X(TILE1)", "#define TESSERA_FACTS \"clint.TIMEBASE_HZ=0x989680;"})
    EXPECT_NE(plain.find(fact), std::string::npos) << fact;
  const std::string moved = header(moved_sets());
  EXPECT_NE(moved.find("#define TESSERA_CLINT_TIMEBASE_HZ 0xf4240"), std::string::npos);
  EXPECT_NE(moved.find("#define TESSERA_C2C_GLOBAL_BASE 0x200000000000"), std::string::npos);
  EXPECT_NE(moved.find("#define TESSERA_C2C_BASE 0x200000000000"), std::string::npos);
  // A window the fabric cannot divide among its chips is refused, naming the key.
  const Outcome bad = run("-p " + kT1 + " --set c2c.size=3TiB --gen-header " + local("bad.h"));
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("c2c.size: the global window holds 64 chips"), std::string::npos) << bad.err;
}

TEST(Facts, FirmwareBuiltForOtherFactsIsRefusedNamingTheFact) {
  Outcome r = run("-p " + kT1 + " --set clint.timebase=1MHz --firmware " + kFirmware + "/hello.elf");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("hello.elf: it was built for clint.TIMEBASE_HZ=0x989680, and"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("has 0xf4240"), std::string::npos) << r.err;
  r = run("-p " + kRing + " --set c2c.base=0x2000_0000_0000 --firmware " + kFirmware + "/c2c_ring.elf");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("built for c2c.GLOBAL_BASE=0x100000000000"), std::string::npos) << r.err;
  r = run("-p " + kRing + " --firmware " + kFirmware + "/c2c_ring_moved.elf");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("c2c_ring_moved.elf: it was built for clint.TIMEBASE_HZ=0xf4240"), std::string::npos) << r.err;
  // A fact the platform does not have is no disagreement: hello runs on a bare chip.
  const std::string bare = local("bare.json");
  std::ofstream(bare) << R"({"platform": "bare", "boot": "cp", "instances": [
      {"name": "cp", "type": "riscv", "params": {"reset_pc": "0x8000_0000"}},
      {"name": "cpram", "type": "ram", "base": "0x8000_0000", "size": "16MiB"},
      {"name": "uart0", "type": "uart16550", "base": "0x1000_0000"},
      {"name": "finisher", "type": "test_finisher", "base": "0x10_0000"}]})";
  r = run("-p " + bare + " --firmware " + kFirmware + "/hello.elf --max-time 5ms");
  EXPECT_NE(r.out.find("Hello from the Tessera T1"), std::string::npos) << r.err;
}

TEST(Facts, FirmwareAndModelsAgreeWhenTheFactsMove) {
  // c2c_ring times its transfers on mtime and addresses its neighbours
  // through the global window: built for the moved facts and run on them,
  // every chip's data arrives and the times it measures (at the coarser
  // 1 MHz timebase) are the default run's.
  const Outcome plain = run("-p " + kRing + " --firmware " + kFirmware + "/c2c_ring.elf");
  ASSERT_EQ(plain.code, 0) << plain.err;
  const Outcome moved = run("-p " + kRing + moved_sets() + " --firmware " + kFirmware + "/c2c_ring_moved.elf");
  ASSERT_EQ(moved.code, 0) << moved.err;
  const std::vector<double> a = ring_times(plain.out), b = ring_times(moved.out);
  ASSERT_EQ(a.size(), 4u) << plain.out;
  ASSERT_EQ(b.size(), 4u) << moved.out;
  double sa = 0, sb = 0;
  for (unsigned k = 0; k < 4; ++k) sa += a[k], sb += b[k];
  EXPECT_NEAR(sb, sa, 4 * 2000.0) << "within the 1 us resolution of each of the two readings per chip";
}
