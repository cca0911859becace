// SPDX-License-Identifier: Apache-2.0
// Lowering of a CNN step (ResNet-50, EfficientNet): one IPU per replica, or a pipeline of
// stages over the IPUs of a replica (run.pipeline_splits), recomputation between checkpoints,
// gradient accumulation, then the weight update (docs/workloads.md). Each layer is its nodes
// of the model's tensor graph, forward and backward, lowered by GraphLowering
// (graph_lowering.hpp): a conv's output stays where the conv computed it, batch norm, ReLU and
// residual adds run there (fused into one vertex per tile, or popnn's compute sets), batch-norm
// statistics are reduced among the tiles holding each channel, and operands whose layout
// differs from what a conv's plan wants are rearranged. What this file adds: the stages, the
// recomputation segments, the inter-IPU copies' arrivals and the memory of what is kept.
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
              const graph::TensorGraph& graph, const graph::Gradients& gradients,
              std::vector<LayerNode> layers, graph::Segment stage, bool stashed)
      : m_(m),
        run_(run),
        b_(b),
        graph_(graph),
        norms_(b, run),
        lowering_(graph, gradients, b),
        layers_(std::move(layers)),
        first_(stage.first),
        last_(stage.second),
        stashed_(stashed),
        inputs_(graph::crossing(layers_, first_)),
        n_(run.micro_batch),
        all_tiles_(all_tiles) {
    if (!run.inference) flow_ = graph::gradient_flow(m, layers_);
    lowering_.use_norms(&norms_);
    for (std::size_t i = 0; i < layers_.size(); ++i) index_[layers_[i].layer->name] = i;
    plan_ahead();
  }

  // One micro-batch's forward lowered from the model's tensor graph (GraphLowering), layer by
  // layer (inference: its output to the host).
  void forward_pass(Steps& out) {
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
      (void)lowering_.value(out, lowering_.output_of(""));  // normalised before the stem reads
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
    // Inference: the outputs (the last layer's, e.g. class probabilities) go back to the host.
    if (run_.inference && !layers_.empty() && last_ == layers_.size()) {
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
  // One micro-batch's backward lowered from the model's tensor graph, after its forward in the
  // same steps: segment by segment, recomputing each segment's forward from its checkpoint
  // (all but the last segment, whose activations are still live).
  void backward_pass(Steps& out) {
    const auto segments = this->segments();
    const auto in_layers = [&](std::size_t first, std::size_t last) {
      return [this, first, last](const std::string& layer) {
        const auto it = index_.find(layer);
        return it != index_.end() && it->second >= first && it->second < last;
      };
    };
    // The gradients of what later stages read arrive by the inter-IPU copy, on the layouts the
    // forward left those tensors on.
    for (const std::size_t p : graph::crossing(layers_, last_)) {
      const graph::TensorId t = lowering_.output_of(layers_[p].layer->name);
      for (const graph::TensorId part :
           lowering_.gradient_parts(t, in_layers(last_, layers_.size())))
        lowering_.set_value(part, Value{lowering_.layout_of(t), {}});
    }
    for (std::size_t s = segments.size(); s-- > 0;) {
      const auto [first, last] = segments[s];
      if (s + 1 != segments.size() || stashed_) {
        lowering_.set_recomputing(true);
        for (std::size_t i = first; i < last; ++i) {
          const Layer& l = *layers_[i].layer;
          body_.spans[i].rec.first = out.size();
          {
            const auto scope = b_.scope(l.name, trace::Pass::kRecompute, graph::info(l.op).kind);
            lowering_.forward(out, l.name);
          }
          body_.spans[i].rec.second = out.size();
          body_.spans[i].recomputed = true;
        }
        lowering_.set_recomputing(false);
        const auto scope = b_.scope("", trace::Pass::kRecompute);
        lowering_.flush_all(out);
      }
      for (std::size_t i = last; i-- > first;) {
        const Layer& l = *layers_[i].layer;
        body_.spans[i].bwd.first = out.size();
        {
          const auto scope = b_.scope(l.name, trace::Pass::kDataGradient, graph::info(l.op).kind);
          lowering_.backward(out, l.name);
        }
        body_.spans[i].bwd.second = out.size();
      }
    }
    // The gradients of this stage's inputs, materialised for the copy to the stage before.
    for (const std::size_t p : inputs_)
      for (const graph::TensorId part : lowering_.gradient_parts(
               lowering_.output_of(layers_[p].layer->name), in_layers(first_, last_)))
        (void)lowering_.value(out, part);
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
      out.push_back({std::move(kept.name), kept.kind,
                     lowering_.layout_of(lowering_.output_of(kept.layer)), kept.live});
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
  GraphLowering lowering_;                    // the graph's nodes, layer by layer
  std::map<std::string, std::size_t> index_;  // each layer's index in layers_
  std::vector<LayerNode> layers_;             // every node of the model
  std::size_t first_, last_;                  // this IPU's stage: [first_, last_) of layers_
  bool stashed_;                              // its forward and backward run in different cycles
  std::vector<std::size_t> inputs_;           // what it reads from earlier stages (graph::crossing)
  std::uint64_t n_;
  std::uint32_t all_tiles_;                // the chip's tiles, I/O tiles included
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
  graph::TensorGraph graph = graph::build_graph(m, options);
  graph::Gradients gradients;  // each tensor's (training)
  if (options.training) (void)graph::add_backward(graph, graph::loss_of(graph), &gradients);
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
    CnnLowering lower(m, run, b, system.chip.tiles, graph, gradients, nodes, ranges[ipu], stashed);
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
