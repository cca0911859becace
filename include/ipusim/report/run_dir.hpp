// SPDX-License-Identifier: Apache-2.0
// Reading run directories back (`ipusim run --out DIR`) for `ipusim report` and
// `ipusim compare` (docs/reports.md), and comparing two of them.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ipusim/report/run_files.hpp"
#include "ipusim/stats/phase.hpp"
#include "ipusim/util/json_reader.hpp"

namespace ipusim::report {

// tiles.csv's memory categories, in column order: the tensors by kind (trace::TensorKind),
// then the rest. (An older tiles.csv's tensors, not split by kind, are read as "tensors".)
inline constexpr std::size_t kMemoryCategories = 13;
inline constexpr std::array<const char*, kMemoryCategories> kMemoryCategoryNames{
    "weights",     "activations",  "gradients", "optimiser state", "partials", "inputs", "outputs",
    "temporaries", "vertex state", "code",      "exchange code",   "stack",    "tensors"};

struct TileRow {
  std::uint64_t compute_cycles = 0, exchange_bytes = 0, memory_bytes = 0;
  // memory_bytes by category (kMemoryCategoryNames); none in older run directories
  std::optional<std::array<std::uint64_t, kMemoryCategories>> memory;
};

struct SuperstepRow {
  std::uint32_t ipu = 0;
  std::int64_t index = 0;
  std::string step;
  std::string layer, pass;  // what its compute set serves ("" in older run directories)
  std::uint64_t executions = 0, start = 0, active_tiles = 0;
  PhaseCycles cycles;  // per phase kind, all executions
};

// One row of layers.csv (docs/stats-reference.md).
struct LayerCsvRow {
  std::uint32_t ipu = 0;
  std::string layer, pass;
  std::uint64_t executions = 0;
  PhaseCycles cycles;  // per phase kind
  std::uint64_t flops = 0, exchange_bytes = 0;
  // Peak live memory of the row's program positions (0 in older layers.csv without them).
  std::uint64_t peak_live_bytes = 0, peak_tile_live_bytes = 0;
  std::string group;  // the layers of its largest shared item ("" in older layers.csv)
};

struct RunDir {
  std::string path;
  JsonValue stats;                                      // stats.json
  std::map<std::string, std::string> config;            // config.resolved.yaml, flattened "a.b.c"
  std::map<std::uint32_t, std::vector<TileRow>> tiles;  // tiles.csv by system IPU (optional)
  std::vector<SuperstepRow> supersteps;                 // supersteps.csv (optional)
  std::vector<LayerCsvRow> layers;                      // layers.csv (optional)
  std::vector<PlanRow> plans;                           // plan.csv (optional)
};

// Reads DIR/stats.json (required), config.resolved.yaml, tiles.csv, supersteps.csv, layers.csv
// and plan.csv (each optional: older run directories lack the CSVs). Throws Error naming the file,
// line or key path, what was expected and what was found.
RunDir load_run_dir(const std::string& dir);

// A number of stats.json by its dotted path (json_field syntax); throws Error naming
// the file and path if it is missing.
double stat(const RunDir& run, const std::string& path);
// The same, nullopt if missing.
std::optional<double> find_stat(const RunDir& run, const std::string& path);

// Every numeric field of stats.json as (path, unit): quantity objects give their value,
// arrays of named objects are keyed by name (e.g. "ipu[0].top_compute_sets[fwd/conv].cycles"),
// others by index.
struct StatField {
  std::string path;
  double value = 0;
  std::string unit;
};
std::vector<StatField> flatten_stats(const JsonValue& stats);

// Whether two stats.json numbers are the same value: whole numbers exactly, others to a
// relative 1e-9 (floating-point noise is no change).
bool same_value(double a, double b);

struct Comparison {
  struct ConfigDiff {
    std::string key, a, b;  // "(absent)" where a side lacks the key
  };
  struct StatDiff {
    std::string path, unit;
    double a = 0, b = 0;
    double delta() const { return b - a; }
    double relative() const;  // delta / |a|; +-inf if a == 0 and b != 0
  };
  std::vector<ConfigDiff> config;  // sorted by key
  std::vector<StatDiff> stats;     // changed fields only (same_value), largest |relative| first
  std::size_t fields = 0;          // numeric fields compared
};
Comparison compare_runs(const RunDir& a, const RunDir& b);

}  // namespace ipusim::report
