// Scratchpad: data in and out, bank-conflict costs against the formula,
// contention between accesses, range errors, configuration errors.
#include <gtest/gtest.h>

#include <numeric>

#include "common/log.hpp"
#include "common/testing/initiator.hpp"
#include "scratchpad/scratchpad.hpp"

using namespace tessera;
using namespace tessera::scratchpad;
using sc_core::sc_time;
using sc_core::SC_NS;

namespace {
struct Bench {
  Scratchpad spm{"spm", Scratchpad::Config{}};
  tessera::testing::TestInitiator cpu{"cpu"};
  Bench() { cpu.socket.bind(spm.mem_target); }
  sc_time period() const { return sc_time(1.0 / 1.5e9, sc_core::SC_SEC); }
};
std::vector<std::uint64_t> strided(std::uint64_t base, std::uint64_t stride, unsigned count) {
  std::vector<std::uint64_t> a(count);
  for (unsigned i = 0; i < count; ++i) a[i] = base + i * stride;
  return a;
}
}  // namespace

TEST(Scratchpad, ContiguousBlocksCostRowsOverBanks) {
  const BankGeometry g;  // 32 banks of 32-byte rows
  EXPECT_EQ(g.cycles(0, 4), 1u);
  EXPECT_EQ(g.cycles(0, 1024), 1u) << "32 rows, one per bank";
  EXPECT_EQ(g.cycles(0, 1025), 2u) << "row 32 is bank 0 again";
  EXPECT_EQ(g.cycles(31, 2), 1u) << "two rows, two banks";
  EXPECT_EQ(g.cycles(512, 4096), 4u);
  EXPECT_EQ(g.cycles(16, 4096), 5u) << "unaligned: 129 rows, bank 0 serves five";
}

TEST(Scratchpad, StridedWavesCostWhatTheFormulaPredicts) {
  // 64 FP32 elements at a stride of s rows: the wave touches 32 / gcd(s, 32)
  // banks, each serving 64 / that many rows, so it is slower than a
  // contiguous read by exactly that factor.
  const BankGeometry g;
  const auto unit = strided(0, 4, 64);
  const std::uint64_t contiguous = g.cycles(unit.data(), 64, 4);
  EXPECT_EQ(contiguous, 1u);
  for (unsigned s = 1; s <= 64; ++s) {
    const auto a = strided(0, 32ull * s, 64);
    const unsigned banks_touched = 32 / std::gcd(s, 32u);
    const std::uint64_t predicted = (64 + banks_touched - 1) / banks_touched;
    EXPECT_EQ(g.cycles(a.data(), 64, 4), predicted * contiguous) << "stride " << s << " rows";
  }
  // The classic fix: pad a 1 KiB row pitch by one bank row.
  const auto column = strided(0, 1024, 64), padded = strided(0, 1024 + 32, 64);
  EXPECT_EQ(g.cycles(column.data(), 64, 4), 64u);
  EXPECT_EQ(g.cycles(padded.data(), 64, 4), 2u);
  // Elements in the same row share its read; one crossing a row needs both.
  const std::uint64_t same_row[] = {0, 4, 8, 28}, crossing[] = {30};
  EXPECT_EQ(g.cycles(same_row, 4, 4), 1u);
  std::vector<unsigned> rows;
  g.rows_per_bank(crossing, 1, 4, rows);
  EXPECT_EQ(rows[0] + rows[1], 2u);
}

TEST(Scratchpad, DataRoundTripsWithRowTiming) {
  Bench b;
  std::vector<std::uint8_t> out(1024), in(1024);
  std::iota(out.begin(), out.end(), 0);
  sc_time d = sc_core::SC_ZERO_TIME;
  EXPECT_EQ(b.cpu.transport(tlm::TLM_WRITE_COMMAND, 0x1000, out.data(), 1024, &d), tlm::TLM_OK_RESPONSE);
  EXPECT_EQ(d, b.period() * 3.0) << "one row per bank, plus 2 cycles of latency";
  // Issued at the same decoupled time as the write: the banks are still busy.
  sc_time d2 = sc_core::SC_ZERO_TIME;
  EXPECT_EQ(b.cpu.transport(tlm::TLM_READ_COMMAND, 0x1000, in.data(), 1024, &d2), tlm::TLM_OK_RESPONSE);
  EXPECT_EQ(d2, b.period() * 4.0) << "waits one cycle for the write's banks";
  EXPECT_EQ(in, out);
  // Issued after the banks are free: no stall.
  sc_time d3 = b.period() * 10.0;
  EXPECT_EQ(b.cpu.transport(tlm::TLM_READ_COMMAND, 0x1000, in.data(), 4, &d3), tlm::TLM_OK_RESPONSE);
  EXPECT_EQ(d3, b.period() * 13.0);
  nlohmann::ordered_json stats;
  b.spm.report_stats(stats);
  EXPECT_EQ(stats["bytes_written"], 1024u);
  EXPECT_EQ(stats["bytes_read"], 1028u);
  EXPECT_EQ(stats["stall_cycles"], 1u);
}

TEST(Scratchpad, EngineWavesContendForBanks) {
  Bench b;
  const auto column = strided(0, 1024, 64), row = strided(4096, 4, 64);
  const sc_time t0 = sc_core::SC_ZERO_TIME;
  const Scratchpad::Timing c = b.spm.access(column.data(), 64, 4, false, t0);
  EXPECT_EQ(c.cycles, 64u + 2) << "all 64 in bank 0";
  EXPECT_EQ(c.stalls, 0u);
  // A contiguous wave at the same time needs banks 0-7; bank 0 is busy for 64 cycles.
  const Scratchpad::Timing r = b.spm.access(row.data(), 64, 4, false, t0);
  EXPECT_EQ(r.stalls, 64u);
  EXPECT_EQ(r.cycles, 64u + 1 + 2);
  // A wave on other banks goes straight through.
  const auto other = strided(8 * 32, 4, 8);  // bank 8
  EXPECT_EQ(b.spm.access(other.data(), 8, 4, true, t0).cycles, 3u);
  nlohmann::ordered_json stats;
  b.spm.report_stats(stats);
  EXPECT_EQ(stats["bank_conflict_cycles"], 63u);
  EXPECT_EQ(stats["engine_waves"], 3u);
}

TEST(Scratchpad, OutOfRangeIsAnAddressErrorAndByteEnablesWork) {
  Bench b;
  std::uint32_t word = 0x11223344;
  const auto before = log::guest_error_count();
  EXPECT_EQ(b.cpu.transport(tlm::TLM_WRITE_COMMAND, (2u << 20) - 2, &word, 4), tlm::TLM_ADDRESS_ERROR_RESPONSE);
  EXPECT_EQ(log::guest_error_count(), before + 1);
  EXPECT_EQ(b.cpu.transport(tlm::TLM_WRITE_COMMAND, (2u << 20) - 4, &word, 4), tlm::TLM_OK_RESPONSE);
  // Byte enables: only the enabled bytes change.
  tlm::tlm_generic_payload t;
  std::uint32_t value = 0xaabbccdd;
  unsigned char be[4] = {TLM_BYTE_ENABLED, TLM_BYTE_DISABLED, TLM_BYTE_ENABLED, TLM_BYTE_DISABLED};
  set_access(t, tlm::TLM_WRITE_COMMAND, (2u << 20) - 4, &value, 4);
  t.set_byte_enable_ptr(be);
  t.set_byte_enable_length(4);
  sc_time d;
  b.cpu.socket->b_transport(t, d);
  EXPECT_EQ(t.get_response_status(), tlm::TLM_OK_RESPONSE);
  std::uint32_t back = 0;
  EXPECT_EQ(b.cpu.debug(tlm::TLM_READ_COMMAND, (2u << 20) - 4, &back, 4), 4u);
  EXPECT_EQ(back, 0x11bb33ddu);
  // Debug reads stop at the end and say how much they did.
  std::uint64_t wide = 0;
  EXPECT_EQ(b.cpu.debug(tlm::TLM_READ_COMMAND, (2u << 20) - 4, &wide, 8), 4u);
}

TEST(Scratchpad, BadConfigurationsNameTheParameter) {
  auto error = [](const nlohmann::json& raw, std::uint64_t size = 0) -> std::string {
    try {
      Params p("t1.json", "spm0", raw, size);
      Scratchpad::Config c;
      c.visit(p);
      c.validate(p);
      p.finish();
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_EQ(error(nlohmann::json::object()), "no error");
  EXPECT_NE(error({{"banks", 24}}).find("spm0.banks"), std::string::npos);
  EXPECT_NE(error({{"row_bytes", 48}}).find("spm0.row_bytes"), std::string::npos);
  EXPECT_NE(error(nlohmann::json::object(), 1000).find("spm0.size"), std::string::npos);
  EXPECT_NE(error({{"bank", 32}}).find("bank"), std::string::npos) << "typos are errors";
}

TEST(Scratchpad, EngineStreamsTakeTheirShareOfTheBanks) {
  Bench b;
  const sc_core::sc_time cycle(1.0 / 1.5e9, sc_core::SC_SEC);
  // An engine moves 768000 bytes in its first 1500 cycles (of
  // 1024 bank bytes each): half of every bank's cycles.
  b.spm.engine_stream(sc_core::SC_ZERO_TIME, cycle * 1500.0, 768000);
  std::vector<std::uint8_t> buf(32 * 1024);
  // 32 KiB are 32 rows in each bank: 32 cycles alone, 64 beside the engine,
  // plus 2 of latency either way.
  sc_core::sc_time during = sc_core::SC_ZERO_TIME, after = sc_core::sc_time(2, sc_core::SC_US);
  b.cpu.transport(tlm::TLM_READ_COMMAND, 0, buf.data(), static_cast<unsigned>(buf.size()), &during);
  b.cpu.transport(tlm::TLM_READ_COMMAND, 0, buf.data(), static_cast<unsigned>(buf.size()), &after);
  EXPECT_EQ(during, cycle * 66.0);
  EXPECT_EQ(after - sc_core::sc_time(2, sc_core::SC_US), cycle * 34.0);
  nlohmann::ordered_json s;
  b.spm.report_stats(s);
  EXPECT_EQ(s["engine_shared_cycles"], 32u * 32);
}
