// SPDX-License-Identifier: Apache-2.0
// The run-key walk (docs/run-reference.md, "A key either takes effect or is refused"): every
// key of the run schema, set to each value other than the base run's, over a CNN and a
// transformer, in training and in inference, either changes the compiled trace or is refused
// with an error that names the key. A key that compiles to the same trace as without it is a
// silent no-op: the walk lists each one it finds.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "ipusim/compiler/compiler.hpp"
#include "ipusim/config/system.hpp"
#include "ipusim/trace/trace_io.hpp"
#include "ipusim/util/error.hpp"

namespace ipusim::compiler {
namespace {

const std::string kSource = IPUSIM_SOURCE_DIR;
const std::string kData = kSource + "/tests/data/workloads/";

// A base run: a run file and the overrides that make it the (family, mode) walked.
struct Base {
  std::string run_file;
  std::vector<std::string> sets;
  graph::Family family;
};

const std::vector<std::string> kInference = {"run.mode=inference", "run.gradient_accumulation=1",
                                             "run.optimiser=none"};
std::vector<std::string> cnn_inference() {
  std::vector<std::string> s = kInference;
  s.insert(s.end(), {"run.recompute_checkpoints=none", "run.batchnorm_group=1"});
  return s;
}

// One value to try for a key, with the other keys it needs to be meaningful (a pipeline split
// needs a second IPU per replica), if any.
struct Try {
  std::string value;
  std::vector<std::string> with;
};

// The values the walk tries for `key` on a model of `family` (besides every other choice of a
// key with choices, which it tries anyway). A key of the schema with no entry here fails the
// walk: a new key must say how it is walked.
std::vector<Try> tries(const std::string& key, graph::Family family, const std::string& dir) {
  const bool cnn = family == graph::Family::kCnn;
  static const std::map<std::string, std::vector<Try>> common = {
      {"run.name", {{"walked"}}},
      {"run.system", {{kSource + "/configs/systems/pod64.yaml"}}},
      {"run.replicas", {{"4"}}},
      {"run.micro_batch", {{"4"}}},
      {"run.gradient_accumulation", {{"3"}}},
      {"run.available_memory_proportion", {{"0.002"}}},
      {"run.batchnorm_group", {{"4"}, {"1"}}},
      {"run.allreduce_buffer", {{"1KiB"}}},
      {"run.reduce_many_buffer", {{"216B"}}},
      {"run.io_tiles", {{"32"}}},
      {"run.max_sequences_per_pack", {{"3"}}},
      {"run.sequences_per_pack", {{"3"}}},
      {"run.embedding_serialisation", {{"4"}}},
      {"run.new_tokens", {{"4"}}},
      {"run.prompt_tokens", {{"4", {"run.new_tokens=4"}}}},
      {"run.input_bytes_per_sample", {{"2KiB"}}},
      {"run.ttt.epochs", {{"3"}}},
      {"run.ttt.samples_per_epoch", {{"1000"}}},
      {"run.ttt.samples_to_train", {{"5000"}}},
      {"run.ttt.lead_in", {{"5s"}}},
      {"run.ttt.checkpoint_time", {{"5s"}}},
      {"run.ttt.checkpoints", {{"3"}}},
      {"run.ttt.evaluation_time", {{"5s"}}},
      {"run.ttt.evaluations", {{"3"}}},
  };
  if (auto it = common.find(key); it != common.end()) return it->second;
  if (key == "run.model") return {{dir + "/model-float.yaml"}};
  // Joint plans win only for matmuls of few rows (poplin's fullyConnectedPass estimates): the
  // base model with a wide fc (CNN) or short sequences, one per micro-batch (transformer).
  if (key == "run.fully_connected_pass")
    return {{"no", {"run.model=" + dir + "/model-joint.yaml", "run.micro_batch=1"}}};
  if (key == "run.mode")
    return cnn ? std::vector<Try>{{"inference",
                                   {"run.gradient_accumulation=1", "run.optimiser=none",
                                    "run.recompute_checkpoints=none", "run.batchnorm_group=1"}},
                                  {"training", {"run.optimiser=sgd"}}}
               : std::vector<Try>{
                     {"inference", {"run.gradient_accumulation=1", "run.optimiser=none"}},
                     {"training", {"run.optimiser=sgd"}}};
  if (key == "run.ipus_per_replica")
    return cnn ? std::vector<Try>{{"2", {"run.replicas=8", "run.pipeline_splits=b2/0/conv1"}}}
               : std::vector<Try>{{"1", {"run.pipeline_placement=ipu0=2,2"}}};
  if (key == "run.recompute_checkpoints")
    return cnn ? std::vector<Try>{{"b2/0/relu"}, {"none"}} : std::vector<Try>{{"encoder0"}};
  if (key == "run.pipeline_placement")
    return cnn ? std::vector<Try>{{"ipu0=1,1"}} : std::vector<Try>{{"ipu0=2,2 ipu1=0,0"}};
  if (key == "run.pipeline_splits")
    return cnn ? std::vector<Try>{{"b2/0/conv1", {"run.ipus_per_replica=2", "run.replicas=8"}}}
               : std::vector<Try>{{"layer1"}};
  if (key == "run.pipeline_ipus")  // (the classifier's stage back on IPU 0)
    return cnn ? std::vector<Try>{{"0,1,0",
                                   {"run.ipus_per_replica=2", "run.replicas=8",
                                    "run.pipeline_splits=b2/0/conv1,fc"}}}
               : std::vector<Try>{{"0"}};
  if (key == "run.shard_activations")  // phased training on a tensor-parallel pair
    return cnn ? std::vector<Try>{{"yes"}}
               : std::vector<Try>{{"yes",
                                   {"run.tensor_parallel=2", "run.pipeline_placement=none",
                                    "run.weights=streamed", "run.optimiser_state=streaming",
                                    "run.optimiser=adamw"}}};
  if (key == "run.hidden_parallel")  // (refused: the walk's models have no LM head)
    return {{"2", {"run.tensor_parallel=2", "run.pipeline_placement=none"}}};
  if (key == "run.tensor_parallel")  // every layer on both IPUs of the replica
    return cnn ? std::vector<Try>{{"2"}} : std::vector<Try>{{"2", {"run.pipeline_placement=none"}}};
  const config::ParamDecl* decl = run_schema().find(key);
  if (decl && !decl->choices.empty()) return {};  // its choices only
  ADD_FAILURE() << key << ": the run-key walk has no value to try for it (tries())";
  return {};
}

std::string binary(const trace::Trace& t) {
  std::ostringstream out;
  trace::write_binary(t, out);
  return out.str();
}

// The base's model file (the run's, or `model` when given) compiled with `sets`.
std::string compiled(const Base& base, const std::vector<std::string>& sets) {
  const LoadedRun run = load_run(base.run_file, sets);
  const ModelDef model = load_model(run.run.model_file);
  const auto system = ipusim::load_system(run.run.system_file);
  return binary(compile(model, run.run, system.spec));
}

// Walks every run key over `base`; returns one line per key value that was neither refused
// (an error naming the key) nor changed the trace.
std::vector<std::string> walk(const Base& base) {
  // Each test its own folder (CTest runs them at once).
  const std::string dir = ::testing::TempDir() + "/run-keys-" +
                          ::testing::UnitTest::GetInstance()->current_test_info()->name() + "-" +
                          std::filesystem::path(base.run_file).stem().string();
  std::filesystem::create_directories(dir);
  {
    // run.model's other value: the base's model in float.
    const LoadedRun run = load_run(base.run_file, base.sets);
    std::ifstream in(run.run.model_file);
    std::stringstream text;
    text << in.rdbuf();
    const std::string yaml = text.str();
    const auto variant = [&](const std::string& name,
                             const std::vector<std::pair<std::string, std::string>>& edits) {
      std::string v = yaml;
      for (const auto& [from, to] : edits)
        for (auto at = v.find(from); at != std::string::npos; at = v.find(from, at + to.size()))
          v.replace(at, from.size(), to);
      std::ofstream(dir + "/" + name) << v;
    };
    variant("model-float.yaml", {{"dtype: half", "dtype: float"}});
    variant("model-joint.yaml", {{"out: 128", "out: 256"},
                                 {"op: fc, out: 10}", "op: fc, out: 1024}"},
                                 {"sequence: 128", "sequence: 16"},
                                 {"masked_tokens: 20", "masked_tokens: 4"},
                                 {"classes: 100\n", "classes: 1000\n"}});
  }
  const LoadedRun base_run = load_run(base.run_file, base.sets);
  const std::string reference = compiled(base, base.sets);
  std::vector<std::string> silent;
  std::size_t tried = 0;
  for (const config::ParamDecl& decl : run_schema().params()) {
    const std::string& key = decl.path;
    const std::string current = config::format_value(base_run.resolved.at(key));
    std::vector<Try> values = tries(key, base.family, dir);
    for (const std::string& choice : decl.choices)
      if (std::none_of(values.begin(), values.end(),
                       [&](const Try& t) { return t.value == choice; }))
        values.push_back({choice});
    // Each value's trace, with its companions: two values of a key that compile alike (lamb
    // and sgd on a CNN) are a silent no-op too.
    std::vector<std::tuple<std::vector<std::string>, std::string, std::string>> seen;
    for (const Try& t : values) {
      if (t.value == current) continue;
      std::vector<std::string> sets = base.sets;
      sets.insert(sets.end(), t.with.begin(), t.with.end());
      // Compared with the same run without the key where that compiles (the companions
      // alone), else with the base. Companions the base cannot take at all (a second IPU per
      // replica on a one-IPU card) are refused with the key too, for the same reason.
      std::string before = reference, companions_refused;
      if (!t.with.empty()) try {
          before = compiled(base, sets);
        } catch (const ConfigError& e) {
          companions_refused = e.what();
        }
      sets.push_back(key + "=" + t.value);
      const std::string what = key + "=" + t.value;
      ++tried;
      try {
        const std::string trace = compiled(base, sets);
        if (trace == before) silent.push_back(what + ": compiles to the same trace as without it");
        for (const auto& [with, value, other] : seen)
          if (with == t.with && other == trace)
            silent.push_back(what + ": compiles to the same trace as " + key + "=" + value);
        seen.emplace_back(t.with, t.value, trace);
      } catch (const ConfigError& e) {
        if (std::string(e.what()).find(key) == std::string::npos && e.what() != companions_refused)
          silent.push_back(what + ": refused without naming the key: " + e.what());
      } catch (const ModelError& e) {
        silent.push_back(what + ": a model error, not a refusal of the key: " + e.what());
      }
    }
  }
  EXPECT_GT(tried, run_schema().params().size()) << "every key is tried at least once";
  return silent;
}

std::string lines(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += "\n  " + s;
  return out;
}

TEST(RunKeys, EveryKeyChangesACnnTrainingStepOrIsRefused) {
  const auto silent = walk({kData + "resnet_tiny-pod16.yaml", {}, graph::Family::kCnn});
  EXPECT_TRUE(silent.empty()) << lines(silent);
}

TEST(RunKeys, EveryKeyChangesACnnInferenceStepOrIsRefused) {
  const auto silent =
      walk({kData + "resnet_tiny-pod16.yaml", cnn_inference(), graph::Family::kCnn});
  EXPECT_TRUE(silent.empty()) << lines(silent);
}

TEST(RunKeys, EveryKeyChangesATransformerTrainingStepOrIsRefused) {
  const auto silent = walk({kData + "bert_tiny-pod16.yaml", {}, graph::Family::kTransformer});
  EXPECT_TRUE(silent.empty()) << lines(silent);
}

TEST(RunKeys, EveryKeyChangesATransformerInferenceStepOrIsRefused) {
  const auto silent =
      walk({kData + "bert_tiny-pod16.yaml", kInference, graph::Family::kTransformer});
  EXPECT_TRUE(silent.empty()) << lines(silent);
}

TEST(RunKeys, EveryKeyChangesACnnTrainingStepOnAMultiRackPodOrIsRefused) {
  const auto silent =
      walk({kData + "resnet_tiny-pod16.yaml",
            {"run.system=" + kSource + "/configs/systems/pod128.yaml", "run.replicas=128"},
            graph::Family::kCnn});
  EXPECT_TRUE(silent.empty()) << lines(silent);
}

TEST(RunKeys, EveryKeyChangesACnnInferenceStepOnAC600CardOrIsRefused) {
  std::vector<std::string> sets = cnn_inference();
  sets.insert(sets.end(),
              {"run.system=" + kSource + "/configs/systems/c600.yaml", "run.replicas=1"});
  const auto silent = walk({kData + "resnet_tiny-pod16.yaml", sets, graph::Family::kCnn});
  EXPECT_TRUE(silent.empty()) << lines(silent);
}

TEST(RunKeys, EveryKeyChangesALanguageModelOrAnImageTransformerOrIsRefused) {
  // GPT-style (causal, pre-norm, LM head, AdamW) and ViT-style (classifier head, images).
  for (const char* file : {"gpt_tiny-pod16.yaml", "vit_tiny-pod16.yaml"}) {
    const auto silent = walk({kData + file, {}, graph::Family::kTransformer});
    EXPECT_TRUE(silent.empty()) << file << lines(silent);
  }
}

}  // namespace
}  // namespace ipusim::compiler
