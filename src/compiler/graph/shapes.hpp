// SPDX-License-Identifier: Apache-2.0
// Shape inference, the first pass over a CNN model graph: each layer's input and output shape
// (per image), its trainable parameters and its conv groups. No SystemC, no chip: a pure
// function of the model file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ipusim/compiler/compiler.hpp"

namespace ipusim::compiler::graph {

struct Shape {
  std::uint64_t h = 0, w = 0, c = 0;  // height, width, channels of one image
  std::uint64_t positions() const { return h * w; }
  std::uint64_t elements() const { return h * w * c; }
};

// A layer with what shape inference found for it.
struct LayerNode {
  const Layer* layer = nullptr;
  std::string input;  // the producing layer ("" = the image input)
  Shape in, out;
  std::uint64_t params = 0;  // trainable parameters (elements)
  std::uint64_t groups = 1;  // a conv's channel groups
  Op op() const { return layer->op; }
};

// Every layer of `m` in model order. A shape the op cannot take (a group size that does not
// divide the channels, fc on a spatial input, an add of unequal shapes, scale factors that are
// not 1x1 per channel) is a ConfigError naming the layer's file:line.
std::vector<LayerNode> infer_shapes(const ModelDef& m);

}  // namespace ipusim::compiler::graph
