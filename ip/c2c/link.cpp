#include "c2c/link.hpp"

#include <fmt/format.h>

#include "common/trace.hpp"

#include <boost/crc.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace tessera::c2c {

namespace {
const trace::Category kTrace = trace::category("link", "FLITs on the chip-to-chip links");
}  // namespace

std::string LinkConfig::check() const {
  if (lanes < 1 || lanes > 64) return "lanes must be between 1 and 64";
  if (!(lane_gbps > 0) || lane_gbps > 1000) return "lane_rate must be above 0 and at most 1000 Gb/s";
  if (!(encoding_overhead >= 0) || encoding_overhead > 0.5) return "encoding_overhead must be between 0 and 0.5";
  if (flit_bytes < flit_header + kCrcBytes + 16 || flit_bytes > 4096)
    return "flit_bytes must leave at least 16 payload bytes after the header and CRC, and be at most 4096";
  if (flit_header < 6) return "flit_header needs at least 6 bytes (type, flags, sequence, length)";
  if (message_header < 8 || message_header > 256) return "message_header must be between 8 and 256 bytes";
  if (credits < 1 || credits > 65536) return "credits must be between 1 and 65536";
  if (replay_buffer < 1 || replay_buffer > 65536) return "replay_buffer must be between 1 and 65536";
  if (!(ber >= 0) || ber > 1e-3) return "ber must be between 0 and 1e-3";
  return "";
}

std::uint32_t crc32(const std::uint8_t* data, std::size_t len) {
  boost::crc_32_type c;
  c.process_bytes(data, len);
  return c.checksum();
}

// ---- link state -------------------------------------------------------------

unsigned LinkState::width_of(std::uint64_t ok) {
  unsigned n = static_cast<unsigned>(__builtin_popcountll(ok)), w = 1;
  if (n == 0) return 0;
  while (w * 2 <= n) w *= 2;
  return w;
}

void LinkState::add(Event e) {
  events_.push_back(e);
  std::stable_sort(events_.begin(), events_.end(), [](const Event& a, const Event& b) { return a.start < b.start; });
  // ok_after holds, until recomputed, the lanes this event takes away.
  std::uint64_t ok = ok_;
  for (Event& x : events_) {
    ok &= x.ok_after;
    x.ok_after = ok;
    x.width_after = width_of(ok);
  }
}

void LinkState::fail_lane(unsigned lane, sc_core::sc_time at, sc_core::sc_time retrain) {
  add({at, at + retrain, lane < 64 ? ~(1ull << lane) : ~0ull, 0});
}

void LinkState::link_down(sc_core::sc_time at, sc_core::sc_time retrain) { add({at, at + retrain, ~0ull, 0}); }

const LinkState::Event* LinkState::training_at(sc_core::sc_time at) const {
  const Event* hit = nullptr;
  for (const Event& e : events_) {
    if (e.start > at) break;
    if (at < e.end && (!hit || e.end > hit->end)) hit = &e;
  }
  return hit;
}

const LinkState::Event* LinkState::outage_in(sc_core::sc_time from, sc_core::sc_time to) const {
  for (const Event& e : events_)
    if (e.start > from && e.start < to) return &e;
  return nullptr;
}

std::uint64_t LinkState::lanes_ok(sc_core::sc_time at) const {
  std::uint64_t ok = ok_;
  for (const Event& e : events_) {
    if (e.start > at) break;
    ok = e.ok_after;
  }
  return ok;
}

unsigned LinkState::width(sc_core::sc_time at) const {
  if (training_at(at)) return 0;
  return width_of(lanes_ok(at));
}

LinkState::State LinkState::state(sc_core::sc_time at) const {
  if (width_of(lanes_ok(at)) == 0) return State::down;
  return training_at(at) ? State::training : State::active;
}

// ---- one direction ----------------------------------------------------------

Channel::Channel(const LinkConfig& c, LinkState& state, std::uint64_t seed)
    : c_(c), state_(state), rng_(seed),
      flit_error_probability_(c.ber > 0 ? -std::expm1(c.flit_bytes * 8.0 * std::log1p(-c.ber)) : 0.0),
      window_(std::min(c.credits, c.replay_buffer), sc_core::SC_ZERO_TIME), flit_(c.flit_bytes), wire_(c.flit_bytes) {}

FlitIn receive_flit(const LinkConfig& c, const std::uint8_t* wire, std::size_t size, std::uint16_t expected_seq,
                    std::uint8_t* payload) {
  FlitIn in;
  if (size != c.flit_bytes || c.flit_bytes < c.flit_header + LinkConfig::kCrcBytes || c.flit_header < 6) return in;
  const std::size_t crc_at = c.flit_bytes - LinkConfig::kCrcBytes;
  std::uint32_t got;
  std::memcpy(&got, wire + crc_at, 4);
  std::memcpy(&in.seq, wire + 2, 2);
  std::memcpy(&in.length, wire + 4, 2);
  in.last = wire[1] & 1;
  if (crc32(wire, crc_at) != got) in.verdict = FlitIn::Verdict::crc;
  else if (wire[0] != 1 || (wire[1] & ~1u)) in.verdict = FlitIn::Verdict::type;
  else if (in.length > c.payload()) in.verdict = FlitIn::Verdict::length;
  else if (in.seq != expected_seq) in.verdict = FlitIn::Verdict::sequence;
  else in.verdict = FlitIn::Verdict::ok;
  if (in.verdict == FlitIn::Verdict::ok && payload && in.length) std::memcpy(payload, wire + c.flit_header, in.length);
  return in;
}

sc_core::sc_time Channel::send(const std::uint8_t* msg, std::size_t len, std::uint8_t* out, sc_core::sc_time ready,
                               bool& ok) {
  if (rtl_) return send_rtl(msg, len, out, ready, ok);
  ok = true;
  const unsigned payload = c_.payload(), crc_at = c_.flit_bytes - LinkConfig::kCrcBytes;
  const std::size_t flits = std::max<std::size_t>(1, (len + payload - 1) / payload);
  sc_core::sc_time t = std::max(ready, free_), arrived = t;
  ++stats_.messages;
  for (std::size_t i = 0; i < flits; ++i) {
    // Frame: type, flags, sequence number, payload length, payload, CRC-32.
    const std::size_t off = i * payload, n = std::min<std::size_t>(payload, len - std::min(len, off));
    std::fill(flit_.begin(), flit_.end(), 0);
    flit_[0] = 1;  // data FLIT
    flit_[1] = i + 1 == flits ? 1 : 0;  // last FLIT of its message
    const std::uint16_t seq = static_cast<std::uint16_t>(seq_), plen = static_cast<std::uint16_t>(n);
    std::memcpy(&flit_[2], &seq, 2);
    std::memcpy(&flit_[4], &plen, 2);
    if (n) std::memcpy(&flit_[c_.flit_header], msg + off, n);
    const std::uint32_t crc = crc32(flit_.data(), crc_at);
    std::memcpy(&flit_[crc_at], &crc, 4);
    for (;;) {
      sc_core::sc_time& slot = window_[seq_ % window_.size()];
      t = std::max(t, slot);  // a credit and a free replay-buffer entry
      while (const LinkState::Event* e = state_.training_at(t)) t = e->end;
      const unsigned w = state_.width(t);
      if (w == 0) {  // no lane left
        ok = false;
        free_ = t;
        return sc_core::SC_ZERO_TIME;
      }
      const double seconds = c_.flit_seconds(w);
      const sc_core::sc_time end = t + sc_core::sc_time(clock_ && clock_->scale() != 1.0 ? seconds / clock_->scale() : seconds, sc_core::SC_SEC);
      const sc_core::sc_time arrival = end + c_.latency;
      if (const LinkState::Event* e = state_.outage_in(t, arrival)) {
        // The fault comes before this FLIT arrives: it, and every FLIT the
        // sender would put on the wire until the fault, are lost and sent
        // again (go-back-N) once the link has trained.
        const sc_core::sc_time ft = end - t;
        stats_.lost_in_fault += static_cast<std::uint64_t>(std::ceil((e->start - t) / ft));
        ++stats_.replays;
        if (trace::on(kTrace))
          trace::instant(kTrace, track_, fmt::format("replay from {}", seq), e->end, {{"seq", seq}, {"reason", "link fault"}});
        stats_.busy += e->start - t;
        t = e->end;
        continue;
      }
      const std::uint64_t attempt = stats_.attempts++;
      stats_.busy += end - t;
      wire_ = flit_;
      const bool corrupt = inject_.erase(attempt) > 0 ||
                           (flit_error_probability_ > 0 &&
                            std::uniform_real_distribution<double>(0.0, 1.0)(rng_) < flit_error_probability_);
      if (corrupt) {
        const std::uint64_t bit = rng_() % (c_.flit_bytes * 8ull);
        wire_[bit / 8] ^= static_cast<std::uint8_t>(1u << (bit % 8));
      }
      // The receiver checks the FLIT; a bad one is NAKed and the sender
      // goes back to it once the NAK arrives.
      if (trace::on(kTrace))
        trace::slice(kTrace, track_, fmt::format("flit {}", seq), t, end,
                     {{"seq", seq}, {"bytes", n}, {"lanes", w}, {"attempt", attempt}, {"corrupted", corrupt}});
      const FlitIn in = receive_flit(c_, wire_.data(), wire_.size(), seq, n ? out + off : nullptr);
      if (in.verdict != FlitIn::Verdict::ok) {
        ++stats_.crc_errors;
        ++stats_.replays;
        const sc_core::sc_time nak = arrival + c_.latency;
        if (trace::on(kTrace))
          trace::instant(kTrace, track_, fmt::format("replay from {}", seq), nak, {{"seq", seq}, {"reason", "crc"}});
        stats_.replay_time += nak - end;
        t = nak;
        continue;
      }
      slot = arrival + c_.latency;
      ++seq_;
      ++stats_.flits;
      t = end;
      arrived = arrival;
      break;
    }
  }
  stats_.payload_bytes += len;
  free_ = t;
  return arrived;
}

sc_core::sc_time Channel::send_rtl(const std::uint8_t* msg, std::size_t len, std::uint8_t* out, sc_core::sc_time ready,
                                   bool& ok) {
  // The RTL runs in simulated time: catch up with the sender's local time first.
  if (ready > sc_core::sc_time_stamp()) sc_core::wait(ready - sc_core::sc_time_stamp());
  const sc_core::sc_time start = sc_core::sc_time_stamp();
  const unsigned payload = c_.payload();
  const std::size_t flits = std::max<std::size_t>(1, (len + payload - 1) / payload);
  std::vector<std::vector<std::uint8_t>> payloads(flits);
  for (std::size_t i = 0; i < flits; ++i) {
    const std::size_t off = i * payload, n = std::min<std::size_t>(payload, len - std::min(len, off));
    payloads[i].assign(msg + off, msg + off + n);
  }
  // Injected errors that fall on this message's transmissions (counting from
  // this direction's first), relative to the message.
  std::set<std::uint64_t> corrupt;
  for (auto it = inject_.begin(); it != inject_.end() && *it < stats_.attempts + flits;) {
    if (*it >= stats_.attempts) corrupt.insert(*it - stats_.attempts);
    it = inject_.erase(it);
  }
  const LinkLayerRtl::Outcome o = rtl_->carry(payloads, corrupt);
  ++stats_.messages;
  stats_.flits += flits;
  stats_.attempts += o.transmissions;
  stats_.crc_errors += o.crc_errors;
  stats_.replays += o.naks;
  stats_.payload_bytes += len;
  stats_.busy += sc_core::sc_time_stamp() - start;
  ok = o.delivered.size() == flits;
  if (!ok) return sc_core::SC_ZERO_TIME;
  std::size_t at = 0;
  for (const auto& p : o.delivered) {
    if (!p.empty()) std::memcpy(out + at, p.data(), std::min(p.size(), len - std::min(len, at)));
    at += p.size();
  }
  free_ = sc_core::sc_time_stamp();
  return free_ + c_.latency;
}

}  // namespace tessera::c2c
