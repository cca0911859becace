// SPDX-License-Identifier: Apache-2.0
// Recomputation, a pass over a CNN graph: the layer ranges between the run's checkpoints
// (run.recompute_checkpoints). A training step keeps the checkpoints' outputs and recomputes
// each range's forward before its backward, except the last range, whose activations are still
// live (docs/workloads.md).
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "sublayers.hpp"

namespace ipusim::compiler::graph {

// [first, last) node ranges, in model order, each ending at a checkpoint (its last node) but
// the last, which ends at the model's last layer. No checkpoints: one range of every node.
using Segment = std::pair<std::size_t, std::size_t>;
std::vector<Segment> segments(const std::vector<Block>& nodes,
                              const std::vector<std::string>& checkpoints);

// Every checkpoint names a layer of the model: else a ConfigError naming the run file.
void check_checkpoints(const ModelDef& m, const RunConfig& run);

}  // namespace ipusim::compiler::graph
