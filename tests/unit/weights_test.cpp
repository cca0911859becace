// SPDX-License-Identifier: Apache-2.0
// The weight-tensor pass (src/compiler/weights.cpp): which weights a stage holds, on which
// layout, at which size, and how the optimiser receives them. Expectations by hand from the
// model files' sizes. No SystemC.
#include "compiler/weights.hpp"

#include <gtest/gtest.h>

#include <numeric>
#include <set>
#include <string>

#include "ipusim/compiler/graph/build.hpp"
#include "test_chips.hpp"

namespace ipusim::compiler {
namespace {

constexpr trace::DType kHalf = trace::DType::kHalf;

struct Builder {
  trace::IpuProgram program;
  const ChipSpec chip = testing::gc200_by_hand();  // the builder keeps a reference to it
  IpuBuilder b{chip, program, 0.6, kHalf, /*fuse_elementwise=*/true};
};

std::set<std::string> layers_of(const graph::TensorGraph& g) {
  std::set<std::string> out;
  for (const graph::Node& n : g.nodes()) out.insert(n.layer);
  return out;
}

std::string data(const std::string& file) {
  return std::string(IPUSIM_SOURCE_DIR) + "/tests/data/workloads/" + file;
}

TEST(Weights, ACnnHoldsEachKernelOnItsConvsLayoutAndItsNormsVectorsLinearly) {
  // resnet_tiny: 9 convs (a stem, two blocks of three and two projections), 9 batch norms'
  // gamma and beta, the fc's weights and bias: 9 + 18 + 2 = 29 tensors, every parameter once.
  const ModelDef m = load_model(data("resnet_tiny.yaml"));
  const graph::TensorGraph g = graph::build_graph(m, {.batch = 4});
  Builder t;
  const StageWeights w = stage_weights(g, t.b, layers_of(g));
  ASSERT_EQ(w.held.size(), 29u);
  EXPECT_EQ(w.elements, g.parameters());
  // The stem's kernel (3 x 3 x 3 in x 16 out) on the layout its conv creates for it.
  EXPECT_EQ(w.held[0].name, "conv1.weight");
  plan::ConvArgs stem;
  stem.batch = 4;
  stem.in_chans = 3;
  stem.height = stem.width = 32;
  stem.out_chans = 16;
  stem.kernel = 3;
  stem.dtype = kHalf;
  EXPECT_EQ(w.held[0].layout, t.b.weights_layout(stem));
  EXPECT_TRUE(w.held[0].adapted);
  // bn1's gamma and beta: 16 elements each on the linear mapping, which LARS skips.
  EXPECT_EQ(w.held[1].name, "bn1.weight");
  EXPECT_EQ(w.held[1].layout, t.b.linear(kHalf, 1, 16));
  EXPECT_EQ(w.held[2].layout, w.held[1].layout);
  EXPECT_FALSE(w.held[1].adapted || w.held[2].adapted);
  // The fc: [10, 128] read transposed by a 4 x 128 by 128 x 10 matmul; its bias linearly.
  EXPECT_EQ(w.held[27].name, "fc.weight");
  EXPECT_EQ(w.held[27].layout, t.b.weights_layout(IpuBuilder::matmul_args(4, 10, 128, kHalf)));
  EXPECT_EQ(w.held[28].layout, t.b.linear(kHalf, 1, 10));
  EXPECT_FALSE(w.held[28].adapted);
}

TEST(Weights, TheOptimiserGetsEqualLayoutsAsOneLoopAndEveryElement) {
  // Each batch norm's gamma and beta share a layout: one entry of two for bn1 (16 channels),
  // and the two 64-channel norms (b1/0/bn3 and its projection's) one entry of four.
  const ModelDef m = load_model(data("resnet_tiny.yaml"));
  const graph::TensorGraph g = graph::build_graph(m, {.batch = 4});
  Builder t;
  const StageWeights w = stage_weights(g, t.b, layers_of(g));
  const WeightUpdate u = w.update(kHalf, /*pipelined=*/false, /*sgd_decay=*/false);
  std::uint64_t tensors = 0;
  for (const auto& e : u.weights) tensors += e.count;
  EXPECT_EQ(tensors, 29u);
  EXPECT_LT(u.weights.size(), 29u);
  EXPECT_EQ(u.parameters, g.parameters());
  const auto entry = [&](const Layout& l) {
    for (const auto& e : u.weights)
      if (e.layout == l) return e.count;
    return std::uint64_t{0};
  };
  EXPECT_EQ(entry(t.b.linear(kHalf, 1, 16)), 2u * 3);  // bn1, b1/0/bn1, b1/0/bn2
  EXPECT_EQ(entry(t.b.linear(kHalf, 1, 64)), 2u * 2);  // b1/0/bn3, b1/0/down_bn
}

TEST(Weights, APaddedVocabularyIsStoredPaddedAndCountedAsTheFrameworkDoes) {
  // bert_tiny with its vocabulary of 1,024 padded to a multiple of 1,000 (2,000 rows stored):
  // the table and the masked-LM head's output bias are stored padded, and the parameter count
  // keeps the framework's 1,024. The tied table takes the head's matmul layout: 2 steps of
  // 1,000 columns each, one tensor a step, over the 2 x 20 masked tokens.
  ModelDef m = load_model(data("bert_tiny.yaml"));
  m.vocabulary_multiple = 1000;
  const graph::TensorGraph g =
      graph::build_graph(m, {.batch = 2, .masked_tokens = 20, .vocabulary_serial = 2});
  Builder t;
  const StageWeights w = stage_weights(g, t.b, layers_of(g));
  EXPECT_EQ(w.elements, g.parameters() + (2000 - 1024) * (256 + 1));
  ASSERT_EQ(w.held[0].name, "word_embeddings.weight");
  EXPECT_EQ(w.held[0].count, 2u);
  EXPECT_EQ(w.held[0].layout, t.b.weights_layout(IpuBuilder::matmul_args(40, 1000, 256, kHalf)));
  const auto bias = std::find_if(w.held.begin(), w.held.end(),
                                 [](const HeldWeights& h) { return h.name == "heads.bias"; });
  ASSERT_NE(bias, w.held.end());
  EXPECT_EQ(bias->layout, t.b.linear(kHalf, 1, 2000));
}

TEST(Weights, AStageHoldsTheWeightsItsLayersReadFirstAndSplitQkvIsThreeTensors) {
  // encoder0's attention alone: QKV (one [768, 256] matrix, or three parts of 256 rows), its
  // bias, the output projection, its bias, the layer norm's gamma and beta. The tied table is
  // read first by the embedding: not the heads' weight.
  const ModelDef m = load_model(data("bert_tiny.yaml"));
  for (const bool split : {false, true}) {
    const graph::TensorGraph g = graph::build_graph(m, {.batch = 1, .split_qkv = split});
    Builder t;
    const StageWeights w = stage_weights(g, t.b, {"encoder0/attention"});
    ASSERT_EQ(w.held.size(), 6u);
    EXPECT_EQ(w.elements, 4u * 256 * 256 + 6 * 256);
    const Layout qkv = t.b.weights_layout(IpuBuilder::matmul_args(128, 768, 256, kHalf));
    EXPECT_EQ(w.held[0].count, split ? 3u : 1u);
    EXPECT_EQ(w.held[0].layout, split ? IpuBuilder::part(qkv, 3) : qkv);
    for (const auto& h : stage_weights(g, t.b, {"heads"}).held)
      EXPECT_NE(h.name, "word_embeddings.weight");
  }
}

}  // namespace
}  // namespace ipusim::compiler
