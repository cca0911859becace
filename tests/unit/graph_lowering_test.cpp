// SPDX-License-Identifier: Apache-2.0
// Lowering of tensor-graph layers (src/compiler/graph_lowering.cpp): a post-norm FFN sub-layer
// (BERT's) built by hand, its forward and its backward from autodiff, lowered with the rules
// the file states. Each expectation follows from those rules by hand. No SystemC.
#include "compiler/graph_lowering.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "ipusim/compiler/graph/build.hpp"
#include "ipusim/compiler/graph/primitive.hpp"
#include "test_chips.hpp"

namespace ipusim::compiler {
namespace {

using graph::Attrs;
using graph::NodeId;
using graph::Primitive;
using graph::TensorGraph;
using graph::TensorId;
using trace::Op;

constexpr trace::DType kHalf = trace::DType::kHalf;

// x [2, 64, 32] (a layer "in" makes it) -> FFN (32 -> 128 -> 32, GELU, dropout, residual,
// layer norm) -> loss over 128 rows of 32 classes.
struct Ffn {
  Ffn() {
    g.set_layer("in");
    x = g.add(Primitive::kAdd, {g.input("x0", {2, 64, 32}, kHalf), g.weight("pos", {32}, kHalf)});
    g.set_layer("ffn");
    Attrs t;
    t.transpose_b = true;
    w1_matmul = static_cast<NodeId>(g.nodes().size());
    TensorId h = g.add(Primitive::kMatmul, {x, g.weight("w1", {128, 32}, kHalf)}, t);
    h = g.add(Primitive::kGelu, {g.add(Primitive::kAdd, {h, g.weight("b1", {128}, kHalf)})});
    TensorId y = g.add(Primitive::kMatmul, {h, g.weight("w2", {32, 128}, kHalf)}, t);
    Attrs drop;
    drop.ratio = 0.1;
    y = g.add(Primitive::kDropout, {g.add(Primitive::kAdd, {y, g.weight("b2", {32}, kHalf)})},
              drop);
    y = g.add(Primitive::kAdd, {y, x});
    out = g.add(Primitive::kLayerNorm,
                {y, g.weight("gamma", {32}, kHalf), g.weight("beta", {32}, kHalf)});
    g.set_layer("loss");
    Attrs rows;
    rows.dims = {128, 32};
    (void)g.add(Primitive::kSoftmaxCrossEntropy,
                {g.add(Primitive::kReshape, {out}, rows), g.input("labels", {128}, kHalf)});
    (void)graph::add_backward(g, g.nodes().back().outputs[0], &gradients);
  }
  TensorGraph g;
  graph::Gradients gradients;
  TensorId x{}, out{};
  NodeId w1_matmul{};
};

struct Lowered {
  trace::IpuProgram program;
  const ChipSpec chip = testing::gc200_by_hand();  // the builder keeps a reference to it
  IpuBuilder b{chip, program, 0.6, kHalf, /*fuse_elementwise=*/true};

  // `layer`'s forward from an input on the linear layout of rows x width, then (with
  // `backward`) its backward from a gradient on that layout: the steps of each, the output's
  // value and the input gradient's.
  struct Passes {
    Steps fwd, bwd;
    Value y, dx;
  };
  Passes lower(const TensorGraph& g, const graph::Gradients& gradients, const std::string& layer,
               std::uint64_t rows, std::uint64_t width, bool backward) {
    GraphLowering lowering(g, gradients, b);
    Passes p;
    p.y = Value{b.linear(kHalf, rows, width), {}, {}};
    lowering.forward(p.fwd, layer, p.y);
    if (!backward) return p;
    p.dx = Value{b.linear(kHalf, rows, width), {}, {}};
    lowering.backward(p.bwd, layer, p.dx);
    return p;
  }

  // The names of the compute sets `steps` run, in order.
  std::vector<std::string> computes(const Steps& steps) const {
    std::vector<std::string> out;
    for (const auto& s : steps)
      if (s.kind == trace::StepKind::kCompute) out.push_back(program.compute_sets[s.index].name);
    return out;
  }
  std::size_t count(const Steps& steps, const std::string& prefix) const {
    const auto names = computes(steps);
    return static_cast<std::size_t>(std::count_if(
        names.begin(), names.end(), [&](const std::string& n) { return n.starts_with(prefix); }));
  }
  std::size_t count_suffix(const Steps& steps, const std::string& suffix) const {
    const auto names = computes(steps);
    return static_cast<std::size_t>(std::count_if(
        names.begin(), names.end(), [&](const std::string& n) { return n.ends_with(suffix); }));
  }
  // The compute sets named `prefix`..., in order, each cut before its layout ("map_add_gelu").
  std::vector<std::string> computes_of(const Steps& steps, const std::string& prefix) const {
    std::vector<std::string> out;
    for (const std::string& n : computes(steps))
      if (n.starts_with(prefix)) {
        const auto digit = n.find_first_of("0123456789");
        out.push_back(n.substr(0, digit == std::string::npos ? n.size() : digit - 1));
      }
    return out;
  }
  // Reductions named `prefix`...: each has one tile-local compute set, then its stages.
  std::size_t reductions(const Steps& steps, const std::string& prefix) const {
    const auto names = computes(steps);
    return static_cast<std::size_t>(std::count_if(names.begin(), names.end(), [&](const auto& n) {
      return n.starts_with(prefix) && n.ends_with("/local");
    }));
  }
};

TEST(GraphLowering, FfnForwardFusesBiasGeluAndBiasDropoutResidualAndLeavesTheNormPending) {
  Ffn f;
  Lowered l;
  [[maybe_unused]] const auto [out, bwd, v, dx] = l.lower(f.g, f.gradients, "ffn", 128, 32, false);
  // Two matmuls; two fused chains (bias + GELU before the second matmul reads it; bias,
  // dropout and residual add before the layer norm's statistics); the statistics (mean and
  // mean square per row); the normalisation pending for the next reader.
  EXPECT_EQ(l.computes_of(out, "map_"),
            (std::vector<std::string>{"map_add_gelu", "map_add_mul_add"}));
  EXPECT_EQ(l.reductions(out, "reduce_chan_2b_"), 1u);
  EXPECT_EQ(v.pending, (std::vector<Op>{Op::kSub, Op::kMul, Op::kMul, Op::kAdd}));
  EXPECT_EQ(v.pending_layers, std::vector<std::string>{});  // no scope: no layer
}

TEST(GraphLowering, FfnBackwardChargesBiasGradientsAndAppliesEachChainOnce) {
  Ffn f;
  Lowered l;
  [[maybe_unused]] const auto [fwd, bwd, y, g] = l.lower(f.g, f.gradients, "ffn", 128, 32, true);
  // Elementwise: the norm's whitening of its input, its input gradient with the dropout's
  // mask (one chain: the residual's gradient is that chain's input, not applied again), and
  // the GELU gradient. No others.
  EXPECT_EQ(
      l.computes_of(bwd, "map_"),
      (std::vector<std::string>{"map_sub_mul_mul", "map_mul_sub_mul_sub_mul_mul", "map_gelu_mul"}));
  // Reductions over rows: gamma and beta together (two statistics), then each bias alone in
  // the weight-gradient pass.
  EXPECT_EQ(l.reductions(bwd, "reduce_pos_2_"), 1u);
  std::size_t bias_locals = 0;
  for (const auto& s : bwd)
    if (s.kind == trace::StepKind::kCompute) {
      const auto& cs = l.program.compute_sets[s.index];
      if (cs.name.starts_with("reduce_pos_1_") && cs.name.ends_with("/local")) {
        ++bias_locals;
        EXPECT_EQ(cs.provenance.pass, trace::Pass::kWeightGradient) << cs.name;
      }
    }
  EXPECT_EQ(bias_locals, 2u);
  // The input's gradient: the residual's part brought to the data gradient's layout and
  // added there, pending for the layer before.
  EXPECT_EQ(g.pending, std::vector<Op>{Op::kAdd});
}

// One post-norm encoder layer as the transformer front end builds it: hidden 64 in 4 heads of
// 16, a sequence of 32, one sample, attention dropout.
struct Encoder {
  Encoder() {
    m.family = graph::Family::kTransformer;
    m.encoder_layers = 1;
    m.hidden = 64;
    m.heads = 4;
    m.ffn = 256;
    m.sequence = 32;
    m.max_positions = 32;
    m.vocabulary = 100;
    m.masked_tokens = 4;
    g = graph::build_graph(m, {.batch = 1});
    (void)graph::add_backward(g, graph::loss_of(g), &gradients);
  }
  ModelDef m;
  TensorGraph g;
  graph::Gradients gradients;
};

TEST(GraphLowering, AttentionForwardRunsItsFourMatmulsSoftmaxAndFusedChains) {
  Encoder e;
  Lowered l;
  [[maybe_unused]] const auto [out, bwd, v, dx] =
      l.lower(e.g, e.gradients, "encoder0/attention", 32, 64, false);
  // The QKV projection, Q K^T and P V per head (grouped), the output projection.
  EXPECT_EQ(l.count_suffix(out, "/conv"), 4u);
  // The QKV bias alone (before the heads are split); the scale alone (before the softmax's
  // maximum); exp(x - max); the division with the dropout's mask (before P V); bias, dropout
  // and residual (before the layer norm's statistics).
  EXPECT_EQ(l.computes_of(out, "map_"),
            (std::vector<std::string>{"map_sub_exp", "map_div_mul", "map_add_mul_add"}));
  EXPECT_EQ(l.count(out, "add_"), 1u);
  EXPECT_EQ(l.count(out, "mul_"), 1u);
  // The softmax's maximum and sum per row, the layer norm's statistics.
  EXPECT_EQ(l.reductions(out, "reduce_chan_1b_"), 2u);
  EXPECT_EQ(l.reductions(out, "reduce_chan_2b_"), 1u);
  EXPECT_EQ(v.pending, (std::vector<Op>{Op::kSub, Op::kMul, Op::kMul, Op::kAdd}));
}

TEST(GraphLowering, AttentionBackwardUpdatesTwoWeightsAndChargesTwoBiasGradients) {
  Encoder e;
  Lowered l;
  [[maybe_unused]] const auto [fwd, bwd, y, g] =
      l.lower(e.g, e.gradients, "encoder0/attention", 32, 64, true);
  // Eight gradient matmuls (data and weight of each forward one); the two projections'
  // weights are added into their accumulators, K's and V's gradients are not weights.
  EXPECT_EQ(l.count_suffix(bwd, "/conv"), 8u);
  EXPECT_EQ(l.count(bwd, "scaled_add_"), 2u);
  // The norm's whitening; its input gradient with the output dropout's mask; the softmax
  // gradient's product with the attention dropout's mask; its difference times the scale.
  EXPECT_EQ(l.computes_of(bwd, "map_"),
            (std::vector<std::string>{"map_sub_mul_mul", "map_mul_sub_mul_sub_mul_mul",
                                      "map_mul_mul", "map_sub_mul_mul"}));
  // Reductions: gamma and beta; the softmax gradient's sum per row; the output and QKV bias
  // gradients.
  EXPECT_EQ(l.reductions(bwd, "reduce_pos_2_"), 1u);
  EXPECT_EQ(l.reductions(bwd, "reduce_chan_1b_"), 1u);
  EXPECT_EQ(l.reductions(bwd, "reduce_pos_1_"), 2u);
  EXPECT_EQ(g.pending, std::vector<Op>{Op::kAdd});
}

TEST(GraphLowering, AClassifierHeadTakesItsClassTokensAndChargesTheSoftmaxAndItsGradient) {
  // x [2, 5, 16] -> the first token of each sample -> 10 classes -> the loss (ViT's head).
  TensorGraph g;
  g.set_layer("in");
  const TensorId x =
      g.add(Primitive::kAdd, {g.input("x0", {2, 5, 16}, kHalf), g.weight("pos", {16}, kHalf)});
  g.set_layer("heads");
  Attrs first;
  first.axes = {1};
  first.starts = {0};
  first.ends = {1};
  Attrs rows;
  rows.dims = {2, 16};
  Attrs t;
  t.transpose_b = true;
  TensorId y = g.add(Primitive::kReshape, {g.add(Primitive::kSlice, {x}, first)}, rows);
  y = g.add(Primitive::kMatmul, {y, g.weight("w", {10, 16}, kHalf)}, t);
  y = g.add(Primitive::kAdd, {y, g.weight("b", {10}, kHalf)});
  (void)g.add(Primitive::kSoftmaxCrossEntropy, {y, g.input("labels", {2}, kHalf)});
  graph::Gradients gradients;
  (void)graph::add_backward(g, g.nodes().back().outputs[0], &gradients);
  Lowered l;
  const auto [fwd, bwd, loss, dx] = l.lower(g, gradients, "heads", 10, 16, true);
  // Forward: the matmul; exp with the bias; the sum per row (to every tile of the row); the
  // division.
  EXPECT_EQ(l.count_suffix(fwd, "/conv"), 1u);
  EXPECT_EQ(l.computes_of(fwd, "map_"), std::vector<std::string>{"map_add_exp"});
  EXPECT_EQ(l.reductions(fwd, "reduce_chan_1b_"), 1u);
  EXPECT_EQ(l.count(fwd, "div_"), 1u);
  EXPECT_TRUE(loss.pending.empty());
  // Backward: probabilities less the labels; the bias gradient; the data and weight gradients;
  // the class tokens' gradient on the linear mapping of every token.
  EXPECT_EQ(l.count(bwd, "sub_"), 1u);
  EXPECT_EQ(l.reductions(bwd, "reduce_pos_1_"), 1u);
  EXPECT_EQ(l.count_suffix(bwd, "/conv"), 2u);
  EXPECT_EQ(l.count(bwd, "scaled_add_"), 1u);
  EXPECT_EQ(dx.layout, l.b.linear(kHalf, 10, 16));
}

// A tiny transformer as the front end builds it (hidden 16 in 2 heads, one layer), trained on
// two samples: BERT's by default; `vit` and `span` select ViT's patch embedding and class
// token, or a SQuAD span head.
struct Tiny {
  explicit Tiny(void (*shape)(ModelDef&) = nullptr, std::uint32_t vocabulary_serial = 1) {
    m.family = graph::Family::kTransformer;
    m.encoder_layers = 1;
    m.hidden = 16;
    m.heads = 2;
    m.ffn = 32;
    m.sequence = 8;
    m.max_positions = 8;
    m.vocabulary = 50;
    m.masked_tokens = 2;
    if (shape) shape(m);
    g = graph::build_graph(m, {.batch = 2, .vocabulary_serial = vocabulary_serial});
    (void)graph::add_backward(g, graph::loss_of(g), &gradients);
  }
  static void vit(ModelDef& m) {  // 8 x 8 x 3 images in 4 patches of 4 x 4, and a class token
    m.classifier = true;
    m.pre_norm = true;
    m.height = m.width = 8;
    m.channels = 3;
    m.patch = 4;
    m.classes = 10;
    m.sequence = m.max_positions = 5;
  }
  static void span(ModelDef& m) { m.span_head = true; }
  ModelDef m;
  TensorGraph g;
  graph::Gradients gradients;
};

// The pass of each compute set named `prefix`... in `steps`.
std::vector<trace::Pass> passes_of(const Lowered& l, const Steps& steps,
                                   const std::string& prefix) {
  std::vector<trace::Pass> out;
  for (const auto& s : steps)
    if (s.kind == trace::StepKind::kCompute) {
      const auto& cs = l.program.compute_sets[s.index];
      if (cs.name.starts_with(prefix) && cs.name.ends_with("/local"))
        out.push_back(cs.provenance.pass);
    }
  return out;
}

TEST(GraphLowering, AnEmbeddingSumsItsLookupsAndUpdatesEachTable) {
  Tiny t;  // BERT: token, token-type and position lookups; layer norm; dropout
  Lowered l;
  const auto [fwd, bwd, y, dx] = l.lower(t.g, t.gradients, "embedding", 16, 16, true);
  // Forward: the lookups are not charged; their two sums in one chain before the layer norm's
  // statistics; the normalisation and the dropout's mask pending for the next reader.
  EXPECT_EQ(l.computes_of(fwd, "map_"), std::vector<std::string>{"map_add_add"});
  EXPECT_EQ(l.reductions(fwd, "reduce_chan_2b_"), 1u);
  EXPECT_EQ(y.pending, (std::vector<Op>{Op::kSub, Op::kMul, Op::kMul, Op::kAdd, Op::kMul}));
  EXPECT_EQ(y.layout, l.b.linear(kHalf, 16, 16));
  // Backward: the dropout's mask, the norm's gradient (whitening, gamma and beta), then each
  // table's rows added into its gradient: three updates (the token table's shares its
  // accumulator with the tied head's, adding nothing). The model's first layer has no input
  // gradient.
  EXPECT_EQ(l.count(bwd, "mul_"), 1u);
  EXPECT_EQ(l.computes_of(bwd, "map_"),
            (std::vector<std::string>{"map_sub_mul_mul", "map_mul_sub_mul_sub_mul"}));
  EXPECT_EQ(l.reductions(bwd, "reduce_pos_2_"), 1u);
  EXPECT_EQ(l.count(bwd, "scaled_add_"), 3u);
  EXPECT_EQ(dx.layout.elements(), 0u);
}

TEST(GraphLowering, APatchEmbeddingIsAMatmulOfTheNormalisedImagesWithTheClassTokenInFront) {
  Tiny t(Tiny::vit);
  Lowered l;
  const auto [fwd, bwd, y, dx] = l.lower(t.g, t.gradients, "embedding", 10, 16, true);
  // Forward: the 8-bit images cast where the matmul wants them and normalised in one chain;
  // the patches' matmul [2 x 4, 48] x [48, 16]; moved after the class tokens, the conv's bias,
  // the positions and the dropout's mask pending on all 10 tokens.
  EXPECT_EQ(l.count(fwd, "cast_"), 1u);
  EXPECT_EQ(l.computes_of(fwd, "map_"), std::vector<std::string>{"map_sub_mul"});
  EXPECT_EQ(l.count_suffix(fwd, "/conv"), 1u);
  EXPECT_EQ(y.pending, (std::vector<Op>{Op::kAdd, Op::kAdd, Op::kMul}));
  EXPECT_EQ(y.layout, l.b.linear(kHalf, 10, 16));
  // Backward: the mask, the positions' update; the class token's and the bias's gradients
  // (sums over the rows, in the weight-gradient pass); the patch weights' gradient (the
  // images need none), added into its accumulator.
  EXPECT_EQ(l.count(bwd, "mul_"), 1u);
  EXPECT_EQ(l.count(bwd, "scaled_add_"), 2u);
  EXPECT_EQ(passes_of(l, bwd, "reduce_pos_1_"),
            (std::vector<trace::Pass>{trace::Pass::kWeightGradient, trace::Pass::kWeightGradient}));
  EXPECT_EQ(l.count_suffix(bwd, "/conv"), 1u);
}

TEST(GraphLowering, ASpanHeadsSoftmaxesRunOverEachSamplesTokensPerScore) {
  Tiny t(Tiny::span);
  Lowered l;
  const auto [fwd, bwd, loss, dx] = l.lower(t.g, t.gradients, "heads", 16, 16, true);
  // Forward: the scores' matmul [16, 16] x [16, 2]; their bias with exp; the sums per sample
  // and score (over the tokens: the layout's positions), broadcast back; the division.
  EXPECT_EQ(l.count_suffix(fwd, "/conv"), 1u);
  EXPECT_EQ(l.computes_of(fwd, "map_"), std::vector<std::string>{"map_add_exp"});
  EXPECT_EQ(l.reductions(fwd, "reduce_pos_1b_"), 1u);
  EXPECT_EQ(l.count(fwd, "div_"), 1u);
  // Backward: less the labels; the bias gradient; the data and weight gradients.
  EXPECT_EQ(l.count(bwd, "sub_"), 1u);
  EXPECT_EQ(passes_of(l, bwd, "reduce_pos_1_"),
            std::vector<trace::Pass>{trace::Pass::kWeightGradient});
  EXPECT_EQ(l.count_suffix(bwd, "/conv"), 2u);
  EXPECT_EQ(dx.layout.positions, 16u);
}

TEST(GraphLowering, AMaskedLmHeadTransformsEveryTokenAndSerialisesItsVocabularyMatmul) {
  // BERT's head, its vocabulary of 50 padded to 64 and matmul serialised in 2 steps of 32
  // columns, over 2 samples x 8 tokens, 2 masked each.
  Tiny t([](ModelDef& m) { m.vocabulary_multiple = 64; }, 2);
  Lowered l;
  const auto [fwd, bwd, loss, dx] = l.lower(t.g, t.gradients, "heads", 16, 16, true);
  // Forward: the transform's matmul on the 16 tokens; its bias and GELU; the layer norm's
  // statistics and normalisation; the 4 masked rows copied out; the two steps' matmuls
  // [4, 16] x [16, 32]; per step the bias with exp, the sums per row, the division.
  EXPECT_EQ(l.count_suffix(fwd, "/conv"), 3u);
  EXPECT_EQ(l.computes_of(fwd, "map_"),
            (std::vector<std::string>{"map_add_gelu", "map_sub_mul_mul_add", "map_add_exp",
                                      "map_add_exp"}));
  EXPECT_EQ(l.reductions(fwd, "reduce_chan_2b_"), 1u);
  EXPECT_EQ(l.reductions(fwd, "reduce_chan_1b_4x32_"), 2u);
  EXPECT_EQ(l.count(fwd, "div_4x32_"), 2u);
  // Backward: per step the probabilities less the labels and the bias gradient's share; the
  // steps' data gradients (the second added to the first) and weight gradients (added into
  // the tied table's accumulator); the transform's bias gradient, its data and weight
  // gradients.
  EXPECT_EQ(l.count(bwd, "sub_4x32_"), 2u);
  EXPECT_EQ(l.reductions(bwd, "reduce_pos_1_4x32_"), 2u);
  EXPECT_EQ(l.count(bwd, "add_4x16_"), 1u);
  EXPECT_EQ(l.count_suffix(bwd, "/conv"), 6u);
  EXPECT_EQ(l.reductions(bwd, "reduce_pos_1_16x16_"), 1u);
  EXPECT_EQ(dx.layout.positions, 16u);
}

TEST(GraphLowering, AnUnserialisedVocabularyMatmulComputesThePaddedColumnsAtOnce) {
  Tiny t([](ModelDef& m) { m.vocabulary_multiple = 64; });
  Lowered l;
  const auto [fwd, bwd, loss, dx] = l.lower(t.g, t.gradients, "heads", 16, 16, true);
  EXPECT_EQ(l.count_suffix(fwd, "/conv"), 2u);
  EXPECT_EQ(l.reductions(fwd, "reduce_chan_1b_4x64_"), 1u);
  EXPECT_EQ(l.reductions(bwd, "reduce_pos_1_4x64_"), 1u);
  EXPECT_EQ(l.count(bwd, "add_4x16_"), 0u);
}

TEST(GraphLowering, AutodiffSumsAnInputsGradientsAfterTheRulesNodes) {
  Ffn f;
  // x is read by the first matmul and the residual add: its gradient is the sum of both, added
  // after the matmul's two gradient matmuls (data, then weight).
  const TensorId dx = *f.gradients[graph::index(f.x)];
  const NodeId sum = *f.g.tensor(dx).producer;
  EXPECT_EQ(f.g.node(sum).op, Primitive::kAdd);
  std::vector<std::uint8_t> operands;
  for (std::uint32_t i = 0; i < f.g.nodes().size(); ++i) {
    const graph::Node& n = f.g.nodes()[i];
    if (n.backward && n.forward == f.w1_matmul && n.op == Primitive::kMatmul) {
      operands.push_back(n.attrs.operand);
      EXPECT_LT(i, graph::index(sum));
    }
  }
  EXPECT_EQ(operands, (std::vector<std::uint8_t>{0, 1}));
}

TEST(GraphLowering, AnOpWithoutARuleIsAnErrorNamingItsLayer) {
  TensorGraph g;
  g.set_layer("in");
  const TensorId x =
      g.add(Primitive::kAdd, {g.input("x0", {4, 8}, kHalf), g.weight("w", {8}, kHalf)});
  g.set_layer("odd");
  graph::Attrs rows;
  rows.axes = {1};
  (void)g.add(Primitive::kReduceMax, {x}, rows);
  const graph::Gradients none;
  Lowered l;
  GraphLowering lowering(g, none, l.b);
  Steps out;
  Value v{l.b.linear(kHalf, 4, 8), {}, {}};
  try {
    lowering.forward(out, "odd", v);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer 'odd': reduce_max has no lowering rule yet"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace ipusim::compiler
