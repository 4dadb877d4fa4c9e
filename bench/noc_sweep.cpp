// Network studies and speed. Usage:
//   bench_noc                      speed: network cycles per host second, 8x8 mesh
//   bench_noc sweep PATTERN [options]
//       --size K (KxK mesh, default 8)  --vcs N  --buffer N  --flits N (packet size)
//       --routing xy|west_first  --model flit|packet|both  --hotspots a,b,... (hotspot, fanout)
//       --rates 0.05:0.6:0.05  --csv FILE  --heatmap FILE (router utilisation at the last rate)  --svg PREFIX
//       --self-traffic on|off (uniform: a node may pick itself, as BookSim's uniform does)
//       --platform FILE [--instance noc]  --set KEY=VALUE ...: every parameter of the noc type
//       (topology, width, height, routing, vcs, buffer, classes, rc, va, sa, st, link,
//       credit_delay, flit_bytes, header_bytes, model; tessera-vp --list-types), from a platform
//       file's instance or one by one; the short options above are applied after them
// A sweep prints offered load, accepted throughput, average and p99 latency
// and hops per rate, marks the first saturated rate, and writes CSV.
// --model both runs the flit and the packet level at every rate, prints
// the packet level's ratios to the flit level's, and with --svg PREFIX
// writes PREFIX_latency.svg and PREFIX_accepted.svg (both curves).
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <systemc>
#include <vector>

#include "model_params.hpp"
#include "svg.hpp"
#include "noc/noc.hpp"
#include "noc/noc_ip.hpp"
#include "noc/traffic.hpp"

using namespace tessera::noc;

namespace {

const bool kNoBanner = ::setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 0) == 0;

int speed() {
  // 1-flit packets are the worst case for the packet level (its cost is per
  // packet, the flit level's per flit); 3 flits is a 64-byte line with its
  // 16-byte header in 32-byte flits, the platform's common read response.
  fmt::print("{:<8} {:>6} {:>6} {:>12} {:>10} {:>16}\n", "model", "flits", "load", "cycles", "host s", "cycles/host s");
  for (const unsigned flits : {1u, 3u}) {
    double flit_rate[3] = {0, 0, 0};
    for (const char* model : {"flit", "packet"}) {
      const bool flit = !std::strcmp(model, "flit");
      int j = 0;
      for (const double load : {0.1, 0.3, 0.6}) {  // 0.6: beyond saturation (about 0.39)
        NocConfig c;
        c.vcs = 4;
        c.buffer = 4;
        std::unique_ptr<Network> net;
        if (flit) net = std::make_unique<FlitNetwork>(c);
        else net = std::make_unique<PacketNetwork>(c);
        TrafficConfig t;
        t.rate = load;
        t.packet_flits = flits;
        t.warmup = 0;
        // Beyond saturation the source queues grow without bound (at both
        // levels): the same short run for both there.
        t.measure = flit || load > 0.5 ? 20000 : 200000;
        t.drain_limit = 0;
        const auto t0 = std::chrono::steady_clock::now();
        const TrafficResult r = run_traffic(*net, t);
        const double host = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        const double rate = static_cast<double>(r.cycles) / host;
        if (flit) flit_rate[j] = rate;
        fmt::print("{:<8} {:>6} {:>6.1f} {:>12} {:>10.3f} {:>16.4g}{}\n", model, flits, load, r.cycles, host, rate,
                   flit ? std::string() : fmt::format("   ({:.1f}x flit level)", rate / flit_rate[j]));
        ++j;
      }
    }
  }
  return 0;
}

}  // namespace

int sc_main(int argc, char** argv) {
  if (argc < 2) return speed();
  if (std::string(argv[1]) != "sweep" || argc < 3) {
    std::fprintf(stderr, "usage: bench_noc [sweep PATTERN [--platform FILE [--instance NAME]] [--set KEY=VALUE]... "
                         "[--size K] [--vcs N] [--buffer N] [--flits N] [--routing R] [--model flit|packet] "
                         "[--hotspots a,b] [--rates lo:hi:step] [--csv FILE] [--heatmap FILE] [--svg PREFIX]]\n");
    return 2;
  }
  TrafficConfig t;
  t.pattern = argv[2];
  if (!known_pattern(t.pattern)) {
    std::fprintf(stderr, "bench_noc: unknown pattern \"%s\" (%s)\n", t.pattern.c_str(), pattern_names().c_str());
    return 2;
  }
  // Every parameter of the network, as the platform file names them; the
  // bench's defaults are the network's own (one message class).
  std::vector<std::string> args(argv + 3, argv + argc);
  tessera::bench::ModelParams mp;
  Noc::Config nc;
  nc.net = NocConfig{};
  if (!mp.parse(args, "noc") || !mp.configure(nc)) return 2;
  NocConfig c = nc.net;
  std::string model = nc.model, csv, heatmap, svg;
  double lo = 0.05, hi = 0.6, step = 0.05;
  for (std::size_t i = 0; i < args.size(); i += 2) {
    if (i + 1 >= args.size()) {
      std::fprintf(stderr, "bench_noc: %s needs a value\n", args[i].c_str());
      return 2;
    }
    const std::string k = args[i], v = args[i + 1];
    if (k == "--size") c.width = c.height = static_cast<unsigned>(std::stoul(v));
    else if (k == "--vcs") c.vcs = static_cast<unsigned>(std::stoul(v));
    else if (k == "--buffer") c.buffer = static_cast<unsigned>(std::stoul(v));
    else if (k == "--flits") t.packet_flits = static_cast<unsigned>(std::stoul(v));
    else if (k == "--routing") c.routing = v;
    else if (k == "--model") model = v;
    else if (k == "--self-traffic") {
      if (v != "on" && v != "off") {
        std::fprintf(stderr, "bench_noc: --self-traffic: on or off, not %s\n", v.c_str());
        return 2;
      }
      t.self_traffic = v == "on";
    }
    else if (k == "--csv") csv = v;
    else if (k == "--svg") svg = v;
    else if (k == "--heatmap") heatmap = v;
    else if (k == "--hotspots") {
      for (std::size_t p = 0; p < v.size();) {
        const auto comma = v.find(',', p);
        t.hotspots.push_back(static_cast<unsigned>(std::stoul(v.substr(p, comma - p))));
        p = comma == std::string::npos ? v.size() : comma + 1;
      }
    } else if (k == "--rates") {
      std::sscanf(v.c_str(), "%lf:%lf:%lf", &lo, &hi, &step);
    } else {
      std::fprintf(stderr, "bench_noc: unknown option %s\n", k.c_str());
      return 2;
    }
  }
  if (const std::string e = c.check(); !e.empty()) {
    std::fprintf(stderr, "bench_noc: %s\n", e.c_str());
    return 2;
  }
  if (model != "flit" && model != "packet" && model != "both") {
    std::fprintf(stderr, "bench_noc: --model: must be flit, packet or both, not %s\n", model.c_str());
    return 2;
  }
  if (!svg.empty() && model != "both") {
    std::fprintf(stderr, "bench_noc: --svg plots both levels: it needs --model both\n");
    return 2;
  }
  std::ofstream out;
  if (!csv.empty()) {
    out.open(csv);
    out << (model == "both" ? "model," : "") << "offered,accepted,latency_avg,latency_p99,hops_avg,saturated\n";
  }
  if (model == "both") {
    fmt::print("{} traffic, {}x{} {}, {} routing, {} VCs x {} flits, {}-flit packets: packet level against flit level\n",
               t.pattern, c.width, c.height, c.topology, c.routing, c.vcs, c.buffer, t.packet_flits);
    fmt::print("{:>8} {:>9} {:>9} {:>7} {:>10} {:>10} {:>7}\n", "offered", "accepted", "packet", "ratio", "latency",
               "packet", "ratio");
    std::vector<tessera::bench::Series> latency{{"flit level", {}}, {"packet level", {}}},
        accepted{{"flit level", {}}, {"packet level", {}}};
    for (double rate = lo; rate <= hi + 1e-9; rate += step) {
      t.rate = rate;
      FlitNetwork f(c);
      PacketNetwork p(c);
      const TrafficResult rf = run_traffic(f, t), rp = run_traffic(p, t);
      fmt::print("{:>8.3f} {:>9.3f} {:>9.3f} {:>7.3f} {:>10.1f} {:>10.1f} {:>7.3f}{}\n", rf.offered, rf.accepted,
                 rp.accepted, rp.accepted / rf.accepted, rf.latency_avg, rp.latency_avg, rp.latency_avg / rf.latency_avg,
                 rf.saturated ? "   (flit level saturated)" : "");
      for (int m = 0; m < 2; ++m) {
        const TrafficResult& r = m ? rp : rf;
        latency[m].points.emplace_back(rf.offered, r.latency_avg);
        accepted[m].points.emplace_back(rf.offered, r.accepted);
        if (out) out << (m ? "packet," : "flit,") << r.offered << ',' << r.accepted << ',' << r.latency_avg << ','
                     << r.latency_p99 << ',' << r.hops_avg << ',' << r.saturated << '\n';
      }
    }
    if (!svg.empty()) {
      const std::string what = fmt::format("{} {}x{}, {} VCs x {}, {}-flit packets", t.pattern, c.width, c.height,
                                           c.vcs, c.buffer, t.packet_flits);
      tessera::bench::write_svg(svg + "_latency.svg", "mean latency: " + what, "offered load (flits/node/cycle)",
                                "cycles", latency, false, true);
      tessera::bench::write_svg(svg + "_accepted.svg", "accepted load: " + what, "offered load (flits/node/cycle)",
                                "accepted (flits/node/cycle)", accepted, false, false);
      fmt::print("(wrote {0}_latency.svg and {0}_accepted.svg)\n", svg);
    }
    return 0;
  }
  fmt::print("{} traffic, {}x{} {}, {} routing, {} VCs x {} flits, {}-flit packets, {} level, router pipeline "
             "{}+{}+{}+{}, link {}, credit delay {}, injection/ejection {}/{}{}\n", t.pattern, c.width, c.height, c.topology, c.routing, c.vcs,
             c.buffer, t.packet_flits, model, c.rc, c.va, c.sa, c.st, c.link, c.credit_delay, c.inject, c.eject,
             t.self_traffic ? ", self-traffic" : "");
  fmt::print("{:>8} {:>9} {:>12} {:>12} {:>6}\n", "offered", "accepted", "latency avg", "latency p99", "hops");
  bool reported = false;
  std::unique_ptr<Network> net;
  for (double rate = lo; rate <= hi + 1e-9; rate += step) {
    if (model == "packet") net = std::make_unique<PacketNetwork>(c);
    else net = std::make_unique<FlitNetwork>(c);
    t.rate = rate;
    const TrafficResult r = run_traffic(*net, t);
    fmt::print("{:>8.3f} {:>9.3f} {:>12.1f} {:>12.1f} {:>6.2f}{}\n", r.offered, r.accepted, r.latency_avg, r.latency_p99,
               r.hops_avg, r.saturated && !reported ? "   <- saturated" : "");
    if (out) out << r.offered << ',' << r.accepted << ',' << r.latency_avg << ',' << r.latency_p99 << ',' << r.hops_avg
                 << ',' << r.saturated << '\n';
    if (r.saturated) reported = true;
  }
  if (!heatmap.empty() && net) {
    std::ofstream h(heatmap);
    h << "x,y,flits,utilisation,credit_stalls,allocation_stalls,injected,ejected\n";
    const auto& routers = net->routers();
    const double cycles = static_cast<double>(net->cycle());
    for (unsigned n = 0; n < c.nodes(); ++n)
      h << n % c.width << ',' << n / c.width << ',' << routers[n].flits << ','
        << (cycles > 0 ? routers[n].flits / cycles / kPorts : 0.0) << ',' << routers[n].credit_stalls << ','
        << routers[n].allocation_stalls << ',' << routers[n].injected << ',' << routers[n].ejected << '\n';
  }
  return 0;
}
