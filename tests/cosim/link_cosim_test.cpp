// The SerDes link layer RTL against the model's link layer
// (ip/c2c/link.hpp): every FLIT it puts on the wire is the model's
// framing bit for bit (header, payload, CRC-32); the receiver hands on
// exactly the payloads sent, in order; a corrupted transmission is refused
// for its CRC, NAKed once and sent again with everything after it
// (go-back-N), and nothing is lost.
#define SC_INCLUDE_DYNAMIC_PROCESSES  // sc_spawn
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <set>

#include "rtl/link_rtl.hpp"
#include "c2c/link.hpp"

using tessera::rtl::LinkRtl;

namespace {

// The model's FLIT for payload `p`, number `seq` (link.cpp's framing).
std::vector<std::uint8_t> model_flit(const LinkRtl::Flit& f, std::uint16_t seq) {
  tessera::c2c::LinkConfig c;
  std::vector<std::uint8_t> flit(c.flit_bytes, 0);
  flit[0] = 1;
  flit[1] = f.last ? 1 : 0;
  const std::uint16_t plen = static_cast<std::uint16_t>(f.payload.size());
  std::memcpy(&flit[2], &seq, 2);
  std::memcpy(&flit[4], &plen, 2);
  if (!f.payload.empty()) std::memcpy(&flit[c.flit_header], f.payload.data(), f.payload.size());
  const unsigned crc_at = c.flit_bytes - tessera::c2c::LinkConfig::kCrcBytes;
  const std::uint32_t crc = tessera::c2c::crc32(flit.data(), crc_at);
  std::memcpy(&flit[crc_at], &crc, 4);
  return flit;
}

std::vector<LinkRtl::Flit> random_flits(std::mt19937_64& rng, unsigned n) {
  std::vector<LinkRtl::Flit> out(n);
  for (auto& f : out) {
    f.payload.resize(rng() % 5 == 0 ? rng() % 245 : 244);
    for (auto& b : f.payload) b = static_cast<std::uint8_t>(rng());
    f.last = rng() % 4 == 0;
  }
  return out;
}

}  // namespace

TEST(Cosim, LinkLayerFramesLikeTheModelAndReplaysWhatTheWireCorrupts) {
  LinkRtl link("link", sc_core::sc_time(1, sc_core::SC_NS));
  std::mt19937_64 rng(20261130);
  const std::vector<LinkRtl::Flit> clean = random_flits(rng, 200), noisy = random_flits(rng, 300);
  LinkRtl::Result a, b;
  const std::set<std::uint64_t> errors = {3, 40, 41, 150, 299};
  sc_core::sc_spawn([&] {
    a = link.send(clean, {});
    b = link.send(noisy, errors);
    sc_core::sc_stop();
  });
  sc_core::sc_start();
  // Clean: one transmission per FLIT, each the model's framing, all delivered.
  ASSERT_EQ(a.wire.size(), clean.size());
  EXPECT_EQ(a.sent, clean.size());
  EXPECT_EQ(a.naks, 0u);
  for (std::size_t i = 0; i < clean.size(); ++i) {
    ASSERT_EQ(a.wire[i], model_flit(clean[i], static_cast<std::uint16_t>(i))) << "FLIT " << i << " on the wire";
    ASSERT_EQ(a.delivered[i], std::vector<std::uint8_t>(a.wire[i].begin(), a.wire[i].end())) << "FLIT " << i << " handed on";
  }
  // Cycles: the model puts a FLIT on the wire every FLIT time, the RTL's
  // clock is a 32nd of it (8 bytes a beat): 32 cycles a FLIT, plus framing
  // the first and handing the last one on.
  const double model_cycles = 32.0 * static_cast<double>(clean.size());
  const double difference = (static_cast<double>(a.cycles) - model_cycles) / model_cycles;
  std::printf("link RTL: %zu FLITs in %llu cycles, the model's FLIT time gives %.0f: %+.1f%%\n", clean.size(),
              static_cast<unsigned long long>(a.cycles), model_cycles, 100 * difference);
  EXPECT_LE(std::abs(difference), 0.05);
  // Noisy: five corrupted transmissions (two back to back), each NAKed once
  // (the second of a pair falls in the window the first already rewound),
  // replayed, and every FLIT delivered once, in order.
  ASSERT_EQ(b.delivered.size(), noisy.size());
  for (std::size_t i = 0; i < noisy.size(); ++i) {
    const auto want = model_flit(noisy[i], static_cast<std::uint16_t>(clean.size() + i));
    ASSERT_EQ(b.delivered[i], want) << "FLIT " << i;
  }
  EXPECT_EQ(b.crc_errors, errors.size());
  EXPECT_GE(b.naks, 4u);
  EXPECT_LE(b.naks, errors.size());
  EXPECT_GT(b.sent, noisy.size() + b.naks) << "go-back-N resends the FLITs behind a bad one too";
  std::printf("link RTL: %zu + %zu FLITs, %llu transmissions with %zu corrupted: %llu NAKs, %llu CRC errors, %llu cycles\n",
              clean.size(), noisy.size(), static_cast<unsigned long long>(b.sent), errors.size(),
              static_cast<unsigned long long>(b.naks), static_cast<unsigned long long>(b.crc_errors),
              static_cast<unsigned long long>(b.cycles));
}
