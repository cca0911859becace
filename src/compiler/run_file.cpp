// SPDX-License-Identifier: Apache-2.0
// Run configs (configs/runs/*.yaml): the run.* keys, declared once as rows (run_fields(),
// docs/run-reference.md), and their loading with --set overrides.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <array>
#include <filesystem>
#include <sstream>
#include <tuple>

#include "ipusim/compiler/compiler.hpp"
#include "ipusim/config/field.hpp"
#include "ipusim/util/error.hpp"
#include "ipusim/util/fs.hpp"
#include "ipusim/util/strings.hpp"
#include "trace_names.hpp"

namespace ipusim::compiler {
namespace {

constexpr std::array<std::pair<std::string_view, Optimiser>, 5> kOptimisers{{
    {"lars", Optimiser::kLars},
    {"lamb", Optimiser::kLamb},
    {"sgd", Optimiser::kSgd},
    {"adamw", Optimiser::kAdamw},
    {"none", Optimiser::kNone},
}};
constexpr std::array<std::pair<std::string_view, SampleUnit>, 2> kSampleUnits{{
    {"images", SampleUnit::kImages},
    {"sequences", SampleUnit::kSequences},
}};

// The two-way choices, each as its key spells them (off, then on; the first listed first).
using Choice2 = std::array<std::pair<std::string_view, bool>, 2>;
constexpr Choice2 kYesNo{{{"yes", true}, {"no", false}}};
constexpr Choice2 kOptimiserState{{{"on_chip", false}, {"streaming", true}}};
constexpr Choice2 kNormLowering{{{"popnn", true}, {"fused", false}}};
constexpr Choice2 kCollectiveGrouping{{{"buffers", false}, {"per_tensor", true}}};
constexpr Choice2 kGradientClipping{{{"none", false}, {"global_norm", true}}};
constexpr Choice2 kMode{{{"training", false}, {"inference", true}}};
constexpr Choice2 kWeights{{{"resident", false}, {"streamed", true}}};
constexpr std::array<std::pair<std::string_view, KvCache>, 3> kKvCache{
    {{"none", KvCache::kNone}, {"on_chip", KvCache::kOnChip}, {"streaming", KvCache::kStreaming}}};
constexpr std::array<std::pair<std::string_view, trace::DType>, 2> kPrecisions{{
    {"16.16", trace::DType::kHalf},
    {"16.32", trace::DType::kFloat},
}};

template <class E, std::size_t N>
std::string_view name_in(const std::array<std::pair<std::string_view, E>, N>& values, E e) {
  for (const auto& [name, value] : values)
    if (value == e) return name;
  return "?";
}

using RunField = config::Field<RunConfig>;
using config::ParamDecl;
using config::ValueKind;
using Default = std::optional<std::string>;

// The builders of the run rows: each declares a key and the RunConfig member it sets (the
// member's type gives the value kind), so a run key is declared once (issue 31).
template <class Access>
RunField count(std::string path, double min, double max, std::string description,
               std::string source, Access access, Default default_text) {
  return config::field<RunConfig>(std::move(path), min, max, std::move(description),
                                  std::move(source), access, false, std::move(default_text));
}
RunField with_choices(RunField f, std::vector<std::string> choices) {
  f.decl.choices = std::move(choices);
  return f;
}
// A choice key whose values name the members of an enum, in the order the docs list them.
template <class E, std::size_t N>
RunField enum_choice(std::string path, const std::array<std::pair<std::string_view, E>, N>& values,
                     std::string description, std::string source, E RunConfig::*member,
                     Default default_text) {
  return config::enum_field<RunConfig>(
      std::move(path), values, std::move(description), std::move(source),
      [member](RunConfig& r) { return &(r.*member); }, std::move(default_text));
}
RunField yes_no(std::string path, std::string description, std::string source,
                bool RunConfig::*member, Default default_text) {
  return enum_choice(std::move(path), kYesNo, std::move(description), std::move(source), member,
                     std::move(default_text));
}
ParamDecl decl(std::string path, ValueKind kind, double min, double max, std::string description,
               std::string source, Default default_text) {
  return ParamDecl{
      std::move(path),        kind, min, max, std::move(description), std::move(source), false,
      std::move(default_text)};
}
// A row of `kind` whose value `get` reads from the resolved config into `member`.
template <class T, class Get>
RunField typed(std::string path, ValueKind kind, double min, double max, std::string description,
               std::string source, T RunConfig::*member, Default default_text, Get get) {
  RunField f;
  f.decl = decl(path, kind, min, max, std::move(description), std::move(source),
                std::move(default_text));
  f.assign = [path, member, get](RunConfig& r, const config::Resolved& res) {
    r.*member = get(res, path);
  };
  return f;
}
RunField bytes(std::string path, double min, double max, std::string description,
               std::string source, std::uint64_t RunConfig::*member, Default default_text) {
  return typed(std::move(path), ValueKind::kBytes, min, max, std::move(description),
               std::move(source), member, std::move(default_text),
               [](const config::Resolved& r, const std::string& p) { return r.bytes(p).count; });
}
RunField ratio(std::string path, double min, double max, std::string description,
               std::string source, double RunConfig::*member, Default default_text) {
  return typed(std::move(path), ValueKind::kRatio, min, max, std::move(description),
               std::move(source), member, std::move(default_text),
               [](const config::Resolved& r, const std::string& p) { return r.ratio(p); });
}
RunField seconds(std::string path, double min, double max, std::string description,
                 std::string source, double RunConfig::*member, Default default_text) {
  return typed(
      std::move(path), ValueKind::kDuration, min, max, std::move(description), std::move(source),
      member, std::move(default_text),
      [](const config::Resolved& r, const std::string& p) { return r.duration(p).seconds; });
}
// A row load_run interprets itself (paths, lists, the placement).
RunField derived(std::string path, ValueKind kind, std::string description, std::string source,
                 Default default_text) {
  return config::unbound<RunConfig>(decl(std::move(path), kind, 0, 0, std::move(description),
                                         std::move(source), std::move(default_text)));
}

// The run rows by subject, in the order docs/run-reference.md lists them.
// The run, its system and its batch: replicas, micro-batch, accumulation, precision, optimiser.
std::vector<RunField> batch_fields() {
  return {
      derived("run.name", ValueKind::kString, "Run name shown in reports", "-", std::nullopt),
      derived("run.model", ValueKind::kString, "Model file, relative to the run file", "-",
              std::nullopt),
      derived("run.system", ValueKind::kString, "System file, relative to the run file", "-",
              std::nullopt),
      count(
          "run.replicas", 1, 65536, "Data-parallel replicas", "workloads.md",
          [](RunConfig& r) { return &r.replicas; }, std::nullopt),
      count(
          "run.ipus_per_replica", 1, 1024, "IPUs per replica (pipeline stages)", "workloads.md",
          [](RunConfig& r) { return &r.ipus_per_replica; }, std::nullopt),
      count(
          "run.tensor_parallel", 1, 64,
          "Transformer: IPUs each attention's heads, each FFN's hidden units and the vocabulary "
          "are split over (tensor model parallelism: the query/key/value and first FFN matmuls "
          "split by columns, the output projections by rows, each followed by an all-reduce "
          "over those IPUs); equal to run.ipus_per_replica (no pipeline with it)",
          "graphcore/examples nlp/gpt_j/popxl (tensor-parallel layers, "
          "all_reduce_identical_inputs / all_reduce_identical_grad_inputs)",
          [](RunConfig& r) { return &r.tensor_parallel; }, "1"),
      count(
          "run.hidden_parallel", 1, 64,
          "Transformer language model, 2-D tensor parallelism: of the run.tensor_parallel IPUs, "
          "groups of this many consecutive ones split the hidden dimension (the residual "
          "stream, layer norms with all-reduced statistics, every matmul's contraction, "
          "all-reduced over the group); the groups of run.tensor_parallel / this many IPUs "
          "this far apart split the heads, FFN and vocabulary",
          "graphcore/examples nlp/gpt3_175B/popxl (tensor_parallel_1 and _2, the *TP2D layers, "
          "layer_norm_distributed)",
          [](RunConfig& r) { return &r.hidden_parallel; }, "1"),
      count(
          "run.micro_batch", 1, 1 << 20, "Samples (images or packs) per micro-batch",
          "workloads.md", [](RunConfig& r) { return &r.micro_batch; }, std::nullopt),
      count(
          "run.gradient_accumulation", 1, 1 << 20, "Micro-batches per weight update",
          "workloads.md", [](RunConfig& r) { return &r.gradient_accumulation; }, std::nullopt),
      enum_choice("run.precision", kPrecisions, "16.16 (half partials) or 16.32 (float partials)",
                  "workloads.md", &RunConfig::partials, std::nullopt),
      enum_choice("run.optimiser", kOptimisers,
                  "Training: sgd (one momentum, no norms), lars (SGD whose conv, fc and "
                  "projection kernels take a trust ratio from two norms), lamb or adamw (two "
                  "moments; AdamW is LAMB without its per-tensor norms); none: no weight update "
                  "(inference, where it is the only value)",
                  "workloads.md", &RunConfig::optimiser, "none"),
      enum_choice("run.optimiser_state", kOptimiserState,
                  "on_chip or streaming (Streaming Memory; training)", "workloads.md",
                  &RunConfig::optimiser_state_streaming, "on_chip"),
      yes_no("run.sgd_weight_decay",
             "yes: SGD's momentum takes weight decay, v = m v + (g + wd w), w -= lr v (PyTorch's "
             "SGD); no: v = m v + lr g, w -= v (TensorFlow's MomentumOptimizer)",
             "workloads.md", &RunConfig::sgd_weight_decay, "no"),
      yes_no("run.replicated_tensor_sharding", "yes: shard optimiser state over replicas",
             "poplar-compiler.md §4.4", &RunConfig::replicated_tensor_sharding, "no"),
      yes_no("run.sync_replicas_independently",
             "Poplar's engine option target.syncReplicasIndependently: no (Poplar's default) makes "
             "every external sync span all the run's IPUs; yes syncs only the group involved",
             "docs/topology.md \"External sync\"", &RunConfig::sync_replicas_independently, "no"),
  };
}

// Memory and lowering: available memory, recomputation, norms, collectives, vertices.
std::vector<RunField> lowering_fields() {
  return {
      derived("run.available_memory_proportion", ValueKind::kString,
              "Conv/matmul temporary-memory cap, one value or one per IPU of the replica",
              "workloads.md; poplar-compiler.md §1.5", std::nullopt),
      derived(
          "run.recompute_checkpoints", ValueKind::kString,
          "CNN: comma-separated layer names whose outputs are kept; everything else is recomputed",
          "workloads.md", "none"),
      count(
          "run.batchnorm_group", 1, 65536, "Replicas sharing batch-norm statistics", "workloads.md",
          [](RunConfig& r) { return &r.batchnorm_group; }, "1"),
      yes_no("run.batchnorm_statistics_cache",
             "yes: recomputation reuses the forward pass's batch-norm statistics (no second "
             "reduction or "
             "all-reduce)",
             "poplar-compiler.md §6.1 (statistics caching)", &RunConfig::batchnorm_statistics_cache,
             "yes"),
      enum_choice(
          "run.norm_lowering", kNormLowering,
          "CNN batch norm and ReLU: popnn (as TensorFlow for IPU lowers them: batch norm through "
          "popnn's separate passes, ReLU in place on its own) or fused (folded into the fused "
          "elementwise chains around them)",
          "graphcore/tensorflow driver/ops/custom_ops/popnn/norm.cc, non_linearity.cc; poplibs "
          "lib/poplin/Norms.cpp",
          &RunConfig::popnn_norms, "popnn"),
      bytes(
          "run.allreduce_buffer", 1024, 1e12,
          "Gradients are reduced across replicas in collectives of at most this many bytes (fused "
          "buffers)",
          "poplar-compiler.md §3.3, §5.1 (maximum_cross_replica_sum_buffer_size: 50 MiB in MLPerf "
          "ResNet)",
          &RunConfig::allreduce_buffer, "50MiB"),
      bytes("run.reduce_many_buffer", 0, 1e12,
            "LARS norms: independent reductions combined into popops ReduceMany ops of at most "
            "this many output bytes (each norm a 4-byte float), their stages sharing compute sets, "
            "exchanges and syncs; 0: one reduction per norm (TensorFlow's default)",
            "graphcore/tensorflow poplar plugin ReduceManyColocatorHelper "
            "(maximum_reduce_many_buffer_size: 216 in the MLPerf v1.1 ResNet-50 POD64-256 configs)",
            &RunConfig::reduce_many_buffer, "0B"),
      enum_choice(
          "run.collective_grouping", kCollectiveGrouping,
          "buffers: gradients reduced in fused buffers of run.allreduce_buffer bytes (TensorFlow's "
          "all-reduce combiner); per_tensor: one collective per weight tensor, and under "
          "replicated tensor sharding a scalar all-reduce after each LAMB norm (PopART 2.3)",
          "graphcore/popart sdk-release-2.3 (no collective grouping before SDK 2.5; LambSquareOp "
          "with replicated tensor sharding)",
          &RunConfig::per_tensor_collectives, "buffers"),
      enum_choice(
          "run.gradient_clipping", kGradientClipping,
          "none; global_norm: the reduced gradients are scaled by clip / max(clip, global norm) "
          "before the optimiser, the global norm summed on IPU 0 from a norm of each weight "
          "tensor",
          "graphcore/popart sdk-release-2.3 transforms/clipweightgradientsbynorm.cpp; MLPerf v1.1 "
          "Graphcore BERT bert_optimizer.py (ClipNormSettings.clipAllWeights)",
          &RunConfig::clip_gradients, "none"),
      yes_no(
          "run.split_qkv",
          "yes: a transformer's query, key and value weights are three tensors (three collectives, "
          "three optimiser norms); no: one [hidden, 3 x hidden] tensor. Their biases are one "
          "tensor "
          "either way",
          "MLPerf v1.1 Graphcore BERT bert_model.py qkv_weights (split_qkv: true in "
          "pod16-closed.json, false on the larger PODs)",
          &RunConfig::split_qkv, "no"),
  };
}

// How the step runs: training or inference, where the weights live, the I/O tiles, vertices.
std::vector<RunField> execution_fields() {
  return {
      enum_choice(
          "run.mode", kMode,
          "training (forward, backward, weight update per step) or inference (one batch per "
          "replica "
          "per step: input from the host, forward pass with resident weights and batch-norm "
          "statistics folded into a scale and shift, outputs back to the host)",
          "issue 15; poplar-compiler.md §2.3 (normalisations)", &RunConfig::inference, "training"),
      enum_choice(
          "run.weights", kWeights,
          "resident: every weight is held on the IPU throughout; streamed (phased execution, "
          "transformers): the weights live in Streaming Memory and each phase's are loaded onto "
          "the IPU just before it runs, into one buffer the size of the largest, the load not "
          "overlapped with compute. Inference: a phase is a sub-layer (embeddings, attention "
          "with its FFN, heads). Training (no pipeline; needs run.optimiser_state streaming): a "
          "phase is the embeddings, a decoder layer or the tail, loaded once a step and run over "
          "every micro-batch, which load and store their activations in Streaming Memory; the "
          "backward phases in reverse, each recomputing its forward and reducing its gradients",
          "graphcore/examples nlp/bert/popxl README, 'Phased execution' "
          "(execution/squad/inference_phased.py); nlp/gpt_j/popxl finetuning.py (phased "
          "training)",
          &RunConfig::streamed_weights, "resident"),
      enum_choice(
          "run.kv_cache", kKvCache,
          "Inference of a causal language model one token at a time: none (every step runs the "
          "whole padded sequence, as the GPT-J and GPT-3 examples generate), or a step is one "
          "new token per sequence attending to the keys and values of the model's sequence "
          "positions (a fixed-length cache, later positions masked), held on chip or in "
          "Streaming Memory (each attention loads its layer's cache before it runs and stores "
          "it after)",
          "graphcore/examples nlp/llama/popxl inference.py (use_cache: remote K and V buffers, "
          "one token per step)",
          &RunConfig::kv_cache, "none"),
      count(
          "run.prompt_tokens", 0, 1 << 20,
          "Text generation (an lm head in inference): tokens of each prompt. With a KV cache the "
          "prompt is fed one token a step, so the first output token comes after this many "
          "steps; without one, after one step (the whole padded sequence)",
          "graphcore/examples nlp/llama/popxl api/pipeline.py (the prompt fed token by token)",
          [](RunConfig& r) { return &r.prompt_tokens; }, "0"),
      count(
          "run.new_tokens", 0, 1 << 20,
          "Text generation: tokens generated per prompt, one a step (0: not a generation run); "
          "the summary and stats.json report the time to first token, per output token and "
          "tokens per second",
          "graphcore/examples nlp/gpt_j/popxl inference.yml (output_length)",
          [](RunConfig& r) { return &r.new_tokens; }, "0"),
      yes_no(
          "run.shard_activations",
          "Phased training with tensor parallelism: each activation a phase stores in Streaming "
          "Memory is split over the tensor-parallel IPUs (each stores 1/T) and all-gathered over "
          "them when loaded",
          "graphcore/examples nlp/gpt_j/popxl finetuning.py (RTS_ACTIVATIONS_THRESHOLD 0: "
          "activations replica-sharded over the tensor-parallel group)",
          &RunConfig::shard_activations, "no"),
      count(
          "run.io_tiles", 0, 1 << 20,
          "Tiles reserved for host I/O. 0 (TensorFlow's default, and the MLPerf runs): input "
          "streams "
          "are copied "
          "inline on the compute tiles from Streaming Memory, where they were prefetched while the "
          "previous "
          "micro-batch computed; N > 0: they land on N I/O tiles in the background, the model is "
          "planned on the "
          "other tiles, and each micro-batch is copied from the I/O tiles",
          "poplar-compiler.md §4.4 (numIOTiles); Graphcore TensorFlow docs, 'Efficient IPU I/O'",
          [](RunConfig& r) { return &r.io_tiles; }, "0"),
      with_choices(
          count(
              "run.conv_unit_load_bits", 64, 128,
              "Bits per supervisor load of conv/matmul weights into the AMP engines: 64 (Poplar's "
              "default, use128BitConvUnitLoad=false: 8 B/cycle) or 128 (the chip's full "
              "chip.amp.coeff_load_bytes_per_cycle)",
              "poplar-compiler.md §1.3; ipu-hardware.md §1 (AMP weight load)",
              [](RunConfig& r) { return &r.conv_unit_load_bits; }, "64"),
          {"64", "128"}),
      yes_no(
          "run.fuse_elementwise",
          "yes: a chain of elementwise ops between two convs or matmuls is one compute set of "
          "fused vertices (TensorFlow's XLA fusions); no: one compute set and sync per op (PopART "
          "and PopTorch, which lower each op through its own Opx)",
          "poplar-compiler.md §2.1 (popops::map code generation); graphcore/popart (an Opx per "
          "op)",
          &RunConfig::fuse_elementwise, "yes"),
  };
}

// How the planner treats a conv or matmul's operands and passes.
std::vector<RunField> planning_fields() {
  return {
      yes_no(
          "run.rearrangements",
          "yes: conv and matmul operands are regrouped and transposed into the layouts their plans "
          "want; "
          "no: they are assumed to be there already (an idealised compiler, to measure what "
          "rearranging costs)",
          "poplar-compiler.md §1.3 (transform, rearrangement and regroup costs)",
          &RunConfig::rearrangements, "yes"),
      yes_no("run.fully_connected_pass",
             "yes: in training each ungrouped matmul is planned with its data and weight "
             "gradients, jointly (each weight on one tile in all three passes) where poplin's "
             "estimates make that cheaper; no: each pass planned on its own",
             "poplar-compiler.md §1.6; PopART SessionOptions enableFullyConnectedPass (default "
             "true), poplibs lib/poplin/ConvPlan.cpp runPlanner",
             &RunConfig::fully_connected_pass, "yes"),
  };
}

// The transformer pipeline and the host input.
std::vector<RunField> pipeline_fields() {
  return {
      derived("run.pipeline_placement", ValueKind::kString,
              "Transformer: 'ipuN=a,f ...' attention and FFN sub-layers per IPU", "workloads.md",
              "none"),
      derived("run.pipeline_splits", ValueKind::kString,
              "CNN: comma-separated layer names, each the first layer of the next IPU's pipeline "
              "stage (one per IPU of the replica after the first); none: one IPU per replica",
              "graphcore/examples vision/cnns/pytorch/train/configs.yml pipeline_splits "
              "(poptorch.BeginBlock)",
              "none"),
      derived("run.pipeline_ipus", ValueKind::kString,
              "CNN or imported graph: comma-separated IPU of each pipeline stage, in stage order "
              "(one more than the splits; e.g. 0,1,2,3,0 runs a tied LM head's stage back on "
              "IPU 0); none: stage k on IPU k",
              "poptorch.BeginBlock ipu_id; graphcore/examples nlp/gpt2/pytorch (the LM head on "
              "IPU 0)",
              "none"),
      count(
          "run.max_sequences_per_pack", 1, 16,
          "Most sequences in one pack: a masked-LM head predicts masked_tokens + this - 1 tokens "
          "per pack (the MLPerf BERT packer's max_lm_predictions)",
          "MLPerf v1.1 Graphcore BERT bert_model.py, pack_pretraining_data.py",
          [](RunConfig& r) { return &r.max_sequences_per_pack; }, "1"),
      ratio("run.sequences_per_pack", 1, 16, "Average sequences per pack", "workloads.md",
            &RunConfig::sequences_per_pack, "1"),
      count(
          "run.embedding_serialisation", 1, 64, "Steps the vocabulary matmul is split into",
          "workloads.md", [](RunConfig& r) { return &r.embedding_serialisation; }, "1"),
      bytes("run.input_bytes_per_sample", 0, 1e9, "Host input per sample", "workloads.md",
            &RunConfig::input_bytes_per_sample, std::nullopt),
      enum_choice("run.sample_unit", kSampleUnits, "images or sequences", "-",
                  &RunConfig::sample_unit, std::nullopt),
  };
}

// The time-to-train estimate's host-side terms (workloads.md §3).
std::vector<RunField> time_to_train_fields() {
  return {
      ratio("run.ttt.epochs", 0, 1e4, "Epochs trained (0: use samples_to_train)", "workloads.md §3",
            &RunConfig::epochs, "0"),
      count(
          "run.ttt.samples_per_epoch", 1, 1e12, "Training samples per epoch", "workloads.md §1",
          [](RunConfig& r) { return &r.samples_per_epoch; }, "1"),
      count(
          "run.ttt.samples_to_train", 0, 1e12,
          "Samples to converge when not counted in epochs (0 with epochs 0: no time-to-train "
          "estimate, e.g. inference)",
          "workloads.md §3", [](RunConfig& r) { return &r.samples_to_train; }, "0"),
      seconds("run.ttt.lead_in", 0, 1e5, "Host-side time before the first step", "workloads.md §3",
              &RunConfig::lead_in_seconds, "0s"),
      seconds("run.ttt.checkpoint_time", 0, 1e5, "Time per checkpoint", "workloads.md §3",
              &RunConfig::checkpoint_seconds, "0s"),
      count(
          "run.ttt.checkpoints", 1, 1e6, "Checkpoints taken", "workloads.md §3",
          [](RunConfig& r) { return &r.checkpoints_taken; }, "1"),
      seconds("run.ttt.evaluation_time", 0, 1e5, "Time per evaluation", "workloads.md §3",
              &RunConfig::evaluation_seconds, "0s"),
      count(
          "run.ttt.evaluations", 1, 1e6, "Evaluations run", "workloads.md §3",
          [](RunConfig& r) { return &r.evaluations; }, "1"),
  };
}

const std::vector<RunField>& run_fields() {
  static const std::vector<RunField> fields = [] {
    std::vector<RunField> all;
    for (auto group : {batch_fields(), lowering_fields(), execution_fields(), planning_fields(),
                       pipeline_fields(), time_to_train_fields()})
      for (auto& f : group) all.push_back(std::move(f));
    return all;
  }();
  return fields;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, sep);) {
    const auto b = item.find_first_not_of(' '), e = item.find_last_not_of(' ');
    if (b != std::string::npos) out.push_back(item.substr(b, e - b + 1));
  }
  return out;
}

}  // namespace

std::string_view optimiser_name(Optimiser optimiser) { return name_in(kOptimisers, optimiser); }
std::string_view sample_unit_name(SampleUnit unit) { return name_in(kSampleUnits, unit); }

const config::Schema& run_schema() {
  static const config::Schema schema("run", config::decls_of(run_fields()));
  return schema;
}

std::uint64_t RunConfig::samples_per_step() const {
  const double per = sample_unit == SampleUnit::kSequences ? sequences_per_pack : 1.0;
  return static_cast<std::uint64_t>(
      std::llround(static_cast<double>(replicas) * micro_batch * gradient_accumulation * per));
}

LoadedRun load_run(const std::string& file, const std::vector<std::string>& overrides) {
  return load_run(config::load_document(file), file, overrides);
}

LoadedRun load_run(config::Document doc, const std::string& file,
                   const std::vector<std::string>& overrides) {
  for (const auto& o : overrides) config::apply_override(doc, o, run_schema());
  config::Resolved r = config::resolve(doc, run_schema());
  RunConfig run;
  run.file = file;
  for (const auto& [key, raw] : doc.values)
    run.given[key] = raw.key_origin == "--set" ? "--set" : raw.origin;
  // Every key bound to a member (run_fields); the rest below.
  config::assign_fields(run_fields(), r, run);
  const auto dir = std::filesystem::path(file).parent_path();
  run.name = r.string("run.name");
  check_trace_name(file, "run.name", run.name);
  run.model_file = (dir / r.string("run.model")).lexically_normal().string();
  run.system_file = (dir / r.string("run.system")).lexically_normal().string();
  const auto bad = [&](const std::string& key, const std::string& what) {
    return ConfigError(fmt::format("{}: {}: {}", file, key, what));
  };
  // The files it names, relative to it: a run config copied elsewhere without them fails here,
  // naming the key, not later with only the path (issue 27).
  for (const auto& [key, path, what] :
       {std::tuple{"run.model", &run.model_file, "model file"},
        std::tuple{"run.system", &run.system_file, "system config"}})
    if (::access(path->c_str(), R_OK) != 0)
      throw bad(key, fmt::format("expected a readable {}, found no file {} ({} is relative to "
                                 "the run config)",
                                 what, *path, key));
  for (const auto& v : split(r.string("run.available_memory_proportion"), ',')) {
    double x = 0;
    try {
      x = config::parse_ratio(v);
    } catch (const ParseError& e) {
      throw bad("run.available_memory_proportion", e.what());
    }
    if (!(x > 0 && x <= 1))
      throw bad("run.available_memory_proportion",
                fmt::format("expected values in (0, 1], found {}", v));
    run.available_memory.push_back(x);
  }
  if (run.available_memory.size() != 1 && run.available_memory.size() != run.ipus_per_replica)
    throw bad("run.available_memory_proportion",
              run.ipus_per_replica == 1
                  ? fmt::format("expected 1 value (the replica has one IPU), found {}",
                                run.available_memory.size())
                  : fmt::format("expected 1 or {} values (one per IPU of the replica), found {}",
                                run.ipus_per_replica, run.available_memory.size()));
  if (r.string("run.recompute_checkpoints") != "none")
    run.checkpoints = split(r.string("run.recompute_checkpoints"), ',');
  if (r.string("run.pipeline_splits") != "none")
    run.pipeline_splits = split(r.string("run.pipeline_splits"), ',');
  if (r.string("run.pipeline_ipus") != "none")
    for (const std::string& ipu : split(r.string("run.pipeline_ipus"), ',')) {
      const bool digits = !ipu.empty() && ipu.size() <= 4 &&
                          ipu.find_first_not_of("0123456789") == std::string::npos;
      const auto n = digits ? static_cast<std::uint32_t>(std::stoul(ipu)) : run.ipus_per_replica;
      if (n >= run.ipus_per_replica)
        throw bad("run.pipeline_ipus",
                  fmt::format("expected IPU numbers 0..{} (the replica's IPUs), found '{}'",
                              run.ipus_per_replica - 1, ipu));
      run.pipeline_ipus.push_back(n);
    }
  if (run.replicas % run.batchnorm_group != 0)
    throw bad("run.batchnorm_group",
              fmt::format("{} does not divide the {} replicas", run.batchnorm_group, run.replicas));
  const std::string placement = r.string("run.pipeline_placement");
  if (placement != "none") {
    run.placement.assign(run.ipus_per_replica, {0, 0});
    std::vector<bool> seen(run.ipus_per_replica, false);
    for (const auto& item : split(placement, ' ')) {
      // ipu<N>=<attention>,<ffn>, each a whole number read by the strict parser (sscanf's %u
      // read 4294967297 as 1 and -4294967295 as 1).
      const auto eq = item.find('='), comma = item.find(',');
      std::uint64_t ipu = 0, attn = 0, ffn = 0;
      try {
        if (!item.starts_with("ipu") || eq == std::string::npos || comma == std::string::npos ||
            comma < eq)
          throw ParseError("");
        ipu = config::parse_count(item.substr(3, eq - 3));
        attn = config::parse_count(item.substr(eq + 1, comma - eq - 1));
        ffn = config::parse_count(item.substr(comma + 1));
      } catch (const ParseError&) {
        throw bad("run.pipeline_placement",
                  fmt::format("expected items like ipu1=7,6 (whole numbers), found \"{}\"", item));
      }
      constexpr std::uint64_t kMaxSubLayers = 65536;  // per IPU (the model checks the total)
      if (attn > kMaxSubLayers || ffn > kMaxSubLayers)
        throw bad("run.pipeline_placement",
                  fmt::format("\"{}\": expected at most {} sub-layers an IPU, found {}", item,
                              kMaxSubLayers, std::max(attn, ffn)));
      if (ipu >= run.ipus_per_replica || seen[ipu])
        throw bad("run.pipeline_placement",
                  fmt::format("\"{}\" names IPU {} twice or beyond the {} IPUs of a replica", item,
                              ipu, run.ipus_per_replica));
      seen[ipu] = true;
      run.placement[ipu] = {static_cast<std::uint32_t>(attn), static_cast<std::uint32_t>(ffn)};
    }
  }
  return LoadedRun{std::move(run), std::move(r)};
}

std::string key_at(const RunConfig& run, const std::string& key) {
  const auto it = run.given.find(key);
  if (it == run.given.end()) return run.file + ": " + key;
  if (it->second == "--set") return "--set " + key;
  return it->second + ": " + key;  // file:line:column
}

}  // namespace ipusim::compiler
