#include "common/trace.hpp"
#include "common/input.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <stdexcept>

namespace tessera::trace {

namespace detail {
bool on = false;
unsigned mask = 0;
}  // namespace detail

namespace {

struct State {
  std::FILE* out = nullptr;
  std::vector<std::string> sockets;
  std::set<std::string> matched, labels;             // --trace-sockets names that matched; every label asked about
  std::map<std::string, int> pids;                    // chip -> process id
  std::map<std::string, std::pair<int, int>> tracks;  // instance path -> (pid, tid)
  std::uint64_t events = 0;
  bool first = true;
};

State& state() {
  static State s;
  return s;
}

void emit(const nlohmann::json& e) {
  State& s = state();
  std::fputs(s.first ? "\n" : ",\n", s.out);
  s.first = false;
  const std::string text = e.dump();
  std::fwrite(text.data(), 1, text.size(), s.out);
  ++s.events;
}

// The chip of a path ("chip2.tile0" -> "chip2", "t1.cp" -> "t1") and the rest.
std::string chip_of(const std::string& path) { return path.substr(0, path.find('.')); }

int pid_of(const std::string& chip) {
  State& s = state();
  auto it = s.pids.find(chip);
  if (it != s.pids.end()) return it->second;
  const int pid = static_cast<int>(s.pids.size()) + 1;
  s.pids[chip] = pid;
  emit({{"ph", "M"}, {"name", "process_name"}, {"pid", pid}, {"tid", 0}, {"args", {{"name", chip}}}});
  emit({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", pid}, {"tid", 0}, {"args", {{"sort_index", pid}}}});
  return pid;
}

std::pair<int, int> track(const std::string& path) {
  State& s = state();
  auto it = s.tracks.find(path);
  if (it != s.tracks.end()) return it->second;
  const int pid = pid_of(chip_of(path));
  const int tid = static_cast<int>(s.tracks.size()) + 1;
  s.tracks[path] = {pid, tid};
  emit({{"ph", "M"}, {"name", "thread_name"}, {"pid", pid}, {"tid", tid}, {"args", {{"name", path}}}});
  return {pid, tid};
}

double us(const sc_core::sc_time& t) { return t.to_seconds() * 1e6; }

}  // namespace

namespace {
struct Known {
  std::string name, doc;
};
std::vector<Known>& known() {
  static std::vector<Known> k;  // built during static initialisation, in whatever order the IPs come
  return k;
}
}  // namespace

Category category(const char* name, const char* doc) {
  std::vector<Known>& k = known();
  for (unsigned i = 0; i < k.size(); ++i)
    if (k[i].name == name) return i;
  if (k.size() == 32) std::abort();  // elaboration-only: a build with more than 32 categories
  k.push_back({name, doc});
  return static_cast<Category>(k.size() - 1);
}

const Category tlm = category("tlm", "TLM transactions on the sockets --trace-sockets names");

const char* name(Category c) { return c < known().size() ? known()[c].name.c_str() : "?"; }

std::string categories() {
  std::vector<std::string> names;
  for (const Known& k : known()) names.push_back(k.name);
  std::sort(names.begin(), names.end());
  std::string o;
  for (const std::string& n : names) o += (o.empty() ? "" : ", ") + n;
  return o;
}

void open(const Options& o) {
  close();
  unsigned mask = 0;
  for (const std::string& c : o.categories) {
    unsigned i = 0;
    while (i < known().size() && c != known()[i].name) ++i;
    if (i == known().size())
      throw std::runtime_error(fmt::format("--trace-categories: unknown category '{}' (categories: {})", cut(c), categories()));
    mask |= 1u << i;
  }
  State& s = state();
  s = State{};
  s.out = std::fopen(o.file.c_str(), "w");
  if (!s.out) throw std::runtime_error("--trace: cannot write " + o.file);
  s.sockets = o.sockets;
  std::fputs("{\"displayTimeUnit\":\"ns\",\"otherData\":{\"generator\":\"tessera-vp\"},\"traceEvents\":[", s.out);
  // Every category by default; sockets named means their transactions are wanted.
  detail::mask = o.categories.empty() ? ~0u : mask | (o.sockets.empty() ? 0u : 1u << tlm);
  detail::on = true;
  static bool registered = false;
  if (!registered) registered = std::atexit(close) == 0;
}

void close() {
  State& s = state();
  if (!s.out) return;
  std::fputs("\n]}\n", s.out);
  std::fclose(s.out);
  s.out = nullptr;
  detail::on = false;
}

bool socket_wanted(const std::string& label) {
  State& st = state();
  st.labels.insert(label);
  bool wanted = false;
  for (const std::string& s : st.sockets)
    if (label == s || label.rfind(s + "_", 0) == 0) wanted = true, st.matched.insert(s);
  return wanted;
}

std::string unmatched_sockets() {
  const State& st = state();
  std::string bad, known;
  for (const std::string& s : st.sockets)
    if (!st.matched.count(s)) bad += (bad.empty() ? "" : ", ") + s;
  if (bad.empty()) return "";
  for (const std::string& l : st.labels) known += (known.empty() ? "" : ", ") + l;
  return fmt::format("--trace-sockets: no connection named {} (connections: {})", cut(bad, 80), cut(known, 600));
}

void slice(Category c, const std::string& path, const std::string& name, const sc_core::sc_time& start,
           const sc_core::sc_time& end, const nlohmann::json& args) {
  if (!on(c)) return;
  const auto [pid, tid] = track(path);
  nlohmann::json e = {{"ph", "X"},          {"cat", trace::name(c)}, {"name", name}, {"pid", pid}, {"tid", tid},
                      {"ts", us(start)},    {"dur", us(end > start ? end - start : sc_core::SC_ZERO_TIME)}};
  e["args"] = args.is_null() ? nlohmann::json::object() : args;
  e["args"]["path"] = path;
  emit(e);
}

void instant(Category c, const std::string& path, const std::string& name, const sc_core::sc_time& at,
             const nlohmann::json& args) {
  if (!on(c)) return;
  const auto [pid, tid] = track(path);
  nlohmann::json e = {{"ph", "i"}, {"s", "t"}, {"cat", trace::name(c)}, {"name", name}, {"pid", pid}, {"tid", tid}, {"ts", us(at)}};
  e["args"] = args.is_null() ? nlohmann::json::object() : args;
  e["args"]["path"] = path;
  emit(e);
}

void counter(Category c, const std::string& path, const std::string& name, const sc_core::sc_time& at, double value) {
  if (!on(c)) return;
  const std::string chip = chip_of(path);
  const int pid = pid_of(chip);
  const std::string rest = path.size() > chip.size() ? path.substr(chip.size() + 1) : path;
  emit({{"ph", "C"}, {"cat", trace::name(c)}, {"name", rest + " " + name}, {"pid", pid}, {"ts", us(at)},
        {"args", {{"value", value}}}});
}

std::uint64_t events() { return state().events; }

}  // namespace tessera::trace
