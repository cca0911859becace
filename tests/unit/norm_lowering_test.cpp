// SPDX-License-Identifier: Apache-2.0
// Norm lowering (src/compiler/norm_lowering.cpp): popnn's batch norm and ReLU, each pass over
// the activations its own compute set, against the fused lowering that leaves the elementwise
// work pending for its neighbours. No SystemC.
#include "compiler/norm_lowering.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <string>

#include "compiler/ipu_builder.hpp"
#include "ipusim/compiler/compiler.hpp"
#include "ipusim/config/system.hpp"
#include "ipusim/util/error.hpp"
#include "test_chips.hpp"

namespace ipusim::compiler {
namespace {

using trace::Op;
using trace::StepKind;

std::size_t count(const Steps& steps, StepKind kind) {
  return static_cast<std::size_t>(std::count_if(
      steps.begin(), steps.end(), [&](const trace::Step& s) { return s.kind == kind; }));
}

struct Fixture {
  explicit Fixture(bool popnn, std::uint32_t group = 1) {
    run.popnn_norms = popnn;
    run.batchnorm_group = group;
  }
  trace::IpuProgram program;
  RunConfig run;
  const ChipSpec chip = testing::gc200_by_hand();  // the builder keeps a reference to it
  IpuBuilder b{chip, program, 0.6, trace::DType::kHalf, true};
  NormLowering norms{b, run};
  Value x{b.linear(trace::DType::kHalf, 4096, 64), {}, {}};
};

TEST(NormLowering, FusedBatchNormLeavesItsWhiteningPendingAndPopnnRunsEveryPass) {
  Fixture fused(false);
  Steps out;
  const Value y = fused.norms.batch_norm(out, fused.x, 64, /*statistics=*/true);
  // (x - mean) inv_std gamma + beta, for the next compute set to apply.
  EXPECT_EQ(y.pending, (std::vector<Op>{Op::kSub, Op::kMul, Op::kMul, Op::kAdd}));
  const std::size_t fused_sets = count(out, StepKind::kCompute);

  Fixture popnn(true);
  Steps popnn_out;
  const Value z = popnn.norms.batch_norm(popnn_out, popnn.x, 64, true);
  EXPECT_TRUE(z.pending.empty());
  // popnn adds five compute sets to the statistics both share: the multiplicand and addend
  // maps, the out-of-place multiply and in-place add over the activations, and inv_std turned
  // back into the variance.
  EXPECT_EQ(count(popnn_out, StepKind::kCompute), fused_sets + 5);
}

TEST(NormLowering, StatisticsAreSharedOverTheBatchNormGroupOnlyWhenComputed) {
  Fixture grouped(true, 4);
  Steps out;
  grouped.norms.batch_norm(out, grouped.x, 64, true);
  EXPECT_EQ(count(out, StepKind::kCollective), 1u);  // sum and sum of squares, all-reduced
  Steps cached;
  grouped.norms.batch_norm(cached, grouped.x, 64, /*statistics=*/false);
  EXPECT_EQ(count(cached, StepKind::kCollective), 0u);
  Fixture alone(true, 1);
  Steps solo;
  alone.norms.batch_norm(solo, alone.x, 64, true);
  EXPECT_EQ(count(solo, StepKind::kCollective), 0u);
}

TEST(NormLowering, ReluIsItsOwnComputeSetUnderPopnnAndPendingWhenFused) {
  Fixture popnn(true);
  Steps out;
  Value v = popnn.x;
  popnn.norms.relu(out, v);
  EXPECT_EQ(count(out, StepKind::kCompute), 1u);
  EXPECT_TRUE(v.pending.empty());
  Fixture fused(false);
  Steps none;
  Value w = fused.x;
  fused.norms.relu(none, w);
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(w.pending, std::vector<Op>{Op::kRelu});
  // Inference folds the statistics into a scale and shift, pending either way.
  EXPECT_EQ(popnn.norms.batch_norm_inference(popnn.x).pending,
            (std::vector<Op>{Op::kMul, Op::kAdd}));
}

}  // namespace
}  // namespace ipusim::compiler

namespace ipusim::compiler {
namespace {

// 2 samples x 64 positions by 64 channels in blocks of 32 positions x 16 channels: 4 position
// blocks by 4 channel blocks, 16 tiles.
Layout two_samples() {
  Layout l;
  l.dtype = trace::DType::kHalf;
  l.positions = 128;
  l.channels = 64;
  l.positions_per_tile = 32;
  l.chans_per_tile = 16;
  return l;
}

TEST(GroupNormView, EachSamplesGroupIsOneStatisticOverTheTilesHoldingIt) {
  // 2 groups of 32 channels: 2 x 2 = 4 statistics, each over 32 channels x 64 positions =
  // 2,048 elements. A tile's block (32 positions of one sample, 16 channels of one group) is
  // 512 elements of one statistic, so each statistic is spread over 2 x 2 = 4 tiles.
  const Layout v = group_norm_view(two_samples(), 2, 2);
  EXPECT_EQ(v.channels, 4u);
  EXPECT_EQ(v.positions, 2048u);
  EXPECT_EQ(v.positions_per_tile, 512u);
  EXPECT_EQ(v.chans_per_tile, 1u);
  EXPECT_EQ(v.channel_sharers(), 4u);
  EXPECT_EQ(v.tiles(), 16u);
  // One tile holding everything: its 4 statistics whole, 64 x 32 elements each.
  Layout one = two_samples();
  one.positions_per_tile = 128;
  one.chans_per_tile = 64;
  const Layout w = group_norm_view(one, 2, 2);
  EXPECT_EQ(w.chans_per_tile, 4u);
  EXPECT_EQ(w.positions_per_tile, 2048u);
  EXPECT_EQ(w.tiles(), 1u);
  // Blocks that straddle samples (60 positions of a 196-position sample, 106 samples) are
  // widened to 3 equal parts a sample, ceil(196 / 3) = 66 positions: 318 position blocks where
  // the layout has ceil(106 x 196 / 60) = 347, never more tiles than the layout's.
  Layout straddling;
  straddling.positions = 106 * 196;
  straddling.channels = 16;
  straddling.positions_per_tile = 60;
  straddling.chans_per_tile = 16;
  const Layout s = group_norm_view(straddling, 106, 4);
  EXPECT_EQ(s.positions_per_tile, 66u * 4);
  EXPECT_EQ(s.channel_sharers(), 3u);
  EXPECT_EQ(s.tiles(), 318u);
  EXPECT_LE(s.tiles(), straddling.tiles());
  for (const std::uint64_t ppt : {1, 7, 50, 97, 196, 300, 1000})
    for (const std::uint64_t cpt : {1, 3, 4, 8, 16}) {
      Layout l;
      l.positions = 106 * 196;
      l.channels = 16;
      l.positions_per_tile = ppt;
      l.chans_per_tile = cpt;
      EXPECT_LE(group_norm_view(l, 106, 4).tiles(), l.tiles()) << ppt << " x " << cpt;
    }
}

// The bytes of the partials exchanged by `out`'s reduction stages.
std::uint64_t stage_bytes(const trace::IpuProgram& p, const Steps& out) {
  std::uint64_t bytes = 0;
  for (const auto& s : out)
    if (s.kind == StepKind::kExchange &&
        p.exchanges[s.index].name.find("/stage") != std::string::npos)
      for (const auto& t : p.exchanges[s.index].transfers) bytes += t.bytes * t.count;
  return bytes;
}

TEST(NormLowering, GroupNormStatisticsArePerSampleAndGroupAndNeverSharedOverReplicas) {
  for (const bool popnn : {true, false}) {
    Fixture f(popnn, /*group=*/4);  // a batch-norm group does not apply to group norm
    const Value x{two_samples(), {}, {}};
    Steps out;
    f.norms.group_norm(out, x, 2, 2, /*statistics=*/true);
    EXPECT_EQ(count(out, StepKind::kCollective), 0u);
    // The first compute set reduces each tile's 512 elements of its one statistic to a sum and
    // a sum of squares (2 outputs); then 3 of each statistic's 4 tiles send their 2 float
    // partials to the first: 4 x 3 x 8 = 96 B.
    ASSERT_EQ(out.front().kind, StepKind::kCompute);
    const auto& v = f.program.compute_sets[out.front().index].vertices.front();
    EXPECT_EQ(v.codelet, trace::Codelet::kReduce);
    EXPECT_EQ(v.params[trace::slot::kReduceInputs], 512);
    EXPECT_EQ(v.params[trace::slot::kReduceOutputs], 2);
    EXPECT_EQ(stage_bytes(f.program, out), 96u);
  }
  // Cached statistics (a recomputation): no reduction.
  Fixture f(true);
  Steps cached;
  f.norms.group_norm(cached, Value{two_samples(), {}, {}}, 2, 2, /*statistics=*/false);
  EXPECT_EQ(stage_bytes(f.program, cached), 0u);
}

TEST(NormLowering, GroupNormGradientReducesPerChannelForGammaAndPerStatisticForTheInput) {
  // popnn: the parameter gradients reduce x_hat g and g per channel (16 channels a tile, 32
  // positions each: outputs 2 x 16, inputs 32), the input gradient per statistic (outputs 2,
  // inputs 512); the fused lowering the same two reductions and the rest pending.
  for (const bool popnn : {true, false}) {
    Fixture f(popnn);
    Value g{two_samples(), {}, {}};
    Steps out;
    f.norms.group_norm_gradient(out, g, 2, 64, 2, trace::DType::kHalf);
    std::vector<std::pair<std::int64_t, std::int64_t>> reductions;  // (outputs, inputs)
    for (const auto& s : out)
      if (s.kind == StepKind::kCompute)
        for (const auto& vx : f.program.compute_sets[s.index].vertices)
          if (vx.codelet == trace::Codelet::kReduce &&
              f.program.compute_sets[s.index].name.find("/local") != std::string::npos)
            reductions.emplace_back(vx.params[trace::slot::kReduceOutputs],
                                    vx.params[trace::slot::kReduceInputs]);
    EXPECT_EQ(reductions, (std::vector<std::pair<std::int64_t, std::int64_t>>{{32, 32}, {2, 512}}))
        << (popnn ? "popnn" : "fused");
    EXPECT_EQ(g.pending.empty(), popnn);
  }
}

ModelDef tiny_gn_model(const std::string& norm_groups) {
  const std::string file = ::testing::TempDir() + "/gn_tiny.yaml";
  std::ofstream(file) << "model:\n  name: gn\n  family: cnn\n"
                         "  input: {height: 8, width: 8, channels: 3}\n  classes: 10\n"
                      << norm_groups
                      << "layers:\n"
                         "  - {name: c1, op: conv, out: 32, kernel: 3}\n"
                         "  - {name: gn1, op: groupnorm}\n"
                         "  - {name: r1, op: relu}\n"
                         "  - {name: pool, op: avgpool}\n"
                         "  - {name: fc, op: fc, out: 10}\n"
                         "  - {name: loss, op: softmax_loss}\n";
  return load_model(file);
}

TEST(CompilerCnn, GroupNormLayersCountTheirScaleAndShiftAndNeedTheirGroups) {
  // conv 3 x 3 x 3 x 32 = 864, group norm gamma and beta 2 x 32 = 64, fc 32 x 10 + 10 = 330.
  EXPECT_EQ(parameter_count(tiny_gn_model("  norm_groups: 4\n")), 864u + 64 + 330);
  const auto error_of = [](const std::string& groups) -> std::string {
    try {
      parameter_count(tiny_gn_model(groups));
    } catch (const ipusim::ConfigError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(error_of("").find("model.norm_groups: missing required key: layer 'gn1' is a "
                              "groupnorm"),
            std::string::npos)
      << error_of("");
  EXPECT_NE(error_of("  norm_groups: 5\n")
                .find("layer 'gn1': groupnorm: model.norm_groups (5) must divide its 32 channels"),
            std::string::npos)
      << error_of("  norm_groups: 5\n");
  // A training step compiles with either lowering, the group norm in its forward and backward.
  const std::string dir = std::string(IPUSIM_SOURCE_DIR) + "/tests/data/workloads/";
  for (const char* lowering : {"popnn", "fused"}) {
    const LoadedRun run = load_run(dir + "resnet_tiny-pod16.yaml",
                                   {std::string("run.norm_lowering=") + lowering,
                                    "run.recompute_checkpoints=none", "run.batchnorm_group=1"});
    const auto system = ipusim::load_system(run.run.system_file);
    const trace::Trace t = compile(tiny_gn_model("  norm_groups: 4\n"), run.run, system.spec);
    std::set<trace::Pass> passes;
    for (const auto& cs : t.ipus[0].compute_sets)
      if (std::find(cs.provenance.layers.begin(), cs.provenance.layers.end(), "gn1") !=
          cs.provenance.layers.end())
        passes.insert(cs.provenance.pass);
    EXPECT_TRUE(passes.contains(trace::Pass::kForward)) << lowering;
    EXPECT_TRUE(passes.contains(trace::Pass::kDataGradient)) << lowering;
  }
}

}  // namespace
}  // namespace ipusim::compiler
