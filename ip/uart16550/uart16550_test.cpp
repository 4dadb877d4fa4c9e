#include <gtest/gtest.h>

#include <fstream>

#include "common/testing/initiator.hpp"
#include "common/testing/reg_checks.hpp"
#include "uart16550/uart16550.hpp"
#include "uart16550_regs.hpp"

using namespace tessera;
using namespace tessera::uart16550;
using namespace tessera::testing;
namespace R = tessera::regs::uart16550;

namespace {

Uart16550::Config quiet() {
  Uart16550::Config c;
  c.tx = "none";
  return c;
}

struct Bench {
  TestInitiator cpu{"cpu"};
  Uart16550 uart;
  IrqIn irq;
  explicit Bench(const Uart16550::Config& c = quiet()) : uart("uart0", c) {
    cpu.socket.bind(uart.csr_target);
    uart.irq_out.bind(irq);
  }
  tlm::tlm_fw_transport_if<>& fw() { return fw_of(uart.csr_target); }
  std::uint64_t rd(unsigned off) { return read(fw(), off, 1); }
  void wr(unsigned off, std::uint64_t v) { write(fw(), off, v, 1); }
};

}  // namespace

TEST(Uart16550, CAndCppViewsAgree) { expect_c_view_matches(R::kBlock, uart16550_regs_cview, uart16550_fields_cview, uart16550_values_cview); }

TEST(Uart16550, ResetValuesAndAccessTypes) {
  Bench b;
  expect_reset_and_access(b.fw(), 0, R::kBlock);
}

TEST(Uart16550, PolledTransmit) {
  Bench b;
  for (char c : std::string("hi\n")) {
    EXPECT_TRUE(b.rd(5) & 0x20) << "THRE before each byte";
    b.wr(0, static_cast<unsigned char>(c));
  }
  EXPECT_EQ(b.uart.transmitted(), "hi\n");
}

TEST(Uart16550, DivisorLatchBehindDlab) {
  Bench b;
  b.wr(3, 0x83);  // DLAB, 8N1
  b.wr(0, 0x01);
  b.wr(1, 0x02);
  EXPECT_EQ(b.rd(0), 0x01u);
  EXPECT_EQ(b.rd(1), 0x02u);
  b.wr(3, 0x03);
  EXPECT_EQ(b.rd(1), 0x00u) << "IER untouched by DLM writes";
  EXPECT_EQ(b.uart.transmitted(), "") << "DLL writes transmit nothing";
}

TEST(Uart16550, ReceiveFifoTriggerAndInterrupts) {
  Bench b;
  b.wr(2, 0x41 | 0x06);  // FIFO on, clear, trigger 4
  b.wr(1, 0x01);         // ERBFI
  EXPECT_FALSE(b.irq.level());
  b.uart.receive("ab");
  EXPECT_TRUE(b.irq.level());
  EXPECT_EQ(b.rd(2), 0xc0u | 0xc) << "timeout: data below the trigger";
  b.uart.receive("cd");
  EXPECT_EQ(b.rd(2), 0xc0u | 0x4) << "data at the trigger";
  EXPECT_EQ(b.rd(5) & 1, 1u);
  std::string got;
  while (b.rd(5) & 1) got += static_cast<char>(b.rd(0));
  EXPECT_EQ(got, "abcd");
  EXPECT_FALSE(b.irq.level());
  EXPECT_EQ(b.rd(2), 0xc1u);
}

TEST(Uart16550, OverrunSetsLineStatus) {
  Bench b;
  b.wr(1, 0x04);  // ELSI, FIFO off: one byte of room
  b.uart.receive("xy");
  EXPECT_TRUE(b.irq.level());
  EXPECT_EQ(b.rd(2), 0x6u);
  EXPECT_EQ(b.rd(5) & 0x3, 0x3u) << "DR and OE";
  EXPECT_EQ(b.rd(5) & 0x2, 0x0u) << "reading LSR cleared OE";
  EXPECT_FALSE(b.irq.level());
  EXPECT_EQ(b.rd(0), static_cast<unsigned>('x'));
}

TEST(Uart16550, ThreInterruptClearedByIirReadAndRearmedByWrite) {
  Bench b;
  b.wr(1, 0x02);
  EXPECT_TRUE(b.irq.level()) << "enabling ETBEI with THR empty";
  EXPECT_EQ(read_dbg(b.fw(), 2, 1), 0x2u);
  EXPECT_TRUE(b.irq.level()) << "a debug read clears nothing";
  EXPECT_EQ(b.rd(2), 0x2u);
  EXPECT_FALSE(b.irq.level());
  b.wr(0, 'z');
  EXPECT_TRUE(b.irq.level());
}

TEST(Uart16550, Loopback) {
  Bench b;
  b.wr(4, 0x10);
  b.wr(0, 'q');
  EXPECT_EQ(b.rd(0), static_cast<unsigned>('q'));
}

TEST(Uart16550, ReceivesFromFilePaced) {
  const char* path = "uart_rx.txt";
  std::ofstream(path) << "ok";
  Uart16550::Config c = quiet();
  c.rx = path;
  c.rx_interval = sc_core::sc_time(1, sc_core::SC_US);
  Bench b(c);
  b.wr(2, 0x01);
  sc_core::sc_start(sc_core::sc_time(1500, sc_core::SC_NS));
  EXPECT_EQ(b.rd(5) & 1, 1u);
  EXPECT_EQ(b.rd(0), static_cast<unsigned>('o'));
  EXPECT_EQ(b.rd(5) & 1, 0u) << "the second byte comes a microsecond later";
  sc_core::sc_start(sc_core::sc_time(1, sc_core::SC_US));
  EXPECT_EQ(b.rd(0), static_cast<unsigned>('k'));
}

TEST(Uart16550, BadAccessesAreErrors) {
  Bench b;
  std::uint32_t v = 0;
  EXPECT_EQ(access(b.fw(), tlm::TLM_READ_COMMAND, 0, &v, 4), tlm::TLM_BURST_ERROR_RESPONSE);
  EXPECT_EQ(access(b.fw(), tlm::TLM_READ_COMMAND, 0x8, &v, 1), tlm::TLM_ADDRESS_ERROR_RESPONSE);
  EXPECT_EQ(access(b.fw(), tlm::TLM_WRITE_COMMAND, 0x5, &v, 1), tlm::TLM_COMMAND_ERROR_RESPONSE);
}
