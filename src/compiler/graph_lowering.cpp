// SPDX-License-Identifier: Apache-2.0
#include "graph_lowering.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "ipusim/util/error.hpp"
#include "weights.hpp"

namespace ipusim::compiler {
namespace {

using graph::Node;
using graph::NodeId;
using graph::Primitive;
using graph::TensorId;
using P = Primitive;
using trace::Op;

// The elementwise ops of a unary node (the vertex ops a fused chain applies), if it is one.
std::optional<std::vector<Op>> unary_ops(Primitive op) {
  switch (op) {
    case P::kRelu:
      return std::vector{Op::kRelu};
    case P::kClip:  // max(x, low), then min(., high)
      return std::vector{Op::kMax, Op::kMin};
    case P::kGelu:
      return std::vector{Op::kGelu};
    case P::kSigmoid:
      return std::vector{Op::kSigmoid};
    case P::kSilu:  // x sigmoid(x)
      return std::vector{Op::kSigmoid, Op::kMul};
    case P::kTanh:
    case P::kErf:  // (costed as tanh: an approximation, said at import)
      return std::vector{Op::kTanh};
    case P::kExp:
      return std::vector{Op::kExp};
    case P::kSqrt:
      return std::vector{Op::kSqrt};
    case P::kRsqrt:
      return std::vector{Op::kRsqrt};
    case P::kNeg:
      return std::vector{Op::kNeg};
    case P::kDropout:  // the mask, times 1 / (1 - ratio)
      return std::vector{Op::kMul};
    default:
      return std::nullopt;
  }
}

// Whether `columns` are `v`'s channels: all of its slices', the padding (up to a slice) in the
// last.
bool spans_channels(const Value& v, std::uint64_t columns) {
  const std::uint64_t c = v.layout.channels;
  return columns <= c * v.slices && columns > c * (v.slices - 1);
}

// The first `rows` positions of `l`.
Layout first_rows(Layout l, std::uint64_t rows) {
  l.positions = std::min(l.positions, rows);
  return l;
}

[[noreturn]] void no_rule(const Node& n) {
  throw Error(fmt::format("layer '{}': {}{} has no lowering rule yet", n.layer, graph::name(n.op),
                          n.backward ? " (backward)" : ""));
}

}  // namespace

GraphLowering::GraphLowering(const graph::TensorGraph& g, const graph::Gradients& gradients,
                             IpuBuilder& b)
    : g_(g),
      gradients_(gradients),
      b_(b),
      weight_gradient_(g.tensors().size(), false),
      readers_(g.tensors().size()),
      updates_table_(g.tensors().size(), false) {
  for (std::uint32_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    Layer& l = layers_[n.layer];
    (n.backward ? l.backward : l.forward).push_back(static_cast<NodeId>(i));
    if (!n.backward)
      for (const TensorId t : n.inputs) readers_[graph::index(t)].push_back(static_cast<NodeId>(i));
    if (n.op == P::kGatherGrad) updates_table_[graph::index(n.inputs[0])] = true;
  }
  for (auto& [name, l] : layers_) {
    if (l.forward.empty()) continue;
    l.output = g.node(l.forward.back()).outputs[0];
    const NodeId first = l.forward.front();
    for (const NodeId id : l.forward)
      for (const TensorId t : g.node(id).inputs) {
        const auto p = g.tensor(t).producer;
        if (!l.input && g.tensor(t).role == graph::Role::kActivation && p && *p < first)
          l.input = t;
      }
  }
  for (std::uint32_t t = 0; t < gradients.size(); ++t)
    if (gradients[t] && g.tensor(static_cast<TensorId>(t)).role == graph::Role::kWeight)
      weight_gradient_[graph::index(*gradients[t])] = true;
  slot_of_.assign(g.tensors().size(), kNoSlot);
}

const GraphLowering::Layer& GraphLowering::layer(const std::string& name) const {
  const auto it = layers_.find(name);
  if (it == layers_.end() || it->second.forward.empty())
    throw Error(fmt::format("graph lowering: no layer '{}' in the model's graph", name));
  return it->second;
}

void GraphLowering::forward(Steps& out, const std::string& name, Value& v) {
  const Layer& l = layer(name);
  if (l.input) bind(*l.input, std::move(v));
  forward(out, name);
  v = slots_[slot(l.output)].v;
}

void GraphLowering::forward(Steps& out, const std::string& name) {
  const Layer& l = layer(name);
  bind_inputs(l);
  for (const NodeId id : l.forward) lower(out, g_.node(id));
}

void GraphLowering::flush_all(Steps& out) {
  for (auto& slot : slots_)
    if (!slot.fused_into && !slot.gradient) flush(b_, out, slot.v);
}

std::vector<TensorId> GraphLowering::gradient_parts(
    TensorId t, const std::function<bool(const std::string&)>& of) const {
  std::vector<TensorId> parts, todo{gradient(t)};
  while (!todo.empty()) {
    const TensorId grad = todo.back();
    todo.pop_back();
    const auto p = producer(grad);
    if (!p) continue;
    const Node& n = g_.node(*p);
    if (of(n.layer)) {
      parts.push_back(grad);
    } else if (n.op == P::kAdd && n.backward) {  // a sum of parts
      todo.push_back(n.inputs[1]);
      todo.push_back(n.inputs[0]);
    }
  }
  return parts;
}

void GraphLowering::backward(Steps& out, const std::string& name, Value& g) {
  const Layer& l = layer(name);
  bind(gradient(l.output), std::move(g));
  backward(out, name);
  g = l.input ? slots_[slot(gradient(*l.input))].v : Value{};
}

void GraphLowering::backward(Steps& out, const std::string& name) {
  for (const NodeId id : layer(name).backward) lower(out, g_.node(id));
}

void GraphLowering::bind_inputs(const Layer& l) {
  const auto elementwise = [](P op) {
    return op == P::kCast || op == P::kAdd || op == P::kSub || op == P::kMul || op == P::kDiv;
  };
  for (const NodeId id : l.forward)
    for (const TensorId t : g_.node(id).inputs) {
      const graph::Tensor& in = g_.tensor(t);
      if (in.role != graph::Role::kInput || in.dtype == trace::DType::kInt || has_value(t))
        continue;
      for (TensorId at = t; !readers_[graph::index(at)].empty();) {
        const Node& r = g_.node(readers_[graph::index(at)].front());
        if (r.op == P::kConv) {
          if (const auto args = planned_args(g_, r)) bind(t, Value{b_.input_layout(*args), {}, {}});
          break;
        }
        if (!elementwise(r.op)) break;
        at = r.outputs[0];
      }
      // A decoding step's KV cache (graph::BuildOptions::decode): on the linear mapping, where
      // it was loaded or kept, and fetched from there by the matmul reading it.
      if (!has_value(t) && !readers_[graph::index(t)].empty() &&
          g_.node(readers_[graph::index(t)].front()).op == P::kMatmul)
        bind(t, Value{rows_layout(t), {}, {}});
    }
}

std::uint32_t GraphLowering::slot(TensorId t) const {
  if (!has_value(t))
    throw Error(fmt::format("graph lowering: tensor '{}' has no value yet", g_.tensor(t).name));
  return slot_of_[graph::index(t)];
}

void GraphLowering::bind(TensorId t, Value v) {
  slot_of_[graph::index(t)] = static_cast<std::uint32_t>(slots_.size());
  slots_.push_back({std::move(v), g_.tensor(t).role == graph::Role::kGradient, std::nullopt});
}

TensorId GraphLowering::gradient(TensorId t) const {
  if (graph::index(t) >= gradients_.size() || !gradients_[graph::index(t)])
    throw Error(fmt::format("graph lowering: tensor '{}' has no gradient", g_.tensor(t).name));
  return *gradients_[graph::index(t)];
}

const Value& GraphLowering::ready_slot(Steps& out, std::uint32_t s) {
  if (const auto into = slots_[s].fused_into) {
    const Value& v = ready_slot(out, *into);
    slots_[s].v = Value{v.layout, {}, {}, v.slices};
    slots_[s].fused_into.reset();
  } else {
    flush(b_, out, slots_[s].v);
  }
  return slots_[s].v;
}

const Value& GraphLowering::ready(Steps& out, TensorId t) { return ready_slot(out, slot(t)); }

void GraphLowering::fuse(Steps& out, TensorId t, TensorId y, std::span<const Op> ops) {
  const std::uint32_t s = slot(t);
  // Ops another node's chain took over are applied first.
  if (slots_[s].fused_into) (void)ready_slot(out, s);
  Value v = slots_[s].v;
  for (const Op op : ops) pend(b_, v, {op});
  bind(y, std::move(v));
  // The operand is computed with its reader's chain only when it has ops of its own pending.
  if (!slots_[s].v.pending.empty() && !slots_[s].fused_into) slots_[s].fused_into = slot(y);
}

void GraphLowering::lower(Steps& out, const Node& n) {
  const TensorId x = n.inputs[0];
  switch (n.op) {
    case P::kMatmul:
      return matmul(out, n);
    case P::kAdd:
      return binary(out, n, Op::kAdd);
    case P::kMul:
      return binary(out, n, Op::kMul);
    case P::kSub:
      return binary(out, n, Op::kSub);
    case P::kDiv:
      return binary(out, n, Op::kDiv);
    case P::kWhere:  // a mask applied where the computed operand lies, as the add of one
      return where(out, n);
    case P::kCast:
      return cast(out, n);
    case P::kConv:
      return cuts_patches(g_, n) ? conv(out, n) : conv_forward(out, n);
    case P::kConvWeightGrad:
      return conv(out, n);
    case P::kBatchNorm:
    case P::kGroupNorm:
      return norm(out, n);
    case P::kMaxPool:
      return max_pool(out, n);
    case P::kReduceMean:
      return reduce_mean(out, n);
    case P::kResize:
      return resize(out, n);
    case P::kGather:
      return gather(n);
    case P::kGatherGrad:  // the rows' gradients added into the table's (popops multiUpdateAdd)
      if (!is_weight(g_.node(*n.forward).inputs[0])) no_rule(n);
      b_.scaled_add(out, ready(out, x).layout);
      return;
    case P::kExpand:
      return expand(out, n);
    case P::kRelu:
      if (norms_) return relu(out, n);
      [[fallthrough]];
    case P::kClip:
    case P::kErf:
    case P::kGelu:
    case P::kSigmoid:
    case P::kSilu:
    case P::kTanh:
    case P::kExp:
    case P::kSqrt:
    case P::kRsqrt:
    case P::kNeg:
    case P::kDropout:
      return fuse(out, x, n.outputs[0], *unary_ops(n.op));
    case P::kUnaryGrad: {  // (dy, saved): the saved operand comes to the gradient's layout
      if (g_.tensor(x).dims.size() == 4) return cnn_unary_gradient(out, n);
      auto ops = unary_ops(n.attrs.of);
      if (!ops) no_rule(n);
      ops->push_back(Op::kMul);
      const Layout saved = ready(out, n.inputs[1]).layout;
      bring(out, saved, slots_[slot(x)].v.layout);
      return fuse(out, x, n.outputs[0], *ops);
    }
    case P::kLayerNorm:
    case P::kRmsNorm:
      return row_norm(out, n);
    case P::kNormGrad:
      return n.attrs.of == P::kLayerNorm || n.attrs.of == P::kRmsNorm ? norm_gradient(out, n)
                                                                      : cnn_norm_gradient(out, n);
    case P::kSoftmax:
      return softmax(out, n);
    case P::kSoftmaxGrad:
      return softmax_gradient(out, n);
    case P::kSoftmaxCrossEntropy:
      return cross_entropy(out, n);
    case P::kSoftmaxCrossEntropyGrad:
      return cross_entropy_gradient(out, n);
    case P::kSplit:
      return split(out, n);
    case P::kConcat:  // a CNN's feature maps joined along their channels, or rows
      return g_.tensor(x).dims.size() == 4 && n.attrs.axis == 1 ? concat_channels(out, n)
                                                                : concat(out, n);
    case P::kSlice:  // a concat's gradient back to a CNN operand's channels, or rows
      return g_.tensor(x).dims.size() == 4 && n.attrs.axes == std::vector<std::uint32_t>{1}
                 ? slice_channels(out, n)
                 : slice(out, n);
    case P::kPad:
      return pad(out, n);
    case P::kReduceSum:  // a CNN's per-channel factors' gradient, or a bias's
      return g_.tensor(x).dims.size() == 4 && n.attrs.axes == std::vector<std::uint32_t>{2, 3}
                 ? reduce_positions(out, n)
                 : reduce_sum(out, n);
    case P::kConvDataGrad:
      return conv_data_gradient(out, n);
    case P::kResizeGrad:
      return resize_gradient(out, n);
    case P::kMaxPoolGrad:
      return pool_gradient(out, n);
    case P::kArgMax:
      return arg_max(out, n);
    case P::kAllReduce:
      return all_reduce(out, n);
    case P::kReshape:
    case P::kTranspose:   // views: the same value
    case P::kShardInput:  // the value as it is, on every IPU of the group
      slot_of_[graph::index(n.outputs[0])] = slot(x);
      return;
    case P::kPow:
    case P::kReduceMax:
    case P::kAvgPool:
    case P::kAvgPoolGrad:
    case P::kCount:
      break;
  }
  no_rule(n);
}

// Tensor parallelism's sum over the replica's IPUs (each holds a partial result): the value is
// made ready where it lies, then one all-reduce collective of its bytes (every IPU of the
// replica runs the same program); the sum stays on the same tiles.
void GraphLowering::all_reduce(Steps& out, const Node& n) {
  const TensorId x = n.inputs[0];
  const Value& v = ready(out, x);
  const graph::Tensor& t = g_.tensor(x);
  out.push_back(b_.collective(trace::CollectiveOp::kAllReduce,
                              graph::elements(t.dims) * trace::dtype_bytes(t.dtype), t.dtype,
                              ipus_of(n.attrs)));
  bind(n.outputs[0], Value{v.layout, {}, {}, v.slices});
}

trace::Group GraphLowering::ipus_of(const graph::Attrs& a) {
  return {trace::GroupKind::kReplica, a.group_size, a.group_stride};
}

void GraphLowering::matmul(Steps& out, const Node& n) {
  const Node& f = n.backward ? g_.node(*n.forward) : n;
  if (f.op != P::kMatmul || f.attrs.transpose_a) no_rule(n);
  const MatmulShape s = matmul_shape(g_, f);
  const TensorId a = f.inputs[0], w = f.inputs[1];
  const trace::DType dt = g_.tensor(a).dtype;
  // Serialised (a weight's columns only): each step one slice of the output columns, planned
  // alike, so on one layout.
  const std::uint32_t serial = std::max<std::uint32_t>(1, f.attrs.serial);
  if (serial > 1 && (!is_weight(w) || s.groups != 1)) no_rule(n);
  if (!n.backward) {
    const Operand input{ready(out, a).layout, false};
    Layout y;
    for (std::uint32_t i = 0; i < serial; ++i)
      y = is_weight(w) ? b_.matmul(out, s.m, s.n, s.k, dt, input, {}, s.groups)
                       : b_.matmul(out, s.m, s.n, s.k, dt, input,
                                   Operand{ready(out, w).layout, f.attrs.transpose_b}, s.groups);
    bind(n.outputs[0], Value{y, {}, {}, serial});
    return;
  }
  // dA = dC op(B)^T and dB = op(A)^T dC as the backward passes of the forward matmul, step by
  // step when serialised: the steps' data gradients are partial sums, added up.
  const plan::ConvArgs fwd = IpuBuilder::matmul_args(s.m, s.n, s.k, dt, s.groups);
  const Layout weights = is_weight(w) ? b_.weights_layout(fwd) : ready(out, w).layout;
  const Layout dc = ready(out, gradient(f.outputs[0])).layout;
  if (n.attrs.operand == 0) {
    Layout da;
    const Op add = Op::kAdd;
    for (std::uint32_t i = 0; i < serial; ++i) {
      da = b_.data_gradient(out, fwd, weights, dc);
      if (i > 0) b_.elementwise(out, da, {&add, 1});
    }
    bind(n.outputs[0], Value{da, {}, {}});
    return;
  }
  // A weight's gradient is added into its accumulator; another operand's (attention's K and V)
  // stays where the matmul leaves it.
  const Layout x = ready(out, a).layout;
  Layout db;
  for (std::uint32_t i = 0; i < serial; ++i)
    db = b_.weight_gradient(out, fwd, x, weights, dc, is_weight(w));
  if (!is_weight(w)) bind(n.outputs[0], Value{db, {}, {}});
}

void GraphLowering::conv(Steps& out, const Node& n) {
  const Node& f = n.backward ? g_.node(*n.forward) : n;
  const auto args = planned_args(g_, f);
  if (!args || !is_weight(f.inputs[1])) no_rule(n);
  const Layout x = ready(out, f.inputs[0]).layout;
  if (n.backward) {  // the weight gradient, added into the weights' accumulator
    (void)b_.weight_gradient(out, *args, x, b_.weights_layout(*args),
                             ready(out, n.inputs[0]).layout, /*update=*/true);
    return;
  }
  Value y{
      b_.matmul(out, args->height, args->out_chans, args->in_chans, args->dtype, Operand{x, false}),
      {},
      {}};
  if (f.inputs.size() == 3) compiler::pend(b_, y, {Op::kAdd});  // the bias
  bind(n.outputs[0], std::move(y));
}

void GraphLowering::gather(const Node& n) {
  // Rows of a weight table by index, as a new tensor on the linear mapping. The lookup
  // (popops multiSlice) is not charged: a simplification.
  if (!is_weight(n.inputs[0])) no_rule(n);
  bind(n.outputs[0], Value{rows_layout(n.outputs[0]), {}, {}});
}

Layout GraphLowering::rows_layout(TensorId t) const {
  const graph::Tensor& x = g_.tensor(t);
  return b_.linear(x.dtype, graph::elements(x.dims) / x.dims.back(), x.dims.back());
}

void GraphLowering::softmax(Steps& out, const Node& n) {
  // Over the last axis (channels), stable: the maximum per row among the tiles holding it,
  // exp(x - max), the sum per row, then the division pending.
  if (n.attrs.axis + 1 != g_.tensor(n.inputs[0]).dims.size()) no_rule(n);
  const Layout l = ready(out, n.inputs[0]).layout;
  const std::array<Op, 2> sub_exp{Op::kSub, Op::kExp};
  b_.reduce(out, l, Axis::kChannels, 1, /*broadcast=*/true);
  b_.elementwise(out, l, sub_exp);
  b_.reduce(out, l, Axis::kChannels, 1, /*broadcast=*/true);
  bind(n.outputs[0], Value{l, {}, {}});
  compiler::pend(b_, slots_[slot(n.outputs[0])].v, {Op::kDiv});
}

void GraphLowering::softmax_gradient(Steps& out, const Node& n) {
  // (dy, y): y (dy - sum(dy y)), the kept output brought to dy's layout.
  if (n.attrs.axis + 1 != g_.tensor(n.inputs[0]).dims.size()) no_rule(n);
  const Layout y = ready(out, n.inputs[1]).layout;
  bring(out, y, slots_[slot(n.inputs[0])].v.layout);
  const Op mul = Op::kMul;
  fuse(out, n.inputs[0], n.outputs[0], {&mul, 1});
  const Layout l = ready(out, n.outputs[0]).layout;
  b_.reduce(out, l, Axis::kChannels, 1, /*broadcast=*/true);
  compiler::pend(b_, slots_[slot(n.outputs[0])].v, {Op::kSub, Op::kMul});
}

void GraphLowering::cross_entropy(Steps& out, const Node& n) {
  // Over the classes of [rows, classes] logits: exp where they lie (with what is pending
  // on them: the bias), the sum per row among the tiles holding it, the probabilities. The
  // classes are the layout's channels, or its positions within a sample (a view of per-token
  // scores as [samples x scores, tokens]: a span head's): then the sums are per sample and
  // score, as group norm groups channels (group_norm_view).
  // A CNN's per-pixel logits [samples, classes, height, width] are rows of their positions.
  const graph::Dims& d = g_.tensor(n.inputs[0]).dims;
  if (d.size() != 2 && d.size() != 4) no_rule(n);
  const Op exp = Op::kExp, div = Op::kDiv;
  fuse(out, n.inputs[0], n.outputs[0], {&exp, 1});
  const Value& v = ready(out, n.outputs[0]);
  const Layout l = v.layout;
  const std::uint32_t slices = v.slices;
  const std::uint64_t classes = d[1], rows = graph::elements(d) / classes;
  // A serialised matmul's slices: each slice's sums, its share of the classes (the slices'
  // partial sums are not combined: a simplification).
  if (spans_channels(v, classes)) {
    for (std::uint32_t i = 0; i < slices; ++i)
      b_.reduce(out, l, Axis::kChannels, 1, /*broadcast=*/true);
  } else if (slices == 1 && l.positions % classes == 0 &&
             rows == l.positions / classes * l.channels) {
    b_.reduce(out, group_norm_view(l, l.positions / classes, l.channels), Axis::kPositions, 1,
              /*broadcast=*/true);
  } else {
    no_rule(n);
  }
  for (std::uint32_t i = 0; i < slices; ++i) b_.elementwise(out, l, {&div, 1});
  // Classes split over the replica's IPUs (tensor parallelism): each row's statistics over
  // its shard, the largest logit, the sum of the exponentials and the label's logit, each
  // all-reduced over the group, one float a row (popxl-addons' sharded cross entropy, three
  // collectives).
  if (n.attrs.shards > 1) {
    constexpr std::uint32_t kStatistics = 3;
    push_repeated(out,
                  b_.collective(trace::CollectiveOp::kAllReduce, rows * 4, trace::DType::kFloat,
                                ipus_of(n.attrs)),
                  kStatistics);
  }
}

void GraphLowering::cross_entropy_gradient(Steps& out, const Node& n) {
  // The probabilities less the labels' one-hot rows.
  const Value& p = ready(out, n.inputs[0]);
  const Layout l = p.layout;
  const std::uint32_t slices = p.slices;
  const Op sub = Op::kSub;
  for (std::uint32_t i = 0; i < slices; ++i) b_.elementwise(out, l, {&sub, 1});
  bind(n.outputs[0], Value{l, {}, {}, slices});
}

void GraphLowering::split(Steps& out, const Node& n) {
  // Along the channels, after what is pending on the whole (a fused projection's bias). Each
  // part is taken to lie on the tiles of the first part's channels (a simplification: Q, K and
  // V of a fused QKV projection as the first of them).
  if (n.attrs.axis + 1 != g_.tensor(n.inputs[0]).dims.size()) no_rule(n);
  const Layout l = ready(out, n.inputs[0]).layout;
  for (std::size_t i = 0; i < n.outputs.size(); ++i)
    bind(n.outputs[i], Value{channel_slice(l, n.attrs.dims[i]), {}, {}});
}

void GraphLowering::slice(Steps& out, const Node& n) {
  // Rows of a [..., rows, width] tensor (a classifier's class tokens, a masked-LM head's
  // masked tokens): copied into a new tensor on the linear mapping, taken from the first rows
  // of where the tensor lies (a simplification: they are each sample's first rows).
  const graph::Dims& y = g_.tensor(n.outputs[0]).dims;
  const std::uint32_t last = static_cast<std::uint32_t>(y.size()) - 1;
  if (y.empty()) no_rule(n);
  if (n.attrs.axes == std::vector<std::uint32_t>{last}) {
    // Channels of each row (half of a head for a rotary embedding): moved into a new tensor
    // on the linear mapping.
    const Layout x = viewed_as(ready(out, n.inputs[0]).layout, rows_layout(n.inputs[0]));
    const Layout to = rows_layout(n.outputs[0]);
    b_.move_channels(out, x, n.attrs.starts[0], to, 0, y.back());
    return bind(n.outputs[0], Value{to, {}, {}});
  }
  if (std::find(n.attrs.axes.begin(), n.attrs.axes.end(), last) != n.attrs.axes.end()) no_rule(n);
  const Layout x = ready(out, n.inputs[0]).layout;
  const Layout to = rows_layout(n.outputs[0]);
  bring(out, first_rows(x, to.positions), to);
  bind(n.outputs[0], Value{to, {}, {}});
}

void GraphLowering::pad(Steps& out, const Node& n) {
  // The gradient of a slice of rows: the rows' gradient moved back to the first rows of where
  // the sliced tensor lies (as slice() took them), the others' zero (not computed).
  const bool of_slice = n.backward && g_.node(*n.forward).op == P::kSlice;
  if (!of_slice) no_rule(n);
  const graph::Dims& dy = g_.tensor(n.inputs[0]).dims;
  const Node& f = g_.node(*n.forward);
  const TensorId sliced = f.inputs[0];
  if (f.attrs.axes == std::vector<std::uint32_t>{static_cast<std::uint32_t>(dy.size() - 1)}) {
    // Of a slice of channels (Q, K or V of a fused projection): moved back to its channels.
    const Layout x = viewed_as(ready(out, sliced).layout, rows_layout(sliced));
    b_.move_channels(out, viewed_as(ready(out, n.inputs[0]).layout, rows_layout(n.inputs[0])), 0, x,
                     f.attrs.starts[0], dy.back());
    return bind(n.outputs[0], Value{x, {}, {}});
  }
  const Layout x = ready(out, sliced).layout;
  bring(out, ready(out, n.inputs[0]).layout, first_rows(x, graph::elements(dy) / dy.back()));
  bind(n.outputs[0], Value{x, {}, {}});
}

void GraphLowering::concat(Steps& out, const Node& n) {
  if (!n.backward) {
    const graph::Dims& y = g_.tensor(n.outputs[0]).dims;
    int computed = 0;
    for (const TensorId t : n.inputs) computed += has_value(t) ? 1 : 0;
    if (n.attrs.axis + 1 == y.size() && computed == static_cast<int>(n.inputs.size())) {
      // Along the channels (a rotary embedding's halves): each part's channels moved into
      // its range of a new tensor on the linear mapping.
      const Layout joined = rows_layout(n.outputs[0]);
      std::uint64_t first = 0;
      for (const TensorId t : n.inputs) {
        const std::uint64_t width = g_.tensor(t).dims.back();
        b_.move_channels(out, viewed_as(ready(out, t).layout, rows_layout(t)), 0, joined, first,
                         width);
        first += width;
      }
      return bind(n.outputs[0], Value{joined, {}, {}});
    }
    if (computed > 1) {
      // Along rows, several computed parts: each moved to its rows of a new tensor.
      const Layout joined = rows_layout(n.outputs[0]);
      for (const TensorId t : n.inputs)
        if (has_value(t))
          bring(out, ready(out, t).layout, first_rows(joined, rows_layout(t).positions));
      return bind(n.outputs[0], Value{joined, {}, {}});
    }
    return concat_rows(out, n);
  }
  // The gradient of a split: each part's gradient brought to where its part of the split's
  // input lies (as split() places it), the whole on the input's layout.
  const bool of_split = g_.node(*n.forward).op == P::kSplit;
  if (!of_split || n.attrs.axis + 1 != g_.tensor(n.outputs[0]).dims.size()) no_rule(n);
  const Layout whole = ready(out, g_.node(*n.forward).inputs[0]).layout;
  for (const TensorId part : n.inputs) {
    const Layout to = channel_slice(whole, g_.tensor(part).dims.back());
    bring(out, viewed_as(ready(out, part).layout, to), to);
  }
  bind(n.outputs[0], Value{whole, {}, {}});
}

void GraphLowering::concat_rows(Steps& out, const Node& n) {
  // Along rows (not the last axis), one part computed here and the others broadcast weights (a
  // class token): the computed part moves to its rows of the whole on the linear mapping, what
  // is pending on it then applied to the whole (the other parts' few rows per sample are not
  // charged).
  const graph::Dims& y = g_.tensor(n.outputs[0]).dims;
  std::optional<TensorId> part;
  for (const TensorId t : n.inputs)
    if (has_value(t)) {
      if (part) no_rule(n);
      part = t;
    }
  if (!part || n.attrs.axis + 1 >= y.size()) no_rule(n);
  fuse(out, *part, n.outputs[0], {});
  Value& v = slots_[slot(n.outputs[0])].v;
  bring(out, v.layout, rows_layout(*part));
  v.layout = rows_layout(n.outputs[0]);
}

void GraphLowering::binary(Steps& out, const Node& n, Op op) {
  TensorId a = n.inputs[0], c = n.inputs[1];
  // The sum of a weight's gradients (a tied table's): each was added into its accumulator.
  if (weight_gradient_[graph::index(n.outputs[0])] && !has_value(a) && !has_value(c)) return;
  // A map times its per-channel factors, in either order (torchvision writes scale * input).
  const auto per_channel = [](const graph::Dims& d) {
    return d.size() == 4 && d[2] == 1 && d[3] == 1;
  };
  if (op == Op::kMul && per_channel(g_.tensor(a).dims) && !per_channel(g_.tensor(c).dims))
    std::swap(a, c);
  const graph::Dims& ad = g_.tensor(a).dims;
  const graph::Dims& cd = g_.tensor(c).dims;
  if (has_value(a) && has_value(c) && ad.size() == 4 && cd.size() == 4 && cd[2] == 1 &&
      cd[3] == 1 && ad != cd) {
    // A CNN's per-channel factors (squeeze-and-excitation's scale): computed, brought to the
    // tiles holding each channel (a broadcast from the first of them), then multiplied there.
    (void)ready(out, c);
    b_.broadcast(out, slots_[slot(a)].v.layout, Axis::kPositions, 1);
    fuse(out, a, n.outputs[0], {&op, 1});
    return;
  }
  if (has_value(a) && has_value(c) && ad == cd) {
    // Two tensors computed here (a residual, a gradient's two parts): a CNN's feature maps
    // keep the first operand's layout and pending ops (popops' in-place add), other tensors
    // the one computed later's; the other is brought to it.
    const auto pa = producer(a), pc = producer(c);
    const bool a_later = pa && (!pc || *pa > *pc);
    const bool keep_a = ad.size() == 4 || a_later;
    const TensorId keep = keep_a ? a : c, other = keep_a ? c : a;
    const Layout from = ready(out, other).layout;
    bring(out, from, slots_[slot(keep)].v.layout);
    fuse(out, keep, n.outputs[0], {&op, 1});
    return;
  }
  // A vector or constant broadcast over a computed tensor (a bias): applied where it lives.
  if (!has_value(a) && !has_value(c)) no_rule(n);
  const TensorId x = has_value(a) ? a : c;
  const auto p = producer(x);
  if (p && g_.node(*p).op == P::kExpand && g_.node(*p).backward) {
    // A gradient spread over the positions it came from (an average pool's): written there by
    // this op, which materialises it.
    const Layout l = ready(out, x).layout;
    b_.elementwise(out, l, {&op, 1});
    return bind(n.outputs[0], Value{l, {}, {}});
  }
  fuse(out, x, n.outputs[0], {&op, 1});
}

// compiler::layer_norm or rms_norm, the normalisation pending.
void GraphLowering::row_norm(Steps& out, const Node& n) {
  Value y = ready(out, n.inputs[0]);
  if (n.op == P::kLayerNorm)
    layer_norm(b_, out, y, shared_statistics(n, 2));
  else
    rms_norm(b_, out, y, shared_statistics(n, 1));
  bind(n.outputs[0], std::move(y));
}

// Over hidden features split over `shards` IPUs (2-D tensor parallelism): each row's `stats`
// partial sums all-reduced over the group in one collective, forward and backward
// (popxl-addons layer_norm_distributedx.cpp: poplin's distributedNormStatistics and
// distributedNormStatisticsGradients with a multi-tensor gcl::allReduceCrossReplica callback).
ShareStatistics GraphLowering::shared_statistics(const Node& n, std::uint64_t stats) {
  if (n.attrs.shards <= 1) return {};
  const graph::Tensor& t = g_.tensor(n.inputs[0]);
  const std::uint64_t rows = graph::elements(t.dims) / t.dims.back();
  return [this, bytes = rows * stats * 4, group = ipus_of(n.attrs)](Steps& out) {
    out.push_back(
        b_.collective(trace::CollectiveOp::kAllReduce, bytes, trace::DType::kFloat, group));
  };
}

void GraphLowering::norm_gradient(Steps& out, const Node& n) {
  // (dy, x, gamma [, beta]): compiler::layer_norm_gradient or rms_norm_gradient, the input
  // gradient pending.
  Value dx = ready(out, n.inputs[0]);
  if (n.attrs.of == P::kRmsNorm)
    rms_norm_gradient(b_, out, dx, ready(out, n.inputs[1]).layout, shared_statistics(n, 1));
  else
    layer_norm_gradient(b_, out, dx, ready(out, n.inputs[1]).layout, shared_statistics(n, 2));
  bind(n.outputs[0], std::move(dx));
}

void GraphLowering::cast(Steps& out, const Node& n) {
  // A host input's 8-bit values, where they landed.
  const TensorId x = n.inputs[0];
  if (!has_value(x)) no_rule(n);
  const Layout l = ready(out, x).layout;
  b_.cast(out, l, g_.tensor(x).dtype);
  bind(n.outputs[0], Value{l, {}, {}});
}

void GraphLowering::arg_max(Steps& out, const Node& n) {
  // Each row's largest value and its index, reduced over the row's channels among the tiles
  // holding it, as the softmax's maximum is (popnn::maxAndArgMax; a serialised matmul's slices
  // each reduced); the indices, one 32-bit value per row, linearly.
  const Value& v = ready(out, n.inputs[0]);
  const Layout l = v.layout;
  const std::uint32_t slices = v.slices;
  if (!spans_channels(v, g_.tensor(n.inputs[0]).dims.back())) no_rule(n);
  for (std::uint32_t i = 0; i < slices; ++i)
    b_.reduce(out, l, Axis::kChannels, 1, /*broadcast=*/false);
  const std::uint64_t rows = graph::elements(g_.tensor(n.outputs[0]).dims);
  bind(n.outputs[0], Value{b_.linear(trace::DType::kInt, rows, 1), {}, {}});
}

void GraphLowering::reduce_sum(Steps& out, const Node& n) {
  const TensorId y = n.outputs[0];
  // The rows of a broadcast lookup's gradient summed over the batch go into the table's update
  // as they are: it adds each row, repeated indices included.
  if (updates_table_[graph::index(y)] && !weight_gradient_[graph::index(y)]) {
    slot_of_[graph::index(y)] = slot(n.inputs[0]);
    return;
  }
  // The gradient of a per-row factor (an RMS norm's scale, broadcast over each row): each
  // row's channels reduced among the tiles holding them, the result where they are.
  const graph::Dims& xd = g_.tensor(n.inputs[0]).dims;
  if (!weight_gradient_[graph::index(y)] && over_last_axis(n)) return reduce_rows(out, n);
  // The gradient of a broadcast operand (grouped-query attention's K and V, expanded): the
  // repeats summed over the rows of each, into a new tensor on the linear mapping.
  if (!weight_gradient_[graph::index(y)] && !xd.empty() &&
      std::find(n.attrs.axes.begin(), n.attrs.axes.end(), xd.size() - 1) == n.attrs.axes.end()) {
    b_.reduce(out, ready(out, n.inputs[0]).layout, Axis::kPositions, 1, /*broadcast=*/false);
    return bind(y, Value{rows_layout(y), {}, {}});
  }
  // A bias's (a class token's) gradient: the output gradient summed over the rows, each
  // channel to one element (PopART's ReduceSum of the Add's gradient), in the weight-gradient
  // pass.
  if (!weight_gradient_[graph::index(y)]) no_rule(n);
  const Value& v = ready(out, n.inputs[0]);
  const Layout l = v.layout;
  const std::uint32_t slices = v.slices;
  // Each channel to one element (a serialised matmul's slices each to their share); a
  // gradient laid out otherwise (an attention operand's) is viewed as rows of the bias first.
  if (!spans_channels(v, graph::elements(g_.tensor(y).dims))) {
    const auto pass = b_.scope_pass(trace::Pass::kWeightGradient);
    b_.reduce(out, viewed_as(l, rows_layout(n.inputs[0])), Axis::kPositions, 1, false);
    return;
  }
  const auto pass = b_.scope_pass(trace::Pass::kWeightGradient);
  for (std::uint32_t i = 0; i < slices; ++i)
    b_.reduce(out, l, Axis::kPositions, 1, /*broadcast=*/false);
}

void GraphLowering::conv_forward(Steps& out, const Node& n) {
  // A conv planned as itself on its input's layout (a grouped conv's channels per group);
  // its bias, if any, added where the output lies.
  const auto args = planned_args(g_, n);
  if (!args || !is_weight(n.inputs[1])) no_rule(n);
  const Layout x = ready(out, n.inputs[0]).layout;
  Value y{b_.conv(out, *args, Operand{x, false}), {}, {}};
  if (n.inputs.size() == 3) compiler::pend(b_, y, {Op::kAdd});
  bind(n.outputs[0], std::move(y));
}

void GraphLowering::norm(Steps& out, const Node& n) {
  // Batch or group norm as the run lowers it (NormLowering): in place on the input's layout.
  // Batch norm folds its statistics into a scale and shift in inference.
  if (!norms_) no_rule(n);
  const Value x = ready(out, n.inputs[0]);
  const graph::Dims& d = g_.tensor(n.inputs[0]).dims;
  const bool statistics = !(recomputing_ && norms_->caches_statistics());
  Value y = n.op == P::kGroupNorm ? norms_->group_norm(out, x, d[0], n.attrs.groups, statistics)
            : gradients_.empty()  ? norms_->batch_norm_inference(x)
                                  : norms_->batch_norm(out, x, d[1], statistics);
  bind(n.outputs[0], std::move(y));
}

void GraphLowering::relu(Steps& out, const Node& n) {
  // In place: the output takes over its input's pending ops, then popnn's ReLU or its op
  // pending.
  fuse(out, n.inputs[0], n.outputs[0], {});
  norms_->relu(out, slots_[slot(n.outputs[0])].v);
}

void GraphLowering::max_pool(Steps& out, const Node& n) {
  // Each output reads a window of its tile's inputs (the halo exchange neglected); the output
  // keeps the input's block grid.
  const graph::Dims& xd = g_.tensor(n.inputs[0]).dims;
  const graph::Dims& yd = g_.tensor(n.outputs[0]).dims;
  if (xd.size() != 4) no_rule(n);
  const std::uint64_t in = xd[2] * xd[3], per_sample = yd[2] * yd[3];
  const Layout x = ready(out, n.inputs[0]).layout;
  Layout y = x;
  y.positions = yd[0] * per_sample;
  y.positions_per_tile = ceil_div(x.positions_per_tile * per_sample, in);
  const std::uint64_t window = graph::elements(n.attrs.kernel);
  Layout work = y;
  work.positions_per_tile *= window;
  work.positions *= window;
  const Op max = Op::kMax;
  b_.elementwise(out, work, {&max, 1});
  bind(n.outputs[0], Value{y, {}, {}});
}

void GraphLowering::reduce_mean(Steps& out, const Node& n) {
  const graph::Dims& xd = g_.tensor(n.inputs[0]).dims;
  if (over_last_axis(n)) return reduce_rows(out, n);  // an RMS norm written out
  // A CNN's global average pool: each channel's positions reduced among the tiles holding
  // them, into a new [samples, channels] tensor on the linear mapping.
  if (xd.size() != 4 || n.attrs.axes != std::vector<std::uint32_t>{2, 3}) no_rule(n);
  b_.reduce(out, ready(out, n.inputs[0]).layout, Axis::kPositions, 1, /*broadcast=*/false);
  bind(n.outputs[0], Value{b_.linear(g_.tensor(n.outputs[0]).dtype, xd[0], xd[1]), {}, {}});
}

void GraphLowering::resize(Steps& out, const Node& n) {
  // Nearest neighbour: each tile writes its positions' copies.
  const std::uint64_t copies = graph::elements(n.attrs.dims);
  Layout y = ready(out, n.inputs[0]).layout;
  y.positions *= copies;
  y.positions_per_tile *= copies;
  b_.copy(out, y);
  bind(n.outputs[0], Value{y, {}, {}});
}

void GraphLowering::concat_channels(Steps& out, const Node& n) {
  // A new tensor of the operands' channels on the linear mapping, each operand's bytes moved
  // into its channel range (torch.cat; Poplar's concat is a view, which a reader wanting
  // another layout copies: this copy stands for that one). The later operands are computed
  // first.
  for (std::size_t i = 1; i < n.inputs.size(); ++i) (void)ready(out, n.inputs[i]);
  const Layout x = ready(out, n.inputs[0]).layout;
  const graph::Tensor& y = g_.tensor(n.outputs[0]);
  const Layout joined = b_.linear(y.dtype, x.positions, y.dims[1]);
  std::uint64_t first = 0;
  for (const TensorId t : n.inputs) {
    const std::uint64_t channels = g_.tensor(t).dims[1];
    b_.move_channels(out, ready(out, t).layout, 0, joined, first, channels);
    first += channels;
  }
  bind(n.outputs[0], Value{joined, {}, {}});
}

void GraphLowering::conv_data_gradient(Steps& out, const Node& n) {
  // The transposed conv of the output gradient with the weights where they were created. A
  // strided conv's data gradient is computed at the output resolution (same MACs) and written
  // at the input resolution: each tile's block grows by in / out positions.
  const Node& f = g_.node(*n.forward);
  const auto args = planned_args(g_, f);
  if (!args || cuts_patches(g_, f)) no_rule(n);
  const Layout dy = ready(out, n.inputs[0]).layout;
  Layout dx = b_.data_gradient(out, *args, b_.weights_layout(*args), dy);
  const graph::Dims& xd = g_.tensor(f.inputs[0]).dims;
  const graph::Dims& yd = g_.tensor(f.outputs[0]).dims;
  const std::uint64_t in = xd[2] * xd[3], per_sample = yd[2] * yd[3];
  dx.positions = dx.positions / per_sample * in;
  dx.positions_per_tile = ceil_div(dx.positions_per_tile * in, per_sample);
  bind(n.outputs[0], Value{dx, {}, {}});
}

void GraphLowering::cnn_norm_gradient(Steps& out, const Node& n) {
  // Batch or group norm's (popnn's or fused, NormLowering): its input comes to the gradient's
  // layout and is whitened there; the gamma and beta gradients go into their accumulators.
  if (!norms_) no_rule(n);
  Value g = ready(out, n.inputs[0]);
  const graph::Dims& d = g_.tensor(n.inputs[1]).dims;
  bring(out, ready(out, n.inputs[1]).layout, g.layout);
  const trace::DType dt = g_.tensor(n.inputs[2]).dtype;
  if (n.attrs.of == P::kBatchNorm)
    norms_->batch_norm_gradient(out, g, d[1], dt);
  else
    norms_->group_norm_gradient(out, g, d[0], d[1], n.attrs.groups, dt);
  bind(n.outputs[0], std::move(g));
}

void GraphLowering::cnn_unary_gradient(Steps& out, const Node& n) {
  // A CNN's in place: the saved tensor comes to the gradient's layout and the gradient takes
  // the derivative's ops: ReLU's as the run lowers it (g x (y > 0)); swish's g (s + x s (1 -
  // s)), s = sigmoid(x); sigmoid's g y (1 - y); a clip's g times its range mask (two compares).
  const P of = n.attrs.of;
  if (of != P::kRelu && of != P::kSilu && of != P::kSigmoid && of != P::kClip) no_rule(n);
  const Layout saved = ready(out, n.inputs[1]).layout;
  bring(out, saved, slots_[slot(n.inputs[0])].v.layout);
  if (of == P::kRelu && norms_) {
    fuse(out, n.inputs[0], n.outputs[0], {});
    return norms_->relu_gradient(out, slots_[slot(n.outputs[0])].v);
  }
  const std::vector<Op> ops =
      of == P::kRelu   ? std::vector{Op::kMul}
      : of == P::kClip ? std::vector{Op::kMax, Op::kMin, Op::kMul}
      : of == P::kSilu ? std::vector{Op::kSigmoid, Op::kSub, Op::kMul, Op::kAdd, Op::kMul, Op::kMul}
                       : std::vector{Op::kSub, Op::kMul, Op::kMul};
  fuse(out, n.inputs[0], n.outputs[0], ops);
}

void GraphLowering::pool_gradient(Steps& out, const Node& n) {
  // (dy, x, y): the gradient brought to the input's layout (from where it lies when it has the
  // input's positions), then spread over each window there.
  const Layout dy = ready(out, n.inputs[0]).layout;
  const Layout x = ready(out, n.inputs[1]).layout;
  bring(out, dy.positions == x.positions ? dy : x, x);
  const Op mul = Op::kMul;
  b_.elementwise(out, x, {&mul, 1});
  bind(n.outputs[0], Value{x, {}, {}});
}

void GraphLowering::resize_gradient(Steps& out, const Node& n) {
  // Each input position's gradient sums its copies' where the output was.
  const Node& f = g_.node(*n.forward);
  const Layout dy = ready(out, n.inputs[0]).layout;
  const Layout y = layout_of(f.outputs[0]);
  bring(out, dy, y);
  const Op sum = Op::kAdd;
  b_.elementwise(out, y, {&sum, 1});
  bind(n.outputs[0], Value{layout_of(f.inputs[0]), {}, {}});
}

void GraphLowering::slice_channels(Steps& out, const Node& n) {
  // A channel range of a feature map's gradient (a concat's operand's) as a new tensor on the
  // linear mapping.
  const Layout dy = ready(out, n.inputs[0]).layout;
  const std::uint64_t first = n.attrs.starts[0], channels = n.attrs.ends[0] - first;
  const Layout y = b_.linear(g_.tensor(n.outputs[0]).dtype, dy.positions, channels);
  b_.move_channels(out, dy, first, y, 0, channels);
  bind(n.outputs[0], Value{y, {}, {}});
}

void GraphLowering::reduce_positions(Steps& out, const Node& n) {
  // A CNN's per-channel factors' gradient: g x summed over each channel's positions among the
  // tiles holding them, into a new [samples, channels] tensor on the linear mapping.
  const graph::Dims& xd = g_.tensor(n.inputs[0]).dims;
  b_.reduce(out, ready(out, n.inputs[0]).layout, Axis::kPositions, 1, /*broadcast=*/false);
  bind(n.outputs[0], Value{b_.linear(g_.tensor(n.outputs[0]).dtype, xd[0], xd[1]), {}, {}});
}

void GraphLowering::where(Steps& out, const Node& n) {
  // (condition, a, b) with a mask known before the step (a causal or padding mask) and one
  // computed operand: applied where that operand lies, as an added mask is (the constants'
  // and the mask's own layout not charged).
  std::optional<TensorId> x;
  for (std::size_t i = 1; i < 3; ++i)
    if (has_value(n.inputs[i])) {
      if (x) no_rule(n);
      x = n.inputs[i];
    }
  if (!x || has_value(n.inputs[0])) no_rule(n);
  const Op add = Op::kAdd;
  fuse(out, *x, n.outputs[0], {&add, 1});
}

void GraphLowering::expand(Steps& out, const Node& n) {
  const TensorId x0 = n.inputs[0];
  if (n.backward && g_.node(*n.forward).op == P::kReduceMean) {
    // An average pool's gradient spread back over its input's positions, where they lie.
    (void)ready(out, x0);
    return bind(n.outputs[0], Value{layout_of(g_.node(*n.forward).inputs[0]), {}, {}});
  }
  if (!has_value(x0)) {  // a weight broadcast (a class token): read where it is
    if (!is_weight(x0)) no_rule(n);
    return;
  }
  // A computed tensor broadcast to more rows (grouped-query attention's K and V repeated for
  // each head of a group): a new tensor on the linear mapping, the operand moved to its first
  // rows and copied into the others where they lie.
  const Layout x = ready(out, x0).layout;
  const Layout y = rows_layout(n.outputs[0]);
  bring(out, x, first_rows(y, rows_layout(n.inputs[0]).positions));
  b_.copy(out, y);
  bind(n.outputs[0], Value{y, {}, {}});
}

void GraphLowering::bring(Steps& out, const Layout& from, const Layout& to) {
  // The same elements under another view (a head split, a transpose) are read as `to`'s shape.
  const bool same_shape = from.positions == to.positions && from.channels == to.channels;
  b_.rearrange(out,
               same_shape || from.positions * from.channels != to.positions * to.channels
                   ? from
                   : viewed_as(from, to),
               to);
}

bool GraphLowering::over_last_axis(const Node& n) const {
  const graph::Dims& x = g_.tensor(n.inputs[0]).dims;
  return !x.empty() &&
         n.attrs.axes == std::vector<std::uint32_t>{static_cast<std::uint32_t>(x.size() - 1)};
}

void GraphLowering::reduce_rows(Steps& out, const Node& n) {
  // Each row's channels reduced among the tiles holding them, the result broadcast back to
  // them (as a layer norm's statistics), where what follows applies it.
  const Layout l = ready(out, n.inputs[0]).layout;
  b_.reduce(out, l, Axis::kChannels, 1, /*broadcast=*/true);
  bind(n.outputs[0], Value{l, {}, {}});
}

}  // namespace ipusim::compiler
