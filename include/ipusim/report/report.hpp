// SPDX-License-Identifier: Apache-2.0
// Formatting of measurements: stats.json (hierarchical, every value with its unit), the short
// human summary printed on stdout, and the run directory. Collection lives in model/.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ipusim/config/chip_spec.hpp"
#include "ipusim/report/run_files.hpp"
#include "ipusim/stats/run_stats.hpp"
#include "ipusim/trace/program.hpp"

namespace ipusim::report {

struct RunInfo {
  std::string trace_file;
  std::string trace_name;
  std::string trace_identity;  // trace::identity()
  std::string chip_file;
  // --model: the model file that replaced the run config's, named in the summary's header.
  std::string model_file;
  // The --set overrides of the run as KEY=VALUE, in the order given: the summary and
  // stats.json repeat them, so a result says which what-if made it.
  std::vector<std::string> overrides;
  // The trace's workload facts (samples_per_step, sample_unit, ttt.*), from the compiler.
  std::vector<std::pair<std::string, std::string>> meta;
  // What the run warned about (e.g. a trace compiled for another chip), in stats.json.
  std::vector<std::string> warnings;
  // A run chosen for a model given without a run config: each choice and why (summary and
  // stats.json's "chosen").
  std::vector<std::string> chosen;
  // What importing the model changed or approximated (docs/onnx.md): summary and stats.json's
  // "model_notes".
  std::vector<std::string> model_notes;
  // Time per layer and pass (layer_rows), with --out or --timeline: layers.csv and stats.json's
  // ipu[].layers[] (the same rows from either engine).
  std::vector<LayerRow> layers;
  // Memory over program positions per system IPU (live_memory), with the layers: stats.json's
  // ipu[].memory_over_program.
  LiveMemories live_memory;
  // What the compiler planned for each conv and matmul (plan_rows), for a run that compiled
  // its workload and writes a run directory: plan.csv.
  std::vector<PlanRow> plans;
};

// Throughput and an MLPerf-style time to train (workloads.md §3) for a compiled workload:
// TTT = lead-in + steps x step time + checkpoints x checkpoint time + evaluations x
// evaluation time, with steps = epochs x ceil(samples per epoch / samples per step) or
// ceil(samples to train / samples per step). The host-side terms are the run config's. An
// inference run (or one without time-to-train terms) has no time to train; an inference step
// is one batch per replica, so its latency is the step time.
struct Workload {
  std::string model;
  bool inference = false;
  bool has_time_to_train = true;
  double samples_per_step = 0;
  std::string sample_unit;
  double throughput = 0;  // samples per second
  double steps = 0;
  double time_to_train = 0;                              // seconds
  double lead_in = 0, checkpoints = 0, evaluations = 0;  // seconds of each host-side term
  // From the model's tensor graph (compiled workloads): its parameters, the FLOPs of one
  // step's forward and backward passes over all replicas, and the IPUs they run on.
  std::uint64_t parameters = 0, forward_flops = 0, backward_flops = 0, model_ipus = 0;
  double model_rate = 0;  // model_flops() per second of step
  // Text generation (trace meta generation.*; run.new_tokens): one new token per sequence a
  // step; the first output token after steps_to_first_token steps (the prompt, fed one token
  // a step with a KV cache); times in seconds, tokens per second over every sequence.
  struct Generation {
    std::uint64_t prompt_tokens = 0, new_tokens = 0, steps_to_first_token = 0;
    // With --fit (0: not searched): the largest micro-batch and sequence that fit.
    std::uint64_t largest_micro_batch = 0, largest_context = 0;
    std::uint64_t micro_batch_limit = 0, context_limit = 0;  // the search's caps
    double time_to_first_token = 0, time_per_output_token = 0, total_time = 0,
           tokens_per_second = 0;
  };
  std::optional<Generation> generation;
  bool has_model() const { return parameters > 0 && model_ipus > 0; }
  std::uint64_t model_flops() const { return forward_flops + backward_flops; }
  // The FP16.16 peak of the IPUs the model runs on (FLOP/s).
  double model_peak(const ChipSpec& chip) const {
    return chip.peak_flops(true, false) * static_cast<double>(model_ipus);
  }
};
std::optional<Workload> workload(const RunInfo& info, double step_seconds);

std::string stats_json(const ChipSpec& chip, const RunStats& stats, const RunInfo& info);
std::string summary_text(const ChipSpec& chip, const RunStats& stats, const RunInfo& info);

// Writes tiles.csv, supersteps.csv (when superstep totals were recorded), layers.csv and
// plan.csv (when `info` has rows), config.resolved.yaml, trace.id and stats.json into `dir`
// (created if missing), each file atomically, stats.json last (its presence means the
// directory is complete).
void write_run_dir(const std::string& dir, const ChipSpec& chip, const RunStats& stats,
                   const RunInfo& info, const std::string& resolved_config_yaml);

}  // namespace ipusim::report
