// SPDX-License-Identifier: Apache-2.0
// Physical quantities as types. Values are parsed from unit strings ("1.325GHz", "624KiB",
// "4B/cycle", "90cycles", "32GB/s", "15ns") at the config boundary and never travel as bare
// numbers with the unit in a comment.
#pragma once

#include <compare>
#include <cstdint>
#include <string>
#include <string_view>

namespace ipusim {

// A count of tile clock cycles.
struct Cycles {
  std::uint64_t count = 0;
  constexpr auto operator<=>(const Cycles&) const = default;
  constexpr Cycles& operator+=(Cycles o) { count += o.count; return *this; }
  friend constexpr Cycles operator+(Cycles a, Cycles b) { return Cycles{a.count + b.count}; }
  friend constexpr Cycles operator*(Cycles a, std::uint64_t k) { return Cycles{a.count * k}; }
};

// A size in bytes.
struct Bytes {
  std::uint64_t count = 0;
  constexpr auto operator<=>(const Bytes&) const = default;
  constexpr Bytes& operator+=(Bytes o) { count += o.count; return *this; }
  friend constexpr Bytes operator+(Bytes a, Bytes b) { return Bytes{a.count + b.count}; }
  friend constexpr Bytes operator*(Bytes a, std::uint64_t k) { return Bytes{a.count * k}; }
};

// A clock frequency in Hz.
struct Frequency {
  double hz = 0;
  constexpr auto operator<=>(const Frequency&) const = default;
  // Seconds taken by `c` cycles at this frequency.
  double seconds(Cycles c) const { return static_cast<double>(c.count) / hz; }
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
