// SPDX-License-Identifier: Apache-2.0
// The primitive op table of the tensor graph: one row per graph::Primitive with its name, its
// operands, its shape rule, its backward rule, what its backward reads of the forward (so
// recomputation and memory passes know what a node keeps), and its FLOPs. Adding an op is one
// row here and its rules in src/compiler/graph/primitive.cpp (docs/architecture.md, "Adding an
// op").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ipusim/compiler/graph/tensor_graph.hpp"

namespace ipusim::compiler::graph {

// What a node's backward reads of its forward pass besides the output gradient.
enum class Saves : std::uint8_t {
  kNothing,          // (add, reshape, the loss's scalar output ...)
  kInputs,           // its operands (matmul and conv read each other's; gelu its input)
  kOutput,           // its output (relu, sigmoid, softmax)
  kInputsAndOutput,  // max pooling
};

// The operand shapes a shape rule sees, with the node's attributes; it returns one Dims per
// output, or throws ShapeError saying what is wrong.
struct ShapeArgs {
  const std::vector<const Dims*>& in;
  const Attrs& attrs;
};
struct ShapeError {
  std::string why;
};

class Differentiator;  // graph/autodiff (add_backward): gradients of a node's tensors

struct PrimitiveInfo {
  Primitive op;
  std::string_view name;  // as docs and errors spell it
  std::uint8_t min_operands, max_operands;
  std::string_view operands;  // what they are, for errors ("x, w [, bias]")
  Saves saves;
  std::vector<Dims> (*shape)(const ShapeArgs& args);
  // Adds the nodes of the gradients of `node`'s inputs (d.grad, d.accumulate); null for an op
  // no gradient flows back through (the backward ops themselves).
  void (*backward)(Differentiator& d, const Node& node);
  // FLOPs of one execution, from its operands' and outputs' shapes.
  std::uint64_t (*flops)(const std::vector<const Dims*>& in, const std::vector<const Dims*>& out,
                         const Attrs& attrs);
};

const PrimitiveInfo& info(Primitive op);
inline std::string_view name(Primitive op) { return info(op).name; }
// Every row, in enum order (row i is Primitive i: checked where the table is defined).
const std::vector<PrimitiveInfo>& primitives();

// Adds the backward pass of the training step that minimises `loss` (a scalar) to `g`: from
// the loss back, each node with an output gradient and an input that depends on a weight adds
// its backward rule's nodes; a tensor read by several nodes sums their gradients. Returns each
// weight's gradient tensor, in weight order. A node on a gradient path whose op has no
// backward rule is a ConfigError naming its layer. With `gradients`, each tensor's gradient
// (indexed by tensor; none where no gradient reached it) is stored there too.
struct WeightGradient {
  TensorId weight, gradient;
};
using Gradients = std::vector<std::optional<TensorId>>;
std::vector<WeightGradient> add_backward(TensorGraph& g, TensorId loss,
                                         Gradients* gradients = nullptr);

// What backward rules use to read and add gradients (graph/autodiff.cpp).
class Differentiator {
 public:
  explicit Differentiator(TensorGraph& g) : g_(g) {}
  TensorGraph& graph() { return g_; }
  // The gradient of `t` (summed over its consumers), if any reached it.
  std::optional<TensorId> grad(TensorId t) const;
  // The gradient of `t`, or zeros of its shape when none reached it.
  TensorId grad_or_zeros(TensorId t);
  // Whether `t` needs a gradient: it is a weight or computed from one.
  bool needs(TensorId t) const;
  // Adds `g` into `t`'s gradient. `g` may have been broadcast from `t`'s shape: it is summed
  // over the broadcast dimensions first (numpy's rules in reverse).
  void accumulate(TensorId t, TensorId g);
  // A scalar constant (for where's zeros and reduce-mean's scale).
  TensorId constant(std::string name);

 private:
  friend std::vector<WeightGradient> add_backward(TensorGraph& g, TensorId loss,
                                                  Gradients* gradients);
  TensorGraph& g_;
  std::vector<std::optional<TensorId>> grads_;
  std::vector<bool> needs_;
  bool defer_ = false;  // accumulate() queues into deferred_ while a rule runs
  std::vector<std::pair<TensorId, TensorId>> deferred_;
};

}  // namespace ipusim::compiler::graph
