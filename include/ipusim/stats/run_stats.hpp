// SPDX-License-Identifier: Apache-2.0
// What one simulation measured. Plain data produced by the model and consumed by report/.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ipusim/cost/program_costs.hpp"
#include "ipusim/stats/phase.hpp"

namespace ipusim {

// Accumulated time of one named compute set or exchange over all its executions.
struct NamedPhase {
  std::string name;
  std::uint64_t executions = 0;
  std::uint64_t cycles = 0;  // sum over executions
  std::string layers, pass;  // what it serves (trace::layers_label, pass_label); "" if unknown
  // What one execution does, as the engine costed it (reports read these, never re-cost): a
  // compute set's FLOPs; an exchange's bytes received over all tiles.
  std::uint64_t flops = 0, bytes = 0;
};

// Traffic one directed link carried.
struct LinkUse {
  std::string name;  // e.g. "rail:ipu0->ipu2"
  std::uint64_t bytes = 0;
  std::uint64_t busy_cycles = 0;
};

// One span of an IPU's timeline (recorded by the fast engine only when asked: ModelOptions::
// record_spans). Times are exact tile-clock cycles from the start of the program. A memoised
// loop (one timed body scaled by its iteration count, docs/architecture.md) is recorded once:
// a kLoop span covering the whole loop, then each body phase once with `times` = iterations
// and `cycles` = its total over them, back to back. Loops that run every iteration (group
// steps, background transfers) record every iteration.
// A span is a phase (values 0 .. kPhaseKinds - 1, span_kind(PhaseKind)) or one of these.
enum class SpanKind : std::uint8_t {
  kLoop = kPhaseKinds,  // a repeat step; `times` = iterations it stands for, `index` = depth
  kBackgroundHost,      // a background host transfer in flight (not on the program's track)
};
constexpr SpanKind span_kind(PhaseKind k) { return static_cast<SpanKind>(k); }
// The phase kind of a phase span; nullopt for kLoop and kBackgroundHost.
constexpr std::optional<PhaseKind> phase_of(SpanKind k) {
  if (static_cast<std::size_t>(k) >= kPhaseKinds) return std::nullopt;
  return static_cast<PhaseKind>(k);
}
struct Span {
  std::uint64_t start = 0;   // cycles since the start of the program
  std::uint64_t cycles = 0;  // duration (all `times` executions)
  std::uint64_t times = 1;   // executions this span stands for
  // compute / exchange: compute set / exchange index; inter-IPU: global exchange index;
  // collective: trace::CollectiveOp; external sync: trace::GroupKind; host / streaming /
  // kBackgroundHost: trace::HostDirection; kLoop: nesting depth.
  std::uint32_t index = 0;
  std::uint32_t active_tiles = 0;  // kCompute: tiles with at least one vertex
  SpanKind kind = span_kind(PhaseKind::kCompute);
};

// One distinct superstep of an IPU's program: a compute step of the program (one position in
// it, however often it runs) and the phases after it up to the next compute phase, totalled
// over every execution. Memory is bounded by the program's size, not its executed length.
struct SuperstepTotals {
  std::int64_t index = -1;         // order of first execution; -1: before the first compute
  std::uint32_t compute_set = 0;   // the compute set that starts it (index >= 0)
  std::uint64_t executions = 0;    // of its compute phase (0 for index -1)
  std::uint64_t first_start = 0;   // cycles from the start of the program to its first phase
  std::uint64_t active_tiles = 0;  // tiles with at least one vertex in the compute set
  PhaseCycles cycles;              // per phase kind, all executions
};

// Per-tile activity of one phase for the timeline's tile tracks (chosen IPU and supersteps).
struct TileSpan {
  std::uint64_t start = 0;
  std::uint64_t cycles = 0;  // compute: the tile's busy cycles; exchange: the phase's duration
  std::uint64_t value = 0;   // compute: busy cycles; exchange: bytes sent + received
  std::uint32_t tile = 0;
  std::uint32_t superstep = 0;
  std::uint32_t index = 0;  // compute set / exchange index
  bool exchange = false;
};

// The group steps' time (waiting, external sync and the step itself) by step kind: external
// syncs alone, collectives, inter-IPU copies (per-layer attribution, report::layer_rows).
struct GroupStepCycles {
  PhaseCycles external_sync, collective, inter_ipu;
};

struct IpuRunStats {
  std::uint32_t ipu = 0;      // system IPU index
  std::uint32_t program = 0;  // program (IPU of the replica) it ran
  std::uint32_t replica = 0;
  std::uint64_t cycles = 0;  // end time of this IPU's program
  PhaseCycles phases;
  PhaseCounts counts;
  std::uint64_t flops = 0;
  std::uint64_t exchange_bytes = 0;  // received over all tiles
  std::uint64_t host_bytes = 0;
  std::vector<std::uint64_t> tile_compute_cycles;  // busy cycles per tile
  std::vector<std::uint64_t> tile_exchange_bytes;  // sent + received per tile
  cost::MemoryMap memory;
  std::vector<NamedPhase> compute_sets;  // one per compute set of the program
  std::vector<NamedPhase> exchanges;     // one per exchange of the program
  GroupStepCycles group_steps;
  std::vector<Span> spans;           // when recorded (fast engine), in start order
  std::vector<TileSpan> tile_spans;  // when recorded for this IPU
  // Each distinct superstep once (supersteps.csv), when recorded (fast engine,
  // ModelOptions::record_supersteps): the phases before the first compute phase (index -1)
  // first if there are any, then in the order of first execution.
  std::vector<SuperstepTotals> supersteps;
};

struct RunStats {
  std::vector<IpuRunStats> ipus;  // the simulated IPUs
  std::uint32_t replicas = 1;
  std::uint32_t system_ipus = 1;     // IPUs taking part (replicas x programs)
  std::uint32_t ipus_in_system = 1;  // IPUs the system has (some may take no part)
  bool replica_symmetric = false;    // only replica 0 was simulated
  std::string system_name;           // empty for a single chip
  std::string machine_name;          // the system's machine (machine.name); empty for a chip
  std::vector<LinkUse> links;        // directed links that carried traffic, busiest first
  std::uint64_t cycles = 0;          // the slowest IPU
  double seconds = 0;                // cycles / clock
  double wall_seconds = 0;           // host time spent simulating
};

}  // namespace ipusim
