// Fuzz target: the link layer's FLIT receive path. The input is a FLIT as
// it came off the wire (and the sequence number the receiver expects, in
// its first two bytes); whatever the bytes, the receiver gives a verdict,
// reads only inside the FLIT and delivers only a FLIT that checks.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "c2c/link.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tessera::c2c;
  static const LinkConfig c;
  if (size < 2) return 0;
  std::uint16_t expected;
  std::memcpy(&expected, data, 2);
  const std::vector<std::uint8_t> wire(data + 2, data + size);  // exactly the input's bytes: ASan sees any overread
  std::vector<std::uint8_t> payload(c.payload(), 0xa5);
  const FlitIn in = receive_flit(c, wire.data(), wire.size(), expected, payload.data());
  if (in.verdict == FlitIn::Verdict::ok) {
    if (wire.size() != c.flit_bytes || in.length > c.payload() || in.seq != expected) std::abort();
    if (std::memcmp(payload.data(), wire.data() + c.flit_header, in.length) != 0) std::abort();
  } else if (payload != std::vector<std::uint8_t>(c.payload(), 0xa5)) {
    std::abort();  // a refused FLIT delivers nothing
  }
  return 0;
}
