#include "common/waves.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <stdexcept>

#include "common/units.hpp"

namespace tessera::waves {

namespace detail {
bool on = false;
}

namespace {

const char* const kGroupNames[] = {"irq", "engines", "clocks", "power", "links", "rtl"};

struct Signal {
  std::string path, name;
  unsigned width;  // 0: real
  std::uint64_t before = 0;  // the last value before the window
  double before_real = 0;
};

struct Change {
  std::uint64_t at, seq;
  Id id;
  std::uint64_t bits;
  double real;
};

struct State {
  Options o;
  unsigned groups = 0;
  std::uint64_t from = 0, to = ~std::uint64_t{0};
  std::vector<Signal> signals;
  std::vector<Change> changes;
  std::uint64_t seq = 0;
};

State& state() {
  static State s;
  return s;
}

// VCD identifier codes: printable characters 33..126, base 94.
std::string code(Id id) {
  std::string s;
  unsigned v = static_cast<unsigned>(id);
  do {
    s += static_cast<char>(33 + v % 94);
    v /= 94;
  } while (v);
  return s;
}

std::string clean(std::string n) {
  for (char& c : n)
    if (c == '[' || c == ']' || c == ' ' || c == '.') c = '_';
  while (!n.empty() && n.back() == '_') n.pop_back();
  return n;
}

std::string value_text(unsigned width, Id id, std::uint64_t bits, double real) {
  if (width == 0) return fmt::format("r{:.9g} {}\n", real, code(id));
  if (width == 1) return fmt::format("{}{}\n", bits & 1, code(id));
  std::string b;
  for (int i = static_cast<int>(width) - 1; i >= 0; --i) b += (bits >> i & 1) ? '1' : '0';
  const auto first = b.find('1');
  return fmt::format("b{} {}\n", first == std::string::npos ? "0" : b.substr(first), code(id));
}

void record(Id id, std::uint64_t bits, double real, const sc_core::sc_time& at) {
  State& s = state();
  const std::uint64_t t = at.value();
  if (t >= s.to) return;
  Signal& sig = s.signals[static_cast<std::size_t>(id)];
  if (t <= s.from) {  // the value at the window's start: in $dumpvars
    sig.before = bits, sig.before_real = real;
    return;
  }
  s.changes.push_back({t, s.seq++, id, bits, real});
}

Writer& fst_writer() {
  static Writer w = nullptr;
  return w;
}

bool write_vcd(const std::string& file, const Dump& d);

}  // namespace

void set_fst_writer(Writer w) { fst_writer() = w; }

std::vector<std::string> scopes(const std::string& path) {
  std::vector<std::string> parts;
  for (std::size_t at = 0, next; at <= path.size(); at = next + 1) {
    next = path.find('.', at);
    if (next == std::string::npos) next = path.size();
    parts.push_back(path.substr(at, next - at));
  }
  return parts;
}

void parse_window(const std::string& text, Options& o) {
  const auto dots = text.find("..");
  if (dots == std::string::npos) throw std::runtime_error("--waves-window: '" + text + "' is not FROM..TO (e.g. 10us..20us)");
  try {
    const std::string a = text.substr(0, dots), b = text.substr(dots + 2);
    o.from = a.empty() ? sc_core::SC_ZERO_TIME : parse_time(a);
    o.to = b.empty() ? sc_core::sc_max_time() : parse_time(b);
  } catch (const std::exception& e) {
    throw std::runtime_error("--waves-window: " + std::string(e.what()));
  }
  if (o.to <= o.from) throw std::runtime_error("--waves-window: '" + text + "' ends before it begins");
}

void open(const Options& o) {
  const auto dot = o.file.rfind('.');
  const std::string ext = dot == std::string::npos ? "" : o.file.substr(dot);
  if (ext == ".fst" && !fst_writer())
    throw std::runtime_error("--waves " + o.file + ": this build has no FST writer; write FILE.vcd");
  if (ext != ".vcd" && ext != ".fst") throw std::runtime_error("--waves " + o.file + ": the file must end in .vcd or .fst");
  unsigned groups = 0;
  for (const std::string& g : o.groups) {
    if (g == "all") {
      groups = (1u << kGroups) - 1;
      continue;
    }
    unsigned i = 0;
    while (i < kGroups && g != kGroupNames[i]) ++i;
    if (i == kGroups)
      throw std::runtime_error("--waves-preset: unknown group '" + g + "' (groups: irq, engines, clocks, power, links, rtl, all)");
    groups |= 1u << i;
  }
  if (std::FILE* f = std::fopen(o.file.c_str(), "w")) std::fclose(f);  // writable? (written at the end)
  else throw std::runtime_error("--waves: cannot write " + o.file);
  State& s = state();
  s = State{};
  s.o = o;
  s.groups = o.groups.empty() ? (1u << kGroups) - 1 : groups;
  s.from = o.from.value();
  s.to = o.to == sc_core::sc_max_time() ? ~std::uint64_t{0} : o.to.value();
  detail::on = true;
  static bool registered = false;
  if (!registered) registered = std::atexit([] { close(); }) == 0;
}

std::string companion(const std::string& path, const std::string& ext) {
  if (!detail::on || !(state().groups >> rtl & 1u)) return "";
  const std::string& f = state().o.file;
  const auto dot = f.rfind('.');
  return (dot == std::string::npos ? f : f.substr(0, dot)) + "." + path + ext;
}

Id declare(Group g, const std::string& path, const std::string& name, unsigned width) {
  State& s = state();
  if (!detail::on || !(s.groups >> g & 1u)) return kNone;
  s.signals.push_back({path, clean(name), std::min(width, 64u)});
  return static_cast<Id>(s.signals.size() - 1);
}

void change(Id id, std::uint64_t value, const sc_core::sc_time& at) {
  if (id < 0 || !detail::on) return;
  record(id, value, 0, at);
}

void change_real(Id id, double value, const sc_core::sc_time& at) {
  if (id < 0 || !detail::on) return;
  record(id, 0, value, at);
}

bool close() {
  State& s = state();
  if (!detail::on) return true;
  detail::on = false;
  std::stable_sort(s.changes.begin(), s.changes.end(),
                   [](const Change& a, const Change& b) { return a.at != b.at ? a.at < b.at : a.seq < b.seq; });
  Dump d;
  d.from = s.from;
  d.resolution = sc_core::sc_get_time_resolution().to_seconds();
  for (const Signal& sig : s.signals) d.signals.push_back({sig.path, sig.name, sig.width, sig.before, sig.before_real});
  d.changes.reserve(s.changes.size());
  for (const Change& c : s.changes) d.changes.push_back({c.at, c.id, c.bits, c.real});
  s.changes.clear();
  const auto dot = s.o.file.rfind('.');
  const bool fst = dot != std::string::npos && s.o.file.substr(dot) == ".fst";
  return fst ? fst_writer()(s.o.file, d) : write_vcd(s.o.file, d);
}

namespace {

bool write_vcd(const std::string& file, const Dump& d) {
  std::FILE* f = std::fopen(file.c_str(), "w");
  if (!f) return false;
  const double res = d.resolution;
  const char* unit = res >= 1e-9 ? "1 ns" : res >= 1e-12 ? "1 ps" : "1 fs";
  const double per = res >= 1e-9 ? 1e-9 : res >= 1e-12 ? 1e-12 : 1e-15;
  const auto scale = static_cast<std::uint64_t>(res / per + 0.5);
  std::fprintf(f, "$version tessera-vp model-level waves $end\n$timescale %s $end\n", unit);
  // Scopes from the instance paths, signals in the order declared.
  std::vector<Id> order(d.signals.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<Id>(i);
  std::stable_sort(order.begin(), order.end(), [&](Id a, Id b) { return d.signals[a].path < d.signals[b].path; });
  std::vector<std::string> open_scopes;
  for (Id id : order) {
    const Dump::Signal& sig = d.signals[id];
    const std::vector<std::string> parts = scopes(sig.path);
    std::size_t common = 0;
    while (common < open_scopes.size() && common < parts.size() && open_scopes[common] == parts[common]) ++common;
    while (open_scopes.size() > common) std::fputs("$upscope $end\n", f), open_scopes.pop_back();
    for (std::size_t i = common; i < parts.size(); ++i)
      std::fprintf(f, "$scope module %s $end\n", parts[i].c_str()), open_scopes.push_back(parts[i]);
    if (sig.width == 0) std::fprintf(f, "$var real 64 %s %s $end\n", code(id).c_str(), sig.name.c_str());
    else if (sig.width == 1) std::fprintf(f, "$var wire 1 %s %s $end\n", code(id).c_str(), sig.name.c_str());
    else std::fprintf(f, "$var wire %u %s %s [%u:0] $end\n", sig.width, code(id).c_str(), sig.name.c_str(), sig.width - 1);
  }
  while (!open_scopes.empty()) std::fputs("$upscope $end\n", f), open_scopes.pop_back();
  std::fputs("$enddefinitions $end\n", f);
  std::fprintf(f, "#%llu\n$dumpvars\n", static_cast<unsigned long long>(d.from * scale));
  for (std::size_t i = 0; i < d.signals.size(); ++i) {
    const Dump::Signal& sig = d.signals[i];
    std::fputs(value_text(sig.width, static_cast<Id>(i), sig.initial, sig.initial_real).c_str(), f);
  }
  std::fputs("$end\n", f);
  std::uint64_t last = d.from;
  for (const Dump::Change& c : d.changes) {
    if (c.at != last) std::fprintf(f, "#%llu\n", static_cast<unsigned long long>(c.at * scale)), last = c.at;
    std::fputs(value_text(d.signals[c.id].width, c.id, c.bits, c.real).c_str(), f);
  }
  const bool ok = std::ferror(f) == 0;
  std::fclose(f);
  return ok;
}

}  // namespace

}  // namespace tessera::waves
