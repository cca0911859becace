// SPDX-License-Identifier: Apache-2.0
// Physical quantities as types. Values are parsed from unit strings ("1.325GHz", "624KiB",
// "4B/cycle", "90cycles", "32GB/s", "15ns") at the config boundary and never travel as bare
// numbers with the unit in a comment.
#pragma once

#include <cmath>
#include <compare>
#include <cstdint>
#include <string>
#include <string_view>

#include "ipusim/util/checked.hpp"

namespace ipusim {

// A count of tile clock cycles.
struct Cycles {
  std::uint64_t count = 0;
  constexpr auto operator<=>(const Cycles&) const = default;
  constexpr Cycles& operator+=(Cycles o) {
    count += o.count;
    return *this;
  }
  friend constexpr Cycles operator+(Cycles a, Cycles b) { return Cycles{a.count + b.count}; }
  friend constexpr Cycles operator*(Cycles a, std::uint64_t k) { return Cycles{a.count * k}; }
};

// A size in bytes.
struct Bytes {
  std::uint64_t count = 0;
  constexpr auto operator<=>(const Bytes&) const = default;
  constexpr Bytes& operator+=(Bytes o) {
    count += o.count;
    return *this;
  }
  friend constexpr Bytes operator+(Bytes a, Bytes b) { return Bytes{a.count + b.count}; }
  friend constexpr Bytes operator*(Bytes a, std::uint64_t k) { return Bytes{a.count * k}; }
};

// A clock frequency in Hz.
struct Frequency {
  double hz = 0;
  constexpr auto operator<=>(const Frequency&) const = default;
  // The clock period in picoseconds, unrounded (754.7 at 1.325 GHz). SystemC time and the
  // timeline both count picoseconds; the model rounds this to whole ones (model/clock.hpp).
  constexpr double period_ps() const { return 1e12 / hz; }
};

// A per-cycle transfer rate (bytes per tile clock cycle).
struct BytesPerCycle {
  double value = 0;
  constexpr auto operator<=>(const BytesPerCycle&) const = default;
};

// A transfer rate in bytes per second (decimal SI prefixes: 1GB/s = 1e9 B/s).
struct Bandwidth {
  double bytes_per_second = 0;
  constexpr auto operator<=>(const Bandwidth&) const = default;
};

// A span of wall-clock (simulated) time, in seconds.
struct Duration {
  double seconds = 0;
  constexpr auto operator<=>(const Duration&) const = default;
};

// The one rounding rule from a real-valued cycle count to whole cycles: up, except that a value
// at most 1e-9 above an integer is that integer (floating-point noise from summing exact
// fractions, or from seconds x Hz, is not a cycle). Negative values give 0; a count of 2^64 or
// more (or NaN) throws ArithmeticOverflow.
inline Cycles ceil_cycles(double cycles) {
  const double c = std::ceil(cycles - 1e-9);
  if (!(c < 18446744073709551616.0)) throw ArithmeticOverflow();
  return Cycles{c > 0 ? static_cast<std::uint64_t>(c) : 0};
}

// Whole cycles to move `b` at `r`, rounded up by ceil_cycles. r > 0.
inline Cycles operator/(Bytes b, BytesPerCycle r) {
  return ceil_cycles(static_cast<double>(b.count) / r.value);
}

// Whole cycles of clock `f` that span `d`, rounded up by ceil_cycles.
inline Cycles operator*(Duration d, Frequency f) { return ceil_cycles(d.seconds * f.hz); }
inline Cycles operator*(Frequency f, Duration d) { return d * f; }

// Time taken by `c` cycles of clock `f` (exact, no rounding).
inline Duration operator/(Cycles c, Frequency f) {
  return Duration{static_cast<double>(c.count) / f.hz};
}

// Parsers: accept "<number><unit>" with optional spaces between; throw ParseError naming the
// expected form and what was found. Binary prefixes (KiB, MiB, GiB) are powers of 1024;
// decimal ones (kB, MB, GB) are powers of 1000. Bytes also accept "bit" forms ("64bit" = 8B).
Frequency parse_frequency(std::string_view text);
Bytes parse_bytes(std::string_view text);
Cycles parse_cycles(std::string_view text);
BytesPerCycle parse_bytes_per_cycle(std::string_view text);
Bandwidth parse_bandwidth(std::string_view text);
Duration parse_duration(std::string_view text);

// Canonical spellings, used in resolved configs; parse(format(x)) == x.
std::string format(Frequency f);
std::string format(Bytes b);
std::string format(Cycles c);
std::string format(BytesPerCycle r);
std::string format(Bandwidth b);
std::string format(Duration d);

// Human-friendly spellings for summaries ("5.69 KiB", "1.32 GHz", "18.3 us").
std::string human_bytes(double bytes);
// `bytes` in the unit human_bytes picks for `scale` (figures compared with one another in one
// unit: 514.55 KiB of 1250.00 KiB, not of 1.22 MiB).
std::string human_bytes_as(double bytes, double scale);
std::string human_seconds(double seconds);
std::string human_rate(double value, std::string_view unit);  // 1.2e12, "FLOP/s" -> "1.20 TFLOP/s"
// A clock as configured, without rounding away digits: 1.325e9 -> "1.325 GHz", 1.6e9 -> "1.6 GHz".
std::string human_frequency(double hz);

// Integer ceiling division, b > 0. Written without `a + b - 1`, which wraps for a near 2^64
// (ceil_div(2^64-1, 2) was 0, and a planner then divided by it: issue 16, defect A).
constexpr std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) {
  return a / b + (a % b != 0 ? 1 : 0);
}

}  // namespace ipusim
