// SPDX-License-Identifier: Apache-2.0
// Text generation (run.kv_cache, run.prompt_tokens, run.new_tokens; docs/workloads.md "Text
// generation"): a decoding step's KV cache counted by hand on the reduced GPT
// (tests/data/workloads/gpt_tiny.yaml: 2 layers, hidden 256, 4 heads of 64 channels, 128
// positions), and the report's times from a step by hand. No SystemC.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "compile_helpers.hpp"
#include "ipusim/compiler/compiler.hpp"
#include "ipusim/compiler/graph/build.hpp"
#include "ipusim/config/system.hpp"
#include "ipusim/cost/program_costs.hpp"
#include "ipusim/report/report.hpp"

namespace ipusim::compiler {
namespace {

using trace::StepKind;

const std::string kDir = std::string(IPUSIM_SOURCE_DIR) + "/tests/data/workloads/";

trace::Trace decode(const std::string& cache) {
  return ipusim::testing::compile_run(
      kDir + "gpt_tiny-pod16.yaml",
      {"run.mode=inference", "run.gradient_accumulation=1", "run.optimiser=none",
       "run.ipus_per_replica=1", "run.replicas=16", "run.pipeline_placement=ipu0=2,2",
       "run.kv_cache=" + cache, "run.prompt_tokens=8", "run.new_tokens=4"});
}

TEST(Generation, ADecodingStepAttendsOneTokenToTheWholeCache) {
  // One token a sequence: the scores of 2 sequences x 4 heads are 1 x 128 (every cached
  // position), the model's 128-token graph's 128 x 128.
  const ModelDef m = load_model(kDir + "gpt_tiny.yaml");
  graph::BuildOptions o;
  o.batch = 2;
  o.training = false;
  o.decode = true;
  const graph::TensorGraph g = graph::build_graph(m, o);
  std::size_t softmaxes = 0;
  for (const graph::Node& n : g.nodes())
    if (n.op == graph::Primitive::kSoftmax) {
      ++softmaxes;
      EXPECT_EQ(g.tensor(n.inputs[0]).dims, (graph::Dims{2, 4, 1, 128}));
    }
  EXPECT_EQ(softmaxes, 2u);
}

TEST(Generation, AStreamedKvCacheIsLoadedAndStoredAroundEachAttention) {
  // A layer's cache: keys and values, 2 sequences x 4 heads x 128 positions x 64 channels, half:
  // 2 x 2 x 4 x 128 x 64 x 2 B = 262,144 B, loaded before each of the 2 attentions and stored
  // after, spread over the tiles (whole bytes a tile, rounded up).
  const std::uint64_t layer = 2ull * 2 * 4 * 128 * 64 * 2;
  ASSERT_EQ(layer, 262144u);
  const trace::Trace t = decode("streaming");
  std::vector<std::uint64_t> in, out;
  const auto walk = [&](const auto& self, const std::vector<trace::Step>& steps) -> void {
    for (const trace::Step& s : steps) {
      if (s.kind == StepKind::kRepeat) self(self, s.body);
      if (s.kind != StepKind::kHost || s.memory != trace::HostMemory::kStreaming ||
          s.provenance.layers.empty() || !s.provenance.layers[0].ends_with("/attention"))
        continue;
      (s.direction == trace::HostDirection::kToIpu ? in : out).push_back(s.bytes * s.tiles.size());
    }
  };
  walk(walk, t.ipus[0].steps);
  const std::uint64_t tiles = 1472;  // the GC200s of the POD16
  const std::uint64_t spread = (layer + tiles - 1) / tiles * tiles;
  EXPECT_EQ(in, (std::vector<std::uint64_t>{spread, spread}));
  EXPECT_EQ(out, (std::vector<std::uint64_t>{spread, spread}));
  // On chip instead: both layers' caches held, 524,288 B, and nothing loaded.
  const trace::Trace kept = decode("on_chip");
  std::uint64_t held = 0;
  for (const auto& tensor : kept.ipus[0].tensors)
    if (tensor.name == "kv_cache") held += tensor.bytes_per_tile * tensor.tiles.size();
  EXPECT_GE(held, 2 * layer);
  EXPECT_LT(held, 2 * layer + 1472);
}

TEST(Generation, TheReportTimesTheFirstTokenAfterThePromptsSteps) {
  // With a KV cache the 8-token prompt takes 8 steps of 0.5 s: the first token at 4 s, then
  // one every 0.5 s, 4 new tokens by 5.5 s; 16 replicas x 2 sequences a step: 64 tokens/s.
  const trace::Trace t = decode("streaming");
  report::RunInfo info;
  info.meta = t.meta;
  const auto w = report::workload(info, 0.5);
  ASSERT_TRUE(w.has_value());
  ASSERT_TRUE(w->generation.has_value());
  EXPECT_EQ(w->generation->steps_to_first_token, 8u);
  EXPECT_DOUBLE_EQ(w->generation->time_to_first_token, 4.0);
  EXPECT_DOUBLE_EQ(w->generation->time_per_output_token, 0.5);
  EXPECT_DOUBLE_EQ(w->generation->total_time, 5.5);
  EXPECT_DOUBLE_EQ(w->generation->tokens_per_second, 64.0);
}

TEST(Generation, TheLargestFitIsTheEdgeOfWhatCompilesInTileMemory) {
  // The reduced GPT generating with its cache on chip on a chip of 64 KiB tiles: the largest
  // micro-batch and sequence generation_fit finds compile within tile memory, one more does not
  // (a tile-memory error), and the sequence stops at the 128 learned positions.
  const LoadedRun run = load_run(
      kDir + "gpt_tiny-pod16.yaml",
      {"run.mode=inference", "run.gradient_accumulation=1", "run.optimiser=none",
       "run.ipus_per_replica=1", "run.replicas=16", "run.pipeline_placement=ipu0=2,2",
       "run.kv_cache=on_chip", "run.prompt_tokens=8", "run.new_tokens=4", "run.micro_batch=1"});
  const ModelDef model = load_model(run.run.model_file);
  auto system = ipusim::load_system(run.run.system_file, {"chip.tile_memory=64KiB"});
  const GenerationFit fit = generation_fit(model, run.run, system.spec);
  ASSERT_GT(fit.micro_batch, 1u);
  EXPECT_EQ(fit.context, model.max_positions);
  RunConfig r = run.run;
  r.micro_batch = fit.micro_batch;
  EXPECT_NO_THROW((void)compile(model, r, system.spec));
  r.micro_batch = fit.micro_batch + 1;
  EXPECT_THROW((void)compile(model, r, system.spec), cost::TileMemoryError);
}

}  // namespace
}  // namespace ipusim::compiler
