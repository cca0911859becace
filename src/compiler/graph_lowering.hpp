// SPDX-License-Identifier: Apache-2.0
// Lowering of tensor-graph nodes onto one IPU's program (docs/architecture.md, "Lowering a
// graph"): each node's rule emits IpuBuilder operations, layer by layer. A tensor computed on
// the IPU has a value: the layout it lives on with the elementwise ops still pending on it
// (lowering.hpp Value), applied as one fused compute set when a node that is not elementwise
// reads it. Views (reshape, transpose) share their operand's value; an elementwise node's
// output takes over its operand's pending ops, and the operand counts as computed once its
// output is (the fused vertex writes both). No SystemC.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ipu_builder.hpp"
#include "ipusim/compiler/graph/primitive.hpp"
#include "ipusim/compiler/graph/tensor_graph.hpp"
#include "lowering.hpp"
#include "norm_lowering.hpp"

namespace ipusim::compiler {

class GraphLowering {
 public:
  // `gradients`: each tensor's gradient (graph::add_backward), empty for a forward-only graph.
  GraphLowering(const graph::TensorGraph& g, const graph::Gradients& gradients, IpuBuilder& b);

  // Lowers the forward nodes of `layer` (graph order) reading the layer's input from `v`;
  // `v` becomes the value of its output. The layer reads one tensor computed before it, or
  // none (the model's first layer: `v` is not read).
  void forward(Steps& out, const std::string& layer, Value& v);
  // Lowers the forward nodes of `layer`, each reading the values its inputs have (computed
  // by earlier layers, or bound).
  void forward(Steps& out, const std::string& layer);
  // Lowers the backward nodes of `layer`, each reading the values its inputs have (the
  // gradients later layers computed, the forward's values).
  void backward(Steps& out, const std::string& layer);
  // Lowers the backward nodes of `layer` from `g`, the gradient of the layer's output (after
  // its forward or recomputation was lowered); `g` becomes the gradient of its input (none
  // for the first layer).
  void backward(Steps& out, const std::string& layer, Value& g);

  // Whether the graph has forward nodes of `layer`.
  bool has_layer(const std::string& name) const {
    const auto it = layers_.find(name);
    return it != layers_.end() && !it->second.forward.empty();
  }
  // A layer's input (the tensor computed before it that it reads; none for the model's first
  // layer) and its output.
  std::optional<graph::TensorId> input_of(const std::string& name) const {
    return layer(name).input;
  }
  graph::TensorId output_of(const std::string& name) const { return layer(name).output; }
  // `t` on the linear mapping as rows of its last dimension (where an inter-IPU copy lands it).
  Layout rows_layout(graph::TensorId t) const;

  // A CNN's batch norm, group norm and ReLU as the run lowers them (norm_lowering.hpp); without
  // them ReLU is fused and the norms have no rule. Batch norm folds its statistics when the
  // graph has no backward (inference).
  void use_norms(NormLowering* norms) { norms_ = norms; }
  // The forward nodes lowered from now on recompute (their norms reuse the cached statistics
  // when the run caches them).
  void set_recomputing(bool recomputing) { recomputing_ = recomputing; }
  // Where `t`'s value lies (its pending ops not applied).
  const Layout& layout_of(graph::TensorId t) const { return slots_[slot(t)].v.layout; }
  // Gives `t` a value (a host input where it lands, a tensor an inter-IPU copy delivers).
  void set_value(graph::TensorId t, Value v) { bind(t, std::move(v)); }
  // `t`'s value with its pending ops applied.
  const Value& value(Steps& out, graph::TensorId t) { return ready(out, t); }
  // Applies every forward value's pending ops not yet applied (the end of a stage's forward
  // or recomputation), in the order the values were made.
  void flush_all(Steps& out);
  // The parts of `t`'s gradient that nodes of the layers `of` selects compute, summed
  // elsewhere (none: the whole gradient when they compute it): what an inter-IPU copy of a
  // pipeline carries between stages.
  std::vector<graph::TensorId> gradient_parts(
      graph::TensorId t, const std::function<bool(const std::string&)>& of) const;

 private:
  struct Layer {
    std::vector<graph::NodeId> forward, backward;
    std::optional<graph::TensorId> input;  // the tensor computed before it that it reads
    graph::TensorId output{};
  };
  struct Slot {
    Value v;
    bool gradient = false;  // a gradient's value (else a forward tensor's)
    // Computed when that slot's pending ops are applied (they include this one's).
    std::optional<std::uint32_t> fused_into;
  };
  static constexpr std::uint32_t kNoSlot = ~std::uint32_t{0};

  const Layer& layer(const std::string& name) const;
  void lower(Steps& out, const graph::Node& n);
  // Binds each of the layer's host inputs that a conv or matmul reads (through elementwise
  // ops) to the layout that op creates for it (createInput), where the host stream lands.
  void bind_inputs(const Layer& l);
  void all_reduce(Steps& out, const graph::Node& n);
  // The IPUs a tensor-parallel sum spans (graph::Attrs group_size, group_stride).
  static trace::Group ipus_of(const graph::Attrs& a);
  void row_norm(Steps& out, const graph::Node& n);  // a layer or RMS norm
  // What shares a norm's `stats` statistics a row over the IPUs its rows are split over (one
  // all-reduce of them over n's group); empty for whole rows.
  ShareStatistics shared_statistics(const graph::Node& n, std::uint64_t stats);
  void matmul(Steps& out, const graph::Node& n);
  void conv(Steps& out, const graph::Node& n);
  void gather(const graph::Node& n);
  void binary(Steps& out, const graph::Node& n, trace::Op op);
  void norm_gradient(Steps& out, const graph::Node& n);
  void softmax(Steps& out, const graph::Node& n);
  void softmax_gradient(Steps& out, const graph::Node& n);
  void cross_entropy(Steps& out, const graph::Node& n);
  void cross_entropy_gradient(Steps& out, const graph::Node& n);
  void split(Steps& out, const graph::Node& n);
  void slice(Steps& out, const graph::Node& n);
  void pad(Steps& out, const graph::Node& n);
  void concat(Steps& out, const graph::Node& n);
  void concat_rows(Steps& out, const graph::Node& n);
  void reduce_sum(Steps& out, const graph::Node& n);
  void arg_max(Steps& out, const graph::Node& n);
  void cast(Steps& out, const graph::Node& n);
  void where(Steps& out, const graph::Node& n);
  // A reduction over each row (the last axis): reduce_rows reduces there, its result on the
  // rows' tiles (a reduce-mean or a gradient's reduce-sum of an RMS norm's scale).
  bool over_last_axis(const graph::Node& n) const;
  void reduce_rows(Steps& out, const graph::Node& n);
  // Moves a tensor's value to `to` (IpuBuilder::rearrange), viewing it as `to`'s shape first
  // when it has the same elements under another view.
  void bring(Steps& out, const Layout& from, const Layout& to);
  void expand(Steps& out, const graph::Node& n);
  // A CNN's: a conv, the norms, ReLU, a residual add or per-channel scale, pooling, channel
  // concat and upsampling.
  void conv_forward(Steps& out, const graph::Node& n);
  void norm(Steps& out, const graph::Node& n);
  void relu(Steps& out, const graph::Node& n);
  void max_pool(Steps& out, const graph::Node& n);
  void reduce_mean(Steps& out, const graph::Node& n);
  void resize(Steps& out, const graph::Node& n);
  void concat_channels(Steps& out, const graph::Node& n);
  // Their backward rules.
  void conv_data_gradient(Steps& out, const graph::Node& n);
  void cnn_norm_gradient(Steps& out, const graph::Node& n);
  void cnn_unary_gradient(Steps& out, const graph::Node& n);
  void pool_gradient(Steps& out, const graph::Node& n);
  void resize_gradient(Steps& out, const graph::Node& n);
  void slice_channels(Steps& out, const graph::Node& n);
  void reduce_positions(Steps& out, const graph::Node& n);

  bool has_value(graph::TensorId t) const {
    return graph::index(t) < slot_of_.size() && slot_of_[graph::index(t)] != kNoSlot;
  }
  std::uint32_t slot(graph::TensorId t) const;
  void bind(graph::TensorId t, Value v);
  // `t`'s value with its pending ops applied (and, if an elementwise node took them over, that
  // node's output computed).
  const Value& ready(Steps& out, graph::TensorId t);
  const Value& ready_slot(Steps& out, std::uint32_t s);
  // `t` with `ops` pending on it as the value of `y` (the elementwise node t -> y).
  void fuse(Steps& out, graph::TensorId t, graph::TensorId y, std::span<const trace::Op> ops);
  // The gradient of `t` (the graph must have one).
  graph::TensorId gradient(graph::TensorId t) const;
  std::optional<graph::NodeId> producer(graph::TensorId t) const { return g_.tensor(t).producer; }
  bool is_weight(graph::TensorId t) const { return g_.tensor(t).role == graph::Role::kWeight; }

  const graph::TensorGraph& g_;
  const graph::Gradients& gradients_;
  IpuBuilder& b_;
  NormLowering* norms_ = nullptr;
  bool recomputing_ = false;
  std::map<std::string, Layer> layers_;
  std::vector<bool> weight_gradient_;                // by tensor: some weight's gradient
  std::vector<std::vector<graph::NodeId>> readers_;  // by tensor: the forward nodes reading it
  std::vector<bool> updates_table_;  // by tensor: read by a gather's gradient (a table update)
  std::vector<std::uint32_t> slot_of_;
  std::vector<Slot> slots_;
};

}  // namespace ipusim::compiler
