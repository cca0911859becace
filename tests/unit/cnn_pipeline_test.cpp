// SPDX-License-Identifier: Apache-2.0
// Pipelined CNNs (run.pipeline_splits, issue 26 item 1): the layers each IPU of a replica runs,
// what the inter-IPU copy carries, the shared pipeline schedule, recomputation of stashed
// stages, memory and the run file's errors; and the G16-GN EfficientNets the example pipelines.
// Expected values are worked out by hand from tests/data/workloads/resnet_tiny.yaml (32 x 32
// images, micro-batch 8, half).
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "compile_helpers.hpp"
#include "compiler/graph/stages.hpp"
#include "ipusim/compiler/compiler.hpp"
#include "ipusim/compiler/graph/build.hpp"
#include "ipusim/util/error.hpp"

namespace ipusim::compiler {
namespace {

using ipusim::testing::compile_run;
using trace::StepKind;

const std::string kRun =
    std::string(IPUSIM_SOURCE_DIR) + "/tests/data/workloads/resnet_tiny-pod16.yaml";

// resnet_tiny on 8 replicas of a 2-IPU pipeline split where `split` begins IPU 1's stage.
trace::Trace compile_split(const std::string& split, std::vector<std::string> more = {}) {
  std::vector<std::string> set{"run.replicas=8", "run.ipus_per_replica=2",
                               "run.pipeline_splits=" + split};
  set.insert(set.end(), more.begin(), more.end());
  return compile_run(kRun, set);
}

// The layers whose compute sets a program's steps run in pass `pass` (any pass: kNone); a
// recomputation runs the forward's compute sets with the step's own pass.
std::set<std::string> layers_of(const trace::IpuProgram& p, trace::Pass pass = trace::Pass::kNone) {
  std::set<std::string> out;
  const std::function<void(const std::vector<trace::Step>&)> walk =
      [&](const std::vector<trace::Step>& steps) {
        for (const auto& s : steps) {
          if (s.kind == StepKind::kRepeat) walk(s.body);
          if (s.kind != StepKind::kCompute) continue;
          const auto& cs = p.compute_sets[s.index];
          if (pass == trace::Pass::kNone || s.pass_of(cs.provenance) == pass)
            out.insert(cs.provenance.layers.begin(), cs.provenance.layers.end());
        }
      };
  walk(p.steps);
  return out;
}

// The bytes of a program's gradient all-reduces (not batch norm's statistics; loops counted
// once: the weight update has none).
std::uint64_t collective_bytes(const std::vector<trace::Step>& steps) {
  std::uint64_t bytes = 0;
  for (const auto& s : steps) {
    if (s.kind == StepKind::kCollective && s.provenance.pass == trace::Pass::kGradientAllreduce)
      bytes += s.bytes;
    if (s.kind == StepKind::kRepeat) bytes += collective_bytes(s.body);
  }
  return bytes;
}

TEST(CompilerCnnPipeline, EachIpuRunsItsStageAndTheCopyCarriesWhatCrosses) {
  // Split before b2/0/conv1: IPU 0 runs conv1 .. b1/0/relu, IPU 1 b2/0/conv1 .. loss. Only
  // b1/0/relu crosses (read by b2/0/conv1 and the shortcut b2/0/down): 8 images x 32 x 32 x 64
  // halves = 1,048,576 B a micro-batch, forward 0 -> 1 and its gradient back 1 -> 0.
  const trace::Trace t = compile_split("b2/0/conv1");
  ASSERT_EQ(t.ipus.size(), 2u);
  EXPECT_EQ(t.ipus[0].ipu, 0u);
  EXPECT_EQ(t.ipus[1].ipu, 1u);
  const auto on0 = layers_of(t.ipus[0]), on1 = layers_of(t.ipus[1]);
  for (const char* l : {"conv1", "b1/0/conv3", "b1/0/down"}) {
    EXPECT_TRUE(on0.count(l)) << l;
    EXPECT_FALSE(on1.count(l)) << l;
  }
  for (const char* l : {"b2/0/conv1", "b2/0/down", "fc", "loss"}) {
    EXPECT_TRUE(on1.count(l)) << l;
    EXPECT_FALSE(on0.count(l)) << l;
  }
  ASSERT_EQ(t.global_exchanges.size(), 1u);
  const auto& copies = t.global_exchanges[0].copies;
  ASSERT_EQ(copies.size(), 2u);
  EXPECT_EQ(copies[0].src, 0u);
  EXPECT_EQ(copies[0].dst, 1u);
  EXPECT_EQ(copies[0].bytes, 8u * 32 * 32 * 64 * 2);
  EXPECT_EQ(copies[1].src, 1u);
  EXPECT_EQ(copies[1].dst, 0u);
  EXPECT_EQ(copies[1].bytes, 8u * 32 * 32 * 64 * 2);

  // Split before b2/0/relu2 (inside the block): its input b2/0/bn2 (16 x 16 x 32 after the
  // stride-2 conv2) and the shortcut's input b1/0/relu both cross: 8 x (8,192 + 65,536) x 2 B.
  const trace::Trace inside = compile_split("b2/0/relu2");
  EXPECT_EQ(inside.global_exchanges[0].copies[0].bytes, 8u * (16 * 16 * 32 + 32 * 32 * 64) * 2);
  EXPECT_TRUE(layers_of(inside.ipus[0]).count("b2/0/conv2"));
  EXPECT_TRUE(layers_of(inside.ipus[1]).count("b2/0/down"));
}

TEST(CompilerCnnPipeline, TheIpusWeightsAddUpToTheModels) {
  // Each IPU all-reduces its own layers' gradients over the replicas: together, every
  // parameter of the model once (half: 2 B each), as the one-IPU replica does.
  const trace::Trace whole = compile_run(kRun, {"run.replicas=8"});
  const std::uint64_t all = 2 * parameter_count(load_model(load_run(kRun).run.model_file));
  EXPECT_EQ(collective_bytes(whole.ipus[0].steps), all);
  const trace::Trace t = compile_split("b2/0/conv1");
  const std::uint64_t ipu0 = collective_bytes(t.ipus[0].steps);
  const std::uint64_t ipu1 = collective_bytes(t.ipus[1].steps);
  EXPECT_GT(ipu0, 0u);
  EXPECT_GT(ipu1, 0u);
  EXPECT_EQ(ipu0 + ipu1, all);
}

TEST(CompilerCnnPipeline, CyclesFollowTheSharedScheduleWithTheLossOnTheLastIpu) {
  // Two stages, the loss on IPU 1 (L = 1): IPU 0's forward is stage 0 (cycles 0 .. GA - 1),
  // its backward stage 2 (cycles 2 .. GA + 1); IPU 1 runs forward and backward as stage 1
  // (cycles 1 .. GA). GA = 4 makes a step of GA + 2 = 6 cycles: IPU 0 [0, 2) forward, [2, 4)
  // both, [4, 6) backward; IPU 1 [0, 1) idle, [1, 5) its stage, [5, 6) idle.
  const trace::Trace t = compile_split("b2/0/conv1", {"run.gradient_accumulation=4"});
  const auto loops = ipusim::testing::pipeline_loop_counts;
  EXPECT_EQ(loops(t.ipus[0]), (std::vector<std::uint64_t>{2, 2, 2}));
  EXPECT_EQ(loops(t.ipus[1]), (std::vector<std::uint64_t>{1, 4, 1}));
}

TEST(CompilerCnnPipeline, AStashedStageRecomputesItsWholeForward) {
  // IPU 0's backward runs two cycles after its forward, so it keeps only its input and
  // recomputes every layer before back-propagating (its convs appear in the recompute pass);
  // IPU 1, the loss stage, runs forward and backward in one cycle and recomputes nothing
  // (resnet_tiny's one checkpoint, b1/0/relu, is on IPU 0).
  const trace::Trace t = compile_split("b2/0/conv1");
  const auto rec0 = layers_of(t.ipus[0], trace::Pass::kRecompute);
  for (const char* l : {"conv1", "b1/0/conv1", "b1/0/conv2", "b1/0/conv3", "b1/0/down"})
    EXPECT_TRUE(rec0.count(l)) << l;
  EXPECT_TRUE(layers_of(t.ipus[1], trace::Pass::kRecompute).empty());
  // Memory: IPU 0 stashes its input, the normalised images (8 x 32 x 32 x 3 halves = 49,152
  // B), for 2 (L - 0) + 1 = 3 micro-batches; IPU 1 its input (1,048,576 B) for one. Spread
  // over the 1,472 tiles: ceil(147,456 / 1472) = 101 B and ceil(1,048,576 / 1472) = 713 B.
  const auto stash = [](const trace::IpuProgram& p) -> std::uint64_t {
    for (const auto& tensor : p.tensors)
      if (tensor.name == "stashed_activations") return tensor.bytes_per_tile;
    return 0;
  };
  EXPECT_EQ(stash(t.ipus[0]), 101u);
  EXPECT_EQ(stash(t.ipus[1]), 713u);
  // The input buffer is IPU 0's only.
  for (const auto& tensor : t.ipus[1].tensors) EXPECT_NE(tensor.name, "input_buffer");
}

TEST(CompilerCnnPipeline, InferenceRunsTheForwardThroughThePipelineAndOutputsFromTheLastIpu) {
  // One batch a step: stage s runs in cycle s of 1 + 1 = 2; only activations travel (0 -> 1),
  // and the class scores leave from IPU 1.
  const trace::Trace t = compile_split(
      "b2/0/conv1", {"run.mode=inference", "run.gradient_accumulation=1", "run.optimiser=none",
                     "run.recompute_checkpoints=none", "run.batchnorm_group=1"});
  ASSERT_EQ(t.global_exchanges.size(), 1u);
  ASSERT_EQ(t.global_exchanges[0].copies.size(), 1u);
  EXPECT_EQ(t.global_exchanges[0].copies[0].dst, 1u);
  const auto from_ipu = [](const trace::IpuProgram& p) {
    std::size_t n = 0;
    const std::function<void(const std::vector<trace::Step>&)> walk =
        [&](const std::vector<trace::Step>& steps) {
          for (const auto& s : steps) {
            if (s.kind == StepKind::kHost && s.direction == trace::HostDirection::kFromIpu) ++n;
            if (s.kind == StepKind::kRepeat) walk(s.body);
          }
        };
    walk(p.steps);
    return n;
  };
  EXPECT_EQ(from_ipu(t.ipus[0]), 0u);
  EXPECT_EQ(from_ipu(t.ipus[1]), 1u);
}

// The error compiling `run_file` with `set` gives ("" if it compiles).
std::string compile_error(const std::string& run_file, const std::vector<std::string>& set) {
  try {
    compile_run(run_file, set);
  } catch (const ipusim::Error& e) {
    return e.what();
  }
  return "";
}

TEST(CompilerCnnPipeline, SplitErrorsNameTheKeyAndTheLayer) {
  const auto with = [](std::vector<std::string> more) {
    more.insert(more.begin(), {"run.replicas=8", "run.ipus_per_replica=2"});
    return compile_error(kRun, more);
  };
  EXPECT_NE(with({}).find("run.pipeline_splits: a CNN replica of 2 IPU(s) runs 2 pipeline "
                          "stage(s), so 1 split(s) (each a layer that begins a stage); found 0"),
            std::string::npos)
      << with({});
  EXPECT_NE(with({"run.pipeline_splits=b2/0/conv9"})
                .find("run.pipeline_splits: 'b2/0/conv9' is not a layer of"),
            std::string::npos);
  EXPECT_NE(with({"run.pipeline_splits=conv1"}).find("'conv1' is the first layer"),
            std::string::npos);
  EXPECT_NE(with({"run.ipus_per_replica=3", "run.replicas=4",
                  "run.pipeline_splits=b2/0/conv1,b1/0/conv1"})
                .find("'b1/0/conv1' comes before or at the previous split 'b2/0/conv1'"),
            std::string::npos);
  EXPECT_NE(with({"run.pipeline_placement=ipu0=1,1 ipu1=1,1"})
                .find("run.pipeline_placement: it places transformer sub-layers"),
            std::string::npos);
  EXPECT_EQ(with({"run.pipeline_splits=b2/0/conv1"}), "");
  // A transformer is placed, not split.
  const std::string bert =
      compile_error(std::string(IPUSIM_SOURCE_DIR) + "/tests/data/workloads/bert_tiny-pod16.yaml",
                    {"run.pipeline_splits=layer1"});
  EXPECT_NE(bert.find("run.pipeline_splits: it splits a CNN at layers"), std::string::npos) << bert;
}

TEST(GraphStages, CrossingTensorsAreThoseReadAcrossTheBoundary) {
  const ModelDef m =
      load_model(std::string(IPUSIM_SOURCE_DIR) + "/tests/data/workloads/resnet_tiny.yaml");
  RunConfig run;
  run.file = "r.yaml";
  run.inference = true;
  run.ipus_per_replica = 3;
  run.pipeline_splits = {"b1/0/conv1", "b1/0/add"};
  const graph::ForwardStages stages = graph::forward_stages(m, run);
  ASSERT_EQ(stages.layers.size(), 3u);
  EXPECT_EQ(stages.ipu, (std::vector<std::uint32_t>{0, 1, 2}));
  EXPECT_EQ(stages.layers[1].front().layer, "b1/0/conv1");
  EXPECT_EQ(stages.layers[2].front().layer, "b1/0/add");
  graph::BuildOptions options;
  options.batch = 2;
  options.training = false;
  const graph::TensorGraph g = graph::build_graph(m, options);
  const auto output = [&](const std::string& layer) {
    std::optional<graph::TensorId> out;
    for (const graph::Node& n : g.nodes())
      if (n.layer == layer) out = n.outputs[0];
    return out.value();
  };
  // Before b1/0/conv1: relu1 (read by b1/0/conv1 and b1/0/down); before the add: b1/0/bn3
  // (its input) and b1/0/down_bn (its other operand) are the add's, nothing else: two maps of
  // 64 channels of 32 x 32, two images each.
  const auto crossing = graph::crossing(g, stages);
  ASSERT_EQ(crossing.size(), 3u);
  EXPECT_TRUE(crossing[0].empty());
  EXPECT_EQ(crossing[1], (std::vector<graph::TensorId>{output("relu1")}));
  auto add_operands = std::vector<graph::TensorId>{output("b1/0/bn3"), output("b1/0/down_bn")};
  std::sort(add_operands.begin(), add_operands.end());
  EXPECT_EQ(crossing[2], add_operands);
  std::uint64_t elements = 0;
  for (const graph::TensorId t : crossing[2]) elements += graph::elements(g.tensor(t).dims);
  EXPECT_EQ(elements, 2u * 2 * 32 * 32 * 64);
}

TEST(CompilerCnn, G16GnEfficientNetsFollowTheirRuleFromThePublishedModels) {
  // models/efficientnet_b{0,4}_g16_gn.yaml (graphcore/examples create_efficientnet with
  // expand_ratio 4, group_dim 16, group norm of 4 groups) against the published files, layer
  // by layer: the same layers, every batchnorm a groupnorm, the MBConv6 blocks' expand conv
  // and squeeze-and-excitation expand fc at 4 / 6 of the channels (stage 1 has no expansion),
  // every dwconv 16 channels a group but B4's s1/1/dw (24 channels: max(24 // 16, 1) = 1
  // group of 24).
  const std::string dir = std::string(IPUSIM_SOURCE_DIR) + "/models/";
  for (const char* b : {"b0", "b4"}) {
    const ModelDef pub = load_model(dir + "efficientnet_" + b + ".yaml");
    const ModelDef g16 = load_model(dir + "efficientnet_" + b + "_g16_gn.yaml");
    EXPECT_EQ(g16.norm_groups, 4u);
    EXPECT_EQ(g16.depthwise_group_size, 16u);
    ASSERT_EQ(pub.layers.size(), g16.layers.size()) << b;
    for (std::size_t i = 0; i < pub.layers.size(); ++i) {
      const Layer &p = pub.layers[i], &g = g16.layers[i];
      ASSERT_EQ(p.name, g.name);
      EXPECT_EQ(g.op, p.op == graph::Op::kBatchNorm ? graph::Op::kGroupNorm : p.op) << g.name;
      const bool expansion = !p.name.starts_with("s1/") &&
                             (p.name.ends_with("/expand") || p.name.ends_with("/se_expand"));
      EXPECT_EQ(g.out, expansion ? p.out * 4 / 6 : p.out) << g.name;
      if (g.op == graph::Op::kDwconv)
        EXPECT_EQ(g.group_size, g.name == "s1/1/dw" && std::string(b) == "b4" ? 24u : 16u)
            << g.name;
    }
  }
}

TEST(CompilerCnnPipeline, TheExamplesB4SplitPutsStagesOneToThreeOnIpuZero) {
  // efficientnet-b4-g16-gn-pod16: split at blocks/3/0/bn2 (s4/0/dw_bn): IPU 0 runs the stem
  // and stages 1-3 and stage 4's first expand and grouped conv; IPU 1 the rest. What crosses
  // is the grouped conv's output only (the block's input is not read past it: no residual in
  // a stride-2 first block): 4 images x 24 x 24 (380 / 16, rounded up) x 224 channels (56 x 4)
  // halves.
  const trace::Trace t = compile_run(std::string(IPUSIM_SOURCE_DIR) +
                                     "/configs/runs/efficientnet-b4-g16-gn-pod16.yaml");
  ASSERT_EQ(t.ipus.size(), 2u);
  const auto on0 = layers_of(t.ipus[0]), on1 = layers_of(t.ipus[1]);
  EXPECT_TRUE(on0.count("s4/0/dw"));
  EXPECT_FALSE(on0.count("s4/0/dw_bn"));
  EXPECT_TRUE(on1.count("s4/0/dw_bn"));
  EXPECT_EQ(t.global_exchanges[0].copies[0].bytes, 4u * 24 * 24 * 224 * 2);
}

TEST(CnnPipeline, GradientClippingSendsEachIpusNormsToIpuZeroAsATransformerDoes) {
  // The weight update is one pass for every model (optimiser.hpp): split before b2/0/conv1,
  // IPU 1 holds b2/0's four conv kernels, its four batch norms' gamma and beta and the fc's
  // weights and bias: 14 weight tensors, a 4-byte norm each.
  const trace::Trace t = compile_split("b2/0/conv1", {"run.gradient_clipping=global_norm"});
  ASSERT_EQ(t.global_exchanges.size(), 3u);  // the pipeline's copy, the norms, the factor
  EXPECT_EQ(t.global_exchanges[1].name, "clip_norms");
  ASSERT_EQ(t.global_exchanges[1].copies.size(), 1u);
  EXPECT_EQ(t.global_exchanges[1].copies[0].bytes, 14u * 4);
  ASSERT_EQ(t.global_exchanges[2].copies.size(), 1u);
  EXPECT_EQ(t.global_exchanges[2].copies[0].bytes, 4u);
  for (const auto& p : t.ipus) {
    std::size_t clip_steps = 0;
    for (const auto& s : p.steps) clip_steps += s.kind == StepKind::kGlobalExchange ? 1 : 0;
    EXPECT_EQ(clip_steps, 2u) << "IPU " << p.ipu;  // the copy runs inside the pipeline loops
  }
  // Without the key: the pipeline's copy only.
  EXPECT_EQ(compile_split("b2/0/conv1").global_exchanges.size(), 1u);
}

}  // namespace
}  // namespace ipusim::compiler
