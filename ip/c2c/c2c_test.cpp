// The SerDes link against its formulas: throughput from lanes, rate,
// encoding and FLIT efficiency; the credit window; bit errors replayed
// go-back-N at the predicted cost with the data intact; a failed lane
// halving the bandwidth after retraining and losing nothing; routing over
// several chips, loopback and unreachable chips; the registers.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <numeric>

#include "c2c_regs.hpp"
#include "common/memory.hpp"
#include "common/testing/initiator.hpp"
#include "common/testing/reg_checks.hpp"
#include "c2c/c2c.hpp"

using namespace tessera;
using namespace tessera::c2c;
using sc_core::sc_time;
using sc_core::SC_NS;
using sc_core::SC_US;

namespace {

constexpr std::uint64_t kMem = 16 << 20;
namespace R = regs::c2c;
std::uint64_t off(unsigned reg) { return R::kBlock.regs[reg].offset; }

// A chip stand-in: its fabric, with a memory where its NoC would be.
// An initiator on its NoC side and one on its registers.
struct Chip {
  std::unique_ptr<C2c> c2c;
  std::unique_ptr<Ram> mem;
  std::unique_ptr<tessera::testing::TestInitiator> noc, csr;
  Chip(const std::string& name, const C2c::Config& c) {
    c2c = std::make_unique<C2c>((name + "_c2c").c_str(), c);
    Ram::Config r;
    r.size = kMem;
    r.read_latency = r.write_latency = sc_core::SC_ZERO_TIME;  // the link alone sets the time
    mem = std::make_unique<Ram>((name + "_mem").c_str(), r);
    c2c->noc_initiator.bind(mem->mem_target);
    noc = std::make_unique<tessera::testing::TestInitiator>((name + "_noc").c_str());
    csr = std::make_unique<tessera::testing::TestInitiator>((name + "_csr").c_str());
    noc->socket.bind(c2c->noc_target);
    csr->socket.bind(*c2c->targets()[1].second.socket);
  }
};

C2c::Config config(unsigned ports = 2) {
  C2c::Config c;
  c.ports = ports;
  c.link.lanes = 16;
  c.link.lane_gbps = 112;
  c.link.encoding_overhead = 1.0 - 514.0 / 544.0;
  return c;
}

// Chips 0..n-1 in a line, port 0 towards the next chip, port 1 towards the
// previous one; an initiator on chip 0's fabric.
struct Line {
  std::vector<Chip> chips;
  Line(unsigned n, const C2c::Config& c, const std::string& prefix = "chip") {
    for (unsigned i = 0; i < n; ++i) chips.emplace_back(prefix + std::to_string(i), c);
    for (unsigned i = 0; i < n; ++i) {
      chips[i].c2c->set_identity(i, n);
      for (unsigned d = 0; d < n; ++d)
        if (d != i) chips[i].c2c->set_route(d, d > i ? 0 : 1);
    }
    for (unsigned i = 0; i + 1 < n; ++i) chips[i].c2c->connect(0, *chips[i + 1].c2c, 1);
  }
  C2c& c2c(unsigned i) { return *chips[i].c2c; }
  tessera::testing::TestInitiator& cpu() { return *chips[0].noc; }
  // Memory contents, read by debug accesses over the links (no time, no FLITs).
  std::vector<std::uint8_t> peek(unsigned chip, std::uint64_t addr, std::size_t len) {
    std::vector<std::uint8_t> out(len);
    EXPECT_EQ(cpu().debug(tlm::TLM_READ_COMMAND, (std::uint64_t(chip) << kChipShift) | addr, out.data(),
                        static_cast<unsigned>(len)),
              len);
    return out;
  }
};

std::uint64_t offset(unsigned chip, std::uint64_t local) { return (std::uint64_t(chip) << kChipShift) | local; }

sc_time flit_time(const LinkConfig& c, unsigned width) { return sc_time(c.flit_seconds(width), sc_core::SC_SEC); }

// Writes `blocks` blocks of `size` bytes to chip `dest` from `threads`
// threads at once; returns when the last completed.
sc_time stream_writes(Line& l, unsigned dest, unsigned threads, unsigned blocks, unsigned size,
                      std::vector<std::uint8_t>& pattern) {
  pattern.resize(std::uint64_t(blocks) * size);
  for (std::size_t i = 0; i < pattern.size(); ++i) pattern[i] = static_cast<std::uint8_t>(i * 2654435761u >> 13);
  sc_time last;
  unsigned next = 0;
  for (unsigned t = 0; t < threads; ++t)
    sc_core::sc_spawn([&, t] {
      while (next < blocks) {
        const unsigned b = next++;
        sc_time d;
        EXPECT_EQ(l.cpu().transport(tlm::TLM_WRITE_COMMAND, offset(dest, std::uint64_t(b) * size),
                                  pattern.data() + std::uint64_t(b) * size, size, &d),
                  tlm::TLM_OK_RESPONSE);
        sc_core::wait(d);
        last = std::max(last, sc_core::sc_time_stamp());
      }
      (void)t;
    });
  sc_core::sc_start();
  return last;
}

}  // namespace

TEST(Serdes, LinkThroughputIsLanesTimesRateTimesEncodingTimesFlitEfficiency) {
  Line l(2, config());
  const LinkConfig& lc = l.c2c(0).config().link;
  const unsigned size = 64 << 10, blocks = 128;
  std::vector<std::uint8_t> pattern;
  const sc_time end = stream_writes(l, 1, 8, blocks, size, pattern);
  EXPECT_EQ(l.peek(1, 0, pattern.size()), pattern);
  const std::uint64_t flits = lc.flits_for(size);  // (16 + 65536) / 244 rounded up: 269
  EXPECT_EQ(flits, 269u);
  EXPECT_EQ(l.c2c(0).tx_stats(0)->flits, flits * blocks);
  const double efficiency = double(size) / double(flits * lc.flit_bytes);
  const double formula = lc.lanes * lc.lane_gbps * 1e9 * (1 - lc.encoding_overhead) * efficiency / 8;  // bytes/s
  const double measured = double(size) * blocks / end.to_seconds();
  std::printf("link: %.2f GB/s measured, %.2f GB/s by the formula (efficiency %.4f)\n", measured / 1e9, formula / 1e9,
              efficiency);
  EXPECT_NEAR(measured, formula, 0.02 * formula);
  EXPECT_EQ(l.c2c(0).tx_stats(0)->replays, 0u);
}

TEST(Serdes, CreditsBoundTheFlitsInFlight) {
  C2c::Config c = config();
  c.link.credits = 16;
  Line l(2, c);
  const LinkConfig& lc = l.c2c(0).config().link;
  std::vector<std::uint8_t> pattern;
  const unsigned size = 64 << 10, blocks = 32;
  const sc_time end = stream_writes(l, 1, 4, blocks, size, pattern);
  EXPECT_EQ(l.peek(1, 0, pattern.size()), pattern);
  // 16 FLITs per round trip of a FLIT and its credit.
  const sc_time rtt = flit_time(lc, 16) + 2 * lc.latency;
  const double formula = 16.0 * lc.flit_bytes / rtt.to_seconds();  // wire bytes/s
  const double measured = double(l.c2c(0).tx_stats(0)->flits) * lc.flit_bytes / end.to_seconds();
  std::printf("16 credits: %.2f GB/s on the wire, %.2f by the formula\n", measured / 1e9, formula / 1e9);
  EXPECT_NEAR(measured, formula, 0.02 * formula);
}

TEST(Serdes, InjectedBitErrorsAreReplayedAtTheirPredictedCostAndDataArrivesIntact) {
  // Two identical pairs of chips: one clean, one with five corrupted FLITs.
  C2c::Config bad = config();
  bad.faults = "0:flit5, 0:flit100, 0:flit1000, 0:flit2000, 0:flit3000";
  Line clean(2, config(), "clean"), noisy(2, bad, "noisy");
  const LinkConfig& lc = clean.c2c(0).config().link;
  std::vector<std::uint8_t> data(1 << 20);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::uint8_t>(i * 7 + (i >> 11));
  sc_time took[2];
  Line* lines[2] = {&clean, &noisy};
  for (int k = 0; k < 2; ++k)
    sc_core::sc_spawn([&, k] {
      sc_time d;
      EXPECT_EQ(lines[k]->cpu().transport(tlm::TLM_WRITE_COMMAND, offset(1, 0x1000), data.data(), data.size(), &d),
                tlm::TLM_OK_RESPONSE);
      took[k] = sc_core::sc_time_stamp() + d;
    });
  sc_core::sc_start();
  EXPECT_EQ(noisy.peek(1, 0x1000, data.size()), data);
  const ChannelStats& s = *noisy.c2c(0).tx_stats(0);
  EXPECT_EQ(s.crc_errors, 5u);
  EXPECT_EQ(s.replays, 5u);
  EXPECT_EQ(s.attempts, s.flits + 5);
  EXPECT_EQ(s.flits, clean.c2c(0).tx_stats(0)->flits);
  // Each error costs its FLIT and the round trip of the NAK.
  const sc_time predicted = 5 * (flit_time(lc, 16) + 2 * lc.latency);
  std::printf("clean %s, with 5 errors %s, predicted cost %s\n", took[0].to_string().c_str(),
              took[1].to_string().c_str(), predicted.to_string().c_str());
  EXPECT_EQ(took[1] - took[0], predicted);
}

TEST(Serdes, RandomBitErrorsAtABerAreCaughtByTheCrc) {
  C2c::Config c = config();
  c.link.ber = 2e-6;  // about 0.4% of 2048-bit FLITs
  Line l(3, c);
  std::vector<std::uint8_t> data(2 << 20), back(data.size());
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::uint8_t>(i ^ (i >> 9));
  sc_core::sc_spawn([&] {
    EXPECT_EQ(l.cpu().transport(tlm::TLM_WRITE_COMMAND, offset(2, 0), data.data(), data.size()), tlm::TLM_OK_RESPONSE);
    EXPECT_EQ(l.cpu().transport(tlm::TLM_READ_COMMAND, offset(2, 0), back.data(), back.size()), tlm::TLM_OK_RESPONSE);
  });
  sc_core::sc_start();
  EXPECT_EQ(l.peek(2, 0, data.size()), data) << "written across two links";
  EXPECT_EQ(back, data) << "read back across two links";
  std::uint64_t errors = 0, flits = 0;
  for (unsigned i = 0; i < 3; ++i)
    for (unsigned p = 0; p < 2; ++p)
      if (const ChannelStats* s = l.c2c(i).tx_stats(p)) errors += s->crc_errors, flits += s->attempts;
  const double expected = double(flits) * -std::expm1(2048 * std::log1p(-2e-6));
  std::printf("%llu CRC errors in %llu FLIT transmissions (%.1f expected)\n", static_cast<unsigned long long>(errors),
              static_cast<unsigned long long>(flits), expected);
  EXPECT_GT(errors, expected * 0.6);
  EXPECT_LT(errors, expected * 1.4);
}

TEST(Serdes, AFailedLaneHalvesTheBandwidthAfterRetrainingAndLosesNothing) {
  C2c::Config c = config();
  c.link.retrain = sc_time(2, SC_US);
  c.faults = "0:lane3@5us";
  Line l(2, c);
  const LinkConfig& lc = l.c2c(0).config().link;
  std::vector<std::uint8_t> pattern;
  const unsigned size = 64 << 10, blocks = 64;
  std::vector<std::pair<sc_time, unsigned>> widths;
  sc_core::sc_spawn([&] {
    for (int us : {4, 6, 8}) {
      sc_core::wait(sc_time(us, SC_US) - sc_core::sc_time_stamp());
      widths.emplace_back(sc_core::sc_time_stamp(), l.c2c(0).link_state(0)->width(sc_core::sc_time_stamp()));
    }
  });
  const sc_time end = stream_writes(l, 1, 8, blocks, size, pattern);
  EXPECT_EQ(l.peek(1, 0, pattern.size()), pattern);
  ASSERT_EQ(widths.size(), 3u);
  EXPECT_EQ(widths[0].second, 16u);
  EXPECT_EQ(widths[1].second, 0u) << "training";
  EXPECT_EQ(widths[2].second, 8u) << "15 lanes left: x8";
  const ChannelStats& s = *l.c2c(0).tx_stats(0);
  // The FLITs on the wire at the fault (sent in the last latency before it) are lost and replayed.
  const sc_time ft16 = flit_time(lc, 16), ft8 = flit_time(lc, 8);
  EXPECT_NEAR(double(s.lost_in_fault), (lc.latency + ft16) / ft16, 1.0);
  EXPECT_EQ(s.replays, 1u);
  // FLITs that arrive before the fault at x16 (the first left after one
  // switch latency), the rest after training at x8; then the last one's
  // flight and its response.
  const double before = (sc_time(5, SC_US) - c.switch_latency - lc.latency - ft16) / ft16;
  const sc_time predicted =
      sc_time(7, SC_US) + (double(s.flits) - before) * ft8 + 2 * lc.latency + ft8 + 2 * c.switch_latency;
  std::printf("%llu FLITs (%llu lost at the fault), done at %s, predicted %s\n",
              static_cast<unsigned long long>(s.flits), static_cast<unsigned long long>(s.lost_in_fault),
              end.to_string().c_str(), predicted.to_string().c_str());
  EXPECT_NEAR(end.to_seconds(), predicted.to_seconds(), 0.002 * predicted.to_seconds());
  EXPECT_EQ(l.c2c(0).link_state(0)->lanes_ok(end), 0xffffu & ~(1u << 3));
}

TEST(Serdes, AccessesRouteAcrossChipsLoopBackAndFailWhereNoLinkLeads) {
  C2c::Config c = config();
  Line l(3, c);
  const LinkConfig& lc = c.link;
  std::uint32_t v = 0xfeedc0de, r = 0, own = 0x12345678, own_back = 0;
  sc_time read_took;
  tlm::tlm_response_status far_status{};
  sc_core::sc_spawn([&] {
    EXPECT_EQ(l.cpu().transport(tlm::TLM_WRITE_COMMAND, offset(2, 0x40), &v, 4), tlm::TLM_OK_RESPONSE);
    sc_core::wait(1, SC_US);
    const sc_time start = sc_core::sc_time_stamp();
    sc_time d;
    EXPECT_EQ(l.cpu().transport(tlm::TLM_READ_COMMAND, offset(2, 0x40), &r, 4, &d), tlm::TLM_OK_RESPONSE);
    read_took = sc_core::sc_time_stamp() + d - start;
    EXPECT_EQ(l.cpu().transport(tlm::TLM_WRITE_COMMAND, offset(0, 0x80), &own, 4), tlm::TLM_OK_RESPONSE);
    EXPECT_EQ(l.cpu().transport(tlm::TLM_READ_COMMAND, offset(0, 0x80), &own_back, 4), tlm::TLM_OK_RESPONSE);
    far_status = l.cpu().transport(tlm::TLM_READ_COMMAND, offset(5, 0), &r, 4);
  });
  sc_core::sc_start();
  std::uint32_t landed;
  std::memcpy(&landed, l.peek(2, 0x40, 4).data(), 4);
  EXPECT_EQ(landed, v);
  EXPECT_EQ(r, v);
  EXPECT_EQ(own_back, own);
  std::uint32_t looped;
  std::memcpy(&looped, l.peek(0, 0x80, 4).data(), 4);
  EXPECT_EQ(looped, own) << "chip 0's own window loops back";
  EXPECT_EQ(far_status, tlm::TLM_ADDRESS_ERROR_RESPONSE);
  // Two hops each way, one FLIT per message; every fabric entry pays the switch.
  const sc_time hop = flit_time(lc, 16) + lc.latency;
  EXPECT_EQ(read_took, 4 * hop + 6 * c.switch_latency);
  nlohmann::ordered_json s1;
  l.c2c(1).report_stats(s1);
  EXPECT_EQ(s1["forwarded"], 2) << "the write and the read passed through chip 1";
  EXPECT_EQ(s1["incoming"], 2);
  // Debug access goes the same way without time.
  std::uint32_t dbg = 0;
  EXPECT_EQ(l.cpu().debug(tlm::TLM_READ_COMMAND, offset(2, 0x40), &dbg, 4), 4u);
  EXPECT_EQ(dbg, v);
  EXPECT_EQ(l.cpu().debug(tlm::TLM_READ_COMMAND, offset(7, 0x40), &dbg, 4), 0u);
}

TEST(Serdes, RegistersShowIdentityStateAndCountersAndInjectErrors) {
  C2c::Config c = config();
  c.link.retrain = sc_time(1, SC_US);
  Line l(2, c);
  tessera::testing::TestInitiator& csr = *l.chips[0].csr;
  std::uint32_t chip = 0, state = 0, irq = 0;
  std::uint64_t lanes = 0, tx = 0, replays = 0, attempts = 0;
  std::vector<std::uint8_t> data(4096, 0x5a);
  std::vector<std::uint32_t> states;
  IrqIn line;
  line.set_handler([&](bool level) { irq += level; });
  l.c2c(0).irq_out.bind(line);
  sc_core::sc_spawn([&] {
    csr.transport(tlm::TLM_READ_COMMAND, off(R::CHIP), &chip, 4);
    std::uint32_t en = 0xffff;
    csr.transport(tlm::TLM_WRITE_COMMAND, off(R::IRQ_ENABLE), &en, 4);
    std::uint64_t inject = 2;
    csr.transport(tlm::TLM_WRITE_COMMAND, off(R::PORT_INJECT), &inject, 8);
    l.cpu().transport(tlm::TLM_WRITE_COMMAND, offset(1, 0), data.data(), data.size());
    csr.transport(tlm::TLM_READ_COMMAND, off(R::PORT_TX_FLITS), &tx, 8);
    csr.transport(tlm::TLM_READ_COMMAND, off(R::PORT_TX_ATTEMPTS), &attempts, 8);
    csr.transport(tlm::TLM_READ_COMMAND, off(R::PORT_REPLAYS), &replays, 8);
    std::uint32_t fail = R::PORT_CTRL_f::FAIL_LANE_MASK | (15u << R::PORT_CTRL_f::LANE_SHIFT);
    csr.transport(tlm::TLM_WRITE_COMMAND, off(R::PORT_CTRL), &fail, 4);
    sc_core::wait(sc_time(100, SC_NS));
    csr.transport(tlm::TLM_READ_COMMAND, off(R::PORT_STATE), &state, 4);
    states.push_back(state);
    sc_core::wait(sc_time(2, SC_US));
    csr.transport(tlm::TLM_READ_COMMAND, off(R::PORT_STATE), &state, 4);
    states.push_back(state);
    csr.transport(tlm::TLM_READ_COMMAND, off(R::PORT_LANES), &lanes, 8);
  });
  sc_core::sc_start();
  EXPECT_EQ(chip, 0u | (2u << 8) | (2u << 16));
  const std::uint64_t flits = c.link.flits_for(4096);
  EXPECT_EQ(tx, flits);
  EXPECT_EQ(attempts, flits + 1);
  EXPECT_EQ(replays, 1u);
  ASSERT_EQ(states.size(), 2u);
  EXPECT_EQ(states[0] & 3, 1u) << "training";
  EXPECT_EQ(states[1] & 3, 2u) << "active again";
  EXPECT_EQ((states[1] >> 8) & 0x7f, 8u) << "x8 on 15 lanes";
  EXPECT_EQ((states[1] >> 16) & 0xff, 1u) << "peer chip";
  EXPECT_EQ((states[1] >> 24) & 0xf, 1u) << "peer port";
  EXPECT_EQ(lanes, 0x7fffu);
  EXPECT_GE(irq, 1u);
  std::uint32_t status = 0;
  csr.debug(tlm::TLM_READ_COMMAND, off(R::IRQ_STATUS), &status, 4);
  EXPECT_TRUE(status & R::IRQ_STATUS_f::CRC_ERROR_MASK);
  EXPECT_EQ(status & 0xff, 1u) << "port 0 changed state";
}

TEST(Serdes, ConfigurationErrorsNameTheKey) {
  LinkConfig c;
  EXPECT_EQ(c.check(), "");
  c.lanes = 0;
  EXPECT_NE(c.check().find("lanes"), std::string::npos);
  c = LinkConfig{};
  c.flit_bytes = 20;
  EXPECT_NE(c.check().find("flit_bytes"), std::string::npos);
  c = LinkConfig{};
  c.ber = 0.5;
  EXPECT_NE(c.check().find("ber"), std::string::npos);
  EXPECT_EQ(crc32(reinterpret_cast<const std::uint8_t*>("123456789"), 9), 0xcbf43926u) << "the standard check value";
}

// ---- the communication engine ---------------------------------------------------

#include "c2c/comm_reference.hpp"

namespace {

// Chips in a ring (port 0 to the next, port 1 to the previous), routes the short way round.
struct Ring {
  std::vector<Chip> chips;
  explicit Ring(unsigned n, const C2c::Config& c) {
    for (unsigned i = 0; i < n; ++i) chips.emplace_back("r" + std::to_string(i), c);
    for (unsigned i = 0; i < n; ++i) {
      chips[i].c2c->set_identity(i, n);
      for (unsigned d = 0; d < n; ++d)
        if (d != i) chips[i].c2c->set_route(d, (d + n - i) % n <= n / 2 ? 0 : 1);
    }
    if (n == 2) {
      chips[0].c2c->connect(0, *chips[1].c2c, 1);
      chips[1].c2c->connect(0, *chips[0].c2c, 1);
    } else {
      for (unsigned i = 0; i < n; ++i) chips[i].c2c->connect(0, *chips[(i + 1) % n].c2c, 1);
    }
  }
  C2c& c2c(unsigned i) { return *chips[i].c2c; }
  unsigned size() const { return static_cast<unsigned>(chips.size()); }
  void poke(unsigned chip, std::uint64_t addr, const std::vector<std::uint8_t>& data) {
    EXPECT_EQ(chips[chip].noc->debug(tlm::TLM_WRITE_COMMAND, offset(chip, addr), const_cast<std::uint8_t*>(data.data()),
                                     static_cast<unsigned>(data.size())),
              data.size());
  }
  std::vector<std::uint8_t> peek(unsigned chip, std::uint64_t addr, std::size_t len) {
    std::vector<std::uint8_t> out(len);
    EXPECT_EQ(chips[chip].noc->debug(tlm::TLM_READ_COMMAND, offset(chip, addr), out.data(), static_cast<unsigned>(len)),
              len);
    return out;
  }
  // Every chip posts `c` (with `tweak` applied per chip) at the same time;
  // returns when the last one finished.
  sc_time run(const Collective& c, const std::function<void(unsigned, Collective&)>& tweak = {}) {
    const sc_time start = sc_core::sc_time_stamp();
    sc_time last;
    unsigned left = size();
    sc_core::sc_event all;
    for (unsigned k = 0; k < size(); ++k)
      sc_core::sc_spawn([&, k] {
        Collective mine = c;
        if (tweak) tweak(k, mine);
        CommEngine& e = c2c(k).comm();
        const std::uint64_t before = e.completed();
        EXPECT_TRUE(e.submit(mine));
        while (e.completed() == before && e.error() == 0) sc_core::wait(e.done_event());
        EXPECT_EQ(e.error(), 0u) << "chip " << k << " " << name(c.op);
        last = std::max(last, sc_core::sc_time_stamp());
        if (--left == 0) all.notify();
      });
    sc_core::wait(all);
    return last - start;
  }
};

std::vector<std::uint8_t> random_elements(CommType t, std::uint64_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-4.0f, 4.0f);
  const unsigned es = element_bytes(t);
  std::vector<std::uint8_t> out(n * es);
  for (std::uint64_t i = 0; i < n; ++i) {
    const float v = u(rng);
    std::uint32_t code;
    if (t == CommType::fp32) std::memcpy(&code, &v, 4);
    else code = num::encode(t == CommType::bf16 ? num::Format::BF16 : num::Format::E4M3, v);
    std::memcpy(out.data() + i * es, &code, es);
  }
  return out;
}

constexpr std::uint64_t kSrc = 0x10000, kDst = 0x400000;

}  // namespace

TEST(Comm, AllReduceRingAndTreePushAndPullMatchTheHostReferenceBitForBit) {
  Ring r(4, config());
  const std::uint64_t n = 1003;  // not a multiple of 4: the last chunk is short
  sc_core::sc_spawn([&] {
    std::uint64_t seed = 1;
    for (const CommType t : {CommType::fp32, CommType::bf16, CommType::e4m3})
      for (const CommAlgo algo : {CommAlgo::ring, CommAlgo::tree})
        for (const CommMode mode : {CommMode::push, CommMode::pull}) {
          std::vector<std::vector<std::uint8_t>> in;
          for (unsigned k = 0; k < 4; ++k) {
            in.push_back(random_elements(t, n, seed++));
            r.poke(k, kSrc, in.back());
          }
          Collective c;
          c.op = CommOp::all_reduce;
          c.algo = algo;
          c.mode = mode;
          c.type = t;
          c.src = kSrc;
          c.dst = kDst;
          c.count = n;
          r.run(c);
          const auto expected = algo == CommAlgo::ring ? reference::ring_all_reduce(t, in, n)
                                                       : reference::tree_all_reduce(t, in, n);
          for (unsigned k = 0; k < 4; ++k)
            EXPECT_EQ(r.peek(k, kDst, expected.size()), expected)
                << "chip " << k << " type " << unsigned(t) << " algo " << unsigned(algo) << " mode " << unsigned(mode);
        }
    sc_core::sc_stop();
  });
  sc_core::sc_start();
}

TEST(Comm, ReduceScatterAllGatherBroadcastAndAllToAllDeliverEveryByte) {
  Ring r(3, config());
  sc_core::sc_spawn([&] {
    const CommType t = CommType::bf16;
    const std::uint64_t n = 3 * 256;
    std::vector<std::vector<std::uint8_t>> in;
    for (unsigned k = 0; k < 3; ++k) {
      in.push_back(random_elements(t, n, 40 + k));
      r.poke(k, kSrc, in.back());
    }
    Collective c;
    c.type = t;
    c.src = kSrc;
    c.dst = kDst;
    for (const CommMode mode : {CommMode::push, CommMode::pull}) {
      c.mode = mode;
      // Reduce-scatter: chip k gets chunk k of the ring sum.
      c.op = CommOp::reduce_scatter;
      c.algo = CommAlgo::ring;
      c.count = n;
      r.run(c);
      const auto sum = reference::ring_all_reduce(t, in, n);
      for (unsigned k = 0; k < 3; ++k)
        EXPECT_EQ(r.peek(k, kDst, 256 * 2), std::vector<std::uint8_t>(sum.begin() + k * 512, sum.begin() + (k + 1) * 512))
            << "reduce-scatter chip " << k;
      // All-gather: each chip's 256 elements, in chip order, everywhere.
      c.op = CommOp::all_gather;
      c.count = 256;
      r.run(c);
      std::vector<std::uint8_t> gathered;
      for (unsigned k = 0; k < 3; ++k) gathered.insert(gathered.end(), in[k].begin(), in[k].begin() + 512);
      for (unsigned k = 0; k < 3; ++k) EXPECT_EQ(r.peek(k, kDst, gathered.size()), gathered) << "all-gather chip " << k;
      // Broadcast from chip 2.
      c.op = CommOp::broadcast;
      c.algo = CommAlgo::tree;
      c.peer = 2;
      c.count = n;
      r.run(c);
      for (unsigned k = 0; k < 3; ++k) EXPECT_EQ(r.peek(k, kDst, in[2].size()), in[2]) << "broadcast chip " << k;
      // All-to-all with per-peer sizes: chip s sends 64 * (s + 1) + 16 * d bytes to chip d.
      c.op = CommOp::all_to_all;
      c.algo = CommAlgo::direct;
      c.table = 0x800000;
      auto size = [](unsigned s, unsigned d) { return std::uint64_t(64 * (s + 1) + 16 * d); };
      auto send_off = [&](unsigned s, unsigned d) {
        std::uint64_t o = 0;
        for (unsigned j = 0; j < d; ++j) o += size(s, j);
        return o;
      };
      auto recv_off = [&](unsigned d, unsigned s) {
        std::uint64_t o = 0;
        for (unsigned j = 0; j < s; ++j) o += size(j, d);
        return o;
      };
      for (unsigned k = 0; k < 3; ++k) {
        std::vector<std::uint64_t> table;
        for (unsigned p = 0; p < 3; ++p)
          table.insert(table.end(), {send_off(k, p), size(k, p), recv_off(p, k), recv_off(k, p), size(p, k), send_off(p, k)});
        std::vector<std::uint8_t> bytes(table.size() * 8);
        std::memcpy(bytes.data(), table.data(), bytes.size());
        r.poke(k, c.table, bytes);
      }
      r.run(c);
      for (unsigned d = 0; d < 3; ++d)
        for (unsigned s = 0; s < 3; ++s)
          EXPECT_EQ(r.peek(d, kDst + recv_off(d, s), size(s, d)),
                    std::vector<std::uint8_t>(in[s].begin() + send_off(s, d), in[s].begin() + send_off(s, d) + size(s, d)))
              << "all-to-all " << s << " to " << d << " mode " << unsigned(mode);
    }
    sc_core::sc_stop();
  });
  sc_core::sc_start();
}

namespace {
// One put from chip 0 to chip 1 and the matching wait; when chip 1 saw it.
sc_time put_time(Ring& r, std::uint64_t bytes, CommMode mode) {
  const sc_time start = sc_core::sc_time_stamp();
  Collective put, wait;
  put.op = CommOp::put;
  put.algo = wait.algo = CommAlgo::direct;
  put.mode = wait.mode = mode;
  put.peer = 1;
  wait.op = CommOp::wait;
  wait.peer = 0;
  put.src = wait.src = 0;
  put.dst = wait.dst = 8 << 20;
  put.count = wait.count = bytes;
  CommEngine& receiver = r.c2c(1).comm();
  const std::uint64_t before = receiver.completed();
  EXPECT_TRUE(r.c2c(0).comm().submit(put));
  EXPECT_TRUE(receiver.submit(wait));
  while (receiver.completed() == before) sc_core::wait(receiver.done_event());
  const sc_time took = sc_core::sc_time_stamp() - start;
  sc_core::wait(1, SC_US);  // let the sender finish too
  return took;
}
}  // namespace

// The alpha-beta model: alpha and B from point-to-point puts (small and
// large), then ring all-reduce of S bytes on N chips predicted as
// 2(N-1)/N * S/B + 2(N-1) * alpha, for a small and a large S.
TEST(Comm, GroupsOfChipsRunTheirOwnCollectivesAtOnce) {
  // A ring of four as two groups (chips 0-1 and 2-3, a communicator each):
  // every chip posts at once, each group its own data; each group's ring
  // and tree all-reduces (push and pull), all-gather, broadcast from its
  // rank 1 and all-to-all equal the host reference over its own chips
  // alone. A group past the system, or without the chip, is refused
  // (code 8).
  Ring r(4, config());
  sc_core::sc_spawn([&] {
    const CommType t = CommType::bf16;
    const std::uint64_t n = 301;
    auto group = [](unsigned k, Collective& c) { c.first = k / 2 * 2, c.chips = 2; };
    std::uint64_t seed = 40;
    for (const CommAlgo algo : {CommAlgo::ring, CommAlgo::tree})
      for (const CommMode mode : {CommMode::push, CommMode::pull}) {
        std::vector<std::vector<std::uint8_t>> in;
        for (unsigned k = 0; k < 4; ++k) in.push_back(random_elements(t, n, seed++)), r.poke(k, kSrc, in.back());
        Collective c;
        c.op = CommOp::all_reduce, c.algo = algo, c.mode = mode, c.type = t, c.src = kSrc, c.dst = kDst, c.count = n;
        r.run(c, group);
        for (unsigned g = 0; g < 2; ++g) {
          const std::vector<std::vector<std::uint8_t>> mine(in.begin() + 2 * g, in.begin() + 2 * g + 2);
          const auto want = algo == CommAlgo::ring ? reference::ring_all_reduce(t, mine, n) : reference::tree_all_reduce(t, mine, n);
          for (unsigned k = 2 * g; k < 2 * g + 2; ++k)
            EXPECT_EQ(r.peek(k, kDst, want.size()), want) << "chip " << k << " algo " << unsigned(algo) << " mode " << unsigned(mode);
        }
      }
    std::vector<std::vector<std::uint8_t>> in;
    for (unsigned k = 0; k < 4; ++k) in.push_back(random_elements(t, n, seed++)), r.poke(k, kSrc, in.back());
    Collective c;
    c.op = CommOp::all_gather, c.type = t, c.src = kSrc, c.dst = kDst, c.count = n;
    r.run(c, group);
    for (unsigned k = 0; k < 4; ++k) {
      std::vector<std::uint8_t> want = in[k / 2 * 2];
      want.insert(want.end(), in[k / 2 * 2 + 1].begin(), in[k / 2 * 2 + 1].end());
      EXPECT_EQ(r.peek(k, kDst, want.size()), want) << "all-gather, chip " << k;
    }
    c.op = CommOp::broadcast, c.algo = CommAlgo::tree, c.peer = 1, c.dst = kDst + 0x10000;
    r.run(c, group);
    for (unsigned k = 0; k < 4; ++k) EXPECT_EQ(r.peek(k, kDst + 0x10000, in[0].size()), in[k / 2 * 2 + 1]) << "broadcast, chip " << k;
    // All-to-all: each rank's n elements in two blocks, block j to rank j.
    const std::uint64_t half = 150 * 2, table = 0x300000;  // bytes
    for (unsigned k = 0; k < 4; ++k) {
      std::vector<std::uint64_t> e;
      for (unsigned j = 0; j < 2; ++j) e.insert(e.end(), {j * half, half, (k % 2) * half, j * half, half, (k % 2) * half});
      std::vector<std::uint8_t> bytes(e.size() * 8);
      std::memcpy(bytes.data(), e.data(), bytes.size());
      r.poke(k, table, bytes);
    }
    c = Collective{};
    c.op = CommOp::all_to_all, c.algo = CommAlgo::direct, c.type = t, c.src = kSrc, c.dst = kDst + 0x20000, c.table = table;
    r.run(c, group);
    for (unsigned k = 0; k < 4; ++k)
      for (unsigned j = 0; j < 2; ++j) {
        const std::vector<std::uint8_t>& from = in[k / 2 * 2 + j];
        const std::vector<std::uint8_t> want(from.begin() + (k % 2) * half, from.begin() + (k % 2 + 1) * half);
        EXPECT_EQ(r.peek(k, kDst + 0x20000 + j * half, half), want) << "all-to-all, chip " << k << " from rank " << j;
      }
    // Refusals, on chip 0 alone.
    CommEngine& e = r.c2c(0).comm();
    for (const auto& [first, chips] : {std::pair<unsigned, unsigned>{3, 2}, {2, 2}}) {
      Collective bad;
      bad.op = CommOp::all_reduce, bad.src = kSrc, bad.dst = kDst, bad.count = 4, bad.first = first, bad.chips = chips;
      e.clear_error();
      const std::uint64_t before = e.completed();
      EXPECT_TRUE(e.submit(bad));
      while (e.completed() == before && e.error() == 0) sc_core::wait(e.done_event());
      EXPECT_EQ(e.error(), unsigned(kCommBadGroup)) << first << "+" << chips;
    }
    sc_core::sc_stop();
  });
  sc_core::sc_start();
}

TEST(Comm, AChipThatGivesUpFailsItsGroupsCollectivesAtOnceAndAResetStartsThemAfresh) {
  // A ring of four as two groups (chips 0-1 and 2-3). Chip 1 posts an
  // all-reduce that chip 0 never posts; chip 0 gives up (CE_ABORT, its
  // group): chip 1's collective fails within the notice's time (code 9,
  // naming chip 0), and so does every collective over the group either
  // chip posts after it, at once, while the other group's all-reduce runs
  // on untouched. Then the same while both chips are half-way through a
  // big one (push and pull). CE_RESET on both and the group's all-reduces
  // equal the host reference again, twice over (without it they fail; a
  // notice of the round before is ignored). A reset while a collective
  // waits fails it and follows it.
  Ring r(4, config());
  bool finished = false;  // (a collective that never ends leaves the simulation with nothing to do)
  sc_core::sc_spawn([&] {
    const CommType t = CommType::fp32;
    auto post = [&](unsigned k, const Collective& c) {
      CommEngine& e = r.c2c(k).comm();
      e.clear_error();
      EXPECT_TRUE(e.submit(c));
    };
    auto wait_for = [&](unsigned k) {  // the engine idle; its error
      CommEngine& e = r.c2c(k).comm();
      while (e.busy()) sc_core::wait(e.done_event());
      return e.error();
    };
    auto all_reduce = [&](CommMode mode, std::uint64_t n, unsigned first) {
      Collective c;
      c.op = CommOp::all_reduce, c.mode = mode, c.type = t, c.src = kSrc, c.dst = kDst, c.count = n, c.first = first, c.chips = 2;
      c.id = 40 + first;
      return c;
    };
    auto abort_reg = [&](unsigned k, unsigned first, unsigned chips) {
      std::uint32_t w = R::CE_ABORT_f::ABORT_MASK | first << R::CE_ABORT_f::FIRST_SHIFT | chips << R::CE_ABORT_f::CHIPS_SHIFT;
      r.chips[k].csr->transport(tlm::TLM_WRITE_COMMAND, off(R::CE_ABORT), &w, 4);
    };
    auto reset_reg = [&](unsigned k, std::uint32_t round) {
      r.chips[k].csr->transport(tlm::TLM_WRITE_COMMAND, off(R::CE_RESET), &round, 4);
    };
    std::uint64_t seed = 70;
    auto check_group = [&](CommMode mode, const char* what) {
      std::vector<std::vector<std::uint8_t>> in;
      for (unsigned k = 0; k < 2; ++k) in.push_back(random_elements(t, 1003, seed++)), r.poke(k, kSrc, in.back());
      for (unsigned k = 0; k < 2; ++k) post(k, all_reduce(mode, 1003, 0));
      for (unsigned k = 0; k < 2; ++k) EXPECT_EQ(wait_for(k), 0u) << what << ", chip " << k;
      const auto want = reference::ring_all_reduce(t, in, 1003);
      for (unsigned k = 0; k < 2; ++k) EXPECT_EQ(r.peek(k, kDst, want.size()), want) << what << ", chip " << k;
    };
    // Chip 0 never posts; it gives up while chip 1 waits. The other group
    // runs a big all-reduce meanwhile.
    std::vector<std::vector<std::uint8_t>> other;
    for (unsigned k = 2; k < 4; ++k) other.push_back(random_elements(t, 200000, seed++)), r.poke(k, kSrc, other.back());
    for (unsigned k = 2; k < 4; ++k) post(k, all_reduce(CommMode::push, 200000, 2));
    post(1, all_reduce(CommMode::push, 1003, 0));
    sc_core::wait(2, SC_US);
    const sc_time gave_up = sc_core::sc_time_stamp();
    abort_reg(0, 0, 2);
    EXPECT_EQ(wait_for(1), unsigned(kCommAborted));
    EXPECT_LT(sc_core::sc_time_stamp() - gave_up, sc_time(1, SC_US)) << "the notice's time, not a watchdog's";
    EXPECT_EQ(r.c2c(1).comm().error_addr(), 0u) << "chip 0 gave up";
    EXPECT_EQ(r.c2c(1).comm().error_id(), 40u);
    EXPECT_EQ(r.c2c(1).comm().aborted(), 1u);
    // Posted after the news, on either chip: fails at once.
    for (unsigned k : {0u, 1u}) {
      const sc_time at = sc_core::sc_time_stamp();
      post(k, all_reduce(CommMode::pull, 64, 0));
      EXPECT_EQ(wait_for(k), unsigned(kCommAborted)) << "chip " << k;
      EXPECT_LT(sc_core::sc_time_stamp() - at, sc_time(100, SC_NS)) << "chip " << k;
    }
    // The other group never heard of it.
    for (unsigned k = 2; k < 4; ++k) EXPECT_EQ(wait_for(k), 0u) << "chip " << k;
    EXPECT_EQ(r.c2c(2).comm().aborted(), 0u);
    const auto want = reference::ring_all_reduce(t, other, 200000);
    for (unsigned k = 2; k < 4; ++k) EXPECT_EQ(r.peek(k, kDst, want.size()), want) << "chip " << k;
    // A reset while a collective waits (chip 2's, chip 3 not there yet)
    // fails it and follows it; with chip 3 reset too, the group runs on.
    post(2, all_reduce(CommMode::push, 64, 2));
    sc_core::wait(1, SC_US);
    EXPECT_FALSE(r.c2c(2).comm().reset(1)) << "deferred";
    EXPECT_EQ(wait_for(2), unsigned(kCommAborted));
    EXPECT_TRUE(r.c2c(3).comm().reset(1));
    other.clear();
    for (unsigned k = 2; k < 4; ++k) other.push_back(random_elements(t, 1003, seed++)), r.poke(k, kSrc, other.back());
    for (unsigned k = 2; k < 4; ++k) post(k, all_reduce(CommMode::push, 1003, 2));
    for (unsigned k = 2; k < 4; ++k) EXPECT_EQ(wait_for(k), 0u) << "chip " << k;
    const auto again = reference::ring_all_reduce(t, other, 1003);
    for (unsigned k = 2; k < 4; ++k) EXPECT_EQ(r.peek(k, kDst, again.size()), again) << "chip " << k << " after a reset";
    for (unsigned k : {0u, 1u}) reset_reg(k, 1);
    EXPECT_EQ(r.c2c(1).comm().aborted(), 0u);
    check_group(CommMode::push, "after the reset");
    // Half-way through a big one, both chips in it: both fail; reset; both
    // modes equal the reference again, twice.
    std::uint32_t round = 1;
    for (const CommMode mode : {CommMode::push, CommMode::pull}) {
      for (unsigned k = 0; k < 2; ++k) r.poke(k, kSrc, random_elements(t, 200000, seed++));
      for (unsigned k = 0; k < 2; ++k) post(k, all_reduce(mode, 200000, 0));
      sc_core::wait(3, SC_US);
      abort_reg(1, 0, 2);
      abort_reg(1, 0, 2);  // a second time: nothing more
      for (unsigned k = 0; k < 2; ++k) EXPECT_EQ(wait_for(k), unsigned(kCommAborted)) << "chip " << k;
      EXPECT_EQ(r.c2c(0).comm().error_addr(), 1u);
      post(0, all_reduce(mode, 64, 0));
      EXPECT_EQ(wait_for(0), unsigned(kCommAborted)) << "no reset yet";
      for (unsigned k = 0; k < 2; ++k) reset_reg(k, round + 1);
      // A notice of the round before, arriving after the reset: ignored.
      std::vector<std::uint8_t> stale(8, 0);
      stale[0] = static_cast<std::uint8_t>(round + 1);
      r.poke(0, kFabricLocal + kFlagBase + 8 * (kAborted + 1), stale);
      EXPECT_EQ(r.c2c(0).comm().aborted(), 0u) << "a notice from the round before";
      ++round;
      check_group(mode, mode == CommMode::push ? "push after half a collective" : "pull after half a collective");
      check_group(mode, "once more");
    }
    finished = true;
    sc_core::sc_stop();
  });
  sc_core::sc_start();
  EXPECT_TRUE(finished) << "a collective never ended";
}

TEST(Comm, RingAllReduceFollowsTheAlphaBetaModel) {
  Ring r(4, config());
  sc_core::sc_spawn([&] {
    const std::uint64_t small = 64, large = 4 << 20;
    const sc_time t_small = put_time(r, small, CommMode::push), t_large = put_time(r, large, CommMode::push);
    const double alpha = t_small.to_seconds();
    const double bandwidth = double(large - small) / (t_large - t_small).to_seconds();
    std::printf("point to point: alpha %.1f ns, B %.1f GB/s\n", alpha * 1e9, bandwidth / 1e9);
    for (const std::uint64_t s : {std::uint64_t(4096), std::uint64_t(8) << 20}) {
      Collective c;
      c.op = CommOp::all_reduce;
      c.src = 0;
      c.dst = 8 << 20;
      c.count = s / 4;
      const sc_time took = r.run(c);
      const double n = 4, predicted = 2 * (n - 1) / n * double(s) / bandwidth + 2 * (n - 1) * alpha;
      std::printf("ring all-reduce of %llu bytes: %.2f us, alpha-beta %.2f us\n", static_cast<unsigned long long>(s),
                  took.to_seconds() * 1e6, predicted * 1e6);
      EXPECT_NEAR(took.to_seconds(), predicted, 0.10 * predicted) << s << " bytes";
    }
    sc_core::sc_stop();
  });
  sc_core::sc_start();
}

// Every bad collective ends in an error code on the engine that got it,
// never a crash, and the engines go on serving.
TEST(Comm, BadCollectivesAreRefusedWithACodeAndTheEngineGoesOn) {
  C2c::Config c = config();
  c.comm.queue = 2;
  c.comm.staging = 1 << 20;  // a quarter of it, 256 KiB, per collective
  Ring r(2, c);
  sc_core::sc_spawn([&] {
    CommEngine& e = r.c2c(0).comm();
    auto one = [&](Collective col) {
      e.clear_error();
      const std::uint64_t before = e.completed();
      EXPECT_TRUE(e.submit(col));
      while (e.completed() == before && e.error() == 0) sc_core::wait(e.done_event());
      return e.error();
    };
    Collective bad;
    bad.id = 7;
    bad.op = static_cast<CommOp>(12);
    EXPECT_EQ(one(bad), unsigned(kCommBadOp));
    EXPECT_EQ(e.error_id(), 7u);
    bad.op = CommOp::broadcast;  // broadcast runs on a tree only
    bad.algo = CommAlgo::ring;
    EXPECT_EQ(one(bad), unsigned(kCommBadOp));
    bad.op = CommOp::all_reduce;
    bad.type = static_cast<CommType>(3);
    EXPECT_EQ(one(bad), unsigned(kCommBadType));
    bad.type = CommType::fp32;
    bad.op = CommOp::put;
    bad.peer = 5;
    EXPECT_EQ(one(bad), unsigned(kCommBadPeer));
    bad.peer = 1;
    bad.src = kMem + 0x1000;  // beyond chip 0's memory
    bad.count = 256;
    EXPECT_EQ(one(bad), unsigned(kCommBus));
    EXPECT_EQ(e.error_addr(), global_address(0, kMem + 0x1000));
    // Far more chunks than transfers in flight: the first error abandons the
    // rest, in bounded simulated time (the fuzzed host protocol found the
    // engine spinning in zero time here).
    bad.count = 1ull << 40;
    const sc_core::sc_time t0 = sc_core::sc_time_stamp();
    EXPECT_EQ(one(bad), unsigned(kCommBus));
    EXPECT_LT(sc_core::sc_time_stamp() - t0, sc_core::sc_time(1, sc_core::SC_MS));
    bad.op = CommOp::all_reduce;
    bad.src = 0;
    bad.count = (64ull << 20) / 4;  // 32 MiB chunks do not fit a quarter of 64 MiB of staging
    EXPECT_EQ(one(bad), unsigned(kCommStaging));
    // A full queue refuses at once.
    Collective wait;
    wait.op = CommOp::wait;
    wait.peer = 1;
    wait.algo = CommAlgo::direct;
    e.clear_error();
    EXPECT_TRUE(e.submit(wait));
    sc_core::wait(1, SC_NS);  // the first starts running
    EXPECT_TRUE(e.submit(wait));
    EXPECT_TRUE(e.submit(wait));
    EXPECT_FALSE(e.submit(wait));
    EXPECT_EQ(e.error(), unsigned(kCommQueueFull));
    // The three waits end as chip 1 puts three times; then a good all-reduce.
    Collective put = wait;
    put.op = CommOp::put;
    put.peer = 0;
    put.count = 64;
    for (int i = 0; i < 3; ++i) {
      const std::uint64_t before = r.c2c(1).comm().completed();
      EXPECT_TRUE(r.c2c(1).comm().submit(put));
      while (r.c2c(1).comm().completed() == before) sc_core::wait(r.c2c(1).comm().done_event());
    }
    while (e.busy()) sc_core::wait(e.done_event());
    e.clear_error();
    r.poke(0, kSrc, random_elements(CommType::fp32, 64, 1));
    r.poke(1, kSrc, random_elements(CommType::fp32, 64, 2));
    Collective ok;
    ok.op = CommOp::all_reduce;
    ok.src = kSrc;
    ok.dst = kDst;
    ok.count = 64;
    r.run(ok);
    EXPECT_EQ(e.error(), 0u);
    // All-gather needs no staging: 1 MiB from each chip goes straight to the destinations.
    Collective gather = ok;
    gather.op = CommOp::all_gather;
    gather.src = 0;
    gather.dst = 4 << 20;
    gather.count = (1 << 20) / 4;
    r.run(gather);
    EXPECT_EQ(e.error(), 0u);
    sc_core::sc_stop();
  });
  sc_core::sc_start();
}

// DVFS on the links: the lanes signal at lane_gbps x the links domain's
// clock scale, so at half the clock the same FLITs take twice as long on
// the wire (the latency stays).
TEST(Serdes, TheLinksClockSetsTheLaneRate) {
  LinkConfig lc;
  LinkState state(lc.lanes);
  Channel ch(lc, state, 1);
  power::Clock clock;
  ch.set_clock(&clock);
  std::vector<std::uint8_t> msg(lc.payload() * 10), out(msg.size());
  bool ok = false;
  const sc_time full = ch.send(msg.data(), msg.size(), out.data(), sc_core::SC_ZERO_TIME, ok);
  ASSERT_TRUE(ok);
  const sc_time ready = ch.free_at();
  clock.set(0.5, ready);
  const sc_time half = ch.send(msg.data(), msg.size(), out.data(), ready, ok);
  ASSERT_TRUE(ok);
  const sc_time flit = sc_time(lc.flit_seconds(lc.lanes), sc_core::SC_SEC);
  EXPECT_NEAR((full - lc.latency) / flit, 10.0, 0.01);
  EXPECT_NEAR((half - ready - lc.latency) / flit, 20.0, 0.01);
  EXPECT_EQ(out, msg);
}

// The generic register checks every block gets.
TEST(Serdes, CAndCppViewsAgree) {
  namespace R = tessera::regs::c2c;
  tessera::testing::expect_c_view_matches(R::kBlock, c2c_regs_cview, c2c_fields_cview, c2c_values_cview);
}

TEST(Serdes, ResetValuesAndAccessTypes) {
  C2c fabric("fabric", config());
  tlm::tlm_target_socket<>* csr = nullptr;
  for (const auto& [port, t] : fabric.targets())
    if (port == "csr_target") csr = t.socket;
  ASSERT_NE(csr, nullptr);
  // CHIP reports the fabric's identity (chip 0 of 1, its ports).
  tessera::testing::expect_reset_and_access(tessera::testing::fw_of(*csr), 0, tessera::regs::c2c::kBlock, {"CHIP"});
}
