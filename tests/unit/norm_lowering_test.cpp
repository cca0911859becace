// SPDX-License-Identifier: Apache-2.0
// Norm lowering (src/compiler/norm_lowering.cpp): popnn's batch norm and ReLU, each pass over
// the activations its own compute set, against the fused lowering that leaves the elementwise
// work pending for its neighbours. No SystemC.
#include "compiler/norm_lowering.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "compiler/ipu_builder.hpp"
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
