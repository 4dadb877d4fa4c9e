#include <gtest/gtest.h>

#include <fstream>

#include "common/memory.hpp"
#include "common/testing/reg_checks.hpp"

using namespace tessera;
using namespace tessera::testing;

namespace {

template <class M>
typename M::Config config(std::uint64_t size) {
  typename M::Config c;
  c.size = size;
  return c;
}

std::uint64_t resident_bytes() {
  std::ifstream in("/proc/self/statm");
  std::uint64_t pages = 0, resident = 0;
  in >> pages >> resident;
  return resident * 4096;
}

tlm::tlm_fw_transport_if<>& fw(Memory& m) { return fw_of(m.mem_target); }

}  // namespace

TEST(Memory, RamReadWriteAndLatency) {
  auto c = config<Ram>(4096);
  c.read_latency = sc_core::sc_time(3, sc_core::SC_NS);
  Ram ram("ram", c);
  write(fw(ram), 0x10, 0x1122334455667788ull, 8);
  EXPECT_EQ(read(fw(ram), 0x10, 8), 0x1122334455667788ull);
  EXPECT_EQ(read(fw(ram), 0x14, 2), 0x3344u);
  std::uint64_t v = 0;
  sc_core::sc_time d;
  access(fw(ram), tlm::TLM_READ_COMMAND, 0, &v, 4, &d);
  EXPECT_EQ(d, sc_core::sc_time(3, sc_core::SC_NS));
  EXPECT_EQ(access(fw(ram), tlm::TLM_READ_COMMAND, 4094, &v, 4), tlm::TLM_ADDRESS_ERROR_RESPONSE);
}

TEST(Memory, ByteEnablesAndStreaming) {
  Ram ram("ram", config<Ram>(64));
  write(fw(ram), 0, 0xffffffff, 4);
  std::uint32_t v = 0x11223344;
  unsigned char be[2] = {0xff, 0x00};
  tlm::tlm_generic_payload t;
  t.set_write();
  t.set_address(0);
  t.set_data_ptr(reinterpret_cast<unsigned char*>(&v));
  t.set_data_length(4);
  t.set_streaming_width(4);
  t.set_byte_enable_ptr(be);
  t.set_byte_enable_length(2);
  sc_core::sc_time d;
  fw(ram).b_transport(t, d);
  EXPECT_EQ(t.get_response_status(), tlm::TLM_OK_RESPONSE);
  EXPECT_EQ(read(fw(ram), 0, 4), 0xff22ff44u) << "byte enables pattern repeats";
  // Streaming width 1: four bytes written to the same address, the last wins.
  std::uint32_t s = 0xa1b2c3d4;
  tlm::tlm_generic_payload st;
  st.set_write();
  st.set_address(8);
  st.set_data_ptr(reinterpret_cast<unsigned char*>(&s));
  st.set_data_length(4);
  st.set_streaming_width(1);
  fw(ram).b_transport(st, d);
  EXPECT_EQ(read(fw(ram), 8, 2), 0x00a1u);
}

TEST(Memory, RomRefusesWritesButLoadsThroughDebug) {
  Rom rom("rom", config<Rom>(256));
  std::uint32_t v = 0xabcd;
  EXPECT_EQ(access(fw(rom), tlm::TLM_WRITE_COMMAND, 0, &v, 4), tlm::TLM_COMMAND_ERROR_RESPONSE);
  tlm::tlm_generic_payload t;
  t.set_write();
  t.set_address(0);
  t.set_data_ptr(reinterpret_cast<unsigned char*>(&v));
  t.set_data_length(4);
  EXPECT_EQ(fw(rom).transport_dbg(t), 4u);
  EXPECT_EQ(read(fw(rom), 0, 4), 0xabcdu);
  tlm::tlm_dmi dmi;
  t.set_read();
  ASSERT_TRUE(fw(rom).get_direct_mem_ptr(t, dmi));
  EXPECT_TRUE(dmi.is_read_allowed());
  EXPECT_FALSE(dmi.is_write_allowed());
}

TEST(Memory, RomImage) {
  const char* path = "memory_test_image.bin";
  {
    std::ofstream out(path, std::ios::binary);
    out << "TESSERA";
  }
  auto c = config<Rom>(64);
  c.image = path;
  c.image_offset = 8;
  Rom rom("rom", c);
  EXPECT_EQ(read(fw(rom), 8, 4), 0x53534554u);  // "TESS"
}

TEST(Memory, SparseReadsZeroAndAllocatesOnWrite) {
  auto c = config<SparseMemory>(1ull << 36);
  c.page_size = 4096;
  SparseMemory mem("hbm", c);
  EXPECT_EQ(read(fw(mem), 0x123456789, 8), 0u);
  EXPECT_EQ(mem.allocated_bytes(), 0u) << "reads allocate nothing";
  write(fw(mem), 0xffe, 0x0102030405060708ull, 8);  // crosses a page boundary
  EXPECT_EQ(read(fw(mem), 0xffe, 8), 0x0102030405060708ull);
  EXPECT_EQ(mem.allocated_bytes(), 2u * 4096);
  write(fw(mem), 0x7000, 0, 8);
  EXPECT_EQ(mem.allocated_bytes(), 2u * 4096) << "zeros written to an untouched page leave it untouched";
  EXPECT_EQ(read(fw(mem), 0x7000, 8), 0u);
  write(fw(mem), 0x1000, 0, 2);  // zeros into a page that holds data are written
  EXPECT_EQ(read(fw(mem), 0xffe, 8), 0x0102030400000708ull);
  tlm::tlm_dmi dmi;
  tlm::tlm_generic_payload t;
  std::uint8_t b = 0;
  t.set_read();
  t.set_address(0x40000000);
  t.set_data_ptr(&b);
  t.set_data_length(1);
  EXPECT_FALSE(fw(mem).get_direct_mem_ptr(t, dmi)) << "no DMI for reads of untouched pages";
  t.set_write();
  ASSERT_TRUE(fw(mem).get_direct_mem_ptr(t, dmi));
  EXPECT_EQ(dmi.get_start_address(), 0x40000000u);
  EXPECT_EQ(dmi.get_end_address(), 0x40000fffu);
  dmi.get_dmi_ptr()[5] = 0x77;
  EXPECT_EQ(read(fw(mem), 0x40000005, 1), 0x77u);
}

TEST(Memory, Sparse64GiBCostsLittleHostMemory) {
  const std::uint64_t before = resident_bytes();
  auto c = config<SparseMemory>(64ull << 30);
  c.page_size = 4096;
  SparseMemory mem("hbm", c);
  for (std::uint64_t a = 0; a < (64ull << 30); a += 1ull << 32) write(fw(mem), a + 8, a | 1, 8);
  for (std::uint64_t a = 0; a < (64ull << 30); a += 1ull << 32) EXPECT_EQ(read(fw(mem), a + 8, 8), a | 1);
  EXPECT_EQ(mem.allocated_bytes(), 16u * 4096);
  EXPECT_LT(resident_bytes() - before, 1u << 20) << "a 64 GiB sparse memory touched in 16 places";
}
