#include "traffic_gen/traffic_gen.hpp"

#include "common/log.hpp"
#include "common/payload.hpp"
#include "common/registry.hpp"
#include "traffic_gen_regs.hpp"

namespace tessera::traffic_gen {

namespace R = regs::traffic_gen;

void TrafficGen::Config::visit(Params& p) {
  p("pattern", pattern, "sequential, strided, random or mixed");
  p.address("base", base, "start of the region the requests go to");
  p.size("size", size, "bytes of the region");
  p("request_bytes", request_bytes, "bytes per request");
  p("stride", stride, "bytes between requests for the strided pattern");
  p("count", count, "requests in a run");
  p("outstanding", outstanding, "requests in flight (streams)");
  p("read_percent", read_percent, "share of reads in percent");
  p("interval", interval, "pause of each stream between its requests");
  p("seed", seed, "seed of the random patterns");
  p("driver", driver, "threads (a thread per stream, any target) or one_thread (streams in time order, annotated; targets that never wait)");
  p("quantum", quantum, "driver one_thread: how far ahead of simulated time requests are issued");
  p("autostart", autostart, "start a run at time 0");
}

void TrafficGen::Config::validate(const Params& p) const {
  if (pattern != "sequential" && pattern != "strided" && pattern != "random" && pattern != "mixed")
    p.fail("pattern", "must be sequential, strided, random or mixed");
  if (request_bytes == 0 || request_bytes > size || request_bytes > kMaxRequestBytes)
    p.fail("request_bytes", fmt::format("must be between 1 and size, and at most {}", kMaxRequestBytes));
  if (outstanding == 0 || outstanding > 64) p.fail("outstanding", "must be between 1 and 64");
  if (read_percent > 100) p.fail("read_percent", "must be at most 100");
  if (driver != "threads" && driver != "one_thread") p.fail("driver", "must be threads or one_thread");
  if (driver == "one_thread" && quantum == sc_core::SC_ZERO_TIME) p.fail("quantum", "must be positive with driver one_thread");
}

TrafficGen::TrafficGen(const sc_core::sc_module_name& n, const Config& c)
    : MmioTarget(n, R::kBlock), bus_initiator("bus_initiator"), one_thread_(c.driver == "one_thread"),
      quantum_(c.quantum), rng_(c.seed), autostart_(c.autostart) {
  expose_initiator("bus_initiator", bus_initiator);
  expose_irq_out("irq_out", irq_out);
  static const char* const patterns[] = {"sequential", "strided", "random", "mixed"};
  for (unsigned i = 0; i < 4; ++i)
    if (c.pattern == patterns[i]) regs_.set(R::PATTERN, i);
  regs_.set(R::BASE, c.base);
  regs_.set(R::SIZE, c.size);
  regs_.set(R::REQ_BYTES, c.request_bytes);
  regs_.set(R::STRIDE, c.stride);
  regs_.set(R::COUNT, c.count);
  regs_.set(R::OUTSTANDING, c.outstanding);
  regs_.set(R::READ_PERCENT, c.read_percent);
  regs_.set(R::INTERVAL_NS, static_cast<std::uint64_t>(c.interval.to_seconds() * 1e9));
  regs_.on_read(R::STATUS, [this](unsigned, bool) -> std::uint64_t {
    return (busy() ? R::STATUS_f::BUSY_MASK : 0) | (irq_out.read() ? R::STATUS_f::DONE_MASK : 0) |
           (errors_ ? R::STATUS_f::ERROR_MASK : 0);
  });
  regs_.on_read(R::DONE_REQUESTS, [this](unsigned, bool) { return done_; });
  regs_.on_read(R::BYTES, [this](unsigned, bool) { return bytes_; });
  regs_.on_read(R::ELAPSED_NS, [this](unsigned, bool) {
    return static_cast<std::uint64_t>(elapsed().to_seconds() * 1e9 + 0.5);
  });
  regs_.on_read(R::LATENCY_SUM_NS, [this](unsigned, bool) { return static_cast<std::uint64_t>(latency_sum_ns_); });
  regs_.on_write(R::CTRL, [this](RegisterBank::Write& w) {
    if (!(w.data & R::CTRL_f::START_MASK)) return true;
    if (busy()) {
      log::guest_error(path(), "tgen/busy", "START while a run is going on: ignored");
      return true;
    }
    const std::uint64_t req = regs_.get(R::REQ_BYTES), size = regs_.get(R::SIZE), out = regs_.get(R::OUTSTANDING);
    if (req == 0 || req > size || req > kMaxRequestBytes || out == 0 || out > 64 || regs_.get(R::PATTERN) > 3 ||
        regs_.get(R::READ_PERCENT) > 100) {
      log::guest_error(path(), "tgen/settings",
                       "START with invalid settings (REQ_BYTES {} of at most {} and SIZE, SIZE {}, OUTSTANDING {} of "
                       "1 to 64, PATTERN {}, READ_PERCENT {})",
                       req, kMaxRequestBytes, size, out, regs_.get(R::PATTERN), regs_.get(R::READ_PERCENT));
      return false;
    }
    start();
    return true;
  });
  for (unsigned s = 0; s < 64; ++s) sc_core::sc_spawn([this, s] { stream(s); }, sc_core::sc_gen_unique_name("stream"));
}

void TrafficGen::start() {
  next_ = done_ = bytes_ = errors_ = 0;
  latency_sum_ns_ = 0;
  begin_ = end_ = sc_core::sc_time_stamp();
  active_ = static_cast<unsigned>(regs_.get(R::OUTSTANDING));
  irq_out.write(false);
  go_.notify(sc_core::SC_ZERO_TIME);
}

std::uint64_t TrafficGen::address(std::uint64_t i) {
  const std::uint64_t base = regs_.get(R::BASE), size = regs_.get(R::SIZE), req = regs_.get(R::REQ_BYTES);
  const std::uint64_t slots = std::max<std::uint64_t>(1, size / req);
  switch (regs_.get(R::PATTERN)) {
    case 0: return base + (i % slots) * req;
    case 1: return base + (i * regs_.get(R::STRIDE)) % (slots * req);
    default: return base + (rng_() % slots) * req;
  }
}

sc_core::sc_time TrafficGen::request(unsigned id, tlm::tlm_generic_payload& t, sc_core::sc_time delay) {
  std::vector<std::uint8_t>& buf = buffers_[id];
  const std::uint64_t i = next_++;
  const bool read = (rng_() % 100) < regs_.get(R::READ_PERCENT);
  set_access(t, read ? tlm::TLM_READ_COMMAND : tlm::TLM_WRITE_COMMAND, address(i), buf.data(), static_cast<unsigned>(buf.size()));
  const sc_core::sc_time now = sc_core::sc_time_stamp();
  sent_[id] = now + delay;
  bus_initiator->b_transport(t, delay);
  // A request takes at least its issue slot after its response, so no
  // target that answers at once can keep a run at a standstill.
  const sc_core::sc_time after = sc_core::sc_time_stamp();
  if (!one_thread_) return after + std::max(delay, slot_);
  if (after != now && errors_++ == 0) {
    log::guest_error(path(), "tgen/driver",
                     "the target waited in b_transport: driver one_thread needs a target that answers at once "
                     "(driver threads drives any); the run stops");
    next_ = std::max<std::uint64_t>(next_, regs_.get(R::COUNT));
  }
  return std::max(after + delay, sent_[id] + slot_);
}

void TrafficGen::finish(unsigned id, const tlm::tlm_generic_payload& t, const sc_core::sc_time& done) {
  if (t.get_response_status() != tlm::TLM_OK_RESPONSE) {
    // The first error ends the run (STATUS.ERROR): the rest would fail alike.
    if (errors_++ == 0)
      log::guest_error(path(), "tgen/response", "{} of {} bytes at {:#x}: {}; the run stops", t.is_read() ? "read" : "write",
                       t.get_data_length(), t.get_address(), t.get_response_string());
    next_ = std::max<std::uint64_t>(next_, regs_.get(R::COUNT));
  }
  latency_sum_ns_ += (done - sent_[id]).to_seconds() * 1e9;
  ++done_;
  bytes_ += t.get_data_length();
  end_ = std::max(end_, done);
}

void TrafficGen::stream(unsigned id) {
  if (id == 0 && autostart_) start();
  tlm::tlm_generic_payload t;  // one per stream, reused: set_access sets every field a request uses
  for (;;) {
    sc_core::wait(go_);
    if (id >= regs_.get(R::OUTSTANDING)) continue;
    buffers_[id].assign(regs_.get(R::REQ_BYTES), static_cast<std::uint8_t>(id));
    if (one_thread_) {
      if (id == 0) one_thread();
      continue;
    }
    while (next_ < regs_.get(R::COUNT)) {
      sc_core::wait(request(id, t, sc_core::SC_ZERO_TIME) - sc_core::sc_time_stamp());
      finish(id, t, sc_core::sc_time_stamp());
      if (const std::uint64_t pause = regs_.get(R::INTERVAL_NS)) sc_core::wait(static_cast<double>(pause), sc_core::SC_NS);
    }
    if (--active_ == 0) irq_out.write(true);
  }
}

void TrafficGen::one_thread() {
  // Every stream's next request time; the earliest goes next (the lowest
  // stream on a tie), as the streams' threads would issue them.
  const unsigned streams = static_cast<unsigned>(regs_.get(R::OUTSTANDING));
  for (unsigned s = 1; s < streams; ++s) buffers_[s].assign(regs_.get(R::REQ_BYTES), static_cast<std::uint8_t>(s));
  // A binary min-heap of (time, stream); the top is replaced in place.
  using Next = std::pair<sc_core::sc_time, unsigned>;
  std::vector<Next> ready;
  for (unsigned s = 0; s < streams; ++s) ready.push_back({sc_core::sc_time_stamp(), s});  // all equal: a heap
  tlm::tlm_generic_payload t;
  const sc_core::sc_time pause(static_cast<double>(regs_.get(R::INTERVAL_NS)), sc_core::SC_NS);
  sc_core::sc_time now = sc_core::sc_time_stamp();
  while (next_ < regs_.get(R::COUNT)) {
    const auto [at, s] = ready.front();
    if (at - now >= quantum_) {
      sc_core::wait(at - now);
      now = sc_core::sc_time_stamp();
    }
    const sc_core::sc_time done = request(s, t, at - now);
    finish(s, t, done);  // counted at once: the run is ahead of simulated time by up to the quantum
    const Next moved{done + pause, s};
    std::size_t i = 0;
    for (;;) {  // sift down
      std::size_t c = 2 * i + 1;
      if (c >= ready.size()) break;
      if (c + 1 < ready.size() && ready[c + 1] < ready[c]) ++c;
      if (!(ready[c] < moved)) break;
      ready[i] = ready[c];
      i = c;
    }
    ready[i] = moved;
  }
  if (end_ > sc_core::sc_time_stamp()) sc_core::wait(end_ - sc_core::sc_time_stamp());
  active_ = 0;
  irq_out.write(true);
}

double TrafficGen::bandwidth() const {
  const double s = elapsed().to_seconds();
  return s > 0 ? static_cast<double>(bytes_) / s : 0.0;
}

void TrafficGen::report_stats(nlohmann::ordered_json& out) const {
  out["requests"] = done_;
  out["bytes"] = bytes_;
  out["errors"] = errors_;
  out["elapsed_ns"] = elapsed().to_seconds() * 1e9;
  out["bandwidth_GBps"] = bandwidth() / 1e9;
  out["latency_avg_ns"] = done_ ? latency_sum_ns_ / static_cast<double>(done_) : 0.0;
}

TESSERA_REGISTER_IP("traffic_gen", TrafficGen, "traffic generator: sequential, strided, random, mixed", R::kBlock.window);

}  // namespace tessera::traffic_gen
