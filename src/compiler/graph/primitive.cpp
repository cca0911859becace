// SPDX-License-Identifier: Apache-2.0
// The primitive op table (graph/primitive.hpp): each op's shape rule, backward rule and FLOPs.
//
// FLOPs: a multiply-add counts two (conv, matmul and their gradients); an elementwise op, a
// reduction or a dropout one per element it reads or writes; softmax three per element (exp,
// sum, divide); a norm seven per element (sum, square and sum, subtract, multiply by the
// inverse deviation, scale and shift; RMS norm four), its gradient twice that; pooling one per
// window element; data movement (reshape, transpose, slice, concat, split, pad, expand,
// resize, gather, cast) none.
#include "ipusim/compiler/graph/primitive.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "ipusim/util/error.hpp"

namespace ipusim::compiler::graph {
namespace {

using P = Primitive;
using In = std::vector<const Dims*>;

[[noreturn]] void bad(std::string why) { throw ShapeError{std::move(why)}; }

// numpy's broadcasting of two shapes.
Dims broadcast(const Dims& a, const Dims& b) {
  Dims out(std::max(a.size(), b.size()));
  for (std::size_t i = 0; i < out.size(); ++i) {
    const std::uint64_t da = i < a.size() ? a[a.size() - 1 - i] : 1;
    const std::uint64_t db = i < b.size() ? b[b.size() - 1 - i] : 1;
    if (da != db && da != 1 && db != 1)
      bad(fmt::format("{} and {} do not broadcast (dimension {} from the end: {} and {})",
                      to_string(a), to_string(b), i, da, db));
    out[out.size() - 1 - i] = da == 1 ? db : da;
  }
  return out;
}

// Spatial attributes (kernel, stride, pads) have one entry per spatial dimension, or none.
std::uint64_t at_or(const Dims& v, std::size_t i, std::uint64_t fallback) {
  return v.empty() ? fallback : v[i];
}
void check_spatial(const Attrs& a, std::size_t spatial) {
  for (const Dims* v : {&a.stride, &a.pad_begin, &a.pad_end})
    if (!v->empty() && v->size() != spatial)
      bad(fmt::format("strides and pads need {} entries (one per spatial dimension), found {}",
                      spatial, v->size()));
  if (std::find(a.stride.begin(), a.stride.end(), 0u) != a.stride.end()) bad("a stride of 0");
}
// A window's output size along one dimension (floor, as ONNX and PyTorch).
std::uint64_t windowed(std::uint64_t in, std::uint64_t k, std::uint64_t stride, std::uint64_t pb,
                       std::uint64_t pe) {
  const std::uint64_t padded = in + pb + pe;
  if (k == 0 || padded < k) bad(fmt::format("a window of {} over {} (padded) elements", k, padded));
  return (padded - k) / stride + 1;
}

// ---- shape rules ----

std::vector<Dims> same(const ShapeArgs& a) { return {*a.in[0]}; }

std::vector<Dims> equal_pair(const ShapeArgs& a) {
  if (*a.in[0] != *a.in[1])
    bad(fmt::format("its operands must have one shape, found {} and {}", to_string(*a.in[0]),
                    to_string(*a.in[1])));
  return {*a.in[0]};
}

std::vector<Dims> binary(const ShapeArgs& a) {
  Dims out = *a.in[0];
  for (std::size_t i = 1; i < a.in.size(); ++i) out = broadcast(out, *a.in[i]);
  return {out};
}

std::vector<Dims> of_attrs(const ShapeArgs& a) {
  if (a.attrs.dims.empty() && !a.in[0]->empty()) bad("no result shape (attrs.dims)");
  return {a.attrs.dims};
}

std::vector<Dims> conv(const ShapeArgs& a) {
  const Dims &x = *a.in[0], &w = *a.in[1];
  const std::uint64_t g = a.attrs.groups;
  if (x.size() < 3 || w.size() != x.size())
    bad("x must be [N, C, spatial...] and w [F, C / groups, kernel...] of the same rank");
  if (g == 0 || x[1] != w[1] * g || w[0] % g != 0)
    bad(
        fmt::format("{} groups of {} input channels each do not make x's {} channels, or do "
                    "not divide w's {} filters",
                    g, w[1], x[1], w[0]));
  if (a.in.size() == 3 && *a.in[2] != Dims{w[0]}) bad(fmt::format("the bias must be [{}]", w[0]));
  const std::size_t spatial = x.size() - 2;
  check_spatial(a.attrs, spatial);
  Dims out{x[0], w[0]};
  for (std::size_t i = 0; i < spatial; ++i)
    out.push_back(windowed(x[2 + i], w[2 + i], at_or(a.attrs.stride, i, 1),
                           at_or(a.attrs.pad_begin, i, 0), at_or(a.attrs.pad_end, i, 0)));
  return {out};
}

// A matmul operand's rows and columns as read (transposed or not).
std::pair<std::uint64_t, std::uint64_t> rows_cols(const Dims& d, bool transposed) {
  const std::uint64_t r = d[d.size() - 2], c = d[d.size() - 1];
  return transposed ? std::pair{c, r} : std::pair{r, c};
}

std::vector<Dims> matmul(const ShapeArgs& a) {
  const Dims &x = *a.in[0], &y = *a.in[1];
  if (x.size() < 2 || y.size() < 2) bad("both operands need two dimensions or more");
  const auto [m, k] = rows_cols(x, a.attrs.transpose_a);
  const auto [k2, n] = rows_cols(y, a.attrs.transpose_b);
  if (k != k2) bad(fmt::format("the reduced dimensions differ: {} and {}", k, k2));
  Dims out = broadcast(Dims(x.begin(), x.end() - 2), Dims(y.begin(), y.end() - 2));
  out.push_back(m);
  out.push_back(n);
  return {out};
}

void check_axes(const std::vector<std::uint32_t>& axes, std::size_t rank) {
  for (std::uint32_t axis : axes)
    if (axis >= rank) bad(fmt::format("axis {} of a rank-{} tensor", axis, rank));
}

std::vector<Dims> reduce(const ShapeArgs& a) {
  const Dims& x = *a.in[0];
  check_axes(a.attrs.axes, x.size());
  Dims out;
  for (std::uint32_t i = 0; i < x.size(); ++i) {
    const bool reduced =
        a.attrs.axes.empty() || std::count(a.attrs.axes.begin(), a.attrs.axes.end(), i) > 0;
    if (!reduced)
      out.push_back(x[i]);
    else if (a.attrs.keep_dims)
      out.push_back(1);
  }
  return {out};
}

// The last axis dropped.
std::vector<Dims> last_axis_dropped(const ShapeArgs& a) {
  const Dims& x = *a.in[0];
  if (x.empty()) bad("a scalar has no axis to take the largest value's index of");
  return {Dims(x.begin(), x.end() - 1)};
}

std::vector<Dims> softmax(const ShapeArgs& a) {
  check_axes({a.attrs.axis}, a.in[0]->size());
  return {*a.in[0]};
}

// Norm operands: (x, gamma [, beta]), gamma and beta over the last axis (layer and RMS norm)
// or the channels, axis 1 (batch and group norm).
std::vector<Dims> norm(const ShapeArgs& a, bool channels) {
  const Dims& x = *a.in[0];
  if (x.size() < (channels ? 2u : 1u)) bad("x has too few dimensions");
  const Dims scale{channels ? x[1] : x.back()};
  for (std::size_t i = 1; i < a.in.size(); ++i)
    if (*a.in[i] != scale) bad(fmt::format("gamma and beta must be {}", to_string(scale)));
  return {x};
}
std::vector<Dims> last_axis_norm(const ShapeArgs& a) { return norm(a, false); }
std::vector<Dims> channel_norm(const ShapeArgs& a) { return norm(a, true); }
std::vector<Dims> group_norm(const ShapeArgs& a) {
  std::vector<Dims> out = norm(a, true);
  if (a.attrs.groups == 0 || out[0][1] % a.attrs.groups != 0)
    bad(fmt::format("{} groups do not divide {} channels", a.attrs.groups, out[0][1]));
  return out;
}
std::vector<Dims> norm_grad(const ShapeArgs& a) {
  if (*a.in[0] != *a.in[1]) bad("dy and x must have one shape");
  std::vector<Dims> out;
  for (std::size_t i = 1; i < a.in.size(); ++i) out.push_back(*a.in[i]);
  return out;
}

std::vector<Dims> gather(const ShapeArgs& a) {
  const Dims &table = *a.in[0], &indices = *a.in[1];
  if (table.empty()) bad("the table needs a dimension");
  Dims out = indices;
  out.insert(out.end(), table.begin() + 1, table.end());
  return {out};
}

std::vector<Dims> reshape(const ShapeArgs& a) {
  if (elements(a.attrs.dims) != elements(*a.in[0]))
    bad(fmt::format("{} has {} elements, {} has {}", to_string(*a.in[0]), elements(*a.in[0]),
                    to_string(a.attrs.dims), elements(a.attrs.dims)));
  return {a.attrs.dims};
}

std::vector<Dims> transpose(const ShapeArgs& a) {
  const Dims& x = *a.in[0];
  std::vector<std::uint32_t> sorted = a.attrs.axes;
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::uint32_t> iota(x.size());
  std::iota(iota.begin(), iota.end(), 0u);
  if (sorted != iota) bad(fmt::format("the permutation must order all {} dimensions", x.size()));
  Dims out;
  for (std::uint32_t axis : a.attrs.axes) out.push_back(x[axis]);
  return {out};
}

std::vector<Dims> slice(const ShapeArgs& a) {
  Dims out = *a.in[0];
  const Attrs& t = a.attrs;
  if (t.starts.size() != t.axes.size() || t.ends.size() != t.axes.size())
    bad("a start and an end for each axis");
  check_axes(t.axes, out.size());
  for (std::size_t i = 0; i < t.axes.size(); ++i) {
    const std::uint64_t end = std::min(t.ends[i], out[t.axes[i]]);
    if (t.starts[i] >= end)
      bad(fmt::format("an empty slice [{}, {}) of {} elements", t.starts[i], t.ends[i],
                      out[t.axes[i]]));
    out[t.axes[i]] = end - t.starts[i];
  }
  return {out};
}

std::vector<Dims> concat(const ShapeArgs& a) {
  Dims out = *a.in[0];
  check_axes({a.attrs.axis}, out.size());
  for (std::size_t i = 1; i < a.in.size(); ++i) {
    Dims d = *a.in[i];
    if (d.size() != out.size()) bad("its operands must have one rank");
    const std::uint64_t along = d[a.attrs.axis];
    d[a.attrs.axis] = out[a.attrs.axis];
    if (d != out)
      bad(fmt::format("{} and {} differ beyond axis {}", to_string(*a.in[0]), to_string(*a.in[i]),
                      a.attrs.axis));
    out[a.attrs.axis] += along;
  }
  return {out};
}

std::vector<Dims> split(const ShapeArgs& a) {
  const Dims& x = *a.in[0];
  check_axes({a.attrs.axis}, x.size());
  const Dims& sizes = a.attrs.dims;
  if (sizes.empty() ||
      std::accumulate(sizes.begin(), sizes.end(), std::uint64_t{0}) != x[a.attrs.axis] ||
      std::find(sizes.begin(), sizes.end(), 0u) != sizes.end())
    bad(fmt::format("sizes {} must be positive and add up to axis {}'s {}", to_string(sizes),
                    a.attrs.axis, x[a.attrs.axis]));
  std::vector<Dims> out;
  for (std::uint64_t s : sizes) {
    Dims d = x;
    d[a.attrs.axis] = s;
    out.push_back(d);
  }
  return out;
}

std::vector<Dims> pad(const ShapeArgs& a) {
  Dims out = *a.in[0];
  if (a.attrs.pad_begin.size() != out.size() || a.attrs.pad_end.size() != out.size())
    bad(fmt::format("pads for each of the {} dimensions", out.size()));
  for (std::size_t i = 0; i < out.size(); ++i) out[i] += a.attrs.pad_begin[i] + a.attrs.pad_end[i];
  return {out};
}

std::vector<Dims> expand(const ShapeArgs& a) {
  if (broadcast(*a.in[0], a.attrs.dims) != a.attrs.dims)
    bad(fmt::format("{} does not broadcast to {}", to_string(*a.in[0]), to_string(a.attrs.dims)));
  return {a.attrs.dims};
}

std::vector<Dims> resize(const ShapeArgs& a) {
  Dims out = *a.in[0];
  if (a.attrs.dims.size() != out.size() ||
      std::find(a.attrs.dims.begin(), a.attrs.dims.end(), 0u) != a.attrs.dims.end())
    bad(fmt::format("a positive whole factor for each of the {} dimensions", out.size()));
  for (std::size_t i = 0; i < out.size(); ++i) out[i] *= a.attrs.dims[i];
  return {out};
}

std::vector<Dims> pool(const ShapeArgs& a) {
  const Dims& x = *a.in[0];
  if (x.size() < 3) bad("x must be [N, C, spatial...]");
  const std::size_t spatial = x.size() - 2;
  if (a.attrs.kernel.size() != spatial) bad(fmt::format("a window of {} dimensions", spatial));
  check_spatial(a.attrs, spatial);
  Dims out{x[0], x[1]};
  for (std::size_t i = 0; i < spatial; ++i)
    out.push_back(windowed(x[2 + i], a.attrs.kernel[i], at_or(a.attrs.stride, i, 1),
                           at_or(a.attrs.pad_begin, i, 0), at_or(a.attrs.pad_end, i, 0)));
  return {out};
}

// PyTorch's cross entropy: logits [N, C, ...] (classes on axis 1), labels [N, ...].
std::vector<Dims> cross_entropy(const ShapeArgs& a) {
  const Dims& logits = *a.in[0];
  if (logits.size() < 2) bad("logits must be [N, classes, ...]");
  Dims labels = logits;
  labels.erase(labels.begin() + 1);
  if (*a.in[1] != labels)
    bad(fmt::format("labels must be {} (the logits without their class axis)", to_string(labels)));
  return {Dims{}};
}
std::vector<Dims> cross_entropy_grad(const ShapeArgs& a) {
  cross_entropy(a);
  return {*a.in[0]};
}

// ---- FLOPs ----

using Flops = std::uint64_t (*)(const In&, const In&, const Attrs&);

std::uint64_t no_flops(const In&, const In&, const Attrs&) { return 0; }
template <std::uint64_t N>
std::uint64_t per_output(const In&, const In& out, const Attrs&) {
  std::uint64_t n = 0;
  for (const Dims* d : out) n += N * elements(*d);
  return n;
}
template <std::uint64_t N>
std::uint64_t per_input(const In& in, const In&, const Attrs&) {
  return N * elements(*in[0]);
}
std::uint64_t conv_flops(const In& in, const In& out, const Attrs&) {
  const Dims& w = *in[1];
  const std::uint64_t bias = in.size() == 3 ? elements(*out[0]) : 0;
  return 2 * elements(*out[0]) * (elements(w) / w[0]) + bias;
}
// dx: the forward's multiply-adds, each read back once (a strided conv's transpose skips the
// zeros it would insert).
std::uint64_t conv_data_grad_flops(const In& in, const In&, const Attrs&) {
  const Dims& w = *in[1];
  return 2 * elements(*in[0]) * (elements(w) / w[0]);
}
// dw: each element sums over the batch and the output positions.
std::uint64_t conv_weight_grad_flops(const In& in, const In& out, const Attrs&) {
  const Dims& dy = *in[0];
  return 2 * elements(*out[0]) * (elements(dy) / dy[1]);
}
std::uint64_t matmul_flops(const In& in, const In& out, const Attrs& a) {
  return 2 * elements(*out[0]) * rows_cols(*in[0], a.transpose_a).second;
}
std::uint64_t pool_flops(const In&, const In& out, const Attrs& a) {
  return elements(*out[0]) * elements(a.kernel);
}
std::uint64_t pool_grad_flops(const In& in, const In&, const Attrs& a) {
  return elements(*in[0]) * elements(a.kernel);
}
std::uint64_t norm_grad_flops(const In& in, const In&, const Attrs& a) {
  return (a.of == P::kRmsNorm ? 8 : 14) * elements(*in[1]);
}

// ---- backward rules ----

using Backward = void (*)(Differentiator&, const Node&);

TensorId add(Differentiator& d, Primitive op, std::vector<TensorId> in, Attrs a = {}) {
  return d.graph().add(op, std::move(in), std::move(a));
}
const Dims& dims(Differentiator& d, TensorId t) { return d.graph().tensor(t).dims; }

// Sends `dx` to `x` if it needs it (make computes it only then).
template <class Make>
void to(Differentiator& d, TensorId x, Make make) {
  if (d.needs(x)) d.accumulate(x, make());
}

void conv_backward(Differentiator& d, const Node& n) {
  const TensorId dy = *d.grad(n.outputs[0]), x = n.inputs[0], w = n.inputs[1];
  to(d, x, [&] {
    Attrs a = n.attrs;
    a.dims = dims(d, x);
    return add(d, P::kConvDataGrad, {dy, w}, a);
  });
  to(d, w, [&] {
    Attrs a = n.attrs;
    a.dims = dims(d, w);
    return add(d, P::kConvWeightGrad, {dy, x}, a);
  });
  if (n.inputs.size() == 3)
    to(d, n.inputs[2], [&] {
      Attrs a;
      for (std::uint32_t i = 0; i < dims(d, dy).size(); ++i)
        if (i != 1) a.axes.push_back(i);
      a.keep_dims = false;
      return add(d, P::kReduceSum, {dy}, a);
    });
}

// Folds a batched operand's leading dimensions into its rows ([..., M, K] -> [prod * M, K]),
// as frameworks do for a weight gradient, when the other operand is a plain matrix.
TensorId fold(Differentiator& d, TensorId t) {
  const Dims& s = dims(d, t);
  Attrs a;
  a.dims = {elements(s) / s.back(), s.back()};
  return add(d, P::kReshape, {t}, a);
}

// C = op(A) op(B): dA = dC op(B)^T (or op(B) dC^T when A is read transposed), dB = op(A)^T dC
// (or dC^T op(A)).
void matmul_backward(Differentiator& d, const Node& n) {
  const TensorId dc = *d.grad(n.outputs[0]), a = n.inputs[0], b = n.inputs[1];
  const bool ta = n.attrs.transpose_a, tb = n.attrs.transpose_b;
  std::uint8_t operand = 0;  // of the next gradient matmul
  auto mm = [&](TensorId x, TensorId y, bool tx, bool ty) {
    Attrs at;
    at.transpose_a = tx;
    at.transpose_b = ty;
    at.operand = operand;
    return add(d, P::kMatmul, {x, y}, at);
  };
  to(d, a, [&] {
    if (!ta && dims(d, a).size() == 2 && dims(d, b).size() > 2 && !tb)
      return mm(fold(d, dc), fold(d, b), false, true);
    return ta ? mm(b, dc, tb, true) : mm(dc, b, false, !tb);
  });
  operand = 1;
  to(d, b, [&] {
    if (!ta && dims(d, b).size() == 2 && dims(d, a).size() > 2)
      return tb ? mm(fold(d, dc), fold(d, a), true, false)
                : mm(fold(d, a), fold(d, dc), true, false);
    return tb ? mm(dc, a, true, ta) : mm(a, dc, !ta, false);
  });
}

// An elementwise op whose gradient reads its input or output (the row's `saves`).
void unary_backward(Differentiator& d, const Node& n) {
  const TensorId dy = *d.grad(n.outputs[0]);
  const TensorId saved = info(n.op).saves == Saves::kOutput ? n.outputs[0] : n.inputs[0];
  Attrs a;
  a.of = n.op;
  to(d, n.inputs[0], [&] { return add(d, P::kUnaryGrad, {dy, saved}, a); });
}

// The op applied to the gradient as it was to the value (negation, dropout's mask, a cast
// back).
void same_op_backward(Differentiator& d, const Node& n) {
  const TensorId dy = *d.grad(n.outputs[0]);
  Attrs a = n.attrs;
  a.dtype = d.graph().tensor(n.inputs[0]).dtype;
  to(d, n.inputs[0], [&] { return add(d, n.op, {dy}, a); });
}

// all_reduce: every IPU of the group computes with the sum, so each gets the whole gradient.
void identity_backward(Differentiator& d, const Node& n) {
  const TensorId dy = *d.grad(n.outputs[0]);
  to(d, n.inputs[0], [&] { return dy; });
}

// shard_input: each IPU's gradient is its split work's share, summed over the group.
void shard_input_backward(Differentiator& d, const Node& n) {
  const TensorId dy = *d.grad(n.outputs[0]);
  to(d, n.inputs[0], [&] {
    Attrs a;  // over the same IPUs
    a.group_size = n.attrs.group_size;
    a.group_stride = n.attrs.group_stride;
    return add(d, P::kAllReduce, {dy}, a);
  });
}

void add_backward_rule(Differentiator& d, const Node& n) {
  const TensorId dy = *d.grad(n.outputs[0]);
  to(d, n.inputs[0], [&] { return dy; });
  to(d, n.inputs[1], [&] { return n.op == P::kSub ? add(d, P::kNeg, {dy}) : dy; });
}

void mul_backward(Differentiator& d, const Node& n) {
  const TensorId dy = *d.grad(n.outputs[0]), a = n.inputs[0], b = n.inputs[1];
  to(d, a, [&] { return add(d, P::kMul, {dy, b}); });
  to(d, b, [&] { return add(d, P::kMul, {dy, a}); });
}

// y = a / b: da = dy / b, db = -dy y / b.
void div_backward(Differentiator& d, const Node& n) {
  const TensorId dy = *d.grad(n.outputs[0]), a = n.inputs[0], b = n.inputs[1];
  to(d, a, [&] { return add(d, P::kDiv, {dy, b}); });
  to(d, b, [&] {
    const TensorId t = add(d, P::kDiv, {add(d, P::kMul, {dy, n.outputs[0]}), b});
    return add(d, P::kNeg, {t});
  });
}

// y = a ^ b: da = dy b y / a. A trained exponent has no rule.
void pow_backward(Differentiator& d, const Node& n) {
  const TensorId dy = *d.grad(n.outputs[0]), a = n.inputs[0], b = n.inputs[1];
  if (d.needs(b))
    throw ConfigError(
        fmt::format("layer '{}': pow with an exponent computed from weights has no "
                    "backward rule",
                    n.layer));
  to(d, a, [&] {
    const TensorId t = add(d, P::kMul, {b, add(d, P::kDiv, {n.outputs[0], a})});
    return add(d, P::kMul, {dy, t});
  });
}

void where_backward(Differentiator& d, const Node& n) {
  const TensorId dy = *d.grad(n.outputs[0]), c = n.inputs[0];
  to(d, n.inputs[1], [&] { return add(d, P::kWhere, {c, dy, d.constant("zero")}); });
  to(d, n.inputs[2], [&] { return add(d, P::kWhere, {c, d.constant("zero"), dy}); });
}

// dy back to x's shape: the reduced axes restored as 1 (when they were dropped) and expanded.
TensorId unreduce(Differentiator& d, const Node& n, TensorId dy) {
  const Dims x = dims(d, n.inputs[0]);  // a copy: adding nodes moves the tensors
  if (!n.attrs.keep_dims) {
    Attrs kept;
    kept.axes = n.attrs.axes;
    kept.keep_dims = true;
    const In xs{&x};
    Attrs r;
    r.dims = reduce(ShapeArgs{xs, kept})[0];
    dy = add(d, P::kReshape, {dy}, r);
  }
  Attrs e;
  e.dims = x;
  return add(d, P::kExpand, {dy}, e);
}

void reduce_backward(Differentiator& d, const Node& n) {
  const TensorId dy = *d.grad(n.outputs[0]), x = n.inputs[0];
  to(d, x, [&] {
    const TensorId e = unreduce(d, n, dy);
    if (n.op == P::kReduceSum) return e;
    if (n.op == P::kReduceMean) return add(d, P::kMul, {e, d.constant("1/count")});
    Attrs a;
    a.of = n.op;
    return add(d, P::kUnaryGrad, {e, x}, a);  // reduce max: to the maxima
  });
}

void softmax_backward(Differentiator& d, const Node& n) {
  const TensorId dy = *d.grad(n.outputs[0]);
  to(d, n.inputs[0], [&] { return add(d, P::kSoftmaxGrad, {dy, n.outputs[0]}, n.attrs); });
}

void norm_backward(Differentiator& d, const Node& n) {
  const TensorId dy = *d.grad(n.outputs[0]);
  bool any = false;
  for (TensorId t : n.inputs) any = any || d.needs(t);
  if (!any) return;
  std::vector<TensorId> in{dy};
  in.insert(in.end(), n.inputs.begin(), n.inputs.end());
  Attrs a = n.attrs;
  a.of = n.op;
  const std::vector<TensorId> grads = d.graph().add_node(P::kNormGrad, in, a);
  for (std::size_t i = 0; i < grads.size(); ++i)
    if (d.needs(n.inputs[i])) d.accumulate(n.inputs[i], grads[i]);
}

void gather_backward(Differentiator& d, const Node& n) {
  const TensorId dy = *d.grad(n.outputs[0]), table = n.inputs[0];
  to(d, table, [&] {
    Attrs a;
    a.dims = dims(d, table);
    return add(d, P::kGatherGrad, {dy, n.inputs[1]}, a);
  });
}

void reshape_backward(Differentiator& d, const Node& n) {
  const TensorId dy = *d.grad(n.outputs[0]), x = n.inputs[0];
  to(d, x, [&] {
    Attrs a;
    a.dims = dims(d, x);
    return add(d, P::kReshape, {dy}, a);
  });
}

void transpose_backward(Differentiator& d, const Node& n) {
  const TensorId dy = *d.grad(n.outputs[0]);
  to(d, n.inputs[0], [&] {
    Attrs a;
    a.axes.resize(n.attrs.axes.size());
    for (std::uint32_t i = 0; i < n.attrs.axes.size(); ++i) a.axes[n.attrs.axes[i]] = i;
    return add(d, P::kTranspose, {dy}, a);
  });
}

void slice_backward(Differentiator& d, const Node& n) {
  const TensorId dy = *d.grad(n.outputs[0]), x = n.inputs[0];
  to(d, x, [&] {
    const Dims& s = dims(d, x);
    Attrs a;
    a.pad_begin.assign(s.size(), 0);
    a.pad_end.assign(s.size(), 0);
    for (std::size_t i = 0; i < n.attrs.axes.size(); ++i) {
      const std::uint32_t axis = n.attrs.axes[i];
      a.pad_begin[axis] = n.attrs.starts[i];
      a.pad_end[axis] = s[axis] - std::min(n.attrs.ends[i], s[axis]);
    }
    return add(d, P::kPad, {dy}, a);
  });
}

// The gradient's slab [from, from + size) along `axis`.
TensorId slab(Differentiator& d, TensorId dy, std::uint32_t axis, std::uint64_t from,
              std::uint64_t size) {
  Attrs a;
  a.axes = {axis};
  a.starts = {from};
  a.ends = {from + size};
  return add(d, P::kSlice, {dy}, a);
}

void concat_backward(Differentiator& d, const Node& n) {
  const TensorId dy = *d.grad(n.outputs[0]);
  std::uint64_t from = 0;
  for (TensorId x : n.inputs) {
    const std::uint64_t size = dims(d, x)[n.attrs.axis];
    to(d, x, [&] { return slab(d, dy, n.attrs.axis, from, size); });
    from += size;
  }
}

void split_backward(Differentiator& d, const Node& n) {
  to(d, n.inputs[0], [&] {
    std::vector<TensorId> parts;
    for (TensorId y : n.outputs) parts.push_back(d.grad_or_zeros(y));
    Attrs a;
    a.axis = n.attrs.axis;
    return add(d, P::kConcat, parts, a);
  });
}

void pad_backward(Differentiator& d, const Node& n) {
  const TensorId dy = *d.grad(n.outputs[0]), x = n.inputs[0];
  to(d, x, [&] {
    const Dims& s = dims(d, x);
    Attrs a;
    for (std::uint32_t i = 0; i < s.size(); ++i) {
      a.axes.push_back(i);
      a.starts.push_back(n.attrs.pad_begin[i]);
      a.ends.push_back(n.attrs.pad_begin[i] + s[i]);
    }
    return add(d, P::kSlice, {dy}, a);
  });
}

// The broadcast is summed back by accumulate.
void expand_backward(Differentiator& d, const Node& n) {
  const TensorId dy = *d.grad(n.outputs[0]);
  to(d, n.inputs[0], [&] { return dy; });
}

// A gradient op of (dy [, x, y]) with the input's shape.
template <Primitive Grad>
void shaped_grad_backward(Differentiator& d, const Node& n) {
  const TensorId dy = *d.grad(n.outputs[0]), x = n.inputs[0];
  to(d, x, [&] {
    Attrs a = n.attrs;
    a.dims = dims(d, x);
    std::vector<TensorId> in{dy};
    if (Grad == P::kMaxPoolGrad) in = {dy, x, n.outputs[0]};
    return add(d, Grad, in, a);
  });
}

void cross_entropy_backward(Differentiator& d, const Node& n) {
  to(d, n.inputs[0], [&] {
    return add(d, P::kSoftmaxCrossEntropyGrad, {n.inputs[0], n.inputs[1]}, n.attrs);
  });
}

// ---- the table ----

using S = Saves;
constexpr std::uint8_t kMany = 255;

const std::vector<PrimitiveInfo> kTable = {
    {P::kConv, "conv", 2, 3, "x, w [, bias]", S::kInputs, conv, conv_backward, conv_flops},
    {P::kConvDataGrad, "conv_data_grad", 2, 2, "dy, w", S::kNothing, of_attrs, nullptr,
     conv_data_grad_flops},
    {P::kConvWeightGrad, "conv_weight_grad", 2, 2, "dy, x", S::kNothing, of_attrs, nullptr,
     conv_weight_grad_flops},
    {P::kMatmul, "matmul", 2, 2, "a, b", S::kInputs, matmul, matmul_backward, matmul_flops},
    {P::kRelu, "relu", 1, 1, "x", S::kOutput, same, unary_backward, per_output<1>},
    {P::kClip, "clip", 1, 1, "x", S::kInputs, same, unary_backward, per_output<1>},
    {P::kGelu, "gelu", 1, 1, "x", S::kInputs, same, unary_backward, per_output<1>},
    {P::kSilu, "silu", 1, 1, "x", S::kInputs, same, unary_backward, per_output<1>},
    {P::kSigmoid, "sigmoid", 1, 1, "x", S::kOutput, same, unary_backward, per_output<1>},
    {P::kTanh, "tanh", 1, 1, "x", S::kOutput, same, unary_backward, per_output<1>},
    {P::kExp, "exp", 1, 1, "x", S::kOutput, same, unary_backward, per_output<1>},
    {P::kErf, "erf", 1, 1, "x", S::kInputs, same, unary_backward, per_output<1>},
    {P::kSqrt, "sqrt", 1, 1, "x", S::kOutput, same, unary_backward, per_output<1>},
    {P::kRsqrt, "rsqrt", 1, 1, "x", S::kOutput, same, unary_backward, per_output<1>},
    {P::kNeg, "neg", 1, 1, "x", S::kNothing, same, same_op_backward, per_output<1>},
    {P::kCast, "cast", 1, 1, "x", S::kNothing, same, same_op_backward, no_flops},
    {P::kDropout, "dropout", 1, 1, "x", S::kNothing, same, same_op_backward, per_output<1>},
    {P::kUnaryGrad, "unary_grad", 2, 2, "dy, saved", S::kNothing, equal_pair, nullptr,
     per_output<2>},
    {P::kAdd, "add", 2, 2, "a, b", S::kNothing, binary, add_backward_rule, per_output<1>},
    {P::kSub, "sub", 2, 2, "a, b", S::kNothing, binary, add_backward_rule, per_output<1>},
    {P::kMul, "mul", 2, 2, "a, b", S::kInputs, binary, mul_backward, per_output<1>},
    {P::kDiv, "div", 2, 2, "a, b", S::kInputsAndOutput, binary, div_backward, per_output<1>},
    {P::kPow, "pow", 2, 2, "a, b", S::kInputsAndOutput, binary, pow_backward, per_output<1>},
    {P::kWhere, "where", 3, 3, "condition, a, b", S::kInputs, binary, where_backward,
     per_output<1>},
    {P::kReduceSum, "reduce_sum", 1, 1, "x", S::kNothing, reduce, reduce_backward, per_input<1>},
    {P::kReduceMean, "reduce_mean", 1, 1, "x", S::kNothing, reduce, reduce_backward, per_input<1>},
    {P::kReduceMax, "reduce_max", 1, 1, "x", S::kInputs, reduce, reduce_backward, per_input<1>},
    {P::kArgMax, "arg_max", 1, 1, "x", S::kNothing, last_axis_dropped, nullptr, per_input<1>},
    {P::kSoftmax, "softmax", 1, 1, "x", S::kOutput, softmax, softmax_backward, per_output<3>},
    {P::kSoftmaxGrad, "softmax_grad", 2, 2, "dy, y", S::kNothing, equal_pair, nullptr,
     per_output<3>},
    {P::kLayerNorm, "layer_norm", 3, 3, "x, gamma, beta", S::kInputs, last_axis_norm, norm_backward,
     per_output<7>},
    {P::kRmsNorm, "rms_norm", 2, 2, "x, gamma", S::kInputs, last_axis_norm, norm_backward,
     per_output<4>},
    {P::kGroupNorm, "group_norm", 3, 3, "x, gamma, beta", S::kInputs, group_norm, norm_backward,
     per_output<7>},
    {P::kBatchNorm, "batch_norm", 3, 3, "x, gamma, beta", S::kInputs, channel_norm, norm_backward,
     per_output<7>},
    {P::kNormGrad, "norm_grad", 3, 4, "dy, x, gamma [, beta]", S::kNothing, norm_grad, nullptr,
     norm_grad_flops},
    {P::kGather, "gather", 2, 2, "table, indices", S::kInputs, gather, gather_backward, no_flops},
    {P::kGatherGrad, "gather_grad", 2, 2, "dy, indices", S::kNothing, of_attrs, nullptr,
     per_input<1>},
    {P::kReshape, "reshape", 1, 1, "x", S::kNothing, reshape, reshape_backward, no_flops},
    {P::kTranspose, "transpose", 1, 1, "x", S::kNothing, transpose, transpose_backward, no_flops},
    {P::kSlice, "slice", 1, 1, "x", S::kNothing, slice, slice_backward, no_flops},
    {P::kConcat, "concat", 1, kMany, "x...", S::kNothing, concat, concat_backward, no_flops},
    {P::kSplit, "split", 1, 1, "x", S::kNothing, split, split_backward, no_flops},
    {P::kPad, "pad", 1, 1, "x", S::kNothing, pad, pad_backward, no_flops},
    {P::kExpand, "expand", 1, 1, "x", S::kNothing, expand, expand_backward, no_flops},
    {P::kResize, "resize", 1, 1, "x", S::kNothing, resize, shaped_grad_backward<P::kResizeGrad>,
     no_flops},
    {P::kResizeGrad, "resize_grad", 1, 1, "dy", S::kNothing, of_attrs, nullptr, per_input<1>},
    {P::kMaxPool, "max_pool", 1, 1, "x", S::kInputsAndOutput, pool,
     shaped_grad_backward<P::kMaxPoolGrad>, pool_flops},
    {P::kMaxPoolGrad, "max_pool_grad", 3, 3, "dy, x, y", S::kNothing, of_attrs, nullptr,
     pool_grad_flops},
    {P::kAvgPool, "avg_pool", 1, 1, "x", S::kNothing, pool, shaped_grad_backward<P::kAvgPoolGrad>,
     pool_flops},
    {P::kAvgPoolGrad, "avg_pool_grad", 1, 1, "dy", S::kNothing, of_attrs, nullptr, pool_grad_flops},
    {P::kSoftmaxCrossEntropy, "softmax_cross_entropy", 2, 2, "logits, labels", S::kInputs,
     cross_entropy, cross_entropy_backward, per_input<4>},
    {P::kSoftmaxCrossEntropyGrad, "softmax_cross_entropy_grad", 2, 2, "logits, labels", S::kNothing,
     cross_entropy_grad, nullptr, per_input<2>},
    {P::kAllReduce, "all_reduce", 1, 1, "x", S::kNothing, same, identity_backward, no_flops},
    {P::kShardInput, "shard_input", 1, 1, "x", S::kNothing, same, shard_input_backward, no_flops},
};

bool table_in_order() {
  if (kTable.size() != kPrimitiveCount) return false;
  for (std::size_t i = 0; i < kTable.size(); ++i)
    if (kTable[i].op != static_cast<Primitive>(i) || kTable[i].name.empty() || !kTable[i].shape ||
        !kTable[i].flops)
      return false;
  return true;
}

}  // namespace

const std::vector<PrimitiveInfo>& primitives() {
  static const bool checked = [] {
    if (!table_in_order())
      throw Error("graph::kTable needs one row per graph::Primitive, in enum order");
    return true;
  }();
  (void)checked;
  return kTable;
}

const PrimitiveInfo& info(Primitive op) { return primitives().at(static_cast<std::size_t>(op)); }

}  // namespace ipusim::compiler::graph
