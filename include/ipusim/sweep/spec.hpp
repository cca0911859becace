// SPDX-License-Identifier: Apache-2.0
// The sweep spec (docs/sweeps.md): a base run (a reference kernel or a compiled workload) and
// axes of overrides, combined as a cartesian product or zipped, minus excluded combinations.
// Loading is strict: unknown keys (with "did you mean"), wrong types, unknown config keys and
// axes of unequal length are ConfigErrors naming "<spec>:<line>:<column>" and the key path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ipusim::sweep {

using Assignment = std::pair<std::string, std::string>;  // (key, value) as written

// What every point runs before its overrides are applied.
struct Base {
  // Exactly one of: a reference kernel (ipusim kernel KERNEL --ARG VALUE ...) ...
  std::string kernel;
  std::vector<Assignment> args;  // in spec order; "" = bare flag
  // ... or a training step compiled from a run config (names model and system).
  std::string run;
  std::string model;              // replaces the run's model when set
  std::string system;             // a system config (a name under configs/systems/ or a path)
  std::string chip;               // a chip config (a name under configs/chips/ or a path)
  std::vector<std::string> sets;  // KEY=VALUE config overrides
  bool is_kernel() const { return !kernel.empty(); }
};

// One axis: one or more keys whose value lists are zipped (equal length).
struct Axis {
  std::vector<std::string> keys;
  std::vector<std::vector<std::string>> values;  // values[key][i]
  int line = 0;
  std::size_t size() const { return values.empty() ? 0 : values.front().size(); }
};

struct Spec {
  std::string file;  // as given
  std::string dir;   // its folder: relative paths in the spec are relative to it
  std::string name;
  Base base;
  std::vector<Axis> axes;
  bool zip = false;                              // combine: zip (else product)
  std::vector<std::vector<Assignment>> exclude;  // a point matching every pair of one is dropped
  std::vector<int> exclude_lines;

  // Every axis key in spec order (the override columns of sweep.csv).
  std::vector<std::string> axis_keys() const;
};

// One combination of axis values, in spec order.
struct Point {
  std::size_t index = 0;           // position in the expanded list
  std::vector<Assignment> values;  // one per axis key, in axis_keys() order
  int line = 0;                    // line of the spec's first axis (or of base) for messages
  // "chip.clock=1.5GHz, chip.tiles=736" (or "base" when there are no axes).
  std::string label() const;
};

Spec load_spec(const std::string& path);
Spec parse_spec(const std::string& text, const std::string& path);

// The points of `spec`: product (the last axis varies fastest) or zip, minus excluded ones.
// Most points a sweep expands to unless told otherwise (`ipusim sweep --max-points N`).
inline constexpr std::uint64_t kDefaultMaxPoints = 100000;
// The number of combinations before exclusions, counted without expanding (product of the
// axis sizes, or the zip length), saturating at UINT64_MAX.
std::uint64_t combination_count(const Spec& spec);
// Throws ConfigError when combination_count() exceeds `max_points` (so a spec of 10^9 points
// fails at once instead of exhausting memory: issue 16, defect F) and when two points would
// be the same (duplicate axis values: the summary would not add up, defect P).
std::vector<Point> expand(const Spec& spec, std::uint64_t max_points = kDefaultMaxPoints);

// Axis keys that are not config paths: the base's run, model, system and chip files and the
// kernel's arguments (args.NAME).
bool is_file_key(const std::string& key);

}  // namespace ipusim::sweep
