// SPDX-License-Identifier: Apache-2.0
// The workload compiler: lowers one training step of a model (models/*.yaml) under a run
// configuration (configs/runs/*.yaml) onto a chip and system into a program trace
// (docs/workloads.md). It re-plans every convolution and matmul for the chip it is given, so
// what-if chips get their own mapping.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ipusim/compiler/graph/op.hpp"
#include "ipusim/config/config.hpp"
#include "ipusim/config/system_spec.hpp"
#include "ipusim/plan/conv.hpp"
#include "ipusim/trace/program.hpp"

namespace ipusim::compiler {

namespace onnx {
struct Graph;
}

// One layer of a CNN model file.
struct Layer {
  std::string name;
  graph::Op op = graph::Op::kConv;  // its row in graph::kOps (docs/models.md)
  std::string input;                // producer (default: the previous layer)
  std::string other;      // the op's second operand (graph::OpInfo::other), "" if it takes none
  std::uint64_t out = 0;  // conv/fc: output channels (dwconv: 0 = its input channels)
  std::uint64_t kernel = 1;
  std::uint64_t stride = 1;
  std::uint64_t group_size = 0;  // conv/dwconv: input channels per group (0: all, dense)
  std::uint64_t factor = 1;      // upsample: the height and width multiplier
  std::string at;                // "file:line:column" of its entry, for errors
};

// A model family's name as model files spell it (model.family): cnn or transformer.
std::string_view family_name(graph::Family family);

// The most layers a model may have, written out, in repeated blocks or imported from ONNX.
inline constexpr std::uint64_t kMaxModelLayers = 100000;

struct ModelDef {
  std::string file;
  std::string name;
  graph::Family family = graph::Family::kCnn;
  // family kGraph: the ONNX graph it was imported from (its tensor graph is built from it for
  // each batch); `layers` are its nodes, `height`, `width`, `channels` its images (if any) and
  // `classes` its scores' last dimension. `notes` say what the import changed or approximated.
  std::shared_ptr<const onnx::Graph> onnx;
  std::vector<std::string> notes;
  trace::DType dtype = trace::DType::kHalf;
  // cnn (and an image transformer's input)
  std::uint64_t height = 0, width = 0, channels = 0, classes = 0;
  std::uint64_t depthwise_group_size = 1;  // a dwconv's channels per group (1: depthwise)
  std::uint64_t norm_groups = 0;           // a groupnorm layer's groups (0: none given)
  std::vector<Layer> layers;
  // transformer
  std::uint64_t encoder_layers = 0, hidden = 0, heads = 0, ffn = 0, vocabulary = 0, sequence = 0,
                masked_tokens = 0, max_positions = 0;
  // Attention with a causal mask (an elementwise add on the scores before the softmax).
  bool causal = false;
  // A padding or packing mask added to the scores before the softmax (BERT's AttentionMask and
  // ApplyMask ops), as the causal mask is added.
  bool attention_mask = false;
  // Dropout on the attention probabilities in training (Graphcore's MLPerf BERT has none).
  bool attention_dropout = true;
  // Dropout on the embeddings' and each sub-layer's output in training (model.dropout; GPT-J's
  // configuration has none).
  bool hidden_dropout = true;
  // Layer norm before each sub-layer and once after the last (GPT-2), instead of after each
  // sub-layer and after the embeddings (BERT).
  bool pre_norm = false;
  // The language-model head predicts every token with the tied embedding only (GPT-2);
  // otherwise the masked-LM head (dense, GELU, layer norm, bias) on the masked tokens.
  bool lm_head = false;
  // An image classifier (ViT): the `height` x `width` x `channels` input is cut into `patch` x
  // `patch` patches, embedded by one matmul, with a class token in front; the head classifies
  // the class token into `classes`.
  bool classifier = false;
  // A span head (question answering, BERT's SQuAD fine-tuning): a start and an end score for
  // every token, each softmaxed over its sequence.
  bool span_head = false;
  // GPT-J's block (model.block parallel): attention and FFN both read one layer norm of the
  // block's input and are both added to it, instead of the FFN reading the attention's output.
  bool parallel_block = false;
  // Biases on the attention's QKV and output projections (model.attention_bias; GPT-J has none).
  bool attention_bias = true;
  // Rotary position embeddings (model.positions rotary): no position table; each query and key
  // rotated by its position (elementwise, over every head channel).
  bool rotary = false;
  // The LM head's vocabulary matmul reads the token embedding (model.tie_embeddings), or its
  // own [vocabulary, hidden] weight, with a bias unless model.head_bias is false (GPT-J's
  // lm_head has one, Llama's none).
  bool tied_head = true;
  bool head_bias = true;
  // RMS norms instead of layer norms (model.normalisation rms_norm; Llama).
  bool rms_norm = false;
  // The FFN as SwiGLU (model.ffn_activation swiglu; Llama): down(silu(gate x) * up x), three
  // matrices, instead of GELU between two.
  bool swiglu = false;
  // Biases on the FFN's matmuls (model.ffn_bias; Llama has none).
  bool ffn_bias = true;
  // The head runs on the last IPU of a pipeline (no tied embedding), so the ring is open.
  bool head_on_last_ipu() const { return classifier || span_head || (lm_head && !tied_head); }
  std::uint64_t patch = 0;
  std::uint64_t patches() const { return patch == 0 ? 0 : (height / patch) * (width / patch); }
  std::uint64_t token_types = 2;          // segment embeddings
  std::uint64_t vocabulary_multiple = 1;  // the table is padded to a multiple of this
  std::uint64_t padded_vocabulary() const {
    return (vocabulary + vocabulary_multiple - 1) / vocabulary_multiple * vocabulary_multiple;
  }
};

// Loads a model file strictly: unknown keys and ops are errors naming file:line. A file named
// *.onnx is imported (import_onnx) and read as the model file it becomes.
ModelDef load_model(const std::string& file);

// The ONNX front end (docs/onnx.md): true for a file named *.onnx.
bool is_onnx_file(const std::string& file);
// The model file (YAML text) equivalent to an ONNX model: `ipusim import` writes it, and
// load_model reads an .onnx file through it. An op or pattern ipusim does not model is a
// ConfigError naming the node.
std::string import_onnx(const std::string& file);
// The ONNX model's trainable weight elements: its floating-point initializers of more than one
// element, less batch norms' running statistics (for checks against parameter_count).
std::uint64_t onnx_weight_elements(const std::string& file);

// The schema of configs/runs/*.yaml (run.* keys).
const config::Schema& run_schema();

// run.optimiser: the weight update of a training run (none: an inference run's).
enum class Optimiser : std::uint8_t { kNone, kSgd, kLars, kLamb, kAdamw };
// run.kv_cache: where a decoding step's cached keys and values live.
enum class KvCache : std::uint8_t { kNone, kOnChip, kStreaming };
// run.sample_unit: what a sample is, for throughput and time to train.
enum class SampleUnit : std::uint8_t { kImages, kSequences };
// Their names as run files spell them.
std::string_view optimiser_name(Optimiser optimiser);
std::string_view sample_unit_name(SampleUnit unit);

struct RunConfig {
  std::string file;
  std::string name;
  std::string model_file;   // resolved relative to the run file
  std::string system_file;  // resolved relative to the run file
  std::uint32_t replicas = 1;
  std::uint32_t ipus_per_replica = 1;
  // run.tensor_parallel: the replica's IPUs each hold 1/T of every attention's heads, FFN and
  // vocabulary (Megatron-style column and row splits, an all-reduce after each row split)
  std::uint32_t tensor_parallel = 1;
  // run.hidden_parallel: 2-D tensor parallelism (popxl GPT-3 175B's TP2): groups of this many
  // consecutive IPUs of the tensor-parallel ones split the hidden dimension, and the
  // tensor_parallel / hidden_parallel groups of IPUs this far apart the heads, FFN and vocabulary
  std::uint32_t hidden_parallel = 1;
  std::uint64_t micro_batch = 1;  // images, or packs of sequences
  std::uint64_t gradient_accumulation = 1;
  trace::DType partials = trace::DType::kHalf;  // 16.16 -> half, 16.32 -> float
  Optimiser optimiser = Optimiser::kNone;
  bool optimiser_state_streaming = false;
  bool replicated_tensor_sharding = false;
  bool sync_replicas_independently = false;  // Poplar's target.syncReplicasIndependently
  std::vector<double> available_memory;      // per IPU of the replica
  std::vector<std::string> checkpoints;      // CNN recomputation checkpoints (layer names)
  std::vector<std::string> pipeline_splits;  // CNN: the layers that begin stages 1, 2, ...
  // The IPU of each stage, in stage order (run.pipeline_ipus; empty: stage k on IPU k).
  std::vector<std::uint32_t> pipeline_ipus;
  std::uint32_t batchnorm_group = 1;       // replicas sharing batch-norm statistics
  bool batchnorm_statistics_cache = true;  // recomputation reuses the forward statistics
  bool fuse_elementwise = true;            // elementwise chains become one fused compute set
  bool popnn_norms = true;     // CNN batch norm and ReLU lowered as popnn calls, not fused chains
  bool rearrangements = true;  // conv operands are regrouped/transposed as needed
  // Training matmuls planned with poplin's fullyConnectedPass (joint plans where cheaper).
  bool fully_connected_pass = true;
  std::uint64_t allreduce_buffer = 50ull << 20;  // bytes per gradient collective (fused buffers)
  bool per_tensor_collectives = false;           // run.collective_grouping per_tensor (PopART 2.3)
  // CNN LARS norms combined into ReduceMany ops of at most this many output bytes (0: none)
  std::uint64_t reduce_many_buffer = 0;
  // SGD's momentum takes weight decay: v = m v + (g + wd w); w -= lr v (else v = m v + lr g;
  // w -= v, as TensorFlow's MomentumOptimizer; run.sgd_weight_decay).
  bool sgd_weight_decay = false;
  bool clip_gradients = false;  // run.gradient_clipping global_norm (PopART clipAllWeights)
  bool split_qkv = false;       // run.split_qkv: Q, K and V as three weight tensors, not one
  std::uint32_t io_tiles =
      0;                   // tiles reserved for host I/O (0: input copied inline on compute tiles)
  bool inference = false;  // run.mode: forward passes only (no gradients, no optimiser)
  // run.weights streamed: phased execution (transformer inference): every sub-layer's weights
  // are loaded from Streaming Memory onto the IPU just before it runs, not held throughout
  bool streamed_weights = false;
  // run.shard_activations: phased training's stored activations split over the
  // tensor-parallel IPUs, all-gathered when loaded
  bool shard_activations = false;
  // run.kv_cache: a step is one decoding step of a causal LM (one new token per sequence)
  // against cached keys and values, kept on chip or in Streaming Memory (loaded and stored
  // around each attention); none: every step runs the whole sequence
  KvCache kv_cache = KvCache::kNone;
  // run.prompt_tokens, run.new_tokens: text generation's prompt and output lengths (0: not a
  // generation run), for the time to first token and per output token
  std::uint64_t prompt_tokens = 0, new_tokens = 0;
  std::uint32_t conv_unit_load_bits = 64;  // AMP weight-load width: 64 (Poplar's default) or 128
  // transformer pipeline: per IPU of the replica, (attention, FFN) sub-layers
  std::vector<std::pair<std::uint32_t, std::uint32_t>> placement;
  double sequences_per_pack = 1;
  std::uint64_t max_sequences_per_pack = 1;  // a masked-LM head predicts masked + this - 1
  std::uint32_t embedding_serialisation = 1;
  std::uint64_t input_bytes_per_sample = 0;
  SampleUnit sample_unit = SampleUnit::kImages;
  // Host-side terms of the time-to-train estimate (workloads.md §3).
  double epochs = 0;
  std::uint64_t samples_per_epoch = 0;
  std::uint64_t samples_to_train = 0;  // used when epochs == 0
  double lead_in_seconds = 0, checkpoint_seconds = 0, evaluation_seconds = 0;
  std::uint64_t checkpoints_taken = 0, evaluations = 0;
  // Where each key the run file or a --set override gives was given ("file:line:column" or
  // "--set"), for errors (key_at); keys left to their defaults are absent.
  std::map<std::string, std::string> given;

  std::uint64_t samples_per_step() const;
  // Phased training (run.weights streamed in training): phases of one IPU or tensor-parallel
  // group, weights and optimiser state in Streaming Memory (stage_lowering, optimiser).
  bool phased_training() const { return streamed_weights && !inference; }
};

// Where run key `key` was given, to begin an error: "--set KEY", "file:line:column: KEY", or
// (left to its default) "file: KEY".
std::string key_at(const RunConfig& run, const std::string& key);

struct LoadedRun {
  RunConfig run;
  config::Resolved resolved;
};

LoadedRun load_run(const std::string& file, const std::vector<std::string>& overrides = {});
// A run config already parsed (`file` names it in errors; run.model and run.system are
// relative to its folder).
LoadedRun load_run(config::Document doc, const std::string& file,
                   const std::vector<std::string>& overrides = {});

// A run chosen for a model that comes without a run config (`ipusim run --model M --system
// S`; docs/onnx.md "Without a run config"): data parallelism over the system's IPUs, the
// largest micro-batch that fits (recomputing at the model's block outputs when that lets a
// larger one fit), a pipeline when one IPU cannot hold a replica, the optimiser, gradient
// accumulation and host input of the public examples' defaults. `run_overrides` (run.* --set
// keys) are applied on top and fix what they set. `reasons` gets one line per choice.
LoadedRun choose_run(const ModelDef& model, const std::string& model_file,
                     const std::string& system_file, const SystemSpec& system,
                     const std::vector<std::string>& run_overrides,
                     std::vector<std::string>& reasons);

// The one rule for run keys (docs/run-reference.md, "Which keys apply"): a key set to
// anything but its neutral value (its default, or what the lowering does without it) either
// changes what compile() builds for this model and mode or is refused here, with a
// ConfigError naming where it was given, the key, and why it does not apply (for example
// run.optimiser lars on a transformer, run.batchnorm_group on a model without batch norms, any
// optimiser key in an inference run). compile() calls it first.
void check_run_applies(const ModelDef& model, const RunConfig& run);

// What a compiled trace records about its target (trace meta "target.*"), and the ways the
// chip and system it is about to run on differ from it: one message per difference, each
// saying what to recompile or regenerate. Empty for traces without a target (hand-written
// traces) and when everything matches; the system is compared only for compiled workloads
// (a kernel trace records its chip, not a system). `system` is null for a run on a bare chip.
std::vector<std::string> target_mismatches(const trace::Trace& trace, const ChipSpec& chip,
                                           const SystemSpec* system);

// When `model` replaces the run config's own model (`--model`; the run's is loaded from
// run.model_file) and takes another input (image size and channels, or sequence length), the
// run's input_bytes_per_sample still sizes its host input for the old one: a message that
// says so and what to set (scaled by the inputs' element counts). None when the inputs match,
// the run streams no input, or `run_overrides` (the run.* --set overrides) set
// run.input_bytes_per_sample.
std::optional<std::string> input_mismatch(const RunConfig& run, const ModelDef& model,
                                          const std::vector<std::string>& run_overrides);

// The meta entries that name the chip a trace was planned for (target.chip, its tiles, tile
// memory in bytes and AMP engines), as compile() and `ipusim kernel` write them.
std::vector<std::pair<std::string, std::string>> chip_target_meta(const ChipSpec& chip);

// Trainable parameters of a model (conv and fc weights, fc biases, batch-norm and layer-norm
// scales and shifts; for a transformer also the embeddings and the heads). Shape errors in a
// CNN (an add of two shapes, fc on a spatial input) are ConfigErrors naming the layer.
std::uint64_t parameter_count(const ModelDef& model);

// One conv or matmul the compiler planned (plan.csv, docs/reports.md): the layers and pass it
// serves, what the planner chose for it, and the compute sets, exchanges and on-chip syncs of
// its IPU's program that one execution of it runs, so that a run can set the simulated cost
// beside the planner's estimate. One record per use: a conv shared by several layers (its
// compute sets reused) has a record for each.
struct PlannedConv {
  // The program items one execution runs: (index, times run) of compute sets and exchanges.
  struct Items {
    std::vector<std::pair<std::uint32_t, std::uint64_t>> compute_sets, exchanges;
    std::uint64_t syncs = 0;  // on-chip syncs
  };
  std::uint32_t ipu = 0;         // program (IPU of the replica)
  trace::Provenance provenance;  // layers, pass and op (conv or matmul)
  std::string name;              // the planned shape's key (its compute sets' name prefix)
  plan::ConvArgs args;           // as planned: the run's partials, conv groups combined
  plan::ConvPlan plan;
  double available_memory = 0;     // the proportion of tile memory it was planned within
  std::uint64_t budget_bytes = 0;  // that proportion in bytes per tile
  Items conv;                      // the planned conv itself (fetch, AMP, reductions, serial loop)
  Items rearrangement;             // its operands regrouped and transposed into the plan's layouts
};

// Lowers one training step. Throws ModelError (e.g. "out of memory on tile N") when the
// model cannot be mapped onto the system's chips.
// With `plans`, also appends every conv and matmul planned, in program order per IPU.
// What compile() checks of its result before returning it (both by default). `ipusim run
// --run`, which simulates the trace at once, leaves both to its caller: the model checks every
// program's memory as it builds it, against the same chip with the same function
// (cost::check_memory), and the driver checks the structure (trace::check_structure) beside
// the model's elaboration, before the simulation starts (ModelOptions::before_run).
struct CompileChecks {
  bool memory = true;
  bool structure = true;
};
trace::Trace compile(const ModelDef& model, const RunConfig& run, const SystemSpec& system,
                     std::vector<PlannedConv>* plans = nullptr, CompileChecks checks = {});

// A generation run's limits (ipusim run --fit): the largest micro-batch that fits tile memory
// and Streaming Memory at the model's sequence, and the largest sequence (the padded sequence,
// or the KV cache's length) at the run's micro-batch, found by compiling at other sizes
// (doubling, then bisecting; learned positions cap the sequence at model.max_positions). 0s
// when the run itself does not fit.
struct GenerationFit {
  static constexpr std::uint64_t kMicroBatchCap = 1 << 16, kContextCap = 1 << 17;
  std::uint64_t micro_batch = 0, context = 0;
  // The largest sizes the search tried (a result equal to one may fit beyond it).
  std::uint64_t micro_batch_limit = 0, context_limit = 0;
};
GenerationFit generation_fit(const ModelDef& model, const RunConfig& run, const SystemSpec& system);

// What a single-layer program runs (layer_program.cpp).
enum class LayerPass {
  kForward,   // the layer's forward conv or matmul
  kTraining,  // forward, data gradient, weight gradient and an SGD update of the weights
};

// One conv or matmul layer on one IPU, lowered with the same IpuBuilder operations as
// compile() lowers a conv layer (docs/workloads.md "Single-layer training programs"): the
// input is created for the forward conv; the output gradient arrives on the forward output's
// layout; the data gradient is a conv of it with the transposed weights; the weight gradient a
// matmul (k*k*Cin) x Cout reducing over N*Ho*Wo that reads the input transposed; its result is
// rearranged to the weights' layout and applied as w -= lr * g (one scaled_add). Convs are
// planned within available_memory x tile memory per tile, with args.partials as the AMP
// partials type; a matmul's three training passes are planned together (poplin's
// fullyConnectedPass, plan::plan_fully_connected) unless `fully_connected_pass` is false (as
// run.fully_connected_pass). Throws ModelError if the tensors do not fit in tile memory.
trace::Trace compile_layer(const ChipSpec& chip, const plan::ConvArgs& args, LayerPass pass,
                           double available_memory, bool fully_connected_pass = true);

}  // namespace ipusim::compiler
