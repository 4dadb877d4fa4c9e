// Systems of chips assembled in-process from platform/t1x4-ring.json and
// platform/t1x8-torus.json: global addresses reach every chip, through
// forwarding chips where there is no direct link, with the latency one more
// hop predicts; routes take the fewest hops; bad system files are refused
// with the file, the chip and the key.
#include <gtest/gtest.h>

#include <tuple>

#include "common/sim.hpp"
#include "platform.hpp"
#include "c2c/c2c.hpp"
#include "system.hpp"
#include "tessera_platform.h"

using namespace tessera;

namespace {

const std::string kDir = std::string(TESSERA_SOURCE_DIR) + "/platform/";

SystemSpec spec_of(const std::string& file, std::vector<std::string> sets = {}) {
  return SystemSpec::parse(kDir + file, PlatformSpec::read(kDir + file), sets);
}

std::string error_of(const nlohmann::json& raw, std::vector<std::string> sets = {}) {
  try {
    SystemSpec::parse(kDir + "test.json", raw, sets);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

// Follows the routing tables from `from` to `to`; the hops taken.
unsigned hops(const SystemSpec& s, unsigned from, unsigned to) {
  unsigned n = 0;
  while (from != to && n <= s.chips) {
    const int port = s.routes[from][to];
    for (const LinkSpec& l : s.links) {
      if (l.a == from && static_cast<int>(l.port_a) == port) {
        from = l.b;
        break;
      }
      if (l.b == from && static_cast<int>(l.port_b) == port) {
        from = l.a;
        break;
      }
    }
    ++n;
  }
  return n;
}

}  // namespace

TEST(System, RingCarriesAccessesToEveryChipThroughForwardingChips) {
  const SystemSpec spec = spec_of("t1x4-ring.json", {"uart0.tx=none", "cp.reset_pc=0x8000_0000"});
  System sys(spec, true);
  for (unsigned k = 0; k < sys.size(); ++k) sys.chip(k).write_idle_loop("cpram", 0);
  std::vector<std::uint8_t> block(1024), back(1024);
  for (std::size_t i = 0; i < block.size(); ++i) block[i] = static_cast<std::uint8_t>(i * 13 + 1);
  sc_core::sc_time one_hop, two_hops;
  tlm::tlm_response_status far = tlm::TLM_OK_RESPONSE;
  std::uint32_t own = 0xabad1dea, own_back = 0;
  sc_core::sc_spawn([&] {
    Platform& c0 = sys.chip(0);
    sc_core::sc_time d;
    EXPECT_EQ(c0.transport(tlm::TLM_WRITE_COMMAND, c2c::global_address(2, TESSERA_HBM0_BASE + 0x100), block.data(),
                           1024, d),
              tlm::TLM_OK_RESPONSE);
    sc_core::wait(d);
    d = sc_core::SC_ZERO_TIME;
    EXPECT_EQ(c0.transport(tlm::TLM_READ_COMMAND, c2c::global_address(2, TESSERA_HBM0_BASE + 0x100), back.data(),
                           1024, d),
              tlm::TLM_OK_RESPONSE);
    sc_core::wait(d);
    // One word from tile 0's scratchpad (fixed latency) of the next chip and of the one after.
    for (auto [chip, took] : {std::pair<unsigned, sc_core::sc_time*>{1, &one_hop}, {2, &two_hops}}) {
      sc_core::wait(1, sc_core::SC_US);
      std::uint32_t v;
      const sc_core::sc_time start = sc_core::sc_time_stamp();
      d = sc_core::SC_ZERO_TIME;
      EXPECT_EQ(c0.transport(tlm::TLM_READ_COMMAND, c2c::global_address(chip, TESSERA_TILE0_BASE), &v, 4, d),
                tlm::TLM_OK_RESPONSE);
      sc_core::wait(d);
      *took = sc_core::sc_time_stamp() - start;
    }
    d = sc_core::SC_ZERO_TIME;
    EXPECT_EQ(c0.transport(tlm::TLM_WRITE_COMMAND, c2c::global_address(0, TESSERA_HBM1_BASE), &own, 4, d),
              tlm::TLM_OK_RESPONSE);
    EXPECT_EQ(c0.transport(tlm::TLM_READ_COMMAND, TESSERA_HBM1_BASE, &own_back, 4, d), tlm::TLM_OK_RESPONSE);
    std::uint32_t v;
    far = c0.transport(tlm::TLM_READ_COMMAND, c2c::global_address(9, TESSERA_HBM0_BASE), &v, 4, d);
    sc_core::sc_stop();
  });
  sc_core::sc_start();
  EXPECT_EQ(back, block);
  std::vector<std::uint8_t> landed(1024);
  sys.chip(2).debug_read(TESSERA_HBM0_BASE + 0x100, landed.data(), landed.size());
  EXPECT_EQ(landed, block) << "chip 2's HBM, read on chip 2";
  EXPECT_EQ(own_back, own) << "chip 0's own global window loops back to it";
  EXPECT_EQ(far, tlm::TLM_ADDRESS_ERROR_RESPONSE) << "chip 9 of 4";
  // Chip 0 reaches chip 2 through chip 1: of the two equal ways, the (0 mod 2)-th, port 0.
  nlohmann::ordered_json s1;
  sys.fabric(1).report_stats(s1);
  EXPECT_EQ(s1["forwarded"], 3) << "the write, the read and the scratchpad read";
  // One more hop: one more link each way and one more fabric each way.
  const c2c::LinkConfig& lc = sys.fabric(0).config().link;
  const sc_core::sc_time hop = sc_core::sc_time(lc.flit_seconds(lc.lanes), sc_core::SC_SEC) + lc.latency +
                               sys.fabric(0).config().switch_latency;
  std::printf("tile 0 scratchpad word: one hop %s, two hops %s\n", one_hop.to_string().c_str(),
              two_hops.to_string().c_str());
  // Exact but for the far NoC, which takes packets on its own clock edges (0.5 ns each way).
  EXPECT_NEAR((two_hops - one_hop).to_seconds(), (2 * hop).to_seconds(), 1e-9);
  EXPECT_EQ(sys.protocol_violations(), 0u);
}

TEST(System, RoutesTakeTheFewestHops) {
  const SystemSpec ring = spec_of("t1x4-ring.json");
  EXPECT_EQ(ring.links.size(), 4u);
  for (unsigned a = 0; a < 4; ++a)
    for (unsigned b = 0; b < 4; ++b) EXPECT_EQ(hops(ring, a, b), std::min((b + 4 - a) % 4, (a + 4 - b) % 4)) << a << b;
  // The chip opposite is reached one way from even chips, the other from odd ones.
  EXPECT_EQ(ring.routes[0][2], 0);
  EXPECT_EQ(ring.routes[1][3], 1);
  EXPECT_EQ(ring.routes[2][0], 0);
  EXPECT_EQ(ring.routes[3][1], 1);
  // The tori, 8 to 64 chips.
  for (const auto& [file, w, h] : {std::tuple{"t1x8-torus.json", 4u, 2u}, std::tuple{"t1x16-torus.json", 4u, 4u},
                                   std::tuple{"t1x32-torus.json", 8u, 4u}, std::tuple{"t1x64-torus.json", 8u, 8u}}) {
    const SystemSpec torus = spec_of(file);
    ASSERT_EQ(torus.chips, w * h) << file;
    EXPECT_EQ(torus.links.size(), 2 * w * h) << file;
    for (unsigned a = 0; a < w * h; ++a)
      for (unsigned b = 0; b < w * h; ++b) {
        const unsigned dx = (b % w + w - a % w) % w, dy = (b / w + h - a / w) % h;
        EXPECT_EQ(hops(torus, a, b), std::min(dx, w - dx) + std::min(dy, h - dy)) << file << ": " << a << " to " << b;
      }
  }
  nlohmann::json full = {{"system", "full4"}, {"chip", "t1.json"}, {"chips", 4}, {"topology", "full"}};
  const SystemSpec f = SystemSpec::parse(kDir + "full4.json", full, {});
  for (unsigned a = 0; a < 4; ++a)
    for (unsigned b = 0; b < 4; ++b) EXPECT_EQ(hops(f, a, b), a == b ? 0u : 1u);
}

TEST(System, BadSystemFilesAreRefusedWithTheKey) {
  const nlohmann::json ok = {{"system", "s"}, {"chip", "t1.json"}, {"chips", 4}, {"topology", "ring"}};
  EXPECT_EQ(error_of(ok), "");
  auto with = [&](const char* key, nlohmann::json v) {
    nlohmann::json j = ok;
    j[key] = v;
    return error_of(j);
  };
  EXPECT_NE(with("topology", "star").find("topology: \"star\" is not ring, torus, full or list"), std::string::npos);
  EXPECT_NE(with("chips", 65).find("chips: 65 chips; a system has 1 to 64"), std::string::npos);
  EXPECT_NE(with("colour", "red").find("colour: unknown key"), std::string::npos);
  EXPECT_NE(with("chip", "nothere.json").find("nothere.json"), std::string::npos);
  nlohmann::json full = ok;
  full["topology"] = "full";
  full["chips"] = 6;
  EXPECT_NE(error_of(full).find("has no port 4 (its fabric c2c has 4 ports"), std::string::npos) << error_of(full);
  full["fabric"] = {{"ports", 5}};
  EXPECT_EQ(error_of(full), "") << "five ports are enough for six chips fully connected";
  nlohmann::json torus = ok;
  torus["topology"] = "torus";
  torus["torus"] = {3, 2};
  EXPECT_NE(error_of(torus).find("torus: 3 x 2"), std::string::npos);
  nlohmann::json list = ok;
  list["topology"] = "list";
  list["links"] = {{0, 0, 1, 1}, {2, 0, 3, 1}};
  EXPECT_NE(error_of(list).find("chip 0 cannot reach chip 2"), std::string::npos) << error_of(list);
  list["links"] = {{0, 0, 1, 1}, {1, 1, 2, 0}, {2, 1, 3, 0}};
  EXPECT_NE(error_of(list).find("port 1 of chip 1 already has a link"), std::string::npos) << error_of(list);
  EXPECT_NE(error_of(ok, {"chip7.c2c.lanes=8"}).find("there is no chip 7"), std::string::npos);
  const std::string per_chip = error_of(ok, {"chip2.c2c.lanes=0"});
  EXPECT_NE(per_chip.find("chip 2: "), std::string::npos) << per_chip;
  EXPECT_NE(per_chip.find("c2c.lanes"), std::string::npos) << per_chip;
  EXPECT_EQ(error_of(ok, {"chip2.c2c.lanes=8", "c2c.latency=200ns"}), "");
}

// A tile's DMA engine reaches other chips by global address: chip 1's tile 0
// pulls 8 KiB from chip 3's HBM into its scratchpad (two hops, through chip
// 0), then pushes it into chip 0's HBM.
TEST(System, TileDmaMovesDataBetweenChipsByGlobalAddress) {
  const SystemSpec spec = spec_of("t1x4-ring.json", {"uart0.tx=none", "cp.reset_pc=0x8000_0000"});
  System sys(spec, true);
  for (unsigned k = 0; k < sys.size(); ++k) sys.chip(k).write_idle_loop("cpram", 0);
  std::vector<std::uint8_t> data(8192);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::uint8_t>(i * 31 + 5);
  std::uint32_t errors = 0, completed = 0;
  sc_core::sc_spawn([&] {
    EXPECT_EQ(sys.chip(3).debug_write(TESSERA_HBM0_BASE + 0x4000, data.data(), data.size()), data.size());
    Platform& c1 = sys.chip(1);
    auto reg = [&](std::uint64_t off, std::uint32_t v) {
      sc_core::sc_time d;
      EXPECT_EQ(c1.transport(tlm::TLM_WRITE_COMMAND, TESSERA_TILE0_CSR_BASE + off, &v, 4, d), tlm::TLM_OK_RESPONSE);
    };
    auto dma = [&](std::uint64_t src, std::uint64_t dst, std::uint32_t flags) {
      reg(0xb4, static_cast<std::uint32_t>(src));
      reg(0xb8, static_cast<std::uint32_t>(src >> 32));
      reg(0xbc, static_cast<std::uint32_t>(dst));
      reg(0xc0, static_cast<std::uint32_t>(dst >> 32));
      reg(0xc4, 8192);  // one row of 8 KiB
      reg(0xc8, 1);
      reg(0xcc, 1);
      reg(0xe0, flags);
      reg(0xf4, 1);
    };
    dma(c2c::global_address(3, TESSERA_HBM0_BASE + 0x4000), 0, 2);     // DST_LOCAL
    dma(0, c2c::global_address(0, TESSERA_HBM1_BASE + 0x8000), 1);     // SRC_LOCAL
    for (int i = 0; i < 1000 && completed < 2; ++i) {
      sc_core::wait(1, sc_core::SC_US);
      sc_core::sc_time d;
      c1.transport(tlm::TLM_READ_COMMAND, TESSERA_TILE0_CSR_BASE + 0xfc, &completed, 4, d);
    }
    sc_core::sc_time d;
    c1.transport(tlm::TLM_READ_COMMAND, TESSERA_TILE0_CSR_BASE + 0x104, &errors, 4, d);
    sc_core::sc_stop();
  });
  sc_core::sc_start();
  EXPECT_EQ(completed, 2u);
  EXPECT_EQ(errors, 0u);
  std::vector<std::uint8_t> spm(8192), landed(8192);
  sys.chip(1).debug_read(TESSERA_TILE0_BASE, spm.data(), spm.size());
  sys.chip(0).debug_read(TESSERA_HBM1_BASE + 0x8000, landed.data(), landed.size());
  EXPECT_EQ(spm, data) << "chip 3's HBM in chip 1's tile 0 scratchpad";
  EXPECT_EQ(landed, data) << "and on to chip 0's HBM";
  nlohmann::ordered_json s0;
  sys.fabric(0).report_stats(s0);
  EXPECT_GT(s0["forwarded"].get<std::uint64_t>(), 0u) << "chip 1 reaches chip 3 through chip 0 (port 1: 1 mod 2)";
}
