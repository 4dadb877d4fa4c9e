#include "c2c/comm.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>

#include "common/log.hpp"
#include "common/payload.hpp"
#include "engines/num/formats.hpp"
#include "c2c/c2c.hpp"

namespace tessera::c2c {

const char* name(CommOp op) {
  switch (op) {
    case CommOp::all_reduce: return "all-reduce";
    case CommOp::reduce_scatter: return "reduce-scatter";
    case CommOp::all_gather: return "all-gather";
    case CommOp::broadcast: return "broadcast";
    case CommOp::all_to_all: return "all-to-all";
    case CommOp::put: return "put";
    case CommOp::wait: return "wait";
    default: return "none";
  }
}

unsigned element_bytes(CommType t) { return t == CommType::fp32 ? 4 : t == CommType::bf16 ? 2 : 1; }

std::string CommConfig::check() const {
  if (staging < (256u << 10) || staging > (4ull << 30)) return "comm_staging must be between 256KiB and 4GiB";
  if (chunk < 64 || chunk > (16u << 20)) return "comm_chunk must be between 64 bytes and 16MiB";
  if (outstanding < 1 || outstanding > 64) return "comm_outstanding must be between 1 and 64";
  if (!(reduce_gbps > 0) || !(staging_gbps > 0)) return "comm_reduce_gbps and comm_staging_gbps must be above zero";
  if (queue < 1 || queue > 64) return "comm_queue must be between 1 and 64";
  return "";
}

namespace {

// dst[i] = round(float(dst[i]) + float(src[i])) in the element type.
void combine(CommType t, std::uint8_t* dst, const std::uint8_t* src, std::uint64_t bytes) {
  if (t == CommType::fp32) {
    for (std::uint64_t i = 0; i + 4 <= bytes; i += 4) {
      float a, b;
      std::memcpy(&a, dst + i, 4);
      std::memcpy(&b, src + i, 4);
      a = a + b;
      std::memcpy(dst + i, &a, 4);
    }
    return;
  }
  const num::Format f = t == CommType::bf16 ? num::Format::BF16 : num::Format::E4M3;
  num::Convert cv;
  cv.saturate = t == CommType::e4m3;
  const unsigned es = element_bytes(t);
  for (std::uint64_t i = 0; i + es <= bytes; i += es) {
    std::uint32_t a = 0, b = 0;
    std::memcpy(&a, dst + i, es);
    std::memcpy(&b, src + i, es);
    const float sum = static_cast<float>(num::decode(f, a)) + static_cast<float>(num::decode(f, b));
    const std::uint32_t r = num::encode(f, sum, cv);
    std::memcpy(dst + i, &r, es);
  }
}

}  // namespace

CommEngine::CommEngine(const sc_core::sc_module_name& n, C2c& fabric, const CommConfig& c)
    : sc_core::sc_module(n), fabric_(fabric), config_(c) {
  SC_HAS_PROCESS(CommEngine);
  SC_THREAD(thread);
  SC_THREAD(teller);
  SC_METHOD(apply_flags);
  sensitive << flag_due_;
  dont_initialize();
  for (unsigned w = 0; w < c.outstanding; ++w) sc_core::sc_spawn([this] { worker(); }, sc_core::sc_gen_unique_name("worker"));
}

bool CommEngine::submit(const Collective& c) {
  if (queue_.size() >= config_.queue) {
    error_ = kCommQueueFull;
    error_id_ = c.id;
    return false;
  }
  queue_.push_back(c);
  kick_.notify(sc_core::SC_ZERO_TIME);
  return true;
}

void CommEngine::thread() {
  for (;;) {
    while (queue_.empty()) sc_core::wait(kick_);
    const Collective c = queue_.front();
    queue_.pop_front();
    running_ = true;
    current_ = c;
    cancel_ = false;
    const sc_core::sc_time start = sc_core::sc_time_stamp();
    // A collective over a group with a chip that gave up fails without
    // running, and one that runs when the news comes fails at its next
    // wait; so does one queued when a reset came.
    const bool doomed = doomed_ > 0;
    if (doomed) --doomed_;
    std::uint64_t gave_up = revoked_ & group_mask(c.first, c.chips);
    unsigned e = doomed || gave_up ? unsigned(kCommAborted) : run(c);
    if (cancel_) e = kCommAborted, gave_up = revoked_ & group_mask(c.first, c.chips);
    cancel_ = false;
    stats_.busy += sc_core::sc_time_stamp() - start;
    if (e == kCommAborted) error_addr_ = gave_up ? static_cast<unsigned>(__builtin_ctzll(gave_up)) : fabric_.chip_;
    if (e) {
      error_ = e;
      error_id_ = c.id;
      log::guest_error(fabric_.path(), "comm/error", "{} (id {}) failed with code {}{}", c2c::name(c.op), c.id, e,
                       e == kCommAborted ? fmt::format(" (chip {} gave up its collectives)", error_addr_) : "");
    } else {
      ++completed_;
      ++stats_.collectives;
    }
    if (c.signal) {  // a 32-bit 1, as a tile semaphore takes it; also after a failure (CE_ERROR says which)
      std::uint32_t one = 1;
      const C2c::Config& fc = fabric_.config();
      const std::uint64_t window = std::uint64_t(kMaxChips) << fc.chip_shift;
      const bool global = c.signal >= fc.global_base && c.signal - fc.global_base < window;
      const unsigned chip = global ? static_cast<unsigned>((c.signal - fc.global_base) >> fc.chip_shift) : fabric_.chip_;
      const std::uint64_t local = global ? (c.signal - fc.global_base) & ((1ull << fc.chip_shift) - 1) : c.signal;
      if (!mem(true, chip, local, &one, 4)) {
        error_ = kCommBus;
        error_id_ = c.id;
      }
    }
    running_ = false;
    if (resetting_ && doomed_ == 0) clear(reset_round_);  // a reset waiting for what ran and waited then
    if (on_done_) on_done_(c, e == 0);
    done_event_.notify(sc_core::SC_ZERO_TIME);
  }
}

bool CommEngine::mem(bool write, unsigned chip, std::uint64_t addr, void* data, std::uint64_t len) {
  tlm::tlm_generic_payload t;
  set_access(t, write ? tlm::TLM_WRITE_COMMAND : tlm::TLM_READ_COMMAND, addr, data, static_cast<unsigned>(len));
  sc_core::sc_time d = sc_core::SC_ZERO_TIME;
  fabric_.route(t, chip, addr, d);
  sc_core::wait(d);
  if (!t.is_response_ok()) {
    error_addr_ = fabric_.config().global_address(chip, addr);
    return false;
  }
  return true;
}

void CommEngine::worker() {
  for (;;) {
    // Nothing to take: no job, its chunks all taken, or it failed (its
    // other chunks are abandoned; parallel() returns once the running end).
    while (!job_ || !job_->ok || job_->next >= job_->n) sc_core::wait(work_);
    Job& j = *job_;
    ++j.running;
    while (j.ok && j.next < j.n) {
      const std::uint64_t i = j.next++, off = i * config_.chunk;
      if (!(*j.fn)(off, std::min<std::uint64_t>(config_.chunk, j.bytes - off))) j.ok = false;
    }
    if (--j.running == 0) j.done.notify(sc_core::SC_ZERO_TIME);
  }
}

std::uint64_t CommEngine::group_mask(unsigned first, unsigned chips) const {
  const unsigned f = chips ? first : 0, n = chips ? chips : fabric_.chips_;
  std::uint64_t m = 0;
  for (unsigned c = f; c < std::min<std::uint64_t>(std::uint64_t{f} + n, fabric_.chips_); ++c) m |= 1ull << c;
  return m;
}

void CommEngine::cancel() {
  cancel_ = true;
  cancel_event_.notify(sc_core::SC_ZERO_TIME);
  if (job_) {  // its chunks in flight finish; no more start
    job_->ok = false;
    job_->done.notify(sc_core::SC_ZERO_TIME);
  }
}

void CommEngine::give_up(unsigned first, unsigned chips) {
  const unsigned me = fabric_.chip_;
  if (revoked_ >> me & 1) return;
  revoked_ |= 1ull << me;
  if (running_) cancel();
  to_tell_ |= group_mask(first, chips) & ~(1ull << me);
  tell_kick_.notify(sc_core::SC_ZERO_TIME);
}

void CommEngine::noticed(unsigned chip, std::uint64_t word) {
  if (word != std::uint64_t{round_} + 1 || revoked_ >> chip & 1) return;  // (from another round, or known)
  revoked_ |= 1ull << chip;
  if (running_ && (group_mask(current_.first, current_.chips) >> chip & 1)) cancel();
}

void CommEngine::teller() {
  for (;;) {
    while (!to_tell_) sc_core::wait(tell_kick_);
    // Every chip at once (the notices travel side by side), a write of
    // this engine's round + 1 to its ABORTED[this chip]; a chip out of
    // reach is not told.
    sc_core::sc_time last = sc_core::SC_ZERO_TIME;
    for (; to_tell_; to_tell_ &= to_tell_ - 1) {
      const unsigned chip = static_cast<unsigned>(__builtin_ctzll(to_tell_));
      std::uint64_t word = std::uint64_t{round_} + 1;
      tlm::tlm_generic_payload t;
      const std::uint64_t addr = kFabricLocal + kFlagBase + 8 * (kAborted + fabric_.chip_);
      set_access(t, tlm::TLM_WRITE_COMMAND, addr, &word, 8);
      sc_core::sc_time d = sc_core::SC_ZERO_TIME;
      fabric_.route(t, chip, addr, d);
      ++stats_.notifications;
      last = std::max(last, d);
    }
    sc_core::wait(last);
  }
}

bool CommEngine::reset(std::uint32_t round) {
  if (running_ || !queue_.empty()) {
    // What runs fails at its next wait, what waits fails in turn, and
    // then the engine resets (before anything posted since).
    if (running_) cancel();
    doomed_ = queue_.size();
    resetting_ = true, reset_round_ = round;
    return false;
  }
  clear(round);
  return true;
}

void CommEngine::clear(std::uint32_t round) {
  resetting_ = false;
  revoked_ = to_tell_ = 0;
  round_ = round;
  std::fill(flags_.begin(), flags_.end(), 0);
  std::fill(seen_flag_.begin(), seen_flag_.end(), 0);
  std::fill(seen_pub_.begin(), seen_pub_.end(), 0);
  pending_flags_.clear();
  epoch_ = 0;
}

bool CommEngine::parallel(std::uint64_t bytes, const std::function<bool(std::uint64_t, std::uint64_t)>& fn) {
  if (bytes == 0) return true;
  Job j;
  j.bytes = bytes;
  j.n = (bytes + config_.chunk - 1) / config_.chunk;
  j.fn = &fn;
  job_ = &j;
  work_.notify(sc_core::SC_ZERO_TIME);
  do sc_core::wait(j.done);
  while (j.running > 0 || (j.ok && j.next < j.n));
  job_ = nullptr;
  return j.ok;
}

bool CommEngine::move(std::uint64_t bytes, Place a, Place b, Place out, Place out2, CommType t) {
  const auto& cfg = config_;
  return parallel(bytes, [&, this](std::uint64_t off, std::uint64_t len) {
    std::vector<std::uint8_t> x(len);
    if (!mem(false, static_cast<unsigned>(a.chip), a.addr + off, x.data(), len)) return false;
    if (a.chip != static_cast<int>(fabric_.chip_)) stats_.bytes_read_remote += len;
    if (b.chip >= 0) {
      std::vector<std::uint8_t> y(len);
      if (!mem(false, static_cast<unsigned>(b.chip), b.addr + off, y.data(), len)) return false;
      combine(t, x.data(), y.data(), len);
      stats_.bytes_reduced += len;
      const sc_core::sc_time now = sc_core::sc_time_stamp();
      alu_free_ = std::max(alu_free_, now) + sc_core::sc_time(double(len) / (cfg.reduce_gbps * 1e9), sc_core::SC_SEC);
      sc_core::wait(alu_free_ - now);
    }
    for (const Place& o : {out, out2}) {
      if (o.chip < 0) continue;
      if (!mem(true, static_cast<unsigned>(o.chip), o.addr + off, x.data(), len)) return false;
      if (o.chip != static_cast<int>(fabric_.chip_)) stats_.bytes_sent += len;
    }
    return true;
  });
}

// ---- flags ---------------------------------------------------------------------

void CommEngine::notify(unsigned peer, unsigned index) {
  if (cancel_) return;  // (a collective being failed tells nobody more)
  std::uint64_t one = 1;
  ++stats_.notifications;
  mem(true, peer, kFabricLocal + kFlagBase + 8 * index, &one, 8);
}

bool CommEngine::wait_flag(unsigned peer) {
  ++seen_flag_[peer];
  while (flags_[peer] < seen_flag_[peer]) {
    if (cancel_) return false;
    sc_core::wait(flag_event_ | cancel_event_);
  }
  return true;
}

bool CommEngine::poll(unsigned peer) {
  ++seen_pub_[peer];
  for (;;) {
    std::uint64_t v = 0;
    if (!mem(false, peer, kFabricLocal + kFlagBase + 8 * (kPublished + fabric_.chip_), &v, 8)) return false;
    ++stats_.polls;
    if (v >= seen_pub_[peer]) return true;
    if (cancel_) return false;
    sc_core::wait(config_.poll_interval, cancel_event_);
  }
}

void CommEngine::apply_flags() {
  const sc_core::sc_time now = sc_core::sc_time_stamp();
  bool any = false;
  while (!pending_flags_.empty() && pending_flags_.begin()->first <= now) {
    const auto [index, value] = pending_flags_.begin()->second;
    flags_[index] += value;
    if (index >= kAborted) noticed(index - kAborted, value);
    pending_flags_.erase(pending_flags_.begin());
    any = true;
  }
  if (any) flag_event_.notify(sc_core::SC_ZERO_TIME);
}

void CommEngine::access(tlm::tlm_generic_payload& trans, std::uint64_t offset, sc_core::sc_time& delay, bool debug) {
  const std::uint64_t len = trans.get_data_length();
  unsigned char* data = trans.get_data_ptr();
  if (offset + len <= config_.staging && offset + len >= offset) {
    if (trans.is_write()) staging_.write(offset, data, len);
    else staging_.read(offset, data, len);
    if (!debug) {
      const sc_core::sc_time now = sc_core::sc_time_stamp() + delay;
      staging_free_ = std::max(staging_free_, now) +
                      sc_core::sc_time(double(len) / (config_.staging_gbps * 1e9), sc_core::SC_SEC);
      delay = staging_free_ + config_.staging_latency - sc_core::sc_time_stamp();
    }
    trans.set_response_status(tlm::TLM_OK_RESPONSE);
    return;
  }
  const std::uint64_t flag = offset - kFlagBase;
  if (offset >= kFlagBase && flag % 8 == 0 && flag / 8 < flags_.size() && (len == 8 || len == 4)) {
    const unsigned index = static_cast<unsigned>(flag / 8);
    if (trans.is_read()) {
      std::memcpy(data, &flags_[index], len);
    } else {
      std::uint64_t v = 0;
      std::memcpy(&v, data, len);
      if (debug) {
        flags_[index] += v;
        if (index >= kAborted) noticed(index - kAborted, v);
        flag_event_.notify(sc_core::SC_ZERO_TIME);
      } else {  // seen by the engine after the notification latency
        const sc_core::sc_time when = sc_core::sc_time_stamp() + delay + config_.notify_latency;
        pending_flags_.emplace(when, std::make_pair(index, v));
        flag_due_.notify(when - sc_core::sc_time_stamp());
      }
    }
    trans.set_response_status(tlm::TLM_OK_RESPONSE);
    return;
  }
  trans.set_response_status(tlm::TLM_ADDRESS_ERROR_RESPONSE);
}

// ---- collectives -----------------------------------------------------------------

std::uint64_t CommEngine::in_slot(unsigned slot) const {
  return kFabricLocal + (epoch_ % 2) * (config_.staging / 4) + slot * slot_bytes_;
}

std::uint64_t CommEngine::out_slot(unsigned slot) const { return in_slot(slot) + config_.staging / 2; }

unsigned CommEngine::run(const Collective& c) {
  // The group's chips first .. first + N - 1, this one its rank `me`; every
  // chip below is a rank (put's and wait's peer, broadcast's root too).
  const unsigned first = c.chips ? c.first : 0, N = c.chips ? c.chips : fabric_.chips_;
  if (std::uint64_t{first} + N > fabric_.chips_ || fabric_.chip_ < first || fabric_.chip_ - first >= N) return kCommBadGroup;
  const unsigned me = fabric_.chip_ - first;
  const unsigned es = element_bytes(c.type);
  if (c.type > CommType::e4m3) return kCommBadType;
  const bool push = c.mode == CommMode::push;
  auto at = [first](unsigned rank, std::uint64_t addr) { return Place{static_cast<int>(first + rank), addr}; };
  const Place none;
  auto tell = [&](unsigned rank) { notify(first + rank, first + me); };  // rank's FLAG[this chip] += 1
  auto heard = [&](unsigned rank) { return wait_flag(first + rank); };  // rank's next notification (false: aborted)
  auto published = [&](unsigned rank) { return poll(first + rank); };  // rank's next publication for this chip
  auto publish = [&](unsigned rank) { ++flags_[kPublished + first + rank]; };

  // produce: data (a, + b) for `peer` at staging slot `slot`, and to `extra`;
  // obtain: the data `peer` produced for this chip at `slot`, into in_slot(slot).
  auto produce = [&](unsigned peer, unsigned slot, std::uint64_t bytes, Place a, Place b, Place extra) {
    const Place out = push ? at(peer, in_slot(slot)) : at(me, out_slot(slot));
    if (!move(bytes, a, b, out, extra, c.type)) return false;
    if (push) tell(peer);
    else publish(peer);
    return true;
  };
  auto obtain = [&](unsigned peer, unsigned slot, std::uint64_t bytes) {
    if (push) return heard(peer);
    return published(peer) && move(bytes, at(peer, out_slot(slot)), none, at(me, in_slot(slot)), none, c.type);
  };
  auto use_staging = [&](std::uint64_t slot_bytes, unsigned slots) {
    ++epoch_;
    slot_bytes_ = (slot_bytes + 63) / 64 * 64;
    slots_ = slots;
    return slot_bytes_ * slots <= config_.staging / 4;
  };

  switch (c.op) {
    case CommOp::put:
    case CommOp::wait: {
      if (c.peer >= N || c.peer == me) return kCommBadPeer;
      const bool sender = c.op == CommOp::put;
      if (push) {
        if (!sender) return heard(c.peer) ? kCommOk : kCommAborted;
        if (!move(c.count, at(me, c.src), none, at(c.peer, c.dst), none, c.type)) return kCommBus;
        tell(c.peer);
        return kCommOk;
      }
      if (sender) {  // pull: publish, then wait until the reader is done
        publish(c.peer);
        return heard(c.peer) ? kCommOk : kCommAborted;
      }
      if (!published(c.peer) || !move(c.count, at(c.peer, c.src), none, at(me, c.dst), none, c.type)) return kCommBus;
      tell(c.peer);
      return kCommOk;
    }

    case CommOp::all_reduce:
    case CommOp::reduce_scatter:
    case CommOp::all_gather: {
      if (c.algo == CommAlgo::tree && c.op == CommOp::all_reduce) break;  // below
      if (c.algo != CommAlgo::ring) return kCommBadOp;
      const std::uint64_t total = c.op == CommOp::all_gather ? c.count * N : c.count;
      const std::uint64_t per = (total + N - 1) / N;
      auto lo = [&](unsigned chunk) { return std::min<std::uint64_t>(total, chunk * per); };
      auto bytes = [&](unsigned chunk) { return (std::min<std::uint64_t>(total, (chunk + 1) * per) - lo(chunk)) * es; };
      auto src = [&](unsigned chunk) { return at(me, c.src + lo(chunk) * es); };
      auto dst = [&](unsigned chunk) { return at(me, c.dst + lo(chunk) * es); };
      auto mod = [&](long v) { return static_cast<unsigned>(((v % long(N)) + long(N)) % long(N)); };
      if (N == 1) return move(total * es, at(me, c.src), none, at(me, c.dst), none, c.type) ? kCommOk : kCommBus;
      const unsigned next = (me + 1) % N, prev = (me + N - 1) % N;
      // Reduce-scatter passes partial sums through the staging buffers; all-gather writes straight into dst.
      if (c.op != CommOp::all_gather && !use_staging(per * es, N - 1)) return kCommStaging;
      unsigned step = 0;
      if (c.op != CommOp::all_gather) {
        for (unsigned s = 0; s + 1 < N; ++s, ++step) {
          const unsigned out = mod(long(me) - s - 1), in = mod(long(me) - s - 2);
          if (!produce(next, step, bytes(out), src(out), s == 0 ? none : at(me, in_slot(step - 1)), none)) return kCommBus;
          if (!obtain(prev, step, bytes(in))) return kCommBus;
        }
        if (c.op == CommOp::reduce_scatter)
          return move(bytes(me), src(me), at(me, in_slot(step - 1)), at(me, c.dst), none, c.type) ? kCommOk : kCommBus;
      }
      // All-gather: this chip's chunk (reduced just now, or its own), then the
      // others round the ring, straight into the destination buffers (the
      // same address on every chip): each chip forwards from its own.
      for (unsigned t = 0; t + 1 < N; ++t) {
        const unsigned out = mod(long(me) - t), in = mod(long(me) - t - 1);
        Place a = dst(out), b = none, local = none;
        if (t == 0) {
          if (c.op == CommOp::all_gather) a = at(me, c.src);
          else a = src(me), b = at(me, in_slot(step - 1));
          local = dst(out);
        }
        if (push) {
          if (!move(bytes(out), a, b, at(next, c.dst + lo(out) * es), local, c.type)) return kCommBus;
          tell(next);
          if (!heard(prev)) return kCommAborted;
        } else {
          if (t == 0 && !move(bytes(out), a, b, local, none, c.type)) return kCommBus;
          publish(next);
          if (!published(prev) || !move(bytes(in), at(prev, c.dst + lo(in) * es), none, dst(in), none, c.type)) return kCommBus;
        }
      }
      return kCommOk;
    }

    case CommOp::broadcast:
      if (c.algo != CommAlgo::tree) return kCommBadOp;
      if (c.peer >= N) return kCommBadPeer;
      break;  // below

    case CommOp::all_to_all: {
      if (c.algo != CommAlgo::direct) return kCommBadOp;
      std::vector<std::uint64_t> table(6 * N);
      if (!mem(false, fabric_.chip_, c.table, table.data(), table.size() * 8)) return kCommBus;
      auto e = [&](unsigned p, unsigned field) { return table[6 * p + field]; };
      for (unsigned p = 0; p < N; ++p)
        if (e(p, 1) % es || e(p, 4) % es) return kCommAlignment;
      if (push) {
        for (unsigned d = 0; d < N; ++d) {
          const unsigned p = (me + d) % N;
          if (!move(e(p, 1), at(me, c.src + e(p, 0)), none, at(p, c.dst + e(p, 2)), none, c.type)) return kCommBus;
          if (p != me) tell(p);
        }
        for (unsigned d = 1; d < N; ++d)
          if (!heard((me + N - d) % N)) return kCommAborted;
        return kCommOk;
      }
      for (unsigned p = 0; p < N; ++p)
        if (p != me) publish(p);
      for (unsigned d = 0; d < N; ++d) {
        const unsigned p = (me + N - d) % N;
        if (p != me && !published(p)) return kCommBus;
        if (!move(e(p, 4), at(p, c.src + e(p, 5)), none, at(me, c.dst + e(p, 3)), none, c.type)) return kCommBus;
        if (p != me) tell(p);  // done reading its source
      }
      for (unsigned d = 1; d < N; ++d)
        if (!heard((me + d) % N)) return kCommAborted;
      return kCommOk;
    }
    default: return kCommBadOp;
  }

  // Binomial trees: all-reduce (up to chip 0, then down) and broadcast (down from the root).
  const std::uint64_t bytes = c.count * es;
  unsigned levels = 0;
  while ((1u << levels) < N) ++levels;
  const unsigned root = c.op == CommOp::broadcast ? c.peer : 0;
  const unsigned v = (me + N - root) % N;
  auto chip_of = [&](unsigned virt) { return (virt + root) % N; };
  if (N == 1) return move(bytes, at(me, c.src), none, at(me, c.dst), none, c.type) ? kCommOk : kCommBus;
  if (!use_staging(bytes, 3 * levels)) return kCommStaging;
  Place acc = at(me, c.src);
  bool sent = false;
  if (c.op == CommOp::all_reduce)
    for (unsigned s = 0; s < levels && !sent; ++s) {
      const unsigned bit = 1u << s;
      if ((v & (2 * bit - 1)) == bit) {
        if (!produce(chip_of(v - bit), s, bytes, acc, none, none)) return kCommBus;
        sent = true;
      } else if ((v & (2 * bit - 1)) == 0 && v + bit < N) {
        if (!obtain(chip_of(v + bit), s, bytes)) return kCommBus;
        const Place sum = at(me, out_slot(2 * levels + s));
        if (!move(bytes, acc, at(me, in_slot(s)), sum, none, c.type)) return kCommBus;
        acc = sum;
      }
    }
  // Down the tree: the root holds the result; each chip receives it once, at
  // its lowest set bit, and passes it to its children below that.
  Place value = acc;
  if (v == 0 && !move(bytes, acc, none, at(me, c.dst), none, c.type)) return kCommBus;
  for (unsigned s = levels; s-- > 0;) {
    const unsigned bit = 1u << s;
    if ((v & (2 * bit - 1)) == bit) {
      if (!obtain(chip_of(v - bit), levels + s, bytes)) return kCommBus;
      value = at(me, in_slot(levels + s));
      if (!move(bytes, value, none, at(me, c.dst), none, c.type)) return kCommBus;
    } else if ((v & (2 * bit - 1)) == 0 && v + bit < N) {
      if (!produce(chip_of(v + bit), levels + s, bytes, value, none, none)) return kCommBus;
    }
  }
  return kCommOk;
}

}  // namespace tessera::c2c
