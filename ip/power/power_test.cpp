// The energy meter: energy is exactly the activity times the energy per
// event; activity spread over an interval lands in the windows it covers;
// leakage scales with the square of the voltage; bad parameters are
// refused with their key.
#include <gtest/gtest.h>

#include "common/power.hpp"
#include "power/power_manager.hpp"

using namespace tessera;
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
  EXPECT_EQ(m.dynamic_joules(tiles), 1e6 * t.pj[mac_bf16] * 1e-12);
  EXPECT_EQ(m.dynamic_joules(hbm), 4096 * t.pj[hbm_read_byte] * 1e-12);
  EXPECT_EQ(m.dynamic_joules(cp), 1000 * t.pj[cp_instruction] * 1e-12);
  const auto& w = m.windows();
  ASSERT_EQ(w.size(), 3u);
  const double mac = 1e6 * t.pj[mac_bf16] * 1e-12;
  EXPECT_NEAR(w[0][tiles], mac * 0.5 / 2.5, 1e-18);
  EXPECT_NEAR(w[1][tiles], mac * 1.0 / 2.5, 1e-18);
  EXPECT_NEAR(w[2][tiles], mac * 1.0 / 2.5, 1e-18);
  EXPECT_NEAR(w[1][hbm], 4096 * t.pj[hbm_read_byte] * 1e-12, 1e-18);
  EXPECT_NEAR(w[0][cp], 1000 * t.pj[cp_instruction] * 1e-12, 1e-18);
  // Leakage: static_w at the nominal voltage, times (V / V_nominal)^2.
  EXPECT_DOUBLE_EQ(m.static_joules(noc, sc_time(2, SC_US)), t.static_w[noc] * 2e-6);
  m.table().volts[noc] = t.nominal[noc] * 0.8;
  EXPECT_NEAR(m.table().static_power(noc), t.static_w[noc] * 0.64, 1e-12);
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
  for (const auto& win : longer.windows()) binned += win[cp];
  EXPECT_NEAR(binned, longer.dynamic_joules(cp), 1e-18);
  reset();
}

TEST(Power, ParametersAreCheckedWithTheirKey) {
  auto error = [](const nlohmann::json& params) {
    try {
      Params p("p.json", "power", params);
      PowerManager::Config c;
      c.visit(p);
      p.finish();
      c.validate(p);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(error(nlohmann::json::object()), "");
  EXPECT_NE(error({{"pj_mac_bf16", -1}}).find("power.pj_mac_bf16"), std::string::npos);
  EXPECT_NE(error({{"v_noc", 0}}).find("power.v_noc"), std::string::npos);
  EXPECT_NE(error({{"window", "0"}}).find("power.window"), std::string::npos);
  EXPECT_NE(error({{"pj_flux", 1}}).find("pj_flux"), std::string::npos) << "unknown keys are errors";
}
