#include "noc/noc.hpp"

#include <algorithm>

namespace tessera::noc {

std::string NocConfig::check(std::string* key) const {
  auto bad = [key](const char* k, const char* why) {
    if (key) *key = k;
    return std::string(why);
  };
  if (topology != "mesh" && topology != "torus" && topology != "ring") return bad("topology", "topology must be mesh, torus or ring");
  if (topology == "ring" && height != 1) return bad("height", "a ring has height 1");
  if (width == 0 || height == 0 || width * height > 4096) return bad("width", "width x height must be between 1 and 4096 nodes");
  if (topology != "mesh" && (vcs % (2 * classes)))
    return bad("vcs", "a torus or ring needs vcs divisible by 2 x classes (datelines)");
  if (topology != "mesh" && routing != "xy") return bad("routing", "a torus or ring routes dimension order (xy)");
  if (routing != "xy" && routing != "west_first") return bad("routing", "routing must be xy or west_first");
  if (classes == 0 || vcs < classes || vcs % classes) return bad("vcs", "vcs must be a positive multiple of classes");
  if (buffer == 0) return bad("buffer", "buffer must hold at least one flit");
  // rc may be 0: lookahead routing (the route computed a hop ahead, BookSim's default mesh).
  if (va == 0 || sa == 0 || st == 0)
    return bad(va == 0 ? "va" : sa == 0 ? "sa" : "st", "the va, sa and st router stages take at least one cycle (rc may be 0)");
  if (credit_delay == 0) return bad("credit_delay", "credit_delay must be at least one cycle");
  if (vc_release != "tail" && vc_release != "credit") return bad("vc_release", "vc_release must be tail or credit");
  if (sa_allocator != "separable" && sa_allocator != "islip" && sa_allocator != "wavefront")
    return bad("sa_allocator", "sa_allocator must be separable, islip or wavefront");
  if (sa_iterations == 0 || sa_iterations > kPorts) return bad("sa_iterations", "sa_iterations must be 1 to 5");
  if (inject > 1000 || eject > 1000) return bad(inject > 1000 ? "inject" : "eject", "inject and eject take at most 1000 cycles");
  if (flit_bytes == 0) return bad("flit_bytes", "flit_bytes must be positive");
  if (flit_bytes > 4096) return bad("flit_bytes", "flit_bytes must be at most 4096");
  if (header_bytes > flit_bytes) return bad("header_bytes", "header_bytes must fit in one (head) flit: at most flit_bytes");
  if (vcs > 64 || buffer > 1024) return bad(vcs > 64 ? "vcs" : "buffer", "at most 64 vcs of at most 1024 flits each");
  if (std::uint64_t(nodes()) * 5 * vcs * buffer > (1u << 22))  // the routers' buffers: ~100 MB at the flit level
    return bad(buffer > 4 ? "buffer" : "vcs", "nodes x 5 ports x vcs x buffer must be at most 4 Mi flits of buffer");
  return "";
}

unsigned Network::hops(const NocConfig& c, unsigned src, unsigned dst) {
  const int dx = static_cast<int>(dst % c.width) - static_cast<int>(src % c.width);
  const int dy = static_cast<int>(dst / c.width) - static_cast<int>(src / c.width);
  if (!c.wraps_around()) return static_cast<unsigned>(std::abs(dx) + std::abs(dy));
  const unsigned ax = static_cast<unsigned>(std::abs(dx)), ay = static_cast<unsigned>(std::abs(dy));
  return std::min(ax, c.width - ax) + std::min(ay, c.height - ay);
}

unsigned Network::dor_port(const NocConfig& c, unsigned node, unsigned dst) {
  const unsigned x = node % c.width, y = node / c.width, tx = dst % c.width, ty = dst / c.width;
  if (!c.wraps_around()) {
    if (tx > x) return kEast;
    if (tx < x) return kWest;
    if (ty > y) return kNorth;
    if (ty < y) return kSouth;
    return kLocal;
  }
  if (tx != x) return (tx + c.width - x) % c.width <= c.width / 2 ? kEast : kWest;
  if (ty != y) return (ty + c.height - y) % c.height <= c.height / 2 ? kNorth : kSouth;
  return kLocal;
}

int Network::neighbour(const NocConfig& c, unsigned node, unsigned port) {
  const unsigned x = node % c.width, y = node / c.width;
  const bool wrap = c.wraps_around();
  switch (port) {
    case kEast: return x + 1 < c.width ? static_cast<int>(node + 1) : wrap ? static_cast<int>(node + 1 - c.width) : -1;
    case kWest: return x > 0 ? static_cast<int>(node - 1) : wrap ? static_cast<int>(node + c.width - 1) : -1;
    case kNorth:
      return y + 1 < c.height ? static_cast<int>(node + c.width) : wrap && c.height > 1 ? static_cast<int>(x) : -1;
    case kSouth:
      return y > 0 ? static_cast<int>(node - c.width)
                   : wrap && c.height > 1 ? static_cast<int>((c.height - 1) * c.width + x) : -1;
    default: return -1;
  }
}

bool Network::wraps(const NocConfig& c, unsigned node, unsigned port) {
  const unsigned x = node % c.width, y = node / c.width;
  if (!c.wraps_around()) return false;
  return (port == kEast && x + 1 == c.width) || (port == kWest && x == 0) || (port == kNorth && y + 1 == c.height) ||
         (port == kSouth && y == 0);
}

CutShare cut_share(const NocConfig& c, const std::vector<unsigned>& from, const std::vector<unsigned>& to) {
  std::vector<double> load(std::size_t(c.nodes()) * kPorts, 0.0);
  double flows = 0;
  for (const unsigned s : from)
    for (const unsigned d : to) {
      if (s == d) continue;
      flows += 1;
      for (unsigned node = s;;) {
        const unsigned port = Network::dor_port(c, node, d);
        load[node * kPorts + port] += 1;
        if (port == kLocal) break;
        node = static_cast<unsigned>(Network::neighbour(c, node, port));
      }
    }
  CutShare best;
  if (flows == 0) return best;
  for (std::size_t i = 0; i < load.size(); ++i)
    if (load[i] / flows > best.share) {
      best.share = load[i] / flows;
      best.node = static_cast<unsigned>(i / kPorts);
      best.port = static_cast<unsigned>(i % kPorts);
    }
  return best;
}

// ---- flit level -----------------------------------------------------------------

FlitNetwork::FlitNetwork(const NocConfig& c)
    : Network(c), credit_release_(c.vc_release == "credit"),
      sa_(c.sa_allocator == "islip" ? Sa::islip : c.sa_allocator == "wavefront" ? Sa::wavefront : Sa::separable), routers_state_(c.nodes()), source_(c.nodes()),
      injecting_flit_(c.nodes(), 0), injecting_vc_(c.nodes(), -1) {
  for (Router& r : routers_state_) {
    r.in.resize(kPorts * c.vcs);
    for (InputVc& iv : r.in) iv.buf.slots.resize(c.buffer);
    r.out.resize(kPorts);
    for (Output& o : r.out) {
      o.credits.assign(c.vcs, c.buffer);
      o.owner.assign(c.vcs, -1);
      o.releasing.assign(c.vcs, false);
    }
  }
}

unsigned Network::opposite(unsigned port) {
  switch (port) {
    case kEast: return kWest;
    case kWest: return kEast;
    case kNorth: return kSouth;
    case kSouth: return kNorth;
    default: return kLocal;
  }
}

unsigned FlitNetwork::route(unsigned node, const Packet& p, const Router& r) const {
  const int dx = static_cast<int>(p.dst % cfg_.width) - static_cast<int>(node % cfg_.width);
  const int dy = static_cast<int>(p.dst / cfg_.width) - static_cast<int>(node / cfg_.width);
  if (!west_first_ || dx < 0) return dor_port(cfg_, node, p.dst);  // west-first: all west hops first
  // West-first, no west hop left: any productive direction, the one with
  // the most free buffer space downstream in this packet's class.
  unsigned best = kLocal;
  long best_credit = -1;
  for (unsigned port : {kEast, kNorth, kSouth}) {
    const bool productive = (port == kEast && dx > 0) || (port == kNorth && dy > 0) || (port == kSouth && dy < 0);
    if (!productive) continue;
    long credit = 0;
    for (unsigned v = vc_lo(p.cls); v < vc_hi(p.cls); ++v) credit += r.out[port].credits[v];
    if (credit > best_credit) best = port, best_credit = credit;
  }
  return best;
}

void Network::vc_range(const Packet& p, unsigned node, unsigned port, unsigned& lo, unsigned& hi) const {
  lo = vc_lo(p.cls);
  hi = vc_hi(p.cls);
  if (!cfg_.wraps_around()) return;
  // Datelines: the lower half of the class's VCs before the wrap-around
  // link of the current dimension, the upper half from it on.
  const std::uint8_t dim = port == kEast || port == kWest ? 1 : 2;
  const bool crossed = (p.dim == dim && p.crossed) || wraps(cfg_, node, port);
  const unsigned half = (hi - lo) / 2;
  if (crossed) lo += half;
  else hi -= half;
}

void FlitNetwork::offer(const Packet& p) {
  std::uint32_t slot;
  if (!free_packets_.empty()) {
    slot = free_packets_.back();
    free_packets_.pop_back();
    packets_[slot] = p;
  } else {
    slot = static_cast<std::uint32_t>(packets_.size());
    packets_.push_back(p);
  }
  // Behind the packets of earlier cycles, and of the same cycle with a
  // smaller or equal key; never ahead of one that is entering already.
  std::deque<std::uint32_t>& q = source_[p.src];
  auto at = q.end();
  while (at != q.begin()) {
    const auto before = std::prev(at);
    if (before == q.begin() && (injecting_flit_[p.src] > 0 || injecting_vc_[p.src] >= 0)) break;
    const Packet& o = packets_[*before];
    if (o.created < p.created || (o.created == p.created && o.order <= p.order)) break;
    at = before;
  }
  q.insert(at, slot);
  ++in_flight_;
}

void FlitNetwork::run_until(std::uint64_t until) {
  while (now_ <= until) {
    if (in_flight_ == 0 && wires_.empty() && credits_.empty()) {
      now_ = until + 1;  // nothing moves: jump
      return;
    }
    step();
  }
}

void FlitNetwork::allocate(Router& r, const int (&req)[kPorts][kPorts], int (&match)[kPorts]) {
  bool in_used[kPorts] = {};
  for (unsigned out = 0; out < kPorts; ++out) match[out] = -1;
  switch (sa_) {
    case Sa::separable:  // each output takes the first requesting input from its pointer
      for (unsigned out = 0; out < kPorts; ++out)
        for (unsigned k = 0; k < kPorts && match[out] < 0; ++k) {
          const unsigned in = (r.out[out].rr_in + k) % kPorts;
          if (req[in][out] >= 0) match[out] = static_cast<int>(in);
        }
      return;
    case Sa::islip:
      for (unsigned it = 0; it < cfg_.sa_iterations; ++it) {
        int grant[kPorts];  // per output: the input it grants
        for (unsigned out = 0; out < kPorts; ++out) {
          grant[out] = -1;
          if (match[out] >= 0) continue;
          for (unsigned k = 0; k < kPorts && grant[out] < 0; ++k) {
            const unsigned in = (r.out[out].rr_in + k) % kPorts;
            if (!in_used[in] && req[in][out] >= 0) grant[out] = static_cast<int>(in);
          }
        }
        bool any = false;
        for (unsigned in = 0; in < kPorts; ++in) {
          if (in_used[in]) continue;
          for (unsigned k = 0; k < kPorts; ++k) {
            const unsigned out = (r.rr_accept[in] + k) % kPorts;
            if (grant[out] != static_cast<int>(in)) continue;
            match[out] = static_cast<int>(in);
            in_used[in] = any = true;
            if (it == 0) {  // pointers move only for first-round matches (iSLIP's rule)
              r.out[out].rr_in = (in + 1) % kPorts;
              r.rr_accept[in] = (out + 1) % kPorts;
            }
            break;
          }
        }
        if (!any) break;
      }
      return;
    case Sa::wavefront:
      for (unsigned d = 0; d < kPorts; ++d) {
        const unsigned diag = (r.wavefront + d) % kPorts;
        for (unsigned in = 0; in < kPorts; ++in) {
          const unsigned out = (diag + kPorts - in) % kPorts;  // the cells with in + out = diag (mod kPorts)
          if (!in_used[in] && match[out] < 0 && req[in][out] >= 0) {
            match[out] = static_cast<int>(in);
            in_used[in] = true;
          }
        }
      }
      r.wavefront = (r.wavefront + 1) % kPorts;
      return;
  }
}

void FlitNetwork::step() {
  const unsigned V = cfg_.vcs;
  // Links and credits due this cycle.
  while (!wires_.empty() && wires_.front().at <= now_) {
    InFlight& w = wires_.front();
    Router& r = routers_state_[w.node];
    r.in[w.port * V + w.vc].buf.push_back(w.flit);
    ++r.active;
    r.needs_rc = true;
    wires_.pop_front();
  }
  while (!credits_.empty() && credits_.front().at <= now_) {
    const Credit& c = credits_.front();
    Output& o = routers_state_[c.node].out[c.port];
    // With vc_release "credit", the VC frees when its last flit's credit is back.
    if (++o.credits[c.vc] == cfg_.buffer && o.releasing[c.vc]) {
      o.releasing[c.vc] = false;
      o.owner[c.vc] = -1;
    }
    credits_.pop_front();
  }
  // Injection: one flit per node and cycle into a local input VC.
  for (unsigned n = 0; n < cfg_.nodes(); ++n) {
    if (source_[n].empty()) continue;
    Router& r = routers_state_[n];
    Packet& p = packets_[source_[n].front()];
    if (injecting_vc_[n] < 0) {
      for (unsigned v = vc_lo(p.cls); v < vc_hi(p.cls); ++v) {
        InputVc& iv = r.in[kLocal * V + v];
        if (iv.buf.empty() && iv.state == VcState::idle) {
          injecting_vc_[n] = static_cast<int>(v);
          break;
        }
      }
      if (injecting_vc_[n] < 0) continue;
    }
    InputVc& iv = r.in[kLocal * V + static_cast<unsigned>(injecting_vc_[n])];
    if (iv.buf.size() >= cfg_.buffer) continue;
    const unsigned f = injecting_flit_[n];
    if (f == 0 && now_ < p.created + cfg_.inject) continue;  // still on the injection channel
    if (f == 0) {
      p.injected = now_;
      ++routers_[n].injected;
      routers_[n].injected_flits += p.flits;
    }
    iv.buf.push_back(Flit{source_[n].front(), f == 0, f + 1 == p.flits, now_});
    ++r.active;
    r.needs_rc = true;
    if (f + 1 == p.flits) {
      source_[n].pop_front();
      injecting_flit_[n] = 0;
      injecting_vc_[n] = -1;
    } else {
      injecting_flit_[n] = f + 1;
    }
  }
  // Routers.
  for (unsigned n = 0; n < cfg_.nodes(); ++n) {
    Router& r = routers_state_[n];
    if (r.active == 0) continue;
    // Route computation for heads at the front of idle VCs.
    if (r.needs_rc) {
      r.needs_rc = false;
      for (unsigned i = 0; i < kPorts * V; ++i) {
        InputVc& iv = r.in[i];
        if (iv.state != VcState::idle || iv.buf.empty()) continue;
        const Flit& f = iv.buf.front();
        iv.out_port = route(n, packets_[f.packet], r);
        iv.ready = std::max(f.ready, now_) + cfg_.rc;
        iv.state = VcState::routing;
        ++r.routing;
      }
    }
    // VC allocation: one pass over the waiting VCs from a rotating start.
    for (unsigned k = 0; k < kPorts * V && r.routing; ++k) {
      {
        const unsigned i = (r.va_rr + k) % (kPorts * V);
        InputVc& iv = r.in[i];
        if (iv.state != VcState::routing || iv.ready > now_) continue;
        const unsigned port = iv.out_port;
        Output& o = r.out[port];
        Packet& p = packets_[iv.buf.front().packet];
        if (port == kLocal) {  // the endpoint takes any packet
          iv.out_vc = 0;
        } else {
          bool got = false;
          unsigned lo, hi;
          vc_range(p, n, port, lo, hi);
          for (unsigned v = lo; v < hi && !got; ++v) {
            const unsigned vc = lo + (o.rr_vc + v - lo) % (hi - lo);
            if (o.owner[vc] < 0) {
              o.owner[vc] = static_cast<int>(i);
              iv.out_vc = vc;
              got = true;
            }
          }
          if (!got) {
            ++routers_[n].allocation_stalls;
            continue;
          }
          o.rr_vc = (iv.out_vc + 1) % V;
        }
        iv.state = VcState::active;
        iv.ready = now_ + cfg_.va;
        --r.routing;
        r.va_rr = (i + 1) % (kPorts * V);
      }
    }
    // Switch allocation: each input port picks one VC, each output port one input.
    // Each input port's ready VCs, by the output they want (round robin over
    // the VCs from the port's pointer): req[in][out] is the VC, or -1.
    int req[kPorts][kPorts];
    for (unsigned port = 0; port < kPorts; ++port) {
      for (unsigned out = 0; out < kPorts; ++out) req[port][out] = -1;
      for (unsigned k = 0; k < V; ++k) {
        const unsigned v = (r.rr_port_vc[port] + k) % V;
        InputVc& iv = r.in[port * V + v];
        if (iv.state != VcState::active || iv.ready > now_ || iv.buf.empty() || iv.buf.front().ready > now_) continue;
        if (iv.out_port != kLocal && r.out[iv.out_port].credits[iv.out_vc] == 0) {
          ++routers_[n].credit_stalls;
          continue;
        }
        if (req[port][iv.out_port] < 0) req[port][iv.out_port] = static_cast<int>(v);
        if (sa_ == Sa::separable) break;  // input first: one VC per input port
      }
    }
    // The matching: match[out] is the input port it serves, or -1.
    int match[kPorts];
    allocate(r, req, match);
    for (unsigned out = 0; out < kPorts; ++out) {
      Output& o = r.out[out];
      const int winner = match[out];
      for (unsigned in = 0; in < kPorts; ++in)
        if (static_cast<int>(in) != winner && req[in][out] >= 0) ++routers_[n].allocation_stalls;
      if (winner < 0) continue;
      if (sa_ == Sa::separable) o.rr_in = (static_cast<unsigned>(winner) + 1) % kPorts;
      const unsigned in_port = static_cast<unsigned>(winner), v = static_cast<unsigned>(req[in_port][out]);
      r.rr_port_vc[in_port] = (v + 1) % V;
      InputVc& iv = r.in[in_port * V + v];
      Flit f = iv.buf.front();
      iv.buf.pop_front();
      --r.active;
      ++routers_[n].flits;
      // The freed buffer slot: a credit upstream (the source reads its buffer directly).
      if (in_port != kLocal)
        credits_.push_back({now_ + cfg_.credit_delay, static_cast<unsigned>(neighbour(n, in_port)), opposite(in_port), v});
      if (out == kLocal) {
        if (f.tail) {
          Packet& p = packets_[f.packet];
          ++routers_[n].ejected;
          routers_[n].ejected_flits += p.flits;
          p.delivered = now_ + cfg_.sa + cfg_.st + cfg_.eject;
          --in_flight_;
          if (delivered_) delivered_(p);
          free_packets_.push_back(f.packet);
        }
      } else {
        --o.credits[iv.out_vc];
        ++links_[n * kPorts + out].flits;
        const unsigned next = static_cast<unsigned>(neighbour(n, out));
        if (f.head) {
          Packet& p = packets_[f.packet];
          ++p.hops;
          const std::uint8_t dim = out == kEast || out == kWest ? 1 : 2;
          p.crossed = (p.dim == dim && p.crossed) || wraps(cfg_, n, out);
          p.dim = dim;
        }
        f.ready = now_ + cfg_.sa + cfg_.st + cfg_.link;
        wires_.push_back({f.ready, next, opposite(out), iv.out_vc, f});
        if (f.tail) {
          if (credit_release_) o.releasing[iv.out_vc] = true;
          else o.owner[iv.out_vc] = -1;
        }
      }
      if (f.tail) {
        iv.state = VcState::idle;
        if (!iv.buf.empty()) r.needs_rc = true;
      }
    }
  }
  // Wires and credits were appended in time order per cycle; keep them sorted.
  ++now_;
}

// ---- packet level ---------------------------------------------------------------

PacketNetwork::PacketNetwork(const NocConfig& c)
    : Network(c), inject_free_(c.nodes(), 0), depth_(c.buffer), stride_(kRing + depth_), per_class_(c.vcs / c.classes),
      lanes_(std::size_t(c.nodes()) * kPorts * c.vcs * stride_, 0), lane_rr_(std::size_t(c.nodes()) * kPorts, 0) {
  backlog_.resize(c.nodes());
  inputs_ = c.nodes() * kPorts;
  cal_.assign(std::size_t(2) * inputs_ * ring_, 0);
}

void PacketNetwork::raise_floor(std::uint64_t word) {
  if (word <= floor_) return;
  // The words behind the new floor are never read again: their slots start afresh.
  const std::uint64_t last = std::min(word, floor_ + ring_);
  for (std::size_t k = 0; k < cal_.size(); k += ring_)
    for (std::uint64_t w = floor_; w < last; ++w) cal_[k + (w & mask_)] = 0;
  floor_ = word;
}

void PacketNetwork::grow(std::uint64_t word) {
  std::uint64_t ring = ring_;
  while (word - floor_ >= ring) ring *= 2;
  std::vector<std::uint64_t> grown(cal_.size() / ring_ * ring, 0);
  for (std::size_t k = 0; k < cal_.size() / ring_; ++k)
    for (std::uint64_t w = floor_; w < floor_ + ring_; ++w) grown[k * ring + (w & (ring - 1))] = cal_[k * ring_ + (w & mask_)];
  cal_ = std::move(grown);
  ring_ = ring;
  mask_ = ring - 1;
}

[[gnu::always_inline]] inline std::uint64_t PacketNetwork::free_at(unsigned k, std::uint64_t c) const {
  c = std::max(c, floor_ * 64);  // nothing before the floor is kept
  const std::uint64_t* r = &cal_[std::size_t(k) * ring_];
  std::uint64_t m = ~0ull << (c % 64);
  for (std::uint64_t w = c / 64;; ++w, m = ~0ull) {
    if (w - floor_ >= ring_) return std::max(c, w * 64);  // nothing is booked beyond the rings
    if (const std::uint64_t free = ~r[w & mask_] & m) return w * 64 + static_cast<unsigned>(__builtin_ctzll(free));
  }
}

[[gnu::always_inline]] inline std::uint64_t PacketNetwork::both_free(unsigned o, unsigned i, std::uint64_t c) const {
  c = std::max(c, floor_ * 64);
  const std::uint64_t* ro = &cal_[std::size_t(o) * ring_];
  const std::uint64_t* ri = &cal_[std::size_t(i) * ring_];
  std::uint64_t m = ~0ull << (c % 64);
  for (std::uint64_t w = c / 64;; ++w, m = ~0ull) {
    if (w - floor_ >= ring_) return std::max(c, w * 64);
    if (const std::uint64_t free = ~(ro[w & mask_] | ri[w & mask_]) & m)
      return w * 64 + static_cast<unsigned>(__builtin_ctzll(free));
  }
}

[[gnu::always_inline]] inline void PacketNetwork::book(unsigned k, std::uint64_t c) {
  const std::uint64_t w = c / 64;
  if (w - floor_ >= ring_) grow(w);
  cal_[std::size_t(k) * ring_ + (w & mask_)] |= 1ull << (c % 64);
}

void PacketNetwork::book(unsigned k, std::uint64_t from, std::uint64_t to) {
  if ((to - 1) / 64 - floor_ >= ring_) grow((to - 1) / 64);
  for (std::uint64_t c = from; c < to;) {
    const unsigned lo = static_cast<unsigned>(c % 64);
    const unsigned n = static_cast<unsigned>(std::min<std::uint64_t>(64 - lo, to - c));
    cal_[std::size_t(k) * ring_ + ((c / 64) & mask_)] |= (n == 64 ? ~0ull : ((1ull << n) - 1)) << lo;
    c += n;
  }
}

template <unsigned kL>
[[gnu::always_inline]] inline void PacketNetwork::serve(unsigned out, unsigned in, std::uint64_t* time, unsigned flits) {
  const unsigned length = kL ? kL : flits;
  const unsigned i = inputs_ + in;
  // The head is presented to the switch from the first cycle the input port
  // is free; while it waits for the output the input port sends nothing
  // (an input-first separable allocator's pointer stays on a VC until it
  // wins). Body flits take turns with the port's other VCs, so a packet of
  // L flits holds its port for 1/L of its head's wait; at an injection
  // port, for 2/(L + 1) (calibrated against the flit level on the HBM row's
  // fanout, where the stacks' injection ports meet through traffic on both
  // sides: with 1/L there the sources queued half as long as at the flit
  // level).
  std::uint64_t last = 0;
  for (unsigned j = 0; j < length; ++j) {
    // Flit by flit: each leaves in the first cycle at or after it may that
    // both the output link and the input port are free (flits of other
    // packets interleave, as the flit level's allocators let them).
    const std::uint64_t c = both_free(out, i, j ? std::max(time[j], last + 1) : time[0]);
    book(out, c);
    if (j == 0 && c > time[0]) {  // the head waited
      const std::uint64_t presented = free_at(i, time[0]);
      const bool injection = in % kPorts == kLocal;
      book(i, c - (c - presented) * (injection ? 2 : 1) / (injection ? length + 1 : length), c + 1);
    } else {
      book(i, c);
    }
    time[j] = last = c;
  }
}

[[gnu::always_inline]] inline unsigned PacketNetwork::pick_lane(unsigned port_index, unsigned lo, unsigned hi, unsigned flits, std::uint64_t from) {
  // The lane (VC) whose buffer takes the packet's flits first, counted from
  // `from` (the head's earliest departure upstream): lanes with room by
  // then tie, and ties go round robin, as the flit level's VC allocator's.
  const unsigned D = depth_, n = std::min(flits, D), count = hi - lo;
  unsigned& rr = lane_rr_[port_index];
  unsigned best = rr, v = rr;
  std::uint64_t room = ~0ull;
  for (unsigned k = 0; k < count; ++k, v = v + 1 == count ? 0 : v + 1) {
    const std::uint64_t* l = lane(port_index * cfg_.vcs + lo + v);
    const std::uint64_t* ring = l + kRing;
    unsigned at = static_cast<unsigned>(l[kPos]);
    std::uint64_t r = std::max(from, ring[at]);
    for (unsigned j = 1; j < n && r < room; ++j) {
      at = at + 1 == D ? 0 : at + 1;
      if (ring[at] > r + j) r = ring[at] - j;
    }
    if (r < room) {
      room = r;
      best = v;
      if (r == from) break;
    }
  }
  rr = best + 1 == count ? 0 : best + 1;
  return port_index * cfg_.vcs + lo + best;
}

void PacketNetwork::offer(const Packet& p) {
  std::deque<Packet>& backlog = backlog_[p.src];
  if (!backlog.empty() || inject_free_[p.src] > p.created + kBacklog) {
    if (backlog.empty()) {
      ++backlogged_;
      next_release_ = std::min(next_release_, inject_free_[p.src] - kBacklog);
    }
    backlog.push_back(p);
    ++pending_;
    last_delivery_ = ~0ull;  // known when it leaves the backlog
    return;
  }
  compute(p, p.created);
}

void PacketNetwork::release(std::uint64_t now) {
  next_release_ = ~0ull;
  for (unsigned s = 0; s < backlog_.size(); ++s) {
    std::deque<Packet>& backlog = backlog_[s];
    if (backlog.empty()) continue;
    while (!backlog.empty() && inject_free_[s] <= now + kBacklog) {
      --pending_;  // compute() counts it again
      compute(backlog.front(), now);
      backlog.pop_front();
      if (scheduled_) scheduled_(pool_[last_slot_]);
    }
    if (backlog.empty()) --backlogged_;
    else next_release_ = std::min(next_release_, inject_free_[s] - kBacklog);
  }
}

void PacketNetwork::compute(const Packet& in, std::uint64_t at) {
  std::uint32_t slot;
  if (!free_.empty()) {
    slot = free_.back();
    free_.pop_back();
  } else {
    slot = static_cast<std::uint32_t>(pool_.size());
    pool_.emplace_back();
  }
  Packet& p = pool_[slot];
  p = in;
  last_slot_ = slot;
  // The common sizes with their flit count known to the compiler (the
  // per-flit loops unrolled, the flits' times in registers).
  switch (p.flits) {
    case 1: return offer_as<1>(p, slot, at);
    case 2: return offer_as<2>(p, slot, at);
    case 3: return offer_as<3>(p, slot, at);
    case 4: return offer_as<4>(p, slot, at);
    default: return offer_as<0>(p, slot, at);
  }
}

template <unsigned kL>
void PacketNetwork::offer_as(Packet& p, std::uint32_t slot, std::uint64_t at) {
  const unsigned L = kL ? kL : p.flits, D = depth_, V = cfg_.vcs;
  std::uint64_t fixed[kL ? kL : 1];
  if (!kL && time_.size() < L) time_.resize(L);
  std::uint64_t* time = kL ? fixed : time_.data();
  const unsigned class_lo = p.cls * per_class_, class_hi = class_lo + per_class_;
  // The source queue: the head enters an empty local VC (lane).
  std::uint64_t t = std::max(p.created + cfg_.inject, inject_free_[p.src]);
  unsigned li = 0;
  {
    std::uint64_t empty = ~0ull;
    for (unsigned v = class_lo; v < class_hi; ++v) {
      const unsigned i = (p.src * kPorts + kLocal) * V + v;
      if (lane(i)[kDeparted] < empty) empty = lane(i)[kDeparted], li = i;
    }
    t = std::max(t, empty);
  }
  inject_free_[p.src] = t + L;
  p.injected = t;
  // No packet offered from now on books a cycle before the horizon: each
  // enters its source router after its creation and after the packets
  // queued there before it.
  if (at >= horizon_at_ + kCalendar || at < horizon_at_) {
    horizon_at_ = at;
    horizon_ = ~0ull;
    for (const std::uint64_t f : inject_free_) horizon_ = std::min(horizon_, std::max(f, at));
  }
  raise_floor(std::max(horizon_, at) / 64);
  // time[j]: when flit j may take its next step (here: enters the source router).
  for (unsigned j = 0; j < L; ++j) time[j] = t + j;
  // Dimension order, the short way round where the network wraps.
  const unsigned W = cfg_.width, H = cfg_.height;
  const bool wrap = cfg_.wraps_around();
  unsigned x = p.src % W, y = p.src / W;
  const unsigned tx = p.dst % W, ty = p.dst / W;
  const unsigned front = cfg_.rc + cfg_.va, hop = cfg_.sa + cfg_.st + cfg_.link, cd = cfg_.credit_delay;
  unsigned hops = 0, in_port = kLocal;
  for (;;) {
    const unsigned node = y * W + x;
    unsigned port = kLocal;
    if (x != tx) {
      const bool east = wrap ? (tx + W - x) % W <= W / 2 : tx > x;
      port = east ? kEast : kWest;
      x = east ? (x + 1 == W ? 0 : x + 1) : (x == 0 ? W - 1 : x - 1);
    } else if (y != ty) {
      const bool north = wrap ? (ty + H - y) % H <= H / 2 : ty > y;
      port = north ? kNorth : kSouth;
      y = north ? (y + 1 == H ? 0 : y + 1) : (y == 0 ? H - 1 : y - 1);
    }
    std::uint64_t* here = lane(li);
    const std::uint64_t arrived = time[0];
    time[0] += front;  // the head is routed and given a VC
    if (here[kArrived] <= arrived) time[0] = std::max(time[0], here[kDeparted]);  // behind the packet ahead in this VC
    unsigned next = 0;
    if (port != kLocal) {  // room for the flits in a VC of the next router (credits)
      unsigned lo = class_lo, hi = class_hi;
      if (wrap) vc_range(p, node, port, lo, hi);
      next = pick_lane((y * W + x) * kPorts + opposite(port), lo, hi, L, time[0] > cd ? time[0] - cd : 0);
      const std::uint64_t* l = lane(next);
      const std::uint64_t* ring = l + kRing;
      unsigned at = static_cast<unsigned>(l[kPos]);
      for (unsigned j = 0; j < L; ++j) {
        // Flit j takes the slot its lane's j-th oldest flit frees, or (beyond
        // the buffer) the one this packet's flit j - D frees downstream.
        std::uint64_t freed;
        if (j < D) {
          freed = ring[at];
          at = at + 1 == D ? 0 : at + 1;
        } else {
          freed = time[j - D] + hop;
        }
        time[j] = std::max(time[j], freed + cd);
      }
    }
    serve<kL>(node * kPorts + port, node * kPorts + in_port, time, L);
    // The flits left this VC at time[0 .. L - 1].
    here[kArrived] = std::max(here[kArrived], arrived);
    here[kDeparted] = std::max(here[kDeparted], time[L - 1] + 1);
    std::uint64_t* ring = here + kRing;
    unsigned at = static_cast<unsigned>(here[kPos]);
    for (unsigned j = L > D ? L - D : 0; j < L; ++j) {
      ring[at] = time[j];
      at = at + 1 == D ? 0 : at + 1;
    }
    here[kPos] = at;
    if (port == kLocal) {
      p.delivered = time[L - 1] + cfg_.sa + cfg_.st + cfg_.eject;
      break;
    }
    links_[node * kPorts + port].flits += L;
    routers_[node].flits += L;
    ++hops;
    if (wrap) {
      const std::uint8_t dim = port == kEast || port == kWest ? 1 : 2;
      p.crossed = (p.dim == dim && p.crossed) || wraps(cfg_, node, port);
      p.dim = dim;
    }
    for (unsigned j = 0; j < L; ++j) time[j] += hop;
    in_port = opposite(port);
    li = next;
  }
  p.hops += hops;
  routers_[p.dst].flits += L;
  ++routers_[p.src].injected;
  ++routers_[p.dst].ejected;
  routers_[p.src].injected_flits += L;
  routers_[p.dst].ejected_flits += L;
  last_delivery_ = p.delivered;
  ++pending_;
  if (p.delivered < now_ + kCalendar) calendar_[p.delivered % kCalendar].push_back(slot);
  else overflow_[p.delivered / kCalendar].push_back(slot);
}

void PacketNetwork::run_until(std::uint64_t until) {
  for (; now_ <= until; ++now_) {
    if (pending_ == 0) {
      now_ = until + 1;
      break;
    }
    if (now_ >= next_release_) release(now_);
    // Far-future packets come into the calendar a stretch at a time, as it
    // reaches them.
    if (now_ % kCalendar == 0 && !overflow_.empty() && overflow_.begin()->first == now_ / kCalendar) {
      for (const std::uint32_t slot : overflow_.begin()->second) calendar_[pool_[slot].delivered % kCalendar].push_back(slot);
      overflow_.erase(overflow_.begin());
    }
    std::vector<std::uint32_t>& bucket = calendar_[now_ % kCalendar];
    for (const std::uint32_t slot : bucket) {
      --pending_;
      free_.push_back(slot);
      if (delivered_) {
        Packet p = pool_[slot];  // the callback may offer (and grow the pool)
        delivered_(p);
      }
    }
    bucket.clear();
  }
}

}  // namespace tessera::noc
