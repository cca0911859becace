// SPDX-License-Identifier: Apache-2.0
// Pipeline stages, a pass over a model and its graph: the forward stages of any model
// (forward_stages; for a CNN the node ranges the IPUs of a replica run when the run splits the
// model, run.pipeline_splits, PopTorch's BeginBlock at a named layer, as graphcore/examples
// vision/cnns/pytorch `pipeline_splits`) and what crosses each boundary. No SystemC.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ipusim/compiler/graph/tensor_graph.hpp"
#include "recompute.hpp"
#include "shapes.hpp"
#include "sublayers.hpp"

namespace ipusim::compiler::graph {

// One [first, last) node range per IPU of a replica, in model order: IPU k runs from the k-th
// split (a layer that begins a stage) to the next; no splits: one range of every node. A split
// that names no layer, the first layer, or is out of model order, or a count that is not the
// replica's IPUs - 1, is a ConfigError naming run.pipeline_splits in the run file.
std::vector<Segment> pipeline_stages(const std::vector<LayerNode>& nodes, const ModelDef& m,
                                     const RunConfig& run);

// How a stage's forward is recomputed before its backward (docs/workloads.md).
enum class Recompute : std::uint8_t {
  // Between the run's checkpoints (run.recompute_checkpoints): each range but the last is
  // recomputed, the last's activations are still live; a stashed stage recomputes all of it.
  // While it recomputes, a stage holds every activation its ops keep (OpInfo::keeps_output).
  kCheckpoints,
  // As kCheckpoints, but a stashed stage too recomputes segment by segment between the
  // checkpoints, which it stashes with its input for each micro-batch in flight (PopART's
  // pipelined recomputation with poptorch.recomputationCheckpoint): it holds its largest
  // segment's activations while recomputing. An imported graph's pipeline.
  kStashedCheckpoints,
  // Every stage, the loss stage too, recomputes its forward in its backward with a checkpoint
  // at each sub-layer's output (PopART's pipeline recomputation as the transformer examples
  // run it): a stage holds its largest activation and a few stage-boundary tensors.
  kEverySubLayer,
};

// The forward stages of a replica (PopART's pipeline stages): stage s runs `layers[s]`, in
// forward order, on IPU `ipu[s]`; the last stage holds the loss. One IPU: one stage of every
// layer. The images' preprocessing (layer "", a CNN's) runs first in stage 0.
struct ForwardStages {
  std::vector<std::uint32_t> ipu;
  std::vector<std::vector<Block>> layers;
  Recompute recompute = Recompute::kCheckpoints;
};

// The front end's stages: a CNN's run.pipeline_splits (stage k on IPU k), a transformer's
// run.pipeline_placement (stage_blocks; with heads tied to the embedding, IPU 0 runs the
// embedding first and its last layers, the heads and the loss last). A bad split, placement or
// checkpoint is a ConfigError naming the run file's key.
ForwardStages forward_stages(const ModelDef& m, const RunConfig& run);

// Each layer's forward stage (the images' preprocessing, layer "": 0).
std::map<std::string, std::uint32_t> stage_of(const ForwardStages& stages);

// By forward stage s: the activations of `g` made in stages before s and read in s or later
// (what the inter-IPU copy before s carries), in the order they were made. A graph layer no
// stage runs is an Error.
std::vector<std::vector<TensorId>> crossing(const TensorGraph& g, const ForwardStages& stages);

}  // namespace ipusim::compiler::graph
