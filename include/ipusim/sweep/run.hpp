// SPDX-License-Identifier: Apache-2.0
// A sweep, as 'ipusim sweep' does it (docs/sweeps.md): the spec expanded into points, each run
// in its own ipusim child processes (locally, or spread over MPI ranks under mpirun), points
// finished before with the same inputs skipped, sweep.csv and sweep.json written. The command
// parses and checks its options into a SweepRequest; run_sweep() does the rest, so that it can
// be tested without a process of its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>

#include "ipusim/sweep/spec.hpp"

namespace ipusim::sweep {

// Exit status when at least one point failed (the others ran and were recorded).
constexpr int kSweepFailed = 5;

struct SweepRequest {
  std::string spec_file;
  std::string out_dir;  // required unless list (UsageError)
  unsigned jobs = 1;    // points run in parallel, 1 to 256 (MPI ranks but 0: one at a time)
  std::uint64_t max_points = kDefaultMaxPoints;  // refuse a spec that expands to more
  bool list = false;                             // print the expanded points and stop
  bool progress = false;   // draw the progress line on `err` (callers: a terminal, not --quiet)
  std::string executable;  // the ipusim binary the points run (empty: this one)
};

struct SweepResult {
  std::size_t points = 0, ran = 0, skipped = 0, failed = 0;
  int exit_code() const { return failed ? kSweepFailed : 0; }
};

// Runs the request, writing the report on `out` and the progress line on `err`. Throws
// ConfigError for a bad spec, UsageError without an output directory, process::Interrupted when
// interrupted (finished points are kept).
SweepResult run_sweep(const SweepRequest& request, std::ostream& out, std::ostream& err);

}  // namespace ipusim::sweep
