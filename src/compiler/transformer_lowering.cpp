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

#include "graph/sublayers.hpp"
#include "graph_lowering.hpp"
#include "ipu_builder.hpp"
#include "ipusim/compiler/graph/build.hpp"
#include "ipusim/util/error.hpp"
#include "ipusim/util/units.hpp"
#include "lowering.hpp"
#include "optimiser.hpp"
#include "pipeline.hpp"

namespace ipusim::compiler {
namespace {

using trace::DType;
using trace::Op;
using trace::StepKind;

// Q, K, V and output projections with biases, and the sub-layer's layer norm.
std::uint64_t transformer_attention_params(const ModelDef& m) {
  return 4 * m.hidden * m.hidden + 4 * m.hidden + 2 * m.hidden;
}
// The two FFN matmuls with biases, and the sub-layer's layer norm.
std::uint64_t transformer_ffn_params(const ModelDef& m) {
  return 2 * m.hidden * m.ffn + m.hidden + m.ffn + 2 * m.hidden;
}
// Elements of one image patch (the patch embedding's reduction width).
std::uint64_t patch_elements(const ModelDef& m) { return m.patch * m.patch * m.channels; }
// Token (`vocabulary` rows) or patch embedding (weights and bias, and the class token),
// position and segment embeddings, and (post-norm) their layer norm.
std::uint64_t transformer_embedding_params(const ModelDef& m, std::uint64_t vocabulary) {
  const std::uint64_t inputs =
      m.classifier ? patch_elements(m) * m.hidden + 2 * m.hidden : vocabulary * m.hidden;
  return inputs + (m.max_positions + m.token_types) * m.hidden + (m.pre_norm ? 0 : 2 * m.hidden);
}
// The masked-LM head's dense layer and bias, its layer norm, and the output bias over the
// stored (padded) vocabulary (its matmul is tied to the token embedding); an LM head is the
// tied matmul alone; a classifier's is its matmul and bias, a span head's too (2 outputs:
// start and end).
std::uint64_t transformer_head_params(const ModelDef& m) {
  if (m.classifier) return m.hidden * m.classes + m.classes;
  if (m.span_head) return m.hidden * 2 + 2;
  return m.lm_head ? 0 : m.hidden * m.hidden + 3 * m.hidden + m.padded_vocabulary();
}
// Pre-norm: the final layer norm after the last sub-layer.
std::uint64_t transformer_final_norm_params(const ModelDef& m) {
  return m.pre_norm ? 2 * m.hidden : 0;
}

class TransformerLowering {
 public:
  TransformerLowering(const ModelDef& m, const RunConfig& run, IpuBuilder& b)
      : m_(m), run_(run), b_(b), tokens_(run.micro_batch * m.sequence), packs_(run.micro_batch) {}

  std::uint64_t attention_params() const { return transformer_attention_params(m_); }
  std::uint64_t ffn_params() const { return transformer_ffn_params(m_); }
  // The table as stored: the vocabulary padded to the model's multiple.
  std::uint64_t embedding_params() const {
    return transformer_embedding_params(m_, m_.padded_vocabulary());
  }
  std::uint64_t head_params() const { return transformer_head_params(m_); }
  std::uint64_t final_norm_params() const { return transformer_final_norm_params(m_); }
  // Tokens the head predicts per micro-batch: every token (LM or span head), the masked ones,
  // or the class token of each image (classifier).
  // A masked-LM head predicts masked_tokens + max_sequences_per_pack - 1 tokens per pack, the
  // first positions of each (the MLPerf BERT packer puts the masked tokens first and slices
  // max_lm_predictions = 76 + 3 - 1 = 78 per pack).
  std::uint64_t masked() const {
    if (m_.lm_head || m_.span_head) return tokens_;
    if (m_.classifier) return packs_;
    return packs_ * (m_.masked_tokens + run_.max_sequences_per_pack - 1);
  }
  std::uint64_t tokens() const { return tokens_; }
  // Elements of the head's largest live tensor: one slice of the vocabulary scores, the class
  // scores, or the start and end scores.
  std::uint64_t head_elements() const {
    return masked() * (m_.classifier ? m_.classes : m_.span_head ? 2 : slice_n());
  }

  // The stage's parameters, each matrix on the layout its forward matmul created it with
  // (createWeights), `count` copies of each sub-layer's; biases and norms on the linear
  // mapping. The embedding table is the tied vocabulary matmul's weights, slice by slice.
  struct Parameter {
    std::string name;
    Layout layout;
    std::uint64_t copies;
    std::uint64_t tensors = 1;  // separate weight tensors of equal size in one copy's layout
    bool vectors = false;       // biases and norms' gamma and beta (LARS skips them)
  };
  std::vector<Parameter> parameters(std::uint64_t n_attn, std::uint64_t n_ffn, bool embeddings,
                                    bool heads, bool final_norm) {
    const std::uint64_t h = m_.hidden;
    std::vector<Parameter> out;
    auto add = [&](const std::string& name, const Layout& l, std::uint64_t copies,
                   std::uint64_t tensors = 1) {
      if (copies > 0) out.push_back({name, l, copies, tensors});
    };
    auto add_vectors = [&](const std::string& name, const Layout& l, std::uint64_t copies,
                           std::uint64_t tensors = 1) {
      if (copies > 0) out.push_back({name, l, copies, tensors, /*vectors=*/true});
    };
    // Q, K and V: one [h, 3h] tensor, or three (run.split_qkv), feeding one matmul either way
    // (MLPerf v1.1 Graphcore bert_model.py qkv_weights concatenates the split ones).
    add("attention/qkv", b_.weights_layout(mm(tokens_, 3 * h, h)), n_attn, run_.split_qkv ? 3 : 1);
    add("attention/out", b_.weights_layout(mm(tokens_, h, h)), n_attn);
    // The QKV bias (one tensor of 3h), the output bias, layer-norm gamma and beta: 4 tensors
    // (taken as equal in size: 6h / 4 elements each)
    add_vectors("attention/vectors", b_.linear(m_.dtype, 1, 4 * h + 2 * h), n_attn, 4);
    add("ffn/in", b_.weights_layout(mm(tokens_, m_.ffn, h)), n_ffn);
    add("ffn/out", b_.weights_layout(mm(tokens_, h, m_.ffn)), n_ffn);
    // the two biases, layer-norm gamma and beta
    add_vectors("ffn/vectors", b_.linear(m_.dtype, 1, h + m_.ffn + 2 * h), n_ffn, 4);
    if (embeddings && m_.classifier) {
      add("embedding/patches", b_.weights_layout(patch_matmul()), 1);
      // position embeddings, the class token and the patch embedding's bias
      add("embedding/positions", b_.linear(m_.dtype, m_.max_positions + m_.token_types + 2, h), 1);
    } else if (embeddings) {
      add("embedding/table", b_.weights_layout(mm(masked(), slice_n(), h)),
          run_.embedding_serialisation);
      // position and token-type tables
      add("embedding/positions", b_.linear(m_.dtype, m_.max_positions + m_.token_types, h), 1, 2);
    }
    if (heads && m_.classifier) {
      add("heads/classifier", b_.weights_layout(mm(masked(), m_.classes, h)), 1);
      add_vectors("heads/bias", b_.linear(m_.dtype, 1, m_.classes), 1);
    } else if (heads && m_.span_head) {
      add("heads/span", b_.weights_layout(mm(tokens_, 2, h)), 1);
      add_vectors("heads/bias", b_.linear(m_.dtype, 1, 2), 1);
    } else if (heads && !m_.lm_head) {
      add("heads/dense", b_.weights_layout(mm(tokens_, h, h)), 1);
      // the dense layer's bias, the layer norm's gamma and beta; the output bias
      add_vectors("heads/vectors", b_.linear(m_.dtype, 1, 3 * h), 1, 3);
      add_vectors("heads/bias", b_.linear(m_.dtype, 1, m_.padded_vocabulary()), 1);
    }
    if (final_norm && m_.pre_norm)
      add_vectors("final_norm/vectors", b_.linear(m_.dtype, 1, 2 * h), 1, 2);
    return out;
  }

  // Columns of one serialised slice of the (padded) vocabulary matmul.
  std::uint64_t slice_n() const {
    return ceil_div(m_.padded_vocabulary(), run_.embedding_serialisation);
  }

  // The stage input (an inter-IPU copy, or the embeddings' output) on the linear layout.
  Value stage_input() const { return Value{b_.linear(m_.dtype, tokens_, m_.hidden), {}}; }

  // The images of a micro-batch as the patch embedding reads them: [patches, patch elements]
  // per image, created for the matmul (createInput), where the host stream lands.
  Layout image_layout() { return b_.input_layout(patch_matmul()); }
  // The patch embedding of a micro-batch: [images x patches, patch elements] x [patch
  // elements, hidden] (a patch x patch conv with stride patch is that matmul).
  plan::ConvArgs patch_matmul() const {
    return mm(packs_ * m_.patches(), m_.hidden, patch_elements(m_));
  }

  // Bytes of one micro-batch's predictions: a 32-bit token id per predicted token (the heads
  // compute the vocabulary scores on the IPU; only the chosen ids go back), or a span head's
  // two 16-bit scores per token.
  std::uint64_t output_bytes() const { return masked() * 4; }
  // compiler::flush (lowering.hpp) with this lowering's builder.
  void flush(Steps& out, Value& v) { compiler::flush(b_, out, v); }

 private:
  plan::ConvArgs mm(std::uint64_t m, std::uint64_t n, std::uint64_t k) const {
    return IpuBuilder::matmul_args(m, n, k, m_.dtype);
  }
  const ModelDef& m_;
  const RunConfig& run_;
  IpuBuilder& b_;
  std::uint64_t tokens_;
  std::uint64_t packs_;
};

}  // namespace

namespace {

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
        lower_(pl.m, pl.run, b),
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
      b_.host(program_.steps, lower_.output_bytes(), trace::HostDirection::kFromIpu,
              trace::HostMemory::kHost);
    }
    lay_out_parameters();
    if (run_.streamed_weights) {  // every phase's weights stay in Streaming Memory
      const std::vector<std::uint64_t> loads = phase_loads(blocks_);
      b_.keep_in_streaming_memory(std::accumulate(loads.begin(), loads.end(), std::uint64_t{0}));
    }
    InferenceMemory memory;
    memory.parameters = run_.streamed_weights ? weight_buffer() : held_parameters();
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
  using Parameters = std::vector<TransformerLowering::Parameter>;

  // One micro-batch of host input, on the layout of its first reader: the images on the patch
  // embedding's input layout, token ids linearly.
  std::uint64_t input_bytes() const { return run_.micro_batch * run_.input_bytes_per_sample; }
  Layout input_layout() {
    return m_.classifier ? lower_.image_layout()
                         : b_.linear(DType::kChar, 1, std::max<std::uint64_t>(input_bytes(), 1));
  }
  // The stage's weight tensors, laid out once (after its stages, as their convs are planned).
  const Parameters& parameters() const { return parameters_; }
  void lay_out_parameters() {
    parameters_ = lower_.parameters(n_attn_, n_ffn_, first_, heads_, last_);
  }
  // The weight tensors as the memory passes take them (memory.hpp).
  std::vector<Parameter> held_parameters() const {
    std::vector<Parameter> out;
    for (const auto& param : parameters_) out.push_back({param.name, param.layout, param.copies});
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
  // The largest sub-layer's live activations (the heads' IPU: or one slice of the vocabulary
  // scores, when larger: an LM head's over every token) and four stage boundaries.
  std::uint64_t live_bytes() const {
    const std::uint64_t heads_rows = run_.micro_batch * m_.heads * m_.sequence;
    return std::max({heads_rows * m_.sequence * pl_.eb, lower_.tokens() * m_.ffn * pl_.eb,
                     heads_ ? lower_.head_elements() * pl_.eb : 0}) +
           4 * pl_.acts;
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
    lower_.flush(out, v);
  }

  // The weight tensors of one sub-layer of this stage (parameters(): one attention or FFN
  // sub-layer, the embeddings, the heads or the final norm), in bytes.
  std::uint64_t block_bytes(graph::Op kind) {
    const bool attn = kind == graph::Op::kAttention, ffn = kind == graph::Op::kFfn;
    std::uint64_t total = 0;
    for (const auto& param :
         lower_.parameters(attn ? 1 : 0, ffn ? 1 : 0, kind == graph::Op::kEmbedding,
                           kind == graph::Op::kHeads, kind == graph::Op::kFinalNorm))
      total += param.layout.elements() * trace::dtype_bytes(param.layout.dtype) * param.copies;
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
        out[i - 1] += block_bytes(graph::Op::kFfn);
      else
        out[i] = block_bytes(blocks[i].kind);
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
    Value x = lower_.stage_input();
    run_blocks(out, selected(embedding, body), pass, x, /*forward=*/true);
  }

  // Pipeline recomputation: the forward again, then the backward in reverse order.
  void backward(Steps& out, bool embedding = true, bool body = true) {
    forward(out, trace::Pass::kRecompute, embedding, body);
    auto blocks = selected(embedding, body);
    std::reverse(blocks.begin(), blocks.end());
    Value g = lower_.stage_input();
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

  // The stage's parameters in elements (all its weight tensors).
  std::uint64_t params() const {
    std::uint64_t n = n_attn_ * lower_.attention_params() + n_ffn_ * lower_.ffn_params();
    if (first_) n += lower_.embedding_params();
    if (heads_) n += lower_.head_params();
    if (last_) n += lower_.final_norm_params();
    return n;
  }

  // The weight update of the stage's weight tensors (optimiser.hpp): each parameter's equal
  // tensors as one loop. Returns the bytes of weight-tensor norms it sends for gradient
  // clipping.
  std::uint64_t weight_update() {
    WeightUpdate update;
    update.parameters = params();
    update.dtype = m_.dtype;
    update.pipelined = pl_.pipelined;
    for (const auto& param : parameters())
      update.weights.push_back({IpuBuilder::part(param.layout, param.tensors),
                                param.layout.elements() / param.tensors,
                                param.copies * param.tensors, !param.vectors});
    return lower_weight_update(b_, program_.steps, run_, update);
  }

  // Memory (stage_training_memory): weights and gradient accumulators, optimiser state unless
  // streamed, stashed stage inputs and the largest sub-layer's live activations (during the
  // pipeline loop), the input buffer; then the planner's temporaries.
  void memory(const trace::Lifetime& loop_live) {
    StageMemory s;
    s.parameters = held_parameters();
    s.dtype = m_.dtype;
    s.stages_to_end = first_ ? 0 : pl_.p - ipu_;
    s.stage_input_bytes = pl_.acts;
    s.live_bytes = live_bytes();
    s.input_bytes = first_ ? input_bytes() : 0;
    s.optimiser = optimiser_memory(run_, params(), m_.dtype);
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
  TransformerLowering lower_;
  GraphLowering graph_;  // the sub-layers lowered from the tensor graph
  std::uint32_t n_attn_, n_ffn_;
  bool first_, last_, heads_;
  std::vector<graph::Block> blocks_;  // the sub-layers it runs, in forward order
  Parameters parameters_;
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
