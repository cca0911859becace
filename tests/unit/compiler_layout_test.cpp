// SPDX-License-Identifier: Apache-2.0
// The compiler's layout stage (docs/workloads.md "Lowering"): layouts, rearrangements,
// elementwise ops where the data lives, and reductions among the tiles sharing outputs.
// Expected values are worked out by hand in the comments.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "compile_helpers.hpp"
#include "compiler/ipu_builder.hpp"
#include "ipusim/compiler/compiler.hpp"
#include "ipusim/compiler/layout.hpp"
#include "ipusim/config/system.hpp"
#include "ipusim/cost/codelet_models.hpp"
#include "ipusim/util/error.hpp"
#include "test_chips.hpp"

namespace ipusim::compiler {
namespace {

using trace::DType;
using trace::Op;
using trace::StepKind;

using ipusim::testing::compile_run;
using ipusim::testing::config_error_of;
using ipusim::testing::grid;

std::size_t count(const Steps& steps, StepKind kind) {
  std::size_t n = 0;
  for (const auto& s : steps) n += s.kind == kind;
  return n;
}

TEST(CompilerLayout, LinearMappingFollowsPoplarsGrainAndMinimum) {
  const ChipSpec chip = testing::gc200_by_hand();
  // 15,625 x 64 half = 1,000,000 elements: ceil(1e6 / 1472) = 680 (a multiple of the 4-element
  // grain, above the 64-element / 128 B minimum), so a tile holds ceil(680 / 64) = 11 whole
  // positions of all 64 channels, on ceil(15625 / 11) = 1421 tiles.
  const Layout l = linear_layout(chip, DType::kHalf, 15625, 64);
  EXPECT_EQ(l.chans_per_tile, 64u);
  EXPECT_EQ(l.positions_per_tile, 11u);
  EXPECT_EQ(l.tiles(), 1421u);
  EXPECT_EQ(l.per_tile(), 704u);
  // A small tensor piles onto the low tiles with at least 128 B each: 1 x 100 half = 200 B ->
  // pieces of 64 elements: 2 tiles.
  const Layout small = linear_layout(chip, DType::kHalf, 1, 100);
  EXPECT_EQ(small.chans_per_tile, 64u);
  EXPECT_EQ(small.tiles(), 2u);
}

TEST(CompilerLayout, ConvOutputKeepsThePlansBlocks) {
  const ChipSpec chip = testing::gc200_by_hand();
  plan::ConvArgs a;
  a.batch = 2;
  a.height = 8;
  a.width = 8;
  a.in_chans = 64;
  a.out_chans = 64;
  plan::ConvPlan p;
  p.row_split = 4;  // 16 output rows (2 images x 8) in blocks of 4 rows
  p.rows_per_tile = 4;
  p.out_split = 2;  // 2 blocks of 32 channels
  p.out_per_tile = 32;
  p.in_split = 1;
  p.in_per_tile = 64;
  const Layout l = conv_output_layout(chip, a, p);
  // 128 positions in blocks of 4 rows x 8 columns = 32; 4 x 2 = 8 tiles, block (p, c) on 2p + c.
  EXPECT_EQ(l.positions, 128u);
  EXPECT_EQ(l.positions_per_tile, 32u);
  EXPECT_EQ(l.chans_per_tile, 32u);
  EXPECT_EQ(l.tiles(), 8u);
  EXPECT_EQ(l.tile(3, 1), 7u);
  EXPECT_EQ(l.channel_sharers(), 4u);
  EXPECT_EQ(l.position_sharers(), 2u);
  // An input-channel split of 2 reduce-scatters each block's outputs over 2 tiles.
  p.in_split = 2;
  p.in_per_tile = 32;
  EXPECT_EQ(conv_output_layout(chip, a, p).positions_per_tile, 16u);
  EXPECT_EQ(conv_output_layout(chip, a, p).tiles(), 16u);
}

// A swapped matmul plan computes C^T (issue 28, item 1): its output, read as C, is the transposed
// view of the swapped product's, on the same tiles. 16 x 64 x 1000 (M x K x N) swapped: 1000 rows
// in 4 blocks of 250, 16 output channels in one block; C is [16 x 1000] with the 4 blocks of 250
// columns on tiles 0-3, and no exchange moves it back.
TEST(CompilerLayout, ASwappedMatmulsOutputIsTheTransposedViewOfItsProducts) {
  const ChipSpec chip = testing::gc200_by_hand();
  plan::ConvArgs a;
  a.height = 16;
  a.in_chans = 64;
  a.out_chans = 1000;
  a.matmul = true;
  plan::ConvPlan p;
  p.swapped = true;
  p.row_split = 4;
  p.rows_per_tile = 250;
  p.out_split = 1;
  p.out_per_tile = 16;
  p.in_per_tile = 64;
  const Layout l = conv_output_layout(chip, a, p);
  EXPECT_EQ(l.positions, 16u);
  EXPECT_EQ(l.channels, 1000u);
  EXPECT_EQ(l.positions_per_tile, 16u);
  EXPECT_EQ(l.chans_per_tile, 250u);
  EXPECT_EQ(l.tiles(), 4u);
  for (std::uint64_t c = 0; c < 4; ++c) EXPECT_EQ(l.tile(0, c), c);
  const Layout product = transposed_view(l);
  EXPECT_EQ(product.positions, 1000u);
  EXPECT_EQ(product.channels, 16u);
  for (std::uint64_t r = 0; r < 4; ++r) EXPECT_EQ(product.tile(r, 0), l.tile(0, r));
  EXPECT_EQ(transposed_view(product), l);
  EXPECT_TRUE(rearrangement("none", l, transposed_view(transposed_view(l))).empty());
}

// Issue 28, item 2: the exchange that builds an expanded conv's input. A 3x3 conv of 2 channels
// over 4 rows of 2 columns (batch 1, stride 1, one row of padding each side), its kernel rows
// expanded: 4 expanded rows of 2 x 3 x 2 = 6 channels, each the 3 input rows around it. The
// input sits on tiles 0 (rows 0-1) and 1 (rows 2-3), 8 B a row; the expanded input's blocks of
// two rows (4 positions x 6 channels x 2 B = 48 B) on tiles 2 and 3. Block 0 reads rows 0-2:
// 16 B held on tile 0 and 8 on tile 1, so 32 B come from tile 0 and 16 from tile 1; block 1
// reads rows 1-3, 8 B on tile 0 and 16 on tile 1: 16 and 32.
TEST(CompilerLayout, AnExpandedInputIsSentFromTheRowsItIsMadeOf) {
  plan::ConvArgs a;
  a.in_chans = 2;
  a.height = 4;
  a.width = 2;
  a.out_chans = 4;
  a.kernel = 3;
  plan::ConvPlan p;
  p.expand_h = true;
  Layout source;
  source.positions = 8;
  source.channels = 2;
  source.positions_per_tile = 4;
  source.chans_per_tile = 2;
  Layout home;
  home.positions = 8;
  home.channels = 6;
  home.positions_per_tile = 4;
  home.chans_per_tile = 6;
  home.first_tile = 2;
  using Sent = std::map<std::pair<std::uint32_t, std::uint32_t>, std::uint64_t>;
  const auto sent = [&] {
    Sent bytes;
    expansion("x", source, home, a, p).for_each([&](const trace::TransferView& t) {
      for (const auto& d : t.dst)
        for (std::uint32_t tile = d.first; tile <= d.last; ++tile)
          for (std::uint32_t src = t.src.first; src <= t.src.last; ++src)
            bytes[{src, tile}] += t.bytes;
    });
    return bytes;
  };
  EXPECT_EQ(sent(), (Sent{{{0, 2}, 32}, {{1, 2}, 16}, {{0, 3}, 16}, {{1, 3}, 32}}));
  // With the input on tiles 2 and 3 themselves, a tile's own share does not move: block 0's
  // 16 B from tile 3 and block 1's 16 B from tile 2 do.
  source.first_tile = 2;
  EXPECT_EQ(sent(), (Sent{{{3, 2}, 16}, {{2, 3}, 16}}));
  // Stride 2: 2 expanded rows, one a block (2 positions x 6 channels x 2 B = 24 B). Row 0 reads
  // the window [-1, 2) clipped to rows 0-1, all on tile 0; row 1 reads rows 1-3, 8 B on tile 0
  // and 16 on tile 1.
  a.stride = 2;
  source.first_tile = 0;
  home.positions = 4;
  home.positions_per_tile = 2;
  EXPECT_EQ(sent(), (Sent{{{0, 2}, 24}, {{0, 3}, 8}, {{1, 3}, 16}}));
}

TEST(CompilerLayout, ElementwiseOnAConvOutputAddsNoExchange) {
  const ChipSpec chip = testing::gc200_by_hand();
  trace::IpuProgram program;
  IpuBuilder b(chip, program, 0.6, DType::kHalf, /*fuse_elementwise=*/true);
  plan::ConvArgs a;
  a.batch = 4;
  a.height = 28;
  a.width = 28;
  a.in_chans = 128;
  a.out_chans = 128;
  a.kernel = 3;
  Steps conv, elementwise;
  const Layout y = b.conv(conv, a);
  const Op chain[] = {Op::kSub, Op::kMul, Op::kMul, Op::kAdd, Op::kRelu};  // batch norm + ReLU
  b.elementwise(elementwise, y, chain);
  EXPECT_EQ(count(elementwise, StepKind::kExchange), 0u);
  ASSERT_EQ(count(elementwise, StepKind::kCompute), 1u);  // fused: one compute set
  const auto& cs = program.compute_sets[elementwise.front().index];
  ASSERT_EQ(cs.vertices.size(), 1u);
  const auto& v = cs.vertices.front();
  EXPECT_EQ(v.codelet, trace::Codelet::kMap);
  EXPECT_EQ(v.tiles, y.range());  // exactly the tiles holding the conv's output
  EXPECT_EQ(static_cast<std::uint64_t>(v.params[trace::slot::kMapN]), y.per_tile());
  // sub, mul, mul, add (c = 1 each in half) + relu (c = 2): 6 cycles per vector, 5 ops.
  EXPECT_EQ(v.params[trace::slot::kMapOpCycles], 6);
  EXPECT_EQ(v.params[trace::slot::kMapOps], 5);
  // Unfused: one compute set and sync per op, still no exchange.
  trace::IpuProgram program2;
  IpuBuilder unfused(chip, program2, 0.6, DType::kHalf, /*fuse_elementwise=*/false);
  Steps conv2, separate;
  unfused.elementwise(separate, unfused.conv(conv2, a), chain);
  EXPECT_EQ(count(separate, StepKind::kCompute), 5u);
  EXPECT_EQ(count(separate, StepKind::kExchange), 0u);
}

TEST(CompilerLayout, BatchNormStatisticsExchangeOnlyAmongTilesSharingChannels) {
  const ChipSpec chip = testing::gc200_by_hand();
  trace::IpuProgram program;
  IpuBuilder b(chip, program, 0.6, DType::kHalf, true);
  // 4 position blocks x 4 channel blocks of 16 channels: tile 4p + c. Channel block c lives on
  // tiles c, 4 + c, 8 + c, 12 + c: a depth of 4, one stage with a fan-in of 4.
  const Layout l = grid(100, 64, 25, 16);
  Steps steps;
  b.reduce(steps, l, Axis::kPositions, 2, /*broadcast=*/false);
  ASSERT_EQ(count(steps, StepKind::kExchange), 1u);
  const trace::Exchange* ex = nullptr;
  for (const auto& s : steps)
    if (s.kind == StepKind::kExchange) ex = &program.exchanges[s.index];
  ASSERT_NE(ex, nullptr);
  EXPECT_EQ(ex->transfer_count(), 12u);
  const trace::Exchange flat = trace::expanded(*ex);  // one record per transfer
  ex = &flat;
  // Each non-leader tile sends its 16 channels x 2 statistics as float partials: 128 B.
  EXPECT_EQ(ex->transfers.size(), 12u);
  for (const auto& t : ex->transfers) {
    const auto dst = ex->destinations(t);
    ASSERT_EQ(dst.size(), 1u);
    EXPECT_EQ(t.src.first % 4, dst[0].first % 4) << "tiles of different channel blocks exchanged";
    EXPECT_EQ(dst[0].first, dst[0].first % 4u);  // the leader is the channel block's first tile
    EXPECT_EQ(t.bytes, 128u);
  }
  // The tile-local partials: 32 outputs from 25 positions on each of the 16 tiles.
  const auto& local = program.compute_sets[steps.front().index].vertices.front();
  EXPECT_EQ(local.params[trace::slot::kReduceOutputs], 32);
  EXPECT_EQ(local.params[trace::slot::kReduceInputs], 25);
  EXPECT_EQ(local.tiles, (trace::TileRange{0, 15}));
}

TEST(CompilerLayout, ReductionStagesFollowPoplinsDepthRule) {
  EXPECT_EQ(reduction_stages(1), (std::pair<int, std::uint64_t>{0, 1}));
  EXPECT_EQ(reduction_stages(15), (std::pair<int, std::uint64_t>{1, 15}));
  EXPECT_EQ(reduction_stages(16), (std::pair<int, std::uint64_t>{2, 4}));    // sqrt(16)
  EXPECT_EQ(reduction_stages(124), (std::pair<int, std::uint64_t>{2, 12}));  // ceil(11.14)
  EXPECT_EQ(reduction_stages(125), (std::pair<int, std::uint64_t>{3, 5}));   // cbrt(125)
}

TEST(CompilerLayout, LayoutMismatchAddsARearrangementOfTheExpectedBytes) {
  // 8 positions x 8 half channels. From: positions 0-3 on tile 0, 4-7 on tile 1. To: channels
  // 0-3 on tile 0, 4-7 on tile 1. Tile 0 keeps positions 0-3 of channels 0-3 and receives
  // positions 4-7 of channels 0-3 from tile 1: 16 elements = 32 B; tile 1 likewise.
  const Layout from = grid(8, 8, 4, 8), to = grid(8, 8, 8, 4);
  const trace::Exchange ex = rearrangement("r", from, to);
  // One move record standing for the two transfers.
  ASSERT_EQ(ex.moves.size(), 1u);
  EXPECT_TRUE(ex.transfers.empty());
  ASSERT_EQ(ex.transfer_count(), 2u);
  std::set<std::pair<std::uint32_t, std::uint32_t>> pairs;
  ex.for_each([&](const trace::TransferView& t) {
    EXPECT_EQ(t.bytes, 32u);
    ASSERT_EQ(t.dst.size(), 1u);
    pairs.insert({t.src.first, t.dst[0].first});
  });
  EXPECT_EQ(pairs, (std::set<std::pair<std::uint32_t, std::uint32_t>>{{0, 1}, {1, 0}}));
  EXPECT_EQ(rearrangement_receive_bytes(from, to), 32u);
  // Equal layouts move nothing, and the builder emits no exchange for them.
  EXPECT_TRUE(rearrangement("r", from, from).empty());
  trace::IpuProgram program;
  const ChipSpec chip = testing::gc200_by_hand();  // the builder keeps a reference to it
  IpuBuilder b(chip, program, 0.6, DType::kHalf, true);
  Steps same, moved;
  b.rearrange(same, from, from);
  b.rearrange(moved, from, to);
  EXPECT_TRUE(same.empty());
  EXPECT_EQ(count(moved, StepKind::kExchange), 1u);
}

// Two IPUs of a compile building the same operations (a matmul whose weights it reads
// transposed, so a rearrangement, a transpose and the conv's own steps) give the second IPU the
// same program whether it builds them itself or copies what the first built (IpuBuilder's
// shared builds); and a different budget does not take another budget's build.
TEST(CompilerLayout, ASharedBuildGivesTheProgramBuildingItGives) {
  const ChipSpec chip = testing::gc200_by_hand();
  const auto build = [&](trace::IpuProgram& program, double memory, IpuBuilder::PlanCache& plans,
                         IpuBuilder::BuildCache* builds) {
    IpuBuilder b(chip, program, memory, DType::kHalf, true);
    b.share_plans(&plans);
    if (builds) b.share_builds(builds);
    plan::ConvArgs fwd;
    fwd.height = 512;
    fwd.in_chans = 1024;
    fwd.out_chans = 256;
    Steps steps;
    b.matmul(steps, 512, 1024, 256, DType::kHalf, {}, Operand{b.weights_layout(fwd), true});
    b.matmul(steps, 512, 256, 1024, DType::kHalf);
    program.steps = steps;
  };
  IpuBuilder::PlanCache plans;
  trace::IpuProgram alone;
  build(alone, 0.6, plans, nullptr);
  IpuBuilder::BuildCache builds;
  trace::IpuProgram first, second, other_budget, other_budget_alone;
  build(first, 0.6, plans, &builds);
  EXPECT_FALSE(builds.empty());
  build(second, 0.6, plans, &builds);
  EXPECT_EQ(first, alone);
  EXPECT_EQ(second, alone);
  build(other_budget, 0.01, plans, &builds);
  build(other_budget_alone, 0.01, plans, nullptr);
  EXPECT_EQ(other_budget, other_budget_alone);
  EXPECT_NE(other_budget, alone);  // (the smaller budget plans otherwise)
}

TEST(CompilerLayout, TransposedOperandIsRearrangedAndTransposed) {
  const ChipSpec chip = testing::gc200_by_hand();
  trace::IpuProgram program;
  IpuBuilder b(chip, program, 0.6, DType::kHalf, true);
  // The data-gradient pass of a 1024 x 1024 x 1024 matmul reads the forward weights transposed.
  plan::ConvArgs fwd;
  fwd.height = 1024;
  fwd.in_chans = 1024;
  fwd.out_chans = 1024;
  const Layout weights = b.weights_layout(fwd);
  Steps steps;
  b.matmul(steps, 1024, 1024, 1024, DType::kHalf, {}, Operand{weights, true});
  std::size_t transposes = 0;
  for (const auto& s : steps)
    if (s.kind == StepKind::kCompute)
      for (const auto& v : program.compute_sets[s.index].vertices)
        transposes += v.codelet == trace::Codelet::kTranspose;
  EXPECT_GE(transposes, 1u);
  // Transposing n half elements costs the copy call overhead + n cycles (2 B per cycle).
  EXPECT_EQ(cost::transpose(chip, DType::kHalf, 1000).cycles, 288u + 1000u);
}

}  // namespace
}  // namespace ipusim::compiler

namespace ipusim::compiler {
namespace {

TEST(CompilerLayout, EveryParameterOfACompiledModelLivesOnItsLayout) {
  // The reduced ResNet: each conv's weights, gradient accumulator and momentum are trace
  // tensors on the tiles of the conv's weight layout, holding the whole k x k x Cin x Cout
  // half tensor: tiles x bytes per tile covers it, and less than one block more.
  const std::string dir = std::string(IPUSIM_SOURCE_DIR) + "/tests/data/workloads/";
  const LoadedRun run = load_run(dir + "resnet_tiny-pod16.yaml");
  const ModelDef model = load_model(run.run.model_file);
  const auto system = ipusim::load_system(run.run.system_file);
  const trace::Trace t = compile(model, run.run, system.spec);
  ASSERT_EQ(t.ipus.size(), 1u);
  // Channels of each layer's output, propagated by hand through the model.
  std::map<std::string, std::uint64_t> channels;
  std::string previous;
  std::uint64_t convs = 0;
  for (const Layer& l : model.layers) {
    const std::string in = l.input.empty() ? previous : l.input;
    const std::uint64_t cin = in.empty() ? model.channels : channels.at(in);
    previous = l.name;
    channels[l.name] = l.op == graph::Op::kConv || l.op == graph::Op::kFc ? l.out : cin;
    if (l.op != graph::Op::kConv) continue;
    ++convs;
    const std::uint64_t bytes = l.kernel * l.kernel * cin * l.out * 2;
    for (const std::string kind : {"weights/", "gradient_accumulator/", "momentum/"}) {
      const trace::Tensor* found = nullptr;
      for (const auto& tensor : t.ipus[0].tensors)
        if (tensor.name == kind + l.name + ".weight") found = &tensor;
      ASSERT_NE(found, nullptr) << kind << l.name;
      EXPECT_EQ(found->tiles.first, 0u);
      EXPECT_LT(found->tiles.last, system.spec.chip.tiles);
      const std::uint64_t held = std::uint64_t{found->tiles.size()} * found->bytes_per_tile;
      EXPECT_GE(held, bytes) << kind << l.name;
      EXPECT_LT(held, bytes + std::uint64_t{found->tiles.size()} * found->bytes_per_tile / 2 +
                          found->bytes_per_tile)
          << kind << l.name;
    }
  }
  EXPECT_EQ(convs, 9u);  // the stem and two bottleneck blocks of four convs (resnet_tiny.yaml)
}

TEST(CompilerLiveness, ActivationsAndGradientsLiveWhereTheirLayersRun) {
  // The reduced ResNet with one checkpoint (b1/0/relu): layers before it are recomputed. Each
  // activation, checkpoint and gradient tensor has a lifetime inside the micro-batch loop body
  // (positions 1.. after the loop at 0), and its lifetime holds steps of its own layer (by the
  // steps' provenance: the forward or recomputation for an activation, a backward pass for a
  // gradient); a recomputed layer's first copy is freed before its recomputation starts.
  const std::string dir = std::string(IPUSIM_SOURCE_DIR) + "/tests/data/workloads/";
  const LoadedRun run = load_run(dir + "resnet_tiny-pod16.yaml");
  const ModelDef model = load_model(run.run.model_file);
  const trace::Trace t = compile(model, run.run, ipusim::load_system(run.run.system_file).spec);
  const trace::IpuProgram& p = t.ipus[0];
  ASSERT_EQ(p.steps[0].kind, trace::StepKind::kRepeat);
  const std::uint64_t body = trace::program_positions(p.steps[0].body);
  // The provenance of each body position (compute and exchange steps; none for the others).
  std::vector<const trace::Provenance*> at(body + 1, nullptr);
  for (std::size_t i = 0; i < p.steps[0].body.size(); ++i) {
    const trace::Step& s = p.steps[0].body[i];
    if (s.kind == trace::StepKind::kCompute) at[1 + i] = &p.compute_sets[s.index].provenance;
    if (s.kind == trace::StepKind::kExchange) at[1 + i] = &p.exchanges[s.index].provenance;
  }
  const auto runs_in = [&](const trace::Lifetime& l, const std::string& layer, bool backward) {
    for (std::uint64_t q = l.first; q <= l.last; ++q) {
      if (!at[q]) continue;
      const bool bwd =
          at[q]->pass == trace::Pass::kDataGradient || at[q]->pass == trace::Pass::kWeightGradient;
      if (bwd == backward &&
          std::find(at[q]->layers.begin(), at[q]->layers.end(), layer) != at[q]->layers.end())
        return true;
    }
    return false;
  };
  std::map<std::string, trace::Lifetime> scoped;
  for (const auto& tensor : p.tensors) {
    const bool kept =
        tensor.name.starts_with("activation/") || tensor.name.starts_with("recomputed/") ||
        tensor.name.starts_with("checkpoint/") || tensor.name.starts_with("gradient/");
    if (!kept) continue;
    ASSERT_TRUE(tensor.live.has_value()) << tensor.name;
    EXPECT_GE(tensor.live->first, 1u) << tensor.name;
    EXPECT_LE(tensor.live->last, body) << tensor.name;
    // Tensors of a layout with several tile blocks are one per block ("name/0.1"): the same.
    const std::string name =
        tensor.name.substr(0, tensor.name.find('/', tensor.name.find('/') + 1) == std::string::npos
                                  ? std::string::npos
                                  : tensor.name.size());
    scoped.emplace(name, *tensor.live);
  }
  // (ReLU and the residual add run fused into their neighbours' compute sets, under those
  // layers' names: only layers with compute sets of their own are checked.)
  std::map<std::string, graph::Op> op;
  for (const Layer& l : model.layers) op[l.name] = l.op;
  std::size_t checked = 0;
  for (const auto& [name, live] : scoped) {
    const std::string kind = name.substr(0, name.find('/'));
    const std::string layer = name.substr(kind.size() + 1);
    if (op.at(layer) == graph::Op::kRelu || op.at(layer) == graph::Op::kAdd) continue;
    EXPECT_TRUE(runs_in(live, layer, kind == "gradient")) << name;
    ++checked;
  }
  EXPECT_GE(checked, 30u);
  // Segment 0 (conv1 .. b1/0/relu) is recomputed; the last segment is not.
  ASSERT_TRUE(scoped.count("activation/conv1") && scoped.count("recomputed/conv1"));
  EXPECT_LT(scoped.at("activation/conv1").last, scoped.at("recomputed/conv1").first);
  EXPECT_TRUE(scoped.count("checkpoint/b1/0/relu"));
  EXPECT_TRUE(scoped.count("activation/b2/0/conv1"));
  EXPECT_FALSE(scoped.count("recomputed/b2/0/conv1"));
  // The checkpoint outlives the last segment's backward, which reads it.
  EXPECT_GT(scoped.at("checkpoint/b1/0/relu").last, scoped.at("gradient/b2/0/conv1").first);
  // Weights and their state stay live throughout.
  for (const auto& tensor : p.tensors)
    if (tensor.name.starts_with("weights/")) EXPECT_FALSE(tensor.live.has_value()) << tensor.name;
}

}  // namespace
}  // namespace ipusim::compiler

namespace ipusim::compiler {
namespace {

// Steps of the micro-batch body that run a compute set holding `codelet` vertices (with op
// `op` for elementwise codelets).
std::size_t body_steps_running(const trace::IpuProgram& p, trace::Codelet codelet,
                               std::optional<Op> op = std::nullopt) {
  std::size_t n = 0;
  for (const trace::Step& s : p.steps[0].body) {
    if (s.kind != StepKind::kCompute) continue;
    for (const trace::Vertex& v : p.compute_sets[s.index].vertices)
      if (v.codelet == codelet &&
          (!op || v.params[trace::slot::kEltOp] == static_cast<std::int64_t>(*op))) {
        ++n;
        break;
      }
  }
  return n;
}

TEST(CompilerCnn, BatchNormAndReluRunAsTensorFlowLowersThemThroughPopnn) {
  // The reduced ResNet: 9 batch norms and 7 ReLUs; the segment up to the checkpoint
  // b1/0/relu (5 batch norms, 4 ReLUs) is recomputed. Through popnn (the default) each batch
  // norm's apply is two broadcast-vector passes (multiply, add) in the forward pass and its
  // recomputation, and its gradient six (subtract and multiply of the whitening, times gamma,
  // times the variance delta, plus the mean delta, times inv_std): 9 x 2 + 5 x 2 + 9 x 6 =
  // 82. Each ReLU is its own unary compute set: 7 + 4 = 11. Fused, there are none of either.
  const std::string dir = std::string(IPUSIM_SOURCE_DIR) + "/tests/data/workloads/";
  LoadedRun run = load_run(dir + "resnet_tiny-pod16.yaml");
  const ModelDef model = load_model(run.run.model_file);
  const SystemSpec sys = ipusim::load_system(run.run.system_file).spec;
  ASSERT_TRUE(run.run.popnn_norms);
  const trace::Trace popnn = compile(model, run.run, sys);
  EXPECT_EQ(body_steps_running(popnn.ipus[0], trace::Codelet::kBroadcastBinary), 82u);
  EXPECT_EQ(body_steps_running(popnn.ipus[0], trace::Codelet::kUnary, Op::kRelu), 11u);
  run.run.popnn_norms = false;
  const trace::Trace fused = compile(model, run.run, sys);
  EXPECT_EQ(body_steps_running(fused.ipus[0], trace::Codelet::kBroadcastBinary), 0u);
  EXPECT_EQ(body_steps_running(fused.ipus[0], trace::Codelet::kUnary, Op::kRelu), 0u);
}

TEST(CompilerCnn, LarsTakesTwoNormsOfEachConvAndFcKernelOnItsOwnTiles) {
  // ResNet-50 has 53 convs (the stem, 16 bottleneck blocks of 3 and 4 projections) and one fc
  // kernel; LARS skips batch-norm gamma and beta and the fc bias (lars_skip_list of
  // graphcore/examples). So a step takes 2 x 54 = 108 norm reductions, each one SQUARE_ADD
  // reduction of the (half) tensor on its own tiles: 108 first stages reading half values in
  // the weight update and no separate square pass; none with SGD. With the MLPerf POD64-256
  // ReduceMany buffer of 216 bytes, 216 / 4 = 54 float norms share each op: 108 / 54 = 2
  // first stages, holding between them exactly the vertices of the 108 (each tile's share of
  // each tensor is reduced as before, only the compute sets are shared).
  const std::string root = std::string(IPUSIM_SOURCE_DIR);
  LoadedRun run = load_run(root + "/configs/runs/resnet50-pod16.yaml");
  const ModelDef model = load_model(run.run.model_file);
  const SystemSpec sys = ipusim::load_system(run.run.system_file).spec;
  ASSERT_EQ(run.run.reduce_many_buffer, 0u);
  struct Norms {
    std::size_t first_stages = 0;  // compute sets reducing half weights in the weight update
    std::uint64_t partials = 0;    // their vertex instances x inputs each
    std::size_t squares = 0;       // compute sets squaring anything
  };
  // Counted per execution: equal weight tensors are updated in one loop.
  const auto norms = [](const trace::IpuProgram& p) {
    Norms n;
    std::function<void(const Steps&, std::uint64_t)> walk = [&](const Steps& steps,
                                                                std::uint64_t times) {
      for (const trace::Step& s : steps) {
        if (s.kind == StepKind::kRepeat) walk(s.body, times * s.count);
        if (s.kind != StepKind::kCompute) continue;
        const trace::ComputeSet& cs = p.compute_sets[s.index];
        bool first = false;
        bool square = false;
        for (const trace::Vertex& v : cs.vertices) {
          square |= (v.codelet == trace::Codelet::kUnary || v.codelet == trace::Codelet::kMap) &&
                    v.params[trace::slot::kEltOp] == static_cast<std::int64_t>(Op::kSquare);
          if (v.codelet == trace::Codelet::kReduce &&
              s.pass_of(cs.provenance) == trace::Pass::kWeightUpdate &&
              v.params[trace::slot::kReduceIn] == static_cast<std::int64_t>(trace::DType::kHalf)) {
            first = true;
            n.partials += times * v.instances() *
                          static_cast<std::uint64_t>(v.params[trace::slot::kReduceInputs]);
          }
        }
        n.first_stages += first ? times : 0;
        n.squares += square ? times : 0;
      }
    };
    walk(p.steps, 1);
    return n;
  };
  std::size_t kernels = 0;
  for (const Layer& l : model.layers) kernels += l.op == graph::Op::kConv || l.op == graph::Op::kFc;
  EXPECT_EQ(kernels, 54u);
  const Norms one_each = norms(compile(model, run.run, sys).ipus[0]);
  EXPECT_EQ(one_each.first_stages, 108u);
  EXPECT_EQ(one_each.squares, 0u);
  run.run.reduce_many_buffer = 216;
  const Norms combined = norms(compile(model, run.run, sys).ipus[0]);
  EXPECT_EQ(combined.first_stages, 2u);
  EXPECT_EQ(combined.partials, one_each.partials);
  run.run.reduce_many_buffer = 4;  // one float norm per op: one op each again
  EXPECT_EQ(norms(compile(model, run.run, sys).ipus[0]).first_stages, 108u);
  run.run.reduce_many_buffer = 0;  // ReduceMany combines LARS's norms: refused with SGD
  run.run.optimiser = compiler::Optimiser::kSgd;
  EXPECT_EQ(norms(compile(model, run.run, sys).ipus[0]).first_stages, 0u);
}

TEST(CompilerLayout, StatisticsBroadcastGoesOnlyToTheTilesSharingEachChannel) {
  // After batch-norm statistics are reduced (and all-reduced), only the results travel: from
  // each channel block's first tile (c) to the others holding that block (4 + c, 8 + c,
  // 12 + c), 16 channels x 2 statistics as float = 128 B, and no second reduction.
  trace::IpuProgram program;
  const ChipSpec chip = testing::gc200_by_hand();  // the builder keeps a reference to it
  IpuBuilder b(chip, program, 0.6, DType::kHalf, true);
  const Layout l = grid(100, 64, 25, 16);
  Steps steps;
  b.broadcast(steps, l, Axis::kPositions, 2);
  EXPECT_EQ(count(steps, StepKind::kCompute), 0u);
  ASSERT_EQ(count(steps, StepKind::kExchange), 1u);
  EXPECT_EQ(program.exchanges.back().transfer_count(), 4u);
  const trace::Exchange ex = trace::expanded(program.exchanges.back());  // one record each
  ASSERT_EQ(ex.transfers.size(), 4u);
  for (const auto& t : ex.transfers) {
    EXPECT_EQ(t.bytes, 128u);
    EXPECT_LT(t.src.first, 4u);
    const auto dst = ex.destinations(t);
    ASSERT_EQ(dst.size(), 3u);
    for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(dst[i].first, t.src.first + 4 * (i + 1));
  }
}

}  // namespace
}  // namespace ipusim::compiler

namespace ipusim::compiler {
namespace {

TEST(CompilerLayout, TooFragmentedRearrangementKeepsEachTilesReceiveBytes) {
  // 600,000 half channels, one per tile, gathered onto tile 0: 599,999 pieces (tile 0 keeps
  // its own), more than a rearrangement lists one by one, so tile 0 receives its whole
  // 599,999 x 2 B from one source, the first tile that is not itself.
  const Layout from = grid(1, 600000, 1, 1), to = grid(1, 600000, 1, 600000);
  const trace::Exchange ex = rearrangement("r", from, to);
  EXPECT_TRUE(ex.moves.empty());
  ASSERT_EQ(ex.transfers.size(), 1u);
  EXPECT_EQ(ex.transfers[0].src, (trace::TileRange{1, 1}));
  EXPECT_EQ(ex.destinations(ex.transfers[0])[0], (trace::TileRange{0, 0}));
  EXPECT_EQ(ex.transfers[0].bytes, 1199998u);
  EXPECT_EQ(rearrangement_receive_bytes(from, to), 1199998u);
}

}  // namespace
}  // namespace ipusim::compiler

namespace ipusim::compiler {
namespace {

// The input stream of one micro-batch, in the body of the gradient-accumulation loop.
std::vector<const trace::Step*> host_steps(const trace::IpuProgram& p) {
  std::vector<const trace::Step*> out;
  for (const auto& s : p.steps)
    if (s.kind == StepKind::kRepeat)
      for (const auto& b : s.body)
        if (b.kind == StepKind::kHost) out.push_back(&b);
  return out;
}

TEST(CompilerIoTiles, WithoutIoTilesTheInputIsCopiedInlineFromStreamingMemory) {
  // resnet_tiny-pod16: micro-batch 8 x 3 KiB = 24,576 bytes per micro-batch. With no I/O
  // tiles (the default) it is prefetched into Streaming Memory in the background and copied
  // inline (blocking) onto the first conv's input tiles; both carry the whole micro-batch.
  const std::string dir = std::string(IPUSIM_SOURCE_DIR) + "/tests/data/workloads/";
  const LoadedRun run = load_run(dir + "resnet_tiny-pod16.yaml");
  EXPECT_EQ(run.run.io_tiles, 0u);
  const ModelDef model = load_model(run.run.model_file);
  const auto system = ipusim::load_system(run.run.system_file);
  const trace::Trace t = compile(model, run.run, system.spec);
  const auto hosts = host_steps(t.ipus[0]);
  ASSERT_EQ(hosts.size(), 2u);
  EXPECT_FALSE(hosts[0]->overlap);
  EXPECT_EQ(hosts[0]->memory, trace::HostMemory::kStreaming);
  EXPECT_TRUE(hosts[1]->overlap);
  EXPECT_EQ(hosts[1]->memory, trace::HostMemory::kHost);
  for (const auto* h : hosts) {
    EXPECT_GE(std::uint64_t{h->tiles.size()} * h->bytes, 24576u);
    EXPECT_LT(std::uint64_t{h->tiles.size()} * h->bytes, 24576u + h->tiles.size());
  }
}

TEST(CompilerIoTiles, IoTilesTakeTheInputAndLeaveTheRestForCompute) {
  // run.io_tiles = 128 on the 1,472-tile GC200: the input lands on tiles 1344..1471 in the
  // background (24,576 / 128 = 192 bytes each), every compute set and conv temporary stays on
  // tiles 0..1343, and one exchange moves the micro-batch from the I/O tiles to the compute
  // tiles (24,576 bytes, all of them from tiles >= 1344).
  const std::string dir = std::string(IPUSIM_SOURCE_DIR) + "/tests/data/workloads/";
  const LoadedRun run = load_run(dir + "resnet_tiny-pod16.yaml", {"run.io_tiles=128"});
  ASSERT_EQ(run.run.io_tiles, 128u);
  const ModelDef model = load_model(run.run.model_file);
  const auto system = ipusim::load_system(run.run.system_file);
  ASSERT_EQ(system.spec.chip.tiles, 1472u);
  const trace::Trace t = compile(model, run.run, system.spec);
  const auto& p = t.ipus[0];
  const auto hosts = host_steps(p);
  ASSERT_EQ(hosts.size(), 1u);
  EXPECT_TRUE(hosts[0]->overlap);
  EXPECT_EQ(hosts[0]->tiles.first, 1344u);
  EXPECT_EQ(hosts[0]->tiles.last, 1471u);
  EXPECT_EQ(hosts[0]->bytes, 192u);
  for (const auto& cs : p.compute_sets)
    for (const auto& v : trace::expanded(cs).vertices) EXPECT_LT(v.tiles.last, 1344u) << cs.name;
  std::uint64_t from_io = 0;
  for (const auto& packed : p.exchanges)
    for (const auto& tr : trace::expanded(packed).transfers) {
      if (tr.src.first >= 1344) from_io += std::uint64_t{tr.src.size()} * tr.bytes;
    }
  EXPECT_EQ(from_io, 24576u);
  // Too many I/O tiles is a clear error naming the key.
  const LoadedRun all = load_run(dir + "resnet_tiny-pod16.yaml", {"run.io_tiles=1472"});
  try {
    compile(model, all.run, system.spec);
    FAIL() << "expected an error";
  } catch (const ipusim::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("run.io_tiles"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("1472"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ipusim::compiler

namespace ipusim::compiler {
namespace {

// FLOPs of the AMP vertices of `p`'s compute steps, each step counted once (loop counts are
// not applied: the inference programs checked with it run each loop once); `each` is called on
// every step on the way.
std::uint64_t step_amp_flops(const ChipSpec& chip, const trace::IpuProgram& p,
                             const std::function<void(const trace::Step&)>& each = {}) {
  std::uint64_t flops = 0;
  const std::function<void(const std::vector<trace::Step>&)> walk =
      [&](const std::vector<trace::Step>& steps) {
        for (const auto& s : steps) {
          if (each) each(s);
          if (s.kind == StepKind::kCompute)
            for (const auto& v : trace::expanded(p.compute_sets[s.index]).vertices)
              if (v.codelet == trace::Codelet::kAmpConv1x1 ||
                  v.codelet == trace::Codelet::kAmpConvNx1 || v.codelet == trace::Codelet::kAmpSlic)
                flops += std::uint64_t{v.tiles.size()} * cost::vertex_cost(chip, v).flops;
          if (s.kind == StepKind::kRepeat) walk(s.body);
        }
      };
  walk(p.steps);
  return flops;
}

TEST(CompilerInference, OnlyTheForwardPassRunsAndOutputsGoBackToTheHost) {
  // The reduced ResNet in inference: the AMP vertices do exactly the forward convolutions and
  // the fc layer, whose MACs follow from the model file by hand (n x out_h x out_w x Cin x
  // Cout x k x k per conv, n x Cin x Cout for fc); no collective, no weight update; the class
  // scores (n x 10 half) go back to the host after the images came in.
  const std::string dir = std::string(IPUSIM_SOURCE_DIR) + "/tests/data/workloads/";
  const LoadedRun run =
      load_run(dir + "resnet_tiny-pod16.yaml",
               {"run.mode=inference", "run.gradient_accumulation=1", "run.optimiser=none",
                "run.recompute_checkpoints=none", "run.batchnorm_group=1"});
  ASSERT_TRUE(run.run.inference);
  const ModelDef model = load_model(run.run.model_file);
  const auto system = ipusim::load_system(run.run.system_file);
  const trace::Trace t = compile(model, run.run, system.spec);
  const std::uint64_t n = run.run.micro_batch;  // 8
  std::uint64_t macs = 0;
  std::map<std::string, std::uint64_t> chans, size;
  std::string previous;
  for (const Layer& l : model.layers) {
    const std::string in = l.input.empty() ? previous : l.input;
    const std::uint64_t cin = in.empty() ? model.channels : chans.at(in);
    const std::uint64_t hw = in.empty() ? model.height : size.at(in);
    previous = l.name;
    chans[l.name] = l.op == graph::Op::kConv || l.op == graph::Op::kFc ? l.out : cin;
    size[l.name] = l.op == graph::Op::kConv      ? (hw + l.stride - 1) / l.stride
                   : l.op == graph::Op::kAvgPool ? 1
                                                 : hw;
    if (l.op == graph::Op::kConv)
      macs += n * size[l.name] * size[l.name] * cin * l.out * l.kernel * l.kernel;
    if (l.op == graph::Op::kFc) macs += n * cin * l.out;
  }
  // Executed compute sets (two convs of one shape share theirs), each loop run once.
  const auto& p = t.ipus[0];
  const std::uint64_t amp_flops = step_amp_flops(system.spec.chip, p, [](const trace::Step& s) {
    EXPECT_NE(s.kind, StepKind::kCollective);
    if (s.kind == StepKind::kRepeat) EXPECT_EQ(s.count, 1u);
  });
  EXPECT_EQ(amp_flops, 2 * macs);
  const auto hosts = host_steps(p);
  ASSERT_EQ(hosts.size(), 3u);  // inline input copy, background prefetch, outputs
  EXPECT_EQ(hosts[2]->direction, trace::HostDirection::kFromIpu);
  EXPECT_GE(std::uint64_t{hosts[2]->tiles.size()} * hosts[2]->bytes, n * 10 * 2);
  EXPECT_LT(std::uint64_t{hosts[2]->tiles.size()} * hosts[2]->bytes,
            n * 10 * 2 + hosts[2]->tiles.size());
  for (const auto& tensor : p.tensors) {
    EXPECT_EQ(tensor.name.find("gradient"), std::string::npos) << tensor.name;
    EXPECT_EQ(tensor.name.find("momentum"), std::string::npos) << tensor.name;
  }
  // More than one batch per step is a training notion.
  try {
    const LoadedRun two = load_run(dir + "resnet_tiny-pod16.yaml",
                                   {"run.mode=inference", "run.optimiser=none",
                                    "run.recompute_checkpoints=none", "run.batchnorm_group=1"});
    compile(model, two.run, ipusim::load_system(two.run.system_file).spec);
    FAIL() << "expected an error";
  } catch (const ipusim::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "run.gradient_accumulation: inference runs one batch per replica per step: "
                  "expected 1, found 2"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace ipusim::compiler

namespace ipusim::compiler {
namespace {

TEST(CompilerInference, ATransformerRunsItsForwardPassOnceThroughThePipeline) {
  // The reduced BERT in inference over its 2 IPUs, heads tied to the embedding: 3 forward
  // stages (IPU 0's embedding, IPU 1's layer, IPU 0's layer and heads), so a batch of 1
  // micro-batch takes 1 + 2 cycles on each IPU, no collective and only the forward stage copy.
  // IPU 0 takes each micro-batch's packs in as its first stage starts (2 packs x 1536 B) and
  // sends one 32-bit token id per masked token back as its last ends (the graph's arg-max):
  // 2 packs x (20 masked tokens + 1 sequence per pack at most - 1) x 4 B = 160 B.
  const std::string dir = std::string(IPUSIM_SOURCE_DIR) + "/tests/data/workloads/";
  const LoadedRun run =
      load_run(dir + "bert_tiny-pod16.yaml",
               {"run.mode=inference", "run.gradient_accumulation=1", "run.optimiser=none"});
  const ModelDef model = load_model(run.run.model_file);
  const auto system = ipusim::load_system(run.run.system_file);
  const trace::Trace t = compile(model, run.run, system.spec);
  ASSERT_EQ(t.ipus.size(), 2u);
  ASSERT_EQ(t.global_exchanges.size(), 1u);
  EXPECT_EQ(t.global_exchanges[0].name, "stage_activations");
  std::uint64_t in = 0, out = 0;
  for (std::size_t ipu = 0; ipu < 2; ++ipu) {
    std::uint64_t cycles = 0;
    for (const auto& s : t.ipus[ipu].steps) {
      EXPECT_NE(s.kind, StepKind::kCollective);
      if (s.kind != StepKind::kRepeat) continue;
      cycles += s.count;
      for (const auto& b : s.body)
        if (b.kind == StepKind::kHost && !b.overlap) {
          EXPECT_EQ(ipu, 0u);
          (b.direction == trace::HostDirection::kToIpu ? in : out) +=
              std::uint64_t{b.tiles.size()} * b.bytes;
        }
    }
    EXPECT_EQ(cycles, 3u) << "IPU " << ipu;
    for (const auto& tensor : t.ipus[ipu].tensors)
      EXPECT_EQ(tensor.name.find("optimiser"), std::string::npos) << tensor.name;
  }
  EXPECT_GE(in, 2u * 1536);
  EXPECT_LT(in, 2u * 1536 + system.spec.chip.tiles);
  EXPECT_GE(out, 160u);
  EXPECT_LT(out, 160u + system.spec.chip.tiles);
}

TEST(CompilerInference, PhasedExecutionLoadsEachPhasesWeightsFromStreamingMemoryBeforeItRuns) {
  // The reduced BERT (hidden h = 256, FFN f = 1024, half) in inference with run.weights
  // streamed, over its 2 pipeline stages. IPU 1 holds one encoder layer: one phase, loaded
  // before its attention in each pipeline cycle. By hand, its weights are the attention's
  // QKV (3h^2) and output (h^2) matrices and 6h vector elements (QKV and output biases, layer
  // norm) and the FFN's two matrices (2hf) and f + h + 2h vector elements:
  // 4h^2 + 6h + 2hf + f + 3h = 789,760 elements = 1,579,520 B, spread over the 1,472 tiles
  // (1,074 B each, rounded up). IPU 0 loads three phases in order: the embeddings, its encoder
  // layer (the same bytes) and the heads. No weight is resident: each IPU holds one buffer of
  // its largest phase.
  const std::string dir = std::string(IPUSIM_SOURCE_DIR) + "/tests/data/workloads/";
  const std::vector<std::string> phased = {"run.mode=inference", "run.gradient_accumulation=1",
                                           "run.optimiser=none", "run.weights=streamed"};
  const LoadedRun run = load_run(dir + "bert_tiny-pod16.yaml", phased);
  const ModelDef model = load_model(run.run.model_file);
  const auto system = ipusim::load_system(run.run.system_file);
  const trace::Trace t = compile(model, run.run, system.spec);
  ASSERT_EQ(t.ipus.size(), 2u);
  const std::uint64_t h = 256, f = 1024, layer = (4 * h * h + 6 * h + 2 * h * f + f + 3 * h) * 2;
  ASSERT_EQ(layer, 1579520u);
  const std::uint64_t tiles = system.spec.chip.tiles;
  const auto loads = [](const trace::IpuProgram& p) {
    std::vector<std::uint64_t> out;
    for (const auto& s : p.steps)
      if (s.kind == StepKind::kRepeat)
        for (const auto& b : s.body)
          if (b.kind == StepKind::kHost && b.memory == trace::HostMemory::kStreaming &&
              b.provenance.pass != trace::Pass::kHostIo) {  // not the micro-batch's input
            EXPECT_EQ(b.direction, trace::HostDirection::kToIpu);
            EXPECT_FALSE(b.overlap);
            out.push_back(std::uint64_t{b.tiles.size()} * b.bytes);
          }
    return out;
  };
  const auto ipu1 = loads(t.ipus[1]);
  ASSERT_EQ(ipu1.size(), 1u);
  EXPECT_EQ(ipu1[0], ceil_div(layer, tiles) * tiles);
  const auto ipu0 = loads(t.ipus[0]);
  ASSERT_EQ(ipu0.size(), 3u);  // embeddings, the layer, the heads
  EXPECT_EQ(ipu0[1], ipu1[0]);
  for (std::size_t i = 0; i < 2; ++i) {
    const auto& phases = i == 0 ? ipu0 : ipu1;
    const std::uint64_t largest = *std::max_element(phases.begin(), phases.end());
    std::uint64_t weights = 0;
    for (const auto& tensor : t.ipus[i].tensors)
      if (tensor.kind == trace::TensorKind::kWeight) {
        EXPECT_EQ(tensor.name, "weights/streamed_buffer");
        weights += std::uint64_t{tensor.tiles.size()} * tensor.bytes_per_tile;
      }
    // Both rounded up to whole bytes per tile.
    EXPECT_GE(weights + tiles, largest) << "IPU " << i;
    EXPECT_LE(weights, largest + tiles) << "IPU " << i;
  }
  // Phased execution is modelled for transformers, and in training not in a pipeline
  // (tests/unit/tensor_parallel_test.cpp: phased training).
  const auto error = [&](const std::string& file, const std::vector<std::string>& sets) {
    return config_error_of([&] { (void)compile_run(dir + file, sets); });
  };
  EXPECT_NE(error("bert_tiny-pod16.yaml", {"run.weights=streamed"})
                .find("run.weights: streamed (phased training) runs every layer on each IPU of "
                      "the replica in turn, not in a pipeline: it needs run.ipus_per_replica 1"),
            std::string::npos);
  EXPECT_NE(error("bert_tiny-pod16.yaml", {"run.weights=streamed", "run.ipus_per_replica=1",
                                           "run.replicas=16", "run.pipeline_placement=ipu0=2,2"})
                .find("keeps the optimiser state in Streaming Memory with the weights: set "
                      "run.optimiser_state streaming"),
            std::string::npos);
  EXPECT_NE(error("resnet_tiny-pod16.yaml", {"run.mode=inference", "run.gradient_accumulation=1",
                                             "run.optimiser=none", "run.recompute_checkpoints=none",
                                             "run.batchnorm_group=1", "run.weights=streamed"})
                .find("run.weights: streamed (phased execution) is lowered for transformer model "
                      "files only"),
            std::string::npos);
}

TEST(CompilerInference, TemporariesAreThoseOfTheConvsThatRunNotOfLayoutOnlyPlans) {
  // A span-head model's embedding table is laid out as the weights of a tokens x vocabulary
  // matmul that never runs (there is no masked-LM head); with many tokens its plan's buffers
  // are the largest of the model. The matmul temporaries an IPU holds are the largest
  // buffers of the convs it runs: exactly the largest plan of those compile() reports.
  const std::string dir = ::testing::TempDir();
  std::ofstream(dir + "/span.yaml") << "model:\n  name: span\n  family: transformer\n"
                                       "  dtype: half\n  layers: 1\n  hidden: 256\n"
                                       "  heads: 4\n  ffn: 1024\n  vocabulary: 30522\n"
                                       "  sequence: 384\n  head: span\n";
  const std::string src = std::string(IPUSIM_SOURCE_DIR) + "/tests/data/workloads/";
  LoadedRun run = load_run(src + "bert_tiny-pod16.yaml",
                           {"run.mode=inference", "run.gradient_accumulation=1",
                            "run.optimiser=none", "run.micro_batch=16", "run.ipus_per_replica=1",
                            "run.replicas=16", "run.pipeline_placement=ipu0=1,1",
                            "run.embedding_serialisation=1", "run.sequences_per_pack=1"});
  run.run.model_file = dir + "/span.yaml";
  const ModelDef model = load_model(run.run.model_file);
  const auto system = ipusim::load_system(run.run.system_file);
  std::vector<PlannedConv> plans;
  const trace::Trace t = compile(model, run.run, system.spec, &plans);
  std::uint64_t largest = 0;
  for (const auto& p : plans) largest = std::max(largest, p.plan.bytes_per_tile.count);
  ASSERT_GT(largest, 0u);
  std::uint64_t temporaries = 0;
  for (const auto& tensor : t.ipus[0].tensors)
    if (tensor.name == "conv_temporaries") temporaries = tensor.bytes_per_tile;
  EXPECT_EQ(temporaries, largest);
  // The table's own plan is larger: it would have been counted had it run.
  plan::ConvArgs table;
  table.height = 16 * 384;
  table.in_chans = 256;
  table.out_chans = 30522;
  table.dtype = trace::DType::kHalf;
  EXPECT_GT(plan::plan_conv(system.spec.chip, table,
                            static_cast<std::uint64_t>(0.25 * system.spec.chip.tile_memory.count))
                .bytes_per_tile.count,
            largest);
}

}  // namespace
}  // namespace ipusim::compiler

namespace ipusim::compiler {
namespace {

// The YAML block of docs/models.md's worked example.
std::string docs_example(const std::string& marker) {
  std::ifstream in(std::string(IPUSIM_SOURCE_DIR) + "/docs/models.md");
  std::stringstream all;
  all << in.rdbuf();
  const std::string doc = all.str();
  const auto at = doc.find("<!-- example: " + marker);
  if (at == std::string::npos) return "";
  const auto begin = doc.find("```yaml\n", at);
  const auto end = doc.find("```\n", begin + 8);
  return doc.substr(begin + 8, end - begin - 8);
}

TEST(ModelFiles, TheWorkedResNet18HasItsPublishedParameterCount) {
  // docs/models.md's ResNet-18, by hand: stem 7x7x3x64 + bn 128; per stage (Cin -> C) two
  // basic blocks of two 3x3 convs and two batch norms, plus a 1x1 projection and its batch
  // norm where Cin != C; fc 512 x 1000 + 1000. In all 11,689,512 (torchvision's count).
  const std::string yaml = docs_example("resnet18");
  ASSERT_FALSE(yaml.empty());
  const std::string file = ::testing::TempDir() + "/resnet18.yaml";
  std::ofstream(file) << yaml;
  const ModelDef m = load_model(file);
  EXPECT_EQ(m.layers.size(), 4u + 7 * 2 + (9 + 7) * 3 + 3);  // stem, stage 1, stages 2-4, head
  std::uint64_t by_hand = 7 * 7 * 3 * 64 + 2 * 64;
  const std::uint64_t stages[4][2] = {{64, 64}, {64, 128}, {128, 256}, {256, 512}};
  for (const auto& [cin, c] : stages) {
    by_hand += 9 * cin * c + 9 * c * c + 4 * c + 9 * c * c + 9 * c * c + 4 * c;
    if (cin != c) by_hand += cin * c + 2 * c;
  }
  by_hand += 512 * 1000 + 1000;
  EXPECT_EQ(by_hand, 11689512u);
  EXPECT_EQ(parameter_count(m), by_hand);
  // models/resnet18.yaml is the same block after its two comment lines.
  std::ifstream in(std::string(IPUSIM_SOURCE_DIR) + "/models/resnet18.yaml");
  std::stringstream content;
  content << in.rdbuf();
  const std::string text = content.str();
  const auto body = text.find("model:");
  ASSERT_NE(body, std::string::npos);
  EXPECT_EQ(text.substr(body), yaml);
  // Repeated blocks name their layers by iteration and wire "{in}" to the iteration's input.
  const auto find = [&](const std::string& name) {
    for (const auto& l : m.layers)
      if (l.name == name) return &l;
    return static_cast<const Layer*>(nullptr);
  };
  ASSERT_NE(find("b1/1/add"), nullptr);
  EXPECT_EQ(find("b1/1/add")->other, "b1/0/relu");
  EXPECT_EQ(find("b1/0/add")->other, "pool1");
  EXPECT_EQ(find("b1/1/conv1")->input, "b1/0/relu");
  EXPECT_EQ(find("b3/1/add")->input, "b3/1/bn2");
}

TEST(ModelFiles, NamesThatCannotGoIntoATraceAreErrorsWhereTheyAreWritten) {
  // A model or layer name with a space would make a trace no reader accepts: refused when
  // the model file is read, naming file:line:column and the key.
  const std::string file = ::testing::TempDir() + "/names.yaml";
  const std::string model =
      "model: {name: \"my net\", family: cnn, input: {height: 8, width: 8, channels: 3}, "
      "classes: 2}\nlayers:\n  - {name: a, op: conv, out: 4}\n";
  std::ofstream(file) << model;
  try {
    load_model(file);
    FAIL() << "expected an error";
  } catch (const ipusim::ConfigError& e) {
    EXPECT_NE(
        std::string(e.what()).find(file + ":1:15: model.name: expected a name of 1..4096 "
                                          "characters from [A-Za-z0-9_.:/-] (it goes into the "
                                          "trace), found \"my net\""),
        std::string::npos)
        << e.what();
  }
  std::ofstream(file) << "model: {name: m, family: cnn, input: {height: 8, width: 8, channels: "
                         "3}, classes: 2}\nlayers:\n  - {name: \"conv 1\", op: conv, out: 4}\n";
  try {
    load_model(file);
    FAIL() << "expected an error";
  } catch (const ipusim::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(":3:12: layers[0].name: expected a name"),
              std::string::npos)
        << e.what();
  }
}

TEST(ModelFiles, ShapeErrorsNameTheLayer) {
  const std::string dir = ::testing::TempDir();
  const std::string head =
      "model: {name: m, family: cnn, input: {height: 8, width: 8, channels: 3}, classes: 2}\n";
  auto compile_model = [&](const std::string& layers) {
    const std::string file = dir + "/shape.yaml";
    std::ofstream(file) << head << "layers:\n" << layers;
    return parameter_count(load_model(file));
  };
  try {
    compile_model(
        "  - {name: a, op: conv, out: 4}\n  - {name: b, op: conv, out: 8}\n"
        "  - {name: s, op: add, input: b, other: a}\n");
    FAIL() << "expected an error";
  } catch (const ipusim::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "shape.yaml:5:5: layer 's': add of 'b' (8x8x8) and 'a' (8x8x4): the shapes "
                  "must be equal"),
              std::string::npos)
        << e.what();
  }
  try {
    compile_model("  - {name: a, op: conv, out: 4}\n  - {name: f, op: fc, out: 2}\n");
    FAIL() << "expected an error";
  } catch (const ipusim::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "layer 'f': fc reads a 1x1 input (pool it first, e.g. with avgpool), "
                  "found 8x8x4 from 'a'"),
              std::string::npos)
        << e.what();
  }
  // A repeated block's errors say which iteration; "{in}" outside a block is an error.
  try {
    compile_model(
        "  - {name: a, op: conv, out: 4}\n  - repeat: 2\n    as: \"r/{i}\"\n    layers:\n"
        "      - {name: c, op: conv, out: 4, kernal: 3}\n");
    FAIL() << "expected an error";
  } catch (const ipusim::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("shape.yaml:7:37: "), std::string::npos)
        << e.what();  // the key in the block
    EXPECT_NE(std::string(e.what()).find("layers[1].layers[0] (iteration 0).kernal: unknown key"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("kernel"), std::string::npos) << e.what();  // did you mean
  }
  try {
    compile_model("  - {name: a, op: conv, out: 4}\n  - {name: s, op: add, other: \"{in}\"}\n");
    FAIL() << "expected an error";
  } catch (const ipusim::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("used outside a repeated block"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace ipusim::compiler

namespace ipusim::compiler {
namespace {

// A reduced GPT (2 decoder layers, hidden 256, 4 heads, sequence 128) with `extra` model keys
// and `run_extra` run keys, on one IPU of a POD16 (one replica, one micro-batch of 2 sequences
// per step); compiled.
trace::Trace compile_gpt_tiny(const std::string& name, const std::string& extra,
                              const std::string& run_extra = "") {
  const std::string dir = ::testing::TempDir();
  std::ofstream(dir + "/" + name + ".yaml")
      << "model:\n  name: GPT-tiny\n  family: transformer\n  layers: 2\n  hidden: 256\n"
         "  heads: 4\n  ffn: 1024\n  vocabulary: 1000\n  pad_vocabulary_to: 16\n"
         "  sequence: 128\n  token_types: 0\n  norm: pre\n  head: lm\n"
      << extra;
  std::ofstream(dir + "/" + name + "-run.yaml")
      << "run:\n  name: " << name << "\n  model: " << name
      << ".yaml\n  system: " << IPUSIM_SOURCE_DIR << "/configs/systems/pod16.yaml\n"
      << "  replicas: 1\n  ipus_per_replica: 1\n  micro_batch: 2\n  gradient_accumulation: 1\n"
         "  precision: \"16.16\"\n  optimiser: adamw\n  optimiser_state: on_chip\n"
         "  available_memory_proportion: \"0.3\"\n  pipeline_placement: \"ipu0=2,2\"\n"
         "  embedding_serialisation: 2\n  input_bytes_per_sample: 1KiB\n"
         "  sample_unit: sequences\n"
      << run_extra;
  const LoadedRun run = load_run(dir + "/" + name + "-run.yaml");
  const ModelDef model = load_model(run.run.model_file);
  const auto system = ipusim::load_system(run.run.system_file);
  return compile(model, run.run, system.spec);
}

// Elements processed by unfused (one-op) elementwise `op`s over a program's execution: each
// such vertex's per-tile element count on each of its tiles, times the repeats around it.
std::uint64_t unfused_elements(const trace::IpuProgram& p, const Steps& steps, Op op,
                               std::uint64_t times) {
  namespace sl = trace::slot;
  std::uint64_t n = 0;
  for (const auto& s : steps) {
    if (s.kind == StepKind::kRepeat) n += unfused_elements(p, s.body, op, times * s.count);
    if (s.kind != StepKind::kCompute) continue;
    for (const auto& v : p.compute_sets.at(s.index).vertices)
      if ((v.codelet == trace::Codelet::kBinary || v.codelet == trace::Codelet::kUnary) &&
          v.params[sl::kEltOp] == static_cast<std::int64_t>(op))
        n += times * v.instances() * static_cast<std::uint64_t>(v.params[sl::kEltN]);
  }
  return n;
}

TEST(CompilerDecoder, TheScoresAreScaledAndTheMaskAddsOneAddPerScore) {
  // By hand, lowered op by op (fuse_elementwise "no", as PopART lowers): the mask is one add
  // per score before the softmax, on the whole score matrix (Poplar computes it all):
  // sequence x sequence x heads x micro-batch = 128 x 128 x 4 x 2 = 131,072 adds per
  // attention sub-layer forward, nothing in the backward pass. The step runs the forward pass
  // and (pipeline recomputation) the forward again, over 2 layers: the mask's compute set runs
  // 2 x 2 = 4 times, and nothing else changes. Either way the scores are scaled by 1/sqrt(64)
  // first, one multiply per score in each forward (4) and one per score gradient (2).
  const std::string op_by_op = "  fuse_elementwise: \"no\"\n";
  const trace::Trace plain =
      compile_gpt_tiny("gpt_plain", "  attention_dropout: false\n", op_by_op);
  const trace::Trace causal =
      compile_gpt_tiny("gpt_causal", "  attention_dropout: false\n  causal: true\n", op_by_op);
  const trace::Trace padded = compile_gpt_tiny(
      "gpt_padded", "  attention_dropout: false\n  attention_mask: true\n", op_by_op);
  ASSERT_EQ(plain.ipus.size(), 1u);
  ASSERT_EQ(causal.ipus.size(), 1u);
  const trace::IpuProgram& c = causal.ipus[0];
  const trace::IpuProgram& u = plain.ipus[0];
  ASSERT_EQ(c.compute_sets.size(), u.compute_sets.size() + 1);  // the mask's, and no other
  std::set<std::string> plain_names;
  for (const auto& cs : u.compute_sets) plain_names.insert(cs.name);
  const trace::ComputeSet* mask = nullptr;
  for (const auto& cs : c.compute_sets)
    if (!plain_names.count(cs.name)) mask = &cs;
  ASSERT_NE(mask, nullptr);
  namespace sl = trace::slot;
  std::uint64_t held = 0;  // elements the mask's vertices add, on all their tiles
  for (const auto& v : mask->vertices) {
    EXPECT_EQ(v.codelet, trace::Codelet::kBinary);
    EXPECT_EQ(v.params[sl::kEltOp], static_cast<std::int64_t>(Op::kAdd));
    held += v.instances() * static_cast<std::uint64_t>(v.params[sl::kEltN]);
  }
  // The add covers the score tensor's tile blocks: its 131,072 elements, and no more than the
  // rounding of the planner's split into equal blocks (here 131,712: 640 elements, 0.5%, of
  // block padding, charged as every tile is charged for its block).
  const std::uint64_t scores = 128u * 128 * 4 * 2;
  EXPECT_GE(held, scores);
  EXPECT_LT(held, scores + scores / 100);
  // And it is the whole difference in elementwise adds over the step: 4 executions; a
  // padding mask costs what the causal one does.
  const std::uint64_t with = unfused_elements(c, c.steps, Op::kAdd, 1);
  const std::uint64_t without = unfused_elements(u, u.steps, Op::kAdd, 1);
  EXPECT_EQ(with - without, 4 * held);
  EXPECT_EQ(unfused_elements(padded.ipus[0], padded.ipus[0].steps, Op::kAdd, 1), with);
  // The scale: count the executed multiplies over a tensor the size of the scores (with no
  // attention dropout, nothing else of that size multiplies). Per layer: the scale in the forward
  // and the recompute (2), the softmax gradient's two multiplies y g and y (g - sum) (2) and the
  // scale's gradient (1): 5 per layer, 10 in all.
  std::uint64_t score_muls = 0;
  std::function<void(const Steps&, std::uint64_t)> count = [&](const Steps& steps,
                                                               std::uint64_t times) {
    for (const auto& s : steps) {
      if (s.kind == StepKind::kRepeat) count(s.body, times * s.count);
      if (s.kind != StepKind::kCompute) continue;
      std::uint64_t n = 0;
      bool mul = false;
      for (const auto& v : u.compute_sets.at(s.index).vertices) {
        if (v.codelet != trace::Codelet::kBinary && v.codelet != trace::Codelet::kUnary) continue;
        mul = mul || v.params[sl::kEltOp] == static_cast<std::int64_t>(Op::kMul);
        n += v.instances() * static_cast<std::uint64_t>(v.params[sl::kEltN]);
      }
      if (mul && n >= scores && n < scores + scores / 100) score_muls += times;
    }
  };
  count(u.steps, 1);
  EXPECT_EQ(score_muls, 10u);
}

TEST(CompilerDecoder, AHeadCountThatDoesNotDivideTheWidthNamesTheLayerAndKey) {
  const std::string file = ::testing::TempDir() + "/bad_heads.yaml";
  std::ofstream(file) << "model:\n  name: m\n  family: transformer\n  layers: 2\n"
                         "  hidden: 1000\n  heads: 16\n  ffn: 4000\n  vocabulary: 100\n"
                         "  sequence: 64\n  head: lm\n";
  try {
    load_model(file);
    FAIL() << "expected an error";
  } catch (const ipusim::ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("bad_heads.yaml:6:"), std::string::npos) << what;  // the heads line
    EXPECT_NE(what.find("layer 'attention': model.heads (16) must divide model.hidden (1000)"),
              std::string::npos)
        << what;
  }
  // Unknown choices get a "did you mean".
  std::ofstream(file) << "model:\n  name: m\n  family: transformer\n  layers: 2\n"
                         "  hidden: 64\n  heads: 4\n  ffn: 256\n  vocabulary: 100\n"
                         "  sequence: 64\n  head: lm\n  norm: prenorm\n";
  try {
    load_model(file);
    FAIL() << "expected an error";
  } catch (const ipusim::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("model.norm: expected post or pre, found \"prenorm\""),
              std::string::npos)
        << e.what();
  }
}

TEST(CompilerDecoder, Gpt2MediumHasItsPublishedParameterCount) {
  // GPT-2 medium by hand (L = 24, H = 1024, F = 4096, V = 50,257, context P = 1024):
  //   token embedding V x H = 51,463,168 (tied to the LM head: counted once)
  //   position embedding P x H = 1,048,576
  //   per layer: LN 2H = 2,048; QKV 3H x H + 3H = 3,148,800; projection H x H + H = 1,049,600;
  //     LN 2H = 2,048; FFN in H x F + F = 4,198,400; FFN out F x H + H = 4,195,328;
  //     in all 12,596,224, x 24 = 302,309,376
  //   final LN 2H = 2,048
  // total 354,823,168 (the 354.8 M of the released model). The stored table's 15 padding rows
  // (50,272 = 16 x 3,142) are not parameters.
  const ModelDef m = load_model(std::string(IPUSIM_SOURCE_DIR) + "/models/gpt2_medium.yaml");
  const std::uint64_t h = 1024, f = 4096, v = 50257, p = 1024;
  const std::uint64_t layer =
      2 * h + (3 * h * h + 3 * h) + (h * h + h) + 2 * h + (h * f + f) + (f * h + h);
  EXPECT_EQ(layer, 12596224u);
  const std::uint64_t by_hand = v * h + p * h + 24 * layer + 2 * h;
  EXPECT_EQ(by_hand, 354823168u);
  EXPECT_EQ(parameter_count(m), by_hand);
  EXPECT_EQ(m.padded_vocabulary(), 50272u);
  // GPT-2 XL likewise: H = 1600, F = 6400, 48 layers: 1,557,611,200.
  const ModelDef xl = load_model(std::string(IPUSIM_SOURCE_DIR) + "/models/gpt2_xl.yaml");
  const std::uint64_t hx = 1600, fx = 6400;
  const std::uint64_t layer_xl = 4 * hx + 4 * hx * hx + 4 * hx + 2 * hx * fx + fx + hx;
  EXPECT_EQ(parameter_count(xl), v * hx + p * hx + 48 * layer_xl + 2 * hx);
  EXPECT_EQ(parameter_count(xl), 1557611200u);
}

TEST(CompilerVit, VitB16HasItsPublishedParameterCount) {
  // ViT-B/16 by hand (L = 12, H = 768, F = 3072, 16 x 16 x 3 patches of a 224 x 224 image,
  // 1,000 classes):
  //   patch embedding 768 x H + H = 590,592; class token H; positions 197 x H = 151,296
  //   per layer: LN 2H; QKV 3H x H + 3H; projection H x H + H; LN 2H; FFN in H x F + F;
  //     FFN out F x H + H: 7,087,872, x 12 = 85,054,464
  //   final LN 2H = 1,536; classifier H x 1000 + 1000 = 769,000
  // total 86,567,656 (the 86.6 M of Dosovitskiy et al., table 1).
  const ModelDef m = load_model(std::string(IPUSIM_SOURCE_DIR) + "/models/vit_b16.yaml");
  const std::uint64_t h = 768, f = 3072;
  const std::uint64_t layer =
      2 * h + (3 * h * h + 3 * h) + (h * h + h) + 2 * h + (h * f + f) + (f * h + h);
  EXPECT_EQ(layer, 7087872u);
  const std::uint64_t by_hand =
      (16 * 16 * 3 * h + h) + h + 197 * h + 12 * layer + 2 * h + (h * 1000 + 1000);
  EXPECT_EQ(by_hand, 86567656u);
  EXPECT_EQ(parameter_count(m), by_hand);
  EXPECT_EQ(m.sequence, 197u);  // 14 x 14 patches and the class token
  EXPECT_EQ(m.token_types, 0u);
}

bool has_layer(const trace::IpuProgram& p, const std::string& layer) {
  for (const auto& cs : p.compute_sets)
    for (const auto& l : cs.provenance.layers)
      if (l == layer) return true;
  return false;
}

TEST(CompilerVit, ClassifierSitsOnTheLastStageAndThePipelineRingIsOpen) {
  // vit_tiny: 32 x 32 images in 8 x 8 patches, 2 layers on a 2-IPU pipeline.
  const trace::Trace t =
      compile_run(std::string(IPUSIM_SOURCE_DIR) + "/tests/data/workloads/vit_tiny-pod16.yaml");
  ASSERT_EQ(t.ipus.size(), 2u);
  // The patch embedding on IPU 0, the classifier on IPU 1 (after the last layer), and no
  // stage boundary back from IPU 1 to IPU 0: one copy each way, 0 -> 1 (activations) and
  // 1 -> 0 (gradients), merged into the one inter-IPU copy of every pipeline cycle.
  EXPECT_TRUE(has_layer(t.ipus[0], "embedding"));
  EXPECT_FALSE(has_layer(t.ipus[1], "embedding"));
  EXPECT_TRUE(has_layer(t.ipus[1], "heads"));
  EXPECT_FALSE(has_layer(t.ipus[0], "heads"));
  ASSERT_EQ(t.global_exchanges.size(), 1u);
  const auto& copies = t.global_exchanges[0].copies;
  ASSERT_EQ(copies.size(), 2u);
  EXPECT_EQ(copies[0].src, 0u);
  EXPECT_EQ(copies[0].dst, 1u);
  // The stage boundary carries micro-batch x (16 patches + class token) x hidden halves.
  EXPECT_EQ(copies[0].bytes, 8u * 17 * 192 * 2);
  EXPECT_EQ(copies[1].src, 1u);
  EXPECT_EQ(copies[1].dst, 0u);
}

TEST(CompilerSquad, SpanHeadSitsOnTheLastStageWithItsParameters) {
  // BERT-Base for SQuAD by hand: embeddings (30,522 + 512 positions + 2 token types) x 768 +
  // their layer norm 1,536 = 23,837,184; a layer's attention 4 x 768^2 + 4 x 768 + 1,536 =
  // 2,363,904 and FFN 2 x 768 x 3,072 + 768 + 3,072 + 1,536 = 4,723,968, twelve layers
  // 85,054,464; the span head 768 x 2 + 2 = 1,538: 108,893,186 (BertForQuestionAnswering
  // without the unused pooler).
  const ModelDef m = load_model(std::string(IPUSIM_SOURCE_DIR) + "/models/bert_base_squad.yaml");
  EXPECT_EQ(parameter_count(m), 108893186u);
  EXPECT_TRUE(m.span_head && m.head_on_last_ipu());
  // squad_base_384: the embeddings alone on IPU 0, the head after the last layer on IPU 3; the
  // pipeline is a line: activations 0 -> 1 -> 2 -> 3, gradients back, nothing from 3 to 0.
  const trace::Trace t =
      compile_run(std::string(IPUSIM_SOURCE_DIR) + "/configs/runs/bert-base-squad-pod16.yaml");
  ASSERT_EQ(t.ipus.size(), 4u);
  EXPECT_TRUE(has_layer(t.ipus[0], "embedding"));
  EXPECT_TRUE(has_layer(t.ipus[3], "heads"));
  for (std::uint32_t i = 0; i < 3; ++i) EXPECT_FALSE(has_layer(t.ipus[i], "heads")) << i;
  ASSERT_EQ(t.global_exchanges.size(), 1u);
  const auto& copies = t.global_exchanges[0].copies;
  ASSERT_EQ(copies.size(), 6u);
  for (const auto& c : copies) {
    EXPECT_EQ(c.bytes, 1u * 384 * 768 * 2);  // micro-batch 1 x 384 tokens x 768 halves
    EXPECT_FALSE(c.src == 3 && c.dst == 0);
  }
  // A span head scores every token: masked tokens are an error.
  const std::string file = ::testing::TempDir() + "/span_masked.yaml";
  std::ofstream(file) << "model:\n  name: s\n  family: transformer\n  layers: 1\n  hidden: 8\n"
                         "  heads: 2\n  ffn: 16\n  vocabulary: 10\n  sequence: 4\n"
                         "  masked_tokens: 2\n  head: span\n";
  try {
    load_model(file);
    FAIL() << "expected an error";
  } catch (const ipusim::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("model.masked_tokens: a span head scores every token"),
              std::string::npos)
        << e.what();
  }
}

TEST(CompilerPipeline, CyclesFollowPopartsStagesWithPartialFillAndFlush) {
  // vit_tiny: a classifier on a 2-IPU pipeline, so the loss stage is IPU 1's (L = 1): IPU 0's
  // forward is stage 0, IPU 1's forward and backward stage 1, IPU 0's backward stage 2 (PopART:
  // the backward of forward stage s is 2L - s). With GA micro-batches a stage runs GA cycles
  // from its number, so a step is GA + 2 cycles: IPU 0 runs its forward alone in cycles 0 and
  // 1, both stages in cycles 2 .. GA - 1, its backward alone in cycles GA and GA + 1; IPU 1 idles
  // (taking part in the cycle's copy) in cycle 0, runs its stage in 1 .. GA, idles in GA + 1.
  const trace::Trace t =
      compile_run(std::string(IPUSIM_SOURCE_DIR) + "/tests/data/workloads/vit_tiny-pod16.yaml");
  const LoadedRun run =
      load_run(std::string(IPUSIM_SOURCE_DIR) + "/tests/data/workloads/vit_tiny-pod16.yaml");
  const std::uint64_t ga = run.run.gradient_accumulation;
  ASSERT_GE(ga, 3u);
  const auto loops = ipusim::testing::pipeline_loop_counts;
  // IPU 0: [0, 2) forward, [2, GA) both, [GA, GA + 2) backward.
  EXPECT_EQ(loops(t.ipus[0]), (std::vector<std::uint64_t>{2, ga - 2, 2}));
  // IPU 1: [0, 1) idle, [1, GA + 1) its one stage, [GA + 1, GA + 2) idle.
  EXPECT_EQ(loops(t.ipus[1]), (std::vector<std::uint64_t>{1, ga, 1}));

  // bert_tiny: tied heads on IPU 0 of a 2-IPU pipeline (GA 4), so the loss stage is IPU 0's
  // last layers and heads (L = 2): IPU 0 runs stages 0 (embedding), 2 (loss) and 4 (embedding
  // backward), IPU 1 stages 1 and 3; GA + 4 = 8 cycles. IPU 0: [0, 2) stage 0, [2, 4) stages
  // 0 and 2, [4, 6) stages 2 and 4, [6, 8) stage 4. IPU 1: [0, 1) idle, [1, 3) stage 1,
  // [3, 5) stages 1 and 3, [5, 7) stage 3, [7, 8) idle.
  const trace::Trace bert =
      compile_run(std::string(IPUSIM_SOURCE_DIR) + "/tests/data/workloads/bert_tiny-pod16.yaml");
  EXPECT_EQ(loops(bert.ipus[0]), (std::vector<std::uint64_t>{2, 2, 2, 2}));
  EXPECT_EQ(loops(bert.ipus[1]), (std::vector<std::uint64_t>{1, 2, 2, 2, 1}));
}

TEST(CompilerPipeline, GradientClippingSumsEachIpusNormsOnIpuZeroAndSendsTheFactorBack) {
  // PopART's ClipWeightGradientsByNorm: one norm (a float) per weight tensor, copied to IPU 0
  // and summed there; the clip factor (a float) copied back to every other IPU. bert_tiny's
  // IPU 1 holds one attention sub-layer (the QKV and output weights, the QKV and output biases,
  // layer-norm gamma and beta: 6 tensors; 8 with Q, K and V split) and one FFN sub-layer (2
  // weights, 2 biases, gamma and beta: 6).
  const std::string dir = std::string(IPUSIM_SOURCE_DIR) + "/tests/data/workloads/";
  const LoadedRun run =
      load_run(dir + "bert_tiny-pod16.yaml", {"run.gradient_clipping=global_norm"});
  ASSERT_TRUE(run.run.clip_gradients);
  const ModelDef model = load_model(run.run.model_file);
  const trace::Trace t = compile(model, run.run, ipusim::load_system(run.run.system_file).spec);
  ASSERT_EQ(t.global_exchanges.size(), 3u);  // the pipeline's copy, the norms, the factor
  const auto& norms = t.global_exchanges[1];
  const auto& factor = t.global_exchanges[2];
  EXPECT_EQ(norms.name, "clip_norms");
  ASSERT_EQ(norms.copies.size(), 1u);
  EXPECT_EQ(norms.copies[0].src, 1u);
  EXPECT_EQ(norms.copies[0].dst, 0u);
  EXPECT_EQ(norms.copies[0].bytes, (6u + 6u) * 4);
  ASSERT_EQ(factor.copies.size(), 1u);
  EXPECT_EQ(factor.copies[0].src, 0u);
  EXPECT_EQ(factor.copies[0].dst, 1u);
  EXPECT_EQ(factor.copies[0].bytes, 4u);
  // Each IPU takes part in both once a step, after the pipeline loop: norms, then factor.
  for (const auto& p : t.ipus) {
    std::vector<std::uint32_t> seen;
    for (const auto& s : p.steps)
      if (s.kind == StepKind::kGlobalExchange) seen.push_back(s.index);
    EXPECT_EQ(seen, (std::vector<std::uint32_t>{1, 2})) << "IPU " << p.ipu;
  }
  const LoadedRun split = load_run(dir + "bert_tiny-pod16.yaml",
                                   {"run.gradient_clipping=global_norm", "run.split_qkv=yes"});
  EXPECT_EQ(compile(model, split.run, ipusim::load_system(split.run.system_file).spec)
                .global_exchanges[1]
                .copies[0]
                .bytes,
            (8u + 6u) * 4);
  // Without the key, no clipping and only the pipeline's copy.
  const LoadedRun plain = load_run(dir + "bert_tiny-pod16.yaml");
  EXPECT_EQ(compile(model, plain.run, ipusim::load_system(plain.run.system_file).spec)
                .global_exchanges.size(),
            1u);
  // A CNN's clipping: tests/unit/cnn_pipeline_test.cpp.
}

// Executions per step of IPU `p`'s weight-update compute sets whose names start with
// `prefix` and end with `suffix` (loops counted).
std::uint64_t update_executions(const trace::IpuProgram& p, const std::string& prefix,
                                const std::string& suffix = "") {
  std::function<std::uint64_t(const Steps&)> count = [&](const Steps& steps) {
    std::uint64_t n = 0;
    for (const auto& s : steps) {
      if (s.kind == StepKind::kRepeat) n += s.count * count(s.body);
      if (s.kind != StepKind::kCompute) continue;
      const auto& cs = p.compute_sets[s.index];
      if (cs.provenance.pass == trace::Pass::kWeightUpdate && cs.name.starts_with(prefix) &&
          cs.name.ends_with(suffix))
        ++n;
    }
    return n;
  };
  return count(p.steps);
}

TEST(CompilerPipeline, LambTakesTwoNormsOfEachWeightTensorAndClippingOneMore) {
  // LAMB (PopART: two LambSquareOp per weight) reduces each weight tensor twice on its own
  // tiles, each one SQUARE_ADD reduction to one value (no square pass of its own); clipping
  // adds one ReduceSumSquare per tensor, the same reduction. bert_tiny's IPU 1 holds 6 + 6
  // weight tensors (see above); IPU 0 the same 12, the 2 embedding-table slices, the position
  // and token-type tables (2), the embeddings' layer-norm gamma and beta (2) and the heads'
  // dense weight and 4 vectors: 23. Counted: the norms' first (tile-local) stages, reductions
  // of one row to one value.
  const std::string dir = std::string(IPUSIM_SOURCE_DIR) + "/tests/data/workloads/";
  const LoadedRun plain = load_run(dir + "bert_tiny-pod16.yaml");
  const ModelDef model = load_model(plain.run.model_file);
  const auto system = ipusim::load_system(plain.run.system_file).spec;
  const trace::Trace t = compile(model, plain.run, system);
  EXPECT_EQ(update_executions(t.ipus[1], "reduce_chan_1", "/local"), 2u * 12);
  EXPECT_EQ(update_executions(t.ipus[0], "reduce_chan_1", "/local"), 2u * 23);
  EXPECT_EQ(update_executions(t.ipus[1], "square"), 0u);
  // Each LAMB update (div, mul, sub; one fused chain, as bert_tiny fuses elementwise ops) runs
  // once per tensor.
  EXPECT_EQ(update_executions(t.ipus[1], "map_div_mul_sub"), 12u);
  const LoadedRun clip =
      load_run(dir + "bert_tiny-pod16.yaml", {"run.gradient_clipping=global_norm"});
  const trace::Trace c = compile(model, clip.run, system);
  EXPECT_EQ(update_executions(c.ipus[1], "reduce_chan_1", "/local"), 3u * 12);
}

TEST(CompilerPipeline, LarsAdaptsATransformersMatricesAndSkipsItsBiasesAndNorms) {
  // The weight update is one pass (optimiser.hpp), so LARS runs on a transformer too: two
  // norms and the trust-ratio update of each matrix, the plain momentum of each bias and norm
  // vector (TensorFlow's LARS skip list). bert_tiny's IPU 1: the QKV, output and two FFN
  // matrices (4) and 8 vectors; IPU 0 also the 2 embedding-table slices, the position and
  // token-type tables and the heads' dense weight (9 matrices), the embeddings' layer-norm
  // gamma and beta and the heads' 4 vectors (14).
  const std::string dir = std::string(IPUSIM_SOURCE_DIR) + "/tests/data/workloads/";
  const LoadedRun lars = load_run(dir + "bert_tiny-pod16.yaml", {"run.optimiser=lars"});
  const trace::Trace t = compile(load_model(lars.run.model_file), lars.run,
                                 ipusim::load_system(lars.run.system_file).spec);
  EXPECT_EQ(update_executions(t.ipus[1], "reduce_chan_1", "/local"), 2u * 4);
  EXPECT_EQ(update_executions(t.ipus[1], "map_mul_add_mul_mul_add_sub"), 4u);
  EXPECT_EQ(update_executions(t.ipus[1], "map_mul_mul_add_sub"), 8u);
  EXPECT_EQ(update_executions(t.ipus[0], "reduce_chan_1", "/local"), 2u * 9);
  EXPECT_EQ(update_executions(t.ipus[0], "map_mul_add_mul_mul_add_sub"), 9u);
  EXPECT_EQ(update_executions(t.ipus[0], "map_mul_mul_add_sub"), 14u);
}

TEST(CompilerVit, ImageModelErrorsNameTheKey) {
  const std::string file = ::testing::TempDir() + "/bad_vit.yaml";
  const std::string base =
      "model:\n  name: v\n  family: transformer\n  layers: 2\n  hidden: 64\n  heads: 4\n"
      "  ffn: 256\n  norm: pre\n";
  const auto error_of = [&](const std::string& extra) {
    std::ofstream(file) << base << extra;
    try {
      load_model(file);
    } catch (const ipusim::ConfigError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const std::string image = "  input: {height: 32, width: 32, channels: 3}\n  classes: 10\n";
  EXPECT_NE(error_of("  head: classifier\n  patch: 5\n" + image)
                .find("layer 'patch_embedding': model.patch (5) must divide the image (32x32)"),
            std::string::npos);
  EXPECT_NE(error_of("  head: classifier\n  patch: 8\n  sequence: 16\n" + image)
                .find("model.sequence: 4x4 patches of a 32x32 image and the class token make 17 "
                      "tokens, found 16"),
            std::string::npos);
  EXPECT_NE(error_of("  head: classifier\n  patch: 8\n  vocabulary: 100\n" + image)
                .find("model.vocabulary: a classifier reads image patches, not tokens"),
            std::string::npos);
  EXPECT_NE(error_of("  head: lm\n  vocabulary: 100\n  sequence: 16\n  patch: 8\n")
                .find("model.patch: only an image classifier reads images (add head: classifier)"),
            std::string::npos);
  EXPECT_NE(error_of("  head: classifier\n  patch: 8\n  classes: 10\n")
                .find("model.input: missing required key"),
            std::string::npos);
  EXPECT_NE(error_of("  head: clasifier\n").find("(did you mean 'classifier'?)"), std::string::npos)
      << error_of("  head: clasifier\n");
  EXPECT_EQ(error_of("  head: classifier\n  patch: 8\n" + image), "");
}

TEST(CompilerCnn, EfficientNetsHaveTheirPublishedParameterCounts) {
  // The published counts (the reference implementations' 5,288,548 and 19,341,616). By hand,
  // B0's first block (32 -> 16 channels, expansion 1, 3x3): depthwise 3 x 3 x 32 = 288, its
  // batch norm 64, squeeze-and-excitation 32 x 8 + 8 and 8 x 32 + 32, projection 32 x 16 =
  // 512 and its batch norm 32: 1,448.
  const std::string models = std::string(IPUSIM_SOURCE_DIR) + "/models/";
  const ModelDef b0 = load_model(models + "efficientnet_b0.yaml");
  EXPECT_EQ(parameter_count(b0), 5288548u);
  EXPECT_EQ(parameter_count(load_model(models + "efficientnet_b4.yaml")), 19341616u);
  // The stem (3 x 3 x 3 x 32 + BN 64), the first block and nothing else.
  const std::string file = ::testing::TempDir() + "/b0_first_block.yaml";
  std::ofstream f(file);
  f << "model:\n  name: m\n  family: cnn\n  input: {height: 224, width: 224, channels: 3}\n"
       "  classes: 16\nlayers:\n";
  for (std::size_t i = 0; i < 14; ++i) {  // stem (3) and block s1/0 (11 layers)
    const Layer& l = b0.layers[i];
    f << "  - {name: " << l.name << ", op: " << graph::name(l.op);
    if (l.op == graph::Op::kConv || l.op == graph::Op::kFc) f << ", out: " << l.out;
    if (l.kernel != 1) f << ", kernel: " << l.kernel;
    if (l.stride != 1) f << ", stride: " << l.stride;
    if (!l.other.empty()) f << ", input: " << l.input << ", other: " << l.other;
    f << "}\n";
  }
  f.close();
  EXPECT_EQ(b0.layers[13].name, "s1/0/project_bn");
  EXPECT_EQ(parameter_count(load_model(file)), 3u * 3 * 3 * 32 + 64 + 1448);
}

TEST(Planner, DepthwiseConvsCombineGroupsToFillTheAmpGrain) {
  // poplar-compiler.md §1.2 step 7: 1 or 2 input channels per group are packed F to a group,
  // F a power of two up to 16 / Ci (half) or 8 / Ci (float) that divides the groups.
  const ChipSpec chip = ipusim::testing::gc200_by_hand();
  plan::ConvArgs a;
  a.batch = 4;
  a.height = a.width = 14;
  a.kernel = 3;
  a.in_chans = a.out_chans = 1;
  a.groups = 96;
  a.channel_groups = true;
  plan::ConvArgs c = plan::combine_conv_groups(chip, a);
  EXPECT_EQ(c.groups, 6u);
  EXPECT_EQ(c.in_chans, 16u);
  EXPECT_EQ(c.out_chans, 16u);
  a.groups = 24;  // 16 does not divide 24: 8 groups are combined
  c = plan::combine_conv_groups(chip, a);
  EXPECT_EQ(c.groups, 3u);
  EXPECT_EQ(c.in_chans, 8u);
  a.in_chans = a.out_chans = 2;  // 2 channels per group: 8 groups of 2 fill 16
  a.groups = 96;
  c = plan::combine_conv_groups(chip, a);
  EXPECT_EQ(c.groups, 12u);
  EXPECT_EQ(c.in_chans, 16u);
  a.dtype = trace::DType::kFloat;  // float: a grain of 8
  c = plan::combine_conv_groups(chip, a);
  EXPECT_EQ(c.groups, 24u);
  EXPECT_EQ(c.in_chans, 8u);
  a.dtype = trace::DType::kHalf;
  a.in_chans = 4;  // more than 2 channels per group: unchanged
  EXPECT_EQ(plan::combine_conv_groups(chip, a).groups, 96u);
  a.in_chans = 1;
  a.channel_groups = false;  // a grouped matmul (attention heads): unchanged
  EXPECT_EQ(plan::combine_conv_groups(chip, a).groups, 96u);
}

TEST(CompilerCnn, GroupedAndDepthwiseConvsDoTheirCombinedMacs) {
  // The reduced EfficientNet in inference: the AMP and SLIC vertices do each conv's and fc's
  // MACs. The depthwise conv runs on poplin's SLIC vertex (groups of 16 one-channel conv
  // groups, its own MACs), which its planner finds cheaper than the AMP on 16 groups combined
  // into one with block-diagonal 16 x 16 weights (16 x its own MACs); the group-size-4 conv's
  // 4 channels per group are padded, not combined (its own MACs). The stem's 3 channels run on
  // the HMAC vertex (dot products on the vector datapath, no AMP): its plans on either vertex pad
  // them and pay poplin's rearrangement for it, which the HMAC plan, on more tiles, shares more
  // thinly.
  const std::string dir = std::string(IPUSIM_SOURCE_DIR) + "/tests/data/workloads/";
  const LoadedRun run = load_run(dir + "effnet_tiny-pod16.yaml",
                                 {"run.mode=inference", "run.gradient_accumulation=1",
                                  "run.optimiser=none", "run.recompute_checkpoints=none"});
  const ModelDef model = load_model(run.run.model_file);
  const auto system = ipusim::load_system(run.run.system_file);
  const trace::Trace t = compile(model, run.run, system.spec);
  const std::uint64_t n = run.run.micro_batch, field = 16 * 16;  // 32 x 32 / stride 2
  const std::uint64_t macs = n * field * 16 * 64                 // expand
                             + n * field * 64 * 9                // depthwise, on SLIC
                             + n * (64 * 4 + 4 * 64)             // squeeze-and-excitation
                             + n * field * 64 * 16               // project
                             + n * field * 4 * (4 * 4 * 9)       // 4 groups of 4 -> 4, 3 x 3
                             + n * field * 16 * 32               // head
                             + n * 32 * 10;                      // fc
  EXPECT_EQ(step_amp_flops(system.spec.chip, t.ipus[0]), 2 * macs);
}

TEST(CompilerCnn, GroupAndScaleShapeErrorsNameTheLayer) {
  const std::string file = ::testing::TempDir() + "/bad_groups.yaml";
  const auto error_of = [&](const std::string& layers) {
    std::ofstream(file) << "model:\n  name: m\n  family: cnn\n"
                           "  input: {height: 8, width: 8, channels: 12}\n  classes: 10\nlayers:\n"
                        << layers;
    try {
      const ModelDef m = load_model(file);
      parameter_count(m);
    } catch (const ipusim::ConfigError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error_of("  - {name: c, op: conv, out: 16, group_size: 5}\n")
                .find("bad_groups.yaml:7:5: layer 'c': group_size 5 must divide the 12 input "
                      "channels"),
            std::string::npos);
  EXPECT_NE(error_of("  - {name: c, op: conv, out: 10, group_size: 4}\n")
                .find("the groups (3) the 10 output channels"),
            std::string::npos);
  EXPECT_NE(error_of("  - {name: p, op: avgpool}\n  - {name: f, op: fc, out: 6}\n"
                     "  - {name: d, op: dwconv, input: p}\n  - {name: s, op: scale, other: f}\n")
                .find("layer 's': scale multiplies each of the 12 channels of 'd' by a factor: "
                      "'f' must be 1x1x12, found 1x1x6"),
            std::string::npos);
  EXPECT_NE(error_of("  - {name: s, op: scale}\n")
                .find("a scale needs 'other' (the per-channel factors)"),
            std::string::npos);
  EXPECT_NE(error_of("  - {name: r, op: relu, group_size: 2}\n")
                .find("group_size: only a conv or dwconv has groups"),
            std::string::npos);
  EXPECT_NE(error_of("  - {name: d, op: dwconvv}\n").find("(did you mean 'dwconv'?)"),
            std::string::npos);
}

// The output of a joint plan's data gradient (TileOrder::kInputOuter): a swapped product of
// K = 96 rows in 3 blocks of 32 by 16 output channels (the forward's rows), its input channels in
// 2 blocks reduce-scattered. Chunk k of row block r is on tile plan_tile(r, k) = (k x 3 + r):
// as a layout, 32 positions by 8 channels a block, channel block outermost, so block (r, k) is
// on tile k x 3 + r. The layout returned is its transposed view (the pass's output, 16 x 96).
TEST(CompilerLayout, AnInputOuterPlansOutputFollowsItsTileOrder) {
  const ChipSpec chip = testing::gc200_by_hand();
  plan::ConvArgs a;
  a.height = 16;  // the data gradient dA = dC B^T: 16 x 96, reading 64 channels of dC
  a.in_chans = 64;
  a.out_chans = 96;
  a.matmul = true;
  plan::ConvPlan p;
  p.swapped = p.joint = true;
  p.order = plan::TileOrder::kInputOuter;
  p.row_split = 3;
  p.rows_per_tile = 32;
  p.in_split = 2;
  p.in_per_tile = 32;
  p.out_per_tile = 16;
  const Layout out = transposed_view(conv_output_layout(chip, a, p));
  EXPECT_EQ(out.positions, 96u);
  EXPECT_EQ(out.channels, 16u);
  EXPECT_EQ(out.positions_per_tile, 32u);
  EXPECT_EQ(out.chans_per_tile, 8u);
  for (std::uint32_t r = 0; r < 3; ++r)
    for (std::uint32_t k = 0; k < 2; ++k) {
      EXPECT_EQ(out.tile(r, k), k * 3 + r);
      EXPECT_EQ(out.tile(r, k), plan::plan_tile(p, 0, r, k, 0));
    }
  p.out_split = 2;  // not a joint plan's: rejected
  EXPECT_THROW(conv_output_layout(chip, a, p), ModelError);
}

}  // namespace
}  // namespace ipusim::compiler
