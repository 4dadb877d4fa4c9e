#include <gtest/gtest.h>

#include "common/testing/initiator.hpp"
#include "common/testing/reg_checks.hpp"
#include "hbm/hbm.hpp"
#include "traffic_gen/traffic_gen.hpp"
#include "traffic_gen_regs.hpp"

using namespace tessera;
using namespace tessera::traffic_gen;
using namespace tessera::testing;
namespace R = tessera::regs::traffic_gen;

namespace {

hbm::Hbm::Config one_pc() {
  hbm::Hbm::Config c;
  c.t = hbm::Timing::load(std::string(TESSERA_PLATFORM_DIR) + "/hbm3-6400.json");
  c.org.channels = 1;
  c.org.pseudo_channels = 1;
  c.address_map = "O5 G2 C2 B2 C3 R15";
  c.size = hbm::AddressMap(c.address_map, c.org, 32, false).capacity();
  return c;
}

struct Bench {
  hbm::Hbm hbm{"hbm", one_pc()};
  TrafficGen tgen;
  TestInitiator cpu{"cpu"}, csr{"csr"};
  IrqIn done;
  explicit Bench(const TrafficGen::Config& c) : tgen("tgen", c) {
    tgen.bus_initiator.bind(hbm.mem_target);
    csr.socket.bind(hbm.csr_target());
    cpu.socket.bind(tgen.csr_target);
    tgen.irq_out.bind(done);
  }
};

}  // namespace

TEST(TrafficGen, CAndCppViewsAgree) {
  expect_c_view_matches(R::kBlock, traffic_gen_regs_cview, traffic_gen_fields_cview, traffic_gen_values_cview);
}

TEST(TrafficGen, ResetValuesAndAccessTypes) {
  TrafficGen::Config c;
  c.request_bytes = 64;
  c.stride = 4096;
  c.count = 1000;
  c.outstanding = 4;
  TrafficGen t("tgen", c);
  expect_reset_and_access(fw_of(t.csr_target), 0, R::kBlock, {"SIZE"});
}

TEST(TrafficGen, SequentialFromThePlatformFileStreamsAtHbmSpeed) {
  TrafficGen::Config c;
  c.size = 64 << 20;
  c.request_bytes = 4096;
  c.count = 512;
  c.outstanding = 4;
  c.autostart = true;
  Bench b(c);
  sc_core::sc_start();
  EXPECT_EQ(b.tgen.requests_done(), 512u);
  EXPECT_TRUE(b.done.level());
  EXPECT_GE(b.tgen.bandwidth(), 0.85 * 25.6e9);
  EXPECT_LE(b.tgen.bandwidth(), 25.6e9);
}

TEST(TrafficGen, FirmwareStartsARandomMixedRunThroughCsrs) {
  TrafficGen::Config c;
  Bench b(c);
  struct Fw : sc_core::sc_module {
    Fw(const sc_core::sc_module_name& n, TestInitiator& i) : sc_core::sc_module(n) {
      sc_core::sc_spawn([&i] {
        sc_core::sc_time d;
        auto wr = [&](std::uint64_t off, std::uint64_t v, unsigned len) {
          i.transport(tlm::TLM_WRITE_COMMAND, off, &v, len, &d);
        };
        wr(0x8, 3, 4);          // mixed
        wr(0xc, 70, 4);         // 70% reads
        wr(0x18, 1 << 24, 8);   // 16 MiB
        wr(0x20, 32, 4);
        wr(0x28, 2000, 4);
        wr(0x2c, 16, 4);
        wr(0x0, 1, 4);          // START
      });
    }
  } fw("fw", b.cpu);
  sc_core::sc_start();
  EXPECT_TRUE(b.done.level());
  EXPECT_EQ(read_dbg(fw_of(b.tgen.csr_target), 0x40, 8), 2000u) << "DONE_REQUESTS";
  EXPECT_EQ(read_dbg(fw_of(b.tgen.csr_target), 0x48, 8), 2000u * 32) << "BYTES";
  EXPECT_EQ(read_dbg(fw_of(b.tgen.csr_target), 0x4, 4), 2u) << "STATUS: done, no error";
  const auto t = b.hbm.totals();
  EXPECT_EQ(t.reads + t.writes, 2000u);
  EXPECT_NEAR(static_cast<double>(t.reads) / 2000, 0.70, 0.05);
  EXPECT_GT(read_dbg(fw_of(b.tgen.csr_target), 0x50, 8), 0u) << "ELAPSED_NS";
}

// Guest-controlled sizes never become host allocations, and a run whose
// requests fail ends at the first error instead of draining COUNT requests.
TEST(TrafficGen, HugeRequestsAreRefusedAndFailingRunsStopAtTheFirstError) {
  TrafficGen::Config c;
  Bench b(c);
  bool huge_refused = false;
  struct Fw : sc_core::sc_module {
    Fw(const sc_core::sc_module_name& n, TestInitiator& i, bool& refused) : sc_core::sc_module(n) {
      sc_core::sc_spawn([&i, &refused] {
        sc_core::sc_time d;
        auto wr = [&](std::uint64_t off, std::uint64_t v, unsigned len) {
          return i.transport(tlm::TLM_WRITE_COMMAND, off, &v, len, &d);
        };
        wr(0x18, ~0ull, 8);       // SIZE: everything
        wr(0x20, 0xffffffff, 4);  // REQ_BYTES: 4 GiB per request, 64 streams
        wr(0x2c, 64, 4);
        refused = wr(0x0, 1, 4) != tlm::TLM_OK_RESPONSE;
        wr(0x10, 1ull << 40, 8);  // BASE far past the HBM: every request fails
        wr(0x20, 64, 4);
        wr(0x28, 0xffffffff, 4);  // 4 G requests
        wr(0x0, 1, 4);
      });
    }
  } fw("fw", b.cpu, huge_refused);
  sc_core::sc_start(sc_core::sc_time(1, sc_core::SC_MS));
  EXPECT_TRUE(huge_refused) << "START with REQ_BYTES over " << TrafficGen::kMaxRequestBytes;
  EXPECT_TRUE(b.done.level()) << "the failing run ended";
  EXPECT_EQ(read_dbg(fw_of(b.tgen.csr_target), 0x4, 4), 6u) << "STATUS: done, error";
  EXPECT_LE(read_dbg(fw_of(b.tgen.csr_target), 0x40, 8), 64u) << "DONE_REQUESTS: the streams stopped at the error";
}

// driver one_thread issues every stream's requests from one thread in time
// order: against a target that answers at once (the fast HBM) the run is
// the one the streams' threads give; a target that waits stops it.
TEST(TrafficGen, OneThreadDrivesAFastTargetAsItsThreadsDoAndRefusesOneThatWaits) {
  struct Run {
    hbm::Hbm hbm;
    TrafficGen tgen;
    TestInitiator csr;
    IrqIn done;
    Run(const std::string& name, const std::string& mode, const std::string& driver)
        : hbm((name + "_hbm").c_str(), config(mode)), tgen((name + "_tgen").c_str(), traffic(driver)),
          csr((name + "_csr").c_str()) {
      tgen.bus_initiator.bind(hbm.mem_target);
      csr.socket.bind(hbm.csr_target());
      tgen.irq_out.bind(done);
    }
    static hbm::Hbm::Config config(const std::string& mode) {
      hbm::Hbm::Config c = one_pc();
      c.mode = mode;
      return c;
    }
    static TrafficGen::Config traffic(const std::string& driver) {
      TrafficGen::Config c;
      c.pattern = "mixed";
      c.read_percent = 67;
      c.size = 16 << 20;
      c.request_bytes = 32;
      c.count = 20000;
      c.outstanding = 64;
      c.driver = driver;
      c.autostart = true;
      return c;
    }
  };
  Run threads("threads", "fast", "threads"), one("one", "fast", "one_thread"), waits("waits", "detailed", "one_thread");
  // Each traffic generator's CSR socket needs an initiator bound.
  TestInitiator c1("c1"), c2("c2"), c3("c3");
  c1.socket.bind(threads.tgen.csr_target), c2.socket.bind(one.tgen.csr_target), c3.socket.bind(waits.tgen.csr_target);
  sc_core::sc_start();
  nlohmann::ordered_json a, b;
  threads.tgen.report_stats(a);
  one.tgen.report_stats(b);
  std::printf("threads: %.2f GB/s, %.1f ns; one_thread: %.2f GB/s, %.1f ns\n", threads.tgen.bandwidth() / 1e9,
              a["latency_avg_ns"].get<double>(), one.tgen.bandwidth() / 1e9, b["latency_avg_ns"].get<double>());
  EXPECT_EQ(one.tgen.requests_done(), 20000u);
  EXPECT_TRUE(one.done.level());
  EXPECT_EQ(b["errors"], 0u);
  EXPECT_NEAR(one.tgen.bandwidth(), threads.tgen.bandwidth(), 0.02 * threads.tgen.bandwidth());
  EXPECT_NEAR(b["latency_avg_ns"].get<double>(), a["latency_avg_ns"].get<double>(), 0.05 * a["latency_avg_ns"].get<double>());
  EXPECT_EQ(one.hbm.totals().reads + one.hbm.totals().writes, threads.hbm.totals().reads + threads.hbm.totals().writes);
  EXPECT_TRUE(waits.done.level()) << "the run against a waiting target ended";
  EXPECT_EQ(read_dbg(fw_of(waits.tgen.csr_target), 0x4, 4), 6u) << "STATUS: done, error";
  EXPECT_LE(waits.tgen.requests_done(), 1u);
}
