#include <gtest/gtest.h>

#include "common/config.hpp"
#include "common/log.hpp"

using namespace tessera;

namespace {

struct Example {
  unsigned depth = 16;
  sc_core::sc_time latency = sc_core::sc_time(5, sc_core::SC_NS);
  Hertz clock{1e9};
  std::uint64_t size = 4096;
  std::string mode = "fast";
  bool enabled = true;
  void visit(Params& p) {
    p("depth", depth, "queue depth");
    p("latency", latency, "access latency");
    p("clock", clock, "clock");
    p.size("size", size, "buffer size");
    p("mode", mode, "mode");
    p("enabled", enabled, "on or off");
  }
};

std::string error_of(const nlohmann::json& raw) {
  try {
    Params p("t.json", "x0", raw);
    Example e;
    e.visit(p);
    p.finish();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Config, DefaultsAndOverrides) {
  Params p("t.json", "x0", nlohmann::json{{"depth", 4}, {"latency", "1.5ns"}, {"size", "1MiB"}});
  Example e;
  e.visit(p);
  p.finish();
  EXPECT_EQ(e.depth, 4u);
  EXPECT_EQ(e.latency, sc_core::sc_time(1500, sc_core::SC_PS));
  EXPECT_EQ(e.size, 1u << 20);
  EXPECT_EQ(e.mode, "fast");
  EXPECT_EQ(p.effective().dump(),
            R"({"depth":4,"latency":"1.5ns","clock":"1GHz","size":"1MiB","mode":"fast","enabled":true})");
}

TEST(Config, ErrorsNameFileInstanceAndKey) {
  EXPECT_EQ(error_of({{"depht", 4}}),
            "t.json: x0.depht: unknown parameter (known: depth, latency, clock, size, mode, enabled)");
  EXPECT_EQ(error_of({{"latency", "5 parsecs"}}),
            "t.json: x0.latency: expected a time such as 30ns or 1.5us (units: s, ms, us, ns, ps, fs), got \"5 parsecs\"");
  EXPECT_EQ(error_of({{"depth", -1}}), "t.json: x0.depth: expected a non-negative integer, got -1");
  EXPECT_EQ(error_of({{"enabled", "yes"}}), "t.json: x0.enabled: expected true or false, got \"yes\"");
  EXPECT_EQ(error_of({{"depth", "0x1_0000_0000"}}), "t.json: x0.depth: value 4294967296 is too large");
}

TEST(Log, PerInstanceLevelsByPrefix) {
  log::reset();
  log::set_level("t1.uart0", log::Level::debug);
  EXPECT_TRUE(log::enabled("t1.uart0", log::Level::debug));
  EXPECT_TRUE(log::enabled("t1.uart0.fifo", log::Level::debug));
  EXPECT_FALSE(log::enabled("t1.uart01", log::Level::debug));
  EXPECT_FALSE(log::enabled("t1.plic", log::Level::debug));
  EXPECT_THROW(log::parse_level("loud"), std::invalid_argument);
}

TEST(Log, GuestErrorsPrintedOncePerPlaceCountedAlways) {
  log::reset();
  for (int i = 0; i < 3; ++i) log::guest_error("t1.x", "here", "bad thing {}", i);
  log::guest_error("t1.x", "there", "other bad thing");
  EXPECT_EQ(log::guest_error_count(), 4u);
}
