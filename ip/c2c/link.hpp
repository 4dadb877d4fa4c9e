// One direction of a SerDes chip-to-chip link, as a pure model of time and
// bytes: messages (a request or response header plus its data) are cut
// into FLITs, each FLIT is framed with a header and a CRC-32, sent over the
// active lanes, checked at the far end, and replayed go-back-N when the
// check fails. Credits (the receiver's FLIT buffers) and the replay buffer
// bound the FLITs in flight. Lane failures and link-down events make the
// link retrain, after which it runs at the widest power of two of lanes
// that still work.
//
// Timing of one FLIT on `w` active lanes:
//   flit_time = flit_bytes * 8 / (w * lane_rate * (1 - encoding_overhead))
// so a long stream of messages of `data` bytes moves
//   lanes * lane_rate * (1 - encoding_overhead) * efficiency   bits/s,
//   efficiency = data / (flits(header + data) * flit_bytes).
// A FLIT sent at t arrives at t + flit_time + latency and its credit and
// acknowledgement are back at the sender a `latency` later. A corrupted
// FLIT is NAKed: the sender learns it at its arrival + latency and starts
// again from it, so each error costs flit_time + 2 * latency of link time.
#pragma once

#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <systemc>
#include <vector>

#include "common/power.hpp"

namespace tessera::c2c {

struct LinkConfig {
  unsigned lanes = 16;
  double lane_gbps = 112.0;               // raw signalling rate per lane
  double encoding_overhead = 0.0;         // fraction taken by line coding and FEC
  unsigned flit_bytes = 256;              // on the wire, header and CRC included
  unsigned flit_header = 8;               // type, sequence number, payload length
  unsigned message_header = 16;           // command, address, length, tag of a request or response
  sc_core::sc_time latency{100, sc_core::SC_NS};   // PHY + FEC + wire, one way
  sc_core::sc_time retrain{1, sc_core::SC_US};     // link training after a fault
  unsigned credits = 256;                 // FLIT buffers at the receiver
  unsigned replay_buffer = 256;           // FLITs kept until acknowledged
  double ber = 0;                         // random bit errors per bit on the wire
  std::uint64_t seed = 1;

  static constexpr unsigned kCrcBytes = 4;
  unsigned payload() const { return flit_bytes - flit_header - kCrcBytes; }
  // FLITs for a message of `data` bytes after its header.
  std::uint64_t flits_for(std::uint64_t data) const { return (message_header + data + payload() - 1) / payload(); }
  // Seconds per FLIT on `width` lanes.
  double flit_seconds(unsigned width) const {
    return flit_bytes * 8.0 / (width * lane_gbps * 1e9 * (1.0 - encoding_overhead));
  }
  std::string check() const;  // "" or what is wrong
};

std::uint32_t crc32(const std::uint8_t* data, std::size_t len);

// The receiving end of the link layer: checks one FLIT as it came off the
// wire (`size` bytes) against what the receiver expects next. Anything but
// `ok` is NAKed and replayed; only an `ok` FLIT's payload is delivered.
// Whatever the bytes, it reads inside them and writes at most payload()
// bytes to `payload`.
struct FlitIn {
  enum class Verdict { ok, size, crc, type, length, sequence } verdict = Verdict::size;
  std::uint16_t seq = 0, length = 0;
  bool last = false;
};
FlitIn receive_flit(const LinkConfig& c, const std::uint8_t* wire, std::size_t size, std::uint16_t expected_seq,
                    std::uint8_t* payload);

struct ChannelStats {
  std::uint64_t messages = 0, flits = 0, payload_bytes = 0;
  std::uint64_t attempts = 0;      // FLIT transmissions, replays included
  std::uint64_t crc_errors = 0;    // FLITs the receiver refused
  std::uint64_t replays = 0;       // go-back-N restarts (CRC errors and FLITs cut by a fault)
  std::uint64_t lost_in_fault = 0; // FLITs on the wire when the link went down
  sc_core::sc_time busy;           // time the wire carried FLITs (replays too)
  sc_core::sc_time replay_time;    // time lost waiting for NAKs
};

// The link's state over time: shared by both directions.
class LinkState {
 public:
  explicit LinkState(unsigned lanes) : lanes_(lanes), ok_((lanes >= 64 ? ~0ull : (1ull << lanes) - 1)) {}
  enum class State { down, training, active };
  // Lane `lane` fails at `at`: the link retrains until at + retrain and
  // comes back on the widest power of two of working lanes (down for good
  // when none works).
  void fail_lane(unsigned lane, sc_core::sc_time at, sc_core::sc_time retrain);
  // The link drops and retrains at the same width.
  void link_down(sc_core::sc_time at, sc_core::sc_time retrain);
  State state(sc_core::sc_time at) const;
  unsigned width(sc_core::sc_time at) const;  // active lanes then (0 while training or down)
  std::uint64_t lanes_ok(sc_core::sc_time at) const;
  unsigned lanes() const { return lanes_; }
  unsigned retrains() const { return static_cast<unsigned>(events_.size()); }
  // The first outage that starts after `from` and before `to`, or nullptr.
  struct Event {
    sc_core::sc_time start, end;  // training [start, end)
    std::uint64_t ok_after;       // working lanes from `start` on
    unsigned width_after;         // 0: down for good
  };
  const Event* outage_in(sc_core::sc_time from, sc_core::sc_time to) const;
  // The training window covering `at`, or nullptr.
  const Event* training_at(sc_core::sc_time at) const;
  const std::vector<Event>& events() const { return events_; }
  static unsigned width_of(std::uint64_t ok);

 private:
  void add(Event e);
  unsigned lanes_;
  std::uint64_t ok_;
  std::vector<Event> events_;  // by start
};

// The link layer in RTL (ip/rtl; "impl": "rtl" on the fabric): carries a
// message's FLIT payloads through the block, corrupting the transmissions
// named (counted from 0 for the call), and returns what its receiver
// delivered; it takes the simulated time of its clock.
class LinkLayerRtl {
 public:
  struct Outcome {
    std::vector<std::vector<std::uint8_t>> delivered;  // payloads, in order
    std::uint64_t transmissions = 0, crc_errors = 0, naks = 0;
  };
  virtual ~LinkLayerRtl() = default;
  virtual Outcome carry(const std::vector<std::vector<std::uint8_t>>& payloads, const std::set<std::uint64_t>& corrupt) = 0;
};

class Channel {
 public:
  Channel(const LinkConfig& c, LinkState& state, std::uint64_t seed);
  // Sends `len` bytes (a message: header and data) that are ready at
  // `ready`; writes what the receiver reassembled to `out` (may equal
  // `msg`) and returns when its last FLIT arrived, or SC_ZERO_TIME with
  // `ok` false when the link is down for good.
  sc_core::sc_time send(const std::uint8_t* msg, std::size_t len, std::uint8_t* out, sc_core::sc_time ready, bool& ok);
  // Corrupt the transmission of FLIT number `n` (counting every FLIT this
  // direction has sent, from 0).
  void inject_error(std::uint64_t n) { inject_.insert(n); }
  const ChannelStats& stats() const { return stats_; }
  sc_core::sc_time free_at() const { return free_; }
  // DVFS: the lanes signal at lane_gbps x the clock's scale.
  void set_clock(const power::Clock* clock) { clock_ = clock; }
  // The trace track of this direction (category link: FLITs and replays).
  void set_track(std::string path) { track_ = std::move(path); }
  // The RTL carries this direction's FLITs from now on (nullptr: the model).
  // send() then waits for it: call it from a thread.
  void set_rtl(LinkLayerRtl* rtl) { rtl_ = rtl; }

 private:
  const LinkConfig& c_;
  LinkState& state_;
  const power::Clock* clock_ = nullptr;
  LinkLayerRtl* rtl_ = nullptr;
  sc_core::sc_time send_rtl(const std::uint8_t* msg, std::size_t len, std::uint8_t* out, sc_core::sc_time ready, bool& ok);
  std::string track_;
  std::mt19937_64 rng_;
  double flit_error_probability_;
  std::set<std::uint64_t> inject_;
  sc_core::sc_time free_ = sc_core::SC_ZERO_TIME;
  std::vector<sc_core::sc_time> window_;  // per FLIT slot: when its credit and acknowledgement are back
  std::uint64_t seq_ = 0;                 // FLITs accepted so far
  std::vector<std::uint8_t> flit_, wire_;
  ChannelStats stats_;
};

}  // namespace tessera::c2c
