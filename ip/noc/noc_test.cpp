// The network against the textbook: zero-load latency exactly, throughput
// equal to offered load below saturation, analytical hop counts, the
// saturation point of uniform and transpose traffic on an 8x8 mesh, no
// deadlock or loss in a starved configuration, packet level against flit
// level.
#include <gtest/gtest.h>

#include <cstdio>
#include <set>

#include "noc/noc.hpp"
#include "noc/traffic.hpp"

using namespace tessera::noc;

namespace {

NocConfig mesh(unsigned k, unsigned vcs = 4, unsigned buffer = 4) {
  NocConfig c;
  c.width = c.height = k;
  c.vcs = vcs;
  c.buffer = buffer;
  return c;
}

std::uint64_t one_packet(Network& net, unsigned src, unsigned dst, unsigned flits) {
  Packet p;
  p.src = src;
  p.dst = dst;
  p.flits = flits;
  p.created = 10;
  std::uint64_t latency = 0;
  net.on_delivered([&](Packet& d) { latency = d.delivered - d.injected; });
  net.run_until(9);
  net.offer(p);
  net.run_until(1000);
  return latency;
}

}  // namespace

TEST(Noc, ZeroLoadLatencyIsHopsTimesPipelinePlusSerialisation) {
  for (const unsigned flits : {1u, 4u}) {
    NocConfig c = mesh(4);
    c.link = 2;
    FlitNetwork f(c);
    PacketNetwork p(c);
    const unsigned src = 0, dst = 3 + 2 * 4;  // (0,0) to (3,2): five links, six routers
    const std::uint64_t expected = 6 * c.per_hop() + 5 * c.link + (flits - 1);
    EXPECT_EQ(one_packet(f, src, dst, flits), expected) << flits << " flits, flit level";
    EXPECT_EQ(one_packet(p, src, dst, flits), expected) << flits << " flits, packet level";
  }
}

TEST(Noc, UniformHopCountMatchesTheFormula) {
  const NocConfig c = mesh(8);
  EXPECT_DOUBLE_EQ(uniform_hops(c), 2.0 * 8 / 3);  // 2k/3 without self-traffic
  FlitNetwork f(c);
  TrafficConfig t;
  t.rate = 0.05;
  const TrafficResult r = run_traffic(f, t);
  EXPECT_NEAR(r.hops_avg, 2.0 * 8 / 3, 0.1);
}

TEST(Noc, AcceptedEqualsOfferedBelowSaturation) {
  for (const char* pattern : {"uniform", "transpose", "bitcomp", "neighbor"}) {
    FlitNetwork f(mesh(8));
    TrafficConfig t;
    t.pattern = pattern;
    t.rate = 0.1;
    const TrafficResult r = run_traffic(f, t);
    EXPECT_TRUE(r.drained) << pattern;
    EXPECT_FALSE(r.saturated) << pattern;
    EXPECT_NEAR(r.accepted, r.offered, 0.03 * r.offered) << pattern;
  }
}

TEST(Noc, UniformSaturatesBelowBisectionBoundTransposeFarBelow) {
  // 16 VCs x 8 flits, 1-flit packets, XY: the bisection bound of uniform
  // traffic on an 8x8 mesh is 0.5 flits/node/cycle.
  TrafficConfig t;
  t.rate = 0.8;  // beyond saturation: what comes out is the network's capacity
  t.warmup = 1000;
  t.measure = 2000;
  t.drain_limit = 0;
  FlitNetwork u(mesh(8, 16, 8));
  const TrafficResult ru = run_traffic(u, t);
  t.pattern = "transpose";
  FlitNetwork x(mesh(8, 16, 8));
  const TrafficResult rx = run_traffic(x, t);
  std::printf("saturation throughput: uniform %.3f, transpose %.3f flits/node/cycle\n", ru.accepted, rx.accepted);
  EXPECT_LT(ru.accepted, 0.5);
  EXPECT_GT(ru.accepted, 0.7 * 0.5);
  EXPECT_TRUE(ru.saturated);
  EXPECT_LT(rx.accepted, 0.75 * ru.accepted) << "transpose saturates far below uniform";
  EXPECT_LT(rx.accepted, 0.27) << "transpose's bound is 0.25 on an 8x8 mesh with XY";
}

TEST(Noc, StarvedConfigurationNeverDeadlocksNorLosesPackets) {
  NocConfig c = mesh(4, 1, 1);
  for (const char* routing : {"xy", "west_first"}) {
    c.routing = routing;
    FlitNetwork f(c);
    std::set<std::uint64_t> seen;
    std::uint64_t duplicates = 0, offered = 0;
    f.on_delivered([&](Packet& p) { duplicates += !seen.insert(p.id).second; });
    std::mt19937_64 rng(7);
    for (std::uint64_t cycle = 0; cycle < 20000; ++cycle) {
      for (unsigned s = 0; s < c.nodes(); ++s)
        if (rng() % 100 < 3) {
          Packet p;
          p.id = offered++;
          p.src = s;
          p.dst = static_cast<unsigned>(destination("uniform", s, c, {}, rng));
          p.flits = 8;
          p.created = cycle;
          f.offer(p);
        }
      f.run_until(cycle);
    }
    f.run_until(20000 + 200000);
    EXPECT_TRUE(f.idle()) << routing << ": " << f.in_flight() << " packets stuck";
    EXPECT_EQ(seen.size(), offered) << routing;
    EXPECT_EQ(duplicates, 0u) << routing;
    EXPECT_GT(offered, 5000u);
  }
}

TEST(Noc, PacketLevelMatchesFlitLevelBelowSaturation) {
  for (const auto& [pattern, rate] : {std::pair<const char*, double>{"uniform", 0.25}, {"transpose", 0.12}}) {
    TrafficConfig t;
    t.pattern = pattern;
    t.rate = rate;
    t.packet_flits = 4;
    FlitNetwork f(mesh(8, 8, 8));
    PacketNetwork p(mesh(8, 8, 8));
    const TrafficResult rf = run_traffic(f, t), rp = run_traffic(p, t);
    std::printf("%s at %.2f: flit %.2f cycles, packet %.2f cycles\n", pattern, rate, rf.latency_avg, rp.latency_avg);
    EXPECT_FALSE(rf.saturated) << pattern;
    EXPECT_NEAR(rp.latency_avg, rf.latency_avg, 0.10 * rf.latency_avg) << pattern;
  }
}

TEST(Noc, WestFirstRoutesMinimallyAndDrains) {
  NocConfig c = mesh(8);
  c.routing = "west_first";
  FlitNetwork f(c);
  EXPECT_EQ(one_packet(f, 0, 63, 1), 15 * c.per_hop() + 14 * c.link);
  FlitNetwork g(c);
  TrafficConfig t;
  t.rate = 0.2;
  const TrafficResult r = run_traffic(g, t);
  EXPECT_TRUE(r.drained);
  EXPECT_NEAR(r.hops_avg, 2.0 * 8 / 3, 0.15) << "minimal routes";
}

TEST(Noc, ConfigurationErrors) {
  NocConfig c = mesh(4);
  EXPECT_EQ(c.check(), "");
  c.vcs = 3;
  c.classes = 2;
  EXPECT_NE(c.check(), "");
  c = mesh(4);
  c.routing = "random";
  EXPECT_NE(c.check().find("routing"), std::string::npos);
  EXPECT_FALSE(known_pattern("diagonal"));
  EXPECT_TRUE(known_pattern("tornado"));
}
