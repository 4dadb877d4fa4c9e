// Memories: RAM, ROM and a sparse memory for huge address spaces, one
// model with three faces.
//
// Storage is a set of pages: a RAM or ROM is one page allocated at
// construction; a sparse memory allocates a page on its first write, reads
// untouched memory as zero and so costs only what is touched (64 GiB of
// address space, untouched, costs a few hundred bytes). DMI is granted for
// the whole RAM/ROM, and per allocated page for a sparse memory (a write
// request allocates the page first). A ROM refuses writes with
// TLM_COMMAND_ERROR_RESPONSE but accepts debug writes (loaders).
// Timing: a fixed latency per access, read and write apart; the same
// latencies are announced with DMI grants.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <tlm_utils/simple_target_socket.h>
#include <unordered_map>
#include <vector>

#include "common/config.hpp"
#include "common/ip.hpp"
#include "common/page_store.hpp"
#include "common/storage.hpp"

namespace tessera {

struct MemoryConfig {
  std::uint64_t size = 0;  // the instance's size
  sc_core::sc_time read_latency = sc_core::sc_time(10, sc_core::SC_NS);
  sc_core::sc_time write_latency = sc_core::sc_time(10, sc_core::SC_NS);
  std::string image;              // raw binary loaded at elaboration (ROM/RAM)
  std::uint64_t image_offset = 0;
  std::uint64_t page_size = 64 * 1024;  // sparse memories only
  bool read_only = false;
  bool sparse = false;

  void visit(Params& p);
  void validate(const Params& p) const;
};

class Memory : public Ip {
 public:
  tlm_utils::simple_target_socket<Memory> mem_target;

  Memory(const sc_core::sc_module_name& n, const MemoryConfig& c);

  // Host bytes held for contents.
  std::uint64_t allocated_bytes() const;
  std::uint64_t size() const { return config_.size; }
  void report_stats(nlohmann::ordered_json& out) const override;

 private:
  void b_transport(tlm::tlm_generic_payload& trans, sc_core::sc_time& delay);
  unsigned transport_dbg(tlm::tlm_generic_payload& trans);
  bool get_direct_mem_ptr(tlm::tlm_generic_payload& trans, tlm::tlm_dmi& dmi);
  // The page holding `addr`; nullptr for an untouched sparse page unless
  // `allocate`.
  std::uint8_t* page(std::uint64_t addr, bool allocate) { return config_.sparse ? pages_.page(addr, allocate) : flat_.data(); }
  // Copies between the transaction and storage; false if out of range.
  bool copy(tlm::tlm_generic_payload& trans, bool debug);

  MemoryConfig config_;
  ZeroedBytes flat_;  // a flat memory's bytes
  PageStore pages_;
  std::uint64_t bytes_read_ = 0, bytes_written_ = 0, reads_ = 0, writes_ = 0, errors_ = 0;
};

// The three registered faces; they differ only in defaults and in which
// parameters they take.
class Ram : public Memory {
 public:
  struct Config : MemoryConfig {};
  Ram(const sc_core::sc_module_name& n, const Config& c) : Memory(n, c) {}
};
class Rom : public Memory {
 public:
  struct Config : MemoryConfig {
    Config() { read_only = true; }
  };
  Rom(const sc_core::sc_module_name& n, const Config& c) : Memory(n, c) {}
};
class SparseMemory : public Memory {
 public:
  struct Config : MemoryConfig {
    Config() { sparse = true; }
  };
  SparseMemory(const sc_core::sc_module_name& n, const Config& c) : Memory(n, c) {}
};

}  // namespace tessera
