// SPDX-License-Identifier: Apache-2.0
// Autodiff over the tensor graph (graph::add_backward, primitive.hpp): reverse-mode, one
// backward rule per op (graph/primitive.cpp).
#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "ipusim/compiler/graph/primitive.hpp"
#include "ipusim/util/error.hpp"

namespace ipusim::compiler::graph {

std::optional<TensorId> Differentiator::grad(TensorId t) const {
  return index(t) < grads_.size() ? grads_[index(t)] : std::nullopt;
}

bool Differentiator::needs(TensorId t) const {
  return index(t) < needs_.size() && needs_[index(t)];
}

TensorId Differentiator::constant(std::string name) {
  return g_.input(std::move(name), {}, trace::DType::kFloat, Role::kConstant);
}

TensorId Differentiator::grad_or_zeros(TensorId t) {
  if (auto g = grad(t)) return *g;
  Attrs a;
  a.dims = g_.tensor(t).dims;
  return g_.add(Primitive::kExpand, {constant("zero")}, a);
}

void Differentiator::accumulate(TensorId t, TensorId g) {
  if (defer_) {
    deferred_.emplace_back(t, g);
    return;
  }
  const Dims want = g_.tensor(t).dims;
  const Dims have = g_.tensor(g).dims;
  if (have != want) {
    // numpy's broadcasting in reverse: sum the leading dimensions `t` lacks and those it has
    // as 1, then drop the leading ones.
    const std::size_t lead = have.size() - std::min(have.size(), want.size());
    Attrs sum;
    for (std::uint32_t i = 0; i < have.size(); ++i)
      if (i < lead || (want[i - lead] == 1 && have[i] != 1)) sum.axes.push_back(i);
    // Only leading dimensions summed: drop them in the reduction itself.
    sum.keep_dims = !sum.axes.empty() && sum.axes.back() >= lead;
    if (!sum.axes.empty()) g = g_.add(Primitive::kReduceSum, {g}, sum);
    if (g_.tensor(g).dims != want) {
      Attrs r;
      r.dims = want;
      g = g_.add(Primitive::kReshape, {g}, r);
    }
  }
  if (grads_.size() <= index(t)) grads_.resize(index(t) + 1);
  auto& slot = grads_[index(t)];
  slot = slot ? g_.add(Primitive::kAdd, {*slot, g}) : g;
}

std::vector<WeightGradient> add_backward(TensorGraph& g, TensorId loss, Gradients* gradients) {
  if (index(loss) >= g.tensors().size() || !g.tensor(loss).dims.empty())
    throw Error("add_backward: the loss must be a scalar tensor of the graph");
  Differentiator d(g);
  // A tensor needs a gradient when it is a weight or a forward node computed it from one.
  d.needs_.assign(g.tensors().size(), false);
  for (std::uint32_t t = 0; t < g.tensors().size(); ++t)
    d.needs_[t] = g.tensor(static_cast<TensorId>(t)).role == Role::kWeight;
  for (const Node& n : g.nodes()) {
    if (n.backward) continue;
    bool any = false;
    for (TensorId t : n.inputs) any = any || d.needs_[index(t)];
    for (TensorId t : n.outputs) d.needs_[index(t)] = any;
  }
  d.grads_.assign(g.tensors().size(), std::nullopt);
  g.set_backward(true);
  g.set_layer("loss");
  d.grads_[index(loss)] = d.constant("d_loss");  // dloss/dloss = 1
  for (std::size_t i = g.nodes().size(); i-- > 0;) {
    const Node n = g.node(static_cast<NodeId>(i));  // a copy: the rule adds nodes
    if (n.backward) continue;
    bool reached = false, wanted = false;
    for (TensorId t : n.outputs) reached = reached || d.grad(t).has_value();
    for (TensorId t : n.inputs) wanted = wanted || d.needs(t);
    if (!reached || !wanted) continue;
    const PrimitiveInfo& row = info(n.op);
    if (!row.backward)
      throw ConfigError(
          fmt::format("layer '{}': {} is on the path from a weight to the loss "
                      "and has no backward rule",
                      n.layer, row.name));
    g.set_layer(n.layer);
    g.set_forward(static_cast<NodeId>(i));
    // Split is the one op with several outputs; the others have their gradient.
    if (n.op != Primitive::kSplit && !d.grad(n.outputs[0])) continue;
    // A node's input gradients are summed into what reached its inputs after its rule's
    // nodes (all of its gradients, then the sums).
    d.defer_ = true;
    row.backward(d, n);
    d.defer_ = false;
    for (const auto& [t, grad] : std::exchange(d.deferred_, {})) d.accumulate(t, grad);
  }
  g.set_backward(false);
  g.set_forward(std::nullopt);
  g.set_layer("");
  if (gradients) *gradients = d.grads_;
  std::vector<WeightGradient> out;
  for (std::uint32_t t = 0; t < d.needs_.size(); ++t) {
    const auto id = static_cast<TensorId>(t);
    if (g.tensor(id).role == Role::kWeight)
      if (auto grad = d.grad(id)) out.push_back({id, *grad});
  }
  return out;
}

}  // namespace ipusim::compiler::graph
