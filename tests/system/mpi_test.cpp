// Systems over MPI ranks, through the real tessera-vp under mpirun: every
// chip's UART output, the exit code, the simulated time and the statistics
// are the single-process run's; placements are checked and followed; a
// rank that dies ends the others.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "vp_run.hpp"

namespace {

using namespace tessera::testing;

const std::string kFirmware = TESSERA_FIRMWARE_DIR;
const std::string kPlatforms = std::string(TESSERA_SOURCE_DIR) + "/platform/";
// mpirun as root (CI machines) needs both; --oversubscribe: more ranks than cores.
const std::string kMpirun = "env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --oversubscribe";

Outcome mpirun(unsigned ranks, const std::string& args, const std::string& tag) {
  const std::string out = local(tag + ".out"), err = local(tag + ".err");
  const std::string cmd = "timeout -k 5 " + std::to_string(kProcessTimeoutS) + " " + kMpirun + " -np " +
                          std::to_string(ranks) + " " + TESSERA_VP + " -q " + args + " >" + out + " 2>" + err +
                          " </dev/null";
  const int status = std::system(cmd.c_str());
  return Outcome{WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
}

// Ranks print their chips' lines as they come: compare them in order.
std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> v;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) v.push_back(l);
  std::sort(v.begin(), v.end());
  return v;
}

nlohmann::json stats(const std::string& file) {
  const std::string text = slurp(file);
  return text.empty() ? nlohmann::json() : nlohmann::json::parse(text);
}

// Runs tessera-vp ARGS in one process and on 2 and 4 ranks, and expects
// the same sorted output lines, exit code, simulated time, end, guest
// errors and every counter of every instance; returns the single run.
Outcome expect_ranks_give_the_single_process_run(const std::string& args, const std::string& tag) {
  Outcome one = run(args + " --stats " + local(tag + ".1.json"));
  EXPECT_EQ(one.code, 0) << one.err;
  const nlohmann::json s1 = stats(local(tag + ".1.json"));
  EXPECT_FALSE(s1.is_null());
  for (unsigned ranks : {2u, 4u}) {
    const std::string name = tag + "." + std::to_string(ranks);
    Outcome r = mpirun(ranks, args + " --stats " + local(name + ".json"), name);
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(lines(r.out), lines(one.out)) << ranks << " ranks";
    const nlohmann::json s = stats(local(name + ".json"));
    if (s.is_null()) {
      ADD_FAILURE() << "no statistics from " << ranks << " ranks: " << r.err;
      continue;
    }
    for (const char* key : {"simulated_time_s", "exit_code", "end", "guest_errors", "ips"})
      EXPECT_EQ(s[key], s1[key]) << key << " on " << ranks << " ranks";
    EXPECT_EQ(s["ranks"]["ranks"], ranks);
    EXPECT_NEAR(s["ranks"]["lookahead_ns"].get<double>(), 100.0, 1e-6) << "the links' latency";
    EXPECT_GT(s["ranks"]["exchanged_bytes"].get<double>(), 0);
  }
  return one;
}

}  // namespace

// The ring of four running c2c_ring: tokens into every chip, 4 KiB to the
// next one, timed, and each port's FLIT counters. With a lane failing and a
// FLIT corrupted on the link between chips 0 and 1, which crosses ranks,
// each end keeps its own copy of the link's state.
TEST(Mpi, RanksGiveTheSingleProcessRunByteForByte) {
  const std::string ring = "-p " + kPlatforms + "t1x4-ring.json --firmware " + kFirmware + "/c2c_ring.elf";
  expect_ranks_give_the_single_process_run(ring, "clean");
  Outcome faults = expect_ranks_give_the_single_process_run(ring + " --set chip1.c2c.faults=1:flit3,1:lane2@20us", "faults");
  EXPECT_NE(faults.out.find("[chip1] chip 1 port 1: to chip 0, 8 lanes"), std::string::npos) << faults.out;
}

// The torus of eight running every chip's communication engine (an
// all-reduce and a pull all-to-all), with the detailed HBM and the
// flit-level NoC.
TEST(Mpi, CollectivesOverRanksGiveTheSingleProcessRunByteForByte) {
  expect_ranks_give_the_single_process_run(
      "-p " + kPlatforms + "t1x8-torus.json --firmware " + kFirmware + "/c2c_collectives.elf", "collectives");
}

TEST(Mpi, PlacementIsCheckedAndFollowed) {
  const std::string ring = "-p " + kPlatforms + "t1x4-ring.json --firmware " + kFirmware + "/c2c_ring.elf";
  Outcome one = run(ring);
  ASSERT_EQ(one.code, 0) << one.err;
  Outcome placed = mpirun(2, ring + " --placement 1,0,0,1", "placed");
  EXPECT_EQ(placed.code, 0) << placed.err;
  EXPECT_EQ(lines(placed.out), lines(one.out));
  Outcome few = mpirun(2, ring + " --placement 0,1,1", "few");
  EXPECT_EQ(few.code, 2);
  EXPECT_NE(few.err.find("--placement 0,1,1: 3 ranks given for 4 chips"), std::string::npos) << few.err;
  Outcome idle = mpirun(2, ring + " --placement 0,0,0,0", "idle");
  EXPECT_EQ(idle.code, 2);
  EXPECT_NE(idle.err.find("rank 1 would hold no chip"), std::string::npos) << idle.err;
  Outcome bad = mpirun(2, ring + " --placement 0,1,2,x", "bad");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("--placement: chip 2 on \"2\": ranks are 0 to 1"), std::string::npos) << bad.err;
  Outcome many = mpirun(5, ring, "many");
  EXPECT_EQ(many.code, 2);
  EXPECT_NE(many.err.find("mpirun -np 5: rank 4 would hold no chip (4 chips)"), std::string::npos) << many.err;
  Outcome chip = mpirun(2, "--firmware " + kFirmware + "/hello.elf", "chip");
  EXPECT_EQ(chip.code, 2);
  EXPECT_NE(chip.err.find("is one chip; ranks split a system of chips"), std::string::npos) << chip.err;
  const int demo = std::system(("timeout -k 5 60 " + kMpirun + " -np 2 " + TESSERA_VP + " demo --tiny >" +
                                 local("demo.out") + " 2>" + local("demo.err") + " </dev/null").c_str());
  EXPECT_TRUE(WIFEXITED(demo) && WEXITSTATUS(demo) == 2);
  EXPECT_NE(slurp(local("demo.err")).find("one chip runs in one process, without mpirun"), std::string::npos)
      << slurp(local("demo.err"));
  const int demo_alone = std::system(("timeout -k 5 60 " + std::string(TESSERA_VP) + " demo --chips 4 --placement 0,1,0,1 >" +
                                       local("demo2.out") + " 2>" + local("demo2.err") + " </dev/null").c_str());
  EXPECT_TRUE(WIFEXITED(demo_alone) && WEXITSTATUS(demo_alone) == 2);
  EXPECT_NE(slurp(local("demo2.err")).find("--placement places a system's chips (--chips 4 to 64) on the ranks of an mpirun"),
            std::string::npos) << slurp(local("demo2.err"));
  Outcome alone = run(ring + " --placement 0,0,0,0");
  EXPECT_EQ(alone.code, 2);
  EXPECT_NE(alone.err.find("--placement: the chips are placed on MPI ranks; run under mpirun"), std::string::npos)
      << alone.err;
}

// An MPMD launch whose second rank sees another link latency: every rank
// ends with one line, before anything runs.
TEST(Mpi, RanksThatRunDifferentSystemsAreRefused) {
  const std::string ring = std::string(TESSERA_VP) + " -q -p " + kPlatforms + "t1x4-ring.json --firmware " + kFirmware +
                           "/c2c_ring.elf";
  const std::string cmd = "timeout -k 5 120 " + kMpirun + " -np 1 " + ring + " : -np 1 " + ring +
                          " --set c2c.latency=200ns >" + local("out") + " 2>" + local("err") + " </dev/null";
  const int status = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 2) << slurp(local("err"));
  const std::string err = slurp(local("err"));
  EXPECT_NE(err.find("rank 1 runs another system, placement or firmware than rank 0"), std::string::npos) << err;
  EXPECT_EQ(slurp(local("out")).find("tokens"), std::string::npos) << "nothing ran";
}

// Rank 1 is killed while the torus of sixteen runs: every rank ends, and
// mpirun with a non-zero code, instead of waiting at the next window.
// Runs `command` (an mpirun of 2 ranks writing `marker` at its end) in the
// background, kills rank 1's process (`program`) after 2 s, and expects
// mpirun to end every rank soon, non-zero, with no statistics.
void expect_a_killed_rank_ends_all(const std::string& command, const std::string& program, const std::string& marker,
                                   const std::string& tag) {
  std::remove(marker.c_str());
  {
    std::ofstream script(local(tag + ".sh"));
    script << command << " >" << local(tag + ".out") << " 2>" << local(tag + ".err") << " </dev/null &\n"
           << "M=$!\nsleep 2\n"
           << "for p in $(pgrep -f '" << marker << "'); do\n"
           << "  if [ \"$(cat /proc/$p/comm 2>/dev/null)\" = " << program << " ] && tr '\\0' '\\n' </proc/$p/environ |"
           << " grep -qx OMPI_COMM_WORLD_RANK=1; then kill -9 $p; fi\n"
           << "done\nwait $M\necho $? >" << local(tag + ".code") << "\n";
  }
  const auto start = std::chrono::steady_clock::now();
  ASSERT_NE(std::system(("timeout -k 5 120 sh " + local(tag + ".sh")).c_str()), -1);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string code = slurp(local(tag + ".code")), err = slurp(local(tag + ".err"));
  ASSERT_FALSE(code.empty()) << "mpirun did not end: " << err;
  EXPECT_NE(std::stoi(code), 0) << err;
  EXPECT_LT(took, 100.0) << "the surviving rank waited";
  EXPECT_NE(err.find("signal 9"), std::string::npos) << err;
  EXPECT_EQ(slurp(marker), "") << "no statistics from a run that lost a rank";
}

TEST(Mpi, ARankThatDiesEndsTheOthers) {
  const std::string marker = local("dies.json");
  expect_a_killed_rank_ends_all(kMpirun + " -np 2 " + TESSERA_VP + " -q -p " + kPlatforms +
                                    "t1x16-torus.json --firmware " + kFirmware + "/c2c_collectives.elf --stats " + marker,
                                "tessera-vp", marker, "dies");
}

// The same with a host program: the main job, its host on rank 0 driving
// rank 1's chips, loses rank 1.
TEST(Mpi, ARankOfAHostProgramThatDiesEndsTheOthers) {
  const std::string marker = local("job-dies.json");
  expect_a_killed_rank_ends_all(kMpirun + " -np 2 " + TESSERA_VP + " demo --chips 8 --decode 24 --stats " + marker,
                                "tessera-demo", marker, "job-dies");
}

// The main job through the host runtime's Cluster, its chips spread over
// the ranks and the host program on rank 0: the same tokens, virtual
// times, energy and every chip's counters as in one process.
TEST(Mpi, TheMainJobOverRanksGivesTheSingleProcessRun) {
  const std::string demo = std::string(TESSERA_VP) + " demo --chips 8 --prompt 2 --decode 3 --stats ";
  auto without_wall = [](const std::string& text) {
    std::string kept;
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);)
      if (l.rfind("wall time", 0) != 0) kept += l + "\n";
    return kept;
  };
  auto read = [](const std::string& file) {
    nlohmann::json j = stats(file);
    if (j.is_object()) j.erase("wall_time_s"), j["ranks"].erase("exchanged_bytes"), j["ranks"].erase("waited_s"),
                       j["ranks"].erase("ranks"), j["ranks"].erase("waited_by_rank_s"), j["ranks"].erase("longest_wait_s");
    return j;
  };
  const std::string one_json = local("job.1.json");
  const int one = std::system(("timeout -k 5 300 " + demo + one_json + " >" + local("job.1.out") + " 2>" +
                               local("job.1.err") + " </dev/null").c_str());
  ASSERT_TRUE(WIFEXITED(one) && WEXITSTATUS(one) == 0) << slurp(local("job.1.err"));
  const std::string expected = without_wall(slurp(local("job.1.out")));
  ASSERT_NE(expected.find("decoded:"), std::string::npos) << expected;
  const nlohmann::json s1 = read(one_json);
  ASSERT_TRUE(s1.contains("ips"));
  EXPECT_GT(s1["ranks"]["windows"].get<double>(), 0) << "a system runs in windows, in one process too";
  EXPECT_EQ(s1["ips"].size(), stats(one_json)["ips"].size());
  // Round robin on 2 and 4 ranks, and a placement of the user's on 2.
  const std::vector<std::pair<unsigned, std::string>> runs = {{2, ""}, {4, ""}, {2, "1,1,0,0,0,0,1,1"}};
  for (const auto& [ranks, placement] : runs) {
    const std::string tag = "job." + std::to_string(ranks) + (placement.empty() ? "" : ".placed");
    const int status = std::system(("timeout -k 5 300 " + kMpirun + " -np " + std::to_string(ranks) + " " + demo +
                                    local(tag + ".json") + (placement.empty() ? "" : " --placement " + placement) + " >" +
                                    local(tag + ".out") + " 2>" + local(tag + ".err") + " </dev/null").c_str());
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << slurp(local(tag + ".err"));
    EXPECT_EQ(without_wall(slurp(local(tag + ".out"))), expected) << ranks << " ranks";
    EXPECT_EQ(stats(local(tag + ".json"))["ranks"]["ranks"], ranks);
    EXPECT_GT(stats(local(tag + ".json"))["ranks"]["exchanged_bytes"].get<double>(), 0);
    // Every rank's wait, the longest of them named.
    const nlohmann::json sync = stats(local(tag + ".json"))["ranks"];
    ASSERT_EQ(sync["waited_by_rank_s"].size(), ranks);
    double longest = 0;
    for (const auto& w : sync["waited_by_rank_s"]) {
      EXPECT_GE(w.get<double>(), 0);
      longest = std::max(longest, w.get<double>());
    }
    EXPECT_EQ(sync["longest_wait_s"].get<double>(), longest);
    EXPECT_EQ(sync["waited_by_rank_s"][0], sync["waited_s"]);
    // Every value equal, but a domain's peak power: the largest of its
    // power-meter windows, each summed in floating point from the charges of
    // the chip's IPs in the order they came, may differ in the last bits
    // (the tile cores' slices follow the events of the whole process).
    nlohmann::json s = read(local(tag + ".json"));
    for (auto& [chip, counters] : s["ips"].items())
      for (auto& [key, value] : counters.items())
        if (key.size() > 7 && key.compare(key.size() - 7, 7, "_peak_w") == 0 && s1["ips"][chip].contains(key)) {
          EXPECT_NEAR(value.get<double>(), s1["ips"][chip][key].get<double>(), 1e-12 * value.get<double>())
              << chip << "." << key << " on " << ranks << " ranks";
          value = s1["ips"][chip][key];
        }
    EXPECT_EQ(s, s1) << ranks << " ranks";
  }
}
