// SPDX-License-Identifier: Apache-2.0
// The ops of a model graph, one table row each, for both model families: a CNN model file's
// `op:` values (docs/models.md) and a transformer's sub-layers (the embedding, each encoder
// layer's attention and FFN, a pre-norm model's final layer norm, the heads), which the
// compiler places on the IPUs of a pipeline (graph/sublayers.hpp). Every pass reads an op's
// facts from its row; the passes that do something per op (shape inference, lowering) switch
// over the enum with no default, so an op added to the enum without its row, or without its
// case in a pass, fails to compile (docs/architecture.md, "Adding an op").
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "ipusim/trace/program.hpp"

namespace ipusim::compiler::graph {

enum class Op : std::uint8_t {
  kConv,
  kDwconv,
  kBatchNorm,
  kGroupNorm,
  kRelu,
  kSwish,
  kSigmoid,
  kMaxPool,
  kAdd,
  kScale,
  kConcat,
  kAvgPool,
  kUpsample,
  kFc,
  kSoftmaxLoss,
  // A transformer's sub-layers (family kTransformer).
  kEmbedding,
  kAttention,
  kFfn,
  kFinalNorm,
  kHeads,
  // A layer of an imported graph (family kGraph) that none of the above names: views
  // (reshape, transpose, slice), which keep nothing; elementwise ops, in place (as PopART's
  // inplace pattern makes them); any other node, which keeps its output.
  kView,
  kElementwise,
  kNode,
  kCount,  // not an op: the number of ops
};
inline constexpr std::size_t kOpCount = static_cast<std::size_t>(Op::kCount);

// Whether a layer entry gives `out` (output channels).
enum class OutChannels : std::uint8_t { kNone, kRequired, kOptional };

// What weights a layer trains (and where the compiler puts them).
enum class Weights : std::uint8_t {
  kNone,
  kConv,        // a conv kernel on the layout its forward conv creates (createWeights)
  kMatmul,      // an fc matrix on its matmul's weight layout, and a bias
  kScaleShift,  // batch or group norm's gamma and beta, on the linear mapping
};

// The model family an op belongs to: a CNN model file lists its ops (layers); a transformer's
// are its sub-layers, which the compiler builds from the model's sizes.
// An imported graph (ONNX) is its own front end: its layers are its nodes.
enum class Family : std::uint8_t { kCnn, kTransformer, kGraph };

struct OpInfo {
  Op op;
  // A CNN op as a model file spells it; a transformer sub-layer's layer name in provenance
  // ("encoder<i>/" + name when numbered).
  std::string_view name;
  // The provenance kind of its steps (trace format v3); a transformer sub-layer's kNone: each
  // step's own.
  trace::OpKind kind;
  // Its second operand, `other`, and what it is ("" when the op takes none; else required).
  std::string_view other;
  OutChannels out;
  bool grouped;  // takes group_size (conv groups)
  // Its forward output is a new tensor kept for the backward pass (the others run in place on
  // their input: batch norm, ReLU, the residual add; the loss keeps its input).
  bool keeps_output;
  Weights weights;
  Family family = Family::kCnn;
  bool numbered = false;  // a transformer sub-layer there is one of per encoder layer
  bool windowed = false;  // takes a kernel (window) and a stride: convs and max pooling
  bool scaled = false;    // takes a factor: upsampling
};

// One row per op, in enum order (checked below). The order is also the order the model-file
// docs and errors list ops in.
inline constexpr std::array<OpInfo, kOpCount> kOps{{
    {Op::kConv, "conv", trace::OpKind::kConv, "", OutChannels::kRequired, true, true,
     Weights::kConv, Family::kCnn, false, true},
    {Op::kDwconv, "dwconv", trace::OpKind::kConv, "", OutChannels::kOptional, true, true,
     Weights::kConv, Family::kCnn, false, true},
    {Op::kBatchNorm, "batchnorm", trace::OpKind::kBatchNorm, "", OutChannels::kNone, false, false,
     Weights::kScaleShift},
    // popnn's group norm (model.norm_groups groups), through the same poplin norm functions as
    // batch norm: its steps carry the batch_norm kind.
    {Op::kGroupNorm, "groupnorm", trace::OpKind::kBatchNorm, "", OutChannels::kNone, false, false,
     Weights::kScaleShift},
    {Op::kRelu, "relu", trace::OpKind::kElementwise, "", OutChannels::kNone, false, false,
     Weights::kNone},
    {Op::kSwish, "swish", trace::OpKind::kElementwise, "", OutChannels::kNone, false, true,
     Weights::kNone},
    {Op::kSigmoid, "sigmoid", trace::OpKind::kElementwise, "", OutChannels::kNone, false, true,
     Weights::kNone},
    {Op::kMaxPool, "maxpool", trace::OpKind::kPool, "", OutChannels::kNone, false, true,
     Weights::kNone, Family::kCnn, false, true},
    {Op::kAdd, "add", trace::OpKind::kElementwise, "the second operand", OutChannels::kNone, false,
     false, Weights::kNone},
    {Op::kScale, "scale", trace::OpKind::kElementwise, "the per-channel factors",
     OutChannels::kNone, false, true, Weights::kNone},
    // Feature maps joined along channels (DenseNet, U-Net): a new tensor, the input's
    // channels first (torch.cat(dim=1)).
    {Op::kConcat, "concat", trace::OpKind::kCopy, "the feature map joined after the input",
     OutChannels::kNone, false, true, Weights::kNone},
    {Op::kAvgPool, "avgpool", trace::OpKind::kPool, "", OutChannels::kNone, false, true,
     Weights::kNone},
    // Nearest-neighbour upsampling by a whole factor (nn.Upsample(scale_factor, "nearest")).
    {Op::kUpsample, "upsample", trace::OpKind::kCopy, "", OutChannels::kNone, false, true,
     Weights::kNone, Family::kCnn, false, false, true},
    {Op::kFc, "fc", trace::OpKind::kMatmul, "", OutChannels::kRequired, false, true,
     Weights::kMatmul},
    {Op::kSoftmaxLoss, "softmax_loss", trace::OpKind::kLoss, "", OutChannels::kNone, false, false,
     Weights::kNone},
    {Op::kEmbedding, "embedding", trace::OpKind::kEmbedding, "", OutChannels::kNone, false, false,
     Weights::kNone, Family::kTransformer, false},
    {Op::kAttention, "attention", trace::OpKind::kNone, "", OutChannels::kNone, false, false,
     Weights::kNone, Family::kTransformer, true},
    {Op::kFfn, "ffn", trace::OpKind::kNone, "", OutChannels::kNone, false, false, Weights::kNone,
     Family::kTransformer, true},
    {Op::kFinalNorm, "final_norm", trace::OpKind::kNone, "", OutChannels::kNone, false, false,
     Weights::kNone, Family::kTransformer, false},
    {Op::kHeads, "heads", trace::OpKind::kNone, "", OutChannels::kNone, false, false,
     Weights::kNone, Family::kTransformer, false},
    {Op::kView, "view", trace::OpKind::kCopy, "", OutChannels::kNone, false, false, Weights::kNone,
     Family::kGraph},
    {Op::kElementwise, "elementwise", trace::OpKind::kElementwise, "", OutChannels::kNone, false,
     false, Weights::kNone, Family::kGraph},
    {Op::kNode, "node", trace::OpKind::kNone, "", OutChannels::kNone, false, true, Weights::kNone,
     Family::kGraph},
}};

// A table has a named row for every op, row i for op i: what the static_assert below holds the
// real table to (a row left out is value-initialised: op 0 with no name).
template <std::size_t N>
constexpr bool rows_complete(const std::array<OpInfo, N>& table) {
  for (std::size_t i = 0; i < N; ++i)
    if (table[i].op != static_cast<Op>(i) || table[i].name.empty()) return false;
  return N == kOpCount;
}
static_assert(rows_complete(kOps), "graph::kOps needs one row per graph::Op, in enum order");

constexpr const OpInfo& info(Op op) { return kOps[static_cast<std::size_t>(op)]; }
constexpr std::string_view name(Op op) { return info(op).name; }
constexpr bool is_conv(Op op) { return info(op).weights == Weights::kConv; }

// The CNN op a model file names, if any (a transformer's sub-layers are not model-file ops).
std::optional<Op> op_named(std::string_view name);
// Every CNN op's name, in table order (for errors and did-you-mean).
const std::vector<std::string>& op_names();

}  // namespace ipusim::compiler::graph
