// SPDX-License-Identifier: Apache-2.0
// Memory accounting, a pass over a lowered program: the tensors a program holds
// (poplar-compiler.md §3: weights, gradient accumulators, optimiser state, kept, stashed and
// live activations, the input buffer), from the lowering's facts alone, for inference and for
// training a CNN replica or a transformer pipeline stage. The lowering adds them to the program
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

// What a CNN replica's training memory depends on.
struct CnnMemory {
  std::vector<Parameter> parameters;  // each layer's weights (one copy)
  // The activations a micro-batch keeps (graph::kept_tensors), each on its layer's layout.
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

// In the order the program lists them: each parameter's weights, gradient accumulator and
// optimiser state kept on its layout ("momentum/" when it is one moment), always live; a
// sharded optimiser state; the kept activations (over their lifetimes), a pipeline stage's
// stashed and live activations, the input buffer.
std::vector<Holding> cnn_training_memory(const CnnMemory& c);

// What a pipeline stage's training memory depends on.
struct StageMemory {
  std::vector<Parameter> parameters;  // the stage's weight tensors
  trace::DType dtype = trace::DType::kHalf;
  // Stages from this one to the end of the pipeline (0 for the first IPU, which runs the
  // embedding and, with a tied head, the last stage too): it stashes 2 x that + 1 micro-batches
  // of stage inputs.
  std::uint64_t stages_to_end = 0;
  std::uint64_t stage_input_bytes = 0;  // one micro-batch's activations at a stage boundary
  std::uint64_t live_bytes = 0;         // the largest sub-layer's live activations
  std::uint64_t input_bytes = 0;        // the host input buffer (the first IPU only; else 0)
  OptimiserMemory optimiser{.moments = 2};
  trace::Lifetime loop_live;  // the pipeline loop's program positions
};

// In the order the program lists them: each parameter's weights, gradient accumulator and
// (kept on its layout) optimiser state; a sharded optimiser state; the stashed and the live
// activations (during the pipeline loop); the input buffer.
std::vector<Holding> stage_training_memory(const StageMemory& s);

}  // namespace ipusim::compiler
