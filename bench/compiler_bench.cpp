// SPDX-License-Identifier: Apache-2.0
// The workload compiler: a whole ResNet-50 training step compiled for IPU-POD256 (what
// `ipusim run --run configs/runs/resnet50-pod256.yaml` does before simulating, issue 31's
// compile-speed target), the conv planner on layer-sized problems, and the rearrangement
// exchange between two layouts of one activation.
#include <benchmark/benchmark.h>

#include "bench_common.hpp"
#include "ipusim/compiler/compiler.hpp"
#include "ipusim/compiler/layout.hpp"
#include "ipusim/plan/conv.hpp"

namespace ipusim::bench {
namespace {

void BM_CompileResNet50Pod256(benchmark::State& state) {
  const std::string root = IPUSIM_SOURCE_DIR;
  const compiler::LoadedRun run = compiler::load_run(root + "/configs/runs/resnet50-pod256.yaml");
  const compiler::ModelDef model = compiler::load_model(run.run.model_file);
  for (auto _ : state) benchmark::DoNotOptimize(compiler::compile(model, run.run, pod("pod256")));
}
BENCHMARK(BM_CompileResNet50Pod256)->Unit(benchmark::kMillisecond);

// The forward, data-gradient and weight-gradient convs of a ResNet-50 3x3 layer (micro-batch
// 20, 14x14, 256 channels) and a 2048^3 matmul, each planned from scratch.
void BM_PlanConv(benchmark::State& state) {
  plan::ConvArgs fwd;
  fwd.batch = 20;
  fwd.in_chans = fwd.out_chans = 256;
  fwd.height = fwd.width = 14;
  fwd.kernel = 3;
  plan::ConvArgs dgrad = fwd;
  dgrad.transposed_weights = true;
  plan::ConvArgs wgrad;  // [K x (N H W)] x [(N H W) x C]
  wgrad.in_chans = 20 * 14 * 14;
  wgrad.height = 256 * 9;
  wgrad.out_chans = 256;
  wgrad.transposed_input = true;
  plan::ConvArgs mm;
  mm.in_chans = mm.height = mm.out_chans = 2048;
  for (auto _ : state)
    for (const auto& a : {fwd, dgrad, wgrad, mm})
      benchmark::DoNotOptimize(plan::plan_conv(gc200(), a));
  state.SetItemsProcessed(state.iterations() * 4);
}
BENCHMARK(BM_PlanConv)->Unit(benchmark::kMillisecond);

// A 15680 x 512 activation from blocks of 196 x 32 to blocks of 64 x 86 (one of ResNet-50's
// largest rearrangements, about 6,700 transfer records).
void BM_Rearrangement(benchmark::State& state) {
  compiler::Layout from;
  from.positions = 15680;
  from.channels = 512;
  from.positions_per_tile = 196;
  from.chans_per_tile = 32;
  compiler::Layout to = from;
  to.positions_per_tile = 64;
  to.chans_per_tile = 86;
  for (auto _ : state) benchmark::DoNotOptimize(compiler::rearrangement("r", from, to));
}
BENCHMARK(BM_Rearrangement)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace ipusim::bench
