// Chip-to-chip communication studies on systems of T1 chips, with the
// communication engines driven directly (the CPs idle):
//   bench_comm alltoall   push versus pull all-to-all, 1 KiB to 16 MiB per
//                         chip, on 4 chips (ring) and 8 chips (4 x 2 torus),
//                         with the crossover point and each one's share of
//                         the roofline bound with its binding resource
//   bench_comm allreduce  all-reduce algorithm and bus bandwidth against
//                         size, ring and tree, as nccl-tests reports them
//   bench_comm links      per-link activity after a 4 MiB all-reduce and
//                         a 4 MiB all-to-all on the ring
//   bench_comm push-vs-pull  all-to-all against size and notification
//                         latency on the ring, with the crossover per
//                         latency; CSV and SVG into --csv DIR (default .)
// Options: --csv DIR (one CSV per table), --set inst.key=value (every chip,
// repeatable; e.g. c2c.notify_latency=500ns, c2c.lanes=4). Timing is
// simulated time; the NoC runs at packet level and HBM in its fast mode.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>
#include <systemc>
#include <vector>

#include "common/log.hpp"
#include "platform.hpp"
#include "roofline.hpp"
#include "c2c/c2c.hpp"
#include "svg.hpp"
#include "system.hpp"

using namespace tessera;
using namespace tessera::c2c;

namespace {

const bool kNoBanner = ::setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 0) == 0;
constexpr std::uint64_t kHbm = 0x10'0000'0000ull;  // HBM stack 0, as platform/t1.json places it

std::vector<std::string> g_sets;
std::string g_csv;

struct Bench {
  SystemSpec spec;
  std::unique_ptr<System> sys;
  explicit Bench(const std::string& file) {
    std::vector<std::string> sets = {"uart0.tx=none", "cp.reset_pc=0x8000_0000", "noc.model=packet"};
    for (int i = 0; i < 4; ++i) sets.push_back(fmt::format("hbm{}.mode=fast", i));
    sets.insert(sets.end(), g_sets.begin(), g_sets.end());
    const std::string path = std::string(TESSERA_PLATFORM_DIR) + "/" + file;
    spec = SystemSpec::parse(path, PlatformSpec::read(path), sets);
    sys = std::make_unique<System>(spec, false);
    for (unsigned k = 0; k < sys->size(); ++k) sys->chip(k).write_idle_loop("cpram", 0);
  }
  unsigned n() const { return sys->size(); }
  // Every chip posts `c` (adjusted per chip); simulated time until the last
  // one finished. `bound`: the roofline's bound of the chip whose work is
  // bound the longest (platform/roofline.hpp).
  double run(Collective c, const std::function<void(unsigned, Collective&)>& tweak = {},
             roofline::Report* bound = nullptr) {
    std::vector<nlohmann::ordered_json> before(n());
    for (unsigned k = 0; bound && k < n(); ++k) before[k] = sys->chip(k).stats();
    const sc_core::sc_time start = sc_core::sc_time_stamp();
    sc_core::sc_time last;
    unsigned left = n();
    sc_core::sc_event all;
    bool failed = false;
    for (unsigned k = 0; k < n(); ++k)
      sc_core::sc_spawn([&, k] {
        Collective mine = c;
        if (tweak) tweak(k, mine);
        CommEngine& e = sys->fabric(k).comm();
        const std::uint64_t before = e.completed();
        e.submit(mine);
        while (e.completed() == before && e.error() == 0) sc_core::wait(e.done_event());
        failed |= e.error() != 0;
        last = std::max(last, sc_core::sc_time_stamp());
        if (--left == 0) all.notify();
      });
    sc_core::wait(all);
    if (failed && sys->fabric(0).comm().error() == kCommStaging) {  // too big for this algorithm's staging
      for (unsigned k = 0; k < n(); ++k) sys->fabric(k).comm().clear_error();
      return -1;
    }
    if (failed) {
      std::fprintf(stderr, "bench_comm: %s failed on some chip (error %u)\n", name(c.op), sys->fabric(0).comm().error());
      std::exit(1);
    }
    for (unsigned k = 0; bound && k < n(); ++k) {
      const roofline::Report r = roofline::bound(roofline::limits(sys->chip(k)), before[k], sys->chip(k).stats());
      if (k == 0 || r.seconds() > bound->seconds()) *bound = r;
    }
    return (last - start).to_seconds();
  }
  // An all-to-all table: `per` bytes to every chip, slices in chip order.
  void table(std::uint64_t at, std::uint64_t per) {
    std::vector<std::uint64_t> t;
    for (unsigned p = 0; p < n(); ++p) t.insert(t.end(), {p * per, per, 0, p * per, per, 0});
    for (unsigned k = 0; k < n(); ++k) {
      for (unsigned p = 0; p < n(); ++p) {
        t[6 * p + 2] = k * per;  // where chip k's slice goes in chip p's dst
        t[6 * p + 5] = k * per;  // where chip p keeps chip k's slice in its src
      }
      sys->chip(k).debug_write(at, t.data(), t.size() * 8);
    }
  }
};

// The studies' all-to-all: sources at HBM stack 0's base, destinations 256 MiB
// up, the table (Bench::table) 512 MiB up.
Collective all_to_all(CommMode mode) {
  Collective c;
  c.op = CommOp::all_to_all;
  c.algo = CommAlgo::direct;
  c.mode = mode;
  c.src = kHbm;
  c.dst = kHbm + (256u << 20);
  c.table = kHbm + (512u << 20);
  return c;
}

std::string size_text(std::uint64_t b) {
  return b >= (1u << 20) ? fmt::format("{} MiB", b >> 20) : fmt::format("{} KiB", b >> 10);
}

void csv(const std::string& name, const std::string& text) {
  if (g_csv.empty()) return;
  std::ofstream(g_csv + "/" + name) << text;
  fmt::print("(wrote {}/{})\n", g_csv, name);
}

void alltoall(const std::string& file) {
  Bench b(file);
  const CommConfig& cc = b.sys->fabric(0).comm().config();
  fmt::print("\nAll-to-all on {} chips ({}), per-chip buffer split evenly among the chips; notify latency {}, "
             "poll interval {}\n",
             b.n(), b.spec.name, cc.notify_latency.to_string(), cc.poll_interval.to_string());
  fmt::print("{:>10} {:>12} {:>12} {:>10} {:>10}  {:<18} {}\n", "size", "push us", "pull us", "push GB/s", "pull GB/s", "faster",
             "of bound: push, pull (binding resource)");
  std::vector<std::uint64_t> sizes;
  for (std::uint64_t size = 1 << 10; size <= (16u << 20); size *= 4) sizes.push_back(size);
  sizes.push_back(16u << 20);
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  std::vector<std::array<double, 2>> t(sizes.size());
  std::vector<std::array<roofline::Report, 2>> bound(sizes.size());
  sc_core::sc_spawn([&] {
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      const std::uint64_t per = sizes[i] / b.n() / 64 * 64;
      b.table(kHbm + (512u << 20), per);
      for (int m = 0; m < 2; ++m) t[i][m] = b.run(all_to_all(m ? CommMode::pull : CommMode::push), {}, &bound[i][m]);
    }
    sc_core::sc_stop();
  });
  sc_core::sc_start();
  std::string out = "bytes_per_chip,push_us,pull_us,push_bound_us,pull_bound_us,push_binding,pull_binding\n";
  // The crossover: the smallest size from which the other mode wins at every larger size too.
  const bool push_first = t[0][0] <= t[0][1];
  std::size_t from = sizes.size();
  while (from > 0 && (t[from - 1][0] <= t[from - 1][1]) != push_first) --from;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const std::uint64_t moved = sizes[i] / b.n() / 64 * 64 * b.n();
    const bool push_wins = t[i][0] <= t[i][1];
    const roofline::Report* rb = bound[i].data();
    fmt::print("{:>10} {:>12.2f} {:>12.2f} {:>10.1f} {:>10.1f}  {:<18} {:.1f}%, {:.1f}% ({}, {})\n", size_text(sizes[i]),
               t[i][0] * 1e6, t[i][1] * 1e6, double(moved) / t[i][0] / 1e9, double(moved) / t[i][1] / 1e9,
               fmt::format("{} by {:.1f}%", push_wins ? "push" : "pull",
                           100 * std::abs(t[i][0] - t[i][1]) / std::max(t[i][0], t[i][1])),
               100 * rb[0].seconds() / t[i][0], 100 * rb[1].seconds() / t[i][1], rb[0].binding().resource,
               rb[0].binding().where);
    out += fmt::format("{},{},{},{},{},{},{}\n", sizes[i], t[i][0] * 1e6, t[i][1] * 1e6, rb[0].seconds() * 1e6,
                       rb[1].seconds() * 1e6, rb[0].binding().resource, rb[1].binding().resource);
  }
  if (from < sizes.size())
    fmt::print("crossover: {} is faster up to {}, {} from {} on\n", push_first ? "push" : "pull",
               size_text(sizes[from - 1]), push_first ? "pull" : "push", size_text(sizes[from]));
  else
    fmt::print("no crossover between 1 KiB and 16 MiB: {} is faster at the largest size as at the smallest\n",
               push_first ? "push" : "pull");
  csv(fmt::format("alltoall_{}.csv", b.n()), out);
}

// All-to-all time against message size and notification latency on the
// four-chip ring: where pull overtakes push, for each latency.
void push_vs_pull(const std::string& dir) {
  Bench b("t1x4-ring.json");
  const std::vector<double> latencies_ns = {50, 200, 1000, 4000};
  std::vector<std::uint64_t> sizes;
  for (std::uint64_t size = 1 << 10; size <= (16u << 20); size *= 4) sizes.push_back(size);
  std::vector<std::vector<std::array<double, 2>>> t(latencies_ns.size(), std::vector<std::array<double, 2>>(sizes.size()));
  sc_core::sc_spawn([&] {
    for (std::size_t l = 0; l < latencies_ns.size(); ++l) {
      for (unsigned k = 0; k < b.n(); ++k)
        b.sys->fabric(k).comm().set_notify_latency(sc_core::sc_time(latencies_ns[l], sc_core::SC_NS));
      for (std::size_t i = 0; i < sizes.size(); ++i) {
        b.table(kHbm + (512u << 20), sizes[i] / b.n() / 64 * 64);
        for (int m = 0; m < 2; ++m) t[l][i][m] = b.run(all_to_all(m ? CommMode::pull : CommMode::push));
      }
    }
    sc_core::sc_stop();
  });
  sc_core::sc_start();
  fmt::print("\nAll-to-all on {} chips ({}): microseconds, push / pull, against the notification latency\n", b.n(),
             b.spec.name);
  fmt::print("{:>10}", "size");
  for (double l : latencies_ns) fmt::print(" {:>22}", fmt::format("notify {} ns", l));
  fmt::print("\n");
  std::string csv = "notify_ns,bytes_per_chip,push_us,pull_us\n";
  std::vector<bench::Series> series;
  for (std::size_t l = 0; l < latencies_ns.size(); ++l)
    for (int m = 0; m < 2; ++m) series.push_back({fmt::format("{} {} ns", m ? "pull" : "push", latencies_ns[l]), {}});
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    fmt::print("{:>10}", size_text(sizes[i]));
    for (std::size_t l = 0; l < latencies_ns.size(); ++l) {
      fmt::print(" {:>22}", fmt::format("{:.2f} / {:.2f}", t[l][i][0] * 1e6, t[l][i][1] * 1e6));
      csv += fmt::format("{},{},{},{}\n", latencies_ns[l], sizes[i], t[l][i][0] * 1e6, t[l][i][1] * 1e6);
      for (int m = 0; m < 2; ++m) series[2 * l + m].points.emplace_back(double(sizes[i]), t[l][i][m] * 1e6);
    }
    fmt::print("\n");
  }
  for (std::size_t l = 0; l < latencies_ns.size(); ++l) {
    // The smallest size from which pull is faster at every larger size too.
    std::size_t from = sizes.size();
    while (from > 0 && t[l][from - 1][1] < t[l][from - 1][0]) --from;
    if (from == sizes.size()) fmt::print("notify {} ns: push is faster at 16 MiB (no crossover)\n", latencies_ns[l]);
    else if (from == 0) fmt::print("notify {} ns: pull is faster at every size\n", latencies_ns[l]);
    else fmt::print("notify {} ns: crossover: pull is faster from {} on\n", latencies_ns[l], size_text(sizes[from]));
  }
  std::ofstream(dir + "/push_vs_pull.csv") << csv;
  bench::write_svg(dir + "/push_vs_pull.svg", "All-to-all on 4 chips: push and pull against notification latency",
                   "bytes per chip", "microseconds", series, true, true);
  fmt::print("(wrote {0}/push_vs_pull.csv and {0}/push_vs_pull.svg)\n", dir);
}

void allreduce() {
  Bench b("t1x4-ring.json");
  const double n = b.n();
  fmt::print("\nAll-reduce (FP32) on {} chips ({}): algorithm bandwidth = size / time, bus bandwidth = algbw * 2(n-1)/n\n",
             b.n(), b.spec.name);
  fmt::print("{:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>16}\n", "size", "ring us", "algbw", "busbw", "tree us",
             "algbw", "busbw", "ring of bound");
  std::vector<std::uint64_t> sizes;
  for (std::uint64_t size = 4 << 10; size <= (16u << 20); size *= 4) sizes.push_back(size);
  std::vector<std::array<double, 2>> t(sizes.size());
  std::vector<roofline::Report> ring_bound(sizes.size());
  sc_core::sc_spawn([&] {
    for (std::size_t i = 0; i < sizes.size(); ++i)
      for (int a = 0; a < 2; ++a) {
        Collective c;
        c.op = CommOp::all_reduce;
        c.algo = a ? CommAlgo::tree : CommAlgo::ring;
        c.src = kHbm;
        c.dst = kHbm + (256u << 20);
        c.count = sizes[i] / 4;
        t[i][a] = b.run(c, {}, a ? nullptr : &ring_bound[i]);
      }
    sc_core::sc_stop();
  });
  sc_core::sc_start();
  std::string out =
      "bytes,ring_us,ring_algbw_GBps,ring_busbw_GBps,tree_us,tree_algbw_GBps,tree_busbw_GBps,ring_bound_us,ring_binding\n";
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const double alg[2] = {double(sizes[i]) / t[i][0] / 1e9, double(sizes[i]) / t[i][1] / 1e9};
    auto cell = [](double t, double v) { return t < 0 ? fmt::format("{:>10}", "-") : fmt::format("{:>10.2f}", v); };
    const roofline::Report& rb = ring_bound[i];
    fmt::print("{:>10} {} {} {} {} {} {} {:>7.1f}% ({}, {})\n", size_text(sizes[i]), cell(t[i][0], t[i][0] * 1e6),
               cell(t[i][0], alg[0]), cell(t[i][0], alg[0] * 2 * (n - 1) / n), cell(t[i][1], t[i][1] * 1e6),
               cell(t[i][1], alg[1]), cell(t[i][1], alg[1] * 2 * (n - 1) / n),
               t[i][0] > 0 ? 100 * rb.seconds() / t[i][0] : 0.0, rb.binding().resource, rb.binding().where);
    out += fmt::format("{},{},{},{},{},{},{},{},{}\n", sizes[i], t[i][0] * 1e6, alg[0], alg[0] * 2 * (n - 1) / n,
                       t[i][1] * 1e6, alg[1], alg[1] * 2 * (n - 1) / n, rb.seconds() * 1e6, rb.binding().resource);
  }
  fmt::print("(-: the tree keeps whole buffers in the staging buffer, {} here; --set c2c.comm_staging=SIZE for more)\n",
             format_size(b.sys->fabric(0).comm().config().staging));
  csv("allreduce_4.csv", out);
}

void links() {
  Bench b("t1x4-ring.json");
  double t[2];
  sc_core::sc_spawn([&] {
    Collective c;
    c.op = CommOp::all_reduce;
    c.src = kHbm;
    c.dst = kHbm + (256u << 20);
    c.count = (4u << 20) / 4;
    t[0] = b.run(c);
    b.table(kHbm + (512u << 20), (4u << 20) / b.n());
    c.op = CommOp::all_to_all;
    c.algo = CommAlgo::direct;
    c.table = kHbm + (512u << 20);
    t[1] = b.run(c);
    sc_core::sc_stop();
  });
  sc_core::sc_start();
  const double now = sc_core::sc_time_stamp().to_seconds();
  fmt::print("\nLink activity on {} after a 4 MiB ring all-reduce ({:.1f} us) and a 4 MiB all-to-all ({:.1f} us), "
             "{:.1f} us simulated in all\n",
             b.spec.name, t[0] * 1e6, t[1] * 1e6, now * 1e6);
  fmt::print("{:>6} {:>5} {:>8} {:>12} {:>10} {:>8} {:>10} {:>10} {:>7}\n", "chip", "port", "to chip", "bytes",
             "FLITs", "replays", "active us", "idle us", "busy");
  std::string out = "chip,port,peer,bytes,flits,replays,active_us,idle_us\n";
  for (unsigned k = 0; k < b.n(); ++k)
    for (unsigned p = 0; p < 2; ++p) {
      const ChannelStats* s = b.sys->fabric(k).tx_stats(p);
      if (!s) continue;
      const unsigned peer = (p == 0 ? k + 1 : k + b.n() - 1) % b.n();
      const double busy = s->busy.to_seconds();
      fmt::print("{:>6} {:>5} {:>8} {:>12} {:>10} {:>8} {:>10.2f} {:>10.2f} {:>6.1f}%\n", k, p, peer, s->payload_bytes,
                 s->flits, s->replays, busy * 1e6, (now - busy) * 1e6, 100 * busy / now);
      out += fmt::format("{},{},{},{},{},{},{},{}\n", k, p, peer, s->payload_bytes, s->flits, s->replays, busy * 1e6,
                         (now - busy) * 1e6);
    }
  csv("links_4.csv", out);
}

}  // namespace

int sc_main(int argc, char** argv) {
  std::vector<std::string> what;
  std::string platform;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--csv" && i + 1 < argc) g_csv = argv[++i];
    else if (a == "--set" && i + 1 < argc) g_sets.push_back(argv[++i]);
    else if (a == "--platform" && i + 1 < argc) platform = argv[++i];
    else if (a == "alltoall" || a == "allreduce" || a == "links" || a == "push-vs-pull") what.push_back(a);
    else {
      std::fprintf(stderr, "usage: bench_comm [alltoall] [allreduce] [links] [push-vs-pull] [--csv DIR] [--set inst.key=value]...\n");
      return 2;
    }
  }
  if (what.empty()) what = {"alltoall", "allreduce", "links"};
  log::set_level("", log::Level::error);  // a tree too big for the staging buffer is expected, and reported as "-"
  sc_core::sc_report_handler::set_actions("/OSCI/SystemC", sc_core::SC_INFO, sc_core::SC_DO_NOTHING);
  try {
    // SystemC elaborates once per process, so each study (and each system
    // of the all-to-all study) runs in a process of its own.
    if (what.size() > 1 || (what[0] == "alltoall" && platform.empty())) {
      int rc = 0;
      for (const std::string& w : what)
        for (const char* p : {"t1x4-ring.json", "t1x8-torus.json"}) {
          if (w != "alltoall" && std::string(p) != "t1x4-ring.json") continue;
          std::string cmd = std::string(argv[0]) + " " + w + (w == "alltoall" ? std::string(" --platform ") + p : "");
          if (!g_csv.empty()) cmd += " --csv " + g_csv;
          for (const std::string& s : g_sets) cmd += " --set " + s;
          rc |= std::system(cmd.c_str());
        }
      return rc ? 1 : 0;
    }
    if (what[0] == "alltoall") alltoall(platform);
    else if (what[0] == "push-vs-pull") push_vs_pull(g_csv.empty() ? "." : g_csv);
    else if (what[0] == "allreduce") allreduce();
    else links();
  } catch (const ConfigError& e) {
    std::fprintf(stderr, "bench_comm: %s\n", e.what());
    return 2;
  }
  return 0;
}
