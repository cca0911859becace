// SPDX-License-Identifier: Apache-2.0
#include "ipusim/util/units.hpp"

#include <fmt/format.h>

#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>

#include "ipusim/util/error.hpp"
#include "ipusim/util/strings.hpp"

namespace ipusim {
namespace {

struct Split {
  double number;
  std::string_view unit;
};

// Splits "1.325GHz" into 1.325 and "GHz". Throws if there is no leading number.
Split split_number(std::string_view text, std::string_view expected) {
  std::string_view s = trim(text);
  std::size_t i = 0;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.' ||
                          s[i] == 'e' || s[i] == 'E' || s[i] == '+' || s[i] == '-')) {
    // Stop at an 'e'/'E' that starts a unit rather than an exponent.
    if ((s[i] == 'e' || s[i] == 'E') &&
        (i + 1 >= s.size() || !(std::isdigit(static_cast<unsigned char>(s[i + 1])) ||
                                s[i + 1] == '-' || s[i + 1] == '+')))
      break;
    ++i;
  }
  double value = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + i, value);
  if (i == 0 || ec != std::errc() || ptr != s.data() + i || !std::isfinite(value))
    throw ParseError(fmt::format("expected {}, found \"{}\"", expected, std::string(text)));
  return {value, trim(s.substr(i))};
}

[[noreturn]] void bad_unit(std::string_view text, std::string_view expected) {
  throw ParseError(fmt::format("expected {}, found \"{}\"", expected, std::string(text)));
}

void require_non_negative(double v, std::string_view text, std::string_view expected) {
  if (v < 0) bad_unit(text, std::string(expected) + " (not negative)");
}

std::uint64_t to_u64(double v, std::string_view text, std::string_view expected) {
  if (v > static_cast<double>(std::numeric_limits<std::uint64_t>::max()) / 2)
    throw ParseError(
        fmt::format("expected {}, found \"{}\" (too large)", expected, std::string(text)));
  double r = std::round(v);
  if (std::fabs(r - v) > 1e-9 * std::max(1.0, std::fabs(v)))
    throw ParseError(
        fmt::format("expected {} as a whole number, found \"{}\"", expected, std::string(text)));
  return static_cast<std::uint64_t>(r);
}

struct UnitScale {
  std::string_view name;
  double scale;
};

constexpr std::array<UnitScale, 16> kByteUnits{{{"B", 1.0},
                                                {"KiB", 1024.0},
                                                {"MiB", 1048576.0},
                                                {"GiB", 1073741824.0},
                                                {"TiB", 1099511627776.0},
                                                {"kB", 1e3},
                                                {"KB", 1e3},
                                                {"MB", 1e6},
                                                {"GB", 1e9},
                                                {"TB", 1e12},
                                                {"bit", 0.125},
                                                {"bits", 0.125},
                                                {"Kibit", 128.0},
                                                {"Mibit", 131072.0},
                                                {"Gibit", 134217728.0},
                                                {"Gbit", 1.25e8}}};

bool lookup(std::string_view unit, const auto& table, double& scale) {
  for (const auto& u : table)
    if (u.name == unit) {
      scale = u.scale;
      return true;
    }
  return false;
}

std::string trim_float(double v) {
  std::string s = fmt::format("{:.12g}", v);
  return s;
}

}  // namespace

Frequency parse_frequency(std::string_view text) {
  constexpr std::string_view kExpected = "a frequency such as \"1.325GHz\"";
  auto [v, unit] = split_number(text, kExpected);
  static constexpr std::array<UnitScale, 4> kUnits{
      {{"Hz", 1.0}, {"kHz", 1e3}, {"MHz", 1e6}, {"GHz", 1e9}}};
  double scale = 0;
  if (!lookup(unit, kUnits, scale)) bad_unit(text, kExpected);
  if (v <= 0) bad_unit(text, std::string(kExpected) + " (greater than zero)");
  return Frequency{v * scale};
}

Bytes parse_bytes(std::string_view text) {
  constexpr std::string_view kExpected = "a size such as \"624KiB\"";
  auto [v, unit] = split_number(text, kExpected);
  double scale = 0;
  if (!lookup(unit, kByteUnits, scale)) bad_unit(text, kExpected);
  require_non_negative(v, text, kExpected);
  return Bytes{to_u64(v * scale, text, kExpected)};
}

Cycles parse_cycles(std::string_view text) {
  constexpr std::string_view kExpected = "a cycle count such as \"90cycles\"";
  auto [v, unit] = split_number(text, kExpected);
  if (unit != "cycles" && unit != "cycle") bad_unit(text, kExpected);
  require_non_negative(v, text, kExpected);
  return Cycles{to_u64(v, text, kExpected)};
}

BytesPerCycle parse_bytes_per_cycle(std::string_view text) {
  constexpr std::string_view kExpected = "a rate such as \"4B/cycle\"";
  auto [v, unit] = split_number(text, kExpected);
  auto slash = unit.find('/');
  if (slash == std::string_view::npos) bad_unit(text, kExpected);
  auto per = unit.substr(slash + 1);
  if (per != "cycle" && per != "cycles") bad_unit(text, kExpected);
  double scale = 0;
  if (!lookup(unit.substr(0, slash), kByteUnits, scale)) bad_unit(text, kExpected);
  require_non_negative(v, text, kExpected);
  return BytesPerCycle{v * scale};
}

Bandwidth parse_bandwidth(std::string_view text) {
  constexpr std::string_view kExpected = "a bandwidth such as \"32GB/s\" or \"100Gbit/s\"";
  auto [v, unit] = split_number(text, kExpected);
  auto slash = unit.find('/');
  if (slash == std::string_view::npos || unit.substr(slash + 1) != "s") bad_unit(text, kExpected);
  double scale = 0;
  if (!lookup(unit.substr(0, slash), kByteUnits, scale)) bad_unit(text, kExpected);
  require_non_negative(v, text, kExpected);
  return Bandwidth{v * scale};
}

Duration parse_duration(std::string_view text) {
  constexpr std::string_view kExpected = "a time such as \"15ns\"";
  auto [v, unit] = split_number(text, kExpected);
  static constexpr std::array<UnitScale, 5> kUnits{
      {{"s", 1.0}, {"ms", 1e-3}, {"us", 1e-6}, {"ns", 1e-9}, {"ps", 1e-12}}};
  double scale = 0;
  if (!lookup(unit, kUnits, scale)) bad_unit(text, kExpected);
  require_non_negative(v, text, kExpected);
  return Duration{v * scale};
}

std::string format(Frequency f) {
  if (f.hz >= 1e9) return trim_float(f.hz / 1e9) + "GHz";
  if (f.hz >= 1e6) return trim_float(f.hz / 1e6) + "MHz";
  return trim_float(f.hz) + "Hz";
}

std::string format(Bytes b) {
  const std::uint64_t n = b.count;
  if (n != 0 && n % (1ull << 30) == 0) return fmt::format("{}GiB", n >> 30);
  if (n != 0 && n % (1ull << 20) == 0) return fmt::format("{}MiB", n >> 20);
  if (n != 0 && n % (1ull << 10) == 0) return fmt::format("{}KiB", n >> 10);
  return fmt::format("{}B", n);
}

std::string format(Cycles c) { return fmt::format("{}cycles", c.count); }
std::string format(BytesPerCycle r) { return trim_float(r.value) + "B/cycle"; }

std::string format(Bandwidth b) {
  if (b.bytes_per_second >= 1e9) return trim_float(b.bytes_per_second / 1e9) + "GB/s";
  if (b.bytes_per_second >= 1e6) return trim_float(b.bytes_per_second / 1e6) + "MB/s";
  return trim_float(b.bytes_per_second) + "B/s";
}

std::string format(Duration d) {
  if (d.seconds == 0) return "0ns";
  if (d.seconds >= 1) return trim_float(d.seconds) + "s";
  if (d.seconds >= 1e-3) return trim_float(d.seconds * 1e3) + "ms";
  if (d.seconds >= 1e-6) return trim_float(d.seconds * 1e6) + "us";
  return trim_float(d.seconds * 1e9) + "ns";
}

std::string human_bytes(double bytes) { return human_bytes_as(bytes, bytes); }

std::string human_bytes_as(double bytes, double scale) {
  static constexpr std::array<std::string_view, 5> kNames{"B", "KiB", "MiB", "GiB", "TiB"};
  std::size_t i = 0;
  while (scale >= 1024.0 && i + 1 < kNames.size()) {
    scale /= 1024.0;
    bytes /= 1024.0;
    ++i;
  }
  return i == 0 ? fmt::format("{:.0f} B", bytes) : fmt::format("{:.2f} {}", bytes, kNames[i]);
}

std::string human_seconds(double s) {
  if (s >= 1) return fmt::format("{:.3f} s", s);
  if (s >= 1e-3) return fmt::format("{:.3f} ms", s * 1e3);
  if (s >= 1e-6) return fmt::format("{:.3f} us", s * 1e6);
  return fmt::format("{:.1f} ns", s * 1e9);
}

std::string human_rate(double v, std::string_view unit) {
  static constexpr std::array<std::string_view, 6> kPrefix{"", "k", "M", "G", "T", "P"};
  std::size_t i = 0;
  while (v >= 1000.0 && i + 1 < kPrefix.size()) {
    v /= 1000.0;
    ++i;
  }
  return fmt::format("{:.2f} {}{}", v, kPrefix[i], unit);
}

std::string human_frequency(double hz) {
  static constexpr std::array<std::string_view, 4> kPrefix{"", "k", "M", "G"};
  std::size_t i = 0;
  while (hz >= 1000.0 && i + 1 < kPrefix.size()) {
    hz /= 1000.0;
    ++i;
  }
  return fmt::format("{:.6g} {}Hz", hz, kPrefix[i]);
}

}  // namespace ipusim
