// Moving a TLM payload's data in and out of a memory's storage, shared by
// every memory-like model (RAM/ROM/sparse memory, the tile scratchpad).
// Storage is addressed through `page(addr, allocate)`, which returns the
// page holding `addr` (nullptr: never written, reads as zero); flat storage
// is one page (`page_size` 0).
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <new>
#include <tlm>
#include <utility>

namespace tessera {

// Zero-filled bytes that cost nothing until touched: fresh anonymous pages,
// zero by definition, which the OS maps on first access. A flat memory or
// a scratchpad that a run never touches (most of a 64-chip system's, in
// the main job) takes neither the time to clear it nor resident memory.
class ZeroedBytes {
 public:
  explicit ZeroedBytes(std::size_t size = 0) : size_(size) {
    if (size_ == 0) return;
    void* p = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    data_ = static_cast<std::uint8_t*>(p);
  }
  ~ZeroedBytes() {
    if (data_) munmap(data_, size_);
  }
  ZeroedBytes(ZeroedBytes&& o) noexcept : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  ZeroedBytes& operator=(ZeroedBytes&& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    return *this;
  }
  std::uint8_t* data() const { return data_; }
  std::size_t size() const { return size_; }

 private:
  std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
};

// Copies between `trans` and storage of `size` bytes: contiguous, with
// byte enables, or streaming (debug accesses ignore both). False, and
// nothing moved, if the access runs past the end.
template <class PageFn>
bool copy_payload(tlm::tlm_generic_payload& trans, bool debug, std::uint64_t size, std::uint64_t page_size,
                  PageFn&& page) {
  const std::uint64_t addr = trans.get_address();
  const unsigned len = trans.get_data_length();
  const unsigned sw = debug ? len : std::max(1u, trans.get_streaming_width());
  const std::uint64_t span = std::min<std::uint64_t>(len, sw);
  if (addr >= size || span > size - addr) return false;
  const bool is_read = trans.is_read();
  unsigned char* data = trans.get_data_ptr();
  const unsigned char* be = debug ? nullptr : trans.get_byte_enable_ptr();
  const unsigned be_len = trans.get_byte_enable_length();
  const std::uint64_t page_mask = page_size ? page_size - 1 : ~0ull;

  if (!be && sw >= len) {  // the common case: one contiguous block
    std::uint64_t done = 0;
    while (done < len) {
      const std::uint64_t a = addr + done;
      const std::uint64_t in_page = a & page_mask;
      const std::uint64_t chunk = std::min<std::uint64_t>(len - done, page_size ? page_size - in_page : len);
      std::uint8_t* p = page(a, false);
      if (is_read) {
        if (p) std::memcpy(data + done, p + in_page, chunk);
        else std::memset(data + done, 0, chunk);
      } else if (p || std::any_of(data + done, data + done + chunk, [](unsigned char b) { return b != 0; })) {
        // (zeros written to an untouched page leave it untouched: it reads as zero)
        if (!p) p = page(a, true);
        std::memcpy(p + in_page, data + done, chunk);
      }
      done += chunk;
    }
    return true;
  }
  for (unsigned i = 0; i < len; ++i) {  // byte enables or streaming
    if (be && be[i % be_len] != TLM_BYTE_ENABLED) continue;
    const std::uint64_t a = addr + (i % sw);
    std::uint8_t* p = page(a, !is_read);
    if (is_read) data[i] = p ? p[a & page_mask] : 0;
    else p[a & page_mask] = data[i];
  }
  return true;
}

// transport_dbg on storage of `size` bytes: cut at the end, so the caller
// learns how much was done; `copy(trans)` moves the (cut) data.
template <class CopyFn>
unsigned debug_transport(tlm::tlm_generic_payload& trans, std::uint64_t size, CopyFn&& copy) {
  const std::uint64_t addr = trans.get_address();
  if (addr >= size || !(trans.is_read() || trans.is_write())) {
    trans.set_response_status(tlm::TLM_ADDRESS_ERROR_RESPONSE);
    return 0;
  }
  const unsigned len = trans.get_data_length();
  const unsigned fit = static_cast<unsigned>(std::min<std::uint64_t>(len, size - addr));
  trans.set_data_length(fit);
  copy(trans);
  trans.set_data_length(len);
  trans.set_response_status(tlm::TLM_OK_RESPONSE);
  return fit;
}

}  // namespace tessera
