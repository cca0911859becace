// SPDX-License-Identifier: Apache-2.0
// The kinds of phase an IPU's time is split into: one enum, one table, and arrays indexed by
// the kind. The table's order is the order of every output that lists phases (stats.json
// "phases", the summary, supersteps.csv columns, sweep.csv/json, report charts). A new kind is
// a value of PhaseKind and a row of kPhases; the engines then charge it where they run it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ipusim {

enum class PhaseKind : std::uint8_t {
  kCompute,       // compute sets (supersteps)
  kSync,          // internal (on-chip) syncs
  kExchange,      // on-chip exchanges
  kHost,          // host transfers
  kStreaming,     // Streaming Memory transfers through the gateway
  kExternalSync,  // external syncs: from the last member's arrival to the sync's end
  kWaiting,       // at an external sync or collective, waiting for the group's other IPUs
  kInterIpu,      // copies between IPUs (global exchanges)
  kCollective,    // collectives (after their group sync)
};
inline constexpr std::size_t kPhaseKinds = 9;

struct PhaseInfo {
  PhaseKind kind;
  std::string_view name;     // stats.json key, CSV column stem, chart label
  std::string_view counted;  // what its count counts, in the summary ("compute phases")
  std::string_view colour;   // report chart colour
  bool on_chip;              // listed in the summary even when it never ran
};

inline constexpr std::array<PhaseInfo, kPhaseKinds> kPhases{{
    {PhaseKind::kCompute, "compute", "compute phases", "#4e79a7", true},
    {PhaseKind::kSync, "sync", "syncs", "#f28e2b", true},
    {PhaseKind::kExchange, "exchange", "exchanges", "#e15759", true},
    {PhaseKind::kHost, "host", "host copies", "#76b7b2", true},
    {PhaseKind::kStreaming, "streaming", "transfers", "#59a14f", false},
    {PhaseKind::kExternalSync, "external_sync", "syncs", "#edc948", false},
    {PhaseKind::kWaiting, "waiting", "waits for other IPUs", "#bab0ac", false},
    {PhaseKind::kInterIpu, "inter_ipu", "global exchanges", "#b07aa1", false},
    {PhaseKind::kCollective, "collective", "collectives", "#ff9da7", false},
}};

constexpr bool phase_table_in_enum_order() {
  for (std::size_t i = 0; i < kPhaseKinds; ++i)
    if (static_cast<std::size_t>(kPhases[i].kind) != i) return false;
  return true;
}
static_assert(phase_table_in_enum_order(), "kPhases rows must follow PhaseKind order");

constexpr const PhaseInfo& phase_info(PhaseKind k) { return kPhases[static_cast<std::size_t>(k)]; }
constexpr std::string_view phase_name(PhaseKind k) { return phase_info(k).name; }

// One value per phase kind, indexed by PhaseKind.
template <class T>
struct PerPhase {
  std::array<T, kPhaseKinds> values{};
  constexpr T& operator[](PhaseKind k) { return values[static_cast<std::size_t>(k)]; }
  constexpr const T& operator[](PhaseKind k) const { return values[static_cast<std::size_t>(k)]; }
  constexpr T total() const {
    T sum{};
    for (const T& v : values) sum += v;
    return sum;
  }
};

using PhaseCycles = PerPhase<std::uint64_t>;  // tile clock cycles per kind (IPU wall time)
using PhaseCounts = PerPhase<std::uint64_t>;  // phases executed per kind

}  // namespace ipusim
