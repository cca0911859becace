// SPDX-License-Identifier: Apache-2.0
// Tensor model parallelism (run.tensor_parallel; docs/workloads.md "Tensor model
// parallelism"): the reduced GPT (tests/data/workloads/gpt_tiny.yaml: hidden h = 256, 4 heads,
// FFN f = 1024, vocabulary 1,000 padded to 1,008, 2 layers, 128 tokens, pre-norm, tied LM head)
// split over the 2 IPUs of a replica. Every expectation is counted by hand from the Megatron
// layout the builder states. No SystemC.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "compile_helpers.hpp"
#include "ipusim/compiler/compiler.hpp"
#include "ipusim/compiler/graph/build.hpp"
#include "ipusim/config/system.hpp"

namespace ipusim::compiler {
namespace {

using ipusim::testing::compile_run;
using ipusim::testing::config_error_of;
using trace::StepKind;

const std::string kDir = std::string(IPUSIM_SOURCE_DIR) + "/tests/data/workloads/";

// Each all-reduce over the replica's IPUs, by bytes: how many times one step runs it
// (repeat loops multiplied out).
void count_replica_all_reduces(const std::vector<trace::Step>& steps, std::uint64_t times,
                               std::map<std::uint64_t, std::uint64_t>& out) {
  for (const trace::Step& s : steps) {
    if (s.kind == StepKind::kRepeat) count_replica_all_reduces(s.body, times * s.count, out);
    if (s.kind == StepKind::kCollective && s.group.kind == trace::GroupKind::kReplica) {
      EXPECT_EQ(s.collective, trace::CollectiveOp::kAllReduce);
      out[s.bytes] += times;
    }
  }
}

TEST(TensorParallel, ShardsHoldHalfOfEverySplitWeight) {
  // Split over T = 2: per layer the QKV [3h, h] and FFN-in [f, h] matrices by rows of their
  // outputs with their biases (3h, f), the output projections [h, h] and [h, f] by their
  // inputs (biases whole); the token table by vocabulary rows (1,000 -> 500) and the position
  // table by positions (128 -> 64). Removed from each IPU: per layer (4h^2 + 2hf + 3h + f) / 2 =
  // 394,112, twice; 500 x h = 128,000; 64 x h = 16,384.
  const ModelDef m = load_model(kDir + "gpt_tiny.yaml");
  graph::BuildOptions one, two;
  two.tensor_parallel = 2;
  const std::uint64_t whole = graph::build_graph(m, one).parameters();
  const std::uint64_t shard = graph::build_graph(m, two).parameters();
  const std::uint64_t h = 256, f = 1024;
  ASSERT_EQ(2 * ((4 * h * h + 2 * h * f + 3 * h + f) / 2) + 500 * h + 64 * h, 932608u);
  EXPECT_EQ(whole - shard, 932608u);
}

TEST(TensorParallel, EachSplitLayerAllReducesItsOutputAndItsInputsGradient) {
  // One micro-batch (2 sequences of 128 tokens, hidden 256, half: 131,072 B a tensor):
  // forward, the embedding's lookup and each layer's attention and FFN outputs (1 + 2 x 2);
  // recomputed before the backward (every sub-layer is a checkpoint), the same 5 again; in
  // the backward, the gradient of each split layer's input (2 x 2) and of the LM head's (1).
  // 15 all-reduces of 131,072 B, times 4 micro-batches. The loss over the split vocabulary
  // all-reduces each row's three statistics (largest logit, sum of exponentials, the label's
  // logit), each a float a row: three of 256 rows x 4 B = 1,024 B a micro-batch.
  const trace::Trace t = compile_run(
      kDir + "gpt_tiny-pod16.yaml", {"run.ipus_per_replica=2", "run.tensor_parallel=2",
                                     "run.pipeline_placement=none", "run.gradient_accumulation=4"});
  ASSERT_EQ(t.ipus.size(), 2u);
  std::map<std::uint64_t, std::uint64_t> reduces;
  count_replica_all_reduces(t.ipus[0].steps, 1, reduces);
  const std::uint64_t activation = 2 * 128 * 256 * 2;
  const std::map<std::uint64_t, std::uint64_t> by_hand{{activation, 15 * 4}, {1024, 3 * 4}};
  EXPECT_EQ(reduces, by_hand);
  // The two IPUs run the same program (the group's members run the same group steps).
  EXPECT_EQ(t.ipus[1].ipu, 1u);
  EXPECT_EQ(t.ipus[1].steps.size(), t.ipus[0].steps.size());
  EXPECT_EQ(t.ipus[1].compute_sets.size(), t.ipus[0].compute_sets.size());
}

TEST(PhasedTraining, EachPhaseLoadsItsWeightsOnceAndLoopsOverItsMicroBatches) {
  // The reduced GPT trained in phases on 16 replicas of one IPU, weights, gradients and
  // optimiser state in Streaming Memory sharded over the replicas (popxl GPT-J finetuning.py):
  // phases embedding, layer 0, layer 1 and the tail (final norm, tied LM head, loss). By hand,
  // in stored elements: a layer's weights 4h^2 + 2hf + f + 9h = 789,760 (QKV 3h^2 + 3h, output
  // h^2 + h, two layer norms 4h, FFN 2hf + f + h); the embedding's the padded table 1,008 x h
  // and the positions 128 x h = 290,816; the tail's its norm 2h and the tied table again,
  // 258,560. Half values: x 2 B.
  const trace::Trace t =
      compile_run(kDir + "gpt_tiny-pod16.yaml",
                  {"run.ipus_per_replica=1", "run.replicas=16", "run.pipeline_placement=ipu0=2,2",
                   "run.weights=streamed", "run.optimiser_state=streaming",
                   "run.replicated_tensor_sharding=yes"});
  ASSERT_EQ(t.ipus.size(), 1u);
  const std::uint64_t layer = 789760 * 2, embedding = 290816 * 2, tail = 258560 * 2;
  std::vector<std::uint64_t> gathers, scatters, loops;
  for (const trace::Step& s : t.ipus[0].steps) {
    if (s.kind == StepKind::kRepeat) loops.push_back(s.count);
    if (s.kind != StepKind::kCollective) continue;
    if (s.collective == trace::CollectiveOp::kAllGather) gathers.push_back(s.bytes);
    if (s.collective == trace::CollectiveOp::kReduceScatter) scatters.push_back(s.bytes);
  }
  // Each phase's weights gathered when it loads them: forward embedding, layers 0 and 1, the
  // tail; backward layers 1 and 0, the embedding. Its gradients reduce-scattered after its
  // backward: the tail, layers 1 and 0, the embedding.
  EXPECT_EQ(gathers,
            (std::vector<std::uint64_t>{embedding, layer, layer, tail, layer, layer, embedding}));
  EXPECT_EQ(scatters, (std::vector<std::uint64_t>{tail, layer, layer, embedding}));
  // Seven loops over the 4 micro-batches, one a phase (the optimiser's loops after them).
  ASSERT_GE(loops.size(), 7u);
  EXPECT_EQ(std::vector<std::uint64_t>(loops.begin(), loops.begin() + 7),
            std::vector<std::uint64_t>(7, 4));
  // A phase's load is each replica's 1/16 of its weights, spread over every tile.
  std::vector<std::uint64_t> loads;
  for (const trace::Step& s : t.ipus[0].steps)
    if (s.kind == StepKind::kHost && s.memory == trace::HostMemory::kStreaming &&
        s.direction == trace::HostDirection::kToIpu && s.provenance.pass == trace::Pass::kForward)
      loads.push_back(s.bytes * s.tiles.size());
  const std::uint64_t tiles =
      ipusim::load_system(kDir + "../../../configs/systems/pod16.yaml").spec.chip.tiles;
  ASSERT_EQ(loads.size(), 4u);
  EXPECT_EQ(loads[1], (layer / 16 + tiles - 1) / tiles * tiles);
}

TEST(TensorParallel, RefusesWhatItDoesNotModelWithTheReason) {
  const auto error = [](const std::string& file, const std::vector<std::string>& sets) {
    return config_error_of([&] { (void)compile_run(kDir + file, sets); });
  };
  // A pipeline of tensor-parallel stages.
  EXPECT_NE(error("gpt_tiny-pod16.yaml", {"run.tensor_parallel=2", "run.ipus_per_replica=4",
                                          "run.replicas=4", "run.pipeline_placement=none"})
                .find("needs run.ipus_per_replica 2 (a pipeline of tensor-parallel stages is not "
                      "modelled); found run.ipus_per_replica 4"),
            std::string::npos);
  // A placement.
  EXPECT_NE(error("gpt_tiny-pod16.yaml", {"run.tensor_parallel=2"}).find("pipeline placement"),
            std::string::npos);
  // Heads that do not divide: 4 heads over 3 IPUs.
  EXPECT_NE(error("gpt_tiny-pod16.yaml", {"run.tensor_parallel=3", "run.ipus_per_replica=3",
                                          "run.replicas=4", "run.pipeline_placement=none"})
                .find("has 4 attention heads and 1024 FFN hidden units; both must divide by the "
                      "3 IPUs"),
            std::string::npos);
  // A CNN.
  EXPECT_NE(error("resnet_tiny-pod16.yaml", {"run.tensor_parallel=2"})
                .find("tensor model parallelism is lowered for transformer model files only"),
            std::string::npos);
}

}  // namespace
}  // namespace ipusim::compiler
