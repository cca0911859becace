// SPDX-License-Identifier: Apache-2.0
// The pipeline of a pipelined training run (docs/workloads.md, "Where a pipeline waits"): each
// stage's work per micro-batch, from the run's layer rows, and what a pipeline of stages that
// take that long waits under PopART's schedule (transforms/pipeline.cpp: the forward of stage s
// in cycles s .. s + GA - 1, its backward in cycles 2L - s .. 2L - s + GA - 1, the loss stage L
// both in one cycle, every cycle ending at the inter-IPU copy that all IPUs meet at): in the
// fill and drain cycles, where some stages have nothing to do, and in the steady cycles, where
// stages that take less than the slowest wait for it. The simulated waiting beyond both is
// after the pipeline (the weight update's collectives) or from what the schedule leaves out.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ipusim/report/report.hpp"
#include "ipusim/stats/run_stats.hpp"
#include "ipusim/util/json.hpp"

namespace ipusim::report {

// One forward stage: the IPU it runs on and its cycles per micro-batch (compute, syncs,
// on-chip exchanges, host and Streaming Memory transfers; not waiting, copies or collectives).
struct StageWork {
  std::uint32_t stage = 0, ipu = 0;
  double forward = 0;   // the forward pass (and the micro-batch's host input)
  double backward = 0;  // recomputation and the data and weight gradients
  double total() const { return forward + backward; }
};

// What one simulated IPU waited, and what the schedule says of it (cycles per step).
struct PipelineWaiting {
  std::uint32_t ipu = 0;
  std::uint64_t simulated = 0;    // its waiting phase
  std::uint64_t in_pipeline = 0;  // of which at the pipeline's copies and in its stages
  double fill_and_drain = 0;      // the schedule's: in the cycles where not every stage runs
  double unequal_stages = 0;      // the schedule's: in the steady cycles, for slower stages
};

struct PipelineAnalysis {
  std::uint64_t micro_batches = 0;  // gradient accumulation
  std::uint64_t cycles = 0;         // pipeline cycles: micro-batches + 2L
  std::vector<StageWork> stages;
  std::size_t slowest = 0;    // the stage with the most work per micro-batch
  std::size_t reference = 0;  // the median of the other stages (by work)
  // Why: the kinds of layer (names with their numbers as N: "encoderN/ffn") on which the
  // slowest stage spends the most more than the reference stage, and by how much (cycles per
  // micro-batch), largest first.
  std::vector<std::pair<std::string, double>> slowest_excess;
  std::vector<PipelineWaiting> waiting;  // each simulated IPU of the first replica
};

// The analysis of a pipelined training run whose trace says its stages (meta
// pipeline.micro_batches, pipeline.stage_ipus "0:1:2:3:0", and pipeline.stage_layer.N
// "STAGE:LAYER" for each layer of a stage that is not its IPU's first) and whose layer rows
// were computed; nullopt otherwise.
std::optional<PipelineAnalysis> pipeline_analysis(const RunStats& stats, const RunInfo& info);

// The summary's lines for it, the waiting of system IPU `ipu`.
std::string pipeline_text(const PipelineAnalysis& p, std::uint32_t ipu);

// stats.json's "pipeline" member (docs/stats-reference.md): writes its key and object.
void write_pipeline_json(JsonWriter& w, const PipelineAnalysis& p);

}  // namespace ipusim::report
