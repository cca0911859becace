// SPDX-License-Identifier: Apache-2.0
// The tensor graph (docs/architecture.md, "The tensor graph"): a model as the primitive ops
// frameworks and Poplar use (conv, matmul, elementwise, reductions, softmax, norms, gather,
// data movement, pooling, losses) over tensors of any rank. Nodes and tensors are held by
// index; each node's output shapes come from its op's shape rule (graph/primitive.hpp) when it
// is added, so a graph that exists is shaped. The model-file front ends and the ONNX front end
// (onnx_graph.cpp) build one (build_graph); autodiff adds the backward pass to it; parameters
// and FLOPs are sums over it.
// No SystemC, no chip.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ipusim/trace/codelet.hpp"

namespace ipusim::compiler::graph {

// A tensor's shape, outermost dimension first (a batch of images is [N, C, H, W], as ONNX and
// PyTorch lay them out). Rank 0 is a scalar.
using Dims = std::vector<std::uint64_t>;
std::uint64_t elements(const Dims& dims);
// "[4, 3, 224, 224]", for errors.
std::string to_string(const Dims& dims);

enum class TensorId : std::uint32_t {};
enum class NodeId : std::uint32_t {};
constexpr std::uint32_t index(TensorId t) { return static_cast<std::uint32_t>(t); }
constexpr std::uint32_t index(NodeId n) { return static_cast<std::uint32_t>(n); }

// What a tensor is to training.
enum class Role : std::uint8_t {
  kInput,           // fed by the host each step (images, token ids, labels, masks)
  kConstant,        // known at compile time (a scale, a zero)
  kWeight,          // trained: a parameter
  kActivation,      // computed by a forward node
  kGradient,        // computed by the backward pass (autodiff)
  kOptimiserState,  // kept by the optimiser per weight (momentum, Adam's moments)
};
std::string_view role_name(Role role);

struct Tensor {
  std::string name;
  Dims dims;
  trace::DType dtype = trace::DType::kHalf;
  Role role = Role::kActivation;
  std::optional<NodeId> producer;  // none for inputs, constants, weights and optimiser state
  // A weight as the IPU stores it, when that differs from `dims` (the framework's shape): a
  // vocabulary table or bias padded to the model's multiple. Memory and the optimiser take
  // it; the parameter count takes `dims`.
  Dims stored;
  // A weight kept and updated as this many equal tensors that its reader takes as one (Q, K
  // and V concatenated for one matmul).
  std::uint32_t parts = 1;
  const Dims& stored_dims() const { return stored.empty() ? dims : stored; }
};

// The primitive ops, one row each in graph::kPrimitives (primitive.hpp). Rows from kConvDataGrad
// on below a forward op are the backward ops its backward rule emits.
enum class Primitive : std::uint8_t {
  kConv,            // (x [N, C, ...], w [F, C / groups, ...] [, bias [F]]) grouped, strided, padded
  kConvDataGrad,    // (dy, w) -> dx of attrs.dims: the transposed conv
  kConvWeightGrad,  // (dy, x) -> dw of attrs.dims
  kMatmul,          // (a [..., M, K], b [..., K, N]) batched and broadcast; transpose_a/_b
  kRelu,
  kClip,
  kGelu,
  kSilu,
  kSigmoid,
  kTanh,
  kExp,
  kErf,
  kSqrt,
  kRsqrt,
  kNeg,
  kCast,       // to attrs.dtype
  kDropout,    // attrs.ratio; in the backward, the same mask applied to the gradient
  kUnaryGrad,  // (dy, saved) -> dx of the elementwise op attrs.of (saved: its input or output)
  kAdd,        // binary ops broadcast as numpy does
  kSub,
  kMul,
  kDiv,
  kPow,
  kWhere,      // (condition, a, b)
  kReduceSum,  // over attrs.axes, keeping them as 1 when attrs.keep_dims
  kReduceMean,
  kReduceMax,
  kArgMax,       // the index of each row's largest value (last axis): 32-bit integers
  kSoftmax,      // over attrs.axis
  kSoftmaxGrad,  // (dy, y)
  kLayerNorm,    // (x, gamma, beta) over the last axis
  kRmsNorm,      // (x, gamma) over the last axis
  kGroupNorm,    // (x [N, C, ...], gamma [C], beta [C]) in attrs.groups groups of channels
  kBatchNorm,    // (x [N, C, ...], gamma [C], beta [C]) over the batch and positions
  kNormGrad,     // (dy, x, gamma [, beta]) -> dx, dgamma [, dbeta] of the norm attrs.of
  kGather,       // (table [V, ...], indices [...]) -> indices' dims + table's row dims
  kGatherGrad,   // (dy, indices) -> the table's gradient (attrs.dims): a scatter-add
  kReshape,      // to attrs.dims (same elements)
  kTranspose,    // permutes dimensions: output dim i is input dim attrs.axes[i]
  kSlice,        // attrs.starts[i] <= index < attrs.ends[i] along attrs.axes[i]
  kConcat,       // along attrs.axis
  kSplit,        // along attrs.axis into attrs.dims sizes: one output each
  kPad,          // attrs.pad_begin / pad_end per dimension, with zeros
  kExpand,       // broadcast to attrs.dims
  kResize,       // nearest-neighbour upsampling by the integer factors attrs.dims per dim
  kResizeGrad,   // (dy) -> dx of attrs.dims: each output's block summed
  kMaxPool,      // (x [N, C, ...]) windows attrs.kernel, stride, pads
  kMaxPoolGrad,  // (dy, x, y) -> dx
  kAvgPool,
  kAvgPoolGrad,              // (dy) -> dx of attrs.dims
  kSoftmaxCrossEntropy,      // (logits [..., K], labels [...]) -> the mean loss, a scalar
  kSoftmaxCrossEntropyGrad,  // (logits, labels) -> dlogits
  // Tensor model parallelism (run.tensor_parallel): the elementwise sum over the IPUs a layer
  // is split over, after a row-split matmul; its gradient is the same on every IPU (identity).
  kAllReduce,
  // A value every IPU of the group holds whole, entering split work: identity; its gradient,
  // a partial sum on each IPU, is all-reduced over the group.
  kShardInput,
  kCount,  // not an op: the number of primitives
};
inline constexpr std::size_t kPrimitiveCount = static_cast<std::size_t>(Primitive::kCount);

// An op's parameters; each op reads the fields its row names and leaves the rest default.
struct Attrs {
  Dims kernel, stride, pad_begin, pad_end;        // conv, pooling (per spatial dim); pad (per dim)
  std::uint64_t groups = 1;                       // conv groups; group norm's groups
  bool transpose_a = false, transpose_b = false;  // matmul: an operand's last two dims swapped
  std::vector<std::uint32_t> axes;  // reductions; transpose's permutation; slice's axes
  std::uint32_t axis = 0;           // softmax, concat, split
  Dims dims;                        // reshape, expand, split sizes, resize factors, a grad's dims
  Dims starts, ends;                // slice
  bool keep_dims = true;            // reductions
  trace::DType dtype = trace::DType::kHalf;  // cast
  double ratio = 0;                          // dropout
  // softmax cross entropy: its classes split over this many IPUs (tensor parallelism), each
  // row's statistics all-reduced over them; layer norm (2-D tensor parallelism): its channels
  // split so, each row's statistics all-reduced over them (popxl-addons' layer_norm_distributed)
  std::uint32_t shards = 1;
  // all_reduce, shard_input's gradient and split statistics (`shards`): the IPUs of the
  // replica the sum spans, every one (group_size 0) or group_size of them group_stride apart
  // (2-D tensor parallelism's two groups; trace::Group kReplica).
  std::uint32_t group_size = 0, group_stride = 0;
  Primitive of = Primitive::kCount;  // a gradient op's forward op
  // A matmul of the backward pass: the forward matmul's operand it is the gradient of (0: a,
  // the data gradient; 1: b, the weight gradient).
  std::uint8_t operand = 0;
  // matmul: its output columns computed in `serial` steps, each of the columns padded to
  // `padded_columns` (when more) divided by `serial` (a vocabulary matmul serialised to bound
  // its temporaries: PopART's serializeMatMul over the output channels). Shapes keep the
  // unpadded columns.
  std::uint32_t serial = 1;
  std::uint64_t padded_columns = 0;
};

struct Node {
  Primitive op = Primitive::kCount;
  std::vector<TensorId> inputs, outputs;
  Attrs attrs;
  std::string layer;      // the model layer it comes from ("conv1", "encoder3/attention")
  bool backward = false;  // added by autodiff
  // A backward node: the forward node whose backward rule added it (lowering reads its shapes
  // and layouts).
  std::optional<NodeId> forward;
};

class TensorGraph {
 public:
  // A tensor no node produces.
  TensorId input(std::string name, Dims dims, trace::DType dtype, Role role = Role::kInput);
  TensorId weight(std::string name, Dims dims, trace::DType dtype) {
    return input(std::move(name), std::move(dims), dtype, Role::kWeight);
  }
  // Adds a node of `op` reading `inputs`, in the current layer; its outputs are new tensors
  // (activations, or gradients in the backward) of the dtype of its first input (a cast's:
  // attrs.dtype) and the shapes its shape rule gives. An operand count or shape the op cannot
  // take is a ConfigError naming the layer (and where it was given), the op and the shapes.
  std::vector<TensorId> add_node(Primitive op, std::vector<TensorId> inputs, Attrs attrs = {});
  // add_node for an op with one output.
  TensorId add(Primitive op, std::vector<TensorId> inputs, Attrs attrs = {});

  // The layer the next nodes belong to, and where the model gives it ("file:line:column"),
  // for provenance and errors.
  void set_layer(std::string layer, std::string at = "");
  // Nodes added from now on are the backward pass's (their outputs are gradients).
  void set_backward(bool backward) { backward_ = backward; }
  // Backward nodes added from now on come from forward node `n`'s backward rule.
  void set_forward(std::optional<NodeId> n) { forward_ = n; }

  const Tensor& tensor(TensorId t) const { return tensors_.at(index(t)); }
  Tensor& tensor(TensorId t) { return tensors_.at(index(t)); }
  const Node& node(NodeId n) const { return nodes_.at(index(n)); }
  const std::vector<Tensor>& tensors() const { return tensors_; }
  const std::vector<Node>& nodes() const { return nodes_; }
  // Each tensor's consuming nodes, in node order.
  std::vector<std::vector<NodeId>> consumers() const;

  // Checks what add_node ensures and what a pass that edits the graph could break: every id
  // in range; nodes in topological order (each reads tensors made before it); each tensor made
  // by at most one node, and that node lists it; every node's operand count and output shapes
  // as its row's rules give. Throws Error naming the first violation.
  void verify() const;

  // Trainable elements: the sum over weight tensors (a weight read twice, a tied embedding
  // and head, counts once).
  std::uint64_t parameters() const;
  // Floating-point operations of the nodes (forward, backward or both), a multiply-add
  // counting two (graph::flops).
  std::uint64_t flops(bool forward = true, bool backward = true) const;

 private:
  [[noreturn]] void fail(Primitive op, const std::vector<TensorId>& inputs,
                         const std::string& why) const;

  std::vector<Tensor> tensors_;
  std::vector<Node> nodes_;
  std::string layer_, at_;
  bool backward_ = false;
  std::optional<NodeId> forward_;
};

}  // namespace ipusim::compiler::graph
