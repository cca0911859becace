// SPDX-License-Identifier: Apache-2.0
// The pipeline schedule (src/compiler/pipeline.cpp): cycles cut into loops of the stages active
// in them, worked by hand. No SystemC.
#include "compiler/pipeline.hpp"

#include <gtest/gtest.h>

#include <tuple>
#include <vector>

namespace ipusim::compiler {
namespace {

using trace::StepKind;

// A stage of one compute step (index = its stage number, to tell them apart), after the host
// input when it reads it.
PipelineStage stage(std::uint32_t id, std::uint64_t start, bool input = false) {
  PipelineStage s;
  if (input) s.steps.push_back(make_step(StepKind::kHost));
  s.steps.push_back(make_step(StepKind::kCompute, id));
  s.start = start;
  return s;
}

// What a loop body runs, as text: c<i> for stage i's compute, h for the input, g for the copy.
std::string body(const trace::Step& loop) {
  std::string out;
  for (const auto& s : loop.body)
    out += s.kind == StepKind::kCompute          ? "c" + std::to_string(s.index)
           : s.kind == StepKind::kHost           ? std::string("h")
           : s.kind == StepKind::kGlobalExchange ? std::string("g")
                                                 : std::string("?");
  return out;
}

TEST(PipelineSchedule, TwoStagesOfFourMicroBatchesFillRunAndFlush) {
  // Stage 0 (reads the input) in cycles 0..3, stage 1 in 2..5, over 6 cycles: cut at 0, 2, 4, 6.
  const Steps loops = pipeline_loops({stage(0, 0, true), stage(1, 2)}, 4, 6, true);
  ASSERT_EQ(loops.size(), 3u);
  EXPECT_EQ(loops[0].count, 2u);
  EXPECT_EQ(body(loops[0]), "hc0g");  // fill: stage 0 only
  EXPECT_EQ(loops[1].count, 2u);
  EXPECT_EQ(body(loops[1]), "hc0c1g");
  EXPECT_EQ(loops[2].count, 2u);
  EXPECT_EQ(body(loops[2]), "c1g");  // flush
  std::uint64_t cycles = 0;
  for (const auto& l : loops) cycles += l.count;
  EXPECT_EQ(cycles, 6u);
}

TEST(PipelineSchedule, AStepOfGradientAccumulationPlusTwiceTheLossStage) {
  EXPECT_EQ(pipeline_cycles(96, 4), 104u);  // BERT-Large POD64's 4 IPUs: L = p
  EXPECT_EQ(pipeline_cycles(8, 0), 8u);     // no pipeline
  // One IPU, no pipeline: one loop of GA cycles and no inter-IPU copy.
  const Steps one = pipeline_loops({stage(0, 0, true)}, 8, 8, false);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].count, 8u);
  EXPECT_EQ(body(one[0]), "hc0");
  // IPU 0 of a tied-head pipeline over p = 2 IPUs (L = 2): embedding in cycles 0..2, the loss
  // stage (forward and backward) in 2..4, the embedding's backward in 4..6 (GA 3, 7 cycles): cut
  // at 0, 2, 3, 4, 5, 7; in cycle 3 only the loss stage runs.
  const Steps ipu0 = pipeline_loops({stage(0, 0), stage(2, 2), stage(4, 4)}, 3, 7, true);
  std::vector<std::pair<std::uint64_t, std::string>> got;
  for (const auto& l : ipu0) got.emplace_back(l.count, body(l));
  EXPECT_EQ(got, (std::vector<std::pair<std::uint64_t, std::string>>{
                     {2, "c0g"}, {1, "c0c2g"}, {1, "c2g"}, {1, "c2c4g"}, {2, "c4g"}}));
}

// Which stages each IPU runs (ipu_stages), by hand: forward stage s on IPU stage_ipus[s],
// starting in cycle s; its backward in cycle 2L - s; the loss stage L's two as one.
TEST(PipelineSchedule, EachIpuRunsItsForwardStagesAndTheirBackwardsLossStageAsOne) {
  using Slots = std::vector<std::tuple<std::uint32_t, std::uint64_t, bool, bool>>;
  const auto slots = [](const std::vector<std::uint32_t>& ipus, std::uint32_t ipu, bool training) {
    Slots out;
    for (const auto& s : ipu_stages(ipus, ipu, training))
      out.emplace_back(s.forward_stage, s.start, s.forward, s.backward);
    return out;
  };
  // A tied-head pipeline over 3 IPUs: stages 0 (IPU 0), 1, 2, 3 (IPU 0 again, the loss: L = 3).
  const std::vector<std::uint32_t> tied{0, 1, 2, 0};
  EXPECT_EQ(slots(tied, 0, true),
            (Slots{{0, 0, true, false}, {3, 3, true, true}, {0, 6, false, true}}));
  EXPECT_EQ(slots(tied, 1, true), (Slots{{1, 1, true, false}, {1, 5, false, true}}));
  EXPECT_EQ(slots(tied, 2, true), (Slots{{2, 2, true, false}, {2, 4, false, true}}));
  // The loss on the last IPU (L = 2): its forward and backward run as one stage.
  EXPECT_EQ(slots({0, 1, 2}, 2, true), (Slots{{2, 2, true, true}}));
  // No pipeline: one stage of both; inference: forward stages only.
  EXPECT_EQ(slots({0}, 0, true), (Slots{{0, 0, true, true}}));
  EXPECT_EQ(slots(tied, 0, false), (Slots{{0, 0, true, false}, {3, 3, true, false}}));
  EXPECT_TRUE(slots(tied, 3, true).empty());  // an IPU holding no stage
}

}  // namespace
}  // namespace ipusim::compiler
