#include "common/memory.hpp"

#include <cstring>
#include <fstream>

#include "common/input.hpp"
#include "common/log.hpp"
#include "common/storage.hpp"

namespace tessera {

void MemoryConfig::visit(Params& p) {
  size = p.instance_size();
  p("read_latency", read_latency, "latency of a read");
  p("write_latency", write_latency, "latency of a write");
  if (sparse) {
    p.size("page_size", page_size, "allocation granule (a power of two)");
  } else {
    p("image", image, "raw binary file loaded at elaboration (empty: none)");
    p.size("image_offset", image_offset, "where in the memory the image goes");
  }
}

void MemoryConfig::validate(const Params& p) const {
  if (size == 0) p.fail("size", "a memory needs a size");  // elaboration-only
  if (sparse && (page_size < 64 || (page_size & (page_size - 1))))
    p.fail("page_size", "must be a power of two of at least 64 bytes");
  if (!sparse && size > (1ull << 34))
    p.fail("size", "is too large for a flat memory (use type sparse_memory)");
  if (!image.empty()) {
    std::uint64_t bytes = 0;
    try {
      bytes = check_input_file(image, "the image", size);
    } catch (const ConfigError& e) {
      p.fail("image", e.what());
    }
    if (image_offset > size || bytes > size - image_offset) p.fail("image", "\"" + cut(image) + "\" does not fit in the memory");
  }
}

Memory::Memory(const sc_core::sc_module_name& n, const MemoryConfig& c)
    : Ip(n), mem_target("mem_target"), config_(c), pages_(c.page_size) {
  mem_target.register_b_transport(this, &Memory::b_transport);
  mem_target.register_transport_dbg(this, &Memory::transport_dbg);
  mem_target.register_get_direct_mem_ptr(this, &Memory::get_direct_mem_ptr);
  expose_target("mem_target", mem_target, c.size);
  if (!c.sparse) flat_ = ZeroedBytes(c.size);
  if (!c.image.empty()) {
    std::ifstream in(c.image, std::ios::binary);
    in.read(reinterpret_cast<char*>(flat_.data() + c.image_offset),
            static_cast<std::streamsize>(c.size - c.image_offset));
  }
}

std::uint64_t Memory::allocated_bytes() const {
  return config_.sparse ? pages_.allocated_bytes() : flat_.size();
}

bool Memory::copy(tlm::tlm_generic_payload& trans, bool debug) {
  return copy_payload(trans, debug, config_.size, config_.sparse ? config_.page_size : 0,
                      [this](std::uint64_t a, bool allocate) { return page(a, allocate); });
}

void Memory::b_transport(tlm::tlm_generic_payload& trans, sc_core::sc_time& delay) {
  if (trans.is_write() && config_.read_only) {
    ++errors_;
    log::guest_error(path(), "memory/rom-write", "write of {} bytes at offset {:#x} to read-only memory",
                     trans.get_data_length(), trans.get_address());
    trans.set_response_status(tlm::TLM_COMMAND_ERROR_RESPONSE);
    return;
  }
  if (trans.get_byte_enable_ptr() && trans.get_byte_enable_length() == 0) {
    trans.set_response_status(tlm::TLM_BYTE_ENABLE_ERROR_RESPONSE);
    return;
  }
  if (!trans.is_read() && !trans.is_write()) {
    trans.set_response_status(tlm::TLM_OK_RESPONSE);
    return;
  }
  if (!copy(trans, false)) {
    ++errors_;
    log::guest_error(path(), "memory/range", "access of {} bytes at offset {:#x} runs past the end ({:#x} bytes)",
                     trans.get_data_length(), trans.get_address(), config_.size);
    trans.set_response_status(tlm::TLM_ADDRESS_ERROR_RESPONSE);
    return;
  }
  if (trans.is_read()) {
    ++reads_;
    bytes_read_ += trans.get_data_length();
    delay += config_.read_latency;
  } else {
    ++writes_;
    bytes_written_ += trans.get_data_length();
    delay += config_.write_latency;
  }
  trans.set_response_status(tlm::TLM_OK_RESPONSE);
}

unsigned Memory::transport_dbg(tlm::tlm_generic_payload& trans) {
  return debug_transport(trans, config_.size, [this](tlm::tlm_generic_payload& t) { copy(t, true); });
}

bool Memory::get_direct_mem_ptr(tlm::tlm_generic_payload& trans, tlm::tlm_dmi& dmi) {
  const std::uint64_t addr = trans.get_address();
  dmi.set_read_latency(config_.read_latency);
  dmi.set_write_latency(config_.write_latency);
  if (addr >= config_.size) return false;
  if (!config_.sparse) {
    dmi.set_start_address(0);
    dmi.set_end_address(config_.size - 1);
    dmi.set_dmi_ptr(flat_.data());
    if (config_.read_only) dmi.allow_read();
    else dmi.allow_read_write();
    return true;
  }
  const std::uint64_t base = addr & ~(config_.page_size - 1);
  const std::uint64_t last = std::min(base + config_.page_size, config_.size) - 1;
  dmi.set_start_address(base);
  dmi.set_end_address(last);
  std::uint8_t* p = page(addr, trans.is_write());
  if (!p) return false;  // untouched: reads go through b_transport and see zero
  dmi.set_dmi_ptr(p);
  dmi.allow_read_write();
  return true;
}

void Memory::report_stats(nlohmann::ordered_json& out) const {
  out["reads"] = reads_;
  out["writes"] = writes_;
  out["bytes_read"] = bytes_read_;
  out["bytes_written"] = bytes_written_;
  out["errors"] = errors_;
  out["host_bytes_allocated"] = allocated_bytes();
}

}  // namespace tessera
