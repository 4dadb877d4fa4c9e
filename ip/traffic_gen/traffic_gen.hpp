// Traffic generator: drives its initiator socket with sequential, strided,
// random or mixed read/write requests of a given size, with a number of
// requests in flight (one stream per outstanding request) and an optional
// pause per stream. Configured from the platform file (and started at time
// 0 with autostart) or through its CSRs by firmware. Each stream waits for
// its own response (b_transport, then the annotated delay), so latency and
// bandwidth are what the target and the interconnect give.
#pragma once

#include <cstdint>
#include <random>
#include <vector>
#include <tlm_utils/simple_initiator_socket.h>

#include "common/config.hpp"
#include "common/regs.hpp"

namespace tessera::traffic_gen {

class TrafficGen : public MmioTarget {
 public:
  tlm_utils::simple_initiator_socket<TrafficGen> bus_initiator;
  IrqOut irq_out;  // high while a finished run is unacknowledged (STATUS.DONE)

  struct Config {
    std::string pattern = "sequential";  // sequential, strided, random, mixed
    std::uint64_t base = 0, size = 1 << 20;
    unsigned request_bytes = 64, stride = 4096, count = 1000, outstanding = 4, read_percent = 100, seed = 1;
    sc_core::sc_time interval = sc_core::SC_ZERO_TIME;
    // "threads": a SystemC thread per stream, each waiting for its
    // response (any target). "one_thread": one thread issues every
    // stream's requests in time order, annotating each one's time instead
    // of waiting for it, up to `quantum` ahead of simulated time: the same
    // order of requests for a target that answers without waiting (a
    // loosely-timed model such as the fast HBM), without a thread switch
    // per request. A target that waits in b_transport stops such a run
    // with an error (STATUS.ERROR).
    std::string driver = "threads";
    sc_core::sc_time quantum = sc_core::sc_time(1, sc_core::SC_US);
    bool autostart = false;
    void visit(Params& p);
    void validate(const Params& p) const;
  };

  // The largest request its buffers hold; larger REQ_BYTES are refused.
  static constexpr std::uint64_t kMaxRequestBytes = 4096;
  // The shortest time one request takes, in ns.
  static constexpr double kIssueSlotNs = 1;

  TrafficGen(const sc_core::sc_module_name& n, const Config& c);
  void start();
  bool busy() const { return active_ > 0; }
  std::uint64_t requests_done() const { return done_; }
  std::uint64_t bytes_moved() const { return bytes_; }
  sc_core::sc_time elapsed() const { return end_ - begin_; }
  double bandwidth() const;  // bytes per second of the last run
  void report_stats(nlohmann::ordered_json& out) const override;

 private:
  void stream(unsigned id);
  void one_thread();  // driver "one_thread": every stream of a run
  // The run's next request from stream `id`, issued `delay` ahead of
  // simulated time: when it is done (the stream may issue again), at least
  // its issue slot after its response.
  sc_core::sc_time request(unsigned id, tlm::tlm_generic_payload& t, sc_core::sc_time delay);
  // Counts a request done at `done`; its error stops the run.
  void finish(unsigned id, const tlm::tlm_generic_payload& t, const sc_core::sc_time& done);
  std::uint64_t address(std::uint64_t i);

  bool one_thread_;
  sc_core::sc_time quantum_;
  const sc_core::sc_time slot_{kIssueSlotNs, sc_core::SC_NS};
  std::vector<sc_core::sc_time> sent_ = std::vector<sc_core::sc_time>(64);  // per stream: its request's issue time
  std::mt19937_64 rng_;
  // One data buffer per stream, owned here: the stream threads never
  // return, so a buffer on a thread's stack would never be freed.
  std::vector<std::vector<std::uint8_t>> buffers_ = std::vector<std::vector<std::uint8_t>>(64);
  sc_core::sc_event go_;
  unsigned active_ = 0;
  std::uint64_t next_ = 0, done_ = 0, bytes_ = 0, errors_ = 0;
  double latency_sum_ns_ = 0;
  sc_core::sc_time begin_, end_;
  bool autostart_;
};

}  // namespace tessera::traffic_gen
