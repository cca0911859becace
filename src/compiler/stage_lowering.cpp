// SPDX-License-Identifier: Apache-2.0
// Lowering of a step of any model onto the IPUs of a replica (docs/workloads.md): the model's
// tensor graph for one micro-batch (with its backward when training), cut into forward stages
// (graph::forward_stages: one stage on one IPU, or a pipeline), each IPU's stages lowered layer
// by layer by GraphLowering (graph_lowering.hpp), the stage's forward recomputed before its
// backward as the stage plan says (graph::Recompute), the pipeline schedule (pipeline.hpp)
// with the inter-IPU copies of what crosses between stages, then the weight update of each
// IPU's weight tensors (optimiser.hpp) and the memory it holds (memory.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>
#include <set>

#include "graph/lifetimes.hpp"
#include "graph/recompute.hpp"
#include "graph/stages.hpp"
#include "graph_lowering.hpp"
#include "ipu_builder.hpp"
#include "ipusim/compiler/graph/build.hpp"
#include "ipusim/util/units.hpp"
#include "lowering.hpp"
#include "memory.hpp"
#include "norm_lowering.hpp"
#include "optimiser.hpp"
#include "pipeline.hpp"
#include "weights.hpp"

namespace ipusim::compiler {
namespace {

using graph::Block;
using graph::TensorId;
using trace::DType;
using trace::Pass;

// One micro-batch of `t` (bytes).
std::uint64_t bytes_of(const graph::TensorGraph& g, TensorId t) {
  const graph::Tensor& x = g.tensor(t);
  return graph::elements(x.dims) * trace::dtype_bytes(x.dtype);
}

// The run its stages are cut for: under tensor parallelism the replica's IPUs run one stage
// together, each its share of every layer (the same program on each).
RunConfig stage_run(const ModelDef& m, const RunConfig& r) {
  if (r.tensor_parallel == 1) return r;
  RunConfig out = r;
  out.ipus_per_replica = r.ipus_per_replica / r.tensor_parallel;
  out.placement = {{m.encoder_layers, m.encoder_layers}};  // every layer (run_applies: no pipeline)
  return out;
}

// Phased training (run.weights streamed, as popxl's GPT-J and GPT-3 train): the one stage's
// blocks cut into phases, each a stage on the same IPU: the embeddings, each decoder layer (its
// attention and FFN), and the tail (final norm, heads, loss).
graph::ForwardStages phases_of(graph::ForwardStages one) {
  using graph::Op;
  const auto starts = [](Op k, Op previous) {
    const bool body = k == Op::kAttention || k == Op::kFfn || k == Op::kEmbedding;
    return k == Op::kAttention || k == Op::kEmbedding ||
           (!body && previous != Op::kCount &&
            (previous == Op::kAttention || previous == Op::kFfn || previous == Op::kEmbedding));
  };
  graph::ForwardStages out;
  out.recompute = one.recompute;
  Op previous = Op::kCount;
  for (const Block& blk : one.layers.front()) {
    if (out.layers.empty() || starts(blk.kind, previous)) {
      out.layers.emplace_back();
      out.ipu.push_back(0);
    }
    out.layers.back().push_back(blk);
    previous = blk.kind;
  }
  return out;
}

// What every IPU of a replica shares: the model, run and system, the model's tensor graph,
// its forward stages and what crosses between them.
struct Replica {
  const ModelDef& m;
  const RunConfig& run;
  const SystemSpec& system;
  ChipSpec chip;  // the system's, less the run's I/O tiles
  graph::ForwardStages stages;
  std::uint32_t ipus;  // that run stages (of a replica, less its tensor-parallel copies)
  bool pipelined;      // more than one: stage boundaries and inter-IPU copies
  bool phased;         // phased training: the stages are phases of one IPU (phases_of)
  std::uint32_t loss;  // the loss stage, the last: a training step takes GA + 2 loss cycles
  graph::TensorGraph graph;
  graph::Gradients gradients;                     // each tensor's (training)
  std::map<std::string, std::uint32_t> stage_of;  // each layer's forward stage (graph::stage_of)
  std::vector<std::vector<TensorId>> crossing;    // by forward stage (graph::crossing)

  Replica(const ModelDef& model, const RunConfig& r, const SystemSpec& s)
      : m(model),
        run(r),
        system(s),
        chip(compute_chip(r, s.chip)),
        stages(graph::forward_stages(model, stage_run(model, r))),
        ipus(r.ipus_per_replica / r.tensor_parallel),
        pipelined(ipus > 1),
        phased(r.phased_training()),
        loss(static_cast<std::uint32_t>(stages.layers.size() - 1)) {
    graph::BuildOptions options;
    options.batch = r.micro_batch;
    options.training = !r.inference;
    if (model.masked_tokens > 0)
      options.masked_tokens = model.masked_tokens + r.max_sequences_per_pack - 1;
    options.vocabulary_serial = r.embedding_serialisation;
    options.split_qkv = r.split_qkv;
    options.tensor_parallel = r.tensor_parallel;
    options.hidden_parallel = r.hidden_parallel;
    options.decode = r.kv_cache != KvCache::kNone;
    graph = graph::build_graph(model, options);
    if (options.training) (void)graph::add_backward(graph, graph::loss_of(graph), &gradients);
    if (phased) {
      stages = phases_of(std::move(stages));
      loss = static_cast<std::uint32_t>(stages.layers.size() - 1);
    }
    stage_of = graph::stage_of(stages);
    crossing = graph::crossing(graph, stages);
  }

  std::uint32_t stage(const std::string& layer) const { return stage_of.at(layer); }
  // One micro-batch of `ts` (bytes).
  std::uint64_t bytes(const std::vector<TensorId>& ts) const {
    std::uint64_t total = 0;
    for (const TensorId t : ts) total += bytes_of(graph, t);
    return total;
  }
  // The pipeline's inter-IPU copy (pipeline_copies): before each stage s > 0, what crosses,
  // from the IPU of stage s - 1 to that of s.
  trace::GlobalExchange copies() const {
    std::vector<trace::IpuCopy> forward;
    for (std::uint32_t s = 1; s < stages.layers.size(); ++s)
      forward.push_back({stages.ipu[s - 1], stages.ipu[s], bytes(crossing[s])});
    return pipeline_copies(forward, !run.inference);
  }
  // One micro-batch of host input (bytes).
  std::uint64_t input_bytes() const { return run.micro_batch * run.input_bytes_per_sample; }
};

// The lowering of one IPU's part of a replica: the forward stages it runs, their
// recomputation and backward, the pipeline loops, the weight update and its memory.
class IpuLowering {
 public:
  IpuLowering(const Replica& r, std::uint32_t ipu, trace::IpuProgram& program, IpuBuilder& b)
      : r_(r),
        ipu_(ipu),
        program_(program),
        b_(b),
        norms_(b, r.run),
        lowering_(r.graph, r.gradients, b) {
    lowering_.use_norms(&norms_);
    for (std::uint32_t s = 0; s < r.stages.layers.size(); ++s) {
      if (r.stages.ipu[s] != ipu) continue;
      for (const Block& blk : r.stages.layers[s]) {
        index_[blk.layer] = layers_.size();
        layers_.push_back(blk);
      }
    }
    body_.spans.assign(layers_.size(), graph::Spans{});
    plan_ahead();
  }

  // The pipeline loops of this IPU's stages (ipu_stages): each forward stage it holds and, in
  // training, that stage's backward, the loss stage's two as one.
  void run_stages() {
    const bool training = !r_.run.inference;
    std::vector<PipelineStage> stages;
    for (const StageSlot& slot : ipu_stages(r_.stages.ipu, ipu_, training)) {
      PipelineStage& st = stages.emplace_back();
      st.start = slot.start;
      if (slot.forward) forward(st.steps, slot.forward_stage);
      if (slot.backward) backward(st.steps, slot.forward_stage);
    }
    const std::uint64_t ga = r_.run.gradient_accumulation;
    const std::uint64_t cycles = training ? pipeline_cycles(ga, r_.loss) : ga + r_.loss;
    for (auto& loop : pipeline_loops(stages, ga, cycles, r_.pipelined))
      program_.steps.push_back(std::move(loop));
  }

  // Phased training (Replica::phased), as popxl's GPT-J and GPT-3 examples train
  // (finetuning.py, pretraining.py; popxl-addons batch serialisation): each phase's weights
  // loaded from Streaming Memory once a step (and all-gathered over the replicas under
  // replicated tensor sharding), then its micro-batches in a loop, each loading its input from
  // Streaming Memory and storing its output there: the forward phases in order, the tail's
  // forward and backward together, then the backward phases in reverse, each recomputing its
  // forward and followed by its gradients' reduction over the replicas and their store. The
  // optimiser runs after (weight_update_and_memory). Loads and stores in sequence with the
  // compute, as the examples run them (io_mode "io", not "io_overlapped").
  void run_phases() {
    for (std::uint32_t s = 0; s < r_.stages.layers.size(); ++s)
      phase_weights_.push_back(phase_weight_bytes(s));
    const std::uint32_t tail = r_.loss;
    for (std::uint32_t s = 0; s < tail; ++s) phase(s, true, false);
    phase(tail, true, true);
    for (std::uint32_t s = tail; s-- > 0;) phase(s, false, true);
  }

  // Inference: the resident weights (or a phase's buffer, streamed), the largest activations
  // live at once, the input buffer, the planner's temporaries.
  void inference_memory() {
    const StageWeights weights = stage_weights(r_.graph, b_, names());
    InferenceMemory memory;
    memory.parameters = weights.parameters();
    if (r_.run.streamed_weights) {  // every phase's weights stay in Streaming Memory
      const std::vector<std::uint64_t> loads = phase_loads(layers_);
      b_.keep_in_streaming_memory(std::accumulate(loads.begin(), loads.end(), std::uint64_t{0}));
      memory.parameters = weight_buffer(loads);
    }
    memory.dtype = r_.m.dtype;
    memory.live_bytes =
        r_.stages.recompute == graph::Recompute::kEverySubLayer ? sub_layer_bytes() : layer_bytes();
    // A KV cache: every layer's on chip, or one layer's at a time, the rest in Streaming Memory.
    std::uint64_t caches = 0, largest = 0;
    for (const Block& blk : layers_) {
      const std::uint64_t bytes = cache_bytes(blk.layer);
      caches += bytes;
      largest = std::max(largest, bytes);
    }
    if (r_.run.kv_cache == KvCache::kStreaming) b_.keep_in_streaming_memory(caches);
    const std::uint64_t held = r_.run.kv_cache == KvCache::kStreaming ? largest : caches;
    if (held > 0)
      b_.hold({"kv_cache", trace::TensorKind::kActivation, std::nullopt, 1, r_.m.dtype, held,
               std::nullopt});
    memory.input_bytes = ipu_ == r_.stages.ipu[0] ? r_.input_bytes() : 0;
    for (const Holding& h : compiler::inference_memory(memory)) b_.hold(h);
    temporaries();
  }

  // Training, after the pipeline loops: the weight update of the IPU's weight tensors, then its
  // memory. Returns the bytes of weight-tensor norms it sends for gradient clipping (0 without).
  std::uint64_t weight_update_and_memory() {
    if (r_.phased) return phased_update_and_memory();
    const StageWeights weights = stage_weights(r_.graph, b_, names());
    const trace::Lifetime loop_live{0, trace::program_positions(program_.steps) - 1};
    const std::uint64_t norm_bytes =
        lower_weight_update(b_, program_.steps, r_.run,
                            weights.update(r_.m.dtype, r_.pipelined, r_.run.sgd_weight_decay));
    TrainingMemory memory;
    memory.parameters = weights.parameters();
    memory.dtype = r_.m.dtype;
    memory.optimiser = optimiser_memory(r_.run, weights.elements, r_.m.dtype);
    if (keeps_activations()) {
      for (auto& k : graph::kept_tensors(layers_, consumers(), segments(0), body_, /*offset=*/1))
        memory.kept.push_back(
            {std::move(k.name), k.kind, lowering_.layout_of(lowering_.output_of(k.layer)), k.live});
    } else {
      for (std::uint32_t s = 0; s < r_.stages.layers.size(); ++s)
        if (r_.stages.ipu[s] == ipu_)
          memory.stashed_bytes += stash_depth(r_.loss, s) * (stage_input(s) + checkpoint_bytes(s));
      memory.live_bytes = r_.stages.recompute == graph::Recompute::kEverySubLayer
                              ? sub_layer_bytes()
                              : recomputed_bytes();
      memory.loop_live = loop_live;
    }
    const std::uint64_t input = ipu_ == r_.stages.ipu[0] ? r_.input_bytes() : 0;
    memory.input_bytes = r_.run.io_tiles == 0 ? input : 0;  // else on the I/O tiles, below
    for (const Holding& h : training_memory(memory)) b_.hold(h);
    if (r_.run.io_tiles != 0 && input > 0)
      program_.tensors.push_back({"input_buffer", trace::TensorKind::kInput, DType::kChar,
                                  trace::TileRange{r_.chip.tiles, r_.system.chip.tiles - 1},
                                  ceil_div(input, r_.run.io_tiles)});
    temporaries();
    return norm_bytes;
  }

 private:
  // Forward stage `s`, one micro-batch: the host input first (stage 0), or what earlier stages
  // send; its layers in order; inference: the model's output to the host (the loss stage).
  void forward(Steps& out, std::uint32_t s) {
    if (s == 0 && r_.run.input_bytes_per_sample > 0) {
      {
        const Layout created = input_layout();
        const auto scope = b_.scope("", Pass::kHostIo, trace::OpKind::kCopy);
        stream_input(b_, out, r_.run, created, r_.input_bytes(), r_.system.chip.tiles);
      }
      if (lowering_.has_layer("")) {  // the host images cast and normalised on the IPU
        const auto scope = b_.scope("", Pass::kForward, trace::OpKind::kElementwise);
        body_.images_at = out.size();
        lowering_.forward(out, "");
        (void)lowering_.value(out, lowering_.output_of(""));
      }
    }
    for (const TensorId t : r_.crossing[s]) lowering_.set_value(t, Value{arrival_layout(t, s), {}});
    run_layers(out, s, Pass::kForward, 0, r_.stages.layers[s].size());
    if (r_.run.inference && s == r_.loss) {
      const auto scope = b_.scope("", Pass::kHostIo, trace::OpKind::kCopy);
      const TensorId y = r_.graph.nodes().back().outputs[0];
      b_.host(out, bytes_of(r_.graph, y), trace::HostDirection::kFromIpu, trace::HostMemory::kHost,
              /*overlap=*/false, lowering_.value(out, y).layout.range());
    }
  }

  // The backward of forward stage `s`, after its forward: the gradients later stages send
  // (each on the tiles its tensor had arriving at the next stage: an inter-IPU copy's
  // destination is a clone of its source, poputil::copyToIpu), then segment by segment from the
  // last, each recomputed as the stage plan says and its layers' backward in reverse; then the
  // gradients of what the stage read from earlier ones.
  void backward(Steps& out, std::uint32_t s) {
    const auto in_stages = [this](std::uint32_t first, std::uint32_t last) {
      return [this, first, last](const std::string& layer) {
        const auto it = r_.stage_of.find(layer);
        return it != r_.stage_of.end() && it->second >= first && it->second < last;
      };
    };
    const auto all = static_cast<std::uint32_t>(r_.stages.layers.size());
    if (s + 1 < all)
      for (const TensorId t : r_.crossing[s + 1])
        for (const TensorId part : lowering_.gradient_parts(t, in_stages(s + 1, all)))
          lowering_.set_value(part, Value{arrival_layout(t, s + 1), {}});
    const std::vector<graph::Segment> segs = segments(s);
    const std::size_t base = offset(s);
    for (std::size_t k = segs.size(); k-- > 0;) {
      const auto [first, last] = segs[k];
      if (recomputed(s, k + 1 == segs.size())) {
        lowering_.set_recomputing(true);
        run_layers(out, s, Pass::kRecompute, first, last);
        lowering_.set_recomputing(false);
        for (std::size_t i = first; i < last; ++i) body_.spans[base + i].recomputed = true;
      }
      for (std::size_t i = last; i-- > first;) {
        const Block& blk = r_.stages.layers[s][i];
        body_.spans[base + i].bwd.first = out.size();
        {
          const auto scope = b_.scope(blk.layer, Pass::kDataGradient, graph::info(blk.kind).kind);
          load_weights(out, loads(s)[i]);
          lowering_.backward(out, blk.layer);
        }
        body_.spans[base + i].bwd.second = out.size();
      }
    }
    const auto scope = b_.scope("", Pass::kDataGradient);
    for (const TensorId t : r_.crossing[s])
      for (const TensorId part : lowering_.gradient_parts(t, in_stages(s, s + 1)))
        (void)lowering_.value(out, part);
    body_.steps = out.size();
  }

  // Layers [first, last) of stage `s` in `pass` (forward or recompute), then every forward
  // value's pending ops applied.
  void run_layers(Steps& out, std::uint32_t s, Pass pass, std::size_t first, std::size_t last) {
    const std::size_t base = offset(s);
    for (std::size_t i = first; i < last; ++i) {
      const Block& blk = r_.stages.layers[s][i];
      auto& span = pass == Pass::kForward ? body_.spans[base + i].fwd : body_.spans[base + i].rec;
      span.first = out.size();
      {
        const auto scope = b_.scope(blk.layer, pass, graph::info(blk.kind).kind);
        load_weights(out, loads(s)[i]);
        const std::uint64_t cached = streamed_cache(blk.layer);
        if (cached > 0)
          b_.host(out, cached, trace::HostDirection::kToIpu, trace::HostMemory::kStreaming);
        lowering_.forward(out, blk.layer);
        if (cached > 0)
          b_.host(out, cached, trace::HostDirection::kFromIpu, trace::HostMemory::kStreaming);
      }
      span.second = out.size();
    }
    const auto scope = b_.scope("", pass);
    lowering_.flush_all(out);
  }

  // Where stage `s`'s layers start in layers_ (an IPU may hold none of the model's layers).
  std::size_t offset(std::uint32_t s) const {
    const std::vector<Block>& layers = r_.stages.layers[s];
    return layers.empty() ? 0 : index_.at(layers.front().layer);
  }

  // Stage `s`'s recomputation ranges (indices into its layers): between the run's checkpoints,
  // or, stashed (its backward in a later cycle than its forward), the whole stage at once.
  std::vector<graph::Segment> segments(std::uint32_t s) const {
    const std::vector<Block>& layers = r_.stages.layers[s];
    if (layers.empty()) return {};
    if (r_.stages.recompute == graph::Recompute::kEverySubLayer) {
      if (s != r_.loss) return {{0, layers.size()}};
      // The loss stage: its ops after its last sub-layer output (the final norm, the heads, the
      // loss) are not recomputed (PopART, transforms/pipeline.cpp
      // setFinalFwdStageRecomputation: "the Ops between the topologically final Checkpoints
      // and the loss ... NOT recomputed").
      std::size_t tail = layers.size();
      while (tail > 0 && !sub_layer(layers[tail - 1])) --tail;
      std::vector<graph::Segment> out;
      if (tail > 0) out.emplace_back(0, tail);
      if (tail < layers.size()) out.emplace_back(tail, layers.size());
      return out;
    }
    if (s != r_.loss && r_.stages.recompute == graph::Recompute::kCheckpoints)
      return {{0, layers.size()}};
    return graph::segments(layers, r_.run.checkpoints);
  }
  // Whether a segment is recomputed before its backward: every one but the loss stage's last
  // under checkpoints, whose activations are still live.
  bool recomputed(std::uint32_t s, bool last_segment) const {
    if (s != r_.loss || !last_segment) return true;
    // The loss stage's last segment: under kEverySubLayer, recomputed only when it is
    // made of sub-layers (a stage without heads).
    return r_.stages.recompute == graph::Recompute::kEverySubLayer &&
           sub_layer(r_.stages.layers[s].back());
  }
  // A transformer's sub-layer, whose output is a checkpoint under kEverySubLayer (not the final
  // norm or the heads).
  static bool sub_layer(const Block& blk) {
    return blk.kind == graph::Op::kAttention || blk.kind == graph::Op::kFfn ||
           blk.kind == graph::Op::kEmbedding;
  }
  // A one-stage IPU under checkpoints keeps its activations over their lifetimes; stages
  // recomputed whole hold their stashed inputs and recomputed activations instead.
  bool keeps_activations() const {
    return !r_.pipelined && r_.stages.recompute != graph::Recompute::kEverySubLayer;
  }

  // Which of the IPU's layers read each layer's output (kept_tensors).
  graph::Consumers consumers() const {
    graph::Consumers out;
    std::set<std::pair<std::string, std::size_t>> seen;
    for (const graph::Node& n : r_.graph.nodes()) {
      const auto reader = index_.find(n.layer);
      if (n.backward || reader == index_.end()) continue;
      for (const TensorId t : n.inputs) {
        const auto p = r_.graph.tensor(t).producer;
        if (r_.graph.tensor(t).role != graph::Role::kActivation || !p) continue;
        const std::string& producer = r_.graph.node(*p).layer;
        if (producer != n.layer && seen.emplace(producer, reader->second).second)
          out[producer].push_back(reader->second);
      }
    }
    for (auto& [producer, readers] : out) std::sort(readers.begin(), readers.end());
    return out;
  }

  // Where the host input lands: on the input layout of the first conv that reads it
  // (createInput), else linearly, as 8-bit values.
  Layout input_layout() {
    for (const graph::Node& n : r_.graph.nodes())
      if (n.op == graph::Primitive::kConv && !n.backward)
        if (const auto args = planned_args(r_.graph, n)) {
          const auto scope = b_.scope(n.layer, Pass::kForward, trace::OpKind::kConv);
          return b_.input_layout(*args);
        }
    return b_.linear(DType::kChar, 1, std::max<std::uint64_t>(r_.input_bytes(), 1));
  }
  // Where an inter-IPU copy lands `t` for stage `s`: on the input layout of its first reader
  // there when that is a conv reading it as its input (createInput), else linearly as rows of
  // its channels (an image's second dimension, else its last).
  Layout arrival_layout(TensorId t, std::uint32_t s) const {
    for (const graph::Node& n : r_.graph.nodes()) {
      if (n.backward || r_.stage(n.layer) != s ||
          std::find(n.inputs.begin(), n.inputs.end(), t) == n.inputs.end())
        continue;
      if (n.op == graph::Primitive::kConv && n.inputs[0] == t)
        if (const auto args = planned_args(r_.graph, n)) return b_.input_layout(*args);
      break;
    }
    return rows_of_channels(t);
  }
  Layout rows_of_channels(TensorId t) const {
    const graph::Tensor& x = r_.graph.tensor(t);
    const std::uint64_t channels = x.dims.size() == 4 ? x.dims[1] : x.dims.back();
    return b_.linear(x.dtype, graph::elements(x.dims) / channels, channels);
  }

  // One micro-batch of `t` (bytes; 0 for none).
  std::uint64_t size(std::optional<TensorId> t) const { return t ? bytes_of(r_.graph, *t) : 0; }

  // One micro-batch of what stage `s` reads from before it: what the inter-IPU copy brings, or
  // for stage 0 the host inputs as its layers read them (the images normalised) (bytes).
  std::uint64_t stage_input(std::uint32_t s) const {
    if (s > 0) return r_.bytes(r_.crossing[s]);
    std::set<TensorId> read;
    for (const graph::Node& n : r_.graph.nodes()) {
      if (n.backward || n.layer.empty() || r_.stage(n.layer) != 0) continue;
      for (const TensorId t : n.inputs) {
        const graph::Tensor& x = r_.graph.tensor(t);
        const bool preprocessed = x.producer && r_.graph.node(*x.producer).layer.empty();
        if (x.role == graph::Role::kInput || preprocessed) read.insert(t);
      }
    }
    std::uint64_t total = 0;
    for (const TensorId t : read) total += size(t);
    return total;
  }

  // Under checkpoints, inference: the largest input and output of one layer, live together.
  std::uint64_t layer_bytes() const {
    std::uint64_t most = 0;
    for (const Block& blk : layers_)
      most = std::max(most,
                      size(lowering_.input_of(blk.layer)) + size(lowering_.output_of(blk.layer)));
    return most;
  }
  // Under checkpoints, a stage recomputed whole: every activation its layers keep
  // (OpInfo::keeps_output), live at once after its recomputation; recomputed segment by segment
  // (kStashedCheckpoints), the largest segment's.
  std::uint64_t recomputed_bytes() const {
    if (r_.stages.recompute != graph::Recompute::kStashedCheckpoints) {
      std::uint64_t total = 0;
      for (const Block& blk : layers_)
        if (graph::info(blk.kind).keeps_output) total += size(lowering_.output_of(blk.layer));
      return total;
    }
    std::uint64_t most = 0;
    for (std::uint32_t s = 0; s < r_.stages.layers.size(); ++s) {
      if (r_.stages.ipu[s] != ipu_) continue;
      const std::vector<Block>& layers = r_.stages.layers[s];
      for (const auto& [first, last] : segments(s)) {
        std::uint64_t total = 0;
        for (std::size_t i = first; i < last; ++i)
          if (graph::info(layers[i].kind).keeps_output)
            total += size(lowering_.output_of(layers[i].layer));
        most = std::max(most, total);
      }
    }
    return most;
  }
  // One micro-batch of the checkpoints stage `s` stashes with its input (kStashedCheckpoints:
  // each segment's but the first's input, the checkpoint before it; bytes).
  std::uint64_t checkpoint_bytes(std::uint32_t s) const {
    if (r_.stages.recompute != graph::Recompute::kStashedCheckpoints) return 0;
    const std::vector<graph::Segment> segs = segments(s);
    std::uint64_t total = 0;
    for (std::size_t k = 1; k < segs.size(); ++k)
      total += size(lowering_.output_of(r_.stages.layers[s][segs[k].first - 1].layer));
    return total;
  }
  // Recomputing every sub-layer: the largest tensor a node of the IPU computes (a serialised
  // matmul's: one step's columns) and four of the largest sub-layer input (a stage boundary).
  std::uint64_t sub_layer_bytes() const {
    const std::set<std::string> mine = names();
    std::uint64_t most = 0, boundary = 0;
    for (const graph::Node& n : r_.graph.nodes()) {
      if (n.backward || !mine.contains(n.layer)) continue;
      for (const TensorId t : n.outputs) {
        const graph::Tensor& y = r_.graph.tensor(t);
        const std::uint64_t cols = y.dims.empty() ? 1 : y.dims.back();
        const std::uint64_t per_step =
            n.attrs.serial > 1
                ? ceil_div(std::max(cols, n.attrs.padded_columns), std::uint64_t{n.attrs.serial})
                : cols;
        most = std::max(most, size(t) / cols * per_step);
      }
    }
    for (const auto& stage : r_.stages.layers)
      for (const Block& blk : stage)
        boundary = std::max(boundary, size(lowering_.input_of(blk.layer)));
    return most + 4 * boundary;
  }

  // Every conv of the IPU planned ahead on a second thread (IpuBuilder::plan_ahead), in the
  // order the lowering asks for them: the forward convs, then (training) each conv's data and
  // weight gradients from the last back.
  void plan_ahead() {
    const std::set<std::string> mine = names();
    // Each conv, and whether its input takes a gradient (the first conv's, of the images,
    // does not: its data gradient is never planned, so neither is it planned ahead, whose
    // plan would be kept or not as the threads' timing has it).
    std::vector<std::pair<plan::ConvArgs, bool>> convs;
    for (const graph::Node& n : r_.graph.nodes())
      if (!n.backward && n.op == graph::Primitive::kConv && mine.contains(n.layer) &&
          !cuts_patches(r_.graph, n))
        if (const auto a = planned_args(r_.graph, n)) {
          b_.plan_ahead(*a);
          const auto x = graph::index(n.inputs[0]);
          convs.emplace_back(*a, x < r_.gradients.size() && r_.gradients[x].has_value());
        }
    if (r_.run.inference) return;
    for (auto it = convs.rbegin(); it != convs.rend(); ++it) {
      if (it->second) b_.plan_ahead(IpuBuilder::data_gradient_args(it->first), false, true);
      b_.plan_ahead(IpuBuilder::weight_gradient_args(it->first), true, false);
    }
  }

  std::set<std::string> names() const {
    std::set<std::string> out;
    for (const Block& blk : layers_) out.insert(blk.layer);
    return out;
  }

  bool sharded() const { return r_.run.replicated_tensor_sharding && r_.run.replicas > 1; }
  // Each replica's share of `bytes` it keeps in Streaming Memory (1/replicas, sharded).
  std::uint64_t share(std::uint64_t bytes) const {
    return sharded() ? ceil_div(bytes, r_.run.replicas) : bytes;
  }
  // `bytes` of activations to or from Streaming Memory, spread over every tile; sharded
  // (run.shard_activations), each IPU of the head group (the IPUs holding the same activations:
  // all T, or 2-D the T / hidden_parallel ones hidden_parallel apart) moves its share and a
  // load is all-gathered over them.
  void stream(Steps& out, std::uint64_t bytes, trace::HostDirection direction) {
    if (bytes == 0) return;
    const auto scope = b_.scope("", Pass::kHostIo, trace::OpKind::kCopy);
    b_.host(out, stored_activation(bytes), direction, trace::HostMemory::kStreaming);
    const graph::ReplicaIpus heads =
        graph::tensor_parallel_group(r_.run.tensor_parallel, r_.run.hidden_parallel, true);
    if (r_.run.shard_activations && direction == trace::HostDirection::kToIpu)
      out.push_back(b_.collective(trace::CollectiveOp::kAllGather, bytes, r_.m.dtype,
                                  {trace::GroupKind::kReplica, heads.size, heads.stride}));
  }
  std::uint64_t stored_activation(std::uint64_t bytes) const {
    return r_.run.shard_activations
               ? ceil_div(bytes, std::uint64_t{r_.run.tensor_parallel / r_.run.hidden_parallel})
               : bytes;
  }
  // One phase of phased training: forward, backward or (the tail) both.
  void phase(std::uint32_t s, bool fwd, bool bwd) {
    using trace::CollectiveOp, trace::HostDirection;
    Steps& out = program_.steps;
    const trace::Group replicas{trace::GroupKind::kReplicas, 0};
    const std::uint64_t weights = phase_weights_[s];
    {
      const auto scope = b_.scope("", fwd ? Pass::kForward : Pass::kDataGradient);
      load_weights(out, share(weights));
      if (sharded())
        out.push_back(b_.collective(CollectiveOp::kAllGather, weights, r_.m.dtype, replicas));
    }
    const std::uint64_t in = r_.bytes(r_.crossing[s]);
    const std::uint64_t next = s + 1 < r_.stages.layers.size() ? r_.bytes(r_.crossing[s + 1]) : 0;
    Steps body;
    stream(body, in, HostDirection::kToIpu);
    if (fwd) forward(body, s);
    if (!bwd) stream(body, next, HostDirection::kFromIpu);
    if (bwd) {
      if (!fwd) stream(body, next, HostDirection::kToIpu);  // the gradient of its output
      backward(body, s);
      stream(body, in, HostDirection::kFromIpu);  // the gradient of its input
    }
    push_repeated(out, std::move(body), r_.run.gradient_accumulation);
    if (!bwd) return;
    // Its gradients reduced over the replicas (reduce-scattered when sharded), then stored.
    const auto scope = b_.scope("", Pass::kGradientAllreduce);
    if (r_.run.replicas > 1)
      out.push_back(
          b_.collective(sharded() ? CollectiveOp::kReduceScatter : CollectiveOp::kAllReduce,
                        weights, r_.m.dtype, replicas));
    b_.host(out, share(weights), HostDirection::kFromIpu, trace::HostMemory::kStreaming);
  }
  // The weight bytes of phase `s` (each IPU's share under tensor parallelism): every weight its
  // forward reads, as stored; a tied table again in the heads' phase (popxl GPT-3 loads the
  // embedding's buffer there).
  std::uint64_t phase_weight_bytes(std::uint32_t s) const {
    std::set<std::string> layers;
    for (const Block& blk : r_.stages.layers[s]) layers.insert(blk.layer);
    std::set<std::uint32_t> seen;
    std::uint64_t bytes = 0;
    for (const graph::Node& n : r_.graph.nodes()) {
      if (n.backward || !layers.contains(n.layer)) continue;
      for (const TensorId t : n.inputs) {
        const graph::Tensor& w = r_.graph.tensor(t);
        if (w.role == graph::Role::kWeight && seen.insert(graph::index(t)).second)
          bytes += graph::elements(w.stored_dims()) * trace::dtype_bytes(w.dtype);
      }
    }
    return bytes;
  }
  // Phased training's update and memory: the optimiser over every weight (its weights, gradients
  // and state loaded from Streaming Memory and stored back, optimiser.cpp), one phase's weights
  // and gradient accumulators on the IPU at a time, one micro-batch's activations live.
  std::uint64_t phased_update_and_memory() {
    const StageWeights weights = stage_weights(r_.graph, b_, names());
    const trace::Lifetime loop_live{0, trace::program_positions(program_.steps) - 1};
    const std::uint64_t norm_bytes = lower_weight_update(
        b_, program_.steps, r_.run, weights.update(r_.m.dtype, false, r_.run.sgd_weight_decay));
    std::uint64_t activations = 0;
    for (const auto& crossing : r_.crossing) activations += r_.bytes(crossing);
    // Each phase's input and its gradient, for every micro-batch; the weights and gradients.
    const std::uint64_t total =
        std::accumulate(phase_weights_.begin(), phase_weights_.end(), std::uint64_t{0});
    b_.keep_in_streaming_memory(2 * stored_activation(activations) * r_.run.gradient_accumulation +
                                2 * share(total));
    TrainingMemory memory;
    memory.parameters = weight_buffer(phase_weights_);
    memory.dtype = r_.m.dtype;
    memory.optimiser = optimiser_memory(r_.run, weights.elements, r_.m.dtype);
    memory.live_bytes = sub_layer_bytes();
    memory.loop_live = loop_live;
    const std::uint64_t input = ipu_ == r_.stages.ipu[0] ? r_.input_bytes() : 0;
    memory.input_bytes = r_.run.io_tiles == 0 ? input : 0;
    for (const Holding& h : training_memory(memory)) b_.hold(h);
    temporaries();
    return norm_bytes;
  }

  // A layer's cached keys and values (run.kv_cache; graph inputs <layer>.k_cache and
  // .v_cache), bytes on this IPU.
  std::uint64_t cache_bytes(const std::string& layer) const {
    std::uint64_t bytes = 0;
    for (const graph::Tensor& t : r_.graph.tensors())
      if (t.role == graph::Role::kInput &&
          (t.name == layer + ".k_cache" || t.name == layer + ".v_cache"))
        bytes += graph::elements(t.dims) * trace::dtype_bytes(t.dtype);
    return bytes;
  }
  // The cache a layer loads before it runs and stores after (in Streaming Memory).
  std::uint64_t streamed_cache(const std::string& layer) const {
    return r_.run.kv_cache == KvCache::kStreaming ? cache_bytes(layer) : 0;
  }

  // Phased execution (run.weights streamed), as popxl's BERT inference runs it: before each
  // phase its weights are loaded from Streaming Memory, in sequence with the compute. A phase
  // is a layer, or an attention sub-layer with the FFN after it. The bytes each layer of
  // `blocks` loads before it runs (0: loaded with the one before).
  std::vector<std::uint64_t> phase_loads(const std::vector<Block>& blocks) {
    std::vector<std::uint64_t> out(blocks.size(), 0);
    // (phased training loads each phase's weights once, before its loop: phase())
    if (!r_.run.streamed_weights || r_.phased) return out;
    for (std::size_t i = 0; i < blocks.size(); ++i) {
      std::uint64_t bytes = 0;
      for (const HeldWeights& w : stage_weights(r_.graph, b_, {blocks[i].layer}).held)
        bytes += w.layout.elements() * trace::dtype_bytes(w.layout.dtype) * w.count;
      const bool with_attention =
          blocks[i].kind == graph::Op::kFfn && i > 0 && blocks[i - 1].kind == graph::Op::kAttention;
      out[with_attention ? i - 1 : i] += bytes;
    }
    return out;
  }
  const std::vector<std::uint64_t>& loads(std::uint32_t s) {
    auto it = loads_.find(s);
    if (it == loads_.end()) it = loads_.emplace(s, phase_loads(r_.stages.layers[s])).first;
    return it->second;
  }
  // The blocking transfer of `bytes` of weights from Streaming Memory, spread over every tile.
  void load_weights(Steps& out, std::uint64_t bytes) {
    if (bytes > 0) b_.host(out, bytes, trace::HostDirection::kToIpu, trace::HostMemory::kStreaming);
  }
  // Phased execution holds one phase's weights at a time: a buffer the size of the largest
  // phase's, spread over every tile.
  std::vector<Parameter> weight_buffer(const std::vector<std::uint64_t>& loads) {
    const std::uint64_t largest = loads.empty() ? 0 : *std::max_element(loads.begin(), loads.end());
    if (largest == 0) return {};
    return {{"streamed_buffer", b_.linear(DType::kChar, 1, largest), 1}};
  }
  void temporaries() {
    program_.tensors.push_back({"conv_temporaries", trace::TensorKind::kTemp, r_.m.dtype,
                                trace::TileRange{0, r_.chip.tiles - 1}, b_.peak_temp()});
  }

  const Replica& r_;
  std::uint32_t ipu_;
  trace::IpuProgram& program_;
  IpuBuilder& b_;
  NormLowering norms_;
  GraphLowering lowering_;
  std::vector<Block> layers_;                 // the layers of its stages, in stage order
  std::map<std::string, std::size_t> index_;  // each layer's index in layers_
  graph::Body body_;                          // where each layer's steps sit (kept_tensors)
  std::map<std::uint32_t, std::vector<std::uint64_t>> loads_;  // phase_loads by stage
  std::vector<std::uint64_t> phase_weights_;  // phase_weight_bytes by phase (run_phases)
};

}  // namespace

trace::Trace compile_replica(const ModelDef& m, const RunConfig& run, const SystemSpec& system,
                             std::vector<PlannedConv>* plans) {
  const Replica replica(m, run, system);
  trace::Trace t;
  t.name = run.name;
  t.replicas = run.replicas;
  if (replica.pipelined) t.global_exchanges = {replica.copies()};
  std::vector<std::uint64_t> norm_bytes(replica.ipus, 0), streaming(replica.ipus, 0);
  // Tensor parallelism: IPU 0's program, the same on the others (its collectives' groups are
  // relative to the IPU running them).
  const std::uint32_t copies = run.tensor_parallel;
  IpuBuilder::PlanCache plan_cache;    // the IPUs plan the same shapes
  IpuBuilder::BuildCache build_cache;  // and build the same operations
  for (std::uint32_t ipu = 0; ipu < replica.ipus; ++ipu) {
    auto& program = t.ipus.emplace_back();
    program.ipu = ipu;
    IpuBuilder b(replica.chip, program, available_memory_for(run, ipu), run.partials,
                 run.fuse_elementwise, run.rearrangements);
    b.set_coeff_load_bits(run.conv_unit_load_bits);
    b.plan_fully_connected_passes(run.fully_connected_pass && !run.inference);
    b.record_plans(plans, ipu);
    b.share_plans(&plan_cache);
    if (replica.ipus > 1) b.share_builds(&build_cache);  // (one IPU: nobody to share with)
    IpuLowering lower(replica, ipu, program, b);
    if (replica.phased)
      lower.run_phases();
    else
      lower.run_stages();
    if (run.inference)
      lower.inference_memory();
    else
      norm_bytes[ipu] = lower.weight_update_and_memory();
    streaming[ipu] = b.streaming_memory();
  }
  for (std::uint32_t k = 1; k < copies; ++k) {
    trace::IpuProgram program = t.ipus.front();
    program.ipu = k;
    t.ipus.push_back(std::move(program));
    streaming.push_back(streaming.front());
  }
  check_streaming_memory(run, system, streaming);
  if (replica.pipelined && !run.inference) {
    // What the report's pipeline analysis needs (report/pipeline.hpp): the micro-batches, each
    // stage's IPU ("0:1:2:3:0"), and each layer of a stage that is not its IPU's first, one
    // entry "STAGE:LAYER" each (keys pipeline.stage_layer.0, .1, ...).
    t.meta.emplace_back("pipeline.micro_batches", std::to_string(run.gradient_accumulation));
    std::string ipus;
    for (const std::uint32_t i : replica.stages.ipu)
      ipus += (ipus.empty() ? "" : ":") + std::to_string(i);
    t.meta.emplace_back("pipeline.stage_ipus", ipus);
    std::set<std::uint32_t> seen;
    std::size_t n = 0;
    for (std::size_t s = 0; s < replica.stages.ipu.size(); ++s)
      if (!seen.insert(replica.stages.ipu[s]).second)
        for (const Block& blk : replica.stages.layers[s])
          t.meta.emplace_back(fmt::format("pipeline.stage_layer.{}", n++),
                              fmt::format("{}:{}", s, blk.layer));
  }
  if (run.clip_gradients && !run.inference && replica.pipelined)
    for (auto& exchange : clip_copies(norm_bytes))
      t.global_exchanges.push_back(std::move(exchange));
  return t;
}

}  // namespace ipusim::compiler
