// SPDX-License-Identifier: Apache-2.0
// The compiler's op table and shape-inference pass (src/compiler/graph/): no SystemC, no chip.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "compiler/graph/autodiff.hpp"
#include "compiler/graph/lifetimes.hpp"
#include "compiler/graph/recompute.hpp"
#include "compiler/graph/shapes.hpp"
#include "compiler/graph/sublayers.hpp"
#include "ipusim/compiler/compiler.hpp"
#include "ipusim/compiler/graph/op.hpp"
#include "ipusim/util/error.hpp"

namespace ipusim::compiler::graph {
namespace {

TEST(GraphOps, TheTableHasOneNamedRowPerOpAndATableMissingOneIsRejected) {
  EXPECT_TRUE(rows_complete(kOps));
  // The check the header's static_assert makes: a row left out (value-initialised), rows out of
  // order, or a table one row short all fail it.
  auto missing = kOps;
  missing[3] = OpInfo{};
  EXPECT_FALSE(rows_complete(missing));
  auto swapped = kOps;
  std::swap(swapped[0], swapped[1]);
  EXPECT_FALSE(rows_complete(swapped));
  std::array<OpInfo, kOpCount - 1> short_table{};
  for (std::size_t i = 0; i + 1 < kOpCount; ++i) short_table[i] = kOps[i];
  EXPECT_FALSE(rows_complete(short_table));
}

TEST(GraphOps, EveryCnnOpIsFoundByItsModelFileNameAndNothingElseIs) {
  // CNN ops first, then a transformer's sub-layers, which no model file names.
  std::size_t cnn = 0;
  for (std::size_t i = 0; i < kOpCount; ++i) {
    const Op op = static_cast<Op>(i);
    if (info(op).family == Family::kCnn) {
      EXPECT_EQ(i, cnn++) << name(op);
      EXPECT_EQ(op_named(name(op)), op) << name(op);
      EXPECT_EQ(op_names()[i], name(op));
    } else {
      EXPECT_EQ(op_named(name(op)), std::nullopt) << name(op);
    }
  }
  EXPECT_EQ(op_names().size(), cnn);
  EXPECT_EQ(cnn, 15u);  // conv, dwconv, batchnorm, groupnorm, relu, swish, sigmoid, maxpool,
                        // add, scale, concat, avgpool, upsample, fc, softmax_loss
  // embedding, attention, FFN, final norm, heads; an imported graph's views, elementwise ops
  // and other nodes
  EXPECT_EQ(kOpCount - cnn, 8u);
  EXPECT_TRUE(info(Op::kAttention).numbered && info(Op::kFfn).numbered);
  EXPECT_FALSE(info(Op::kEmbedding).numbered || info(Op::kHeads).numbered);
  EXPECT_EQ(op_named("conv2d"), std::nullopt);
  EXPECT_EQ(op_named(""), std::nullopt);
  // The facts the lowering reads (docs/models.md): what is a conv, what keeps its output and
  // what takes a second operand (what LARS adapts: tests/unit/weights_test.cpp).
  EXPECT_TRUE(is_conv(Op::kConv) && is_conv(Op::kDwconv) && !is_conv(Op::kFc));
  EXPECT_FALSE(info(Op::kRelu).keeps_output || info(Op::kAdd).keeps_output);
  EXPECT_TRUE(info(Op::kSwish).keeps_output && info(Op::kMaxPool).keeps_output);
  for (const OpInfo& row : kOps)
    EXPECT_EQ(!row.other.empty(),
              row.op == Op::kAdd || row.op == Op::kScale || row.op == Op::kConcat)
        << row.name;
  EXPECT_EQ(info(Op::kFc).kind, trace::OpKind::kMatmul);
  EXPECT_EQ(info(Op::kSoftmaxLoss).kind, trace::OpKind::kLoss);
}

ModelDef model_of(const std::string& name, const std::string& layers) {
  const std::string file = ::testing::TempDir() + "/" + name + ".yaml";
  std::ofstream(file) << "model:\n  name: m\n  family: cnn\n"
                         "  input: {height: 30, width: 30, channels: 3}\n  classes: 10\nlayers:\n"
                      << layers;
  return load_model(file);
}

TEST(GraphShapes, EachOpsShapeRuleAndParameterCountByHand) {
  const ModelDef m = model_of("shapes",
                              "  - {name: c1, op: conv, out: 64, kernel: 7, stride: 2}\n"
                              "  - {name: bn, op: batchnorm}\n"
                              "  - {name: p, op: maxpool, kernel: 3, stride: 2}\n"
                              "  - {name: g, op: conv, out: 128, group_size: 16}\n"
                              "  - {name: d, op: dwconv, kernel: 3, stride: 3}\n"
                              "  - {name: a, op: add, input: d, other: d}\n"
                              "  - {name: avg, op: avgpool}\n"
                              "  - {name: s, op: scale, input: d, other: avg}\n"
                              "  - {name: avg2, op: avgpool}\n"
                              "  - {name: fc, op: fc, out: 10}\n"
                              "  - {name: loss, op: softmax_loss}\n");
  const auto nodes = infer_shapes(m);
  ASSERT_EQ(nodes.size(), 11u);
  const auto shape = [&](std::size_t i) {
    return std::tuple(nodes[i].out.h, nodes[i].out.w, nodes[i].out.c);
  };
  EXPECT_EQ(shape(0), std::tuple(15u, 15u, 64u));  // ceil(30 / 2)
  EXPECT_EQ(nodes[0].params, 7u * 7 * 3 * 64);
  EXPECT_EQ(nodes[1].params, 2u * 64);           // gamma and beta
  EXPECT_EQ(shape(2), std::tuple(8u, 8u, 64u));  // ceil(15 / 2)
  EXPECT_EQ(shape(3), std::tuple(8u, 8u, 128u));
  EXPECT_EQ(nodes[3].groups, 4u);                 // 64 / 16
  EXPECT_EQ(nodes[3].params, 16u * 128);          // k x k x G x out
  EXPECT_EQ(shape(4), std::tuple(3u, 3u, 128u));  // ceil(8 / 3), depthwise
  EXPECT_EQ(nodes[4].groups, 128u);
  EXPECT_EQ(nodes[4].params, 3u * 3 * 1 * 128);
  EXPECT_EQ(nodes[5].input, "d");
  EXPECT_EQ(shape(6), std::tuple(1u, 1u, 128u));
  EXPECT_EQ(shape(7), std::tuple(3u, 3u, 128u));
  EXPECT_EQ(shape(9), std::tuple(1u, 1u, 10u));
  EXPECT_EQ(nodes[9].params, 128u * 10 + 10);
  EXPECT_EQ(nodes[0].input, "");  // the image
  EXPECT_EQ(nodes[0].in.elements(), 30u * 30 * 3);
}

std::string error_of(const std::string& name, const std::string& layers) {
  try {
    infer_shapes(model_of(name, layers));
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(GraphShapes, AShapeAnOpCannotTakeNamesItsLayerAndLine) {
  EXPECT_NE(
      error_of("fc_spatial", "  - {name: c, op: conv, out: 4}\n  - {name: f, op: fc, out: 2}\n")
          .find("fc_spatial.yaml:8:5: layer 'f': fc reads a 1x1 input (pool it first, e.g. "
                "with avgpool), found 30x30x4 from 'c'"),
      std::string::npos);
  EXPECT_NE(error_of("add_shapes",
                     "  - {name: c, op: conv, out: 4, stride: 2}\n"
                     "  - {name: a, op: add, other: c, input: c2}\n")
                .find("refers to layer 'c2'"),
            std::string::npos);
  EXPECT_EQ(error_of("add_equal",
                     "  - {name: c, op: conv, out: 4, stride: 2}\n"
                     "  - {name: r, op: relu}\n  - {name: c2, op: conv, out: 4}\n"
                     "  - {name: a, op: add, input: c2, other: c}\n"),
            "");
  EXPECT_NE(
      error_of("add_bad",
               "  - {name: c, op: conv, out: 4, stride: 2}\n"
               "  - {name: c2, op: conv, out: 8}\n"
               "  - {name: a, op: add, input: c2, other: c}\n")
          .find("layer 'a': add of 'c2' (15x15x8) and 'c' (15x15x4): the shapes must be equal"),
      std::string::npos);
}

TEST(GraphOps, AModelFileKeyTheOpDoesNotTakeIsAnErrorNamingItsLine) {
  const auto parse_error = [](const std::string& layers) {
    try {
      model_of("keys", layers);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(parse_error("  - {name: c, op: conv, out: 4}\n  - {name: r, op: relu, other: c}\n")
                .find("keys.yaml:8:32: layers[1].other: relu takes one operand (only add, scale or "
                      "concat take 'other')"),
            std::string::npos);
  EXPECT_NE(
      parse_error("  - {name: a, op: add}\n").find("an add needs 'other' (the second operand)"),
      std::string::npos);
  EXPECT_NE(parse_error("  - {name: c, op: fc}\n").find("layers[0].out: missing required key"),
            std::string::npos);
  // Parameters the op does not use are refused, not ignored (issue 55, part 1): an avgpool is
  // global, a ReLU has no stride, a batch norm keeps its channels.
  EXPECT_NE(parse_error("  - {name: c, op: conv, out: 4}\n"
                        "  - {name: p, op: avgpool, kernel: 3, stride: 2}\n")
                .find("keys.yaml:8:36: layers[1].kernel: avgpool has no window: an avgpool is "
                      "global (only conv, dwconv or maxpool take a kernel and a stride)"),
            std::string::npos);
  EXPECT_NE(parse_error("  - {name: c, op: conv, out: 4}\n  - {name: r, op: relu, stride: 2}\n")
                .find("layers[1].stride: relu has no window"),
            std::string::npos);
  EXPECT_NE(parse_error("  - {name: c, op: conv, out: 4}\n  - {name: b, op: batchnorm, out: 99}\n")
                .find("layers[1].out: batchnorm keeps its input's channels (only conv, dwconv or "
                      "fc take 'out')"),
            std::string::npos);
  // A repeated key is refused (yaml-cpp would read the first), in a layer and in the model.
  EXPECT_NE(
      parse_error("  - {name: c, op: conv, out: 4, out: 8}\n").find("layers[0].out: duplicate key"),
      std::string::npos);
  const std::string file = ::testing::TempDir() + "/twice.yaml";
  std::ofstream(file)
      << "model:\n  name: m\n  family: cnn\n  dtype: half\n  dtype: float\n"
         "  input: {height: 30, width: 30, channels: 3}\n  classes: 10\nlayers:\n"
         "  - {name: c, op: conv, out: 4}\nlayers:\n  - {name: d, op: conv, out: 4}\n";
  try {
    load_model(file);
    ADD_FAILURE() << "expected an error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("duplicate key"), std::string::npos) << e.what();
  }
}

const char* const kChain =
    "  - {name: c1, op: conv, out: 4}\n  - {name: r, op: relu}\n"
    "  - {name: c2, op: conv, out: 4}\n  - {name: loss, op: softmax_loss}\n";

// The chain's layers as a stage lists them.
const std::vector<Block> kChainLayers{
    {Op::kConv, "c1"}, {Op::kRelu, "r"}, {Op::kConv, "c2"}, {Op::kSoftmaxLoss, "loss"}};

TEST(GraphRecompute, CheckpointsCutTheLayersIntoSegments) {
  const ModelDef m = model_of("segments", kChain);
  const auto& nodes = kChainLayers;
  EXPECT_EQ(segments(nodes, {}), (std::vector<Segment>{{0, 4}}));
  EXPECT_EQ(segments(nodes, {"r"}), (std::vector<Segment>{{0, 2}, {2, 4}}));
  EXPECT_EQ(segments(nodes, {"c1", "c2"}), (std::vector<Segment>{{0, 1}, {1, 3}, {3, 4}}));
  EXPECT_EQ(segments(nodes, {"loss"}), (std::vector<Segment>{{0, 4}}));  // the last: no cut
  RunConfig run;
  run.file = "r.yaml";
  run.checkpoints = {"r", "c3"};
  try {
    check_checkpoints(m, run);
    ADD_FAILURE() << "c3 is not a layer";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("r.yaml: run.recompute_checkpoints: 'c3' is not a layer"),
              std::string::npos);
  }
}

// A residual block worked by hand: conv c1 -> bn -> relu r, a second conv c2 on r, their sum,
// an fc and the loss. Backward from the loss: each layer's gradient goes into what it read,
// the add's into both operands (other first), and nothing goes past the first conv.
TEST(GraphAutodiff, EachGradientGoesIntoWhatItsLayerReadAndReachesEveryLayer) {
  const ModelDef m = model_of("residual",
                              "  - {name: c1, op: conv, out: 8, kernel: 3}\n"
                              "  - {name: bn, op: batchnorm}\n"
                              "  - {name: r, op: relu}\n"
                              "  - {name: c2, op: conv, out: 8, kernel: 1}\n"
                              "  - {name: sum, op: add, input: c2, other: r}\n"
                              "  - {name: pool, op: avgpool}\n"
                              "  - {name: fc, op: fc, out: 10}\n"
                              "  - {name: loss, op: softmax_loss}\n");
  const auto flow = gradient_flow(m, infer_shapes(m));
  ASSERT_EQ(flow.size(), 8u);
  using V = std::vector<std::string>;
  EXPECT_EQ(flow[7].into, V{"fc"});
  EXPECT_EQ(flow[6].into, V{"pool"});
  EXPECT_EQ(flow[4].into, (V{"r", "c2"}));  // r gets two contributions: the add's and c2's
  EXPECT_EQ(flow[3].into, V{"r"});
  EXPECT_EQ(flow[1].into, V{"c1"});
  EXPECT_TRUE(flow[0].into.empty());
  EXPECT_FALSE(flow[0].data_gradient);
  for (std::size_t i = 1; i < flow.size(); ++i) EXPECT_TRUE(flow[i].data_gradient) << i;
  // Weight gradients: the convs, batch norm's gamma and beta, the fc.
  std::vector<bool> weights;
  for (const auto& s : flow) weights.push_back(s.weight_gradient);
  EXPECT_EQ(weights, (std::vector<bool>{true, true, false, true, false, false, true, false}));

  // A layer nothing later reads gets no gradient: an error at its line, not a crash.
  const ModelDef dangling = model_of("dangling",
                                     "  - {name: c1, op: conv, out: 8, kernel: 3}\n"
                                     "  - {name: side, op: relu}\n"
                                     "  - {name: pool, op: avgpool, input: c1}\n"
                                     "  - {name: fc, op: fc, out: 10}\n"
                                     "  - {name: loss, op: softmax_loss}\n");
  try {
    gradient_flow(dangling, infer_shapes(dangling));
    ADD_FAILURE() << "'side' gets no gradient";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("dangling.yaml:8:5: layer 'side': no gradient reaches it"),
              std::string::npos)
        << e.what();
  }
}

// Lifetimes worked by hand for conv c1 -> relu r -> conv c2 -> loss, body positions from 1.
TEST(GraphLifetimes, KeptTensorsLiveFromTheirProducerToTheirLastReader) {
  const auto& nodes = kChainLayers;
  // Each reads the layer before it; c1 reads the images ("").
  const Consumers readers{{"", {0}}, {"c1", {1}}, {"r", {2}}, {"c2", {3}}};
  Body body;
  body.steps = 18;
  body.spans.resize(4);
  // forward c1 [0,3) r [3,4) c2 [4,7) loss [7,9); backward loss [9,10) c2 [10,14) r [14,15)
  // c1 [15,18)
  body.spans[0] = {{0, 3}, {}, {15, 18}, false};
  body.spans[1] = {{3, 4}, {}, {14, 15}, false};
  body.spans[2] = {{4, 7}, {}, {10, 14}, false};
  body.spans[3] = {{7, 9}, {}, {9, 10}, false};
  const auto kept = kept_tensors(nodes, readers, segments(nodes, {}), body, 1);
  const auto row = [](const KeptTensor& t) {
    return std::tuple(t.name, t.layer, t.live.first, t.live.last);
  };
  std::vector<std::tuple<std::string, std::string, std::uint64_t, std::uint64_t>> got;
  for (const auto& t : kept) got.push_back(row(t));
  // c1's output (a conv keeps it) from its forward to its own backward (17 + 1); its gradient
  // from r's backward (14) to its own; r runs in place: only its gradient, from c2's backward;
  // c2's output to its own backward, its gradient from the loss's backward; the loss keeps
  // nothing and nothing reads its output.
  EXPECT_EQ(got, (std::vector<std::tuple<std::string, std::string, std::uint64_t, std::uint64_t>>{
                     {"activation/c1", "c1", 1, 18},
                     {"gradient/c1", "c1", 15, 18},
                     {"gradient/r", "r", 11, 15},
                     {"activation/c2", "c2", 5, 14},
                     {"gradient/c2", "c2", 10, 14}}));
  // Checkpoint r: c1 is recomputed at [9,12) after a forward of r's segment; c1's first output
  // lives until r's forward read it (step 3, position 4), the recomputed one to c1's backward.
  body.spans[0].rec = {9, 12};
  body.spans[0].recomputed = true;
  body.images_at = 0;
  got.clear();
  for (const auto& t : kept_tensors(nodes, readers, segments(nodes, {"r"}), body, 1))
    got.push_back(row(t));
  ASSERT_GE(got.size(), 4u);
  EXPECT_EQ(got[0], std::tuple(std::string("input_images"), std::string(""), 1u, 18u));
  EXPECT_EQ(got[1], std::tuple(std::string("activation/c1"), std::string("c1"), 1u, 4u));
  EXPECT_EQ(got[2], std::tuple(std::string("recomputed/c1"), std::string("c1"), 10u, 18u));
  EXPECT_EQ(got[4], std::tuple(std::string("checkpoint/r"), std::string("r"), 4u, 15u));
  EXPECT_TRUE(kept_tensors(nodes, readers, {}, Body{}, 1).empty());  // no body, nothing kept
}

std::vector<std::string> names(const std::vector<Block>& blocks) {
  std::vector<std::string> out;
  for (const auto& b : blocks) out.push_back(b.layer);
  return out;
}

TEST(GraphSubLayers, EachIpuRunsItsPlacementsSubLayersInTheModelsOrder) {
  ModelDef m;  // 4 layers, post-norm, tied masked-LM head (BERT)
  m.encoder_layers = 4;
  RunConfig run;
  // The layers run through IPUs 1, 2, then 0 (with the tied heads): IPU 1 holds sub-layers
  // 0-2 of the chain (attention 0, FFN 0, attention 1), IPU 2 3-4, IPU 0 5-7.
  run.placement = {{1, 2}, {2, 1}, {1, 1}};
  using V = std::vector<std::string>;
  EXPECT_EQ(names(stage_blocks(m, run, 1)),
            (V{"encoder0/attention", "encoder0/ffn", "encoder1/attention"}));
  // An IPU may start with an FFN whose attention is on the IPU before it.
  EXPECT_EQ(names(stage_blocks(m, run, 2)), (V{"encoder1/ffn", "encoder2/attention"}));
  EXPECT_EQ(names(stage_blocks(m, run, 0)),
            (V{"embedding", "encoder2/ffn", "encoder3/attention", "encoder3/ffn", "heads"}));
  EXPECT_NO_THROW(check_stage_chain(m, run));
  // Pre-norm (GPT-2): the final norm on the last IPU; a classifier (ViT): the heads there too,
  // and the layers run through IPUs 0, 1, 2.
  m.pre_norm = true;
  m.classifier = true;
  run.placement = {{2, 1}, {1, 2}, {1, 1}};
  EXPECT_EQ(names(stage_blocks(m, run, 0)),
            (V{"embedding", "encoder0/attention", "encoder0/ffn", "encoder1/attention"}));
  EXPECT_EQ(names(stage_blocks(m, run, 1)),
            (V{"encoder1/ffn", "encoder2/attention", "encoder2/ffn"}));
  EXPECT_EQ(names(stage_blocks(m, run, 2)),
            (V{"encoder3/attention", "encoder3/ffn", "final_norm", "heads"}));
  EXPECT_NO_THROW(check_stage_chain(m, run));
}

TEST(GraphSubLayers, APlacementThatSkipsPartOfTheChainIsRefusedNamingTheIpu) {
  ModelDef m;
  m.encoder_layers = 4;
  m.classifier = true;  // layers through IPUs 0, 1, 2
  RunConfig run;
  run.file = "r.yaml";
  // IPU 0: attention 0 and FFNs 0-1, but attention 1 (between them) is on IPU 1.
  run.placement = {{1, 2}, {2, 1}, {1, 1}};
  try {
    check_stage_chain(m, run);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("r.yaml: run.pipeline_placement: IPU 0 must hold the "
                                         "next sub-layers"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("spanning numbers 0 to 3"), std::string::npos) << e.what();
  }
}

TEST(GraphSubLayers, OneIpuHoldsEverything) {
  ModelDef m;
  m.encoder_layers = 4;
  m.pre_norm = true;
  m.classifier = true;
  const auto one = stage_blocks(m, RunConfig{.placement = {{4, 4}}}, 0);
  ASSERT_EQ(one.size(), 11u);  // everything on one IPU
  EXPECT_EQ(one.front().kind, Op::kEmbedding);
  EXPECT_EQ(one.back().kind, Op::kHeads);
  EXPECT_EQ(info(Op::kEmbedding).kind, trace::OpKind::kEmbedding);
}

}  // namespace
}  // namespace ipusim::compiler::graph
