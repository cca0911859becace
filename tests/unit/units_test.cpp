// SPDX-License-Identifier: Apache-2.0
#include "ipusim/util/units.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "ipusim/util/error.hpp"
#include "ipusim/util/strings.hpp"

namespace ipusim {
namespace {

TEST(Units, ParsesEveryKind) {
  EXPECT_DOUBLE_EQ(parse_frequency("1.325GHz").hz, 1.325e9);
  EXPECT_DOUBLE_EQ(parse_frequency("1850 MHz").hz, 1.85e9);
  EXPECT_EQ(parse_bytes("624KiB").count, 638976u);
  EXPECT_EQ(parse_bytes("64bit").count, 8u);
  EXPECT_EQ(parse_bytes("3.6GB").count, 3600000000u);
  EXPECT_EQ(parse_cycles("90cycles").count, 90u);
  EXPECT_DOUBLE_EQ(parse_bytes_per_cycle("4B/cycle").value, 4.0);
  EXPECT_DOUBLE_EQ(parse_bandwidth("100Gbit/s").bytes_per_second, 12.5e9);
  EXPECT_DOUBLE_EQ(parse_duration("15ns").seconds, 15e-9);
}

TEST(Units, RejectsWrongUnitsWithTheExpectedForm) {
  try {
    parse_frequency("1.325GB");
    FAIL() << "no throw";
  } catch (const ParseError& e) {
    EXPECT_STREQ(e.what(), "expected a frequency such as \"1.325GHz\", found \"1.325GB\"");
  }
  EXPECT_THROW(parse_bytes("-5KiB"), ParseError);
  EXPECT_THROW(parse_bytes("1.5B"), ParseError);   // not a whole number of bytes
  EXPECT_THROW(parse_cycles("90"), ParseError);    // unit required
  EXPECT_THROW(parse_bytes("KiB"), ParseError);    // number required
  EXPECT_THROW(parse_bytes("1e30B"), ParseError);  // too large
  EXPECT_THROW(parse_frequency("0GHz"), ParseError);
}

TEST(Units, FormatRoundTrips) {
  for (const char* s : {"1.325GHz", "1.85GHz", "624KiB", "256KiB", "90cycles", "4B/cycle", "32GB/s",
                        "2us", "15ns"}) {
    SCOPED_TRACE(s);
    const std::string text(s);
    if (text.ends_with("Hz"))
      EXPECT_EQ(format(parse_frequency(text)), text);
    else if (text.ends_with("cycles"))
      EXPECT_EQ(format(parse_cycles(text)), text);
    else if (text.ends_with("/cycle"))
      EXPECT_EQ(format(parse_bytes_per_cycle(text)), text);
    else if (text.ends_with("/s"))
      EXPECT_EQ(format(parse_bandwidth(text)), text);
    else if (text.ends_with("s"))
      EXPECT_EQ(format(parse_duration(text)), text);
    else
      EXPECT_EQ(format(parse_bytes(text)), text);
  }
}

TEST(Units, SecondsFromCycles) {
  EXPECT_DOUBLE_EQ((Cycles{1325} / Frequency{1.325e9}).seconds, 1e-6);
  EXPECT_DOUBLE_EQ((Cycles{0} / Frequency{1.325e9}).seconds, 0.0);
}

TEST(Units, CyclesRoundUpWithOneRule) {
  EXPECT_EQ(ceil_cycles(0.0), Cycles{0});
  EXPECT_EQ(ceil_cycles(5.0), Cycles{5});          // an exact integer stays
  EXPECT_EQ(ceil_cycles(5.0 + 1e-12), Cycles{5});  // noise above an integer is not a cycle
  EXPECT_EQ(ceil_cycles(5.0 + 1e-6), Cycles{6});
  EXPECT_EQ(ceil_cycles(5.5), Cycles{6});
  EXPECT_EQ(ceil_cycles(4.9999), Cycles{5});
  EXPECT_EQ(ceil_cycles(-1e-12), Cycles{0});
  EXPECT_EQ(ceil_cycles(0.1 * 3 * 10), Cycles{3});                          // 3.0000000000000004
  EXPECT_EQ(ceil_cycles(9007199254740992.0), Cycles{9007199254740992ull});  // 2^53
  EXPECT_THROW(ceil_cycles(18446744073709551616.0), ArithmeticOverflow);    // 2^64
  EXPECT_THROW(ceil_cycles(std::nan("")), ArithmeticOverflow);
}

TEST(Units, BytesOverRateIsWholeCycles) {
  EXPECT_EQ(Bytes{8} / BytesPerCycle{4}, Cycles{2});
  EXPECT_EQ(Bytes{10} / BytesPerCycle{4}, Cycles{3});  // 2.5 cycles
  EXPECT_EQ(Bytes{1} / BytesPerCycle{16}, Cycles{1});
  EXPECT_EQ(Bytes{0} / BytesPerCycle{4}, Cycles{0});
  EXPECT_EQ(Bytes{21} / BytesPerCycle{0.7}, Cycles{30});                // 30.000000000000004
  EXPECT_EQ(Bytes{22} / BytesPerCycle{0.7}, Cycles{32});                // 31.43
  EXPECT_EQ(Bytes{1000} / BytesPerCycle{1e9 / 1.325e9}, Cycles{1325});  // 1GB/s at 1.325GHz
}

TEST(Units, DurationTimesFrequencyIsWholeCycles) {
  EXPECT_EQ(Duration{1e-6} * Frequency{1.325e9}, Cycles{1325});
  EXPECT_EQ(Duration{15e-9} * Frequency{1.325e9}, Cycles{20});  // 19.875
  EXPECT_EQ(Frequency{1.325e9} * Duration{15e-9}, Cycles{20});
  EXPECT_EQ(Duration{35e-9} * Frequency{1.6e9}, Cycles{56});  // 56.00000000000001
  EXPECT_EQ(Duration{0} * Frequency{1.6e9}, Cycles{0});
}

TEST(Units, ClockPeriodInPicoseconds) {
  EXPECT_DOUBLE_EQ(Frequency{1.6e9}.period_ps(), 625.0);
  EXPECT_DOUBLE_EQ(Frequency{1.325e9}.period_ps(), 1e12 / 1.325e9);  // 754.716...
  EXPECT_NEAR(Frequency{1.325e9}.period_ps(), 754.7169811, 1e-6);
}

}  // namespace
}  // namespace ipusim

namespace ipusim {
TEST(Units, HumanFrequencyKeepsTheConfiguredDigits) {
  // The GC200 clock is 1.325 GHz; two decimals ("1.32 GHz") would misstate it.
  EXPECT_EQ(human_frequency(1.325e9), "1.325 GHz");
  EXPECT_EQ(human_frequency(1.85e9), "1.85 GHz");
  EXPECT_EQ(human_frequency(1.6e9), "1.6 GHz");
  EXPECT_EQ(human_frequency(500e6), "500 MHz");
}
}  // namespace ipusim

namespace ipusim {
namespace {

TEST(Printable, EscapesC0C1AndBytesThatAreNotUtf8) {
  // C0 as before; the C1 controls of UTF-8 (CSI U+009B, NEL U+0085) as \uNNNN; a raw 0x9b
  // byte (not UTF-8, but a CSI to an 8-bit terminal) and other invalid bytes as \xNN
  // (issue 55, part 4). Printable UTF-8 is kept as it is.
  EXPECT_EQ(printable("a\x1b[31m\n"), "a\\x1b[31m\\n");
  EXPECT_EQ(printable("a\xc2\x9b"
                      "31m"),
            "a\\u009b31m");
  EXPECT_EQ(printable("\xc2\x85"), "\\u0085");
  EXPECT_EQ(printable("a\x9b"
                      "31m"),
            "a\\x9b31m");
  EXPECT_EQ(printable("\xe9t\xc3"), "\\xe9t\\xc3");  // Latin-1, and a cut sequence
  EXPECT_EQ(printable("\xc0\xaf"), "\\xc0\\xaf");    // overlong '/'
  EXPECT_EQ(printable("caf\xc3\xa9 \xe2\x86\x92 \xf0\x9f\x98\x80"),
            "caf\xc3\xa9 \xe2\x86\x92 \xf0\x9f\x98\x80");  // é, an arrow, an emoji
  EXPECT_TRUE(has_control_characters("\xc2\x9b"));
  EXPECT_TRUE(has_control_characters("\x9b"));
  EXPECT_FALSE(has_control_characters("caf\xc3\xa9"));
}

TEST(Units, HumanBytesAsKeepsTheScalesUnit) {
  // 514.55 KiB against a 1,250 KiB tile: both in KiB (the summary said "of 1.22 MiB").
  const double capacity = 1250.0 * 1024;
  EXPECT_EQ(human_bytes(capacity), "1.22 MiB");
  EXPECT_EQ(human_bytes_as(514.55 * 1024, capacity), "0.50 MiB");
  EXPECT_EQ(human_bytes_as(526899.2, 624.0 * 1024), "514.55 KiB");
  EXPECT_EQ(human_bytes_as(512, 624.0 * 1024), "0.50 KiB");
  EXPECT_EQ(human_bytes_as(512, 1000), "512 B");
}

}  // namespace
}  // namespace ipusim
