// Quantities with units, parsed in one place for the platform file, the
// command line and the register descriptions: "1.5GHz", "30ns", "16GiB",
// "0x8000_0000". Each parser throws UnitError with a message that says what
// was expected and what was found; callers add the instance and key.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <systemc>

namespace tessera {

struct UnitError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Frequencies are kept in hertz.
struct Hertz {
  double value = 0;
  sc_core::sc_time period() const { return sc_core::sc_time(1.0 / value, sc_core::SC_SEC); }
};

// Plain unsigned integers: decimal, 0x hex, 0b binary, with '_' separators.
std::uint64_t parse_uint(const std::string& text);
// Byte counts: a plain integer, or with B, KiB/MiB/GiB/TiB (powers of two)
// or kB/MB/GB/TB (powers of ten).
std::uint64_t parse_size(const std::string& text);
// Times: "30ns", "1.5 us", "0" (s, ms, us, ns, ps, fs).
sc_core::sc_time parse_time(const std::string& text);
// Frequencies: "1.5GHz", "100 MHz" (Hz, kHz, MHz, GHz).
Hertz parse_frequency(const std::string& text);
// Rates in bits per second: "6.4Gb/s", "25 Gbps".
double parse_bitrate(const std::string& text);

// Canonical spellings, as --dump-config prints them. Each parses back to
// the same value.
std::string format_size(std::uint64_t bytes);
std::string format_time(const sc_core::sc_time& t);
std::string format_frequency(Hertz f);
std::string format_hex(std::uint64_t v);

}  // namespace tessera
