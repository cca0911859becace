// SPDX-License-Identifier: Apache-2.0
// What one simulation measured. Plain data produced by the model and consumed by report/.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ipusim/cost/program_costs.hpp"

namespace ipusim {

// Cycles spent in each BSP phase kind (tile clock cycles, wall time of the IPU).
struct PhaseCycles {
  std::uint64_t compute = 0;
  std::uint64_t sync = 0;           // internal (on-chip) syncs
  std::uint64_t exchange = 0;       // on-chip exchange
  std::uint64_t host = 0;           // host transfers
  std::uint64_t external_sync = 0;  // external syncs, including waiting for other IPUs
  std::uint64_t inter_ipu = 0;      // copies between IPUs (global exchanges)
  std::uint64_t collective = 0;     // collectives (after their group sync)
  std::uint64_t streaming = 0;      // Streaming Memory transfers through the gateway
  std::uint64_t total() const {
    return compute + sync + exchange + host + external_sync + inter_ipu + collective + streaming;
  }
};

// Accumulated time of one named compute set or exchange over all its executions.
struct NamedPhase {
  std::string name;
  std::uint64_t executions = 0;
  std::uint64_t cycles = 0;  // sum over executions
};

// Counts of executed phases.
struct PhaseCounts {
  std::uint64_t compute = 0;  // compute phases (supersteps)
  std::uint64_t sync = 0;
  std::uint64_t exchange = 0;
  std::uint64_t host = 0;
  std::uint64_t external_sync = 0;
  std::uint64_t inter_ipu = 0;
  std::uint64_t collective = 0;
  std::uint64_t streaming = 0;
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
enum class SpanKind : std::uint8_t {
  kCompute, kSync, kExchange, kHost, kStreaming, kExternalSync, kInterIpu, kCollective,
  kLoop,            // a repeat step; `times` = iterations it stands for, `index` = nesting depth
  kBackgroundHost,  // a background host transfer in flight (not on the program's track)
};
struct Span {
  std::uint64_t start = 0;   // cycles since the start of the program
  std::uint64_t cycles = 0;  // duration (all `times` executions)
  std::uint64_t times = 1;   // executions this span stands for
  // kCompute / kExchange: compute set / exchange index; kInterIpu: global exchange index;
  // kCollective: trace::CollectiveOp; kExternalSync: trace::GroupKind; kHost / kStreaming /
  // kBackgroundHost: trace::HostDirection; kLoop: nesting depth.
  std::uint32_t index = 0;
  std::uint32_t active_tiles = 0;  // kCompute: tiles with at least one vertex
  SpanKind kind = SpanKind::kCompute;
};

// Per-tile activity of one phase for the timeline's tile tracks (chosen IPU and supersteps).
struct TileSpan {
  std::uint64_t start = 0;
  std::uint64_t cycles = 0;  // compute: the tile's busy cycles; exchange: the phase's duration
  std::uint64_t value = 0;   // compute: busy cycles; exchange: bytes sent + received
  std::uint32_t tile = 0;
  std::uint32_t superstep = 0;
  std::uint32_t index = 0;   // compute set / exchange index
  bool exchange = false;
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
  std::vector<Span> spans;               // when recorded (fast engine), in start order
  std::vector<TileSpan> tile_spans;      // when recorded for this IPU
};

struct RunStats {
  std::vector<IpuRunStats> ipus;  // the simulated IPUs
  std::uint32_t replicas = 1;
  std::uint32_t system_ipus = 1;  // IPUs taking part (replicas x programs)
  bool replica_symmetric = false; // only replica 0 was simulated
  std::string system_name;        // empty for a single chip
  std::vector<LinkUse> links;     // directed links that carried traffic, busiest first
  std::uint64_t cycles = 0;   // the slowest IPU
  double seconds = 0;         // cycles / clock
  double wall_seconds = 0;    // host time spent simulating
};

}  // namespace ipusim
