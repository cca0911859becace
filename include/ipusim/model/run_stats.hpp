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
  std::uint64_t sync = 0;
  std::uint64_t exchange = 0;
  std::uint64_t host = 0;
  std::uint64_t total() const { return compute + sync + exchange + host; }
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
};

struct IpuRunStats {
  std::uint32_t ipu = 0;
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
};

struct RunStats {
  std::vector<IpuRunStats> ipus;
  std::uint64_t cycles = 0;   // the slowest IPU
  double seconds = 0;         // cycles / clock
  double wall_seconds = 0;    // host time spent simulating
};

}  // namespace ipusim
