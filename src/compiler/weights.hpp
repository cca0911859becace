// SPDX-License-Identifier: Apache-2.0
// The weight tensors one IPU holds, a pass over the tensor graph for every model (docs/
// architecture.md, "Weight tensors"): the weights its layers read first, each on the layout its
// first conv or matmul reader creates it with (poplin's createWeights; a serialised matmul's
// weight as one tensor per step), a table read by a gather alone and a vector on the linear
// mapping, at the size the IPU stores it (graph::Tensor::stored). The optimiser pass
// (optimiser.hpp) updates them and the memory pass (memory.hpp) holds them. No SystemC.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ipu_builder.hpp"
#include "ipusim/compiler/graph/tensor_graph.hpp"
#include "memory.hpp"
#include "optimiser.hpp"

namespace ipusim::compiler {

// A matmul C = op(A) op(B) as the builder plans it: M x K by K x N in `groups` groups (a
// serialised matmul's one step of columns). A plain matrix B (a weight) takes A's leading
// dimensions as more rows. An operand of rank 1 is an Error naming the layer.
struct MatmulShape {
  std::uint64_t m = 0, n = 0, k = 0, groups = 1;
};
MatmulShape matmul_shape(const graph::TensorGraph& g, const graph::Node& f);

// The planned arguments of a forward conv or matmul node, from which poplin creates its
// weights and inputs: a matmul as M x K by K x N in groups (a serialised matmul's one step), a
// conv that cuts patches (kernel = stride > 1, no padding, one group: ViT's) as its matmul,
// another conv as itself (a grouped conv's channels per group). None for other nodes.
std::optional<plan::ConvArgs> planned_args(const graph::TensorGraph& g, const graph::Node& n);
// Whether conv node `n` cuts patches (planned_args takes it as a matmul).
bool cuts_patches(const graph::TensorGraph& g, const graph::Node& n);

// One weight tensor as the IPU keeps it: `count` tensors of `layout` (the steps of a
// serialised matmul's weight, or its equal parts).
struct HeldWeights {
  std::string name;
  Layout layout;
  std::uint64_t count = 1;
  bool adapted = true;  // a matrix or kernel (rank 2 or more), which LARS adapts; not a vector
};

struct StageWeights {
  std::vector<HeldWeights> held;  // in the order the layers first read them
  std::uint64_t elements = 0;     // every tensor's stored elements

  // As the memory pass takes them: each tensor on its layout.
  std::vector<Parameter> parameters() const;
  // As the optimiser pass takes them (its dtype, clipping across a pipeline, SGD's decay):
  // tensors of equal layouts as one loop, in the order the first of them is held.
  WeightUpdate update(trace::DType dtype, bool pipelined, bool sgd_decay) const;
};

// The weights the forward nodes of `layers` read, each in the layer that reads it first.
StageWeights stage_weights(const graph::TensorGraph& g, IpuBuilder& b,
                           const std::set<std::string>& layers);

}  // namespace ipusim::compiler
