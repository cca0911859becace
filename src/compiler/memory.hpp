// SPDX-License-Identifier: Apache-2.0
// Memory accounting, a pass over a lowered program: the tensors a program holds
// (poplar-compiler.md §3: weights, gradient accumulators, optimiser state, kept, stashed and
// live activations, the input buffer), from the lowering's facts alone, for inference and for
// training. The lowering adds them to the program
// (IpuBuilder::hold); the memory map and the out-of-memory check read them there. No SystemC, no
// chip.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ipusim/compiler/layout.hpp"
#include "ipusim/trace/program.hpp"

namespace ipusim::compiler {

// A tensor a program holds: `copies` of a layout's blocks, or (no layout) `bytes` in all,
// spread evenly over every tile; live throughout, or over `live`.
struct Holding {
  std::string name;
  trace::TensorKind kind = trace::TensorKind::kActivation;
  std::optional<Layout> layout;
  std::uint64_t copies = 1;
  trace::DType dtype = trace::DType::kHalf;
  std::uint64_t bytes = 0;
  std::optional<trace::Lifetime> live;
  bool operator==(const Holding&) const = default;
};

// A weight tensor: `copies` of a layout.
struct Parameter {
  std::string name;
  Layout layout;
  std::uint64_t copies = 1;
};

// Where a training program keeps its optimiser state (optimiser.hpp optimiser_memory):
// `moments` per weight on the weight's layout, or under replicated tensor sharding a shard of
// `sharded_bytes` spread over the tiles; nothing when it streams from Streaming Memory.
struct OptimiserMemory {
  std::uint64_t moments = 1;
  bool streaming = false, sharded = false;
  std::uint64_t sharded_bytes = 0;
};

// What an inference program's memory depends on (a CNN replica or a transformer stage).
struct InferenceMemory {
  std::vector<Parameter> parameters;  // resident weights (a CNN's folded batch-norm scales too)
  trace::DType dtype = trace::DType::kHalf;
  std::uint64_t live_bytes = 0;   // the largest activations live at once
  std::uint64_t input_bytes = 0;  // the host input buffer (0: none)
};

// In the order the program lists them: the weights, the live activations, the input buffer.
std::vector<Holding> inference_memory(const InferenceMemory& m);

// What a training program's memory depends on.
struct TrainingMemory {
  std::vector<Parameter> parameters;  // the IPU's weight tensors (one copy each)
  // The activations a micro-batch keeps on a one-stage IPU (graph::kept_tensors), each on its
  // layer's layout.
  struct Kept {
    std::string name;
    trace::TensorKind kind;
    Layout layout;
    trace::Lifetime live;
  };
  std::vector<Kept> kept;
  // A pipeline stage's instead (0: none): its stashed inputs and its recomputed activations,
  // spread over the tiles while the pipeline loop runs.
  trace::DType dtype = trace::DType::kHalf;
  std::uint64_t stashed_bytes = 0, live_bytes = 0;
  trace::Lifetime loop_live;
  // The input buffer spread over the tiles (0: none, or on the I/O tiles, which the lowering
  // places itself).
  std::uint64_t input_bytes = 0;
  OptimiserMemory optimiser;
};

// Micro-batches of its input forward stage `stage` of a pipeline whose loss stage is
// `loss_stage` holds: those between its forward (cycle s) and its backward (cycle 2L - s), its
// own included, 2 (L - s) + 1 (PopART's stash, transforms/pipeline.cpp: "2*(IPUs to end) + 1").
inline std::uint64_t stash_depth(std::uint64_t loss_stage, std::uint64_t stage) {
  return 2 * (loss_stage - stage) + 1;
}

// In the order the program lists them: each parameter's weights, gradient accumulator and
// optimiser state kept on its layout ("momentum/" when it is one moment), always live; a
// sharded optimiser state; the kept activations (over their lifetimes), a pipeline stage's
// stashed and live activations, the input buffer.
std::vector<Holding> training_memory(const TrainingMemory& c);

}  // namespace ipusim::compiler
