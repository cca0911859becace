// SPDX-License-Identifier: Apache-2.0
#include "shapes.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "ipusim/util/error.hpp"
#include "ipusim/util/units.hpp"

namespace ipusim::compiler::graph {
namespace {

// Where a layer's errors point: its entry in the model file (file:line:column).
std::string where(const ModelDef& m, const Layer& l) { return l.at.empty() ? m.file : l.at; }

// A (grouped) conv: each of in / group_size groups maps its group_size input channels to
// out / groups output channels (a dwconv without `out` keeps the channel count).
void conv_shape(const ModelDef& m, LayerNode& c) {
  const Layer& l = *c.layer;
  const Shape& s = c.in;
  const std::uint64_t filters = l.out > 0 ? l.out : s.c;
  const std::uint64_t gs = l.group_size > 0 ? l.group_size : s.c;
  if (s.c % gs != 0 || filters % (s.c / gs) != 0)
    throw ConfigError(fmt::format(
        "{}: layer '{}': group_size {} must divide the {} input channels (from '{}') and the "
        "groups ({}) the {} output channels",
        where(m, l), l.name, gs, s.c, c.input, s.c / std::max<std::uint64_t>(1, gs), filters));
  c.groups = s.c / gs;
  c.out = {ceil_div(s.h, l.stride), ceil_div(s.w, l.stride), filters};
  c.params = l.kernel * l.kernel * gs * filters;
}

void fc_shape(const ModelDef& m, LayerNode& c) {
  const Layer& l = *c.layer;
  const Shape& s = c.in;
  if (s.h != 1 || s.w != 1)
    throw ConfigError(
        fmt::format("{}: layer '{}': fc reads a 1x1 input (pool it first, e.g. with avgpool), "
                    "found {}x{}x{} from '{}'",
                    where(m, l), l.name, s.h, s.w, s.c, c.input));
  c.out = {1, 1, l.out};
  c.params = s.c * l.out + l.out;
}

void check_scale(const ModelDef& m, const LayerNode& c, const Shape& o) {
  const Layer& l = *c.layer;
  const Shape& s = c.in;
  if (o.h != 1 || o.w != 1 || o.c != s.c)
    throw ConfigError(
        fmt::format("{}: layer '{}': scale multiplies each of the {} channels of '{}' by a "
                    "factor: '{}' must be 1x1x{}, found {}x{}x{}",
                    where(m, l), l.name, s.c, c.input, l.other, s.c, o.h, o.w, o.c));
}

void check_concat(const ModelDef& m, const LayerNode& c, const Shape& o) {
  const Layer& l = *c.layer;
  const Shape& s = c.in;
  if (o.h != s.h || o.w != s.w)
    throw ConfigError(
        fmt::format("{}: layer '{}': concat of '{}' ({}x{}x{}) and '{}' ({}x{}x{}): feature maps "
                    "join along channels, so their height and width must be equal",
                    where(m, l), l.name, c.input, s.h, s.w, s.c, l.other, o.h, o.w, o.c));
}

void check_add(const ModelDef& m, const LayerNode& c, const Shape& o) {
  const Layer& l = *c.layer;
  const Shape& s = c.in;
  if (o.h != s.h || o.w != s.w || o.c != s.c)
    throw ConfigError(
        fmt::format("{}: layer '{}': add of '{}' ({}x{}x{}) and '{}' ({}x{}x{}): the shapes "
                    "must be equal (height x width x channels)",
                    where(m, l), l.name, c.input, s.h, s.w, s.c, l.other, o.h, o.w, o.c));
}

// The op's shape rule: sets c.out (and params, groups) from c.in and `other`'s shape.
void shape_rule(const ModelDef& m, LayerNode& c, const Shape* other) {
  const Layer& l = *c.layer;
  c.out = c.in;
  switch (l.op) {
    case Op::kConv:
    case Op::kDwconv:
      conv_shape(m, c);
      return;
    case Op::kMaxPool:
      c.out = {ceil_div(c.in.h, l.stride), ceil_div(c.in.w, l.stride), c.in.c};
      return;
    case Op::kAvgPool:
      c.out = {1, 1, c.in.c};
      return;
    case Op::kFc:
      fc_shape(m, c);
      return;
    case Op::kBatchNorm:
      c.params = 2 * c.in.c;  // gamma and beta
      return;
    case Op::kGroupNorm:
      if (m.norm_groups == 0 || c.in.c % m.norm_groups != 0)
        throw ConfigError(fmt::format(
            "{}: layer '{}': groupnorm: model.norm_groups ({}) must divide its {} channels "
            "(from '{}')",
            where(m, l), l.name, m.norm_groups, c.in.c, c.input));
      c.params = 2 * c.in.c;  // gamma and beta, per channel
      return;
    case Op::kScale:
      check_scale(m, c, *other);
      return;
    case Op::kAdd:
      check_add(m, c, *other);
      return;
    case Op::kConcat:
      check_concat(m, c, *other);
      c.out.c += other->c;
      return;
    case Op::kUpsample:
      c.out = {c.in.h * l.factor, c.in.w * l.factor, c.in.c};
      return;
    case Op::kRelu:
    case Op::kSwish:
    case Op::kSigmoid:
    case Op::kSoftmaxLoss:
      return;
    case Op::kEmbedding:  // a transformer's sub-layers: no CNN layer is one
    case Op::kAttention:
    case Op::kFfn:
    case Op::kFinalNorm:
    case Op::kHeads:
    case Op::kView:
    case Op::kElementwise:
    case Op::kNode:
    case Op::kCount:
      break;
  }
  throw Error(fmt::format("layer '{}': no shape rule for op {}", l.name, static_cast<int>(l.op)));
}

}  // namespace

std::vector<LayerNode> infer_shapes(const ModelDef& m) {
  std::map<std::string, Shape> shapes;
  std::vector<LayerNode> out;
  out.reserve(m.layers.size());
  const Shape input{m.height, m.width, m.channels};
  std::string previous;
  for (const Layer& l : m.layers) {
    LayerNode c;
    c.layer = &l;
    c.input = l.input.empty() ? previous : l.input;
    c.in = c.input.empty() ? input : shapes.at(c.input);
    shape_rule(m, c, l.other.empty() ? nullptr : &shapes.at(l.other));
    shapes[l.name] = c.out;
    previous = l.name;
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace ipusim::compiler::graph
