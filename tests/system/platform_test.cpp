// The default platform assembled in-process: the bus reaches every
// instance at the address the platform file gives it, interrupts are wired
// as described, checkers sit on every binding, and the generated firmware
// header agrees with the platform file.
#include <gtest/gtest.h>

#include "common/payload.hpp"
#include "common/sim.hpp"
#include "platform.hpp"
#include "roofline.hpp"
#include "tessera_platform.h"
#include "uart16550/uart16550.hpp"

using namespace tessera;

namespace {

const std::string kT1 = std::string(TESSERA_SOURCE_DIR) + "/platform/t1.json";

struct T1 {
  PlatformSpec spec;
  std::unique_ptr<Platform> p;
  // The CP sleeps in a wfi loop at the start of CP RAM, so the test is the
  // only one on the bus.
  explicit T1(std::vector<std::string> sets = {"uart0.tx=none", "cp.reset_pc=0x8000_0000"}) {
    nlohmann::json raw = PlatformSpec::read(kT1);
    for (const auto& s : sets) PlatformSpec::apply_set(raw, kT1, s);
    spec = PlatformSpec::parse(kT1, raw);
    p = std::make_unique<Platform>("t1", spec, true);
    p->write_idle_loop("cpram", 0);
    sc_core::sc_start(sc_core::SC_ZERO_TIME);  // complete elaboration
  }
  std::uint64_t read(std::uint64_t addr, unsigned len) {
    std::uint64_t v = 0;
    sc_core::sc_time d;
    EXPECT_EQ(p->transport(tlm::TLM_READ_COMMAND, addr, &v, len, d), tlm::TLM_OK_RESPONSE) << std::hex << addr;
    return v;
  }
  void write(std::uint64_t addr, std::uint64_t v, unsigned len) {
    sc_core::sc_time d;
    EXPECT_EQ(p->transport(tlm::TLM_WRITE_COMMAND, addr, &v, len, d), tlm::TLM_OK_RESPONSE) << std::hex << addr;
  }
};

}  // namespace

TEST(Platform, GeneratedHeaderAgreesWithPlatformFile) {
  T1 t;
  EXPECT_EQ(*t.spec.find("uart0")->base, TESSERA_UART0_BASE);
  EXPECT_EQ(t.spec.find("uart0")->size, TESSERA_UART0_SIZE);
  EXPECT_EQ(*t.spec.find("cpram")->base, TESSERA_CPRAM_BASE);
  EXPECT_EQ(t.spec.find("cpram")->size, TESSERA_CPRAM_SIZE);
  EXPECT_EQ(*t.spec.find("plic")->base, TESSERA_PLIC_BASE);
  EXPECT_EQ(*t.spec.find("clint")->base, TESSERA_CLINT_BASE);
  EXPECT_EQ(*t.spec.find("finisher")->base, TESSERA_FINISHER_BASE);
  EXPECT_EQ(TESSERA_UART0_IRQ, 10u);
  EXPECT_EQ(TESSERA_MAILBOX_IRQ, 11u);
}

TEST(Platform, UartInterruptReachesPlic) {
  T1 t;
  const std::uint64_t plic = TESSERA_PLIC_BASE, uart = TESSERA_UART0_BASE;
  t.write(plic + 4 * TESSERA_UART0_IRQ, 1, 4);           // priority
  t.write(plic + 0x2000, 1u << TESSERA_UART0_IRQ, 4);    // enable, context 0
  t.write(uart + 1, 0x02, 1);                             // ETBEI: THR empty interrupt
  EXPECT_EQ(t.read(plic + 0x1000, 4), 1u << TESSERA_UART0_IRQ);
  EXPECT_EQ(t.read(plic + 0x200004, 4), TESSERA_UART0_IRQ) << "claim";
  t.write(uart + 0, 'A', 1);
  EXPECT_EQ(t.p->get<uart16550::Uart16550>("uart0")->transmitted(), "A");
  EXPECT_EQ(t.p->protocol_violations(), 0u);
}

TEST(Platform, FinisherEndsTheRunWithItsCode) {
  sim::reset();
  T1 t;
  t.write(TESSERA_FINISHER_BASE, (7u << 16) | 0x3333, 4);
  ASSERT_TRUE(sim::exit_code());
  EXPECT_EQ(*sim::exit_code(), 7);
}

TEST(Platform, HolesAndRomWritesAreErrorsNotCrashes) {
  T1 t;
  std::uint64_t v = 0;
  sc_core::sc_time d;
  EXPECT_EQ(t.p->transport(tlm::TLM_READ_COMMAND, 0x20000000, &v, 4, d), tlm::TLM_ADDRESS_ERROR_RESPONSE);
  EXPECT_EQ(t.p->transport(tlm::TLM_WRITE_COMMAND, 0x1000, &v, 4, d), tlm::TLM_COMMAND_ERROR_RESPONSE);
  EXPECT_EQ(t.p->transport(tlm::TLM_READ_COMMAND, TESSERA_UART0_BASE, &v, 4, d), tlm::TLM_BURST_ERROR_RESPONSE);
  EXPECT_EQ(t.p->protocol_violations(), 0u);
}

TEST(Platform, MailboxHostSideReachesCp) {
  T1 t;
  auto& host = t.p->target("mailbox", "host_target");
  std::uint32_t word = 0xfeed;
  tlm::tlm_generic_payload g;
  g.set_write();
  g.set_address(0xc);
  g.set_data_ptr(reinterpret_cast<unsigned char*>(&word));
  g.set_data_length(4);
  g.set_streaming_width(4);
  sc_core::sc_time d;
  host.b_transport(g, d);
  EXPECT_EQ(g.get_response_status(), tlm::TLM_OK_RESPONSE);
  EXPECT_EQ(t.read(TESSERA_MAILBOX_BASE + 0x8, 4), 0xfeedu);
  EXPECT_THROW(t.p->target("mailbox", "nope"), ConfigError);
}

TEST(Platform, DebugAccessSpansRangesAndStopsAtHoles) {
  T1 t;
  std::vector<std::uint8_t> data(64, 0xab);
  EXPECT_EQ(t.p->debug_write(TESSERA_CPRAM_BASE + TESSERA_CPRAM_SIZE - 32, data.data(), 64), 32u);
  std::vector<std::uint8_t> back(32);
  EXPECT_EQ(t.p->debug_read(TESSERA_CPRAM_BASE + TESSERA_CPRAM_SIZE - 32, back.data(), 32), 32u);
  EXPECT_EQ(back[31], 0xab);
}

TEST(Platform, WiringAnInputTwiceIsRefused) {
  nlohmann::json raw = PlatformSpec::read(kT1);
  PlatformSpec::apply_set(raw, kT1, "mailbox.irq.irq_out=plic.src[10]");
  PlatformSpec spec = PlatformSpec::parse(kT1, raw);
  try {
    Platform p("t1", spec, true);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("mailbox.irq.irq_out: \"plic.src[10]\" already has a driver"),
              std::string::npos)
        << e.what();
  }
}

namespace {
// The host side of the mailbox, as the runtime will drive it.
struct Host : sc_core::sc_module {
  tlm::tlm_fw_transport_if<>& mb;
  std::vector<std::uint32_t> replies;
  Host(const sc_core::sc_module_name& n, tlm::tlm_fw_transport_if<>& m) : sc_core::sc_module(n), mb(m) {
    SC_HAS_PROCESS(Host);
    SC_THREAD(run);
  }
  std::uint32_t rd(std::uint64_t off) {
    std::uint32_t v = 0;
    tlm::tlm_generic_payload t;
    set_access(t, tlm::TLM_READ_COMMAND, off, &v, 4);
    sc_core::sc_time d;
    mb.b_transport(t, d);
    return v;
  }
  void wr(std::uint64_t off, std::uint32_t v) {
    tlm::tlm_generic_payload t;
    set_access(t, tlm::TLM_WRITE_COMMAND, off, &v, 4);
    sc_core::sc_time d;
    mb.b_transport(t, d);
  }
  void run() {
    wait(10, sc_core::SC_US);  // let the firmware boot
    for (std::uint32_t i = 0; i < 3; ++i) {
      wr(0xc, 100 * i);
      wr(0xc, 100 * i + 1);
      wr(0x14, 1);  // ring the CP
      while (!(rd(0x10) & 1)) wait(1, sc_core::SC_US);
      wr(0x10, 1);
      while (!(rd(0x4) & 0x10000)) replies.push_back(rd(0x8));
    }
  }
};
}  // namespace

TEST(Platform, MailboxFirmwareAnswersTheHost) {
  sim::reset();
  nlohmann::json raw = PlatformSpec::read(kT1);
  PlatformSpec::apply_set(raw, kT1, "uart0.tx=none");
  PlatformSpec spec = PlatformSpec::parse(kT1, raw);
  Platform p("t1", spec, true);
  const ElfImage elf = ElfImage::read(std::string(TESSERA_FIRMWARE_DIR) + "/mailbox_echo.elf");
  p.load(elf);
  Host host("host", p.target("mailbox", "host_target"));
  sc_core::sc_start(sc_core::sc_time(10, sc_core::SC_MS));
  ASSERT_TRUE(sim::exit_code()) << "the firmware ends after three requests";
  EXPECT_EQ(*sim::exit_code(), 0);
  EXPECT_EQ(host.replies, (std::vector<std::uint32_t>{1, 2, 101, 102, 201, 202}));
  EXPECT_EQ(p.protocol_violations(), 0u);
}

TEST(Platform, CpReachesTileScratchpadOverTheNoc) {
  T1 t;
  // The flit-level NoC waits, so the accesses run in a thread of their own.
  std::vector<std::uint8_t> out(256), in(256);
  for (unsigned i = 0; i < out.size(); ++i) out[i] = static_cast<std::uint8_t>(i * 7);
  tlm::tlm_response_status w = tlm::TLM_INCOMPLETE_RESPONSE, r = w, past = w;
  sc_core::sc_time read_time;
  sc_core::sc_spawn([&] {
    sc_core::sc_time d;
    w = t.p->transport(tlm::TLM_WRITE_COMMAND, TESSERA_TILE0_BASE + 0x100, out.data(), 256, d);
    sc_core::wait(d);
    const sc_core::sc_time start = sc_core::sc_time_stamp();
    sc_core::sc_time rd;
    r = t.p->transport(tlm::TLM_READ_COMMAND, TESSERA_TILE0_BASE + 0x100, in.data(), 256, rd);
    read_time = sc_core::sc_time_stamp() + rd - start;
    std::uint32_t v = 0;
    past = t.p->transport(tlm::TLM_READ_COMMAND, TESSERA_TILE7_BASE + TESSERA_TILE7_SIZE, &v, 4, rd);  // past the last tile
  });
  sc_core::sc_start(sc_core::sc_time(10, sc_core::SC_US));
  EXPECT_EQ(w, tlm::TLM_OK_RESPONSE);
  EXPECT_EQ(r, tlm::TLM_OK_RESPONSE);
  EXPECT_EQ(in, out);
  // A hop up the mesh and back, plus the banks: more than the SRAM's 3 cycles alone.
  EXPECT_GT(read_time, sc_core::sc_time(2, sc_core::SC_NS));
  EXPECT_EQ(past, tlm::TLM_ADDRESS_ERROR_RESPONSE);
}

TEST(Platform, CpRunsAGemmOnTile0ThroughItsRegisters) {
  T1 t;
  // BF16 A = [1 2; 3 4] at 0x0, B = [2 0; 1 -1] at 0x100, C at 0x200.
  const std::uint16_t a[] = {0x3f80, 0x4000, 0x4040, 0x4080}, b[] = {0x4000, 0x0000, 0x3f80, 0xbf80};
  float c[4] = {0, 0, 0, 0};
  std::uint64_t status = ~0ull, completed = 0;
  bool irq_seen = false;
  sc_core::sc_spawn([&] {
    sc_core::sc_time d;
    auto write32 = [&](std::uint64_t off, std::uint32_t v) {
      EXPECT_EQ(t.p->transport(tlm::TLM_WRITE_COMMAND, TESSERA_TILE0_CSR_BASE + off, &v, 4, d), tlm::TLM_OK_RESPONSE);
    };
    auto read32 = [&](std::uint64_t off) {
      std::uint32_t v = 0;
      EXPECT_EQ(t.p->transport(tlm::TLM_READ_COMMAND, TESSERA_TILE0_CSR_BASE + off, &v, 4, d), tlm::TLM_OK_RESPONSE);
      return v;
    };
    t.p->transport(tlm::TLM_WRITE_COMMAND, TESSERA_TILE0_BASE + 0x0, const_cast<std::uint16_t*>(a), 8, d);
    t.p->transport(tlm::TLM_WRITE_COMMAND, TESSERA_TILE0_BASE + 0x100, const_cast<std::uint16_t*>(b), 8, d);
    write32(0x14, 1);  // IRQ_ENABLE.DONE
    const std::uint32_t cmd[][2] = {{0x20, 9}, {0x24, 1}, {0x28, 2}, {0x2c, 2}, {0x30, 2},
                                    {0x34, 0x0}, {0x38, 0x100}, {0x3c, 0x200}, {0x50, 1}};
    for (const auto& [off, v] : cmd) write32(off, v);
    sc_core::wait(d + sc_core::sc_time(2, sc_core::SC_US));
    d = sc_core::SC_ZERO_TIME;
    status = read32(0x4);
    completed = read32(0x8);
    irq_seen = read32(0x18) & 1;
    t.p->transport(tlm::TLM_READ_COMMAND, TESSERA_TILE0_BASE + 0x200, c, 16, d);
  });
  sc_core::sc_start(sc_core::sc_time(10, sc_core::SC_US));
  EXPECT_EQ(status, 0u) << "idle, no error";
  EXPECT_EQ(completed, 1u);
  EXPECT_TRUE(irq_seen);
  EXPECT_EQ(c[0], 4.0f);
  EXPECT_EQ(c[1], -2.0f);
  EXPECT_EQ(c[2], 10.0f);
  EXPECT_EQ(c[3], -4.0f);
}

// The roofline's limits, by hand, for the default T1: 8 tiles of a 64x64
// array at 1.5 GHz (FP8 and INT8 pack two per element), DMA ports of 64 B
// per cycle behind 32 B NoC links at 2 GHz, four HBM3-6400 stacks (16
// channels x 2 pseudo-channels x 32 bits x 6.4 Gb/s), the 4x4 mesh's four
// links down from the HBM row, a 64 GB/s host port and chip-to-chip ports
// of 16 lanes x 112 Gb/s less 5.51% of coding.
TEST(Platform, RooflineLimitsAreTheT1sByHand) {
  T1 t;
  const roofline::Limits l = roofline::limits(*t.p);
  EXPECT_EQ(l.tiles, 8u);
  EXPECT_DOUBLE_EQ(l.tile_macs_per_s.at("bf16"), 64.0 * 64 * 1.5e9);
  EXPECT_DOUBLE_EQ(l.tile_macs_per_s.at("fp16"), 64.0 * 64 * 1.5e9);
  EXPECT_DOUBLE_EQ(l.tile_macs_per_s.at("fp8"), 2 * 64.0 * 64 * 1.5e9);
  EXPECT_DOUBLE_EQ(l.macs_per_s("bf16"), 8 * 64.0 * 64 * 1.5e9);
  EXPECT_DOUBLE_EQ(l.tile_vector_ops_per_s, 64 * 1.5e9) << "64 lanes";
  EXPECT_DOUBLE_EQ(l.tile_special_ops_per_s, 64 / 16.0 * 1.5e9) << "a special-function op per 16 lane ops";
  EXPECT_DOUBLE_EQ(l.port_bytes_per_s, 64e9) << "a node's NoC link";
  EXPECT_DOUBLE_EQ(l.port_flits_per_s, 2e9);
  EXPECT_DOUBLE_EQ(l.tile_dma_bytes_per_s, 64 * 1.5e9) << "the DMA engine's port";
  EXPECT_EQ(l.stacks, 4u);
  EXPECT_DOUBLE_EQ(l.stack_bytes_per_s, 16 * 2 * 4 * 6.4e9);
  EXPECT_DOUBLE_EQ(l.hbm_bytes_per_s(), 4 * 819.2e9);
  EXPECT_DOUBLE_EQ(l.cut_read_bytes_per_s, 4 * 64e9);
  EXPECT_DOUBLE_EQ(l.cut_write_bytes_per_s, 4 * 64e9);
  EXPECT_EQ(l.cut_link, "node 12 south");
  EXPECT_DOUBLE_EQ(l.host_bytes_per_s, 64e9);
  EXPECT_NEAR(l.link_bytes_per_s, 16 * 112e9 * (1 - 0.0551) / 8, 1e3);
  EXPECT_DOUBLE_EQ(l.reduce_bytes_per_s, 256e9);
  EXPECT_EQ(l.json()["noc_cut_read_bytes_per_s"].get<double>(), 256e9);
}

// `--set` moves the limits: a NoC at 1 GHz halves its links (32 GB/s), so
// the tiles' NoC ports and the cut halve; a tile of 32 columns is the
// slowest, and the tiles' compute is counted at its rate.
TEST(Platform, RooflineLimitsFollowTheParameters) {
  T1 t({"uart0.tx=none", "cp.reset_pc=0x8000_0000", "noc.clock=1GHz", "tile3.array_cols=32"});
  const roofline::Limits l = roofline::limits(*t.p);
  EXPECT_DOUBLE_EQ(l.port_bytes_per_s, 32e9);
  EXPECT_DOUBLE_EQ(l.cut_read_bytes_per_s, 4 * 32e9);
  EXPECT_DOUBLE_EQ(l.tile_macs_per_s.at("bf16"), 64.0 * 32 * 1.5e9) << "the slowest tile";
}

// The bound of some work: one tile's second of BF16 MACs and of DMA (96 GB
// through its 96 GB/s engine port), a second each of its vector unit's
// lane ops and special functions, three seconds of flits out of NoC node 12
// (a flit per cycle at 2 GHz), two seconds of one stack's peak read, which
// also crosses the NoC cut (6.4 s at 256 GB/s): the cut binds.
TEST(Platform, RooflineBoundNamesTheBindingResource) {
  T1 t;
  const roofline::Limits l = roofline::limits(*t.p);
  nlohmann::ordered_json before = t.p->stats(), after = before;
  const std::string tile = t.p->find("tile0")->name(), hbm = t.p->find("hbm0")->name();
  after[tile]["tensor_macs_bf16"] = before[tile]["tensor_macs_bf16"].get<double>() + 64.0 * 64 * 1.5e9;
  after[tile]["dma_global_bytes"] = before[tile]["dma_global_bytes"].get<double>() + 96e9;
  const std::string noc = t.p->find("noc")->name();
  after[noc]["node_injected_flits"][12] = before[noc]["node_injected_flits"][12].get<double>() + 6e9;
  after[hbm]["bytes_read"] = before[hbm]["bytes_read"].get<double>() + 2 * 819.2e9;
  after[tile]["vector_lane_ops"] = before[tile]["vector_lane_ops"].get<double>() + 96e9;
  after[tile]["vector_special_function_ops"] = before[tile]["vector_special_function_ops"].get<double>() + 6e9;
  const roofline::Report r = roofline::bound(l, before, after);
  std::map<std::string, double> s;
  for (const auto& b : r.bounds) s[b.resource] = b.seconds;
  EXPECT_DOUBLE_EQ(s["compute"], 1.0);
  EXPECT_DOUBLE_EQ(s["vector"], 2.0) << "a second of lane ops, then one of special functions";
  EXPECT_DOUBLE_EQ(s["tile ports"], 1.0);
  EXPECT_DOUBLE_EQ(s["noc ports"], 3.0);
  EXPECT_DOUBLE_EQ(s["hbm"], 2.0);
  EXPECT_DOUBLE_EQ(s["noc cut"], 2 * 819.2e9 / 256e9);
  EXPECT_DOUBLE_EQ(s["host port"], 0.0);
  EXPECT_EQ(r.binding().resource, "noc cut");
  EXPECT_EQ(r.binding().where, "node 12 south");
  std::map<std::string, std::string> where;
  for (const auto& b : r.bounds) where[b.resource] = b.where;
  EXPECT_EQ(where["noc ports"], "node 12 out");
  EXPECT_EQ(where["hbm"], "hbm0");
  EXPECT_EQ(where["compute"], "tile0");
  EXPECT_DOUBLE_EQ(r.seconds(), 6.4);
  EXPECT_DOUBLE_EQ(r.json(12.8)["achieved_over_bound"].get<double>(), 0.5);
}
