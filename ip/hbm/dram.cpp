#include "hbm/dram.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/input.hpp"
#include "common/units.hpp"

namespace tessera::hbm {

std::uint64_t Timing::first_refresh(std::uint64_t period, unsigned index, unsigned count, bool stagger) {
  if (!stagger || count < 2) return period;
  unsigned bits = 0;
  while ((1u << bits) < count) ++bits;
  unsigned reversed = 0;
  for (unsigned b = 0; b < bits; ++b)
    if (index >> b & 1) reversed |= 1u << (bits - 1 - b);
  return period - reversed * period / (1ull << bits);
}

namespace energy {
const power::Event activate = power::declare_event("hbm_activate", "hbm", 900, "an ACT command of one bank");
const power::Event read_byte = power::declare_event("hbm_read_byte", "hbm", 31, "a byte read from the stack");
const power::Event write_byte = power::declare_event("hbm_write_byte", "hbm", 31, "a byte written to the stack");
const power::Event refresh = power::declare_event("hbm_refresh", "hbm", 30000, "a refresh command of one pseudo-channel");
}  // namespace energy

const char* cmd_name(Cmd c) {
  static const char* const names[] = {"ACT", "RD", "WR", "PRE", "REFab", "REFpb"};
  return names[static_cast<unsigned>(c)];
}

Timing Timing::load(const std::string& file) {
  const nlohmann::json j = read_json_file(file, "the HBM timing file");
  auto fail = [&](const std::string& key, const std::string& why) -> double {
    throw ConfigError(file + ": " + key + ": " + why);  // elaboration-only
  };
  if (!j.is_object()) fail("(top level)", "expected an object of timing parameters");
  Timing t;
  auto count = [&](const char* key, unsigned fallback) {
    if (!j.contains(key)) return fallback;
    const nlohmann::json& v = j[key];
    if (!v.is_number_unsigned() || v.get<std::uint64_t>() == 0 || v.get<std::uint64_t>() > 4096)
      fail(key, "expected a whole number from 1 to 4096, got " + cut(v.dump()));
    return v.get<unsigned>();
  };
  auto ns = [&](const char* key) {
    if (!j.contains(key) || !j[key].is_string()) fail(key, "required, as a time such as \"12.5ns\"");
    try {
      return parse_time(j[key].get<std::string>()).to_seconds() * 1e9;
    } catch (const UnitError& e) {
      return fail(key, e.what());
    }
  };
  if (j.contains("name") && !j["name"].is_string()) fail("name", "expected a string");
  if (j.contains("doc") && !j["doc"].is_string()) fail("doc", "expected a string");
  if (j.contains("data_rate") && !j["data_rate"].is_string()) fail("data_rate", "expected a bit rate such as \"6.4Gb/s\"");
  t.name = j.value("name", file);
  t.tck_ns = ns("tCK");
  if (t.tck_ns <= 0) fail("tCK", "must be positive");
  t.burst_length = count("burst_length", 8u);
  t.pc_width_bits = count("pc_width_bits", 32u);
  double rate = 0;
  try {
    rate = parse_bitrate(j.value("data_rate", std::string("6.4Gb/s")));
  } catch (const UnitError& e) {
    fail("data_rate", e.what());
  }
  // Cycles of the data bus for one burst: beats / (beats per cycle).
  const double burst_cycles = std::ceil(t.burst_length / (rate * t.tck_ns * 1e-9) - 1e-9);
  if (burst_cycles > 1e6) fail("data_rate", "a burst would take more than 10^6 clock cycles");
  t.tBURST = static_cast<unsigned>(burst_cycles);
  auto cyc = [&](const char* key) {
    const double c = std::ceil(ns(key) / t.tck_ns - 1e-6);
    if (c > 1e8) fail(key, "is more than 10^8 clock cycles");
    return static_cast<unsigned>(c);
  };
  t.tCL = cyc("tCL");
  t.tCWL = cyc("tCWL");
  t.tRCDRD = cyc("tRCDRD");
  t.tRCDWR = cyc("tRCDWR");
  t.tRP = cyc("tRP");
  t.tRAS = cyc("tRAS");
  t.tRC = cyc("tRC");
  t.tCCD_S = cyc("tCCD_S");
  t.tCCD_L = cyc("tCCD_L");
  t.tRRD_S = cyc("tRRD_S");
  t.tRRD_L = cyc("tRRD_L");
  t.tFAW = cyc("tFAW");
  t.tWR = cyc("tWR");
  t.tRTP = cyc("tRTP");
  t.tWTR_S = cyc("tWTR_S");
  t.tWTR_L = cyc("tWTR_L");
  t.tRTW = cyc("tRTW");
  t.tREFI = cyc("tREFI");
  t.tRFCab = cyc("tRFCab");
  t.tRFCpb = cyc("tRFCpb");
  for (auto [key, field] : {std::pair<const char*, unsigned*>{"tDQSCK", &t.tDQSCK}, {"tREFISB", &t.tREFISB}, {"tRREFD", &t.tRREFD}, {"tCCDR", &t.tCCDR}})
    if (j.contains(key)) *field = cyc(key);
  for (auto it = j.begin(); it != j.end(); ++it) {
    static const char* const known[] = {"name", "doc", "tCK", "burst_length", "pc_width_bits", "data_rate",
                                        "tCL", "tCWL", "tRCDRD", "tRCDWR", "tRP", "tRAS", "tRC", "tCCD_S",
                                        "tCCD_L", "tRRD_S", "tRRD_L", "tFAW", "tWR", "tRTP", "tWTR_S", "tWTR_L",
                                        "tRTW", "tREFI", "tRFCab", "tRFCpb", "tDQSCK", "tREFISB", "tRREFD", "tCCDR"};
    if (std::find(std::begin(known), std::end(known), it.key()) == std::end(known)) fail(it.key(), "unknown key");
  }
  if (t.tBURST == 0 || t.tCCD_S < t.tBURST) fail("tCCD_S", "must cover a whole burst on the data bus");
  return t;
}

}  // namespace tessera::hbm
