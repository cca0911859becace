// SPDX-License-Identifier: Apache-2.0
// The pipeline schedule (src/compiler/pipeline.cpp): cycles cut into loops of the stages active
// in them, worked by hand. No SystemC.
#include "compiler/pipeline.hpp"

#include <gtest/gtest.h>

namespace ipusim::compiler {
namespace {

using trace::StepKind;

// A stage of one compute step (index = its stage number, to tell them apart).
PipelineStage stage(std::uint32_t id, std::uint64_t start, bool input = false) {
  PipelineStage s;
  s.steps.push_back(make_step(StepKind::kCompute, id));
  s.start = start;
  s.input = input;
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
  const auto input = [](Steps& out) { out.push_back(make_step(StepKind::kHost)); };
  const Steps loops = pipeline_loops({stage(0, 0, true), stage(1, 2)}, 4, 6, true, input);
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
  const Steps one = pipeline_loops({stage(0, 0, true)}, 8, 8, false, [](Steps&) {});
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].count, 8u);
  EXPECT_EQ(body(one[0]), "c0");
  // IPU 0 of a tied-head pipeline over p = 2 IPUs (L = 2): embedding in cycles 0..2, the loss
  // stage (forward and backward) in 2..4, the embedding's backward in 4..6 (GA 3, 7 cycles): cut
  // at 0, 2, 3, 4, 5, 7; in cycle 3 only the loss stage runs.
  const Steps ipu0 =
      pipeline_loops({stage(0, 0), stage(2, 2), stage(4, 4)}, 3, 7, true, [](Steps&) {});
  std::vector<std::pair<std::uint64_t, std::string>> got;
  for (const auto& l : ipu0) got.emplace_back(l.count, body(l));
  EXPECT_EQ(got, (std::vector<std::pair<std::uint64_t, std::string>>{
                     {2, "c0g"}, {1, "c0c2g"}, {1, "c2g"}, {1, "c2c4g"}, {2, "c4g"}}));
}

}  // namespace
}  // namespace ipusim::compiler
