// SPDX-License-Identifier: Apache-2.0
// A sweep point resolved to what its child processes run: config files, overrides, the
// workload and system it describes, and its identity (a hash of every resolved input).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ipusim/process/runner.hpp"
#include "ipusim/sweep/spec.hpp"

namespace ipusim::sweep {

// Bumped when the meaning of a point's inputs or its run directory changes: every point of an
// earlier version runs again.
constexpr std::string_view kPointFormat = "ipusim-sweep-point/1";

struct PointPlan {
  std::size_t index = 0;
  std::vector<Assignment> values;  // the point's axis values (Point::values)
  std::string label;               // Point::label()
  bool kernel_point = false;
  std::string kernel;
  std::vector<Assignment> args;
  std::string run_file;     // workload: the run config
  std::string model_file;   // workload: the model (the run's unless replaced)
  std::string system_file;  // empty for a kernel on a chip
  std::string chip_file;    // explicit chip (replaces the system's), or the kernel's chip
  bool chip_explicit = false;
  std::vector<std::string> sets;  // KEY=VALUE config overrides: base set:, then axis keys
  // What the point describes (sweep.json).
  std::string workload;  // model name or kernel name
  std::string system;    // system name, or chip name for a kernel on a chip
  std::uint64_t ipus = 1;
  std::string id;  // 16 hex digits: FNV-1a of identity_text
  std::string identity_text;
};

// Resolves `point` of `spec`: loads and checks every config with its overrides (as 'ipusim
// run' and 'ipusim compile' would) and hashes the resolved texts, the model file, the kernel
// and its arguments, the ipusim version and kPointFormat. Throws ConfigError
// "<spec>:<line>: point N (key=value, ...): <problem>".
PointPlan plan_point(const Spec& spec, const Point& point);

// The child processes of a point: for a kernel, 'ipusim kernel' writing <work_dir>/<trace>,
// then 'ipusim run --out <work_dir>' on it; for a workload, one 'ipusim run --run RUN --out
// <work_dir>' that compiles the step in memory (no trace file). Logs go to <work_dir>/log.N.*.
process::Job point_job(const PointPlan& plan, const std::string& exe, const std::string& work_dir);

// The trace file a point's first step writes inside its work directory ("" for a workload
// point, which writes none).
std::string point_trace_name(const PointPlan& plan);

}  // namespace ipusim::sweep
