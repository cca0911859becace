// SPDX-License-Identifier: Apache-2.0
// Lowering of a CNN training step (ResNet-50): one IPU per replica, or a pipeline of stages
// over the IPUs of a replica (run.pipeline_splits), recomputation between checkpoints, gradient
// accumulation, then the gradient all-reduce and LARS (docs/workloads.md).
// Every tensor carries its layout: a conv's output stays where the conv computed it, batch
// norm, ReLU and residual adds run there (fused into one vertex per tile), batch-norm
// statistics are reduced among the tiles holding each channel, and operands whose layout
// differs from what a conv's plan wants are rearranged (with transposes for the data- and
// weight-gradient passes).
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <span>

#include "graph/autodiff.hpp"
#include "graph/lifetimes.hpp"
#include "graph/recompute.hpp"
#include "graph/shapes.hpp"
#include "graph/stages.hpp"
#include "graph_lowering.hpp"
#include "ipu_builder.hpp"
#include "ipusim/compiler/graph/build.hpp"
#include "ipusim/util/error.hpp"
#include "ipusim/util/units.hpp"
#include "lowering.hpp"
#include "norm_lowering.hpp"
#include "optimiser.hpp"
#include "pipeline.hpp"
#include "weights.hpp"

namespace ipusim::compiler {
namespace {

using trace::DType;
using trace::Op;
using trace::StepKind;

using graph::LayerNode;
using graph::Shape;

// The lowering of one IPU's part of a CNN replica: the nodes of its pipeline stage,
// [stage.first, stage.last) of `layers` (all of them without a pipeline). A stage whose
// backward runs in another pipeline cycle than its forward (`stashed`: every stage but the
// last of a pipeline) keeps only its input and recomputes its whole forward before its
// backward (PopART's pipeline recomputation); the last stage keeps what the run's checkpoints
// say, as a one-IPU replica does.
class CnnLowering {
 public:
  CnnLowering(const ModelDef& m, const RunConfig& run, IpuBuilder& b, std::uint32_t all_tiles,
              const graph::TensorGraph& graph, std::vector<LayerNode> layers, graph::Segment stage,
              bool stashed)
      : m_(m),
        run_(run),
        b_(b),
        graph_(graph),
        norms_(b, run),
        lowering_(graph, no_gradients_, b),
        layers_(std::move(layers)),
        first_(stage.first),
        last_(stage.second),
        stashed_(stashed),
        inputs_(graph::crossing(layers_, first_)),
        n_(run.micro_batch),
        all_tiles_(all_tiles) {
    if (!run.inference) flow_ = graph::gradient_flow(m, layers_);
    lowering_.use_norms(&norms_);
    plan_ahead();
  }

  // One micro-batch's forward: input, forward (inference: its output to the host).
  void forward_pass(Steps& out) {
    if (run_.inference) return graph_forward_pass(out);
    // The images arrive as 8-bit values on the layout of their consumer, the first conv
    // (createInput), inline or through I/O tiles (stream_input), and are normalised on the
    // IPU (workloads.md): a cast, then (x - mean) / std fused with what follows.
    if (first_ == 0 && run_.input_bytes_per_sample > 0 && !layers_.empty()) {
      const Layout created = [&] {  // planned for the first conv, whose name errors carry
        const auto scope = b_.scope(layers_.front().layer->name, trace::Pass::kForward,
                                    graph::info(layers_.front().op()).kind);
        return b_.input_layout(forward_args(layers_.front()));
      }();
      Value images{created, {Op::kSub, Op::kMul}};
      {
        const auto scope = b_.scope("", trace::Pass::kHostIo, trace::OpKind::kCopy);
        stream_input(b_, out, run_, images.layout, n_ * run_.input_bytes_per_sample, all_tiles_);
      }
      const auto scope = b_.scope("", trace::Pass::kForward, trace::OpKind::kElementwise);
      body_.images_at = out.size();
      b_.cast(out, images.layout, DType::kChar);
      fwd_[""] = images;
    }
    // A later stage's inputs arrive by the inter-IPU copy (the pipeline's global exchange,
    // before this cycle), each on the layout its first reader here wants.
    for (const std::size_t p : inputs_) fwd_[layers_[p].layer->name] = Value{arrival_layout(p), {}};
    body_.spans.assign(layers_.size(), graph::Spans{});
    for (std::size_t i = first_; i < last_; ++i) {
      body_.spans[i].fwd.first = out.size();
      forward(out, layers_[i], /*recompute=*/false);
      body_.spans[i].fwd.second = out.size();
    }
    {
      const auto scope = b_.scope("", trace::Pass::kForward);
      flush_all(out, fwd_);
    }
    if (run_.inference) {
      // The outputs (the last layer's, e.g. class probabilities) go back to the host.
      if (!layers_.empty() && last_ == layers_.size()) {
        const auto scope = b_.scope("", trace::Pass::kHostIo, trace::OpKind::kCopy);
        const LayerNode& last = layers_.back();
        b_.host(out, n_ * last.out.elements() * trace::dtype_bytes(m_.dtype),
                trace::HostDirection::kFromIpu, trace::HostMemory::kHost, /*overlap=*/false,
                fwd_.at(last.layer->name).layout.range());
      }
    }
  }

  // Inference: one micro-batch's forward lowered from the model's tensor graph
  // (GraphLowering), its output to the host.
  void graph_forward_pass(Steps& out) {
    if (first_ == 0 && run_.input_bytes_per_sample > 0 && !layers_.empty()) {
      // The images land where the first conv wants them (createInput), as 8-bit values: the
      // graph's first nodes cast and normalise them.
      const Layout created = [&] {  // planned for the first conv, whose name errors carry
        const auto scope = b_.scope(layers_.front().layer->name, trace::Pass::kForward,
                                    graph::info(layers_.front().op()).kind);
        return b_.input_layout(forward_args(layers_.front()));
      }();
      {
        const auto scope = b_.scope("", trace::Pass::kHostIo, trace::OpKind::kCopy);
        stream_input(b_, out, run_, created, n_ * run_.input_bytes_per_sample, all_tiles_);
      }
      lowering_.set_value(images(), Value{created, {}});
      const auto scope = b_.scope("", trace::Pass::kForward, trace::OpKind::kElementwise);
      body_.images_at = out.size();
      lowering_.forward(out, "");
    }
    // A later stage's inputs arrive by the inter-IPU copy (the pipeline's global exchange,
    // before this cycle), each on the layout its first reader here wants.
    for (const std::size_t p : inputs_)
      lowering_.set_value(lowering_.output_of(layers_[p].layer->name),
                          Value{arrival_layout(p), {}});
    body_.spans.assign(layers_.size(), graph::Spans{});
    for (std::size_t i = first_; i < last_; ++i) {
      const Layer& l = *layers_[i].layer;
      body_.spans[i].fwd.first = out.size();
      {
        const auto scope = b_.scope(l.name, trace::Pass::kForward, graph::info(l.op).kind);
        lowering_.forward(out, l.name);
      }
      body_.spans[i].fwd.second = out.size();
    }
    {
      const auto scope = b_.scope("", trace::Pass::kForward);
      lowering_.flush_all(out);
    }
    // The outputs (the last layer's, e.g. class probabilities) go back to the host.
    if (!layers_.empty() && last_ == layers_.size()) {
      const auto scope = b_.scope("", trace::Pass::kHostIo, trace::OpKind::kCopy);
      const LayerNode& last = layers_.back();
      const Layout y = lowering_.value(out, lowering_.output_of(last.layer->name)).layout;
      b_.host(out, n_ * last.out.elements() * trace::dtype_bytes(m_.dtype),
              trace::HostDirection::kFromIpu, trace::HostMemory::kHost, /*overlap=*/false,
              y.range());
    }
  }
  // The graph's host images.
  graph::TensorId images() const {
    for (std::uint32_t t = 0; t < graph_.tensors().size(); ++t)
      if (graph_.tensors()[t].role == graph::Role::kInput && graph_.tensors()[t].name == "images")
        return static_cast<graph::TensorId>(t);
    throw Error("the CNN's tensor graph has no images");
  }

  // One micro-batch's backward, after its forward in the same steps: segment by segment,
  // recomputing each segment's forward from its checkpoint (all but the last segment, whose
  // activations are still live).
  void backward_pass(Steps& out) {
    const auto segments = this->segments();
    // The gradients of what later stages read arrive by the inter-IPU copy, on the layouts the
    // forward left those tensors on.
    for (const std::size_t p : graph::crossing(layers_, last_)) {
      const std::string& name = layers_[p].layer->name;
      grads_[name] = Value{fwd_.at(name).layout, {}};
    }
    for (std::size_t s = segments.size(); s-- > 0;) {
      const auto [first, last] = segments[s];
      if (s + 1 != segments.size() || stashed_) {
        for (std::size_t i = first; i < last; ++i) {
          body_.spans[i].rec.first = out.size();
          forward(out, layers_[i], /*recompute=*/true);
          body_.spans[i].rec.second = out.size();
          body_.spans[i].recomputed = true;
        }
        const auto scope = b_.scope("", trace::Pass::kRecompute);
        flush_all(out, fwd_);
      }
      for (std::size_t i = last; i-- > first;) {
        body_.spans[i].bwd.first = out.size();
        backward(out, layers_[i], !flow_[i].data_gradient);
        body_.spans[i].bwd.second = out.size();
      }
    }
    // The gradients of this stage's inputs, materialised for the copy to the stage before.
    for (const std::size_t p : inputs_) {
      auto it = grads_.find(layers_[p].layer->name);
      if (it != grads_.end()) flush(out, it->second);
    }
    grads_.clear();
    body_.steps = out.size();
  }

  // The activations a training micro-batch keeps (graph::kept_tensors), each on the layout of
  // the layer it names, live at program positions `offset` + its step index in the micro-batch
  // body. Call after forward_pass() and backward_pass().
  struct Scoped {
    std::string name;
    trace::TensorKind kind;
    Layout layout;
    trace::Lifetime live;
  };
  std::vector<Scoped> scoped_activations(std::uint64_t offset) const {
    std::vector<Scoped> out;
    for (auto& kept : graph::kept_tensors(layers_, segments(), body_, offset))
      out.push_back({std::move(kept.name), kept.kind, fwd_.at(kept.layer).layout, kept.live});
    return out;
  }

  // The stage's weight tensors (weights.hpp): call after lowering, as its convs are planned.
  StageWeights weights() {
    std::set<std::string> layers;
    for (const LayerNode& c : stage()) layers.insert(c.layer->name);
    return stage_weights(graph_, b_, layers);
  }

  // Inference: the largest input and output of one layer, live together.
  std::uint64_t inference_activation_bytes() const {
    std::uint64_t most = 0;
    const std::uint64_t eb = trace::dtype_bytes(m_.dtype);
    for (const LayerNode& c : stage())
      most = std::max(most, n_ * (c.in.elements() + c.out.elements()) * eb);
    return most;
  }

  trace::DType dtype() const { return m_.dtype; }

  // One micro-batch of what the stage reads from before it: the crossing tensors, or on the
  // first IPU the images as the first conv reads them (bytes).
  std::uint64_t stage_input_bytes() const {
    const std::uint64_t eb = trace::dtype_bytes(m_.dtype);
    if (first_ == 0) return layers_.empty() ? 0 : n_ * layers_.front().in.elements() * eb;
    return n_ * graph::crossing_elements(layers_, first_) * eb;
  }

  // A stashed stage's activations live at once after its recomputation: every new tensor its
  // nodes make (OpInfo::keeps_output), one micro-batch's (bytes).
  std::uint64_t recomputed_activation_bytes() const {
    std::uint64_t bytes = 0;
    for (const LayerNode& c : stage())
      if (graph::info(c.op()).keeps_output)
        bytes += n_ * c.out.elements() * trace::dtype_bytes(m_.dtype);
    return bytes;
  }

 private:
  plan::ConvArgs conv_args(std::uint64_t in, std::uint64_t h, std::uint64_t w, std::uint64_t out,
                           std::uint64_t k, std::uint64_t s) const {
    plan::ConvArgs a;
    a.batch = n_;
    a.in_chans = in;
    a.height = h;
    a.width = w;
    a.out_chans = out;
    a.kernel = k;
    a.stride = s;
    a.dtype = m_.dtype;
    return a;
  }
  // A conv's arguments; a grouped conv's channel counts are per group.
  plan::ConvArgs forward_args(const LayerNode& c) const {
    plan::ConvArgs a = conv_args(c.in.c / c.groups, c.in.h, c.in.w, c.out.c / c.groups,
                                 c.layer->kernel, c.layer->stride);
    a.groups = c.groups;
    a.channel_groups = c.groups > 1;
    return a;
  }

  // Every conv and fc of the stage planned ahead on a second thread (IpuBuilder::plan_ahead),
  // in the order the lowering asks for them: the forward convs, then (training) each layer's
  // data- and weight-gradient convs from the last layer back.
  void plan_ahead() {
    const auto args = [&](const LayerNode& c) -> std::optional<plan::ConvArgs> {
      switch (graph::info(c.op()).weights) {
        case graph::Weights::kConv:
          return forward_args(c);
        case graph::Weights::kMatmul:
          return fc_args(c);
        case graph::Weights::kScaleShift:
        case graph::Weights::kNone:
          break;
      }
      return std::nullopt;
    };
    for (std::size_t i = first_; i < last_; ++i)
      if (const auto a = args(layers_[i])) b_.plan_ahead(*a);
    if (run_.inference) return;
    for (std::size_t i = last_; i-- > first_;)
      if (const auto a = args(layers_[i])) {
        if (layers_[i].op() == graph::Op::kFc || flow_[i].data_gradient)
          b_.plan_ahead(IpuBuilder::data_gradient_args(*a), false, true);
        b_.plan_ahead(IpuBuilder::weight_gradient_args(*a), true, false);
      }
  }

  // An fc layer as a matmul: the batch x in channels times in x out channels.
  plan::ConvArgs fc_args(const LayerNode& c) const {
    return IpuBuilder::matmul_args(n_, c.layer->out, c.in.c, m_.dtype);
  }

  // compiler::pend and compiler::flush (lowering.hpp) with this lowering's builder.
  void pend(Value& v, std::initializer_list<Op> ops) { compiler::pend(b_, v, ops); }
  void flush(Steps& out, Value& v) { compiler::flush(b_, out, v); }
  void flush_all(Steps& out, std::map<std::string, Value>& values) {
    for (auto& [name, v] : values) flush(out, v);
  }
  // The forward value a layer reads, materialised.
  Value& input_of(Steps& out, const LayerNode& c) {
    if (c.input.empty()) {
      // The images, on the layout the first conv created for them.
      auto it = fwd_.find("");
      if (it == fwd_.end())
        it = fwd_.emplace("", Value{b_.input_layout(forward_args(c)), {}}).first;
      return it->second;
    }
    Value& v = fwd_.at(c.input);
    flush(out, v);
    return v;
  }

  // A layer's forward (or recomputed) steps: its op's forward rule.
  void forward(Steps& out, const LayerNode& c, bool recompute) {
    const Layer& l = *c.layer;
    const auto scope = b_.scope(l.name, recompute ? trace::Pass::kRecompute : trace::Pass::kForward,
                                graph::info(l.op).kind);
    switch (l.op) {
      case graph::Op::kConv:
      case graph::Op::kDwconv: {
        const Value& x = input_of(out, c);
        fwd_[l.name] = Value{b_.conv(out, forward_args(c), Operand{x.layout, false}), {}};
        return;
      }
      case graph::Op::kBatchNorm: {
        // Recomputation reuses the cached statistics (run.batchnorm_statistics_cache).
        const Value& x = input_of(out, c);
        fwd_[l.name] = run_.inference
                           ? norms_.batch_norm_inference(x)
                           : norms_.batch_norm(out, x, c.out.c,
                                               !(recompute && run_.batchnorm_statistics_cache));
        return;
      }
      case graph::Op::kGroupNorm: {
        // Each sample's statistics, in inference too (nothing to fold).
        const Value& x = input_of(out, c);
        fwd_[l.name] = norms_.group_norm(out, x, n_, m_.norm_groups,
                                         !(recompute && run_.batchnorm_statistics_cache));
        return;
      }
      case graph::Op::kRelu: {
        Value v = take(c.input);
        norms_.relu(out, v);
        fwd_[l.name] = std::move(v);
        return;
      }
      case graph::Op::kSwish:
      case graph::Op::kSigmoid: {
        Value v = take(c.input);
        pend(v, {Op::kSigmoid});
        if (l.op == graph::Op::kSwish) pend(v, {Op::kMul});  // x sigmoid(x)
        fwd_[l.name] = std::move(v);
        return;
      }
      case graph::Op::kScale: {
        // Each channel times its factor (squeeze-and-excitation): the factors go to the tiles
        // holding each channel (a broadcast from the first of them), then a fused multiply.
        flush(out, fwd_.at(l.other));
        Value v = take(c.input);
        b_.broadcast(out, v.layout, Axis::kPositions, 1);
        pend(v, {Op::kMul});
        fwd_[l.name] = std::move(v);
        return;
      }
      case graph::Op::kAdd: {
        Value& other = fwd_.at(l.other);
        flush(out, other);
        Value v = take(c.input);
        b_.rearrange(out, other.layout, v.layout);  // the other operand moves, as popops does
        pend(v, {Op::kAdd});
        fwd_[l.name] = std::move(v);
        return;
      }
      case graph::Op::kConcat: {
        // A new tensor of both operands' channels on the linear mapping, each operand's bytes
        // moved into its channel range (torch.cat; Poplar's concat is a view, which a reader
        // wanting another layout copies: this copy stands for that one).
        Value& other = fwd_.at(l.other);
        flush(out, other);
        const Value& x = input_of(out, c);
        const Layout y = b_.linear(m_.dtype, x.layout.positions, c.out.c);
        b_.move_channels(out, x.layout, 0, y, 0, c.in.c);
        b_.move_channels(out, other.layout, 0, y, c.in.c, c.out.c - c.in.c);
        fwd_[l.name] = Value{y, {}};
        return;
      }
      case graph::Op::kUpsample: {
        // Nearest neighbour: each tile writes factor^2 copies of the positions it holds.
        const Value& x = input_of(out, c);
        Layout y = x.layout;
        const std::uint64_t f2 = l.factor * l.factor;
        y.positions *= f2;
        y.positions_per_tile *= f2;
        b_.copy(out, y);
        fwd_[l.name] = Value{y, {}};
        return;
      }
      case graph::Op::kMaxPool:
        return maxpool_forward(out, c);
      case graph::Op::kAvgPool:
        b_.reduce(out, input_of(out, c).layout, Axis::kPositions, 1, /*broadcast=*/false);
        fwd_[l.name] = Value{b_.linear(m_.dtype, n_, c.out.c), {}};
        return;
      case graph::Op::kFc: {
        const Value& x = input_of(out, c);
        fwd_[l.name] =
            Value{b_.matmul(out, n_, l.out, c.in.c, m_.dtype, Operand{x.layout, false}), {}};
        return;
      }
      case graph::Op::kSoftmaxLoss: {
        const Value& x = input_of(out, c);
        const Op exp = Op::kExp, div = Op::kDiv;
        b_.elementwise(out, x.layout, {&exp, 1});
        b_.reduce(out, x.layout, Axis::kChannels, 1, /*broadcast=*/true);
        b_.elementwise(out, x.layout, {&div, 1});
        fwd_[l.name] = x;
        return;
      }
      case graph::Op::kEmbedding:  // a transformer's sub-layers: no CNN layer is one
      case graph::Op::kAttention:
      case graph::Op::kFfn:
      case graph::Op::kFinalNorm:
      case graph::Op::kHeads:
      case graph::Op::kCount:
        break;
    }
    throw Error(fmt::format("layer '{}': no forward rule", l.name));
  }

  void maxpool_forward(Steps& out, const LayerNode& c) {
    const Value& x = input_of(out, c);
    const std::uint64_t window = c.layer->kernel * c.layer->kernel;
    // Each output reads a kernel x kernel window of its tile's inputs (halo exchange
    // neglected); the output keeps the input's block grid.
    Layout y = x.layout;
    y.positions = n_ * c.out.positions();
    y.positions_per_tile =
        ceil_div(x.layout.positions_per_tile * c.out.positions(), c.in.positions());
    Layout work = y;
    work.positions_per_tile *= window;
    work.positions *= window;
    const Op max = Op::kMax;
    b_.elementwise(out, work, {&max, 1});
    fwd_[c.layer->name] = Value{y, {}};
  }

  // The forward value of an in-place layer's input, which the layer takes over with its
  // pending ops (the input is then only read through this layer, as batch norm's output is
  // read only through its ReLU or add in ResNet).
  Value take(const std::string& name) {
    Value& v = fwd_.at(name);
    Value out = v;
    v.pending.clear();
    v.pending_layers.clear();
    return out;
  }

  // Adds a gradient contribution for `name` (a tensor read by several layers gets the sum).
  void add_gradient(Steps& out, const std::string& name, Value g) {
    auto it = grads_.find(name);
    if (it == grads_.end()) {
      grads_.emplace(name, std::move(g));
      return;
    }
    flush(out, g);
    b_.rearrange(out, g.layout, it->second.layout);
    pend(it->second, {Op::kAdd});
  }

  // A layer's backward steps: its op's backward rule, reading the gradient of its output and
  // adding the gradients of its inputs.
  void backward(Steps& out, const LayerNode& c, bool first_layer) {
    const Layer& l = *c.layer;
    // The builder's weight_gradient marks its own part.
    const auto scope = b_.scope(l.name, trace::Pass::kDataGradient, graph::info(l.op).kind);
    const std::string& in = c.input;
    if (l.op == graph::Op::kSoftmaxLoss) {
      // d logits = softmax - labels, where the logits are.
      Value dx{fwd_.at(in).layout, {}, {}};
      pend(dx, {Op::kSub});
      add_gradient(out, in, std::move(dx));
      return;
    }
    Value g = grads_.at(l.name);
    grads_.erase(l.name);
    switch (l.op) {
      case graph::Op::kConv:
      case graph::Op::kDwconv:
        return conv_backward(out, c, std::move(g), first_layer);
      case graph::Op::kBatchNorm:
        flush(out, g);
        // Batch norm ran in place, so what is kept is its input x: it comes to the gradient's
        // layout and is whitened again there (poplar-compiler.md §2.3).
        b_.rearrange(out, fwd_.at(in).layout, g.layout);
        norms_.batch_norm_gradient(out, g, c.out.c, m_.dtype);
        return add_gradient(out, in, std::move(g));
      case graph::Op::kGroupNorm:
        flush(out, g);
        // As batch norm: its input x comes to the gradient's layout and is whitened there.
        b_.rearrange(out, fwd_.at(in).layout, g.layout);
        norms_.group_norm_gradient(out, g, n_, c.out.c, m_.norm_groups, m_.dtype);
        return add_gradient(out, in, std::move(g));
      case graph::Op::kRelu:
        // g x (y > 0): the forward output comes to the gradient's layout.
        b_.rearrange(out, fwd_.at(l.name).layout, g.layout);
        norms_.relu_gradient(out, g);
        return add_gradient(out, in, std::move(g));
      case graph::Op::kSwish:
        // g (s + x s (1 - s)), s = sigmoid(x): the input comes to the gradient's layout.
        b_.rearrange(out, fwd_.at(l.name).layout, g.layout);
        pend(g, {Op::kSigmoid, Op::kSub, Op::kMul, Op::kAdd, Op::kMul, Op::kMul});
        return add_gradient(out, in, std::move(g));
      case graph::Op::kSigmoid:
        // g y (1 - y): the output comes to the gradient's layout.
        b_.rearrange(out, fwd_.at(l.name).layout, g.layout);
        pend(g, {Op::kSub, Op::kMul, Op::kMul});
        return add_gradient(out, in, std::move(g));
      case graph::Op::kScale:
        return scale_backward(out, c, std::move(g));
      case graph::Op::kAdd:
        flush(out, g);  // materialised once; both operands' paths read it
        add_gradient(out, l.other, g);
        return add_gradient(out, in, std::move(g));
      case graph::Op::kConcat: {
        // The gradient's channel ranges back to each operand, as new tensors.
        flush(out, g);
        const std::uint64_t rest = c.out.c - c.in.c;
        const Layout dx = b_.linear(m_.dtype, g.layout.positions, c.in.c);
        const Layout dother = b_.linear(m_.dtype, g.layout.positions, rest);
        b_.move_channels(out, g.layout, 0, dx, 0, c.in.c);
        b_.move_channels(out, g.layout, c.in.c, dother, 0, rest);
        add_gradient(out, l.other, Value{dother, {}});
        return add_gradient(out, in, Value{dx, {}});
      }
      case graph::Op::kUpsample: {
        // Each input position's gradient sums its factor^2 copies' where the output was.
        flush(out, g);
        const Layout y = fwd_.at(l.name).layout;
        b_.rearrange(out, g.layout, y);
        const Op sum = Op::kAdd;
        b_.elementwise(out, y, {&sum, 1});
        return add_gradient(out, in, Value{fwd_.at(in).layout, {}});
      }
      case graph::Op::kMaxPool:
      case graph::Op::kAvgPool:
        return pool_backward(out, c, std::move(g));
      case graph::Op::kFc: {
        flush(out, g);
        const plan::ConvArgs mm = fc_args(c);
        const Layout weights = b_.weights_layout(mm);
        const Layout dx = b_.data_gradient(out, mm, weights, g.layout);
        b_.weight_gradient(out, mm, fwd_.at(in).layout, weights, g.layout, /*update=*/true);
        return add_gradient(out, in, Value{dx, {}});
      }
      case graph::Op::kSoftmaxLoss:
      case graph::Op::kEmbedding:  // a transformer's sub-layers: no CNN layer is one
      case graph::Op::kAttention:
      case graph::Op::kFfn:
      case graph::Op::kFinalNorm:
      case graph::Op::kHeads:
      case graph::Op::kCount:
        break;
    }
    throw Error(fmt::format("layer '{}': no backward rule", l.name));
  }

  // Data gradient (skipped for the first layer), then the weight gradient added into the
  // gradient accumulator on the weights' layout.
  void conv_backward(Steps& out, const LayerNode& c, Value g, bool first_layer) {
    const std::string& in = c.input;
    flush(out, g);
    const plan::ConvArgs fa = forward_args(c);
    const Layout weights = b_.weights_layout(fa);
    if (!first_layer) {
      Layout dx = b_.data_gradient(out, fa, weights, g.layout);
      // A strided conv's data gradient is computed at the output resolution (same MACs) and
      // written at the input resolution: each tile's block grows by in / out positions
      // (stride^2 where the stride divides the field).
      dx.positions = dx.positions / c.out.positions() * c.in.positions();
      dx.positions_per_tile = ceil_div(dx.positions_per_tile * c.in.positions(), c.out.positions());
      add_gradient(out, in, Value{dx, {}});
    }
    const Layout x = in.empty() ? b_.input_layout(fa) : fwd_.at(in).layout;
    b_.weight_gradient(out, fa, x, weights, g.layout, /*update=*/true);
  }

  void scale_backward(Steps& out, const LayerNode& c, Value g) {
    const std::string& in = c.input;
    flush(out, g);
    // The factors' gradient: g x summed over each channel's positions (x to g's layout).
    b_.rearrange(out, fwd_.at(in).layout, g.layout);
    const Op mul = Op::kMul;
    b_.elementwise(out, g.layout, {&mul, 1});
    b_.reduce(out, g.layout, Axis::kPositions, 1, /*broadcast=*/false);
    add_gradient(out, c.layer->other, Value{b_.linear(m_.dtype, n_, c.out.c), {}});
    // The input's gradient: g times the factors, brought to g's tiles.
    b_.broadcast(out, g.layout, Axis::kPositions, 1);
    pend(g, {Op::kMul});
    add_gradient(out, in, std::move(g));
  }

  // A pool's gradient spread back over its input windows, on the input's layout (a max pool's
  // gradient is first brought there).
  void pool_backward(Steps& out, const LayerNode& c, Value g) {
    flush(out, g);
    const Layout x = fwd_.at(c.input).layout;
    if (c.op() == graph::Op::kMaxPool)
      b_.rearrange(out, g.layout.positions == x.positions ? g.layout : x, x);
    const Op mul = Op::kMul;
    b_.elementwise(out, x, {&mul, 1});
    add_gradient(out, c.input, Value{x, {}});
  }

  // The nodes of this IPU's stage.
  std::span<const LayerNode> stage() const {
    return std::span<const LayerNode>(layers_).subspan(first_, last_ - first_);
  }

  // Where a tensor from an earlier stage (node `producer`'s output) lands: on the input layout
  // of its first reader here when that is a conv reading it (createInput), else linearly.
  Layout arrival_layout(std::size_t producer) const {
    const LayerNode& p = layers_[producer];
    const std::string& name = p.layer->name;
    for (const LayerNode& c : stage()) {
      const bool conv = c.op() == graph::Op::kConv || c.op() == graph::Op::kDwconv;
      if (c.input == name && conv) return b_.input_layout(forward_args(c));
      if (c.input == name || c.layer->other == name) break;
    }
    return b_.linear(m_.dtype, n_ * p.out.positions(), p.out.c);
  }

  // The stage's recomputation ranges: between the run's checkpoints within it, or, stashed, the
  // whole stage at once.
  std::vector<graph::Segment> segments() const {
    if (stashed_) return {{first_, last_}};
    std::vector<graph::Segment> out;
    for (auto [first, last] : graph::segments(layers_, run_.checkpoints)) {
      first = std::max(first, first_);
      last = std::min(last, last_);
      if (first < last) out.emplace_back(first, last);
    }
    return out;
  }

  const ModelDef& m_;
  const RunConfig& run_;
  IpuBuilder& b_;
  const graph::TensorGraph& graph_;  // the model's, for one micro-batch
  NormLowering norms_;
  graph::Gradients no_gradients_;    // inference: the graph has no backward
  GraphLowering lowering_;           // the graph's nodes, layer by layer (inference)
  std::vector<LayerNode> layers_;    // every node of the model
  std::size_t first_, last_;         // this IPU's stage: [first_, last_) of layers_
  bool stashed_;                     // its forward and backward run in different cycles
  std::vector<std::size_t> inputs_;  // what it reads from earlier stages (graph::crossing)
  std::uint64_t n_;
  std::uint32_t all_tiles_;                // the chip's tiles, I/O tiles included
  std::map<std::string, Value> fwd_;       // forward values by producing layer
  std::map<std::string, Value> grads_;     // gradients of layer outputs, while back-propagating
  graph::Body body_;                       // where each layer's steps sit in the micro-batch body
  std::vector<graph::GradientStep> flow_;  // training: each layer's backward (graph::gradient_flow)
};

// The pipeline's inter-IPU copy (pipeline_copies): each boundary's crossing tensors
// (graph::crossing), one micro-batch of them, from IPU k - 1 to IPU k.
trace::GlobalExchange cnn_stage_copies(const std::vector<LayerNode>& nodes,
                                       const std::vector<graph::Segment>& ranges,
                                       const RunConfig& run, DType dtype) {
  std::vector<trace::IpuCopy> forward;
  for (std::uint32_t k = 1; k < ranges.size(); ++k)
    forward.push_back({k - 1, k,
                       run.micro_batch * graph::crossing_elements(nodes, ranges[k].first) *
                           trace::dtype_bytes(dtype)});
  return pipeline_copies(forward, !run.inference);
}

// One IPU's program after its pipeline loops: inference, its resident weights and activations;
// training, the weight update and the memory of weights, gradient accumulators, momentum and
// activations (kept over their lifetimes on one IPU; in a pipeline the stashed stage inputs
// and the recomputed stage, spread over the tiles while the loops run). The input buffer is
// IPU 0's; every IPU holds its largest conv's temporaries.
std::uint64_t finish_program(CnnLowering& lower, const RunConfig& run, const SystemSpec& system,
                             const ChipSpec& chip, trace::IpuProgram& program, IpuBuilder& b,
                             std::uint32_t ipu, std::uint32_t ipus) {
  const DType dt = lower.dtype();
  const StageWeights weights = lower.weights();
  const std::uint64_t input = ipu == 0 ? run.micro_batch * run.input_bytes_per_sample : 0;
  const auto temporaries = [&] {
    program.tensors.push_back({"conv_temporaries", trace::TensorKind::kTemp, dt,
                               trace::TileRange{0, chip.tiles - 1}, b.peak_temp()});
  };
  if (run.inference) {
    // Resident weights (and the folded batch-norm scales and shifts), the largest pair of
    // activations live at once, the input buffer and the largest conv's temporaries.
    InferenceMemory memory;
    memory.parameters = weights.parameters();
    memory.dtype = dt;
    memory.live_bytes = lower.inference_activation_bytes();
    memory.input_bytes = input;
    for (const Holding& h : inference_memory(memory)) b.hold(h);
    temporaries();
    return 0;
  }
  const trace::Lifetime loop_live{0, trace::program_positions(program.steps) - 1};
  // After the gradient-accumulation loop, the weight update (optimiser.hpp), as TensorFlow
  // applies it per variable; SGD's momentum without weight decay (the CNN recipes').
  const std::uint64_t norm_bytes =
      lower_weight_update(b, program.steps, run, weights.update(dt, ipus > 1, /*sgd_decay=*/false));
  // Memory: weights, gradient accumulators and the optimiser state (16-bit) on each layer's
  // weight layout (always live; a shard spread over the tiles under replicated tensor
  // sharding, none when streamed); one IPU: the activations, checkpoints and activation
  // gradients on their layers' layouts, each live where the micro-batch body (positions 1..,
  // after the loop step at 0) uses it; the input buffer and the largest conv's temporaries
  // (always live).
  CnnMemory memory;
  memory.parameters = weights.parameters();
  memory.dtype = dt;
  memory.optimiser = optimiser_memory(run, weights.elements, dt);
  if (ipus == 1) {
    for (auto& a : lower.scoped_activations(/*offset=*/1))
      memory.kept.push_back({std::move(a.name), a.kind, a.layout, a.live});
  } else {
    // Stage s of L stashes its input for the 2 (L - s) + 1 micro-batches between a forward and
    // its backward (as a transformer stage does, memory.hpp) and holds its recomputed
    // activations during the backward.
    memory.dtype = dt;
    memory.stashed_bytes = (2 * (ipus - 1 - ipu) + 1) * lower.stage_input_bytes();
    memory.live_bytes = lower.recomputed_activation_bytes();
    memory.loop_live = loop_live;
  }
  memory.input_bytes = run.io_tiles == 0 ? input : 0;  // else on the I/O tiles, below
  for (const Holding& h : cnn_training_memory(memory)) b.hold(h);
  if (run.io_tiles != 0 && input > 0)
    program.tensors.push_back({"input_buffer", trace::TensorKind::kInput, DType::kChar,
                               trace::TileRange{chip.tiles, system.chip.tiles - 1},
                               ceil_div(input, run.io_tiles)});
  temporaries();
  return norm_bytes;
}

}  // namespace

trace::Trace compile_cnn(const ModelDef& m, const RunConfig& run, const SystemSpec& system,
                         std::vector<PlannedConv>* plans) {
  // Keys a CNN does not use (a transformer placement, streamed weights) were refused by
  // check_run_applies.
  graph::check_checkpoints(m, run);
  // Training differentiates from the loss: a CNN trained has its softmax_loss last, and only
  // there (a loss in the middle, or none, left layers without a gradient).
  if (!run.inference && !m.layers.empty()) {
    for (std::size_t i = 0; i < m.layers.size(); ++i) {
      const bool last = i + 1 == m.layers.size();
      if ((m.layers[i].op == graph::Op::kSoftmaxLoss) != last)
        throw ConfigError(fmt::format(
            "{}: layer '{}': a CNN trained (run.mode training) ends with one softmax_loss "
            "layer, its last; {}",
            m.layers[i].at.empty() ? m.file : m.layers[i].at, m.layers[i].name,
            last ? fmt::format("found '{}' last", graph::name(m.layers[i].op))
                 : "found a softmax_loss before the last layer"));
    }
  }
  const std::vector<LayerNode> nodes = graph::infer_shapes(m);
  graph::BuildOptions options;
  options.batch = run.micro_batch;
  options.training = !run.inference;
  const graph::TensorGraph graph = graph::build_graph(m, options);
  const std::vector<graph::Segment> ranges = graph::pipeline_stages(nodes, m, run);
  trace::Trace t;
  t.name = run.name;
  t.replicas = run.replicas;
  const ChipSpec chip = compute_chip(run, system.chip);
  // The pipeline schedule (pipeline.hpp): forward stage s on IPU s, the loss in the last, so a
  // training step takes GA + 2 (p - 1) cycles (an inference step GA + p - 1); one IPU is one
  // stage of GA cycles.
  const auto p = static_cast<std::uint32_t>(ranges.size());
  const bool pipelined = p > 1;
  std::vector<std::uint32_t> stage_ipus(p);
  std::iota(stage_ipus.begin(), stage_ipus.end(), 0U);
  const std::uint64_t ga = run.gradient_accumulation;
  const std::uint64_t cycles = run.inference ? ga + p - 1 : pipeline_cycles(ga, p - 1);
  if (pipelined) t.global_exchanges = {cnn_stage_copies(nodes, ranges, run, m.dtype)};
  IpuBuilder::PlanCache plan_cache;  // stages may plan the same shapes
  std::vector<std::uint64_t> streaming(p, 0), norm_bytes(p, 0);
  for (std::uint32_t ipu = 0; ipu < p; ++ipu) {
    auto& program = t.ipus.emplace_back();
    program.ipu = ipu;
    IpuBuilder b(chip, program, available_memory_for(run, ipu), run.partials, run.fuse_elementwise,
                 run.rearrangements);
    b.set_coeff_load_bits(run.conv_unit_load_bits);
    b.plan_fully_connected_passes(run.fully_connected_pass && !run.inference);
    b.record_plans(plans, ipu);
    b.share_plans(&plan_cache);
    const bool stashed = pipelined && ipu + 1 < p;
    CnnLowering lower(m, run, b, system.chip.tiles, graph, nodes, ranges[ipu], stashed);
    std::vector<PipelineStage> stages;
    for (const StageSlot& slot : ipu_stages(stage_ipus, ipu, !run.inference)) {
      PipelineStage& st = stages.emplace_back();
      st.start = slot.start;
      if (slot.forward) lower.forward_pass(st.steps);
      if (slot.backward) lower.backward_pass(st.steps);
    }
    for (auto& loop : pipeline_loops(stages, ga, cycles, pipelined))
      program.steps.push_back(std::move(loop));
    norm_bytes[ipu] = finish_program(lower, run, system, chip, program, b, ipu, p);
    streaming[ipu] = b.streaming_memory();
  }
  check_streaming_memory(run, system, streaming);
  if (run.clip_gradients && !run.inference && pipelined)
    for (auto& exchange : clip_copies(norm_bytes))
      t.global_exchanges.push_back(std::move(exchange));
  return t;
}

}  // namespace ipusim::compiler
