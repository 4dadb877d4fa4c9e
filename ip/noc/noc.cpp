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

unsigned FlitNetwork::opposite(unsigned port) {
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

void FlitNetwork::vc_range(Packet& p, unsigned node, unsigned port, unsigned& lo, unsigned& hi) const {
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
  source_[p.src].push_back(slot);
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

PacketNetwork::PacketNetwork(const NocConfig& c) : Network(c), busy_(c.nodes() * kPorts), inject_free_(c.nodes(), 0) {}

void PacketNetwork::advance(Calendar& k, std::uint64_t horizon) {
  if (horizon < k.base + 64) return;
  const std::uint64_t words = (horizon - k.base) / 64;
  std::uint64_t* w = k.words();
  if (words >= k.size) {  // everything booked is in the past
    std::fill(w, w + k.size, 0);
    k.first = 0;
    k.base = horizon & ~std::uint64_t(63);
    return;
  }
  for (std::uint64_t i = 0; i < words; ++i) {
    w[k.first] = 0;
    k.first = (k.first + 1) & (k.size - 1);
  }
  k.base += 64 * words;
}

void PacketNetwork::grow(Calendar& k, std::uint64_t last) {
  std::uint32_t size = k.size;
  while (k.base + 64 * std::uint64_t(size) <= last) size *= 2;
  auto words = std::make_unique<std::uint64_t[]>(size);  // zeroed
  const std::uint64_t* old = k.words();
  for (std::uint32_t i = 0; i < k.size; ++i) words[i] = old[(k.first + i) & (k.size - 1)];
  k.heap = std::move(words);
  k.size = size;
  k.first = 0;
}

std::uint64_t PacketNetwork::reserve(unsigned link, std::uint64_t earliest, unsigned length, std::uint64_t horizon) {
  Calendar& k = busy_[link];
  advance(k, horizon);
  std::uint64_t t = std::max(earliest, k.base);
  // Fast path: the interval lies in one word of the ring and that word has room.
  if (const unsigned lo = static_cast<unsigned>(t % 64); lo + length <= 64 && t < k.end()) {
    std::uint64_t& w = k.word(t);
    const std::uint64_t mask = (length == 64 ? ~0ull : ((1ull << length) - 1)) << lo;
    if (!(w & mask)) {
      w |= mask;
      return t;
    }
    // The first run of `length` free cycles later in the same word.
    if (length <= 16) {
      std::uint64_t run = ~w;
      for (unsigned i = 1; i < length; ++i) run &= ~w >> i | (~0ull << (64 - i));  // cycles past the word count as free here
      run &= (~0ull << lo) & (~0ull >> (length - 1));  // starts at or after lo, ends inside the word
      if (run) {
        const unsigned at = static_cast<unsigned>(__builtin_ctzll(run));
        w |= (length == 64 ? ~0ull : ((1ull << length) - 1)) << at;
        return (t & ~std::uint64_t(63)) + at;
      }
    }
  }
  for (;;) {
    // Is [t, t + length) free? If not, start again after its last busy cycle.
    const std::uint64_t end = std::min(t + length, k.end());  // nothing is booked beyond the ring
    std::uint64_t last_busy = 0;
    bool busy = false;
    for (std::uint64_t c = t; c < end;) {
      const unsigned lo = static_cast<unsigned>(c % 64);
      const unsigned n = static_cast<unsigned>(std::min<std::uint64_t>(64 - lo, end - c));
      const std::uint64_t mask = (n == 64 ? ~0ull : ((1ull << n) - 1)) << lo;
      if (const std::uint64_t hit = k.word(c) & mask) {
        busy = true;
        last_busy = (c & ~std::uint64_t(63)) + (63 - static_cast<unsigned>(__builtin_clzll(hit)));
      }
      c += n;
    }
    if (!busy) break;
    t = last_busy + 1;
  }
  // Book it.
  if (t + length > k.end()) grow(k, t + length - 1);
  for (std::uint64_t c = t; c < t + length;) {
    const unsigned lo = static_cast<unsigned>(c % 64);
    const unsigned n = static_cast<unsigned>(std::min<std::uint64_t>(64 - lo, t + length - c));
    k.word(c) |= (n == 64 ? ~0ull : ((1ull << n) - 1)) << lo;
    c += n;
  }
  return t;
}

void PacketNetwork::offer(const Packet& in) {
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
  const unsigned L = p.flits;
  std::uint64_t t = std::max(p.created + cfg_.inject, inject_free_[p.src]);
  inject_free_[p.src] = t + L;
  p.injected = t;
  // Dimension order, the short way round where the network wraps.
  const unsigned W = cfg_.width, H = cfg_.height;
  const bool wrap = cfg_.wraps_around();
  unsigned x = p.src % W, y = p.src / W;
  const unsigned tx = p.dst % W, ty = p.dst / W;
  const unsigned front = cfg_.rc + cfg_.va, hop = cfg_.sa + cfg_.st + cfg_.link;
  unsigned hops = 0;
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
    const std::uint64_t sa = reserve(node * kPorts + port, t + front, L, p.created);
    if (port == kLocal) {
      p.delivered = sa + cfg_.sa + cfg_.st + (L - 1) + cfg_.eject;
      break;
    }
    links_[node * kPorts + port].flits += L;
    routers_[node].flits += L;
    ++hops;
    t = sa + hop;
  }
  p.hops += hops;
  routers_[p.dst].flits += L;
  ++routers_[p.src].injected;
  ++routers_[p.dst].ejected;
  last_delivery_ = p.delivered;
  ++pending_;
  if (p.delivered < now_ + kCalendar) calendar_[p.delivered % kCalendar].push_back(slot);
  else overflow_.emplace(p.delivered, slot);
}

void PacketNetwork::run_until(std::uint64_t until) {
  for (; now_ <= until; ++now_) {
    if (pending_ == 0) {
      now_ = until + 1;
      break;
    }
    // Far-future packets come into the calendar as it reaches them.
    while (!overflow_.empty() && overflow_.top().first < now_ + kCalendar) {
      calendar_[overflow_.top().first % kCalendar].push_back(overflow_.top().second);
      overflow_.pop();
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
