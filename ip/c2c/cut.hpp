// The SerDes links as a cut: what crosses a link between two chips' fabrics
// travels as a timed message (a request or a response, with the time its
// last FLIT arrives), delivered into the far fabric's inbox and served
// there at that time. A chip's fabric never calls into another chip.
//
// Within one process a message goes straight into the far fabric's inbox.
// When the chips of a system are spread over processes (MPI ranks, see
// platform/ranks.hpp), a message for a chip on another rank waits in the
// outbox until the end of the current window; windows are never longer
// than the smallest link latency (the lookahead), and every message
// arrives at least a link latency after it was sent, so nothing ever
// arrives in a rank's past.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace tessera::c2c {

class C2c;

struct Message {
  enum Kind : std::uint8_t { request = 0, response = 1, fault = 2 };  // fault: lane `local` (~0: the link) from `at` for `tag` ps
  std::uint8_t kind = request;
  std::uint8_t write = 0;   // request: a write
  std::uint8_t lost = 0;    // response: the link failed on the way back
  std::uint8_t status = 0;  // response: the TLM response status
  std::uint32_t from_chip = 0, to_chip = 0, to_port = 0;
  std::uint32_t dest = 0;   // request: the chip whose memory it is for
  std::uint32_t len = 0;    // request: bytes to read or write
  std::uint64_t tag = 0;    // the requester's tag (its chip's sequence)
  std::uint64_t seq = 0;    // the sender's sequence: the order of equal arrivals
  std::uint64_t at = 0;     // arrival of its last FLIT, ps
  std::uint64_t local = 0;  // request: the local address on `dest`
  std::uint64_t flits = 0, crc_errors = 0;  // what the far side's receiver counts
  std::vector<std::uint8_t> data;  // a write's data, or a read's response data

  // The order in which messages arriving together are served.
  bool operator<(const Message& o) const {
    if (at != o.at) return at < o.at;
    if (from_chip != o.from_chip) return from_chip < o.from_chip;
    return seq < o.seq;
  }
  // A byte image (for MPI) and back; `parse` returns false on a short image.
  void append_to(std::vector<std::uint8_t>& out) const;
  static bool parse(const std::uint8_t*& p, const std::uint8_t* end, Message& m);
};

// The fabrics of this process, and where every other chip lives.
class Cut {
 public:
  // `owner[k]`: the rank chip k lives on; this process is rank `rank`.
  Cut(std::vector<unsigned> owner, unsigned rank) : owner_(std::move(owner)), rank_(rank), fabrics_(owner_.size()) {}
  void add(unsigned chip, C2c* fabric) { fabrics_.at(chip) = fabric; }
  bool local(unsigned chip) const { return chip < owner_.size() && owner_[chip] == rank_; }
  // A message leaves its fabric: into a local fabric's inbox at once, else into the outbox.
  void post(Message&& m);
  // The messages for other ranks since the last call, by rank.
  std::vector<std::vector<Message>> take_outbox();
  // Messages from other ranks, into their fabrics' inboxes (in serving order).
  // Outside sc_start, at a window's end. Throws when one would arrive in the past.
  void deliver(std::vector<Message>& in);

 private:
  std::vector<unsigned> owner_;
  unsigned rank_;
  std::vector<C2c*> fabrics_;
  std::vector<Message> outbox_;
};

}  // namespace tessera::c2c
