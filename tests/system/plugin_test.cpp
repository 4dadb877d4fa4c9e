// Platform files that build on others and bring IPs of their own: the real
// tessera-vp extending t1 (instances added and merged, timing files found
// beside the base, a bare name for a shipped platform, cycles refused) and
// loading plugins built with tessera_add_plugin (and refusing libraries
// that are missing, no plugin, built for another Tessera, or that register
// a type it has).
#include <gtest/gtest.h>

#include <fstream>

#include "vp_run.hpp"

using namespace tessera::testing;

namespace {

const std::string kT1 = std::string(TESSERA_SOURCE_DIR) + "/platform/t1.json";
const std::string kHello = std::string(TESSERA_FIRMWARE_DIR) + "/hello.elf";
const std::string kPlugins = TESSERA_PLUGIN_DIR;

std::string platform_file(const std::string& name, const std::string& json) {
  std::ofstream(local(name)) << json;
  return local(name);
}

std::string with_plugin(const std::string& library) {
  return platform_file("platform.json", R"({"extends": ")" + kT1 + R"(", "plugins": [")" + library + R"("],
    "instances": [{"name": "probe0", "type": "plugin_probe", "base": "0x1700_0000", "params": {"scratch": 42}}]})");
}

}  // namespace

TEST(Plugins, APluginsTypeIsInstantiatedFromThePlatformFileAndRuns) {
  const std::string p = with_plugin(kPlugins + "/libplugin_probe.so");
  Outcome o = run("-p " + p + " --dump-config");
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("\"plugin_probe\""), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("\"scratch\": 42"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("libplugin_probe.so"), std::string::npos) << o.out;  // the dump names the plugin
  o = run("-p " + p + " --gen-header " + local("h"));
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(slurp(local("h")).find("#define TESSERA_PROBE0_BASE 0x17000000"), std::string::npos);
  o = run("-p " + p + " -f " + kHello);
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("Hello from the Tessera T1"), std::string::npos);
}

TEST(Plugins, LibrariesThatAreNoPluginForThisTesseraAreRefusedWithOneLine) {
  struct Case {
    std::string library, says;
  } cases[] = {
      {kPlugins + "/libnothing_here.so", "plugins[0]: " + kPlugins + "/libnothing_here.so: No such file"},
      {kPlugins + "/libnot_a_plugin.so", "not a Tessera plugin (it defines no tessera_plugin_abi"},
      {kPlugins + "/libplugin_old_abi.so", "built for tessera-0.0.0, this is tessera-"},
      {kPlugins + "/libplugin_clash.so", "IP type \"uart16550\" is already known"},
  };
  for (const Case& c : cases) {
    const Outcome o = run("-p " + with_plugin(c.library) + " -f " + kHello);
    EXPECT_EQ(o.code, 2) << c.library;
    EXPECT_NE(o.err.find(c.says), std::string::npos) << o.err;
    EXPECT_EQ(o.err.find("terminate"), std::string::npos) << o.err;
  }
  // A plugin named relative to the platform file, or not a string.
  Outcome o = run("-p " + platform_file("bad.json", R"({"extends": ")" + kT1 + R"(", "plugins": [7]})"));
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("plugins[0]: expected a library file"), std::string::npos) << o.err;
}

TEST(Extends, InstancesAreAddedOrMergedAndTheBasesFilesAreFoundBesideIt) {
  // clint: its timebase changes, its other parameters and wiring stay; the
  // HBM stacks' timing files are found beside t1.json, not beside this file.
  const std::string p = platform_file("derived.json", R"({"extends": ")" + kT1 + R"(", "platform": "t1-derived",
    "instances": [{"name": "clint", "params": {"timebase": "1MHz"}},
                  {"name": "scratch", "type": "ram", "base": "0x9000_0000", "size": "64KiB"}]})");
  Outcome o = run("-p " + p + " --dump-config");
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("\"platform\": \"t1-derived\""), std::string::npos);
  EXPECT_NE(o.out.find("\"timebase\": \"1MHz\""), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("\"harts\": 1"), std::string::npos);
  EXPECT_NE(o.out.find("\"mtip[0]\": \"cp.mtip\""), std::string::npos);
  EXPECT_NE(o.out.find("\"name\": \"scratch\""), std::string::npos);
  EXPECT_NE(o.out.find("\"name\": \"hbm3\""), std::string::npos);
  // A bare name is a platform Tessera ships.
  o = run("-p " + platform_file("named.json", R"({"extends": "t1"})") + " -f " + kHello);
  EXPECT_EQ(o.code, 0) << o.err;
}

TEST(Extends, CyclesMissingBasesAndBadValuesAreRefused) {
  platform_file("a.json", R"({"extends": ")" + local("b.json") + R"("})");
  platform_file("b.json", R"({"extends": ")" + local("a.json") + R"("})");
  Outcome o = run("-p " + local("a.json"));
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("extends this file in turn (a cycle)"), std::string::npos) << o.err;
  o = run("-p " + platform_file("missing.json", R"({"extends": "no_such_platform"})"));
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("no_such_platform.json"), std::string::npos) << o.err;
  o = run("-p " + platform_file("number.json", R"({"extends": 3})"));
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("extends: expected the platform file this one builds on"), std::string::npos) << o.err;
}

TEST(Cli, TheFirmwareMayBeThePositionalArgumentButOnlyOne) {
  Outcome o = run(kHello);
  EXPECT_EQ(o.code, 0) << o.err;
  o = run(kHello + " " + kHello);
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("too many positional options"), std::string::npos) << o.err;
}
