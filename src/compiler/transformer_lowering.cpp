// SPDX-License-Identifier: Apache-2.0
// Lowering of a transformer training step (BERT-Large, GPT-2, ViT): pipelined over the IPUs of a
// replica, pipeline recomputation, then the gradient all-reduce (or reduce-scatter under
// replicated tensor sharding) and the optimiser (docs/workloads.md). Every sub-layer (the
// embedding, the encoder layers' attention and FFN, a pre-norm model's final layer norm, the
// heads) is its nodes of the model's tensor graph, lowered by GraphLowering
// (graph_lowering.hpp): matmuls planned where their operands lie, attention per head as
// grouped matmuls, elementwise chains fused where their operand lives, layer-norm and softmax
// statistics reduced among the tiles holding each row. What is still computed here from the
// model's sizes: the stages' weight tensors, their memory and the weight update.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <numeric>
#include <set>

#include "graph/sublayers.hpp"
#include "graph_lowering.hpp"
#include "ipu_builder.hpp"
#include "ipusim/compiler/graph/build.hpp"
#include "ipusim/util/error.hpp"
#include "ipusim/util/units.hpp"
#include "lowering.hpp"
#include "optimiser.hpp"
#include "pipeline.hpp"
#include "weights.hpp"

namespace ipusim::compiler {
namespace {

using trace::DType;
using trace::Op;
using trace::StepKind;

void check_placement(const ModelDef& m, const RunConfig& run) {
  if (run.placement.size() != run.ipus_per_replica)
    throw ConfigError(
        fmt::format("{}: run.pipeline_placement: a transformer needs a placement for each of "
                    "the {} IPUs of a replica",
                    run.file, run.ipus_per_replica));
  std::uint64_t attn = 0, ffn = 0;
  for (const auto& [a, f] : run.placement) {
    attn += a;
    ffn += f;
  }
  if (attn != m.encoder_layers || ffn != m.encoder_layers)
    throw ConfigError(
        fmt::format("{}: run.pipeline_placement places {} attention and {} FFN sub-layers; "
                    "{} has {} of each",
                    run.file, attn, ffn, m.file, m.encoder_layers));
  graph::check_stage_chain(m, run);
}

// What every IPU of a transformer replica shares: the model, run, chip and pipeline shape.
struct Pipeline {
  const ModelDef& m;
  const RunConfig& run;
  const SystemSpec& system;
  ChipSpec chip;
  std::uint32_t p;     // IPUs per replica
  bool pipelined;      // more than one IPU: stage boundaries and inter-IPU copies
  std::uint64_t eb;    // bytes per element of the model's dtype
  std::uint64_t acts;  // one micro-batch's activations at a stage boundary (bytes)
  std::uint64_t loss_stage;
  std::uint64_t training_cycles;
  bool clip;  // gradient clipping by global norm
  // The IPU of each forward stage (ipu_stages): IPU 0's embedding, IPU 1 .. p-1, then with a
  // tied head IPU 0 again for its last layers, the heads and the loss.
  std::vector<std::uint32_t> stage_ipus;
  // The model's tensor graph for one micro-batch, with its backward when training, and each
  // tensor's gradient: what the sub-layers lowered from the graph read.
  graph::TensorGraph graph;
  graph::Gradients gradients;

  Pipeline(const ModelDef& model, const RunConfig& r, const SystemSpec& s)
      : m(model),
        run(r),
        system(s),
        chip(compute_chip(r, s.chip)),
        p(r.ipus_per_replica),
        pipelined(p > 1),
        eb(trace::dtype_bytes(model.dtype)),
        acts(r.micro_batch * model.sequence * model.hidden * eb),
        // The pipeline schedule (pipeline.hpp) with the tied heads on IPU 0: the forward stages
        // are IPU 0's embedding (0), IPU 1 .. p-1 (1 .. p-1) and IPU 0's last layers, heads and
        // loss (L = p), so 2p + 1 stages and GA + 2p cycles; with a classifier or a span head on
        // the last IPU, L = p - 1 and GA + 2p - 2 cycles.
        loss_stage(pipelined ? (model.head_on_last_ipu() ? p - 1 : p) : 0),
        training_cycles(pipeline_cycles(r.gradient_accumulation, loss_stage)),
        clip(r.clip_gradients && !r.inference) {
    for (std::uint32_t i = 0; i < (pipelined ? p : 1); ++i) stage_ipus.push_back(i);
    if (pipelined && !model.head_on_last_ipu()) stage_ipus.push_back(0);
    graph::BuildOptions options;
    options.batch = r.micro_batch;
    options.training = !r.inference;
    if (model.masked_tokens > 0)
      options.masked_tokens = model.masked_tokens + r.max_sequences_per_pack - 1;
    options.vocabulary_serial = r.embedding_serialisation;
    options.split_qkv = r.split_qkv;
    graph = graph::build_graph(model, options);
    if (options.training) (void)graph::add_backward(graph, graph::loss_of(graph), &gradients);
  }

  // Activations travel IPU0 -> IPU1 -> ... -> IPU(p-1) -> IPU0 (the tied head on IPU 0);
  // gradients the other way. A classifier's or span head is on the last IPU: its ring is open.
  std::vector<trace::GlobalExchange> stage_copies() const {
    if (!pipelined) return {};
    std::vector<trace::IpuCopy> forward;
    for (std::uint32_t i = 0; i < (m.head_on_last_ipu() ? p - 1 : p); ++i)
      forward.push_back({i, (i + 1) % p, acts});
    return {pipeline_copies(forward, !run.inference)};
  }
};

// One IPU's program of a transformer replica: its pipeline stages (forward, recomputation and
// backward of the sub-layers placed on it), the pipeline loop, the weight update and memory.
class StageProgram {
 public:
  StageProgram(const Pipeline& pl, std::uint32_t ipu, trace::IpuProgram& program, IpuBuilder& b)
      : pl_(pl),
        m_(pl.m),
        run_(pl.run),
        ipu_(ipu),
        program_(program),
        b_(b),
        graph_(pl.graph, pl.gradients, b),
        n_attn_(pl.run.placement[ipu].first),
        n_ffn_(pl.run.placement[ipu].second),
        first_(ipu == 0),
        last_(ipu + 1 == pl.p),
        heads_(pl.m.head_on_last_ipu() ? last_ : first_),  // a tied head sits with the embedding
        blocks_(graph::stage_blocks(pl.m, pl.run, ipu)) {}

  // Forward only, weights resident: one batch per replica through the pipeline (its cycles:
  // the batch plus the fill of the stages after the first). The batch's input comes in once,
  // before the pipeline cycles; the predictions go back once, after them.
  void inference() {
    Steps fwd;
    forward(fwd, trace::Pass::kForward);
    if (first_) {
      const auto scope = b_.scope("", trace::Pass::kHostIo, trace::OpKind::kCopy);
      stream_input(b_, program_.steps, run_, input_layout(), input_bytes(), pl_.system.chip.tiles);
    }
    trace::Step loop = make_step(StepKind::kRepeat);
    loop.count = run_.gradient_accumulation + pl_.p - 1;
    loop.body = std::move(fwd);
    if (pl_.pipelined) loop.body.push_back(make_step(StepKind::kGlobalExchange, 0));
    program_.steps.push_back(std::move(loop));
    if (heads_) {
      const auto scope = b_.scope("", trace::Pass::kHostIo, trace::OpKind::kCopy);
      b_.host(program_.steps, output_bytes(), trace::HostDirection::kFromIpu,
              trace::HostMemory::kHost);
    }
    lay_out_parameters();
    if (run_.streamed_weights) {  // every phase's weights stay in Streaming Memory
      const std::vector<std::uint64_t> loads = phase_loads(blocks_);
      b_.keep_in_streaming_memory(std::accumulate(loads.begin(), loads.end(), std::uint64_t{0}));
    }
    InferenceMemory memory;
    memory.parameters = run_.streamed_weights ? weight_buffer() : weights_.parameters();
    memory.dtype = m_.dtype;
    memory.live_bytes = live_bytes();
    memory.input_bytes = first_ ? input_bytes() : 0;
    for (const Holding& h : inference_memory(memory)) b_.hold(h);
    temporaries();
  }

  // A training step: the pipeline loop of this IPU's stages, then the weight update.
  // Returns the bytes of weight-tensor norms it sends for gradient clipping (0 without).
  std::uint64_t training() {
    schedule(stages());
    // The activations live while the pipeline loop runs (positions up to its last), not during
    // the weight update.
    const trace::Lifetime loop_live{0, trace::program_positions(program_.steps) - 1};
    lay_out_parameters();
    const std::uint64_t norm_bytes = weight_update();
    memory(loop_live);
    return norm_bytes;
  }

 private:
  // One micro-batch of host input, on the layout of its first reader: images on the input
  // layout the first conv creates for them (createInput), token ids linearly.
  std::uint64_t input_bytes() const { return run_.micro_batch * run_.input_bytes_per_sample; }
  Layout input_layout() {
    for (const graph::Node& n : pl_.graph.nodes())
      if (n.op == graph::Primitive::kConv && !n.backward)
        if (const auto args = planned_args(pl_.graph, n)) return b_.input_layout(*args);
    return b_.linear(DType::kChar, 1, std::max<std::uint64_t>(input_bytes(), 1));
  }
  // Bytes of one micro-batch's predictions: 32 bits per row of the model's output (the heads
  // compute the scores on the IPU; only the chosen token id or class goes back, or a span
  // head's start and end scores, 16 bits each).
  std::uint64_t output_bytes() const {
    const graph::Dims& y = pl_.graph.tensor(pl_.graph.nodes().back().outputs[0]).dims;
    return graph::elements(y) / y.back() * 4;
  }
  // The stage's weight tensors (weights.hpp), laid out once (after its stages, as their
  // matmuls are planned).
  void lay_out_parameters() { weights_ = stage_weights(pl_.graph, b_, layers(blocks_)); }
  static std::set<std::string> layers(const std::vector<graph::Block>& blocks) {
    std::set<std::string> out;
    for (const auto& blk : blocks) out.insert(blk.layer);
    return out;
  }
  // Phased execution holds one phase's weights at a time: a buffer the size of the largest
  // phase's, spread over every tile.
  std::vector<Parameter> weight_buffer() {
    const std::vector<std::uint64_t> loads = phase_loads(blocks_);
    const std::uint64_t largest = loads.empty() ? 0 : *std::max_element(loads.begin(), loads.end());
    if (largest == 0) return {};
    return {{"streamed_buffer", b_.linear(DType::kChar, 1, largest), 1}};
  }
  // The largest activation the stage's sub-layers compute (a serialised matmul's: one step's
  // columns; the attention scores, an FFN's hidden layer or a slice of the vocabulary scores)
  // and four stage boundaries, in bytes.
  std::uint64_t live_bytes() const {
    const std::set<std::string> mine = layers(blocks_);
    std::uint64_t most = 0;
    for (const graph::Node& n : pl_.graph.nodes()) {
      if (n.backward || !mine.contains(n.layer)) continue;
      for (const graph::TensorId t : n.outputs) {
        const graph::Tensor& y = pl_.graph.tensor(t);
        const std::uint64_t cols = y.dims.empty() ? 1 : y.dims.back();
        const std::uint64_t step_cols =
            ceil_div(std::max(cols, n.attrs.padded_columns), std::max(1U, n.attrs.serial));
        const std::uint64_t per_step = n.attrs.serial > 1 ? step_cols : cols;
        most =
            std::max(most, graph::elements(y.dims) / cols * per_step * trace::dtype_bytes(y.dtype));
      }
    }
    return most + 4 * pl_.acts;
  }
  void temporaries() {
    program_.tensors.push_back({"matmul_temporaries", trace::TensorKind::kTemp, m_.dtype,
                                trace::TileRange{0, pl_.chip.tiles - 1}, b_.peak_temp()});
  }

  // The stage's blocks that `embedding` and `body` (the stage's other sub-layers) select: IPU 0
  // of a pipeline with tied heads runs them in different pipeline stages.
  std::vector<graph::Block> selected(bool embedding, bool body) const {
    std::vector<graph::Block> out;
    for (const auto& blk : blocks_)
      if (blk.kind == graph::Op::kEmbedding ? embedding : body) out.push_back(blk);
    return out;
  }

  // A stage's value is flushed at its end within the scope of the sub-layer that ends the model
  // in that direction (the heads forward, the embedding backward) when the stage runs it.
  void run_blocks(Steps& out, const std::vector<graph::Block>& blocks, trace::Pass pass, Value& v,
                  bool forward) {
    const graph::Op end = forward ? graph::Op::kHeads : graph::Op::kEmbedding;
    const bool ends = !blocks.empty() && blocks.back().kind == end;
    const std::vector<std::uint64_t> loads = phase_loads(blocks);
    for (std::size_t i = 0; i + (ends ? 1 : 0) < blocks.size(); ++i) {
      const auto scope = b_.scope(blocks[i].layer, pass, graph::info(blocks[i].kind).kind);
      load_weights(out, loads[i]);
      lower_block(out, blocks[i], v, forward);
    }
    const auto scope =
        ends ? b_.scope(blocks.back().layer, pass, graph::info(end).kind) : b_.scope("", pass);
    if (ends) load_weights(out, loads.back());
    if (ends) lower_block(out, blocks.back(), v, forward);
    compiler::flush(b_, out, v);
  }

  // The bytes of the weight tensors of one sub-layer (those it reads first).
  std::uint64_t block_bytes(const graph::Block& block) {
    std::uint64_t total = 0;
    for (const HeldWeights& w : stage_weights(pl_.graph, b_, {block.layer}).held)
      total += w.layout.elements() * trace::dtype_bytes(w.layout.dtype) * w.count;
    return total;
  }
  // Phased execution (run.weights streamed), as popxl's BERT inference runs it: before each
  // phase its weights are loaded from Streaming Memory, in sequence with the compute. A phase
  // is an encoder layer (an attention sub-layer with the FFN after it), the embeddings or the
  // heads; an FFN without its attention here is a phase of its own. The bytes each block of
  // `blocks` loads before it runs (0: loaded with the block before).
  std::vector<std::uint64_t> phase_loads(const std::vector<graph::Block>& blocks) {
    std::vector<std::uint64_t> out(blocks.size(), 0);
    if (!run_.streamed_weights) return out;
    for (std::size_t i = 0; i < blocks.size(); ++i) {
      const bool with_attention =
          blocks[i].kind == graph::Op::kFfn && i > 0 && blocks[i - 1].kind == graph::Op::kAttention;
      if (with_attention)
        out[i - 1] += block_bytes(blocks[i]);
      else
        out[i] = block_bytes(blocks[i]);
    }
    return out;
  }
  // The blocking transfer of `bytes` of weights from Streaming Memory, spread over every tile.
  void load_weights(Steps& out, std::uint64_t bytes) {
    b_.host(out, bytes, trace::HostDirection::kToIpu, trace::HostMemory::kStreaming);
  }

  // One sub-layer's forward or backward lowering.
  void lower_block(Steps& out, const graph::Block& block, Value& v, bool forward) {
    switch (block.kind) {
      case graph::Op::kHeads:
      case graph::Op::kEmbedding:
      case graph::Op::kAttention:
      case graph::Op::kFfn:
      case graph::Op::kFinalNorm:
        return forward ? graph_.forward(out, block.layer, v) : graph_.backward(out, block.layer, v);
      case graph::Op::kConv:  // a CNN's ops: no transformer sub-layer is one
      case graph::Op::kDwconv:
      case graph::Op::kBatchNorm:
      case graph::Op::kGroupNorm:
      case graph::Op::kRelu:
      case graph::Op::kSwish:
      case graph::Op::kSigmoid:
      case graph::Op::kConcat:
      case graph::Op::kUpsample:
      case graph::Op::kMaxPool:
      case graph::Op::kAdd:
      case graph::Op::kScale:
      case graph::Op::kAvgPool:
      case graph::Op::kFc:
      case graph::Op::kSoftmaxLoss:
      case graph::Op::kCount:
        break;
    }
    throw Error(fmt::format("op {} is not a transformer sub-layer", graph::name(block.kind)));
  }

  // The stage's forward (in `pass`: forward or recompute) of the blocks selected.
  void forward(Steps& out, trace::Pass pass, bool embedding = true, bool body = true) {
    const auto blocks = selected(embedding, body);
    Value x = arriving(blocks.empty() ? std::nullopt : graph_.input_of(blocks.front().layer));
    run_blocks(out, blocks, pass, x, /*forward=*/true);
  }
  // What an inter-IPU copy delivers to a stage: the tensor `t` (none: nothing), linearly.
  Value arriving(std::optional<graph::TensorId> t) const {
    if (!t || pl_.graph.tensor(*t).dims.empty()) return Value{};
    return Value{graph_.rows_layout(*t), {}};
  }

  // Pipeline recomputation: the forward again, then the backward in reverse order.
  void backward(Steps& out, bool embedding = true, bool body = true) {
    forward(out, trace::Pass::kRecompute, embedding, body);
    auto blocks = selected(embedding, body);
    std::reverse(blocks.begin(), blocks.end());
    // The gradient of the last sub-layer's output (of the loss: not read).
    Value g = arriving(blocks.empty() ? std::nullopt
                                      : std::optional(graph_.output_of(blocks.front().layer)));
    run_blocks(out, blocks, trace::Pass::kDataGradient, g, /*forward=*/false);
  }

  using Stage = PipelineStage;

  // The blocks of forward stage `s` this IPU holds: all its blocks, or, on IPU 0 of a pipeline
  // with tied heads, the embedding (stage 0) or the rest (the loss stage).
  std::pair<bool, bool> part(std::uint32_t s) const {
    const bool split = first_ && pl_.pipelined && !m_.head_on_last_ipu();
    return split ? std::pair{s == 0, s != 0} : std::pair{true, true};
  }

  // This IPU's pipeline stages, in stage order (ipu_stages): each forward stage it holds, and
  // its backward (pipeline recomputation: the forward again, then the backward), the loss
  // stage's as one.
  std::vector<Stage> stages() {
    std::vector<Stage> out;
    for (const StageSlot& slot : ipu_stages(pl_.stage_ipus, ipu_, /*training=*/true)) {
      const auto [embedding, body] = part(slot.forward_stage);
      Stage st{{}, slot.start};
      if (slot.forward) forward(st.steps, trace::Pass::kForward, embedding, body);
      if (slot.backward) backward(st.steps, embedding, body);
      out.push_back(std::move(st));
    }
    return out;
  }

  // The pipeline loops of this IPU's stages (pipeline_loops), appended to its program; the
  // micro-batch's host input precedes forward stage 0 (IPU 0's first stage).
  void schedule(std::vector<Stage> stages) {
    const std::uint64_t ga = run_.gradient_accumulation;
    if (first_) {
      Steps input;
      {
        const auto scope = b_.scope("", trace::Pass::kHostIo, trace::OpKind::kCopy);
        stream_input(b_, input, run_, input_layout(), input_bytes(), pl_.system.chip.tiles);
      }
      stages.front().steps.insert(stages.front().steps.begin(), input.begin(), input.end());
    }
    for (auto& loop :
         pipeline_loops(stages, ga, pl_.pipelined ? pl_.training_cycles : ga, pl_.pipelined))
      program_.steps.push_back(std::move(loop));
  }

  // The weight update of the stage's weight tensors (optimiser.hpp). Returns the bytes of
  // weight-tensor norms it sends for gradient clipping.
  std::uint64_t weight_update() {
    return lower_weight_update(b_, program_.steps, run_,
                               weights_.update(m_.dtype, pl_.pipelined, /*sgd_decay=*/true));
  }

  // Memory (stage_training_memory): weights and gradient accumulators, optimiser state unless
  // streamed, stashed stage inputs and the largest sub-layer's live activations (during the
  // pipeline loop), the input buffer; then the planner's temporaries.
  void memory(const trace::Lifetime& loop_live) {
    StageMemory s;
    s.parameters = weights_.parameters();
    s.dtype = m_.dtype;
    s.stages_to_end = first_ ? 0 : pl_.p - ipu_;
    s.stage_input_bytes = pl_.acts;
    s.live_bytes = live_bytes();
    s.input_bytes = first_ ? input_bytes() : 0;
    s.optimiser = optimiser_memory(run_, weights_.elements, m_.dtype);
    s.loop_live = loop_live;
    for (const Holding& h : stage_training_memory(s)) b_.hold(h);
    temporaries();
  }

  const Pipeline& pl_;
  const ModelDef& m_;
  const RunConfig& run_;
  std::uint32_t ipu_;
  trace::IpuProgram& program_;
  IpuBuilder& b_;
  GraphLowering graph_;  // the sub-layers lowered from the tensor graph
  std::uint32_t n_attn_, n_ffn_;
  bool first_, last_, heads_;
  std::vector<graph::Block> blocks_;  // the sub-layers it runs, in forward order
  StageWeights weights_;
};

}  // namespace

trace::Trace compile_transformer(const ModelDef& m, const RunConfig& run, const SystemSpec& system,
                                 std::vector<PlannedConv>* plans) {
  check_placement(m, run);
  const Pipeline pipeline(m, run, system);
  trace::Trace t;
  t.name = run.name;
  t.replicas = run.replicas;
  t.global_exchanges = pipeline.stage_copies();
  std::vector<std::uint64_t> norm_bytes(pipeline.p, 0), streaming(pipeline.p, 0);
  IpuBuilder::PlanCache plan_cache;  // the stages plan the same shapes
  for (std::uint32_t ipu = 0; ipu < pipeline.p; ++ipu) {
    auto& program = t.ipus.emplace_back();
    program.ipu = ipu;
    IpuBuilder b(pipeline.chip, program, available_memory_for(run, ipu), run.partials,
                 run.fuse_elementwise, run.rearrangements);
    b.set_coeff_load_bits(run.conv_unit_load_bits);
    b.plan_fully_connected_passes(run.fully_connected_pass && !run.inference);
    b.record_plans(plans, ipu);
    b.share_plans(&plan_cache);
    StageProgram stage(pipeline, ipu, program, b);
    if (run.inference)
      stage.inference();
    else
      norm_bytes[ipu] = stage.training();
    streaming[ipu] = b.streaming_memory();
  }
  check_streaming_memory(run, system, streaming);
  if (pipeline.clip && pipeline.pipelined)
    for (auto& exchange : clip_copies(norm_bytes))
      t.global_exchanges.push_back(std::move(exchange));
  return t;
}

}  // namespace ipusim::compiler
