// SPDX-License-Identifier: Apache-2.0
// A point's result (read from its stats.json, or its error), its record in the point's run
// directory (point.json: what marks the point finished), and the sweep's output files:
// sweep.csv and sweep.json, one row per point in spec order, with nothing that depends on the
// host, the time or how the points were scheduled (docs/sweeps.md).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ipusim/stats/phase.hpp"
#include "ipusim/sweep/point.hpp"
#include "ipusim/util/json_reader.hpp"

namespace ipusim::sweep {

struct PointResult {
  std::string id;
  std::size_t index = 0;
  std::vector<Assignment> values;
  bool ok = false;
  std::string error;  // failed: one line
  std::string workload, system;
  std::uint64_t ipus = 1;
  // Numbers as stats.json wrote them ("" when failed or absent).
  std::string cycles;
  std::string step_time_s;
  std::string throughput;  // workloads only
  std::string throughput_unit;
  std::string samples_per_step;       // global batch (workloads only)
  std::string samples_unit;           // images, sequences
  std::string time_to_train_s;        // workloads with a time-to-train estimate only
  PerPhase<std::string> breakdown_s;  // time (s) per phase kind
  std::string flop_utilisation;
  // Memory: the fullest tile over every simulated IPU, and a tile's capacity, in bytes.
  std::string peak_tile_memory_b, tile_memory_b;
};

// The result of a point that ran: fields from stats.json (Throws Error if it lacks total.time).
PointResult result_from_stats(const PointPlan& plan, const JsonValue& stats,
                              const std::string& origin);
// The result of a point that failed with `error`.
PointResult failed_result(const PointPlan& plan, const std::string& error);

// point.json: the record of a finished point (ok or failed), in a fixed key order.
std::string point_record(const PointResult& result);
// Reads a record back (throws Error on a malformed one); index and axis values are left empty
// (the caller has them).
PointResult parse_point_record(const std::string& text, const std::string& origin);

// sweep.csv: a header, then one row per result in the given order. Columns: index, id, the
// axis keys, status, workload, system_name (not "system": that may be an axis key), ipus,
// cycles, step_time_s, throughput, throughput_unit, <phase>_s for each of kPhases,
// flop_utilisation, error (RFC 4180 quoting).
std::string sweep_csv(const std::vector<std::string>& axis_keys,
                      const std::vector<PointResult>& results);

// sweep.json (the contract in docs/sweeps.md).
std::string sweep_json(const std::string& spec_file, const std::string& name,
                       const std::vector<PointResult>& results);

// The error of a failed child, independent of where the sweep writes: the last line of its
// stderr without the "error: " prefix, with `work_dir` replaced by `run_dir`.
std::string point_error(const std::string& child_stderr, const std::string& fallback,
                        const std::string& work_dir, const std::string& run_dir);

}  // namespace ipusim::sweep
