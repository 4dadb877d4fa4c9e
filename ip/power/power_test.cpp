// The energy meter: energy is exactly the activity times the energy per
// event; activity spread over an interval lands in the windows it covers;
// leakage scales with the square of the voltage; bad parameters are
// refused with their key.
#include <gtest/gtest.h>

#include "common/power.hpp"
#include "common/testing/initiator.hpp"
#include "common/testing/reg_checks.hpp"
#include "power/power_manager.hpp"
#include "power_regs.hpp"

using namespace tessera;
using namespace tessera::power;

namespace {
// The events these tests charge, declared here as the IPs declare theirs
// (this binary links no IP that charges them).
const Event mac_bf16 = declare_event("mac_bf16", "tiles", 0.25, "a BF16 MAC (test)");
const Event hbm_read_byte = declare_event("hbm_read_byte", "hbm", 31, "an HBM byte read (test)");
const Event cp_instruction = declare_event("cp_instruction", "cp", 25, "a CP instruction (test)");
}  // namespace
using namespace tessera::power;
using sc_core::sc_time;
using sc_core::SC_NS;
using sc_core::SC_US;

TEST(Power, EnergyIsActivityTimesEnergyPerEventAndLandsInItsWindows) {
  reset();
  Meter& m = meter("t1.tile0.tensor");
  EXPECT_EQ(&m, &meter("t1.hbm0")) << "one meter per chip";
  EXPECT_NE(&m, &meter("chip1.hbm0")) << "each chip of a system has its own";
  m.set_window(sc_time(1, SC_US));
  // 1e6 BF16 MACs spread over 2.5 us from 0.5 us: windows 0..2 get 0.5, 1, 1 us worth.
  m.charge(mac_bf16, 1e6, sc_time(500, SC_NS), sc_time(3000, SC_NS));
  m.charge(hbm_read_byte, 4096, sc_time(1200, SC_NS));
  m.charge(cp_instruction, 1000, sc_time(100, SC_NS), sc_time(900, SC_NS));
  const Table& t = m.table();
  EXPECT_EQ(m.count(mac_bf16), 1e6);
  EXPECT_EQ(m.dynamic_joules(kTiles), 1e6 * t.pj[mac_bf16] * 1e-12);
  EXPECT_EQ(m.dynamic_joules(kHbm), 4096 * t.pj[hbm_read_byte] * 1e-12);
  EXPECT_EQ(m.dynamic_joules(kCp), 1000 * t.pj[cp_instruction] * 1e-12);
  const auto& w = m.windows();
  ASSERT_EQ(w.size(), 3u);
  const double mac = 1e6 * t.pj[mac_bf16] * 1e-12;
  EXPECT_NEAR(w[0][kTiles], mac * 0.5 / 2.5, 1e-18);
  EXPECT_NEAR(w[1][kTiles], mac * 1.0 / 2.5, 1e-18);
  EXPECT_NEAR(w[2][kTiles], mac * 1.0 / 2.5, 1e-18);
  EXPECT_NEAR(w[1][kHbm], 4096 * t.pj[hbm_read_byte] * 1e-12, 1e-18);
  EXPECT_NEAR(w[0][kCp], 1000 * t.pj[cp_instruction] * 1e-12, 1e-18);
  // Leakage: static_w at the nominal voltage, times (V / V_nominal)^2.
  EXPECT_DOUBLE_EQ(m.static_joules(kNoc, sc_time(2, SC_US)), t.static_w[kNoc] * 2e-6);
  m.table().volts[kNoc] = t.nominal[kNoc] * 0.8;
  EXPECT_NEAR(m.table().static_power(kNoc), t.static_w[kNoc] * 0.64, 1e-12);
  double dyn = 0;
  for (unsigned d = 0; d < kDomains; ++d) dyn += m.dynamic_joules(static_cast<Domain>(d));
  EXPECT_EQ(m.dynamic_joules(), dyn);
  // A long run: 2^20 windows of 1 us are full at 1.048576 s; an event at 3 s doubles the window twice.
  Meter& longer = meter("chip3.x");
  longer.charge(cp_instruction, 10, sc_time(100, SC_NS));
  longer.charge(cp_instruction, 10, sc_time(3, sc_core::SC_SEC));
  EXPECT_EQ(longer.window(), sc_time(4, SC_US));
  EXPECT_LE(longer.windows().size(), std::size_t{1} << 20);
  double binned = 0;
  for (const auto& win : longer.windows()) binned += win[kCp];
  EXPECT_NEAR(binned, longer.dynamic_joules(kCp), 1e-18);
  reset();
}

namespace {
// The error parsing `params` as a power instance's gives ("" when none).
std::string config_error(const nlohmann::json& params) {
  try {
    Params p("p.json", "power", params);
    PowerManager::Config c;
    c.visit(p);
    p.finish();
    c.validate(p);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(Power, ParametersAreCheckedWithTheirKey) {
  auto error = config_error;
  EXPECT_EQ(error(nlohmann::json::object()), "");
  EXPECT_NE(error({{"pj_mac_bf16", -1}}).find("power.pj_mac_bf16"), std::string::npos);
  EXPECT_NE(error({{"v_noc", 0}}).find("power.v_noc"), std::string::npos);
  EXPECT_NE(error({{"window", "0"}}).find("power.window"), std::string::npos);
  EXPECT_NE(error({{"pj_flux", 1}}).find("pj_flux"), std::string::npos) << "unknown keys are errors";
}

TEST(Power, ParametersOfThePstatesAndTheCapAreChecked) {
  auto error = config_error;
  EXPECT_EQ(error({{"pstates_tiles", "1@0.8,0.5@0.6"}, {"cap_w", 20}, {"control", "firmware"}}), "");
  EXPECT_NE(error({{"pstates_tiles", "1@0.8,fast"}}).find("power.pstates_tiles: 'fast' is not FREQUENCY_FRACTION@VOLTS"), std::string::npos);
  EXPECT_NE(error({{"pstates_noc", "0.5@0.6,1@0.8"}}).find("fastest first"), std::string::npos);
  EXPECT_NE(error({{"pstates_hbm", "1@0.8x"}}).find("power.pstates_hbm"), std::string::npos);
  EXPECT_NE(error({{"pstate_links", 3}}).find("power.pstate_links: must be below 3"), std::string::npos);
  EXPECT_NE(error({{"cap_w", -1}}).find("power.cap_w"), std::string::npos);
  EXPECT_NE(error({{"control", "manual"}}).find("power.control: must be auto or firmware"), std::string::npos);
}

TEST(Power, AClockChangeKeepsCyclesAndTimeContinuous) {
  Clock c;
  EXPECT_EQ(c.nominal(sc_time(1234, sc_core::SC_PS)), sc_time(1234, sc_core::SC_PS).value()) << "no change: time itself";
  const std::uint64_t ps = sc_time(1, sc_core::SC_PS).value(), period = 500 * ps;  // a 2 GHz clock of the domain
  c.set(0.5, sc_time(10, SC_NS));                                                   // half speed from 10 ns
  EXPECT_EQ(c.cycle(sc_time(10, SC_NS), period), 20u);
  EXPECT_EQ(c.cycle(sc_time(12, SC_NS), period), 22u) << "1 GHz now: one cycle a nanosecond";
  EXPECT_EQ(c.edge(25, period), sc_time(15, SC_NS));
  EXPECT_EQ(c.span(sc_time(4, SC_NS)), sc_time(8, SC_NS));
  c.set(1.0, sc_time(20, SC_NS));  // back to full speed: cycle 30 at 20 ns
  EXPECT_EQ(c.cycle(sc_time(20, SC_NS), period), 30u);
  EXPECT_EQ(c.edge(34, period), sc_time(22, SC_NS));
  EXPECT_EQ(c.changes(), 2u);
}

namespace {
// A compute-bound load on the tiles: units of `nominal` work, each charging
// the MACs that give `watts` of dynamic power at the nominal clock and voltage.
struct Load {
  Meter& m;
  sc_time nominal{100, SC_NS};
  double watts = 10;
  std::vector<std::pair<sc_time, sc_time>> units;  // start, end
  void run(sc_time until) {
    const Clock& clk = m.clock(kTiles);
    const double macs = watts * nominal.to_seconds() / (m.table().pj[mac_bf16] * 1e-12);
    while (sc_core::sc_time_stamp() < until) {
      const sc_time t0 = sc_core::sc_time_stamp(), d = clk.span(nominal);
      m.charge(mac_bf16, macs, t0, t0 + d);
      units.emplace_back(t0, t0 + d);
      sc_core::wait(d);
    }
  }
};
}  // namespace

TEST(Power, APstateChangeTakesEffectAfterItsLatency) {
  reset();
  PowerManager::Config c;
  c.firmware = true;
  c.transition[kTiles] = sc_time(3, SC_US);
  PowerManager pm("power", c);
  tessera::testing::TestInitiator bus("bus");
  bus.socket.bind(pm.csr_target);
  Meter& m = pm.meter();
  namespace R = regs::power;
  auto rd = [&](unsigned reg, unsigned i = 0) {
    std::uint32_t v = 0;
    bus.transport(tlm::TLM_READ_COMMAND, R::kBlock.regs[reg].offset + i * R::kBlock.regs[reg].stride, &v, 4);
    return v;
  };
  auto wr = [&](unsigned reg, unsigned i, std::uint32_t v) {
    return bus.transport(tlm::TLM_WRITE_COMMAND, R::kBlock.regs[reg].offset + i * R::kBlock.regs[reg].stride, &v, 4);
  };
  Load load{m, sc_time(100, SC_NS), 10, {}};
  sc_core::sc_spawn([&] { load.run(sc_time(10, SC_US)); });
  sc_core::sc_spawn([&] {
    sc_core::wait(2, SC_US);
    EXPECT_EQ(wr(R::PSTATE_REQ, kTiles, 9), tlm::TLM_COMMAND_ERROR_RESPONSE) << "the tiles have 6 P-states";
    EXPECT_EQ(wr(R::PSTATE_REQ, kTiles, 2), tlm::TLM_OK_RESPONSE);
    EXPECT_EQ(rd(R::PSTATE, kTiles), 0u | (2u << 4) | (1u << 8) | (6u << 12)) << "P0, moving to P2, busy, 6 P-states";
    sc_core::wait(sc_time(3, SC_US) - sc_time(1, sc_core::SC_PS));
    EXPECT_EQ(m.clock(kTiles).scale(), 1.0) << "not before the latency";
    EXPECT_EQ(m.table().volts[kTiles], 0.75);
    sc_core::wait(1, sc_core::SC_PS);
    EXPECT_EQ(m.clock(kTiles).scale(), 0.8) << "at 5 us";
    EXPECT_EQ(m.table().volts[kTiles], 0.69);
    EXPECT_EQ(rd(R::PSTATE, kTiles), 2u | (2u << 4) | (6u << 12));
    EXPECT_EQ(rd(R::FREQ_PERMILLE, kTiles), 800u);
    EXPECT_EQ(rd(R::VOLTAGE_MV, kTiles), 690u);
    // The loop owns the P-states again: firmware's requests are refused.
    EXPECT_EQ(wr(R::CTRL, 0, 0), tlm::TLM_OK_RESPONSE);
    EXPECT_EQ(wr(R::PSTATE_REQ, kTiles, 1), tlm::TLM_COMMAND_ERROR_RESPONSE);
  });
  sc_core::sc_start(sc_time(10, SC_US));
  // Units of 100 ns of work: 100 ns each before 5 us, 125 ns each once it began after.
  ASSERT_FALSE(load.units.empty());
  for (const auto& [start, end] : load.units)
    EXPECT_EQ(end - start, start < sc_time(5, SC_US) ? sc_time(100, SC_NS) : sc_time(125, SC_NS)) << start;
  // Energy: (V/V_nominal)^2 on the dynamic energy charged after 5 us and on leakage.
  const double r2 = (0.69 / 0.75) * (0.69 / 0.75);
  EXPECT_NEAR(m.static_joules(kTiles, sc_time(10, SC_US)), 2.4 * 5e-6 + 2.4 * r2 * 5e-6, 1e-15);
  double expect = 0;
  for (const auto& [start, end] : load.units) expect += 10 * 100e-9 * (start < sc_time(5, SC_US) ? 1.0 : r2);
  EXPECT_NEAR(m.dynamic_joules(kTiles), expect, 1e-15);
  EXPECT_DOUBLE_EQ(m.count(mac_bf16), 4e6 * static_cast<double>(load.units.size()));
}

TEST(Power, UnderACapAveragePowerStaysAtTheCapAndThroughputFollowsTheClock) {
  reset();
  PowerManager::Config c;
  c.cap = 12;  // leakage 5.75 W + 10 W of compute at full speed: over by 3.75 W
  PowerManager pm("power", c);
  tessera::testing::TestInitiator bus("bus");
  bus.socket.bind(pm.csr_target);
  Meter& m = pm.meter();
  Load load{m, sc_time(100, SC_NS), 10, {}};
  const sc_time end(400, SC_US);
  sc_core::sc_spawn([&] { load.run(end); });
  sc_core::sc_start(end);
  // The loop's pick: the fastest kTiles P-state whose predicted power fits
  // under the cap less the margin (the other domains only leak).
  const PowerManager::Config d;
  double others = 0;
  for (Domain x : {kNoc, kHbm, kLinks, kCp}) others += m.table().static_w[x];
  unsigned expect = 0;
  auto predicted = [&](unsigned s) {
    const auto& p = d.pstates[kTiles][s];
    const double r = p.volts / 0.75;
    return 10 * p.scale * r * r + 2.4 * r * r + others;
  };
  while (predicted(expect) > c.cap * (1 - c.margin)) ++expect;
  EXPECT_EQ(expect, 3u) << "0.7 of the clock at 0.66 V";
  EXPECT_EQ(pm.pstate(kTiles), expect);
  EXPECT_GE(pm.throttles(kTiles), 1u);
  for (Domain x : {kNoc, kHbm, kLinks, kCp}) EXPECT_EQ(pm.pstate(x), 0u) << domain_name(x);
  // Average power over any stretch of 10 response times stays at the cap.
  const double w = m.window().to_seconds();
  std::vector<double> total(m.windows().size(), 0.0);
  for (unsigned x = 0; x < kDomains; ++x) {
    const auto leak = m.static_watts(static_cast<Domain>(x));
    for (std::size_t i = 0; i < total.size(); ++i) total[i] += m.windows()[i][x] / w + leak[i];
  }
  EXPECT_GT(total[0], c.cap) << "the first window runs at full speed";
  const auto span = static_cast<std::size_t>(10 * pm.response_time().to_seconds() / w);
  ASSERT_GT(total.size(), span + 100);
  double worst = 0;
  for (std::size_t i = 0; i + span <= total.size() - 1; ++i) {  // the last window is incomplete
    double sum = 0;
    for (std::size_t k = i; k < i + span; ++k) sum += total[k];
    worst = std::max(worst, sum / static_cast<double>(span));
  }
  EXPECT_LE(worst, c.cap) << "over " << span << " windows";
  EXPECT_GT(worst, c.cap * 0.85) << "and close to it";
  // Throughput in the second half: the kTiles clock's share of full speed.
  std::size_t done = 0;
  for (const auto& [start, stop] : load.units) done += start >= sc_time(200, SC_US) && stop <= end;
  const double full = (end - sc_time(200, SC_US)) / load.nominal;
  EXPECT_NEAR(static_cast<double>(done) / full, d.pstates[kTiles][expect].scale, 1.0 / full);
  // Telemetry registers against the statistics.
  namespace R = regs::power;
  auto rd = [&](unsigned reg, unsigned i = 0) {
    std::uint64_t v = 0;
    bus.debug(tlm::TLM_READ_COMMAND, R::kBlock.regs[reg].offset + i * R::kBlock.regs[reg].stride, &v, R::kBlock.regs[reg].size);
    return v;
  };
  const std::size_t last = static_cast<std::size_t>(end / m.window()) - 1;
  EXPECT_EQ(rd(R::POWER_MW), static_cast<std::uint64_t>(std::llround(pm.window_watts(last) * 1e3)));
  EXPECT_EQ(rd(R::DOMAIN_POWER_MW, kTiles), static_cast<std::uint64_t>(std::llround(pm.window_watts(last, kTiles) * 1e3)));
  EXPECT_EQ(rd(R::THROTTLES), pm.throttles());
  EXPECT_EQ(rd(R::DOMAIN_THROTTLES, kTiles), pm.throttles(kTiles));
  EXPECT_EQ(rd(R::PSTATE, kTiles) & 0xf, expect);
  EXPECT_EQ(rd(R::CAP_MW), 12000u);
  for (unsigned x = 0; x < kDomains; ++x) {
    const auto dom = static_cast<Domain>(x);
    EXPECT_EQ(rd(R::DOMAIN_ENERGY_NJ, x),
              static_cast<std::uint64_t>((m.dynamic_joules(dom) + m.static_joules(dom, end)) * 1e9)) << domain_name(dom);
  }
  nlohmann::ordered_json stats;
  pm.report_stats(stats);
  EXPECT_EQ(stats["tiles_throttles"].get<std::uint64_t>(), pm.throttles(kTiles));
  EXPECT_EQ(stats["tiles_pstate"].get<unsigned>(), expect);
}

// The generic register checks every block gets.
TEST(Power, CAndCppViewsAgree) {
  namespace R = regs::power;
  tessera::testing::expect_c_view_matches(R::kBlock, power_regs_cview, power_fields_cview, power_values_cview);
}

TEST(Power, ResetValuesAndAccessTypes) {
  reset();
  PowerManager::Config c;
  PowerManager pm("power", c);
  // Registers that report the configuration (P-state table, timings, the chip's info) hold what it says.
  tessera::testing::expect_reset_and_access(tessera::testing::fw_of(pm.csr_target), 0, regs::power::kBlock,
                                            {"INFO", "PSTATE", "PSTATE_TABLE", "FREQ_PERMILLE", "VOLTAGE_MV",
                                             "TRANSITION_NS", "WINDOW_NS", "OVERCAP_NS"});
}
