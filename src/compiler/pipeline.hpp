// SPDX-License-Identifier: Apache-2.0
// The pipeline schedule, as PopART runs a pipelined model (transforms/pipeline.cpp): the
// forward of stage s runs in cycles s .. s + GA - 1, the backward of forward stage s is stage
// 2L - s (L the loss stage), so a training step takes GA + 2L cycles and a fill or flush cycle
// runs only the stages active in it. Shared by every pipelined lowering (a transformer's today).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "ipu_builder.hpp"

namespace ipusim::compiler {

// One pipeline stage of an IPU: its steps and its first cycle; it runs for gradient
// accumulation cycles from there.
struct PipelineStage {
  Steps steps;
  std::uint64_t start = 0;
  bool input = false;  // reads the micro-batch from the host
};

// Cycles of a training step with its loss in stage `loss_stage` (0: no pipeline).
inline std::uint64_t pipeline_cycles(std::uint64_t gradient_accumulation,
                                     std::uint64_t loss_stage) {
  return gradient_accumulation + 2 * loss_stage;
}

// One IPU's cycles [0, `cycles`), cut where one of its `stages` starts or ends; each run of
// identical cycles becomes one repeat loop of the stages active in it, in stage order (a stage
// that reads the host input preceded by the steps `input` appends), then, with `copy`, the
// cycle's inter-IPU copy (global exchange 0).
Steps pipeline_loops(const std::vector<PipelineStage>& stages, std::uint64_t gradient_accumulation,
                     std::uint64_t cycles, bool copy, const std::function<void(Steps&)>& input);

}  // namespace ipusim::compiler
