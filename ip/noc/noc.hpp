// Network-on-chip models: a flit-level, cycle-accurate 2D mesh (wormhole
// switching, virtual channels, credit flow control, separable round-robin
// allocators, XY or west-first adaptive routing) and a packet-level fast
// model in which links, ports and VC buffers are booked per flit. Pure C++,
// driven cycle by cycle (flit level) or packet by packet (packet level);
// the synthetic-traffic harness (traffic.hpp) and, later, the TLM
// front-end drive them.
//
// Zero-load latency of a packet of L flits over d links (d + 1 routers):
//   (d + 1) * (rc + va + sa + st) + d * link + (L - 1)
// measured from the cycle its head enters the source router to the cycle
// its tail leaves the destination router.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace tessera::noc {

struct NocConfig {
  std::string topology = "mesh";  // mesh, torus (both dimensions wrap), ring (height 1, wraps)
  unsigned width = 8, height = 8;
  std::string routing = "xy";   // xy, west_first
  unsigned vcs = 4;              // per port
  unsigned buffer = 4;           // flits per VC
  unsigned classes = 1;          // message classes (VCs split evenly): requests, responses
  unsigned rc = 1, va = 1, sa = 1, st = 1;  // router pipeline stages, cycles (rc 0: lookahead routing)
  unsigned link = 1;             // link traversal, cycles
  unsigned inject = 0, eject = 0;  // the injection and ejection channels' latency, cycles (BookSim's are 1)
  unsigned credit_delay = 1;     // cycles for a credit to return upstream
  std::string vc_release = "tail";
  // Switch allocation: "separable" (input-first round robin), "islip"
  // (sa_iterations rounds of request, grant and accept; pointers move on
  // the first) or "wavefront" (a rotating diagonal of the request matrix).
  std::string sa_allocator = "separable";
  unsigned sa_iterations = 2;  // a VC is free again when its tail leaves ("tail") or when the tail's credit returns ("credit", BookSim)
  unsigned flit_bytes = 32;
  unsigned header_bytes = 16;    // request/response header carried in the head flit
  unsigned nodes() const { return width * height; }
  bool wraps_around() const { return topology[0] != 'm'; }  // torus or ring (after check())
  unsigned per_hop() const { return rc + va + sa + st; }
  // Flits for a packet of `payload` bytes (header in the head flit).
  unsigned flits_for(unsigned payload) const { return (payload + header_bytes + flit_bytes - 1) / flit_bytes; }
  std::string check(std::string* key = nullptr) const;  // "" or what is wrong (and `key`: which parameter)
};

struct Packet {
  std::uint64_t id = 0;
  unsigned src = 0, dst = 0, flits = 1, cls = 0;
  std::uint64_t created = 0;   // cycle it was offered (enters the source queue)
  std::uint64_t injected = 0;  // head entered the source router
  std::uint64_t delivered = 0; // tail left the destination router
  unsigned hops = 0;           // links crossed
  bool measured = false;
  // Flit level: packets a source offers for the same cycle enter in the
  // order of this key (then offer order), not in the order the processes
  // that offered them happened to run at that instant.
  std::uint64_t order = 0;
  // Dateline state on a torus or ring: the dimension travelled and whether
  // the packet crossed its wrap-around link (then it uses the upper VCs).
  std::uint8_t dim = 0;
  bool crossed = false;
  void* owner = nullptr;
};

struct LinkStats {
  std::uint64_t flits = 0;
};

struct RouterStats {
  std::uint64_t flits = 0, credit_stalls = 0, allocation_stalls = 0;
  std::uint64_t injected = 0, ejected = 0;  // packets of the endpoint at this router
  std::uint64_t injected_flits = 0, ejected_flits = 0;  // and their flits
};

// Directions of router ports.
enum Port : unsigned { kLocal = 0, kEast, kWest, kNorth, kSouth, kPorts };

class Network {
 public:
  using Delivered = std::function<void(Packet&)>;
  virtual ~Network() = default;
  // Offers a packet at its source at cycle `now` (>= the last step).
  virtual void offer(const Packet& p) = 0;
  // Simulates up to and including cycle `until`.
  virtual void run_until(std::uint64_t until) = 0;
  virtual std::uint64_t cycle() const = 0;
  virtual bool idle() const = 0;
  virtual std::uint64_t in_flight() const = 0;
  // When the packet offered last will be delivered, if the model knows it
  // at once (packet level); ~0 otherwise.
  virtual std::uint64_t scheduled_delivery() const { return ~0ull; }
  // Packet level, a packet held back in its source's backlog (then
  // scheduled_delivery() is ~0): the next cycle at which run_until()
  // computes one of those (~0 if none waits), and the callback that gives
  // each its delivery cycle when it is computed.
  virtual std::uint64_t next_release() const { return ~0ull; }
  void on_scheduled(Delivered d) { scheduled_ = std::move(d); }
  void on_delivered(Delivered d) { delivered_ = std::move(d); }
  const std::vector<LinkStats>& links() const { return links_; }    // index: node * kPorts + port
  const std::vector<RouterStats>& routers() const { return routers_; }
  const NocConfig& config() const { return cfg_; }

  static unsigned hops(const NocConfig& c, unsigned src, unsigned dst);
  // The output port dimension-order routing takes at `node` towards `dst`
  // (shortest way round on a torus or ring; kLocal when there).
  static unsigned dor_port(const NocConfig& c, unsigned node, unsigned dst);
  // The node behind `port` of `node` (-1 at a mesh edge).
  static int neighbour(const NocConfig& c, unsigned node, unsigned port);
  // Whether that link is a wrap-around link (the dateline of its dimension).
  static bool wraps(const NocConfig& c, unsigned node, unsigned port);

 protected:
  explicit Network(const NocConfig& c) : cfg_(c), links_(c.nodes() * kPorts), routers_(c.nodes()) {}
  // The VCs a packet may claim on the link out of `port` (class and dateline).
  void vc_range(const Packet& p, unsigned node, unsigned port, unsigned& lo, unsigned& hi) const;
  static unsigned opposite(unsigned port);
  unsigned vc_lo(unsigned cls) const { return cls * (cfg_.vcs / cfg_.classes); }
  unsigned vc_hi(unsigned cls) const { return (cls + 1) * (cfg_.vcs / cfg_.classes); }
  NocConfig cfg_;
  Delivered delivered_, scheduled_;
  std::vector<LinkStats> links_;
  std::vector<RouterStats> routers_;
};

// The most loaded link when every node of `from` sends the same amount to
// every node of `to` along the network's dimension-order routes (west-first
// adaptive routing is counted as XY): `share` is the fraction of all that
// traffic the link carries, so the traffic's bound is one link's bandwidth
// / share; `node` and `port` name the link (port kLocal: an ejection port).
// share 0 when nothing flows (from and to empty, or the same single node).
struct CutShare {
  double share = 0;
  unsigned node = 0, port = kLocal;
};
CutShare cut_share(const NocConfig& c, const std::vector<unsigned>& from, const std::vector<unsigned>& to);

// Cycle-accurate, flit by flit.
class FlitNetwork : public Network {
 public:
  explicit FlitNetwork(const NocConfig& c);
  void offer(const Packet& p) override;
  void run_until(std::uint64_t until) override;
  std::uint64_t cycle() const override { return now_; }
  bool idle() const override { return in_flight_ == 0; }
  std::uint64_t in_flight() const override { return in_flight_; }

 private:
  bool credit_release_;  // vc_release "credit"
  enum class Sa { separable, islip, wavefront } sa_;
  struct Flit {
    std::uint32_t packet;  // index into packets_
    bool head, tail;
    std::uint64_t ready;   // cycle it may take its next pipeline step
  };
  enum class VcState : std::uint8_t { idle, routing, waiting_vc, active };
  // A VC's buffer: a ring of `buffer` flits.
  struct Ring {
    std::vector<Flit> slots;
    unsigned head = 0, count = 0;
    bool empty() const { return count == 0; }
    std::size_t size() const { return count; }
    Flit& front() { return slots[head]; }
    const Flit& front() const { return slots[head]; }
    // Credits keep the ring from overflowing.
    void push_back(const Flit& f) { slots[(head + count++) % slots.size()] = f; }
    void pop_front() {
      head = (head + 1) % static_cast<unsigned>(slots.size());
      --count;
    }
  };
  struct InputVc {
    Ring buf;
    VcState state = VcState::idle;
    unsigned out_port = 0, out_vc = 0;
    std::uint64_t ready = 0;  // when the current stage completes
  };
  struct Output {
    std::vector<unsigned> credits;   // per downstream VC
    std::vector<int> owner;          // input (port * vcs + vc) holding the VC, -1 free
    std::vector<bool> releasing;     // vc_release "credit": the tail has left, the VC frees when its buffer is empty
    unsigned rr_vc = 0, rr_in = 0;   // round-robin pointers
  };
  struct Router {
    std::vector<InputVc> in;  // port * vcs + vc
    std::vector<Output> out;  // per port
    unsigned rr_port_vc[kPorts] = {};
    unsigned rr_accept[kPorts] = {};  // iSLIP: each input's accept pointer over outputs
    unsigned wavefront = 0;           // wavefront: the diagonal with priority this cycle
    unsigned active = 0;      // flits held
    unsigned routing = 0;     // VCs waiting for a VC allocation
    bool needs_rc = false;    // a head may sit at the front of an idle VC
    unsigned va_rr = 0;
  };
  struct InFlight {
    std::uint64_t at;
    unsigned node, port, vc;
    Flit flit;
  };
  struct Credit {
    std::uint64_t at;
    unsigned node, port, vc;
  };

  void step();
  // Switch allocation (sa_allocator): match[out] = the input port it serves, or -1.
  void allocate(Router& r, const int (&req)[kPorts][kPorts], int (&match)[kPorts]);
  unsigned route(unsigned node, const Packet& p, const Router& r) const;
  int neighbour(unsigned node, unsigned port) const { return Network::neighbour(cfg_, node, port); }

  bool west_first_ = cfg_.routing == "west_first";
  std::vector<Router> routers_state_;
  std::vector<Packet> packets_;
  std::vector<std::uint32_t> free_packets_;
  std::vector<std::deque<std::uint32_t>> source_;   // per node: packets waiting to inject
  std::vector<unsigned> injecting_flit_;            // next flit index of the packet at the source front
  std::vector<int> injecting_vc_;                   // local input VC it uses, -1 none yet
  std::deque<InFlight> wires_;
  std::deque<Credit> credits_;
  std::uint64_t now_ = 0;
  std::uint64_t in_flight_ = 0;
};

// Packet-level: each packet's whole path is computed when it is offered,
// hop by hop along its dimension-order route, with the resources that
// shape a wormhole network under load:
// - links, ejection ports and each router's input ports are calendars
//   (ring bitmaps of busy cycles); each flit leaves a router in the first cycle
//   both its output and its input port are free, so flits of different
//   packets interleave;
// - each input port's VCs are FIFO lanes of `buffer` flits: a packet takes
//   the lane with room first (round robin among those with room), waits
//   behind the packet ahead of it in its lane, and a flit crosses a link
//   only when the lane beyond has a slot for it (its credit), so a full
//   lane holds packets back in the router before it (back-pressure), up to
//   the source queue;
// - while a head waits for its output it blocks its input port (an
//   input-first separable allocator stays on a VC until it wins; for a
//   packet of L flits, 1/L of the wait, since body flits take turns).
// The horizon (the oldest cycle a later packet can still book) drops what
// is behind it; a calendar grows when a booking lies beyond it. Packets are
// computed in the order they are offered (creation order), so one created
// later never delays one created earlier (beyond saturation, see kBacklog,
// in the order they leave their sources' queues).
class PacketNetwork : public Network {
 public:
  explicit PacketNetwork(const NocConfig& c);
  void offer(const Packet& p) override;
  void run_until(std::uint64_t until) override;
  std::uint64_t cycle() const override { return now_; }
  bool idle() const override { return pending_ == 0; }
  std::uint64_t in_flight() const override { return pending_; }
  std::uint64_t scheduled_delivery() const override { return last_delivery_; }
  std::uint64_t next_release() const override { return backlogged_ ? std::max(next_release_, now_) : ~0ull; }

 private:
  // The calendars of links and ejection ports (k = node * kPorts + port)
  // and of input ports (k = inputs_ + node * kPorts + port; kLocal: the
  // injection port): bitmaps of busy cycles, each a ring of ring_ words of
  // 64 cycles, all indexed alike (word w of calendar k at
  // cal_[k * ring_ + w % ring_]). Every booking lies within ring_ words of
  // the floor (the horizon's word) and no search starts below it, so a
  // ring never aliases; the words the floor leaves behind are cleared as
  // it moves, and a booking beyond the rings doubles them all.
  std::uint64_t free_at(unsigned k, std::uint64_t c) const;                // first free cycle >= c
  std::uint64_t both_free(unsigned o, unsigned i, std::uint64_t c) const;  // first cycle >= c free in both
  void book(unsigned k, std::uint64_t c);                                  // books cycle c
  void book(unsigned k, std::uint64_t from, std::uint64_t to);             // books [from, to)
  void raise_floor(std::uint64_t word);
  void grow(std::uint64_t word);  // until `word` lies within the rings
  std::vector<std::uint64_t> cal_;
  std::uint64_t ring_ = 4, mask_ = 3, floor_ = 0;
  unsigned inputs_;
  std::vector<std::uint64_t> inject_free_;
  // Each input port's VCs as lanes, FIFO, `depth_` flits each: per lane
  // `stride_` words, when its last packet's head came in (kArrived), the
  // first cycle after that packet's tail left (kDeparted), the next entry
  // of its ring (kPos), then the ring (kRing): when each of the last
  // depth_ flits that entered it left.
  enum : unsigned { kArrived, kDeparted, kPos, kRing };
  std::uint64_t* lane(unsigned index) { return &lanes_[std::size_t(index) * stride_]; }
  // The lane of input port `port_index` (node * kPorts + port), among VCs
  // [lo, hi), that takes a packet of `flits` flits first from cycle `from`.
  unsigned pick_lane(unsigned port_index, unsigned lo, unsigned hi, unsigned flits, std::uint64_t from);
  // Books flits 0 .. length - 1 through output `out` and input port `in`,
  // flit j no earlier than time[j]; time[j] becomes the cycle it leaves.
  template <unsigned kL>  // kL: the flit count, or 0 (then `flits`)
  void serve(unsigned out, unsigned in, std::uint64_t* time, unsigned flits);
  // offer() for a packet of kL flits (0: any count).
  // `at`: the cycle the path is computed at (the packet's creation, or
  // for one held back in its source's backlog, the cycle it leaves it).
  template <unsigned kL>
  void offer_as(Packet& p, std::uint32_t slot, std::uint64_t at);
  void compute(const Packet& p, std::uint64_t at);
  // A source whose queue reaches more than kBacklog cycles past a packet's
  // creation (only beyond saturation) holds its packets back and computes
  // each when the queue ahead of it is within kBacklog cycles of the
  // present, as the flit level injects them: the calendars then span the
  // near future only, and what the source never gets to inject costs
  // nothing.
  static constexpr std::uint64_t kBacklog = 512;
  void release(std::uint64_t now);
  std::vector<std::deque<Packet>> backlog_;
  unsigned backlogged_ = 0;          // sources with a backlog
  std::uint64_t next_release_ = ~0ull;  // the earliest cycle one of them may release a packet
  std::uint32_t last_slot_ = 0;         // compute()'s packet
  std::vector<std::uint64_t> time_;  // offer()'s scratch: each flit's time at the current hop
  unsigned depth_, stride_, per_class_;
  std::vector<std::uint64_t> lanes_;  // lane (node * kPorts + port) * vcs + vc at lane * stride_
  std::vector<unsigned> lane_rr_;        // per input port: the round-robin pointer over its VCs
  // Packets in flight live in a pool; buckets of a calendar by delivery
  // cycle hold their indices for the near future (small, so it stays in
  // the cache), lists by stretch of kCalendar cycles the rest.
  static constexpr std::size_t kCalendar = 128;
  std::vector<Packet> pool_;
  std::vector<std::uint32_t> free_;
  std::vector<std::vector<std::uint32_t>> calendar_ = std::vector<std::vector<std::uint32_t>>(kCalendar);
  std::map<std::uint64_t, std::vector<std::uint32_t>> overflow_;  // by delivery cycle / kCalendar
  std::uint64_t horizon_ = 0, horizon_at_ = 0;  // the horizon, and the creation cycle it was computed at
  std::uint64_t pending_ = 0;
  std::uint64_t last_delivery_ = ~0ull;
  std::uint64_t now_ = 0;
};

}  // namespace tessera::noc
