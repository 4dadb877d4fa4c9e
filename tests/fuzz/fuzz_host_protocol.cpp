// Fuzz target: the host protocol's commands and the host API around them.
// One Device (the default T1 booting sw/firmware/cmdproc) lives across
// inputs, as one host program would keep it; each input is a sequence of
// host calls: raw commands of every opcode with fuzzed fields (tile masks,
// addresses inside and outside HBM, sizes, offsets, entries, argument
// counts, streams, short watchdogs), allocations and copies with fuzzed
// sizes and offsets, and host-port register reads at fuzzed addresses.
//
// Whatever the calls, each one answers: a completion, a DeviceError with
// one of the protocol's status codes, or a UsageError from the host side.
// After every input the device must still serve a NOP and a well-behaved
// kernel; anything else (another exception, a device that stops answering)
// aborts, which libFuzzer reports as a crash.
//
// An input is a sequence of 48-byte records; byte 0 picks the call.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/log.hpp"
#include "tessera/runtime.hpp"

namespace {

using namespace tessera::rt;

constexpr std::size_t kRecord = 48;
constexpr std::size_t kMaxRecords = 16;        // per input: some tens of microseconds of device time
constexpr std::uint64_t kJunkBytes = 64 << 10;  // random bytes in HBM, for LOADs to copy and tiles to run

// Where the firmware and kernels are: this build's, or (the fuzz preset,
// which builds no RISC-V code) those of the build named by TESSERA_TARGET_DIR.
std::string target_dir() {
  if (const char* d = std::getenv("TESSERA_TARGET_DIR")) return d;
#ifdef TESSERA_TARGET_DIR
  return TESSERA_TARGET_DIR;
#else
  std::fprintf(stderr, "fuzz_host_protocol: set TESSERA_TARGET_DIR to a build's sw/target (tools/fuzz does)\n");
  std::abort();
#endif
}

[[noreturn]] void finding(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz_host_protocol: %s: %s\n", what, detail.c_str());
  std::abort();
}

struct Host {
  std::unique_ptr<Device> dev;
  Kernel kernel;
  Buffer junk;

  Host() {
    const std::string dir = target_dir();
    Device::Options o;
    o.firmware = dir + "/firmware/cmdproc.elf";
    o.sets = {"noc.model=packet"};  // the protocol is the target here, not the flits
    dev = std::make_unique<Device>(o);
    tessera::log::set_level("", tessera::log::Level::quiet);  // guest errors are the point here
    kernel = dev->load_kernel(dir + "/kernels/misbehave.elf", (1u << dev->tiles()) - 1);
    junk = dev->alloc(kJunkBytes);
    std::vector<std::uint8_t> noise(kJunkBytes);
    std::mt19937_64 rng(2026);
    for (auto& b : noise) b = static_cast<std::uint8_t>(rng());
    dev->write(junk, noise.data(), noise.size());
  }

  template <class T>
  static T field(const std::uint8_t* r, unsigned at) {
    T v;
    std::memcpy(&v, r + at, sizeof v);
    return v;
  }

  tp_command command(const std::uint8_t* r) const {
    tp_command c{};
    const std::uint8_t how = r[1];
    const unsigned kind = how % 8;  // mostly real opcodes, sometimes anything
    c.opcode = kind < 6 ? kind % 4 : field<std::uint32_t>(r, 4);
    c.tiles = field<std::uint32_t>(r, 8);
    if (how & 0x08) c.tiles &= (1u << dev->tiles()) - 1;
    c.timeout_us = 1 + field<std::uint8_t>(r, 2) % 8;  // a spinning kernel costs its watchdog
    c.addr = field<std::uint64_t>(r, 12);
    if (how & 0x10) c.addr = junk.address + c.addr % kJunkBytes;
    c.size = field<std::uint32_t>(r, 20);
    if (how & 0x20) c.size %= 8192;
    c.offset = field<std::uint32_t>(r, 24);
    if (how & 0x40) c.offset %= 1u << 20;
    c.entry = field<std::uint32_t>(r, 28);
    if (how & 0x80) c.entry = kernel.entry + (c.entry % 4096) * 4 % 8192;  // near the kernel's code
    c.nargs = field<std::uint8_t>(r, 3) % 20;
    for (unsigned i = 0; i < 4; ++i) c.args[i] = field<std::uint32_t>(r, 32 + 4 * i);
    c.args[0] %= 8;  // misbehave's modes, and a few it does not know
    c.stream = r[47] % 4;
    return c;
  }

  // One host API call on buffers with fuzzed sizes and offsets.
  void buffers(const std::uint8_t* r) {
    const std::uint64_t bytes = field<std::uint64_t>(r, 4);
    const std::uint64_t size = r[1] & 1 ? bytes : bytes % (1u << 20);
    const unsigned stack = r[2] % (dev->hbm_stacks() + 1);
    Buffer b;
    try {
      b = dev->alloc(size, stack);
    } catch (const UsageError&) {
      return;
    }
    std::vector<std::uint8_t> data(4096, r[3]);
    const std::uint64_t offset = field<std::uint64_t>(r, 12) % (b.size + 8192);
    const std::uint64_t len = field<std::uint16_t>(r, 20) % 4097;
    try {
      if (r[1] & 2) dev->write(b, data.data(), len, offset);
      else dev->read(b, data.data(), len, offset);
    } catch (const UsageError&) {
    }
    dev->free(b);
    if (r[1] & 4) {
      try {
        dev->free(b);  // twice
        finding("a buffer freed twice was accepted", std::to_string(b.address));
      } catch (const UsageError&) {
      }
    }
  }

  void run(const std::uint8_t* data, std::size_t size) {
    std::vector<Event> events;
    const std::size_t n = std::min(size / kRecord, kMaxRecords);
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint8_t* r = data + i * kRecord;
      switch (r[0] % 8) {
        case 6: buffers(r); break;
        case 7:
          try {
            (void)dev->read32(field<std::uint64_t>(r, 4));
          } catch (const UsageError&) {
          }
          break;
        default: events.push_back(dev->submit(command(r))); break;
      }
    }
    for (Event e : events) {
      try {
        dev->wait(e);
      } catch (const DeviceError& err) {
        if (err.status() > TP_COMM_ERROR) finding("a status the protocol does not define", err.what());
      } catch (const std::exception& err) {
        finding("the device did not answer a command", err.what());
      }
    }
    // The device still serves: a NOP, and the kernel, reloaded (LOADs may
    // have overwritten the scratchpads).
    try {
      tp_command nop{};
      if (dev->wait(dev->submit(nop)).status != TP_OK) finding("a NOP failed", "");
      const std::string dir = target_dir();
      kernel = dev->load_kernel(dir + "/kernels/misbehave.elf", kernel.tiles);
      if (dev->wait(dev->launch(kernel, {0, 0})).status != TP_OK) finding("a good kernel failed", "");
    } catch (const std::exception& err) {
      finding("the device stopped serving", err.what());
    }
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static Host host;  // one Device per process, as SystemC elaborates once
  host.run(data, size);
  return 0;
}
