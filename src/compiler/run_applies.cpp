// SPDX-License-Identifier: Apache-2.0
// check_run_applies: the one rule for run keys. Every run key that some model or mode does not
// use has a row here: when the run sets it (to anything but its neutral value) and the model
// and mode being compiled do not use it, the row says why, and compile() refuses the run with
// that reason instead of building the same trace as without it. Keys every compile uses (the
// batch, precision, memory proportion, planner and vertex options, host input, time to train)
// have no row. tests/unit/run_keys_test.cpp walks every key over a CNN and a transformer, in
// training and inference, and checks that each changes the trace or is refused.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <stdexcept>
#include <string>
#include <string_view>

#include "ipusim/compiler/compiler.hpp"
#include "ipusim/util/error.hpp"

namespace ipusim::compiler {
namespace {

// What the rows ask of the model and the run.
struct Scope {
  const ModelDef& model;
  const RunConfig& run;
  // A CNN model file or an imported graph: layers, split and recomputed by name.
  bool cnn() const { return model.family != graph::Family::kTransformer; }
  bool training() const { return !run.inference; }
  bool has(graph::Op op) const {
    return std::any_of(model.layers.begin(), model.layers.end(),
                       [op](const Layer& l) { return l.op == op; });
  }
  bool batch_norms() const { return has(graph::Op::kBatchNorm); }
  // The model's name and file, for reasons ("ResNet-50 (models/resnet50.yaml)").
  std::string what() const { return fmt::format("{} ({})", model.name, model.file); }
};

// A row: the key, whether the run sets it to anything but its neutral value, and why it does
// not apply to `s` ("" when it does).
struct Row {
  std::string_view key;
  bool (*set)(const RunConfig&);
  std::string (*refused)(const Scope&);
};

// The reasons the rows share.
std::string cnn_only(const Scope& s, std::string_view what) {
  return s.cnn() ? "" : fmt::format("{} only a CNN has; {} is a transformer", what, s.what());
}
std::string transformer_only(const Scope& s, std::string_view what) {
  return s.cnn() ? fmt::format(
                       "{} is lowered for transformer model files only; {} is {}", what, s.what(),
                       s.model.family == graph::Family::kGraph ? "an imported graph" : "a CNN")
                 : "";
}
std::string training_only(const Scope& s, std::string_view what) {
  return s.training() ? ""
                      : fmt::format(
                            "{} belongs to training; this run is run.mode inference "
                            "(forward passes only: no gradients, no weight update)",
                            what);
}
std::string replicated(const Scope& s, std::string_view what) {
  return s.run.replicas > 1
             ? ""
             : fmt::format("{} acts across replicas; this run has one replica (run.replicas 1)",
                           what);
}
// Text generation's keys: a causal language model's inference.
std::string generation(const Scope& s, std::string_view what) {
  if (s.training())
    return fmt::format("{} belongs to text generation (run.mode inference); this run trains", what);
  if (!s.model.lm_head || !s.model.causal)
    return fmt::format(
        "{} belongs to a causal language model (head: lm, causal: true); {} is "
        "not one",
        what, s.what());
  return "";
}

// The first non-empty reason of a row's checks.
template <class... Reasons>
std::string first_of(Reasons... reasons) {
  std::string out;
  ((out.empty() ? void(out = std::move(reasons)) : void()), ...);
  return out;
}

constexpr std::array<Row, 28> kRows{{
    {"run.gradient_accumulation", [](const RunConfig& r) { return r.gradient_accumulation != 1; },
     [](const Scope& s) {
       return s.training() ? ""
                           : fmt::format(
                                 "inference runs one batch per replica per step: "
                                 "expected 1, found {}",
                                 s.run.gradient_accumulation);
     }},
    {"run.optimiser", [](const RunConfig&) { return true; },
     [](const Scope& s) -> std::string {
       const Optimiser o = s.run.optimiser;
       if (!s.training())
         return o == Optimiser::kNone ? ""
                                      : fmt::format(
                                            "an inference run updates no weights: "
                                            "expected none (or no key), found {}",
                                            optimiser_name(o));
       if (o == Optimiser::kNone)
         return "a training run updates its weights: expected sgd, lars, lamb or adamw, found "
                "none";
       return "";
     }},
    {"run.optimiser_state", [](const RunConfig& r) { return r.optimiser_state_streaming; },
     [](const Scope& s) { return training_only(s, "optimiser state"); }},
    {"run.sgd_weight_decay", [](const RunConfig& r) { return r.sgd_weight_decay; },
     [](const Scope& s) {
       return first_of(training_only(s, "SGD's weight decay"),
                       s.run.optimiser == Optimiser::kSgd
                           ? ""
                           : fmt::format("weight decay in SGD's momentum: the run's optimiser is "
                                         "{}, not sgd",
                                         optimiser_name(s.run.optimiser)));
     }},
    {"run.replicated_tensor_sharding",
     [](const RunConfig& r) { return r.replicated_tensor_sharding; },
     [](const Scope& s) {
       return first_of(training_only(s, "sharding the optimiser state"),
                       replicated(s, "replicated tensor sharding"));
     }},
    {"run.recompute_checkpoints", [](const RunConfig& r) { return !r.checkpoints.empty(); },
     [](const Scope& s) {
       return first_of(
           training_only(s, "recomputation for the backward pass"),
           s.cnn() ? ""
                   : fmt::format("checkpoints name CNN layers; {} is a transformer, whose "
                                 "pipeline stages recompute their sub-layers in the backward "
                                 "pass",
                                 s.what()));
     }},
    {"run.batchnorm_group", [](const RunConfig& r) { return r.batchnorm_group != 1; },
     [](const Scope& s) {
       return first_of(
           training_only(s,
                         "sharing batch-norm statistics (inference folds them into a scale "
                         "and shift)"),
           s.batch_norms() ? ""
                           : fmt::format("{} has no batchnorm layer whose statistics replicas "
                                         "could share",
                                         s.what()));
     }},
    {"run.batchnorm_statistics_cache",
     [](const RunConfig& r) { return !r.batchnorm_statistics_cache; },
     [](const Scope& s) {
       return first_of(
           training_only(s, "caching statistics for recomputation"),
           s.batch_norms() || s.has(graph::Op::kGroupNorm)
               ? ""
               : fmt::format("{} has no batchnorm or groupnorm layer", s.what()),
           s.run.checkpoints.empty()
               ? "no layer is recomputed (run.recompute_checkpoints is none), so no statistics "
                 "are computed again"
               : "");
     }},
    {"run.norm_lowering", [](const RunConfig& r) { return !r.popnn_norms; },
     [](const Scope& s) {
       return cnn_only(s, "popnn or fused lowering of batch norm and ReLU is a choice");
     }},
    {"run.allreduce_buffer", [](const RunConfig& r) { return r.allreduce_buffer != (50ull << 20); },
     [](const Scope& s) {
       return first_of(training_only(s, "reducing gradients"),
                       replicated(s, "the gradient all-reduce"),
                       s.run.per_tensor_collectives && !s.cnn()
                           ? std::string("run.collective_grouping per_tensor reduces each weight "
                                         "tensor on its own, in no buffer")
                           : std::string());
     }},
    {"run.reduce_many_buffer", [](const RunConfig& r) { return r.reduce_many_buffer != 0; },
     [](const Scope& s) {
       return first_of(training_only(s, "combining the optimiser's norms"),
                       s.run.optimiser != Optimiser::kLars
                           ? fmt::format("it combines LARS's norms; run.optimiser is {}",
                                         optimiser_name(s.run.optimiser))
                           : "");
     }},
    {"run.collective_grouping", [](const RunConfig& r) { return r.per_tensor_collectives; },
     [](const Scope& s) {
       return first_of(training_only(s, "grouping the gradient collectives"),
                       replicated(s, "the gradient all-reduce"));
     }},
    {"run.gradient_clipping", [](const RunConfig& r) { return r.clip_gradients; },
     [](const Scope& s) { return training_only(s, "clipping gradients"); }},
    {"run.split_qkv", [](const RunConfig& r) { return r.split_qkv; },
     [](const Scope& s) {
       return first_of(transformer_only(s, "splitting the attention's QKV weights"),
                       training_only(s,
                                     "splitting the QKV weights (three gradient collectives "
                                     "and three optimiser norms instead of one)"));
     }},
    {"run.weights", [](const RunConfig& r) { return r.streamed_weights; },
     [](const Scope& s) {
       // Training: phases on one IPU (or one tensor-parallel group), the optimiser state in
       // Streaming Memory with the weights, as popxl's GPT-J and GPT-3 examples keep them.
       return first_of(
           transformer_only(s, "streamed (phased execution)"),
           s.training() && s.run.ipus_per_replica != s.run.tensor_parallel
               ? fmt::format("streamed (phased training) runs every layer on each IPU of the "
                             "replica in turn, not in a pipeline: it needs run.ipus_per_replica "
                             "{} (run.tensor_parallel), found {}",
                             s.run.tensor_parallel, s.run.ipus_per_replica)
               : "",
           s.training() && !s.run.optimiser_state_streaming
               ? std::string("streamed (phased training) keeps the optimiser state in Streaming "
                             "Memory with the weights: set run.optimiser_state streaming")
               : "");
     }},
    {"run.tensor_parallel", [](const RunConfig& r) { return r.tensor_parallel != 1; },
     [](const Scope& s) {
       const std::uint32_t t = s.run.tensor_parallel;
       return first_of(
           transformer_only(s, "tensor model parallelism"),
           s.run.ipus_per_replica != t
               ? fmt::format("{} splits each layer over {} IPUs and needs run.ipus_per_replica {} "
                             "(a pipeline of tensor-parallel stages is not modelled); found "
                             "run.ipus_per_replica {}",
                             t, t, t, s.run.ipus_per_replica)
               : "",
           !s.run.placement.empty() || !s.run.pipeline_ipus.empty()
               ? std::string("a pipeline placement places layers on IPUs; with tensor "
                             "parallelism every IPU of the replica runs every layer")
               : "",
           t % s.run.hidden_parallel == 0 && (s.model.heads % (t / s.run.hidden_parallel) != 0 ||
                                              s.model.ffn % (t / s.run.hidden_parallel) != 0)
               ? fmt::format("{} has {} attention heads and {} FFN hidden units; both must "
                             "divide by the {} IPUs they are split over",
                             s.what(), s.model.heads, s.model.ffn, t / s.run.hidden_parallel)
               : "");
     }},
    {"run.hidden_parallel", [](const RunConfig& r) { return r.hidden_parallel != 1; },
     [](const Scope& s) {
       const std::uint32_t t = s.run.tensor_parallel, h = s.run.hidden_parallel;
       return first_of(
           transformer_only(s, "2-D tensor parallelism"),
           !s.model.lm_head
               ? fmt::format("2-D tensor parallelism is modelled for language models (as popxl "
                             "GPT-3 175B splits them); {} has no LM head",
                             s.what())
               : "",
           t % h != 0 ? fmt::format("{} hidden-splitting IPUs do not divide the {} IPUs of "
                                    "run.tensor_parallel",
                                    h, t)
                      : "",
           s.model.hidden % h != 0
               ? fmt::format("{} has a hidden size of {}, which does not divide by the {} IPUs it "
                             "is split over",
                             s.what(), s.model.hidden, h)
               : "");
     }},
    {"run.kv_cache", [](const RunConfig& r) { return r.kv_cache != KvCache::kNone; },
     [](const Scope& s) {
       return first_of(transformer_only(s, "a KV cache"), generation(s, "a KV cache"),
                       s.run.streamed_weights && s.run.kv_cache == KvCache::kOnChip
                           ? std::string("a KV cache on chip with weights streamed is not "
                                         "modelled: use run.kv_cache streaming")
                           : "");
     }},
    {"run.prompt_tokens", [](const RunConfig& r) { return r.prompt_tokens != 0; },
     [](const Scope& s) {
       return first_of(transformer_only(s, "a prompt"), generation(s, "a prompt"),
                       s.run.new_tokens == 0
                           ? std::string("a prompt belongs to text generation: set "
                                         "run.new_tokens, the tokens generated after it")
                           : "");
     }},
    {"run.new_tokens", [](const RunConfig& r) { return r.new_tokens != 0; },
     [](const Scope& s) {
       return first_of(transformer_only(s, "text generation"), generation(s, "text generation"),
                       s.run.prompt_tokens + s.run.new_tokens > s.model.sequence
                           ? fmt::format("{} prompt and {} new tokens do not fit the model's "
                                         "sequence of {} positions (model.sequence: the padded "
                                         "sequence, or the cache's length)",
                                         s.run.prompt_tokens, s.run.new_tokens, s.model.sequence)
                           : "");
     }},
    {"run.shard_activations", [](const RunConfig& r) { return r.shard_activations; },
     [](const Scope& s) {
       return s.run.phased_training() && s.run.tensor_parallel > s.run.hidden_parallel
                  ? ""
                  : std::string(
                        "sharding stored activations belongs to phased training with "
                        "tensor parallelism (run.weights streamed, run.mode training, "
                        "run.tensor_parallel above 1 and above run.hidden_parallel: the "
                        "activations are sharded over the IPUs splitting the heads)");
     }},
    {"run.fully_connected_pass", [](const RunConfig& r) { return !r.fully_connected_pass; },
     [](const Scope& s) {
       return training_only(s, "planning a matmul's three training passes together");
     }},
    {"run.pipeline_placement", [](const RunConfig& r) { return !r.placement.empty(); },
     [](const Scope& s) {
       return s.cnn() ? fmt::format(
                            "it places transformer sub-layers; {} is {}, which splits its "
                            "pipeline at layers (run.pipeline_splits, with run.pipeline_ipus)",
                            s.what(),
                            s.model.family == graph::Family::kGraph ? "an imported graph" : "a CNN")
                      : "";
     }},
    {"run.pipeline_splits", [](const RunConfig& r) { return !r.pipeline_splits.empty(); },
     [](const Scope& s) {
       return s.cnn() ? ""
                      : fmt::format(
                            "it splits a CNN at layers; {} is a transformer, placed on "
                            "the IPUs of a replica by run.pipeline_placement",
                            s.what());
     }},
    {"run.pipeline_ipus", [](const RunConfig& r) { return !r.pipeline_ipus.empty(); },
     [](const Scope& s) {
       return s.cnn() ? ""
                      : fmt::format(
                            "it places the stages of a CNN or an imported graph; {} is a "
                            "transformer, placed on the IPUs of a replica by "
                            "run.pipeline_placement",
                            s.what());
     }},
    {"run.max_sequences_per_pack", [](const RunConfig& r) { return r.max_sequences_per_pack != 1; },
     [](const Scope& s) {
       return first_of(transformer_only(s, "packing sequences"),
                       s.model.lm_head || s.model.span_head || s.model.classifier
                           ? fmt::format("it sizes a masked-LM head; {} has {} head", s.what(),
                                         s.model.classifier  ? "a classifier"
                                         : s.model.span_head ? "a span"
                                                             : "a language-model")
                           : "");
     }},
    {"run.sequences_per_pack", [](const RunConfig& r) { return r.sequences_per_pack != 1; },
     [](const Scope& s) {
       return s.run.sample_unit == SampleUnit::kSequences
                  ? ""
                  : std::string("packs hold sequences; run.sample_unit is images");
     }},
    {"run.embedding_serialisation",
     [](const RunConfig& r) { return r.embedding_serialisation != 1; },
     [](const Scope& s) {
       return first_of(
           s.model.family == graph::Family::kCnn
               ? fmt::format("{} is a CNN, with no vocabulary matmul", s.what())
               : "",
           s.model.classifier
               ? fmt::format("{} is an image classifier with no vocabulary matmul", s.what())
               : "");
     }},
}};

}  // namespace

void check_run_applies(const ModelDef& model, const RunConfig& run) {
  // Every row names a run key (checked once a process, not at every compile).
  static const bool rows_are_keys = [] {
    for (const Row& row : kRows)
      if (!run_schema().find(std::string(row.key)))
        throw std::logic_error("check_run_applies: no run key " + std::string(row.key));
    return true;
  }();
  (void)rows_are_keys;
  const Scope s{model, run};
  for (const Row& row : kRows) {
    if (!row.set(run)) continue;
    const std::string why = row.refused(s);
    if (why.empty()) continue;
    throw ConfigError(fmt::format("{}: {}", key_at(run, std::string(row.key)), why));
  }
}

}  // namespace ipusim::compiler
