// Sparse storage: pages allocated on the first write of a non-zero byte,
// untouched bytes read as zero. Shared by the sparse memory and the HBM model.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <unordered_map>

namespace tessera {

class PageStore {
 public:
  explicit PageStore(std::uint64_t page_size) : page_size_(page_size) {
    while ((1ull << shift_) < page_size) ++shift_;
  }
  std::uint64_t page_size() const { return page_size_; }
  // The page holding `addr`; nullptr for an untouched page unless `allocate`.
  std::uint8_t* page(std::uint64_t addr, bool allocate) {
    const std::uint64_t index = addr >> shift_;
    auto it = pages_.find(index);
    if (it != pages_.end()) return it->second.get();
    if (!allocate) return nullptr;
    auto& p = pages_[index];
    p.reset(new std::uint8_t[page_size_]());
    return p.get();
  }
  void read(std::uint64_t addr, void* data, std::uint64_t len) { copy(addr, static_cast<std::uint8_t*>(data), len, false); }
  void write(std::uint64_t addr, const void* data, std::uint64_t len) {
    copy(addr, const_cast<std::uint8_t*>(static_cast<const std::uint8_t*>(data)), len, true);
  }
  std::uint64_t allocated_bytes() const { return pages_.size() * page_size_; }

 private:
  void copy(std::uint64_t addr, std::uint8_t* data, std::uint64_t len, bool write) {
    for (std::uint64_t done = 0; done < len;) {
      const std::uint64_t a = addr + done, in_page = a & (page_size_ - 1);
      const std::uint64_t chunk = std::min(len - done, page_size_ - in_page);
      std::uint8_t* p = page(a, false);
      // Zeros written to an untouched page leave it untouched (it reads as
      // zero): a timing-only run's stores of unwritten results allocate nothing.
      if (write && !p && std::all_of(data + done, data + done + chunk, [](std::uint8_t b) { return b == 0; })) {
        done += chunk;
        continue;
      }
      if (write && !p) p = page(a, true);
      if (write) std::memcpy(p + in_page, data + done, chunk);
      else if (p) std::memcpy(data + done, p + in_page, chunk);
      else std::memset(data + done, 0, chunk);
      done += chunk;
    }
  }
  std::uint64_t page_size_;
  unsigned shift_ = 0;
  std::unordered_map<std::uint64_t, std::unique_ptr<std::uint8_t[]>> pages_;
};

}  // namespace tessera
