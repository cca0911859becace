// SPDX-License-Identifier: Apache-2.0
// Autodiff, a pass over a trained CNN graph: the structure of the backward pass, read from each
// op's row (graph::kOps: its second operand and its weights) before anything is lowered. From
// the loss back to the first layer, each layer's output gradient goes into the gradients of the
// tensors it read (its input, and its `other` operand), and a layer with weights also computes
// their gradient. No SystemC, no chip: a pure function of the graph.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "shapes.hpp"

namespace ipusim::compiler::graph {

// What one layer's backward computes.
struct GradientStep {
  // Its input's gradient: every layer but the first, which reads the images (they need none).
  bool data_gradient = true;
  bool weight_gradient = false;  // its op trains weights (OpInfo::weights)
  // The tensors its gradient is added into, in the order the lowering adds them: `other`
  // first (the residual add's second operand, scale's factors), then the input.
  std::vector<std::string> into;
};

// One step per node, in model order (the backward pass runs them last to first). Every layer
// must receive a gradient from a later one, else no gradient would reach its output: a layer
// that no later layer reads (in training every path leads to the loss) is a ConfigError naming
// its file:line.
std::vector<GradientStep> gradient_flow(const ModelDef& m, const std::vector<LayerNode>& nodes);

}  // namespace ipusim::compiler::graph
