// The host port: accesses pass to the NoC with their address and data
// unchanged; each takes its bytes' time on its direction of the link plus
// the latency each way; accesses in one direction queue behind each other,
// the two directions do not (full duplex); errors and debug accesses pass
// through; a bandwidth of zero is refused with its key.
#include <gtest/gtest.h>

#include <tlm_utils/simple_target_socket.h>

#include <cstring>

#include "common/testing/initiator.hpp"
#include "host_port/host_port.hpp"

using namespace tessera;
using namespace tessera::host_port;
using sc_core::sc_time;
using sc_core::SC_NS;

namespace {

// The NoC side: 64 KiB of memory answering in 10 ns; an error above it.
struct Device : sc_core::sc_module {
  tlm_utils::simple_target_socket<Device> socket;
  std::vector<std::uint8_t> mem = std::vector<std::uint8_t>(64 << 10);
  std::uint64_t last = 0;
  explicit Device(const sc_core::sc_module_name& n) : sc_core::sc_module(n), socket("socket") {
    socket.register_b_transport(this, &Device::b_transport);
    socket.register_transport_dbg(this, &Device::dbg);
  }
  void b_transport(tlm::tlm_generic_payload& t, sc_time& delay) {
    last = t.get_address();
    delay += sc_time(10, SC_NS);
    if (dbg(t) != t.get_data_length()) return t.set_response_status(tlm::TLM_ADDRESS_ERROR_RESPONSE);
    t.set_response_status(tlm::TLM_OK_RESPONSE);
  }
  unsigned dbg(tlm::tlm_generic_payload& t) {
    const std::uint64_t a = t.get_address();
    if (a + t.get_data_length() > mem.size()) return 0;
    if (t.is_write()) std::memcpy(&mem[a], t.get_data_ptr(), t.get_data_length());
    else std::memcpy(t.get_data_ptr(), &mem[a], t.get_data_length());
    return t.get_data_length();
  }
};

struct Bench {
  HostPort port;
  Device dev{"dev"};
  tessera::testing::TestInitiator host{"host"};
  explicit Bench(const HostPort::Config& c) : port("port", c) {
    host.socket.bind(port.host_target);
    port.noc_initiator.bind(dev.socket);
  }
};

HostPort::Config config() {
  HostPort::Config c;
  c.bandwidth = 64e9;  // 4 KiB in 64 ns
  c.latency = sc_time(500, SC_NS);
  return c;
}

}  // namespace

TEST(HostPort, AccessesPassWithTheirAddressAndTakeTheLinksTime) {
  Bench b(config());
  std::vector<std::uint8_t> data(4096, 0x5a), back(4096);
  sc_time d = sc_core::SC_ZERO_TIME;
  EXPECT_EQ(b.host.transport(tlm::TLM_WRITE_COMMAND, 0x2000, data.data(), 4096, &d), tlm::TLM_OK_RESPONSE);
  EXPECT_EQ(b.dev.last, 0x2000u);
  EXPECT_EQ(b.dev.mem[0x2000 + 4095], 0x5a);
  // 64 ns on the wire, 500 ns there, the device's 10 ns, 500 ns back.
  EXPECT_EQ(d, sc_time(1074, SC_NS));
  sc_time r = sc_core::SC_ZERO_TIME;
  EXPECT_EQ(b.host.transport(tlm::TLM_READ_COMMAND, 0x2000, back.data(), 4096, &r), tlm::TLM_OK_RESPONSE);
  EXPECT_EQ(back, data);
  // 500 ns there, 10 ns in the device, 64 ns of data back, 500 ns: the
  // read's direction was free although the write's was just used.
  EXPECT_EQ(r, sc_time(1074, SC_NS));
  // A second write issued at the same time queues behind the first on its direction.
  sc_time d2 = sc_core::SC_ZERO_TIME;
  b.host.transport(tlm::TLM_WRITE_COMMAND, 0x4000, data.data(), 4096, &d2);
  EXPECT_EQ(d2, sc_time(1138, SC_NS));
  nlohmann::ordered_json s;
  b.port.report_stats(s);
  EXPECT_EQ(s["transactions"], 3u);
  EXPECT_EQ(s["bytes_to_device"], 8192u);
  EXPECT_EQ(s["bytes_to_host"], 4096u);
  EXPECT_EQ(s["errors"], 0u);
}

TEST(HostPort, ErrorsAndDebugAccessesPassThrough) {
  Bench b(config());
  std::uint32_t v = 0xfeed;
  EXPECT_EQ(b.host.transport(tlm::TLM_WRITE_COMMAND, 1 << 20, &v, 4), tlm::TLM_ADDRESS_ERROR_RESPONSE);
  nlohmann::ordered_json s;
  b.port.report_stats(s);
  EXPECT_EQ(s["errors"], 1u);
  EXPECT_EQ(b.host.debug(tlm::TLM_WRITE_COMMAND, 0x100, &v, 4), 4u);
  std::uint32_t back = 0;
  EXPECT_EQ(b.host.debug(tlm::TLM_READ_COMMAND, 0x100, &back, 4), 4u);
  EXPECT_EQ(back, 0xfeedu);
  EXPECT_EQ(b.host.debug(tlm::TLM_READ_COMMAND, 1 << 20, &back, 4), 0u);
}

TEST(HostPort, AZeroBandwidthIsRefusedWithItsKey) {
  Params p("p.json", "host", nlohmann::json{{"bandwidth", 0}});
  HostPort::Config c;
  c.visit(p);
  p.finish();
  try {
    c.validate(p);
    FAIL() << "accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("host.bandwidth: must be above zero"), std::string::npos) << e.what();
  }
}
