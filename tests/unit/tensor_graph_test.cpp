// SPDX-License-Identifier: Apache-2.0
// The tensor graph (src/compiler/graph/): the primitive table's shape rules, the verifier,
// autodiff, the model-file front ends, and parameters and FLOPs as sums over the graph. No
// SystemC, no chip. Expected values are worked by hand in each test.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "compile_helpers.hpp"
#include "ipusim/compiler/compiler.hpp"
#include "ipusim/compiler/graph/build.hpp"
#include "ipusim/compiler/graph/primitive.hpp"
#include "ipusim/util/error.hpp"

namespace ipusim::compiler::graph {
namespace {

using P = Primitive;
constexpr auto kHalf = trace::DType::kHalf;

std::string models(const std::string& file) {
  return std::string(IPUSIM_SOURCE_DIR) + "/models/" + file;
}

using ipusim::testing::config_error_of;

TEST(TensorGraphTable, HasOneNamedRowPerPrimitiveInEnumOrder) {
  const auto& rows = primitives();
  ASSERT_EQ(rows.size(), kPrimitiveCount);
  std::set<std::string_view> names;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].op, static_cast<Primitive>(i));
    EXPECT_TRUE(names.insert(rows[i].name).second) << rows[i].name;
    EXPECT_LE(rows[i].min_operands, rows[i].max_operands) << rows[i].name;
  }
  // Forward ops differentiate; the ops their rules emit do not (no second order).
  EXPECT_NE(info(P::kMatmul).backward, nullptr);
  EXPECT_NE(info(P::kConcat).backward, nullptr);
  EXPECT_EQ(info(P::kConvDataGrad).backward, nullptr);
  EXPECT_EQ(info(P::kNormGrad).backward, nullptr);
}

TEST(TensorGraphShapes, ConvMatmulAndBroadcastingFollowTheFrameworksRules) {
  TensorGraph g;
  // ResNet's stem: 7x7 stride 2, pad 3 -> floor((224 + 6 - 7) / 2) + 1 = 112.
  const TensorId x = g.input("x", {2, 3, 224, 224}, kHalf);
  Attrs stem;
  stem.stride = {2, 2};
  stem.pad_begin = stem.pad_end = {3, 3};
  const TensorId y = g.add(P::kConv, {x, g.weight("w", {64, 3, 7, 7}, kHalf)}, stem);
  EXPECT_EQ(g.tensor(y).dims, (Dims{2, 64, 112, 112}));
  // A depthwise conv: 64 groups of one channel.
  Attrs dw;
  dw.groups = 64;
  dw.pad_begin = dw.pad_end = {1, 1};
  EXPECT_EQ(g.tensor(g.add(P::kConv, {y, g.weight("d", {64, 1, 3, 3}, kHalf)}, dw)).dims,
            (Dims{2, 64, 112, 112}));
  // Batched matmul with a broadcast batch and the second operand read transposed.
  const TensorId q = g.input("q", {4, 12, 128, 64}, kHalf);
  const TensorId k = g.input("k", {1, 12, 128, 64}, kHalf);
  Attrs t;
  t.transpose_b = true;
  EXPECT_EQ(g.tensor(g.add(P::kMatmul, {q, k}, t)).dims, (Dims{4, 12, 128, 128}));
  // numpy broadcasting: [2, 3, 1, 5] + [4, 5] = [2, 3, 4, 5].
  EXPECT_EQ(
      g.tensor(g.add(P::kAdd, {g.input("a", {2, 3, 1, 5}, kHalf), g.input("b", {4, 5}, kHalf)}))
          .dims,
      (Dims{2, 3, 4, 5}));
}

TEST(TensorGraphShapes, DataMovementOpsComputeTheirShapes) {
  TensorGraph g;
  const TensorId x = g.input("x", {2, 8, 6, 6}, kHalf);
  Attrs perm;
  perm.axes = {0, 2, 3, 1};
  EXPECT_EQ(g.tensor(g.add(P::kTranspose, {x}, perm)).dims, (Dims{2, 6, 6, 8}));
  Attrs sl;
  sl.axes = {1, 3};
  sl.starts = {2, 0};
  sl.ends = {5, 100};  // clamped to the 6 there are
  EXPECT_EQ(g.tensor(g.add(P::kSlice, {x}, sl)).dims, (Dims{2, 3, 6, 6}));
  Attrs cat;
  cat.axis = 1;
  EXPECT_EQ(g.tensor(g.add(P::kConcat, {x, g.input("y", {2, 4, 6, 6}, kHalf), x}, cat)).dims,
            (Dims{2, 20, 6, 6}));
  Attrs sp;
  sp.axis = 1;
  sp.dims = {3, 5};
  const auto parts = g.add_node(P::kSplit, {x}, sp);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(g.tensor(parts[1]).dims, (Dims{2, 5, 6, 6}));
  Attrs up;
  up.dims = {1, 1, 2, 2};
  EXPECT_EQ(g.tensor(g.add(P::kResize, {x}, up)).dims, (Dims{2, 8, 12, 12}));
  Attrs pad;
  pad.pad_begin = {0, 0, 1, 1};
  pad.pad_end = {0, 0, 1, 2};
  EXPECT_EQ(g.tensor(g.add(P::kPad, {x}, pad)).dims, (Dims{2, 8, 8, 9}));
  Attrs mean;
  mean.axes = {2, 3};
  EXPECT_EQ(g.tensor(g.add(P::kReduceMean, {x}, mean)).dims, (Dims{2, 8, 1, 1}));
  mean.keep_dims = false;
  EXPECT_EQ(g.tensor(g.add(P::kReduceMean, {x}, mean)).dims, (Dims{2, 8}));
  // An embedding: [V, h] rows gathered by [B, S] ids.
  EXPECT_EQ(g.tensor(g.add(P::kGather, {g.weight("t", {100, 16}, kHalf),
                                        g.input("ids", {2, 7}, trace::DType::kInt)}))
                .dims,
            (Dims{2, 7, 16}));
  Attrs pool;
  pool.kernel = {3, 3};
  pool.stride = {2, 2};
  pool.pad_begin = pool.pad_end = {1, 1};
  EXPECT_EQ(g.tensor(g.add(P::kMaxPool, {x}, pool)).dims, (Dims{2, 8, 3, 3}));
  g.verify();
}

TEST(TensorGraphShapes, AShapeAnOpCannotTakeIsAnErrorNamingTheLayerOpAndShapes) {
  TensorGraph g;
  g.set_layer("fc1", "m.yaml:12:5");
  const TensorId x = g.input("x", {1, 2048}, kHalf);
  const TensorId w = g.weight("w", {1000, 1024}, kHalf);
  Attrs t;
  t.transpose_b = true;
  EXPECT_EQ(config_error_of([&] {
              g.add(P::kMatmul, {x, w}, t);
            }),
            "m.yaml:12:5: layer 'fc1': matmul of [1, 2048] and [1000, 1024]: the reduced "
            "dimensions differ: 2048 and 1024");
  EXPECT_NE(config_error_of([&] {
              g.add(P::kAdd, {g.input("a", {3}, kHalf), g.input("b", {4}, kHalf)});
            }).find("[3] and [4] do not broadcast"),
            std::string::npos);
  EXPECT_NE(config_error_of([&] {
              g.add(P::kRelu, {x, x});
            }).find("it takes 1 operand (x), found 2"),
            std::string::npos);
  Attrs r;
  r.dims = {3, 3};
  EXPECT_NE(config_error_of([&] { g.add(P::kReshape, {x}, r); }).find("has 2048 elements"),
            std::string::npos);
  // A failed add leaves the graph as it was.
  EXPECT_TRUE(g.nodes().empty());
}

TEST(TensorGraphVerify, FindsAShapeThatIsNotWhatItsNodeMakes) {
  TensorGraph g;
  const TensorId x = g.input("x", {4, 8}, kHalf);
  const TensorId y = g.add(P::kRelu, {x});
  g.verify();
  g.tensor(y).dims = {4, 9};
  try {
    g.verify();
    FAIL() << "verify passed a wrong shape";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is [4, 9]; node 0 (relu) makes [4, 8]"),
              std::string::npos)
        << e.what();
  }
}

// FLOPs of the nodes of one op.
std::uint64_t flops_of(const TensorGraph& g, Primitive op, bool backward) {
  TensorGraph only;
  std::uint64_t n = 0;
  for (const Node& node : g.nodes()) {
    if (node.op != op || node.backward != backward) continue;
    std::vector<const Dims*> in, out;
    for (TensorId t : node.inputs) in.push_back(&g.tensor(t).dims);
    for (TensorId t : node.outputs) out.push_back(&g.tensor(t).dims);
    n += info(op).flops(in, out, node.attrs);
  }
  return n;
}

TEST(TensorGraphAutodiff, AnMlpGetsEachWeightsGradientAndNoneForItsInput) {
  // x [8, 4] -> x w1 [4, 16] + b1 -> relu -> h w2 [16, 3] -> cross entropy.
  TensorGraph g;
  const TensorId x = g.input("x", {8, 4}, kHalf);
  const TensorId w1 = g.weight("w1", {4, 16}, kHalf), b1 = g.weight("b1", {16}, kHalf);
  const TensorId w2 = g.weight("w2", {16, 3}, kHalf);
  const TensorId h = g.add(P::kRelu, {g.add(P::kAdd, {g.add(P::kMatmul, {x, w1}), b1})});
  const TensorId loss = g.add(P::kSoftmaxCrossEntropy,
                              {g.add(P::kMatmul, {h, w2}), g.input("l", {8}, trace::DType::kInt)});
  const auto grads = add_backward(g, loss);
  g.verify();
  ASSERT_EQ(grads.size(), 3u);
  for (const auto& wg : grads) {
    EXPECT_EQ(g.tensor(wg.gradient).dims, g.tensor(wg.weight).dims) << g.tensor(wg.weight).name;
    EXPECT_EQ(g.tensor(wg.gradient).role, Role::kGradient);
  }
  // Forward matmuls: 2 x 8 x 16 x 4 + 2 x 8 x 3 x 16 = 1,792. Backward: dw2 = h^T dy (768),
  // dh = dy w2^T (768), dw1 = x^T dh (1,024); no dx: the input needs none.
  EXPECT_EQ(flops_of(g, P::kMatmul, false), 1792u);
  EXPECT_EQ(flops_of(g, P::kMatmul, true), 768u + 768u + 1024u);
  // The bias gradient sums dy over the batch: one reduction of [8, 16] over axis 0.
  const auto& b1_grad = g.node(*g.tensor(grads[1].gradient).producer);
  EXPECT_EQ(b1_grad.op, P::kReduceSum);
  EXPECT_EQ(b1_grad.attrs.axes, (std::vector<std::uint32_t>{0}));
  // relu's gradient reads its output (Saves::kOutput), not its input.
  for (const Node& n : g.nodes())
    if (n.op == P::kUnaryGrad) {
      EXPECT_EQ(n.inputs[1], h);
    }
}

TEST(TensorGraphAutodiff, AWeightReadTwiceSumsItsGradientsAndCountsOnce) {
  // A tied embedding: gathered by ids, then read transposed as the output projection.
  TensorGraph g;
  const TensorId table = g.weight("table", {10, 4}, kHalf);
  const TensorId e = g.add(P::kGather, {table, g.input("ids", {3}, trace::DType::kInt)});
  Attrs t;
  t.transpose_b = true;
  const TensorId logits = g.add(P::kMatmul, {e, table}, t);
  const TensorId loss =
      g.add(P::kSoftmaxCrossEntropy, {logits, g.input("labels", {3}, trace::DType::kInt)});
  EXPECT_EQ(g.parameters(), 40u);
  const auto grads = add_backward(g, loss);
  g.verify();
  ASSERT_EQ(grads.size(), 1u);
  const Node& sum = g.node(*g.tensor(grads[0].gradient).producer);
  EXPECT_EQ(sum.op, P::kAdd);  // the matmul's and the gather's gradients
  EXPECT_EQ(g.tensor(grads[0].gradient).dims, (Dims{10, 4}));
}

TEST(TensorGraphAutodiff, DataMovementGradientsRestoreTheInputsShapes) {
  TensorGraph g;
  const TensorId w = g.weight("w", {2, 6, 4, 4}, kHalf);
  Attrs sp;
  sp.axis = 1;
  sp.dims = {2, 4};
  const auto parts = g.add_node(P::kSplit, {w}, sp);
  Attrs perm;
  perm.axes = {0, 2, 3, 1};
  Attrs up;
  up.dims = {1, 1, 2, 2};
  Attrs pad;
  pad.pad_begin = {0, 0, 1, 0};
  pad.pad_end = {0, 0, 0, 1};
  const TensorId a = g.add(P::kPad, {g.add(P::kResize, {parts[1]}, up)}, pad);  // [2, 4, 9, 9]
  const TensorId loss = g.add(P::kReduceSum, {g.add(P::kTranspose, {a}, perm)}, [] {
    Attrs s;
    s.keep_dims = false;
    return s;
  }());
  const auto grads = add_backward(g, loss);
  g.verify();
  ASSERT_EQ(grads.size(), 1u);
  // The unused half of the split gets zeros; the gradient is concatenated back to [2, 6, 4, 4].
  EXPECT_EQ(g.tensor(grads[0].gradient).dims, (Dims{2, 6, 4, 4}));
  EXPECT_EQ(g.node(*g.tensor(grads[0].gradient).producer).op, P::kConcat);
}

TEST(TensorGraphModels, CnnParameterCountsAreSumsOfTheirWeightTensors) {
  // ResNet-50: torchvision's resnet50() has 25,557,032 parameters.
  EXPECT_EQ(build_graph(load_model(models("resnet50.yaml"))).parameters(), 25'557'032u);
  const TensorGraph g = build_graph(load_model(models("resnet50.yaml")), {.batch = 2});
  g.verify();
  // The images as 8-bit values, cast and normalised (3 nodes), then the stem's output:
  // [2, 64, 112, 112]; the logits [2, 1000] before the loss.
  EXPECT_EQ(g.tensor(g.nodes()[0].inputs[0]).dtype, trace::DType::kChar);
  EXPECT_EQ(g.tensor(g.nodes()[2].outputs[0]).dims, (Dims{2, 3, 224, 224}));
  EXPECT_EQ(g.tensor(g.nodes()[3].outputs[0]).dims, (Dims{2, 64, 112, 112}));
  EXPECT_TRUE(g.tensor(loss_of(g)).dims.empty());
}

TEST(TensorGraphModels, ResNet50ConvFlopsAreTwiceItsMultiplyAdds) {
  // torchvision's ResNet-50 (v1.5: the stride on each bottleneck's 3x3 conv) at 224 x 224,
  // multiply-adds per image: the 7x7 stem at 112 x 112, then per bottleneck a 1x1 conv at its
  // input's resolution, a 3x3 and a 1x1 (x4) at its output's, and the first block's 1x1
  // projection shortcut: 4,087,136,256 (with the fc's 2,048,000, the 4.09 G of its model card).
  std::uint64_t macs = 7 * 7 * 3 * 64 * 112 * 112;
  const std::uint64_t stem = macs;
  std::uint64_t r = 56, in = 64;
  const std::uint64_t blocks[] = {3, 4, 6, 3}, widths[] = {64, 128, 256, 512};
  for (int stage = 0; stage < 4; ++stage)
    for (std::uint64_t b = 0; b < blocks[stage]; ++b) {
      const std::uint64_t w = widths[stage], out = b == 0 && stage > 0 ? r / 2 : r;
      macs += in * w * r * r + 9 * w * w * out * out + w * 4 * w * out * out;
      if (b == 0) macs += in * 4 * w * out * out;
      in = 4 * w;
      r = out;
    }
  EXPECT_EQ(macs, 4'087'136'256u);
  TensorGraph g = build_graph(load_model(models("resnet50.yaml")));
  EXPECT_EQ(flops_of(g, P::kConv, false), 2 * macs);
  add_backward(g, loss_of(g));
  // The weight gradients repeat every multiply-add; the data gradients all but the stem's
  // (the images need none).
  EXPECT_EQ(flops_of(g, P::kConvWeightGrad, true), 2 * macs);
  EXPECT_EQ(flops_of(g, P::kConvDataGrad, true), 2 * (macs - stem));
}

TEST(TensorGraphModels, BertLargeCountsItsMaskedLmBiasVocabularyWide) {
  // BERT-Large as the model file gives it (vocabulary 30,912, 512 positions, 2 token types),
  // by hand: embeddings (30,912 + 512 + 2) x 1,024 + their layer norm 2,048 = 32,182,272;
  // a layer's attention 4 x 1,024^2 + 4 x 1,024 + 2,048 = 4,200,448 and FFN
  // 2 x 1,024 x 4,096 + 1,024 + 4,096 + 2,048 = 8,395,776: 24 layers 302,309,376; the
  // masked-LM head's dense layer 1,024^2 + 1,024, its layer norm 2,048 and the output bias
  // 30,912: 1,082,560. Total 335,574,208 (HuggingFace's BertForMaskedLM of this config).
  const std::uint64_t h = 1024, f = 4096, v = 30912;
  const std::uint64_t embeddings = (v + 512 + 2) * h + 2 * h;
  const std::uint64_t layer = (4 * h * h + 4 * h + 2 * h) + (2 * h * f + h + f + 2 * h);
  const std::uint64_t head = h * h + h + 2 * h + v;
  EXPECT_EQ(embeddings + 24 * layer + head, 335'574'208u);
  const ModelDef m = load_model(models("bert_large.yaml"));
  EXPECT_EQ(parameter_count(m), 335'574'208u);
}

TEST(TensorGraphModels, BertLargeMatmulFlopsAreTheClosedFormAndTheBackwardDoublesThem) {
  // Per sequence (S = 512, h = 1,024, F = 4,096, 76 masked tokens), multiply-adds x 2:
  // per layer QKV 2 S h 3h, scores and context 2 x 2 S S h, output 2 S h h, FFN 2 x 2 S h F;
  // the head's dense on every token 2 S h h (as Graphcore's MLPerf BERT runs it) and the
  // vocabulary on the masked ones 2 x 76 h V.
  const std::uint64_t s = 512, h = 1024, f = 4096, v = 30912, masked = 76;
  const std::uint64_t layer =
      2 * s * h * 3 * h + 2 * 2 * s * s * h + 2 * s * h * h + 2 * 2 * s * h * f;
  const std::uint64_t head = 2 * s * h * h + 2 * masked * h * v;
  TensorGraph g = build_graph(load_model(models("bert_large.yaml")));
  EXPECT_EQ(flops_of(g, P::kMatmul, false), 24 * layer + head);
  // Every matmul reads two operands that need gradients (no input of the graph is a matmul
  // operand): the backward runs two matmuls of the forward's size for each.
  add_backward(g, loss_of(g));
  g.verify();
  EXPECT_EQ(flops_of(g, P::kMatmul, true), 2 * (24 * layer + head));
}

TEST(TensorGraphModels, ShippedTransformersHaveTheirFrameworksParameterCounts) {
  // The by-hand counts of compiler_layout_test.cpp: GPT-2 medium 354,823,168, ViT-B/16
  // 86,567,656, BERT-Base for SQuAD 108,893,186.
  EXPECT_EQ(parameter_count(load_model(models("gpt2_medium.yaml"))), 354'823'168u);
  EXPECT_EQ(parameter_count(load_model(models("vit_b16.yaml"))), 86'567'656u);
  EXPECT_EQ(parameter_count(load_model(models("bert_base_squad.yaml"))), 108'893'186u);
  for (const char* file : {"gpt2_medium.yaml", "vit_b16.yaml", "bert_base_squad.yaml"}) {
    TensorGraph g = build_graph(load_model(models(file)), {.batch = 2});
    add_backward(g, loss_of(g));
    g.verify();
  }
}

TEST(TensorGraphModels, InferenceGraphsHaveNoLossAndNoDropout) {
  const TensorGraph g =
      build_graph(load_model(models("bert_large.yaml")), {.batch = 1, .training = false});
  for (const Node& n : g.nodes()) {
    EXPECT_NE(n.op, P::kDropout);
    EXPECT_NE(n.op, P::kSoftmaxCrossEntropy);
  }
  EXPECT_THROW(loss_of(g), Error);
}

}  // namespace
}  // namespace ipusim::compiler::graph
