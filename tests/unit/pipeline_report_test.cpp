// SPDX-License-Identifier: Apache-2.0
// The pipeline analysis of the run summary (report/pipeline.hpp), on layer rows written by
// hand: stage work per micro-batch and the waiting of PopART's schedule, derived by hand.
#include <gtest/gtest.h>

#include "ipusim/report/pipeline.hpp"
#include "ipusim/report/run_files.hpp"

namespace ipusim::report {
namespace {

LayerRow row(std::uint32_t ipu, std::string layer, std::string pass, std::uint64_t compute,
             std::uint64_t waiting = 0) {
  LayerRow r;
  r.ipu = ipu;
  r.layer = std::move(layer);
  r.pass = std::move(pass);
  r.cycles[PhaseKind::kCompute] = compute;
  r.cycles[PhaseKind::kWaiting] = waiting;
  return r;
}

RunStats two_ipus(std::uint64_t waiting0, std::uint64_t waiting1) {
  RunStats s;
  for (const std::uint32_t i : {0u, 1u}) {
    IpuRunStats& ipu = s.ipus.emplace_back();
    ipu.ipu = i;
    ipu.phases[PhaseKind::kWaiting] = i == 0 ? waiting0 : waiting1;
  }
  return s;
}

TEST(PipelineReport, StageWorkAndTheScheduleWaitingByHand) {
  // Two stages, 4 micro-batches: stage 0 on IPU 0 forward 1 + backward 2 cycles per
  // micro-batch, stage 1 (the loss) on IPU 1 forward 1 + backward 3. L = 1, 6 cycles: stage 0's
  // forward in cycles 0-3, its backward in 2-5; stage 1's both in 1-4. Cycle by cycle the
  // IPUs' work is (1, 0), (1, 4), (3, 4), (3, 4), (2, 4), (2, 0), each cycle as long as its
  // larger. Steady cycles (both stages in both passes) are 2-3: IPU 0 waits 1 in each (unequal
  // stages 2); in the others IPU 0 waits 0 + 3 + 2 + 0 = 5, IPU 1 1 + 0 + 0 + 2 = 3.
  RunInfo info;
  info.meta = {{"pipeline.micro_batches", "4"}, {"pipeline.stage_ipus", "0:1"}};
  info.layers = {row(0, "a", "forward", 4),         row(0, "a", "data_gradient", 6),
                 row(0, "a", "weight_gradient", 2), row(1, "b", "forward", 4),
                 row(1, "b", "recompute", 4),       row(1, "b", "data_gradient", 8),
                 row(0, "", "pipeline_copy", 0, 7), row(1, "", "pipeline_copy", 0, 3),
                 row(0, "", "weight_update", 9, 5)};
  const auto p = pipeline_analysis(two_ipus(12, 3), info);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->cycles, 6u);
  ASSERT_EQ(p->stages.size(), 2u);
  EXPECT_DOUBLE_EQ(p->stages[0].forward, 1);
  EXPECT_DOUBLE_EQ(p->stages[0].backward, 2);
  EXPECT_DOUBLE_EQ(p->stages[1].forward, 1);
  EXPECT_DOUBLE_EQ(p->stages[1].backward, 3);
  EXPECT_EQ(p->slowest, 1u);
  ASSERT_EQ(p->waiting.size(), 2u);
  EXPECT_DOUBLE_EQ(p->waiting[0].fill_and_drain, 5);
  EXPECT_DOUBLE_EQ(p->waiting[0].unequal_stages, 2);
  EXPECT_DOUBLE_EQ(p->waiting[1].fill_and_drain, 3);
  EXPECT_DOUBLE_EQ(p->waiting[1].unequal_stages, 0);
  // Simulated waiting: at the copies (in the pipeline), and after it (the weight update).
  EXPECT_EQ(p->waiting[0].simulated, 12u);
  EXPECT_EQ(p->waiting[0].in_pipeline, 7u);
  const std::string text = pipeline_text(*p, 0);
  EXPECT_NE(text.find("2 stages, 4 micro-batches in 6 cycles"), std::string::npos) << text;
  EXPECT_NE(text.find("stage 1 on ipu1: forward 1.00 + backward 3.00 = 4.00; the slowest"),
            std::string::npos)
      << text;
}

TEST(PipelineReport, ALaterStageOfAnIpuTakesTheLayersTheTraceListsAndTheSlowestSaysWhy) {
  // Three stages on two IPUs, the last (a head) back on IPU 0: its layer "head" is listed;
  // IPU 0's other rows are stage 0's. 2 micro-batches.
  RunInfo info;
  info.meta = {{"pipeline.micro_batches", "2"},
               {"pipeline.stage_ipus", "0:1:0"},
               {"pipeline.stage_layer.0", "2:head"}};
  info.layers = {row(0, "embedding", "forward", 2), row(0, "head", "forward", 10),
                 row(0, "head", "data_gradient", 20), row(1, "layer1", "forward", 6),
                 row(1, "layer1", "data_gradient", 12)};
  const auto p = pipeline_analysis(two_ipus(0, 0), info);
  ASSERT_TRUE(p.has_value());
  ASSERT_EQ(p->stages.size(), 3u);
  EXPECT_DOUBLE_EQ(p->stages[0].total(), 1);
  EXPECT_DOUBLE_EQ(p->stages[1].total(), 9);
  EXPECT_DOUBLE_EQ(p->stages[2].forward, 5);
  EXPECT_DOUBLE_EQ(p->stages[2].backward, 10);
  // The slowest (stage 2, 15 cycles) against the median of the others (stages 0 and 1:
  // stage 1): its head layer is all excess.
  EXPECT_EQ(p->slowest, 2u);
  EXPECT_EQ(p->reference, 1u);
  ASSERT_FALSE(p->slowest_excess.empty());
  EXPECT_EQ(p->slowest_excess.front().first, "head");
  EXPECT_DOUBLE_EQ(p->slowest_excess.front().second, 15);
}

TEST(PipelineReport, MalformedPipelineMetaOfAHandEditedTraceGivesNoAnalysis) {
  RunInfo info;
  info.layers = {row(0, "a", "forward", 4), row(1, "b", "forward", 4)};
  for (const auto& [ga, ipus] :
       {std::pair{"4", "0:x"}, std::pair{"x", "0:1"}, std::pair{"0", "0:1"},
        std::pair{"99999999999", "0:1"}, std::pair{"4", "0:-1"}}) {
    info.meta = {{"pipeline.micro_batches", ga},
                 {"pipeline.stage_ipus", ipus},
                 {"pipeline.stage_layer.0", "z:b"}};
    EXPECT_FALSE(pipeline_analysis(two_ipus(0, 0), info).has_value()) << ga << " " << ipus;
  }
  // A malformed stage_layer entry alone is skipped.
  info.meta = {{"pipeline.micro_batches", "4"},
               {"pipeline.stage_ipus", "0:1"},
               {"pipeline.stage_layer.0", "z:b"}};
  EXPECT_TRUE(pipeline_analysis(two_ipus(0, 0), info).has_value());
}

TEST(PipelineReport, NoPipelineNoAnalysis) {
  RunInfo info;
  info.layers = {row(0, "a", "forward", 4)};
  EXPECT_FALSE(pipeline_analysis(two_ipus(0, 0), info).has_value());
  info.meta = {{"pipeline.micro_batches", "4"}, {"pipeline.stage_ipus", "0:1"}};
  info.layers.clear();  // (no layer rows computed)
  EXPECT_FALSE(pipeline_analysis(two_ipus(0, 0), info).has_value());
}

}  // namespace
}  // namespace ipusim::report
