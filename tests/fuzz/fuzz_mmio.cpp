// Fuzz target: every register bank of the T1, through random MMIO
// sequences (offset, size, value, read or write, debug or not) sent over
// the system bus from a SystemC thread, as firmware would; and, built with
// TESSERA_FUZZ_WINDOWS, only the windows named there (the tile engines'
// command registers: tensor, vector, DMA descriptors, semaphores). One
// platform lives across inputs, so the engines the writes start keep
// running. Whatever the sequence, each access gets a TLM response and the
// simulation goes on; only the test finisher and HTIF, which end a run by
// design, and the memories, which hold no registers, are left out. The
// platform lives as long as the process (LeakSanitizer: -detect_leaks=0).
//
// An input is a sequence of 16-byte records: window, flags (bit 0 write,
// bit 1 debug access, bits 2-3 log2 of the size), 6 bytes of offset (taken
// modulo the window's size), 8 bytes of value.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/log.hpp"
#include "common/memory.hpp"
#include "common/sim.hpp"
#include "platform.hpp"
#include "riscv/riscv_cpu.hpp"
#include "spec.hpp"

#ifndef TESSERA_FUZZ_WINDOWS
#define TESSERA_FUZZ_WINDOWS ""
#endif

namespace {

using namespace tessera;

struct Window {
  std::uint64_t base, size;
};

struct Harness : sc_core::sc_module {
  Platform* platform;
  std::vector<Window> windows;
  std::vector<std::uint8_t> input;
  bool busy = false;
  sc_core::sc_event go;

  Harness(const sc_core::sc_module_name& n, Platform* p, const PlatformSpec& spec) : sc_core::sc_module(n), platform(p) {
    // The harness is the only initiator: the CP, with no firmware, waits (tile
    // cores wait for a start anyway, which the fuzzed writes may give them).
    if (auto* cp = platform->get<riscv::RiscvCpu>(spec.boot)) cp->hold();
    const std::string only = TESSERA_FUZZ_WINDOWS;
    for (const Router::Range& r : platform->bus().decode_table()) {
      const InstanceSpec* s = spec.find(r.name.substr(0, r.name.find('.')));
      const bool primary = r.name.find('.') == std::string::npos;
      if (!only.empty() && r.name.rfind(only, 0) != 0) continue;
      if (platform->get<Memory>(s->name) || s->type == "test_finisher" || s->type == "htif") continue;
      if (primary && (s->type == "hbm" || s->type == "c2c")) continue;  // memory windows, not registers
      windows.push_back({r.base, r.size});
    }
    SC_HAS_PROCESS(Harness);
    SC_THREAD(drive);
  }

  void drive() {
    for (;;) {
      while (!busy) sc_core::wait(go);  // an input may come before the thread first runs
      for (std::size_t at = 0; at + 16 <= input.size(); at += 16) {
        const std::uint8_t* r = input.data() + at;
        const Window& w = windows[r[0] % windows.size()];
        const bool write = r[1] & 1, debug = r[1] & 2;
        const unsigned len = 1u << ((r[1] >> 2) & 3);
        std::uint64_t offset = 0, value = 0;
        std::memcpy(&offset, r + 2, 6);
        std::memcpy(&value, r + 8, 8);
        const std::uint64_t addr = w.base + offset % w.size;
        if (debug) {
          if (write) platform->debug_write(addr, &value, len);
          else platform->debug_read(addr, &value, len);
          continue;
        }
        sc_core::sc_time delay = sc_core::SC_ZERO_TIME;
        platform->transport(write ? tlm::TLM_WRITE_COMMAND : tlm::TLM_READ_COMMAND, addr, &value, len, delay);
        sc_core::wait(delay + sc_core::sc_time(1, sc_core::SC_NS));
      }
      busy = false;
    }
  }
};

Harness* harness() {
  static Harness* h = [] {
    log::set_level("", log::Level::quiet);
    const std::string file = std::string(TESSERA_PLATFORM_DIR) + "/t1.json";
    static const PlatformSpec spec = PlatformSpec::parse(file, PlatformSpec::read(file));
    static Platform platform(spec.name.c_str(), spec, false);
    return new Harness("fuzz", &platform, spec);
  }();
  return h;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Harness* h = harness();
  if (sc_core::sc_get_status() == sc_core::SC_STOPPED || sim::exit_code()) {  // a write ended the run
    static bool said = false;
    if (!said) std::fprintf(stderr, "fuzz_mmio: the simulation ended (%s); later inputs do nothing\n", sim::exit_reason().c_str());
    said = true;
    return 0;
  }
  h->input.assign(data, data + std::min<std::size_t>(size, 16 * 256));
  h->busy = true;
  h->go.notify(sc_core::SC_ZERO_TIME);
  // Every access is bounded in simulated time (it gets a response), so the
  // sequence ends; the bound only turns a hang into a finding.
  for (unsigned slice = 0; h->busy; ++slice) {
    if (slice == 100000) __builtin_trap();  // 100 ms of simulated time for 256 accesses: a hang
    sc_core::sc_start(sc_core::sc_time(1, sc_core::SC_US));
    if (sc_core::sc_get_status() == sc_core::SC_STOPPED) break;
  }
  return 0;
}
