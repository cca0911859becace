// SPDX-License-Identifier: Apache-2.0
// One simulation run, as 'ipusim run' does it (docs/reports.md): a trace read from a file or a
// training step compiled in memory, simulated on a chip or a system, with its run directory,
// timeline, tile CSV and summary. The command parses and checks its options into a RunRequest;
// run() does the rest, so that it can be tested without a process.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "ipusim/compiler/compiler.hpp"
#include "ipusim/model/engine.hpp"
#include "ipusim/report/run_files.hpp"
#include "ipusim/stats/run_stats.hpp"

namespace ipusim::driver {

struct RunRequest {
  // What runs: a trace file (TRACE), or with run_file a run config compiled in memory.
  std::string trace_file;
  std::string run_file;    // --run: a run config (configs/runs/*.yaml)
  std::string model_file;  // --model, with run_file: default the run config's
  std::string save_trace;  // --save-trace, with run_file: also write the compiled trace
  // Where it runs: a system (default with run_file: the run config's), or else a chip.
  std::string system_file;
  std::string chip_file;    // --chip (or its default)
  bool chip_given = false;  // --chip was given: it replaces a system's chip
  // --set KEY=VALUE, checked for their form; with run_file, run.* keys go to the run config.
  std::vector<std::string> overrides;
  model::Engine engine = model::Engine::kFast;
  bool full_loops = false;  // every iteration of repeat loops instead of the body once
  // --no-fast-forward: every iteration of loops with group steps or background transfers,
  // even once they are proved to repeat (model::ModelOptions::fast_forward)
  bool no_fast_forward = false;
  // --fit: a generation run's largest micro-batch and context that fit (compiler::generation_fit)
  bool fit = false;
  bool all_replicas = false;  // every replica in full (system runs)
  bool strict = false;        // a trace that does not match its chip or system is an error
  // Outputs (empty: not written).
  std::string out_dir;          // the run directory
  std::string tile_stats_file;  // --tile-stats CSV
  std::string timeline_file;    // --timeline (fast engine only; checked by the caller)
  // --timeline-tiles IPU and --timeline-steps FIRST:LAST (FIRST <= LAST, checked by the caller).
  std::optional<std::uint32_t> timeline_tile_ipu;
  std::uint64_t timeline_steps_first = 0;
  std::uint64_t timeline_steps_last = 9;
  // --timeline-detail and --timeline-window (FROM:TO of simulated time).
  report::TimelineOptions::Detail timeline_detail = report::TimelineOptions::Detail::kSupersteps;
  std::optional<std::pair<Duration, Duration>> timeline_window;
  bool quiet = false;  // no summary on `out` and no progress line on stderr
};

// plan.csv's rows for the convs and matmuls compile() planned (`plans`), each with the cost of
// one execution as simulated on the first simulated IPU of its program (`stats`): its compute
// sets' and exchanges' phase time per execution, times the number it runs, plus its on-chip
// syncs at the chip's sync latency. Programs no simulated IPU ran have no rows.
std::vector<report::PlanRow> plan_rows(const ChipSpec& chip, const RunStats& stats,
                                       const trace::Trace& trace,
                                       const std::vector<compiler::PlannedConv>& plans);
// Runs the request: writes its files, the summary (unless quiet) on `out` and the trace's
// target warnings on `err`, and returns what the run measured. Throws the library's errors
// (ConfigError with strict, UsageError for a --timeline-tiles IPU that does not exist or was
// not simulated, ...).
RunStats run(const RunRequest& request, std::ostream& out, std::ostream& err);

}  // namespace ipusim::driver
