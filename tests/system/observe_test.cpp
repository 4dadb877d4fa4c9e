// Waveforms and traces through the real tessera-vp: the VCD is well formed
// (every change names a declared signal, time only moves forward) and
// holds the interrupts, engines, clocks and links with the transitions the
// firmware causes; the Perfetto trace is valid JSON whose slices and
// counters sit on their instances' tracks; bad options are refused.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <vector>

#include "vp_run.hpp"

namespace {

using namespace tessera::testing;

const std::string kFirmware = TESSERA_FIRMWARE_DIR;

// A VCD read back: each signal's full name and its changes (time in the
// file's unit, value text).
struct Vcd {
  std::string timescale;
  std::map<std::string, std::string> name_of;  // code -> scope.path.name
  std::map<std::string, std::vector<std::pair<std::uint64_t, std::string>>> changes;  // name -> (time, value)
  std::uint64_t first = 0, last = 0;
  std::string error;  // empty when well formed

  const std::vector<std::pair<std::uint64_t, std::string>>& of(const std::string& name) const {
    static const std::vector<std::pair<std::uint64_t, std::string>> none;
    auto it = changes.find(name);
    return it == changes.end() ? none : it->second;
  }
};

Vcd parse_vcd(const std::string& text) {
  Vcd v;
  std::istringstream in(text);
  std::string tok;
  std::vector<std::string> scope;
  bool defs = true, any_time = false;
  std::uint64_t now = 0;
  while (in >> tok) {
    if (defs) {
      if (tok == "$timescale") {
        std::string a, b;
        in >> a;
        if (a != "$end") in >> b;
        v.timescale = a;
        if (b != "$end") in >> tok;
      } else if (tok == "$scope") {
        std::string kind, name, end;
        in >> kind >> name >> end;
        scope.push_back(name);
      } else if (tok == "$upscope") {
        in >> tok;
        if (scope.empty()) v.error = "$upscope without $scope";
        else scope.pop_back();
      } else if (tok == "$var") {
        std::string type, width, code, name, end;
        in >> type >> width >> code >> name >> end;
        if (end.size() && end[0] == '[') in >> end;  // a bit range
        if (end != "$end") v.error = "malformed $var " + name;
        std::string full;
        for (const auto& s : scope) full += s + ".";
        v.name_of[code] = full + name;
      } else if (tok == "$enddefinitions") {
        in >> tok;
        defs = false;
        if (!scope.empty()) v.error = "scopes left open";
      } else if (tok == "$version") {
        while (in >> tok && tok != "$end") {
        }
      }
      continue;
    }
    if (tok == "$dumpvars" || tok == "$end") continue;
    if (tok[0] == '#') {
      const std::uint64_t t = std::stoull(tok.substr(1));
      if (any_time && t < now) v.error = "time goes backwards at " + tok;
      if (!any_time) v.first = t;
      now = t, any_time = true, v.last = t;
      continue;
    }
    std::string value, code;
    if (tok[0] == 'b' || tok[0] == 'r') {
      value = tok;
      in >> code;
    } else {
      value = tok.substr(0, 1);
      code = tok.substr(1);
    }
    auto it = v.name_of.find(code);
    if (it == v.name_of.end()) {
      v.error = "change of undeclared signal " + code;
      continue;
    }
    v.changes[it->second].emplace_back(now, value);
  }
  if (defs) v.error = "no $enddefinitions";
  return v;
}

// Distinct values a signal took, in order of first appearance.
std::vector<std::string> values(const Vcd& v, const std::string& name) {
  std::vector<std::string> out;
  for (const auto& [t, x] : v.of(name))
    if (out.empty() || out.back() != x) out.push_back(x);
  return out;
}

}  // namespace

TEST(Observe, WavesHoldInterruptsEnginesAndClocks) {
  // The power demo: firmware moves the tiles to P3, then the loop throttles
  // under a 1 W cap, and the power manager's interrupt reaches the PLIC.
  Outcome r = run("--firmware " + kFirmware + "/power_demo.elf --waves " + local("power.vcd"));
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  const Vcd v = parse_vcd(slurp(local("power.vcd")));
  ASSERT_EQ(v.error, "");
  EXPECT_EQ(v.timescale, "1");
  const auto pstates = values(v, "t1.power.tiles_pstate");
  ASSERT_GE(pstates.size(), 3u);
  EXPECT_EQ(pstates[0], "b0");
  EXPECT_EQ(pstates[1], "b11") << "firmware's P3";
  EXPECT_EQ(pstates.back(), "b101") << "then the loop's slowest, P5";
  EXPECT_EQ(values(v, "t1.power.tiles_freq").at(1), "r0.7");
  EXPECT_EQ(values(v, "t1.power.irq_out"), (std::vector<std::string>{"0", "1", "0"})) << "raised, handled";
  EXPECT_GE(values(v, "t1.plic.context_0").size(), 3u);
  EXPECT_GT(v.of("t1.power.total_w").size(), 100u) << "power per 1 us window";
  // The CP's tile GEMM: the tensor core busy twice, its interrupt raised.
  r = run("--firmware " + kFirmware + "/tile_gemm.elf --waves " + local("gemm.vcd") + " --waves-preset engines,irq");
  ASSERT_EQ(r.code, 0) << r.err;
  const Vcd g = parse_vcd(slurp(local("gemm.vcd")));
  ASSERT_EQ(g.error, "");
  std::size_t rises = 0;
  for (const auto& [t, x] : g.of("t1.tile0.tensor.busy")) rises += x == "1";
  EXPECT_GE(rises, 2u);
  EXPECT_GE(values(g, "t1.tile0.irq_out").size(), 3u);
  EXPECT_TRUE(g.of("t1.power.tiles_pstate").empty()) << "clocks are not in this preset";
  // A window: the values at 100 us, then the changes until 200 us.
  r = run("--firmware " + kFirmware + "/power_demo.elf --waves " + local("window.vcd") + " --waves-window 100us..200us");
  ASSERT_EQ(r.code, 0) << r.err;
  const Vcd w = parse_vcd(slurp(local("window.vcd")));
  ASSERT_EQ(w.error, "");
  EXPECT_EQ(w.first, 100000000u) << "in picoseconds";
  EXPECT_LT(w.last, 200000000u);
  EXPECT_EQ(w.of("t1.power.tiles_pstate").front().second, "b11") << "the value it had at 100 us";
  // FST through Verilator's writer: a header block first, and it holds the signal names.
  r = run("--firmware " + kFirmware + "/power_demo.elf --waves " + local("power.fst"));
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string fst = slurp(local("power.fst"));
  ASSERT_GT(fst.size(), 330u);
  EXPECT_EQ(fst[0], 0) << "FST_BL_HDR";
  EXPECT_NE(fst.find("tessera-vp model-level waves"), std::string::npos) << "the writer's version in the header";
}

TEST(Observe, LinkStateAndWidthInTheWaves) {
  const std::string ring = std::string(TESSERA_SOURCE_DIR) + "/platform/t1x4-ring.json";
  Outcome r = run("-p " + ring + " --firmware " + kFirmware + "/c2c_ring.elf --set chip1.c2c.faults=1:lane2@20us --waves " +
                  local("links.vcd") + " --waves-preset links");
  ASSERT_EQ(r.code, 0) << r.err;
  const Vcd v = parse_vcd(slurp(local("links.vcd")));
  ASSERT_EQ(v.error, "");
  EXPECT_EQ(values(v, "chip1.c2c.port1.state"), (std::vector<std::string>{"b10", "b1", "b10"})) << "active, training, active";
  EXPECT_EQ(values(v, "chip1.c2c.port1.lanes"), (std::vector<std::string>{"b10000", "b0", "b1000"}))
      << "16 lanes, none while it retrains, then 8";
  // Links in RTL: each port's FST beside the VCD, when the preset has rtl.
  for (const bool with_rtl : {true, false}) {
    const std::string vcd = local(with_rtl ? "rtl.vcd" : "nortl.vcd"), stem = vcd.substr(0, vcd.size() - 4);
    r = run("-p " + ring + " --firmware " + kFirmware + "/c2c_ring.elf --set c2c.impl=rtl --waves " + vcd +
            " --waves-preset " + (with_rtl ? "links,rtl" : "links"));
    ASSERT_EQ(r.code, 0) << r.err;
    const std::string fst = slurp(stem + ".chip1.c2c.port1.fst");
    if (with_rtl) {
      EXPECT_GT(fst.size(), 1000u);
      EXPECT_EQ(fst.empty() ? 1 : fst[0], 0) << "an FST header block";
    } else {
      EXPECT_TRUE(fst.empty()) << "rtl is not in the preset";
    }
  }
}

TEST(Observe, TraceSlicesAndCountersOnTheirTracks) {
  Outcome r = run("--firmware " + kFirmware + "/tile_gemm.elf --trace " + local("gemm.json") + " --trace-sockets cp");
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(slurp(local("gemm.json")));
  ASSERT_TRUE(j.contains("traceEvents"));
  std::map<int, std::string> threads;
  std::map<std::string, std::size_t> by_cat;
  for (const auto& e : j["traceEvents"]) {
    const std::string ph = e.at("ph");
    if (ph == "M") {
      if (e["name"] == "thread_name") threads[e["tid"].get<int>()] = e["args"]["name"];
      continue;
    }
    ASSERT_TRUE(e.contains("ts") && e["ts"].is_number()) << e.dump();
    ASSERT_TRUE(e.contains("pid")) << e.dump();
    if (ph == "X") {
      ASSERT_GE(e.at("dur").get<double>(), 0) << e.dump();
      EXPECT_EQ(threads.at(e["tid"].get<int>()), e["args"]["path"]) << "a slice sits on its instance's track";
    }
    ++by_cat[e.value("cat", "")];
    if (e.value("cat", "") == "tensor") {
      EXPECT_EQ(e["name"], "gemm 16x24x32 bf16");
      EXPECT_EQ(e["args"]["path"], "t1.tile0.tensor");
      EXPECT_EQ(e["args"]["macs"], 16 * 24 * 32);
    }
    if (e.value("cat", "") == "tlm") {
      EXPECT_EQ(e["args"]["path"].get<std::string>().rfind("t1.cp_", 0), 0u) << e.dump();
    }
  }
  EXPECT_EQ(by_cat["tensor"], 2u) << "two GEMMs completed";
  EXPECT_GT(by_cat["tlm"], 100u) << "the CP's transactions";
  EXPECT_GT(by_cat["power"], 100u) << "power per window";
  // HBM commands of the detailed controller, and FLITs with a replay.
  r = run("--firmware " + kFirmware + "/hbm_demo.elf --trace " + local("hbm.json") + " --trace-categories hbm");
  ASSERT_EQ(r.code, 0) << r.err;
  std::set<std::string> cmds;
  const nlohmann::json hbm = nlohmann::json::parse(slurp(local("hbm.json")));
  for (const auto& e : hbm["traceEvents"])
    if (e["ph"] == "X") cmds.insert(e["name"].get<std::string>());
  for (const char* c : {"ACT", "RD", "WR", "PRE"}) EXPECT_TRUE(cmds.count(c)) << c;
  const std::string ring = std::string(TESSERA_SOURCE_DIR) + "/platform/t1x4-ring.json";
  r = run("-p " + ring + " --firmware " + kFirmware + "/c2c_ring.elf --set chip1.c2c.faults=1:flit3 --trace " +
          local("link.json") + " --trace-categories link");
  ASSERT_EQ(r.code, 0) << r.err;
  std::size_t flits = 0, replays = 0;
  const nlohmann::json link = nlohmann::json::parse(slurp(local("link.json")));
  for (const auto& e : link["traceEvents"]) {
    if (e["ph"] == "X" && e.value("cat", "") == "link") ++flits;
    if (e["ph"] == "i" && e.value("cat", "") == "link") {
      ++replays;
      EXPECT_EQ(e["args"]["path"], "chip1.c2c.port1");
      EXPECT_EQ(e["args"]["reason"], "crc");
    }
  }
  EXPECT_GT(flits, 100u);
  EXPECT_EQ(replays, 1u) << "the one corrupted FLIT";
}

TEST(Observe, BadOptionsAreRefused) {
  auto refused = [](const std::string& args, const std::string& why) {
    Outcome r = run("--firmware none " + args);
    EXPECT_EQ(r.code, 2) << args;
    EXPECT_NE(r.err.find(why), std::string::npos) << args << ": " << r.err;
  };
  refused("--waves w.txt", "--waves w.txt: the file must end in .vcd or .fst");
  refused("--waves w.vcd --waves-preset irq,bogus", "unknown group 'bogus'");
  refused("--waves w.vcd --waves-window 20us..10us", "ends before it begins");
  refused("--waves w.vcd --waves-window 10us", "is not FROM..TO");
  refused("--waves-preset irq", "need --waves FILE.vcd");
  refused("--trace t.json --trace-categories tensor,nope", "unknown category 'nope'");
  refused("--trace /nonexistent/dir/t.json", "cannot write /nonexistent/dir/t.json");
  refused("--trace-sockets cp", "need --trace FILE.json");
  // RTL in the loop: only where a type has it, and only in the RTL's shape.
  refused("--set hbm0.impl=rtl", "hbm0.impl: \"rtl\" is not available for type hbm (available: tlm)");
  refused("--set tile0.impl=rtl", "impl rtl: the RTL array is 8 x 8");
  refused("--set tile0.impl=gates", "(available: tlm, rtl)");
  refused("--set c2c.impl=rtl --set c2c.faults=0:lane2@20us", "impl rtl: the link layer RTL takes corrupted FLITs");
}
