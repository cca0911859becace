// SPDX-License-Identifier: Apache-2.0
// `ipusim compare` and the HTML report's compare section (docs/reports.md "Compare"): the
// headline (step time, throughput, time to train, peak tile memory), the step-time change
// attributed to phase kinds and to layers, the settings that differ and the stats that moved,
// as text, as one JSON document, and as the data the HTML section draws.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ipusim/report/run_dir.hpp"
#include "ipusim/stats/phase.hpp"

namespace ipusim::report {

// One headline quantity of both runs. A side that lacks it (a kernel run has no throughput)
// is nullopt; then delta and relative are nullopt too.
struct HeadlineRow {
  std::string key;    // JSON key: step_time, throughput, time_to_train, peak_tile_memory
  std::string label;  // "step time"
  std::string unit;   // "s", "images/s", "B"
  std::optional<double> a, b;
  std::optional<double> delta() const;     // b - a, 0 when the values agree (no noise)
  std::optional<double> relative() const;  // delta / |a|; nullopt if a side lacks it or a == 0
  std::string direction;                   // "faster", "slower", "higher", "more memory", ...
};

// The step-time change of one phase kind or one layer row: seconds in A and B (cycles / clock
// of the IPU that sets each run's step time) and the difference.
struct TimeDelta {
  double a = 0, b = 0;
  double delta() const { return b - a; }
};

struct PhaseAttribution {
  PhaseKind kind = PhaseKind::kCompute;
  std::uint64_t a_cycles = 0, b_cycles = 0;
  TimeDelta time;
  std::string direction;  // "more time", "less time", "same"
  // The layer row whose time in this phase kind moved most in the direction the kind moved
  // (empty without layers.csv).
  std::string top_layer, top_pass;
  double top_delta = 0;
};

struct LayerAttribution {
  std::string layer, pass;
  TimeDelta time;
  PerPhase<double> phase_delta;  // seconds, B - A, per phase kind
  std::string direction;         // "more time", "less time", "same", "only in A", "only in B"
};

// What the planner chose in each run for one conv or matmul of a layer row (plan.csv rows of
// the critical IPUs with the same layer and pass, matched in program order): the fields of
// the plan that differ, each "what: A -> B" (tiles, split, serial split, vertex, shape, budget,
// temporaries, rearranged bytes, estimated and simulated cycles of one execution).
struct PlanChange {
  std::string layer, pass;
  std::optional<PlanRow> a, b;  // a side without this conv (its layer was planned otherwise)
  std::vector<std::string> changes;
};

struct ExplainedComparison {
  std::string path_a, path_b;
  std::string trace_a, trace_b;  // trace names
  std::vector<HeadlineRow> headline;
  // The IPU whose program sets the step time (stats.json "phases" are its), per run.
  std::uint32_t critical_a = 0, critical_b = 0;
  double clock_a = 0, clock_b = 0;           // Hz
  TimeDelta step;                            // total.time of each run
  std::uint64_t cycles_a = 0, cycles_b = 0;  // total.cycles
  // The step-time change: exactly 0 when cycles and clock agree.
  double step_delta() const {
    return cycles_a == cycles_b && clock_a == clock_b ? 0.0 : step.delta();
  }
  // Every phase kind in kPhases order; their deltas add up to step.delta().
  std::vector<PhaseAttribution> phases;
  // Layer rows (layers.csv) of the critical IPU of each run matched by (layer, pass), largest
  // |delta| first; they add up to step.delta() too. Empty unless both runs have layers.csv.
  bool have_layers = false;
  std::vector<LayerAttribution> layers;
  // For the layer rows in `layers` order, the convs and matmuls whose plan differs between the
  // runs. Empty unless both runs have plan.csv (have_plans).
  bool have_plans = false;
  std::vector<PlanChange> plans;
  std::vector<Comparison::ConfigDiff> settings;  // config.resolved.yaml keys (and the trace)
  Comparison stats;                              // the stats.json fields that moved
  bool identical() const;                        // no setting, headline or stat differs
};

// Compares two run directories. Throws Error (naming the file and key) if a stats.json lacks
// a field every run writes (total.time, phases.*.cycles, chip.clock, ipu[]).
ExplainedComparison explain_comparison(const RunDir& a, const RunDir& b);

// Integers that add up to round(total / quantum), each as close to value / quantum as
// possible (largest-remainder rounding): what lets printed terms add up exactly to the printed
// total. Values that are 0 stay 0.
std::vector<std::int64_t> apportion(const std::vector<double>& values, double total,
                                    double quantum);

// A duration, bytes or plain number to `digits` significant digits, with the unit scaled
// ("12.35 ms", "412.3 KiB", "1296 images/s"); `sign` adds "+" to positive values.
std::string format_seconds(double s, int digits = 4, bool sign = false);
std::string format_quantity(double v, const std::string& unit, int digits = 4, bool sign = false);
// A relative change as a percentage: "+33.3%", "-0.042%", "0%".
std::string format_percent(std::optional<double> relative);

// The step-time equation, e.g. "step +4.118 ms = compute +4.100 ms (top: conv1 forward
// +1.200 ms) + exchange +0.018 ms"; its terms add up exactly to the printed step change.
std::string attribution_equation(const ExplainedComparison& e);

// The attribution as printed: one time unit for the section (the shorter step's), a fixed
// number of decimals (four significant digits of the largest change), and the changes
// apportioned so that the printed terms add up exactly to the printed step change. Text, HTML
// and the tests share it.
struct AttributionView {
  std::string unit;                        // "ms"
  double unit_seconds = 1;                 // seconds per unit (1e-3)
  int decimals = 0;                        // after the decimal point
  std::string step_a, step_b, step_delta;  // "12.346", "16.464", "+4.118"
  // Per phase kind (kPhases order): A, B and the apportioned change.
  std::vector<std::string> phase_a, phase_b, phase_delta;
  // Directions as printed: "about the same" where a change rounds to 0 in the unit.
  std::vector<std::string> phase_direction, layer_direction;
  // The `shown` layer rows that moved most (e.layers order), then the rest summed.
  std::vector<std::string> layer_a, layer_b, layer_delta;
  std::size_t other_layers = 0;                                  // rows not shown
  std::string other_delta;                                       // their apportioned change, summed
  std::string in_unit(double seconds, bool sign = false) const;  // rounded to `decimals`
};
AttributionView attribution_view(const ExplainedComparison& e, std::size_t layers);

// A plan's split, groups x rows x out x in channels joined by `times` ("1x560x2x1"), and its
// serial split ("2 (in)", "1"), as compare and the report print them.
std::string plan_split_text(const PlanRow& p, std::string_view times = "x");
std::string plan_serial_text(const PlanRow& p);

// The plan changes (e.plans) of the `layers` layer rows that moved most, in e.plans order.
std::vector<const PlanChange*> plan_changes_of(const ExplainedComparison& e, std::size_t layers);

// `ipusim compare`'s text: headline, attribution by phase and by the `layers` layer rows that
// moved most, the settings that differ, and the `top` stats that moved most.
std::string explained_text(const ExplainedComparison& e, std::size_t top, std::size_t layers = 10);
// The same as one JSON document ("format": "ipusim-compare/1", docs/reports.md).
std::string explained_json(const ExplainedComparison& e, std::size_t top, std::size_t layers = 10);

}  // namespace ipusim::report
