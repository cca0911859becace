// SPDX-License-Identifier: Apache-2.0
// The run directory's data files for people's own notebooks and for `ipusim report`
// (docs/stats-reference.md), and the Chrome/Perfetto timeline (docs/reports.md).
#pragma once

#include <cstdint>
#include <string>

#include "ipusim/config/chip_spec.hpp"
#include "ipusim/stats/run_stats.hpp"
#include "ipusim/trace/program.hpp"

namespace ipusim::report {

// tiles.csv (the run directory's, and `ipusim run --tile-stats FILE`): one row per tile of
// every simulated IPU (ipu, tile, compute_cycles, exchange_bytes, memory_bytes), over the
// whole run.
std::string tiles_csv(const RunStats& stats);
inline constexpr const char* kTilesHeader = "ipu,tile,compute_cycles,exchange_bytes,memory_bytes";

// supersteps.csv: one row per superstep of every simulated IPU, from the recorded spans (fast
// engine). A superstep starts at a compute phase and holds the phases up to the next one; row
// -1 holds the phases before the first compute phase. Cycle columns are totals over the
// row's executions (a memoised loop's superstep is one row with executions = iterations), so
// each column sums to the IPU's phase total in stats.json. Empty if no spans were recorded.
std::string supersteps_csv(const RunStats& stats, const trace::Trace& trace);
// Its header: ipu,superstep,step,executions,start_cycle, <phase>_cycles per kPhases, active_tiles.
std::string supersteps_header();

// The name of a span as shown in the timeline (the program step's name).
std::string span_name(const Span& span, const trace::Trace& trace, std::uint32_t program);

// Writes the Chrome trace-event JSON (ts/dur in microseconds, fractional) atomically: one
// process per simulated IPU with a "program" thread (phases, loops nested around their
// bodies), a "background host I/O" thread and, for the IPU whose tile spans were recorded,
// one thread per active tile. Returns the number of events written.
std::uint64_t write_timeline(const std::string& path, const ChipSpec& chip, const RunStats& stats,
                             const trace::Trace& trace);

}  // namespace ipusim::report
