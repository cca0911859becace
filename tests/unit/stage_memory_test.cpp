// SPDX-License-Identifier: Apache-2.0
// The transformer stage's memory-accounting pass (src/compiler/memory.cpp): no SystemC, no chip.
#include <gtest/gtest.h>

#include "compiler/memory.hpp"

namespace ipusim::compiler {
namespace {

Layout layout_of(std::uint64_t positions, std::uint64_t channels) {
  Layout l;
  l.positions = positions;
  l.channels = channels;
  l.positions_per_tile = 1;
  l.chans_per_tile = channels;
  return l;
}

// IPU 1 of a 4-stage pipeline, two weight tensors, LAMB's two moments kept on chip: 2 x 3 + 1 =
// 7 micro-batches of stage inputs stashed (it is 3 stages from the end), no input buffer.
TEST(StageMemory, AMiddleStageKeepsItsWeightsStateAndSevenStashedInputs) {
  StageMemory s;
  s.parameters = {{"attention/0", layout_of(16, 64), 1}, {"ffn/0", layout_of(16, 256), 2}};
  s.stages_to_end = 3;
  s.stage_input_bytes = 1000;
  s.live_bytes = 5000;
  s.moments = 2;
  s.loop_live = {0, 41};
  const auto held = stage_training_memory(s);
  std::vector<std::string> names;
  for (const auto& h : held) names.push_back(h.name);
  EXPECT_EQ(names, (std::vector<std::string>{
                       "weights/attention/0", "gradient_accumulator/attention/0",
                       "optimiser_state/attention/0", "weights/ffn/0", "gradient_accumulator/ffn/0",
                       "optimiser_state/ffn/0", "stashed_activations", "live_activations"}));
  EXPECT_EQ(held[5].copies, 4u);  // two moments of two copies
  EXPECT_EQ(held[5].layout, layout_of(16, 256));
  EXPECT_EQ(held[6].bytes, 7000u);
  EXPECT_EQ(held[6].live, (trace::Lifetime{0, 41}));
  EXPECT_EQ(held[7].bytes, 5000u);
  EXPECT_FALSE(held[0].live);  // weights live throughout
}

// The first IPU stashes one micro-batch and holds the input buffer; a sharded state is one
// tensor spread over the tiles; a streamed state is not held at all.
TEST(StageMemory, TheFirstStageShardedAndStreamedState) {
  StageMemory s;
  s.parameters = {{"embedding", layout_of(30522, 64), 1}};
  s.stage_input_bytes = 1000;
  s.input_bytes = 256;
  s.sharded = true;
  s.sharded_state_bytes = 777;
  auto held = stage_training_memory(s);
  ASSERT_EQ(held.size(), 6u);
  EXPECT_EQ(held[2].name, "optimiser_state");
  EXPECT_FALSE(held[2].layout);
  EXPECT_EQ(held[2].bytes, 777u);
  EXPECT_EQ(held[3].bytes, 1000u);  // 2 x 0 + 1 stashed
  EXPECT_EQ(held[5].name, "input_buffer");
  EXPECT_EQ(held[5].dtype, trace::DType::kChar);
  s.streaming = true;
  held = stage_training_memory(s);
  for (const auto& h : held) EXPECT_EQ(h.name.find("optimiser_state"), std::string::npos);
}

}  // namespace
}  // namespace ipusim::compiler
