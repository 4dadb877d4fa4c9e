#include "common/units.hpp"
#include "common/input.hpp"

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <utility>
#include <vector>

namespace tessera {
namespace {

std::string strip(const std::string& s) {
  std::string o;
  for (char c : s)
    if (c != '_' && !std::isspace(static_cast<unsigned char>(c))) o += c;
  return o;
}

// Splits "1.5GHz" into 1.5 and "GHz". The number may be decimal with a
// fraction and exponent, or an integer in hex/binary.
std::pair<double, std::string> split(const std::string& text, const char* what) {
  std::string s = strip(text);
  std::size_t i = 0;
  if (s.rfind("0x", 0) == 0 || s.rfind("0X", 0) == 0 || s.rfind("0b", 0) == 0 || s.rfind("0B", 0) == 0) {
    i = 2;
    bool hex = s[1] == 'x' || s[1] == 'X';
    while (i < s.size() && (hex ? std::isxdigit(static_cast<unsigned char>(s[i])) : (s[i] == '0' || s[i] == '1'))) ++i;
    if (i == 2) throw UnitError(fmt::format("expected {}, got \"{}\"", what, cut(text, 60)));
    return {static_cast<double>(parse_uint(s.substr(0, i))), s.substr(i)};
  }
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E') && i + 1 < s.size() &&
      (std::isdigit(static_cast<unsigned char>(s[i + 1])) || s[i + 1] == '-' || s[i + 1] == '+')) {
    i += 2;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
  }
  if (i == 0) throw UnitError(fmt::format("expected {}, got \"{}\"", what, cut(text, 60)));
  double v = 0;
  try {
    std::size_t used = 0;
    v = std::stod(s.substr(0, i), &used);
    if (used != i) throw UnitError("");
  } catch (const std::exception&) {
    throw UnitError(fmt::format("expected {}, got \"{}\"", what, cut(text, 60)));
  }
  return {v, s.substr(i)};
}

double scale(const std::string& text, const std::string& unit, const char* what,
             const std::vector<std::pair<const char*, double>>& units, bool bare_ok) {
  if (unit.empty() && bare_ok) return 1;
  for (const auto& [name, factor] : units)
    if (unit == name) return factor;
  std::string list;
  for (const auto& u : units) list += (list.empty() ? "" : ", ") + std::string(u.first);
  throw UnitError(fmt::format("expected {} (units: {}), got \"{}\"", what, list, cut(text, 60)));
}

}  // namespace

std::uint64_t parse_uint(const std::string& text) {
  std::string s = strip(text);
  int base = 10;
  std::size_t start = 0;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) base = 16, start = 2;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'b' || s[1] == 'B')) base = 2, start = 2;
  if (start == s.size()) throw UnitError(fmt::format("expected an unsigned integer, got \"{}\"", cut(text, 60)));
  std::uint64_t v = 0;
  for (std::size_t i = start; i < s.size(); ++i) {
    int d;
    char c = static_cast<char>(std::tolower(static_cast<unsigned char>(s[i])));
    if (c >= '0' && c <= '9') d = c - '0';
    else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else d = 99;
    if (d >= base) throw UnitError(fmt::format("expected an unsigned integer, got \"{}\"", cut(text, 60)));
    if (v > (~0ull - static_cast<unsigned>(d)) / static_cast<unsigned>(base))
      throw UnitError(fmt::format("\"{}\" does not fit in 64 bits", cut(text, 60)));
    v = v * static_cast<unsigned>(base) + static_cast<unsigned>(d);
  }
  return v;
}

std::uint64_t parse_size(const std::string& text) {
  const char* what = "a size such as 4096, 64KiB or 16GiB";
  auto [v, unit] = split(text, what);
  double f = scale(text, unit, what,
                   {{"B", 1},
                    {"KiB", 1024.0},
                    {"MiB", 1024.0 * 1024},
                    {"GiB", 1024.0 * 1024 * 1024},
                    {"TiB", 1024.0 * 1024 * 1024 * 1024},
                    {"kB", 1e3},
                    {"KB", 1e3},
                    {"MB", 1e6},
                    {"GB", 1e9},
                    {"TB", 1e12}},
                   true);
  if (unit.empty() || unit == "B") {
    // Keep full 64-bit precision for plain integers and addresses.
    std::string s = strip(text);
    if (!unit.empty()) s.pop_back();
    if (s.find('.') == std::string::npos && s.find('e') == std::string::npos) return parse_uint(s);
  }
  double bytes = v * f;
  if (bytes != std::floor(bytes) || bytes >= 18446744073709551616.0)
    throw UnitError(fmt::format("\"{}\" is not a whole number of bytes", cut(text, 60)));
  return static_cast<std::uint64_t>(bytes);
}

sc_core::sc_time parse_time(const std::string& text) {
  const char* what = "a time such as 30ns or 1.5us";
  auto [v, unit] = split(text, what);
  if (unit.empty() && v == 0) return sc_core::SC_ZERO_TIME;
  double f = scale(text, unit, what,
                   {{"s", 1}, {"ms", 1e-3}, {"us", 1e-6}, {"ns", 1e-9}, {"ps", 1e-12}, {"fs", 1e-15}}, false);
  // Past the kernel's largest time the conversion to ticks would overflow.
  if (!(v * f < sc_core::sc_max_time().to_seconds()))
    throw UnitError(fmt::format("\"{}\" is longer than the simulator's longest time ({})", cut(text, 60),
                                sc_core::sc_max_time().to_string()));
  return sc_core::sc_time(v * f, sc_core::SC_SEC);
}

Hertz parse_frequency(const std::string& text) {
  const char* what = "a frequency such as 1.5GHz";
  auto [v, unit] = split(text, what);
  double f = scale(text, unit, what, {{"Hz", 1}, {"kHz", 1e3}, {"MHz", 1e6}, {"GHz", 1e9}}, false);
  if (v <= 0) throw UnitError(fmt::format("a frequency must be positive, got \"{}\"", cut(text, 60)));
  if (v * f < 1 || v * f > 1e15) throw UnitError(fmt::format("\"{}\" lies outside 1Hz to 1PHz", cut(text, 60)));
  return Hertz{v * f};
}

double parse_bitrate(const std::string& text) {
  const char* what = "a bit rate such as 6.4Gb/s";
  auto [v, unit] = split(text, what);
  const double rate = v * scale(text, unit, what,
                                {{"b/s", 1}, {"kb/s", 1e3}, {"Mb/s", 1e6}, {"Gb/s", 1e9}, {"bps", 1}, {"kbps", 1e3},
                                 {"Mbps", 1e6}, {"Gbps", 1e9}},
                                false);
  if (!(rate >= 1 && rate <= 1e15)) throw UnitError(fmt::format("\"{}\" lies outside 1b/s to 1Pb/s", cut(text, 60)));
  return rate;
}

std::string format_size(std::uint64_t bytes) {
  const char* units[] = {"TiB", "GiB", "MiB", "KiB"};
  int shift = 40;
  for (const char* u : units) {
    std::uint64_t unit = 1ull << shift;
    if (bytes >= unit && bytes % unit == 0) return fmt::format("{}{}", bytes / unit, u);
    shift -= 10;
  }
  return fmt::format("{}", bytes);
}

std::string format_time(const sc_core::sc_time& t) {
  // Exact in the time resolution's integer ticks; no floating-point noise.
  const double res_ps = sc_core::sc_get_time_resolution().to_seconds() * 1e12;
  const auto ps = static_cast<std::uint64_t>(static_cast<double>(t.value()) * res_ps + 0.5);
  if (ps == 0) return "0ns";
  const std::pair<const char*, std::uint64_t> units[] = {
      {"s", 1000000000000ull}, {"ms", 1000000000ull}, {"us", 1000000ull}, {"ns", 1000ull}, {"ps", 1ull}};
  // The largest unit that needs at most three decimals: 3.9us, 1.5ns, 625ps.
  for (const auto& [name, u] : units)
    if (ps >= u && (u < 1000 || ps % (u / 1000) == 0))
      return fmt::format("{}{}", static_cast<double>(ps) / static_cast<double>(u), name);
  return fmt::format("{}ps", ps);
}

std::string format_frequency(Hertz f) {
  const std::pair<const char*, double> units[] = {{"GHz", 1e9}, {"MHz", 1e6}, {"kHz", 1e3}};
  for (const auto& [name, u] : units)
    if (f.value >= u) return fmt::format("{}{}", f.value / u, name);
  return fmt::format("{}Hz", f.value);
}

std::string format_hex(std::uint64_t v) { return fmt::format("{:#x}", v); }

}  // namespace tessera
