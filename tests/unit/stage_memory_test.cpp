// SPDX-License-Identifier: Apache-2.0
// The memory-accounting pass (src/compiler/memory.cpp) of an IPU's program, one stage or a
// pipeline stage: no SystemC, no chip.
#include <gtest/gtest.h>

#include "compiler/memory.hpp"

namespace ipusim::compiler {
namespace {

std::vector<std::string> names_of(const std::vector<Holding>& held) {
  std::vector<std::string> names;
  for (const auto& h : held) names.push_back(h.name);
  return names;
}

Layout layout_of(std::uint64_t positions, std::uint64_t channels) {
  Layout l;
  l.positions = positions;
  l.channels = channels;
  l.positions_per_tile = 1;
  l.chans_per_tile = channels;
  return l;
}

// A CNN with two weight tensors and one kept activation: three tensors per weight (LARS's
// momentum the third), the activation over its lifetime, the input buffer spread.
TEST(StageMemory, ACnnKeepsWeightsAccumulatorsMomentumAndItsKeptActivations) {
  TrainingMemory c;
  c.parameters = {{"conv1", layout_of(9, 64), 1}, {"bn1", layout_of(2, 64), 1}};
  c.kept = {{"activations/conv1", trace::TensorKind::kActivation, layout_of(100, 64), {3, 17}}};
  c.input_bytes = 3072;
  const auto all = training_memory(c);
  EXPECT_EQ(names_of(all),
            (std::vector<std::string>{"weights/conv1", "gradient_accumulator/conv1",
                                      "momentum/conv1", "weights/bn1", "gradient_accumulator/bn1",
                                      "momentum/bn1", "activations/conv1", "input_buffer"}));
  EXPECT_EQ(all[2].kind, trace::TensorKind::kOptimiser);
  EXPECT_EQ(all[6].live, (trace::Lifetime{3, 17}));
  EXPECT_EQ(all[7].bytes, 3072u);
  c.input_bytes = 0;  // on the I/O tiles instead (the lowering places it)
  EXPECT_EQ(training_memory(c).size(), 7u);
}

// Inference holds the resident weights (copies as given), the live activations and the input
// buffer, for either family; no buffer when there is no host input.
TEST(StageMemory, InferenceHoldsWeightsLiveActivationsAndTheInputBuffer) {
  InferenceMemory m;
  m.parameters = {{"fc", layout_of(2048, 1000), 3}};
  m.live_bytes = 4096;
  m.input_bytes = 150528;
  const auto held = inference_memory(m);
  EXPECT_EQ(names_of(held),
            (std::vector<std::string>{"weights/fc", "live_activations", "input_buffer"}));
  EXPECT_EQ(held[0].copies, 3u);
  EXPECT_EQ(held[1].bytes, 4096u);
  EXPECT_FALSE(held[1].live);
  EXPECT_EQ(held[2].bytes, 150528u);
  m.input_bytes = 0;
  EXPECT_EQ(inference_memory(m).size(), 2u);
}

// IPU 1 of a 4-stage pipeline, two weight tensors, LAMB's two moments kept on chip: 2 x 2 + 1 =
// 5 micro-batches of stage inputs stashed (its backward runs 4 cycles after its forward), no
// input buffer.
TEST(StageMemory, AMiddleStageKeepsItsWeightsStateAndFiveStashedInputs) {
  EXPECT_EQ(stash_depth(3, 1), 5u);
  EXPECT_EQ(stash_depth(3, 0), 7u);
  EXPECT_EQ(stash_depth(3, 3), 1u);  // the loss stage: its own micro-batch only
  TrainingMemory s;
  s.parameters = {{"attention/0", layout_of(16, 64), 1}, {"ffn/0", layout_of(16, 256), 2}};
  s.stashed_bytes = stash_depth(3, 1) * 1000;
  s.live_bytes = 5000;
  s.optimiser.moments = 2;
  s.loop_live = {0, 41};
  const auto held = training_memory(s);
  EXPECT_EQ(names_of(held),
            (std::vector<std::string>{"weights/attention/0", "gradient_accumulator/attention/0",
                                      "optimiser_state/attention/0", "weights/ffn/0",
                                      "gradient_accumulator/ffn/0", "optimiser_state/ffn/0",
                                      "stashed_activations", "live_activations"}));
  EXPECT_EQ(held[5].copies, 4u);  // two moments of two copies
  EXPECT_EQ(held[5].layout, layout_of(16, 256));
  EXPECT_EQ(held[6].bytes, 5000u);
  EXPECT_EQ(held[6].live, (trace::Lifetime{0, 41}));
  EXPECT_EQ(held[7].bytes, 5000u);
  EXPECT_FALSE(held[0].live);  // weights live throughout
}

// A sharded state is one tensor spread over the tiles; a streamed state is not held at all;
// the input buffer is 8-bit values.
TEST(StageMemory, TheFirstStageShardedAndStreamedState) {
  TrainingMemory s;
  s.parameters = {{"embedding", layout_of(30522, 64), 1}};
  s.stashed_bytes = 1000;
  s.live_bytes = 3000;
  s.input_bytes = 256;
  s.optimiser.moments = 2;
  s.optimiser.sharded = true;
  s.optimiser.sharded_bytes = 777;
  auto held = training_memory(s);
  ASSERT_EQ(held.size(), 6u);
  EXPECT_EQ(held[2].name, "optimiser_state");
  EXPECT_FALSE(held[2].layout);
  EXPECT_EQ(held[2].bytes, 777u);
  EXPECT_EQ(held[3].bytes, 1000u);
  EXPECT_EQ(held[5].name, "input_buffer");
  EXPECT_EQ(held[5].dtype, trace::DType::kChar);
  s.optimiser.streaming = true;
  held = training_memory(s);
  for (const auto& h : held) EXPECT_EQ(h.name.find("optimiser_state"), std::string::npos);
}

}  // namespace
}  // namespace ipusim::compiler
