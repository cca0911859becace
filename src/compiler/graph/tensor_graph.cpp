// SPDX-License-Identifier: Apache-2.0
#include "ipusim/compiler/graph/tensor_graph.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "ipusim/compiler/graph/primitive.hpp"
#include "ipusim/util/error.hpp"

namespace ipusim::compiler::graph {

std::uint64_t elements(const Dims& dims) {
  std::uint64_t n = 1;
  for (std::uint64_t d : dims)
    if (__builtin_mul_overflow(n, d, &n))
      throw ConfigError(fmt::format("a tensor of {} has more than 2^64 elements", to_string(dims)));
  return n;
}

std::string to_string(const Dims& dims) { return fmt::format("[{}]", fmt::join(dims, ", ")); }

std::string_view role_name(Role role) {
  switch (role) {
    case Role::kInput:
      return "input";
    case Role::kConstant:
      return "constant";
    case Role::kWeight:
      return "weight";
    case Role::kActivation:
      return "activation";
    case Role::kGradient:
      return "gradient";
    case Role::kOptimiserState:
      return "optimiser state";
  }
  return "?";
}

TensorId TensorGraph::input(std::string name, Dims dims, trace::DType dtype, Role role) {
  if (tensors_.size() >= std::numeric_limits<std::uint32_t>::max())
    throw ConfigError("a tensor graph of more than 2^32 tensors");
  tensors_.push_back({std::move(name), std::move(dims), dtype, role, std::nullopt});
  return static_cast<TensorId>(tensors_.size() - 1);
}

void TensorGraph::set_layer(std::string layer, std::string at) {
  layer_ = std::move(layer);
  at_ = std::move(at);
}

void TensorGraph::fail(Primitive op, const std::vector<TensorId>& inputs,
                       const std::string& why) const {
  std::string shapes;
  for (TensorId t : inputs)
    shapes += (shapes.empty() ? "" : " and ") +
              (index(t) < tensors_.size() ? to_string(tensors_[index(t)].dims) : "?");
  throw ConfigError(fmt::format("{}{}{} of {}: {}", at_.empty() ? "" : at_ + ": ",
                                layer_.empty() ? "" : fmt::format("layer '{}': ", layer_), name(op),
                                shapes.empty() ? "nothing" : shapes, why));
}

std::vector<TensorId> TensorGraph::add_node(Primitive op, std::vector<TensorId> inputs,
                                            Attrs attrs) {
  const PrimitiveInfo& row = info(op);
  if (inputs.size() < row.min_operands || inputs.size() > row.max_operands)
    fail(op, inputs,
         fmt::format(
             "it takes {} operand{} ({}), found {}", row.min_operands,
             row.max_operands == row.min_operands ? (row.min_operands == 1 ? "" : "s") : " or more",
             row.operands, inputs.size()));
  std::vector<const Dims*> in;
  for (TensorId t : inputs) {
    if (index(t) >= tensors_.size())
      throw Error(fmt::format("tensor graph: {} reads tensor {} of {}", name(op), index(t),
                              tensors_.size()));
    in.push_back(&tensors_[index(t)].dims);
  }
  std::vector<Dims> shapes;
  try {
    shapes = row.shape(ShapeArgs{in, attrs});
  } catch (const ShapeError& e) {
    fail(op, inputs, e.why);
  }
  const auto id = static_cast<NodeId>(nodes_.size());
  const trace::DType dtype = op == Primitive::kCast     ? attrs.dtype
                             : op == Primitive::kArgMax ? trace::DType::kInt
                             : op == Primitive::kWhere  ? tensors_[index(inputs[1])].dtype
                                                        : tensors_[index(inputs[0])].dtype;
  Node n{op,
         std::move(inputs),
         {},
         std::move(attrs),
         layer_,
         backward_,
         backward_ ? forward_ : std::nullopt};
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    std::string tensor =
        fmt::format("{}{}{}.{}", layer_, layer_.empty() ? "" : "/", name(op), index(id));
    if (shapes.size() > 1) tensor += fmt::format(":{}", i);
    n.outputs.push_back(input(std::move(tensor), std::move(shapes[i]), dtype,
                              backward_ ? Role::kGradient : Role::kActivation));
    tensors_.back().producer = id;
  }
  nodes_.push_back(std::move(n));
  return nodes_.back().outputs;
}

TensorId TensorGraph::add(Primitive op, std::vector<TensorId> inputs, Attrs attrs) {
  const std::vector<TensorId> out = add_node(op, std::move(inputs), std::move(attrs));
  if (out.size() != 1)
    throw Error(fmt::format("tensor graph: {} has {} outputs, not one", name(op), out.size()));
  return out[0];
}

std::vector<std::vector<NodeId>> TensorGraph::consumers() const {
  std::vector<std::vector<NodeId>> out(tensors_.size());
  for (std::uint32_t i = 0; i < nodes_.size(); ++i)
    for (TensorId t : nodes_[i].inputs) out.at(index(t)).push_back(static_cast<NodeId>(i));
  return out;
}

void TensorGraph::verify() const {
  auto broken = [](const std::string& what) { throw Error("tensor graph: " + what); };
  for (std::uint32_t i = 0; i < nodes_.size(); ++i) {
    const Node& n = nodes_[i];
    if (static_cast<std::size_t>(n.op) >= kPrimitiveCount)
      broken(fmt::format("node {} has no op", i));
    const PrimitiveInfo& row = info(n.op);
    if (n.inputs.size() < row.min_operands || n.inputs.size() > row.max_operands)
      broken(fmt::format("node {} ({}) reads {} operands", i, row.name, n.inputs.size()));
    std::vector<const Dims*> in;
    for (TensorId t : n.inputs) {
      if (index(t) >= tensors_.size())
        broken(fmt::format("node {} ({}) reads tensor {}, of {}", i, row.name, index(t),
                           tensors_.size()));
      const Tensor& x = tensors_[index(t)];
      if (x.producer && index(*x.producer) >= i)
        broken(fmt::format("node {} ({}) reads '{}' before node {} makes it", i, row.name, x.name,
                           index(*x.producer)));
      in.push_back(&x.dims);
    }
    std::vector<Dims> want;
    try {
      want = row.shape(ShapeArgs{in, n.attrs});
    } catch (const ShapeError& e) {
      broken(fmt::format("node {} ({}): {}", i, row.name, e.why));
    }
    if (want.size() != n.outputs.size())
      broken(fmt::format("node {} ({}) has {} outputs; its shape rule gives {}", i, row.name,
                         n.outputs.size(), want.size()));
    for (std::size_t k = 0; k < want.size(); ++k) {
      const TensorId t = n.outputs[k];
      if (index(t) >= tensors_.size() || tensors_[index(t)].producer != static_cast<NodeId>(i))
        broken(fmt::format("node {} ({}) lists output {} that another node makes", i, row.name,
                           index(t)));
      if (tensors_[index(t)].dims != want[k])
        broken(fmt::format("'{}' is {}; node {} ({}) makes {}", tensors_[index(t)].name,
                           to_string(tensors_[index(t)].dims), i, row.name, to_string(want[k])));
    }
  }
  for (std::uint32_t t = 0; t < tensors_.size(); ++t) {
    const auto& p = tensors_[t].producer;
    if (!p) continue;
    const auto& outs =
        index(*p) < nodes_.size() ? nodes_[index(*p)].outputs : std::vector<TensorId>{};
    if (std::find(outs.begin(), outs.end(), static_cast<TensorId>(t)) == outs.end())
      broken(fmt::format("'{}' names node {} as its producer, which does not list it",
                         tensors_[t].name, index(*p)));
  }
}

std::uint64_t TensorGraph::parameters() const {
  std::uint64_t n = 0;
  for (const Tensor& t : tensors_)
    if (t.role == Role::kWeight) n += elements(t.dims);
  return n;
}

std::uint64_t TensorGraph::flops(bool forward, bool backward) const {
  std::uint64_t n = 0;
  for (const Node& node : nodes_) {
    if (node.backward ? !backward : !forward) continue;
    std::vector<const Dims*> in, out;
    for (TensorId t : node.inputs) in.push_back(&tensors_[index(t)].dims);
    for (TensorId t : node.outputs) out.push_back(&tensors_[index(t)].dims);
    n += info(node.op).flops(in, out, node.attrs);
  }
  return n;
}

}  // namespace ipusim::compiler::graph
