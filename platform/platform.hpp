// SoC assembly: builds every instance of a checked PlatformSpec through
// the IP registry, maps each instance's first target on the system bus at
// its base (the same entry that created it, never a second list), wires the
// interrupts, and inserts a protocol checker on every socket binding when
// asked. Targets that are not mapped on the bus (the mailbox's host side)
// are reachable through target().
#pragma once

#include <map>
#include <memory>
#include <string>
#include <tlm_utils/multi_passthrough_initiator_socket.h>
#include <tlm_utils/simple_initiator_socket.h>
#include <vector>

#include "common/checker.hpp"
#include "common/trace_tap.hpp"
#include "common/router.hpp"
#include "elf.hpp"
#include "spec.hpp"

namespace tessera {

// A program built against a platform header carries its facts (the BSP's
// tessera_platform_facts); throws ElfError naming the first that `spec`
// has otherwise (a timeout or a global address would be silently wrong).
void check_facts(const PlatformSpec& spec, const ElfImage& elf);

class Platform : public sc_core::sc_module {
 public:
  Platform(const sc_core::sc_module_name& n, const PlatformSpec& spec, bool protocol_checker);
  ~Platform() override;

  const PlatformSpec& spec() const { return spec_; }
  Router& bus() { return *bus_; }
  Ip* find(const std::string& instance) const;
  template <class T>
  T* get(const std::string& instance) const {
    return dynamic_cast<T*>(find(instance));
  }
  // The forward interface of an instance's target socket, to reach targets
  // that are not on the bus. Throws ConfigError if there is none.
  tlm::tlm_fw_transport_if<>& target(const std::string& instance, const std::string& port);

  // Debug access through the bus, as loaders and debuggers use it: returns
  // how many bytes were done (fewer if the range leaves mapped memory).
  std::uint64_t debug_write(std::uint64_t addr, const void* data, std::uint64_t len) {
    return debug(tlm::TLM_WRITE_COMMAND, addr, const_cast<void*>(data), len);
  }
  std::uint64_t debug_read(std::uint64_t addr, void* data, std::uint64_t len) {
    return debug(tlm::TLM_READ_COMMAND, addr, data, len);
  }
  // An ordinary access through the bus (tests, bring-up); the response.
  tlm::tlm_response_status transport(tlm::tlm_command cmd, std::uint64_t addr, void* data, unsigned len,
                                     sc_core::sc_time& delay);

  // Loads every segment of an ELF image through debug writes once
  // elaboration is complete (at the start of simulation, before any
  // process runs), and starts the boot processor at its entry point.
  // Throws ElfError when a segment leaves memory or the image does not
  // suit the boot processor.
  void load(const ElfImage& elf);
  const std::string& load_error() const { return load_error_; }
  // A raw image (--load FILE@ADDR), written with the ELF's segments.
  // `what` names it in errors. Throws ElfError when it leaves memory.
  void load_image(const std::string& what, std::uint64_t addr, std::vector<std::uint8_t> bytes);
  // Starts the boot processor as QEMU does: at its reset_pc, a reset
  // vector puts the hart id in a0, the device tree's address in a1 and a
  // fw_dynamic_info (next stage `next`, in S mode) in a2, and jumps to
  // `entry`; the vector and the device tree go into the memory at
  // reset_pc. After load(). Throws ConfigError (no boot processor, no
  // memory there, no room).
  void boot_vector(std::uint64_t entry, std::uint64_t next, const std::vector<std::uint8_t>& dtb);
  // Places a tile kernel (an RV32 program linked for the tile core's local
  // map, its scratchpad at Tile::kLocalSpm) in the scratchpad of tile
  // instance `tile` and sets its CORE_PC to the entry point; the core runs
  // it on CORE_CTRL.START. Throws ConfigError (no such tile, no core) or
  // ElfError (not RV32, a segment outside the scratchpad).
  void load_kernel(const std::string& tile, const ElfImage& elf);
  // load_kernel, then the core starts at time 0 as CORE_CTRL.START would
  // start it (tessera-vp --kernel). With `end_run`, the run ends when every
  // kernel started so has stopped: exit 0, a kernel's nonzero CORE_EXIT
  // value, or 1 for a fault.
  void start_kernel(const std::string& tile, const ElfImage& elf, bool end_run);
  // Keeps the boot processor asleep (an idle loop at its reset PC).
  void idle_boot_processor();

  // Puts an idle loop (wfi; j .-4) at `offset` of memory instance `memory`,
  // through its target socket, so it works during elaboration: tests and
  // studies that drive a platform from outside keep its processors asleep.
  void write_idle_loop(const std::string& memory, std::uint64_t offset);

  std::string memory_map() const;
  // Every instance's counters; with `prefix`, only instances whose name
  // starts with it (a cheap look at a few during a run).
  nlohmann::ordered_json stats(const std::string& prefix = "") const;
  // What each instance can do at most (Ip::report_limits), by its name as
  // stats() gives it, with its "instance" and "type", and behind a
  // network-on-chip the network's instance ("noc") and the "node".
  nlohmann::ordered_json limits() const;
  std::uint64_t protocol_violations() const;

 private:
  template <class From, class To>
  void connect(From& from, To& to, const std::string& label) {
    if (trace::on(trace::tlm) && trace::socket_wanted(label)) {  // --trace-sockets: a tap in front
      auto tap = std::make_unique<TraceTap>(("trace_" + label).c_str(), std::string(name()) + "." + label);
      from.bind(tap->target_socket);
      TraceTap& t = *tap;
      taps_.push_back(std::move(tap));
      checked(t.initiator_socket, to, label);
      return;
    }
    checked(from, to, label);
  }
  template <class From, class To>
  void checked(From& from, To& to, const std::string& label) {
    if (!checker_) {
      from.bind(to);
      return;
    }
    auto c = std::make_unique<ProtocolChecker>(("checker_" + label).c_str());
    from.bind(c->target_socket);
    c->initiator_socket.bind(to);
    checkers_.push_back(std::move(c));
  }
  void wire_irqs();
  void check_overlays() const;
  std::uint64_t debug(tlm::tlm_command cmd, std::uint64_t addr, void* data, std::uint64_t len);
  void start_of_simulation() override;

  const PlatformSpec& spec_;
  const ElfImage* pending_elf_ = nullptr;
  struct Image {
    std::string what;
    std::uint64_t addr;
    std::vector<std::uint8_t> bytes;
  };
  std::vector<Image> images_;  // written after the ELF
  std::vector<std::string> kernels_;  // started at time 0
  bool kernels_end_run_ = false;
  void run_kernels();
  void check_in_memory(const std::string& what, std::uint64_t addr, std::uint64_t size) const;
  bool write_elf(const ElfImage& elf);  // false: load_error_ says why
  std::map<std::string, unsigned> attach_node_;  // instances behind a network-on-chip: their node
  std::string load_error_;
  bool checker_;
  std::unique_ptr<Router> bus_;
  std::vector<std::pair<std::string, std::unique_ptr<Ip>>> ips_;
  std::vector<std::unique_ptr<ProtocolChecker>> checkers_;
  std::vector<std::unique_ptr<TraceTap>> taps_;
  tlm_utils::simple_initiator_socket<Platform> debug_port_;
  tlm_utils::multi_passthrough_initiator_socket<Platform, 32, tlm::tlm_base_protocol_types, 0,
                                                sc_core::SC_ZERO_OR_MORE_BOUND>
      tie_off_;
};

}  // namespace tessera
