#include <gtest/gtest.h>

#include "common/units.hpp"

using namespace tessera;

TEST(Units, Integers) {
  EXPECT_EQ(parse_uint("42"), 42u);
  EXPECT_EQ(parse_uint("0x8000_0000"), 0x80000000u);
  EXPECT_EQ(parse_uint("0b1010"), 10u);
  EXPECT_EQ(parse_uint("0xffff_ffff_ffff_ffff"), ~0ull);
  EXPECT_THROW(parse_uint("0x1_0000_0000_0000_0000"), UnitError);
  EXPECT_THROW(parse_uint("12a"), UnitError);
  EXPECT_THROW(parse_uint(""), UnitError);
}

TEST(Units, Sizes) {
  EXPECT_EQ(parse_size("16GiB"), 16ull << 30);
  EXPECT_EQ(parse_size("64 KiB"), 65536u);
  EXPECT_EQ(parse_size("1.5KiB"), 1536u);
  EXPECT_EQ(parse_size("2MB"), 2000000u);
  EXPECT_EQ(parse_size("0x1000"), 4096u);
  EXPECT_EQ(parse_size("100B"), 100u);
  EXPECT_THROW(parse_size("16Gib"), UnitError);
  EXPECT_THROW(parse_size("1.3B"), UnitError);
  EXPECT_EQ(format_size(16ull << 30), "16GiB");
  EXPECT_EQ(format_size(1000), "1000");
  EXPECT_EQ(parse_size(format_size(3 << 20)), 3u << 20);
}

TEST(Units, Times) {
  EXPECT_EQ(parse_time("30ns"), sc_core::sc_time(30, sc_core::SC_NS));
  EXPECT_EQ(parse_time("1.5 us"), sc_core::sc_time(1500, sc_core::SC_NS));
  EXPECT_EQ(parse_time("0"), sc_core::SC_ZERO_TIME);
  EXPECT_THROW(parse_time("30"), UnitError);
  EXPECT_THROW(parse_time("30 lightyears"), UnitError);
  EXPECT_EQ(format_time(sc_core::sc_time(3.9, sc_core::SC_US)), "3.9us");
  EXPECT_EQ(parse_time(format_time(sc_core::sc_time(625, sc_core::SC_PS))), sc_core::sc_time(625, sc_core::SC_PS));
}

TEST(Units, Frequencies) {
  EXPECT_DOUBLE_EQ(parse_frequency("1.5GHz").value, 1.5e9);
  EXPECT_DOUBLE_EQ(parse_frequency("100 MHz").value, 1e8);
  EXPECT_EQ(parse_frequency("1GHz").period(), sc_core::sc_time(1, sc_core::SC_NS));
  EXPECT_THROW(parse_frequency("1.5"), UnitError);
  EXPECT_THROW(parse_frequency("0Hz"), UnitError);
  EXPECT_EQ(format_frequency(Hertz{1.5e9}), "1.5GHz");
  EXPECT_DOUBLE_EQ(parse_bitrate("6.4Gb/s"), 6.4e9);
}

TEST(Units, ErrorSaysWhatWasExpected) {
  try {
    parse_time("fast");
    FAIL();
  } catch (const UnitError& e) {
    EXPECT_NE(std::string(e.what()).find("expected a time"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("fast"), std::string::npos);
  }
}
