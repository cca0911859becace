// SPDX-License-Identifier: Apache-2.0
// The pipeline schedule, as PopART runs a pipelined model (transforms/pipeline.cpp): the
// forward of stage s runs in cycles s .. s + GA - 1, the backward of forward stage s is stage
// 2L - s (L the loss stage), so a training step takes GA + 2L cycles and a fill or flush cycle
// runs only the stages active in it. Shared by both model families' lowerings.
#pragma once

#include <cstdint>
#include <vector>

#include "ipu_builder.hpp"

namespace ipusim::compiler {

// One pipeline stage of an IPU: its steps (the first stage's begin with the micro-batch's host
// input) and its first cycle; it runs for gradient accumulation cycles from there.
struct PipelineStage {
  Steps steps;
  std::uint64_t start = 0;
};

// Cycles of a training step with its loss in stage `loss_stage` (0: no pipeline).
inline std::uint64_t pipeline_cycles(std::uint64_t gradient_accumulation,
                                     std::uint64_t loss_stage) {
  return gradient_accumulation + 2 * loss_stage;
}

// Where a model's forward stages run: forward stage s on IPU stage_ipus[s] (a transformer
// with tied heads visits IPU 0 twice: 0, 1, ..., p - 1, 0; a model without a pipeline has one
// stage). The last forward stage, L, holds the loss.
struct StageSlot {
  std::uint32_t forward_stage = 0;         // the forward stage whose nodes this stage runs
  std::uint64_t start = 0;                 // its first cycle: s forward, 2L - s backward
  bool forward = false, backward = false;  // the loss stage runs both, as one stage
};
// The stages IPU `ipu` runs, in stage order: each forward stage s it holds, and that stage's
// backward (stage 2L - s; training only), the loss stage's two as one.
std::vector<StageSlot> ipu_stages(const std::vector<std::uint32_t>& stage_ipus, std::uint32_t ipu,
                                  bool training);

// The pipeline's inter-IPU copy (global exchange 0) from its stage boundaries' forward copies
// (activations, one micro-batch each): in inference those alone ("stage_activations"); in
// training PopART merges every cycle's copies, activations forward and each boundary's
// gradients back (the same bytes, the other way), into one copy that runs every cycle
// ("stage_copies"; popx/popprograms.cpp, the pipeline's IpuCopy sequence: "outlined across
// pipelineCycles AND merged across pipelineStages").
trace::GlobalExchange pipeline_copies(const std::vector<trace::IpuCopy>& forward, bool training);

// One IPU's cycles [0, `cycles`), cut where one of its `stages` starts or ends; each run of
// identical cycles becomes one repeat loop of the stages active in it, in stage order, then,
// with `copy`, the cycle's inter-IPU copy (global exchange 0).
Steps pipeline_loops(const std::vector<PipelineStage>& stages, std::uint64_t gradient_accumulation,
                     std::uint64_t cycles, bool copy);

}  // namespace ipusim::compiler
