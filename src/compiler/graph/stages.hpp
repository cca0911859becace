// SPDX-License-Identifier: Apache-2.0
// Pipeline stages, a pass over a CNN graph: the node ranges the IPUs of a replica run when the
// run splits the model (run.pipeline_splits; PopTorch's BeginBlock at a named layer, as
// graphcore/examples vision/cnns/pytorch `pipeline_splits`), and what crosses each boundary.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "recompute.hpp"
#include "shapes.hpp"

namespace ipusim::compiler::graph {

// One [first, last) node range per IPU of a replica, in model order: IPU k runs from the k-th
// split (a layer that begins a stage) to the next; no splits: one range of every node. A split
// that names no layer, the first layer, or is out of model order, or a count that is not the
// replica's IPUs - 1, is a ConfigError naming run.pipeline_splits in the run file.
std::vector<Segment> pipeline_stages(const std::vector<LayerNode>& nodes, const ModelDef& m,
                                     const RunConfig& run);

// The tensors that cross the boundary before node `boundary`: each produced before it (the
// producing node's index) and read by a node at or after it, in model order. The images are
// read by the first node only, so never cross.
std::vector<std::size_t> crossing(const std::vector<LayerNode>& nodes, std::size_t boundary);

// The elements of one sample of those tensors (their output shapes').
std::uint64_t crossing_elements(const std::vector<LayerNode>& nodes, std::size_t boundary);

}  // namespace ipusim::compiler::graph
