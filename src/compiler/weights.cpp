// SPDX-License-Identifier: Apache-2.0
#include "weights.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "ipusim/util/error.hpp"

namespace ipusim::compiler {
namespace {

using graph::Node;
using graph::Primitive;
using graph::TensorId;

// A conv whose windows do not overlap and cover its input (kernel = stride, no padding, one
// group), with a kernel larger than one position: ViT's patch embedding, planned as the
// matmul [images x patches, patch elements] x [patch elements, filters].
bool cuts_patches(const graph::Dims& x, const graph::Dims& w, const graph::Dims& y,
                  const graph::Attrs& a) {
  if (a.groups != 1 || x.size() != w.size() || y.size() != x.size()) return false;
  const auto zero = [](const graph::Dims& d) {
    return std::all_of(d.begin(), d.end(), [](std::uint64_t v) { return v == 0; });
  };
  if (!zero(a.pad_begin) || !zero(a.pad_end)) return false;
  bool wider = false;
  for (std::size_t i = 2; i < x.size(); ++i) {
    if (i - 2 >= a.stride.size() || a.stride[i - 2] != w[i] || y[i] * w[i] != x[i]) return false;
    wider = wider || w[i] > 1;
  }
  return wider;
}

}  // namespace

MatmulShape matmul_shape(const graph::TensorGraph& g, const Node& f) {
  const graph::Dims& a = g.tensor(f.inputs[0]).dims;
  const graph::Dims& b = g.tensor(f.inputs[1]).dims;
  const graph::Dims& y = g.tensor(f.outputs[0]).dims;
  if (a.size() < 2 || b.size() < 2)
    throw Error(fmt::format("layer '{}': a matmul of a vector has no lowering rule yet", f.layer));
  MatmulShape s;
  s.k = f.attrs.transpose_a ? a[a.size() - 2] : a.back();
  s.n = f.attrs.transpose_b ? b[b.size() - 2] : b.back();
  // A serialised matmul: one step's columns (the padded columns' share).
  s.n = ceil_div(std::max(s.n, f.attrs.padded_columns), std::max<std::uint32_t>(1, f.attrs.serial));
  if (b.size() == 2 && !f.attrs.transpose_a) {
    s.m = graph::elements(a) / s.k;
  } else {
    s.m = y[y.size() - 2];
    s.groups = graph::elements(y) / (s.m * s.n);
  }
  return s;
}

bool cuts_patches(const graph::TensorGraph& g, const Node& n) {
  return n.op == Primitive::kConv &&
         cuts_patches(g.tensor(n.inputs[0]).dims, g.tensor(n.inputs[1]).dims,
                      g.tensor(n.outputs[0]).dims, n.attrs);
}

std::optional<plan::ConvArgs> planned_args(const graph::TensorGraph& g, const Node& n) {
  if (n.op == Primitive::kMatmul) {
    if (g.tensor(n.inputs[0]).dims.size() < 2 || g.tensor(n.inputs[1]).dims.size() < 2 ||
        n.attrs.transpose_a)
      return std::nullopt;
    const MatmulShape s = matmul_shape(g, n);
    return IpuBuilder::matmul_args(s.m, s.n, s.k, g.tensor(n.inputs[0]).dtype, s.groups);
  }
  if (n.op != Primitive::kConv) return std::nullopt;
  const graph::Dims& x = g.tensor(n.inputs[0]).dims;
  const graph::Dims& w = g.tensor(n.inputs[1]).dims;
  const graph::Dims& y = g.tensor(n.outputs[0]).dims;
  const trace::DType dt = g.tensor(n.outputs[0]).dtype;
  if (cuts_patches(x, w, y, n.attrs)) {
    const std::uint64_t filters = w[0];
    return IpuBuilder::matmul_args(graph::elements(y) / filters, filters,
                                   graph::elements(w) / filters, dt);
  }
  if (x.size() != 4 || w.size() != 4 || n.attrs.stride.empty()) return std::nullopt;
  const std::uint64_t groups = n.attrs.groups;
  plan::ConvArgs a;
  a.batch = x[0];
  a.in_chans = x[1] / groups;
  a.height = x[2];
  a.width = x[3];
  a.out_chans = w[0] / groups;
  a.kernel = w[2];
  a.stride = n.attrs.stride[0];
  a.dtype = dt;
  a.groups = groups;
  a.channel_groups = groups > 1;
  return a;
}

std::vector<Parameter> StageWeights::parameters() const {
  std::vector<Parameter> out;
  for (const HeldWeights& w : held) out.push_back({w.name, w.layout, w.count});
  return out;
}

WeightUpdate StageWeights::update(trace::DType dtype, bool pipelined, bool sgd_decay) const {
  WeightUpdate u;
  u.parameters = elements;
  u.dtype = dtype;
  u.pipelined = pipelined;
  u.sgd_decay = sgd_decay;
  for (const HeldWeights& w : held) {
    const auto same = std::find_if(u.weights.begin(), u.weights.end(), [&](const auto& e) {
      return e.layout == w.layout && e.adapted == w.adapted;
    });
    if (same != u.weights.end())
      same->count += w.count;
    else
      u.weights.push_back({w.layout, w.layout.elements(), w.count, w.adapted});
  }
  return u;
}

StageWeights stage_weights(const graph::TensorGraph& g, IpuBuilder& b,
                           const std::set<std::string>& layers) {
  // Each weight's creating reader (its first forward conv or matmul that takes it as the
  // weights operand, anywhere in the graph: a tied table's is the head's matmul) and the layer
  // that reads it first, which holds it.
  std::vector<std::optional<graph::NodeId>> creator(g.tensors().size());
  std::vector<const std::string*> owner(g.tensors().size(), nullptr);
  for (std::uint32_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    if (n.backward) continue;
    for (const TensorId t : n.inputs)
      if (!owner[graph::index(t)]) owner[graph::index(t)] = &n.layer;
    if (n.inputs.size() < 2 || (n.op != Primitive::kMatmul && n.op != Primitive::kConv)) continue;
    auto& c = creator[graph::index(n.inputs[1])];
    if (!c) c = static_cast<graph::NodeId>(i);
  }
  StageWeights out;
  std::vector<bool> seen(g.tensors().size(), false);
  for (const Node& n : g.nodes()) {
    if (n.backward || !layers.contains(n.layer)) continue;
    for (const TensorId t : n.inputs) {
      const graph::Tensor& w = g.tensor(t);
      if (w.role != graph::Role::kWeight || seen[graph::index(t)] ||
          *owner[graph::index(t)] != n.layer)
        continue;
      seen[graph::index(t)] = true;
      const graph::Dims& dims = w.stored_dims();
      if (dims.empty()) continue;  // no weight is a scalar
      out.elements += graph::elements(dims);
      HeldWeights h{w.name, {}, w.parts, dims.size() >= 2};
      const auto& c = creator[graph::index(t)];
      const auto args = c ? planned_args(g, g.node(*c)) : std::nullopt;
      if (args) {
        h.layout = b.weights_layout(*args);
        h.count *= std::max<std::uint32_t>(1, g.node(*c).attrs.serial);
      } else {
        h.layout = b.linear(w.dtype, graph::elements(dims) / dims.back(), dims.back());
      }
      if (w.parts > 1) h.layout = IpuBuilder::part(h.layout, w.parts);
      out.held.push_back(std::move(h));
    }
  }
  return out;
}

}  // namespace ipusim::compiler
