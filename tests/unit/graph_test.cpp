// SPDX-License-Identifier: Apache-2.0
// The compiler's op table and shape-inference pass (src/compiler/graph/): no SystemC, no chip.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "compiler/graph/shapes.hpp"
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

TEST(GraphOps, EveryOpIsFoundByItsModelFileNameAndNothingElseIs) {
  ASSERT_EQ(op_names().size(), kOpCount);
  for (std::size_t i = 0; i < kOpCount; ++i) {
    const Op op = static_cast<Op>(i);
    EXPECT_EQ(op_named(name(op)), op) << name(op);
    EXPECT_EQ(op_names()[i], name(op));
  }
  EXPECT_EQ(op_named("conv2d"), std::nullopt);
  EXPECT_EQ(op_named(""), std::nullopt);
  // The facts the lowering reads (docs/models.md): what is a conv, what LARS adapts, what
  // keeps its output and what takes a second operand.
  EXPECT_TRUE(is_conv(Op::kConv) && is_conv(Op::kDwconv) && !is_conv(Op::kFc));
  EXPECT_TRUE(info(Op::kFc).lars && info(Op::kConv).lars && !info(Op::kBatchNorm).lars);
  EXPECT_FALSE(info(Op::kRelu).keeps_output || info(Op::kAdd).keeps_output);
  EXPECT_TRUE(info(Op::kSwish).keeps_output && info(Op::kMaxPool).keeps_output);
  for (const OpInfo& row : kOps)
    EXPECT_EQ(!row.other.empty(), row.op == Op::kAdd || row.op == Op::kScale) << row.name;
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
                .find("keys.yaml:8:32: layers[1].other: relu takes one operand (only add or scale "
                      "take 'other')"),
            std::string::npos);
  EXPECT_NE(
      parse_error("  - {name: a, op: add}\n").find("an add needs 'other' (the second operand)"),
      std::string::npos);
  EXPECT_NE(parse_error("  - {name: c, op: fc}\n").find("layers[0].out: missing required key"),
            std::string::npos);
}

}  // namespace
}  // namespace ipusim::compiler::graph
