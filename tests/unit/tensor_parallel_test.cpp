// SPDX-License-Identifier: Apache-2.0
// Tensor model parallelism (run.tensor_parallel; docs/workloads.md "Tensor model
// parallelism"): the reduced GPT (tests/data/workloads/gpt_tiny.yaml: hidden h = 256, 4 heads,
// FFN f = 1024, vocabulary 1,000 padded to 1,008, 2 layers, 128 tokens, pre-norm, tied LM head)
// split over the 2 IPUs of a replica. Every expectation is counted by hand from the Megatron
// layout the builder states. No SystemC.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <tuple>
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

// 2-D tensor parallelism (run.hidden_parallel; popxl GPT-3 175B's TP1 x TP2): the reduced GPT
// over 4 IPUs, pairs of consecutive IPUs splitting the hidden dimension (hs = 128) and the
// pairs of IPUs 2 apart the heads (2 each), FFN (f / 2 = 512) and vocabulary (500 rows, 504
// stored).
TEST(TensorParallel2D, ShardsHoldTheirShareOfBothSplits) {
  // Per layer: two norms over hs (2 x 2 x 128), QKV [384, 128] + 384, output [128, 128] + 128,
  // FFN in [512, 128] + 512 and out [128, 512] + 128: 198,272; twice. The token table [500,
  // 128], the positions [64, 128] and the final norm 2 x 128: 468,992 a shard.
  const ModelDef m = load_model(kDir + "gpt_tiny.yaml");
  graph::BuildOptions o;
  o.tensor_parallel = 4;
  o.hidden_parallel = 2;
  const std::uint64_t layer =
      4 * 128 + 384 * 128 + 384 + 128 * 128 + 128 + 512 * 128 + 512 + 128 * 512 + 128;
  ASSERT_EQ(layer, 198272u);
  EXPECT_EQ(graph::build_graph(m, o).parameters(), 2 * layer + 500 * 128 + 64 * 128 + 256);
}

// Each all-reduce over some of the replica's IPUs: (size, stride, bytes) -> how many times one
// step runs it.
void count_group_all_reduces(
    const std::vector<trace::Step>& steps, std::uint64_t times,
    std::map<std::tuple<std::uint32_t, std::uint32_t, std::uint64_t>, std::uint64_t>& out) {
  for (const trace::Step& s : steps) {
    if (s.kind == StepKind::kRepeat) count_group_all_reduces(s.body, times * s.count, out);
    if (s.kind == StepKind::kCollective && s.group.kind == trace::GroupKind::kReplica) {
      EXPECT_EQ(s.collective, trace::CollectiveOp::kAllReduce);
      out[{s.group.size, s.group.stride, s.bytes}] += times;
    }
  }
}

TEST(TensorParallel2D, EachMatmulAllReducesOverTheGroupItsSplitSums) {
  // One micro-batch of 2 x 128 tokens (256 rows). Over the head pairs (`replica:2/2`), as 1-D
  // but of half the hidden features, 65,536 B: the embedding's lookup and each attention's and
  // FFN's output (5), again when recomputed (5), and each split layer's input gradient and the
  // LM head's (5); the loss's three row statistics, 1,024 B. Over the hidden pairs
  // (`replica:2`): each layer norm's two row statistics, 2,048 B (4 + the final norm forward, 4
  // recomputed, 5 backward); the QKV projection's partial sums [256, 384] half, 196,608 B (2 +
  // 2 recomputed); the FFN's first [256, 512], 262,144 B (2 + 2), and the gradient of the
  // second's input, as large (2); the tied LM head's logits [256, 500], 256,000 B (1); the
  // gradient of each attention's output projection's input [256, 128], 65,536 B (2).
  const trace::Trace t = compile_run(
      kDir + "gpt_tiny-pod16.yaml",
      {"run.ipus_per_replica=4", "run.replicas=4", "run.tensor_parallel=4", "run.hidden_parallel=2",
       "run.pipeline_placement=none", "run.gradient_accumulation=4"});
  ASSERT_EQ(t.ipus.size(), 4u);
  std::map<std::tuple<std::uint32_t, std::uint32_t, std::uint64_t>, std::uint64_t> reduces;
  count_group_all_reduces(t.ipus[0].steps, 1, reduces);
  const std::uint64_t mb = 4;
  const decltype(reduces) by_hand{{{2, 2, 65536}, 15 * mb}, {{2, 2, 1024}, 3 * mb},
                                  {{2, 1, 2048}, 14 * mb},  {{2, 1, 196608}, 4 * mb},
                                  {{2, 1, 262144}, 6 * mb}, {{2, 1, 256000}, 1 * mb},
                                  {{2, 1, 65536}, 2 * mb}};
  EXPECT_EQ(reduces, by_hand);
  // Every IPU runs the same program; its groups are relative to it.
  for (const auto& ipu : t.ipus) EXPECT_EQ(ipu.steps, t.ipus[0].steps);
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
  // 2-D: a hidden group that does not divide the tensor-parallel IPUs, and a model without an
  // LM head (BERT's masked-LM head).
  const std::vector<std::string> four = {"run.tensor_parallel=4", "run.ipus_per_replica=4",
                                         "run.replicas=4", "run.pipeline_placement=none"};
  auto with = [&](std::vector<std::string> v, const std::string& set) {
    v.push_back(set);
    return v;
  };
  EXPECT_NE(error("gpt_tiny-pod16.yaml", with(four, "run.hidden_parallel=3"))
                .find("3 hidden-splitting IPUs do not divide the 4 IPUs of run.tensor_parallel"),
            std::string::npos);
  EXPECT_NE(
      error("bert_tiny-pod16.yaml", with(four, "run.hidden_parallel=2")).find("has no LM head"),
      std::string::npos);
}

}  // namespace
}  // namespace ipusim::compiler
