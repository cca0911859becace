// SPDX-License-Identifier: Apache-2.0
// Feature maps concatenated and upsampled (model-file ops concat and upsample): their shapes,
// parameters, graph, lowering and errors, on a DenseNet block and a small U-Net
// (tests/data/workloads). Expected values worked by hand.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <string>

#include "compile_helpers.hpp"
#include "compiler/graph/shapes.hpp"
#include "ipusim/compiler/compiler.hpp"
#include "ipusim/compiler/graph/build.hpp"
#include "ipusim/compiler/graph/primitive.hpp"
#include "ipusim/compiler/layout.hpp"
#include "ipusim/util/error.hpp"

namespace ipusim::compiler {
namespace {

std::string data(const std::string& file) {
  return std::string(IPUSIM_SOURCE_DIR) + "/tests/data/workloads/" + file;
}

Layout grid(std::uint64_t positions, std::uint64_t channels, std::uint64_t ppt, std::uint64_t cpt) {
  Layout l;
  l.positions = positions;
  l.channels = channels;
  l.positions_per_tile = ppt;
  l.chans_per_tile = cpt;
  return l;
}

TEST(ChannelMove, MovesOnlyTheBytesThatChangeTile) {
  // From: 8 positions x 4 half channels, all on tile 0. To: 8 x 12 in channel blocks of 4 on
  // tiles 0, 1, 2.
  const Layout from = grid(8, 4, 8, 4), to = grid(8, 12, 8, 4);
  // Into channels 4-7 (tile 1): all 8 x 4 x 2 B = 64 B from tile 0 to tile 1.
  trace::Exchange ex = channel_move("m", from, 0, to, 4, 4);
  ASSERT_EQ(ex.transfers.size(), 1u);
  EXPECT_EQ(ex.transfers[0].src.first, 0u);
  EXPECT_EQ(ex.destinations(ex.transfers[0])[0].first, 1u);
  EXPECT_EQ(ex.transfers[0].bytes, 64u);
  // Into channels 0-3: tile 0 holds them already.
  EXPECT_TRUE(channel_move("m", from, 0, to, 0, 4).transfers.empty());
  // Into channels 2-5: channels 2-3 stay on tile 0; 4-5 go to tile 1: 8 x 2 x 2 B = 32 B.
  ex = channel_move("m", from, 0, to, 2, 4);
  ASSERT_EQ(ex.transfers.size(), 1u);
  EXPECT_EQ(ex.transfers[0].bytes, 32u);
  // Back out: channels 8-11 of `to` (tile 2) into `from` (tile 0): 64 B from tile 2.
  ex = channel_move("m", to, 8, from, 0, 4);
  ASSERT_EQ(ex.transfers.size(), 1u);
  EXPECT_EQ(ex.transfers[0].src.first, 2u);
  EXPECT_EQ(ex.transfers[0].bytes, 64u);
  EXPECT_THROW(channel_move("m", from, 0, to, 10, 4), Error);  // past `to`'s 12 channels
}

TEST(ConcatUpsample, ModelsHaveTheirByHandShapesAndParameterCounts) {
  // The by-hand counts in the model files' headers.
  const ModelDef dense = load_model(data("densenet_block.yaml"));
  const ModelDef unet = load_model(data("unet_small.yaml"));
  EXPECT_EQ(parameter_count(dense), 54'250u);
  EXPECT_EQ(parameter_count(unet), 81'520u);
  // The dense block grows 32 -> 48 -> 64 -> 80 -> 96 channels.
  std::map<std::string, graph::Shape> shape;
  for (const auto& n : graph::infer_shapes(dense)) shape[n.layer->name] = n.out;
  for (const auto& n : graph::infer_shapes(unet)) shape[n.layer->name] = n.out;
  EXPECT_EQ(shape.at("dense0/cat").c, 48u);
  EXPECT_EQ(shape.at("dense3/cat").c, 96u);
  // U-Net: 8x8x64 upsampled to 16x16x64; its conv to 32 and enc2's 32 make 64 channels.
  EXPECT_EQ(shape.at("up2").h, 16u);
  EXPECT_EQ(shape.at("up2").c, 64u);
  EXPECT_EQ(shape.at("dec2/cat").c, 64u);
  EXPECT_EQ(shape.at("dec1/cat").h, 32u);
  EXPECT_EQ(shape.at("dec1/cat").c, 32u);
  // The tensor graph: a per-pixel loss over [N, 2, 32, 32] logits, and a backward whose
  // concat gradients are slices of the right sizes.
  graph::TensorGraph g = graph::build_graph(unet, {.batch = 2});
  graph::add_backward(g, graph::loss_of(g));
  g.verify();
  std::multiset<std::uint64_t> slices;
  for (const auto& n : g.nodes())
    if (n.op == graph::Primitive::kSlice) slices.insert(g.tensor(n.outputs[0]).dims[1]);
  EXPECT_EQ(slices, (std::multiset<std::uint64_t>{16, 16, 32, 32}));
}

bool touches(const trace::IpuProgram& p, const std::string& layer, trace::Pass pass,
             bool exchanges) {
  auto has = [&](const trace::Provenance& prov) {
    return prov.pass == pass &&
           std::find(prov.layers.begin(), prov.layers.end(), layer) != prov.layers.end();
  };
  if (exchanges) {
    for (const auto& ex : p.exchanges)
      if (has(ex.provenance)) return true;
  } else {
    for (const auto& cs : p.compute_sets)
      if (has(cs.provenance)) return true;
  }
  return false;
}

bool has_tensor(const trace::IpuProgram& p, const std::string& name) {
  for (const auto& t : p.tensors)
    if (t.name == name) return true;
  return false;
}

TEST(ConcatUpsample, TrainingLowersEachOpForwardAndBackward) {
  // Compiled with memory and structure checked. A concat moves its operands' bytes into the
  // new tensor where they change tile, and its gradient's channel ranges back.
  const trace::Trace d = testing::compile_run(data("densenet_block-pod16.yaml"));
  ASSERT_EQ(d.ipus.size(), 1u);
  EXPECT_TRUE(touches(d.ipus[0], "dense2/cat", trace::Pass::kForward, true));
  EXPECT_TRUE(has_tensor(d.ipus[0], "gradient/dense2/cat"));
  // (Its gradient arrives on the linear mapping, as do the operands' gradients: the same
  // positions on the same tiles, so nothing moves back.)
  EXPECT_FALSE(touches(d.ipus[0], "dense2/cat", trace::Pass::kDataGradient, true));
  // The U-Net's gradient arrives from a conv's data gradient, on the conv's layout.
  const trace::Trace u = testing::compile_run(data("unet_small-pod16.yaml"));
  EXPECT_TRUE(touches(u.ipus[0], "dec2/cat", trace::Pass::kForward, true));
  EXPECT_TRUE(touches(u.ipus[0], "dec2/cat", trace::Pass::kDataGradient, true));
  // Upsampling copies each position factor^2 times; its gradient sums them.
  EXPECT_TRUE(touches(u.ipus[0], "up1", trace::Pass::kForward, false));
  EXPECT_TRUE(touches(u.ipus[0], "up1", trace::Pass::kDataGradient, false));
}

// The message of the ConfigError loading `yaml` throws ("" if none).
std::string load_error(const std::string& yaml) {
  const std::string file = ::testing::TempDir() + "/concat_upsample_model.yaml";
  std::ofstream(file) << yaml;
  try {
    (void)parameter_count(load_model(file));
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(ConcatUpsample, ShapesAndKeysTheOpsCannotTakeAreErrorsNamingTheLayer) {
  const std::string head =
      "model: {name: m, family: cnn, input: {height: 8, width: 8, channels: 3}, classes: 2}\n"
      "layers:\n"
      "  - {name: a, op: conv, out: 4, kernel: 3}\n";
  std::string e = load_error(head +
                             "  - {name: b, op: maxpool, kernel: 2, stride: 2}\n"
                             "  - {name: c, op: concat, other: a}\n");
  EXPECT_NE(e.find(":5:5: layer 'c': concat of 'b' (4x4x4) and 'a' (8x8x4): feature maps join "
                   "along channels, so their height and width must be equal"),
            std::string::npos)
      << e;
  e = load_error(head + "  - {name: b, op: relu, factor: 2}\n");
  EXPECT_NE(e.find("layers[1].factor: relu has no factor (only upsample take one)"),
            std::string::npos)
      << e;
  e = load_error(head + "  - {name: b, op: upsample}\n");
  EXPECT_NE(e.find("factor"), std::string::npos) << e;
  e = load_error(head + "  - {name: b, op: concat}\n");
  EXPECT_NE(e.find("concat needs 'other' (the feature map joined after the input)"),
            std::string::npos)
      << e;
}

}  // namespace
}  // namespace ipusim::compiler
